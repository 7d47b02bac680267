//! NodeAffinity: `spec.nodeSelector` and required node affinity filter; preferred terms score.

use muster_api::selectors::{NodeView, node_selector_map_matches, node_selector_matches, term_matches};

use crate::cluster::NodeInfo;
use crate::framework::{CycleState, Rejection};

pub const NAME: &str = "NodeAffinity";
pub const REASON: &str = "node(s) didn't match Pod's node affinity/selector";

fn view(node: &NodeInfo) -> NodeView<'_> {
    NodeView { name: &node.detail.name, labels: &node.detail.labels }
}

pub fn filter(state: &CycleState<'_>, node: &NodeInfo) -> Result<(), Rejection> {
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

/// The raw score: the summed weights of the preferred terms the node matches.
pub fn score(state: &CycleState<'_>, node: &NodeInfo) -> i64 {
    state
        .preferred_affinity
        .iter()
        .filter(|t| t.weight != 0 && term_matches(&t.preference, view(node)))
        .map(|t| i64::from(t.weight))
        .sum()
}
