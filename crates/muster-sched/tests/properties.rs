//! Invariants of a plan over random clusters: what never happens.

use k8s_openapi::api::core::v1::{Node, Pod};
use muster_sched::cycle::run_filters;
use muster_sched::framework::CycleState;
use muster_sched::{Cluster, Scheduler, SchedulerConfig, SchedulerNames, ScoringStrategy};
use proptest::prelude::*;
use serde_json::json;

#[derive(Clone, Debug)]
struct NodeSpec {
    cpu: u32,
    memory_gi: u32,
    gpus: u32,
    pods: u32,
    zone: u8,
    tainted: bool,
    cordoned: bool,
}

#[derive(Clone, Debug)]
struct PodSpec {
    cpu_m: u32,
    memory_mi: u32,
    gpus: u32,
    tolerates: bool,
    zone: Option<u8>,
    priority: i32,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (1u32..16, 1u32..64, 0u32..4, 1u32..6, 0u8..3, any::<bool>(), prop::bool::weighted(0.1)).prop_map(
        |(cpu, memory_gi, gpus, pods, zone, tainted, cordoned)| NodeSpec {
            cpu,
            memory_gi,
            gpus,
            pods,
            zone,
            tainted,
            cordoned,
        },
    )
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (0u32..6000, 0u32..16000, 0u32..3, any::<bool>(), prop::option::weighted(0.3, 0u8..3), -2i32..3).prop_map(
        |(cpu_m, memory_mi, gpus, tolerates, zone, priority)| PodSpec {
            cpu_m,
            memory_mi,
            gpus,
            tolerates,
            zone,
            priority,
        },
    )
}

fn build(nodes: &[NodeSpec], pods: &[PodSpec]) -> Cluster {
    let nodes: Vec<Node> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut alloc = json!({"cpu": n.cpu.to_string(), "memory": format!("{}Gi", n.memory_gi), "pods": n.pods.to_string()});
            if n.gpus > 0 {
                alloc["example.com/gpu"] = json!(n.gpus.to_string());
            }
            let taints = if n.tainted { json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}]) } else { json!([]) };
            serde_json::from_value(json!({
                "metadata": {"name": format!("node-{i}"), "labels": {"topology.kubernetes.io/zone": format!("z{}", n.zone)}},
                "spec": {"taints": taints, "unschedulable": n.cordoned},
                "status": {"allocatable": alloc}
            }))
            .unwrap()
        })
        .collect();
    let pods: Vec<Box<Pod>> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut requests = json!({"cpu": format!("{}m", p.cpu_m), "memory": format!("{}Mi", p.memory_mi)});
            if p.gpus > 0 {
                requests["example.com/gpu"] = json!(p.gpus.to_string());
            }
            let tolerations = if p.tolerates { json!([{"key": "gpu", "operator": "Exists"}]) } else { json!([]) };
            let selector = p.zone.map_or(json!({}), |z| json!({"topology.kubernetes.io/zone": format!("z{z}")}));
            Box::new(
                serde_json::from_value(json!({
                    "metadata": {"name": format!("pod-{i:03}"), "namespace": "p"},
                    "spec": {"priority": p.priority, "tolerations": tolerations, "nodeSelector": selector,
                             "containers": [{"name": "c", "resources": {"requests": requests}}]}
                }))
                .unwrap(),
            )
        })
        .collect();
    Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap()
}

fn strategies() -> impl Strategy<Value = ScoringStrategy> {
    prop_oneof![Just(ScoringStrategy::LeastAllocated), Just(ScoringStrategy::MostAllocated)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn plans_never_overcommit_and_leave_nothing_that_fits(
        nodes in prop::collection::vec(node_spec(), 0..8),
        pods in prop::collection::vec(pod_spec(), 0..40),
        strategy in strategies(),
    ) {
        let mut cluster = build(&nodes, &pods);
        let config = SchedulerConfig { scoring_strategy: strategy, ..Default::default() };
        let plan = Scheduler::new(&mut cluster, config.clone()).plan();
        prop_assert_eq!(plan.placements.len() + plan.unschedulable.len(), pods.len());

        // No node holds more than it has.
        for n in &cluster.nodes {
            prop_assert!(n.num_pods <= n.allowed_pods, "{} holds {} pods", n.name(), n.num_pods);
            for id in 0..cluster.resources.len() {
                let id = muster_sched::cluster::ResourceId(id as u16);
                let sum: i64 = n.detail.pods.iter().map(|p| {
                    cluster.pod(*p).requests.iter().find(|(r, _)| *r == id).map_or(0, |(_, v)| *v)
                }).sum();
                prop_assert_eq!(sum, n.requested(id));
                prop_assert!(sum <= n.allocatable(id), "{} over on {}", n.name(), cluster.resources.name(id));
            }
        }
        // Every placed pod passes every Filter on its node, judged without itself.
        for (pod, node) in &plan.placements {
            let mut without = cluster.node(*node).clone();
            let _ = without.account(cluster.pod(*pod), *pod, -1);
            prop_assert!(run_filters(&CycleState::new(cluster.pod(*pod)), &without, &cluster).is_ok());
        }
        // A pod left pending fits nowhere, even now (placing pods only takes capacity away).
        for (pod, err) in &plan.unschedulable {
            let state = CycleState::new(cluster.pod(pod));
            for n in &cluster.nodes {
                prop_assert!(run_filters(&state, n, &cluster).is_err());
            }
            prop_assert_eq!(err.node_statuses().len(), cluster.nodes.len(), "every node has a reason");
        }

        // Same input, same plan.
        let mut again = build(&nodes, &pods);
        let plan2 = Scheduler::new(&mut again, config).plan();
        prop_assert_eq!(&plan.placements, &plan2.placements);
        prop_assert_eq!(&plan.unschedulable, &plan2.unschedulable);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    /// Classic preemption: a victim always has a lower priority than the pod it makes room for
    /// and ran on the node that pod was placed on; nodes are never overcommitted; the same input
    /// gives the same preemptions.
    #[test]
    fn pod_preemption_takes_only_lower_priority_pods_on_the_chosen_node(
        running in prop::collection::vec((0usize..4, 1u32..4, 0i32..3), 0..10),
        pending in prop::collection::vec((1u32..5, 0i32..4), 1..8),
    ) {
        let build = || {
            let nodes: Vec<Node> = (0..4)
                .map(|i| serde_json::from_value(json!({"metadata": {"name": format!("node-{i}")},
                    "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}})).unwrap())
                .collect();
            let mut pods: Vec<Box<Pod>> = Vec::new();
            let mut used = [0u32; 4];
            for (i, (node, cpu, prio)) in running.iter().enumerate() {
                if used[*node] + cpu > 4 {
                    continue;
                }
                used[*node] += cpu;
                pods.push(Box::new(serde_json::from_value(json!({
                    "metadata": {"name": format!("run-{i}"), "namespace": "p"},
                    "spec": {"nodeName": format!("node-{node}"), "priority": prio,
                             "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]},
                    "status": {"phase": "Running", "startTime": format!("2026-01-01T00:00:{:02}Z", i)}})).unwrap()));
            }
            for (i, (cpu, prio)) in pending.iter().enumerate() {
                pods.push(Box::new(serde_json::from_value(json!({
                    "metadata": {"name": format!("new-{i}"), "namespace": "p"},
                    "spec": {"priority": prio, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]}})).unwrap()));
            }
            Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap()
        };
        let mut cluster = build();
        let plan = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
        let mut seen = std::collections::HashSet::new();
        for r in &plan.pod_preemptions {
            let node = plan.placements.iter().find(|(p, _)| *p == r.pod).map(|(_, n)| *n);
            prop_assert!(node.is_some(), "a preemptor is placed");
            prop_assert!(!r.victims.is_empty());
            for v in &r.victims {
                prop_assert!(seen.insert(*v), "a pod is preempted once");
                prop_assert!(cluster.pod(*v).priority < cluster.pod(r.pod).priority);
                prop_assert_eq!(&cluster.pod(*v).state, &muster_sched::PodState::Preempted(node.unwrap()));
            }
        }
        for n in &cluster.nodes {
            for id in 0..cluster.resources.len() {
                let id = muster_sched::cluster::ResourceId(id as u16);
                prop_assert!(n.requested(id) <= n.allocatable(id), "{} overcommitted", n.name());
            }
        }
        let mut again = build();
        let plan2 = Scheduler::new(&mut again, SchedulerConfig::default()).plan();
        prop_assert_eq!(&plan.pod_preemptions, &plan2.pod_preemptions);
        prop_assert_eq!(&plan.placements, &plan2.placements);
    }
}
