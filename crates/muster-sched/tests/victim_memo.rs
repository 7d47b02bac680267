//! Classic preemption for pods of one kind, one after another: the second pod takes what the
//! first found on the nodes its preemption did not change, and decides as a full search does
//! (`cycle/victim_memo.rs`).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use muster_sched::{Cluster, Engine, Plan, SchedulerConfig, SchedulerNames};
use serde_json::json;

mod common;

/// Pod `ml/<name>` of `priority` asking `cpu` cores and claim `<name>-gpu`, running on `node`
/// (started at second `node`) when given.
fn pod(name: &str, priority: i32, cpu: u32, node: Option<usize>) -> Box<Pod> {
    let mut p = json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"priority": priority, "resourceClaims": [{"name": "gpu", "resourceClaimName": format!("{name}-gpu")}],
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(format!("n{n}"));
        p["status"] = json!({"phase": "Running", "startTime": format!("2026-01-01T00:00:{n:02}Z")});
    }
    Box::new(serde_json::from_value(p).unwrap())
}

/// Eight nodes of 8 cpu and two GPUs, each running a pod of 7 cpu and one GPU of priority 0 (of
/// priority 100 on n0 and n1: no pending pod may preempt those); two pending pods of priority 50,
/// alike but for their names and claims, asking 5 cpu and a GPU: NodeResourcesFit rejects every
/// node, and preemption can resolve that on n2–n7 (once for each node: two pods do not fit one).
fn cluster() -> Cluster {
    let (nodes, _) = common::gpu_nodes(&[2; 8], "rack", "r");
    let mut pods: Vec<Box<Pod>> =
        (0..8).map(|i| pod(&format!("run-{i}"), if i < 2 { 100 } else { 0 }, 7, Some(i))).collect();
    pods.extend(["a", "b"].map(|name| pod(name, 50, 5, None)));
    let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    let mut claims: Vec<ResourceClaim> =
        (0..8).map(|i| common::gpu_claim(&format!("run-{i}-gpu"), Some((&format!("run-{i}"), i)))).collect();
    claims.extend(["a-gpu", "b-gpu"].map(|name| common::gpu_claim(name, None)));
    cluster.add_claims(claims, &[]);
    cluster
}

/// Each preemption as (preemptor, node, victims), by name.
fn preemptions(engine: &Engine, plan: &Plan) -> Vec<(String, String, Vec<String>)> {
    let c = engine.cluster();
    let node = |p| {
        let (_, n) = plan.placements.iter().find(|(q, _)| *q == p).expect("a preemptor is placed");
        c.node(*n).name().to_string()
    };
    plan.pod_preemptions
        .iter()
        .map(|p| (c.pod(p.pod).key.clone(), node(p.pod), p.victims.iter().map(|v| c.pod(*v).key.clone()).collect()))
        .collect()
}

#[test]
fn the_second_pod_of_a_kind_takes_what_the_first_found_on_unchanged_nodes() {
    let (_, slices) = common::gpu_nodes(&[2; 8], "rack", "r");
    let classes = common::gpu_class();
    let ctx = common::dra(&slices, &classes);
    let mut kept = Engine::new(cluster(), SchedulerConfig::default(), Some(&ctx));
    let mut full = Engine::new(cluster(), SchedulerConfig::default(), Some(&ctx)).without_verdict_reuse();
    let (with, without) = (kept.schedule(0), full.schedule(0));
    let found = preemptions(&kept, &with);
    assert_eq!(found, preemptions(&full, &without), "the decisions of a full search");
    assert_eq!(found.len(), 2, "{found:?}");
    // The latest start among the victims wins: n7's, then n6's.
    assert_eq!(found[0], ("ml/a".into(), "n7".into(), vec!["ml/run-7".into()]));
    assert_eq!(found[1], ("ml/b".into(), "n6".into(), vec!["ml/run-6".into()]));
    // b tried n0–n6 as a had found them: n0 and n1 hold nothing b may preempt, n2–n6 one victim each.
    assert_eq!(kept.preemption_findings_reused(), 7);
    assert_eq!(full.preemption_findings_reused(), 0);
}
