//! PodGroup and CompositePodGroup status after some scheduling cycles, as the API server would
//! hold it: the `...InitiallyScheduled` conditions the cycles' results ask for (as
//! kube-scheduler's `updatePodGroupCondition` writes them, never True back to False),
//! `DisruptionTarget` on groups preempted as a whole, and muster's gang-wait verdict.
//!
//! The gang-wait verdict: how long a gang has waited for its pods against muster's gang wait
//! timeout (`--gang-wait-timeout`; Kubernetes has no such field — its only wait was a fixed
//! Permit timeout). A controller's decision, not the scheduler's: the scheduler only says that a
//! gang waits (fewer than `minCount` pods exist); this says, given the time, whether the wait is
//! over. No clock is read: `now` comes from the caller (`--now` in a plan, the virtual clock in a
//! simulation).

use k8s_openapi::api::scheduling::v1alpha3::{CompositePodGroup, CompositePodGroupStatus};
use k8s_openapi::api::scheduling::v1beta1::{PodGroup, PodGroupStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use muster_sched::cycle::GANG_WAIT_TIMEOUT_REASON;
use muster_sched::{Cluster, GroupNode, GroupOutcome, Plan};

/// Where a waiting gang stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GangWait {
    /// It has waited no longer than the timeout.
    Waiting,
    /// It has waited `waited_seconds`, more than the timeout: `PodGroupInitiallyScheduled=False`,
    /// reason `GangWaitTimeout`.
    TimedOut { waited_seconds: i64 },
    /// Undecided: no time was given.
    NeedsNow,
    /// Undecided: the PodGroup has no `creationTimestamp`.
    NoCreationTime,
}

/// The verdict for a gang created at `created`, at `now`, with a timeout of `timeout_seconds`.
pub fn gang_wait(created: Option<&Time>, now: Option<&Time>, timeout_seconds: u64) -> GangWait {
    match (now, created) {
        (None, _) => GangWait::NeedsNow,
        (Some(_), None) => GangWait::NoCreationTime,
        (Some(now), Some(created)) => {
            let waited_seconds = now.0.as_second() - created.0.as_second();
            if waited_seconds > i64::try_from(timeout_seconds).unwrap_or(i64::MAX) {
                GangWait::TimedOut { waited_seconds }
            } else {
                GangWait::Waiting
            }
        }
    }
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
                    match gang_wait(created, options.now.as_ref(), timeout) {
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
            wanted.push(Wanted { type_: COMPOSITE_INITIALLY_SCHEDULED, status, reason, message: r.message() });
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
mod tests {
    use super::*;

    fn at(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn a_gang_times_out_only_after_more_than_the_timeout() {
        let created = at("2026-01-01T00:00:00Z");
        assert_eq!(gang_wait(Some(&created), Some(&at("2026-01-01T00:05:00Z")), 300), GangWait::Waiting);
        assert_eq!(
            gang_wait(Some(&created), Some(&at("2026-01-01T00:05:01Z")), 300),
            GangWait::TimedOut { waited_seconds: 301 }
        );
        assert_eq!(gang_wait(Some(&created), None, 300), GangWait::NeedsNow);
        assert_eq!(gang_wait(None, Some(&created), 300), GangWait::NoCreationTime);
    }
}
