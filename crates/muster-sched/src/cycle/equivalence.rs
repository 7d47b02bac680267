//! Equivalent pods: two pending pods that every Filter plugin and DefaultPreemption judge alike on
//! any cluster state, so that once one is found unschedulable the other is too until the cluster
//! changes. kube-scheduler tries each (upstream dropped its equivalence cache in 1.12); muster
//! gives the second the first's verdict without a cycle, which changes no decision and no reason.
//!
//! Equivalent means equal in everything a Filter, PreFilter or PostFilter reads: requests,
//! priority and preemption policy, namespace, owners (spreading's default constraints), labels
//! where inter-pod terms can read them, node selector, affinity, tolerations, spread constraints, host ports,
//! the nominated node, volumes (none of them generic ephemeral: their claims are the pod's own), and claims with equal specs that nobody has allocated or reserved. A
//! plugin that reads a new part of a pod must add it here. Only verdicts made of per-node
//! rejections are reused: a PreFilter or group message, or a plugin's error, may name the pod's
//! own objects.

use k8s_openapi::api::core::v1::ContainerPort;
use muster_api::PodObject;

use crate::stored_pod::StoredPod;

use super::*;
use crate::cluster::PodInfo;

/// At most this many classes are remembered per batch: a batch of pods that are all different
/// costs each pod at most this many key comparisons.
pub(super) const MAX_CLASSES: usize = 64;

/// What equivalent pods share and is cheap to compare, checked before [`equivalent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ClassKey {
    shape: u32,
    priority: i32,
    claims: usize,
}

pub(super) fn key(p: &PodInfo) -> ClassKey {
    ClassKey { shape: p.shape, priority: p.priority, claims: p.claims.len() }
}

/// Whether the verdict `e` on `pod` may serve equivalent pods.
pub(super) fn cacheable(c: &Cluster, pod: PodId, e: &FitError) -> bool {
    e.pre_filter.is_none() && e.group.is_none() && e.error.is_none() && own_claims_free(c, c.pod(pod))
}

/// Whether pending pods `a` and `b` are judged alike by every plugin on any state.
pub(super) fn equivalent(c: &Cluster, a: PodId, b: PodId) -> bool {
    let (pa, pb) = (c.pod(a), c.pod(b));
    a != b
        && pa.shape == pb.shape
        && pa.requests == pb.requests
        && pa.non_zero == pb.non_zero
        && pa.priority == pb.priority
        && pa.dra_extended == pb.dra_extended
        && pb.stale_extended_claim.is_none()
        && own_claims_free(c, pb)
        && same_claim_specs(c, pa, pb)
        && same_pod(&pa.pod, &pb.pod, labels_matter(c, &pa.pod))
}

/// Labels decide a Filter verdict only through inter-pod terms: an existing pod's required
/// anti-affinity, or the pod's own affinity or spread constraints (which may select the pod
/// itself). Without any, pods that differ only in labels are judged alike.
fn labels_matter(c: &Cluster, p: &dyn PodObject) -> bool {
    let spec = p.spec();
    let affinity = spec.and_then(|s| s.affinity.as_ref());
    c.inter_pod.required_anti_affinity > 0
        || affinity.is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
        || spec.and_then(|s| s.topology_spread_constraints.as_ref()).is_some_and(|t| !t.is_empty())
}

/// Not in a PodGroup, and every claim resolved, unallocated and reserved for nobody.
pub(super) fn own_claims_free(c: &Cluster, p: &PodInfo) -> bool {
    p.group.is_none()
        && p.claims.iter().all(|r| {
            r.as_ref().is_ok_and(|id| {
                let status = c.claims[id.index()].claim.status.as_ref();
                status.is_none_or(|s| s.allocation.is_none() && s.reserved_for.as_ref().is_none_or(Vec::is_empty))
            })
        })
}

fn same_claim_specs(c: &Cluster, a: &PodInfo, b: &PodInfo) -> bool {
    a.claims.len() == b.claims.len()
        && a.claims.iter().zip(&b.claims).all(|(x, y)| match (x, y) {
            (Ok(x), Ok(y)) => c.claims[x.index()].claim.spec == c.claims[y.index()].claim.spec,
            _ => false,
        })
}

fn same_pod(a: &StoredPod, b: &StoredPod, labels_matter: bool) -> bool {
    let (ma, mb) = (a.meta(), b.meta());
    let (Some(sa), Some(sb)) = (a.spec(), b.spec()) else { return false };
    let nominated = |p: &StoredPod| p.status().and_then(|s| s.nominated_node_name.clone());
    ma.namespace == mb.namespace
        && (!labels_matter || ma.labels == mb.labels)
        && ma.owner_references == mb.owner_references
        && sa.node_selector == sb.node_selector
        && sa.affinity == sb.affinity
        && sa.tolerations == sb.tolerations
        && sa.topology_spread_constraints == sb.topology_spread_constraints
        && sa.preemption_policy == sb.preemption_policy
        && sa.priority_class_name == sb.priority_class_name
        && sa.scheduler_name == sb.scheduler_name
        && sa.node_name == sb.node_name
        && ports(a) == ports(b)
        && nominated(a) == nominated(b)
        && sa.volumes == sb.volumes
        && !sa.volumes.iter().flatten().any(|v| v.ephemeral.is_some())
}

/// Each container's ports and restart policy (init containers first, then regular ones).
fn ports(pod: &StoredPod) -> Vec<(bool, Option<&str>, &[ContainerPort])> {
    pod.containers().iter().map(|c| (c.init, c.restart_policy.as_deref(), &c.ports[..])).collect()
}
