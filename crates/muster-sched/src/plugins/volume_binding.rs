//! VolumeBinding: a pod's PersistentVolumeClaims must be usable on the node. PreFilter sorts the
//! claims (bound, WaitForFirstConsumer to bind, Immediate not yet bound: unschedulable); Filter
//! checks bound volumes' node affinity, then finds a matching available volume for each claim to
//! bind or a class that may provision on the node; Reserve assumes the choice (the volume's
//! `claimRef`, or the claim's `volume.kubernetes.io/selected-node`), Unreserve takes it back.
//! A claim to provision on a node needs, where its class's CSI driver sets
//! `spec.storageCapacity`, a CSIStorageCapacity of the class that the node can reach with room for
//! it ([`capacity_for`]). Score (`StorageCapacityScoring`, beta and on by default in 1.37) rates
//! how full the storage the pod would take on the node is, through the plugin's `shape`
//! ([`score`]).

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIStorageCapacity, StorageClass};
use muster_api::PodObject;
use muster_api::selectors::NodeView;

use crate::cluster::PodId;
use crate::framework::Rejection;
use crate::plugins::node_resources_fit::{ShapePoint, ratio_score};
use crate::pre_filter_reason::VolumeReason;
use crate::volumes::{self as vol, Binding, VolumeDecision, Volumes};

pub const NAME: &str = "VolumeBinding";
pub const REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
pub const REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
pub const REASON_PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// `SetDefaults_VolumeBindingArgs`' shape with StorageCapacityScoring: an empty node scores 100,
/// a full one 0.
pub const DEFAULT_SHAPE: [ShapePoint; 2] =
    [ShapePoint { utilization: 0, score: 100 }, ShapePoint { utilization: 100, score: 0 }];

/// What PreFilter found: the pod's claims, sorted as `GetPodVolumeClaims` sorts them.
#[derive(Clone, Debug, Default)]
pub struct BindingState {
    pub namespace: String,
    /// Fully bound claims with their volume names.
    pub bound: Vec<(String, String)>,
    /// WaitForFirstConsumer claims still to bind, by increasing storage request.
    pub delayed: Vec<String>,
    /// PreFilter's node names (`GetEligibleNodes`): the nodes the bound volumes' node affinity
    /// names by `kubernetes.io/hostname` In; `None` for every node.
    pub eligible: Option<std::collections::BTreeSet<String>>,
}

/// The reason of a node PreFilter left out (`SetAbsentNodesStatus`).
pub const NOT_ELIGIBLE: &str = "node(s) didn't satisfy plugin(s) [VolumeBinding]";

/// `GetEligibleNodes`: the intersection over the bound claims of their volumes' hostnames
/// (`GetLocalPersistentVolumeNodeNames`: per term, the intersection of its hostname `In` values;
/// the union over terms); `None` when no volume names any, or when a volume is missing.
fn eligible_nodes(bound: &[(String, String)], volumes: &Volumes) -> Option<std::collections::BTreeSet<String>> {
    use std::collections::BTreeSet;
    let mut out: Option<BTreeSet<String>> = None;
    for (_, pv_name) in bound {
        let pv = volumes.volumes.get(pv_name)?;
        let required = pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref());
        let mut names: BTreeSet<String> = BTreeSet::new();
        for term in required.map(|r| &r.node_selector_terms[..]).unwrap_or(&[]) {
            let mut nodes: Option<BTreeSet<String>> = None;
            for e in term.match_expressions.iter().flatten() {
                if e.key == "kubernetes.io/hostname" && e.operator == "In" {
                    let values: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
                    nodes = Some(match nodes {
                        None => values,
                        Some(n) => n.intersection(&values).cloned().collect(),
                    });
                }
            }
            names.extend(nodes.unwrap_or_default());
        }
        if !names.is_empty() {
            out = Some(match out {
                None => names,
                Some(o) => o.intersection(&names).cloned().collect(),
            });
        }
    }
    out
}

/// PreFilter: `None` when the pod names no claim (Skip); `Err` with upstream's message when a
/// claim is missing, lost, being deleted, not the pod's (ephemeral), or Immediate and unbound.
pub fn pre_filter(pod: &dyn PodObject, volumes: &Volumes) -> Result<Option<BindingState>, VolumeReason> {
    let namespace = pod.meta().namespace.clone().unwrap_or_else(|| "default".into());
    let claims = vol::pod_claims(pod);
    if claims.is_empty() {
        return Ok(None);
    }
    let mut found = Vec::with_capacity(claims.len());
    for c in &claims {
        let Some(pvc) = volumes.claim(&namespace, &c.name) else {
            if c.ephemeral {
                return Err(VolumeReason::EphemeralClaimNotCreated(c.name.clone()));
            }
            return Err(vol::not_found(&c.name));
        };
        if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
            return Err(VolumeReason::ClaimLost { claim: c.name.clone(), volume: vol::volume_name(pvc).to_string() });
        }
        if pvc.metadata.deletion_timestamp.is_some() {
            return Err(VolumeReason::ClaimBeingDeleted(c.name.clone()));
        }
        if c.ephemeral {
            vol::volume_is_for_pod(pod, pvc)?;
        }
        found.push((c.name.clone(), pvc));
    }
    let mut state = BindingState { namespace, ..BindingState::default() };
    let mut immediate = false;
    let mut delayed: Vec<(i128, String)> = Vec::new();
    // A claim named by two volumes of the pod is one claim (upstream would look for two volumes
    // for it and bind both).
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found.dedup_by(|a, b| a.0 == b.0);
    for (name, pvc) in found {
        if vol::fully_bound(pvc) {
            state.bound.push((name, vol::volume_name(pvc).to_string()));
        } else if vol::delay_binding(pvc, volumes) && vol::volume_name(pvc).is_empty() {
            delayed.push((vol::requested_storage(pvc), name));
        } else {
            immediate = true;
        }
    }
    if immediate {
        return Err(VolumeReason::UnboundImmediate);
    }
    // The smallest claims choose first (a stable sort: equal requests keep the pod's order).
    delayed.sort_by_key(|(size, _)| *size);
    state.delayed = delayed.into_iter().map(|(_, n)| n).collect();
    state.eligible = eligible_nodes(&state.bound, volumes);
    if state.eligible.as_ref().is_some_and(|e| e.is_empty()) {
        return Err(VolumeReason::NoEligibleNode);
    }
    Ok(Some(state))
}

/// What `FindPodVolumes` decides for one node: the bindings Reserve would assume, and the reasons
/// the node is rejected (empty when it fits).
#[derive(Debug, Default)]
pub struct PodVolumes {
    /// (claim, volume) pairs to bind.
    pub static_bindings: Vec<(String, String)>,
    /// Claims to provision on the node.
    pub provisions: Vec<Provision>,
    pub reasons: Vec<&'static str>,
}

/// A claim to provision on the node (`DynamicProvision`).
#[derive(Debug)]
pub struct Provision {
    pub claim: String,
    /// The `capacity`, in whole bytes, of the CSIStorageCapacity that made room for the claim;
    /// `None` when nothing was checked (no size asked, a driver that does not track capacity) or
    /// the object publishes only a `maximumVolumeSize`.
    pub capacity: Option<i128>,
}

/// Filter: the node passes when every bound volume's node affinity matches it and every claim to
/// bind finds a volume or may be provisioned there. All reasons are UnschedulableAndUnresolvable.
pub fn filter(state: &BindingState, node: NodeView<'_>, volumes: &Volumes) -> Result<(), Rejection> {
    let found = find_pod_volumes(state, node, volumes);
    if found.reasons.is_empty() {
        return Ok(());
    }
    Err(Rejection { plugin: NAME, unresolvable: true, reasons: found.reasons.into_iter().map(Into::into).collect() })
}

/// `FindPodVolumes`.
pub fn find_pod_volumes(state: &BindingState, node: NodeView<'_>, volumes: &Volumes) -> PodVolumes {
    let mut out = PodVolumes::default();
    let (mut bound_ok, mut pvs_found, mut unbound_ok, mut space) = (true, true, true, true);
    for (_, pv_name) in &state.bound {
        match volumes.volumes.get(pv_name) {
            None => {
                pvs_found = false;
                break;
            }
            Some(pv) if !vol::node_affinity_matches(pv, node) => {
                bound_ok = false;
                break;
            }
            Some(_) => {}
        }
    }
    if !state.delayed.is_empty() {
        (unbound_ok, space) = bind_or_provision(state, node, volumes, &mut out);
    }
    if !bound_ok {
        out.reasons.push(REASON_NODE_CONFLICT);
    }
    if !unbound_ok {
        out.reasons.push(REASON_BIND_CONFLICT);
    }
    if !space {
        out.reasons.push(REASON_NOT_ENOUGH_SPACE);
    }
    if !pvs_found {
        out.reasons.push(REASON_PV_NOT_EXIST);
    }
    out
}

/// The claims to bind: those with a selected node go to that node only and are provisioned;
/// the rest take a matching volume, or are provisioned when none matches. Returns whether the
/// claims are satisfied, and whether there is storage enough for those to provision.
fn bind_or_provision(
    state: &BindingState,
    node: NodeView<'_>,
    volumes: &Volumes,
    out: &mut PodVolumes,
) -> (bool, bool) {
    let mut to_provision: Vec<&PersistentVolumeClaim> = Vec::new();
    let mut to_match: Vec<&PersistentVolumeClaim> = Vec::new();
    for name in &state.delayed {
        let Some(pvc) = volumes.claim(&state.namespace, name) else { return (false, true) };
        match pvc.metadata.annotations.as_ref().and_then(|a| a.get(vol::ANN_SELECTED_NODE)) {
            Some(selected) if selected != node.name => return (false, true),
            Some(_) => to_provision.push(pvc),
            None => to_match.push(pvc),
        }
    }
    let mut ok = true;
    for pvc in to_match {
        let chosen: Vec<&str> = out.static_bindings.iter().map(|(_, v)| v.as_str()).collect();
        match find_matching_volume(pvc, volumes, node, &chosen) {
            Some(pv) => out.static_bindings.push((claim_name(pvc), pv.to_string())),
            None => {
                to_provision.push(pvc);
                ok = false;
            }
        }
    }
    if !to_provision.is_empty() {
        ok = true;
        for pvc in to_provision {
            let Some(class) = volumes.classes.get(vol::claim_class(pvc)).filter(|c| can_provision(c, node)) else {
                return (false, true);
            };
            let Some(room) = capacity_for(pvc, class, node, volumes) else { return (true, false) };
            let capacity = room.and_then(|c| c.capacity.as_ref()).map(whole_bytes);
            out.provisions.push(Provision { claim: claim_name(pvc), capacity });
        }
    }
    (ok, true)
}

/// `hasEnoughCapacity`: a claim asking for no storage, or whose class's provisioner is not a
/// CSIDriver with `spec.storageCapacity: true`, needs no check (`Some(None)`); otherwise some
/// CSIStorageCapacity of the class must admit the node (its `nodeTopology` selects the node's
/// labels; none: no node) with a `maximumVolumeSize` (else `capacity`) of at least the request,
/// in whole bytes: `Some(Some(it))`, the first by namespace and name (upstream takes the first its
/// lister gives); `None` when none has room.
pub fn capacity_for<'v>(
    pvc: &PersistentVolumeClaim,
    class: &StorageClass,
    node: NodeView<'_>,
    volumes: &'v Volumes,
) -> Option<Option<&'v CSIStorageCapacity>> {
    let size = vol::requested_storage(pvc);
    let asked = pvc.spec.as_ref().and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref());
    if !asked.is_some_and(|r| r.contains_key("storage")) {
        return Some(None);
    }
    let tracked = volumes.csi_drivers.get(&class.provisioner).and_then(|d| d.spec.storage_capacity) == Some(true);
    if !tracked {
        return Some(None);
    }
    let class_name = class.metadata.name.as_deref().unwrap_or_default();
    let room = volumes.capacities.values().find(|c| {
        c.storage_class_name == class_name
            && c.maximum_volume_size
                .as_ref()
                .or(c.capacity.as_ref())
                .is_some_and(|limit| whole_bytes(limit) >= bytes_of(size))
            && c.node_topology.as_ref().is_some_and(|t| muster_api::selectors::label_selector_matches(t, node.labels))
    });
    room.map(Some)
}

/// Score: the node's storage utilization per storage class, through the `shape` (scores
/// 0..=100), averaged over the classes and rounded. Where the node binds claims to existing
/// volumes, each class's requests are set against its chosen volumes' capacities; otherwise
/// against the `capacity` of the CSIStorageCapacity each claim to provision found room in
/// (claims without one take no part). A node with nothing to rate scores 0.
pub fn score(state: &BindingState, node: NodeView<'_>, volumes: &Volumes, shape: &[ShapePoint]) -> i64 {
    use std::collections::BTreeMap;
    let found = find_pod_volumes(state, node, volumes);
    // class → (requested, capacity), whole bytes.
    let mut classes: BTreeMap<&str, (i128, i128)> = BTreeMap::new();
    let requested = |pvc: &PersistentVolumeClaim| bytes_of(vol::requested_storage(pvc));
    if found.static_bindings.is_empty() {
        for p in &found.provisions {
            let (Some(capacity), Some(pvc)) = (p.capacity, volumes.claim(&state.namespace, &p.claim)) else { continue };
            let class = classes.entry(vol::claim_class(pvc)).or_default();
            class.0 += requested(pvc);
            class.1 = capacity;
        }
    } else {
        for (claim, pv_name) in &found.static_bindings {
            let (Some(pvc), Some(pv)) = (volumes.claim(&state.namespace, claim), volumes.volumes.get(pv_name)) else {
                continue;
            };
            let class = pv.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default();
            let class = classes.entry(class).or_default();
            class.0 += requested(pvc);
            class.1 += bytes_of(vol::capacity_storage(pv));
        }
    }
    if classes.is_empty() {
        return 0;
    }
    let clamp = |v: i128| v.clamp(0, i128::from(i64::MAX)) as i64;
    let sum: i64 = classes.values().map(|(r, c)| ratio_score(shape, clamp(*r), clamp(*c))).sum();
    let n = classes.len() as i64;
    (2 * sum + n) / (2 * n)
}

/// A quantity's `Value()`: whole units, rounded up.
fn whole_bytes(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i128 {
    muster_api::quantity::parse(&q.0).map_or(0, |v| bytes_of(v.nanos()))
}

fn bytes_of(nanos: i128) -> i128 {
    nanos.div_euclid(1_000_000_000) + i128::from(nanos.rem_euclid(1_000_000_000) != 0)
}

fn claim_name(pvc: &PersistentVolumeClaim) -> String {
    pvc.metadata.name.clone().unwrap_or_default()
}

/// `checkVolumeProvisions` for one claim: the class has a provisioner and its
/// `allowedTopologies` admit the node.
fn can_provision(class: &StorageClass, node: NodeView<'_>) -> bool {
    if class.provisioner.is_empty() || class.provisioner == vol::NO_PROVISIONER {
        return false;
    }
    let terms = class.allowed_topologies.as_deref().unwrap_or(&[]);
    terms.is_empty()
        || terms.iter().any(|t| {
            t.match_label_expressions
                .iter()
                .flatten()
                .all(|e| node.labels.get(&e.key).is_some_and(|v| e.values.contains(v)))
        })
}

/// `FindMatchingVolume` on the scheduler's path: the volume already bound to the claim if its
/// node affinity admits the node, else the smallest Available volume of the claim's class with
/// enough capacity, the same volume mode and attributes class, the claim's access modes, labels
/// the claim's selector matches and node affinity admitting the node. Volumes are tried by name
/// (upstream's order is its cache's), so ties go to the first name.
pub fn find_matching_volume<'v>(
    pvc: &PersistentVolumeClaim,
    volumes: &'v Volumes,
    node: NodeView<'_>,
    excluded: &[&str],
) -> Option<&'v str> {
    let requested = vol::requested_storage(pvc);
    let class = vol::claim_class(pvc);
    let spec = pvc.spec.as_ref();
    let selector = spec.and_then(|s| s.selector.as_ref());
    let mut smallest: Option<(&PersistentVolume, i128)> = None;
    for (name, pv) in &volumes.volumes {
        if excluded.contains(&name.as_str()) || vol::volume_class(pv) != class {
            continue;
        }
        let pv_spec = pv.spec.as_ref();
        let bound_here = vol::bound_to_claim(pv, pvc);
        if pv_spec.and_then(|s| s.claim_ref.as_ref()).is_some() && !bound_here {
            continue;
        }
        let capacity = vol::capacity_storage(pv);
        if capacity < requested || mode_mismatch(pvc, pv) || !same_attributes_class(pvc, pv) {
            continue;
        }
        if pv.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let affinity = vol::node_affinity_matches(pv, node);
        if bound_here {
            return affinity.then_some(name.as_str());
        }
        if pv.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Available")
            || selector.is_some_and(|s| !muster_api::selectors::label_selector_matches(s, labels(pv)))
            || !affinity
            || !access_modes_match(pvc, pv)
        {
            continue;
        }
        if smallest.is_none_or(|(_, q)| q > capacity) {
            smallest = Some((pv, capacity));
        }
    }
    smallest.and_then(|(pv, _)| pv.metadata.name.as_deref())
}

fn labels(pv: &PersistentVolume) -> &std::collections::BTreeMap<String, String> {
    static EMPTY: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    pv.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// `CheckVolumeModeMismatches`: both default to Filesystem.
fn mode_mismatch(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let claim = pvc.spec.as_ref().and_then(|s| s.volume_mode.as_deref()).unwrap_or("Filesystem");
    let volume = pv.spec.as_ref().and_then(|s| s.volume_mode.as_deref()).unwrap_or("Filesystem");
    claim != volume
}

fn same_attributes_class(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let claim = pvc.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or_default();
    let volume = pv.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or_default();
    claim == volume
}

/// `CheckAccessModes`: every mode the claim asks for is one the volume offers.
fn access_modes_match(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let offered = pv.spec.as_ref().and_then(|s| s.access_modes.as_deref()).unwrap_or(&[]);
    vol::claim_modes(pvc).iter().all(|m| offered.contains(m))
}

/// What a Reserve changed in the storage objects, for Unreserve.
#[derive(Debug, Default)]
pub struct VolumeUndo {
    decisions: usize,
    volumes: Vec<(String, PersistentVolume)>,
    claims: Vec<((String, String), PersistentVolumeClaim)>,
}

/// Reserve (`AssumePodVolumes`): each chosen volume gets the claim as its `claimRef`, each claim
/// to provision the chosen node as its selected node; the decisions are recorded.
pub fn reserve(pod: PodId, state: &BindingState, node: NodeView<'_>, volumes: &mut Volumes) -> VolumeUndo {
    let found = find_pod_volumes(state, node, volumes);
    let mut undo = VolumeUndo { decisions: volumes.decisions.len(), ..VolumeUndo::default() };
    let ns = &state.namespace;
    for (claim, pv_name) in found.static_bindings {
        let pvc = volumes.claim(ns, &claim).cloned().unwrap_or_default();
        // Already bound to the claim (an earlier pod of the claim): nothing to assume.
        if volumes.volumes.get(&pv_name).is_some_and(|pv| vol::bound_to_claim(pv, &pvc)) {
            continue;
        }
        if let Some(pv) = volumes.volumes.get_mut(&pv_name) {
            undo.volumes.push((pv_name.clone(), pv.clone()));
            bind_volume_to_claim(pv, &pvc);
        }
        volumes.decisions.push(VolumeDecision { pod, namespace: ns.clone(), claim, binding: Binding::Volume(pv_name) });
    }
    for Provision { claim, .. } in found.provisions {
        let key = (ns.clone(), claim.clone());
        let selected =
            volumes.claims.get(&key).and_then(|c| c.metadata.annotations.as_ref()?.get(vol::ANN_SELECTED_NODE));
        if selected.is_some_and(|n| n == node.name) {
            continue;
        }
        if let Some(pvc) = volumes.claims.get_mut(&key) {
            undo.claims.push((key, pvc.clone()));
            pvc.metadata.annotations.get_or_insert_default().insert(vol::ANN_SELECTED_NODE.into(), node.name.into());
        }
        let binding = Binding::Provision(node.name.to_string());
        volumes.decisions.push(VolumeDecision { pod, namespace: ns.clone(), claim, binding });
    }
    undo
}

/// `GetBindVolumeToClaim`: the volume's `claimRef` names the claim.
fn bind_volume_to_claim(pv: &mut PersistentVolume, pvc: &PersistentVolumeClaim) {
    let spec = pv.spec.get_or_insert_default();
    if spec.claim_ref.is_none() {
        pv.metadata.annotations.get_or_insert_default().insert(vol::ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
    }
    spec.claim_ref = Some(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: pvc.metadata.namespace.clone(),
        name: pvc.metadata.name.clone(),
        uid: pvc.metadata.uid.clone(),
        resource_version: pvc.metadata.resource_version.clone(),
        ..ObjectReference::default()
    });
}

/// Unreserve: the storage objects and decisions as before the Reserve.
pub fn unreserve(undo: VolumeUndo, volumes: &mut Volumes) {
    volumes.decisions.truncate(undo.decisions);
    for (name, pv) in undo.volumes.into_iter().rev() {
        volumes.volumes.insert(name, pv);
    }
    for (key, pvc) in undo.claims.into_iter().rev() {
        volumes.claims.insert(key, pvc);
    }
}

/// A forgotten pod (its binding failed, `RevertAssumedPodVolumes`): the volumes and claims its
/// Reserve assumed are as the API server holds them again. A decision is only recorded for a
/// volume without a `claimRef` and a claim without a selected node, so reverting removes them.
pub fn forget(pod: PodId, volumes: &mut Volumes) {
    let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut volumes.decisions).into_iter().partition(|d| d.pod == pod);
    volumes.decisions = rest;
    for d in mine {
        match d.binding {
            Binding::Volume(name) => {
                if let Some(pv) = volumes.volumes.get_mut(&name) {
                    pv.spec.get_or_insert_default().claim_ref = None;
                    if let Some(a) = pv.metadata.annotations.as_mut() {
                        a.remove(vol::ANN_BOUND_BY_CONTROLLER);
                    }
                }
            }
            Binding::Provision(_) => {
                let annotations =
                    volumes.claims.get_mut(&(d.namespace, d.claim)).and_then(|c| c.metadata.annotations.as_mut());
                if let Some(a) = annotations {
                    a.remove(vol::ANN_SELECTED_NODE);
                }
            }
        }
    }
}

#[cfg(test)]
mod capacity_tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::storage::v1::{CSIDriver, CSIStorageCapacity};
    use serde_json::json;

    use super::*;

    fn claim(storage: Option<&str>) -> PersistentVolumeClaim {
        let requests = storage.map(|s| json!({"storage": s})).unwrap_or(json!({}));
        serde_json::from_value(json!({"metadata": {"name": "c", "namespace": "ml"},
            "spec": {"storageClassName": "lvm", "resources": {"requests": requests}}}))
        .unwrap()
    }

    fn volumes(tracked: bool, capacities: &[serde_json::Value]) -> (Volumes, StorageClass) {
        let class: StorageClass =
            serde_json::from_value(json!({"metadata": {"name": "lvm"}, "provisioner": "lvm.example.com"})).unwrap();
        let driver: CSIDriver = serde_json::from_value(
            json!({"metadata": {"name": "lvm.example.com"}, "spec": {"storageCapacity": tracked}}),
        )
        .unwrap();
        let mut v = Volumes { enabled: true, ..Volumes::default() };
        v.csi_drivers.insert("lvm.example.com".into(), driver);
        for (i, c) in capacities.iter().enumerate() {
            let mut c = c.clone();
            c["metadata"] = json!({"name": format!("cap-{i}"), "namespace": "csi"});
            let c: CSIStorageCapacity = serde_json::from_value(c).unwrap();
            v.capacities.insert(format!("csi/cap-{i}"), c);
        }
        (v, class)
    }

    fn fits(pvc: &PersistentVolumeClaim, v: &(Volumes, StorageClass), zone: &str) -> bool {
        let labels = BTreeMap::from([("zone".to_string(), zone.to_string())]);
        capacity_for(pvc, &v.1, NodeView { name: "n", labels: &labels }, &v.0).is_some()
    }

    #[test]
    fn capacity_is_checked_only_where_the_driver_asks_and_the_claim_has_a_size() {
        let none = volumes(true, &[]);
        assert!(!fits(&claim(Some("1Gi")), &none, "a"), "tracked, no capacity published: no room");
        assert!(fits(&claim(None), &none, "a"), "no storage request: nothing to check");
        assert!(fits(&claim(Some("1Gi")), &volumes(false, &[]), "a"), "the driver does not ask");
    }

    #[test]
    fn the_maximum_volume_size_wins_over_the_capacity_and_the_topology_must_select_the_node() {
        let v = volumes(
            true,
            &[
                json!({"storageClassName": "lvm", "capacity": "10Gi", "maximumVolumeSize": "4Gi",
                       "nodeTopology": {"matchLabels": {"zone": "a"}}}),
                json!({"storageClassName": "lvm", "capacity": "100Gi"}),
                json!({"storageClassName": "other", "capacity": "100Gi", "nodeTopology": {}}),
            ],
        );
        assert!(fits(&claim(Some("4Gi")), &v, "a"));
        assert!(!fits(&claim(Some("5Gi")), &v, "a"), "more than the largest volume");
        assert!(!fits(&claim(Some("1Gi")), &v, "b"), "no nodeTopology: no node; another class's pool");
        // Whole bytes: 4Gi and 4Gi + 0.5 byte round up differently.
        assert!(!fits(&claim(Some("4294967296.5")), &v, "a"));
    }
}
