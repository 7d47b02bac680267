//! TaintToleration: NoSchedule and NoExecute taints filter; untolerated PreferNoSchedule taints
//! lower the score.

use muster_api::taints::{NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, find_untolerated, tolerates};

use crate::cluster::NodeInfo;
use crate::framework::{CycleState, Rejection};

pub const NAME: &str = "TaintToleration";

pub fn filter(state: &CycleState<'_>, node: &NodeInfo) -> Result<(), Rejection> {
    if !node.has_taints {
        return Ok(());
    }
    match find_untolerated(&node.detail.taints, state.tolerations, |t| {
        t.effect == NO_SCHEDULE || t.effect == NO_EXECUTE
    }) {
        None => Ok(()),
        Some(t) => Err(Rejection::new(
            NAME,
            true,
            format!("node(s) had untolerated taint {{{}: {}}}", t.key, t.value.as_deref().unwrap_or("")),
        )),
    }
}

/// The raw score: how many PreferNoSchedule taints the pod does not tolerate (lower is better;
/// normalized in reverse).
pub fn score(state: &CycleState<'_>, node: &NodeInfo) -> i64 {
    if !node.has_prefer_no_schedule_taint {
        return 0;
    }
    node.detail
        .taints
        .iter()
        .filter(|t| t.effect == PREFER_NO_SCHEDULE && !state.prefer_tolerations.iter().any(|tol| tolerates(tol, t)))
        .count() as i64
}
