//! The DynamicResources Filter's verdicts are read back only while the node's devices are as
//! they were (`dra_memo.rs`): a node whose own pools hold the same devices again is as it was
//! then, and a node whose labels change may see other devices.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use muster_sched::{Change, Cluster, Engine, Plan, SchedulerConfig, SchedulerNames};
use serde_json::json;

mod common;

/// Pod `ml/<name>` asking one cpu and the GPU of claim `<name>-gpu`.
fn pod(name: &str) -> Box<Pod> {
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": format!("{name}-gpu")}],
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}))
        .unwrap(),
    )
}

fn placed(engine: &Engine, plan: &Plan) -> Vec<(String, String)> {
    let c = engine.cluster();
    plan.placements.iter().map(|(p, n)| (c.pod(*p).key.clone(), c.node(*n).name().to_string())).collect()
}

/// Two nodes of one GPU; pods `a`, `b` then `c` (each with its one-GPU claim) arrive one at a
/// time, each finishing before the next.
fn free_again(engine: &mut Engine) -> Vec<Vec<(String, String)>> {
    let mut placements = Vec::new();
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        let now = i as u64 * 10_000;
        engine.apply(Change::UpsertClaim(Box::new(common::gpu_claim(&format!("{name}-gpu"), None))), now).unwrap();
        engine.apply(Change::UpsertPod(pod(name)), now).unwrap();
        let plan = engine.schedule(now);
        placements.push(placed(engine, &plan));
        // The pod runs and finishes; the claim controller gives its device back.
        let node = &placements[i][0].1;
        let mut bound = *pod(name);
        bound.spec.as_mut().unwrap().node_name = Some(node.clone());
        engine.apply(Change::UpsertPod(Box::new(bound)), now + 1_000).unwrap();
        engine.apply(Change::DeletePod(format!("ml/{name}")), now + 5_000).unwrap();
        engine
            .apply(Change::UpsertClaim(Box::new(common::gpu_claim(&format!("{name}-gpu"), None))), now + 6_000)
            .unwrap();
    }
    placements
}

#[test]
fn a_node_free_again_gets_the_verdicts_it_had_when_it_was_free_before() {
    let (nodes, slices) = common::gpu_nodes(&[1; 2], "rack", "r");
    let classes = common::gpu_class();
    let ctx = common::dra(&slices, &classes);
    let empty = || Cluster::build(nodes.clone(), Vec::<Box<Pod>>::new(), &[], &SchedulerNames::default()).unwrap();
    let mut engine = Engine::new(empty(), SchedulerConfig::default(), Some(&ctx));
    let placements = free_again(&mut engine);
    assert!(placements.iter().all(|p| p[0].1 == placements[0][0].1), "each goes where a went: {placements:?}");
    // a: one verdict per node, both with nothing held. b: the node a used has moved on to
    // another generation, but it holds nothing again: a's verdict for it is read back (the other
    // node never changed). c: the same.
    let counts = engine.dra_memo_counts();
    assert_eq!((counts.computed, counts.read_from_aside), (2, 2), "{counts:?}");
}

/// A slice shared by the nodes labelled `gpu=yes` (no `nodeName`), with one device.
fn selected_slice() -> ResourceSlice {
    serde_json::from_value(json!({"metadata": {"name": "shared"},
        "spec": {"driver": "gpu.example.com", "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 1},
                 "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["yes"]}]}]},
                 "devices": [{"name": "gpu-0"}]}}))
    .unwrap()
}

#[test]
fn a_node_labelled_anew_sees_the_devices_its_labels_select() {
    let (nodes, _) = common::gpu_nodes(&[0; 1], "rack", "r");
    let classes = common::gpu_class();
    let ctx = common::dra(&[selected_slice()], &classes);
    let mut cluster = Cluster::build(nodes.clone(), vec![pod("a")], &[], &SchedulerNames::default()).unwrap();
    cluster.add_claims(vec![common::gpu_claim("a-gpu", None)], &[]);
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
    let first = engine.schedule(0);
    assert_eq!(
        first.unschedulable.get(0).unwrap().1.message(),
        "0/1 nodes are available: 1 cannot allocate all claims."
    );
    let mut labelled: Node = nodes[0].clone();
    labelled.metadata.labels.get_or_insert_default().insert("gpu".into(), "yes".into());
    engine.apply(Change::UpsertNode(Box::new(labelled)), 1_000).unwrap();
    // Past the unschedulable pods' flush (5 minutes), whichever events wake the pod.
    let second = engine.schedule(400_000);
    assert_eq!(placed(&engine, &second), [("ml/a".to_string(), "n0".to_string())]);
}

/// Node `n{i}` with one GPU that takes shares of its 1000 `milli`.
fn shared_gpu_slice(i: usize) -> ResourceSlice {
    common::node_slice(
        i,
        vec![json!({"name": "gpu-0", "allowMultipleAllocations": true, "capacity": {"milli": {"value": "1000"}}})],
    )
}

/// Claim `ml/<name>` for 300 milli of a GPU.
fn share_claim(name: &str) -> ResourceClaim {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
            "capacity": {"requests": {"milli": "300"}}}}]}}}))
    .unwrap()
}

#[test]
fn a_share_takes_the_id_of_its_own_claim_when_the_verdict_was_another_claims() {
    let (nodes, _) = common::gpu_nodes(&[1; 2], "rack", "r");
    let slices = vec![shared_gpu_slice(0), shared_gpu_slice(1)];
    let classes = common::gpu_class();
    let build = || {
        let pods = vec![pod("a"), pod("b"), pod("c")];
        let mut cluster = Cluster::build(nodes.clone(), pods, &[], &SchedulerNames::default()).unwrap();
        cluster.add_claims(["a-gpu", "b-gpu", "c-gpu"].map(share_claim).to_vec(), &[]);
        cluster
    };
    let allocations = |memo: bool| {
        let mut cluster = build();
        let plan = common::plan_with_dra(&mut cluster, &slices, &classes, memo);
        assert_eq!(plan.placements.len(), 3);
        cluster.claims.iter().map(|c| (c.claim.metadata.name.clone(), c.claim.status.clone())).collect::<Vec<_>>()
    };
    // b's claim has a's spec: its verdict on the node a left alone was computed for a's claim.
    let (with, without) = (allocations(true), allocations(false));
    assert_eq!(with, without, "the share IDs the allocator gives each claim");
    let ids: std::collections::BTreeSet<_> = with
        .iter()
        .flat_map(|(_, s)| {
            s.as_ref().unwrap().allocation.as_ref().unwrap().devices.as_ref().unwrap().results.clone().unwrap()
        })
        .map(|r| (r.pool, r.share_id.unwrap()))
        .collect();
    assert_eq!(ids.len(), 3, "no share ID twice: {ids:?}");
}
