//! An endpoint's HPA `behavior` (autoscaling/v2 `HorizontalPodAutoscalerBehavior`): the same
//! fields, defaulted and validated as the API server does (`SetDefaults_HorizontalPodAutoscaler`,
//! `validateBehavior`):
//!
//! ```yaml
//! behavior:
//!   scaleUp:                       # default: no window, Max of 4 pods or 100 % per 15 s
//!     stabilizationWindowSeconds: 60
//!     selectPolicy: Max            # Max, Min or Disabled
//!     policies:
//!     - {type: Pods, value: 2, periodSeconds: 60}
//!   scaleDown:                     # default: the controller's window (hpa.scaleDownStabilization),
//!     policies:                    # Max of 100 % per 15 s
//!     - {type: Percent, value: 50, periodSeconds: 60}
//!     tolerance: 0.05              # the HPAConfigurableTolerance field; default hpa.tolerance
//! ```

use serde::Deserialize;

use super::Millis;

/// The behavior, defaulted.
#[derive(Clone, Debug, PartialEq)]
pub struct Behavior {
    pub scale_up: Rules,
    pub scale_down: Rules,
}

/// One direction's rules.
#[derive(Clone, Debug, PartialEq)]
pub struct Rules {
    /// `stabilizationWindowSeconds`; `None` (scale-down only): the controller's
    /// `--horizontal-pod-autoscaler-downscale-stabilization` (`hpa.scaleDownStabilization`).
    pub window: Option<Millis>,
    pub select: Select,
    pub policies: Vec<Policy>,
    /// `tolerance`; `None`: the controller's (`hpa.tolerance`).
    pub tolerance: Option<f64>,
}

/// `selectPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    Max,
    Min,
    Disabled,
}

/// A scaling policy: at most `value` pods, or `value` percent of the replicas at the period's
/// start, per `period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub percent: bool,
    pub value: u32,
    pub period: Millis,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct BehaviorFile {
    scale_up: Option<RulesFile>,
    scale_down: Option<RulesFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RulesFile {
    stabilization_window_seconds: Option<i64>,
    select_policy: Option<String>,
    policies: Option<Vec<PolicyFile>>,
    tolerance: Option<Tolerance>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PolicyFile {
    #[serde(rename = "type")]
    kind: String,
    value: i64,
    period_seconds: i64,
}

/// A tolerance as a number or a quantity string (`"50m"`).
#[derive(Deserialize)]
#[serde(untagged)]
enum Tolerance {
    Number(f64),
    Quantity(String),
}

/// The defaults of `GenerateHPAScaleUpRules` / `GenerateHPAScaleDownRules`.
fn defaults(up: bool) -> Rules {
    let policy = |percent, value| Policy { percent, value, period: 15_000 };
    Rules {
        window: up.then_some(0),
        select: Select::Max,
        policies: if up { vec![policy(false, 4), policy(true, 100)] } else { vec![policy(true, 100)] },
        tolerance: None,
    }
}

/// The behavior, defaulted and checked: (field under `behavior`, message) otherwise.
pub(super) fn behavior(raw: BehaviorFile) -> Result<Behavior, (String, String)> {
    Ok(Behavior {
        scale_up: rules(raw.scale_up, true).map_err(|(f, m)| (format!("scaleUp.{f}"), m))?,
        scale_down: rules(raw.scale_down, false).map_err(|(f, m)| (format!("scaleDown.{f}"), m))?,
    })
}

fn rules(raw: Option<RulesFile>, up: bool) -> Result<Rules, (String, String)> {
    let mut out = defaults(up);
    let Some(raw) = raw else { return Ok(out) };
    if let Some(w) = raw.stabilization_window_seconds {
        if !(0..=3600).contains(&w) {
            return Err(("stabilizationWindowSeconds".into(), format!("{w}: must be within 0 and 3600")));
        }
        out.window = Some(w as Millis * 1_000);
    }
    if let Some(s) = raw.select_policy {
        out.select = match s.as_str() {
            "Max" => Select::Max,
            "Min" => Select::Min,
            "Disabled" => Select::Disabled,
            _ => {
                return Err((
                    "selectPolicy".into(),
                    format!("{s:?}: supported values: \"Disabled\", \"Max\", \"Min\""),
                ));
            }
        };
    }
    if let Some(list) = raw.policies.filter(|l| !l.is_empty()) {
        out.policies = list.iter().enumerate().map(|(i, p)| policy(i, p)).collect::<Result<_, _>>()?;
    }
    if let Some(t) = raw.tolerance {
        let value = match t {
            Tolerance::Number(n) => n,
            Tolerance::Quantity(q) => muster_api::quantity::parse(&q)
                .map(|v| v.nanos() as f64 / 1e9)
                .map_err(|e| ("tolerance".to_string(), format!("{q:?} is not a quantity ({e})")))?,
        };
        if !(value.is_finite() && value >= 0.0) {
            return Err(("tolerance".into(), format!("{value}: must be greater than or equal to 0")));
        }
        out.tolerance = Some(value);
    }
    Ok(out)
}

fn policy(i: usize, p: &PolicyFile) -> Result<Policy, (String, String)> {
    let at = |f: &str| format!("policies[{i}].{f}");
    let percent = match p.kind.as_str() {
        "Pods" => false,
        "Percent" => true,
        k => return Err((at("type"), format!("{k:?}: supported values: \"Percent\", \"Pods\""))),
    };
    if p.value <= 0 || p.value > i64::from(i32::MAX) {
        return Err((at("value"), format!("{}: must be greater than zero", p.value)));
    }
    if !(1..=1800).contains(&p.period_seconds) {
        return Err((at("periodSeconds"), format!("{}: must be within 1 and 1800", p.period_seconds)));
    }
    Ok(Policy { percent, value: p.value as u32, period: p.period_seconds as Millis * 1_000 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Behavior, (String, String)> {
        behavior(serde_saphyr::from_str(yaml).unwrap())
    }

    #[test]
    fn an_empty_behavior_takes_the_api_servers_defaults() {
        let b = parse("{}").unwrap();
        assert_eq!(b.scale_up, defaults(true));
        assert_eq!(b.scale_down.window, None, "the controller's window");
        assert_eq!(b.scale_down.policies, vec![Policy { percent: true, value: 100, period: 15_000 }]);
        let b = parse("scaleUp: {policies: []}\nscaleDown: {selectPolicy: Disabled}").unwrap();
        assert_eq!(b.scale_up.policies.len(), 2, "an empty list is defaulted");
        assert_eq!(b.scale_down.select, Select::Disabled);
    }

    #[test]
    fn fields_are_checked_as_the_api_server_does() {
        let e = |y: &str| parse(y).unwrap_err();
        assert_eq!(e("scaleUp: {stabilizationWindowSeconds: 3601}").0, "scaleUp.stabilizationWindowSeconds");
        assert_eq!(e("scaleDown: {selectPolicy: max}").0, "scaleDown.selectPolicy");
        let p = "scaleDown: {policies: [{type: Pods, value: 0, periodSeconds: 15}]}";
        assert_eq!(e(p).0, "scaleDown.policies[0].value");
        let p = "scaleDown: {policies: [{type: Percent, value: 10, periodSeconds: 1801}]}";
        assert_eq!(e(p).0, "scaleDown.policies[0].periodSeconds");
        assert_eq!(e("scaleUp: {policies: [{type: pods, value: 1, periodSeconds: 15}]}").0, "scaleUp.policies[0].type");
        assert_eq!(e("scaleUp: {tolerance: -1}").0, "scaleUp.tolerance");
        assert_eq!(parse("scaleUp: {tolerance: \"50m\"}").unwrap().scale_up.tolerance, Some(0.05));
    }
}
