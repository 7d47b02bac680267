//! The resourceclaim controller's part for PodGroup claims (KEP 5729), for worlds without a
//! kube-controller-manager: each template entry of a PodGroup's `spec.resourceClaims` becomes one
//! ResourceClaim for the whole group (owned by the PodGroup, named from it and the entry,
//! [`muster_sched::cluster::generate_group_claim`]), recorded in the PodGroup's
//! `status.resourceClaimStatuses` and in each member's (so that a kubelet never needs the
//! PodGroup). A member's entry identical to the group's (same name, claim and template) is the
//! group's claim, never one of its own. When the PodGroup is deleted,
//! [`crate::resourceclaim::release_consumers`] deletes the claims it owns and releases those
//! reserved for it.

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim, PodResourceClaimStatus, PodStatus};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::api::scheduling::v1beta1::{PodGroup, PodGroupResourceClaimStatus, PodGroupStatus};

/// Whether a member's `spec.resourceClaims` entry is one of the group's.
pub fn is_shared(group: &PodGroup, entry: &PodResourceClaim) -> bool {
    muster_sched::cluster::group_entry(group, entry).is_some()
}

/// The claims to create for the group's template entries its status does not record yet, and
/// the group with its status recording them; `None` when there is nothing to do (or a template
/// is missing: the group waits for it).
pub fn claims_for_group(
    group: &PodGroup,
    templates: &[ResourceClaimTemplate],
) -> Option<(Vec<ResourceClaim>, Box<PodGroup>)> {
    let ns = group.metadata.namespace.as_deref().unwrap_or("default");
    let recorded = |name: &str| {
        group.status.iter().flat_map(|s| s.resource_claim_statuses.iter().flatten()).any(|s| s.name == name)
    };
    let mut claims = Vec::new();
    let mut updated = Box::new(group.clone());
    for entry in group.spec.resource_claims.iter().flatten() {
        let Some(template) = entry.resource_claim_template_name.as_deref() else { continue };
        if recorded(&entry.name) {
            continue;
        }
        let t = muster_sched::cluster::find_template(templates, ns, template)?;
        let claim = muster_sched::cluster::generate_group_claim(group, &entry.name, t);
        let status = updated.status.get_or_insert_with(PodGroupStatus::default);
        status.resource_claim_statuses.get_or_insert_with(Vec::new).push(PodGroupResourceClaimStatus {
            name: entry.name.clone(),
            resource_claim_name: claim.metadata.name.clone(),
        });
        claims.push(claim);
    }
    (!claims.is_empty()).then_some((claims, updated))
}

/// The member with the group's recorded claims added to its `status.resourceClaimStatuses`
/// (its shared template entries not recorded yet); `None` when nothing changes.
pub fn member_status(pod: &Pod, group: &PodGroup) -> Option<Box<Pod>> {
    let recorded = group.status.as_ref()?.resource_claim_statuses.as_ref()?;
    let mut updated = Box::new(pod.clone());
    let mut changed = false;
    for entry in pod.spec.as_ref()?.resource_claims.iter().flatten() {
        if entry.resource_claim_template_name.is_none() || !is_shared(group, entry) {
            continue;
        }
        let Some(name) = recorded.iter().find(|r| r.name == entry.name).and_then(|r| r.resource_claim_name.clone())
        else {
            continue;
        };
        let list =
            updated.status.get_or_insert_with(PodStatus::default).resource_claim_statuses.get_or_insert_with(Vec::new);
        if !list.iter().any(|s| s.name == entry.name) {
            list.push(PodResourceClaimStatus { name: entry.name.clone(), resource_claim_name: Some(name) });
            changed = true;
        }
    }
    changed.then_some(updated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group() -> PodGroup {
        serde_json::from_value(json!({"metadata": {"name": "pg", "namespace": "ml", "uid": "u-pg"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                     "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": "imex"}]}}))
        .unwrap()
    }

    fn template() -> ResourceClaimTemplate {
        serde_json::from_value(json!({"metadata": {"name": "imex", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [{"name": "ch", "exactly": {"deviceClassName": "imex"}}]}}}}))
        .unwrap()
    }

    fn member() -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "m0", "namespace": "ml"},
            "spec": {"schedulingGroup": {"podGroupName": "pg"}, "containers": [{"name": "c"}],
                     "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": "imex"},
                                        {"name": "fabric2", "resourceClaimTemplateName": "imex"}]}}))
        .unwrap()
    }

    #[test]
    fn one_claim_per_group_entry_owned_by_the_group_and_recorded_once() {
        let (claims, updated) = claims_for_group(&group(), &[template()]).unwrap();
        assert_eq!(claims.len(), 1);
        let owner = &claims[0].metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("PodGroup", "pg", "u-pg"));
        let recorded = updated.status.as_ref().unwrap().resource_claim_statuses.as_ref().unwrap();
        assert_eq!(recorded[0].resource_claim_name, claims[0].metadata.name);
        assert_eq!(claims_for_group(&updated, &[template()]), None, "recorded: not created again");
        assert_eq!(claims_for_group(&group(), &[]), None, "the template is missing: the group waits");

        // The member records the group's claim for its identical entry only.
        let pod = member_status(&member(), &updated).unwrap();
        let statuses = pod.status.unwrap().resource_claim_statuses.unwrap();
        assert_eq!(statuses.len(), 1);
        assert_eq!((statuses[0].name.as_str(), &statuses[0].resource_claim_name), ("fabric", &claims[0].metadata.name));
        assert_eq!(member_status(&member(), &group()), None, "nothing recorded yet");
    }
}
