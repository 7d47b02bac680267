//! Upstream's queueing-hint tables of PodTopologySpread and InterPodAffinity
//! (`isSchedulableAfterPodChange`, `isSchedulableAfterNodeChange` in kube-scheduler's plugin
//! tests), as muster data: a pending pod the plugin rejected, the objects before, one change.
//! The pod fails into a real `SchedulingQueue` waiting for `cycle::wake_for`'s events, with
//! `hints::checked_for`'s to check; the store's events and object for the change go to
//! `on_event_checked` with `hints::Seen::queues` as the hint. The pod is woken when it leaves the
//! unschedulable pool, or when the change requeues it itself (its own update). Every case
//! upstream queues, muster wakes; the cases upstream skips, muster skips too but for two of the
//! pending pod's own updates (a new unrelated label, a new toleration without `nodeTaintsPolicy:
//! Honor`: muster's store requeues a pending pod on any change Filter reads) — the counts are
//! pinned: PodTopologySpread 33 cases (13 upstream queues, all woken; of 13 + 7 skips muster skips
//! 11 + 7), InterPodAffinity 29 cases (14 queues, all woken; of 10 + 5 skips muster skips all).

use k8s_openapi::api::core::v1::{Node, Pod};
use std::cmp::Reverse;

use muster_sched::cycle::{hints, wake_for};
use muster_sched::plugins::pod_topology_spread::PodTopologySpreadArgs;
use muster_sched::queue::{OrderKey, SchedulingQueue};
use muster_sched::{Change, Cluster, FitError, QueueEntry, Rejection, SchedulerNames};
use serde_json::{Value, json};

const PTS: &str = "PodTopologySpread";
const IPA: &str = "InterPodAffinity";

/// A spread constraint over `key` selecting pods that have label `selects` (upstream's
/// `fooSelector`, `barSelector`: an `Exists` requirement).
fn spread(key: &str, selects: &str) -> Value {
    json!({"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchExpressions": [{"key": selects, "operator": "Exists"}]}})
}

fn term(topology: &str, selector: Value) -> Value {
    json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": topology, "labelSelector": selector}]})
}

/// `service In (securityscan, value2)`.
fn service_in() -> Value {
    json!({"matchExpressions": [{"key": "service", "operator": "In", "values": ["securityscan", "value2"]}]})
}

fn exists(key: &str) -> Value {
    json!({"key": key, "operator": "Exists"})
}

/// A pod named `name` with `labels`, bound to `fake-node` when `bound`, `spec` merged in.
fn pod(name: &str, labels: Value, bound: bool, spec: Value) -> Box<Pod> {
    let mut s = json!({"containers": [{"name": "c"}]});
    for (k, v) in spec.as_object().into_iter().flatten() {
        s[k] = v.clone();
    }
    if bound {
        s["nodeName"] = json!("fake-node");
    }
    Box::new(
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": s}),
        )
        .unwrap(),
    )
}

fn node(name: &str, labels: Value, taints: Value) -> Box<Node> {
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}))
        .unwrap(),
    )
}

fn other(labels: Value, bound: bool) -> Box<Pod> {
    pod("other", labels, bound, json!({}))
}

/// The change of a case, with the object it replaces or deletes.
enum Event {
    AddPod(Box<Pod>),
    UpdatePod(Box<Pod>, Box<Pod>),
    DeletePod(Box<Pod>),
    /// The pending pod's own update, to this pod.
    OwnUpdate(Box<Pod>),
    AddNode(Box<Node>),
    UpdateNode(Box<Node>, Box<Node>),
    DeleteNode(Box<Node>),
}

struct Case {
    name: &'static str,
    plugin: &'static str,
    pending: Box<Pod>,
    event: Event,
    upstream_queues: bool,
}

/// Whether muster wakes the case's pending pod.
fn wakes(case: Case) -> bool {
    let mut nodes = vec![*node("fake-node", json!({}), json!([]))];
    let mut pods = vec![case.pending];
    match &case.event {
        Event::UpdatePod(old, _) | Event::DeletePod(old) => pods.push(old.clone()),
        Event::UpdateNode(old, _) | Event::DeleteNode(old) => nodes.push(*old.clone()),
        _ => {}
    }
    let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    let p = cluster.pod_id("default/p").unwrap();
    let rejected = FitError::rejected(1, vec![Rejection::new(case.plugin, false, "rejected")], Vec::new());
    let args = PodTopologySpreadArgs::default();
    let waits = wake_for(cluster.pod(p), &rejected, &args);
    let checked = hints::checked_for(&rejected, waits);
    let entry = QueueEntry::Pod(p);
    let mut queue = SchedulingQueue::new();
    queue.add(entry, OrderKey { priority: Reverse(0), created: None, key: "default/p".into() });
    assert_eq!(queue.pop(0), Some(entry));
    queue.failed_checked(entry, waits, checked, 0);
    let change = match case.event {
        Event::AddPod(new) | Event::UpdatePod(_, new) | Event::OwnUpdate(new) => Change::UpsertPod(new),
        Event::DeletePod(old) => Change::DeletePod(format!("default/{}", old.metadata.name.clone().unwrap())),
        Event::AddNode(new) | Event::UpdateNode(_, new) => Change::UpsertNode(new),
        Event::DeleteNode(old) => Change::DeleteNode(old.metadata.name.clone().unwrap()),
    };
    let applied = cluster.apply(change).unwrap();
    let seen = hints::Seen::of(&cluster, applied.wake, &applied.subject);
    queue.on_event_checked(applied.wake, 0, |_, c| seen.queues(&cluster, p, c, |_| &args));
    queue.counts().2 == 0 || applied.queue.contains(&entry)
}

fn spread_node_cases() -> Vec<Case> {
    let zone = || json!({"topologySpreadConstraints": [spread("zone", "foo")]});
    let both = || json!({"topologySpreadConstraints": [spread("zone", "foo"), spread("node", "foo")]});
    let p = |spec: Value| pod("p", json!({}), false, spec);
    let n = |labels: Value| node("node-a", labels, json!([]));
    let tainted = |labels: Value, key: &str| {
        node("node-a", labels, json!([{"key": key, "value": "bbb", "effect": "NoSchedule"}]))
    };
    let case =
        |name, spec, event, upstream_queues| Case { name, plugin: PTS, pending: p(spec), event, upstream_queues };
    vec![
        case(
            "node updates label which matches topologyKey",
            zone(),
            Event::UpdateNode(n(json!({"zone": "zone1"})), n(json!({"zone": "zone2"}))),
            true,
        ),
        case(
            "node that doesn't match topologySpreadConstraints updates non-related label",
            zone(),
            Event::UpdateNode(n(json!({"foo": "bar1"})), n(json!({"foo": "bar2"}))),
            false,
        ),
        case(
            "node that match topologySpreadConstraints adds non-related label",
            both(),
            Event::UpdateNode(
                n(json!({"zone": "zone1", "node": "node1", "foo": "bar"})),
                n(json!({"zone": "zone1", "node": "node1"})),
            ),
            false,
        ),
        case("create node with non-related labels", zone(), Event::AddNode(n(json!({"foo": "bar"}))), false),
        case("create node with related labels", zone(), Event::AddNode(n(json!({"zone": "zone1"}))), true),
        case("delete node with non-related labels", zone(), Event::DeleteNode(n(json!({"foo": "bar"}))), false),
        case("delete node with related labels", zone(), Event::DeleteNode(n(json!({"zone": "zone1"}))), true),
        case(
            "add node with related labels that only match one of topologySpreadConstraints",
            both(),
            Event::AddNode(n(json!({"zone": "zone1"}))),
            false,
        ),
        case(
            "add node with related labels that match all topologySpreadConstraints",
            both(),
            Event::AddNode(n(json!({"zone": "zone1", "node": "node1"}))),
            true,
        ),
        case(
            "update node with related labels that only match one of topologySpreadConstraints",
            both(),
            Event::UpdateNode(n(json!({"zone": "zone1"})), n(json!({"zone": "zone1"}))),
            false,
        ),
        case(
            "update node with related labels that match all topologySpreadConstraints",
            both(),
            Event::UpdateNode(
                n(json!({"zone": "zone1", "node": "node1"})),
                n(json!({"zone": "zone1", "node": "node2"})),
            ),
            true,
        ),
        case(
            "update node with different taints that match all topologySpreadConstraints",
            both(),
            Event::UpdateNode(
                tainted(json!({"zone": "zone1", "node": "node1"}), "aaa"),
                tainted(json!({"zone": "zone1", "node": "node1"}), "ccc"),
            ),
            true,
        ),
        case(
            "update node with different taints that only match one of topologySpreadConstraints",
            both(),
            Event::UpdateNode(tainted(json!({"node": "node1"}), "aaa"), tainted(json!({"node": "node1"}), "ccc")),
            false,
        ),
    ]
}

fn spread_pod_cases() -> Vec<Case> {
    let one = || json!({"topologySpreadConstraints": [spread("zone", "foo")]});
    let two = |honor: Option<&str>| {
        let mut zone = spread("zone", "foo");
        if let Some(policy) = honor {
            zone["nodeTaintsPolicy"] = json!(policy);
        }
        json!({"topologySpreadConstraints": [zone, spread("node", "bar")]})
    };
    let p = |spec: Value| pod("p", json!({"foo": ""}), false, spec);
    let case =
        |name, spec, event, upstream_queues| Case { name, plugin: PTS, pending: p(spec), event, upstream_queues };
    let own = |spec: Value, labels: Value, tolerations: Value| {
        let mut s = spec;
        s["tolerations"] = tolerations;
        pod("p", labels, false, s)
    };
    let mut other_ns = other(json!({"foo": ""}), true);
    other_ns.metadata.namespace = Some("fake-namespace".into());
    vec![
        case(
            "add pod with labels match topologySpreadConstraints selector",
            one(),
            Event::AddPod(other(json!({"foo": ""}), true)),
            true,
        ),
        case("add un-scheduled pod", one(), Event::AddPod(other(json!({"foo": ""}), false)), false),
        case(
            "update un-scheduled pod",
            one(),
            Event::UpdatePod(other(json!({"bar": ""}), false), other(json!({"foo": ""}), false)),
            false,
        ),
        case("delete un-scheduled pod", one(), Event::DeletePod(other(json!({"foo": ""}), false)), false),
        case("add pod with different namespace", one(), Event::AddPod(other_ns), false),
        case(
            "add pod with labels don't match topologySpreadConstraints selector",
            one(),
            Event::AddPod(other(json!({"bar": ""}), true)),
            false,
        ),
        case(
            "delete pod with labels that match topologySpreadConstraints selector",
            one(),
            Event::DeletePod(other(json!({"foo": ""}), true)),
            true,
        ),
        case(
            "delete pod with labels that don't match topologySpreadConstraints selector",
            one(),
            Event::DeletePod(other(json!({"bar": ""}), true)),
            false,
        ),
        case(
            "update pod's non-related label",
            one(),
            Event::UpdatePod(
                other(json!({"foo": "", "bar": "bar1"}), true),
                other(json!({"foo": "", "bar": "bar2"}), true),
            ),
            false,
        ),
        case(
            "add pod's label that matches topologySpreadConstraints selector",
            one(),
            Event::UpdatePod(other(json!({}), true), other(json!({"foo": ""}), true)),
            true,
        ),
        case(
            "delete pod label that matches topologySpreadConstraints selector",
            one(),
            Event::UpdatePod(other(json!({"foo": ""}), true), other(json!({}), true)),
            true,
        ),
        case(
            "change pod's label that matches topologySpreadConstraints selector",
            one(),
            Event::UpdatePod(other(json!({"foo": "foo1"}), true), other(json!({"foo": "foo2"}), true)),
            false,
        ),
        case(
            "change pod's label that doesn't match topologySpreadConstraints selector",
            one(),
            Event::UpdatePod(
                other(json!({"foo": "", "bar": "bar1"}), true),
                other(json!({"foo": "", "bar": "bar2"}), true),
            ),
            false,
        ),
        case(
            "add pod's label that matches topologySpreadConstraints selector with multi topologySpreadConstraints",
            two(None),
            Event::UpdatePod(other(json!({"foo": ""}), true), other(json!({"foo": "", "bar": "bar2"}), true)),
            true,
        ),
        case(
            "change pod's label that doesn't match topologySpreadConstraints selector with multi topologySpreadConstraints",
            two(None),
            Event::UpdatePod(other(json!({"foo": ""}), true), other(json!({"foo": "", "baz": ""}), true)),
            false,
        ),
        case(
            "change pod's label that match topologySpreadConstraints selector with multi topologySpreadConstraints",
            two(None),
            Event::UpdatePod(
                other(json!({"foo": "", "bar": ""}), true),
                other(json!({"foo": "", "bar": "bar2"}), true),
            ),
            false,
        ),
        case(
            "the unschedulable Pod has topologySpreadConstraint with NodeTaintsPolicy:Honor and has got a new toleration",
            two(Some("Honor")),
            Event::OwnUpdate(own(
                two(Some("Honor")),
                json!({"foo": ""}),
                json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
            )),
            true,
        ),
        case(
            "the unschedulable Pod has topologySpreadConstraint without NodeTaintsPolicy:Honor and has got a new toleration",
            two(Some("Ignore")),
            Event::OwnUpdate(own(
                two(Some("Ignore")),
                json!({"foo": ""}),
                json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
            )),
            false,
        ),
        Case {
            name: "the unschedulable Pod has topologySpreadConstraint and has got a new label matching the selector of the constraint",
            plugin: PTS,
            pending: pod("p", json!({}), false, two(Some("Ignore"))),
            event: Event::OwnUpdate(own(two(Some("Ignore")), json!({"foo": ""}), json!([]))),
            upstream_queues: true,
        },
        Case {
            name: "the unschedulable Pod has topologySpreadConstraint and has got a new unrelated label",
            plugin: PTS,
            pending: pod("p", json!({}), false, two(Some("Ignore"))),
            event: Event::OwnUpdate(own(two(Some("Ignore")), json!({"unrelated": ""}), json!([]))),
            upstream_queues: false,
        },
    ]
}

fn affinity_pod_cases() -> Vec<Case> {
    let affinity = || json!({"affinity": {"podAffinity": term("region", service_in())}});
    let two_terms = || {
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "hostname", "labelSelector": {"matchExpressions": [exists("aaa")]}},
        {"topologyKey": "hostname", "labelSelector": {"matchExpressions": [exists("bbb")]}}]}}})
    };
    let anti = || json!({"affinity": {"podAntiAffinity": term("region", service_in())}});
    let case = |name, spec, event, upstream_queues| Case {
        name,
        plugin: IPA,
        pending: pod("p", json!({}), false, spec),
        event,
        upstream_queues,
    };
    let svc = |v: &str| json!({"service": v});
    let with_anti = |labels: Value| pod("other", labels, true, anti());
    vec![
        case(
            "add a pod which matches the pod affinity",
            affinity(),
            Event::AddPod(other(svc("securityscan"), true)),
            true,
        ),
        case("add an un-scheduled pod", affinity(), Event::AddPod(other(svc("securityscan"), false)), false),
        case(
            "add a pod which doesn't match the pod affinity",
            affinity(),
            Event::AddPod(other(json!({"aaa": "a"}), true)),
            false,
        ),
        case(
            "update a pod from non-match to match pod affinity",
            affinity(),
            Event::UpdatePod(other(json!({"aaa": "a"}), true), other(svc("securityscan"), true)),
            true,
        ),
        case(
            "the updating pod matches target pod's affinity both before and after label changes",
            affinity(),
            Event::UpdatePod(other(svc("value2"), true), other(svc("securityscan"), true)),
            false,
        ),
        case(
            "update an un-scheduled pod",
            affinity(),
            Event::UpdatePod(other(json!({"aaa": "a"}), false), other(svc("securityscan"), false)),
            false,
        ),
        case(
            "update a pod from match to non-match the pod affinity",
            affinity(),
            Event::UpdatePod(other(svc("securityscan"), true), other(json!({"aaa": "a"}), true)),
            false,
        ),
        case(
            "update a pod from match to non-match pod's affinity - multiple terms case",
            two_terms(),
            Event::UpdatePod(other(json!({"aaa": "a"}), true), other(svc("securityscan"), true)),
            false,
        ),
        case(
            "update a pod from non-match to match pod's affinity - multiple terms case",
            two_terms(),
            Event::UpdatePod(other(json!({"aaa": "a"}), true), other(json!({"aaa": "", "bbb": ""}), true)),
            true,
        ),
        Case {
            name: "updated pod is the target pod",
            plugin: IPA,
            pending: pod("p", json!({"foo": "bar"}), false, json!({})),
            event: Event::OwnUpdate(pod("p", json!({"foo": "baz"}), false, json!({}))),
            upstream_queues: true,
        },
        case(
            "modify pod label to change it from satisfying pod anti-affinity to not satisfying anti-affinity",
            anti(),
            Event::UpdatePod(other(svc("securityscan"), true), other(svc("aaaa"), true)),
            true,
        ),
        case(
            "modify pod label to change it from not satisfying pod anti-affinity to satisfying anti-affinity",
            anti(),
            Event::UpdatePod(other(svc("bbb"), true), other(svc("securityscan"), true)),
            false,
        ),
        case(
            "delete a pod which doesn't match pod's anti-affinity",
            anti(),
            Event::DeletePod(other(json!({"aaa": "a"}), true)),
            false,
        ),
        case(
            "delete a pod which matches pod's anti-affinity",
            anti(),
            Event::DeletePod(other(svc("securityscan"), true)),
            true,
        ),
        Case {
            name: "delete a pod with anti-affinity that matches pending pod",
            plugin: IPA,
            pending: pod("p", svc("securityscan"), false, json!({})),
            event: Event::DeletePod(with_anti(json!({}))),
            upstream_queues: true,
        },
        Case {
            name: "delete a pod with anti-affinity that doesn't match pending pod",
            plugin: IPA,
            pending: pod("p", svc("foo"), false, json!({})),
            event: Event::DeletePod(with_anti(json!({}))),
            upstream_queues: false,
        },
        Case {
            name: "delete a pod which doesn't match pending pod's anti-affinity and has anti-affinity that doesn't match pending pod",
            plugin: IPA,
            pending: pod("p", svc("foo"), false, anti()),
            event: Event::DeletePod(with_anti(svc("foo"))),
            upstream_queues: false,
        },
    ]
}

fn affinity_node_cases() -> Vec<Case> {
    let affinity = |topology: &str| json!({"affinity": {"podAffinity": term(topology, service_in())}});
    let anti = || json!({"affinity": {"podAntiAffinity": term("zone", json!({"matchLabels": {"another": "label"}}))}});
    let n = |labels: Value| node("node-a", labels, json!([]));
    let case = |name, spec, event, upstream_queues| Case {
        name,
        plugin: IPA,
        pending: pod("p", json!({}), false, spec),
        event,
        upstream_queues,
    };
    let zone = |z: &str| json!({"zone": z});
    vec![
        case(
            "add a new node with matched pod affinity topologyKey",
            affinity("zone"),
            Event::AddNode(n(zone("zone1"))),
            true,
        ),
        case("add a new node without matched topologyKey", affinity("region"), Event::AddNode(n(zone("zone1"))), false),
        case(
            "update node label but not topologyKey",
            affinity("zone"),
            Event::UpdateNode(n(json!({"aaa": "a"})), n(json!({"aaa": "b"}))),
            false,
        ),
        case(
            "update node label that isn't related to the pod affinity",
            affinity("zone"),
            Event::UpdateNode(n(zone("zone1")), n(json!({"zone": "zone1", "unrelated-label": "unrelated"}))),
            false,
        ),
        case(
            "update node with different affinity topologyKey value",
            affinity("zone"),
            Event::UpdateNode(n(zone("zone1")), n(zone("zone2"))),
            true,
        ),
        case(
            "update node to have the affinity topology label",
            affinity("zone"),
            Event::UpdateNode(n(json!({"aaa": "a"})), n(zone("zone1"))),
            true,
        ),
        case(
            "add a new node with matched pod anti-affinity topologyKey",
            anti(),
            Event::AddNode(n(zone("zone1"))),
            true,
        ),
        case(
            "add a new node without matched pod anti-affinity topologyKey",
            anti(),
            Event::AddNode(n(json!({}))),
            true,
        ),
        case(
            "update node label that isn't related to the pod anti-affinity",
            anti(),
            Event::UpdateNode(n(zone("zone1")), n(json!({"zone": "zone1", "unrelated-label": "unrelated"}))),
            false,
        ),
        case(
            "update node with different anti-affinity topologyKey value",
            anti(),
            Event::UpdateNode(n(zone("zone1")), n(zone("zone2"))),
            true,
        ),
        case(
            "update node to have the anti-affinity topology label",
            anti(),
            Event::UpdateNode(n(json!({"aaa": "a"})), n(zone("zone1"))),
            false,
        ),
        case(
            "update node label not to have anti-affinity topology label",
            anti(),
            Event::UpdateNode(n(zone("zone1")), n(json!({"aaa": "a"}))),
            true,
        ),
    ]
}

/// Runs a table: every case upstream queues is woken; returns (cases, upstream skips, skips
/// muster makes too).
fn run(cases: Vec<Case>) -> (usize, usize, usize) {
    let (mut total, mut skips, mut also) = (0, 0, 0);
    for case in cases {
        let (name, queues) = (case.name, case.upstream_queues);
        let woken = wakes(case);
        assert!(!queues || woken, "{name}: upstream queues the pod, muster does not wake it");
        total += 1;
        if !queues {
            skips += 1;
            also += usize::from(!woken);
        }
    }
    (total, skips, also)
}

#[test]
fn pod_topology_spread_wakes_whenever_upstream_queues() {
    assert_eq!(run(spread_node_cases()), (13, 7, 7), "node cases: total, upstream skips, muster skips");
    assert_eq!(run(spread_pod_cases()), (20, 13, 11), "pod cases: total, upstream skips, muster skips");
}

#[test]
fn inter_pod_affinity_wakes_whenever_upstream_queues() {
    assert_eq!(run(affinity_node_cases()), (12, 5, 5), "node cases: total, upstream skips, muster skips");
    assert_eq!(run(affinity_pod_cases()), (17, 10, 10), "pod cases: total, upstream skips, muster skips");
}
