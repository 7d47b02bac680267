//! VolumeRestrictions: a GCE PD, AWS EBS, RBD or iSCSI disk a pod on the node already mounts
//! conflicts with the pod's (unless both mount it read-only where the disk allows), and a
//! ReadWriteOncePod claim that a pod on any node already uses makes the pod unschedulable.

use k8s_openapi::api::core::v1::Volume;
use muster_api::PodObject;

use crate::cluster::{Cluster, NodeInfo};
use crate::framework::Rejection;
use crate::pre_filter_reason::VolumeReason;
use crate::volumes as vol;

pub const NAME: &str = "VolumeRestrictions";
pub const REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
pub const REASON_RWOP_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

/// PreFilter's state: whether the pod has disks to compare, and its ReadWriteOncePod claims that
/// a pod on a node already uses.
#[derive(Clone, Debug, Default)]
pub struct RestrictionsState {
    pub disks: bool,
    /// ReadWriteOncePod claims in use by another pod, by name.
    pub rwop_in_use: Vec<String>,
}

/// PreFilter: `None` (Skip) when the pod has no such disk and no ReadWriteOncePod claim in use;
/// `Err` when a claim its `persistentVolumeClaim` volumes name is missing.
pub fn pre_filter(pod: &dyn PodObject, cluster: &Cluster) -> Result<Option<RestrictionsState>, VolumeReason> {
    let ns = pod.meta().namespace.as_deref().unwrap_or("default");
    let volumes = pod.spec().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
    let disks = volumes.iter().any(needs_check);
    let mut rwop = Vec::new();
    for v in volumes {
        let Some(c) = &v.persistent_volume_claim else { continue };
        let pvc = cluster.volumes.claim(ns, &c.claim_name).ok_or_else(|| vol::not_found(&c.claim_name))?;
        if vol::claim_modes(pvc).iter().any(|m| m == "ReadWriteOncePod") {
            rwop.push(c.claim_name.clone());
        }
    }
    let rwop_in_use: Vec<String> = rwop.into_iter().filter(|name| claim_in_use(cluster, ns, name)).collect();
    if !disks && rwop_in_use.is_empty() {
        return Ok(None);
    }
    Ok(Some(RestrictionsState { disks, rwop_in_use }))
}

/// True when a pod on some node (bound or assumed) mounts the claim.
fn claim_in_use(cluster: &Cluster, ns: &str, name: &str) -> bool {
    cluster.pods.iter().filter(|p| p.state.on_node().is_some() && p.namespace() == ns).any(|p| {
        let volumes = p.pod.spec().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
        volumes.iter().any(|v| v.persistent_volume_claim.as_ref().is_some_and(|c| c.claim_name == name))
    })
}

fn needs_check(v: &Volume) -> bool {
    v.gce_persistent_disk.is_some() || v.aws_elastic_block_store.is_some() || v.rbd.is_some() || v.iscsi.is_some()
}

/// Filter: disk conflicts with the node's pods, then ReadWriteOncePod claims in use (both
/// Unschedulable: preemption may help).
pub fn filter(
    state: &RestrictionsState,
    pod: &dyn PodObject,
    node: &NodeInfo,
    cluster: &Cluster,
) -> Result<(), Rejection> {
    if state.disks && disk_conflict(pod, node, cluster).is_some() {
        return Err(Rejection::new(NAME, false, REASON_DISK_CONFLICT));
    }
    if !state.rwop_in_use.is_empty() {
        return Err(Rejection::new(NAME, false, REASON_RWOP_CONFLICT));
    }
    Ok(())
}

/// The first pod on the node whose disks conflict with the pod's, by key.
pub fn disk_conflict<'c>(pod: &dyn PodObject, node: &NodeInfo, cluster: &'c Cluster) -> Option<&'c str> {
    let volumes = pod.spec().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
    node.detail.pods.iter().map(|id| cluster.pod(*id)).find_map(|other| {
        let theirs = other.pod.spec().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
        volumes
            .iter()
            .filter(|v| needs_check(v))
            .any(|v| theirs.iter().any(|e| conflicts(v, e)))
            .then_some(other.key.as_str())
    })
}

/// `isVolumeConflict` for one pair of volumes.
pub fn conflicts(v: &Volume, e: &Volume) -> bool {
    if let (Some(a), Some(b)) = (&v.gce_persistent_disk, &e.gce_persistent_disk)
        && a.pd_name == b.pd_name
        && !(a.read_only == Some(true) && b.read_only == Some(true))
    {
        return true;
    }
    if let (Some(a), Some(b)) = (&v.aws_elastic_block_store, &e.aws_elastic_block_store)
        && a.volume_id == b.volume_id
    {
        return true;
    }
    if let (Some(a), Some(b)) = (&v.iscsi, &e.iscsi)
        && a.iqn == b.iqn
        && !(a.read_only == Some(true) && b.read_only == Some(true))
    {
        return true;
    }
    if let (Some(a), Some(b)) = (&v.rbd, &e.rbd) {
        let pool = |p: &Option<String>| p.clone().unwrap_or_else(|| "rbd".into());
        let overlap = a.monitors.iter().any(|m| b.monitors.contains(m));
        if overlap
            && pool(&a.pool) == pool(&b.pool)
            && a.image == b.image
            && !(a.read_only == Some(true) && b.read_only == Some(true))
        {
            return true;
        }
    }
    false
}
