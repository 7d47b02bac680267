//! The workload controllers at run time: after a Deployment, ReplicaSet, StatefulSet or Job is
//! created or updated through the API, the namespace's workloads are synced against its pods
//! ([`muster_controllers::expand`], the same code `muster plan` and the preload run) and what is
//! missing is created: a Deployment's ReplicaSet, the pods, then the claims the pods' templates
//! ask for (the resourceclaim stand-in, [`crate::controllers`]).
//!
//! A stand-in, synchronous inside the request: a real kube-controller-manager creates these
//! objects asynchronously, with random name suffixes. Not modelled: scaling down, rollouts
//! (a changed template does not replace pods), Job completion, garbage collection.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use muster_controllers::{CreatedObject, PodObject, Workloads};
use serde::de::DeserializeOwned;

use crate::registry::{self, ResId};
use crate::store::{self, Store};

/// The kinds whose writes run the workload controllers.
pub(crate) const PLURALS: [&str; 4] = ["deployments", "replicasets", "statefulsets", "jobs"];

fn res(group: &str, plural: &str) -> ResId {
    registry::by_path(group, "v1", plural).expect("in the resource table")
}

fn listed<T: DeserializeOwned>(store: &Store, res: ResId, ns: &str) -> Vec<T> {
    store.list(res, Some(ns)).filter_map(|(_, v)| T::deserialize(&**v).ok()).collect()
}

/// Syncs the workloads of namespace `ns` and stores what they create.
pub(crate) fn after_write(store: &mut Store, ns: &str) {
    let mut workloads = Workloads {
        deployments: listed::<Deployment>(store, res("apps", "deployments"), ns),
        replica_sets: listed::<ReplicaSet>(store, res("apps", "replicasets"), ns),
        stateful_sets: listed::<StatefulSet>(store, res("apps", "statefulsets"), ns),
        jobs: listed::<Job>(store, res("batch", "jobs"), ns),
    };
    let pods: Vec<Pod> = listed(store, res("", "pods"), ns);
    let expansion = {
        let existing: Vec<&dyn PodObject> = pods.iter().map(|p| p as &dyn PodObject).collect();
        muster_controllers::expand(&mut workloads, &existing)
    };
    for created in expansion.created {
        let (res, value) = match &created.object {
            CreatedObject::ReplicaSet(rs) => (res("apps", "replicasets"), serde_json::to_value(rs)),
            CreatedObject::Pod(p) => (res("", "pods"), serde_json::to_value(p)),
        };
        let Ok(value) = value else { continue };
        let name = store::meta_str(&value, "name").unwrap_or_default().to_string();
        // Kept as the controller made it (its owner references name the UIDs it gave).
        if store.preload(res, value).is_ok() && matches!(created.object, CreatedObject::Pod(_)) {
            crate::controllers::after_pod_write(store, ns, &name);
        }
    }
}
