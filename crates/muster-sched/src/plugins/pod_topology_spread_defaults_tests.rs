//! PodTopologySpread's default constraints after upstream's `filtering_test.go` and
//! `scoring_test.go` cases with Services and controllers (own data; the facts each case checks
//! carry over): which constraints a pod gets, which pods they count, and the scores and
//! verdicts that follow.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::plugins::test_cluster::{cluster, fits, node, pod, spread_scores, verdicts, zoned};
use crate::spread_selectors::SpreadSelector;

fn service(name: &str, selector: Value) -> SpreadSelector {
    SpreadSelector::service(
        &serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
                                       "spec": {"selector": selector}}))
        .unwrap(),
    )
}

fn controller(kind: &str, name: &str, selector: Value) -> SpreadSelector {
    let object = json!({"metadata": {"name": name, "namespace": "default"},
                        "spec": {"selector": selector, "serviceName": "s", "template": {}}});
    match kind {
        "ReplicaSet" => SpreadSelector::replica_set(&serde_json::from_value(object).unwrap()),
        "StatefulSet" => SpreadSelector::stateful_set(&serde_json::from_value(object).unwrap()),
        _ => SpreadSelector::replication_controller(&serde_json::from_value(object).unwrap()),
    }
}

/// `pod` owned by the controller `kind`/`name` (its apiVersion as the API server sets it).
fn owned(mut p: Box<Pod>, kind: &str, name: &str) -> Box<Pod> {
    let api_version = if kind == "ReplicationController" { "v1" } else { "apps/v1" };
    p.metadata.owner_references = Some(vec![
        serde_json::from_value(
            json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": format!("{name}-uid"), "controller": true}),
        )
        .unwrap(),
    ]);
    p
}

fn with(mut c: Cluster, objects: Vec<SpreadSelector>) -> Cluster {
    for o in objects {
        c.spread_selectors.upsert(o);
    }
    c
}

fn list(cs: Value) -> PodTopologySpreadArgs {
    PodTopologySpreadArgs {
        default_constraints: serde_json::from_value(cs).unwrap(),
        defaulting_type: DefaultingType::List,
    }
}

/// Each constraint as `key maxSkew`, and whether they are the system defaults.
fn summary(c: &Cluster, name: &str, args: &PodTopologySpreadArgs, action: &str) -> (Vec<String>, bool) {
    let state = CycleState::new(&c.pods[c.pods.iter().position(|p| p.name() == name).unwrap()]);
    let (list, system) = constraints(&state, c, args, action);
    (list.iter().map(|k| format!("{} {}", k.topology_key, k.max_skew)).collect(), system)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn node_rack_defaults() -> PodTopologySpreadArgs {
    list(json!([
        {"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 5, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}
    ]))
}

#[test]
fn a_service_gives_a_bare_pod_the_defaults_of_its_action() {
    let p = pod("p", &[("foo", "bar"), ("baz", "kar")], None, json!({}));
    let c = with(cluster(vec![], vec![p]), vec![service("web", json!({"foo": "bar"}))]);
    let args = node_rack_defaults();
    assert_eq!(summary(&c, "p", &args, "DoNotSchedule"), (strings(&["node 3", "rack 5"]), false));
    assert_eq!(summary(&c, "p", &args, "ScheduleAnyway"), (strings(&["node 2"]), false));
    let state = CycleState::new(&c.pods[0]);
    let (hard, _) = constraints(&state, &c, &args, "DoNotSchedule");
    let want = Selector::Requirements(vec![crate::plugins::pod_matcher::Requirement {
        key: "foo".into(),
        operator: crate::plugins::pod_matcher::Operator::In,
        values: vec!["bar".into()],
    }]);
    assert!(hard.iter().all(|k| k.matcher.all[0].1 == want && k.self_match));
}

#[test]
fn a_service_that_does_not_select_the_pod_gives_nothing() {
    let p = pod("p", &[("foo", "bar")], None, json!({}));
    let c = with(cluster(vec![], vec![p]), vec![service("web", json!({"baz": "kep"}))]);
    assert_eq!(summary(&c, "p", &node_rack_defaults(), "DoNotSchedule"), (vec![], false));
}

#[test]
fn a_pod_with_its_own_constraints_never_gets_the_defaults() {
    let own = json!({"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"baz": "tar"}}},
        {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"fot": "rok"}}}
    ]});
    let p = pod("p", &[("foo", "bar"), ("baz", "tar")], None, own);
    let c = with(cluster(vec![], vec![p]), vec![service("web", json!({"foo": "bar"}))]);
    let args = list(json!([{"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"}]));
    assert_eq!(summary(&c, "p", &args, "DoNotSchedule"), (strings(&["zone 1"]), false));
    // Owned by a ReplicaSet the cluster holds: the same.
    let own = json!({"topologySpreadConstraints": [
        {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"baz": "sup"}}}
    ]});
    let p = owned(pod("p", &[("foo", "bar"), ("baz", "sup")], None, own), "ReplicaSet", "rs1");
    let rs1 = controller("ReplicaSet", "rs1", json!({"matchExpressions": [{"key": "foo", "operator": "Exists"}]}));
    let c = with(cluster(vec![], vec![p]), vec![rs1]);
    let args = list(json!([{"maxSkew": 2, "topologyKey": "galaxy", "whenUnsatisfiable": "ScheduleAnyway"}]));
    assert_eq!(summary(&c, "p", &args, "ScheduleAnyway"), (strings(&["planet 2"]), false));
}

#[test]
fn soft_defaults_leave_filter_alone() {
    let p = pod("p", &[("foo", "bar")], None, json!({}));
    let c = with(cluster(vec![], vec![p]), vec![service("web", json!({"foo": "bar"}))]);
    let args = list(json!([{"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"}]));
    assert_eq!(summary(&c, "p", &args, "DoNotSchedule"), (vec![], false));
    let state = CycleState::new(&c.pods[0]);
    assert!(pre_filter(&state, &c, &mut TopologyCache::default(), &args).is_none());
}

#[test]
fn a_replica_set_the_cluster_does_not_hold_gives_nothing() {
    let p = owned(pod("p", &[("foo", "bar"), ("baz", "sup")], None, json!({})), "ReplicaSet", "rs2");
    let nodes = vec![node("node-a", &[("planet", "mars")])];
    let rs1 = controller("ReplicaSet", "rs1", json!({"matchExpressions": [{"key": "tar", "operator": "Exists"}]}));
    let c = with(cluster(nodes, vec![p]), vec![rs1]);
    let args = list(json!([{"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": "ScheduleAnyway"}]));
    assert_eq!(spread_scores(&c, "p", &args), None, "PreScore skips the pod");
    assert_eq!(spread_scores(&c, "p", &Default::default()), None, "nor do the system defaults apply");
}

#[test]
fn system_defaults_and_a_replica_set() {
    let p = owned(pod("p", &[("foo", "tar"), ("baz", "sup")], None, json!({})), "ReplicaSet", "rs1");
    let rs1 = controller("ReplicaSet", "rs1", json!({"matchExpressions": [{"key": "foo", "operator": "Exists"}]}));
    let c = with(cluster(vec![], vec![p]), vec![rs1]);
    let got = summary(&c, "p", &Default::default(), "ScheduleAnyway");
    assert_eq!(got, (strings(&["kubernetes.io/hostname 3", "topology.kubernetes.io/zone 5"]), true));
    assert_eq!(summary(&c, "p", &Default::default(), "DoNotSchedule"), (vec![], false));
}

#[test]
fn listed_defaults_and_a_replica_set_split_by_action() {
    let p = owned(pod("p", &[("foo", "tar"), ("baz", "sup")], None, json!({})), "ReplicaSet", "rs1");
    let rs1 = controller("ReplicaSet", "rs1", json!({"matchExpressions": [{"key": "foo", "operator": "Exists"}]}));
    let c = with(cluster(vec![], vec![p]), vec![rs1]);
    let args = list(json!([
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": "ScheduleAnyway"}
    ]));
    let soft = summary(&c, "p", &args, "ScheduleAnyway");
    assert_eq!(soft, (strings(&["kubernetes.io/hostname 1", "planet 2"]), false));
    assert_eq!(summary(&c, "p", &args, "DoNotSchedule"), (strings(&["rack 2"]), false));
}

fn two_zones() -> Vec<k8s_openapi::api::core::v1::Node> {
    vec![
        node("n1", &[("kubernetes.io/hostname", "n1"), ("topology.kubernetes.io/zone", "z1")]),
        node("n2", &[("kubernetes.io/hostname", "n2"), ("topology.kubernetes.io/zone", "z2")]),
    ]
}

#[test]
fn a_bare_pod_behind_a_service_gets_the_system_defaults() {
    let p = pod("p", &[("app", "web")], None, json!({}));
    let w1 = pod("w1", &[("app", "web")], Some("n1"), json!({}));
    let c = with(cluster(two_zones(), vec![p, w1]), vec![service("web", json!({"app": "web"}))]);
    // hostname (ln 4 weight, maxSkew 3): n1 1.39 + 2, n2 2; zone (ln 4, maxSkew 5): n1 1.39 + 4,
    // n2 4. Raw n1 8.77 → 9, n2 6: 100 * (9 + 6 - s) / 9.
    assert_eq!(spread_scores(&c, "p", &Default::default()), Some(vec![66, 100]));
    let c = cluster(
        two_zones(),
        vec![pod("p", &[("app", "web")], None, json!({})), pod("w1", &[("app", "web")], Some("n1"), json!({}))],
    );
    assert_eq!(spread_scores(&c, "p", &Default::default()), None, "without the Service: no defaults");
}

#[test]
fn the_selector_counts_pods_by_labels_not_by_owner() {
    let p = owned(pod("p", &[("app", "web")], None, json!({})), "ReplicaSet", "web-1");
    // A pod of another owner with the label counts; a pod of the same owner without it does not.
    let stranger = pod("s1", &[("app", "web")], Some("n2"), json!({}));
    let sibling = owned(pod("w1", &[("v", "1")], Some("n1"), json!({})), "ReplicaSet", "web-1");
    let rs = controller("ReplicaSet", "web-1", json!({"matchLabels": {"app": "web"}}));
    let c = with(cluster(two_zones(), vec![p, stranger, sibling]), vec![rs]);
    assert_eq!(spread_scores(&c, "p", &Default::default()), Some(vec![100, 66]));
}

#[test]
fn a_service_and_a_stateful_set_select_together() {
    let p = owned(pod("p", &[("app", "db"), ("role", "replica")], None, json!({})), "StatefulSet", "db");
    // Both selectors apply: only pods with app=db and role=replica count.
    let counted = pod("r1", &[("app", "db"), ("role", "replica")], Some("n1"), json!({}));
    let primary = pod("p1", &[("app", "db"), ("role", "primary")], Some("n2"), json!({}));
    let objects = vec![
        service("replicas", json!({"role": "replica"})),
        controller("StatefulSet", "db", json!({"matchLabels": {"app": "db"}})),
    ];
    let c = with(cluster(two_zones(), vec![p, counted, primary]), objects);
    assert_eq!(spread_scores(&c, "p", &Default::default()), Some(vec![66, 100]));
}

#[test]
fn a_replication_controller_selects_with_its_map() {
    let p = owned(pod("p", &[("app", "legacy")], None, json!({})), "ReplicationController", "legacy");
    let old = pod("o1", &[("app", "legacy")], Some("n2"), json!({}));
    let rc = controller("ReplicationController", "legacy", json!({"app": "legacy"}));
    let c = with(cluster(two_zones(), vec![p, old]), vec![rc]);
    assert_eq!(spread_scores(&c, "p", &Default::default()), Some(vec![100, 66]));
}

#[test]
fn hard_listed_defaults_filter_by_the_service_selector() {
    let args = list(json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]));
    let nodes =
        vec![zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2"), zoned("node-y", "zone2")];
    let web = |n: &str, at: Option<&str>| pod(n, &[("app", "web")], at, json!({}));
    let c = with(
        cluster(nodes.clone(), vec![web("p", None), web("a1", Some("node-a")), web("b1", Some("node-b"))]),
        vec![service("web", json!({"app": "web"}))],
    );
    let state = CycleState::new(&c.pods[c.pods.iter().position(|p| p.name() == "p").unwrap()]);
    let s = pre_filter(&state, &c, &mut TopologyCache::default(), &args).expect("a hard default constraint");
    let fit: Vec<&str> = c
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| filter(&s, NodeId(*i as u32)).is_ok())
        .map(|(_, n)| n.name())
        .collect();
    assert_eq!(fit, ["node-x", "node-y"]);
    // The same pods without the Service: no default, every node fits (the helpers use the
    // system defaults, which are soft).
    let c = cluster(nodes, vec![web("p", None), web("a1", Some("node-a")), web("b1", Some("node-b"))]);
    assert_eq!(fits(&c, "p").len(), 4);
    assert!(verdicts(&c, "p").iter().all(|(_, v)| v.is_none()));
}
