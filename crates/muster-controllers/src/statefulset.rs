//! The StatefulSet controller (`pkg/controller/statefulset/stateful_set_control.go`,
//! `stateful_set_utils.go` `newVersionedStatefulSetPod`, `initIdentity`, `updateStorage`): one pod
//! per ordinal, `spec.ordinals.start` (default 0) up to `start + spec.replicas` (default 1), named
//! `<set>-<ordinal>`, with `generateName: <set>-` from `GetPodFromTemplate`, the labels
//! `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index` (PodIndexLabel, GA) and
//! `controller-revision-hash` (the update revision's name, `<set>-<hash>`), `spec.hostname` = the
//! pod's name and `spec.subdomain` = `spec.serviceName`, and one volume per
//! `volumeClaimTemplates` entry naming the claim `<template>-<set>-<ordinal>`.
//!
//! `podManagementPolicy: OrderedReady` (the default) creates one pod at a time, each after the
//! pods before it are Running and Ready. A plan is one instant, and what an operator asks of it is
//! where the whole set would go: it creates every missing ordinal, assuming that the pods it
//! places become ready, and a note says so; it stops, as upstream does, at an existing pod that is bound but not
//! Running and Ready, or that is being deleted (a note says which). `Parallel` creates them all.
//!
//! Deviations: the revision hash is muster's ([`crate::naming::template_hash`]) unless
//! `status.updateRevision` names the revision; the claim volumes come first, in template order
//! (upstream's order follows a Go map). Not done: a Failed pod is deleted and recreated under the
//! same name upstream; a plan leaves it (and says so). The claims of `volumeClaimTemplates` are made
//! by [`claims_for`] (labels from the template and the set's selector; no owner, the default
//! `Retain` retention policy). Every new pod takes the update revision: upstream gives ordinals
//! below a RollingUpdate `partition` the current revision's template, which needs the
//! ControllerRevisions.

use k8s_openapi::Resource;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume};
use muster_api::PodObject;

use crate::naming::template_hash;
use crate::pods::{Owner, Pods, controller_of, from_template, phase};
use crate::{Created, CreatedObject, Expansion, ObjectRef};

pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
pub const REVISION_LABEL: &str = "controller-revision-hash";

pub(crate) fn sync_all(sets: &[StatefulSet], pods: &mut Pods<'_>, out: &mut Expansion) {
    for set in sets {
        let by = ObjectRef::of(StatefulSet::KIND, &set.metadata);
        let (created, notes) = sync(set, pods);
        out.notes.extend(notes.into_iter().map(|n| format!("{by}: {n}")));
        for pod in created {
            out.created.push(Created { object: CreatedObject::Pod(Box::new(pod)), by: by.clone(), root: by.clone() });
        }
    }
}

/// The pods `set` creates given the pods that exist (to which they are added), and notes.
pub fn sync(set: &StatefulSet, pods: &mut Pods<'_>) -> (Vec<Pod>, Vec<String>) {
    let (mut created, mut notes) = (Vec::new(), Vec::new());
    let spec = &set.spec;
    if set.metadata.deletion_timestamp.is_some() {
        return (created, notes);
    }
    let owner = Owner { api_version: StatefulSet::API_VERSION, kind: StatefulSet::KIND, meta: &set.metadata };
    let (ns, name) = (owner.namespace(), owner.name());
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0).max(0);
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let ordered = spec.pod_management_policy.as_deref().unwrap_or("OrderedReady") == "OrderedReady";
    let status = set.status.as_ref();
    let revision = match status.and_then(|s| s.update_revision.as_deref()).filter(|r| !r.is_empty()) {
        Some(r) => r.to_string(),
        None => format!("{name}-{}", template_hash(&spec.template, status.and_then(|s| s.collision_count))),
    };
    for ordinal in start..start + replicas {
        let pod_name = format!("{name}-{ordinal}");
        let existing = pods.taken(ns, &pod_name).then(|| {
            pods.iter().find(|p| {
                p.meta().namespace.as_deref().unwrap_or("default") == ns && p.meta().name.as_deref() == Some(&pod_name)
            })
        });
        if let Some(existing) = existing.flatten() {
            let ours = owner.claims(existing.meta(), &spec.selector);
            if !ours {
                let holder = controller_of(existing.meta())
                    .map_or("no controller".to_string(), |r| format!("{} {}", r.kind, r.name));
                notes.push(format!("pod {ns}/{pod_name} exists and is not the StatefulSet's ({holder}): ordinal {ordinal} is not created"));
            } else if matches!(phase(existing), "Failed" | "Succeeded") {
                notes.push(format!(
                    "pod {ns}/{pod_name} is {}: the controller deletes and recreates it, which a plan does not do",
                    phase(existing)
                ));
            }
            let bound = existing.node_name().is_some_and(|n| !n.is_empty());
            let blocked = existing.meta().deletion_timestamp.is_some()
                || (bound && !(phase(existing) == "Running" && ready(existing)));
            if ordered && ours && blocked {
                let missing: Vec<String> = (ordinal + 1..start + replicas)
                    .map(|o| format!("{name}-{o}"))
                    .filter(|n| !pods.taken(ns, n))
                    .collect();
                if !missing.is_empty() {
                    notes.push(format!(
                        "OrderedReady: pod {ns}/{pod_name} is not Running and Ready, so {} wait(s)",
                        missing.join(", ")
                    ));
                }
                break;
            }
            continue;
        }
        let mut pod = from_template(&spec.template, &owner);
        pod.metadata.name = Some(pod_name.clone());
        let labels = pod.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(POD_NAME_LABEL.into(), pod_name.clone());
        labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
        labels.insert(REVISION_LABEL.into(), revision.clone());
        let pod_spec = pod.spec.get_or_insert_with(Default::default);
        pod_spec.hostname = Some(pod_name.clone());
        pod_spec.subdomain = spec.service_name.clone().filter(|s| !s.is_empty());
        let templates = spec.volume_claim_templates.as_deref().unwrap_or_default();
        if !templates.is_empty() {
            let claim_names: Vec<String> =
                templates.iter().map(|t| t.metadata.name.clone().unwrap_or_default()).collect();
            let mut volumes: Vec<Volume> = claim_names
                .iter()
                .map(|t| Volume {
                    name: t.clone(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: format!("{t}-{name}-{ordinal}"),
                        read_only: None,
                    }),
                    ..Default::default()
                })
                .collect();
            volumes.extend(pod_spec.volumes.take().into_iter().flatten().filter(|v| !claim_names.contains(&v.name)));
            pod_spec.volumes = Some(volumes);
        }
        created.push(pods.add(pod));
    }
    if ordered && created.len() > 1 {
        let names: Vec<&str> = created.iter().filter_map(|p| p.metadata.name.as_deref()).collect();
        notes.push(format!(
            "OrderedReady: the controller creates {} one at a time, each once the pods before it are Running and Ready; the plan creates them all and assumes they become ready",
            names.join(", ")
        ));
    }
    (created, notes)
}

/// `podutil.IsPodReady`: the Ready condition is True.
fn ready(pod: &dyn PodObject) -> bool {
    pod.status()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The claims the StatefulSet controller makes for its pods (`createPersistentVolumeClaims`):
/// `<template>-<set>-<ordinal>` for each `volumeClaimTemplates` entry of the set that controls the
/// pod, unless a claim of that name exists.
pub fn claims_for(
    sets: &[StatefulSet],
    pods: &[&dyn PodObject],
    existing: &std::collections::BTreeSet<(String, String)>,
) -> Vec<PersistentVolumeClaim> {
    let mut out = Vec::new();
    for pod in pods {
        let ns = pod.meta().namespace.as_deref().unwrap_or("default");
        let Some(owner) = pod
            .meta()
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == StatefulSet::KIND)
        else {
            continue;
        };
        let Some(set) = sets.iter().find(|s| {
            s.metadata.name.as_deref() == Some(owner.name.as_str())
                && s.metadata.namespace.as_deref().unwrap_or("default") == ns
        }) else {
            continue;
        };
        let pod_name = pod.meta().name.as_deref().unwrap_or_default();
        let Some(ordinal) = pod_name.strip_prefix(&format!("{}-", owner.name)) else { continue };
        let selector = set.spec.selector.match_labels.clone().unwrap_or_default();
        for t in set.spec.volume_claim_templates.as_deref().unwrap_or_default() {
            let name = format!("{}-{}-{ordinal}", t.metadata.name.as_deref().unwrap_or_default(), owner.name);
            let key = (ns.to_string(), name.clone());
            if existing.contains(&key)
                || out.iter().any(|c: &PersistentVolumeClaim| {
                    c.metadata.name.as_deref() == Some(&name) && c.metadata.namespace.as_deref() == Some(ns)
                })
            {
                continue;
            }
            let mut claim = t.clone();
            claim.metadata.name = Some(name);
            claim.metadata.namespace = Some(ns.to_string());
            let labels = claim.metadata.labels.get_or_insert_with(Default::default);
            labels.extend(selector.clone());
            claim.status = None;
            out.push(claim);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{StatefulSetOrdinals, StatefulSetSpec, StatefulSetStatus};
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodCondition};

    use super::*;
    use crate::testing::{meta, pod, selector, template};

    fn set(replicas: i32) -> StatefulSet {
        let mut m = meta("db", "pg");
        m.uid = Some("sts-uid".into());
        StatefulSet {
            metadata: m,
            spec: StatefulSetSpec {
                replicas: Some(replicas),
                selector: selector(&[("app", "pg")]),
                service_name: Some("pg-headless".into()),
                template: template(&[("app", "pg")]),
                ..Default::default()
            },
            status: None,
        }
    }

    fn names(pods: &[Pod]) -> Vec<&str> {
        pods.iter().map(|p| p.metadata.name.as_deref().unwrap()).collect()
    }

    #[test]
    fn pods_get_ordinal_names_identity_and_labels() {
        let (pods, notes) = sync(&set(3), &mut Pods::new(&[]));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("OrderedReady: the controller creates pg-0, pg-1, pg-2 one at a time"));
        assert_eq!(names(&pods), ["pg-0", "pg-1", "pg-2"]);
        let p = &pods[1];
        let l = p.metadata.labels.as_ref().unwrap();
        assert_eq!(l[POD_NAME_LABEL], "pg-1");
        assert_eq!(l[POD_INDEX_LABEL], "1");
        assert_eq!(l["app"], "pg");
        assert!(l[REVISION_LABEL].starts_with("pg-"));
        assert_eq!(p.metadata.generate_name.as_deref(), Some("pg-"));
        let s = p.spec.as_ref().unwrap();
        assert_eq!((s.hostname.as_deref(), s.subdomain.as_deref()), (Some("pg-1"), Some("pg-headless")));
        let r = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((r.kind.as_str(), r.name.as_str(), r.api_version.as_str()), ("StatefulSet", "pg", "apps/v1"));
    }

    #[test]
    fn ordinals_start_and_the_status_revision_are_respected() {
        let mut s = set(2);
        s.spec.ordinals = Some(StatefulSetOrdinals { start: Some(5) });
        s.status = Some(StatefulSetStatus { update_revision: Some("pg-6d4f9b8c7".into()), ..Default::default() });
        let (pods, _) = sync(&s, &mut Pods::new(&[]));
        assert_eq!(names(&pods), ["pg-5", "pg-6"]);
        assert_eq!(pods[0].metadata.labels.as_ref().unwrap()[REVISION_LABEL], "pg-6d4f9b8c7");
    }

    #[test]
    fn volume_claim_templates_become_volumes() {
        let mut s = set(1);
        s.spec.volume_claim_templates =
            Some(vec![PersistentVolumeClaim { metadata: meta("db", "data"), ..Default::default() }]);
        let (pods, _) = sync(&s, &mut Pods::new(&[]));
        let v = &pods[0].spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        assert_eq!(v.name, "data");
        assert_eq!(v.persistent_volume_claim.as_ref().unwrap().claim_name, "data-pg-0");
        let refs: Vec<&dyn crate::PodObject> = pods.iter().map(|p| p as &dyn crate::PodObject).collect();
        let existing = std::collections::BTreeSet::from([("db".to_string(), "data-pg-1".to_string())]);
        let mut two = s.clone();
        two.spec.replicas = Some(2);
        let (pods2, _) = sync(&two, &mut Pods::new(&[]));
        let refs2: Vec<&dyn crate::PodObject> = pods2.iter().map(|p| p as &dyn crate::PodObject).collect();
        let claims = claims_for(std::slice::from_ref(&two), &refs2, &existing);
        let names: Vec<_> = claims.iter().map(|c| c.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(names, ["data-pg-0"]);
        assert_eq!(claims[0].metadata.labels.as_ref().unwrap()["app"], "pg");
        assert_eq!(claims_for(&[s], &refs, &Default::default()).len(), 1);
    }

    #[test]
    fn existing_ordinals_are_kept_and_ordered_ready_waits_for_a_bound_unready_pod() {
        let mut running = pod("db", "pg-0", &[("app", "pg")], Some(("StatefulSet", "pg", "sts-uid")), "Running");
        running.spec.as_mut().unwrap().node_name = Some("n1".into());
        running.status.as_mut().unwrap().conditions =
            Some(vec![PodCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() }]);
        let (pods, _) = sync(&set(3), &mut Pods::new(&[&running]));
        assert_eq!(names(&pods), ["pg-1", "pg-2"]);

        let mut unready = running.clone();
        unready.status.as_mut().unwrap().conditions = None;
        let (pods, notes) = sync(&set(3), &mut Pods::new(&[&unready]));
        assert!(pods.is_empty());
        assert_eq!(notes.len(), 1, "{notes:?}");
        let mut parallel = set(3);
        parallel.spec.pod_management_policy = Some("Parallel".into());
        assert_eq!(names(&sync(&parallel, &mut Pods::new(&[&unready])).0), ["pg-1", "pg-2"]);
    }

    #[test]
    fn a_foreign_pod_with_the_name_is_left_and_named() {
        let foreign = pod("db", "pg-0", &[("app", "other")], Some(("ReplicaSet", "x", "u")), "Running");
        let (pods, notes) = sync(&set(2), &mut Pods::new(&[&foreign]));
        assert_eq!(names(&pods), ["pg-1"]);
        assert!(notes[0].contains("not the StatefulSet's"), "{notes:?}");
    }
}
