//! The Score phase: the Score plugins over a pod's feasible nodes, normalized and weighed, and the
//! best node chosen; a per-node memo of the resource scores.

use super::*;
use crate::framework::{CycleState, MAX_NODE_SCORE};
use crate::plugins::{
    image_locality, inter_pod_affinity, node_affinity, node_resources_balanced_allocation, node_resources_fit,
    pod_topology_spread, taint_toleration, volume_binding,
};

/// The Score phase's view of the scheduler: read-only inputs and reusable buffers.
pub(super) struct Scoring<'a> {
    pub(super) cluster: &'a Cluster,
    pub(super) config: &'a SchedulerConfig,
    pub(super) scored: &'a [ScoredResource],
    pub(super) weight_sum: Divisor,
    pub(super) feasible: &'a [NodeId],
    pub(super) scores: &'a mut Vec<i64>,
    pub(super) plugin_scores: &'a mut Vec<i64>,
    pub(super) memo: &'a mut [ScoreMemo],
    pub(super) topology: &'a mut crate::topology::TopologyCache,
}

/// A node's last NodeResourcesFit + BalancedAllocation score and what it was computed for.
#[derive(Clone, Copy, Debug)]
pub(super) struct ScoreMemo {
    shape: u32,
    generation: u64,
    score: i64,
}

impl ScoreMemo {
    pub(super) const EMPTY: ScoreMemo = ScoreMemo { shape: u32::MAX, generation: u64::MAX, score: 0 };
}

impl Scoring<'_> {
    /// Score every feasible node, normalize per plugin, weigh, and take the best. Ties go to the
    /// node Filter reached first (kube-scheduler picks among ties at random; muster stays
    /// deterministic).
    pub(super) fn select_host(&mut self, state: &CycleState<'_>) -> NodeId {
        let cluster = self.cluster;
        let w = &self.config.weights;
        self.scores.clear();
        self.scores.resize(self.feasible.len(), 0);

        // NodeResourcesFit and NodeResourcesBalancedAllocation need no normalization: one pass.
        let fit_weight = w.node_resources_fit;
        let balanced_weight = if node_resources_balanced_allocation::skip(state) { 0 } else { w.balanced_allocation };
        let shape = state.pod.shape;
        for (s, n) in self.scores.iter_mut().zip(self.feasible) {
            let node = cluster.node(*n);
            // The memo holds the last resource score of this node; it is exact while the node's
            // generation and the pod's shape are the ones it was computed for.
            let memo = &mut self.memo[n.0 as usize];
            if memo.shape == shape && memo.generation == node.generation {
                *s = memo.score;
                continue;
            }
            let mut v = 0;
            if fit_weight != 0 {
                let (strategy, shape) = (self.config.scoring_strategy, &self.config.utilization_shape);
                let raw = node_resources_fit::score(state, node, strategy, shape, self.scored, self.weight_sum);
                v += fit_weight * raw;
            }
            if balanced_weight != 0 {
                v += balanced_weight * node_resources_balanced_allocation::score(state, node);
            }
            *memo = ScoreMemo { shape, generation: node.generation, score: v };
            *s = v;
        }
        // TaintToleration and NodeAffinity give every node the same score when no node has a
        // PreferNoSchedule taint / the pod has no preferred terms; a constant never changes the
        // choice, so those plugins are only run when they can.
        if w.taint_toleration != 0 && cluster.any_prefer_no_schedule {
            self.plugin_scores.clear();
            self.plugin_scores.extend(self.feasible.iter().map(|n| taint_toleration::score(state, cluster.node(*n))));
            normalize(self.plugin_scores, true);
            for (s, p) in self.scores.iter_mut().zip(self.plugin_scores.iter()) {
                *s += w.taint_toleration * p;
            }
        }
        if w.node_affinity != 0 && node_affinity::scores(state) {
            self.plugin_scores.clear();
            self.plugin_scores.extend(self.feasible.iter().map(|n| node_affinity::score(state, cluster.node(*n))));
            normalize(self.plugin_scores, false);
            for (s, p) in self.scores.iter_mut().zip(self.plugin_scores.iter()) {
                *s += w.node_affinity * p;
            }
        }
        if w.pod_topology_spread != 0
            && let Some(p) = pod_topology_spread::score(
                state,
                self.feasible,
                cluster,
                self.topology,
                &self.config.pod_topology_spread,
            )
        {
            for (s, p) in self.scores.iter_mut().zip(p) {
                *s += w.pod_topology_spread * p;
            }
        }
        if w.inter_pod_affinity != 0
            && let Some(p) =
                inter_pod_affinity::score(state, self.feasible, cluster, self.topology, &self.config.inter_pod_affinity)
        {
            for (s, p) in self.scores.iter_mut().zip(p) {
                *s += w.inter_pod_affinity * p;
            }
        }
        if w.image_locality != 0
            && let Some(p) = image_locality::score(&state.pod.pod, self.feasible, cluster, &mut self.topology.images)
        {
            for (s, p) in self.scores.iter_mut().zip(p) {
                *s += w.image_locality * p;
            }
        }
        // VolumeBinding rates only claims still to bind; every other node scores 0.
        let binding = state.volumes.as_ref().and_then(|v| v.binding.as_ref()).filter(|b| !b.delayed.is_empty());
        if w.volume_binding != 0
            && let Some(b) = binding
        {
            let shape = &self.config.volume_binding_shape;
            for (s, n) in self.scores.iter_mut().zip(self.feasible) {
                let node = cluster.node(*n);
                let view = muster_api::selectors::NodeView { name: node.name(), labels: &node.detail.labels };
                *s += w.volume_binding * volume_binding::score(b, view, &cluster.volumes, shape);
            }
        }
        let mut best = 0;
        for (i, s) in self.scores.iter().enumerate() {
            if *s > self.scores[best] {
                best = i;
            }
        }
        self.feasible[best]
    }
}

/// `helper.DefaultNormalizeScore`: scale to 0..=100 by the highest score; `reverse` flips it.
fn normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        *s = MAX_NODE_SCORE * *s / max;
        if reverse {
            *s = MAX_NODE_SCORE - *s;
        }
    }
}
