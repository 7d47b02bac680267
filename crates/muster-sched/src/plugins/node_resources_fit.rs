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
    /// Score each resource's utilization through a broken-linear shape
    /// (`SchedulerConfig::utilization_shape`).
    RequestedToCapacityRatio,
}

/// One point of a RequestedToCapacityRatio shape: utilization 0..=100 and its score, already
/// scaled to 0..=100 (the configuration's 0..=10 times ten).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShapePoint {
    pub utilization: i64,
    pub score: i64,
}

/// `helper.BuildBrokenLinearFunction`: the shape's score at `p`, interpolated between points,
/// flat before the first and after the last.
fn broken_linear(shape: &[ShapePoint], p: i64) -> i64 {
    for (i, point) in shape.iter().enumerate() {
        if p <= point.utilization {
            let Some(prev) = i.checked_sub(1).map(|j| shape[j]) else { return point.score };
            let span = point.utilization - prev.utilization;
            return prev.score + (point.score - prev.score) * (p - prev.utilization) / span.max(1);
        }
    }
    shape.last().map_or(0, |p| p.score)
}

/// RequestedToCapacityRatio's score of one resource: a full (or over-full, or capacity-less)
/// node scores as 100 % utilization. VolumeBinding's Score rates storage the same way.
pub(crate) fn ratio_score(shape: &[ShapePoint], requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return broken_linear(shape, 100);
    }
    let utilization = if requested <= 0 { 0 } else { (requested as i128 * 100 / capacity as i128) as i64 };
    broken_linear(shape, utilization)
}

/// `requestedToCapacityRatioScorer`: resources the node does not have, and resources scoring 0,
/// take no part; the weighted mean is rounded.
fn ratio(state: &CycleState<'_>, node: &NodeInfo, shape: &[ShapePoint], resources: &[ScoredResource]) -> i64 {
    let (mut total, mut weights) = (0i64, 0i64);
    for r in resources {
        let (allocatable, requested) = allocatable_and_requested(state, node, r.id, true);
        if allocatable == 0 {
            continue;
        }
        let s = ratio_score(shape, requested, allocatable);
        if s > 0 {
            total += s * r.weight;
            weights += r.weight;
        }
    }
    if weights == 0 { 0 } else { (total * 2 + weights) / (weights * 2) }
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
    for &(id, want) in state.pod.requests.iter() {
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

/// Which of [`filter`]'s checks fail, for a pod whose requests are all inline (cpu, memory,
/// ephemeral storage): bit 0 too many pods, bit `1 + i` the pod's `i`-th request. Two nodes with
/// the same bits get the same rejection; 0 when the node has room.
pub fn failing_inline(state: &CycleState<'_>, node: &NodeInfo) -> u32 {
    let mut bits = u32::from(node.num_pods + 1 > node.allowed_pods);
    for (i, &(id, want)) in state.pod.requests.iter().take(31).enumerate() {
        if want > node.allocatable(id) - node.requested(id) {
            bits |= 2 << i;
        }
    }
    bits
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
    shape: &[ShapePoint],
    resources: &[ScoredResource],
    weight_sum: Divisor,
) -> i64 {
    if strategy == ScoringStrategy::RequestedToCapacityRatio {
        return ratio(state, node, shape, resources);
    }
    let most = strategy == ScoringStrategy::MostAllocated;
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
        let s = if most {
            divide(requested.clamp(0, allocatable) * MAX_NODE_SCORE)
        } else if requested > allocatable {
            0
        } else {
            divide((allocatable - requested) * MAX_NODE_SCORE)
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

#[cfg(test)]
mod tests {
    use super::*;

    const BIN_PACKING: [ShapePoint; 2] =
        [ShapePoint { utilization: 0, score: 0 }, ShapePoint { utilization: 100, score: 100 }];

    #[test]
    fn the_shape_is_interpolated_and_flat_outside() {
        let shape = [ShapePoint { utilization: 20, score: 0 }, ShapePoint { utilization: 80, score: 60 }];
        assert_eq!(broken_linear(&shape, 0), 0);
        assert_eq!(broken_linear(&shape, 50), 30);
        assert_eq!(broken_linear(&shape, 95), 60);
        assert_eq!(broken_linear(&BIN_PACKING, 37), 37);
    }

    #[test]
    fn full_or_capacity_less_resources_score_as_full() {
        assert_eq!(ratio_score(&BIN_PACKING, 5, 4), 100);
        assert_eq!(ratio_score(&BIN_PACKING, 0, 0), 100);
        assert_eq!(ratio_score(&BIN_PACKING, 1, 3), 33);
    }
}
