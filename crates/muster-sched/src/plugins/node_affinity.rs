//! NodeAffinity: `spec.nodeSelector` and required node affinity filter; preferred terms score.

use muster_api::selectors::{NodeView, node_selector_map_matches, node_selector_matches, term_matches};

use crate::cluster::NodeInfo;
use crate::framework::{CycleState, Rejection};

pub const NAME: &str = "NodeAffinity";
pub const REASON: &str = "node(s) didn't match Pod's node affinity/selector";
/// The reason when the configuration's `addedAffinity` rejects a node (`errReasonEnforced`).
pub const REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";

fn view(node: &NodeInfo) -> NodeView<'_> {
    NodeView { name: &node.detail.name, labels: &node.detail.labels }
}

pub fn filter(state: &CycleState<'_>, node: &NodeInfo) -> Result<(), Rejection> {
    if let Some(added) = state.added_required
        && !node_selector_matches(added, view(node))
    {
        return Err(Rejection::new(NAME, true, REASON_ENFORCED));
    }
    if let Some(sel) = state.node_selector
        && !node_selector_map_matches(sel, view(node))
    {
        return Err(Rejection::new(NAME, true, REASON));
    }
    if let Some(req) = state.required_affinity
        && !node_selector_matches(req, view(node))
    {
        return Err(Rejection::new(NAME, true, REASON));
    }
    Ok(())
}

/// Whether Score can tell nodes apart: the pod or the configuration prefers something.
pub fn scores(state: &CycleState<'_>) -> bool {
    !state.preferred_affinity.is_empty() || !state.added_preferred.is_empty()
}

/// The raw score: the summed weights of the preferred terms (the pod's and the configuration's
/// added ones) the node matches.
pub fn score(state: &CycleState<'_>, node: &NodeInfo) -> i64 {
    state
        .preferred_affinity
        .iter()
        .chain(state.added_preferred)
        .filter(|t| t.weight != 0 && term_matches(&t.preference, view(node)))
        .map(|t| i64::from(t.weight))
        .sum()
}
