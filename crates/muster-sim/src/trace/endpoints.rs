//! Inference endpoints in a trace: a Deployment of GPU replicas that a HorizontalPodAutoscaler
//! scales on an External metric (requests per second, say) the trace gives over time, down to
//! zero replicas when `minReplicas` is 0 (the alpha `HPAScaleToZero` gate), and the HPA's
//! settings.
//!
//! ```yaml
//! endpoints:
//! - name: llm-serve          # replicas are <name>-r<i>, claims <name>-r<i>-gpus
//!   gpusPerPod: 1
//!   minReplicas: 0           # default 1; 0 scales to zero
//!   maxReplicas: 4
//!   target: 10               # the metric's target average value per replica
//!   coldStart: 2m            # image pull and model load, from binding until the replica serves;
//!                            # or {min: 1m, max: 4m}: each replica's drawn uniformly (--seed)
//!   load:                    # the metric: a value from each time on
//!   - {at: 0s, value: 0}
//!   - {at: 1h, value: 35}
//!   class: serving           # default "serving"; namespace, deviceClass, priority, cpu, memory
//!   behavior: {...}          # the HPA's autoscaling/v2 behavior (see `behavior`); default none
//! hpa:                       # kube-controller-manager's defaults
//!   syncPeriod: 15s          # --horizontal-pod-autoscaler-sync-period
//!   scaleDownStabilization: 5m
//!   tolerance: 0.1
//! ```

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{Duration, Millis, TraceError, dns_label};

/// An inference endpoint: a Deployment and its HPA.
#[derive(Clone, Debug, PartialEq)]
pub struct Endpoint {
    pub name: String,
    pub namespace: String,
    pub class: String,
    pub gpus_per_pod: u32,
    pub device_class: Option<String>,
    pub priority: Option<i32>,
    pub cpu: Option<String>,
    pub memory: Option<String>,
    pub min_replicas: u32,
    pub max_replicas: u32,
    /// The metric's target average value per replica (> 0).
    pub target: f64,
    /// From a replica's binding until it serves: at least `cold_start`, at most `cold_start_max`
    /// (each replica's drawn uniformly from the run's seed, [`Endpoint::cold_start_for`]).
    pub cold_start: Millis,
    pub cold_start_max: Millis,
    /// The metric: `(from, value)`, by strictly increasing time; 0 before the first.
    pub load: Vec<(Millis, f64)>,
    /// The HPA's `behavior`, defaulted; `None`: the controller's rules without one.
    pub behavior: Option<super::behavior::Behavior>,
}

impl Endpoint {
    /// The cold start of replica `index` under `seed`: the same for the same three, always.
    pub fn cold_start_for(&self, seed: u64, index: u32) -> Millis {
        let span = self.cold_start_max - self.cold_start;
        if span == 0 {
            return self.cold_start;
        }
        let name = muster_sched::cluster::stable_hash(&[&self.namespace, &self.name]);
        self.cold_start + splitmix64(seed ^ name ^ u64::from(index)) % (span + 1)
    }

    /// The metric's value at `t`.
    pub fn load_at(&self, t: Millis) -> f64 {
        let i = self.load.partition_point(|(at, _)| *at <= t);
        if i == 0 { 0.0 } else { self.load[i - 1].1 }
    }
}

/// One step of SplitMix64: a well-mixed 64-bit value from any seed.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The HorizontalPodAutoscaler controller's settings (kube-controller-manager flags and the
/// default `behavior`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hpa {
    pub sync_period: Millis,
    pub scale_down_stabilization: Millis,
    pub tolerance: f64,
}

impl Default for Hpa {
    fn default() -> Self {
        Hpa { sync_period: 15_000, scale_down_stabilization: 300_000, tolerance: 0.1 }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct EndpointFile {
    name: Spanned<String>,
    namespace: Option<String>,
    class: Option<String>,
    #[serde(default)]
    gpus_per_pod: u32,
    device_class: Option<String>,
    priority: Option<i32>,
    cpu: Option<String>,
    memory: Option<String>,
    min_replicas: Option<u32>,
    max_replicas: u32,
    target: f64,
    cold_start: Option<ColdStartFile>,
    #[serde(default)]
    load: Vec<LoadFile>,
    behavior: Option<super::behavior::BehaviorFile>,
}

/// A cold start's length, or the range each replica's is drawn from.
#[derive(Deserialize)]
#[serde(untagged)]
enum ColdStartFile {
    Fixed(Duration),
    Range { min: Duration, max: Duration },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadFile {
    at: Duration,
    value: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct HpaFile {
    sync_period: Option<Duration>,
    scale_down_stabilization: Option<Duration>,
    tolerance: Option<f64>,
}

/// The HPA settings, checked: (field, message) otherwise.
pub(super) fn hpa(raw: Option<HpaFile>) -> Result<Hpa, (String, String)> {
    let d = Hpa::default();
    let Some(raw) = raw else { return Ok(d) };
    let hpa = Hpa {
        sync_period: raw.sync_period.map_or(d.sync_period, |x| x.0),
        scale_down_stabilization: raw.scale_down_stabilization.map_or(d.scale_down_stabilization, |x| x.0),
        tolerance: raw.tolerance.unwrap_or(d.tolerance),
    };
    if hpa.sync_period < 1_000 {
        // muster's bound, not the flag's: a sync per millisecond would stall a week's run.
        return Err(("hpa.syncPeriod".into(), "must be at least 1s".into()));
    }
    if !(0.0..1.0).contains(&hpa.tolerance) {
        return Err(("hpa.tolerance".into(), format!("{}: expected at least 0 and less than 1", hpa.tolerance)));
    }
    Ok(hpa)
}

/// One endpoint, checked; `taken` are the names of jobs and endpoints so far.
pub(super) fn endpoint(
    file: &str,
    i: usize,
    raw: EndpointFile,
    taken: &mut std::collections::HashSet<(String, String)>,
) -> Result<Endpoint, TraceError> {
    let (line, column) = (Some(raw.name.referenced.line()), Some(raw.name.referenced.column()));
    let err = |f: &str, message: String| TraceError {
        file: file.into(),
        line,
        column,
        field: Some(format!("endpoints[{i}].{f}")),
        message,
    };
    let name = raw.name.value;
    if !dns_label(&name) || name.len() > 50 {
        return Err(err(
            "name",
            format!("{name:?}: expected lowercase letters, digits and '-', at most 50 characters"),
        ));
    }
    let namespace = raw.namespace.unwrap_or_else(|| "default".into());
    if !dns_label(&namespace) {
        return Err(err("namespace", format!("{namespace:?} is not a namespace name")));
    }
    if !taken.insert((namespace.clone(), name.clone())) {
        return Err(err("name", format!("{name:?} is also the name of a job or endpoint")));
    }
    let min_replicas = raw.min_replicas.unwrap_or(1);
    if raw.max_replicas == 0 || raw.max_replicas < min_replicas || raw.max_replicas > super::MAX_PODS {
        let bound = super::MAX_PODS;
        return Err(err("maxReplicas", format!("{}: expected minReplicas (and 1) to {bound}", raw.max_replicas)));
    }
    if !(raw.target.is_finite() && raw.target > 0.0) {
        return Err(err("target", format!("{}: expected a number above 0", raw.target)));
    }
    if raw.device_class.is_some() && raw.gpus_per_pod == 0 {
        return Err(err("deviceClass", "set without gpusPerPod".into()));
    }
    for (f, q) in [("cpu", &raw.cpu), ("memory", &raw.memory)] {
        if let Some(q) = q
            && let Err(e) = muster_api::quantity::parse(q)
        {
            return Err(err(f, format!("{q:?} is not a quantity ({e})")));
        }
    }
    let (cold_start, cold_start_max) = match raw.cold_start {
        None => (0, 0),
        Some(ColdStartFile::Fixed(d)) => (d.0, d.0),
        Some(ColdStartFile::Range { min, max }) if min.0 <= max.0 => (min.0, max.0),
        Some(ColdStartFile::Range { .. }) => return Err(err("coldStart", "min is longer than max".into())),
    };
    let mut load = Vec::with_capacity(raw.load.len());
    for (k, l) in raw.load.into_iter().enumerate() {
        if !(l.value.is_finite() && l.value >= 0.0) {
            return Err(err(&format!("load[{k}].value"), format!("{}: expected a number, at least 0", l.value)));
        }
        if load.last().is_some_and(|(at, _)| *at >= l.at.0) {
            return Err(err(&format!("load[{k}].at"), "must be later than the entry before".into()));
        }
        load.push((l.at.0, l.value));
    }
    let behavior = match raw.behavior {
        None => None,
        Some(b) => Some(super::behavior::behavior(b).map_err(|(f, m)| err(&format!("behavior.{f}"), m))?),
    };
    Ok(Endpoint {
        name,
        namespace,
        class: raw.class.unwrap_or_else(|| "serving".into()),
        gpus_per_pod: raw.gpus_per_pod,
        device_class: raw.device_class,
        priority: raw.priority,
        cpu: raw.cpu,
        memory: raw.memory,
        min_replicas,
        max_replicas: raw.max_replicas,
        target: raw.target,
        cold_start,
        cold_start_max,
        load,
        behavior,
    })
}

#[cfg(test)]
mod tests {
    use crate::trace::Trace;

    const HEAD: &str = "apiVersion: muster.dev/v1alpha1\nkind: Trace\n";

    fn parse(body: &str) -> Result<Trace, crate::trace::TraceError> {
        Trace::parse("t.yaml", &format!("{HEAD}{body}"))
    }

    #[test]
    fn an_endpoint_parses_with_defaults_and_its_load_is_a_step_function() {
        let t = parse("endpoints:\n- name: chat\n  maxReplicas: 3\n  target: 10\n  load:\n  - {at: 1h, value: 25}\n  - {at: 2h, value: 0}\n").unwrap();
        let e = &t.endpoints[0];
        assert_eq!((e.min_replicas, e.max_replicas, e.cold_start, e.class.as_str()), (1, 3, 0, "serving"));
        assert_eq!(
            (e.load_at(0), e.load_at(3_600_000), e.load_at(5_000_000), e.load_at(9_000_000)),
            (0.0, 25.0, 25.0, 0.0)
        );
        assert_eq!(t.hpa, super::Hpa::default());
        let t = parse("endpoints: []\nhpa: {syncPeriod: 30s, scaleDownStabilization: 0s, tolerance: 0}\n").unwrap();
        assert_eq!((t.hpa.sync_period, t.hpa.scale_down_stabilization, t.hpa.tolerance), (30_000, 0, 0.0));
    }

    #[test]
    fn a_cold_start_range_is_drawn_per_replica_from_the_seed() {
        let t = parse("endpoints:\n- name: chat\n  maxReplicas: 3\n  target: 10\n  coldStart: {min: 1m, max: 4m}\n")
            .unwrap();
        let e = &t.endpoints[0];
        let draws: Vec<u64> = (0..64).map(|i| e.cold_start_for(7, i)).collect();
        assert!(draws.iter().all(|d| (60_000..=240_000).contains(d)), "{draws:?}");
        assert!(draws.iter().collect::<std::collections::BTreeSet<_>>().len() > 32, "spread: {draws:?}");
        assert_eq!(draws, (0..64).map(|i| e.cold_start_for(7, i)).collect::<Vec<_>>(), "the same seed, the same draws");
        assert_ne!(draws, (0..64).map(|i| e.cold_start_for(8, i)).collect::<Vec<_>>(), "another seed, others");
        let fixed = parse("endpoints:\n- name: chat\n  maxReplicas: 3\n  target: 10\n  coldStart: 2m\n").unwrap();
        assert_eq!(fixed.endpoints[0].cold_start_for(7, 3), 120_000);
        let bad = parse("endpoints:\n- name: chat\n  maxReplicas: 3\n  target: 10\n  coldStart: {min: 4m, max: 1m}\n");
        assert_eq!(bad.unwrap_err().field.as_deref(), Some("endpoints[0].coldStart"));
    }

    #[test]
    fn bad_endpoints_name_their_field() {
        let field = |body: &str| parse(body).unwrap_err().field;
        let e = |rest: &str| format!("endpoints:\n- name: chat\n  maxReplicas: 3\n  target: 10\n{rest}");
        assert_eq!(field(&e("  minReplicas: 4\n")).as_deref(), Some("endpoints[0].maxReplicas"));
        let huge = "endpoints:\n- name: chat\n  maxReplicas: 2000000000\n  target: 1e-300\n";
        assert_eq!(field(huge).as_deref(), Some("endpoints[0].maxReplicas"));
        assert_eq!(
            field(&e("  load:\n  - {at: 1h, value: 1}\n  - {at: 1h, value: 2}\n")).as_deref(),
            Some("endpoints[0].load[1].at")
        );
        assert_eq!(field(&e("  load:\n  - {at: 1h, value: -1}\n")).as_deref(), Some("endpoints[0].load[0].value"));
        assert_eq!(field(&e("  cpu: lots\n")).as_deref(), Some("endpoints[0].cpu"));
        let zero = "endpoints:\n- name: chat\n  maxReplicas: 3\n  target: 0\n";
        assert_eq!(field(zero).as_deref(), Some("endpoints[0].target"));
        let twice = "jobs:\n- name: chat\n  arrival: 0s\n  duration: 1h\nendpoints:\n- name: chat\n  maxReplicas: 1\n  target: 1\n";
        assert_eq!(field(twice).as_deref(), Some("endpoints[0].name"));
        assert_eq!(field("hpa: {syncPeriod: 0s}\n").as_deref(), Some("hpa.syncPeriod"));
        assert_eq!(field("hpa: {syncPeriod: 999ms}\n").as_deref(), Some("hpa.syncPeriod"));
        assert_eq!(field("hpa: {tolerance: 1.5}\n").as_deref(), Some("hpa.tolerance"));
        assert!(parse(&e("  replicas: 2\n")).is_err(), "unknown fields are refused");
    }
}
