//! The scheduling queue over random clusters with running pods and preemption: a pod that failed
//! before a later preemption freed room is tried again, so no pod is left pending that fits.

use k8s_openapi::api::core::v1::{Node, Pod};
use muster_sched::cycle::run_filters;
use muster_sched::framework::CycleState;
use muster_sched::{Cluster, Scheduler, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::json;

/// A pending pod: cpu, priority, and whether it may preempt (`preemptionPolicy`).
type Pending = (u32, i32, bool);

fn build(nodes: usize, running: &[(usize, u32, i32)], pending: &[Pending]) -> Cluster {
    let nodes: Vec<Node> = (0..nodes)
        .map(|i| {
            serde_json::from_value(json!({"metadata": {"name": format!("node-{i}")},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}))
            .unwrap()
        })
        .collect();
    let mut pods: Vec<Box<Pod>> = Vec::new();
    let mut used = [0u32; 3];
    for (i, (node, cpu, priority)) in running.iter().enumerate() {
        if used[*node] + cpu > 4 {
            continue;
        }
        used[*node] += cpu;
        pods.push(Box::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("run-{i}"), "namespace": "q"},
                "spec": {"nodeName": format!("node-{node}"), "priority": priority,
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]},
                "status": {"phase": "Running", "startTime": format!("2026-01-01T00:00:{i:02}Z")}}))
            .unwrap(),
        ));
    }
    for (i, (cpu, priority, preempts)) in pending.iter().enumerate() {
        let policy = if *preempts { "PreemptLowerPriority" } else { "Never" };
        pods.push(Box::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("new-{i}"), "namespace": "q"},
                "spec": {"priority": priority, "preemptionPolicy": policy,
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]}}))
            .unwrap(),
        ));
    }
    Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// After a plan, every pod reported unschedulable is rejected by every node as the plan left
    /// the cluster (its Filter verdicts, with preempted pods gone and placed pods counted).
    #[test]
    fn no_pod_is_left_pending_that_fits_after_the_last_preemption(
        running in prop::collection::vec((0usize..2, 1u32..5, -1i32..2), 1..6),
        pending in prop::collection::vec((1u32..4, -1i32..4, prop::bool::weighted(0.5)), 1..9),
    ) {
        let mut cluster = build(2, &running, &pending);
        let plan = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
        for (pod, _) in &plan.unschedulable {
            let state = CycleState::new(cluster.pod(pod));
            for node in &cluster.nodes {
                prop_assert!(
                    run_filters(&state, node, &cluster).is_err(),
                    "{} is reported unschedulable but fits {} after the plan (preemptions: {:?})",
                    cluster.pod(pod).key, node.name(), plan.pod_preemptions
                );
            }
        }
        // Every pending pod is reported once: placed or unschedulable.
        let mut reported: Vec<u32> = plan.placements.iter().map(|(p, _)| p.0)
            .chain(plan.unschedulable.iter().map(|(p, _)| p.0)).collect();
        reported.sort_unstable();
        let before = reported.len();
        reported.dedup();
        prop_assert_eq!(before, reported.len(), "a pod reported twice");
        prop_assert_eq!(reported.len(), pending.len());
        // Same input, same plan.
        let mut again = build(2, &running, &pending);
        let plan2 = Scheduler::new(&mut again, SchedulerConfig::default()).plan();
        prop_assert_eq!(&plan.placements, &plan2.placements);
        prop_assert_eq!(&plan.unschedulable, &plan2.unschedulable);
    }
}

/// The case the queue exists for: a pod that may not preempt fails first (it comes first in the
/// queue, higher priority); a lower-priority pod then preempts a running pod bigger than it
/// needs, and the first pod fits in what is left.
#[test]
fn a_pod_that_failed_before_a_preemption_is_tried_again() {
    // node-0 runs one 4-cpu pod of priority -1; `new-0` (priority 3, Never) needs 3 cpu;
    // `new-1` (priority 0) needs 1 cpu and preempts the running pod.
    let mut cluster = build(1, &[(0, 4, -1)], &[(3, 3, false), (1, 0, true)]);
    let plan = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
    let placed: Vec<(&str, &str)> =
        plan.placements.iter().map(|(p, n)| (cluster.pod(*p).key.as_str(), cluster.node(*n).name())).collect();
    assert_eq!(placed, [("q/new-1", "node-0"), ("q/new-0", "node-0")]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.pod_preemptions.len(), 1);
}

/// A basic PodGroup that placed one member, then got room for the other from a later preemption:
/// tried again, it reports both, and its message adds up.
#[test]
fn a_group_tried_again_reports_every_member_it_placed() {
    let node = serde_json::from_value(json!({"metadata": {"name": "node-0"},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}))
    .unwrap();
    let pod = |name: &str, priority: i32, cpu: &str, extra: serde_json::Value| -> Box<Pod> {
        let mut spec = json!({"priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let phase = if spec["nodeName"].is_string() { "Running" } else { "Pending" };
        let p = json!({"metadata": {"name": name, "namespace": "q"}, "spec": spec, "status": {"phase": phase}});
        Box::new(serde_json::from_value(p).unwrap())
    };
    let member = json!({"schedulingGroup": {"podGroupName": "g"}, "preemptionPolicy": "Never"});
    let pods = vec![
        pod("running", 0, "3", json!({"nodeName": "node-0"})),
        pod("m0", 5, "1", member.clone()),
        pod("m1", 5, "1", member),
        pod("later", 1, "1", json!({})),
    ];
    let group = serde_json::from_value(json!({"metadata": {"name": "g", "namespace": "q"},
        "spec": {"schedulingPolicy": {"basic": {}}, "priority": 5, "preemptionPolicy": "Never"}}))
    .unwrap();
    let mut cluster = Cluster::build(vec![node], pods, &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(vec![group]);
    let plan = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
    let placed: Vec<&str> = plan.placements.iter().map(|(p, _)| cluster.pod(*p).key.as_str()).collect();
    assert_eq!(placed, ["q/m0", "q/later", "q/m1"]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.groups.len(), 1);
    assert_eq!(plan.groups[0].outcome, muster_sched::GroupOutcome::Scheduled { placed: 2, scheduled: 0 });
    assert_eq!(plan.groups[0].message(), "podgroup q/g: 2 placed, 0 already running, minCount 1");
}
