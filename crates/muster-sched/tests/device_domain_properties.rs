//! Gangs with a device topology (`muster.dev/device-topology-key`, beyond upstream) over random
//! clusters: every placed gang's constrained devices share one value of the attribute and none
//! lacks it, gangs stay all-or-nothing, and reusing the allocator's verdicts changes nothing.

use std::collections::{BTreeSet, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_sched::{Cluster, GroupOutcome, SchedulerNames};
use proptest::prelude::*;
use serde_json::json;

mod common;

/// Groups: (members, minCount, GPUs per member, annotated, scope node).
type Group = (u8, u8, u8, bool, bool);

/// Node `i` has `gpus[i]` devices; device `d` has `clique: i % 3`, except that node 0 mixes two
/// values (`(d % 2) + 5`) and device 0 of nodes in `bare` lacks the attribute.
fn slices(gpus: &[u8], bare: &[bool]) -> (Vec<Node>, Vec<ResourceSlice>) {
    let (nodes, _) = common::gpu_nodes(gpus, "rack", "r");
    let slices = gpus
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let devices: Vec<_> = (0..*n)
                .map(|d| {
                    let value = if i == 0 { i64::from(d % 2) + 5 } else { (i % 3) as i64 };
                    let lacks = d == 0 && bare.get(i).copied().unwrap_or(false);
                    let attributes = if lacks { json!({}) } else { json!({"clique": {"int": value}}) };
                    json!({"name": format!("gpu-{d}"), "attributes": attributes})
                })
                .collect();
            common::node_slice(i, devices)
        })
        .collect();
    (nodes, slices)
}

fn groups_and_pods(groups: &[Group]) -> (Vec<PodGroup>, Vec<Box<Pod>>) {
    let (mut pgs, mut pods) = (Vec::new(), Vec::new());
    for (g, (members, min, gpus, annotated, node_scope)) in groups.iter().enumerate() {
        let mut annotations = json!({});
        if *annotated {
            annotations["muster.dev/device-topology-key"] = json!("gpu.example.com/clique");
            if *node_scope {
                annotations["muster.dev/device-topology-scope"] = json!("node");
            }
        }
        pgs.push(
            serde_json::from_value(json!({"metadata": {"name": format!("g{g}"), "namespace": "ml",
                "annotations": annotations}, "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}}))
            .unwrap(),
        );
        for m in 0..*members {
            pods.push(common::member(&format!("g{g}-{m}"), &format!("g{g}"), *gpus, 1, None));
        }
    }
    (pgs, pods)
}

/// The clique of device `gpu-d` of pool `n<i>` as [`slices`] publishes it (`None`: lacks it).
fn clique(pool: &str, device: &str, bare: &[bool]) -> Option<i64> {
    let i: usize = pool.trim_start_matches('n').parse().unwrap();
    let d: i64 = device.trim_start_matches("gpu-").parse().unwrap();
    if d == 0 && bare.get(i).copied().unwrap_or(false) {
        return None;
    }
    Some(if i == 0 { d % 2 + 5 } else { (i % 3) as i64 })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    #[test]
    fn placed_gangs_take_devices_of_one_domain(
        gpus in prop::collection::vec(0u8..5, 1..7),
        bare in prop::collection::vec(prop::bool::ANY, 7),
        groups in prop::collection::vec((1u8..4, 1u8..4, 0u8..3, prop::bool::ANY, prop::bool::ANY), 1..5),
    ) {
        let (class, templates) = (common::gpu_class(), common::gpu_templates());
        let run = |memo: bool| {
            let (nodes, slices) = slices(&gpus, &bare);
            let (pgs, pods) = groups_and_pods(&groups);
            let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
            cluster.add_pod_groups(pgs);
            cluster.add_claims(Vec::new(), &templates);
            let plan = common::plan_with_dra(&mut cluster, &slices, &class, memo);
            let mut problems = Vec::new();
            let placed: HashSet<u32> = plan.placements.iter().map(|(p, _)| p.0).collect();
            for r in &plan.groups {
                let g = &cluster.groups[r.group];
                let n = g.members.iter().filter(|m| placed.contains(&m.0)).count();
                let scheduled = matches!(r.outcome, GroupOutcome::Scheduled { .. });
                if scheduled != (n > 0) || (scheduled && n < g.min_count) {
                    problems.push(format!("{}: {n} placed, outcome {:?}", g.key, r.outcome));
                }
                let (_, _, _, annotated, node_scope) = groups[r.group.index()];
                if !annotated || !scheduled {
                    continue;
                }
                let mut values = BTreeSet::new();
                let mut nodes = BTreeSet::new();
                for m in g.members.iter().filter(|m| placed.contains(&m.0)) {
                    nodes.extend(plan.placements.iter().filter(|(p, _)| p == m).map(|(_, n)| n.0));
                    for c in cluster.pod(*m).claims.iter().flatten() {
                        let alloc = cluster.claims[*c].claim.status.as_ref().and_then(|s| s.allocation.as_ref());
                        for d in alloc.and_then(|a| a.devices.as_ref()).and_then(|d| d.results.as_ref()).into_iter().flatten() {
                            values.insert(clique(&d.pool, &d.device, &bare));
                        }
                    }
                }
                if values.len() > 1 || values.contains(&None) {
                    problems.push(format!("{}: devices of cliques {values:?}", g.key));
                }
                if node_scope && nodes.len() > 1 {
                    problems.push(format!("{}: scope node, placed on {nodes:?}", g.key));
                }
            }
            let placements: Vec<(u32, u32)> = plan.placements.iter().map(|(p, n)| (p.0, n.0)).collect();
            (problems, placements)
        };
        let (problems, with_memo) = run(true);
        prop_assert!(problems.is_empty(), "{:?}", problems);
        let (_, without) = run(false);
        prop_assert_eq!(with_memo, without, "reusing verdicts changed the plan");
    }
}

/// A PodGroup whose annotations are malformed (a world that did not check them, as a live one)
/// is a SchedulerError naming the annotation, and nothing is placed.
#[test]
fn a_malformed_device_topology_is_the_groups_error() {
    let (nodes, slices) = slices(&[2, 2], &[]);
    let (mut pgs, pods) = groups_and_pods(&[(2, 2, 1, true, false)]);
    pgs[0].metadata.annotations.as_mut().unwrap().insert("muster.dev/device-topology-scope".into(), "rack".into());
    let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(pgs);
    cluster.add_claims(Vec::new(), &common::gpu_templates());
    let plan = common::plan_with_dra(&mut cluster, &slices, &common::gpu_class(), true);
    let r = &plan.groups[0];
    assert_eq!(r.outcome, GroupOutcome::SchedulerError);
    assert!(
        r.message()
            .starts_with("podgroup ml/g0: metadata.annotations[muster.dev/device-topology-scope]: Unsupported value"),
        "{}",
        r.message()
    );
    assert!(plan.placements.is_empty());
}

/// Without any device publishing the attribute, the group's reason says so.
#[test]
fn an_attribute_no_device_publishes_places_nothing() {
    let (nodes, slices) = slices(&[2, 2], &[]);
    let (mut pgs, pods) = groups_and_pods(&[(2, 2, 1, true, false)]);
    pgs[0]
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("muster.dev/device-topology-key".into(), "gpu.example.com/rack".into());
    let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(pgs);
    cluster.add_claims(Vec::new(), &common::gpu_templates());
    let plan = common::plan_with_dra(&mut cluster, &slices, &common::gpu_class(), true);
    assert_eq!(plan.groups[0].message(), "podgroup ml/g0: no device publishes the attribute gpu.example.com/rack");
    assert!(plan.placements.is_empty());
}
