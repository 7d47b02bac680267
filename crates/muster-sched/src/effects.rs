//! What a world must do about the decisions of some cycles, as typed effects, in the order
//! kube-scheduler 1.37 does them (live-and-sim.md §2): victims of preemption are deleted with a
//! DisruptionTarget condition; for a placed pod, the volumes VolumeBinding chose are bound or
//! provisioned (its PreBind), the special extended-resources claim is created
//! and the pod's `extendedResourceClaimStatus` patched, each claim's `status.allocation` and
//! `reservedFor` written (DynamicResources' PreBind), the pod bound, and a `Scheduled` event sent;
//! a pod that fits nowhere gets `PodScheduled=False` (`Unschedulable`, or `SchedulerError` for a
//! group the scheduler cannot handle) and a `FailedScheduling` event.
//!
//! A PodGroup's or CompositePodGroup's cycle sets its `...InitiallyScheduled` condition
//! ([`initially_scheduled`]; a gang still waiting for its pods gets none here: how long it has
//! waited is the gang-wait verdict's, which needs the time).
//!
//! Effects name objects by the store's ids; a world renders them (`run` sends them to the API
//! server, `sim` applies them to its store). The engine places a preemptor at once (its victims'
//! room given to it); a live world nominates it and binds it once the victims are gone
//! (`muster-kube`).

use crate::cluster::{ClaimId, Cluster, EXTENDED_RESOURCE_CLAIM_ANNOTATION, GroupNode, NodeId, PodId};
use crate::cycle::{GroupOutcome, GroupReason, Plan, TreeReason};
use crate::framework::FitError;
use std::sync::Arc;

/// An event's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// What preempted a victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preemptor {
    Pod(PodId),
    Group(GroupNode),
}

impl Preemptor {
    /// `pod <namespace/name>`, or the group's kind and key (`podgroup ml/train`).
    pub fn describe(self, cluster: &Cluster) -> String {
        match self {
            Preemptor::Pod(p) => format!("pod {}", cluster.pod(p).key),
            Preemptor::Group(g) => format!("{} {}", g.kind(), cluster.node_key(g)),
        }
    }
}

/// A verdict's message in kube-scheduler's words, worded where it is shown or sent
/// ([`Message::text`]), not by the cycle: a world that never shows a message (a simulation's
/// gang tried again at every event) never renders it. Two messages are equal when their texts are.
#[derive(Clone, Debug)]
pub enum Message {
    /// A pod's verdict over the nodes (rendered once per verdict, its clones sharing the text),
    /// or one decided before them.
    Pod(FitError),
    /// A PodGroup's reason: its condition's message and its members'.
    Group(Arc<GroupReason>),
    /// A CompositePodGroup tree's reason.
    Tree(Arc<TreeReason>),
    /// A text as it is.
    Text(Arc<str>),
}

impl Message {
    pub fn text(&self) -> Arc<str> {
        match self {
            Message::Pod(verdict) => verdict.shared_message(),
            Message::Group(reason) => reason.to_string().into(),
            Message::Tree(reason) => reason.to_string().into(),
            Message::Text(text) => text.clone(),
        }
    }
}

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

impl Message {
    /// Whether `other` is this very message (a clone of it, sharing what it was made from): the
    /// same text, found without rendering either.
    pub fn is_copy_of(&self, other: &Message) -> bool {
        match (self, other) {
            (Message::Pod(a), Message::Pod(b)) => a.is_copy_of(b),
            (Message::Group(a), Message::Group(b)) => Arc::ptr_eq(a, b),
            (Message::Tree(a), Message::Tree(b)) => Arc::ptr_eq(a, b),
            (Message::Text(a), Message::Text(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl PartialEq for Message {
    fn eq(&self, other: &Message) -> bool {
        self.text() == other.text()
    }
}

impl Eq for Message {}

impl From<&str> for Message {
    fn from(text: &str) -> Message {
        Message::Text(text.into())
    }
}

impl From<String> for Message {
    fn from(text: String) -> Message {
        Message::Text(text.into())
    }
}

/// One thing the world must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Set `DisruptionTarget=True` (reason `PreemptionByScheduler`) on a running pod, then delete
    /// it.
    Evict { pod: PodId, by: Preemptor },
    /// VolumeBinding's PreBind: each PersistentVolume the pod's Reserve chose gets the claim as
    /// its `claimRef` (an update of the volume), each claim to provision gets the
    /// `volume.kubernetes.io/selected-node` annotation (an update of the claim); then the world
    /// waits until every one of these claims is bound before the pod is bound.
    BindVolumes { pod: PodId, decisions: Vec<crate::volumes::VolumeDecision> },
    /// Create the special extended-resources claim (an index into `Cluster::claims`), then patch
    /// the pod's `status.extendedResourceClaimStatus`.
    CreateExtendedClaim { pod: PodId, claim: ClaimId },
    /// Write the claim's `status.allocation` and `status.reservedFor` (a PUT on
    /// `resourceclaims/status` with its resourceVersion, after adding the finalizer).
    WriteClaimStatus { claim: ClaimId },
    /// `POST pods/{name}/binding` to the node.
    Bind { pod: PodId, node: NodeId },
    /// For each of `pods` in turn (one pod, or the members of a group that failed together):
    /// `PodScheduled=False` with the reason (`Unschedulable` or `SchedulerError`) and message, by
    /// a strategic-merge patch on `pods/status`, then a `Warning FailedScheduling` event
    /// ([`PodEvent::FailedScheduling`]) with the message as its note. One effect for a failed
    /// group's members: a waiting gang tried again at every event is not 2 × its size of them.
    PodsUnschedulable { pods: Pods, reason: &'static str, message: Message },
    /// A group's condition (`PodGroupInitiallyScheduled` or `CompositePodGroupInitiallyScheduled`),
    /// by a patch on its `status` subresource.
    GroupCondition {
        group: GroupNode,
        type_: &'static str,
        status: &'static str,
        reason: &'static str,
        message: Message,
    },
    /// An `events.k8s.io/v1` event about a pod.
    Event { pod: PodId, event: PodEvent },
}

/// The pods of an effect: one, or several that share it (in order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pods {
    One(PodId),
    Many(Arc<[PodId]>),
}

impl Pods {
    fn of(pods: &[PodId]) -> Pods {
        match pods {
            [one] => Pods::One(*one),
            _ => Pods::Many(pods.into()),
        }
    }
}

impl std::ops::Deref for Pods {
    type Target = [PodId];

    fn deref(&self) -> &[PodId] {
        match self {
            Pods::One(p) => std::slice::from_ref(p),
            Pods::Many(pods) => pods,
        }
    }
}

/// An event about a pod: its type, reason and action follow from what happened; its note is
/// worded where the event is sent or shown ([`PodEvent::note`]), not by the cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodEvent {
    /// `Normal Scheduled` (action `Binding`): `Successfully assigned <pod> to <node>`.
    Scheduled { node: NodeId },
    /// `Normal Preempted` (action `Preempting`): `Preempted by <pod or group>`.
    Preempted { by: Preemptor },
    /// `Warning FailedScheduling` (action `Scheduling`): the pod's `PodScheduled` message.
    FailedScheduling { message: Message },
}

impl PodEvent {
    pub fn kind(&self) -> EventType {
        match self {
            PodEvent::Scheduled { .. } | PodEvent::Preempted { .. } => EventType::Normal,
            PodEvent::FailedScheduling { .. } => EventType::Warning,
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            PodEvent::Scheduled { .. } => "Scheduled",
            PodEvent::Preempted { .. } => "Preempted",
            PodEvent::FailedScheduling { .. } => "FailedScheduling",
        }
    }

    pub fn action(&self) -> &'static str {
        match self {
            PodEvent::Scheduled { .. } => "Binding",
            PodEvent::Preempted { .. } => "Preempting",
            PodEvent::FailedScheduling { .. } => "Scheduling",
        }
    }

    /// The event's note about `pod`, in kube-scheduler's words.
    pub fn note(&self, cluster: &Cluster, pod: PodId) -> Arc<str> {
        match self {
            PodEvent::Scheduled { node } => {
                format!("Successfully assigned {} to {}", cluster.pod(pod).key, cluster.node(*node).name()).into()
            }
            PodEvent::Preempted { by } => format!("Preempted by {}", by.describe(cluster)).into(),
            PodEvent::FailedScheduling { message } => message.text(),
        }
    }
}

/// The effects of `plan` (the decisions of some cycles over `cluster`, which holds their
/// results), in the order a world must carry them out.
pub fn effects(cluster: &Cluster, plan: &Plan) -> Vec<Effect> {
    // A placement is about four effects, a verdict one, a victim two, a group result one.
    let victims = plan.preempted.len() + plan.pod_preemptions.iter().map(|r| r.victims.len()).sum::<usize>();
    let results = plan.groups.len() + plan.composites.len();
    let mut out =
        Vec::with_capacity(4 * plan.placements.len() + plan.unschedulable.runs().len() + 2 * victims + results);
    evictions(plan, &mut out);
    let mut written = std::collections::HashSet::new();
    for &(pod, node) in &plan.placements {
        let info = cluster.pod(pod);
        let decisions: Vec<_> = cluster.volumes.decisions.iter().filter(|d| d.pod == pod).cloned().collect();
        if !decisions.is_empty() {
            out.push(Effect::BindVolumes { pod, decisions });
        }
        for claim in info.claims.iter().flatten().copied() {
            let special = cluster.claims[claim]
                .claim
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(EXTENDED_RESOURCE_CLAIM_ANNOTATION));
            if special {
                out.push(Effect::CreateExtendedClaim { pod, claim });
            }
            // A claim shared by several pods placed together is written once, with all of them.
            if written.insert(claim) {
                out.push(Effect::WriteClaimStatus { claim });
            }
        }
        out.push(Effect::Bind { pod, node });
        out.push(Effect::Event { pod, event: PodEvent::Scheduled { node } });
    }
    group_conditions(plan, &mut out);
    let errors: std::collections::HashSet<usize> = plan
        .groups
        .iter()
        .filter(|r| r.outcome == GroupOutcome::SchedulerError)
        .flat_map(|r| cluster.groups[r.group].members.iter().map(|m| m.0 as usize))
        .collect();
    // A group's members share its reason, and its condition says it too.
    for (pods, err) in plan.unschedulable.runs() {
        let mut message = Some(match &err.group {
            Some(g) => Message::Group(g.clone()),
            None => Message::Pod(err.clone()),
        });
        // Pods in a group the scheduler cannot handle say `SchedulerError`: a run split where
        // that changes (a shared verdict is one group's, so it never is in practice).
        let in_error = |pod: &PodId| !errors.is_empty() && errors.contains(&(pod.0 as usize));
        let reason_of = |pod: &PodId| if in_error(pod) { "SchedulerError" } else { err.reason() };
        let mut runs = pods.chunk_by(|a, b| in_error(a) == in_error(b)).peekable();
        while let Some(same) = runs.next() {
            let (pods, reason) = (Pods::of(same), reason_of(&same[0]));
            // The last run takes the message itself: one copy fewer of a shared verdict.
            let message = if runs.peek().is_some() { message.clone() } else { message.take() };
            out.push(Effect::PodsUnschedulable { pods, reason, message: message.expect("taken by the last run only") });
        }
    }
    out
}

/// The condition type a PodGroup's cycle sets.
pub const POD_GROUP_INITIALLY_SCHEDULED: &str = "PodGroupInitiallyScheduled";
/// The condition type a CompositePodGroup tree's cycle sets.
pub const COMPOSITE_INITIALLY_SCHEDULED: &str = "CompositePodGroupInitiallyScheduled";

/// The `...InitiallyScheduled` condition's status and reason for a group cycle's outcome (`invalid`:
/// a tree whose layout is bad); `None` while the group waits (for its pods, or its tree's other
/// groups): no cycle ran. For `Invalid` the API lists the reason but the status that goes with it
/// is unverified (the field doc says "Set to True", which reads like a slip): muster writes False,
/// as for every outcome in which nothing was scheduled.
pub fn initially_scheduled(outcome: &GroupOutcome, invalid: bool) -> Option<(&'static str, &'static str)> {
    match outcome {
        _ if invalid => Some(("False", "Invalid")),
        GroupOutcome::Scheduled { .. } => Some(("True", "Scheduled")),
        GroupOutcome::Unschedulable { .. } => Some(("False", "Unschedulable")),
        GroupOutcome::SchedulerError => Some(("False", "SchedulerError")),
        GroupOutcome::Waiting { .. } => None,
    }
}

/// The group conditions of a plan's group and tree results.
fn group_conditions(plan: &Plan, out: &mut Vec<Effect>) {
    for r in &plan.groups {
        if let Some((status, reason)) = initially_scheduled(&r.outcome, false) {
            let (group, type_) = (GroupNode::Group(r.group), POD_GROUP_INITIALLY_SCHEDULED);
            out.push(Effect::GroupCondition {
                group,
                type_,
                status,
                reason,
                message: Message::Group(r.reason.clone()),
            });
        }
    }
    for r in &plan.composites {
        if let Some((status, reason)) = initially_scheduled(&r.outcome, r.invalid) {
            let (group, type_) = (GroupNode::Composite(r.composite), COMPOSITE_INITIALLY_SCHEDULED);
            out.push(Effect::GroupCondition { group, type_, status, reason, message: Message::Tree(r.reason.clone()) });
        }
    }
}

/// Preemption victims, each deleted once, with a `Preempted` event.
fn evictions(plan: &Plan, out: &mut Vec<Effect>) {
    let by_groups = plan.preempted.iter().map(|(v, g)| (*v, Preemptor::Group(*g)));
    let by_pods = plan.pod_preemptions.iter().flat_map(|r| r.victims.iter().map(|v| (*v, Preemptor::Pod(r.pod))));
    for (victim, by) in by_groups.chain(by_pods) {
        out.push(Effect::Evict { pod: victim, by });
        out.push(Effect::Event { pod: victim, event: PodEvent::Preempted { by } });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Scheduler, SchedulerConfig, SchedulerNames};
    use serde_json::json;

    /// A message is a copy of another when it shares what the other was made from: clones are,
    /// equal texts made apart are not (they are still equal), other kinds never are.
    #[test]
    fn copies_of_a_message_are_found_without_rendering_it() {
        let verdict = || {
            let r = crate::framework::Rejection::new("DynamicResources", false, "cannot allocate all claims");
            FitError::rejected(2, vec![r], vec![(crate::cluster::NodeId(0), 0), (crate::cluster::NodeId(1), 0)])
        };
        let a = Message::Pod(verdict());
        let (b, apart) = (a.clone(), Message::Pod(verdict()));
        assert!(b.is_copy_of(&a) && a.is_copy_of(&b));
        assert!(!apart.is_copy_of(&a) && apart == a, "the same text, made apart");
        let text = Message::from("0/2 nodes are available");
        assert!(text.clone().is_copy_of(&text) && !Message::from("0/2 nodes are available").is_copy_of(&text));
        assert!(!text.is_copy_of(&a) && !a.is_copy_of(&text));
    }

    #[test]
    fn a_preemption_deletes_the_victim_before_the_preemptor_is_bound() {
        let node = serde_json::from_value(json!({"metadata": {"name": "n0"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}))
        .unwrap();
        let pod = |name: &str, priority: i32, node: Option<&str>| {
            let mut p = json!({"metadata": {"name": name, "namespace": "p"},
                "spec": {"priority": priority, "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}});
            if let Some(n) = node {
                p["spec"]["nodeName"] = json!(n);
                p["status"] = json!({"phase": "Running"});
            }
            Box::new(serde_json::from_value(p).unwrap())
        };
        let pods = vec![pod("low", 0, Some("n0")), pod("high", 10, None)];
        let mut cluster = Cluster::build(vec![node], pods, &[], &SchedulerNames::default()).unwrap();
        let plan = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
        let (low, high) = (PodId(1), PodId(0));
        assert_eq!(cluster.pod(low).key, "p/low");
        let preempted = PodEvent::Preempted { by: Preemptor::Pod(high) };
        let scheduled = PodEvent::Scheduled { node: NodeId(0) };
        assert_eq!(
            effects(&cluster, &plan),
            [
                Effect::Evict { pod: low, by: Preemptor::Pod(high) },
                Effect::Event { pod: low, event: preempted.clone() },
                Effect::Bind { pod: high, node: NodeId(0) },
                Effect::Event { pod: high, event: scheduled.clone() },
            ]
        );
        assert_eq!(&*preempted.note(&cluster, low), "Preempted by pod p/high");
        assert_eq!(
            (preempted.kind(), preempted.reason(), preempted.action()),
            (EventType::Normal, "Preempted", "Preempting")
        );
        assert_eq!(&*scheduled.note(&cluster, high), "Successfully assigned p/high to n0");
        assert_eq!(
            (scheduled.kind(), scheduled.reason(), scheduled.action()),
            (EventType::Normal, "Scheduled", "Binding")
        );
    }

    /// A gang that does not fit: its condition and its members' PodScheduled messages are one
    /// text, rendered once.
    #[test]
    fn a_failed_group_and_its_members_share_one_message() {
        let node = serde_json::from_value(json!({"metadata": {"name": "n0"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}))
        .unwrap();
        let pod = |name: &str| {
            Box::new(
                serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
                "spec": {"schedulingGroup": {"podGroupName": "g"},
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}}))
                .unwrap(),
            )
        };
        let group = serde_json::from_value(json!({"metadata": {"name": "g", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}))
        .unwrap();
        let mut cluster =
            Cluster::build(vec![node], vec![pod("g-0"), pod("g-1")], &[], &SchedulerNames::default()).unwrap();
        cluster.add_pod_groups(vec![group]);
        let plan = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
        let effects = effects(&cluster, &plan);
        let condition = effects.iter().find_map(|e| match e {
            Effect::GroupCondition { message, status: "False", .. } => Some(message.clone()),
            _ => None,
        });
        let condition = condition.expect("the gang's condition");
        let members: Vec<(usize, &Message)> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::PodsUnschedulable { pods, message, .. } => Some((pods.len(), message)),
                _ => None,
            })
            .collect();
        // One effect for both members.
        assert_eq!(members.iter().map(|(n, _)| n).collect::<Vec<_>>(), [&2]);
        // The members' message is the group's reason, not a copy of its text.
        let Message::Group(reason) = &condition else { panic!("a group's condition says its reason: {condition:?}") };
        let shared = |m: &Message| matches!(m, Message::Group(r) if Arc::ptr_eq(r, reason));
        assert!(members.iter().all(|(_, m)| shared(m)), "{condition} / {members:?}");
    }

    #[test]
    fn a_verdict_and_its_clones_share_one_message() {
        let node = serde_json::from_value(json!({"metadata": {"name": "n0"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}))
        .unwrap();
        let pod = |name: &str, cpu: &str| {
            Box::new(
                serde_json::from_value(json!({"metadata": {"name": name, "namespace": "p"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}))
                .unwrap(),
            )
        };
        let pods = vec![pod("a", "5"), pod("b", "5"), pod("c", "5"), pod("d", "100m")];
        let mut cluster = Cluster::build(vec![node], pods, &[], &SchedulerNames::default()).unwrap();
        let mut plan = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
        // d fits; make its verdict one of its own to sit between a's and b's equal ones.
        let (a, b, c, d) = (PodId(0), PodId(1), PodId(2), PodId(3));
        let first = plan.unschedulable.of(a).unwrap().clone();
        let other = crate::framework::FitError::pre_filter(1, crate::pre_filter_reason::PreFilterReason::NoDraInputs);
        plan.unschedulable = [(a, first.clone()), (b, first.clone()), (d, other), (c, first)].into_iter().collect();
        let messages: Vec<(PodId, std::sync::Arc<str>)> = effects(&cluster, &plan)
            .into_iter()
            .flat_map(|e| match e {
                Effect::PodsUnschedulable { pods, message, .. } => pods.iter().map(|p| (*p, message.text())).collect(),
                _ => Vec::new(),
            })
            .collect();
        let texts: Vec<(PodId, &str)> = messages.iter().map(|(p, m)| (*p, &**m)).collect();
        let insufficient = "0/1 nodes are available: 1 Insufficient cpu.";
        assert_eq!(
            texts,
            [
                (a, insufficient),
                (b, insufficient),
                (d, "0/1 nodes are available: pod uses DRA resource claims, but the plan has no DRA inputs."),
                (c, insufficient)
            ]
        );
        // b's and c's message is a's, rendered once (though d's came in between), and the
        // verdict remembers it for the next time it is rendered.
        assert!(std::sync::Arc::ptr_eq(&messages[0].1, &messages[1].1));
        assert!(std::sync::Arc::ptr_eq(&messages[0].1, &messages[3].1));
        assert!(std::sync::Arc::ptr_eq(&messages[0].1, &plan.unschedulable.get(0).unwrap().1.shared_message()));
        assert!(!std::sync::Arc::ptr_eq(&messages[2].1, &plan.unschedulable.get(2).unwrap().1.shared_message()));
    }
}
