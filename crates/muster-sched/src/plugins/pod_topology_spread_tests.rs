//! PodTopologySpread cases after upstream's `filtering_test.go` and `scoring_test.go` tables
//! (own data; the facts each case checks carry over).

use serde_json::{Value, json};

use super::*;
use crate::plugins::test_cluster::{cluster, fits, node, pod, spread_scores, verdicts, zoned};

fn constraint(key: &str, skew: i32, when: &str, extra: Value) -> Value {
    let mut c = json!({"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
                       "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        c[k] = v.clone();
    }
    c
}

fn spread(cs: Vec<Value>) -> Value {
    json!({"topologySpreadConstraints": cs})
}

fn four_nodes() -> Vec<k8s_openapi::api::core::v1::Node> {
    vec![zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2"), zoned("node-y", "zone2")]
}

fn on(name: &str, node: &str) -> Box<k8s_openapi::api::core::v1::Pod> {
    pod(name, &[("foo", "")], Some(node), json!({}))
}

fn incoming(cs: Vec<Value>) -> Box<k8s_openapi::api::core::v1::Pod> {
    pod("p", &[("foo", "")], None, spread(cs))
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn no_existing_pods_every_node_fits() {
    let c = cluster(four_nodes(), vec![incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({}))])]);
    assert_eq!(fits(&c, "p"), names(&["node-a", "node-b", "node-x", "node-y"]));
}

#[test]
fn incoming_pod_not_matching_itself() {
    let mut p = incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({}))]);
    p.metadata.labels = None;
    let c = cluster(four_nodes(), vec![p, on("a1", "node-a")]);
    // zone1: 1 + 0 - 0 <= 1.
    assert_eq!(fits(&c, "p"), names(&["node-a", "node-b", "node-x", "node-y"]));
}

#[test]
fn skew_rejects_the_fuller_zone() {
    let c = cluster(
        four_nodes(),
        vec![incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({}))]), on("a1", "node-a"), on("b1", "node-b")],
    );
    assert_eq!(fits(&c, "p"), names(&["node-x", "node-y"]));
    let v = verdicts(&c, "p");
    assert_eq!(v[0].1.as_deref(), Some(REASON));
}

#[test]
fn pods_of_other_namespaces_do_not_count() {
    let other = |n: &str, at: &str| pod(n, &[("foo", "")], Some(at), json!({"_namespace": "ns2"}));
    let c = cluster(
        four_nodes(),
        vec![
            incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({}))]),
            other("a1", "node-a"),
            other("b1", "node-b"),
        ],
    );
    assert_eq!(fits(&c, "p").len(), 4);
}

#[test]
fn terminating_pods_do_not_count() {
    let mut a1 = on("a1", "node-a");
    a1.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
    let c = cluster(
        four_nodes(),
        vec![incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({}))]), a1, on("b1", "node-b")],
    );
    // zone1 counts 1: 1 + 1 - 0 > 1 still rejects it.
    assert_eq!(fits(&c, "p"), names(&["node-x", "node-y"]));
    let mut b1 = on("b1", "node-b");
    b1.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
    let mut a1 = on("a1", "node-a");
    a1.metadata.deletion_timestamp = b1.metadata.deletion_timestamp.clone();
    let c = cluster(four_nodes(), vec![incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({}))]), a1, b1]);
    assert_eq!(fits(&c, "p").len(), 4);
}

#[test]
fn node_without_the_key_is_rejected_unresolvably() {
    let mut nodes = four_nodes();
    nodes.push(node("node-z", &[("kubernetes.io/hostname", "node-z")]));
    let c = cluster(nodes, vec![incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({}))])]);
    let v = verdicts(&c, "p");
    assert_eq!(v[4], ("node-z".to_string(), Some(REASON_MISSING_LABEL.to_string())));
}

#[test]
fn hostname_spreading() {
    let c = cluster(
        four_nodes(),
        vec![
            incoming(vec![constraint("kubernetes.io/hostname", 1, "DoNotSchedule", json!({}))]),
            on("a1", "node-a"),
            on("a2", "node-a"),
            on("b1", "node-b"),
            on("x1", "node-x"),
        ],
    );
    // Counts a=2, b=1, x=1, y=0: min 0; only nodes with 0 fit.
    assert_eq!(fits(&c, "p"), names(&["node-y"]));
}

#[test]
fn larger_max_skew_allows_more() {
    let c = cluster(
        four_nodes(),
        vec![
            incoming(vec![constraint("kubernetes.io/hostname", 2, "DoNotSchedule", json!({}))]),
            on("a1", "node-a"),
            on("a2", "node-a"),
            on("b1", "node-b"),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-b", "node-x", "node-y"]));
}

#[test]
fn two_constraints_must_both_hold() {
    let c = cluster(
        four_nodes(),
        vec![
            incoming(vec![
                constraint("zone", 1, "DoNotSchedule", json!({})),
                constraint("kubernetes.io/hostname", 1, "DoNotSchedule", json!({})),
            ]),
            on("a1", "node-a"),
            on("x1", "node-x"),
            on("y1", "node-y"),
            on("y2", "node-y"),
        ],
    );
    // zone1=1, zone2=3: zone2 rejected; hostname min 0 (b): a=1 fits (1+1-0 > 1? yes: 2 > 1 no fit).
    assert_eq!(fits(&c, "p"), names(&["node-b"]));
}

#[test]
fn min_domains_treats_the_global_minimum_as_zero() {
    let pods = || vec![on("a1", "node-a"), on("x1", "node-x")];
    let mut with = pods();
    with.push(incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({"minDomains": 3}))]));
    // Two zones, each 1: min would be 1, but with fewer than 3 domains it is 0: 1 + 1 - 0 > 1.
    assert!(fits(&cluster(four_nodes(), with), "p").is_empty());
    let mut without = pods();
    without.push(incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({}))]));
    assert_eq!(fits(&cluster(four_nodes(), without), "p").len(), 4);
}

#[test]
fn node_affinity_policy_honor_leaves_unselected_domains_out() {
    let mut nodes = four_nodes();
    nodes.push(node("node-z", &[("zone", "zone3"), ("kubernetes.io/hostname", "node-z"), ("pool", "other")]));
    for n in nodes.iter_mut().take(4) {
        n.metadata.labels.as_mut().unwrap().insert("pool".into(), "main".into());
    }
    let mk = |policy: &str| {
        let mut p = incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({"nodeAffinityPolicy": policy}))]);
        p.spec.as_mut().unwrap().node_selector = Some([("pool".to_string(), "main".to_string())].into());
        p
    };
    let c = cluster(nodes.clone(), vec![mk("Honor"), on("a1", "node-a")]);
    // zone3 is not counted: min 0 from zone2.
    assert_eq!(fits(&c, "p"), names(&["node-x", "node-y"]));
    let c = cluster(nodes, vec![mk("Ignore"), on("a1", "node-a"), on("x1", "node-x")]);
    // zone3 (empty) counts: zone1 and zone2 are at 1, 1 + 1 - 0 > 1.
    assert_eq!(fits(&c, "p").iter().filter(|n| n.as_str() != "node-z").count(), 0);
}

#[test]
fn node_taints_policy_honor_leaves_tainted_domains_out() {
    let mut nodes = four_nodes();
    let mut z = node("node-z", &[("zone", "zone3"), ("kubernetes.io/hostname", "node-z")]);
    z.spec = Some(serde_json::from_value(json!({"taints": [{"key": "k", "effect": "NoSchedule"}]})).unwrap());
    nodes.push(z);
    let mk = |policy: &str| incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({"nodeTaintsPolicy": policy}))]);
    let c = cluster(nodes.clone(), vec![mk("Honor"), on("a1", "node-a")]);
    assert_eq!(fits(&c, "p"), names(&["node-x", "node-y"]));
    let c = cluster(nodes, vec![mk("Ignore"), on("a1", "node-a"), on("x1", "node-x")]);
    // Tainted zone3 counts as an empty domain: min 0.
    assert!(fits(&c, "p").iter().all(|n| n == "node-z"));
}

#[test]
fn match_label_keys_count_only_the_same_revision() {
    let mk = |n: &str, rev: &str, at: Option<&str>, spec: Value| pod(n, &[("foo", ""), ("rev", rev)], at, spec);
    let c = cluster(
        four_nodes(),
        vec![
            mk(
                "p",
                "2",
                None,
                spread(vec![constraint("zone", 1, "DoNotSchedule", json!({"matchLabelKeys": ["rev"]}))]),
            ),
            mk("a1", "1", Some("node-a"), json!({})),
            mk("b1", "1", Some("node-b"), json!({})),
            mk("x1", "2", Some("node-x"), json!({})),
        ],
    );
    // Only rev=2 counts: zone1=0, zone2=1.
    assert_eq!(fits(&c, "p"), names(&["node-a", "node-b"]));
}

#[test]
fn nodes_without_every_key_make_no_domain() {
    let mut nodes = four_nodes();
    nodes.push(node("node-z", &[("zone", "zone3")]));
    let c = cluster(
        nodes,
        vec![
            incoming(vec![
                constraint("zone", 1, "DoNotSchedule", json!({})),
                constraint("kubernetes.io/hostname", 1, "DoNotSchedule", json!({})),
            ]),
            on("a1", "node-a"),
            on("x1", "node-x"),
        ],
    );
    // zone3 has no node with both keys: it is no domain, the zone minimum stays 1.
    assert_eq!(fits(&c, "p"), names(&["node-b", "node-y"]));
}

#[test]
fn constraints_sharing_a_key_share_counts() {
    let c = cluster(
        four_nodes(),
        vec![
            pod(
                "p",
                &[("foo", ""), ("bar", "")],
                None,
                spread(vec![
                    constraint("zone", 1, "DoNotSchedule", json!({})),
                    json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                           "labelSelector": {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}}),
                ]),
            ),
            pod("a1", &[("bar", "")], Some("node-a"), json!({})),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-x", "node-y"]));
}

#[test]
fn score_prefers_the_emptier_hostname() {
    let c = cluster(
        four_nodes(),
        vec![
            incoming(vec![constraint("kubernetes.io/hostname", 1, "ScheduleAnyway", json!({}))]),
            on("a1", "node-a"),
            on("a2", "node-a"),
            on("b1", "node-b"),
        ],
    );
    // weight ln(4+2); raw a = 2w, b = w, x = y = 0: 100 * (max + min - s) / max.
    assert_eq!(spread_scores(&c, "p", &Default::default()), Some(vec![0, 50, 100, 100]));
}

#[test]
fn score_by_zone() {
    let c = cluster(
        four_nodes(),
        vec![
            incoming(vec![constraint("zone", 1, "ScheduleAnyway", json!({}))]),
            on("a1", "node-a"),
            on("b1", "node-b"),
            on("x1", "node-x"),
        ],
    );
    // w = ln(4): zone1 2w = 2.77 → 3, zone2 1.39 → 1: 100 * (3 + 1 - s) / 3.
    assert_eq!(spread_scores(&c, "p", &Default::default()), Some(vec![33, 33, 100, 100]));
}

#[test]
fn score_ignores_nodes_without_the_key() {
    let mut nodes = four_nodes();
    nodes.push(node("node-z", &[]));
    let c =
        cluster(nodes, vec![incoming(vec![constraint("zone", 1, "ScheduleAnyway", json!({}))]), on("a1", "node-a")]);
    let s = spread_scores(&c, "p", &Default::default()).unwrap();
    assert_eq!(s[4], 0);
    assert_eq!(s[2], 100);
}

#[test]
fn no_soft_constraints_no_score() {
    let c = cluster(four_nodes(), vec![incoming(vec![constraint("zone", 1, "DoNotSchedule", json!({}))])]);
    assert_eq!(spread_scores(&c, "p", &Default::default()), None);
}

#[test]
fn score_with_zone_and_hostname_constraints() {
    let c = cluster(
        four_nodes(),
        vec![
            incoming(vec![
                constraint("zone", 1, "ScheduleAnyway", json!({})),
                constraint("kubernetes.io/hostname", 1, "ScheduleAnyway", json!({})),
            ]),
            on("a1", "node-a"),
            on("a2", "node-a"),
            on("x1", "node-x"),
        ],
    );
    // zone w = ln 4, hostname w = ln 6: a 6.36 → 6, b 2.77 → 3, x 3.18 → 3, y 1.39 → 1.
    assert_eq!(spread_scores(&c, "p", &Default::default()), Some(vec![16, 66, 66, 100]));
}

#[test]
fn larger_max_skew_waters_the_score_down() {
    let c = cluster(
        four_nodes(),
        vec![
            incoming(vec![constraint("kubernetes.io/hostname", 3, "ScheduleAnyway", json!({}))]),
            on("a1", "node-a"),
            on("a2", "node-a"),
            on("x1", "node-x"),
        ],
    );
    // cnt * ln 6 + 2: a 6, b 2, x 4, y 2.
    assert_eq!(spread_scores(&c, "p", &Default::default()), Some(vec![33, 100, 66, 100]));
}

#[test]
fn score_counts_pods_on_nodes_that_are_not_scored() {
    let c = cluster(
        four_nodes(),
        vec![
            incoming(vec![constraint("zone", 1, "ScheduleAnyway", json!({}))]),
            on("a1", "node-a"),
            on("a2", "node-a"),
        ],
    );
    let state = CycleState::new(&c.pods[c.pods.iter().position(|p| p.name() == "p").unwrap()]);
    // Only node-b and node-x feasible: zone1 still counts node-a's two pods.
    let s = score(&state, &[NodeId(1), NodeId(2)], &c, &mut TopologyCache::default(), &Default::default());
    assert_eq!(s, Some(vec![0, 100]));
}
