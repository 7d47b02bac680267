//! DynamicResources: a pod's ResourceClaims must be allocatable on the node (Filter), and the
//! allocation is recorded in the claims when the pod is placed (Reserve, then what PreBind writes:
//! `status.allocation` and `status.reservedFor`).

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceClass, ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus,
};
use muster_alloc::{AllocError, AllocatedState, Allocator, Features, Outcome, SliceIndex};
use muster_api::selectors::{NodeView, node_selector_matches};

use crate::cluster::{Cluster, NodeInfo, PodInfo};
use crate::framework::Rejection;

pub const NAME: &str = "DynamicResources";

/// Upstream's limit on pods reserving one claim.
pub const RESERVED_FOR_MAX: usize = 256;

/// The DRA inputs that do not change during a plan: slices (indexed), classes, the CEL
/// environment and the allocator features.
pub struct DraContext<'a> {
    pub index: SliceIndex<'a>,
    pub classes: &'a [DeviceClass],
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

/// PreFilter: every claim must exist, and a claim may not be reserved by more than 256 pods.
pub fn pre_filter(pod: &PodInfo, cluster: &Cluster) -> Option<String> {
    for c in &pod.claims {
        match c {
            Err(msg) => return Some(msg.clone()),
            Ok(i) => {
                let claim = &cluster.claims[*i].claim;
                let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.as_ref()).map_or(0, Vec::len);
                if reserved >= RESERVED_FOR_MAX {
                    return Some(format!(
                        "resourceclaim {} is reserved by {reserved} consumers, the limit",
                        cluster.claims[*i].key()
                    ));
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
            pending.push(&c.claim);
        }
    }
    (pending, fingerprint)
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
pub fn allocate(pending: &[&ResourceClaim], node: &NodeInfo, ctx: &DraContext<'_>, state: &AllocatedState) -> Verdict {
    if pending.is_empty() {
        return Ok(Ok(Default::default()));
    }
    let allocator = Allocator::new(ctx.features, state, ctx.classes, &ctx.index, &ctx.env);
    let n: &Node = &node.detail.node;
    match allocator.allocate(Some(n), pending) {
        Ok(Outcome::Allocated(results)) => Ok(Ok(std::sync::Arc::new(results))),
        Ok(Outcome::Unsatisfiable) => Ok(Err(Rejection::new(NAME, true, "cannot allocate all claims"))),
        Err(AllocError::InvalidPools) => Ok(Err(Rejection::new(NAME, false, AllocError::InvalidPools.to_string()))),
        Err(AllocError::Fatal(msg)) => Err(msg),
    }
}

/// Does an allocation use only devices of pools local to `node`? (Devices of shared pools change
/// what other nodes can allocate.)
pub fn node_local(allocation: &NodeAllocation, node: &str, ctx: &DraContext<'_>) -> bool {
    allocation
        .iter()
        .flat_map(|a| a.devices.iter().flat_map(|d| d.results.iter().flatten()))
        .all(|r| ctx.index.pool_is_local_to(&r.driver, &r.pool, node))
}

/// Reserve and PreBind: write the allocation into the unallocated claims, add the pod to every
/// claim's `reservedFor`, and count the devices as in use for later pods.
pub fn reserve(
    pod_index: usize,
    allocation: NodeAllocation,
    cluster: &mut Cluster,
    state: &mut AllocatedState,
    features: Features,
) {
    let pod = &cluster.pods[pod_index];
    let consumer = ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: pod.name().to_string(),
        uid: pod.pod.metadata.uid.clone().unwrap_or_default(),
    };
    let claims: Vec<usize> = pod.claims.iter().flatten().copied().collect();
    let mut results = allocation.into_iter();
    for c in claims {
        let info = &mut cluster.claims[c];
        let status = info.claim.status.get_or_insert_with(ResourceClaimStatus::default);
        if status.allocation.is_none() {
            status.allocation = results.next();
            state.add_claim(&info.claim, features);
        }
        let status = info.claim.status.get_or_insert_with(ResourceClaimStatus::default);
        status.reserved_for.get_or_insert_with(Vec::new).push(consumer.clone());
        info.changed = true;
    }
}
