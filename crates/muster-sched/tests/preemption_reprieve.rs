//! Workload-aware preemption's reprieve, upstream's and muster's: kube-scheduler 1.37 keeps the
//! placement it found with every potential victim removed and evicts each unit in its way; with
//! `reprieve_search` muster looks for another placement with the unit back first: the members the
//! unit displaced moved, the others kept, else the group placed again.

use k8s_openapi::api::core::v1::Pod;
use muster_sched::{Change, Cluster, Engine, SchedulerConfig, SchedulerNames};
use serde_json::{Value, json};

fn object<T: serde::de::DeserializeOwned>(v: Value) -> Box<T> {
    Box::new(serde_json::from_value(v).unwrap())
}

fn running(name: &str, node: &str, cpu: &str, start: &str) -> Box<Pod> {
    object(json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"nodeName": node, "priorityClassName": "low",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running", "startTime": start}}))
}

/// Nodes `(name, cpu)` running low-priority pods `(name, node, cpu, startTime)`; a high-priority
/// gang of `members` 4-cpu pods (minCount `members`) is scheduled. Returns the victims and each
/// member's node, sorted.
fn preempt(
    config: SchedulerConfig,
    nodes: &[(&str, &str)],
    pods: &[(&str, &str, &str, &str)],
    members: usize,
) -> (Vec<String>, Vec<(String, String)>) {
    let nodes = nodes
        .iter()
        .map(|(n, cpu)| {
            serde_json::from_value(json!({"metadata": {"name": n},
                "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}}))
            .unwrap()
        })
        .collect();
    let cluster =
        Cluster::build(nodes, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
    let mut engine = Engine::new(cluster, config, None);
    for (name, value) in [("low", 100), ("high", 1000)] {
        let class = object(json!({"metadata": {"name": name}, "value": value}));
        engine.apply(Change::UpsertPriorityClass(class), 0).unwrap();
    }
    for (name, node, cpu, start) in pods {
        engine.apply(Change::UpsertPod(running(name, node, cpu, start)), 0).unwrap();
    }
    let group = object(json!({"metadata": {"name": "urgent", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": members}}, "priorityClassName": "high", "priority": 1000}}));
    engine.apply(Change::UpsertPodGroup(group), 0).unwrap();
    for i in 0..members {
        let member = object(json!({"metadata": {"name": format!("urgent-{i}"), "namespace": "ml"},
            "spec": {"priorityClassName": "high", "schedulingGroup": {"podGroupName": "urgent"},
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}}));
        engine.apply(Change::UpsertPod(member), 0).unwrap();
    }
    let plan = engine.schedule(0);
    let c = engine.cluster();
    let mut victims: Vec<String> = plan.preempted.iter().map(|(p, _)| c.pod(*p).key.clone()).collect();
    victims.sort();
    let mut placed: Vec<(String, String)> =
        plan.placements.iter().map(|(p, n)| (c.pod(*p).key.clone(), c.node(*n).name().to_string())).collect();
    placed.sort();
    (victims, placed)
}

/// big (8 cpu) runs old-big (8 cpu, started first: the more important victim), small (4 cpu)
/// runs young-small (4 cpu); a high-priority gang of one 4-cpu pod fits nowhere. With both
/// victims removed, LeastAllocated puts it on big. Returns the victims and the gang pod's node.
fn victims(config: SchedulerConfig) -> (Vec<String>, String) {
    let nodes = [("big", "8"), ("small", "4")];
    let pods = [("old-big", "big", "8", "2026-12-01T08:00:00Z"), ("young-small", "small", "4", "2026-12-02T08:00:00Z")];
    let (victims, placed) = preempt(config, &nodes, &pods, 1);
    let [(_, node)] = &placed[..] else { panic!("the gang is placed: {placed:?}") };
    (victims, node.clone())
}

#[test]
fn upstream_keeps_its_placement_and_evicts_the_unit_in_its_way() {
    let (victims, node) = victims(SchedulerConfig::default());
    assert_eq!(victims, ["ml/old-big"]);
    assert_eq!(node, "big");
}

#[test]
fn reprieve_search_moves_the_placement_to_keep_the_more_important_unit() {
    let (victims, node) = victims(SchedulerConfig { reprieve_search: true, ..Default::default() });
    assert_eq!(victims, ["ml/young-small"]);
    assert_eq!(node, "small");
}

/// a (8 cpu) runs old-a (8 cpu, started first: the more important victim), b (6 cpu) runs
/// young-b (6 cpu), c (4 cpu) is free; a high-priority gang of two 4-cpu pods (minCount 2) fits
/// only with victims. Returns the victims and each member's node.
fn two_members(config: SchedulerConfig) -> (Vec<String>, Vec<(String, String)>) {
    let nodes = [("a", "8"), ("b", "6"), ("c", "4")];
    let pods = [("old-a", "a", "8", "2026-12-01T08:00:00Z"), ("young-b", "b", "6", "2026-12-02T08:00:00Z")];
    preempt(config, &nodes, &pods, 2)
}

/// With both victims removed, urgent-0 goes to a (the most room) and urgent-1 to b. old-a comes
/// back first and displaces urgent-0; the search moves urgent-0 alone (to c) and keeps urgent-1 on
/// b (a new search of the whole gang would have put urgent-0 on b and urgent-1 on c). young-b then
/// displaces urgent-1, which finds no node, and no placement exists with young-b back: young-b is
/// the victim. Upstream's rule keeps a and b and evicts both.
#[test]
fn reprieve_search_moves_only_the_members_a_unit_displaces() {
    let (victims, placed) = two_members(SchedulerConfig { reprieve_search: true, ..Default::default() });
    assert_eq!(victims, ["ml/young-b"]);
    let expected = [("ml/urgent-0", "c"), ("ml/urgent-1", "b")].map(|(p, n)| (p.to_string(), n.to_string()));
    assert_eq!(placed, expected);
    let (victims, placed) = two_members(SchedulerConfig::default());
    assert_eq!(victims, ["ml/old-a", "ml/young-b"]);
    let expected = [("ml/urgent-0", "a"), ("ml/urgent-1", "b")].map(|(p, n)| (p.to_string(), n.to_string()));
    assert_eq!(placed, expected);
}
