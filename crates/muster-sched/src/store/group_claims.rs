//! PodGroup claims (KEP 5729) one change at a time. A pod's `spec.resourceClaims` entry identical
//! to one of its PodGroup's (same name, claim and template) is the group's claim: the claim by
//! name, or the one the claim controller made from the template once for the group and recorded
//! in the PodGroup's `status.resourceClaimStatuses` (and in each member's). Until it is recorded
//! and in the store, the members wait, and their PreFilter says for what. A change to the
//! PodGroup (its status naming the claim, members joining it) resolves its members' claims again.

use k8s_openapi::api::core::v1::{PodResourceClaim, PodResourceClaimStatus};

use super::{Applied, Cluster, PodState};
use crate::cluster::{GroupId, Unresolved};

impl Cluster {
    /// Whether `entry` of a member's `spec.resourceClaims` is one of group `g`'s entries.
    pub(super) fn is_group_entry(&self, g: GroupId, entry: &PodResourceClaim) -> bool {
        crate::cluster::group_entry(&self.groups[g].group, entry).is_some()
    }

    /// The name of the group's claim for `entry`: the entry's own, else the one the group's
    /// status records, else the one the member's status records.
    pub(super) fn group_claim_name(
        &self,
        g: GroupId,
        entry: &PodResourceClaim,
        member_statuses: &[PodResourceClaimStatus],
    ) -> Result<String, Unresolved> {
        if let Some(name) = &entry.resource_claim_name {
            return Ok(name.clone());
        }
        let group = &self.groups[g].group;
        let recorded = group.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref()).into_iter().flatten();
        recorded
            .filter(|s| s.name == entry.name)
            .find_map(|s| s.resource_claim_name.clone())
            .or_else(|| {
                member_statuses.iter().filter(|s| s.name == entry.name).find_map(|s| s.resource_claim_name.clone())
            })
            .ok_or_else(|| Unresolved::WaitingForGroupClaim {
                entry: entry.name.clone(),
                template: entry.resource_claim_template_name.clone().unwrap_or_default(),
            })
    }

    /// Group `g` was added or changed: where it has claims, its members resolve theirs again, and
    /// a pending member whose claims resolve otherwise now is queued.
    pub(super) fn group_claims_changed(&mut self, g: GroupId, applied: &mut Applied) {
        if self.groups[g].group.spec.resource_claims.as_ref().is_none_or(|c| c.is_empty()) {
            return;
        }
        for member in self.groups[g].members.clone() {
            let before = self.pods[member.0 as usize].claims.clone();
            self.resolve_claims(member);
            let pod = &self.pods[member.0 as usize];
            if pod.claims != before && pod.state == PodState::Pending {
                let entry = self.entry_of(member);
                if !applied.queue.contains(&entry) {
                    applied.queue.push(entry);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::resource::v1::ResourceClaim;
    use k8s_openapi::api::scheduling::v1beta1::PodGroup;
    use serde_json::json;

    use crate::cluster::{ClaimId, GroupId};
    use crate::cycle::QueueEntry;
    use crate::{Change, Cluster, SchedulerNames};

    fn group(recorded: Option<&str>) -> Change {
        let status = recorded.map(|n| json!({"resourceClaimStatuses": [{"name": "fabric", "resourceClaimName": n}]}));
        let g: PodGroup = serde_json::from_value(json!({
            "metadata": {"name": "pg", "namespace": "ml", "uid": "pg-uid"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                     "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": "imex"}]},
            "status": status,
        }))
        .unwrap();
        Change::UpsertPodGroup(Box::new(g))
    }

    fn member(i: usize) -> Change {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("m{i}"), "namespace": "ml"},
            "spec": {"schedulingGroup": {"podGroupName": "pg"},
                     "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": "imex"},
                                        {"name": "own", "resourceClaimTemplateName": "imex"}],
                     "containers": [{"name": "c", "resources": {"claims": [{"name": "fabric"}, {"name": "own"}]}}]}
        }))
        .unwrap();
        Change::UpsertPod(Box::new(p))
    }

    fn claim(name: &str) -> Change {
        let c: ResourceClaim = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "channel", "exactly": {"deviceClassName": "imex"}}]}}
        }))
        .unwrap();
        Change::UpsertClaim(Box::new(c))
    }

    fn claims_of(c: &Cluster, pod: u32) -> Vec<Result<ClaimId, String>> {
        c.pods[pod as usize].claims.iter().map(|r| r.clone().map_err(|e| e.to_string())).collect()
    }

    #[test]
    fn members_wait_for_the_group_claim_until_the_group_records_it_and_it_exists() {
        let mut c =
            Cluster::build(Vec::new(), Vec::<crate::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
        c.apply(group(None)).unwrap();
        c.apply(member(0)).unwrap();
        let claims = claims_of(&c, 0);
        assert!(claims[0].as_ref().unwrap_err().contains("podgroup claim fabric"), "{claims:?}");
        // The entry that differs from the group's is the pod's own.
        assert!(claims[1].as_ref().unwrap_err().contains("of pod claim own"), "{claims:?}");

        // The controller's claim alone is not enough: the group's status names it.
        c.apply(claim("pg-fabric-x1")).unwrap();
        assert!(claims_of(&c, 0)[0].is_err());
        let applied = c.apply(group(Some("pg-fabric-x1"))).unwrap();
        let shared = ClaimId(0);
        assert_eq!(claims_of(&c, 0)[0], Ok(shared));
        assert_eq!(c.claims[shared].group, Some(GroupId(0)), "reserved for the group");
        assert!(applied.queue.contains(&QueueEntry::Group(GroupId(0))), "{applied:?}");

        // A member that comes later takes the same claim at once; the status echoed again
        // changes nothing.
        c.apply(member(1)).unwrap();
        assert_eq!(claims_of(&c, 1)[0], Ok(shared));
        let before = (claims_of(&c, 0), claims_of(&c, 1));
        c.apply(group(Some("pg-fabric-x1"))).unwrap();
        assert_eq!((claims_of(&c, 0), claims_of(&c, 1)), before);
    }

    #[test]
    fn a_recorded_claim_that_comes_later_is_resolved_when_it_arrives() {
        let mut c =
            Cluster::build(Vec::new(), Vec::<crate::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
        c.apply(member(0)).unwrap(); // before its group: waits for it
        c.apply(group(Some("pg-fabric-x1"))).unwrap();
        assert!(claims_of(&c, 0)[0].as_ref().unwrap_err().contains("not found"));
        c.apply(claim("pg-fabric-x1")).unwrap();
        let shared = claims_of(&c, 0)[0].clone().unwrap();
        assert_eq!(c.claims[shared].group, Some(GroupId(0)));
    }
}
