//! Plans with DRA claims over random clusters: what never happens.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use muster_sched::{Cluster, DraContext, Scheduler, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::json;

/// Nodes: (GPUs in the node's ResourceSlice, GPUs its device plugin advertises as
/// `example.com/gpu`). Pods: (GPUs from a template claim (0 = none), a NIC claim, GPUs asked as
/// the extended resource `example.com/gpu`).
fn build(
    node_devices: &[(u8, u8)],
    shared: u8,
    pods: &[(u8, bool, u8)],
) -> (Vec<Node>, Vec<ResourceSlice>, Vec<Box<Pod>>) {
    let nodes: Vec<Node> = node_devices
        .iter()
        .enumerate()
        .map(|(i, (_, plugin))| {
            let mut allocatable = json!({"cpu": "64", "memory": "256Gi", "pods": "110"});
            if *plugin > 0 {
                allocatable["example.com/gpu"] = json!(plugin.to_string());
            }
            serde_json::from_value(
                json!({"metadata": {"name": format!("n{i}")}, "status": {"allocatable": allocatable}}),
            )
            .unwrap()
        })
        .collect();
    let mut slices: Vec<ResourceSlice> = node_devices
        .iter()
        .enumerate()
        .map(|(i, (n, _))| {
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
        .map(|(i, (gpus, nic, extended))| {
            let mut claims = Vec::new();
            if *gpus > 0 {
                claims.push(json!({"name": "gpus", "resourceClaimTemplateName": format!("gpus-{gpus}")}));
            }
            if *nic {
                claims.push(json!({"name": "nic", "resourceClaimTemplateName": "nic"}));
            }
            let mut resources = json!({"requests": {"cpu": "1"}});
            if *extended > 0 {
                resources["limits"] = json!({"example.com/gpu": extended.to_string()});
            }
            Box::new(
                serde_json::from_value(json!({"metadata": {"name": format!("p{i:02}"), "namespace": "ml"},
                    "spec": {"resourceClaims": claims, "containers": [{"name": "c", "resources": resources}]}}))
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
            let mut spec = json!({"selectors": [{"cel": {"expression": format!("device.attributes['gpu.example.com'].kind == '{k}'")}}]});
            if *k == "gpu" {
                spec["extendedResourceName"] = json!("example.com/gpu");
            }
            serde_json::from_value(json!({"metadata": {"name": k}, "spec": spec}))
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
        node_devices in prop::collection::vec((0u8..5, prop::sample::select(vec![0u8, 0, 2])), 1..5),
        shared in 0u8..4,
        pods in prop::collection::vec((0u8..4, prop::bool::weighted(0.3), prop::sample::select(vec![0u8, 0, 1, 2])), 0..12),
    ) {
        let (classes, templates) = (classes(), templates());
        let run = |memo: bool| {
            let (nodes, slices, pod_objs) = build(&node_devices, shared, &pods);
            let mut cluster = Cluster::build(nodes, pod_objs, &[], &SchedulerNames::default()).unwrap();
            cluster.add_claims(Vec::new(), &templates);
            cluster.map_extended_resources(&classes);
            let ctx = DraContext {
                index: muster_alloc::SliceIndex::new(slices.clone()),
                classes: classes.clone(),
                env: muster_cel::Env::default(),
                features: muster_alloc::Features::kubernetes_1_37(),
            };
            let mut s = Scheduler::with_dra(&mut cluster, SchedulerConfig::default(), &ctx);
            if !memo {
                s = s.without_dra_memo().without_verdict_reuse();
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
            // A pod asking `example.com/gpu` got exactly that many devices through its special
            // claim on a node without the device plugin, and none on a node with it, where the
            // plugin's GPUs are not overcommitted.
            let mut extended_wrong = Vec::new();
            for (p, n) in &plan.placements {
                let (pod, node) = (cluster.pod(*p), cluster.node(*n));
                let want = pods[p.0 as usize].2 as usize;
                let special: usize = pod.claims.iter().flatten().map(|c| &cluster.claims[*c].claim)
                    .filter(|c| c.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("resource.kubernetes.io/extended-resource-claim")))
                    .flat_map(|c| c.status.iter().flat_map(|s| s.allocation.iter()).flat_map(|a| a.devices.iter()).flat_map(|d| d.results.iter().flatten()))
                    .count();
                let plugin = node_devices[n.0 as usize].1 as usize;
                let ok = if plugin > 0 { special == 0 } else { special == want };
                if !ok {
                    extended_wrong.push(format!("{} on {}: {special} special-claim devices for {want}", pod.key, node.name()));
                }
            }
            for (i, n) in cluster.nodes.iter().enumerate() {
                let id = cluster.resources.get("example.com/gpu");
                if let Some(id) = id && node_devices[i].1 > 0 && n.requested(id) > n.allocatable(id) {
                    extended_wrong.push(format!("{} overcommits the device plugin", n.name()));
                }
            }
            (placements, claims, twice, unallocated, extended_wrong)
        };
        let with_memo = run(true);
        prop_assert!(with_memo.2.is_empty(), "devices allocated twice: {:?}", with_memo.2);
        prop_assert!(with_memo.3.is_empty(), "placed pods with unallocated claims: {:?}", with_memo.3);
        prop_assert!(with_memo.4.is_empty(), "extended resources served wrongly: {:?}", with_memo.4);
        let without = run(false);
        prop_assert_eq!(&with_memo.0, &without.0, "reusing verdicts changed a placement");
        prop_assert_eq!(&with_memo.1, &without.1, "reusing verdicts changed an allocation");
    }
}
