//! A waiting pod tried again after a change filters only the nodes that changed, and gets the
//! verdict and the placement a full attempt gives (`cycle/kept_verdicts.rs`).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use muster_sched::{Change, Cluster, Engine, Plan, SchedulerConfig, SchedulerNames};
use serde_json::json;

mod common;

/// [`common::gpu_claim`], boxed.
fn claim(name: &str, holder: Option<(&str, usize)>) -> Box<ResourceClaim> {
    Box::new(common::gpu_claim(name, holder))
}

/// Pod `ml/<name>` asking `cpu` cores and the GPU of claim `<name>-gpu`, running on `node`.
fn pod(name: &str, cpu: u32, node: Option<usize>) -> Box<Pod> {
    let mut p = json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": format!("{name}-gpu")}],
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(format!("n{n}"));
        p["status"] = json!({"phase": "Running"});
    }
    Box::new(serde_json::from_value(p).unwrap())
}

/// Six nodes of 8 cpu and one GPU, every GPU held by a running pod; those on n0–n2 take 7 cpu.
/// A pod asking 2 cpu and a GPU waits: NodeResourcesFit rejects n0–n2, DynamicResources n3–n5.
fn cluster() -> Cluster {
    let (nodes, _) = common::gpu_nodes(&[1; 6], "rack", "r");
    let mut pods: Vec<Box<Pod>> =
        (0..6).map(|i| pod(&format!("run-{i}"), if i < 3 { 7 } else { 1 }, Some(i))).collect();
    pods.push(pod("waiting", 2, None));
    let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    let mut claims: Vec<ResourceClaim> =
        (0..6).map(|i| *claim(&format!("run-{i}-gpu"), Some((&format!("run-{i}"), i)))).collect();
    claims.push(*claim("waiting-gpu", None));
    cluster.add_claims(claims, &[]);
    cluster
}

fn placed(engine: &Engine, plan: &Plan) -> Vec<(String, String)> {
    let c = engine.cluster();
    plan.placements.iter().map(|(p, n)| (c.pod(*p).key.clone(), c.node(*n).name().to_string())).collect()
}

#[test]
fn a_waiting_pod_is_filtered_again_only_on_the_nodes_that_changed() {
    let (_, slices) = common::gpu_nodes(&[1; 6], "rack", "r");
    let classes = common::gpu_class();
    let ctx = common::dra(&slices, &classes);
    let mut kept = Engine::new(cluster(), SchedulerConfig::default(), Some(&ctx));
    let mut full = Engine::new(cluster(), SchedulerConfig::default(), Some(&ctx)).without_verdict_reuse();
    let message = "0/6 nodes are available: 3 Insufficient cpu, 3 cannot allocate all claims.";

    let mut verdicts = Vec::new();
    for engine in [&mut kept, &mut full] {
        let first = engine.schedule(0);
        assert_eq!(first.unschedulable.len(), 1);
        assert_eq!(first.unschedulable.get(0).unwrap().1.message(), message);
        // run-4 finishes; its claim still holds the GPU.
        engine.apply(Change::DeletePod("ml/run-4".into()), 5_000).unwrap();
        let second = engine.schedule(5_000);
        verdicts.push(second.unschedulable.get(0).unwrap().1.clone());
    }
    assert_eq!(kept.kept_rejections(), 5, "n4 alone is filtered again");
    assert_eq!(kept.journal_verdicts(), 1, "the node journal listed n4 alone");
    assert_eq!(full.kept_rejections(), 0);
    assert_eq!(verdicts[0], verdicts[1], "the verdict a full attempt gives");
    assert_eq!(verdicts[0].message(), message);

    // The claim controller deallocates run-4's claim: the waiting pod fits on n4 alone.
    let mut placements = Vec::new();
    for engine in [&mut kept, &mut full] {
        engine.apply(Change::UpsertClaim(claim("run-4-gpu", None)), 6_000).unwrap();
        let third = engine.schedule(6_000); // in its 2 s backoff, popped from it: nothing else to do
        placements.push(placed(engine, &third));
    }
    assert_eq!(kept.kept_rejections(), 10);
    assert_eq!(kept.journal_verdicts(), 1, "n4 fits: every node is visited as without the journal");
    assert_eq!(placements[0], [("ml/waiting".to_string(), "n4".to_string())]);
    assert_eq!(placements[0], placements[1]);
}
