//! The scheduling cycle, plugin by plugin, with kube-scheduler's reasons.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use muster_sched::{Cluster, Outcome, PodState, Scheduler, SchedulerConfig, SchedulerNames, ScoringStrategy};
use serde_json::{Value, json};

fn node(name: &str, alloc: Value, labels: Value, spec: Value) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": alloc}
    }))
    .unwrap()
}

fn plain_node(name: &str, cpu: &str, memory: &str) -> Node {
    node(name, json!({"cpu": cpu, "memory": memory, "pods": "110"}), json!({}), json!({}))
}

fn pod(name: &str, spec: Value) -> Box<Pod> {
    Box::new(serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})).unwrap())
}

fn cpu_pod(name: &str, cpu: &str) -> Box<Pod> {
    pod(name, json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}))
}

fn with(p: Box<Pod>, extra: Value) -> Box<Pod> {
    let mut v = serde_json::to_value(&*p).unwrap();
    merge(&mut v["spec"], extra);
    Box::new(serde_json::from_value(v).unwrap())
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

/// (pod → node) and (pod → message), both sorted by pod.
type Outcomes = (Vec<(String, String)>, Vec<(String, String)>);

/// Plans and returns the outcomes.
fn plan_with(nodes: Vec<Node>, pods: Vec<Box<Pod>>, config: SchedulerConfig) -> Outcomes {
    let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    let plan = Scheduler::new(&mut cluster, config).plan();
    let mut placed: Vec<_> = plan
        .placements
        .iter()
        .map(|(p, n)| (cluster.pod(*p).key.clone(), cluster.node(*n).name().to_string()))
        .collect();
    let mut failed: Vec<_> =
        plan.unschedulable.iter().map(|(p, e)| (cluster.pod(p).key.clone(), e.message())).collect();
    placed.sort();
    failed.sort();
    (placed, failed)
}

fn plan(nodes: Vec<Node>, pods: Vec<Box<Pod>>) -> Outcomes {
    plan_with(nodes, pods, SchedulerConfig::default())
}

fn placed_on(nodes: Vec<Node>, p: Box<Pod>) -> Result<String, String> {
    let (placed, failed) = plan(nodes, vec![p]);
    match (placed.first(), failed.first()) {
        (Some((_, n)), _) => Ok(n.clone()),
        (_, Some((_, m))) => Err(m.clone()),
        _ => unreachable!(),
    }
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[test]
fn node_resources_fit_places_within_allocatable() {
    assert_eq!(placed_on(vec![plain_node("n1", "2", "4Gi")], cpu_pod("p", "1500m")), Ok("n1".into()));
    assert_eq!(
        placed_on(vec![plain_node("n1", "1", "4Gi")], cpu_pod("p", "1500m")),
        Err("0/1 nodes are available: 1 Insufficient cpu.".into())
    );
}

#[test]
fn node_resources_fit_counts_bound_pods_and_reports_every_short_resource() {
    let mut bound = pod(
        "running",
        json!({"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "3Gi"}}}]}),
    );
    bound.status = Some(serde_json::from_value(json!({"phase": "Running"})).unwrap());
    let p =
        pod("p", json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "2Gi"}}}]}));
    let (placed, failed) = plan(vec![plain_node("n1", "2", "4Gi")], vec![bound, p]);
    assert!(placed.is_empty());
    assert_eq!(failed, pairs(&[("default/p", "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.")]));
}

#[test]
fn terminated_pods_hold_nothing() {
    let mut done =
        pod("done", json!({"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}));
    done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
    let (placed, _) = plan(vec![plain_node("n1", "2", "4Gi")], vec![done, cpu_pod("p", "2")]);
    assert_eq!(placed, pairs(&[("default/p", "n1")]));
}

#[test]
fn node_resources_fit_extended_resources_and_pod_count() {
    let gpu =
        node("gpu", json!({"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2", "pods": "1"}), json!({}), json!({}));
    let p = pod("p", json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}));
    assert_eq!(placed_on(vec![gpu.clone()], p), Ok("gpu".into()));
    let p = pod("p", json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "3"}}}]}));
    assert_eq!(placed_on(vec![gpu.clone()], p), Err("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.".into()));
    let (placed, failed) = plan(vec![gpu], vec![cpu_pod("a", "1"), cpu_pod("b", "1")]);
    assert_eq!(placed, pairs(&[("default/a", "gpu")]));
    assert_eq!(failed, pairs(&[("default/b", "0/1 nodes are available: 1 Too many pods.")]));
}

#[test]
fn node_resources_fit_uses_pod_level_resources_and_overhead() {
    let n = || vec![plain_node("n1", "4", "16Gi")];
    let p = pod(
        "p",
        json!({"resources": {"requests": {"cpu": "3"}}, "overhead": {"cpu": "500m"},
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}),
    );
    assert_eq!(placed_on(n(), p), Ok("n1".into()));
    let p = pod(
        "p",
        json!({"resources": {"requests": {"cpu": "4"}}, "overhead": {"cpu": "500m"},
        "containers": [{"name": "c"}]}),
    );
    assert_eq!(placed_on(n(), p), Err("0/1 nodes are available: 1 Insufficient cpu.".into()));
}

#[test]
fn node_unschedulable_unless_tolerated() {
    let cordoned =
        node("n1", json!({"cpu": "4", "memory": "4Gi", "pods": "10"}), json!({}), json!({"unschedulable": true}));
    assert_eq!(
        placed_on(vec![cordoned.clone()], cpu_pod("p", "1")),
        Err("0/1 nodes are available: 1 node(s) were unschedulable.".into())
    );
    let tolerant = with(
        cpu_pod("p", "1"),
        json!({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}),
    );
    assert_eq!(placed_on(vec![cordoned], tolerant), Ok("n1".into()));
}

#[test]
fn taint_toleration_filters_no_schedule_and_no_execute() {
    let tainted = |effect: &str| {
        node(
            "n1",
            json!({"cpu": "4", "memory": "4Gi", "pods": "10"}),
            json!({}),
            json!({"taints": [{"key": "dedicated", "value": "batch", "effect": effect}]}),
        )
    };
    for effect in ["NoSchedule", "NoExecute"] {
        assert_eq!(
            placed_on(vec![tainted(effect)], cpu_pod("p", "1")),
            Err("0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: batch}.".into())
        );
        let tol = with(
            cpu_pod("p", "1"),
            json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": effect}]}),
        );
        assert_eq!(placed_on(vec![tainted(effect)], tol), Ok("n1".into()));
    }
    assert_eq!(
        placed_on(vec![tainted("PreferNoSchedule")], cpu_pod("p", "1")),
        Ok("n1".into()),
        "PreferNoSchedule never filters"
    );
}

#[test]
fn taint_toleration_prefers_nodes_without_prefer_no_schedule_taints() {
    let a = node(
        "a",
        json!({"cpu": "4", "memory": "4Gi", "pods": "10"}),
        json!({}),
        json!({"taints": [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]}),
    );
    let b = plain_node("b", "4", "4Gi");
    assert_eq!(placed_on(vec![a.clone(), b.clone()], cpu_pod("p", "1")), Ok("b".into()));
    let tol = with(cpu_pod("p", "1"), json!({"tolerations": [{"key": "spot", "operator": "Exists"}]}));
    assert_eq!(placed_on(vec![a, b], tol), Ok("a".into()), "tolerated: equal scores, first node wins");
}

#[test]
fn node_affinity_node_selector() {
    let zoned = |name: &str, zone: &str| {
        node(
            name,
            json!({"cpu": "4", "memory": "4Gi", "pods": "10"}),
            json!({"topology.kubernetes.io/zone": zone}),
            json!({}),
        )
    };
    let p = with(cpu_pod("p", "1"), json!({"nodeSelector": {"topology.kubernetes.io/zone": "b"}}));
    assert_eq!(placed_on(vec![zoned("n1", "a"), zoned("n2", "b")], p.clone()), Ok("n2".into()));
    assert_eq!(
        placed_on(vec![zoned("n1", "a")], p),
        Err("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.".into())
    );
}

#[test]
fn node_affinity_required_terms_all_operators() {
    let n =
        |name: &str, labels: Value| node(name, json!({"cpu": "4", "memory": "4Gi", "pods": "10"}), labels, json!({}));
    let nodes = || {
        vec![
            n("small", json!({"gpus": "2", "tier": "dev"})),
            n("big", json!({"gpus": "8", "tier": "prod", "nvlink": ""})),
        ]
    };
    let affinity = |exprs: Value, fields: Value| {
        with(
            cpu_pod("p", "1"),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": exprs, "matchFields": fields}]}}}}),
        )
    };
    let cases = [
        (json!([{"key": "tier", "operator": "In", "values": ["prod"]}]), json!(null), Ok("big")),
        (json!([{"key": "tier", "operator": "NotIn", "values": ["prod"]}]), json!(null), Ok("small")),
        (json!([{"key": "nvlink", "operator": "Exists"}]), json!(null), Ok("big")),
        (json!([{"key": "nvlink", "operator": "DoesNotExist"}]), json!(null), Ok("small")),
        (json!([{"key": "gpus", "operator": "Gt", "values": ["4"]}]), json!(null), Ok("big")),
        (json!([{"key": "gpus", "operator": "Lt", "values": ["4"]}]), json!(null), Ok("small")),
        (json!(null), json!([{"key": "metadata.name", "operator": "In", "values": ["small"]}]), Ok("small")),
        (json!([{"key": "gpus", "operator": "Gt", "values": ["8"]}]), json!(null), Err(())),
    ];
    for (exprs, fields, want) in cases {
        let got = placed_on(nodes(), affinity(exprs.clone(), fields.clone()));
        match want {
            Ok(n) => assert_eq!(got, Ok(n.to_string()), "{exprs} {fields}"),
            Err(()) => assert_eq!(
                got,
                Err("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.".into())
            ),
        }
    }
}

#[test]
fn node_affinity_preferred_terms_score() {
    let n = |name: &str, zone: &str| {
        node(name, json!({"cpu": "4", "memory": "4Gi", "pods": "10"}), json!({"zone": zone}), json!({}))
    };
    let p = with(
        cpu_pod("p", "1"),
        json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}}}),
    );
    assert_eq!(placed_on(vec![n("a1", "a"), n("b1", "b")], p), Ok("b1".into()));
}

#[test]
fn aggregated_reasons_are_sorted_and_counted() {
    let nodes = vec![
        plain_node("cpu-1", "1", "4Gi"),
        plain_node("cpu-2", "1", "4Gi"),
        node(
            "gpu-1",
            json!({"cpu": "64", "memory": "64Gi", "pods": "10"}),
            json!({}),
            json!({"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]}),
        ),
    ];
    assert_eq!(
        placed_on(nodes, cpu_pod("p", "8")),
        Err("0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: batch}, 2 Insufficient cpu.".into())
    );
}

#[test]
fn least_allocated_spreads_and_most_allocated_packs() {
    let nodes = || vec![plain_node("a", "4", "8Gi"), plain_node("b", "4", "8Gi")];
    let pods = || vec![cpu_pod("p1", "1"), cpu_pod("p2", "1")];
    let (placed, _) = plan(nodes(), pods());
    assert_eq!(placed, pairs(&[("default/p1", "a"), ("default/p2", "b")]));
    let packing = SchedulerConfig { scoring_strategy: ScoringStrategy::MostAllocated, ..Default::default() };
    let (placed, _) = plan_with(nodes(), pods(), packing);
    assert_eq!(placed, pairs(&[("default/p1", "a"), ("default/p2", "a")]));
}

#[test]
fn queue_order_is_priority_then_creation_then_name() {
    let classes: Vec<PriorityClass> =
        vec![serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 1000})).unwrap()];
    let mut late_high = cpu_pod("z-high", "2");
    late_high.metadata.creation_timestamp = Some(serde_json::from_value(json!("2026-01-02T00:00:00Z")).unwrap());
    late_high.spec.as_mut().unwrap().priority_class_name = Some("high".into());
    let mut early = cpu_pod("b-early", "2");
    early.metadata.creation_timestamp = Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
    let mut late = cpu_pod("a-late", "2");
    late.metadata.creation_timestamp = Some(serde_json::from_value(json!("2026-01-03T00:00:00Z")).unwrap());
    let mut cluster = Cluster::build(
        vec![plain_node("n", "4", "8Gi")],
        vec![late, early, late_high],
        &classes,
        &SchedulerNames::default(),
    )
    .unwrap();
    let mut s = Scheduler::new(&mut cluster, SchedulerConfig::default());
    let order: Vec<String> = s.queue().into_iter().map(|p| s.cluster().pod(p).key.clone()).collect();
    assert_eq!(order, ["default/z-high", "default/b-early", "default/a-late"]);
    let plan = s.plan();
    assert_eq!(plan.placements.len(), 2, "the 4-cpu node takes the first two in queue order");
    assert_eq!(cluster.pod(plan.unschedulable.get(0).unwrap().0).key, "default/a-late");
}

#[test]
fn missing_priority_class_is_a_model_error() {
    let p = with(cpu_pod("p", "1"), json!({"priorityClassName": "nope"}));
    let errs = Cluster::build(vec![], vec![p], &[], &SchedulerNames::default()).unwrap_err();
    assert_eq!(errs[0].to_string(), "Pod default/p: spec.priorityClassName: PriorityClass \"nope\" not found");
}

#[test]
fn other_schedulers_gates_and_bound_pods_are_not_scheduled() {
    let other = with(cpu_pod("other", "1"), json!({"schedulerName": "volcano"}));
    let gated = with(cpu_pod("gated", "1"), json!({"schedulingGates": [{"name": "example.com/quota"}]}));
    let mine = with(cpu_pod("mine", "1"), json!({"schedulerName": "muster"}));
    let bound = with(cpu_pod("bound", "1"), json!({"nodeName": "n"}));
    let cluster = Cluster::build(
        vec![plain_node("n", "4", "8Gi")],
        vec![other, gated, mine, bound],
        &[],
        &SchedulerNames::default(),
    )
    .unwrap();
    let states: Vec<(&str, &PodState)> = cluster.pods.iter().map(|p| (p.key.as_str(), &p.state)).collect();
    assert_eq!(
        states,
        [
            ("default/bound", &PodState::Bound(muster_sched::NodeId(0))),
            ("default/gated", &PodState::Gated(vec!["example.com/quota".into()])),
            ("default/mine", &PodState::Pending),
            ("default/other", &PodState::OtherScheduler("volcano".into())),
        ]
    );
}

#[test]
fn pods_with_claims_need_dra_inputs() {
    let claims = with(
        cpu_pod("claims", "1"),
        json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}),
    );
    let (placed, failed) = plan(vec![plain_node("n", "4", "8Gi")], vec![claims]);
    assert!(placed.is_empty());
    assert_eq!(failed[0].1, "0/1 nodes are available: pod uses DRA resource claims, but the plan has no DRA inputs.");
}

#[test]
fn no_nodes() {
    assert_eq!(
        placed_on(vec![], cpu_pod("p", "1")),
        Err("0/0 nodes are available: no nodes available to schedule pods.".into())
    );
}

#[test]
fn filter_stops_after_enough_feasible_nodes_and_rotates() {
    // 200 identical nodes: kube-scheduler looks for max(100, 200 * 50%) = 100 feasible nodes, then
    // starts the next cycle where this one stopped.
    let nodes: Vec<Node> = (0..200).map(|i| plain_node(&format!("n{i:03}"), "4", "8Gi")).collect();
    let mut cluster =
        Cluster::build(nodes, vec![cpu_pod("a", "1"), cpu_pod("b", "1")], &[], &SchedulerNames::default()).unwrap();
    let mut s = Scheduler::new(
        &mut cluster,
        SchedulerConfig { scoring_strategy: ScoringStrategy::MostAllocated, ..Default::default() },
    );
    assert_eq!(s.num_feasible_nodes_to_find(200), 100);
    assert_eq!(s.num_feasible_nodes_to_find(5000), 500);
    assert_eq!(s.num_feasible_nodes_to_find(50), 50);
    let plan = s.plan();
    let nodes: Vec<&str> = plan.placements.iter().map(|(_, n)| cluster.node(*n).name()).collect();
    assert_eq!(nodes, ["n000", "n100"], "the second cycle starts at the 101st node");
}

#[test]
fn zones_are_interleaved_like_the_node_tree() {
    let n = |name: &str, zone: &str| {
        node(
            name,
            json!({"cpu": "4", "memory": "4Gi", "pods": "10"}),
            json!({"topology.kubernetes.io/zone": zone}),
            json!({}),
        )
    };
    let cluster = Cluster::build(
        vec![n("a1", "a"), n("a2", "a"), n("a3", "a"), n("b1", "b"), n("c1", "c")],
        Vec::<muster_sched::StoredPod>::new(),
        &[],
        &SchedulerNames::default(),
    )
    .unwrap();
    let order: Vec<&str> = cluster.node_order.iter().map(|id| cluster.node(*id).name()).collect();
    assert_eq!(order, ["a1", "b1", "c1", "a2", "a3"]);
}

#[test]
fn outcome_of_a_single_cycle() {
    let mut cluster =
        Cluster::build(vec![plain_node("n", "1", "1Gi")], vec![cpu_pod("p", "1")], &[], &SchedulerNames::default())
            .unwrap();
    let mut s = Scheduler::new(&mut cluster, SchedulerConfig::default());
    let id = s.queue()[0];
    assert_eq!(s.schedule_one(id), Outcome::Placed(muster_sched::NodeId(0)));
    assert!(matches!(s.schedule_one(id), Outcome::Unschedulable(_)), "reserved: the node is full now");
}
