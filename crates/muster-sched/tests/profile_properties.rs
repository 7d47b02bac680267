//! Pods of several profiles in one plan are placed as each profile alone would place them: the
//! scheduler swaps configurations (and their score memos) at every change of `schedulerName`, and
//! a fresh scheduler per pod — no memo, no switch — must agree, pod by pod, on random clusters
//! and random sequences of profiles.

use k8s_openapi::api::core::v1::{Node, Pod};
use muster_sched::{Cluster, Profile, Scheduler, SchedulerConfig, SchedulerNames, ScoringStrategy};
use proptest::prelude::*;
use serde_json::json;

fn node(i: usize, cpu: u32) -> Node {
    serde_json::from_value(json!({"metadata": {"name": format!("n{i}")},
        "status": {"allocatable": {"cpu": cpu.to_string(), "memory": "64Gi", "pods": "110"}}}))
    .unwrap()
}

fn pod(i: usize, profile: u8, cpu: u32) -> Pod {
    let name = match profile {
        0 => "default-scheduler".to_string(),
        p => format!("profile-{p}"),
    };
    serde_json::from_value(json!({"metadata": {"name": format!("p{i:03}"), "namespace": "ns"},
        "spec": {"schedulerName": name,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": format!("{cpu}00m"), "memory": "1Gi"}}}]}}))
    .unwrap()
}

/// The base configuration (LeastAllocated) and two more: MostAllocated, and MostAllocated on cpu
/// alone.
fn config() -> SchedulerConfig {
    let most = SchedulerConfig { scoring_strategy: ScoringStrategy::MostAllocated, ..SchedulerConfig::default() };
    let cpu_only = SchedulerConfig { scoring_resources: vec![("cpu".into(), 1)], ..most.clone() };
    SchedulerConfig {
        profiles: vec![
            Profile { scheduler_name: "profile-1".into(), config: most },
            Profile { scheduler_name: "profile-2".into(), config: cpu_only },
        ],
        ..SchedulerConfig::default()
    }
}

fn names() -> SchedulerNames {
    let mut n = SchedulerNames::default();
    n.0.extend(["profile-1".to_string(), "profile-2".to_string()]);
    n
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_plan_of_several_profiles_places_each_pod_as_a_fresh_scheduler_would(
        nodes in prop::collection::vec(1u32..9, 1..6),
        pods in prop::collection::vec((0u8..3, 1u32..30), 1..40),
    ) {
        let ns: Vec<Node> = nodes.iter().enumerate().map(|(i, c)| node(i, *c)).collect();
        let ps: Vec<Box<Pod>> = pods.iter().enumerate().map(|(i, (p, c))| Box::new(pod(i, *p, *c))).collect();

        let mut all = Cluster::build(ns.clone(), ps.clone(), &[], &names()).unwrap();
        let plan = Scheduler::new(&mut all, config()).plan();
        let together: Vec<(String, Option<String>)> = (0..pods.len())
            .map(|i| {
                let key = format!("ns/p{i:03}");
                let id = all.pod_id(&key).unwrap();
                let node = plan.placements.iter().find(|(p, _)| *p == id).map(|(_, n)| all.node(*n).name().to_string());
                (key, node)
            })
            .collect();

        // One pod at a time, each with a fresh scheduler, over the pods placed before it.
        let mut placed: Vec<Pod> = Vec::new();
        for (i, p) in ps.iter().enumerate() {
            let mut objects: Vec<Box<Pod>> = placed.iter().cloned().map(Box::new).collect();
            objects.push(p.clone());
            let mut c = Cluster::build(ns.clone(), objects, &[], &names()).unwrap();
            let one = Scheduler::new(&mut c, config()).plan();
            let node = one.placements.first().map(|(_, n)| c.node(*n).name().to_string());
            prop_assert_eq!(&together[i].1, &node, "{}", together[i].0);
            if let Some(n) = node {
                let mut bound = (**p).clone();
                bound.spec.as_mut().unwrap().node_name = Some(n);
                placed.push(bound);
            }
        }
    }
}
