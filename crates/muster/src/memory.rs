//! The in-memory world: a cluster read from manifests, and a plan written back into the objects
//! as the API server would hold them afterwards.

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1alpha3::{CompositePodGroup, CompositePodGroupStatus};
use k8s_openapi::api::scheduling::v1beta1::{PodGroup, PodGroupStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use muster_controllers::Created;
use muster_controllers::eviction::{DeviceTaints, Eviction};
use muster_controllers::podgroup::GangWait;
use muster_manifest::{Diagnostic, Manifests};
use muster_sched::cycle::GANG_WAIT_TIMEOUT_REASON;
use muster_sched::{Cluster, GroupNode, GroupOutcome, Plan, SchedulerNames};

mod build;
mod origins;
pub use build::Builder;

/// How a world is built from manifests.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Copy NoSchedule/NoExecute taints of a full device to the devices that share its counter set
    /// (its partitions); see [`DeviceTaints::propagate_health`]. On by default.
    pub health_propagation: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { health_propagation: true }
    }
}

/// The inputs of a run: the cluster built from the manifests, and what the manifests held that the
/// cluster does not (objects muster ignores, kinds this version reads but does not use).
pub struct World {
    /// The manifests, with `objects` moved into the cluster.
    pub manifests: Manifests,
    pub cluster: Cluster,
    /// Kinds that were read but that this version's scheduling does not use yet, with counts.
    pub unused: Vec<(&'static str, usize)>,
    /// DeviceClasses and ResourceSlices (with DeviceTaintRules applied, then health propagation),
    /// which the plan reads but never changes.
    pub device_classes: Vec<DeviceClass>,
    pub slices: Vec<ResourceSlice>,
    /// The input's DeviceTaintRules, as given.
    pub rules: Vec<DeviceTaintRule>,
    /// Every device's taints with where each came from (health propagation's included).
    pub taints: DeviceTaints,
    /// The bound pods that NoExecute device taints evict (and the dry runs of effect-None rules),
    /// from the input's allocated claims. The evictions happen after this plan: the pods stay in
    /// the snapshot the plan schedules against.
    pub evictions: Vec<Eviction>,
    /// What the workload controllers created before the plan (ReplicaSets, pods; the pods are in
    /// `cluster`), each with its controller, in creation order; see [`muster_controllers`].
    pub created: Vec<Created>,
    /// The controllers' notes: workloads that created nothing or less than asked, and why.
    pub controller_notes: Vec<String>,
    /// Warnings about objects of the input, located (also in `cluster.warnings`, as text): input
    /// the API server accepts but that looks wrong, such as an allocation naming a device no
    /// ResourceSlice publishes.
    pub warnings: Vec<Diagnostic>,
}

impl World {
    pub fn from_manifests(manifests: Manifests, names: &SchedulerNames) -> Result<World, Vec<Diagnostic>> {
        Self::from_manifests_with(manifests, names, Options::default())
    }

    /// The world of objects already read.
    pub fn from_manifests_with(
        mut manifests: Manifests,
        names: &SchedulerNames,
        options: Options,
    ) -> Result<World, Vec<Diagnostic>> {
        let mut builder = Builder::new(names, options);
        for l in std::mem::take(&mut manifests.objects) {
            builder.add(l);
        }
        builder.finish(manifests)
    }

    /// The world of `paths`, or every error of the input: when some objects do not load, the
    /// cluster model is still built from those that do and its errors (a missing PriorityClass,
    /// ...) are reported after the loader's, as `check` reports both. A model error about an
    /// object that did not load, or naming one (`PriorityClass "x"`), is left out: it would only
    /// echo the first. Each object goes to the world as soon as it is decoded ([`Builder::add`]).
    pub fn load(
        paths: &[std::path::PathBuf],
        names: &SchedulerNames,
        options: Options,
    ) -> Result<World, Vec<Diagnostic>> {
        let mut builder = Builder::new(names, options);
        let mut partial = muster_manifest::load_paths_partial_with(paths, &mut |l| {
            builder.add(l);
            None
        });
        let built = builder.finish(std::mem::take(&mut partial.manifests));
        if partial.errors.is_empty() {
            return built;
        }
        let mut errors = std::mem::take(&mut partial.errors);
        let Err(model) = built else { return Err(errors) };
        for d in model {
            if !partial.echoes(&d) && !errors.iter().any(|e| e.pos == d.pos && e.message == d.message) {
                errors.push(d);
            }
        }
        Err(errors)
    }
}

/// The ResourceClaims a plan created or changed, as the API server would hold them, each with a
/// note on what could not be written. DynamicResources' PreBind sets `allocationTimestamp` on an
/// allocation with devices that have binding conditions (then waits for them): with `now` it is
/// written, without it the note says so (a plan reads no clock).
pub fn changed_claims(cluster: &Cluster, now: Option<&Time>) -> Vec<(ResourceClaim, Option<String>)> {
    let mut out = Vec::new();
    for c in cluster.claims.iter().filter(|c| c.changed) {
        let mut claim = c.claim.clone();
        let mut note = None;
        if let Some(allocation) = claim.status.as_mut().and_then(|s| s.allocation.as_mut()) {
            let waits = allocation
                .devices
                .iter()
                .flat_map(|d| d.results.iter().flatten())
                .any(|r| r.binding_conditions.as_ref().is_some_and(|b| !b.is_empty()));
            if waits && allocation.allocation_timestamp.is_none() {
                match now {
                    Some(t) => allocation.allocation_timestamp = Some(t.clone()),
                    None => {
                        note = Some(
                            "allocationTimestamp (set at PreBind: its devices have binding conditions) is not written: it needs --now (a plan reads no clock)"
                                .to_string(),
                        )
                    }
                }
            }
        }
        out.push((claim, note));
    }
    out
}

/// The pods a plan changed, as the API server would hold them after binding (spec.nodeName set,
/// PodScheduled=True) or after a failed attempt (PodScheduled=False, reason Unschedulable, or
/// SchedulerError when a Filter error aborted the attempt).
pub fn changed_pods(cluster: &Cluster, plan: &Plan) -> Vec<Pod> {
    let mut out = Vec::with_capacity(plan.placements.len() + plan.unschedulable.len());
    for (pod_id, node_id) in &plan.placements {
        let mut pod = cluster.pod(*pod_id).pod.object();
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(cluster.node(*node_id).name().to_string());
        }
        set_scheduled_condition(&mut pod, "True", None, None);
        out.push(pod);
    }
    for (pod_id, err) in &plan.unschedulable {
        let mut pod = cluster.pod(*pod_id).pod.object();
        set_scheduled_condition(&mut pod, "False", Some(err.reason()), Some(err.message()));
        out.push(pod);
    }
    // Preemption victims get DisruptionTarget before the scheduler deletes them.
    let victims = plan
        .preempted
        .iter()
        .map(|(p, g)| (*p, format!("a higher-priority pod group ({} {})", g.kind(), cluster.node_key(*g))))
        .chain(plan.pod_preemptions.iter().flat_map(|r| {
            r.victims.iter().map(|v| (*v, format!("a higher-priority pod ({})", cluster.pod(r.pod).key)))
        }));
    for (pod_id, by) in victims {
        let mut pod = cluster.pod(pod_id).pod.object();
        let conds = pod.status.get_or_insert_with(PodStatus::default).conditions.get_or_insert_with(Vec::new);
        conds.retain(|c| c.type_ != "DisruptionTarget");
        conds.push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("PreemptionByScheduler".into()),
            message: Some(format!("muster: preempting to make room for {by}")),
            ..Default::default()
        });
        out.push(pod);
    }
    out
}

fn set_scheduled_condition(pod: &mut Pod, status: &str, reason: Option<&str>, message: Option<String>) {
    let st = pod.status.get_or_insert_with(PodStatus::default);
    if reason.is_some() && st.phase.is_none() {
        st.phase = Some("Pending".into());
    }
    let conds = st.conditions.get_or_insert_with(Vec::new);
    conds.retain(|c| c.type_ != "PodScheduled");
    // lastTransitionTime is left out: a plan reads no clock, so that its output is reproducible.
    conds.push(PodCondition {
        type_: "PodScheduled".into(),
        status: status.into(),
        reason: reason.map(str::to_string),
        message,
        ..Default::default()
    });
}

/// What writing a plan's PodGroups needs besides the plan: the time (a plan reads no clock) and
/// muster's gang wait timeout.
#[derive(Clone, Debug, Default)]
pub struct GroupStatusOptions {
    /// `--now`: the `lastTransitionTime` of every condition written, and the end of a waiting
    /// gang's wait. Without it, conditions that need a new `lastTransitionTime` are not written.
    pub now: Option<Time>,
    /// `--gang-wait-timeout`, in seconds.
    pub gang_wait_timeout_seconds: u64,
}

/// A PodGroup as the API server would hold it after the plan, and what the plan would write into
/// it but cannot.
pub struct ChangedGroup {
    pub group: PodGroup,
    /// The conditions left out, in words, and why (without `--now`, a new condition has no
    /// `lastTransitionTime`); `None` when everything was written.
    pub not_written: Option<String>,
}

/// `PodGroupInitiallyScheduled`: whether the group's first successful cycle happened.
pub use muster_sched::effects::POD_GROUP_INITIALLY_SCHEDULED as INITIALLY_SCHEDULED;
/// `DisruptionTarget`: the group is about to be terminated (preempted as a whole).
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// `CompositePodGroupInitiallyScheduled`: whether a group tree's first successful cycle happened
/// (written on the tree's root CompositePodGroup).
pub use muster_sched::effects::COMPOSITE_INITIALLY_SCHEDULED;

/// A CompositePodGroup as the API server would hold it after the plan, and what the plan would
/// write into it but cannot (see [`ChangedGroup`]).
pub struct ChangedComposite {
    pub composite: CompositePodGroup,
    pub not_written: Option<String>,
}

/// A condition the plan wants on a PodGroup or a CompositePodGroup (`lastTransitionTime` and
/// `observedGeneration` are filled in when it is applied).
struct Wanted {
    type_: &'static str,
    status: &'static str,
    reason: &'static str,
    message: String,
}

impl Wanted {
    fn text(&self) -> String {
        format!("{}={} ({}: {})", self.type_, self.status, self.reason, self.message)
    }

    /// `DisruptionTarget` True/`PreemptionByScheduler` on a group preempted as a whole.
    fn disruption_target(what: &str, cluster: &Cluster, by: GroupNode) -> Wanted {
        Wanted {
            type_: DISRUPTION_TARGET,
            status: "True",
            reason: "PreemptionByScheduler",
            message: format!(
                "muster: preempting every pod of the {what} (disruptionMode all) to make room for a higher-priority pod group ({} {})",
                by.kind(),
                cluster.node_key(by)
            ),
        }
    }
}

/// The groups preempted as a whole, with their preemptor (the first one, in plan order): for each
/// victim, every group from its PodGroup up its tree that has `disruptionMode: all` — the victim
/// unit (the highest such group, §3.3) and the `all` groups inside it, whose running pods all
/// go with the unit. A `single` group is never a target itself, even when all its pods go because
/// an ancestor is `all`. Indexed like `cluster.groups` and `cluster.composites`.
fn preempted_as_a_whole(cluster: &Cluster, plan: &Plan) -> (Vec<Option<GroupNode>>, Vec<Option<GroupNode>>) {
    let mut groups: Vec<Option<GroupNode>> = vec![None; cluster.groups.len()];
    let mut composites: Vec<Option<GroupNode>> = vec![None; cluster.composites.len()];
    for (p, by) in &plan.preempted {
        let Some(Ok(g)) = cluster.pod(*p).group else { continue };
        if disruption_all(cluster, GroupNode::Group(g)) {
            groups[g.index()].get_or_insert(*by);
        }
        let mut at = GroupNode::Group(g);
        // Bounded: a cycle in the parent chain (a tree muster reports Invalid) ends the walk.
        for _ in 0..=muster_sched::cluster::MAX_TREE_DEPTH {
            let Some(Ok(parent)) = cluster.parent(at) else { break };
            at = GroupNode::Composite(*parent);
            if disruption_all(cluster, at) {
                composites[parent.index()].get_or_insert(*by);
            }
        }
    }
    (groups, composites)
}

/// True when the group's `spec.disruptionMode` is `all`.
fn disruption_all(cluster: &Cluster, node: GroupNode) -> bool {
    match node {
        GroupNode::Group(g) => cluster.groups[g].group.spec.disruption_mode.as_ref().is_some_and(|d| d.all.is_some()),
        GroupNode::Composite(c) => {
            cluster.composites[c].composite.spec.disruption_mode.as_ref().is_some_and(|d| d.all.is_some())
        }
    }
}

/// Applies `wanted` to `conditions` as kube-scheduler does (`meta.SetStatusCondition`, and never
/// an `*InitiallyScheduled` True back to False); returns the conditions left out because they
/// need a `lastTransitionTime` and `now` is `None`, in words.
fn apply_conditions(
    conditions: &mut Vec<Condition>,
    wanted: Vec<Wanted>,
    generation: Option<i64>,
    now: Option<&Time>,
) -> Vec<String> {
    let mut missing_time = Vec::new();
    for w in wanted {
        let terminal = w.type_ == INITIALLY_SCHEDULED || w.type_ == COMPOSITE_INITIALLY_SCHEDULED;
        match conditions.iter_mut().find(|c| c.type_ == w.type_) {
            // Terminal: once True, the InitiallyScheduled condition never goes back to False.
            Some(c) if terminal && c.status == "True" && w.status != "True" => {}
            Some(c) if c.status == w.status => {
                c.reason = w.reason.into();
                c.message = w.message;
                c.observed_generation = generation;
            }
            existing => match now {
                Some(now) => {
                    let c = Condition {
                        type_: w.type_.into(),
                        status: w.status.into(),
                        reason: w.reason.into(),
                        message: w.message,
                        observed_generation: generation,
                        last_transition_time: now.clone(),
                    };
                    match existing {
                        Some(old) => *old = c,
                        None => conditions.push(c),
                    }
                }
                None => missing_time.push(w.text()),
            },
        }
    }
    missing_time
}

/// The comment line for an object: the conditions left out for want of a time first, then the
/// other things not written; `None` when everything was written.
fn not_written(missing_time: &[String], mut undecided: Vec<String>) -> Option<String> {
    if !missing_time.is_empty() {
        let (verb, its) = if missing_time.len() == 1 { ("is", "its") } else { ("are", "their") };
        undecided.insert(
            0,
            format!(
                "{} {verb} not written: {its} lastTransitionTime needs --now (a plan reads no clock)",
                missing_time.join(" and ")
            ),
        );
    }
    (!undecided.is_empty()).then(|| undecided.join("; ").replace(['\n', '\r'], " "))
}

/// The PodGroups a plan touched, as the API server would hold them afterwards, in
/// `namespace/name` order: every group a cycle ran for (`PodGroupInitiallyScheduled` True/
/// `Scheduled`, or False/`Unschedulable`/`SchedulerError`, never True back to False, as
/// kube-scheduler's `updatePodGroupCondition` does), every group preempted as a whole
/// (`disruptionMode: all`, itself: `DisruptionTarget` True/`PreemptionByScheduler`; see
/// [`preempted_as_a_whole`]), every gang that has waited for its own pods longer than
/// `--gang-wait-timeout` since its `creationTimestamp` (False/`GangWaitTimeout`, muster's), and
/// every group whose claims were generated from its `spec.resourceClaims` templates
/// (`status.resourceClaimStatuses`, KEP 5729, already recorded by the cluster). A gang that merely
/// waits is not touched: upstream's PreEnqueue holds it back and no cycle writes a condition; nor
/// is a group that has its pods but waits for its tree or for a missing parent.
///
/// Conditions follow `meta.SetStatusCondition`: one with the status it already has keeps its
/// `lastTransitionTime` (reason, message and observedGeneration are updated); a new one or a
/// transition takes `options.now`, and without it is left out and named in `not_written`.
/// `observedGeneration` is `metadata.generation` when set.
pub fn changed_pod_groups(cluster: &Cluster, plan: &Plan, options: &GroupStatusOptions) -> Vec<ChangedGroup> {
    let n = cluster.groups.len();
    let mut results: Vec<Vec<&muster_sched::GroupResult>> = vec![Vec::new(); n];
    for r in &plan.groups {
        results[r.group.index()].push(r);
    }
    let mut generated_claims = vec![false; n];
    for g in cluster.claims.iter().filter(|c| c.generated).filter_map(|c| c.group) {
        generated_claims[g.index()] = true;
    }
    let (preempted_by, _) = preempted_as_a_whole(cluster, plan);
    let mut out = Vec::new();
    for (g, info) in cluster.groups.iter().enumerate() {
        let mut wanted: Vec<Wanted> = Vec::new();
        let mut undecided: Vec<String> = Vec::new();
        let mut touched = generated_claims[g];
        for r in &results[g] {
            let (status, reason) = match (&r.outcome, muster_sched::effects::initially_scheduled(&r.outcome, false)) {
                (_, Some(condition)) => condition,
                // A group that has its pods and waits for something else (its tree's other
                // groups, a missing parent CompositePodGroup): no timeout of muster's applies.
                (GroupOutcome::Waiting { exist }, None) if !info.gang || *exist >= info.min_count => continue,
                (GroupOutcome::Waiting { exist }, None) => {
                    let exist = *exist;
                    let timeout = options.gang_wait_timeout_seconds;
                    let (key, min) = (&info.key, info.min_count);
                    let short = format!("{INITIALLY_SCHEDULED}=False ({GANG_WAIT_TIMEOUT_REASON})");
                    let created = info.group.metadata.creation_timestamp.as_ref();
                    match muster_controllers::podgroup::gang_wait(created, options.now.as_ref(), timeout) {
                        GangWait::Waiting => {}
                        GangWait::TimedOut { waited_seconds: waited } => {
                            touched = true;
                            wanted.push(Wanted {
                                type_: INITIALLY_SCHEDULED,
                                status: "False",
                                reason: GANG_WAIT_TIMEOUT_REASON,
                                message: format!(
                                    "podgroup {key} has waited {waited}s for its pods, more than the gang wait timeout of {timeout}s: {exist} of minCount {min} exist; the gang is not attempted until all are created"
                                ),
                            });
                        }
                        GangWait::NeedsNow => {
                            touched = true;
                            undecided.push(format!(
                                "{short} is not written: whether the gang has waited more than {timeout}s since its creationTimestamp ({exist} of minCount {min} pods exist) needs --now"
                            ));
                        }
                        GangWait::NoCreationTime => {
                            touched = true;
                            undecided.push(format!(
                                "{short} is not written: the PodGroup has no creationTimestamp, so how long the gang has waited ({exist} of minCount {min} pods exist) is unknown"
                            ));
                        }
                    }
                    continue;
                }
                (_, None) => continue,
            };
            touched = true;
            wanted.push(Wanted { type_: INITIALLY_SCHEDULED, status, reason, message: r.message() });
        }
        if let Some(by) = preempted_by[g] {
            touched = true;
            wanted.push(Wanted::disruption_target("group", cluster, by));
        }
        if !touched {
            continue;
        }
        let mut group = info.group.clone();
        let before = group.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        let mut conditions = before.clone();
        let missing_time = apply_conditions(&mut conditions, wanted, group.metadata.generation, options.now.as_ref());
        if conditions != before {
            group.status.get_or_insert_with(PodGroupStatus::default).conditions = Some(conditions);
        }
        out.push(ChangedGroup { group, not_written: not_written(&missing_time, undecided) });
    }
    out
}

/// The CompositePodGroups a plan touched, as the API server would hold them afterwards, in
/// `namespace/name` order: the root of every tree a cycle ran for
/// (`CompositePodGroupInitiallyScheduled` True/`Scheduled`, or False/`Unschedulable`/
/// `SchedulerError`/`Invalid`, never True back to False), and every CompositePodGroup preempted
/// as a whole (`disruptionMode: all`: `DisruptionTarget` True/`PreemptionByScheduler`; see
/// [`preempted_as_a_whole`]). A tree that merely waits for its child groups is not touched (no
/// cycle runs upstream), nor are the inner CompositePodGroups of a tree: kube-scheduler's
/// documented and tested behaviour writes the condition on the root (and the PodGroups, see
/// [`changed_pod_groups`]); muster found no upstream ground for writing it on inner nodes.
/// Conditions are applied as on PodGroups, with `--now` for new ones and transitions.
pub fn changed_composite_pod_groups(
    cluster: &Cluster,
    plan: &Plan,
    options: &GroupStatusOptions,
) -> Vec<ChangedComposite> {
    let mut results: Vec<Vec<&muster_sched::CompositeResult>> = vec![Vec::new(); cluster.composites.len()];
    for r in &plan.composites {
        results[r.composite.index()].push(r);
    }
    let (_, preempted_by) = preempted_as_a_whole(cluster, plan);
    let mut out = Vec::new();
    for (ci, info) in cluster.composites.iter().enumerate() {
        let mut wanted: Vec<Wanted> = Vec::new();
        for r in &results[ci] {
            // Waiting for enough child groups: PreEnqueue holds the tree, no cycle runs.
            let Some((status, reason)) = muster_sched::effects::initially_scheduled(&r.outcome, r.invalid) else {
                continue;
            };
            wanted.push(Wanted { type_: COMPOSITE_INITIALLY_SCHEDULED, status, reason, message: r.message.clone() });
        }
        if let Some(by) = preempted_by[ci] {
            wanted.push(Wanted::disruption_target("tree", cluster, by));
        }
        if wanted.is_empty() {
            continue;
        }
        let mut composite = info.composite.clone();
        let before = composite.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        let mut conditions = before.clone();
        let missing_time =
            apply_conditions(&mut conditions, wanted, composite.metadata.generation, options.now.as_ref());
        if conditions != before {
            composite.status.get_or_insert_with(CompositePodGroupStatus::default).conditions = Some(conditions);
        }
        out.push(ChangedComposite { composite, not_written: not_written(&missing_time, Vec::new()) });
    }
    out
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
