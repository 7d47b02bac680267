//! The kube-controller-manager stand-in: the resourceclaim controller, run synchronously after
//! every pod write (inside the same request, so tests see its writes as soon as the request
//! returns). It is [`muster_controllers::resourceclaim`] applied as store writes:
//!
//! - a pod with a `resourceClaimTemplateName` entry not yet in its
//!   `status.resourceClaimStatuses` gets its claims created (owned by the pod) and its status
//!   recorded;
//! - when a pod is deleted or finishes (`Succeeded`/`Failed`), the claims that name it lose it
//!   from `reservedFor`, are deallocated when no consumer is left (the controller's
//!   `resource.kubernetes.io/delete-protection` finalizer removed with the allocation), and the
//!   claims generated for it are deleted.
//!
//! - a PodGroup's template entries (KEP 5729) get one claim each for the whole group (owned by
//!   the PodGroup), recorded in its status and in its members' ([`muster_controllers::group_claims`]);
//!   a member's entry identical to the group's gets no claim of its own. Run after every PodGroup
//!   write, and for a pod after its own writes. When a PodGroup is deleted, the claims it owns are
//!   deleted (the garbage collector's part) and the claims reserved for it lose it from
//!   `reservedFor`, deallocated when no consumer is left.
//!
//! - a pod's generic ephemeral volumes get their PersistentVolumeClaims (the ephemeral-volume
//!   controller, [`muster_controllers::ephemeral`]).
//!
//! Not modelled: reacting to a template created after its pod (the pod waits until its next
//! write). The workload controllers are [`crate::workloads`].

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_controllers::group_claims::{claims_for_group, member_status};
use muster_controllers::resourceclaim::{Release, claims_for, release, release_consumers};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::registry::{self, ResId};
use crate::store::{self, Key, Store};

/// The finalizer the scheduler adds to a claim it allocates, removed with the allocation.
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

fn res(group: &str, plural: &str) -> ResId {
    let version = "v1";
    registry::by_path(group, version, plural).expect("in the resource table")
}

fn typed<T: DeserializeOwned>(v: &Value) -> Option<T> {
    T::deserialize(v).ok()
}

/// Runs the resourceclaim controller for the pod `ns/name` (present, or just deleted).
pub(crate) fn after_pod_write(store: &mut Store, ns: &str, name: &str) {
    let key = store::key(res("", "pods"), Some(ns), name);
    let pod: Option<Pod> = store.get(res("", "pods"), &key).and_then(|v| typed(v));
    if let Some(pod) = &pod {
        let group = pod_group_of(store, pod);
        create_claims(store, &key, pod, group.as_ref().map(|(_, g)| g));
        if let Some((_, g)) = &group {
            record_group_claims(store, &key, g);
        }
        create_volume_claims(store, pod);
    }
    // Only a pod that is gone or finished gives its claims back (a binding or a status patch
    // changes nothing for them).
    let finished = |p: &Pod| {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        matches!(phase, Some("Succeeded" | "Failed"))
    };
    if pod.as_ref().is_none_or(finished) {
        release_claims(store, ns, name);
    }
}

/// The PodGroup a pod names (`spec.schedulingGroup.podGroupName`), as stored (v1beta1).
fn pod_group_of(store: &Store, pod: &Pod) -> Option<(ResId, PodGroup)> {
    let name = pod.spec.as_ref()?.scheduling_group.as_ref()?.pod_group_name.clone()?;
    pod_group(store, pod.metadata.namespace.as_deref().unwrap_or("default"), &name)
}

fn pod_group(store: &Store, ns: &str, name: &str) -> Option<(ResId, PodGroup)> {
    let res = registry::by_path("scheduling.k8s.io", "v1beta1", "podgroups")?;
    let v = store.get(res, &store::key(res, Some(ns), name))?;
    Some((res, typed(v)?))
}

/// Runs the resourceclaim controller for the PodGroup `ns/name`: its template entries' claims
/// created and recorded, then recorded in its members' statuses.
pub(crate) fn after_pod_group_write(store: &mut Store, ns: &str, name: &str) {
    let Some((group_res, mut group)) = pod_group(store, ns, name) else { return };
    let templates: Vec<ResourceClaimTemplate> =
        store.list(res("resource.k8s.io", "resourceclaimtemplates"), Some(ns)).filter_map(|(_, v)| typed(v)).collect();
    if let Some((made, updated)) = claims_for_group(&group, &templates) {
        for claim in made {
            if let Ok(v) = serde_json::to_value(&claim) {
                let _ = store.create(res("resource.k8s.io", "resourceclaims"), Some(ns), v);
            }
        }
        let key = store::key(group_res, Some(ns), name);
        let Some(old) = store.get(group_res, &key).cloned() else { return };
        let mut new = (*old).clone();
        let statuses = updated.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
        new["status"]["resourceClaimStatuses"] = serde_json::to_value(statuses).unwrap_or(Value::Null);
        store.write(group_res, key, old, new);
        group = *updated;
    }
    let pods = res("", "pods");
    let members: Vec<Key> = store
        .list(pods, Some(ns))
        .filter(|(_, v)| v["spec"]["schedulingGroup"]["podGroupName"] == name)
        .map(|(k, _)| k.clone())
        .collect();
    for key in members {
        record_group_claims(store, &key, &group);
    }
}

/// The group's recorded claims written into the member `key`'s status, where missing.
fn record_group_claims(store: &mut Store, key: &Key, group: &PodGroup) {
    let pods = res("", "pods");
    let Some(old) = store.get(pods, key).cloned() else { return };
    let Some(pod) = typed::<Pod>(&old) else { return };
    let Some(updated) = member_status(&pod, group) else { return };
    let statuses = updated.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    let mut new = (*old).clone();
    new["status"]["resourceClaimStatuses"] = serde_json::to_value(statuses).unwrap_or(Value::Null);
    store.write(pods, key.clone(), old, new);
}

fn create_claims(store: &mut Store, key: &Key, pod: &Pod, group: Option<&PodGroup>) {
    let (pods, claims) = (res("", "pods"), res("resource.k8s.io", "resourceclaims"));
    let templates: Vec<ResourceClaimTemplate> = store
        .list(res("resource.k8s.io", "resourceclaimtemplates"), Some(&key.0))
        .filter_map(|(_, v)| typed(v))
        .collect();
    let Some((made, updated)) = claims_for(pod, &templates, group) else { return };
    for claim in made {
        if let Ok(v) = serde_json::to_value(&claim) {
            // The name is derived from the pod: a claim left from before is the same claim.
            let _ = store.create(claims, Some(&key.0), v);
        }
    }
    let Some(old) = store.get(pods, key).cloned() else { return };
    let statuses = updated.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    let mut new = (*old).clone();
    new["status"]["resourceClaimStatuses"] = serde_json::to_value(statuses).unwrap_or(Value::Null);
    store.write(pods, key.clone(), old, new);
}

/// The ephemeral-volume controller: the pod's generic ephemeral volumes get their
/// PersistentVolumeClaims (`<pod>-<volume>`, owned by the pod) when they do not exist.
fn create_volume_claims(store: &mut Store, pod: &Pod) {
    let has_ephemeral =
        pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).is_some_and(|v| v.iter().any(|v| v.ephemeral.is_some()));
    if !has_ephemeral {
        return;
    }
    let pvcs = res("", "persistentvolumeclaims");
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let existing: std::collections::BTreeSet<(String, String)> =
        store.list(pvcs, Some(&ns)).map(|(k, _)| (ns.clone(), k.1.clone())).collect();
    for claim in muster_controllers::ephemeral::claims_for(&[pod], &existing) {
        if let Ok(v) = serde_json::to_value(&claim) {
            let _ = store.create(pvcs, Some(&ns), v);
        }
    }
}

/// Whether `claim` names the pod `name`: as a consumer or as its owner.
fn names_pod(claim: &Value, name: &str) -> bool {
    let reserved = claim["status"]["reservedFor"].as_array().into_iter().flatten();
    let owners = claim["metadata"]["ownerReferences"].as_array().into_iter().flatten();
    reserved.chain(owners.filter(|o| o["kind"] == "Pod")).any(|r| r["name"] == name)
}

/// Whether `claim` names the PodGroup `name`: as a consumer or as its owner.
fn names_group(claim: &Value, name: &str) -> bool {
    let reserved = claim["status"]["reservedFor"].as_array().into_iter().flatten();
    let owners = claim["metadata"]["ownerReferences"].as_array().into_iter().flatten();
    reserved
        .filter(|r| r["resource"] == "podgroups")
        .chain(owners.filter(|o| o["kind"] == "PodGroup"))
        .any(|r| r["name"] == name)
}

/// The claims of the namespace that `keep` keeps, typed.
fn claims_where(store: &Store, ns: &str, keep: impl Fn(&Value) -> bool) -> Vec<(Key, ResourceClaim)> {
    let claims_res = res("resource.k8s.io", "resourceclaims");
    store
        .list(claims_res, Some(ns))
        .filter(|(_, v)| keep(v))
        .filter_map(|(k, v)| Some((k.clone(), typed(v)?)))
        .collect()
}

/// A PodGroup was deleted: the claims it owns go, the claims reserved for it are released.
pub(crate) fn after_pod_group_delete(store: &mut Store, ns: &str, name: &str) {
    let pods_res = res("", "pods");
    for (key, claim) in claims_where(store, ns, |v| names_group(v, name)) {
        let pods: Vec<Pod> = claim
            .status
            .iter()
            .flat_map(|s| s.reserved_for.iter().flatten())
            .filter(|r| r.resource == "pods")
            .filter_map(|r| store.get(pods_res, &store::key(pods_res, Some(ns), &r.name)).and_then(|v| typed(v)))
            .collect();
        let pod = |n: &str| pods.iter().find(|p| p.metadata.name.as_deref() == Some(n));
        let group = |n: &str| pod_group(store, ns, n).is_some();
        match release_consumers(&claim, pod, group) {
            Some(Release::Update(c)) => write_claim_status(store, &key, &c),
            Some(Release::Delete(_)) => delete_claim(store, &key),
            None => {}
        }
    }
}

fn release_claims(store: &mut Store, ns: &str, pod_name: &str) {
    let pods_res = res("", "pods");
    let related = claims_where(store, ns, |v| names_pod(v, pod_name));
    if related.is_empty() {
        return;
    }
    // The pods the claims name, read one by one (not the whole namespace).
    let named: std::collections::BTreeSet<String> = related
        .iter()
        .flat_map(|(_, c)| c.status.iter().flat_map(|s| s.reserved_for.iter().flatten()).map(|r| r.name.clone()))
        .collect();
    let pods: Vec<Pod> = named
        .iter()
        .filter_map(|n| store.get(pods_res, &store::key(pods_res, Some(ns), n)).and_then(|v| typed(v)))
        .collect();
    let lookup = |n: &str| pods.iter().find(|p| p.metadata.name.as_deref() == Some(n));
    for (key, claim) in related {
        match release(&claim, lookup) {
            Some(Release::Update(c)) => write_claim_status(store, &key, &c),
            Some(Release::Delete(_)) => delete_claim(store, &key),
            None => {}
        }
    }
}

fn write_claim_status(store: &mut Store, key: &Key, claim: &ResourceClaim) {
    let claims = res("resource.k8s.io", "resourceclaims");
    let Some(old) = store.get(claims, key).cloned() else { return };
    let mut new = (*old).clone();
    new["status"] = serde_json::to_value(&claim.status).unwrap_or(Value::Null);
    if new["status"]["allocation"].is_null() {
        drop_finalizer(&mut new);
    }
    store.write(claims, key.clone(), old, new);
}

fn drop_finalizer(obj: &mut Value) {
    if let Some(list) = obj["metadata"]["finalizers"].as_array_mut() {
        list.retain(|f| f != DELETE_PROTECTION);
    }
}

fn delete_claim(store: &mut Store, key: &Key) {
    let claims = res("resource.k8s.io", "resourceclaims");
    let Some(old) = store.get(claims, key).cloned() else { return };
    let mut freed = (*old).clone();
    freed["status"] = json!({});
    drop_finalizer(&mut freed);
    store.write(claims, key.clone(), old, freed);
    let _ = store.delete(claims, key, None, None);
}
