//! The API server's rules (1.37 `pkg/apis/core/validation`, `pkg/apis/storage/validation`) for the
//! fields of PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and CSIStorageCapacities that the volume
//! plugins read: access modes, storage requests and capacities, volume modes, the volume source,
//! node affinity, binding modes, allowed topologies and attach limits.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec};
use k8s_openapi::api::storage::v1::{CSINode, CSIStorageCapacity, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{FieldError, invalid, node_selector_requirement, on, unsupported};
use crate::cluster::ModelError;
use crate::volumes::Volumes;

/// `supportedAccessModes`, sorted as upstream lists them.
const ACCESS_MODES: [&str; 4] = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];
const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];
const BINDING_MODES: [&str; 2] = ["Immediate", "WaitForFirstConsumer"];

/// Every storage object's errors, by kind and name.
pub fn all(v: &Volumes) -> Vec<ModelError> {
    let mut out = Vec::new();
    for ((ns, name), c) in &v.claims {
        out.extend(on("PersistentVolumeClaim", &format!("{ns}/{name}"), claim(c)));
    }
    for (name, pv) in &v.volumes {
        out.extend(on("PersistentVolume", name, volume(pv)));
    }
    for (name, c) in &v.classes {
        out.extend(on("StorageClass", name, storage_class(c)));
    }
    for (name, n) in &v.csi_nodes {
        out.extend(on("CSINode", name, csi_node(n)));
    }
    for (key, c) in &v.capacities {
        out.extend(on("CSIStorageCapacity", key, csi_storage_capacity(c)));
    }
    out
}

fn access_modes(modes: &[String], path: &str, required: &str, out: &mut Vec<FieldError>) {
    if modes.is_empty() {
        out.push((path.into(), format!("Required value: {required}")));
    }
    for m in modes {
        if !ACCESS_MODES.contains(&m.as_str()) {
            out.push((path.into(), unsupported(m, &ACCESS_MODES)));
        }
    }
    if modes.len() > 1 && modes.iter().any(|m| m == "ReadWriteOncePod") {
        out.push((path.into(), "Forbidden: may not use ReadWriteOncePod with other access modes".into()));
    }
}

fn volume_mode(mode: Option<&str>, path: &str, out: &mut Vec<FieldError>) {
    if let Some(m) = mode.filter(|m| !VOLUME_MODES.contains(m)) {
        out.push((path.into(), unsupported(m, &VOLUME_MODES)));
    }
}

/// `ValidatePositiveQuantityValue` (after the quantity parses).
fn positive(q: &Quantity, path: &str, out: &mut Vec<FieldError>) {
    match muster_api::quantity::parse(&q.0) {
        Err(_) => out.push((path.into(), invalid(format!("{:?}", q.0), "must be a valid quantity"))),
        Ok(v) if v.signum() <= 0 => out.push((path.into(), invalid(format!("{:?}", q.0), "must be greater than zero"))),
        Ok(_) => {}
    }
}

/// `ValidatePersistentVolumeClaimSpec`.
pub fn claim(c: &PersistentVolumeClaim) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(spec) = c.spec.as_ref() else {
        return vec![("spec".into(), "Required value".into())];
    };
    let modes = spec.access_modes.as_deref().unwrap_or(&[]);
    access_modes(modes, "spec.accessModes", "at least 1 access mode is required", &mut out);
    let storage = spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage"));
    match storage {
        None => out.push(("spec.resources[storage]".into(), "Required value".into())),
        Some(q) => positive(q, "spec.resources[storage]", &mut out),
    }
    volume_mode(spec.volume_mode.as_deref(), "spec.volumeMode", &mut out);
    out
}

/// `ValidatePersistentVolumeSpec`, for the fields muster reads.
pub fn volume(pv: &PersistentVolume) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(spec) = pv.spec.as_ref() else {
        return vec![("spec".into(), "Required value: must specify a volume type".into())];
    };
    let modes = spec.access_modes.as_deref().unwrap_or(&[]);
    access_modes(modes, "spec.accessModes", "must specify at least 1 access mode", &mut out);
    match spec.capacity.as_ref().and_then(|c| c.get("storage")) {
        None => out.push(("spec.capacity".into(), "Required value".into())),
        Some(q) => positive(q, "spec.capacity[storage]", &mut out),
    }
    volume_mode(spec.volume_mode.as_deref(), "spec.volumeMode", &mut out);
    match sources(spec) {
        0 => out.push(("spec".into(), "Required value: must specify a volume type".into())),
        1 => {}
        _ => out.push(("spec".into(), "Forbidden: may not specify more than 1 volume type".into())),
    }
    let required = spec.node_affinity.as_ref().and_then(|a| a.required.as_ref());
    if spec.local.is_some() && required.is_none() {
        out.push(("spec.nodeAffinity".into(), "Required value: Local volume requires node affinity".into()));
    }
    if let Some(r) = required {
        let path = "spec.nodeAffinity.required.nodeSelectorTerms";
        if r.node_selector_terms.is_empty() {
            out.push((path.into(), "Required value: must have at least one node selector term".into()));
        }
        for (i, t) in r.node_selector_terms.iter().enumerate() {
            for (j, e) in t.match_expressions.iter().flatten().enumerate() {
                out.extend(node_selector_requirement(e, &format!("{path}[{i}].matchExpressions[{j}]")));
            }
        }
    }
    out
}

/// How many volume sources the spec names.
fn sources(s: &PersistentVolumeSpec) -> usize {
    [
        s.aws_elastic_block_store.is_some(),
        s.azure_disk.is_some(),
        s.azure_file.is_some(),
        s.cephfs.is_some(),
        s.cinder.is_some(),
        s.csi.is_some(),
        s.fc.is_some(),
        s.flex_volume.is_some(),
        s.flocker.is_some(),
        s.gce_persistent_disk.is_some(),
        s.glusterfs.is_some(),
        s.host_path.is_some(),
        s.iscsi.is_some(),
        s.local.is_some(),
        s.nfs.is_some(),
        s.photon_persistent_disk.is_some(),
        s.portworx_volume.is_some(),
        s.quobyte.is_some(),
        s.rbd.is_some(),
        s.scale_io.is_some(),
        s.storageos.is_some(),
        s.vsphere_volume.is_some(),
    ]
    .into_iter()
    .filter(|x| *x)
    .count()
}

/// `ValidateStorageClass`: a provisioner, a known binding mode, allowed topologies with values.
pub fn storage_class(c: &StorageClass) -> Vec<FieldError> {
    let mut out = Vec::new();
    if c.provisioner.is_empty() {
        out.push(("provisioner".into(), "Required value".into()));
    }
    if let Some(m) = c.volume_binding_mode.as_deref().filter(|m| !BINDING_MODES.contains(m)) {
        out.push(("volumeBindingMode".into(), unsupported(m, &BINDING_MODES)));
    }
    for (i, t) in c.allowed_topologies.iter().flatten().enumerate() {
        let exprs = t.match_label_expressions.as_deref().unwrap_or(&[]);
        if exprs.is_empty() {
            let path = format!("allowedTopologies[{i}].matchLabelExpressions");
            out.push((path, "Required value: must have at least one label selector requirement".into()));
        }
        for (j, e) in exprs.iter().enumerate() {
            if e.values.is_empty() {
                let path = format!("allowedTopologies[{i}].matchLabelExpressions[{j}].values");
                out.push((path, "Required value: must specify as least one value".into()));
            }
        }
    }
    out
}

/// `ValidateCSINode`: unique driver names, attach limits not negative.
pub fn csi_node(n: &CSINode) -> Vec<FieldError> {
    let mut out = Vec::new();
    for (i, d) in n.spec.drivers.iter().enumerate() {
        if n.spec.drivers[..i].iter().any(|e| e.name == d.name) {
            out.push((format!("spec.drivers[{i}].name"), format!("Duplicate value: {:?}", d.name)));
        }
        if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count).filter(|c| *c < 0) {
            let path = format!("spec.drivers[{i}].allocatable.count");
            out.push((path, invalid(count, "must be greater than or equal to 0")));
        }
    }
    out
}

/// `ValidateCSIStorageCapacity`: a storage class name (a DNS subdomain), a valid node topology
/// selector, capacity and maximum volume size not negative.
pub fn csi_storage_capacity(c: &CSIStorageCapacity) -> Vec<FieldError> {
    let mut out = Vec::new();
    if c.storage_class_name.is_empty() {
        out.push(("storageClassName".into(), "Required value".into()));
    } else {
        out.extend(super::dns_subdomain(&c.storage_class_name, "storageClassName"));
    }
    if let Some(t) = &c.node_topology {
        out.extend(super::meta::label_selector(t, "nodeTopology"));
    }
    for (q, path) in [(&c.capacity, "capacity"), (&c.maximum_volume_size, "maximumVolumeSize")] {
        match q.as_ref().map(|q| (q, muster_api::quantity::parse(&q.0))) {
            Some((q, Err(_))) => out.push((path.into(), invalid(format!("{:?}", q.0), "must be a valid quantity"))),
            Some((q, Ok(v))) if v.nanos() < 0 => {
                out.push((path.into(), invalid(format!("{:?}", q.0), "must be greater than or equal to 0")))
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capacities_need_a_class_and_no_negative_size() {
        let c: CSIStorageCapacity = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "csi"},
            "storageClassName": "Not_A_Name", "capacity": "-1Gi", "maximumVolumeSize": "10Gi",
            "nodeTopology": {"matchExpressions": [{"key": "zone", "operator": "In"}]}
        }))
        .unwrap();
        let paths: Vec<String> = csi_storage_capacity(&c).into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, ["storageClassName", "nodeTopology.matchExpressions[0].values", "capacity"]);
    }

    #[test]
    fn claims_need_modes_and_a_positive_request() {
        let c: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "x"},
            "spec": {"accessModes": ["ReadWriteOncePod", "ReadWriteOnce"], "resources": {"requests": {"storage": "0"}}}
        }))
        .unwrap();
        assert_eq!(
            claim(&c),
            vec![
                (
                    "spec.accessModes".to_string(),
                    "Forbidden: may not use ReadWriteOncePod with other access modes".to_string()
                ),
                ("spec.resources[storage]".to_string(), "Invalid value: \"0\": must be greater than zero".to_string()),
            ]
        );
        let c: PersistentVolumeClaim =
            serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": {"accessModes": ["Sometimes"]}})).unwrap();
        let errs = claim(&c);
        assert_eq!(
            errs[0].1,
            "Unsupported value: \"Sometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\""
        );
        assert_eq!(errs[1], ("spec.resources[storage]".to_string(), "Required value".to_string()));
    }

    #[test]
    fn volumes_need_one_source_and_local_ones_node_affinity() {
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": "v"},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "local": {"path": "/mnt"}}
        }))
        .unwrap();
        assert_eq!(
            volume(&pv),
            vec![("spec.nodeAffinity".to_string(), "Required value: Local volume requires node affinity".to_string())]
        );
        let pv: PersistentVolume =
            serde_json::from_value(json!({"metadata": {"name": "v"}, "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}}))
                .unwrap();
        assert_eq!(volume(&pv), vec![("spec".to_string(), "Required value: must specify a volume type".to_string())]);
    }

    #[test]
    fn classes_and_csi_nodes() {
        let c: StorageClass =
            serde_json::from_value(json!({"metadata": {"name": "c"}, "provisioner": "", "volumeBindingMode": "Later"}))
                .unwrap();
        assert_eq!(storage_class(&c).len(), 2);
        let n: CSINode = serde_json::from_value(json!({"metadata": {"name": "n"}, "spec": {"drivers": [
            {"name": "d", "nodeID": "n", "allocatable": {"count": -1}}, {"name": "d", "nodeID": "n"}]}}))
        .unwrap();
        assert_eq!(
            csi_node(&n),
            vec![
                (
                    "spec.drivers[0].allocatable.count".to_string(),
                    "Invalid value: -1: must be greater than or equal to 0".to_string()
                ),
                ("spec.drivers[1].name".to_string(), "Duplicate value: \"d\"".to_string()),
            ]
        );
    }
}
