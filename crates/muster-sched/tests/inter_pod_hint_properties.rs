//! The queueing hints of PodTopologySpread and InterPodAffinity never strand a pod: over random
//! histories of bound pods coming, going and relabeled, nodes added, relabeled, deleted and
//! sending heartbeats — each binding confirmed — once the engine is idle (every backoff over, no
//! five-minute flush) after each change, no pending pod fits the final cluster. The check is a fresh plan of the
//! final state: its first placement would see that state unchanged, so it must place nothing.

use k8s_openapi::api::core::v1::{Node, Pod};
use muster_sched::{Change, Cluster, Engine, PodState, Scheduler, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

/// A node; `zone` 0..2 labels it, 2 leaves the label off; 3 and 4 are zones 0 and 1 with a
/// NoSchedule taint no pod tolerates (still a domain: `nodeTaintsPolicy` is Ignore).
fn node(i: usize, zone: u8, heartbeat: u32) -> Box<Node> {
    let mut labels = json!({HOST: format!("n{i}")});
    if zone != 2 {
        labels[ZONE] = json!(format!("z{}", zone % 3));
    }
    let taints = if zone > 2 { json!([{"key": "gpu", "effect": "NoSchedule"}]) } else { json!([]) };
    Box::new(
        serde_json::from_value(
            json!({"metadata": {"name": format!("n{i}"), "labels": labels}, "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastHeartbeatTime": format!("2026-01-01T00:{:02}:00Z", heartbeat % 60)}]}}),
        )
        .unwrap(),
    )
}

/// A pending pod's rule: 0 zone spread, 1 hostname spread (minDomains 2), 2 zone affinity to
/// the other app, 3 hostname anti-affinity to its own app, 4 zone spread where tainted nodes
/// are no domain (`nodeTaintsPolicy: Honor`).
fn rule(rule: u8, app: u8) -> Value {
    let own = json!({"matchLabels": {"app": format!("a{app}")}});
    let other = json!({"matchLabels": {"app": format!("a{}", 1 - app)}});
    match rule {
        0 => json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": own}]}),
        1 => json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": HOST, "minDomains": 2,
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": own}]}),
        4 => json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "nodeTaintsPolicy": "Honor",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": own}]}),
        2 => json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            [{"topologyKey": ZONE, "labelSelector": other}]}}}),
        _ => json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            [{"topologyKey": HOST, "labelSelector": own}]}}}),
    }
}

fn pod(name: &str, app: u8, node: Option<usize>, spec: Value) -> Box<Pod> {
    let mut s = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]});
    for (k, v) in spec.as_object().into_iter().flatten() {
        s[k] = v.clone();
    }
    let mut p = json!({"metadata": {"name": name, "namespace": "ns", "labels": {"app": format!("a{app}")}}, "spec": s});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(format!("n{n}"));
        p["status"] = json!({"phase": "Running"});
    }
    Box::new(serde_json::from_value(p).unwrap())
}

#[derive(Clone, Debug)]
enum Op {
    /// A pod of app `.0` bound to node `.1` by another scheduler.
    Bind(u8, usize),
    /// The `.0`-th bound pod (of those the history bound) deleted.
    Delete(usize),
    /// The `.0`-th bound pod relabeled to app `.1`.
    Relabel(usize, u8),
    /// Node `.0` gets zone `.1` (as [`node`] says).
    Zone(usize, u8),
    AddNode(u8),
    DeleteNode(usize),
    Heartbeat(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u8..2, 0usize..6).prop_map(|(a, n)| Op::Bind(a, n)),
        1 => (0usize..8).prop_map(Op::Delete),
        2 => (0usize..8, 0u8..2).prop_map(|(i, a)| Op::Relabel(i, a)),
        1 => (0usize..6, 0u8..5).prop_map(|(n, z)| Op::Zone(n, z)),
        1 => (0u8..5).prop_map(Op::AddNode),
        2 => (0usize..6).prop_map(Op::DeleteNode),
        4 => (0usize..6).prop_map(Op::Heartbeat),
    ]
}

/// Runs what is ready at `now`, confirming each binding at once (itself a change, which may
/// wake others: run again until a run places nothing).
fn schedule_and_bind(engine: &mut Engine, now: u64) {
    loop {
        let plan = engine.schedule(now);
        if plan.placements.is_empty() {
            return;
        }
        for (p, n) in plan.placements {
            let c = engine.cluster();
            let mut bound = Box::new(c.pod(p).pod.object());
            bound.spec.get_or_insert_with(Default::default).node_name = Some(c.node(n).name().to_string());
            engine.apply(Change::UpsertPod(bound), now).unwrap();
        }
    }
}

/// Runs the engine until idle from `now` (every backoff over): each change of a history then
/// finds the pods that failed waiting in the unschedulable pool, where only a wake moves them.
fn settle(engine: &mut Engine, now: &mut u64) {
    schedule_and_bind(engine, *now);
    for _ in 0..100 {
        let Some(t) = engine.next_wakeup() else { break };
        *now = (*now).max(t);
        schedule_and_bind(engine, *now);
    }
}

/// The history's changes, applied one at a time with scheduling after each.
struct History {
    zones: Vec<u8>,
    bound: Vec<(String, u8)>,
    heartbeats: u32,
}

impl History {
    fn apply(&mut self, engine: &mut Engine, op: &Op, now: u64) {
        let n = self.zones.len();
        let change = match *op {
            Op::Bind(app, node) => {
                let name = format!("b{}", self.bound.len());
                self.bound.push((name.clone(), app));
                Change::UpsertPod(pod(&name, app, Some(node % n), json!({})))
            }
            Op::Delete(i) if !self.bound.is_empty() => {
                let (name, _) = self.bound.remove(i % self.bound.len());
                Change::DeletePod(format!("ns/{name}"))
            }
            Op::Relabel(i, app) if !self.bound.is_empty() => {
                let k = i % self.bound.len();
                self.bound[k].1 = app;
                let key = format!("ns/{}", self.bound[k].0);
                let Some(id) = engine.cluster().pod_id(&key) else { return };
                let mut p = Box::new(engine.cluster().pod(id).pod.object());
                p.metadata.labels.get_or_insert_with(Default::default).insert("app".into(), format!("a{app}"));
                Change::UpsertPod(p)
            }
            Op::Zone(i, zone) => {
                self.zones[i % n] = zone;
                Change::UpsertNode(node(i % n, zone, self.heartbeats))
            }
            Op::AddNode(zone) => {
                self.zones.push(zone);
                Change::UpsertNode(node(n, zone, self.heartbeats))
            }
            Op::DeleteNode(i) => Change::DeleteNode(format!("n{}", i % n)),
            Op::Heartbeat(i) => {
                self.heartbeats += 1;
                Change::UpsertNode(node(i % n, self.zones[i % n], self.heartbeats))
            }
            _ => return,
        };
        engine.apply(change, now).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn no_spread_or_affinity_pod_is_stranded_by_the_hints(
        zones in prop::collection::vec(0u8..5, 1..4),
        pending in prop::collection::vec((0u8..5, 0u8..2), 1..6),
        ops in prop::collection::vec(op(), 0..12),
    ) {
        let nodes = zones.iter().enumerate().map(|(i, z)| *node(i, *z, 0)).collect();
        let cluster = Cluster::build(nodes, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
        let mut engine = Engine::new(cluster, SchedulerConfig::default(), None);
        let mut now = 0;
        for (i, (r, app)) in pending.iter().enumerate() {
            engine.apply(Change::UpsertPod(pod(&format!("p{i}"), *app, None, rule(*r, *app))), now).unwrap();
        }
        settle(&mut engine, &mut now);
        let mut history = History { zones, bound: Vec::new(), heartbeats: 0 };
        for op in &ops {
            now += 500;
            history.apply(&mut engine, op, now);
            settle(&mut engine, &mut now);
        }
        prop_assert_eq!(engine.next_wakeup(), None, "idle");
        let mut c = engine.into_cluster();
        let pending: Vec<String> =
            c.pods.iter().filter(|p| p.state == PodState::Pending).map(|p| p.key.clone()).collect();
        let fresh = Scheduler::new(&mut c, SchedulerConfig::default()).plan();
        let placed: Vec<&str> = fresh.placements.iter().map(|(p, _)| c.pod(*p).key.as_str()).collect();
        prop_assert!(placed.is_empty(), "stranded: {placed:?} of pending {pending:?}");
    }
}
