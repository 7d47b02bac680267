//! The engine's effects as jobs for the API server: owned copies of what each write needs,
//! grouped the way kube-scheduler's binding cycle runs them (a pod's volumes bound, its claims
//! written, then the pod bound, then its `Scheduled` event). Pods that share a claim placed in one plan form one unit,
//! run in order, so that none is bound before the claim it needs is written.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::PodExtendedResourceClaimStatus;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use muster_sched::effects::{EventType, PodEvent, Preemptor};
use muster_sched::{ClaimId, Cluster, Effect};

/// A pod, as the API server names it (its uid is every write's precondition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    pub fn of(pod: &dyn muster_sched::PodObject) -> PodRef {
        let meta = pod.meta();
        PodRef {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
        }
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A claim to write: as the engine assumed it (allocation and `reservedFor`), and whether it must
/// be created first (the special extended-resources claim).
#[derive(Clone, Debug)]
pub struct ClaimWrite {
    pub claim: ResourceClaim,
    pub create: bool,
}

impl ClaimWrite {
    pub fn key(&self) -> String {
        crate::observed::key_of(&self.claim.metadata)
    }
}

/// A pod to bind.
#[derive(Clone, Debug)]
pub struct Binding {
    pub pod: PodRef,
    pub node: String,
    /// The pod's `status.extendedResourceClaimStatus`, patched before the binding.
    pub extended: Option<PodExtendedResourceClaimStatus>,
    /// VolumeBinding's PreBind for the pod, when its Reserve bound or provisioned volumes.
    pub volumes: Option<crate::volume_binding::VolumeBind>,
}

/// Pods bound together after their claims are written.
#[derive(Clone, Debug, Default)]
pub struct BindUnit {
    pub claims: Vec<ClaimWrite>,
    pub pods: Vec<Binding>,
    /// Victims preempted for these pods: the pods are nominated to their nodes
    /// (`status.nominatedNodeName`) and bound only once the victims are gone, as kube-scheduler
    /// waits for them.
    pub victims: Vec<PodRef>,
}

/// One job for the API server.
#[derive(Clone, Debug)]
pub enum Job {
    /// `DisruptionTarget=True` on the victim, its deletion, and a `Preempted` event.
    Evict {
        victim: PodRef,
        by: String,
    },
    Bind(BindUnit),
    /// `PodScheduled=False` (sent only when it changes the pod's condition) and a
    /// `FailedScheduling` event, aggregated into a series as kube-scheduler's recorder does
    /// ([`crate::series`]; the loop decides `event`).
    Unschedulable {
        pod: PodRef,
        reason: &'static str,
        message: String,
        patch: bool,
        event: crate::series::EventWrite,
    },
    /// A series of `FailedScheduling` events written again with its count.
    EventSeries {
        namespace: String,
        name: String,
        count: i32,
    },
    /// A PodGroup's or CompositePodGroup's condition.
    GroupCondition {
        /// A CompositePodGroup's (else a PodGroup's).
        composite: bool,
        namespace: String,
        name: String,
        type_: &'static str,
        status: &'static str,
        reason: &'static str,
        message: String,
        /// The condition's `lastTransitionTime` when its status does not change (the write then
        /// updates only its reason or message); `None`: now.
        since: Option<Time>,
    },
    /// Any other event about a pod.
    Event {
        pod: PodRef,
        kind: EventType,
        reason: &'static str,
        action: &'static str,
        note: String,
    },
}

/// The jobs for `effects`, decided over `cluster` (which holds their results), in order.
pub fn translate(cluster: &Cluster, effects: Vec<Effect>) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut pending: Vec<ClaimWrite> = Vec::new();
    let mut pending_ids: Vec<ClaimId> = Vec::new();
    let mut unit_of_claim: HashMap<ClaimId, usize> = HashMap::new();
    let pod_ref = |p: muster_sched::PodId| PodRef::of(&cluster.pod(p).pod);
    let victims = victims_by_preemptor(&effects);
    let mut volumes = HashMap::new();
    for effect in effects {
        match effect {
            Effect::Evict { pod, by } => {
                let by = match by {
                    Preemptor::Pod(q) => format!("pod {}", cluster.pod(q).key),
                    Preemptor::Group(g) => format!("{} {}", g.kind(), cluster.node_key(g)),
                };
                jobs.push(Job::Evict { victim: pod_ref(pod), by });
            }
            Effect::BindVolumes { pod, decisions } => {
                volumes.insert(pod, crate::volume_binding::VolumeBind::of(cluster, &decisions));
            }
            Effect::CreateExtendedClaim { claim, .. } => {
                pending.push(ClaimWrite { claim: (*cluster.claims[claim].claim).clone(), create: true });
                pending_ids.push(claim);
            }
            Effect::WriteClaimStatus { claim } => {
                if !pending_ids.contains(&claim) {
                    pending.push(ClaimWrite { claim: (*cluster.claims[claim].claim).clone(), create: false });
                    pending_ids.push(claim);
                }
            }
            Effect::Bind { pod, node } => {
                let info = cluster.pod(pod);
                let shared = info.claims.iter().flatten().find_map(|c| unit_of_claim.get(c).copied());
                let index = shared.unwrap_or_else(|| {
                    jobs.push(Job::Bind(BindUnit::default()));
                    jobs.len() - 1
                });
                for id in pending_ids.drain(..) {
                    unit_of_claim.insert(id, index);
                }
                let Job::Bind(unit) = &mut jobs[index] else { unreachable!("unit_of_claim names bind jobs") };
                unit.claims.append(&mut pending);
                let group = match info.group {
                    Some(Ok(g)) => Some(Preemptor::Group(muster_sched::GroupNode::Group(g))),
                    _ => None,
                };
                for by in [Some(Preemptor::Pod(pod)), group].into_iter().flatten() {
                    for v in victims.get(&by).into_iter().flatten() {
                        let v = pod_ref(*v);
                        if !unit.victims.contains(&v) {
                            unit.victims.push(v);
                        }
                    }
                }
                unit.pods.push(Binding {
                    pod: pod_ref(pod),
                    node: cluster.node(node).name().to_string(),
                    extended: info.pod.status().and_then(|s| s.extended_resource_claim_status.clone()),
                    volumes: volumes.remove(&pod),
                });
            }
            Effect::PodsUnschedulable { pods, reason, message } => {
                let message = message.text();
                for &pod in pods.iter() {
                    let patch = !has_condition(&cluster.pod(pod).pod, "PodScheduled", "False", reason, &message);
                    let event = crate::series::EventWrite::Nothing;
                    let message = message.to_string();
                    jobs.push(Job::Unschedulable { pod: pod_ref(pod), reason, message, patch, event });
                }
            }
            Effect::GroupCondition { group, type_, status, reason, message } => {
                // As `meta.SetStatusCondition`: the same condition again is no write (its echo
                // would only bring the group back), a new reason or message keeps the time.
                let current = group_condition(cluster, group, type_);
                let message = message.text();
                if current.is_some_and(|c| c.status == status && c.reason == reason && *c.message == *message) {
                    continue;
                }
                let since = current.filter(|c| c.status == status).map(|c| c.last_transition_time.clone());
                let key = cluster.node_key(group);
                let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
                jobs.push(Job::GroupCondition {
                    since,
                    composite: matches!(group, muster_sched::GroupNode::Composite(_)),
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    type_,
                    status,
                    reason,
                    message: message.to_string(),
                });
            }
            // The writer sends these with the binding and the status they go with.
            Effect::Event { event: PodEvent::Scheduled { .. } | PodEvent::FailedScheduling { .. }, .. } => {}
            Effect::Event { pod, event } => jobs.push(Job::Event {
                pod: pod_ref(pod),
                kind: event.kind(),
                reason: event.reason(),
                action: event.action(),
                note: event.note(cluster, pod).to_string(),
            }),
        }
    }
    jobs
}

/// The victims of each preemptor. A victim of a CompositePodGroup tree is waited for by every
/// pod the plan binds (the tree's members are not traced back here).
fn victims_by_preemptor(effects: &[Effect]) -> HashMap<Preemptor, Vec<muster_sched::PodId>> {
    let mut out: HashMap<Preemptor, Vec<muster_sched::PodId>> = HashMap::new();
    let mut of_trees = Vec::new();
    for e in effects {
        if let Effect::Evict { pod, by } = e {
            match by {
                Preemptor::Group(muster_sched::GroupNode::Composite(_)) => of_trees.push(*pod),
                _ => out.entry(*by).or_default().push(*pod),
            }
        }
    }
    if !of_trees.is_empty() {
        for e in effects {
            if let Effect::Bind { pod, .. } = e {
                out.entry(Preemptor::Pod(*pod)).or_default().extend(&of_trees);
            }
        }
    }
    out
}

/// Whether the pod already has this condition (the patch would change nothing).
/// The group's condition of that type, as the store holds the group.
fn group_condition<'c>(cluster: &'c Cluster, group: muster_sched::GroupNode, type_: &str) -> Option<&'c Condition> {
    let conditions = match group {
        muster_sched::GroupNode::Group(g) => {
            cluster.groups[g].group.status.as_ref().and_then(|s| s.conditions.as_ref())
        }
        muster_sched::GroupNode::Composite(c) => {
            cluster.composites[c].composite.status.as_ref().and_then(|s| s.conditions.as_ref())
        }
    };
    conditions.into_iter().flatten().find(|c| c.type_ == type_)
}

fn has_condition(pod: &muster_sched::StoredPod, type_: &str, status: &str, reason: &str, message: &str) -> bool {
    let conditions = pod.status().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| {
        c.type_ == type_
            && c.status == status
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::scheduling::v1beta1::PodGroup;
    use muster_sched::{Change, GroupNode};
    use serde_json::json;

    /// A cluster holding PodGroup ml/g with `conditions` in its status.
    fn cluster(conditions: serde_json::Value) -> Cluster {
        let mut c = Cluster::build(
            Vec::new(),
            Vec::<muster_sched::StoredPod>::new(),
            &[],
            &muster_sched::SchedulerNames::default(),
        )
        .unwrap();
        let group: PodGroup = serde_json::from_value(json!({"metadata": {"name": "g", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}, "status": {"conditions": conditions}}))
        .unwrap();
        c.apply(Change::UpsertPodGroup(Box::new(group))).unwrap();
        c
    }

    fn condition(cluster: &Cluster, message: &str) -> Vec<Job> {
        let g = GroupNode::Group(muster_sched::GroupId(0));
        let effect = Effect::GroupCondition {
            group: g,
            type_: "PodGroupInitiallyScheduled",
            status: "False",
            reason: "Unschedulable",
            message: message.into(),
        };
        translate(cluster, vec![effect])
    }

    #[test]
    fn a_group_condition_already_there_is_not_written_again() {
        let then = "2026-01-01T00:00:00Z";
        let c = cluster(json!([{"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0 of 2 pods fit", "lastTransitionTime": then}]));
        assert!(condition(&c, "0 of 2 pods fit").is_empty(), "the same condition: no write to echo back");
        // A new message keeps the time of the transition.
        let jobs = condition(&c, "1 of 2 pods fit");
        let [Job::GroupCondition { since: Some(t), .. }] = &jobs[..] else { panic!("one write: {}", jobs.len()) };
        assert_eq!(serde_json::to_value(t).unwrap(), json!(then));
        // A new status is a transition now.
        let c = cluster(json!([{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
            "message": "", "lastTransitionTime": then}]));
        let jobs = condition(&c, "0 of 2 pods fit");
        assert!(matches!(&jobs[..], [Job::GroupCondition { since: None, .. }]));
    }

    /// One effect for the pods that share a verdict is each pod's write, in order; a pod that
    /// already says it is not patched again.
    #[test]
    fn pods_sharing_a_verdict_get_a_write_each() {
        let message = "podgroup ml/g: 0 of 2 pods fit";
        let pod = |name: &str, conditions: serde_json::Value| {
            let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
                "spec": {"containers": [{"name": "c"}]}, "status": {"conditions": conditions}}))
            .unwrap();
            muster_sched::StoredPod::from(Box::new(pod))
        };
        let said = json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]);
        let pods = vec![pod("a", said), pod("b", json!([]))];
        let c = Cluster::build(Vec::new(), pods, &[], &muster_sched::SchedulerNames::default()).unwrap();
        let (a, b) = (c.pod_id("ml/a").unwrap(), c.pod_id("ml/b").unwrap());
        let pods = muster_sched::effects::Pods::Many(vec![b, a].into());
        let jobs =
            translate(&c, vec![Effect::PodsUnschedulable { pods, reason: "Unschedulable", message: message.into() }]);
        let written: Vec<(&str, bool)> = jobs
            .iter()
            .map(|j| match j {
                Job::Unschedulable { pod, patch, message: m, .. } if m == message => (pod.name.as_str(), *patch),
                _ => panic!("not an unschedulable pod's write"),
            })
            .collect();
        assert_eq!(written, [("b", true), ("a", false)]);
    }
}
