//! Workload-aware preemption (KEP 5710) for PodGroups and CompositePodGroup trees: victim units
//! (a pod alone, or a group with `disruptionMode: all`), PodDisruptionBudget violations, and the
//! victims' eviction from the snapshot and their reprieve. Classic preemption for a pod outside
//! any group is in `pod_preemption`; it shares the eviction and the budgets kept here.

use std::collections::HashMap;

use super::reasons::WouldNotHelp;
use super::*;
use crate::cluster::ClaimId;
use k8s_openapi::api::resource::v1::ResourceClaimConsumerReference;

/// Who asks workload-aware preemption for room.
pub(super) struct Preemptor<'a> {
    /// Every pod of the group (or tree): never its own victims.
    pub(super) members: &'a [PodId],
    /// The pods to place, most important first.
    pub(super) pending: &'a [PodId],
    /// `preemptionPolicy: Never` on the group or one of its pods.
    pub(super) never: bool,
    /// Members may move one at a time: no topology domain binds them together
    /// ([`Scheduler::repair`]).
    pub(super) movable: bool,
}

/// What workload-aware preemption achieved: the preemptor's placement, the victims, and the
/// PodDisruptionBudgets some victims were evicted against.
pub(super) struct Preempted<R> {
    pub(super) placement: R,
    pub(super) victims: Vec<PodId>,
    pub(super) against_budgets: Vec<String>,
}

/// A victim unit's importance, most important first: higher priority, groups before single pods,
/// more pods, earlier start, then the name (inline when short: a preemption keys every running
/// pod of lower priority, and a copied name costs no allocation).
pub(super) type UnitKey = (
    std::cmp::Reverse<i32>,
    bool,
    i64,
    Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    crate::short_name::ShortName,
);

/// A victim unit's pods: a pod alone (most units, kept without an allocation) or a group's.
pub(super) enum UnitPods {
    One(PodId),
    Group(Vec<PodId>),
}

impl UnitPods {
    fn push(&mut self, pod: PodId) {
        match self {
            UnitPods::One(first) => *self = UnitPods::Group(vec![*first, pod]),
            UnitPods::Group(pods) => pods.push(pod),
        }
    }
}

impl std::ops::Deref for UnitPods {
    type Target = [PodId];

    fn deref(&self) -> &[PodId] {
        match self {
            UnitPods::One(pod) => std::slice::from_ref(pod),
            UnitPods::Group(pods) => pods,
        }
    }
}

/// One member's place in a group's placement, as preemption's reprieve checks it again.
struct Assignment {
    pod: PodId,
    node: NodeId,
    device_filter: Option<std::sync::Arc<super::device_domains::DeviceRestriction>>,
}

impl Assignment {
    fn of(r: &Reserved) -> Assignment {
        Assignment { pod: r.pod, node: r.node, device_filter: r.device_filter.clone() }
    }
}

/// What the members of a placement read when Filter checks them on their nodes, when that is
/// only their own nodes and their own claims: no hard topology spread, no required pod
/// (anti-)affinity, no persistent volumes (ReadWriteOncePod is cluster-wide).
struct Reach {
    nodes: std::collections::HashSet<NodeId>,
    claims: std::collections::HashSet<ClaimId>,
}

impl Reach {
    /// `None` when some member's Filter reads beyond its node.
    fn of<C: std::ops::DerefMut<Target = Cluster>>(s: &Scheduler<'_, C>, assignments: &[Assignment]) -> Option<Reach> {
        let c = &*s.cluster;
        let mut reach = Reach { nodes: Default::default(), claims: Default::default() };
        for a in assignments {
            let pod = c.pod(a.pod);
            let volumes = pod.pod.spec().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
            if crate::plugins::pod_topology_spread::may_filter(pod, &s.config.pod_topology_spread)
                || crate::plugins::inter_pod_affinity::has_required_terms(pod)
                || (c.volumes.enabled
                    && volumes.iter().any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some()))
            {
                return None;
            }
            reach.nodes.insert(a.node);
            reach.claims.extend(pod.claims.iter().flatten().copied());
        }
        Some(reach)
    }

    /// True when putting these evicted pods back cannot change a member's Filter verdict: none
    /// is on a member's node, none freed devices outside its node's pools, shares a claim with
    /// a member, or has required pod anti-affinity (which reaches across its topology domain).
    fn leaves_alone<'e, C: std::ops::DerefMut<Target = Cluster>>(
        &self,
        s: &Scheduler<'_, C>,
        unit: impl IntoIterator<Item = &'e Evicted>,
    ) -> bool {
        let c = &*s.cluster;
        unit.into_iter().all(|e| {
            !self.nodes.contains(&e.node)
                && !e.shared
                && e.claims.iter().all(|saved| !self.claims.contains(&saved.claim))
                && c.pod(e.pod).affinity.as_ref().is_none_or(|t| t.required_anti_affinity.is_empty())
        })
    }
}

/// What evicting a preemption victim from the snapshot changed.
pub(super) struct Evicted {
    pod: PodId,
    node: NodeId,
    claims: Vec<SavedClaim>,
    /// Devices were freed outside the node's own pools.
    shared: bool,
    /// [`Scheduler::generations_of`] the node before the eviction and after it.
    generations: ((u64, u64, u64), (u64, u64, u64)),
}

/// What evicting a victim took from one of its claims, moved out (not copied) and moved back
/// by [`Scheduler::restore`].
struct SavedClaim {
    claim: ClaimId,
    /// `status.reservedFor` before the victim was removed from it.
    reserved_for: Option<Vec<ResourceClaimConsumerReference>>,
    /// The allocation, when the victim was the claim's last consumer.
    allocation: Option<k8s_openapi::api::resource::v1::AllocationResult>,
}

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// Workload-aware preemption (KEP 5710) for a group that does not fit: every running pod of
    /// lower priority is a potential victim — a pod alone, or all running pods of its PodGroup
    /// when that group's `disruptionMode` is `all`. All of them are removed from the snapshot
    /// (their node resources and their devices: claims reserved only by victims are deallocated,
    /// which upstream cannot do yet, KEP 5690); if the group then fits, that placement is kept
    /// and victims are reprieved one unit at a time, most important first (higher priority,
    /// groups before single pods, more pods, earlier start): a unit stays a victim only when,
    /// with it back, some member no longer passes Filter on the node the placement gave it (the
    /// placement is not searched again, as upstream). Returns the placement and the victims, or
    /// why preemption cannot help (the snapshot unchanged).
    pub(super) fn preempt<R>(
        &mut self,
        preemptor: Preemptor<'_>,
        mut place: impl FnMut(&mut Self) -> Option<R>,
        parts: impl Fn(&mut R) -> (&mut Vec<(PodId, NodeId)>, &mut Vec<Reserved>),
    ) -> Result<Preempted<R>, WouldNotHelp> {
        let Preemptor { members, pending, never, movable } = preemptor;
        let c = &*self.cluster;
        let priority = c.pod(*pending.first().ok_or(WouldNotHelp::NoPendingMember)?).priority;
        if never {
            return Err(WouldNotHelp::Never);
        }
        if priority <= self.bound_floor() {
            return Err(WouldNotHelp::NoLowerPriority { priority });
        }
        let c = &*self.cluster;
        // Victim units: (importance key, pods). Members are never victims: looked up sorted.
        let mut own = members.to_vec();
        own.sort_unstable();
        let mut units: Vec<(UnitKey, UnitPods)> = Vec::new();
        let mut group_units: HashMap<crate::cluster::GroupNode, usize> = HashMap::new();
        for (i, p) in c.pods.iter().enumerate() {
            let PodState::Bound(_) = p.state else { continue };
            if p.priority >= priority || own.binary_search(&PodId(i as u32)).is_ok() {
                continue;
            }
            let start = p.pod.status().and_then(|s| s.start_time.clone());
            let all_mode = match &p.group {
                Some(Ok(gi)) => disrupted_together(c, *gi),
                _ => None,
            };
            match all_mode {
                Some(node) => {
                    let u = *group_units.entry(node).or_insert_with(|| {
                        let name = c.node_key(node).into();
                        units.push((
                            (std::cmp::Reverse(p.priority), false, 0, start.clone(), name),
                            UnitPods::Group(Vec::new()),
                        ));
                        units.len() - 1
                    });
                    units[u].1.push(PodId(i as u32));
                    let k = &mut units[u].0;
                    k.2 -= 1; // more pods: more important
                    if start.is_some() && (k.3.is_none() || start < k.3) {
                        k.3 = start;
                    }
                }
                None => {
                    let key = (std::cmp::Reverse(p.priority), true, 0, start, p.key.as_str().into());
                    units.push((key, UnitPods::One(PodId(i as u32))))
                }
            }
        }
        if units.is_empty() {
            return Err(WouldNotHelp::NoLowerPriority { priority });
        }
        units.sort_by(|a, b| a.0.cmp(&b.0));
        // PodDisruptionBudgets: going through the units most important first, each covered pod
        // takes one allowed disruption; a unit that takes one a budget does not have violates it.
        // Violating units are tried first for a reprieve (upstream's order).
        let violates = self.budget_violations(&units);
        let order: Vec<usize> = (0..units.len())
            .filter(|u| violates[*u].is_some())
            .chain((0..units.len()).filter(|u| violates[*u].is_none()))
            .collect();
        // Remove every potential victim, unit after unit, then try the group. Unit `u`'s pods
        // are `removed[spans[u]..spans[u + 1]]`, each `None` while it is back.
        let spans: Vec<usize> = std::iter::once(0)
            .chain(units.iter().scan(0, |end, (_, pods)| {
                *end += pods.len();
                Some(*end)
            }))
            .collect();
        let mut removed: Vec<Option<Evicted>> =
            units.iter().flat_map(|(_, pods)| pods.iter()).map(|p| Some(self.evict(*p))).collect();
        let Some(mut current) = place(self) else {
            let n = removed.len();
            for e in removed.into_iter().rev().flatten() {
                self.restore(e);
            }
            return Err(WouldNotHelp::DoesNotFit { removed: n });
        };
        // The placement found with every potential victim gone is kept; the victims are
        // reprieved around it (upstream's `selectVictimsOnDomain`): a unit comes back when every
        // placed member still passes Filter on its node, the members reserved in order.
        let reserved = std::mem::take(parts(&mut current).1);
        let mut assignments: Vec<Assignment> = reserved.iter().map(Assignment::of).collect();
        for r in reserved.into_iter().rev() {
            self.unreserve(r);
        }
        let mut victims: Vec<PodId> = Vec::new();
        let mut against: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        let mut reach = Reach::of(self, &assignments);
        // Whether members moved one at a time since `current` was found: its placed list is
        // then written again from the assignments.
        let mut repaired = false;
        for u in order {
            let (pods, span) = (&units[u].1, spans[u]..spans[u + 1]);
            let apart = reach.as_ref().is_some_and(|r| r.leaves_alone(self, removed[span.clone()].iter().flatten()));
            for slot in removed[span.clone()].iter_mut().rev() {
                if let Some(e) = slot.take() {
                    self.restore(e);
                }
            }
            // A unit the members' Filter cannot see leaves every verdict as it was: all fit
            // (checked anyway in debug builds).
            if apart && !cfg!(debug_assertions) {
                continue;
            }
            if let Some(trial) = self.reserve_all_on(&assignments) {
                for r in trial.into_iter().rev() {
                    self.unreserve(r);
                }
                continue;
            }
            debug_assert!(!apart, "a unit apart from the placement broke it");
            // Beyond upstream (`reprieve_search`): another placement with the unit back; first
            // the members it displaced moved, the others kept; then a new search.
            if self.config.reprieve_search
                && movable
                && let Some(reserved) = self.repair(&assignments)
            {
                assignments = reserved.iter().map(Assignment::of).collect();
                for r in reserved.into_iter().rev() {
                    self.unreserve(r);
                }
                reach = Reach::of(self, &assignments);
                repaired = true;
                continue;
            }
            if self.config.reprieve_search
                && let Some(mut moved) = place(self)
            {
                let reserved = std::mem::take(parts(&mut moved).1);
                assignments = reserved.iter().map(Assignment::of).collect();
                for r in reserved.into_iter().rev() {
                    self.unreserve(r);
                }
                reach = Reach::of(self, &assignments);
                current = moved;
                repaired = false;
                continue;
            }
            for (slot, p) in removed[span].iter_mut().zip(pods.iter()) {
                *slot = Some(self.evict(*p));
            }
            victims.extend(pods.iter().copied());
            against.extend(violates[u].iter().cloned());
        }
        // The snapshot is the one the last successful check (or the placement itself) saw.
        let (placed, reserved) = parts(&mut current);
        *reserved = self.reserve_all_on(&assignments).expect("the placement fitted with these victims removed before");
        if repaired {
            *placed = reserved.iter().map(|r| (r.pod, r.node)).collect();
        }
        victims.sort();
        self.use_disruptions(&victims);
        Ok(Preempted { placement: current, victims, against_budgets: against.into_iter().collect() })
    }

    /// [`Scheduler::preempt`]'s cheaper search (`reprieve_search`, a placement without a topology
    /// domain): each member is reserved on its assigned node in order, and each that no longer
    /// passes Filter there goes through the whole pod cycle (Filter, Score, Reserve) again with
    /// the others in place. `None`, with nothing reserved, when one finds no node.
    fn repair(&mut self, assignments: &[Assignment]) -> Option<Vec<Reserved>> {
        debug_assert!(assignments.iter().all(|a| a.device_filter.is_none()) && self.node_filter.is_none());
        let mut reserved = Vec::with_capacity(assignments.len());
        let mut displaced = Vec::new();
        for a in assignments {
            if let Outcome::Unschedulable(_) = self.attempt_on(a.pod, a.node, Some(&mut reserved)) {
                displaced.push(a.pod);
            }
        }
        for pod in displaced {
            if let Outcome::Unschedulable(_) =
                self.attempt(pod, Some(&mut reserved), None, super::attempt::Then::Reserve)
            {
                for r in reserved.into_iter().rev() {
                    self.unreserve(r);
                }
                return None;
            }
        }
        Some(reserved)
    }

    /// Reserves each member on its assigned node in order (Filter on that node alone, with the
    /// device restriction it was placed under), or, when one does not pass, undoes the Reserves
    /// made and returns `None`.
    fn reserve_all_on(&mut self, assignments: &[Assignment]) -> Option<Vec<Reserved>> {
        let mut reserved = Vec::with_capacity(assignments.len());
        let mut fits = true;
        for a in assignments {
            self.device_filter = a.device_filter.clone();
            if let Outcome::Unschedulable(_) = self.attempt_on(a.pod, a.node, Some(&mut reserved)) {
                fits = false;
                break;
            }
        }
        self.device_filter = None;
        if fits {
            return Some(reserved);
        }
        for r in reserved.into_iter().rev() {
            self.unreserve(r);
        }
        None
    }

    /// At most the lowest priority of a bound pod (`i32::MAX`: none), counted again only when a
    /// change may have lowered it (see `Scheduler::bound_floor`): a preemptor at or below it has
    /// nothing to preempt.
    pub(super) fn bound_floor(&mut self) -> i32 {
        if let Some(floor) = self.bound_floor {
            debug_assert!(
                self.cluster.pods.iter().all(|p| !matches!(p.state, PodState::Bound(_)) || p.priority >= floor),
                "a pod below the kept bound floor is bound"
            );
            return floor;
        }
        let pods = self.cluster.pods.iter().filter(|p| matches!(p.state, PodState::Bound(_)));
        let floor = pods.map(|p| p.priority).min().unwrap_or(i32::MAX);
        self.bound_floor = Some(floor);
        floor
    }

    /// The victims by key and the budgets they went against (`None` without victims).
    pub(super) fn victims(&self, victims: &[PodId], against: &[String]) -> Option<std::sync::Arc<super::Victims>> {
        (!victims.is_empty()).then(|| {
            std::sync::Arc::new(super::Victims {
                pods: victims.iter().map(|v| self.cluster.pod(*v).key.to_string()).collect(),
                budgets: against.to_vec(),
            })
        })
    }

    /// The victims used up disruptions: later preemptions in this plan see what is left.
    pub(super) fn use_disruptions(&mut self, victims: &[PodId]) {
        let c = &mut *self.cluster;
        for v in victims {
            for bi in 0..c.budgets.len() {
                if c.budget_selects(&c.budgets[bi].budget, &c.pods[v.0 as usize]) {
                    c.budgets[bi].disruptions_allowed -= 1;
                }
            }
        }
    }

    /// For each victim unit (most important first), the first PodDisruptionBudget its eviction
    /// would violate, if any (upstream's `filterPodsWithPDBViolation`, per unit: pods listed in a
    /// budget's `status.disruptedPods` are already counted).
    pub(super) fn budget_violations(&self, units: &[(UnitKey, UnitPods)]) -> Vec<Option<String>> {
        let c = &*self.cluster;
        if c.budgets.is_empty() {
            return vec![None; units.len()];
        }
        let mut allowed: Vec<i32> = c.budgets.iter().map(|b| b.disruptions_allowed).collect();
        let mut out = vec![None; units.len()];
        for (u, (_, pods)) in units.iter().enumerate() {
            for p in pods.iter() {
                let info = c.pod(*p);
                for (bi, b) in c.budgets.iter().enumerate() {
                    if !c.budget_selects(&b.budget, info) {
                        continue;
                    }
                    let disrupted = b.budget.status.as_ref().and_then(|s| s.disrupted_pods.as_ref());
                    if disrupted.is_some_and(|d| d.contains_key(info.name())) {
                        continue;
                    }
                    allowed[bi] -= 1;
                    if allowed[bi] < 0 {
                        out[u].get_or_insert_with(|| b.key.clone());
                    }
                }
            }
        }
        out
    }

    /// Removes a running pod from the snapshot (a preemption victim): its node resources, its
    /// reservation of every claim, and the allocation of claims nobody else reserves.
    pub(super) fn evict(&mut self, pod: PodId) -> Evicted {
        let Some(node) = self.cluster.pod(pod).state.on_node() else {
            unreachable!("only pods on a node are evicted or forgotten")
        };
        debug_assert!(self.cluster.node(node).detail.pods.contains(&pod), "evict of a pod its node does not count");
        let before = self.generations_of(node);
        self.cluster.account(node, pod, -1);
        self.cluster.pods[pod.0 as usize].state = PodState::Preempted(node);
        let fresh = self.cluster.fresh_generation();
        self.cluster.nodes[node.0 as usize].generation = fresh;
        let mut claims = Vec::new();
        // Devices freed on the node's own pools change only that node's verdicts (and every
        // node's too when some come from shared pools); a victim that frees no device leaves
        // them as they were.
        let (mut shared, mut freed) = (false, false);
        if let Some((ctx, state)) = self.dra.as_mut() {
            let Cluster { nodes, pods, claims: infos, .. } = &mut *self.cluster;
            let victim = &pods[pod.0 as usize];
            let (uid, name) = (victim.pod.meta().uid.as_deref(), victim.name());
            let node_name = nodes[node.0 as usize].name();
            for &c in victim.claims.iter().flatten() {
                let info = &mut infos[c];
                let mut saved = SavedClaim { claim: c, reserved_for: None, allocation: None };
                if let Some(status) = info.claim.status.as_mut() {
                    saved.reserved_for = status.reserved_for.take();
                    let kept: Option<Vec<_>> = saved.reserved_for.as_ref().map(|list| {
                        let victims = |r: &&ResourceClaimConsumerReference| {
                            r.resource == "pods" && r.name == name && uid.is_none_or(|u| u == r.uid)
                        };
                        list.iter().filter(|r| !victims(r)).cloned().collect()
                    });
                    status.reserved_for = kept;
                }
                let unreserved = info
                    .claim
                    .status
                    .as_ref()
                    .is_some_and(|s| s.reserved_for.as_ref().is_none_or(Vec::is_empty) && s.allocation.is_some());
                if unreserved {
                    let allocation = info.claim.status.as_ref().and_then(|s| s.allocation.as_ref());
                    shared |= !allocation_is_local(allocation, node_name, ctx);
                    freed = true;
                    state.remove_claim(&info.claim, ctx.features);
                    let status = info.claim.status.as_mut().expect("checked above");
                    saved.allocation = status.allocation.take();
                    status.reserved_for = None;
                }
                info.status_changed();
                claims.push(saved);
            }
            if shared {
                self.dra_shared_generation = self.cluster.fresh_generation();
            }
            if freed {
                self.dra_node_generation[node.0 as usize] = self.cluster.fresh_generation();
            }
        }
        Evicted { pod, node, claims, shared, generations: (before, self.generations_of(node)) }
    }

    /// The generations a kept verdict holds for node `n`: the node's and its devices'.
    pub(super) fn node_generations(&self, n: NodeId) -> super::kept_verdicts::NodeGenerations {
        super::kept_verdicts::generations(&self.cluster, &self.dra_node_generation, n)
    }

    /// The generations verdicts about node `n` are remembered under: the node's, its devices',
    /// the shared pools'.
    fn generations_of(&self, n: NodeId) -> (u64, u64, u64) {
        let dra = self.dra_node_generation.get(n.0 as usize).copied().unwrap_or(0);
        (self.cluster.node(n).generation, dra, self.dra_shared_generation)
    }

    /// Puts back what [`Scheduler::evict`] removed (a victim reprieved).
    pub(super) fn restore(&mut self, e: Evicted) {
        // A generation nothing changed since the eviction set it goes back to its value before
        // (the state is that one again), so verdicts remembered then are valid again; any
        // other gets a fresh one.
        let (before, set) = e.generations;
        let now = self.generations_of(e.node);
        let mut back = |was: u64, set: u64, now: u64| if now == set { was } else { self.cluster.fresh_generation() };
        let node_generation = back(before.0, set.0, now.0);
        let dra_generation = back(before.1, set.1, now.1);
        // The shared pools' generation moved only when the eviction freed devices there.
        let shared_generation = if e.shared { back(before.2, set.2, now.2) } else { now.2 };
        debug_assert_eq!(
            self.cluster.pod(e.pod).state,
            PodState::Preempted(e.node),
            "restore of a pod not evicted there"
        );
        self.cluster.account(e.node, e.pod, 1);
        self.cluster.pods[e.pod.0 as usize].state = PodState::Bound(e.node);
        self.cluster.nodes[e.node.0 as usize].generation = node_generation;
        if let Some((ctx, state)) = self.dra.as_mut() {
            let Cluster { nodes, claims, .. } = &mut *self.cluster;
            let node_name = nodes[e.node.0 as usize].name();
            for saved in e.claims.into_iter().rev() {
                let info = &mut claims[saved.claim];
                let Some(status) = info.claim.status.as_mut() else { continue };
                status.reserved_for = saved.reserved_for;
                if let Some(allocation) = saved.allocation {
                    debug_assert!(status.allocation.is_none(), "a victim's claim was allocated while it was evicted");
                    debug_assert!(e.shared || allocation_is_local(Some(&allocation), node_name, ctx));
                    status.allocation = Some(allocation);
                    state.add_claim(&info.claim, ctx.features);
                }
                info.status_changed();
            }
            self.dra_node_generation[e.node.0 as usize] = dra_generation;
            self.dra_shared_generation = shared_generation;
        }
    }
}

/// The group whose running pods are preempted together with a pod of PodGroup `g`: the highest
/// group of its tree with `disruptionMode: all` (the PodGroup itself or an ancestor
/// CompositePodGroup); `None` when every level is `single`.
fn disrupted_together(c: &Cluster, g: GroupId) -> Option<crate::cluster::GroupNode> {
    use crate::cluster::GroupNode;
    let mut unit =
        c.groups[g].group.spec.disruption_mode.as_ref().is_some_and(|d| d.all.is_some()).then_some(GroupNode::Group(g));
    let mut at = GroupNode::Group(g);
    let mut seen = 0;
    while let Some(Ok(p)) = c.parent(at) {
        at = GroupNode::Composite(*p);
        if c.composites[*p].composite.spec.disruption_mode.as_ref().is_some_and(|d| d.all.is_some()) {
            unit = Some(at);
        }
        seen += 1;
        if seen > crate::cluster::MAX_TREE_DEPTH {
            break; // a cycle in the parent chain: reported when the tree is scheduled
        }
    }
    unit
}

/// Whether every device of `allocation` comes from `node`'s own pools (freeing or taking them
/// changes no other node's allocator verdicts).
fn allocation_is_local(
    allocation: Option<&k8s_openapi::api::resource::v1::AllocationResult>,
    node: &str,
    ctx: &crate::plugins::dynamic_resources::DraContext,
) -> bool {
    allocation.is_none_or(|a| crate::plugins::dynamic_resources::node_local([a], node, ctx))
}

/// Whether a change of the store keeps the count of the lowest bound priority, once lowered to
/// the pod it brings to a node ([`Scheduler::apply_change`]): pods and claims changed or deleted,
/// PodGroups, disruption budgets and nodes deleted (bound pods only leave). A node added or
/// changed may bind pods the store held for it; any other change forgets the count.
pub(super) fn keeps_floor(change: &crate::store::Change) -> bool {
    use crate::store::Change as C;
    matches!(
        change,
        C::UpsertPod(_)
            | C::UpsertStoredPod(_)
            | C::DeletePod(_)
            | C::UpsertClaim(_)
            | C::DeleteClaim(_)
            | C::UpsertPodGroup(_)
            | C::DeletePodGroup(_)
            | C::UpsertPodDisruptionBudget(_)
            | C::DeletePodDisruptionBudget(_)
            | C::DeleteNode(_)
    )
}
