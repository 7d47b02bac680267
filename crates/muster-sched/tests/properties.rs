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
            without.account(cluster.pod(*pod), *pod, -1);
            prop_assert!(run_filters(&CycleState::new(cluster.pod(*pod)), &without, &cluster).is_ok());
        }
        // A pod left pending fits nowhere, even now (placing pods only takes capacity away).
        for (pod, err) in &plan.unschedulable {
            let state = CycleState::new(cluster.pod(*pod));
            for n in &cluster.nodes {
                prop_assert!(run_filters(&state, n, &cluster).is_err());
            }
            prop_assert_eq!(err.node_statuses.len(), cluster.nodes.len(), "every node has a reason");
        }

        // Same input, same plan.
        let mut again = build(&nodes, &pods);
        let plan2 = Scheduler::new(&mut again, config).plan();
        prop_assert_eq!(&plan.placements, &plan2.placements);
        prop_assert_eq!(&plan.unschedulable, &plan2.unschedulable);
    }
}
