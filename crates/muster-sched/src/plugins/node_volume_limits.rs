//! NodeVolumeLimits (CSI): a node's CSINode gives, per driver, how many volumes it can attach
//! (`spec.drivers[].allocatable.count`). The pod's CSI volumes not already attached there (unique
//! `driver/volumeHandle`, counted once however many pods mount them), added to those of the
//! node's pods, must stay within each limit. A claim not yet bound counts under its class's
//! provisioner with a handle made from the claim. Not counted: in-tree volumes migrated to CSI,
//! inline CSI volumes (upstream does not count them either), and VolumeAttachments.

use muster_api::PodObject;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use crate::cluster::{Cluster, NodeInfo};
use crate::framework::Rejection;
use crate::volumes::{self as vol, Volumes};

pub const NAME: &str = "NodeVolumeLimits";
pub const REASON: &str = "node(s) exceed max volume count";

/// The prefix of handles made for claims not yet bound (upstream's is random per scheduler).
const UNBOUND_PREFIX: &str = "muster-unbound";

/// The pod's attachable CSI volumes: unique name (`driver/handle`) → driver. PreFilter: `None`
/// (Skip) when the pod names no claim.
pub fn pre_filter(pod: &dyn PodObject, volumes: &Volumes) -> Option<BTreeMap<String, String>> {
    if !vol::has_claims(pod) {
        return None;
    }
    let mut out = BTreeMap::new();
    attachable(pod, volumes, &mut out);
    Some(out)
}

/// `filterAttachableVolumes`: the CSI volumes of `pod`'s claims (claims that do not exist are
/// skipped: PreFilter already refused a pending pod whose claim is missing).
fn attachable(pod: &dyn PodObject, volumes: &Volumes, out: &mut BTreeMap<String, String>) {
    let ns = pod.meta().namespace.as_deref().unwrap_or("default");
    for c in vol::pod_claims(pod) {
        let Some(pvc) = volumes.claim(ns, &c.name) else { continue };
        if c.ephemeral && vol::volume_is_for_pod(pod, pvc).is_err() {
            continue;
        }
        if let Some((driver, handle)) = csi_driver_info(pvc, volumes) {
            out.insert(format!("{driver}/{handle}"), driver);
        }
    }
}

/// `getCSIDriverInfo`: the bound volume's CSI driver and handle, or for a claim without a volume
/// its class's provisioner and a handle made from the claim.
fn csi_driver_info(pvc: &PersistentVolumeClaim, volumes: &Volumes) -> Option<(String, String)> {
    let pv_name = vol::volume_name(pvc);
    if let Some(pv) = volumes.volumes.get(pv_name).filter(|_| !pv_name.is_empty()) {
        let csi = pv.spec.as_ref().and_then(|s| s.csi.as_ref())?;
        return Some((csi.driver.clone(), csi.volume_handle.clone()));
    }
    let class = volumes.classes.get(vol::claim_class(pvc))?;
    let ns = pvc.metadata.namespace.as_deref().unwrap_or("default");
    let handle = format!("{UNBOUND_PREFIX}-{ns}/{}", pvc.metadata.name.as_deref().unwrap_or_default());
    Some((class.provisioner.clone(), handle))
}

/// The node's CSINode limits per driver.
fn limits<'v>(node: &str, volumes: &'v Volumes) -> BTreeMap<&'v str, i32> {
    let drivers = volumes.csi_nodes.get(node).map(|n| &n.spec.drivers[..]).unwrap_or(&[]);
    drivers.iter().filter_map(|d| Some((d.name.as_str(), d.allocatable.as_ref()?.count?))).collect()
}

/// What the node has attached (its pods' unique volumes) and the limits it would exceed: the
/// first driver over its limit, with (attached, new, limit).
pub fn over_limit(
    new: &BTreeMap<String, String>,
    node: &NodeInfo,
    cluster: &Cluster,
) -> Option<(String, usize, usize, i32)> {
    if new.is_empty() {
        return None;
    }
    let limits = limits(node.name(), &cluster.volumes);
    if limits.is_empty() {
        return None;
    }
    let mut attached = BTreeMap::new();
    for id in &node.detail.pods {
        attachable(&cluster.pod(*id).pod, &cluster.volumes, &mut attached);
    }
    let mut attached_count: BTreeMap<&str, usize> = BTreeMap::new();
    for driver in attached.values() {
        *attached_count.entry(driver).or_default() += 1;
    }
    let mut new_count: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, driver) in new {
        if !attached.contains_key(name) {
            *new_count.entry(driver).or_default() += 1;
        }
    }
    new_count.into_iter().find_map(|(driver, n)| {
        let limit = *limits.get(driver)?;
        let have = attached_count.get(driver).copied().unwrap_or(0);
        (have + n > limit.max(0) as usize).then(|| (driver.to_string(), have, n, limit))
    })
}

pub fn filter(new: &BTreeMap<String, String>, node: &NodeInfo, cluster: &Cluster) -> Result<(), Rejection> {
    match over_limit(new, node, cluster) {
        None => Ok(()),
        Some(_) => Err(Rejection::new(NAME, false, REASON)),
    }
}
