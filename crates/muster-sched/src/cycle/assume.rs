//! Assumed pods (kube-scheduler's assume cache): a pod placed by a cycle holds its node's
//! resources and its devices at once, before the world binds it. The world confirms it (the pod
//! comes back bound, through the store) or reports that binding failed: [`Scheduler::forget`]
//! then gives everything back, as Unreserve and `ForgetPod` do. Claims, which upstream also
//! keeps in an assume cache, come back through the store: [`Scheduler::claim_replaced`] makes the
//! devices in use follow what the store now holds.

use super::*;

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// Binding `pod` failed: if it is assumed, it leaves its node, its claims lose its
    /// reservation (and their allocation when no other pod reserves them; a special
    /// extended-resources claim is dropped from the pod), and it is pending again. A member of a
    /// gang takes the group's other assumed members with it: a gang is bound whole or not at all
    /// (they waited at Permit together). Returns the pods forgotten.
    pub fn forget(&mut self, pod: PodId) -> Vec<PodId> {
        if !matches!(self.cluster.pod(pod).state, PodState::Assumed(_)) {
            return Vec::new();
        }
        let mut pods = vec![pod];
        if let Some(Ok(g)) = self.cluster.pod(pod).group
            && self.cluster.groups[g].gang
        {
            let siblings = self.cluster.groups[g].members.iter().copied();
            pods.extend(siblings.filter(|m| *m != pod && matches!(self.cluster.pod(*m).state, PodState::Assumed(_))));
        }
        for &p in &pods {
            self.evict(p);
            let Cluster { pods, claims, .. } = &mut *self.cluster;
            let info = &mut pods[p.0 as usize];
            info.state = PodState::Pending;
            let special = |c: &Result<crate::cluster::ClaimId, String>| {
                let annotations = c.as_ref().ok().and_then(|i| claims[*i].claim.metadata.annotations.as_ref());
                annotations.is_some_and(|a| a.contains_key(crate::cluster::EXTENDED_RESOURCE_CLAIM_ANNOTATION))
            };
            info.claims.retain(|c| !special(c));
            if let Some(status) = info.pod.status.as_mut() {
                status.extended_resource_claim_status = None;
            }
        }
        pods
    }

    /// The store replaced claim `index` (it had `old`, or is new): the devices it held are given
    /// back and the ones it holds now taken, and every remembered allocator verdict is dropped
    /// (devices changed somewhere; the shared generation moves).
    pub fn claim_replaced(
        &mut self,
        index: crate::cluster::ClaimId,
        old: Option<&k8s_openapi::api::resource::v1::ResourceClaim>,
    ) {
        let shared = self.fresh_generation();
        let Some((ctx, state)) = self.dra.as_mut() else { return };
        let allocated = |c: &k8s_openapi::api::resource::v1::ResourceClaim| {
            c.status.as_ref().and_then(|s| s.allocation.as_ref()).is_some()
        };
        if let Some(old) = old.filter(|c| allocated(c)) {
            state.remove_claim(old, ctx.features);
        }
        let now = &self.cluster.claims[index].claim;
        if allocated(now) {
            state.add_claim(now, ctx.features);
        }
        self.dra_shared_generation = shared;
    }
}
