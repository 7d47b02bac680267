//! InterPodAffinity cases after upstream's `filtering_test.go` and `scoring_test.go` tables (own
//! data; the facts each case checks carry over).

use serde_json::{Value, json};

use super::*;
use crate::plugins::test_cluster::{affinity_scores, cluster, fits, node, pod, verdicts, zoned};

fn term(key: &str, selector: Value, extra: Value) -> Value {
    let mut t = json!({"topologyKey": key, "labelSelector": selector});
    for (k, v) in extra.as_object().into_iter().flatten() {
        t[k] = v.clone();
    }
    t
}

fn app(v: &str) -> Value {
    json!({"matchLabels": {"app": v}})
}

fn required(kind: &str, terms: Vec<Value>) -> Value {
    json!({"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": terms}}})
}

fn preferred(kind: &str, terms: Vec<(i32, Value)>) -> Value {
    let terms: Vec<Value> = terms.into_iter().map(|(w, t)| json!({"weight": w, "podAffinityTerm": t})).collect();
    json!({"affinity": {kind: {"preferredDuringSchedulingIgnoredDuringExecution": terms}}})
}

fn nodes() -> Vec<k8s_openapi::api::core::v1::Node> {
    vec![zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2")]
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

const HOST: &str = "kubernetes.io/hostname";

#[test]
fn no_terms_fit_everywhere() {
    let c =
        cluster(nodes(), vec![pod("p", &[], None, json!({})), pod("e", &[("app", "db")], Some("node-a"), json!({}))]);
    assert_eq!(fits(&c, "p").len(), 3);
}

#[test]
fn affinity_to_a_pod_on_the_same_host() {
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[], None, required("podAffinity", vec![term(HOST, app("db"), json!({}))])),
            pod("e", &[("app", "db")], Some("node-b"), json!({})),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-b"]));
    assert_eq!(verdicts(&c, "p")[0].1.as_deref(), Some(REASON_AFFINITY));
}

#[test]
fn affinity_to_a_zone() {
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[], None, required("podAffinity", vec![term("zone", app("db"), json!({}))])),
            pod("e", &[("app", "db")], Some("node-b"), json!({})),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-a", "node-b"]));
}

#[test]
fn affinity_operators() {
    let sel = json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}, {"key": "tier", "operator": "Exists"}]});
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[], None, required("podAffinity", vec![term(HOST, sel, json!({}))])),
            pod("e1", &[("app", "web"), ("tier", "x")], Some("node-a"), json!({})),
            pod("e2", &[("app", "db"), ("tier", "x")], Some("node-x"), json!({})),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-x"]));
}

#[test]
fn no_match_anywhere_and_not_matching_itself() {
    let c =
        cluster(nodes(), vec![pod("p", &[], None, required("podAffinity", vec![term(HOST, app("db"), json!({}))]))]);
    assert!(fits(&c, "p").is_empty());
}

#[test]
fn the_first_pod_of_a_self_affine_group_goes_anywhere() {
    let mut ns = nodes();
    ns.push(node("node-z", &[("zone", "zone3")]));
    let c = cluster(
        ns,
        vec![pod("p", &[("app", "db")], None, required("podAffinity", vec![term(HOST, app("db"), json!({}))]))],
    );
    // node-z has no hostname label: all topology labels must exist.
    assert_eq!(fits(&c, "p"), names(&["node-a", "node-b", "node-x"]));
}

#[test]
fn every_term_must_match_the_same_pod() {
    let c = cluster(
        nodes(),
        vec![
            pod(
                "p",
                &[],
                None,
                required(
                    "podAffinity",
                    vec![
                        term("zone", app("db"), json!({})),
                        term(HOST, json!({"matchLabels": {"tier": "x"}}), json!({})),
                    ],
                ),
            ),
            pod("e1", &[("app", "db")], Some("node-a"), json!({})),
            pod("e2", &[("tier", "x")], Some("node-b"), json!({})),
        ],
    );
    // No pod matches both terms: no pair is counted, and p does not match itself.
    assert!(fits(&c, "p").is_empty());
}

#[test]
fn anti_affinity_keeps_one_per_host() {
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[("app", "web")], None, required("podAntiAffinity", vec![term(HOST, app("web"), json!({}))])),
            pod("e", &[("app", "web")], Some("node-a"), json!({})),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-b", "node-x"]));
    assert_eq!(verdicts(&c, "p")[0].1.as_deref(), Some(REASON_ANTI_AFFINITY));
}

#[test]
fn anti_affinity_looks_at_its_namespaces_only() {
    let other = pod("e", &[("app", "web")], Some("node-a"), json!({"_namespace": "ns2"}));
    let c = cluster(
        nodes(),
        vec![pod("p", &[], None, required("podAntiAffinity", vec![term(HOST, app("web"), json!({}))])), other.clone()],
    );
    assert_eq!(fits(&c, "p").len(), 3);
    let listed = required("podAntiAffinity", vec![term(HOST, app("web"), json!({"namespaces": ["ns2"]}))]);
    let c = cluster(nodes(), vec![pod("p", &[], None, listed), other.clone()]);
    assert_eq!(fits(&c, "p"), names(&["node-b", "node-x"]));
    let all = required("podAntiAffinity", vec![term(HOST, app("web"), json!({"namespaceSelector": {}}))]);
    let c = cluster(nodes(), vec![pod("p", &[], None, all), other]);
    assert_eq!(fits(&c, "p"), names(&["node-b", "node-x"]));
}

#[test]
fn existing_pods_anti_affinity_closes_their_domain() {
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[("app", "web")], None, json!({})),
            pod("e", &[], Some("node-a"), required("podAntiAffinity", vec![term("zone", app("web"), json!({}))])),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-x"]));
    assert_eq!(verdicts(&c, "p")[1].1.as_deref(), Some(REASON_EXISTING_ANTI_AFFINITY));
}

#[test]
fn existing_pods_anti_affinity_not_matching_the_pod() {
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[("app", "db")], None, json!({})),
            pod("e", &[], Some("node-a"), required("podAntiAffinity", vec![term("zone", app("web"), json!({}))])),
        ],
    );
    assert_eq!(fits(&c, "p").len(), 3);
}

#[test]
fn match_label_keys_select_the_same_value() {
    let t = term(HOST, app("web"), json!({"matchLabelKeys": ["rev"]}));
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[("app", "web"), ("rev", "2")], None, required("podAffinity", vec![t])),
            pod("e1", &[("app", "web"), ("rev", "1")], Some("node-a"), json!({})),
            pod("e2", &[("app", "web"), ("rev", "2")], Some("node-x"), json!({})),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-x"]));
}

#[test]
fn mismatch_label_keys_avoid_other_tenants() {
    let t = term(HOST, json!({}), json!({"mismatchLabelKeys": ["tenant"]}));
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[("tenant", "a")], None, required("podAntiAffinity", vec![t])),
            pod("e1", &[("tenant", "b")], Some("node-a"), json!({})),
            pod("e2", &[("tenant", "a")], Some("node-b"), json!({})),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-b", "node-x"]));
}

#[test]
fn affinity_needs_the_topology_label() {
    let mut ns = nodes();
    ns.push(node("node-z", &[]));
    let c = cluster(
        ns,
        vec![
            pod("p", &[], None, required("podAffinity", vec![term("zone", app("db"), json!({}))])),
            pod("e", &[("app", "db")], Some("node-a"), json!({})),
        ],
    );
    assert_eq!(verdicts(&c, "p")[3].1.as_deref(), Some(REASON_AFFINITY));
}

#[test]
fn preferred_affinity_scores_the_host_with_the_pod() {
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[], None, preferred("podAffinity", vec![(5, term(HOST, app("db"), json!({})))])),
            pod("e", &[("app", "db")], Some("node-b"), json!({})),
        ],
    );
    assert_eq!(affinity_scores(&c, "p", &Default::default()), Some(vec![0, 100, 0]));
}

#[test]
fn preferred_affinity_by_zone_and_anti_affinity_by_host() {
    let mut spec = preferred("podAffinity", vec![(4, term("zone", app("db"), json!({})))]);
    spec["affinity"]["podAntiAffinity"] =
        preferred("podAntiAffinity", vec![(2, term(HOST, app("db"), json!({})))])["affinity"]["podAntiAffinity"]
            .clone();
    let c = cluster(nodes(), vec![pod("p", &[], None, spec), pod("e", &[("app", "db")], Some("node-b"), json!({}))]);
    // a: 4, b: 4 - 2 = 2, x: 0 → scaled between 0 and 4.
    assert_eq!(affinity_scores(&c, "p", &Default::default()), Some(vec![100, 50, 0]));
}

#[test]
fn existing_pods_required_affinity_scores_with_the_hard_weight() {
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[("app", "web")], None, json!({})),
            pod("e", &[], Some("node-x"), required("podAffinity", vec![term(HOST, app("web"), json!({}))])),
        ],
    );
    assert_eq!(affinity_scores(&c, "p", &Default::default()), Some(vec![0, 0, 100]));
    let zero = InterPodAffinityArgs { hard_pod_affinity_weight: 0, ..Default::default() };
    assert_eq!(affinity_scores(&c, "p", &zero), None);
}

#[test]
fn existing_pods_preferred_anti_affinity_lowers_their_host() {
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[("app", "web")], None, json!({})),
            pod("e", &[], Some("node-a"), preferred("podAntiAffinity", vec![(10, term(HOST, app("web"), json!({})))])),
        ],
    );
    assert_eq!(affinity_scores(&c, "p", &Default::default()), Some(vec![0, 100, 100]));
    let ignore = InterPodAffinityArgs { ignore_preferred_terms_of_existing_pods: true, ..Default::default() };
    assert_eq!(affinity_scores(&c, "p", &ignore), None);
}

#[test]
fn nothing_to_score_without_terms() {
    let c =
        cluster(nodes(), vec![pod("p", &[], None, json!({})), pod("e", &[("app", "db")], Some("node-a"), json!({}))]);
    assert_eq!(affinity_scores(&c, "p", &Default::default()), None);
}

#[test]
fn namespace_selector_by_name_label() {
    let t =
        term(HOST, app("db"), json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "data"}}}));
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[], None, required("podAffinity", vec![t])),
            pod("e1", &[("app", "db")], Some("node-a"), json!({})),
            pod("e2", &[("app", "db")], Some("node-x"), json!({"_namespace": "data"})),
        ],
    );
    // The selector names "data" only: the pod's own namespace is not added.
    assert_eq!(fits(&c, "p"), names(&["node-x"]));
}

#[test]
fn existing_anti_affinity_in_another_namespace_names_the_pods_namespace() {
    let t = term(HOST, app("web"), json!({"namespaces": ["default"]}));
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[("app", "web")], None, json!({})),
            pod("e", &[], Some("node-b"), {
                let mut s = required("podAntiAffinity", vec![t]);
                s["_namespace"] = json!("other");
                s
            }),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-a", "node-x"]));
}

#[test]
fn anti_affinity_by_zone_closes_the_whole_zone() {
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[("app", "web")], None, required("podAntiAffinity", vec![term("zone", app("web"), json!({}))])),
            pod("e", &[("app", "web")], Some("node-x"), json!({})),
        ],
    );
    assert_eq!(fits(&c, "p"), names(&["node-a", "node-b"]));
}

#[test]
fn existing_pods_preferred_affinity_raises_their_zone() {
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[("app", "web")], None, json!({})),
            pod("e", &[], Some("node-x"), preferred("podAffinity", vec![(7, term("zone", app("web"), json!({})))])),
        ],
    );
    assert_eq!(affinity_scores(&c, "p", &Default::default()), Some(vec![0, 0, 100]));
}

#[test]
fn preferred_terms_of_several_weights() {
    let spec = preferred(
        "podAffinity",
        vec![(3, term(HOST, app("db"), json!({}))), (1, term("zone", app("cache"), json!({})))],
    );
    let c = cluster(
        nodes(),
        vec![
            pod("p", &[], None, spec),
            pod("e1", &[("app", "db")], Some("node-a"), json!({})),
            pod("e2", &[("app", "cache")], Some("node-x"), json!({})),
        ],
    );
    // a: 3, b: 0, x: 1 → scaled between 0 and 3.
    assert_eq!(affinity_scores(&c, "p", &Default::default()), Some(vec![100, 0, 33]));
}
