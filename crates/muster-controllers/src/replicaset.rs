//! The ReplicaSet controller (`pkg/controller/replicaset/replica_set.go`, `manageReplicas`): a
//! ReplicaSet creates pods from its template until `spec.replicas` (default 1) active pods exist.
//!
//! Counted: pods the ReplicaSet controls and orphans its selector matches (the controller adopts
//! them), that are active (`controller.FilterActivePods`: not Succeeded, not Failed, not being
//! deleted). Pods named by `generateName: <replicaset>-` get a five-character suffix derived from
//! namespace, name and a counter ([`crate::naming::generated_name`]; the API server's is random).
//!
//! Not done: scaling down (a plan deletes nothing; surplus pods are listed as they are) and
//! upstream's burst limit of 500 creations per sync (later syncs create the rest: the plan shows
//! the end of that).

use k8s_openapi::Resource;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;

use crate::pods::{Owner, Pods, controller_of, from_template, is_active};
use crate::{Created, CreatedObject, Expansion, ObjectRef, Workloads};

pub(crate) fn sync_all(w: &Workloads, pods: &mut Pods<'_>, out: &mut Expansion) {
    for rs in &w.replica_sets {
        let by = ObjectRef::of(ReplicaSet::KIND, &rs.metadata);
        let root = match controller_of(&rs.metadata) {
            Some(r) if r.kind == "Deployment" => {
                ObjectRef { kind: "Deployment", namespace: by.namespace.clone(), name: r.name.clone() }
            }
            _ => by.clone(),
        };
        for pod in sync(rs, pods) {
            out.created.push(Created { object: CreatedObject::Pod(Box::new(pod)), by: by.clone(), root: root.clone() });
        }
    }
}

/// The pods `rs` creates, given the pods that exist (which it adds them to).
pub fn sync(rs: &ReplicaSet, pods: &mut Pods<'_>) -> Vec<Pod> {
    let spec = &rs.spec;
    let Some(template) = spec.template.as_ref() else { return Vec::new() };
    if rs.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    let owner = Owner { api_version: ReplicaSet::API_VERSION, kind: ReplicaSet::KIND, meta: &rs.metadata };
    let active = pods.claimed(&owner, &spec.selector).filter(|p| is_active(p)).count();
    let want = usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0);
    let mut created = Vec::new();
    for _ in active..want {
        let mut pod = from_template(template, &owner);
        let base = pod.metadata.generate_name.clone().unwrap_or_default();
        pod.metadata.name = Some(pods.generate_name(owner.namespace(), &base));
        created.push(pods.add(pod));
    }
    created
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;

    use super::*;
    use crate::testing::{meta, pod, selector, template};

    fn rs(replicas: i32) -> ReplicaSet {
        let mut m = meta("ml", "web-5c8d9");
        m.uid = Some("rs-uid".into());
        ReplicaSet {
            metadata: m,
            spec: ReplicaSetSpec {
                replicas: Some(replicas),
                selector: selector(&[("app", "web")]),
                template: Some(template(&[("app", "web")])),
                ..Default::default()
            },
            status: None,
        }
    }

    #[test]
    fn creates_replicas_named_and_owned_as_upstream() {
        let mut pods = Pods::new(&[]);
        let created = sync(&rs(3), &mut pods);
        assert_eq!(created.len(), 3);
        for p in &created {
            let name = p.metadata.name.as_deref().unwrap();
            assert!(name.starts_with("web-5c8d9-") && name.len() == "web-5c8d9-".len() + 5, "{name}");
            assert_eq!(p.metadata.generate_name.as_deref(), Some("web-5c8d9-"));
            assert_eq!(p.metadata.namespace.as_deref(), Some("ml"));
            assert_eq!(p.metadata.labels.as_ref().unwrap()["app"], "web");
            let r = &p.metadata.owner_references.as_ref().unwrap()[0];
            assert_eq!((r.kind.as_str(), r.name.as_str(), r.uid.as_str()), ("ReplicaSet", "web-5c8d9", "rs-uid"));
            assert_eq!((r.controller, r.block_owner_deletion), (Some(true), Some(true)));
            assert!(p.metadata.creation_timestamp.is_none());
        }
        let mut names: Vec<_> = created.iter().map(|p| p.metadata.name.clone()).collect();
        names.dedup();
        assert_eq!(names.len(), 3);
        // Same input, same names.
        let again = sync(&rs(3), &mut Pods::new(&[]));
        assert_eq!(again, created);
    }

    #[test]
    fn owned_and_orphan_pods_count_terminated_and_foreign_ones_do_not() {
        let owned = pod("ml", "a", &[("app", "web")], Some(("ReplicaSet", "web-5c8d9", "rs-uid")), "Running");
        let orphan = pod("ml", "b", &[("app", "web")], None, "Pending");
        let done = pod("ml", "c", &[("app", "web")], Some(("ReplicaSet", "web-5c8d9", "rs-uid")), "Succeeded");
        let failed = pod("ml", "d", &[("app", "web")], None, "Failed");
        let foreign = pod("ml", "e", &[("app", "web")], Some(("ReplicaSet", "other", "x")), "Running");
        let stale = pod("ml", "f", &[("app", "web")], Some(("ReplicaSet", "web-5c8d9", "old-uid")), "Running");
        let elsewhere = pod("prod", "g", &[("app", "web")], None, "Running");
        let all: [&dyn crate::PodObject; 7] = [&owned, &orphan, &done, &failed, &foreign, &stale, &elsewhere];
        let mut pods = Pods::new(&all);
        assert_eq!(sync(&rs(4), &mut pods).len(), 2);
        assert!(sync(&rs(2), &mut Pods::new(&all)).is_empty());
    }

    #[test]
    fn an_owned_pod_the_selector_no_longer_matches_is_released() {
        let relabelled = pod("ml", "a", &[("app", "debug")], Some(("ReplicaSet", "web-5c8d9", "rs-uid")), "Running");
        assert_eq!(sync(&rs(1), &mut Pods::new(&[&relabelled])).len(), 1);
    }

    #[test]
    fn a_pod_being_deleted_does_not_count() {
        let mut p = pod("ml", "a", &[("app", "web")], Some(("ReplicaSet", "web-5c8d9", "rs-uid")), "Running");
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        assert_eq!(sync(&rs(1), &mut Pods::new(&[&p])).len(), 1);
    }

    #[test]
    fn replicas_default_to_one_and_zero_creates_nothing() {
        let mut r = rs(0);
        assert!(sync(&r, &mut Pods::new(&[])).is_empty());
        r.spec.replicas = None;
        assert_eq!(sync(&r, &mut Pods::new(&[])).len(), 1);
    }
}
