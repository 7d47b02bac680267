//! Controllers beside the scheduler: the parts of kube-controller-manager (and muster's own
//! verdicts) that a world without them needs. The workload controllers turn workload objects into
//! pods — a Deployment becomes a ReplicaSet, a ReplicaSet and a StatefulSet become their pods, a
//! Job becomes its active pods — named, labelled and owned as the Kubernetes 1.37 controllers do
//! it, so that a plan schedules what a cluster would actually be asked to schedule. Beside them:
//! [`resourceclaim`] (claims from templates and their release), [`group_claims`] (a PodGroup's claims), [`eviction`] (device taints and
//! the pods NoExecute taints evict) and [`podgroup`] (PodGroup status: the conditions
//! the cycles ask for, and the gang-wait verdict).
//!
//! This is not the scheduler's job, and it is not always on: a plan (`muster plan`, `why`, and
//! `sim` when it exists) runs these controllers over its input before scheduling, because nothing
//! else would; a live `muster run` must not, because the cluster's kube-controller-manager does it.
//!
//! What this crate never does: I/O, reading a clock, or drawing randomness. Same input, same
//! output, byte for byte. Where upstream is random (generated name suffixes, UIDs) or hashes Go
//! internals (the pod template hash), names are derived from the objects instead ([`naming`]);
//! where upstream waits for time to pass (OrderedReady StatefulSets, Job back-off, rollouts), a
//! plan takes one step and says which (each controller's documentation).
//!
//! One call, [`expand`], runs the controllers to a fixed point: Deployments first (their new
//! ReplicaSets), then every ReplicaSet, StatefulSet and Job (their pods). Pods already in the
//! input — owned by a controller, or orphans its selector matches, which the real controller
//! adopts — count toward replicas, so a `kubectl get -o yaml` dump that holds a Deployment with
//! all its pods gets no new pod.
//!
//! What created objects carry that the API server would add: a UID (the workloads given without
//! one get one too, so that owner references and claims' `reservedFor` name something), derived
//! from kind, namespace and name ([`naming::uid`], UUID-shaped). What they lack: a
//! `creationTimestamp` (a plan reads no clock; the scheduler's queue then orders them by name
//! after priority), a `resourceVersion`, a status. `spec.schedulerName` is the template's (unset:
//! the default scheduler, which muster serves).

pub use muster_api::PodObject;

pub mod deployment;
pub mod ephemeral;
pub mod eviction;
pub mod group_claims;
pub mod job;
pub mod naming;
pub mod podgroup;
mod pods;
pub mod replicaset;
pub mod resourceclaim;
pub mod slice_view;
pub mod statefulset;

use std::fmt;

use k8s_openapi::Resource;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use pods::Pods;

/// The workload objects of an input, which [`expand`] reads (and to which it gives UIDs where
/// missing; new ReplicaSets are added to `replica_sets`).
#[derive(Clone, Debug, Default)]
pub struct Workloads {
    pub deployments: Vec<Deployment>,
    pub replica_sets: Vec<ReplicaSet>,
    pub stateful_sets: Vec<StatefulSet>,
    pub jobs: Vec<Job>,
}

impl Workloads {
    pub fn is_empty(&self) -> bool {
        self.deployments.is_empty()
            && self.replica_sets.is_empty()
            && self.stateful_sets.is_empty()
            && self.jobs.is_empty()
    }
}

/// An object a controller created.
#[derive(Clone, Debug, PartialEq)]
pub enum CreatedObject {
    ReplicaSet(Box<ReplicaSet>),
    Pod(Box<Pod>),
}

impl CreatedObject {
    pub fn kind(&self) -> &'static str {
        match self {
            CreatedObject::ReplicaSet(_) => ReplicaSet::KIND,
            CreatedObject::Pod(_) => Pod::KIND,
        }
    }

    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            CreatedObject::ReplicaSet(r) => &r.metadata,
            CreatedObject::Pod(p) => &p.metadata,
        }
    }

    /// `Kind namespace/name`.
    pub fn reference(&self) -> ObjectRef {
        ObjectRef::of(self.kind(), self.metadata())
    }
}

/// A namespaced object by kind and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectRef {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn of(kind: &'static str, meta: &ObjectMeta) -> ObjectRef {
        ObjectRef {
            kind,
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// One created object: what created it (`by`, its controller) and the workload at the top of the
/// chain (`root`: the Deployment of a ReplicaSet's pod; `by` itself otherwise).
#[derive(Clone, Debug, PartialEq)]
pub struct Created {
    pub object: CreatedObject,
    pub by: ObjectRef,
    pub root: ObjectRef,
}

/// What [`expand`] did: the objects created, in creation order, and notes on workloads that
/// created nothing or less than asked, in words.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expansion {
    pub created: Vec<Created>,
    pub notes: Vec<String>,
}

impl Expansion {
    /// The created pods.
    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.created.iter().filter_map(|c| match &c.object {
            CreatedObject::Pod(p) => Some(&**p),
            CreatedObject::ReplicaSet(_) => None,
        })
    }
}

/// Runs the controllers to a fixed point over `workloads` and the input's `pods`: Deployments
/// (new ReplicaSets, added to `workloads.replica_sets`), then ReplicaSets, StatefulSets and Jobs
/// (pods). Objects without `metadata.uid` get one from [`naming::uid`].
pub fn expand(workloads: &mut Workloads, pods: &[&dyn PodObject]) -> Expansion {
    let mut out = Expansion::default();
    if workloads.is_empty() {
        return out;
    }
    give_uids(workloads);
    let mut pods = Pods::new(pods);
    deployment::sync_all(workloads, &pods, &mut out);
    replicaset::sync_all(workloads, &mut pods, &mut out);
    statefulset::sync_all(&workloads.stateful_sets, &mut pods, &mut out);
    job::sync_all(&workloads.jobs, &mut pods, &mut out);
    out
}

fn give_uids(w: &mut Workloads) {
    fn give(kind: &str, meta: &mut ObjectMeta) {
        if meta.uid.as_deref().is_none_or(str::is_empty) {
            let ns = meta.namespace.as_deref().unwrap_or("default");
            meta.uid = Some(naming::uid(kind, ns, meta.name.as_deref().unwrap_or_default()));
        }
    }
    w.deployments.iter_mut().for_each(|o| give(Deployment::KIND, &mut o.metadata));
    w.replica_sets.iter_mut().for_each(|o| give(ReplicaSet::KIND, &mut o.metadata));
    w.stateful_sets.iter_mut().for_each(|o| give(StatefulSet::KIND, &mut o.metadata));
    w.jobs.iter_mut().for_each(|o| give(Job::KIND, &mut o.metadata));
}

#[cfg(test)]
pub(crate) mod testing {
    //! Small builders for the controllers' unit tests.

    use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

    pub fn labels(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    pub fn selector(pairs: &[(&str, &str)]) -> LabelSelector {
        LabelSelector { match_labels: Some(labels(pairs)), ..Default::default() }
    }

    pub fn template(pairs: &[(&str, &str)]) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta { labels: Some(labels(pairs)), ..Default::default() }),
            spec: Some(PodSpec {
                containers: vec![Container { name: "c".into(), image: Some("busybox".into()), ..Default::default() }],
                ..Default::default()
            }),
        }
    }

    pub fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta { namespace: Some(ns.into()), name: Some(name.into()), ..Default::default() }
    }

    /// A pod in `ns` with labels, an optional controller (kind, name, uid) and a phase.
    pub fn pod(ns: &str, name: &str, l: &[(&str, &str)], owner: Option<(&str, &str, &str)>, phase: &str) -> Pod {
        let mut m = meta(ns, name);
        m.labels = Some(labels(l));
        m.owner_references = owner.map(|(kind, name, uid)| {
            vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: kind.into(),
                name: name.into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]
        });
        Pod {
            metadata: m,
            spec: Some(PodSpec::default()),
            status: Some(PodStatus { phase: Some(phase.into()), ..Default::default() }),
        }
    }
}
