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

/// Filter: `Ok(Some(allocation))` when the node can serve the pod's claims, `Ok(None)` with the
/// rejection, or `Err` for a problem no node can fix (the pod's attempt fails with it).
pub fn filter(
    pod: &PodInfo,
    node: &NodeInfo,
    cluster: &Cluster,
    ctx: &DraContext<'_>,
    state: &AllocatedState,
) -> Result<Result<NodeAllocation, Rejection>, String> {
    let mut pending: Vec<&ResourceClaim> = Vec::new();
    for c in pod.claims.iter().flatten() {
        let claim = &cluster.claims[*c].claim;
        if allocated(claim) {
            if !available_on(claim, node) {
                return Ok(Err(Rejection::new(NAME, true, "resourceclaim not available on the node")));
            }
        } else {
            pending.push(claim);
        }
    }
    if pending.is_empty() {
        return Ok(Ok(Vec::new()));
    }
    let allocator = Allocator::new(ctx.features, state, ctx.classes, &ctx.index, &ctx.env);
    let n: &Node = &node.detail.node;
    match allocator.allocate(Some(n), &pending) {
        Ok(Outcome::Allocated(results)) => Ok(Ok(results)),
        Ok(Outcome::Unsatisfiable) => Ok(Err(Rejection::new(NAME, true, "cannot allocate all claims"))),
        Err(AllocError::InvalidPools) => Ok(Err(Rejection::new(NAME, false, AllocError::InvalidPools.to_string()))),
        Err(AllocError::Fatal(msg)) => Err(msg),
    }
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
