//! The resourceclaim controller (kube-controller-manager's `resourceclaim` controller), for the
//! worlds that have no kube-controller-manager (`sim`, and the engine's tests): a pod's claim
//! entry that names a ResourceClaimTemplate becomes a ResourceClaim owned by the pod, named as
//! the controller names it (`<pod>-<entry>-<suffix>`, [`muster_sched::cluster::generate_claim`]),
//! and recorded in the pod's `status.resourceClaimStatuses`; a claim's `reservedFor` loses the
//! pods that are gone or done, and with no consumer left its allocation is cleared; a claim made
//! for a pod that is gone or done is deleted.
//!
//! `plan` does not need it: the snapshot generates the claims of pending pods when it is built.

use k8s_openapi::api::core::v1::{Pod, PodResourceClaimStatus, PodStatus};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use muster_api::PodObject;

/// What the controller does about one claim.
#[derive(Clone, Debug, PartialEq)]
pub enum Release {
    /// The claim with its consumers pruned (and its allocation cleared when none is left).
    Update(Box<ResourceClaim>),
    /// The claim was made for a pod that is gone or done: delete it (`namespace/name`).
    Delete(String),
}

/// Whether a pod holds what it reserved: it exists and has not terminated.
fn done(pod: &(impl PodObject + ?Sized)) -> bool {
    matches!(pod.status().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// The claims to create for `pod`'s template entries that its status does not name yet, and the
/// pod with its status naming them; `None` when there is nothing to do (no template entry left,
/// the pod is done, or a template is missing — the pod then waits for it). A template is looked
/// up by name in the pod's namespace.
/// Entries identical to one of `group`'s (the pod's PodGroup) are the group's claims
/// ([`crate::group_claims`]), made once for the group, not here.
pub fn claims_for(
    pod: &Pod,
    templates: &[ResourceClaimTemplate],
    group: Option<&k8s_openapi::api::scheduling::v1beta1::PodGroup>,
) -> Option<(Vec<ResourceClaim>, Box<Pod>)> {
    if done(pod) {
        return None;
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let recorded = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    let mut claims = Vec::new();
    let mut updated = Box::new(pod.clone());
    for entry in pod.spec.as_ref()?.resource_claims.iter().flatten() {
        let Some(template) = entry.resource_claim_template_name.as_deref() else { continue };
        if recorded.is_some_and(|r| r.iter().any(|s| s.name == entry.name))
            || group.is_some_and(|g| crate::group_claims::is_shared(g, entry))
        {
            continue;
        }
        let t = muster_sched::cluster::find_template(templates, ns, template)?;
        let claim = muster_sched::cluster::generate_claim(pod, name, ns, &entry.name, t);
        let status = updated.status.get_or_insert_with(PodStatus::default);
        status.resource_claim_statuses.get_or_insert_with(Vec::new).push(PodResourceClaimStatus {
            name: entry.name.clone(),
            resource_claim_name: claim.metadata.name.clone(),
        });
        claims.push(claim);
    }
    (!claims.is_empty()).then_some((claims, updated))
}

/// What the controller does about `claim`, given the pods that exist (`pod(name)` in the claim's
/// namespace); `None` when nothing changes. Consumers other than pods are kept.
pub fn release<'p, P: PodObject + ?Sized + 'p>(
    claim: &ResourceClaim,
    pod: impl Fn(&str) -> Option<&'p P>,
) -> Option<Release> {
    release_consumers(claim, pod, |_| true)
}

/// [`release`], with PodGroup consumers too: `group(name)` says whether the PodGroup of that name
/// exists in the claim's namespace. A claim a gone PodGroup owns (one made from its template) is
/// deleted, as the garbage collector does; a gone PodGroup's `reservedFor` entry is dropped.
pub fn release_consumers<'p, P: PodObject + ?Sized + 'p>(
    claim: &ResourceClaim,
    pod: impl Fn(&str) -> Option<&'p P>,
    group: impl Fn(&str) -> bool,
) -> Option<Release> {
    let holds = |name: &str, uid: &str| {
        pod(name).is_some_and(|p| !done(p) && p.meta().uid.as_deref().is_none_or(|u| u.is_empty() || u == uid))
    };
    // A claim made for a pod or a PodGroup (its controller owner) that is gone or done goes with it.
    let owner = claim.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
    let gone = owner.is_some_and(|o| match o.kind.as_str() {
        "Pod" => !holds(&o.name, &o.uid),
        "PodGroup" => !group(&o.name),
        _ => false,
    });
    if gone {
        let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
        return Some(Release::Delete(muster_api::key::namespaced(
            ns,
            claim.metadata.name.as_deref().unwrap_or_default(),
        )));
    }
    let status = claim.status.as_ref()?;
    let reserved = status.reserved_for.as_deref().unwrap_or_default();
    let consumer = |r: &&k8s_openapi::api::resource::v1::ResourceClaimConsumerReference| match r.resource.as_str() {
        "pods" => holds(&r.name, &r.uid),
        "podgroups" => group(&r.name),
        _ => true,
    };
    let kept: Vec<_> = reserved.iter().filter(consumer).cloned().collect();
    let deallocate = kept.is_empty() && status.allocation.is_some();
    if kept.len() == reserved.len() && !deallocate {
        return None;
    }
    let mut updated = Box::new(claim.clone());
    let status = updated.status.as_mut().expect("checked above");
    status.reserved_for = (!kept.is_empty()).then_some(kept);
    if deallocate {
        status.allocation = None;
        status.devices = None;
    }
    Some(Release::Update(updated))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}")},
            "spec": {"containers": [{"name": "c"}], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]},
            "status": {"phase": phase}}))
        .unwrap()
    }

    fn template() -> ResourceClaimTemplate {
        serde_json::from_value(json!({"metadata": {"name": "one-gpu", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}))
        .unwrap()
    }

    #[test]
    fn a_template_entry_becomes_a_claim_owned_by_the_pod_and_recorded_once() {
        let (claims, updated) = claims_for(&pod("w", "Pending"), &[template()], None).unwrap();
        let name = claims[0].metadata.name.clone().unwrap();
        assert!(name.starts_with("w-gpu-") && name.len() == "w-gpu-".len() + 5, "{name}");
        assert_eq!(claims[0].metadata.owner_references.as_ref().unwrap()[0].uid, "u-w");
        let statuses = updated.status.as_ref().unwrap().resource_claim_statuses.as_ref().unwrap();
        assert_eq!(statuses[0].resource_claim_name.as_deref(), Some(name.as_str()));
        assert_eq!(claims_for(&updated, &[template()], None), None, "recorded: not created again");
        assert_eq!(claims_for(&pod("w", "Succeeded"), &[template()], None), None);
        assert_eq!(claims_for(&pod("w", "Pending"), &[], None), None, "the template is missing: the pod waits");
    }

    #[test]
    fn consumers_that_are_gone_are_pruned_and_the_last_one_deallocates() {
        let claim: ResourceClaim = serde_json::from_value(json!({"metadata": {"name": "shared", "namespace": "ml"},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": []}},
                       "reservedFor": [{"resource": "pods", "name": "a", "uid": "u-a"}, {"resource": "pods", "name": "b", "uid": "u-b"}]}}))
        .unwrap();
        let (a, b_done) = (pod("a", "Running"), pod("b", "Succeeded"));
        let both = |n: &str| [&a, &b_done].into_iter().find(|p| p.metadata.name.as_deref() == Some(n));
        let Some(Release::Update(pruned)) = release(&claim, both) else { panic!("b is done") };
        let status = pruned.status.as_ref().unwrap();
        assert_eq!(status.reserved_for.as_ref().unwrap().len(), 1);
        assert!(status.allocation.is_some(), "a still holds it");
        assert_eq!(release(&pruned, both), None, "nothing more to do");
        let Some(Release::Update(free)) = release(&pruned, |_| None::<&Pod>) else { panic!("a is gone") };
        assert!(
            free.status.as_ref().unwrap().allocation.is_none() && free.status.as_ref().unwrap().reserved_for.is_none()
        );
    }

    #[test]
    fn a_claim_made_for_a_pod_that_is_done_is_deleted() {
        let (claims, _) = claims_for(&pod("w", "Pending"), &[template()], None).unwrap();
        let done = pod("w", "Succeeded");
        let name = claims[0].metadata.name.clone().unwrap();
        assert_eq!(release(&claims[0], |_| Some(&done)), Some(Release::Delete(format!("ml/{name}"))));
        let running = pod("w", "Running");
        assert_eq!(release(&claims[0], |_| Some(&running)), None);
    }

    #[test]
    fn a_pod_group_that_is_gone_releases_its_claims() {
        let shared: ResourceClaim = serde_json::from_value(json!({"metadata": {"name": "shared", "namespace": "ml"},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": []}},
                       "reservedFor": [{"resource": "podgroups", "name": "g", "uid": "u-g"}]}}))
        .unwrap();
        // Kept by release (it reads pods only) and while the group exists.
        assert_eq!(release(&shared, |_| None::<&Pod>), None);
        assert_eq!(release_consumers(&shared, |_| None::<&Pod>, |g| g == "g"), None);
        let Some(Release::Update(free)) = release_consumers(&shared, |_| None::<&Pod>, |_| false) else {
            panic!("g is gone")
        };
        let status = free.status.as_ref().unwrap();
        assert!(status.allocation.is_none() && status.reserved_for.is_none());
        // A claim the group owns (made from its template) goes with it.
        let mut owned = shared.clone();
        owned.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({"apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup", "name": "g", "uid": "u-g", "controller": true}))
            .unwrap(),
        ]);
        assert_eq!(release_consumers(&owned, |_| None::<&Pod>, |_| false), Some(Release::Delete("ml/shared".into())));
        assert_eq!(release(&owned, |_| None::<&Pod>), None, "release takes every PodGroup as there");
    }
}
