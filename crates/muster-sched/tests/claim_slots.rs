//! Claim slots: a store that runs for months sees claims come and go by the hundred thousand
//! (one per pod from a template). A deleted claim gives its slot back once no live pod names
//! it, and a new claim reuses it, so the store holds as many claims as exist and are in use; a
//! claim deleted while a pod still names it keeps its slot until that pod goes.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use muster_sched::{Change, Cluster, SchedulerNames};
use serde_json::json;

fn empty() -> Cluster {
    Cluster::build(Vec::new(), Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap()
}

fn claim(name: &str) -> Change {
    let c: ResourceClaim = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}]}}}))
    .unwrap();
    Change::UpsertClaim(Box::new(c))
}

fn pod(name: &str, claim: &str) -> Change {
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                 "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]}}))
    .unwrap();
    Change::UpsertPod(Box::new(p))
}

fn apply(c: &mut Cluster, change: Change) {
    c.apply(change).unwrap();
    c.claim_users_agree().unwrap();
}

/// The claim slot pod `key` resolved, by the claim's name.
fn resolved(c: &Cluster, key: &str) -> Result<String, String> {
    let id = c.pod_id(key).unwrap();
    match &c.pod(id).claims[0] {
        Ok(claim) => Ok(c.claims[*claim].key()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn claims_that_come_and_go_with_their_pods_reuse_two_slots() {
    let mut c = empty();
    for i in 0..1_000 {
        let name = format!("job-{i}-gpu");
        apply(&mut c, claim(&name));
        apply(&mut c, pod(&format!("job-{i}"), &name));
        assert_eq!(resolved(&c, &format!("ml/job-{i}")), Ok(format!("ml/{name}")));
        apply(&mut c, Change::DeletePod(format!("ml/job-{i}")));
        apply(&mut c, Change::DeleteClaim(format!("ml/{name}")));
    }
    assert_eq!(c.claims.len(), 1, "each claim took the slot the one before it gave back");
}

#[test]
fn a_deleted_claim_a_pod_still_names_keeps_its_slot_until_the_pod_goes() {
    let mut c = empty();
    apply(&mut c, claim("a"));
    apply(&mut c, pod("p", "a"));
    apply(&mut c, Change::DeleteClaim("ml/a".into()));
    // A new claim does not take the slot pod p still names.
    apply(&mut c, claim("b"));
    apply(&mut c, pod("q", "b"));
    assert_eq!(c.claims.len(), 2);
    assert_eq!(resolved(&c, "ml/p"), Ok("ml/a".into()), "the pod keeps the claim it resolved");
    assert_eq!(resolved(&c, "ml/q"), Ok("ml/b".into()));
    // Once p is gone, the slot is vacant and the next claim reuses it.
    apply(&mut c, Change::DeletePod("ml/p".into()));
    apply(&mut c, claim("c"));
    assert_eq!(c.claims.len(), 2);
    apply(&mut c, pod("r", "c"));
    assert_eq!(resolved(&c, "ml/r"), Ok("ml/c".into()));
    assert_eq!(resolved(&c, "ml/q"), Ok("ml/b".into()), "the claim in use stays where it was");
}

#[test]
fn a_pod_waiting_for_a_claim_resolves_it_in_a_reused_slot() {
    let mut c = empty();
    apply(&mut c, claim("old"));
    apply(&mut c, Change::DeleteClaim("ml/old".into()));
    apply(&mut c, pod("p", "new"));
    assert_eq!(resolved(&c, "ml/p"), Err("resourceclaim \"new\" not found".into()));
    apply(&mut c, claim("new"));
    assert_eq!(resolved(&c, "ml/p"), Ok("ml/new".into()));
    assert_eq!(c.claims.len(), 1);
}
