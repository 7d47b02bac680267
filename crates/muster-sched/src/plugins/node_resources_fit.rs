//! NodeResourcesFit: the pod's requests must fit the node's allocatable minus what its pods
//! request, and the node must have room for one more pod. Scores by the configured strategy.

use std::borrow::Cow;

use crate::cluster::{NodeInfo, ResourceId, ResourceNames};
use crate::fastdiv::Divisor;
use crate::framework::{CycleState, MAX_NODE_SCORE, Rejection};

pub const NAME: &str = "NodeResourcesFit";

/// How NodeResourcesFit scores (`scoringStrategy.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ScoringStrategy {
    /// Prefer the emptiest node: spreads load (kube-scheduler's default).
    #[default]
    LeastAllocated,
    /// Prefer the fullest node: bin packing, which keeps whole GPU nodes free for large jobs.
    MostAllocated,
}

/// A resource NodeResourcesFit scores and its weight (`scoringStrategy.resources`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScoredResource {
    pub id: ResourceId,
    pub weight: i64,
}

pub fn filter(state: &CycleState<'_>, node: &NodeInfo, names: &ResourceNames) -> Result<(), Rejection> {
    let mut reasons: Vec<Cow<'static, str>> = Vec::new();
    if node.num_pods + 1 > node.allowed_pods {
        reasons.push(Cow::Borrowed("Too many pods"));
    }
    for &(id, want) in &state.pod.requests {
        if want > node.allocatable(id) - node.requested(id) {
            // An extended resource the node does not advertise but a DeviceClass backs is served
            // through DRA there (KEP 5004): DynamicResources decides.
            if node.allocatable(id) == 0 && state.pod.dra_extended.iter().any(|(r, _)| *r == id) {
                continue;
            }
            reasons.push(match id {
                ResourceId::CPU => Cow::Borrowed("Insufficient cpu"),
                ResourceId::MEMORY => Cow::Borrowed("Insufficient memory"),
                ResourceId::EPHEMERAL_STORAGE => Cow::Borrowed("Insufficient ephemeral-storage"),
                _ => Cow::Owned(format!("Insufficient {}", names.name(id))),
            });
        }
    }
    if reasons.is_empty() { Ok(()) } else { Err(Rejection { plugin: NAME, unresolvable: false, reasons }) }
}

/// (allocatable, requested-after-placement) for one scored resource, as
/// `calculateResourceAllocatableRequest` gives them. `non_zero` selects the scheduler's non-zero
/// defaults for cpu and memory (NodeResourcesFit) over the plain requests (BalancedAllocation).
#[inline]
pub fn allocatable_and_requested(
    state: &CycleState<'_>,
    node: &NodeInfo,
    id: ResourceId,
    non_zero: bool,
) -> (i64, i64) {
    let pod_request = match (id, non_zero) {
        (ResourceId::CPU, true) => state.pod.non_zero[0],
        (ResourceId::MEMORY, true) => state.pod.non_zero[1],
        _ => state.request(id),
    };
    let scalar = !matches!(id, ResourceId::CPU | ResourceId::MEMORY | ResourceId::EPHEMERAL_STORAGE);
    if scalar && pod_request == 0 {
        return (0, 0);
    }
    let node_requested = match (id, non_zero) {
        (ResourceId::CPU, true) => node.non_zero_requested[0],
        (ResourceId::MEMORY, true) => node.non_zero_requested[1],
        _ => node.requested(id),
    };
    (node.allocatable(id), node_requested + pod_request)
}

/// The raw score by `strategy` over `resources`; `weight_sum` divides the weighted sum when every
/// scored resource is allocatable on the node (the common case), saving a hardware division.
#[inline]
pub fn score(
    state: &CycleState<'_>,
    node: &NodeInfo,
    strategy: ScoringStrategy,
    resources: &[ScoredResource],
    weight_sum: Divisor,
) -> i64 {
    let mut node_score = 0;
    let mut weights = 0;
    let mut all = true;
    for r in resources {
        let (allocatable, requested) = allocatable_and_requested(state, node, r.id, true);
        if allocatable <= 0 {
            all = false;
            continue;
        }
        let divide = |n: i64| match node.allocatable_divisors.get(r.id.0 as usize) {
            Some(d) => d.divide(n as u64) as i64,
            None => n / allocatable,
        };
        let s = match strategy {
            ScoringStrategy::LeastAllocated => {
                if requested > allocatable {
                    0
                } else {
                    divide((allocatable - requested) * MAX_NODE_SCORE)
                }
            }
            ScoringStrategy::MostAllocated => divide(requested.clamp(0, allocatable) * MAX_NODE_SCORE),
        };
        node_score += s * r.weight;
        weights += r.weight;
    }
    if weights == 0 {
        0
    } else if all && node_score >= 0 {
        weight_sum.divide(node_score as u64) as i64
    } else {
        node_score / weights
    }
}
