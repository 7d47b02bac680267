//! Plans with DRA claims over random clusters: what never happens.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use muster_sched::{Cluster, DraContext, Scheduler, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::json;

fn build(node_devices: &[u8], shared: u8, pods: &[(u8, bool)]) -> (Vec<Node>, Vec<ResourceSlice>, Vec<Box<Pod>>) {
    let nodes: Vec<Node> = (0..node_devices.len())
        .map(|i| {
            serde_json::from_value(json!({"metadata": {"name": format!("n{i}")},
                "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}}))
            .unwrap()
        })
        .collect();
    let mut slices: Vec<ResourceSlice> = node_devices
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let devices: Vec<_> = (0..*n)
                .map(|d| json!({"name": format!("gpu-{d}"), "attributes": {"kind": {"string": "gpu"}}}))
                .collect();
            serde_json::from_value(json!({"metadata": {"name": format!("n{i}-gpus")},
                "spec": {"driver": "gpu.example.com", "nodeName": format!("n{i}"), "devices": devices,
                         "pool": {"name": format!("n{i}"), "generation": 1, "resourceSliceCount": 1}}}))
            .unwrap()
        })
        .collect();
    // A pool every node can use (network-attached devices).
    let devices: Vec<_> =
        (0..shared).map(|d| json!({"name": format!("nic-{d}"), "attributes": {"kind": {"string": "nic"}}})).collect();
    slices.push(
        serde_json::from_value(json!({"metadata": {"name": "fabric"},
            "spec": {"driver": "gpu.example.com", "allNodes": true, "devices": devices,
                     "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1}}}))
        .unwrap(),
    );
    let pods = pods
        .iter()
        .enumerate()
        .map(|(i, (gpus, nic))| {
            let mut claims = vec![json!({"name": "gpus", "resourceClaimTemplateName": format!("gpus-{gpus}")})];
            if *nic {
                claims.push(json!({"name": "nic", "resourceClaimTemplateName": "nic"}));
            }
            Box::new(
                serde_json::from_value(json!({"metadata": {"name": format!("p{i:02}"), "namespace": "ml"},
                    "spec": {"resourceClaims": claims, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}))
                .unwrap(),
            )
        })
        .collect();
    (nodes, slices, pods)
}

fn classes() -> Vec<DeviceClass> {
    ["gpu", "nic"]
        .iter()
        .map(|k| {
            serde_json::from_value(json!({"metadata": {"name": k},
                "spec": {"selectors": [{"cel": {"expression": format!("device.attributes['gpu.example.com'].kind == '{k}'")}}]}}))
            .unwrap()
        })
        .collect()
}

fn templates() -> Vec<ResourceClaimTemplate> {
    let mut t: Vec<ResourceClaimTemplate> = (1..=3)
        .map(|n| {
            serde_json::from_value(json!({"metadata": {"name": format!("gpus-{n}"), "namespace": "ml"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": n}}]}}}}))
            .unwrap()
        })
        .collect();
    t.push(
        serde_json::from_value(json!({"metadata": {"name": "nic", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic", "count": 1}}]}}}}))
        .unwrap(),
    );
    t
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn no_device_twice_and_memo_changes_nothing(
        node_devices in prop::collection::vec(0u8..5, 1..5),
        shared in 0u8..4,
        pods in prop::collection::vec((1u8..4, prop::bool::weighted(0.3)), 0..12),
    ) {
        let (classes, templates) = (classes(), templates());
        let run = |memo: bool| {
            let (nodes, slices, pod_objs) = build(&node_devices, shared, &pods);
            let mut cluster = Cluster::build(nodes, pod_objs, &[], &SchedulerNames::default()).unwrap();
            cluster.add_claims(Vec::new(), &templates);
            let ctx = DraContext {
                index: muster_alloc::SliceIndex::new(&slices),
                classes: &classes,
                env: muster_cel::Env::default(),
                features: muster_alloc::Features::kubernetes_1_37(),
            };
            let mut s = Scheduler::with_dra(&mut cluster, SchedulerConfig::default(), &ctx);
            if !memo {
                s = s.without_dra_memo();
            }
            let plan = s.plan();
            let placements: Vec<(String, String)> = plan
                .placements
                .iter()
                .map(|(p, n)| (cluster.pod(*p).key.clone(), cluster.node(*n).name().to_string()))
                .collect();
            let claims: Vec<(String, String)> = cluster
                .claims
                .iter()
                .map(|c| (c.key(), serde_json::to_string(&c.claim.status).unwrap()))
                .collect();
            let mut seen = HashSet::new();
            let mut twice = Vec::new();
            for c in &cluster.claims {
                for r in c.claim.status.iter().flat_map(|s| s.allocation.iter()).flat_map(|a| a.devices.iter()).flat_map(|d| d.results.iter().flatten()) {
                    if !seen.insert((r.pool.clone(), r.device.clone())) {
                        twice.push(format!("{}/{}", r.pool, r.device));
                    }
                }
            }
            // Every placed pod's claims are allocated.
            let unallocated: Vec<String> = plan.placements.iter().flat_map(|(p, _)| cluster.pod(*p).claims.clone())
                .flatten()
                .filter(|c| cluster.claims[*c].claim.status.as_ref().and_then(|s| s.allocation.as_ref()).is_none())
                .map(|c| cluster.claims[c].key())
                .collect();
            (placements, claims, twice, unallocated)
        };
        let with_memo = run(true);
        prop_assert!(with_memo.2.is_empty(), "devices allocated twice: {:?}", with_memo.2);
        prop_assert!(with_memo.3.is_empty(), "placed pods with unallocated claims: {:?}", with_memo.3);
        let without = run(false);
        prop_assert_eq!(&with_memo.0, &without.0, "reusing verdicts changed a placement");
        prop_assert_eq!(&with_memo.1, &without.1, "reusing verdicts changed an allocation");
    }
}
