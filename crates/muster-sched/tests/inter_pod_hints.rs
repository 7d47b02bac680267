//! Queueing hints of PodTopologySpread and InterPodAffinity, one change at a time: a pod either
//! plugin rejected sleeps through an event that cannot help it (a node's heartbeat) and is tried
//! again, and placed, after the event that does (a pod bound, confirmed, deleted or relabeled, a
//! node added or relabeled); a pod with neither plugin's constraints sleeps through other pods'
//! bindings.

use k8s_openapi::api::core::v1::{Node, Pod};
use muster_sched::{Change, Cluster, Engine, QueueEntry, SchedulerConfig, SchedulerNames};
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

/// A node with 4 CPUs; `zone` labels it, `heartbeat` stands for a status-only update.
fn node(name: &str, zone: Option<&str>, heartbeat: u32) -> Box<Node> {
    let mut labels = json!({HOST: name});
    if let Some(z) = zone {
        labels[ZONE] = json!(z);
    }
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastHeartbeatTime": format!("2026-01-01T00:00:{:02}Z", heartbeat % 60)}]}}))
        .unwrap(),
    )
}

/// A pod in namespace `web` labelled `app`, bound to `node` (running) or pending, with `spec`
/// merged into its spec.
fn pod(name: &str, app: &str, node: Option<&str>, spec: Value) -> Box<Pod> {
    let mut s = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]});
    for (k, v) in spec.as_object().into_iter().flatten() {
        s[k] = v.clone();
    }
    let mut p = json!({"metadata": {"name": name, "namespace": "web", "labels": {"app": app}}, "spec": s});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
        p["status"] = json!({"phase": "Running"});
    }
    Box::new(serde_json::from_value(p).unwrap())
}

fn engine(nodes: Vec<Box<Node>>, pods: Vec<Box<Pod>>) -> Engine<'static> {
    let nodes = nodes.into_iter().map(|n| *n).collect();
    let cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    Engine::new(cluster, SchedulerConfig::default(), None)
}

fn entry(engine: &Engine, key: &str) -> QueueEntry {
    QueueEntry::Pod(engine.cluster().pod_id(key).unwrap())
}

/// Runs the entries ready at `now`; returns the pods placed, as `namespace/name` and node name.
fn schedule(engine: &mut Engine, now: u64) -> Vec<(String, String)> {
    let plan = engine.schedule(now);
    let c = engine.cluster();
    plan.placements.iter().map(|(p, n)| (c.pod(*p).key.clone(), c.node(*n).name().to_string())).collect()
}

fn on(pod: &str, node: &str) -> Vec<(String, String)> {
    vec![(pod.to_string(), node.to_string())]
}

/// Asserts that `key` failed once, waits in the unschedulable pool, and that nothing is due.
fn asleep(engine: &Engine, key: &str) {
    assert_eq!(engine.queue().counts(), (0, 0, 1), "{key} waits in the unschedulable pool");
    assert_eq!(engine.queue().attempts(entry(engine, key)), 1, "{key} was not tried again");
    assert_eq!(engine.next_wakeup(), None);
}

/// Spread over hostnames with minDomains 3 on two nodes: the global minimum is 0 while there
/// are fewer than 3 domains, so PodTopologySpread rejects both nodes. A node's heartbeat leaves
/// the pod asleep; a third node wakes it.
#[test]
fn a_spread_rejected_pod_sleeps_through_a_heartbeat_and_wakes_for_a_new_node() {
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": HOST, "minDomains": 3,
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "api"}}}]});
    let mut e = engine(
        vec![node("n0", Some("a"), 0), node("n1", Some("a"), 0)],
        vec![pod("api-0", "api", Some("n0"), json!({})), pod("api-1", "api", Some("n1"), json!({}))],
    );
    e.apply(Change::UpsertPod(pod("api-2", "api", None, spread)), 0).unwrap();
    let first = e.schedule(0);
    assert_eq!(
        first.unschedulable.get(0).unwrap().1.message(),
        "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints."
    );
    asleep(&e, "web/api-2");

    e.apply(Change::UpsertNode(node("n1", Some("a"), 10)), 10_000).unwrap();
    asleep(&e, "web/api-2");

    e.apply(Change::UpsertNode(node("n2", Some("a"), 0)), 20_000).unwrap();
    assert_eq!(schedule(&mut e, 20_000), on("web/api-2", "n2"));
}

/// A node without the zone label is no domain of a zone spread constraint: the pod fits
/// nowhere until the label comes. A heartbeat does not wake it; the label does (and with nothing
/// else to do, it is tried within its 1 s backoff: `SchedulerPopFromBackoffQ`).
#[test]
fn a_spread_rejected_pod_wakes_when_the_node_gets_its_topology_label() {
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "api"}}}]});
    let mut e = engine(vec![node("n0", None, 0)], Vec::new());
    e.apply(Change::UpsertPod(pod("api-0", "api", None, spread)), 0).unwrap();
    let first = e.schedule(0);
    assert!(
        first.unschedulable.get(0).unwrap().1.message().contains("(missing required label)"),
        "{}",
        first.unschedulable.get(0).unwrap().1.message()
    );
    e.apply(Change::UpsertNode(node("n0", None, 5)), 100).unwrap();
    asleep(&e, "web/api-0");

    e.apply(Change::UpsertNode(node("n0", Some("a"), 5)), 200).unwrap();
    assert_eq!(e.queue().counts(), (0, 1, 0), "woken into its backoff");
    assert_eq!(schedule(&mut e, 200), on("web/api-0", "n0"));
}

/// Required affinity to a `db` pod that does not run yet: InterPodAffinity rejects every node.
/// A heartbeat leaves the pod asleep; the `db` pod, bound by another scheduler, wakes it, and it
/// joins the `db` pod's node.
#[test]
fn an_affinity_rejected_pod_wakes_when_a_matching_pod_is_bound() {
    let affinity = json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        [{"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "db"}}}]}}});
    let mut e = engine(vec![node("n0", Some("a"), 0), node("n1", Some("a"), 0)], Vec::new());
    e.apply(Change::UpsertPod(pod("api-0", "api", None, affinity)), 0).unwrap();
    let first = e.schedule(0);
    assert!(first.unschedulable.get(0).unwrap().1.message().contains("didn't match pod affinity rules"));
    e.apply(Change::UpsertNode(node("n0", Some("a"), 7)), 3_000).unwrap();
    asleep(&e, "web/api-0");

    e.apply(Change::UpsertPod(pod("db-0", "db", Some("n1"), json!({}))), 4_000).unwrap();
    assert_eq!(schedule(&mut e, 4_000), on("web/api-0", "n1"));
}

/// The `db` pod is this scheduler's: placed (assumed) after the affinity pod failed, it wakes
/// nobody at Reserve — upstream's `AssignedPodAdd` comes with the binding — and the binding's
/// confirmation wakes the waiting pod.
#[test]
fn an_affinity_rejected_pod_wakes_when_the_binding_of_a_matching_pod_is_confirmed() {
    let affinity = json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        [{"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "db"}}}]}}});
    let mut e = engine(vec![node("n0", Some("a"), 0)], Vec::new());
    e.apply(Change::UpsertPod(pod("api-0", "api", None, affinity)), 0).unwrap();
    assert_eq!(e.schedule(0).unschedulable.len(), 1);
    e.apply(Change::UpsertPod(pod("db-0", "db", None, json!({}))), 2_000).unwrap();
    assert_eq!(schedule(&mut e, 2_000), on("web/db-0", "n0"));
    asleep(&e, "web/api-0");

    e.apply(Change::UpsertPod(pod("db-0", "db", Some("n0"), json!({}))), 3_000).unwrap();
    assert_eq!(schedule(&mut e, 3_000), on("web/api-0", "n0"));
}

/// Required anti-affinity to `web` pods on each host, with a `web` pod on the only node: a
/// heartbeat leaves the pod asleep; the `web` pod's deletion wakes it.
#[test]
fn an_anti_affinity_rejected_pod_wakes_when_the_matching_pod_is_deleted() {
    let anti = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        [{"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "web"}}}]}}});
    let mut e = engine(vec![node("n0", Some("a"), 0)], vec![pod("web-0", "web", Some("n0"), json!({}))]);
    e.apply(Change::UpsertPod(pod("web-1", "web", None, anti)), 0).unwrap();
    let first = e.schedule(0);
    assert!(first.unschedulable.get(0).unwrap().1.message().contains("didn't match pod anti-affinity rules"));
    e.apply(Change::UpsertNode(node("n0", Some("a"), 9)), 2_000).unwrap();
    asleep(&e, "web/web-1");

    e.apply(Change::DeletePod("web/web-0".into()), 3_000).unwrap();
    assert_eq!(schedule(&mut e, 3_000), on("web/web-1", "n0"));
}

/// An assigned pod relabeled out of the selector of a required anti-affinity term wakes the
/// pod it kept out.
#[test]
fn an_anti_affinity_rejected_pod_wakes_when_the_matching_pod_is_relabeled() {
    let anti = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        [{"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "web"}}}]}}});
    let mut e = engine(vec![node("n0", Some("a"), 0)], vec![pod("web-0", "web", Some("n0"), json!({}))]);
    e.apply(Change::UpsertPod(pod("web-1", "web", None, anti)), 0).unwrap();
    assert_eq!(e.schedule(0).unschedulable.len(), 1);
    asleep(&e, "web/web-1");

    e.apply(Change::UpsertPod(pod("web-0", "old-web", Some("n0"), json!({}))), 3_000).unwrap();
    assert_eq!(schedule(&mut e, 3_000), on("web/web-1", "n0"));
}

/// A failure the queue cannot narrow down (here a PodGroup that does not exist yet) waits for
/// any event — but not for other pods' bindings when the pod has neither hard spread
/// constraints nor required pod (anti-)affinity: upstream's hints of both plugins skip it, and
/// no other plugin registers an assigned pod's arrival.
#[test]
fn a_pod_without_spread_or_affinity_sleeps_through_other_pods_bindings() {
    let member = json!({"schedulingGroup": {"podGroupName": "train"}});
    let mut e = engine(vec![node("n0", Some("a"), 0)], Vec::new());
    e.apply(Change::UpsertPod(pod("train-0", "train", None, member)), 0).unwrap();
    let first = e.schedule(0);
    assert!(first.unschedulable.get(0).unwrap().1.message().contains("podgroup \"web/train\" not found"));
    e.apply(Change::UpsertPod(pod("db-0", "db", Some("n0"), json!({}))), 1_000).unwrap();
    e.apply(Change::UpsertPod(pod("db-0", "db2", Some("n0"), json!({}))), 2_000).unwrap();
    asleep(&e, "web/train-0");
}
