//! The PV controller and an external provisioner, as stand-ins (test doubles): run synchronously
//! after every write of a PersistentVolume or PersistentVolumeClaim, so that a scheduler's
//! VolumeBinding PreBind sees its claims bound as soon as its own write returns.
//!
//! - A volume whose `claimRef` names a claim that exists (same uid when the reference has one)
//!   and is not bound yet: the claim is bound to it (`spec.volumeName`, the
//!   `pv.kubernetes.io/bind-completed` and `pv.kubernetes.io/bound-by-controller` annotations,
//!   `status.phase: Bound` with the volume's capacity), and the volume's phase is `Bound`.
//! - A claim not bound yet with the `volume.kubernetes.io/selected-node` annotation whose
//!   StorageClass has a provisioner other than `kubernetes.io/no-provisioner`: a volume
//!   `pvc-<claim uid>` of the requested size is created for it (a CSI volume of the provisioner,
//!   without node affinity, as a network volume is), then bound as above.
//!
//! Not modelled: delayed or failing provisioning, volume deletion and reclaim policies, the
//! controller's own matching of unbound claims to volumes (Immediate binding).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::registry::{self, ResId};
use crate::store::{self, Store};

const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

fn res(group: &str, plural: &str) -> ResId {
    registry::by_path(group, "v1", plural).expect("in the resource table")
}

fn typed<T: DeserializeOwned>(v: &Value) -> Option<T> {
    T::deserialize(v).ok()
}

/// Runs the stand-ins after a write of `plural` (`persistentvolumes` or
/// `persistentvolumeclaims`) named `ns/name` (`ns` unused for volumes).
pub(crate) fn after_write(store: &mut Store, plural: &str, ns: &str, name: &str) {
    match plural {
        "persistentvolumes" => {
            let pvs = res("", "persistentvolumes");
            let pv = store.get(pvs, &store::key(pvs, None, name)).and_then(|v| typed::<PersistentVolume>(v));
            if let Some(pv) = pv {
                bind_to_claim_ref(store, &pv);
            }
        }
        "persistentvolumeclaims" => {
            let pvcs = res("", "persistentvolumeclaims");
            let pvc = store.get(pvcs, &store::key(pvcs, Some(ns), name)).and_then(|v| typed(v));
            if let Some(pvc) = pvc {
                provision(store, &pvc);
            }
        }
        _ => {}
    }
}

/// The claim a volume's `claimRef` names, bound to it when it is not bound yet.
fn bind_to_claim_ref(store: &mut Store, pv: &PersistentVolume) {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else { return };
    let (Some(ns), Some(name)) = (r.namespace.as_deref(), r.name.as_deref()) else { return };
    let pvcs = res("", "persistentvolumeclaims");
    let Some(pvc) = store.get(pvcs, &store::key(pvcs, Some(ns), name)).and_then(|v| typed::<PersistentVolumeClaim>(v))
    else {
        return;
    };
    let same = r.uid.as_deref().is_none_or(|uid| pvc.metadata.uid.as_deref() == Some(uid));
    if same && volume_name(&pvc).is_none() {
        bind(store, &pvc, pv);
    }
}

/// A claim waiting for dynamic provisioning on its selected node gets its volume.
fn provision(store: &mut Store, pvc: &PersistentVolumeClaim) {
    let asked = pvc.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(ANN_SELECTED_NODE));
    if !asked || volume_name(pvc).is_some() {
        return;
    }
    let classes = res("storage.k8s.io", "storageclasses");
    let Some(class_name) = pvc.spec.as_ref().and_then(|s| s.storage_class_name.clone()) else { return };
    let Some(class) =
        store.get(classes, &store::key(classes, None, &class_name)).and_then(|v| typed::<StorageClass>(v))
    else {
        return;
    };
    if class.provisioner == NO_PROVISIONER {
        return;
    }
    let uid = pvc.metadata.uid.clone().unwrap_or_default();
    let spec = pvc.spec.clone().unwrap_or_default();
    let size = spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")).cloned();
    let pv = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": format!("pvc-{uid}"), "annotations": {"pv.kubernetes.io/provisioned-by": class.provisioner}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.access_modes,
            "volumeMode": spec.volume_mode,
            "storageClassName": class_name,
            "persistentVolumeReclaimPolicy": class.reclaim_policy.as_deref().unwrap_or("Delete"),
            "csi": {"driver": class.provisioner, "volumeHandle": format!("pvc-{uid}")},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": pvc.metadata.namespace, "name": pvc.metadata.name, "uid": uid},
        },
    });
    let pvs = res("", "persistentvolumes");
    if let Ok(created) = store.create(pvs, None, pv)
        && let Some(pv) = typed::<PersistentVolume>(&created)
    {
        bind(store, pvc, &pv);
    }
}

/// The PV controller's binding: the claim names the volume, both are `Bound`.
fn bind(store: &mut Store, pvc: &PersistentVolumeClaim, pv: &PersistentVolume) {
    let (pvcs, pvs) = (res("", "persistentvolumeclaims"), res("", "persistentvolumes"));
    let pv_name = pv.metadata.name.clone().unwrap_or_default();
    let ns = pvc.metadata.namespace.as_deref().unwrap_or("default");
    let claim_key = store::key(pvcs, Some(ns), pvc.metadata.name.as_deref().unwrap_or_default());
    if let Some(old) = store.get(pvcs, &claim_key).cloned() {
        let mut new = (*old).clone();
        new["spec"]["volumeName"] = json!(pv_name);
        for a in [ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER] {
            new["metadata"]["annotations"][a] = json!("yes");
        }
        let spec = pv.spec.as_ref();
        new["status"] = json!({
            "phase": "Bound",
            "accessModes": spec.and_then(|s| s.access_modes.clone()),
            "capacity": spec.and_then(|s| s.capacity.clone()),
        });
        store.write(pvcs, claim_key, old, new);
    }
    let volume_key = store::key(pvs, None, &pv_name);
    if let Some(old) = store.get(pvs, &volume_key).cloned() {
        let mut new = (*old).clone();
        new["status"] = json!({"phase": "Bound"});
        store.write(pvs, volume_key, old, new);
    }
}

fn volume_name(pvc: &PersistentVolumeClaim) -> Option<&str> {
    pvc.spec.as_ref()?.volume_name.as_deref().filter(|v| !v.is_empty())
}
