//! The pod-group cycle (`scheduleOnePodGroup`, default algorithm): a PodGroup's members one after
//! another in the cycle's snapshot, topology-aware placement over the domains of its topology key
//! (KEP 5732), the all-or-nothing rollback of a gang, and the reasons a failed group cycle
//! reports. CompositePodGroup trees (`composite`) place each of their PodGroups through it.

use std::sync::Arc;

use super::device_domains::Topology;
use super::reasons::{DomainError, GroupReason, Preemption, PriorityMismatch};
use super::*;
use crate::framework::MAX_NODE_SCORE;

/// The reason muster gives a PodGroup that waited `--gang-wait-timeout` for its pods.
pub const GANG_WAIT_TIMEOUT_REASON: &str = "GangWaitTimeout";

/// Members placed, members that failed, and the Reserves to undo if the group is not placed.
pub(super) type MembersResult = (Vec<(PodId, NodeId)>, Vec<(PodId, FitError)>, Vec<Reserved>);

/// One topology domain as a PodGroup's cycle tried it ([`Scheduler::domain_trials`]).
#[derive(Clone, Debug)]
pub struct DomainTrial {
    /// The topology key (a node label, a device attribute, or both) and this domain's value of
    /// it (label value, node with scope node, attribute value; joined by `/`).
    pub key: String,
    pub value: String,
    pub nodes: Vec<NodeId>,
    /// With a device attribute: the domain's constrained devices and how many were free.
    pub devices: Option<(usize, usize)>,
    /// Members that fit (rolled back afterwards) and those that did not.
    pub placed: Vec<(PodId, NodeId)>,
    pub failed: Vec<(PodId, FitError)>,
    /// The group would be placed here (minCount reached with at least one pod placed).
    pub feasible: bool,
}

/// A PodGroup's members as one cycle sees them.
pub(super) struct Members {
    pub(super) members: Vec<PodId>,
    pub(super) pending: Vec<PodId>,
    pub(super) exist: usize,
    pub(super) scheduled: usize,
}

/// One pod-group cycle's inputs.
#[derive(Clone, Copy)]
pub(super) struct GroupAttempt<'a> {
    pub(super) members: &'a [PodId],
    /// Pending members in the cycle's order.
    pub(super) pending: &'a [PodId],
    pub(super) topology: Topology<'a>,
    /// Members already running.
    pub(super) scheduled: usize,
    pub(super) min: usize,
    pub(super) gang: bool,
    /// The nodes of the parent CompositePodGroup's placement (`None`: every node).
    pub(super) within: Option<&'a [bool]>,
}

/// Why a group could not be placed (everything already rolled back).
pub(super) enum GroupFailure {
    /// No topology domain holds the group: the reason.
    Topology(DomainError),
    /// `placed` members fitted (then rolled back), `failed` did not.
    Members { placed: usize, failed: Vec<(PodId, FitError)> },
    /// Not tried: too few members fit the nodes' free resources and devices
    /// ([`Scheduler::gang_out_of_reach`]).
    Bound(super::gang_bound::OutOfReach),
}

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// The pod-group cycle (`scheduleOnePodGroup`, default algorithm): members in priority and
    /// age order, each through Filter, Score and Reserve in the cycle's snapshot so later members
    /// see earlier members' resources and devices; the cycle stops early once `minCount` cannot be
    /// reached. When fewer than `minCount` members (with those already running) fit, or none was
    /// placed, every Reserve is undone in reverse order: no claim stays allocated.
    pub fn schedule_group(&mut self, g: GroupId, plan: &mut Plan) {
        let c = &*self.cluster;
        let group = &c.groups[g];
        let (min, gang, key) = (group.min_count, group.gang, group.key.clone());
        let Members { members, pending, exist, scheduled } = self.members(g);
        let num_nodes = c.node_order.len();
        let fail_all = |plan: &mut Plan, pods: &[PodId], outcome: GroupOutcome, reason: GroupReason| {
            let result = GroupResult::new(g, outcome, reason);
            plan.unschedulable.append(&mut result.member_errors(pods, num_nodes));
            plan.groups.push(result);
        };
        // A PodGroup whose parent CompositePodGroup is missing waits for it (PreEnqueue); a bad
        // parent chain is the group's error.
        if let Err(e) = c.root(crate::cluster::GroupNode::Group(g)) {
            let (reason, outcome) = match e.invalid() {
                false => (GroupReason::ParentMissing(e), GroupOutcome::Waiting { exist }),
                true => (GroupReason::InvalidTree { group: key, error: e }, GroupOutcome::SchedulerError),
            };
            fail_all(plan, &pending, outcome, reason);
            return;
        }
        // Alpha restriction: every member has the group's priority.
        if let Some(mismatch) = priority_mismatch(c, &c.groups[g].priority, || format!("podgroup {key}"), &pending) {
            fail_all(plan, &pending, GroupOutcome::SchedulerError, GroupReason::Priority(mismatch));
            return;
        }
        if gang && exist < min {
            let timeout_seconds = self.config().gang_wait_timeout_seconds;
            let reason = GroupReason::WaitsForPods { group: key, exist, min, timeout_seconds };
            fail_all(plan, &pending, GroupOutcome::Waiting { exist }, reason);
            return;
        }
        // Beyond upstream: a device topology the annotations ask for, which must be well formed.
        let device_topology = match self.cluster.groups[g].device_topology.clone().transpose() {
            Ok(t) => t,
            Err(error) => {
                fail_all(
                    plan,
                    &pending,
                    GroupOutcome::SchedulerError,
                    GroupReason::DeviceTopology { group: key, error },
                );
                return;
            }
        };
        let topology_key = self.cluster.groups[g].topology_key.clone();
        let attempt = GroupAttempt {
            members: &members,
            pending: &pending,
            topology: Topology { label: topology_key.as_deref(), device: device_topology.as_ref() },
            scheduled,
            min,
            gang,
            within: None,
        };
        let (result, (victims, against)) = match self.place_group(&attempt) {
            Ok(r) => (r, (Vec::new(), Vec::new())),
            Err(failure) => match self.preempt(
                Preemptor {
                    members: &members,
                    pending: &pending,
                    never: self.never_preempts(g, &pending),
                    movable: !attempt.topology.is_some(),
                },
                |s| s.place_group(&attempt).ok(),
                |r| (&mut r.0, &mut r.2),
            ) {
                Ok(p) => (p.placement, (p.victims, p.against_budgets)),
                Err(why_not) => {
                    self.wait_on_bound(g, &failure, &why_not, &pending, scheduled);
                    self.report_group_failure(g, plan, &pending, failure, scheduled);
                    if let Some(last) = plan.groups.last_mut() {
                        last.preemption = Some(Preemption::WouldNotHelp(why_not));
                    }
                    return;
                }
            },
        };
        let (placed, failed, _) = result;
        let victims_named = self.victims(&victims, &against);
        let outcome = GroupOutcome::Scheduled { placed: placed.len(), scheduled };
        let reason = GroupReason::Scheduled {
            group: key,
            placed: placed.len(),
            running: scheduled,
            min,
            victims: victims_named.clone(),
        };
        let mut result = GroupResult::new(g, outcome, reason);
        result.preemption = victims_named.map(Preemption::Preempted);
        plan.groups.push(result);
        plan.preempted.extend(victims.into_iter().map(|v| (v, crate::cluster::GroupNode::Group(g))));
        plan.placements.extend(placed);
        // Members that did not fit wait for the next cycle (basic policy, or beyond minCount).
        plan.unschedulable.extend(failed);
    }

    /// True when PodGroup `g` (or one of its pending pods) has `preemptionPolicy: Never`.
    pub(super) fn never_preempts(&self, g: GroupId, pending: &[PodId]) -> bool {
        let c = &*self.cluster;
        let spec = &c.groups[g].group.spec;
        c.never_preempts(spec.preemption_policy.as_deref(), spec.priority_class_name.as_deref())
            || pending.iter().any(|p| c.pod_never_preempts(c.pod(*p)))
    }

    /// What each domain of PodGroup `g`'s topology key would give its cycle now, each trial
    /// rolled back (for `muster why`); empty without a topology constraint. The error says why
    /// there are no domains.
    pub fn domain_trials(&mut self, g: GroupId) -> Result<Vec<DomainTrial>, String> {
        let Members { members, pending, scheduled, .. } = self.members(g);
        let group = &self.cluster.groups[g];
        let min = group.min_count;
        let label = group.topology_key.clone();
        let device = group.device_topology.clone().transpose()?;
        let topology = Topology { label: label.as_deref(), device: device.as_ref() };
        if !topology.is_some() {
            return Ok(Vec::new());
        }
        let key = topology.key_text();
        let mut out = Vec::new();
        for d in self.group_domains(topology, None, &members).map_err(|e| e.to_string())? {
            let devices = d.device.as_ref().map(|r| self.device_counts(r));
            self.node_filter = Some(self.mask(&d.nodes));
            self.device_filter = d.device;
            let (placed, failed, undo) = self.run_members(&pending, scheduled, min);
            let feasible = !placed.is_empty() && scheduled + placed.len() >= min;
            for r in undo.into_iter().rev() {
                self.unreserve(r);
            }
            let (value, nodes) = (d.value, d.nodes);
            out.push(DomainTrial { key: key.clone(), value, nodes, devices, placed, failed, feasible });
        }
        self.node_filter = None;
        self.device_filter = None;
        Ok(out)
    }

    /// A PodGroup's members now: all, the pending ones in the cycle's order (priority, then age),
    /// how many exist (pending, gated or running) and how many run.
    pub(super) fn members(&self, g: GroupId) -> Members {
        let c = &*self.cluster;
        let members = c.groups[g].members.clone();
        let (mut exist, mut scheduled) = (0, 0);
        for m in &members {
            let state = &c.pod(*m).state;
            let on_node = state.on_node().is_some();
            scheduled += usize::from(on_node);
            exist += usize::from(on_node || matches!(state, PodState::Pending | PodState::Gated(_)));
        }
        let pending = c.pending_members(g);
        Members { members, pending, exist, scheduled }
    }

    /// Places the group (in the best topology domain when constrained). On success the members
    /// stay reserved; on failure everything was rolled back.
    pub(super) fn place_group(&mut self, a: &GroupAttempt<'_>) -> Result<MembersResult, GroupFailure> {
        let GroupAttempt { members, pending, topology, scheduled, min, gang, within } = *a;
        if topology.is_some() {
            match self.choose_domain(members, pending, topology, scheduled, min, gang, within) {
                Ok((nodes, device)) => (self.node_filter, self.device_filter) = (Some(nodes), device),
                Err(message) => return Err(GroupFailure::Topology(message)),
            }
        } else {
            self.node_filter = within.map(<[bool]>::to_vec);
            if gang && let Some(out) = self.gang_out_of_reach(pending, scheduled, min) {
                self.node_filter = None;
                return Err(GroupFailure::Bound(out));
            }
        }
        let (placed, failed, undo) = self.run_members(pending, scheduled, min);
        self.node_filter = None;
        self.device_filter = None;
        if !placed.is_empty() && scheduled + placed.len() >= min {
            return Ok((placed, failed, undo));
        }
        for r in undo.into_iter().rev() {
            self.unreserve(r);
        }
        Err(GroupFailure::Members { placed: placed.len(), failed })
    }

    /// The reason a group cycle failed, as the PodGroup condition and its members say it.
    fn report_group_failure(
        &self,
        g: GroupId,
        plan: &mut Plan,
        pending: &[PodId],
        failure: GroupFailure,
        scheduled: usize,
    ) {
        let (result, mut failed) = self.group_failure(g, pending, failure, scheduled);
        plan.groups.push(result);
        plan.unschedulable.append(&mut failed);
    }

    /// A gang cycle the bound failed (at most `room` of `pending` fit, `scheduled` running): its
    /// result and its pending members' reasons.
    pub(super) fn bound_failure(
        &self,
        g: GroupId,
        pending: &[PodId],
        room: usize,
        scheduled: usize,
    ) -> (GroupResult, UnschedulablePods) {
        let c = &*self.cluster;
        let group = &c.groups[g];
        let (pending_count, min) = (pending.len(), group.min_count);
        let reason = GroupReason::Bound {
            group: group.key.as_str().into(),
            room,
            pending: pending_count,
            running: scheduled,
            min,
        };
        let outcome = GroupOutcome::Unschedulable { placed: 0, scheduled, failed: pending_count };
        let result = GroupResult::new(g, outcome, reason);
        let failed = result.member_errors(pending, c.node_order.len());
        (result, failed)
    }

    /// A failed group cycle's result and its pending members' reasons.
    pub(super) fn group_failure(
        &self,
        g: GroupId,
        pending: &[PodId],
        failure: GroupFailure,
        scheduled: usize,
    ) -> (GroupResult, UnschedulablePods) {
        let c = &*self.cluster;
        let group = &c.groups[g];
        let (key, min, gang) = (group.key.clone(), group.min_count, group.gang);
        let num_nodes = c.node_order.len();
        let shared = |outcome: GroupOutcome, reason: GroupReason| {
            let result = GroupResult::new(g, outcome, reason);
            let failed = result.member_errors(pending, num_nodes);
            (result, failed)
        };
        let all_failed = GroupOutcome::Unschedulable { placed: 0, scheduled, failed: pending.len() };
        let (placed, failed) = match failure {
            GroupFailure::Topology(error) => return shared(all_failed, GroupReason::NoDomain { group: key, error }),
            GroupFailure::Bound(out) => return self.bound_failure(g, pending, out.room, scheduled),
            GroupFailure::Members { placed, failed } => (placed, failed),
        };
        if !gang {
            // The basic policy: each member stands alone, and none fitted.
            let outcome = GroupOutcome::Unschedulable { placed: 0, scheduled, failed: failed.len() };
            let first = failed.first().map(|(_, e)| Box::new(e.clone()));
            return (GroupResult::new(g, outcome, GroupReason::NoneFits(first)), failed.into_iter().collect());
        }
        let outcome = GroupOutcome::Unschedulable { placed, scheduled, failed: failed.len() };
        let first = failed.first().map(|(p, e)| (c.pod(*p).key.to_string(), Box::new(e.clone())));
        let reason = GroupReason::NotTogether {
            group: key,
            placed,
            failed: failed.len(),
            pending: pending.len(),
            running: scheduled,
            min,
            first,
        };
        shared(outcome, reason)
    }

    /// The default group algorithm over `pending` (Filter limited to `node_filter` when set):
    /// each member in turn, Reserve recorded, stopping once `min` is out of reach.
    fn run_members(&mut self, pending: &[PodId], scheduled: usize, min: usize) -> MembersResult {
        let mut undo: Vec<Reserved> = Vec::new();
        let mut placed: Vec<(PodId, NodeId)> = Vec::new();
        let mut failed: Vec<(PodId, FitError)> = Vec::new();
        for (i, &pod) in pending.iter().enumerate() {
            match self.attempt(pod, Some(&mut undo), None, super::attempt::Then::Reserve) {
                Outcome::Placed(node) => placed.push((pod, node)),
                Outcome::Unschedulable(e) => failed.push((pod, e)),
            }
            // PlacementFeasible: stop once minCount is out of reach.
            let remaining = pending.len() - i - 1;
            if scheduled + placed.len() + remaining < min {
                break;
            }
        }
        (placed, failed, undo)
    }

    /// Topology-aware placement (KEP 5732): the nodes carrying the label (within the parent's
    /// placement), partitioned by its value, are the candidate domains (only the domain of members
    /// already running, if any); with a device attribute [beyond upstream], the attribute's
    /// values ([`Scheduler::group_domains`]). The group algorithm runs in each domain and is
    /// rolled back; feasible domains are scored ([`Scheduler::best_domain`]) and the best domain's
    /// nodes and device restriction are returned.
    #[allow(clippy::too_many_arguments)]
    fn choose_domain(
        &mut self,
        members: &[PodId],
        pending: &[PodId],
        topology: Topology<'_>,
        scheduled: usize,
        min: usize,
        gang: bool,
        within: Option<&[bool]>,
    ) -> Result<(Vec<bool>, Option<Arc<super::device_domains::DeviceRestriction>>), DomainError> {
        let mut domains = self.group_domains(topology, within, members)?;
        let key = topology.key_text();
        let mut feasible: Vec<Feasible> = Vec::new();
        let mut tried: Vec<(String, usize, usize)> = Vec::new();
        for (di, d) in domains.iter().enumerate() {
            self.node_filter = Some(self.mask(&d.nodes));
            self.device_filter = d.device.clone();
            let (placed, _, undo) = self.run_members(pending, scheduled, min);
            let ok = !placed.is_empty() && scheduled + placed.len() >= min;
            if ok {
                let devices = d.device.as_ref().map_or(0, |r| self.devices_in_use(r));
                feasible.push((di, self.most_allocated(&d.nodes), scheduled + placed.len(), devices));
            } else if tried.len() < 5 {
                tried.push((d.value.clone(), placed.len(), pending.len()));
            }
            for r in undo.into_iter().rev() {
                self.unreserve(r);
            }
        }
        self.node_filter = None;
        self.device_filter = None;
        if feasible.is_empty() {
            let (min, total) = (gang.then_some(min), domains.len());
            return Err(DomainError::NoneHolds { key, min, running: scheduled, tried, total });
        }
        let best = domains.swap_remove(best_domain(&feasible, &self.config.placement_weights));
        Ok((self.mask(&best.nodes), best.device))
    }

    /// The candidate domains of `key` in name order: nodes carrying the label (within the parent's
    /// placement) by value — only the value of `members` already running, if any.
    pub(super) fn domains(
        &self,
        key: &str,
        within: Option<&[bool]>,
        members: &[PodId],
    ) -> Result<Vec<(String, Vec<NodeId>)>, DomainError> {
        let c = &*self.cluster;
        let mut domains: std::collections::BTreeMap<&str, Vec<NodeId>> = std::collections::BTreeMap::new();
        for (i, n) in c.nodes.iter().enumerate() {
            if within.is_some_and(|w| !w[i]) {
                continue;
            }
            if let Some(v) = n.detail.labels.get(key).filter(|_| !n.detail.removed) {
                domains.entry(v.as_str()).or_default().push(NodeId(i as u32));
            }
        }
        // Members already running (or placed by this plan) pin the domain.
        let running: std::collections::BTreeSet<Option<&str>> = members
            .iter()
            .filter_map(|m| c.pod(*m).state.on_node().map(|n| c.node(n).detail.labels.get(key).map(String::as_str)))
            .collect();
        if running.contains(&None) {
            return Err(DomainError::RunningUnlabeled { key: key.to_string() });
        }
        if running.len() > 1 {
            let values = running.iter().flatten().map(|v| v.to_string()).collect();
            return Err(DomainError::RunningInSeveral { key: key.to_string(), values });
        }
        if let Some(Some(v)) = running.first() {
            domains.retain(|d, _| d == v);
        }
        if domains.is_empty() {
            return Err(DomainError::NoLabel { key: key.to_string(), within: within.is_some() });
        }
        Ok(domains.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// A node mask holding `nodes`.
    pub(super) fn mask(&self, nodes: &[NodeId]) -> Vec<bool> {
        let mut mask = vec![false; self.cluster.nodes.len()];
        for n in nodes {
            mask[n.0 as usize] = true;
        }
        mask
    }

    /// NodeResourcesFit's placement score: MostAllocated over the nodes' summed requests and
    /// allocatable of the plugin's scored resources, with their weights (cpu and memory, 1 each,
    /// by default).
    pub(super) fn most_allocated(&self, nodes: &[NodeId]) -> i64 {
        let (mut total, mut weights) = (0, 0);
        for r in &self.scored {
            let (mut alloc, mut req) = (0i64, 0i64);
            for n in nodes {
                let node = self.cluster.node(*n);
                alloc = alloc.saturating_add(node.allocatable(r.id));
                req = req.saturating_add(node.requested(r.id));
            }
            if alloc > 0 {
                total += r.weight * (MAX_NODE_SCORE * req.min(alloc) / alloc);
                weights += r.weight;
            }
        }
        if weights == 0 { 0 } else { total / weights }
    }
}

/// A feasible domain as scoring sees it: (domain, MostAllocated score, pods of the group in the
/// domain, share of the domain's constrained devices in use after the trial — 0 without a device
/// attribute).
pub(super) type Feasible = (usize, i64, usize, i64);

/// The PlacementScore plugins over feasible domains: NodeResourcesFit's bin packing and
/// PodGroupPodsCount (normalized to the best domain), weighed; with a device attribute [beyond
/// upstream], the device share too, weighed as NodeResourcesFit's bin packing (it packs gangs into
/// the fullest domain that fits, keeping whole domains free). Ties go to the first domain by
/// value (upstream: random).
pub(super) fn best_domain(feasible: &[Feasible], w: &PlacementWeights) -> usize {
    let best_count = feasible.iter().map(|f| f.2).max().unwrap_or(1).max(1) as i64;
    let score = |f: &Feasible| {
        w.node_resources_fit * (f.1 + f.3) + w.pod_group_pods_count * (MAX_NODE_SCORE * f.2 as i64 / best_count)
    };
    feasible
        .iter()
        .max_by(|a, b| score(a).cmp(&score(b)).then_with(|| b.0.cmp(&a.0)))
        .expect("at least one feasible domain")
        .0
}

/// "; N more" when a list shows `shown` of `total` entries.
pub(super) fn more(total: usize, shown: usize) -> String {
    let n = total.saturating_sub(shown);
    if n > 0 { format!("; {n} more") } else { String::new() }
}

/// The alpha restriction on a group (or tree) and its pods: they all have the group's priority,
/// resolved as admission resolves it. The SchedulerError's reason, or `None` when it holds.
pub(super) fn priority_mismatch(
    c: &Cluster,
    priority: &Result<i32, crate::cluster::PriorityClassNotFound>,
    what: impl FnOnce() -> String,
    pods: &[PodId],
) -> Option<PriorityMismatch> {
    let priority = match priority {
        Ok(p) => *p,
        Err(e) => return Some(PriorityMismatch { what: what(), problem: Err(e.clone()) }),
    };
    let odd: Vec<String> = pods
        .iter()
        .map(|p| c.pod(*p))
        .filter(|p| p.priority != priority)
        .map(|p| format!("{} has {}", p.key, p.priority))
        .collect();
    (!odd.is_empty()).then(|| PriorityMismatch { what: what(), problem: Ok((priority, odd)) })
}
