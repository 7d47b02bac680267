//! The scheduler: its configuration, the loop over the queue (`plan`, `schedule_ready`), and one
//! queue entry's cycle (`schedule`), dispatched to the files under `cycle/` — a pod's
//! PreFilter, Filter, Score and Reserve as kube-scheduler's `scheduleOne` does them, a PodGroup's
//! or a tree's cycle, preemption, assumed pods.

use crate::cluster::{Cluster, CompositeId, GroupId, NodeId, PodId, PodState};
use crate::dra_memo::DraMemo;
use crate::fastdiv::Divisor;
use crate::framework::FitError;
use crate::plugins::dynamic_resources::DraContext;
use crate::plugins::inter_pod_affinity::InterPodAffinityArgs;
use crate::plugins::node_resources_fit::{ScoredResource, ScoringStrategy};
use crate::plugins::pod_topology_spread::PodTopologySpreadArgs;
use crate::queue::{Checked, Millis, OrderKey, SchedulingQueue, Wake};
use crate::topology::TopologyCache;
use muster_alloc::AllocatedState;

mod assume;
mod attempt;
pub mod bound_wait;
mod composite;
pub mod device_changes;
mod device_domains;
mod equivalence;
mod gang_bound;
mod group;
pub mod hints;
mod kept_verdicts;
mod pod_preemption;
mod preemption;
mod profiles;
pub mod reasons;
mod scoring;
mod unschedulable_pods;
mod victim_memo;

pub use attempt::{Reserved, run_all_filters, run_filters};
use bound_wait::BoundEvent;
pub use bound_wait::RepeatedFailures;
pub use composite::CompositeResult;
pub use group::{DomainTrial, GANG_WAIT_TIMEOUT_REASON};
use group::{GroupAttempt, Members, best_domain, more, priority_mismatch};
use preemption::{Evicted, Preemptor, UnitKey, UnitPods};
pub use profiles::Profile;
pub use reasons::{
    DomainError, GroupReason, InvalidTree, Preemption, PriorityMismatch, TreeReason, Victims, WouldNotHelp,
};
use scoring::{ScoreMemo, Scoring};
pub use unschedulable_pods::UnschedulablePods;

/// Score plugin weights (the defaults are kube-scheduler's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScoreWeights {
    pub node_resources_fit: i64,
    pub balanced_allocation: i64,
    pub taint_toleration: i64,
    pub node_affinity: i64,
    pub pod_topology_spread: i64,
    pub inter_pod_affinity: i64,
    pub image_locality: i64,
    pub volume_binding: i64,
}

impl Default for ScoreWeights {
    fn default() -> Self {
        ScoreWeights {
            node_resources_fit: 1,
            balanced_allocation: 1,
            taint_toleration: 3,
            node_affinity: 2,
            pod_topology_spread: 2,
            inter_pod_affinity: 2,
            image_locality: 1,
            volume_binding: 1,
        }
    }
}

/// PlacementScore plugin weights (`profiles[].plugins.placementScore`; both 1 by default): how a
/// PodGroup's candidate topology domains are ranked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementWeights {
    /// NodeResourcesFit's placement scorer: MostAllocated over the domain's nodes.
    pub node_resources_fit: i64,
    /// PodGroupPodsCount: the group's pods the domain holds, relative to the best domain.
    pub pod_group_pods_count: i64,
}

impl Default for PlacementWeights {
    fn default() -> Self {
        PlacementWeights { node_resources_fit: 1, pod_group_pods_count: 1 }
    }
}

/// How the cycle is tuned (the subset of `KubeSchedulerConfiguration` muster honours).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    pub scoring_strategy: ScoringStrategy,
    /// RequestedToCapacityRatio's shape (scores scaled to 0..=100), used with that strategy.
    pub utilization_shape: Vec<crate::plugins::node_resources_fit::ShapePoint>,
    /// Resource names and weights NodeResourcesFit scores; default cpu and memory, weight 1.
    pub scoring_resources: Vec<(String, i64)>,
    pub weights: ScoreWeights,
    /// `percentageOfNodesToScore`: 0 is kube-scheduler's adaptive default; 100 tries every node.
    pub percentage_of_nodes_to_score: u32,
    /// How long a gang may wait for its pods before muster marks it (upstream has no such field;
    /// its only wait is a fixed 5-minute Permit timeout, removed in 1.38).
    pub gang_wait_timeout_seconds: u64,
    pub placement_weights: PlacementWeights,
    /// `podInitialBackoffSeconds` and `podMaxBackoffSeconds`, in milliseconds.
    pub backoff: crate::queue::Backoff,
    /// PodTopologySpread's `pluginConfig` args.
    pub pod_topology_spread: PodTopologySpreadArgs,
    /// InterPodAffinity's `pluginConfig` args.
    pub inter_pod_affinity: InterPodAffinityArgs,
    /// NodeAffinity's `addedAffinity`: node affinity every pod must also meet (and prefer).
    pub added_affinity: Option<AddedAffinity>,
    /// VolumeBinding's `bindTimeoutSeconds`: how long a live binding cycle waits for the claims
    /// its PreBind bound or asked to provision to be bound (the engine itself never waits).
    pub volume_bind_timeout_seconds: u64,
    /// VolumeBinding's `shape` (scores scaled to 0..=100): how its Score rates the storage
    /// utilization of a node; by default the emptier the better.
    pub volume_binding_shape: Vec<crate::plugins::node_resources_fit::ShapePoint>,
    /// DynamicResources' `bindingTimeout`, in milliseconds: how long a live binding cycle waits
    /// for devices' binding conditions.
    pub dra_binding_timeout_ms: u64,
    /// Further profiles (`KubeSchedulerConfiguration.profiles[1..]` that schedule differently):
    /// a pod whose `spec.schedulerName` names one is scheduled with its configuration, every
    /// other pod with this one. Their own `profiles` are not read; the queue's backoff and the
    /// gang wait are this configuration's.
    pub profiles: Vec<Profile>,
    /// Beyond upstream: when a victim unit put back breaks the placement workload-aware
    /// preemption found, search for another placement with it back before giving up on it —
    /// the members it displaced moved, the others kept (a gang without a topology domain), else
    /// the group placed again — (upstream keeps its first placement and evicts every unit in its
    /// way). Off by default.
    pub reprieve_search: bool,
}

/// NodeAffinity's `addedAffinity` (a `NodeAffinity`), comparable as configuration is.
#[derive(Clone, Debug, PartialEq)]
pub struct AddedAffinity(pub k8s_openapi::api::core::v1::NodeAffinity);

impl Eq for AddedAffinity {}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            scoring_strategy: ScoringStrategy::LeastAllocated,
            utilization_shape: Vec::new(),
            scoring_resources: vec![("cpu".into(), 1), ("memory".into(), 1)],
            weights: ScoreWeights::default(),
            percentage_of_nodes_to_score: 0,
            gang_wait_timeout_seconds: 300,
            placement_weights: PlacementWeights::default(),
            backoff: crate::queue::Backoff::default(),
            pod_topology_spread: PodTopologySpreadArgs::default(),
            inter_pod_affinity: InterPodAffinityArgs::default(),
            added_affinity: None,
            volume_bind_timeout_seconds: 600,
            volume_binding_shape: crate::plugins::volume_binding::DEFAULT_SHAPE.to_vec(),
            dra_binding_timeout_ms: 600_000,
            profiles: Vec::new(),
            reprieve_search: false,
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
    /// Pods that fit nowhere, in queue order (a failed group's members share one verdict).
    pub unschedulable: UnschedulablePods,
    /// What each PodGroup's cycle decided, in queue order.
    pub groups: Vec<GroupResult>,
    /// Running pods preempted to make room for a PodGroup or a CompositePodGroup tree.
    pub preempted: Vec<(PodId, crate::cluster::GroupNode)>,
    /// What each CompositePodGroup tree's cycle decided, in queue order.
    pub composites: Vec<CompositeResult>,
    /// Pods outside groups placed by preempting lower-priority pods (DefaultPreemption).
    pub pod_preemptions: Vec<PodPreemptionResult>,
    /// Gang cycles that failed on the gang bound exactly as their last one did: counted, with
    /// no result of their own ([`bound_wait`]).
    pub repeated: RepeatedFailures,
    /// The pods of `unschedulable[..indexed.0]`, one bit per pod id: a retry forgets an earlier
    /// reason without searching the whole list when the pod has none in this plan (the usual
    /// case in a world that makes one plan per batch).
    indexed: (usize, PodBits),
    /// The groups with a result in `groups[..groups_indexed.0]` (and perhaps some without one
    /// any more, never fewer): a retry looks through `groups` only when its group has one (a
    /// world that makes one plan per batch retries hundreds of waiting gangs in one).
    groups_indexed: (usize, IdSet<GroupId>),
    /// The queue's count of pops when this plan's first cycle began
    /// ([`crate::queue::SchedulingQueue::pops`]; a plan is made from one queue): an entry popped
    /// before that count has nothing in this plan to forget.
    began: Option<u64>,
}

type IdSet<T> = std::collections::HashSet<T, std::hash::BuildHasherDefault<muster_cel::IdHasher>>;

/// A set of pods as one bit per pod id (ids are slots: dense).
#[derive(Clone, Debug, Default)]
struct PodBits(Vec<u64>);

impl PodBits {
    fn insert(&mut self, p: PodId) {
        let word = p.0 as usize / 64;
        if word >= self.0.len() {
            self.0.resize(word + 1, 0);
        }
        self.0[word] |= 1 << (p.0 % 64);
    }

    fn contains(&self, p: PodId) -> bool {
        self.0.get(p.0 as usize / 64).is_some_and(|w| w & (1 << (p.0 % 64)) != 0)
    }

    fn remove(&mut self, p: PodId) {
        if let Some(w) = self.0.get_mut(p.0 as usize / 64) {
            *w &= !(1 << (p.0 % 64));
        }
    }
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
    /// Which of those events the pod's hints check against the event's object.
    pub checked: Checked,
    /// Running pods were preempted: their resources and devices are free.
    pub freed: bool,
}

impl Plan {
    /// How many running pods this plan preempted so far.
    fn victims(&self) -> usize {
        self.preempted.len() + self.pod_preemptions.iter().map(|p| p.victims.len()).sum::<usize>()
    }

    /// Whether some of `groups` may have a result in this plan (never false when one has).
    fn has_group_result(&mut self, groups: &[GroupId]) -> bool {
        let (seen, index) = &mut self.groups_indexed;
        index.extend(self.groups[(*seen).min(self.groups.len())..].iter().map(|r| r.group));
        *seen = self.groups.len();
        groups.iter().any(|g| index.contains(g))
    }

    /// Whether some of `pods` have a verdict in this plan (the index of pods with one brought up
    /// to date first).
    fn has_pod_result(&mut self, pods: &[PodId]) -> bool {
        let (seen, index) = &mut self.indexed;
        self.unschedulable.pods_from(*seen).iter().for_each(|p| index.insert(*p));
        *seen = self.unschedulable.len();
        pods.iter().any(|p| index.contains(*p))
    }

    /// Forgets what an earlier attempt of `entry` reported as unschedulable, before the entry
    /// is tried again: its pods' reasons, and its groups' results unless they were scheduled
    /// (a scheduled group stays scheduled; a new result adds what it placed).
    fn forget(&mut self, pods: &[PodId], groups: &[GroupId], entry: QueueEntry) {
        if self.has_pod_result(pods) {
            let index = &mut self.indexed.1;
            let pods: std::collections::HashSet<PodId> = pods.iter().copied().collect();
            self.unschedulable.retain(|p| !pods.contains(&p));
            pods.iter().for_each(|p| index.remove(*p));
            self.indexed.0 = self.unschedulable.len();
        }
        let scheduled = |o: &GroupOutcome| matches!(o, GroupOutcome::Scheduled { .. });
        if self.has_group_result(groups) {
            self.groups.retain(|r| !groups.contains(&r.group) || scheduled(&r.outcome));
            self.groups_indexed.0 = self.groups.len();
        }
        if let QueueEntry::Composite(r) = entry {
            self.composites.retain(|t| t.composite != r || scheduled(&t.outcome));
        }
    }

    /// Whether nothing in the plan is about `pods`, `groups` or tree `entry` (what
    /// [`Plan::forget`] would forget).
    fn holds_nothing_of(&mut self, pods: &[PodId], groups: &[GroupId], entry: QueueEntry) -> bool {
        let tree = |t: &CompositeResult| QueueEntry::Composite(t.composite) == entry;
        !self.has_pod_result(pods)
            && !self.groups.iter().any(|r| groups.contains(&r.group))
            && !self.composites.iter().any(tree)
    }

    /// After a retry: a group scheduled by an earlier attempt keeps its first result, with the
    /// pods a later scheduled attempt placed added to it.
    fn settle_groups(&mut self, groups: &[GroupId]) {
        for &g in groups {
            let mut at = self.groups.iter().enumerate().filter(|(_, r)| r.group == g).map(|(i, _)| i);
            let (Some(first), Some(second)) = (at.next(), at.next()) else { continue };
            let later = self.groups.remove(second);
            // Every result was indexed just above: the set still holds every group with one.
            self.groups_indexed.0 = self.groups.len();
            let result = &mut self.groups[first];
            if let (GroupOutcome::Scheduled { placed, .. }, GroupOutcome::Scheduled { placed: more, .. }) =
                (&mut result.outcome, later.outcome)
            {
                *placed += more;
                if let GroupReason::Scheduled { placed, .. } = std::sync::Arc::make_mut(&mut result.reason) {
                    *placed += more;
                }
            }
        }
    }
}

/// The events that could help `pod`, which failed with `e` (the rejecting plugins' queueing
/// hints); any event for a failure not tied to a Filter plugin — but another pod's arrival on a
/// node or relabeling there only for a pod with hard spread constraints or required pod
/// (anti-)affinity, as upstream's PodTopologySpread and InterPodAffinity hints skip the others.
pub fn wake_for(pod: &crate::cluster::PodInfo, e: &FitError, spread: &PodTopologySpreadArgs) -> Wake {
    wake_for_pods([pod], e, spread)
}

/// [`wake_for`] over pods that share the verdict `e` (a failed group's members): what could help
/// any of them (nothing, for no pods).
pub fn wake_for_pods<'p>(
    pods: impl IntoIterator<Item = &'p crate::cluster::PodInfo>,
    e: &FitError,
    spread: &PodTopologySpreadArgs,
) -> Wake {
    let wake = if e.pre_filter.is_some() || e.group.is_some() || e.rejections().is_empty() {
        Wake::ANY
    } else {
        e.rejections().iter().fold(Wake::NONE, |w, r| w.union(Wake::for_plugin(r.plugin)))
    };
    let narrow = wake.without(Wake::ASSIGNED_POD_ADDED.union(Wake::ASSIGNED_POD_LABELS_CHANGED));
    use crate::plugins::{inter_pod_affinity, pod_topology_spread};
    let mut pods = pods.into_iter().peekable();
    if pods.peek().is_none() {
        Wake::NONE
    } else if narrow == wake
        || pods.any(|pod| pod_topology_spread::may_filter(pod, spread) || inter_pod_affinity::has_required_terms(pod))
    {
        wake
    } else {
        narrow
    }
}

/// One entry of the scheduling queue: a pod, or a PodGroup whose pending members are scheduled
/// together (kube-scheduler's `QueuedPodGroupInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueueEntry {
    Pod(PodId),
    Group(GroupId),
    /// A root CompositePodGroup: its whole tree of groups in one cycle.
    Composite(CompositeId),
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
    pub group: GroupId,
    pub outcome: GroupOutcome,
    /// The reason, as the condition's message and the members' unschedulable reason say it
    /// (shared with the members' [`FitError`]s).
    pub reason: std::sync::Arc<GroupReason>,
    /// What workload-aware preemption did or why it could not help; `None` when it was not needed.
    pub preemption: Option<Preemption>,
}

impl GroupResult {
    /// A result whose reason no member shares yet.
    pub fn new(group: GroupId, outcome: GroupOutcome, reason: GroupReason) -> Self {
        GroupResult { group, outcome, reason: std::sync::Arc::new(reason), preemption: None }
    }

    /// The reason rendered: the condition's message.
    pub fn message(&self) -> String {
        self.reason.to_string()
    }

    /// Each of `pods` fails with this result's reason, one verdict shared (`num_nodes`: the
    /// nodes it speaks for).
    fn member_errors(&self, pods: &[PodId], num_nodes: usize) -> UnschedulablePods {
        let mut failed = UnschedulablePods::default();
        failed.push_shared(pods, FitError::group(num_nodes, self.reason.clone()));
        failed
    }
}

/// The scheduler over one snapshot. Decisions depend only on the snapshot and the config.
pub struct Scheduler<'c, C = &'c mut Cluster> {
    cluster: C,
    config: SchedulerConfig,
    /// DRA inputs and the devices in use, when the plan has DRA objects.
    dra: Option<(device_changes::DraHold<'c>, AllocatedState)>,
    /// The allocator's verdicts per (claim-spec fingerprint, node), valid while the node's
    /// generation and the shared-pool generation are the ones recorded.
    dra_memo: DraMemo,
    /// Bumped when an allocation takes devices of the node's own pools / of shared pools.
    dra_node_generation: Vec<u64>,
    /// Per node, its device epoch: moved by any change of its slices or of the Node, so that a
    /// verdict kept for a state of its devices ([`crate::dra_memo::HeldKey`]) is read only while
    /// the node sees the devices it saw.
    dra_device_epoch: Vec<u64>,
    dra_shared_generation: u64,
    scored: Vec<ScoredResource>,
    weight_sum: Divisor,
    /// The profiles by `schedulerName` (`config`, `scored` and `weight_sum` are the active one's).
    profiles: profiles::Profiles,
    next_start_node_index: usize,
    feasible: Vec<NodeId>,
    rejected: Vec<NodeId>,
    scores: Vec<i64>,
    plugin_scores: Vec<i64>,
    memo: Vec<ScoreMemo>,
    /// During a topology-constrained group cycle: the nodes of the domain being tried.
    node_filter: Option<Vec<bool>>,
    /// During a group cycle with a device topology: the device domain being tried.
    device_filter: Option<std::sync::Arc<device_domains::DeviceRestriction>>,
    /// Pods found unschedulable (preemption included) since the cluster last changed, one per
    /// class of equivalent pods ([`equivalence::equivalent`]): a pod equivalent to one of them
    /// gets its verdict without a cycle. Emptied at every batch and whenever anything is placed
    /// or preempted.
    failed_classes: Vec<equivalence::FailedClass>,
    /// The claims' spec classes and the pods' classes, for comparing equivalent pods.
    classes: equivalence::Classes,
    /// Attempts answered from `failed_classes` (for benchmarks).
    pub reused_verdicts: u64,
    /// The last verdicts of pods that fit nowhere, per node: the next attempt filters only the
    /// nodes that changed since ([`kept_verdicts`]). Used with `reuse_verdicts`.
    kept: kept_verdicts::KeptVerdicts,
    /// What classic preemption found per node for classes of equivalent pods.
    victim_memo: victim_memo::VictimMemo,
    /// The pod whose last attempt over every node had Filter verdicts that depend on each node
    /// alone (set by that attempt, for the preemption that may follow it).
    per_node_pod: Option<PodId>,
    /// Nodes whose preemption finding was reused from [`victim_memo`] (for benchmarks).
    pub preemption_findings_reused: u64,
    /// Nodes taken as rejected from `kept` without a Filter, so far (for benchmarks and tests).
    pub kept_rejections: u64,
    /// Kept verdicts that stood after a look at only the nodes the node journal listed.
    pub journal_verdicts: u64,
    /// At most the lowest priority of a bound pod (`i32::MAX`: none); `None` until counted. A
    /// priority at or below it has no lower-priority pod to preempt. Bound pods only leave
    /// during cycles (preemption's evictions; a trial's restores bring back only what the trial
    /// evicted), and a change of the store keeps it only when it cannot lower it or lowers it to
    /// the pod that came to a node ([`Scheduler::apply_change`]): a floor kept lower than the
    /// lowest is sound (preemption then searches and finds no victim, as it would have said).
    /// Forgotten by any other change from outside.
    bound_floor: Option<i32>,
    reuse_verdicts: bool,
    /// PodTopologySpread's and InterPodAffinity's domains and per-node counts.
    topology: TopologyCache,
    /// A gang cycle known to fail from the nodes' free resources and devices fails without
    /// trying its members ([`gang_bound`]); off by default, so that a plan's reasons name the
    /// first member that did not fit.
    gang_bound: bool,
    /// Each node's free devices as last counted, for that bound.
    device_room: Vec<gang_bound::DeviceRoom>,
    /// The bound's counts over every node, per need, kept up to date from the node journal (the
    /// gangs of one shape that wait together are counted once, not once each).
    room_counts: Vec<gang_bound::RoomCount>,
    /// Reads of `room_counts` so far (which one was read least recently).
    room_reads: u64,
    /// What the last cycles of gangs the bound failed read and reported ([`bound_wait`]), by
    /// group.
    bound_waits: bound_wait::BoundWaits,
}

impl<'c, C: std::ops::DerefMut<Target = Cluster>> Scheduler<'c, C> {
    pub fn new(mut cluster: C, config: SchedulerConfig) -> Self {
        let (scored, weight_sum) = profiles::scored_resources(&config, &mut cluster);
        let profiles = profiles::Profiles::new(&config, &mut cluster);
        let num_nodes = cluster.nodes.len();
        let memo = vec![ScoreMemo::EMPTY; num_nodes];
        Scheduler {
            cluster,
            config,
            dra: None,
            dra_memo: DraMemo::new(num_nodes),
            dra_node_generation: Vec::new(),
            dra_device_epoch: Vec::new(),
            dra_shared_generation: 0,
            scored,
            weight_sum,
            profiles,
            next_start_node_index: 0,
            feasible: Vec::new(),
            rejected: Vec::new(),
            scores: Vec::new(),
            plugin_scores: Vec::new(),
            memo,
            node_filter: None,
            device_filter: None,
            failed_classes: Vec::new(),
            classes: Default::default(),
            reused_verdicts: 0,
            kept: kept_verdicts::KeptVerdicts::default(),
            victim_memo: Default::default(),
            per_node_pod: None,
            preemption_findings_reused: 0,
            kept_rejections: 0,
            journal_verdicts: 0,
            bound_floor: None,
            reuse_verdicts: true,
            topology: TopologyCache::default(),
            gang_bound: false,
            device_room: Vec::new(),
            room_counts: Vec::new(),
            room_reads: 0,
            bound_waits: bound_wait::BoundWaits::default(),
        }
    }

    /// A scheduler that also serves pods' ResourceClaims (the DynamicResources plugin).
    pub fn with_dra(cluster: C, config: SchedulerConfig, ctx: &'c DraContext) -> Self {
        Scheduler::holding_dra(cluster, config, device_changes::DraHold::Borrowed(ctx))
    }

    /// A scheduler that serves pods' ResourceClaims over DRA inputs of its own, which change
    /// between cycles ([`Scheduler::apply_device_change`]).
    pub fn with_own_dra(cluster: C, config: SchedulerConfig, mut ctx: DraContext) -> Self {
        ctx.classes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Scheduler::holding_dra(cluster, config, device_changes::DraHold::Owned(Box::new(ctx)))
    }

    fn holding_dra(cluster: C, config: SchedulerConfig, ctx: device_changes::DraHold<'c>) -> Self {
        let state = AllocatedState::from_claims(cluster.claims.iter().map(|c| &*c.claim), ctx.features);
        let mut s = Scheduler::new(cluster, config);
        s.dra_node_generation = vec![0; s.cluster.nodes.len()];
        s.dra_device_epoch = vec![0; s.cluster.nodes.len()];
        s.dra = Some((ctx, state));
        s
    }

    /// The base configuration (with its further profiles).
    pub fn config(&self) -> &SchedulerConfig {
        self.profiles.base(&self.config)
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The DRA inputs, if any.
    pub fn dra(&self) -> Option<&DraContext> {
        self.dra.as_ref().map(|(ctx, _)| &**ctx)
    }

    /// The store's `apply` of one change between cycles: the single pods' shared verdicts are
    /// forgotten, and what the change cannot have changed is kept: the count of the lowest bound priority
    /// (`preemption::keeps_floor`; lowered to a pod the change brings to a node), the gangs'
    /// kept readings (`bound_wait::follows`; those it may have changed forgotten) and their room
    /// counts (brought up to date from the node journal when next read).
    pub fn apply_change(
        &mut self,
        change: crate::store::Change,
    ) -> Result<crate::store::Applied, crate::cluster::ModelError> {
        use crate::store::Change as C;
        let (keeps_floor, follows) = (preemption::keeps_floor(&change), bound_wait::follows(&change));
        // The pod a pod change names, as the store had it: read again after the change, for a pod
        // updated in place without an event naming it (a running pod's priority lowered).
        let readings = self.keeps_bound_waits();
        let upserted: Option<&dyn muster_api::PodObject> = match &change {
            C::UpsertPod(pod) => Some(&**pod),
            C::UpsertStoredPod(pod) => Some(&**pod),
            _ => None,
        };
        let on_node = upserted.is_some_and(|p| p.node_name().is_some_and(|n| !n.is_empty()));
        let changed = match (&change, upserted) {
            (C::DeletePod(key), _) if readings => self.cluster.pod_id(key),
            (_, Some(pod)) if readings || (self.bound_floor.is_some() && on_node) => {
                self.cluster.pod_id(&crate::cluster::object_key(pod.meta()))
            }
            _ => None,
        };
        let member_of = changed.and_then(|p| self.cluster.pod(p).group.as_ref()?.as_ref().ok().copied());
        let floor = self.bound_floor;
        // The store notes in the node journal every node whose requests, pods or generation it
        // changes, and the changes of devices that follow note theirs ([`Scheduler::claim_replaced`],
        // `devices_changed`): the gangs' room counts, kept up to date from the journal, stand.
        self.failed_classes.clear();
        self.bound_floor = None;
        let upserted_node = match &change {
            C::UpsertNode(node) => node.metadata.name.clone(),
            _ => None,
        };
        // A deleted pod's kept verdict goes with it: its slot no longer says what it was
        // computed for (a pod on a node leaves no queue entry that would forget it).
        let deleted = match &change {
            C::DeletePod(key) if !self.kept.is_empty() => self.cluster.pod_id(key),
            _ => None,
        };
        let applied = self.cluster.apply(change)?;
        if let Some(pod) = deleted {
            self.kept.forget_pod(pod);
        }
        // A node's labels may change which devices of node-selected slices it sees.
        if let Some(node) = upserted_node.and_then(|name| self.cluster.node_id(&name)) {
            self.node_devices_changed(node);
        }
        let event = BoundEvent::of(&self.cluster, member_of, changed, &applied);
        if keeps_floor {
            self.bound_floor = floor.map(|f| event.on_node.map_or(f, |p| f.min(p)));
        }
        match follows {
            true => self.bound_event(event),
            false => self.forget_bound_waits(),
        }
        Ok(applied)
    }

    /// What the allocator verdicts' memo saw, so far.
    pub fn dra_memo_counts(&self) -> crate::dra_memo::MemoCounts {
        self.dra_memo.counts
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

    /// Every pod gets a cycle of its own, even when an equivalent pod was just found
    /// unschedulable: for tests that check the reuse never changes a decision.
    pub fn without_verdict_reuse(mut self) -> Self {
        self.reuse_verdicts = false;
        self
    }

    /// A gang cycle that the nodes' free resources and devices show cannot reach minCount fails
    /// without trying its members, with a reason that says so (see [`gang_bound`]): for worlds
    /// that retry waiting gangs at every release. The same decisions as without it.
    pub fn with_gang_bound(mut self) -> Self {
        self.gang_bound = true;
        self
    }

    /// The pending pods in kube-scheduler's PrioritySort order: priority (highest first), then
    /// creation time (oldest first), then namespace/name.
    pub fn queue(&self) -> Vec<PodId> {
        let pods = self.entries().into_iter();
        pods.filter_map(|e| match e {
            QueueEntry::Pod(p) => Some(p),
            _ => None,
        })
        .collect()
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
        for (gi, g) in c.groups.iter().enumerate().map(|(i, g)| (GroupId(i as u32), g)) {
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
        let pending_priority = |groups: &[GroupId]| {
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
                (p.state == PodState::Pending).then(|| order(p.priority, p.pod.meta(), &p.key))
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
    /// to the next backoff expiry when nothing else is ready; with `SchedulerPopFromBackoffQ` an
    /// entry backing off is tried as soon as nothing else is, so only the gate turned off or a
    /// failed binding's backoff moves the clock). An entry that does not fit waits
    /// in the unschedulable pool for an event that could help it: in a plan, the only such events
    /// are preemptions (victims' resources and devices freed), after which the entries waiting
    /// for them are tried again. Each entry's last attempt is what the plan reports.
    pub fn plan(&mut self) -> Plan {
        self.plan_observing(|_, _| {})
    }

    /// [`Scheduler::plan`], calling `observe` with each entry and the cluster as its cycle is
    /// about to see it (for `muster why`: the snapshot of the target's last attempt, as the plan
    /// really made it, retries included).
    pub fn plan_observing(&mut self, mut observe: impl FnMut(QueueEntry, &Cluster)) -> Plan {
        let mut plan = Plan::default();
        let mut queue = SchedulingQueue::with_backoff(self.config().backoff);
        queue.add_all(self.queued());
        let mut now = 0;
        loop {
            self.schedule_ready_observing(&mut queue, now, &mut plan, &mut observe);
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
        self.schedule_ready_observing(queue, now, plan, &mut |_, _| {})
    }

    pub(crate) fn schedule_ready_observing(
        &mut self,
        queue: &mut SchedulingQueue,
        now: Millis,
        plan: &mut Plan,
        observe: &mut dyn FnMut(QueueEntry, &Cluster),
    ) -> usize {
        let mut cycles = 0;
        self.failed_classes.clear();
        let began = *plan.began.get_or_insert(queue.pops());
        while let Some((entry, popped_before)) = queue.pop_since(now) {
            cycles += 1;
            observe(entry, &self.cluster);
            // A gang's failure repeated from its kept reading changes nothing: the single pods'
            // shared verdicts stand, as after any failed group cycle. A gang this plan reported
            // already (woken again by a preemption) is reported anew, so that its result and its
            // members' verdicts move to the end of the plan as a full cycle's would.
            if let QueueEntry::Group(g) = entry
                && !plan.has_group_result(&[g])
                && let Some((wake, checked, pods)) = self.repeats_bound_failure(g)
            {
                plan.repeated.groups.push(g);
                plan.repeated.pods += pods as u64;
                queue.failed_checked(entry, wake, checked, now);
                continue;
            }
            // Tried already in this plan (woken again by a preemption): what it reported then
            // is forgotten. An entry first tried in this plan has nothing in it yet.
            let retry = popped_before > began;
            let leaves;
            let groups: &[GroupId] = match &entry {
                QueueEntry::Pod(_) => &[],
                QueueEntry::Group(g) => std::slice::from_ref(g),
                QueueEntry::Composite(r) => {
                    leaves = self.cluster.leaves(*r);
                    &leaves
                }
            };
            // Only a group with a result in this plan already can end up with two.
            let settle = retry && plan.has_group_result(groups);
            debug_assert!(retry || plan.holds_nothing_of(&self.entry_pods(entry), groups, entry));
            if retry {
                match entry {
                    // A group's members, borrowed: most retries are of waiting gangs.
                    QueueEntry::Group(g) => plan.forget(&self.cluster.groups[g].members, groups, entry),
                    QueueEntry::Pod(p) => plan.forget(&[p], groups, entry),
                    QueueEntry::Composite(_) => plan.forget(&self.entry_pods(entry), groups, entry),
                }
            }
            let before = (plan.placements.len(), plan.preempted.len(), plan.pod_preemptions.len());
            let attempted = self.schedule(entry, plan);
            if settle {
                plan.settle_groups(groups);
            }
            if attempted.pending {
                let checked = self.hint_group(queue, entry, attempted.wake, attempted.checked);
                queue.failed_checked(entry, attempted.wake, checked, now);
            } else {
                queue.done(entry);
            }
            if attempted.freed {
                let victims = plan.preempted[before.1..].iter().map(|(v, _)| *v);
                let victims =
                    victims.chain(plan.pod_preemptions[before.2..].iter().flat_map(|p| p.victims.iter().copied()));
                let placed: Vec<PodId> = plan.placements[before.0..].iter().map(|(p, _)| *p).collect();
                self.forget_after_preemption(&victims.collect::<Vec<_>>(), &placed);
                queue.on_event(Wake::ASSIGNED_POD_DELETED.union(Wake::CLAIM_CHANGED), now);
            }
        }
        cycles
    }

    /// The store changed, added or removed `pod` (its queue entry moved): a verdict kept for it
    /// no longer holds.
    pub fn pod_changed(&mut self, pod: PodId) {
        if !self.kept.is_empty() {
            self.kept.forget_pod(pod);
        }
    }

    /// After the store added or removed nodes: the per-node caches follow the node count.
    pub fn sync_nodes(&mut self) {
        self.kept.clear();
        self.victim_memo.clear();
        let n = self.cluster.nodes.len();
        if self.memo.len() != n {
            self.memo.resize(n, ScoreMemo::EMPTY);
            self.dra_memo.resize(n);
            if self.dra.is_some() {
                self.dra_node_generation.resize(n, 0);
                self.dra_device_epoch.resize(n, 0);
            }
        }
        let len = self.cluster.node_order.len();
        if self.next_start_node_index >= len {
            self.next_start_node_index = 0;
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
        // A class's verdict given again waits for what the class's does: nothing else to do.
        if let QueueEntry::Pod(pod) = entry
            && let Some(attempted) = self.reuse_verdict(pod, plan)
        {
            return attempted;
        }
        let (failed_before, placed_before, victims_before) =
            (plan.unschedulable.len(), plan.placements.len(), plan.victims());
        // A pod's verdict that equivalent pods may reuse: kept with what its failure waits for,
        // once that is worked out below.
        let mut new_class = None;
        match entry {
            QueueEntry::Pod(pod) => match self.schedule_one(pod) {
                Outcome::Placed(node) => {
                    self.failed_classes.clear();
                    plan.placements.push((pod, node))
                }
                // PostFilter: DefaultPreemption.
                Outcome::Unschedulable(e) => match self.preempt_for_pod(pod, &e) {
                    Some(p) => {
                        self.failed_classes.clear();
                        plan.placements.push((pod, p.node));
                        let preemption = PodPreemptionResult { pod, victims: p.victims, against_budgets: p.against };
                        plan.pod_preemptions.push(preemption);
                    }
                    None => {
                        if self.reuse_verdicts
                            && self.failed_classes.len() < equivalence::MAX_CLASSES
                            && equivalence::cacheable(&self.cluster, pod, &e)
                        {
                            new_class = Some((equivalence::key(self.cluster.pod(pod)), pod, e.clone()));
                        }
                        plan.unschedulable.push(pod, e)
                    }
                },
            },
            QueueEntry::Group(g) => {
                if let Some(attempted) = self.report_bound_again(g, plan) {
                    return attempted;
                }
                // The last reading stays while the cycle runs (nothing in it reads one): a cycle
                // that keeps a new one with the same claims replaces it in place.
                let kept = self.bound_waits.insertions();
                self.schedule_group(g, plan);
                if self.bound_waits.insertions() == kept {
                    self.bound_waits.remove(&g);
                }
            }
            QueueEntry::Composite(r) => self.schedule_composite(r, plan),
        }
        // A group's cycle that placed and preempted nothing rolled back all it reserved: the
        // snapshot is the one the verdicts in `failed_classes` were made on, and they stand.
        let victims_after = plan.victims();
        if !matches!(entry, QueueEntry::Pod(_))
            && (plan.placements.len() != placed_before || victims_after != victims_before)
        {
            self.failed_classes.clear();
        }
        // A pod entry's pending pod is itself (no list to make: most entries are pods).
        let (c, spread) = (&*self.cluster, &self.config.pod_topology_spread);
        let is_pending = |p: &PodId| c.pod(*p).state == PodState::Pending;
        let (one, mut many);
        let pending: &[PodId] = match entry {
            QueueEntry::Pod(p) => {
                one = [p];
                if is_pending(&p) { &one } else { &[] }
            }
            QueueEntry::Group(g) => {
                many = c.groups[g].members.iter().copied().filter(is_pending).collect::<Vec<_>>();
                many.sort_unstable();
                &many
            }
            QueueEntry::Composite(_) => {
                many = self.entry_pods(entry).into_iter().filter(is_pending).collect();
                many.sort_unstable();
                &many
            }
        };
        let wake = plan.unschedulable.since(failed_before).fold(Wake::NONE, |w, (pods, e)| {
            let pods = pods.iter().filter(|p| pending.binary_search(p).is_ok());
            w.union(wake_for_pods(pods.map(|p| c.pod(*p)), e, spread))
        });
        // Hints that look at an event's object are asked for a pod entry (one verdict).
        let checked = match (entry, plan.unschedulable.len() - failed_before) {
            (QueueEntry::Pod(p), 1) => match plan.unschedulable.get(failed_before) {
                Some((q, e)) if q == p => hints::checked_for(e, wake),
                _ => Checked::default(),
            },
            _ => Checked::default(),
        };
        if let QueueEntry::Group(g) = entry {
            self.bound_wait_wakes(g, wake, checked);
        }
        if let Some((key, pod, verdict)) = new_class {
            self.failed_classes.push(equivalence::FailedClass { key, pod, verdict, wake, checked });
        }
        Attempted { pending: !pending.is_empty(), wake, checked, freed: victims_after > victims_before }
    }

    /// `checked` with the group of pods the hints judge alike that a pod entry joins (none when
    /// the group's pods read otherwise).
    fn hint_group(&self, queue: &SchedulingQueue, entry: QueueEntry, wake: Wake, checked: Checked) -> Checked {
        let QueueEntry::Pod(pod) = entry else { return checked };
        if checked.events == Wake::NONE {
            return checked;
        }
        let c = &*self.cluster;
        let grouped = Checked { group: hints::group_of(c.pod(pod)), ..checked };
        match queue.group_peer(wake, grouped) {
            Some(QueueEntry::Pod(peer)) if !hints::same_inputs(c.pod(peer), c.pod(pod)) => checked,
            _ => grouped,
        }
    }

    /// A pod equivalent to one found unschedulable since the cluster last changed gets the same
    /// verdict, without a cycle: Filter and preemption would decide the same on the same state,
    /// and the hints that read the verdict and the pod's spec would wait for the same events.
    fn reuse_verdict(&mut self, pod: PodId, plan: &mut Plan) -> Option<Attempted> {
        let c = &*self.cluster;
        if self.failed_classes.is_empty() {
            return None;
        }
        let key = equivalence::key(c.pod(pod));
        let classes = &self.classes;
        let class =
            self.failed_classes.iter().find(|f| f.key == key && equivalence::equivalent(c, classes, f.pod, pod))?;
        debug_assert_eq!(class.wake, wake_for(c.pod(pod), &class.verdict, &self.config.pod_topology_spread));
        debug_assert_eq!(class.checked, hints::checked_for(&class.verdict, class.wake));
        plan.unschedulable.push_copy(pod, &class.verdict);
        self.reused_verdicts += 1;
        Some(Attempted { pending: true, wake: class.wake, checked: class.checked, freed: false })
    }
}
