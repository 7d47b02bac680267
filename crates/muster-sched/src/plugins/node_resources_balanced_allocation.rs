//! NodeResourcesBalancedAllocation: prefer nodes whose cpu and memory would be used in equal
//! proportion after placing the pod. Skipped for pods that request neither.

use crate::cluster::{NodeInfo, ResourceId};
use crate::framework::{CycleState, MAX_NODE_SCORE};
use crate::plugins::node_resources_fit::allocatable_and_requested;

pub const NAME: &str = "NodeResourcesBalancedAllocation";

const RESOURCES: [ResourceId; 2] = [ResourceId::CPU, ResourceId::MEMORY];

/// PreScore: a pod that requests none of the balanced resources is not scored.
pub fn skip(state: &CycleState<'_>) -> bool {
    RESOURCES.iter().all(|r| state.request(*r) == 0)
}

#[inline]
pub fn score(state: &CycleState<'_>, node: &NodeInfo) -> i64 {
    let mut fractions = [0f64; 2];
    let mut n = 0;
    for r in RESOURCES {
        let (allocatable, requested) = allocatable_and_requested(state, node, r, false);
        if allocatable == 0 {
            continue;
        }
        fractions[n] = (requested as f64 / allocatable as f64).min(1.0);
        n += 1;
    }
    let std = if n == 2 { ((fractions[0] - fractions[1]) / 2.0).abs() } else { 0.0 };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}
