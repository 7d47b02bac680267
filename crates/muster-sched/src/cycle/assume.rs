//! Assumed pods (kube-scheduler's assume cache): a pod placed by a cycle holds its node's
//! resources and its devices at once, before the world binds it. The world confirms it (the pod
//! comes back bound, through the store) or reports that binding failed: [`Scheduler::forget`]
//! then gives everything back (its assumed volume bindings included), as Unreserve and
//! `ForgetPod` do. Claims, which upstream also
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
            crate::plugins::volume_binding::forget(p, &mut self.cluster.volumes);
            let Cluster { pods, claims, .. } = &mut *self.cluster;
            let info = &mut pods[p.0 as usize];
            info.state = PodState::Pending;
            let special = |c: &Result<crate::cluster::ClaimId, Box<crate::cluster::Unresolved>>| {
                let annotations = c.as_ref().ok().and_then(|i| claims[*i].claim.metadata.annotations.as_ref());
                annotations.is_some_and(|a| a.contains_key(crate::cluster::EXTENDED_RESOURCE_CLAIM_ANNOTATION))
            };
            let dropped: Vec<crate::cluster::ClaimId> =
                info.claims.iter().filter(|c| special(c)).flatten().copied().collect();
            info.claims.retain(|c| !special(c));
            if let Some(status) = info.pod.status_mut() {
                status.extended_resource_claim_status = None;
            }
            for c in dropped {
                self.cluster.drop_claim_user(c);
            }
        }
        pods
    }

    /// The store replaced claim `index` (it had `old`, or is new): the devices it held are given
    /// back and the ones it holds now taken, and the remembered allocator verdicts they could
    /// change are dropped: one node's, when every device given back or taken comes from that
    /// node's own pools (the allocation's node selector names it), every node's otherwise (the
    /// shared generation moves). When the allocation is the one the claim had (a new claim not
    /// allocated yet, or the world writing back the allocation an earlier cycle assumed), the
    /// devices in use are the same and every verdict stays.
    pub fn claim_replaced(
        &mut self,
        index: crate::cluster::ClaimId,
        old: Option<&k8s_openapi::api::resource::v1::ResourceClaim>,
    ) {
        if !self.kept.is_empty() {
            self.kept.forget_users_of(index, &self.cluster);
        }
        let before = allocation_of(old);
        let after = allocation_of(Some(&self.cluster.claims[index].claim));
        if self.dra.is_some() && before == after {
            return;
        }
        let local_to = match (&self.dra, before.or(after)) {
            (Some((ctx, _)), Some(a)) => selector_node(a).filter(|node| {
                let both = || before.into_iter().chain(after);
                both().all(|a| selector_node(a) == Some(node))
                    && crate::plugins::dynamic_resources::node_local(both(), node, ctx)
            }),
            _ => None,
        }
        .and_then(|node| self.cluster.node_id(node));
        let fresh = self.cluster.fresh_generation();
        let Some((ctx, state)) = self.dra.as_mut() else { return };
        if let Some(old) = old.filter(|c| allocation_of(Some(c)).is_some()) {
            state.remove_claim(old, ctx.features);
        }
        let now = &self.cluster.claims[index].claim;
        if allocation_of(Some(now)).is_some() {
            state.add_claim(now, ctx.features);
        }
        match local_to {
            Some(node) if (node.0 as usize) < self.dra_node_generation.len() => {
                self.dra_node_generation[node.0 as usize] = self.cluster.fresh_generation();
                self.cluster.node_journal.note(node);
            }
            _ => self.dra_shared_generation = fresh,
        }
    }
}

/// The node an allocation's node selector names, when it names exactly one by
/// `metadata.name In [node]` (as the allocator writes it for devices of node-local pools).
fn selector_node(a: &k8s_openapi::api::resource::v1::AllocationResult) -> Option<&str> {
    let [term] = a.node_selector.as_ref()?.node_selector_terms.as_slice() else { return None };
    if term.match_expressions.as_ref().is_some_and(|e| !e.is_empty()) {
        return None;
    }
    let [field] = term.match_fields.as_deref()? else { return None };
    if field.key != "metadata.name" || field.operator != "In" {
        return None;
    }
    match field.values.as_deref()? {
        [node] => Some(node),
        _ => None,
    }
}

fn allocation_of(
    claim: Option<&k8s_openapi::api::resource::v1::ResourceClaim>,
) -> Option<&k8s_openapi::api::resource::v1::AllocationResult> {
    claim?.status.as_ref()?.allocation.as_ref()
}
