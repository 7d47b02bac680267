//! The ephemeral-volume controller: for each generic ephemeral volume of a pod
//! (`spec.volumes[].ephemeral`), the PersistentVolumeClaim `<pod>-<volume>` made from the volume's
//! `volumeClaimTemplate` (its labels, annotations and spec), controlled by the pod — as
//! kube-controller-manager creates it before the scheduler sees the pod. A claim of that name that
//! exists already is left alone (VolumeBinding then refuses it if the pod does not own it).

use muster_api::PodObject;
use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The claims to create for `pods`' ephemeral volumes, given the claims that exist (by
/// namespace and name), in pod then volume order.
pub fn claims_for(pods: &[&dyn PodObject], existing: &BTreeSet<(String, String)>) -> Vec<PersistentVolumeClaim> {
    let mut out = Vec::new();
    let mut made = BTreeSet::new();
    for pod in pods {
        let ns = pod.meta().namespace.clone().unwrap_or_else(|| "default".into());
        let pod_name = pod.meta().name.clone().unwrap_or_default();
        let volumes = pod.spec().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
        for v in volumes {
            let Some(template) = v.ephemeral.as_ref().and_then(|e| e.volume_claim_template.as_ref()) else {
                continue;
            };
            let key = (ns.clone(), format!("{pod_name}-{}", v.name));
            if existing.contains(&key) || !made.insert(key.clone()) {
                continue;
            }
            let meta = template.metadata.as_ref();
            out.push(PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(key.1),
                    namespace: Some(ns.clone()),
                    labels: meta.and_then(|m| m.labels.clone()),
                    annotations: meta.and_then(|m| m.annotations.clone()),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Pod".into(),
                        name: pod_name.clone(),
                        uid: pod.meta().uid.clone().unwrap_or_default(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]),
                    ..ObjectMeta::default()
                },
                spec: Some(template.spec.clone()),
                status: None,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    #[test]
    fn one_claim_per_ephemeral_volume_owned_by_the_pod() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "u-1"},
            "spec": {"containers": [{"name": "c"}], "volumes": [
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                    "metadata": {"labels": {"tier": "scratch"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                             "resources": {"requests": {"storage": "10Gi"}}}}}},
                {"name": "cache", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
            ]}
        }))
        .unwrap();
        let existing = BTreeSet::from([("ml".to_string(), "trainer-0-cache".to_string())]);
        let got = claims_for(&[&pod], &existing);
        assert_eq!(got.len(), 1);
        let c = &got[0];
        assert_eq!(c.metadata.name.as_deref(), Some("trainer-0-scratch"));
        assert_eq!(c.metadata.labels.as_ref().unwrap()["tier"], "scratch");
        let owner = &c.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("Pod", "trainer-0", "u-1"));
        assert_eq!(owner.controller, Some(true));
        assert_eq!(c.spec.as_ref().unwrap().storage_class_name.as_deref(), Some("fast"));
    }
}
