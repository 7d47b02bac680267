//! Taints and tolerations (`k8s.io/api/core/v1` `Toleration.ToleratesTaint`).

use k8s_openapi::api::core::v1::{Taint, Toleration};

pub const NO_SCHEDULE: &str = "NoSchedule";
pub const PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
pub const NO_EXECUTE: &str = "NoExecute";

/// The taint a node carries while `spec.unschedulable` is true.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

/// Does `tol` tolerate `taint`? An empty effect matches every effect, an empty key with `Exists`
/// matches every key, `Equal` (or no operator) compares values. The comparison operators `Gt` and
/// `Lt` (KEP 5471) compare both values as integers and never match when either is not one.
pub fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = tol.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    if let Some(key) = tol.key.as_deref()
        && !key.is_empty()
        && key != taint.key
    {
        return false;
    }
    let tol_value = tol.value.as_deref().unwrap_or("");
    let taint_value = taint.value.as_deref().unwrap_or("");
    match tol.operator.as_deref().unwrap_or("") {
        "" | "Equal" => tol_value == taint_value,
        "Exists" => true,
        op @ ("Gt" | "Lt") => match (taint_value.parse::<i64>(), tol_value.parse::<i64>()) {
            (Ok(t), Ok(v)) => {
                if op == "Gt" {
                    t > v
                } else {
                    t < v
                }
            }
            _ => false,
        },
        _ => false,
    }
}

/// True when some toleration in `tols` tolerates `taint`.
pub fn tolerated_by(tols: &[Toleration], taint: &Taint) -> bool {
    tols.iter().any(|t| tolerates(t, taint))
}

/// The first taint (in node order) that passes `filter` and no toleration tolerates
/// (`v1helper.FindMatchingUntoleratedTaint`).
pub fn find_untolerated<'a>(
    taints: &'a [Taint],
    tols: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints.iter().find(|t| filter(t) && !tolerated_by(tols, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint { key: key.into(), value: Some(value.into()), effect: effect.into(), ..Default::default() }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration { key: opt(key), operator: opt(op), value: opt(value), effect: opt(effect), ..Default::default() }
    }

    #[test]
    fn equal_exists_and_effects() {
        let t = taint("dedicated", "batch", NO_SCHEDULE);
        assert!(tolerates(&tol("dedicated", "Equal", "batch", NO_SCHEDULE), &t));
        assert!(tolerates(&tol("dedicated", "", "batch", ""), &t), "no operator means Equal");
        assert!(!tolerates(&tol("dedicated", "Equal", "web", NO_SCHEDULE), &t));
        assert!(tolerates(&tol("dedicated", "Exists", "", ""), &t));
        assert!(tolerates(&tol("", "Exists", "", ""), &t), "empty key + Exists tolerates all");
        assert!(!tolerates(&tol("dedicated", "Exists", "", NO_EXECUTE), &t), "effect must match");
        assert!(!tolerates(&tol("other", "Exists", "", ""), &t));
    }

    #[test]
    fn comparison_operators() {
        let t = taint("gpu-health", "5", NO_SCHEDULE);
        assert!(tolerates(&tol("gpu-health", "Gt", "3", ""), &t));
        assert!(!tolerates(&tol("gpu-health", "Gt", "5", ""), &t));
        assert!(tolerates(&tol("gpu-health", "Lt", "9", ""), &t));
        assert!(!tolerates(&tol("gpu-health", "Lt", "x", ""), &t));
    }

    #[test]
    fn finds_the_first_untolerated_taint_in_node_order() {
        let taints = [taint("a", "1", PREFER_NO_SCHEDULE), taint("b", "2", NO_SCHEDULE), taint("c", "3", NO_EXECUTE)];
        let hard = |t: &Taint| t.effect == NO_SCHEDULE || t.effect == NO_EXECUTE;
        assert_eq!(find_untolerated(&taints, &[], hard).unwrap().key, "b");
        assert_eq!(find_untolerated(&taints, &[tol("b", "Exists", "", "")], hard).unwrap().key, "c");
        assert!(find_untolerated(&taints, &[tol("", "Exists", "", "")], hard).is_none());
    }
}
