//! DynamicResources: a pod's ResourceClaims must be allocatable on the node (Filter), and the
//! allocation is recorded in the claims when the pod is placed (Reserve, then what PreBind writes:
//! `status.allocation` and `status.reservedFor`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerExtendedResourceRequest, Node, PodExtendedResourceClaimStatus};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceClaim, DeviceClass, DeviceRequest, ExactDeviceRequest, ResourceClaim,
    ResourceClaimConsumerReference, ResourceClaimSpec, ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use muster_alloc::{AllocError, AllocatedState, Allocator, Features, Outcome, SliceIndex};
use muster_api::selectors::{NodeView, node_selector_matches};

use crate::cluster::{ClaimInfo, Cluster, EXTENDED_RESOURCE_CLAIM_ANNOTATION, NodeInfo, PodInfo};
use crate::framework::Rejection;
use crate::pre_filter_reason::PreFilterReason;
use crate::stored_pod::StoredPod;

pub const NAME: &str = "DynamicResources";

/// Upstream's limit on pods reserving one claim.
pub const RESERVED_FOR_MAX: usize = 256;

/// The DRA inputs that do not change during a plan: slices (indexed), classes, the CEL
/// environment and the allocator features.
pub struct DraContext {
    pub index: SliceIndex,
    pub classes: Vec<DeviceClass>,
    pub env: muster_cel::Env,
    pub features: Features,
}

/// What Filter decided for one node: the allocation of the pod's unallocated claims.
pub type NodeAllocation = Vec<AllocationResult>;

fn available_on(claim: &ResourceClaim, node: &NodeInfo) -> bool {
    let selector = claim.status.as_ref().and_then(|s| s.allocation.as_ref()).and_then(|a| a.node_selector.as_ref());
    selector.is_none_or(|sel| node_selector_matches(sel, NodeView { name: node.name(), labels: &node.detail.labels }))
}

fn allocated(claim: &ResourceClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.allocation.as_ref()).is_some()
}

/// PreFilter, what needs the devices: an allocated claim whose device has a NoExecute taint
/// the allocation does not tolerate gets no new reservations (the pod would be evicted at once).
pub fn pre_filter_devices(pod: &PodInfo, cluster: &Cluster, ctx: &DraContext) -> Option<PreFilterReason> {
    for c in pod.claims.iter().flatten() {
        let info = &cluster.claims[*c];
        if allocated(&info.claim)
            && let Some(device) = ctx.index.untolerated_no_execute(&info.claim)
        {
            return Some(PreFilterReason::ClaimOnTaintedDevice { claim: info.key(), device });
        }
    }
    None
}

/// PreFilter, what needs the classes: every request of a claim still to allocate names a
/// DeviceClass that exists (`request <name>: device class <class> does not exist`; a subrequest is
/// named `<request>/<subrequest>`). The pod waits for the class; no Filter runs.
pub fn pre_filter_classes(pod: &PodInfo, cluster: &Cluster, classes: &[DeviceClass]) -> Option<PreFilterReason> {
    let exists = |name: &str| name.is_empty() || classes.iter().any(|c| c.metadata.name.as_deref() == Some(name));
    for c in pod.claims.iter().flatten().map(|c| &cluster.claims[*c].claim).filter(|c| !allocated(c)) {
        let requests = c.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.requests.as_deref());
        for r in requests.unwrap_or(&[]) {
            let named = r.exactly.iter().map(|e| (r.name.clone(), &e.device_class_name));
            let subs =
                r.first_available.iter().flatten().map(|s| (format!("{}/{}", r.name, s.name), &s.device_class_name));
            if let Some((request, class)) = named.chain(subs).find(|(_, class)| !exists(class)) {
                return Some(PreFilterReason::ClassNotFound { request, class: class.clone() });
            }
        }
    }
    None
}

/// PreFilter: every claim must exist, and a claim may not be reserved by more than 256 pods.
/// A special extended-resources claim from an earlier attempt makes the attempt fail, as
/// upstream's Filter does (its PostFilter then deletes the claim and the pod is retried).
pub fn pre_filter(pod: &PodInfo, cluster: &Cluster) -> Option<PreFilterReason> {
    if let Some(claim) = &pod.stale_extended_claim {
        return Some(PreFilterReason::StaleExtendedClaim { claim: claim.to_string() });
    }
    for c in &pod.claims {
        match c {
            Err(why) => return Some(PreFilterReason::Claim((**why).clone())),
            Ok(i) => {
                let claim = &cluster.claims[*i].claim;
                let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.as_ref()).map_or(0, Vec::len);
                if reserved >= RESERVED_FOR_MAX {
                    return Some(PreFilterReason::ClaimFullyReserved { claim: cluster.claims[*i].key(), reserved });
                }
            }
        }
    }
    None
}

/// What Filter decides for one node (the allocation is shared: many pods' cycles may reuse it).
pub type Verdict = Result<Result<std::sync::Arc<NodeAllocation>, Rejection>, String>;

/// The pod's claims that still need an allocation, and a fingerprint of their specs: pods whose
/// claims come from one template share it, so the allocator's answer for a node can be reused
/// until the node's devices change.
pub fn pending_claims<'c>(pod: &PodInfo, cluster: &'c Cluster) -> (Vec<&'c ResourceClaim>, u64) {
    let mut fingerprint = 0xcbf2_9ce4_8422_2325u64;
    let mut pending = Vec::new();
    for c in pod.claims.iter().flatten().map(|c| &cluster.claims[*c]) {
        if !allocated(&c.claim) {
            fingerprint = (fingerprint.rotate_left(5) ^ c.spec_fingerprint).wrapping_mul(0x100_0000_01b3);
            pending.push(&*c.claim);
        }
    }
    (pending, fingerprint)
}

/// Is `a` the verdict `b` is, but for the share IDs (derived from the claim each was computed
/// for: [`muster_alloc::derive_share_ids`])? For debug checks of reused verdicts.
pub fn same_verdict(a: &Verdict, b: &Result<std::sync::Arc<NodeAllocation>, Rejection>) -> bool {
    let without_ids = |n: &NodeAllocation| {
        let mut n = n.clone();
        let results = n.iter_mut().filter_map(|a| a.devices.as_mut()?.results.as_mut());
        results.flatten().for_each(|r| r.share_id = None);
        n
    };
    match (a, b) {
        (Ok(Ok(a)), Ok(b)) => without_ids(a) == without_ids(b),
        (Ok(Err(a)), Err(b)) => a == b,
        _ => false,
    }
}

/// Filter's first half: claims already allocated must be available on the node.
pub fn allocated_claims_fit(pod: &PodInfo, node: &NodeInfo, cluster: &Cluster) -> Result<(), Rejection> {
    for c in pod.claims.iter().flatten() {
        let claim = &cluster.claims[*c].claim;
        if allocated(claim) && !available_on(claim, node) {
            return Err(Rejection::new(NAME, true, "resourceclaim not available on the node"));
        }
    }
    Ok(())
}

/// Filter's second half: `Ok(Ok(allocation))` when the node can serve the pending claims,
/// `Ok(Err(rejection))`, or `Err` for a problem no node can fix (the pod's attempt fails with it).
/// With `domain`, devices of its constrained drivers come from the domain only (a gang's device
/// topology, [beyond upstream]); with `budget`, selector evaluations are charged to it (an
/// attempt's CEL budget, [beyond upstream]).
pub fn allocate(
    pending: &[&ResourceClaim],
    node: &NodeInfo,
    ctx: &DraContext,
    state: &AllocatedState,
    domain: Option<&muster_alloc::DeviceDomain>,
    budget: Option<&muster_cel::Budget>,
) -> Verdict {
    if pending.is_empty() {
        return Ok(Ok(Default::default()));
    }
    let allocator = Allocator::new(ctx.features, state, &ctx.classes, &ctx.index, &ctx.env).with_budget(budget);
    let n: &Node = &node.detail.node;
    match allocator.allocate_within(Some(n), pending, domain) {
        Ok(Outcome::Allocated(results)) => Ok(Ok(std::sync::Arc::new(results))),
        Ok(Outcome::Unsatisfiable) => Ok(Err(Rejection::new(NAME, true, "cannot allocate all claims"))),
        Err(AllocError::InvalidPools) => Ok(Err(Rejection::new(NAME, false, AllocError::InvalidPools.to_string()))),
        Err(AllocError::Fatal(msg)) => Err(msg),
    }
}

/// Inside a gang's device domain [beyond upstream]: the constrained devices of the pod's claims
/// allocated earlier must have the domain's value, else the pod does not fit in the domain.
pub fn allocated_claims_in_domain(
    pod: &PodInfo,
    cluster: &Cluster,
    ctx: &DraContext,
    domain: &muster_alloc::DeviceDomain,
) -> Result<(), Rejection> {
    for c in pod.claims.iter().flatten() {
        let claim = &cluster.claims[*c].claim;
        let results = claim.status.as_ref().and_then(|s| s.allocation.as_ref()).and_then(|a| a.devices.as_ref());
        for r in results.into_iter().flat_map(|d| d.results.iter().flatten()) {
            if !domain.drivers.contains(&r.driver) {
                continue;
            }
            let values =
                ctx.index.allocated_values(&r.driver, &r.pool, &r.device, &domain.attribute, domain.list_types);
            if !values.is_some_and(|v| v.contains(&domain.value)) {
                return Err(Rejection::new(
                    NAME,
                    true,
                    format!(
                        "resourceclaim's device {}/{}/{} is outside the {} domain",
                        r.driver, r.pool, r.device, domain.attribute
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Does an allocation use only devices of pools local to `node`? (Devices of shared pools change
/// what other nodes can allocate.)
pub fn node_local<'a>(
    allocations: impl IntoIterator<Item = &'a AllocationResult>,
    node: &str,
    ctx: &DraContext,
) -> bool {
    // Results come in runs of one pool: each run's pool is looked up once.
    let mut last: Option<(&str, &str)> = None;
    allocations.into_iter().flat_map(|a| a.devices.iter().flat_map(|d| d.results.iter().flatten())).all(|r| {
        let pool = (r.driver.as_str(), r.pool.as_str());
        let local = last == Some(pool) || ctx.index.pool_is_local_to(pool.0, pool.1, node);
        last = Some(pool);
        local
    })
}

/// What Reserve changed in the claims, so that Unreserve can put it back exactly.
#[derive(Clone, Debug, Default)]
pub struct ClaimUndo {
    /// (claim index, its status before Reserve), in the order changed.
    pub claims: Vec<(crate::cluster::ClaimId, Option<ResourceClaimStatus>)>,
    /// Reserve created the special extended-resources claim (the last of `Cluster::claims`).
    pub extended: bool,
}

/// Reserve and PreBind: write the allocation into the unallocated claims, add the pod to every
/// claim's `reservedFor`, and count the devices as in use for later pods. With `undo`, what is
/// changed is recorded for [`unreserve`].
pub fn reserve(
    pod_index: usize,
    allocation: NodeAllocation,
    cluster: &mut Cluster,
    state: &mut AllocatedState,
    features: Features,
    mut undo: Option<&mut ClaimUndo>,
) {
    let consumer = consumer(&cluster.pods[pod_index]);
    let group_consumer = match cluster.pods[pod_index].group {
        Some(Ok(g)) => {
            let pg = &cluster.groups[g].group;
            Some((
                g,
                ResourceClaimConsumerReference {
                    api_group: Some("scheduling.k8s.io".into()),
                    resource: "podgroups".into(),
                    name: pg.metadata.name.clone().unwrap_or_default(),
                    uid: pg.metadata.uid.clone().unwrap_or_default(),
                },
            ))
        }
        _ => None,
    };
    let claims: Vec<crate::cluster::ClaimId> = cluster.pods[pod_index].claims.iter().flatten().copied().collect();
    let mut results = allocation.into_iter();
    for c in claims {
        let info = &mut cluster.claims[c];
        if let Some(u) = undo.as_deref_mut() {
            u.claims.push((c, info.claim.status.clone()));
        }
        if info.claim.status.as_ref().is_none_or(|s| s.allocation.is_none()) {
            // A verdict reused from a claim of the same spec carries that claim's share IDs.
            let allocation = results.next().map(|mut a| {
                muster_alloc::derive_share_ids(&info.claim, &mut a);
                a
            });
            info.claim.status.get_or_insert_with(ResourceClaimStatus::default).allocation = allocation;
            state.add_claim(&info.claim, features);
        }
        // A PodGroup's claim is reserved for the PodGroup, once (KEP 5729).
        let who = match (info.group, group_consumer.as_ref()) {
            (Some(g), Some((pg, c))) if g == *pg => c,
            _ => &consumer,
        };
        let status = info.claim.status.get_or_insert_with(ResourceClaimStatus::default);
        let list = status.reserved_for.get_or_insert_with(Vec::new);
        if !list.iter().any(|r| r == who) {
            list.push(who.clone());
        }
        info.status_changed();
    }
}

/// Unreserve: puts back what [`reserve`] and [`reserve_extended`] recorded in `undo`, last change
/// first, so that the claims and the devices in use are as before the pod was reserved.
pub fn unreserve(
    pod_index: usize,
    undo: ClaimUndo,
    cluster: &mut Cluster,
    state: &mut AllocatedState,
    features: Features,
) {
    if undo.extended {
        let claim = cluster.claims.pop().expect("the special claim Reserve created is the last one");
        state.remove_claim(&claim.claim, features);
        let pod = &mut cluster.pods[pod_index];
        pod.claims.pop();
        if let Some(st) = pod.pod.status_mut() {
            st.extended_resource_claim_status = None;
        }
    }
    for (c, status) in undo.claims.into_iter().rev() {
        let info = &mut cluster.claims[c];
        let had = status.as_ref().and_then(|s| s.allocation.as_ref()).is_some();
        if !had && allocated(&info.claim) {
            state.remove_claim(&info.claim, features);
        }
        info.claim.status = status;
        info.status_changed();
    }
}

/// The special claim for a pod's extended resources served through DRA on one node (KEP 5004),
/// as kube-scheduler's DynamicResources plugin prepares it in Filter: the claim (its name is
/// set at Reserve) and the pod's `extendedResourceClaimStatus.requestMappings`.
#[derive(Clone, Debug)]
pub struct ExtendedClaim {
    /// Which of the pod's `dra_extended` resources the node does not advertise (bit i = entry i).
    pub mask: u64,
    pub claim: ResourceClaim,
    pub mappings: Vec<ContainerExtendedResourceRequest>,
    pub fingerprint: u64,
}

/// Which of the pod's DRA-backed extended resources `node` does not advertise: those are served
/// through DRA there; the others by the device plugin, as NodeResourcesFit counts them.
pub fn extended_mask(pod: &PodInfo, node: &NodeInfo) -> u64 {
    let mut mask = 0;
    for (i, (id, _)) in pod.dra_extended.iter().enumerate().take(64) {
        if node.allocatable(*id) == 0 {
            mask |= 1 << i;
        }
    }
    mask
}

/// A container's requests as the API server stores them: limits default missing requests.
fn container_requests(c: &Container) -> BTreeMap<&str, &Quantity> {
    let res = c.resources.as_ref();
    let mut out: BTreeMap<&str, &Quantity> = BTreeMap::new();
    for (k, v) in res.and_then(|r| r.limits.as_ref()).into_iter().flatten() {
        out.insert(k, v);
    }
    for (k, v) in res.and_then(|r| r.requests.as_ref()).into_iter().flatten() {
        out.insert(k, v);
    }
    out
}

/// A request's quantity as a whole number (`AsInt64`); fractions and zero are not requests.
fn whole(q: &Quantity) -> Option<i64> {
    let n = muster_api::quantity::parse(&q.0).ok()?.nanos();
    (n > 0 && n % 1_000_000_000 == 0).then(|| i64::try_from(n / 1_000_000_000).ok()).flatten()
}

/// One container's request for `resource`: the long-lived requests in `reusable` are taken
/// first (an init container runs before them, so their devices are free for it); the shortfall
/// becomes a request named `container-<index>-request-<position of the resource among the
/// container's sorted request names>`.
fn container_request(
    index: usize,
    container: &Container,
    resource: &str,
    class: &str,
    reusable: &[Option<DeviceRequest>],
) -> (Option<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let requests = container_requests(container);
    let Some(want) = requests.get(resource).and_then(|q| whole(q)) else { return (None, Vec::new()) };
    let mapping = |request: &str| ContainerExtendedResourceRequest {
        container_name: container.name.clone(),
        resource_name: resource.to_string(),
        request_name: request.to_string(),
    };
    let mut mappings = Vec::new();
    let mut sum = 0;
    for r in reusable.iter().flatten() {
        sum += r.exactly.as_ref().and_then(|e| e.count).unwrap_or(0);
        mappings.push(mapping(&r.name));
        if sum >= want {
            return (None, mappings);
        }
    }
    let position = requests.keys().position(|k| *k == resource).unwrap_or(0);
    let name = format!("container-{index}-request-{position}");
    mappings.push(mapping(&name));
    let request = DeviceRequest {
        name,
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_string(),
            allocation_mode: Some("ExactCount".into()),
            count: Some(want - sum),
            ..Default::default()
        }),
        ..Default::default()
    };
    (Some(request), mappings)
}

/// The special claim's device requests and the request mappings for `needed` (resource name,
/// class), as upstream builds them: containers are numbered over `initContainers ++ containers`;
/// every long-lived container (regular or sidecar) gets its own request; ordinary init containers
/// reuse the requests of long-lived containers declared after them and ask only for the
/// shortfall, and of those shortfalls only the largest is kept (init containers run one at a
/// time), the others' mappings pointing at it. Requests are sorted by name.
pub fn extended_requests(
    pod: &StoredPod,
    needed: &[(&str, &str)],
) -> (Vec<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let (inits, regular) = pod.spec_containers();
    let containers: Vec<&Container> = inits.iter().chain(&regular).collect();
    let long_lived = |i: usize| i >= inits.len() || containers[i].restart_policy.as_deref() == Some("Always");
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for &(resource, class) in needed {
        let mut long: Vec<Option<DeviceRequest>> = vec![None; containers.len()];
        let mut long_mappings = Vec::new();
        for (i, c) in containers.iter().enumerate().filter(|(i, _)| long_lived(*i)) {
            let (r, m) = container_request(i, c, resource, class, &[]);
            long[i] = r;
            long_mappings.extend(m);
        }
        let mut largest: Option<DeviceRequest> = None;
        let mut short_names = Vec::new();
        let mut short_mappings = Vec::new();
        for (i, c) in containers.iter().enumerate().filter(|(i, _)| !long_lived(*i)) {
            let (r, m) = container_request(i, c, resource, class, &long[i..]);
            if let Some(r) = r {
                let count = |r: &DeviceRequest| r.exactly.as_ref().and_then(|e| e.count).unwrap_or(0);
                short_names.push(r.name.clone());
                if largest.as_ref().is_none_or(|l| count(l) < count(&r)) {
                    largest = Some(r);
                }
            }
            short_mappings.extend(m);
        }
        if let Some(l) = &largest {
            for m in &mut short_mappings {
                if short_names.contains(&m.request_name) {
                    m.request_name = l.name.clone();
                }
            }
        }
        requests.extend(largest);
        requests.extend(long.into_iter().flatten());
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

/// The special claim for `pod` on a node where the resources in `mask` are served through DRA.
/// Its name is upstream's placeholder until Reserve names it.
pub fn extended_claim(pod: &PodInfo, mask: u64, resources: &crate::cluster::ResourceNames) -> ExtendedClaim {
    let needed: Vec<(&str, &str)> = pod
        .dra_extended
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, (id, class))| (resources.name(*id), class.as_str()))
        .collect();
    let (requests, mappings) = extended_requests(&pod.pod, &needed);
    let claim = ResourceClaim {
        metadata: ObjectMeta {
            name: Some(SPECIAL_CLAIM_IN_MEMORY_NAME.into()),
            generate_name: Some(format!("{}-extended-resources-", pod.name())),
            namespace: Some(pod.namespace().to_string()),
            annotations: Some([(EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(), "true".to_string())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.name().to_string(),
                uid: pod.pod.meta().uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        spec: Some(ResourceClaimSpec { devices: Some(DeviceClaim { requests: Some(requests), ..Default::default() }) }),
        status: None,
    };
    let fingerprint = crate::cluster::fingerprint(&claim);
    ExtendedClaim { mask, claim, mappings, fingerprint }
}

/// Upstream's name for the special claim while it exists only in memory (not a valid name, so it
/// cannot clash with a real claim).
pub const SPECIAL_CLAIM_IN_MEMORY_NAME: &str = "<extended-resources>";

/// Reserve and PreBind for the special claim: name it as the API server would from its
/// `generateName` (the suffix derived from the pod, not random), allocate it, reserve it for the
/// pod, and record it in the pod's `status.extendedResourceClaimStatus`.
pub fn reserve_extended(
    pod_index: usize,
    extended: ExtendedClaim,
    allocation: AllocationResult,
    cluster: &mut Cluster,
    state: &mut AllocatedState,
    features: Features,
    undo: Option<&mut ClaimUndo>,
) {
    if let Some(u) = undo {
        u.extended = true;
    }
    let pod = &cluster.pods[pod_index];
    let mut claim = extended.claim;
    let mut base = claim.metadata.generate_name.take().unwrap_or_default();
    base.truncate(58);
    let suffix = crate::cluster::name_suffix(&[pod.namespace(), pod.name(), "extended-resources"]);
    let name = format!("{base}{suffix}");
    claim.metadata.generate_name = Some(format!("{}-extended-resources-", pod.name()));
    claim.metadata.name = Some(name.clone());
    claim.status = Some(ResourceClaimStatus {
        allocation: Some(allocation),
        reserved_for: Some(vec![consumer(pod)]),
        ..Default::default()
    });
    state.add_claim(&claim, features);
    let at = crate::cluster::ClaimId(cluster.claims.len() as u32);
    let mut info = ClaimInfo::new(claim, true, None);
    info.users = 1;
    cluster.claims.push(info);
    let pod = &mut cluster.pods[pod_index];
    pod.claims.push(Ok(at));
    pod.pod.ensure_status().extended_resource_claim_status =
        Some(PodExtendedResourceClaimStatus { resource_claim_name: name, request_mappings: extended.mappings });
}

fn consumer(pod: &PodInfo) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: pod.name().to_string(),
        uid: pod.pod.meta().uid.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> StoredPod {
        StoredPod::new(serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec})).unwrap())
    }

    type Brief = (Vec<(String, i64)>, Vec<(String, String)>);

    /// (request name, count) and (container, request name) pairs, to compare briefly.
    fn brief(pod: &StoredPod) -> Brief {
        let (reqs, maps) = extended_requests(pod, &[("nvidia.com/gpu", "gpu")]);
        (
            reqs.iter().map(|r| (r.name.clone(), r.exactly.as_ref().unwrap().count.unwrap())).collect(),
            maps.iter().map(|m| (m.container_name.clone(), m.request_name.clone())).collect(),
        )
    }

    fn s(a: &str, b: &str) -> (String, String) {
        (a.into(), b.into())
    }

    #[test]
    fn request_named_by_container_and_sorted_resource_position() {
        let p = pod(serde_json::json!({"containers": [
            {"name": "sidecar-less", "resources": {"requests": {"cpu": "1"}}},
            {"name": "train", "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}},
        ]}));
        let (reqs, maps) = brief(&p);
        assert_eq!(reqs, vec![("container-1-request-1".to_string(), 2)]);
        assert_eq!(maps, vec![s("train", "container-1-request-1")]);
        let (reqs, _) = extended_requests(&p, &[("nvidia.com/gpu", "gpu")]);
        let exact = reqs[0].exactly.as_ref().unwrap();
        assert_eq!((exact.device_class_name.as_str(), exact.allocation_mode.as_deref()), ("gpu", Some("ExactCount")));
    }

    #[test]
    fn limits_alone_count_as_requests() {
        let p = pod(serde_json::json!({"containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "1Gi"}}},
        ]}));
        assert_eq!(brief(&p).0, vec![("container-0-request-1".to_string(), 1)]);
    }

    #[test]
    fn init_container_reuses_the_devices_of_later_containers() {
        let p = pod(serde_json::json!({
            "initContainers": [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
        }));
        let (reqs, maps) = brief(&p);
        assert_eq!(reqs, vec![("container-1-request-0".to_string(), 2)]);
        assert_eq!(maps, vec![s("main", "container-1-request-0"), s("init", "container-1-request-0")]);
    }

    #[test]
    fn only_the_largest_init_shortfall_is_kept() {
        let p = pod(serde_json::json!({
            "initContainers": [
                {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "3"}}},
                {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "4"}}},
            ],
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
        }));
        let (reqs, maps) = brief(&p);
        assert_eq!(reqs, vec![("container-1-request-0".to_string(), 2), ("container-2-request-0".to_string(), 2)]);
        assert_eq!(
            maps,
            vec![
                s("main", "container-2-request-0"),
                s("a", "container-2-request-0"),
                s("a", "container-1-request-0"),
                s("b", "container-2-request-0"),
                s("b", "container-1-request-0"),
            ]
        );
    }

    #[test]
    fn sidecars_are_long_lived_and_only_later_ones_are_reused() {
        let p = pod(serde_json::json!({
            "initContainers": [
                {"name": "early", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
                {"name": "proxy", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                {"name": "late", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
            ],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
        }));
        let (reqs, maps) = brief(&p);
        // `early` may use the sidecar's device (the sidecar starts after it) and asks for one
        // more. `late` cannot (the sidecar is running); its own shortfall equals `early`'s, and
        // init containers run one at a time, so it shares `early`'s request.
        assert_eq!(reqs, vec![("container-0-request-0".to_string(), 1), ("container-1-request-0".to_string(), 1)]);
        assert_eq!(
            maps,
            vec![
                s("proxy", "container-1-request-0"),
                s("early", "container-1-request-0"),
                s("early", "container-0-request-0"),
                s("late", "container-0-request-0"),
            ]
        );
    }
}
