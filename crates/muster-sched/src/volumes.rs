//! The storage objects the volume plugins read — PersistentVolumeClaims, PersistentVolumes,
//! StorageClasses, CSINodes and CSIDrivers — by name, the helpers upstream's volume code shares
//! (`k8s.io/component-helpers/storage/volume`), and the bindings a plan decided (VolumeBinding's
//! Reserve writes them into these copies, as kube-scheduler's assume caches hold them).

use muster_api::PodObject;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Volume};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};

use crate::cluster::PodId;
use crate::pre_filter_reason::VolumeReason;

/// The annotation that tells an external provisioner which node the scheduler chose.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Set by the PV controller once a claim's binding is complete.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a PV the controller (here, the scheduler's assumption) bound to a claim.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The beta storage-class annotation, read before `storageClassName` (claims and volumes).
const ANN_BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// A StorageClass provisioner that never provisions (local volumes).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// The storage objects, by name, and what the plan decided about them.
#[derive(Clone, Debug, Default)]
pub struct Volumes {
    /// False when the world gives no storage objects at all (an engine built without them, as
    /// in the engine's own tests): the volume plugins are then skipped rather than finding every
    /// claim missing. A world that watches the storage kinds sets it (`muster run`).
    pub enabled: bool,
    /// Claims by (namespace, name).
    pub claims: BTreeMap<(String, String), PersistentVolumeClaim>,
    pub volumes: BTreeMap<String, PersistentVolume>,
    pub classes: BTreeMap<String, StorageClass>,
    pub csi_nodes: BTreeMap<String, CSINode>,
    pub csi_drivers: BTreeMap<String, CSIDriver>,
    /// CSIStorageCapacities by `namespace/name` (a CSI driver publishes them in its namespace):
    /// the capacity VolumeBinding checks before provisioning where the driver asks for it.
    pub capacities: BTreeMap<String, CSIStorageCapacity>,
    /// VolumeBinding's decisions, in the order Reserve made them.
    pub decisions: Vec<VolumeDecision>,
}

/// A storage object, as a world's change carries it (boxed there, so the sizes do not matter).
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum StorageObject {
    Claim(PersistentVolumeClaim),
    Volume(PersistentVolume),
    Class(StorageClass),
    CsiNode(CSINode),
    CsiDriver(CSIDriver),
    Capacity(CSIStorageCapacity),
}

/// The kind of a deleted storage object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    Claim,
    Volume,
    Class,
    CsiNode,
    CsiDriver,
    Capacity,
}

/// One claim a pod's Reserve bound: to an existing PersistentVolume, or by provisioning on the
/// chosen node (the claim gets the `volume.kubernetes.io/selected-node` annotation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeDecision {
    pub pod: PodId,
    pub namespace: String,
    pub claim: String,
    pub binding: Binding,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binding {
    /// The claim is bound to this PersistentVolume (its `claimRef` names the claim).
    Volume(String),
    /// The claim's volume is provisioned on this node.
    Provision(String),
}

/// The annotation that marks a StorageClass as the cluster's default.
pub const ANN_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// Whether `new` is an older copy of the object than `held` (both with numeric resourceVersions,
/// as the API server issues them): a watch event that comes after this scheduler's own write
/// must not undo it, as upstream's assume cache ignores it.
fn older(
    new: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    held: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
) -> bool {
    let version = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok())
    };
    match (version(new), held.and_then(version)) {
        (Some(new), Some(held)) => new < held,
        _ => false,
    }
}

impl Volumes {
    /// A store change: the object replaces the one of its name; the plugins run from now on.
    pub fn upsert(&mut self, object: StorageObject) {
        self.enabled = true;
        let name = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| m.name.clone().unwrap_or_default();
        match object {
            StorageObject::Claim(c) => {
                let ns = c.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                let key = (ns, name(&c.metadata));
                if !older(&c.metadata, self.claims.get(&key).map(|o| &o.metadata)) {
                    self.claims.insert(key, c);
                }
            }
            StorageObject::Volume(v) => {
                let key = name(&v.metadata);
                if !older(&v.metadata, self.volumes.get(&key).map(|o| &o.metadata)) {
                    self.volumes.insert(key, v);
                }
            }
            StorageObject::Class(c) => drop(self.classes.insert(name(&c.metadata), c)),
            StorageObject::CsiNode(n) => drop(self.csi_nodes.insert(name(&n.metadata), n)),
            StorageObject::CsiDriver(d) => drop(self.csi_drivers.insert(name(&d.metadata), d)),
            StorageObject::Capacity(c) => drop(self.capacities.insert(crate::cluster::object_key(&c.metadata), c)),
        }
    }

    /// The pod's binding is over (it is bound, or gone): its decisions are dropped, so that they
    /// neither pile up in a long-running world nor follow a later pod into its slot.
    pub fn settled(&mut self, pod: PodId) {
        if !self.decisions.is_empty() {
            self.decisions.retain(|d| d.pod != pod);
        }
    }

    /// A store change: the object `key` (`namespace/name` for claims, else the name) is gone.
    pub fn delete(&mut self, kind: StorageKind, key: &str) {
        match kind {
            StorageKind::Claim => {
                let (ns, name) = key.split_once('/').unwrap_or(("default", key));
                self.claims.remove(&(ns.to_string(), name.to_string()));
            }
            StorageKind::Volume => drop(self.volumes.remove(key)),
            StorageKind::Class => drop(self.classes.remove(key)),
            StorageKind::CsiNode => drop(self.csi_nodes.remove(key)),
            StorageKind::CsiDriver => drop(self.csi_drivers.remove(key)),
            StorageKind::Capacity => drop(self.capacities.remove(key)),
        }
    }

    /// The DefaultStorageClass admission plugin and the PV controller's retroactive default: a
    /// claim with no `storageClassName` (unset, not "") and no volume gets the default class —
    /// of several defaults, the newest (by `creationTimestamp`, then name, as upstream sorts).
    pub fn default_class(&mut self) {
        let default = self
            .classes
            .values()
            .filter(|c| {
                c.metadata.annotations.as_ref().and_then(|a| a.get(ANN_DEFAULT_CLASS)).is_some_and(|v| v == "true")
            })
            .max_by(|a, b| {
                (a.metadata.creation_timestamp.as_ref().map(|t| t.0), b.metadata.name.as_ref())
                    .cmp(&(b.metadata.creation_timestamp.as_ref().map(|t| t.0), a.metadata.name.as_ref()))
            })
            .and_then(|c| c.metadata.name.clone());
        let Some(default) = default else { return };
        for pvc in self.claims.values_mut() {
            let Some(spec) = pvc.spec.as_mut() else { continue };
            if spec.storage_class_name.is_none() && spec.volume_name.as_deref().unwrap_or_default().is_empty() {
                spec.storage_class_name = Some(default.clone());
            }
        }
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<&PersistentVolumeClaim> {
        self.claims.get(&(namespace.to_string(), name.to_string()))
    }
}

/// A pod volume that names a claim: `persistentVolumeClaim.claimName`, or the claim the
/// ephemeral-volume controller makes for a generic ephemeral volume (`<pod>-<volume>`).
pub struct PodClaim<'a> {
    pub volume: &'a Volume,
    pub name: String,
    pub ephemeral: bool,
}

/// The pod's volumes that name claims, in `spec.volumes` order.
pub fn pod_claims(pod: &dyn PodObject) -> Vec<PodClaim<'_>> {
    let pod_name = pod.meta().name.as_deref().unwrap_or_default();
    let volumes = pod.spec().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
    volumes
        .iter()
        .filter_map(|v| {
            if let Some(c) = &v.persistent_volume_claim {
                Some(PodClaim { volume: v, name: c.claim_name.clone(), ephemeral: false })
            } else {
                v.ephemeral.as_ref().map(|_| PodClaim {
                    volume: v,
                    name: format!("{pod_name}-{}", v.name),
                    ephemeral: true,
                })
            }
        })
        .collect()
}

/// True when the pod has a volume that names a claim (the volume plugins have work to do).
pub fn has_claims(pod: &dyn PodObject) -> bool {
    pod.spec()
        .and_then(|s| s.volumes.as_deref())
        .is_some_and(|v| v.iter().any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some()))
}

/// A claim the pod names is not in the store (the API's NotFound).
pub fn not_found(name: &str) -> VolumeReason {
    VolumeReason::ClaimNotFound(name.to_string())
}

/// `ephemeral.VolumeIsForPod`: the claim of an ephemeral volume must be controlled by the pod.
pub fn volume_is_for_pod(pod: &dyn PodObject, pvc: &PersistentVolumeClaim) -> Result<(), VolumeReason> {
    let uid = pod.meta().uid.as_deref().unwrap_or_default();
    let owned = pvc.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && o.kind == "Pod"
            && o.name == pod.meta().name.as_deref().unwrap_or_default()
            && (uid.is_empty() || o.uid == uid)
    });
    if owned {
        return Ok(());
    }
    let ns = pod.meta().namespace.as_deref().unwrap_or("default");
    Err(VolumeReason::ClaimNotForPod {
        claim: format!(
            "{}/{}",
            pvc.metadata.namespace.as_deref().unwrap_or(ns),
            pvc.metadata.name.as_deref().unwrap_or_default()
        ),
        pod: format!("{ns}/{}", pod.meta().name.as_deref().unwrap_or_default()),
    })
}

/// `GetPersistentVolumeClaimClass`: the beta annotation, else `spec.storageClassName`, else "".
pub fn claim_class(pvc: &PersistentVolumeClaim) -> &str {
    if let Some(c) = pvc.metadata.annotations.as_ref().and_then(|a| a.get(ANN_BETA_CLASS)) {
        return c;
    }
    pvc.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default()
}

/// `GetPersistentVolumeClass`: the beta annotation, else `spec.storageClassName`, else "".
pub fn volume_class(pv: &PersistentVolume) -> &str {
    if let Some(c) = pv.metadata.annotations.as_ref().and_then(|a| a.get(ANN_BETA_CLASS)) {
        return c;
    }
    pv.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default()
}

/// `spec.volumeName`, or "".
pub fn volume_name(pvc: &PersistentVolumeClaim) -> &str {
    pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or_default()
}

/// `isPVCFullyBound`: a volume name and the PV controller's bind-completed annotation.
pub fn fully_bound(pvc: &PersistentVolumeClaim) -> bool {
    !volume_name(pvc).is_empty()
        && pvc.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED))
}

/// The claim's access modes.
pub fn claim_modes(pvc: &PersistentVolumeClaim) -> &[String] {
    pvc.spec.as_ref().and_then(|s| s.access_modes.as_deref()).unwrap_or(&[])
}

/// The claim's storage request, exact in nano-units (0 when absent or unreadable).
pub fn requested_storage(pvc: &PersistentVolumeClaim) -> i128 {
    let q = pvc.spec.as_ref().and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref());
    q.and_then(|r| r.get("storage")).map_or(0, storage_nanos)
}

/// A volume's `capacity.storage`, exact in nano-units (0 when absent).
pub fn capacity_storage(pv: &PersistentVolume) -> i128 {
    let q = pv.spec.as_ref().and_then(|s| s.capacity.as_ref());
    q.and_then(|c| c.get("storage")).map_or(0, storage_nanos)
}

fn storage_nanos(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i128 {
    muster_api::quantity::parse(&q.0).map_or(0, |v| v.nanos())
}

/// `VolumeBindingMode` of the claim's class: true for WaitForFirstConsumer (`IsDelayBindingMode`).
/// No class name, or a class that does not exist, means Immediate; an unset mode is the API's
/// default, Immediate.
pub fn delay_binding(pvc: &PersistentVolumeClaim, volumes: &Volumes) -> bool {
    let class = claim_class(pvc);
    !class.is_empty()
        && volumes.classes.get(class).is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
}

/// `CheckNodeAffinity`: a volume without `nodeAffinity.required` fits every node.
pub fn node_affinity_matches(pv: &PersistentVolume, node: muster_api::selectors::NodeView<'_>) -> bool {
    let required = pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref());
    required.is_none_or(|r| muster_api::selectors::node_selector_matches(r, node))
}

/// `IsVolumeBoundToClaim`: the volume's `claimRef` names the claim (and its uid, when both have one).
pub fn bound_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else { return false };
    let uid = r.uid.as_deref().unwrap_or_default();
    r.name.as_deref() == pvc.metadata.name.as_deref()
        && r.namespace.as_deref().unwrap_or("default") == pvc.metadata.namespace.as_deref().unwrap_or("default")
        && (uid.is_empty() || Some(uid) == pvc.metadata.uid.as_deref())
}

/// The volume plugins' PreFilter state for one pod, in upstream's Filter order
/// (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone); a `None` plugin is skipped.
#[derive(Clone, Debug, Default)]
pub struct PodVolumeState {
    pub restrictions: Option<crate::plugins::volume_restrictions::RestrictionsState>,
    pub limits: Option<BTreeMap<String, String>>,
    pub binding: Option<crate::plugins::volume_binding::BindingState>,
    pub zone: Option<Vec<crate::plugins::volume_zone::VolumeTopology>>,
}

/// The volume plugins' PreFilter: `Ok(None)` when every one skips the pod (no claim, no disk that
/// may conflict) or the world gives no storage objects; `Err` with the first failing plugin's
/// message.
pub fn pre_filter(
    pod: &dyn PodObject,
    cluster: &crate::cluster::Cluster,
) -> Result<Option<Box<PodVolumeState>>, VolumeReason> {
    use crate::plugins::{node_volume_limits, volume_binding, volume_restrictions, volume_zone};
    if !cluster.volumes.enabled || pod.spec().and_then(|s| s.volumes.as_ref()).is_none_or(Vec::is_empty) {
        return Ok(None);
    }
    let restrictions = volume_restrictions::pre_filter(pod, cluster)?;
    let limits = node_volume_limits::pre_filter(pod, &cluster.volumes);
    let binding = volume_binding::pre_filter(pod, &cluster.volumes)?;
    let zone = volume_zone::pre_filter(pod, &cluster.volumes)?;
    if restrictions.is_none() && limits.is_none() && binding.is_none() && zone.is_none() {
        return Ok(None);
    }
    Ok(Some(Box::new(PodVolumeState { restrictions, limits, binding, zone })))
}

/// The volume plugins' Filters, in upstream's order; the first rejection wins.
pub fn filter(
    state: &PodVolumeState,
    pod: &dyn PodObject,
    node: &crate::cluster::NodeInfo,
    cluster: &crate::cluster::Cluster,
) -> Result<(), crate::framework::Rejection> {
    use crate::plugins::{node_volume_limits, volume_binding, volume_restrictions, volume_zone};
    let view = muster_api::selectors::NodeView { name: node.name(), labels: &node.detail.labels };
    if let Some(s) = &state.restrictions {
        volume_restrictions::filter(s, pod, node, cluster)?;
    }
    if let Some(s) = &state.limits {
        node_volume_limits::filter(s, node, cluster)?;
    }
    if let Some(s) = &state.binding {
        volume_binding::filter(s, view, &cluster.volumes)?;
    }
    if let Some(s) = &state.zone {
        volume_zone::filter(s, view)?;
    }
    Ok(())
}

/// For `muster why`: what a volume plugin that rejects the node saw there (which claim, which
/// volume, which zone, which pod's disk, which driver's limit).
pub fn explain(
    state: &PodVolumeState,
    plugin: &str,
    pod: &dyn PodObject,
    node: &crate::cluster::NodeInfo,
    cluster: &crate::cluster::Cluster,
) -> Option<String> {
    use crate::plugins::{node_volume_limits, volume_binding, volume_restrictions, volume_zone};
    let view = muster_api::selectors::NodeView { name: node.name(), labels: &node.detail.labels };
    match plugin {
        volume_restrictions::NAME => {
            let s = state.restrictions.as_ref()?;
            if let Some(other) = volume_restrictions::disk_conflict(pod, node, cluster).filter(|_| s.disks) {
                return Some(format!("a disk of the pod is mounted by {other} on this node"));
            }
            Some(format!("ReadWriteOncePod claim {} is already used by another pod", s.rwop_in_use.join(", ")))
        }
        node_volume_limits::NAME => {
            let (driver, have, new, limit) = node_volume_limits::over_limit(state.limits.as_ref()?, node, cluster)?;
            Some(format!("driver {driver}: {have} volume(s) attached + {new} new > limit {limit} (CSINode)"))
        }
        volume_binding::NAME => explain_binding(state.binding.as_ref()?, view, &cluster.volumes),
        volume_zone::NAME => {
            let t = volume_zone::conflict(state.zone.as_ref()?, view)?;
            let have = node.detail.labels.get(t.key).map_or("none", String::as_str);
            Some(format!("volume {} needs {} in [{}], node has {have}", t.volume, t.key, t.values.join(", ")))
        }
        _ => None,
    }
}

fn explain_binding(
    s: &crate::plugins::volume_binding::BindingState,
    node: muster_api::selectors::NodeView<'_>,
    volumes: &Volumes,
) -> Option<String> {
    let mut parts = Vec::new();
    for (claim, pv) in &s.bound {
        match volumes.volumes.get(pv) {
            None => parts.push(format!("claim {claim} is bound to volume {pv}, which does not exist")),
            Some(v) if !node_affinity_matches(v, node) => {
                parts.push(format!("claim {claim} is bound to volume {pv}, whose node affinity excludes this node"))
            }
            Some(_) => {}
        }
    }
    for claim in &s.delayed {
        let Some(pvc) = volumes.claim(&s.namespace, claim) else { continue };
        if let Some(n) = pvc.metadata.annotations.as_ref().and_then(|a| a.get(ANN_SELECTED_NODE)) {
            if n != node.name {
                parts.push(format!("claim {claim} is being provisioned on node {n}"));
            }
            continue;
        }
        if crate::plugins::volume_binding::find_matching_volume(pvc, volumes, node, &[]).is_some() {
            continue;
        }
        let class = claim_class(pvc);
        let why = match volumes.classes.get(class) {
            Some(c) if c.provisioner.is_empty() || c.provisioner == NO_PROVISIONER => {
                "it does not provision".to_string()
            }
            Some(_) => "its allowedTopologies exclude this node".to_string(),
            None => "it does not exist".to_string(),
        };
        parts.push(format!("claim {claim}: no available volume of class {class:?} matches here, and {why}"));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
