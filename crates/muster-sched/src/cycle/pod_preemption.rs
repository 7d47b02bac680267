//! DefaultPreemption's PostFilter for a pod outside any group (kube-scheduler's classic
//! preemption): for each node whose Filter rejection preemption could resolve, remove every
//! running pod of lower priority, check that the pod then fits, and reprieve victims — those a
//! PodDisruptionBudget protects first, then the most important — keeping only the ones the pod
//! needs gone. The best candidate node wins (fewest budget violations, lowest highest victim
//! priority, smallest priority sum, fewest victims, latest start of the most important victim,
//! then the first node in Filter order); its victims are evicted and the pod placed there.
//!
//! Upstream nominates the pod and binds it in a later cycle, once the victims are gone; a plan
//! places it at once. As upstream, the victims' groups and disruption modes are not looked at,
//! and a node DynamicResources rejected is not a candidate (its rejection is unresolvable: freeing
//! devices held through claims is what workload-aware preemption does for groups, KEP 5690).

use super::equivalence::Signature;
use super::*;

/// One node preemption could free for the pod.
struct Candidate {
    node: NodeId,
    victims: Vec<PodId>,
    /// Budgets the victims were evicted against.
    against: Vec<String>,
}

/// What classic preemption decided: the node, the victims and the budgets they went against.
pub(super) struct PodPreemption {
    pub node: NodeId,
    pub victims: Vec<PodId>,
    pub against: Vec<String>,
}

/// kube-scheduler's `minCandidateNodesPercentage` and `minCandidateNodesAbsolute`.
const MIN_CANDIDATE_NODES_PERCENTAGE: usize = 10;
const MIN_CANDIDATE_NODES_ABSOLUTE: usize = 100;

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// PostFilter for `pod`, which fit nowhere (`err`). `None`: preemption cannot help, the
    /// snapshot unchanged. `Some`: the victims are evicted and the pod placed on the node.
    pub(super) fn preempt_for_pod(&mut self, pod: PodId, err: &FitError) -> Option<PodPreemption> {
        let c = &*self.cluster;
        let info = c.pod(pod);
        if c.pod_never_preempts(info) {
            return None;
        }
        let priority = info.priority;
        if priority <= self.bound_floor() {
            return None;
        }
        let c = &*self.cluster;
        // Nodes whose rejection preemption could resolve, in Filter order.
        let mut nodes: Vec<NodeId> = err
            .node_statuses()
            .iter()
            .filter(|(_, r)| !err.rejections()[*r as usize].unresolvable)
            .map(|(n, _)| *n)
            .collect();
        // Each node's place in Filter order, by node slot.
        let mut rank = vec![usize::MAX; c.nodes.len()];
        for (i, n) in c.node_order.iter().enumerate() {
            rank[n.0 as usize] = i;
        }
        nodes.sort_by_key(|n| rank.get(n.0 as usize).copied().unwrap_or(usize::MAX));
        let wanted = (c.node_order.len() * MIN_CANDIDATE_NODES_PERCENTAGE / 100).max(MIN_CANDIDATE_NODES_ABSOLUTE);
        // Trials filter one node each (`attempt_on`): Filter's next start index does not move.
        let mut candidates: Vec<Candidate> = Vec::new();
        // Pods of one class find the same on a node that did not change ([`super::victim_memo`]).
        let memo = self.reuse_verdicts && self.per_node_pod == Some(pod) && self.cluster.budgets.is_empty();
        let signature = memo.then(|| super::equivalence::signature(&self.cluster, &self.classes, pod)).flatten();
        for node in nodes {
            if candidates.len() >= wanted {
                break;
            }
            let found = match &signature {
                Some(signature) => self.victims_kept_or_found(signature, pod, node),
                None => self.victims_on(pod, node),
            };
            if let Some(candidate) = found {
                candidates.push(candidate);
            }
        }
        let best = self.pick_one(candidates)?;
        // The victims leave the snapshot for good.
        for v in &best.victims {
            self.evict(*v);
        }
        let placed = self.attempt_on(pod, best.node, None);
        match placed {
            Outcome::Placed(node) => {
                self.use_disruptions(&best.victims);
                Some(PodPreemption { node, victims: best.victims, against: best.against })
            }
            Outcome::Unschedulable(_) => unreachable!("the pod fitted on the candidate node with these victims gone"),
        }
    }

    /// [`Scheduler::victims_on`], or what a pod of `signature` found there while the node has not
    /// changed since (debug builds check it against a new finding).
    fn victims_kept_or_found(&mut self, signature: &Signature, pod: PodId, node: NodeId) -> Option<Candidate> {
        let (now, shared) = (self.node_generations(node), self.dra_shared_generation);
        if let Some(kept) = self.victim_memo.get(signature, shared, node, now) {
            let kept = kept.map(|victims| Candidate { node, victims: victims.to_vec(), against: Vec::new() });
            self.preemption_findings_reused += 1;
            debug_assert_eq!(
                kept.as_ref().map(|c| &c.victims),
                self.victims_on(pod, node).as_ref().map(|c| &c.victims),
                "a finding kept for an unchanged node is the one found again"
            );
            return kept;
        }
        let found = self.victims_on(pod, node);
        debug_assert!(found.as_ref().is_none_or(|c| c.against.is_empty()), "no budget, none violated");
        let slots = self.cluster.nodes.len();
        self.victim_memo.put((signature, shared), (node, now, slots), found.as_ref().map(|c| c.victims.clone()));
        found
    }

    /// `selectVictimsOnNode`: the fewest lower-priority pods of `node` the pod needs gone, or
    /// `None` when removing all of them is not enough. The snapshot is left as it was.
    fn victims_on(&mut self, pod: PodId, node: NodeId) -> Option<Candidate> {
        let c = &*self.cluster;
        let priority = c.pod(pod).priority;
        // The node's own pods: every bound pod is counted on its node (`NodeInfo::account`).
        let mut potential: Vec<(UnitKey, UnitPods)> = c
            .node(node)
            .detail
            .pods
            .iter()
            .map(|id| (*id, c.pod(*id)))
            .filter(|(_, p)| p.state == PodState::Bound(node) && p.priority < priority)
            .map(|(id, p)| {
                let start = p.pod.status().and_then(|s| s.start_time.clone());
                ((std::cmp::Reverse(p.priority), true, 0, start, p.key.as_str().into()), UnitPods::One(id))
            })
            .collect();
        debug_assert_eq!(
            potential.len(),
            c.pods.iter().filter(|p| p.state == PodState::Bound(node) && p.priority < priority).count(),
            "a pod bound to the node is not counted on it"
        );
        if potential.is_empty() {
            return None;
        }
        potential.sort_by(|a, b| a.0.cmp(&b.0));
        let violates = self.budget_violations(&potential);
        let mut removed: Vec<Option<Evicted>> = potential.iter().map(|(_, p)| Some(self.evict(p[0]))).collect();
        // With the gang bound on, its count of what the node could take decides first: when no
        // copy of the pod fits the node's free resources and devices, Filter rejects it too
        // (debug builds check), and no trial runs.
        let need = if self.bound_applies() { self.need(&[pod]) } else { None };
        let fits = |s: &mut Self| match &need {
            Some(need) if s.copies(node, need) == 0 => {
                debug_assert!(!s.passes_filter_on(pod, node), "the bound says the pod cannot fit the node");
                false
            }
            _ => s.passes_filter_on(pod, node),
        };
        if !fits(self) {
            for e in removed.into_iter().rev().flatten() {
                self.restore(e);
            }
            return None;
        }
        let order: Vec<usize> = (0..potential.len())
            .filter(|u| violates[*u].is_some())
            .chain((0..potential.len()).filter(|u| violates[*u].is_none()))
            .collect();
        let mut victims = Vec::new();
        let mut against = std::collections::BTreeSet::new();
        for u in order {
            let e = removed[u].take().expect("each victim is reprieved at most once");
            self.restore(e);
            if !fits(self) {
                removed[u] = Some(self.evict(potential[u].1[0]));
                victims.push(potential[u].1[0]);
                against.extend(violates[u].iter().cloned());
            }
        }
        for e in removed.into_iter().rev().flatten() {
            self.restore(e);
        }
        victims.sort();
        Some(Candidate { node, victims, against: against.into_iter().collect() })
    }

    /// `pickOneNodeForPreemption`.
    fn pick_one(&self, candidates: Vec<Candidate>) -> Option<Candidate> {
        type Time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let c = &*self.cluster;
        let key = |cand: &Candidate| {
            let highest = cand.victims.iter().map(|v| c.pod(*v).priority).max().unwrap_or(i32::MIN);
            let sum: i64 = cand.victims.iter().map(|v| c.pod(*v).priority as i64 - i32::MIN as i64 + 1).sum();
            // The earliest start among the highest-priority victims: later is better.
            let earliest: Option<&Time> = cand
                .victims
                .iter()
                .map(|v| c.pod(*v))
                .filter(|p| p.priority == highest)
                .filter_map(|p| p.pod.status().and_then(|s| s.start_time.as_ref()))
                .min();
            (cand.against.len(), highest, sum, cand.victims.len(), std::cmp::Reverse(earliest.cloned()))
        };
        let mut best: Option<(Candidate, _)> = None;
        for cand in candidates {
            let k = key(&cand);
            if best.as_ref().is_none_or(|(_, bk)| k < *bk) {
                best = Some((cand, k));
            }
        }
        best.map(|(c, _)| c)
    }
}
