//! One pod's cycle (`scheduleOne`): PreFilter, Filter (DynamicResources last, its allocator
//! verdicts remembered), Score (`Scoring`), and Reserve; Unreserve puts a Reserve back
//! when a group cycle rolls back.

use std::collections::HashMap;

use super::*;
use crate::dra_memo::{Generations, HeldKey};
use crate::framework::{CycleState, Rejection};
use crate::plugins::dynamic_resources::{self, ExtendedClaim, NodeAllocation};
use crate::plugins::{
    inter_pod_affinity, node_affinity, node_ports, node_resources_fit, node_unschedulable, pod_topology_spread,
    taint_toleration, volume_binding,
};
use crate::pre_filter_reason::PreFilterReason;

/// kube-scheduler's `minFeasibleNodesToFind`.
const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`.
const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// What one Reserve changed: Unreserve (a gang rolled back) puts it back.
#[derive(Debug)]
pub struct Reserved {
    pub pod: PodId,
    pub node: NodeId,
    claims: dynamic_resources::ClaimUndo,
    /// What VolumeBinding's Reserve assumed.
    volumes: Option<volume_binding::VolumeUndo>,
    /// The node's generation and the DRA generations before this Reserve: Unreserve puts them
    /// back, so that verdicts remembered for the state before the Reserve are valid again.
    generations: (u64, u64, u64),
    /// The device restriction (a gang's device domain) Filter used: a check of the same
    /// placement later (preemption's reprieve, `reserve_all_on`) uses it again.
    pub(super) device_filter: Option<std::sync::Arc<super::device_domains::DeviceRestriction>>,
}

/// What an attempt does once Filter (and Score) chose a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Then {
    /// Reserve the pod there: the cycle's outcome.
    Reserve,
    /// Nothing: the node is the answer (a trial that asks only whether the pod fits).
    Stop,
}

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// Unreserve: the pod leaves the node and its claims are as before its Reserve.
    pub(super) fn unreserve(&mut self, r: Reserved) {
        self.cluster.account(r.node, r.pod, -1);
        let Cluster { nodes, pods, .. } = &mut *self.cluster;
        let node = &mut nodes[r.node.0 as usize];
        debug_assert_eq!(
            pods[r.pod.0 as usize].state,
            PodState::Assumed(r.node),
            "Unreserve of a pod not reserved there"
        );
        pods[r.pod.0 as usize].state = PodState::Pending;
        // Reserves are undone last first: the state is the one before this Reserve, and so
        // are its generations.
        node.generation = r.generations.0;
        if !self.dra_node_generation.is_empty() {
            self.dra_node_generation[r.node.0 as usize] = r.generations.1;
        }
        self.dra_shared_generation = r.generations.2;
        if let Some(undo) = r.volumes {
            volume_binding::unreserve(undo, &mut self.cluster.volumes);
        }
        if r.claims.claims.is_empty() && !r.claims.extended {
            return;
        }
        if let Some((ctx, state)) = self.dra.as_mut() {
            dynamic_resources::unreserve(r.pod.0 as usize, r.claims, &mut self.cluster, state, ctx.features);
        }
    }

    /// `numFeasibleNodesToFind`: how many feasible nodes Filter looks for before it stops.
    pub fn num_feasible_nodes_to_find(&self, num_all_nodes: usize) -> usize {
        if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
            return num_all_nodes;
        }
        let mut percentage = self.config.percentage_of_nodes_to_score as usize;
        if percentage == 0 {
            percentage = 50usize.saturating_sub(num_all_nodes / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
        }
        let n = num_all_nodes * percentage.min(100) / 100;
        n.max(MIN_FEASIBLE_NODES_TO_FIND)
    }

    /// One scheduling cycle for `pod`: on success the pod is reserved on (assumed onto) the node.
    pub fn schedule_one(&mut self, pod_id: PodId) -> Outcome {
        self.attempt(pod_id, None, None, Then::Reserve)
    }

    /// PreFilter, Filter on `node` alone and Reserve there: a placement already chosen checked
    /// again (preemption's reprieve). The next start index of Filter does not move, as no node
    /// search took place; `node_filter` is not consulted.
    pub(super) fn attempt_on(&mut self, pod_id: PodId, node: NodeId, undo: Option<&mut Vec<Reserved>>) -> Outcome {
        self.attempt(pod_id, undo, Some(node), Then::Reserve)
    }

    /// Whether `pod` passes PreFilter and Filter on `node` alone now, as a trial inside another
    /// cycle (classic preemption's `selectVictimsOnNode`, which runs Filter only): nothing is
    /// reserved, so nothing changes.
    pub(super) fn passes_filter_on(&mut self, pod_id: PodId, node: NodeId) -> bool {
        let mut trial = Vec::new();
        let outcome = self.attempt(pod_id, Some(&mut trial), Some(node), Then::Stop);
        debug_assert!(trial.is_empty(), "a Filter-only trial reserved nothing");
        matches!(outcome, Outcome::Placed(_))
    }

    /// Filter, Score and Reserve for one pod (`then` says whether to Reserve); with `undo`, what
    /// Reserve changed is recorded so that the pod-group cycle can roll it back; with `on`, only
    /// that node is filtered.
    pub(super) fn attempt(
        &mut self,
        pod_id: PodId,
        undo: Option<&mut Vec<Reserved>>,
        on: Option<NodeId>,
        then: Then,
    ) -> Outcome {
        self.use_profile_of(pod_id);
        let whole = on.is_none() && undo.is_none();
        if whole {
            self.per_node_pod = None;
        }
        let cluster = &*self.cluster;
        let pod = cluster.pod(pod_id);
        let mut state = CycleState::new(pod);
        state.add_affinity(self.config.added_affinity.as_ref());
        let num_nodes = cluster.node_order.len();
        let dra = self.dra.as_ref();
        let pre_filter = if num_nodes == 0 {
            Some(PreFilterReason::NoNodes)
        } else {
            pre_filter(&state, cluster, dra.is_some(), undo.is_some())
                .or_else(|| match crate::volumes::pre_filter(&pod.pod, cluster) {
                    Ok(v) => {
                        state.volumes = v;
                        None
                    }
                    Err(why) => Some(why.into()),
                })
                .or_else(|| {
                    let (ctx, _) = dra.filter(|_| has_dra_claims(pod))?;
                    dynamic_resources::pre_filter_classes(pod, cluster, &ctx.classes)
                        .or_else(|| dynamic_resources::pre_filter_devices(pod, cluster, ctx))
                })
        };
        if pre_filter.is_none() {
            state.pre_filter_inter_pod(cluster, &mut self.topology, &self.config.pod_topology_spread);
        }
        if let Some(why) = pre_filter {
            return Outcome::Unschedulable(FitError::pre_filter(num_nodes, why));
        }
        let to_find = self.num_feasible_nodes_to_find(num_nodes);

        // Filter, starting where the previous cycle stopped. Rejected nodes are only counted
        // here; their reasons are worked out below if the pod fits nowhere (filters are pure, so
        // running them again gives the same verdicts).
        self.feasible.clear();
        self.rejected.clear();
        let mut processed = 0;
        let only = on.map(|n| [n]);
        let (before, after): (&[NodeId], &[NodeId]) = match &only {
            Some(one) => (&[], one),
            None => cluster.node_order.split_at(self.next_start_node_index),
        };
        // Most pods ask only for cpu, memory and ephemeral-storage and set no node constraints; on
        // an untainted, schedulable node their whole Filter chain is NodeResourcesFit's few
        // comparisons.
        let has_claims = !pod.claims.is_empty() || !pod.dra_extended.is_empty();
        // No plugin counts pods on other nodes (PodTopologySpread, InterPodAffinity) or reads
        // volumes: each node's verdict depends on that node alone.
        let per_node = state.spread.is_none() && state.pod_affinity.is_none() && state.volumes.is_none();
        if whole && per_node && pod.group.is_none() {
            self.per_node_pod = Some(pod_id);
        }
        let simple_pod = state.only_inline_requests
            && state.node_selector.is_none()
            && state.required_affinity.is_none()
            && state.added_required.is_none()
            && state.host_ports.is_empty()
            && per_node;
        // Filter with DynamicResources last, as in kube-scheduler's default order. A problem no
        // node can fix fails the whole attempt.
        let (pending, fingerprint) =
            if has_claims { dynamic_resources::pending_claims(pod, cluster) } else { (Vec::new(), 0) };
        // The pod's last verdict, when it fit nowhere and nothing but nodes' states could have
        // changed it ([`super::kept_verdicts`]): nodes whose generations did not move are
        // rejected as they were, without a Filter.
        let keeps = self.reuse_verdicts
            && undo.is_none()
            && on.is_none()
            && self.node_filter.is_none()
            && self.device_filter.is_none()
            && pod.group.is_none()
            && per_node;
        let key = (fingerprint, self.dra_shared_generation);
        let mut kept = match keeps {
            true => self.kept.take(pod_id, key, |other| {
                super::equivalence::key(cluster.pod(other)) == super::equivalence::key(pod)
                    && super::equivalence::equivalent(cluster, &self.classes, other, pod_id)
            }),
            false => None,
        };
        // While every node filtered again is rejected as it was, the kept verdict stands; the
        // nodes filtered again, for bringing it up to date.
        let mut kept_holds = kept.is_some();
        let mut filtered_again: Vec<NodeId> = Vec::new();
        let dra_node_generation = &self.dra_node_generation;
        let node_generations = |node: NodeId| super::kept_verdicts::generations(cluster, dra_node_generation, node);
        let memo = &mut self.dra_memo;
        // The CEL cost this attempt may spend over every node it tries [beyond upstream].
        let cel_budget = muster_cel::Budget::new(muster_cel::Budget::ATTEMPT);
        let generations = (&self.dra_node_generation, self.dra_shared_generation, &self.dra_device_epoch);
        // The special claim for extended resources served through DRA, one variant per set of
        // resources the nodes do not advertise (usually one).
        let mut extended_claims: Vec<ExtendedClaim> = Vec::new();
        let mut last_table: Option<(u64, usize)> = None;
        // In a gang's device domain: the restriction, unless it removes nothing on the node.
        let device_filter = self.device_filter.as_deref();
        // DynamicResources' Filter for one node; the allocator's verdict is left in the memo.
        let mut dra_filter = |memo: &mut DraMemo, node_id: NodeId, cel_budget: &muster_cel::Budget| -> DraFilter {
            let Some((ctx, alloc_state)) = dra.filter(|_| has_claims) else { return DraFilter::Fits };
            let node = cluster.node(node_id);
            if let Err(r) = dynamic_resources::allocated_claims_fit(pod, node, cluster) {
                return DraFilter::Rejected(r);
            }
            let mut fingerprint = fingerprint;
            let mut restriction = None;
            if let Some(d) = device_filter {
                if let Err(r) = dynamic_resources::allocated_claims_in_domain(pod, cluster, ctx, &d.domain) {
                    return DraFilter::Rejected(r);
                }
                if !d.uniform[node_id.0 as usize] {
                    fingerprint = (fingerprint.rotate_left(11) ^ d.salt).wrapping_mul(0x100_0000_01b3);
                    restriction = Some(&d.domain);
                }
            }
            let mask = dynamic_resources::extended_mask(pod, node);
            let extended = if mask == 0 {
                None
            } else {
                let i = match extended_claims.iter().position(|e| e.mask == mask) {
                    Some(i) => i,
                    None => {
                        extended_claims.push(dynamic_resources::extended_claim(pod, mask, &cluster.resources));
                        extended_claims.len() - 1
                    }
                };
                fingerprint =
                    (fingerprint.rotate_left(7) ^ extended_claims[i].fingerprint).wrapping_mul(0x100_0000_01b3);
                Some(&extended_claims[i].claim)
            };
            let table = match last_table {
                Some((f, t)) if f == fingerprint => t,
                _ => {
                    let t = memo.table(fingerprint);
                    last_table = Some((fingerprint, t));
                    t
                }
            };
            // The allocator's answer depends only on the claims' specs and the devices in use:
            // reuse it while neither changed.
            let at = Generations { node: generations.0[node_id.0 as usize], shared: generations.1 };
            let compute = |budget: &muster_cel::Budget| match extended {
                None => dynamic_resources::allocate(&pending, node, ctx, alloc_state, restriction, Some(budget)),
                Some(claim) => {
                    let mut claims = pending.clone();
                    claims.push(claim);
                    dynamic_resources::allocate(&claims, node, ctx, alloc_state, restriction, Some(budget))
                }
            };
            // An error is never reused: its text names the claims of the pod it was computed for.
            if !matches!(memo.get(table, node_id, at), Some(Ok(_))) {
                // The generations moved on: the verdict kept for the state the node's devices are
                // in now, if there is one (named only when verdicts are reused).
                let bits = memo.reuses().then(|| alloc_state.held_bits(ctx.index.local_slices(node.name())));
                let held = bits.flatten().map(|bits| HeldKey {
                    epoch: generations.2[node_id.0 as usize],
                    bits,
                    shared: at.shared,
                });
                match held.and_then(|k| memo.get_held(table, node_id, k, at)) {
                    Some(Ok(kept)) => debug_assert!(
                        dynamic_resources::same_verdict(
                            &compute(&muster_cel::Budget::new(muster_cel::Budget::ATTEMPT)),
                            kept
                        ),
                        "a verdict kept for a state of the node's devices is the one the allocator gives in it"
                    ),
                    _ => {
                        let v = compute(cel_budget);
                        memo.put(table, node_id, at, held, v);
                    }
                }
            }
            DraFilter::Memo(table)
        };
        // Filter on one node: feasible, rejected (with the rejection when `why` asks for it), or
        // the allocator's error.
        let mut judge = |memo: &mut DraMemo, node_id: NodeId, why: bool, cel_budget: &muster_cel::Budget| -> Judged {
            let node = cluster.node(node_id);
            let fits = if simple_pod && !node.unschedulable && !node.has_taints {
                fits_inline(&state, node)
            } else {
                run_all_filters(&state, node_id, node, cluster).is_ok()
            };
            if !fits {
                return Judged::Rejected(why.then(|| run_all_filters(&state, node_id, node, cluster).err()).flatten());
            }
            if !has_claims {
                return Judged::Feasible;
            }
            match dra_filter(memo, node_id, cel_budget) {
                DraFilter::Fits => Judged::Feasible,
                DraFilter::Rejected(r) => Judged::Rejected(Some(r)),
                DraFilter::Memo(t) => match memo.last(t, node_id) {
                    Some(Err(message)) => Judged::Error(message.clone()),
                    Some(Ok(Err(r))) => Judged::Rejected(why.then(|| r.clone())),
                    Some(Ok(Ok(_))) | None => Judged::Feasible,
                },
            }
        };
        // A kept verdict whose nodes' changes the node journal still lists: only the nodes whose
        // generations moved are filtered again, and when each is rejected as it was, the
        // verdict stands (every node was visited, so the start index stays where it was).
        if let Some(k) = kept.as_ref()
            && let Some(changed) = cluster.node_journal.since(k.at()).filter(|c| c.len() <= num_nodes)
        {
            let mut moved: Vec<NodeId> =
                changed.iter().copied().filter(|&n| k.rejection(n, node_generations(n)).is_none()).collect();
            moved.sort_unstable();
            moved.dedup();
            // A budget of its own: the walk below, if the verdict does not stand, spends no more
            // than it would without this look (what was allocated here is remembered).
            let budget = muster_cel::Budget::new(muster_cel::Budget::ATTEMPT);
            let holds = moved.iter().all(
                |&n| matches!(judge(memo, n, true, &budget), Judged::Rejected(Some(r)) if k.previous(n) == Some(&r)),
            );
            if holds {
                self.kept_rejections += (num_nodes - moved.len()) as u64;
                self.journal_verdicts += 1;
                let k = kept.take().expect("read just above");
                let at = cluster.node_journal.now();
                return standing(&mut self.kept, k, (&moved, at), node_generations, |k| {
                    check_standing(k, after.iter().chain(before), &state, cluster, node_generations)
                });
            }
        }
        let node_filter = if on.is_some() { None } else { self.node_filter.as_deref() };
        for &node_id in after.iter().chain(before) {
            processed += 1;
            if node_filter.is_some_and(|f| !f[node_id.0 as usize]) {
                continue;
            }
            // With a kept verdict, rejected nodes are listed below only if it does not stand.
            if kept.as_ref().is_some_and(|k| k.rejection(node_id, node_generations(node_id)).is_some()) {
                self.kept_rejections += 1;
                continue;
            }
            match judge(memo, node_id, kept_holds && kept.is_some(), &cel_budget) {
                Judged::Error(message) => {
                    // Upstream aborts the attempt; the nodes filtered before count as processed.
                    if on.is_none() {
                        self.next_start_node_index = (self.next_start_node_index + processed - 1) % num_nodes;
                    }
                    return Outcome::Unschedulable(FitError::filter_error(
                        num_nodes,
                        dynamic_resources::NAME,
                        node_id,
                        message,
                    ));
                }
                Judged::Feasible => {
                    self.feasible.push(node_id);
                    if self.feasible.len() >= to_find {
                        break;
                    }
                }
                Judged::Rejected(r) => match &kept {
                    Some(k) if kept_holds => {
                        kept_holds = r.is_some_and(|r| k.previous(node_id) == Some(&r));
                        filtered_again.push(node_id);
                    }
                    Some(_) => {}
                    None => self.rejected.push(node_id),
                },
            }
        }
        if on.is_none() {
            self.next_start_node_index = (self.next_start_node_index + processed) % num_nodes;
        }
        if self.feasible.is_empty()
            && kept_holds
            && let Some(k) = kept.take()
        {
            let at = cluster.node_journal.now();
            return standing(&mut self.kept, k, (&filtered_again, at), node_generations, |k| {
                check_standing(k, after.iter().chain(before), &state, cluster, node_generations)
            });
        }
        if self.feasible.is_empty() && kept.is_some() {
            // Every node was rejected (a kept verdict is only used without a node restriction).
            self.rejected.clear();
            self.rejected.extend(after.iter().chain(before).copied());
        }

        if self.feasible.is_empty() {
            let mut rejections: Vec<Rejection> = Vec::new();
            let mut rejection_ids: HashMap<Rejection, u16, foldhash::fast::RandomState> = HashMap::default();
            let mut node_statuses: Vec<(NodeId, u16)> = Vec::with_capacity(self.rejected.len());
            // NodeResourcesFit's failing checks on the last node, when only they rejected it.
            let mut last_bits: Option<u32> = None;
            for &node_id in &self.rejected {
                let node = cluster.node(node_id);
                let known = kept.as_ref().and_then(|k| k.rejection(node_id, node_generations(node_id)));
                // A simple pod on a simple node is rejected by NodeResourcesFit alone, with the
                // reasons its failing checks give: the same checks, the same rejection.
                let bits = (known.is_none() && simple_pod && !node.unschedulable && !node.has_taints)
                    .then(|| node_resources_fit::failing_inline(&state, node))
                    .filter(|b| *b != 0);
                if let (Some(b), Some(&(_, last))) = (bits, node_statuses.last())
                    && last_bits == Some(b)
                {
                    debug_assert_eq!(
                        run_all_filters(&state, node_id, node, cluster).err().as_ref(),
                        Some(&rejections[last as usize])
                    );
                    node_statuses.push((node_id, last));
                    continue;
                }
                last_bits = bits;
                let r: std::borrow::Cow<'_, Rejection> = if let Some(r) = known {
                    debug_assert!(
                        run_all_filters(&state, node_id, node, cluster).err().is_none_or(|now| now == *r),
                        "a node whose generations did not move is rejected as it was"
                    );
                    std::borrow::Cow::Borrowed(r)
                } else {
                    match run_all_filters(&state, node_id, node, cluster) {
                        Err(r) => std::borrow::Cow::Owned(r),
                        Ok(()) => match dra_filter(memo, node_id, &cel_budget) {
                            DraFilter::Rejected(r) => std::borrow::Cow::Owned(r),
                            DraFilter::Memo(t) => match memo.last(t, node_id) {
                                Some(Ok(Err(r))) => std::borrow::Cow::Borrowed(r),
                                _ => unreachable!("a node Filter rejected once is rejected again: filters are pure"),
                            },
                            DraFilter::Fits => {
                                unreachable!("a node Filter rejected once is rejected again: filters are pure")
                            }
                        },
                    }
                };
                // Neighbouring nodes mostly fail alike: the last rejection is compared first, and
                // a rejection is copied only the first time it is seen.
                let id = match node_statuses.last() {
                    Some(&(_, last)) if rejections[last as usize] == *r => last,
                    _ => match rejection_ids.get(&*r) {
                        Some(&id) => id,
                        None => {
                            let id = rejections.len() as u16;
                            let r = r.into_owned();
                            rejection_ids.insert(r.clone(), id);
                            rejections.push(r);
                            id
                        }
                    },
                };
                node_statuses.push((node_id, id));
            }
            // Visited from the start index round: two ascending runs, merged by the stable sort.
            node_statuses.sort();
            // The rejections in their own order, not in the order this start index met them: the
            // verdict is the same whatever the start index (so a kept verdict is the one a full
            // attempt gives).
            if !rejections.is_sorted() {
                canonical_order(&mut rejections, &mut node_statuses);
            }
            // Inside a topology domain, the domain's nodes are all the nodes this attempt had.
            let num_all_nodes = match &self.node_filter {
                _ if on.is_some() => 1,
                Some(f) => f.iter().filter(|in_domain| **in_domain).count(),
                None => num_nodes,
            };
            let mut error = FitError::rejected(num_all_nodes, rejections, node_statuses);
            // The same verdict as the kept one (the nodes filtered again rejected it alike): the
            // kept one is given, so that the pods that wait with it share it (and its rendered
            // message) from one attempt to the next, as they do within one.
            if let Some(k) = kept.as_ref()
                && *k.error() == error
            {
                error = k.error().clone();
            }
            if !keeps {
                return Outcome::Unschedulable(error);
            }
            let num_slots = cluster.nodes.len();
            let shareable = super::equivalence::own_claims_free(cluster, pod);
            let at = cluster.node_journal.now();
            self.kept.keep((pod_id, shareable), key, error.clone(), (num_slots, at), node_generations, kept);
            return Outcome::Unschedulable(error);
        }

        let chosen = if self.feasible.len() == 1 {
            self.feasible[0]
        } else {
            let mut scoring = Scoring {
                cluster,
                config: &self.config,
                scored: &self.scored,
                weight_sum: self.weight_sum,
                feasible: &self.feasible,
                scores: &mut self.scores,
                plugin_scores: &mut self.plugin_scores,
                memo: &mut self.memo,
                topology: &mut self.topology,
            };
            scoring.select_host(&state)
        };
        if then == Then::Stop {
            return Outcome::Placed(chosen);
        }
        // Reserve: the pod is assumed onto the node for every later cycle, and its claims get
        // the allocation Filter found for that node.
        // Filter's verdict for the chosen node is remembered (or, without the memo, computed
        // again: the allocator is deterministic).
        let allocation: Option<NodeAllocation> = if has_claims {
            match dra_filter(memo, chosen, &cel_budget) {
                DraFilter::Fits => None,
                DraFilter::Memo(t) => {
                    // A verdict that takes devices goes stale at this Reserve (the generations
                    // move on) unless a gang rolls the Reserve back: only then is it kept here
                    // (the memo keeps its own copy under the devices' held state).
                    let takes = matches!(memo.last(t, chosen), Some(Ok(Ok(a))) if takes_devices(a));
                    let verdict =
                        if takes && undo.is_none() { memo.take(t, chosen) } else { memo.last(t, chosen).cloned() };
                    match verdict {
                        Some(Ok(Ok(a))) => Some(std::sync::Arc::try_unwrap(a).unwrap_or_else(|a| (*a).clone())),
                        _ => unreachable!("the chosen node passed DynamicResources' Filter in this cycle"),
                    }
                }
                DraFilter::Rejected(_) => unreachable!("the chosen node passed DynamicResources' Filter in this cycle"),
            }
        } else {
            None
        };
        let binding = state.volumes.as_ref().and_then(|v| v.binding.clone());
        let generations = (
            self.cluster.nodes[chosen.0 as usize].generation,
            self.dra_node_generation.get(chosen.0 as usize).copied().unwrap_or(0),
            self.dra_shared_generation,
        );
        let fresh = self.cluster.fresh_generation();
        let Cluster { nodes, pods, inter_pod, volumes, node_journal, .. } = &mut *self.cluster;
        let volume_undo = binding.map(|b| {
            let node = &nodes[chosen.0 as usize];
            let view = muster_api::selectors::NodeView { name: node.name(), labels: &node.detail.labels };
            volume_binding::reserve(pod_id, &b, view, volumes)
        });
        debug_assert_eq!(pods[pod_id.0 as usize].state, PodState::Pending, "Reserve of a pod that is not pending");
        inter_pod.add(nodes[chosen.0 as usize].account(&pods[pod_id.0 as usize], pod_id, 1));
        nodes[chosen.0 as usize].generation = fresh;
        node_journal.note(chosen);
        pods[pod_id.0 as usize].state = PodState::Assumed(chosen);
        let mut claim_undo = undo.is_some().then(dynamic_resources::ClaimUndo::default);
        if has_claims && let Some((ctx, alloc_state)) = self.dra.as_mut() {
            let allocation: NodeAllocation = allocation.unwrap_or_default();
            // Devices taken change what the allocator would answer: for this node only when they
            // come from its own pools, for every node otherwise.
            if takes_devices(&allocation) {
                let local =
                    dynamic_resources::node_local(&allocation, self.cluster.nodes[chosen.0 as usize].name(), ctx);
                let fresh = self.cluster.fresh_generation();
                if local {
                    self.dra_node_generation[chosen.0 as usize] = fresh;
                } else {
                    self.dra_shared_generation = fresh;
                }
            }
            let features = ctx.features;
            let mut allocation = allocation;
            let mask = dynamic_resources::extended_mask(
                &self.cluster.pods[pod_id.0 as usize],
                &self.cluster.nodes[chosen.0 as usize],
            );
            // The special claim was allocated last, after the pod's own claims.
            let extended = match extended_claims.into_iter().find(|e| mask != 0 && e.mask == mask) {
                Some(claim) => allocation.pop().map(|result| (claim, result)),
                None => None,
            };
            dynamic_resources::reserve(
                pod_id.0 as usize,
                allocation,
                &mut self.cluster,
                alloc_state,
                features,
                claim_undo.as_mut(),
            );
            if let Some((claim, result)) = extended {
                dynamic_resources::reserve_extended(
                    pod_id.0 as usize,
                    claim,
                    result,
                    &mut self.cluster,
                    alloc_state,
                    features,
                    claim_undo.as_mut(),
                );
            }
        }
        if let Some(undo) = undo {
            undo.push(Reserved {
                pod: pod_id,
                node: chosen,
                claims: claim_undo.unwrap_or_default(),
                volumes: volume_undo,
                generations,
                device_filter: self.device_filter.clone(),
            });
        }
        Outcome::Placed(chosen)
    }
}

/// PreFilter: what rules a pod out before any node is tried: DynamicResources' claim checks (a
/// plan without DRA inputs cannot serve claims), and GangScheduling's PreEnqueue (a pod naming a
/// missing PodGroup waits; a member is only scheduled inside its group's cycle).
fn pre_filter(state: &CycleState<'_>, cluster: &Cluster, dra: bool, in_group_cycle: bool) -> Option<PreFilterReason> {
    let spec = state.pod.pod.spec()?;
    let extended = !state.pod.dra_extended.is_empty();
    if extended || !state.pod.claims.is_empty() || spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        if !dra {
            return Some(PreFilterReason::NoDraInputs);
        }
        if let Some(why) = dynamic_resources::pre_filter(state.pod, cluster) {
            return Some(why);
        }
    }
    match &state.pod.group {
        // GangScheduling's PreEnqueue: the pod waits until its PodGroup exists.
        Some(Err(why)) => return Some(PreFilterReason::Group((**why).clone())),
        Some(Ok(_)) if !in_group_cycle => return Some(PreFilterReason::GroupMember),
        _ => {}
    }
    None
}

/// True when the pod has claims of its own (DynamicResources' PreFilter has work to do).
fn has_dra_claims(pod: &crate::cluster::PodInfo) -> bool {
    !pod.claims.is_empty()
}

/// Every Filter plugin but DynamicResources, in kube-scheduler's order: the node plugins, the
/// volume plugins, then PodTopologySpread and InterPodAffinity (from the state their PreFilter
/// left).
pub fn run_all_filters(
    state: &CycleState<'_>,
    node_id: NodeId,
    node: &crate::cluster::NodeInfo,
    cluster: &Cluster,
) -> Result<(), Rejection> {
    // Nodes VolumeBinding's PreFilter left out are not filtered at all.
    if let Some(e) = state.volumes.as_ref().and_then(|v| v.binding.as_ref()).and_then(|b| b.eligible.as_ref())
        && !e.contains(node.name())
    {
        return Err(Rejection::new(volume_binding::NAME, true, volume_binding::NOT_ELIGIBLE));
    }
    run_filters(state, node, cluster)?;
    if let Some(v) = &state.volumes {
        crate::volumes::filter(v, &state.pod.pod, node, cluster)?;
    }
    if let Some(s) = &state.spread {
        pod_topology_spread::filter(s, node_id)?;
    }
    if let Some(s) = &state.pod_affinity {
        inter_pod_affinity::filter(s, node_id)?;
    }
    Ok(())
}

/// Sorts `rejections`, renumbering `node_statuses` to match.
fn canonical_order(rejections: &mut Vec<Rejection>, node_statuses: &mut [(NodeId, u16)]) {
    let mut order: Vec<u16> = (0..rejections.len() as u16).collect();
    order.sort_by(|a, b| rejections[*a as usize].cmp(&rejections[*b as usize]));
    let mut renumbered = vec![0u16; order.len()];
    for (new, old) in order.iter().enumerate() {
        renumbered[*old as usize] = new as u16;
    }
    for (_, r) in node_statuses.iter_mut() {
        *r = renumbered[*r as usize];
    }
    let mut old: Vec<Option<Rejection>> = std::mem::take(rejections).into_iter().map(Some).collect();
    rejections.extend(order.iter().map(|i| old[*i as usize].take().expect("a permutation")));
}

/// The node Filter plugins in kube-scheduler's order; the first rejection wins.
pub fn run_filters(
    state: &CycleState<'_>,
    node: &crate::cluster::NodeInfo,
    cluster: &Cluster,
) -> Result<(), Rejection> {
    node_unschedulable::filter(state, node)?;
    taint_toleration::filter(state, node)?;
    node_affinity::filter(state, node)?;
    node_ports::filter(state, node, cluster)?;
    node_resources_fit::filter(state, node, &cluster.resources)?;
    Ok(())
}

/// NodeResourcesFit's Filter for a pod whose requests are all inline, on a node with room: the
/// same verdict as `node_resources_fit::filter` returning `Ok`.
#[inline]
fn fits_inline(state: &CycleState<'_>, node: &crate::cluster::NodeInfo) -> bool {
    let r = &state.inline_requests;
    (node.num_pods < node.allowed_pods)
        & (r[0] <= node.allocatable[0] - node.requested[0])
        & (r[1] <= node.allocatable[1] - node.requested[1])
        & (r[2] <= node.allocatable[2] - node.requested[2])
}

/// A kept verdict stands: the nodes filtered again (`again`, rejected as they were) get their
/// generations now, as of the node journal's position `at`; the verdict is kept again and is the
/// attempt's outcome. `check` runs first in debug builds.
fn standing(
    kept: &mut super::kept_verdicts::KeptVerdicts,
    mut k: super::kept_verdicts::KeptVerdict,
    (again, at): (&[NodeId], u64),
    generations: impl Fn(NodeId) -> super::kept_verdicts::NodeGenerations,
    check: impl FnOnce(&super::kept_verdicts::KeptVerdict),
) -> Outcome {
    k.refresh(again, generations, at);
    if cfg!(debug_assertions) {
        check(&k);
    }
    let error = k.error().clone();
    kept.put_back(k);
    Outcome::Unschedulable(error)
}

/// Debug builds: a standing verdict holds every node's generations now, and every node is
/// rejected as it says.
fn check_standing<'a>(
    k: &super::kept_verdicts::KeptVerdict,
    nodes: impl Iterator<Item = &'a NodeId>,
    state: &CycleState,
    cluster: &Cluster,
    generations: impl Fn(NodeId) -> super::kept_verdicts::NodeGenerations,
) {
    for &n in nodes {
        let r = k.rejection(n, generations(n));
        assert!(r.is_some(), "a standing verdict holds every node's generations");
        assert!(
            run_all_filters(state, n, cluster.node(n), cluster).err().is_none_or(|now| Some(&now) == r),
            "a node whose generations did not move is rejected as it was"
        );
    }
}

/// One node's Filter verdict in an attempt.
enum Judged {
    Feasible,
    /// Rejected, with the rejection when it was asked for.
    Rejected(Option<Rejection>),
    /// The allocator failed (its message): upstream aborts the attempt.
    Error(String),
}

/// Where DynamicResources' Filter left its verdict for a node.
enum DraFilter {
    /// Nothing to allocate.
    Fits,
    /// An allocated claim cannot be used on the node.
    Rejected(Rejection),
    /// The allocator's verdict, in this memo table.
    Memo(usize),
}

/// True when the allocation takes at least one device.
fn takes_devices(allocation: &NodeAllocation) -> bool {
    allocation.iter().any(|a| a.devices.as_ref().and_then(|d| d.results.as_ref()).is_some_and(|r| !r.is_empty()))
}
