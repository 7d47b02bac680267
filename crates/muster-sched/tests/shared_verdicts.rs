//! A pod given an equivalent pod's verdict in the same plan (`cycle/equivalence.rs`): the
//! verdict stands across a PodGroup's cycle that placed and preempted nothing (it rolled back all
//! it reserved), and not across one that placed pods. Either way the verdict and the placements
//! are the ones a plan without reuse gives.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_sched::{Cluster, Engine, Plan, SchedulerConfig, SchedulerNames};
use serde_json::json;

mod common;

/// Pod `ml/<name>` asking 1 cpu and two GPUs through template `gpus-2`; a member of PodGroup
/// `group` when given, with `cpu` cores and the GPUs only when `gpus`.
fn pod(name: &str, group: Option<&str>, gpus: bool) -> Box<Pod> {
    let claims = if gpus { json!([{"name": "gpus", "resourceClaimTemplateName": "gpus-2"}]) } else { json!([]) };
    let mut spec = json!({"resourceClaims": claims,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]});
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    Box::new(serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"}, "spec": spec})).unwrap())
}

/// PodGroup `ml/<name>`, a gang of 2.
fn gang(name: &str) -> PodGroup {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}))
    .unwrap()
}

/// Two nodes of one GPU; singles `ml/a` and `ml/c` ask two GPUs each (they fit nowhere), and
/// gang `ml/b` (queued between them) asks two GPUs a member when `gang_gpus` (it fails too),
/// else only cpu (it is placed).
fn engine(ctx: &muster_sched::DraContext, gang_gpus: bool, reuse: bool) -> Engine<'_> {
    let (nodes, _) = common::gpu_nodes(&[1, 1], "rack", "r");
    let pods = vec![
        pod("a", None, true),
        pod("b-0", Some("b"), gang_gpus),
        pod("b-1", Some("b"), gang_gpus),
        pod("c", None, true),
    ];
    let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(vec![gang("b")]);
    cluster.add_claims(Vec::new(), &common::gpu_templates());
    let engine = Engine::new(cluster, SchedulerConfig::default(), Some(ctx));
    if reuse { engine } else { engine.without_verdict_reuse() }
}

/// Pairs of names: a pod and its node, or a pod and its message.
type Pairs = Vec<(String, String)>;

/// Placements by pod and node name, and each unschedulable pod with its message.
fn outcome(engine: &Engine, plan: &Plan) -> (Pairs, Pairs) {
    let c = engine.cluster();
    let placed = plan.placements.iter().map(|(p, n)| (c.pod(*p).key.clone(), c.node(*n).name().to_string()));
    let failed = plan.unschedulable.iter().map(|(p, e)| (c.pod(p).key.clone(), e.message()));
    (placed.collect(), failed.collect())
}

/// Plans the cluster with the gang as `gang_gpus` says, with and without reuse; `check` gets
/// both engines and plans.
fn both(gang_gpus: bool, check: impl FnOnce((&Engine, &Plan), (&Engine, &Plan))) {
    let (_, slices) = common::gpu_nodes(&[1, 1], "rack", "r");
    let classes = common::gpu_class();
    let ctx = common::dra(&slices, &classes);
    let (mut shared, mut full) = (engine(&ctx, gang_gpus, true), engine(&ctx, gang_gpus, false));
    let (a, b) = (shared.schedule(0), full.schedule(0));
    check((&shared, &a), (&full, &b));
}

#[test]
fn a_failed_gang_cycle_leaves_the_shared_verdict_standing() {
    both(true, |(shared, a), (full, b)| {
        assert_eq!(shared.reused_verdicts(), 1, "ml/c takes ml/a's verdict across the failed gang");
        assert_eq!(full.reused_verdicts(), 0);
        let (placed, failed) = outcome(shared, a);
        assert!(placed.is_empty());
        assert_eq!(failed.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["ml/a", "ml/b-0", "ml/b-1", "ml/c"]);
        assert_eq!(failed[3].1, failed[0].1);
        assert_eq!((placed, failed), outcome(full, b), "the outcome of a plan without reuse");
    });
}

#[test]
fn a_gang_placed_between_them_ends_the_shared_verdict() {
    both(false, |(shared, a), (full, b)| {
        assert_eq!(shared.reused_verdicts(), 0, "the gang's placements changed the nodes ml/c is filtered on");
        let (placed, failed) = outcome(shared, a);
        assert_eq!(placed.len(), 2, "the gang is placed");
        assert_eq!(failed.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["ml/a", "ml/c"]);
        assert_eq!((placed, failed), outcome(full, b), "the outcome of a plan without reuse");
    });
}
