//! Pod-group plans over random clusters: what never happens. No gang is partly placed, a gang
//! that is not placed leaves none of its claims allocated, and no device is allocated twice.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaimTemplate, ResourceSlice};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_sched::{Cluster, GroupOutcome, Scheduler, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;

mod common;
use serde_json::json;

/// Groups: (members, minCount (0 = basic policy), GPUs per member, cpu per member, one rack).
type Group = (u8, u8, u8, u8, bool);

/// Each node runs one pod of priority 0 asking `running[i]` cpus (0 = none); groups with an even
/// index have priority 10 and may preempt them.
fn objects(
    node_gpus: &[u8],
    running: &[u8],
    groups: &[Group],
) -> (Vec<Node>, Vec<ResourceSlice>, Vec<Box<Pod>>, Vec<PodGroup>) {
    let (nodes, slices) = common::gpu_nodes(node_gpus, "rack", "r");
    let mut pods = Vec::new();
    for (i, cpu) in running.iter().enumerate().take(node_gpus.len()).filter(|(_, c)| **c > 0) {
        pods.push(Box::new(
            serde_json::from_value(json!({"metadata": {"name": format!("run-{i}"), "namespace": "ml"},
                "spec": {"nodeName": format!("n{i}"), "priority": 0,
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]},
                "status": {"phase": "Running"}}))
            .unwrap(),
        ));
    }
    let mut pgs = Vec::new();
    for (g, (members, min, gpus, cpu, rack)) in groups.iter().enumerate() {
        let policy = if *min == 0 { json!({"basic": {}}) } else { json!({"gang": {"minCount": min}}) };
        // The group's priority is its pods' (the alpha restriction).
        let mut spec = json!({"schedulingPolicy": policy, "priority": if g % 2 == 0 { 10 } else { 0 }});
        if *rack {
            spec["schedulingConstraints"] = json!({"topology": [{"key": "rack"}]});
        }
        pgs.push(
            serde_json::from_value(json!({"metadata": {"name": format!("g{g}"), "namespace": "ml"}, "spec": spec}))
                .unwrap(),
        );
        for m in 0..*members {
            let priority = if g % 2 == 0 { 10 } else { 0 };
            pods.push(common::member(&format!("g{g}-{m}"), &format!("g{g}"), *gpus, u32::from(*cpu), Some(priority)));
        }
    }
    (nodes, slices, pods, pgs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn gangs_are_all_or_nothing(
        node_gpus in prop::collection::vec(0u8..5, 1..5),
        running in prop::collection::vec(0u8..7, 5),
        groups in prop::collection::vec((1u8..5, 0u8..5, 0u8..3, 1u8..5, prop::bool::ANY), 1..6),
    ) {
        let (class, templates) = (common::gpu_class(), common::gpu_templates());
        let run = |memo: bool| {
            let (nodes, slices, pods, pgs) = objects(&node_gpus, &running, &groups);
            let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
            cluster.add_pod_groups(pgs);
            cluster.add_claims(Vec::new(), &templates);
            let plan = common::plan_with_dra(&mut cluster, &slices, &class, memo);
            let mut problems = Vec::new();
            let placed: HashSet<u32> = plan.placements.iter().map(|(p, _)| p.0).collect();
            for r in &plan.groups {
                let g = &cluster.groups[r.group];
                let n = g.members.iter().filter(|m| placed.contains(&m.0)).count();
                let racks: HashSet<u32> = plan.placements.iter().filter(|(p, _)| g.members.contains(p)).map(|(_, n)| n.0 % 2).collect();
                if groups[r.group.index()].4 && racks.len() > 1 {
                    problems.push(format!("{}: placed across racks", g.key));
                }
                match r.outcome {
                    GroupOutcome::Scheduled { placed: p, .. } => {
                        if p != n || n == 0 || (g.gang && n < g.min_count) {
                            problems.push(format!("{}: {n} placed, minCount {}, outcome {:?}", g.key, g.min_count, r.outcome));
                        }
                    }
                    _ => {
                        if n != 0 {
                            problems.push(format!("{}: not scheduled but {n} members placed", g.key));
                        }
                        for m in &g.members {
                            for c in cluster.pod(*m).claims.iter().flatten() {
                                if cluster.claims[*c].claim.status.as_ref().and_then(|s| s.allocation.as_ref()).is_some() {
                                    problems.push(format!("{}: claim {} stayed allocated", g.key, cluster.claims[*c].key()));
                                }
                            }
                        }
                    }
                }
            }
            let mut seen = HashSet::new();
            for c in &cluster.claims {
                for r in c.claim.status.iter().flat_map(|s| s.allocation.iter()).flat_map(|a| a.devices.iter()).flat_map(|d| d.results.iter().flatten()) {
                    if !seen.insert((r.pool.clone(), r.device.clone())) {
                        problems.push(format!("{}/{} allocated twice", r.pool, r.device));
                    }
                }
            }
            // Victims have a lower priority than the group they make room for.
            for (v, g) in &plan.preempted {
                let muster_sched::GroupNode::Group(g) = g else { panic!("no CompositePodGroup here") };
                let preemptor = cluster.groups[*g].members.iter().map(|m| cluster.pod(*m).priority).max().unwrap_or(0);
                if cluster.pod(*v).priority >= preemptor {
                    problems.push(format!("{} preempted by an equal or lower priority group", cluster.pod(*v).key));
                }
            }
            // A group's victims are named once: its result's preemption and its reason share them.
            for r in &plan.groups {
                if let Some(muster_sched::cycle::Preemption::Preempted(v)) = &r.preemption {
                    let muster_sched::cycle::GroupReason::Scheduled { victims: Some(named), .. } = &*r.reason else {
                        panic!("a group that preempted was scheduled")
                    };
                    if !std::sync::Arc::ptr_eq(v, named) {
                        problems.push(format!("{}: victims copied", cluster.groups[r.group].key));
                    }
                }
            }
            // A node's requests are exactly those of the pods placed on it and still running there.
            for (i, node) in cluster.nodes.iter().enumerate() {
                let running_there: i64 = cluster.pods.iter()
                    .filter(|p| p.state == muster_sched::PodState::Bound(muster_sched::NodeId(i as u32)))
                    .map(|p| p.requests.iter().map(|(_, v)| *v).sum::<i64>()).sum();
                let want: i64 = running_there + plan.placements.iter().filter(|(_, n)| n.0 as usize == i)
                    .map(|(p, _)| cluster.pod(*p).requests.iter().map(|(_, v)| *v).sum::<i64>()).sum::<i64>();
                let got: i64 = node.requested.iter().sum();
                if want != got {
                    problems.push(format!("{}: requested {got}, placed pods ask {want}", node.name()));
                }
            }
            let placements: Vec<(u32, u32)> = plan.placements.iter().map(|(p, n)| (p.0, n.0)).collect();
            let preempted: Vec<u32> = plan.preempted.iter().map(|(p, _)| p.0).collect();
            (problems, (placements, preempted))
        };
        let (problems, with_memo) = run(true);
        prop_assert!(problems.is_empty(), "{:?}", problems);
        let (_, without) = run(false);
        prop_assert_eq!(with_memo, without, "reusing verdicts changed the plan");
    }
}

/// A PodGroup claim generated in an earlier plan (named in the PodGroup's
/// `status.resourceClaimStatuses`) is used again, not generated a second time.
#[test]
fn a_podgroup_claim_generated_before_is_reused() {
    let pg: PodGroup = serde_json::from_value(json!({"metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 1}},
                 "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": "imex"}]},
        "status": {"resourceClaimStatuses": [{"name": "fabric", "resourceClaimName": "pg-fabric-abcde"}]}}))
    .unwrap();
    let claim = serde_json::from_value(json!({"metadata": {"name": "pg-fabric-abcde", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "ch", "exactly": {"deviceClassName": "imex"}}]}}}))
    .unwrap();
    let template: ResourceClaimTemplate =
        serde_json::from_value(json!({"metadata": {"name": "imex", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "ch", "exactly": {"deviceClassName": "imex"}}]}}}}))
        .unwrap();
    let pod: Box<Pod> = Box::new(
        serde_json::from_value(json!({"metadata": {"name": "pg-0", "namespace": "ml"},
        "spec": {"schedulingGroup": {"podGroupName": "pg"},
                 "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": "imex"}],
                 "containers": [{"name": "c"}]}}))
        .unwrap(),
    );
    let mut cluster = Cluster::build(Vec::new(), vec![pod], &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(vec![pg]);
    cluster.add_claims(vec![claim], &[template]);
    assert_eq!(cluster.claims.len(), 1, "no second claim is generated");
    assert_eq!(cluster.pods[0].claims.as_slice(), [Ok(muster_sched::ClaimId(0))]);
    let statuses = cluster.groups[0].group.status.as_ref().unwrap().resource_claim_statuses.as_ref().unwrap();
    assert_eq!(statuses.len(), 1, "the status is not listed twice");
}

/// A PodGroup's priority comes from its own priorityClassName; members with another priority make
/// the cycle a SchedulerError (the alpha restriction), and nothing is placed.
#[test]
fn members_must_have_the_groups_priority() {
    let classes: Vec<k8s_openapi::api::scheduling::v1::PriorityClass> =
        vec![serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 1000})).unwrap()];
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}}}))
    .unwrap();
    let pg: PodGroup = serde_json::from_value(json!({"metadata": {"name": "g", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}, "priorityClassName": "high"}}))
    .unwrap();
    let pod = |name: &str, class: Option<&str>| -> Box<Pod> {
        let mut spec = json!({"schedulingGroup": {"podGroupName": "g"}, "containers": [{"name": "c"}]});
        if let Some(c) = class {
            spec["priorityClassName"] = json!(c);
        }
        Box::new(serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"}, "spec": spec})).unwrap())
    };
    for (pods, ok) in
        [(vec![pod("g-0", Some("high"))], true), (vec![pod("g-0", Some("high")), pod("g-1", None)], false)]
    {
        let mut cluster = Cluster::build(vec![node.clone()], pods, &classes, &SchedulerNames::default()).unwrap();
        cluster.add_pod_groups(vec![pg.clone()]);
        let plan = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
        let r = &plan.groups[0];
        if ok {
            assert!(matches!(r.outcome, GroupOutcome::Scheduled { .. }), "{r:?}");
        } else {
            assert_eq!(r.outcome, GroupOutcome::SchedulerError);
            assert!(r.message().contains("podgroup ml/g has priority 1000, but ml/g-1 has 0"), "{}", r.message());
            assert!(plan.placements.is_empty());
        }
    }
}
