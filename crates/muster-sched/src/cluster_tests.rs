//! What `PodInfo` keeps of a pod's spec so the cycle need not read it again.

use super::*;
use crate::plugins::pod_topology_spread::{DefaultingType, PodTopologySpreadArgs, may_filter};
use serde_json::json;

fn cluster(pods: serde_json::Value, classes: serde_json::Value) -> Cluster {
    let pods: Vec<Box<k8s_openapi::api::core::v1::Pod>> = serde_json::from_value(pods).unwrap();
    let classes: Vec<PriorityClass> = serde_json::from_value(classes).unwrap();
    Cluster::build(Vec::new(), pods, &classes, &SchedulerNames::default()).unwrap()
}

fn pod(name: &str, spec: serde_json::Value) -> serde_json::Value {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c"}]);
    json!({"metadata": {"name": name, "namespace": "ns"}, "spec": spec})
}

/// The pod's own `preemptionPolicy` wins; without one, its PriorityClass's; without either, it
/// may preempt — as `never_preempts` reads the spec.
#[test]
fn a_pods_preemption_policy_is_kept_and_read_as_the_spec_says() {
    let polite = json!([{"metadata": {"name": "polite"}, "value": 5, "preemptionPolicy": "Never"}]);
    let pods = json!([
        pod("a-own-never", json!({"preemptionPolicy": "Never"})),
        pod("b-own-lower", json!({"preemptionPolicy": "PreemptLowerPriority", "priorityClassName": "polite"})),
        pod("c-class-never", json!({"priorityClassName": "polite"})),
        pod("d-neither", json!({})),
    ]);
    let plain = json!([{"metadata": {"name": "polite"}, "value": 5}]);
    for (classes, expected) in [(polite, [true, false, true, false]), (plain, [true, false, false, false])] {
        let c = cluster(pods.clone(), classes);
        let got: Vec<bool> = c.pods.iter().map(|p| c.pod_never_preempts(p)).collect();
        assert_eq!(got, expected);
        let from_spec: Vec<bool> = c
            .pods
            .iter()
            .map(|p| {
                let s = p.pod.spec();
                c.never_preempts(
                    s.and_then(|s| s.preemption_policy.as_deref()),
                    s.and_then(|s| s.priority_class_name.as_deref()),
                )
            })
            .collect();
        assert_eq!(got, from_spec);
    }
}

/// `spread_hard` is the pod's own constraints' answer, `None` when it has none; `may_filter`
/// reads it, and the plugin's defaults where the pod has no constraints of its own.
#[test]
fn a_pods_own_spread_constraints_are_kept() {
    let constraint =
        |when: &str| json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": when, "labelSelector": {}});
    let pods = json!([
        pod(
            "a-hard",
            json!({"topologySpreadConstraints": [constraint("ScheduleAnyway"), constraint("DoNotSchedule")]})
        ),
        pod("b-soft", json!({"topologySpreadConstraints": [constraint("ScheduleAnyway")]})),
        pod("c-none", json!({"topologySpreadConstraints": []})),
        pod("d-unset", json!({})),
    ]);
    let c = cluster(pods, json!([]));
    let kept: Vec<Option<bool>> = c.pods.iter().map(|p| p.spread_hard).collect();
    assert_eq!(kept, [Some(true), Some(false), None, None]);
    let hard_defaults = PodTopologySpreadArgs {
        default_constraints: vec![serde_json::from_value(constraint("DoNotSchedule")).unwrap()],
        defaulting_type: DefaultingType::List,
    };
    // The system defaults are ScheduleAnyway: only the pod's own hard constraint may filter.
    for (args, expected) in
        [(PodTopologySpreadArgs::default(), [true, false, false, false]), (hard_defaults, [true, false, true, true])]
    {
        let got: Vec<bool> = c.pods.iter().map(|p| may_filter(p, &args)).collect();
        assert_eq!(got, expected);
    }
}

/// A claim's fingerprint is the stable hash of its spec's JSON, hashed as it is written: the
/// same value as hashing the JSON text, and pinned (it is stable across machines).
#[test]
fn a_claim_fingerprint_is_the_stable_hash_of_its_spec_json() {
    let claim: k8s_openapi::api::resource::v1::ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2,
            "selectors": [{"cel": {"expression": "device.attributes[\"x\"].model == \"H100\""}}]}}]}}
    }))
    .unwrap();
    let text = serde_json::to_string(&claim.spec).unwrap();
    assert_eq!(fingerprint(&claim), stable_hash(&[&text]));
    assert_eq!(stable_hash(&[]), 0xcbf2_9ce4_8422_2325);
    assert_eq!(stable_hash(&["a", "b"]), 0xd2b3_7181_9297_f98a, "FNV-1a over a, 0xff, b, 0xff");
    assert_ne!(stable_hash(&["ab"]), stable_hash(&["a", "b"]), "parts are separated");
}
