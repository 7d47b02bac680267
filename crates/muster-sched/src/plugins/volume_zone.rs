//! VolumeZone: the zone and region labels of the volumes a pod's bound claims name must match the
//! node's (a label value may list several zones joined by `__`; a beta label on the volume is
//! matched against the node's GA label when the node lacks the beta one). A node with none of
//! the four labels passes; unbound WaitForFirstConsumer claims are skipped.

use muster_api::PodObject;
use muster_api::selectors::NodeView;

use crate::framework::Rejection;
use crate::pre_filter_reason::VolumeReason;
use crate::volumes::{self as vol, Volumes};

pub const NAME: &str = "VolumeZone";
pub const REASON: &str = "node(s) had no available volume zone";

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
/// `topologyLabels`, in upstream's order.
const TOPOLOGY_LABELS: [&str; 4] = [BETA_ZONE, BETA_REGION, ZONE, REGION];

/// One topology label of one volume: the key and the values it admits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeTopology {
    pub volume: String,
    pub key: &'static str,
    pub values: Vec<String>,
}

/// PreFilter: the topologies of the volumes the pod's claims are bound to; `None` (Skip) when
/// there are none; `Err` as upstream's UnschedulableAndUnresolvable statuses.
pub fn pre_filter(pod: &dyn PodObject, volumes: &Volumes) -> Result<Option<Vec<VolumeTopology>>, VolumeReason> {
    let ns = pod.meta().namespace.as_deref().unwrap_or("default");
    let mut out = Vec::new();
    for c in vol::pod_claims(pod) {
        if c.name.is_empty() {
            return Err(VolumeReason::ClaimWithoutName);
        }
        let pvc = volumes.claim(ns, &c.name).ok_or_else(|| vol::not_found(&c.name))?;
        let pv_name = vol::volume_name(pvc);
        if pv_name.is_empty() {
            let class = vol::claim_class(pvc);
            if class.is_empty() {
                return Err(VolumeReason::ClaimWithoutVolumeOrClass);
            }
            let sc = volumes.classes.get(class).ok_or_else(|| VolumeReason::StorageClassNotFound(class.to_string()))?;
            if sc.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") {
                continue;
            }
            return Err(VolumeReason::VolumeWithoutName);
        }
        let pv = volumes.volumes.get(pv_name).ok_or_else(|| VolumeReason::VolumeNotFound(pv_name.to_string()))?;
        for key in TOPOLOGY_LABELS {
            let Some(value) = pv.metadata.labels.as_ref().and_then(|l| l.get(key)) else { continue };
            if let Some(values) = zones(value) {
                out.push(VolumeTopology { volume: pv_name.to_string(), key, values });
            }
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// `LabelZonesToSet`: values joined by `__`, each trimmed; an empty one makes the label unreadable.
fn zones(value: &str) -> Option<Vec<String>> {
    value.split("__").map(|z| Some(z.trim()).filter(|z| !z.is_empty()).map(String::from)).collect()
}

/// The GA label for a beta one (`translateToGALabel`).
fn ga_label(key: &str) -> &str {
    match key {
        BETA_ZONE => ZONE,
        BETA_REGION => REGION,
        other => other,
    }
}

/// Filter: the first volume topology the node does not satisfy, if any.
pub fn conflict<'t>(topologies: &'t [VolumeTopology], node: NodeView<'_>) -> Option<&'t VolumeTopology> {
    if !TOPOLOGY_LABELS.iter().any(|k| node.labels.contains_key(*k)) {
        return None;
    }
    topologies.iter().find(|t| {
        let v = node.labels.get(t.key).or_else(|| node.labels.get(ga_label(t.key)));
        v.is_none_or(|v| !t.values.contains(v))
    })
}

pub fn filter(topologies: &[VolumeTopology], node: NodeView<'_>) -> Result<(), Rejection> {
    match conflict(topologies, node) {
        None => Ok(()),
        Some(_) => Err(Rejection::new(NAME, true, REASON)),
    }
}
