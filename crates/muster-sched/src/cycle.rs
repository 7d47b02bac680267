//! The scheduling cycle: queue order, PreFilter, Filter, Score, Reserve — one pod at a time, as
//! kube-scheduler's `scheduleOne` does, over an in-memory snapshot.

use std::collections::HashMap;

use crate::cluster::{Cluster, NodeId, PodId, PodState};
use crate::dra_memo::{DraMemo, Generations};
use crate::fastdiv::Divisor;
use crate::framework::{CycleState, FitError, MAX_NODE_SCORE, Rejection};
use crate::plugins::dynamic_resources::{self, DraContext, ExtendedClaim, NodeAllocation};
use crate::plugins::node_resources_fit::{ScoredResource, ScoringStrategy};
use crate::plugins::{
    node_affinity, node_resources_balanced_allocation, node_resources_fit, node_unschedulable, taint_toleration,
};
use crate::queue::{Millis, OrderKey, SchedulingQueue, Wake};
use muster_alloc::AllocatedState;

mod assume;
mod composite;
mod pod_preemption;
pub use composite::CompositeResult;

/// The reason muster gives a PodGroup that waited `--gang-wait-timeout` for its pods.
pub const GANG_WAIT_TIMEOUT_REASON: &str = "GangWaitTimeout";

/// kube-scheduler's `minFeasibleNodesToFind`.
const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`.
const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// Score plugin weights (the defaults are kube-scheduler's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScoreWeights {
    pub node_resources_fit: i64,
    pub balanced_allocation: i64,
    pub taint_toleration: i64,
    pub node_affinity: i64,
}

impl Default for ScoreWeights {
    fn default() -> Self {
        ScoreWeights { node_resources_fit: 1, balanced_allocation: 1, taint_toleration: 3, node_affinity: 2 }
    }
}

/// How the cycle is tuned (the subset of `KubeSchedulerConfiguration` muster honours).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    pub scoring_strategy: ScoringStrategy,
    /// Resource names and weights NodeResourcesFit scores; default cpu and memory, weight 1.
    pub scoring_resources: Vec<(String, i64)>,
    pub weights: ScoreWeights,
    /// `percentageOfNodesToScore`: 0 is kube-scheduler's adaptive default; 100 tries every node.
    pub percentage_of_nodes_to_score: u32,
    /// How long a gang may wait for its pods before muster marks it (upstream has no such field;
    /// its only wait is a fixed 5-minute Permit timeout, removed in 1.38).
    pub gang_wait_timeout_seconds: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            scoring_strategy: ScoringStrategy::LeastAllocated,
            scoring_resources: vec![("cpu".into(), 1), ("memory".into(), 1)],
            weights: ScoreWeights::default(),
            percentage_of_nodes_to_score: 0,
            gang_wait_timeout_seconds: 300,
        }
    }
}

/// What one scheduling attempt decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Placed(NodeId),
    Unschedulable(FitError),
}

/// The result of scheduling every pending pod.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Placements in the order they were made (queue order).
    pub placements: Vec<(PodId, NodeId)>,
    /// Pods that fit nowhere, in queue order.
    pub unschedulable: Vec<(PodId, FitError)>,
    /// What each PodGroup's cycle decided, in queue order.
    pub groups: Vec<GroupResult>,
    /// Running pods preempted to make room for a PodGroup or a CompositePodGroup tree.
    pub preempted: Vec<(PodId, crate::cluster::GroupNode)>,
    /// What each CompositePodGroup tree's cycle decided, in queue order.
    pub composites: Vec<CompositeResult>,
    /// Pods outside groups placed by preempting lower-priority pods (DefaultPreemption).
    pub pod_preemptions: Vec<PodPreemptionResult>,
}

/// A pod placed by classic preemption: its victims, and the PodDisruptionBudgets some of them
/// were evicted against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodPreemptionResult {
    pub pod: PodId,
    pub victims: Vec<PodId>,
    pub against_budgets: Vec<String>,
}

/// What one queue entry's cycle left behind ([`Scheduler::schedule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempted {
    /// Some of the entry's pods are still pending (it goes back to the queue).
    pub pending: bool,
    /// What the pending pods wait for.
    pub wake: Wake,
    /// Running pods were preempted: their resources and devices are free.
    pub freed: bool,
}

impl Plan {
    /// How many running pods this plan preempted so far.
    fn victims(&self) -> usize {
        self.preempted.len() + self.pod_preemptions.iter().map(|p| p.victims.len()).sum::<usize>()
    }

    /// Forgets what an earlier attempt of `entry` reported as unschedulable, before the entry
    /// is tried again: its pods' reasons, and its groups' results unless they were scheduled
    /// (a scheduled group stays scheduled; a new result adds what it placed).
    fn forget(&mut self, pods: &[PodId], groups: &[usize], entry: QueueEntry) {
        let pods: std::collections::HashSet<PodId> = pods.iter().copied().collect();
        self.unschedulable.retain(|(p, _)| !pods.contains(p));
        let scheduled = |o: &GroupOutcome| matches!(o, GroupOutcome::Scheduled { .. });
        self.groups.retain(|r| !groups.contains(&r.group) || scheduled(&r.outcome));
        if let QueueEntry::Composite(r) = entry {
            self.composites.retain(|t| t.composite != r || scheduled(&t.outcome));
        }
    }

    /// After a retry: a group scheduled by an earlier attempt keeps its first result, with the
    /// pods a later scheduled attempt placed added to it.
    fn settle_groups(&mut self, groups: &[usize]) {
        for &g in groups {
            let mut at = self.groups.iter().enumerate().filter(|(_, r)| r.group == g).map(|(i, _)| i);
            let (Some(first), Some(second)) = (at.next(), at.next()) else { continue };
            let later = self.groups.remove(second);
            if let (GroupOutcome::Scheduled { placed, .. }, GroupOutcome::Scheduled { placed: more, .. }) =
                (&mut self.groups[first].outcome, later.outcome)
            {
                *placed += more;
            }
        }
    }
}

/// The events that could help a pod that failed with `e` (the rejecting plugins' queueing
/// hints); any event for a failure not tied to a Filter plugin.
fn wake_for(e: &FitError) -> Wake {
    if e.pre_filter_message.is_some() || e.group_message.is_some() || e.rejections.is_empty() {
        return Wake::ANY;
    }
    e.rejections.iter().fold(Wake::NONE, |w, r| w.union(Wake::for_plugin(r.plugin)))
}

/// One entry of the scheduling queue: a pod, or a PodGroup whose pending members are scheduled
/// together (kube-scheduler's `QueuedPodGroupInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueueEntry {
    Pod(PodId),
    Group(usize),
    /// A root CompositePodGroup: its whole tree of groups in one cycle.
    Composite(usize),
}

/// What a pod-group cycle decided (the PodGroup's `PodGroupInitiallyScheduled` condition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupOutcome {
    /// Enough members placed: `placed` in this cycle, with `scheduled` already running.
    Scheduled { placed: usize, scheduled: usize },
    /// Not attempted: fewer pods exist than `minCount` (GangScheduling's PreEnqueue).
    Waiting { exist: usize },
    /// Attempted and rolled back: the group cannot reach `minCount`.
    Unschedulable { placed: usize, scheduled: usize, failed: usize },
    /// The group is inconsistent (e.g. members with different priorities).
    SchedulerError,
}

impl GroupOutcome {
    /// Pods placed in this cycle and pods already running, as the outcome reports them.
    pub fn counts(&self) -> (usize, usize) {
        match *self {
            GroupOutcome::Scheduled { placed, scheduled } => (placed, scheduled),
            GroupOutcome::Unschedulable { scheduled, .. } => (0, scheduled),
            GroupOutcome::Waiting { .. } | GroupOutcome::SchedulerError => (0, 0),
        }
    }
}

/// A PodGroup's cycle: its outcome and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupResult {
    /// Index into `Cluster::groups`.
    pub group: usize,
    pub outcome: GroupOutcome,
    /// The reason, as the condition's message and the members' unschedulable reason say it.
    pub message: String,
    /// What workload-aware preemption did or why it could not help; `None` when it was not needed.
    pub preemption: Option<String>,
}

/// Members placed, members that failed, and the Reserves to undo if the group is not placed.
type MembersResult = (Vec<(PodId, NodeId)>, Vec<(PodId, FitError)>, Vec<Reserved>);

/// Who asks workload-aware preemption for room.
struct Preemptor<'a> {
    /// Every pod of the group (or tree): never its own victims.
    members: &'a [PodId],
    /// The pods to place, most important first.
    pending: &'a [PodId],
    /// `preemptionPolicy: Never` on the group or one of its pods.
    never: bool,
}

/// One topology domain as a PodGroup's cycle tried it ([`Scheduler::domain_trials`]).
#[derive(Clone, Debug)]
pub struct DomainTrial {
    /// The topology key and this domain's value of it.
    pub key: String,
    pub value: String,
    pub nodes: Vec<NodeId>,
    /// Members that fit (rolled back afterwards) and those that did not.
    pub placed: Vec<(PodId, NodeId)>,
    pub failed: Vec<(PodId, FitError)>,
    /// The group would be placed here (minCount reached with at least one pod placed).
    pub feasible: bool,
}

/// What workload-aware preemption achieved: the preemptor's placement, the victims, and the
/// PodDisruptionBudgets some victims were evicted against.
struct Preempted<R> {
    placement: R,
    victims: Vec<PodId>,
    against_budgets: Vec<String>,
}

/// A PodGroup's members as one cycle sees them.
struct Members {
    members: Vec<PodId>,
    pending: Vec<PodId>,
    exist: usize,
    scheduled: usize,
}

/// One pod-group cycle's inputs.
#[derive(Clone, Copy)]
struct GroupAttempt<'a> {
    members: &'a [PodId],
    /// Pending members in the cycle's order.
    pending: &'a [PodId],
    topology_key: Option<&'a str>,
    /// Members already running.
    scheduled: usize,
    min: usize,
    gang: bool,
    /// The nodes of the parent CompositePodGroup's placement (`None`: every node).
    within: Option<&'a [bool]>,
}

/// Why a group could not be placed (everything already rolled back).
enum GroupFailure {
    /// No topology domain holds the group: the reason.
    Topology(String),
    /// `placed` members fitted (then rolled back), `failed` did not.
    Members { placed: usize, failed: Vec<(PodId, FitError)> },
}

/// A victim unit's importance, most important first: higher priority, groups before single pods,
/// more pods, earlier start, then the name.
type UnitKey =
    (std::cmp::Reverse<i32>, bool, i64, Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>, String);

/// What evicting a preemption victim from the snapshot changed.
struct Evicted {
    pod: PodId,
    node: NodeId,
    claims: Vec<(usize, Option<k8s_openapi::api::resource::v1::ResourceClaimStatus>, bool)>,
}

/// What one Reserve changed: Unreserve (a gang rolled back) puts it back.
#[derive(Debug)]
pub struct Reserved {
    pub pod: PodId,
    pub node: NodeId,
    claims: dynamic_resources::ClaimUndo,
    /// The node's generation and the DRA generations before this Reserve: Unreserve puts them
    /// back, so that verdicts remembered for the state before the Reserve are valid again.
    generations: (u64, u64, u64),
}

/// The scheduler over one snapshot. Decisions depend only on the snapshot and the config.
pub struct Scheduler<'c, C = &'c mut Cluster> {
    cluster: C,
    config: SchedulerConfig,
    /// DRA inputs and the devices in use, when the plan has DRA objects.
    dra: Option<(&'c DraContext<'c>, AllocatedState)>,
    /// The allocator's verdicts per (claim-spec fingerprint, node), valid while the node's
    /// generation and the shared-pool generation are the ones recorded.
    dra_memo: DraMemo,
    /// Bumped when an allocation takes devices of the node's own pools / of shared pools.
    dra_node_generation: Vec<u64>,
    dra_shared_generation: u64,
    scored: Vec<ScoredResource>,
    weight_sum: Divisor,
    next_start_node_index: usize,
    feasible: Vec<NodeId>,
    rejected: Vec<NodeId>,
    scores: Vec<i64>,
    plugin_scores: Vec<i64>,
    memo: Vec<ScoreMemo>,
    /// During a topology-constrained group cycle: the nodes of the domain being tried.
    node_filter: Option<Vec<bool>>,
}

impl<'c, C: std::ops::DerefMut<Target = Cluster>> Scheduler<'c, C> {
    pub fn new(mut cluster: C, config: SchedulerConfig) -> Self {
        let scored = config
            .scoring_resources
            .iter()
            .map(|(name, weight)| ScoredResource { id: cluster.resources.intern(name), weight: *weight })
            .collect();
        let weight_sum: i64 = config.scoring_resources.iter().map(|(_, w)| *w).sum();
        let num_nodes = cluster.nodes.len();
        let memo = vec![ScoreMemo::EMPTY; num_nodes];
        Scheduler {
            cluster,
            config,
            dra: None,
            dra_memo: DraMemo::new(num_nodes),
            dra_node_generation: Vec::new(),
            dra_shared_generation: 0,
            scored,
            weight_sum: Divisor::new(weight_sum.max(1) as u64),
            next_start_node_index: 0,
            feasible: Vec::new(),
            rejected: Vec::new(),
            scores: Vec::new(),
            plugin_scores: Vec::new(),
            memo,
            node_filter: None,
        }
    }

    /// A scheduler that also serves pods' ResourceClaims (the DynamicResources plugin).
    pub fn with_dra(cluster: C, config: SchedulerConfig, ctx: &'c DraContext<'c>) -> Self {
        let state = AllocatedState::from_claims(cluster.claims.iter().map(|c| &c.claim), ctx.features);
        let mut s = Scheduler::new(cluster, config);
        s.dra_node_generation = vec![0; s.cluster.nodes.len()];
        s.dra = Some((ctx, state));
        s
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The scheduler's cluster, for changes between cycles (the store's `apply`).
    pub fn cluster_mut(&mut self) -> &mut Cluster {
        &mut self.cluster
    }

    /// Gives the cluster back.
    pub fn into_cluster(self) -> C {
        self.cluster
    }

    /// Turns the reuse of allocator verdicts off (every Filter call allocates): for tests that
    /// check the reuse never changes a decision.
    pub fn without_dra_memo(mut self) -> Self {
        self.dra_memo.disable_reuse();
        self
    }

    /// The pending pods in kube-scheduler's PrioritySort order: priority (highest first), then
    /// creation time (oldest first), then namespace/name.
    pub fn queue(&self) -> Vec<PodId> {
        let mut q: Vec<PodId> = (0..self.cluster.pods.len() as u32)
            .map(PodId)
            .filter(|p| {
                self.cluster.pod(*p).state == PodState::Pending && !matches!(self.cluster.pod(*p).group, Some(Ok(_)))
            })
            .collect();
        q.sort_by(|a, b| {
            let (a, b) = (self.cluster.pod(*a), self.cluster.pod(*b));
            b.priority
                .cmp(&a.priority)
                .then_with(|| a.pod.metadata.creation_timestamp.cmp(&b.pod.metadata.creation_timestamp))
                .then_with(|| a.key.cmp(&b.key))
        });
        q
    }

    /// The queue with PodGroups: pods outside groups and one entry per PodGroup with pending
    /// members, ordered as PrioritySort orders them (a group by its members' highest priority,
    /// its PodGroup's creation time and its `namespace/name`). Pods naming a PodGroup that is not
    /// in the input are entries of their own (they are reported waiting for it).
    pub fn entries(&self) -> Vec<QueueEntry> {
        let mut entries = self.queued();
        entries.sort();
        entries.into_iter().map(|(_, e)| e).collect()
    }

    /// The entries with pending pods, each with its queue order, in no particular order.
    pub(crate) fn queued(&self) -> Vec<(OrderKey, QueueEntry)> {
        let c = &*self.cluster;
        let mut entries: Vec<QueueEntry> = Vec::new();
        for (pi, p) in c.pods.iter().enumerate() {
            if p.state == PodState::Pending && !matches!(p.group, Some(Ok(_))) {
                entries.push(QueueEntry::Pod(PodId(pi as u32)));
            }
        }
        // One entry per root group: a PodGroup without parent (or whose parent is missing: it
        // is reported waiting), or the root CompositePodGroup of a tree.
        let mut trees = std::collections::BTreeSet::new();
        for (gi, g) in c.groups.iter().enumerate() {
            if !g.members.iter().any(|m| c.pod(*m).state == PodState::Pending) {
                continue;
            }
            match c.root(crate::cluster::GroupNode::Group(gi)) {
                Ok(crate::cluster::GroupNode::Composite(r)) => {
                    trees.insert(r);
                }
                _ => entries.push(QueueEntry::Group(gi)),
            }
        }
        entries.extend(trees.into_iter().map(QueueEntry::Composite));
        entries.into_iter().filter_map(|e| Some((self.order_of(e)?, e))).collect()
    }

    /// Where an entry sorts in the queue (PrioritySort): a pod by its priority, creation time and
    /// `namespace/name`; a group (or tree) by its own priority (its pods must have it too; else
    /// its pending pods' highest), its creation time and its `namespace/name`. `None` when the
    /// entry has no pending pod.
    pub(crate) fn order_of(&self, entry: QueueEntry) -> Option<OrderKey> {
        let c = &*self.cluster;
        let order =
            |priority: i32, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, key: &str| OrderKey {
                priority: std::cmp::Reverse(priority),
                created: meta.creation_timestamp.clone(),
                key: key.into(),
            };
        let pending_priority = |groups: &[usize]| {
            groups
                .iter()
                .flat_map(|g| c.groups[*g].members.iter().map(|m| c.pod(*m)))
                .filter(|p| p.state == PodState::Pending)
                .map(|p| p.priority)
                .max()
        };
        match entry {
            QueueEntry::Pod(p) => {
                let p = c.pod(p);
                (p.state == PodState::Pending).then(|| order(p.priority, &p.pod.metadata, &p.key))
            }
            QueueEntry::Group(g) => {
                let group = &c.groups[g];
                let priority = group.priority.clone().unwrap_or(pending_priority(&[g])?);
                Some(order(priority, &group.group.metadata, &group.key))
            }
            QueueEntry::Composite(r) => {
                let cpg = &c.composites[r];
                // Each PodGroup with pending pods at its own priority (else its pods'); the highest.
                let groups = c.leaves(r).into_iter().filter_map(|g| {
                    let pods = pending_priority(&[g])?;
                    Some(c.groups[g].priority.clone().unwrap_or(pods))
                });
                let priority = groups.max()?;
                Some(order(cpg.priority.clone().unwrap_or(priority), &cpg.composite.metadata, &cpg.key))
            }
        }
    }

    /// Schedules every pending pod, PodGroup and CompositePodGroup tree until the queue is idle
    /// (kube-scheduler's loop over its [`SchedulingQueue`], on a clock that starts at 0 and jumps
    /// to the next backoff expiry when nothing else is ready). An entry that does not fit waits
    /// in the unschedulable pool for an event that could help it: in a plan, the only such events
    /// are preemptions (victims' resources and devices freed), after which the entries waiting
    /// for them are tried again. Each entry's last attempt is what the plan reports.
    pub fn plan(&mut self) -> Plan {
        let mut plan = Plan::default();
        let mut queue = SchedulingQueue::new();
        queue.add_all(self.queued());
        let mut now = 0;
        loop {
            self.schedule_ready(&mut queue, now, &mut plan);
            match queue.next_backoff_expiry() {
                Some(t) => now = t,
                None => break,
            }
        }
        plan
    }

    /// Runs every entry that is ready at `now` through its cycle, decisions added to `plan`,
    /// until none is; returns how many cycles ran.
    pub fn schedule_ready(&mut self, queue: &mut SchedulingQueue, now: Millis, plan: &mut Plan) -> usize {
        let mut cycles = 0;
        while let Some(entry) = queue.pop(now) {
            cycles += 1;
            let retry = queue.attempts(entry) > 1;
            let groups = self.entry_groups(entry);
            if retry {
                plan.forget(&self.entry_pods(entry), &groups, entry);
            }
            let attempted = self.schedule(entry, plan);
            if retry {
                plan.settle_groups(&groups);
            }
            if attempted.pending {
                queue.failed(entry, attempted.wake, now);
            } else {
                queue.done(entry);
            }
            if attempted.freed {
                queue.on_event(Wake::ASSIGNED_POD_DELETED.union(Wake::CLAIM_CHANGED), now);
            }
        }
        cycles
    }

    /// After the store added or removed nodes: the per-node caches follow the node count.
    pub fn sync_nodes(&mut self) {
        let n = self.cluster.nodes.len();
        if self.memo.len() != n {
            self.memo.resize(n, ScoreMemo::EMPTY);
            self.dra_memo.resize(n);
            if self.dra.is_some() {
                self.dra_node_generation.resize(n, 0);
            }
        }
        let len = self.cluster.node_order.len();
        if self.next_start_node_index >= len {
            self.next_start_node_index = 0;
        }
    }

    /// The PodGroups a queue entry schedules.
    fn entry_groups(&self, entry: QueueEntry) -> Vec<usize> {
        match entry {
            QueueEntry::Pod(_) => Vec::new(),
            QueueEntry::Group(g) => vec![g],
            QueueEntry::Composite(r) => self.cluster.leaves(r),
        }
    }

    /// The pods a queue entry schedules: the pod, a PodGroup's members, or every member of a
    /// tree's PodGroups.
    fn entry_pods(&self, entry: QueueEntry) -> Vec<PodId> {
        let c = &*self.cluster;
        match entry {
            QueueEntry::Pod(p) => vec![p],
            QueueEntry::Group(g) => c.groups[g].members.clone(),
            QueueEntry::Composite(r) => c.leaves(r).into_iter().flat_map(|g| c.groups[g].members.clone()).collect(),
        }
    }

    /// One queue entry's cycle, its decisions added to `plan`; what it left pending, what that
    /// waits for, and whether it freed anything (preemption victims).
    pub fn schedule(&mut self, entry: QueueEntry, plan: &mut Plan) -> Attempted {
        let (failed_before, victims_before) = (plan.unschedulable.len(), plan.victims());
        match entry {
            QueueEntry::Pod(pod) => match self.schedule_one(pod) {
                Outcome::Placed(node) => plan.placements.push((pod, node)),
                // PostFilter: DefaultPreemption.
                Outcome::Unschedulable(e) => match self.preempt_for_pod(pod, &e) {
                    Some(p) => {
                        plan.placements.push((pod, p.node));
                        let preemption = PodPreemptionResult { pod, victims: p.victims, against_budgets: p.against };
                        plan.pod_preemptions.push(preemption);
                    }
                    None => plan.unschedulable.push((pod, e)),
                },
            },
            QueueEntry::Group(g) => self.schedule_group(g, plan),
            QueueEntry::Composite(r) => self.schedule_composite(r, plan),
        }
        let pending: Vec<PodId> = match entry {
            QueueEntry::Pod(p) if self.cluster.pod(p).state != PodState::Pending => Vec::new(),
            QueueEntry::Pod(p) => vec![p],
            _ => {
                self.entry_pods(entry).into_iter().filter(|p| self.cluster.pod(*p).state == PodState::Pending).collect()
            }
        };
        let wake = plan.unschedulable[failed_before..]
            .iter()
            .filter(|(p, _)| pending.contains(p))
            .fold(Wake::NONE, |w, (_, e)| w.union(wake_for(e)));
        Attempted { pending: !pending.is_empty(), wake, freed: plan.victims() > victims_before }
    }

    /// The pod-group cycle (`scheduleOnePodGroup`, default algorithm): members in priority and
    /// age order, each through Filter, Score and Reserve in the cycle's snapshot so later members
    /// see earlier members' resources and devices; the cycle stops early once `minCount` cannot be
    /// reached. When fewer than `minCount` members (with those already running) fit, or none was
    /// placed, every Reserve is undone in reverse order: no claim stays allocated.
    pub fn schedule_group(&mut self, g: usize, plan: &mut Plan) {
        let c = &*self.cluster;
        let group = &c.groups[g];
        let (min, gang, key) = (group.min_count, group.gang, group.key.clone());
        let Members { members, pending, exist, scheduled } = self.members(g);
        let num_nodes = c.node_order.len();
        let fail_all = |plan: &mut Plan, pods: &[PodId], message: &str| {
            for p in pods {
                plan.unschedulable.push((*p, FitError::group(num_nodes, message.to_string())));
            }
        };
        // A PodGroup whose parent CompositePodGroup is missing waits for it (PreEnqueue); a bad
        // parent chain is the group's error.
        if let Err(e) = c.root(crate::cluster::GroupNode::Group(g)) {
            let (message, outcome) = match e {
                crate::cluster::TreeError::MissingParent(m) => (
                    format!("podgroup {m}; it is not attempted until the parent exists"),
                    GroupOutcome::Waiting { exist },
                ),
                crate::cluster::TreeError::Invalid(m) => (format!("podgroup {key}: {m}"), GroupOutcome::SchedulerError),
            };
            fail_all(plan, &pending, &message);
            plan.groups.push(GroupResult { group: g, outcome, message, preemption: None });
            return;
        }
        // Alpha restriction: every member has the group's priority.
        if let Some(message) = priority_mismatch(c, &c.groups[g].priority, &format!("podgroup {key}"), &pending) {
            fail_all(plan, &pending, &message);
            plan.groups.push(GroupResult {
                group: g,
                outcome: GroupOutcome::SchedulerError,
                message,
                preemption: None,
            });
            return;
        }
        if gang && exist < min {
            let message = format!(
                "podgroup {key} waits for its pods: {exist} of minCount {min} exist; the gang is not attempted until all are created \
                 (muster marks the group PodGroupInitiallyScheduled=False, reason {GANG_WAIT_TIMEOUT_REASON}, after waiting {}s)",
                self.config.gang_wait_timeout_seconds
            );
            fail_all(plan, &pending, &message);
            plan.groups.push(GroupResult {
                group: g,
                outcome: GroupOutcome::Waiting { exist },
                message,
                preemption: None,
            });
            return;
        }
        let topology_key = self.cluster.groups[g].topology_key.clone();
        let attempt = GroupAttempt {
            members: &members,
            pending: &pending,
            topology_key: topology_key.as_deref(),
            scheduled,
            min,
            gang,
            within: None,
        };
        let (result, (victims, against)) = match self.place_group(&attempt) {
            Ok(r) => (r, (Vec::new(), Vec::new())),
            Err(failure) => match self.preempt(
                Preemptor { members: &members, pending: &pending, never: self.never_preempts(g, &pending) },
                |s| s.place_group(&attempt).ok(),
                |r| std::mem::take(&mut r.2),
            ) {
                Ok(p) => (p.placement, (p.victims, p.against_budgets)),
                Err(why_not) => {
                    self.report_group_failure(g, plan, &pending, failure, scheduled);
                    if let Some(last) = plan.groups.last_mut() {
                        last.preemption = Some(format!("would not help: {why_not}"));
                    }
                    return;
                }
            },
        };
        let (placed, failed, _) = result;
        let mut message =
            format!("podgroup {key}: {} placed, {scheduled} already running, minCount {min}", placed.len());
        let preemption = self.victims_text(&victims, &against, &mut message);
        let outcome = GroupOutcome::Scheduled { placed: placed.len(), scheduled };
        plan.groups.push(GroupResult { group: g, outcome, message, preemption });
        plan.preempted.extend(victims.into_iter().map(|v| (v, crate::cluster::GroupNode::Group(g))));
        plan.placements.extend(placed);
        // Members that did not fit wait for the next cycle (basic policy, or beyond minCount).
        plan.unschedulable.extend(failed);
    }

    /// True when PodGroup `g` (or one of its pending pods) has `preemptionPolicy: Never`.
    fn never_preempts(&self, g: usize, pending: &[PodId]) -> bool {
        let c = &*self.cluster;
        let spec = &c.groups[g].group.spec;
        c.never_preempts(spec.preemption_policy.as_deref(), spec.priority_class_name.as_deref())
            || pending.iter().any(|p| {
                let s = c.pod(*p).pod.spec.as_ref();
                c.never_preempts(
                    s.and_then(|s| s.preemption_policy.as_deref()),
                    s.and_then(|s| s.priority_class_name.as_deref()),
                )
            })
    }

    /// What each domain of PodGroup `g`'s topology key would give its cycle now, each trial
    /// rolled back (for `muster why`); empty without a topology constraint. The error says why
    /// there are no domains.
    pub fn domain_trials(&mut self, g: usize) -> Result<Vec<DomainTrial>, String> {
        let Members { members, pending, scheduled, .. } = self.members(g);
        let group = &self.cluster.groups[g];
        let min = group.min_count;
        let Some(key) = group.topology_key.clone() else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for (value, nodes) in self.domains(&key, None, &members)? {
            self.node_filter = Some(self.mask(&nodes));
            let (placed, failed, undo) = self.run_members(&pending, scheduled, min);
            let feasible = !placed.is_empty() && scheduled + placed.len() >= min;
            for r in undo.into_iter().rev() {
                self.unreserve(r);
            }
            out.push(DomainTrial { key: key.clone(), value, nodes, placed, failed, feasible });
        }
        self.node_filter = None;
        Ok(out)
    }

    /// A PodGroup's members now: all, the pending ones in the cycle's order (priority, then age),
    /// how many exist (pending, gated or running) and how many run.
    fn members(&self, g: usize) -> Members {
        let c = &*self.cluster;
        let members = c.groups[g].members.clone();
        let exist = members
            .iter()
            .filter(|m| {
                let state = &c.pod(**m).state;
                matches!(state, PodState::Pending | PodState::Gated(_)) || state.on_node().is_some()
            })
            .count();
        let scheduled = members.iter().filter(|m| c.pod(**m).state.on_node().is_some()).count();
        let pending = c.pending_members(g);
        Members { members, pending, exist, scheduled }
    }

    /// Places the group (in the best topology domain when constrained). On success the members
    /// stay reserved; on failure everything was rolled back.
    fn place_group(&mut self, a: &GroupAttempt<'_>) -> Result<MembersResult, GroupFailure> {
        let GroupAttempt { members, pending, topology_key, scheduled, min, gang, within } = *a;
        match topology_key {
            Some(key) => match self.choose_domain(members, pending, key, scheduled, min, gang, within) {
                Ok(nodes) => self.node_filter = Some(nodes),
                Err(message) => return Err(GroupFailure::Topology(message)),
            },
            None => self.node_filter = within.map(<[bool]>::to_vec),
        }
        let (placed, failed, undo) = self.run_members(pending, scheduled, min);
        self.node_filter = None;
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
        g: usize,
        plan: &mut Plan,
        pending: &[PodId],
        failure: GroupFailure,
        scheduled: usize,
    ) {
        let (result, failed) = self.group_failure(g, pending, failure, scheduled);
        plan.groups.push(result);
        plan.unschedulable.extend(failed);
    }

    /// A failed group cycle's result and its pending members' reasons.
    fn group_failure(
        &self,
        g: usize,
        pending: &[PodId],
        failure: GroupFailure,
        scheduled: usize,
    ) -> (GroupResult, Vec<(PodId, FitError)>) {
        let c = &*self.cluster;
        let group = &c.groups[g];
        let (key, min, gang) = (&group.key, group.min_count, group.gang);
        let num_nodes = c.node_order.len();
        let all =
            |message: &str| pending.iter().map(|p| (*p, FitError::group(num_nodes, message.to_string()))).collect();
        let (placed, failed) = match failure {
            GroupFailure::Topology(message) => {
                let outcome = GroupOutcome::Unschedulable { placed: 0, scheduled, failed: pending.len() };
                let message = format!("podgroup {key}: {message}");
                let failed = all(&message);
                return (GroupResult { group: g, outcome, message, preemption: None }, failed);
            }
            GroupFailure::Members { placed, failed } => (placed, failed),
        };
        if !gang {
            // The basic policy: each member stands alone, and none fitted.
            let outcome = GroupOutcome::Unschedulable { placed: 0, scheduled, failed: failed.len() };
            let message = failed.first().map(|(_, e)| e.message()).unwrap_or_default();
            return (GroupResult { group: g, outcome, message, preemption: None }, failed);
        }
        let first = failed
            .first()
            .map(|(p, e)| format!(" (first failure: {}: {})", c.pod(*p).key, e.message()))
            .unwrap_or_default();
        let message = format!(
            "podgroup {key} cannot be placed together: {placed} of its {} pending pods fit, {} do not, {scheduled} already running, minCount {min}; nothing was placed{first}",
            pending.len(),
            failed.len(),
        );
        let outcome = GroupOutcome::Unschedulable { placed, scheduled, failed: failed.len() };
        let failed = all(&message);
        (GroupResult { group: g, outcome, message, preemption: None }, failed)
    }

    /// Workload-aware preemption (KEP 5710) for a group that does not fit: every running pod of
    /// lower priority is a potential victim — a pod alone, or all running pods of its PodGroup
    /// when that group's `disruptionMode` is `all`. All of them are removed from the snapshot
    /// (their node resources and their devices: claims reserved only by victims are deallocated,
    /// which upstream cannot do yet, KEP 5690); if the group then fits, victims are reprieved one
    /// unit at a time, most important first (higher priority, groups before single pods, more
    /// pods, earlier start), keeping a unit only if the group still fits without it. Returns the
    /// placement and the victims, or why preemption cannot help (the snapshot unchanged).
    fn preempt<R>(
        &mut self,
        preemptor: Preemptor<'_>,
        mut place: impl FnMut(&mut Self) -> Option<R>,
        undo: impl Fn(&mut R) -> Vec<Reserved>,
    ) -> Result<Preempted<R>, String> {
        let Preemptor { members, pending, never } = preemptor;
        let c = &*self.cluster;
        let priority = c.pod(*pending.first().ok_or("no pending member")?).priority;
        if never {
            return Err("the group's preemptionPolicy is Never".into());
        }
        // Victim units: (importance key, pods).
        let mut units: Vec<(UnitKey, Vec<PodId>)> = Vec::new();
        let mut group_units: HashMap<crate::cluster::GroupNode, usize> = HashMap::new();
        for (i, p) in c.pods.iter().enumerate() {
            let PodState::Bound(_) = p.state else { continue };
            if p.priority >= priority || members.contains(&PodId(i as u32)) {
                continue;
            }
            let start = p.pod.status.as_ref().and_then(|s| s.start_time.clone());
            let all_mode = match &p.group {
                Some(Ok(gi)) => disrupted_together(c, *gi),
                _ => None,
            };
            match all_mode {
                Some(node) => {
                    let u = *group_units.entry(node).or_insert_with(|| {
                        units.push((
                            (std::cmp::Reverse(p.priority), false, 0, start.clone(), c.node_key(node).to_string()),
                            Vec::new(),
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
                    units.push(((std::cmp::Reverse(p.priority), true, 0, start, p.key.clone()), vec![PodId(i as u32)]))
                }
            }
        }
        if units.is_empty() {
            return Err(format!("no running pod has a priority lower than {priority}"));
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
        // Remove every potential victim, then try the group.
        let mut removed: Vec<Vec<Evicted>> =
            units.iter().map(|(_, pods)| pods.iter().map(|p| self.evict(*p)).collect()).collect();
        let Some(mut current) = place(self) else {
            let n: usize = removed.iter().map(Vec::len).sum();
            for e in removed.into_iter().rev().flat_map(|u| u.into_iter().rev()) {
                self.restore(e);
            }
            return Err(format!("even with all {n} lower-priority running pods removed, the group does not fit"));
        };
        let mut victims: Vec<PodId> = Vec::new();
        let mut against: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        for u in order {
            let pods = &units[u].1;
            for r in undo(&mut current).into_iter().rev() {
                self.unreserve(r);
            }
            let evicted = std::mem::take(&mut removed[u]);
            for e in evicted.into_iter().rev() {
                self.restore(e);
            }
            match place(self) {
                Some(r) => current = r,
                None => {
                    removed[u] = pods.iter().map(|p| self.evict(*p)).collect();
                    victims.extend(pods.iter().copied());
                    against.extend(violates[u].iter().cloned());
                    current = place(self).expect("the group fitted with these victims removed before");
                }
            }
        }
        victims.sort();
        self.use_disruptions(&victims);
        Ok(Preempted { placement: current, victims, against_budgets: against.into_iter().collect() })
    }

    /// Adds the victims to a group's message; the short preemption summary (`None` without
    /// victims).
    fn victims_text(&self, victims: &[PodId], against: &[String], message: &mut String) -> Option<String> {
        if victims.is_empty() {
            return None;
        }
        let names: Vec<&str> = victims.iter().map(|v| self.cluster.pod(*v).key.as_str()).collect();
        let s = if victims.len() == 1 { "" } else { "s" };
        message.push_str(&format!("; preempted {} lower-priority pod{s}: {}", victims.len(), names.join(", ")));
        let mut summary = format!("preempted {} pod(s)", victims.len());
        if !against.is_empty() {
            let budgets = format!(
                "against PodDisruptionBudget{} {}",
                if against.len() == 1 { "" } else { "s" },
                against.join(", ")
            );
            message.push_str(&format!(" ({budgets}: no other choice left room)"));
            summary.push_str(&format!(", {budgets}"));
        }
        Some(summary)
    }

    /// The victims used up disruptions: later preemptions in this plan see what is left.
    fn use_disruptions(&mut self, victims: &[PodId]) {
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
    fn budget_violations(&self, units: &[(UnitKey, Vec<PodId>)]) -> Vec<Option<String>> {
        let c = &*self.cluster;
        let mut allowed: Vec<i32> = c.budgets.iter().map(|b| b.disruptions_allowed).collect();
        let mut out = vec![None; units.len()];
        for (u, (_, pods)) in units.iter().enumerate() {
            for p in pods {
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
    fn evict(&mut self, pod: PodId) -> Evicted {
        let Some(node) = self.cluster.pod(pod).state.on_node() else {
            unreachable!("only pods on a node are evicted or forgotten")
        };
        let Cluster { nodes, pods, .. } = &mut *self.cluster;
        nodes[node.0 as usize].account(&pods[pod.0 as usize], pod, -1);
        pods[pod.0 as usize].state = PodState::Preempted(node);
        let fresh = self.fresh_generation();
        self.cluster.nodes[node.0 as usize].generation = fresh;
        let mut claims = Vec::new();
        if let Some((ctx, state)) = self.dra.as_mut() {
            let uid = self.cluster.pods[pod.0 as usize].pod.metadata.uid.clone();
            let name = self.cluster.pods[pod.0 as usize].name().to_string();
            let ids: Vec<usize> = self.cluster.pods[pod.0 as usize].claims.iter().flatten().copied().collect();
            for c in ids {
                let info = &mut self.cluster.claims[c];
                claims.push((c, info.claim.status.clone(), info.changed));
                let Some(status) = info.claim.status.as_mut() else { continue };
                if let Some(list) = status.reserved_for.as_mut() {
                    list.retain(|r| {
                        !(r.resource == "pods" && r.name == name && uid.as_ref().is_none_or(|u| *u == r.uid))
                    });
                }
                if status.reserved_for.as_ref().is_none_or(Vec::is_empty) && status.allocation.is_some() {
                    state.remove_claim(&info.claim, ctx.features);
                    let status = info.claim.status.as_mut().expect("checked above");
                    status.allocation = None;
                    status.reserved_for = None;
                }
                info.changed = true;
            }
            self.dra_shared_generation = self.fresh_generation();
            self.dra_node_generation[node.0 as usize] = self.fresh_generation();
        }
        Evicted { pod, node, claims }
    }

    /// Puts back what [`Scheduler::evict`] removed (a victim reprieved).
    fn restore(&mut self, e: Evicted) {
        let Cluster { nodes, pods, .. } = &mut *self.cluster;
        nodes[e.node.0 as usize].account(&pods[e.pod.0 as usize], e.pod, 1);
        pods[e.pod.0 as usize].state = PodState::Bound(e.node);
        let fresh = self.fresh_generation();
        self.cluster.nodes[e.node.0 as usize].generation = fresh;
        if let Some((ctx, state)) = self.dra.as_mut() {
            for (c, status, changed) in e.claims.into_iter().rev() {
                let info = &mut self.cluster.claims[c];
                let had = status.as_ref().and_then(|s| s.allocation.as_ref()).is_some();
                let has = info.claim.status.as_ref().and_then(|s| s.allocation.as_ref()).is_some();
                info.claim.status = status;
                info.changed = changed;
                if had && !has {
                    state.add_claim(&info.claim, ctx.features);
                }
            }
            self.dra_shared_generation = self.fresh_generation();
            self.dra_node_generation[e.node.0 as usize] = self.fresh_generation();
        }
    }

    /// The default group algorithm over `pending` (Filter limited to `node_filter` when set):
    /// each member in turn, Reserve recorded, stopping once `min` is out of reach.
    fn run_members(&mut self, pending: &[PodId], scheduled: usize, min: usize) -> MembersResult {
        let mut undo: Vec<Reserved> = Vec::new();
        let mut placed: Vec<(PodId, NodeId)> = Vec::new();
        let mut failed: Vec<(PodId, FitError)> = Vec::new();
        for (i, &pod) in pending.iter().enumerate() {
            match self.attempt(pod, Some(&mut undo)) {
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

    /// Topology-aware placement (KEP 5732): the nodes carrying `key` (within the parent's
    /// placement), partitioned by its value, are the candidate domains (only the domain of members
    /// already running, if any). The group algorithm runs in each domain and is rolled back;
    /// feasible domains are scored ([`Scheduler::best_domain`]) and the best domain's nodes are
    /// returned.
    #[allow(clippy::too_many_arguments)]
    fn choose_domain(
        &mut self,
        members: &[PodId],
        pending: &[PodId],
        key: &str,
        scheduled: usize,
        min: usize,
        gang: bool,
        within: Option<&[bool]>,
    ) -> Result<Vec<bool>, String> {
        let domains = self.domains(key, within, members)?;
        let mut feasible: Vec<(usize, i64, usize)> = Vec::new(); // (domain, fit score, pods count)
        let mut summaries: Vec<String> = Vec::new();
        for (di, (value, nodes)) in domains.iter().enumerate() {
            self.node_filter = Some(self.mask(nodes));
            let (placed, _, undo) = self.run_members(pending, scheduled, min);
            let ok = !placed.is_empty() && scheduled + placed.len() >= min;
            if ok {
                feasible.push((di, self.most_allocated(nodes), scheduled + placed.len()));
            } else if summaries.len() < 5 {
                summaries.push(format!("{value}: {} of {} fit", placed.len(), pending.len()));
            }
            for r in undo.into_iter().rev() {
                self.unreserve(r);
            }
        }
        self.node_filter = None;
        if feasible.is_empty() {
            let policy = if gang { format!("minCount {min}") } else { "at least one pod".to_string() };
            return Err(format!(
                "no {key} domain holds the group ({policy}, {scheduled} already running): {}{}",
                summaries.join("; "),
                more(domains.len(), summaries.len())
            ));
        }
        Ok(self.mask(&domains[best_domain(&feasible)].1))
    }

    /// The candidate domains of `key` in name order: nodes carrying the label (within the parent's
    /// placement) by value — only the value of `members` already running, if any.
    fn domains(
        &self,
        key: &str,
        within: Option<&[bool]>,
        members: &[PodId],
    ) -> Result<Vec<(String, Vec<NodeId>)>, String> {
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
            return Err(format!("members already running on nodes without the topology label {key}"));
        }
        if running.len() > 1 {
            let values: Vec<&str> = running.iter().flatten().copied().collect();
            return Err(format!("members already running in several {key} domains ({})", values.join(", ")));
        }
        if let Some(Some(v)) = running.first() {
            domains.retain(|d, _| d == v);
        }
        if domains.is_empty() {
            let where_ = if within.is_some() { " inside the parent's placement" } else { "" };
            return Err(format!("no node{where_} has the topology label {key}"));
        }
        Ok(domains.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// A node mask holding `nodes`.
    fn mask(&self, nodes: &[NodeId]) -> Vec<bool> {
        let mut mask = vec![false; self.cluster.nodes.len()];
        for n in nodes {
            mask[n.0 as usize] = true;
        }
        mask
    }

    /// NodeResourcesFit's placement score: MostAllocated over the nodes' summed cpu and memory.
    fn most_allocated(&self, nodes: &[NodeId]) -> i64 {
        let mut total = 0;
        for r in [crate::cluster::ResourceId::CPU, crate::cluster::ResourceId::MEMORY] {
            let (mut alloc, mut req) = (0i64, 0i64);
            for n in nodes {
                let node = self.cluster.node(*n);
                alloc += node.allocatable(r);
                req += node.requested(r);
            }
            if alloc > 0 {
                total += MAX_NODE_SCORE * req.min(alloc) / alloc;
            }
        }
        total / 2
    }

    /// A generation value no state had before ([`Cluster::fresh_generation`]).
    fn fresh_generation(&mut self) -> u64 {
        self.cluster.fresh_generation()
    }

    /// Unreserve: the pod leaves the node and its claims are as before its Reserve.
    fn unreserve(&mut self, r: Reserved) {
        let Cluster { nodes, pods, .. } = &mut *self.cluster;
        let node = &mut nodes[r.node.0 as usize];
        node.account(&pods[r.pod.0 as usize], r.pod, -1);
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
        self.attempt(pod_id, None)
    }

    /// Filter, Score and Reserve for one pod; with `undo`, what Reserve changed is recorded so
    /// that the pod-group cycle can roll it back.
    fn attempt(&mut self, pod_id: PodId, undo: Option<&mut Vec<Reserved>>) -> Outcome {
        let cluster = &*self.cluster;
        let pod = cluster.pod(pod_id);
        let state = CycleState::new(pod);
        let num_nodes = cluster.node_order.len();
        let dra = self.dra.as_ref();
        let pre_filter = if num_nodes == 0 {
            Some("no nodes available to schedule pods".to_string())
        } else {
            pre_filter(&state, cluster, dra.is_some(), undo.is_some()).or_else(|| {
                let (ctx, _) = dra?;
                dynamic_resources::pre_filter_devices(pod, cluster, ctx)
            })
        };
        if let Some(message) = pre_filter {
            return Outcome::Unschedulable(FitError {
                num_all_nodes: num_nodes,
                rejections: Vec::new(),
                node_statuses: Vec::new(),
                pre_filter_message: Some(message),
                group_message: None,
            });
        }
        let to_find = self.num_feasible_nodes_to_find(num_nodes);

        // Filter, starting where the previous cycle stopped. Rejected nodes are only counted
        // here; their reasons are worked out below if the pod fits nowhere (filters are pure, so
        // running them again gives the same verdicts).
        self.feasible.clear();
        self.rejected.clear();
        let mut processed = 0;
        let (before, after) = cluster.node_order.split_at(self.next_start_node_index);
        // Most pods ask only for cpu, memory and ephemeral-storage and set no node constraints; on
        // an untainted, schedulable node their whole Filter chain is NodeResourcesFit's few
        // comparisons.
        let has_claims = !pod.claims.is_empty() || !pod.dra_extended.is_empty();
        let simple_pod =
            state.only_inline_requests && state.node_selector.is_none() && state.required_affinity.is_none();
        // Filter with DynamicResources last, as in kube-scheduler's default order. A problem no
        // node can fix fails the whole attempt.
        let (pending, fingerprint) =
            if has_claims { dynamic_resources::pending_claims(pod, cluster) } else { (Vec::new(), 0) };
        let memo = &mut self.dra_memo;
        let generations = (&self.dra_node_generation, self.dra_shared_generation);
        // The special claim for extended resources served through DRA, one variant per set of
        // resources the nodes do not advertise (usually one).
        let mut extended_claims: Vec<ExtendedClaim> = Vec::new();
        let mut last_table: Option<(u64, usize)> = None;
        // DynamicResources' Filter for one node; the allocator's verdict is left in the memo.
        let mut dra_filter = |memo: &mut DraMemo, node_id: NodeId| -> DraFilter {
            let Some((ctx, alloc_state)) = dra.filter(|_| has_claims) else { return DraFilter::Fits };
            let node = cluster.node(node_id);
            if let Err(r) = dynamic_resources::allocated_claims_fit(pod, node, cluster) {
                return DraFilter::Rejected(r);
            }
            let mask = dynamic_resources::extended_mask(pod, node);
            let mut fingerprint = fingerprint;
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
            if memo.get(table, node_id, at).is_none() {
                let v = match extended {
                    None => dynamic_resources::allocate(&pending, node, ctx, alloc_state),
                    Some(claim) => {
                        let mut claims = pending.clone();
                        claims.push(claim);
                        dynamic_resources::allocate(&claims, node, ctx, alloc_state)
                    }
                };
                memo.put(table, node_id, at, v);
            }
            DraFilter::Memo(table)
        };
        let node_filter = self.node_filter.as_deref();
        for &node_id in after.iter().chain(before) {
            processed += 1;
            if node_filter.is_some_and(|f| !f[node_id.0 as usize]) {
                continue;
            }
            let node = cluster.node(node_id);
            let mut feasible = if simple_pod && !node.unschedulable && !node.has_taints {
                fits_inline(&state, node)
            } else {
                run_filters(&state, node, cluster).is_ok()
            };
            if feasible && has_claims {
                let verdict = match dra_filter(memo, node_id) {
                    DraFilter::Fits => None,
                    DraFilter::Rejected(_) => {
                        feasible = false;
                        None
                    }
                    DraFilter::Memo(t) => memo.last(t, node_id),
                };
                match verdict {
                    Some(Err(message)) => {
                        return Outcome::Unschedulable(FitError {
                            num_all_nodes: num_nodes,
                            rejections: Vec::new(),
                            node_statuses: Vec::new(),
                            pre_filter_message: Some(message.clone()),
                            group_message: None,
                        });
                    }
                    Some(Ok(Err(_))) => feasible = false,
                    Some(Ok(Ok(_))) | None => {}
                }
            }
            if feasible {
                self.feasible.push(node_id);
                if self.feasible.len() >= to_find {
                    break;
                }
            } else {
                self.rejected.push(node_id);
            }
        }
        self.next_start_node_index = (self.next_start_node_index + processed) % num_nodes;

        if self.feasible.is_empty() {
            let mut rejections: Vec<Rejection> = Vec::new();
            let mut rejection_ids: HashMap<Rejection, u16> = HashMap::new();
            let mut node_statuses: Vec<(NodeId, u16)> = Vec::with_capacity(self.rejected.len());
            for &node_id in &self.rejected {
                let node = cluster.node(node_id);
                let r = match run_filters(&state, node, cluster) {
                    Err(r) => r,
                    Ok(()) => match dra_filter(memo, node_id) {
                        DraFilter::Rejected(r) => r,
                        DraFilter::Memo(t) => match memo.last(t, node_id) {
                            Some(Ok(Err(r))) => r.clone(),
                            _ => unreachable!("a node Filter rejected once is rejected again: filters are pure"),
                        },
                        DraFilter::Fits => {
                            unreachable!("a node Filter rejected once is rejected again: filters are pure")
                        }
                    },
                };
                let next = rejections.len() as u16;
                let id = *rejection_ids.entry(r.clone()).or_insert_with(|| {
                    rejections.push(r);
                    next
                });
                node_statuses.push((node_id, id));
            }
            node_statuses.sort_unstable();
            // Inside a topology domain, the domain's nodes are all the nodes this attempt had.
            let num_all_nodes = match &self.node_filter {
                Some(f) => f.iter().filter(|in_domain| **in_domain).count(),
                None => num_nodes,
            };
            return Outcome::Unschedulable(FitError {
                num_all_nodes,
                rejections,
                node_statuses,
                pre_filter_message: None,
                group_message: None,
            });
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
            };
            scoring.select_host(&state)
        };
        // Reserve: the pod is assumed onto the node for every later cycle, and its claims get
        // the allocation Filter found for that node.
        // Filter's verdict for the chosen node is remembered (or, without the memo, computed
        // again: the allocator is deterministic).
        let allocation: Option<NodeAllocation> = if has_claims {
            match dra_filter(memo, chosen) {
                DraFilter::Fits => None,
                DraFilter::Memo(t) => {
                    // A verdict that takes devices goes stale at this Reserve (the generations
                    // move on) unless a gang rolls the Reserve back: only then is it kept.
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
        let generations = (
            self.cluster.nodes[chosen.0 as usize].generation,
            self.dra_node_generation.get(chosen.0 as usize).copied().unwrap_or(0),
            self.dra_shared_generation,
        );
        let fresh = self.fresh_generation();
        let Cluster { nodes, pods, .. } = &mut *self.cluster;
        debug_assert_eq!(pods[pod_id.0 as usize].state, PodState::Pending, "Reserve of a pod that is not pending");
        nodes[chosen.0 as usize].account(&pods[pod_id.0 as usize], pod_id, 1);
        nodes[chosen.0 as usize].generation = fresh;
        pods[pod_id.0 as usize].state = PodState::Assumed(chosen);
        let mut claim_undo = undo.is_some().then(dynamic_resources::ClaimUndo::default);
        if has_claims && let Some((ctx, alloc_state)) = self.dra.as_mut() {
            let allocation: NodeAllocation = allocation.unwrap_or_default();
            // Devices taken change what the allocator would answer: for this node only when they
            // come from its own pools, for every node otherwise.
            if takes_devices(&allocation) {
                let node_name = self.cluster.nodes[chosen.0 as usize].name().to_string();
                let fresh = self.cluster.fresh_generation();
                if dynamic_resources::node_local(&allocation, &node_name, ctx) {
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
            undo.push(Reserved { pod: pod_id, node: chosen, claims: claim_undo.unwrap_or_default(), generations });
        }
        Outcome::Placed(chosen)
    }
}

/// The Score phase's view of the scheduler: read-only inputs and reusable buffers.
struct Scoring<'a> {
    cluster: &'a Cluster,
    config: &'a SchedulerConfig,
    scored: &'a [ScoredResource],
    weight_sum: Divisor,
    feasible: &'a [NodeId],
    scores: &'a mut Vec<i64>,
    plugin_scores: &'a mut Vec<i64>,
    memo: &'a mut [ScoreMemo],
}

/// A node's last NodeResourcesFit + BalancedAllocation score and what it was computed for.
#[derive(Clone, Copy)]
struct ScoreMemo {
    shape: u32,
    generation: u64,
    score: i64,
}

impl ScoreMemo {
    const EMPTY: ScoreMemo = ScoreMemo { shape: u32::MAX, generation: u64::MAX, score: 0 };
}

impl Scoring<'_> {
    /// Score every feasible node, normalize per plugin, weigh, and take the best. Ties go to the
    /// node Filter reached first (kube-scheduler picks among ties at random; muster stays
    /// deterministic).
    fn select_host(&mut self, state: &CycleState<'_>) -> NodeId {
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
                let raw =
                    node_resources_fit::score(state, node, self.config.scoring_strategy, self.scored, self.weight_sum);
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
        if w.node_affinity != 0 && !state.preferred_affinity.is_empty() {
            self.plugin_scores.clear();
            self.plugin_scores.extend(self.feasible.iter().map(|n| node_affinity::score(state, cluster.node(*n))));
            normalize(self.plugin_scores, false);
            for (s, p) in self.scores.iter_mut().zip(self.plugin_scores.iter()) {
                *s += w.node_affinity * p;
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

/// PreFilter: what rules a pod out before any node is tried: DynamicResources' claim checks (a
/// plan without DRA inputs cannot serve claims), and GangScheduling's PreEnqueue (a pod naming a
/// missing PodGroup waits; a member is only scheduled inside its group's cycle).
fn pre_filter(state: &CycleState<'_>, cluster: &Cluster, dra: bool, in_group_cycle: bool) -> Option<String> {
    let spec = state.pod.pod.spec.as_ref()?;
    let extended = !state.pod.dra_extended.is_empty();
    if extended || !state.pod.claims.is_empty() || spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        if !dra {
            return Some("pod uses DRA resource claims, but the plan has no DRA inputs".into());
        }
        if let Some(msg) = dynamic_resources::pre_filter(state.pod, cluster) {
            return Some(msg);
        }
    }
    match &state.pod.group {
        // GangScheduling's PreEnqueue: the pod waits until its PodGroup exists.
        Some(Err(msg)) => return Some(format!("{msg}: the pod waits until its PodGroup exists")),
        Some(Ok(_)) if !in_group_cycle => {
            return Some("pod belongs to a PodGroup: it is scheduled in its group's cycle".into());
        }
        _ => {}
    }
    None
}

/// The Filter plugins in kube-scheduler's order; the first rejection wins.
pub fn run_filters(
    state: &CycleState<'_>,
    node: &crate::cluster::NodeInfo,
    cluster: &Cluster,
) -> Result<(), Rejection> {
    node_unschedulable::filter(state, node)?;
    taint_toleration::filter(state, node)?;
    node_affinity::filter(state, node)?;
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

/// The placement scorers over feasible domains `(domain, MostAllocated score, pods in the
/// domain)`: bin packing plus the members the domain holds, normalized to the best; ties go to the
/// first domain by value (upstream: random).
fn best_domain(feasible: &[(usize, i64, usize)]) -> usize {
    let best_count = feasible.iter().map(|f| f.2).max().unwrap_or(1).max(1) as i64;
    let score = |f: &(usize, i64, usize)| f.1 + MAX_NODE_SCORE * f.2 as i64 / best_count;
    feasible
        .iter()
        .max_by(|a, b| score(a).cmp(&score(b)).then_with(|| b.0.cmp(&a.0)))
        .expect("at least one feasible domain")
        .0
}

/// "; N more" when a list shows `shown` of `total` entries.
fn more(total: usize, shown: usize) -> String {
    let n = total.saturating_sub(shown);
    if n > 0 { format!("; {n} more") } else { String::new() }
}

/// The group whose running pods are preempted together with a pod of PodGroup `g`: the highest
/// group of its tree with `disruptionMode: all` (the PodGroup itself or an ancestor
/// CompositePodGroup); `None` when every level is `single`.
fn disrupted_together(c: &Cluster, g: usize) -> Option<crate::cluster::GroupNode> {
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

/// The alpha restriction on a group (or tree) and its pods: they all have the group's priority,
/// resolved as admission resolves it. The SchedulerError message, or `None` when it holds.
fn priority_mismatch(c: &Cluster, priority: &Result<i32, String>, what: &str, pods: &[PodId]) -> Option<String> {
    let priority = match priority {
        Ok(p) => *p,
        Err(e) => return Some(format!("{what}: spec.priorityClassName: {e}")),
    };
    let odd: Vec<String> = pods
        .iter()
        .map(|p| c.pod(*p))
        .filter(|p| p.priority != priority)
        .map(|p| format!("{} has {}", p.key, p.priority))
        .collect();
    (!odd.is_empty()).then(|| {
        format!(
            "{what} has priority {priority}, but {}; every member must have the group's priority (set the same priorityClassName on the group and its pods)",
            odd.join(", ")
        )
    })
}
