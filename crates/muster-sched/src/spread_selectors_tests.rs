//! Default selectors after upstream's `DefaultSelector` / `GetPodServices` behaviour (own data;
//! the facts each case checks carry over).

use k8s_openapi::api::core::v1::Pod;
use muster_api::PodObject;
use serde_json::{Value, json};

use super::*;

fn pod(ns: &str, labels: Value, owner: Option<(&str, &str, &str)>) -> Pod {
    let mut meta = json!({"name": "p", "namespace": ns, "labels": labels});
    if let Some((api_version, kind, name)) = owner {
        meta["ownerReferences"] =
            json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": "u-1", "controller": true}]);
    }
    serde_json::from_value(json!({"metadata": meta, "spec": {"containers": [{"name": "c"}]}})).unwrap()
}

fn service(ns: &str, name: &str, selector: Value) -> SpreadSelector {
    let mut spec = json!({"ports": [{"port": 80}]});
    if !selector.is_null() {
        spec["selector"] = selector;
    }
    SpreadSelector::service(
        &serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}, "spec": spec})).unwrap(),
    )
}

fn replica_set(ns: &str, name: &str, selector: Value) -> SpreadSelector {
    SpreadSelector::replica_set(
        &serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}, "spec": {"selector": selector}}))
            .unwrap(),
    )
}

fn stateful_set(ns: &str, name: &str, selector: Value) -> SpreadSelector {
    SpreadSelector::stateful_set(
        &serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns},
                                       "spec": {"selector": selector, "serviceName": "s", "template": {}}}))
        .unwrap(),
    )
}

fn replication_controller(ns: &str, name: &str, selector: Value) -> SpreadSelector {
    SpreadSelector::replication_controller(
        &serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}, "spec": {"selector": selector}}))
            .unwrap(),
    )
}

fn store(objects: Vec<SpreadSelector>) -> SpreadSelectors {
    let mut s = SpreadSelectors::default();
    for o in objects {
        s.upsert(o);
    }
    s
}

/// The requirements as `key op values`, sorted (their order does not matter).
fn shown(reqs: Vec<Requirement>) -> Vec<String> {
    let mut v: Vec<String> =
        reqs.iter().map(|r| format!("{} {:?} {}", r.key, r.operator, r.values.join(","))).collect();
    v.sort();
    v
}

fn selector_of(s: &SpreadSelectors, p: &dyn PodObject) -> Vec<String> {
    shown(s.default_selector(p))
}

#[test]
fn nothing_in_the_namespace_selects_nothing() {
    let s = store(vec![service("other", "web", json!({"app": "web"}))]);
    assert!(selector_of(&s, &pod("default", json!({"app": "web"}), None)).is_empty());
    assert!(selector_of(&SpreadSelectors::default(), &pod("default", json!({"app": "web"}), None)).is_empty());
}

#[test]
fn each_service_selects_the_pod_its_selector_matches() {
    // Three Services app=test-0..2; pods app=test-0..4: pods 0-2 get one each, 3 and 4 none.
    let s = store((0..3).map(|i| service("test", &format!("svc-{i}"), json!({"app": format!("test-{i}")}))).collect());
    for i in 0..5 {
        let p = pod("test", json!({"app": format!("test-{i}"), "label": format!("label-{i}")}), None);
        let want: Vec<String> = if i < 3 { vec![format!("app In test-{i}")] } else { vec![] };
        assert_eq!(selector_of(&s, &p), want, "pod {i}");
    }
}

#[test]
fn a_service_with_a_partial_match_selects_by_its_own_labels() {
    let s = store(vec![service("default", "web", json!({"foo": "bar"}))]);
    let p = pod("default", json!({"foo": "bar", "baz": "kar"}), None);
    assert_eq!(selector_of(&s, &p), ["foo In bar"]);
}

#[test]
fn a_service_that_does_not_match_is_left_out() {
    let s = store(vec![service("default", "web", json!({"baz": "kep"}))]);
    assert!(selector_of(&s, &pod("default", json!({"foo": "bar"}), None)).is_empty());
}

#[test]
fn a_service_without_selector_selects_no_pod() {
    let s = store(vec![service("default", "headless", Value::Null)]);
    assert!(selector_of(&s, &pod("default", json!({"foo": "bar"}), None)).is_empty());
    // An empty selector matches every pod but adds nothing.
    let s = store(vec![service("default", "all", json!({}))]);
    assert!(selector_of(&s, &pod("default", json!({"foo": "bar"}), None)).is_empty());
}

#[test]
fn services_in_another_namespace_do_not_count() {
    let s = store(vec![service("ns1", "web", json!({"app": "web"})), service("ns2", "db", json!({"tier": "db"}))]);
    assert_eq!(selector_of(&s, &pod("ns1", json!({"app": "web", "tier": "db"}), None)), ["app In web"]);
}

#[test]
fn selectors_of_several_services_merge() {
    let s = store(vec![
        service("default", "a", json!({"app": "web"})),
        service("default", "b", json!({"tier": "front", "app": "web"})),
        service("default", "c", json!({"tier": "back"})),
    ]);
    let p = pod("default", json!({"app": "web", "tier": "front", "x": "y"}), None);
    assert_eq!(selector_of(&s, &p), ["app In web", "tier In front"]);
}

#[test]
fn the_replica_set_owner_adds_its_requirements() {
    let s = store(vec![
        replica_set("default", "rs1", json!({"matchExpressions": [{"key": "foo", "operator": "Exists"}]})),
        service("default", "web", json!({"baz": "sup"})),
    ]);
    let p = pod("default", json!({"foo": "tar", "baz": "sup"}), Some(("apps/v1", "ReplicaSet", "rs1")));
    assert_eq!(selector_of(&s, &p), ["baz In sup", "foo Exists "]);
}

#[test]
fn a_replica_set_not_in_the_cluster_adds_nothing() {
    let s = store(vec![replica_set("default", "rs1", json!({"matchLabels": {"tar": "x"}}))]);
    let p = pod("default", json!({"foo": "bar"}), Some(("apps/v1", "ReplicaSet", "rs2")));
    assert!(selector_of(&s, &p).is_empty());
    // The same name in another namespace is another object.
    let p = pod("other", json!({"foo": "bar"}), Some(("apps/v1", "ReplicaSet", "rs1")));
    assert!(selector_of(&s, &p).is_empty());
}

#[test]
fn the_owner_is_found_by_name_and_its_selector_taken_as_is() {
    // Upstream does not check that the controller's selector matches the pod.
    let s = store(vec![replica_set("default", "rs1", json!({"matchLabels": {"app": "other"}}))]);
    let p = pod("default", json!({"app": "web"}), Some(("apps/v1", "ReplicaSet", "rs1")));
    assert_eq!(selector_of(&s, &p), ["app In other"]);
}

#[test]
fn only_the_controller_owner_of_a_known_group_version_counts() {
    let s = store(vec![replica_set("default", "rs1", json!({"matchLabels": {"app": "web"}}))]);
    let labels = json!({"app": "web"});
    for (api_version, kind) in [("extensions/v1beta1", "ReplicaSet"), ("apps/v1", "Deployment"), ("v1", "ReplicaSet")] {
        let p = pod("default", labels.clone(), Some((api_version, kind, "rs1")));
        assert!(selector_of(&s, &p).is_empty(), "{api_version} {kind}");
    }
    let mut p = pod("default", labels, Some(("apps/v1", "ReplicaSet", "rs1")));
    p.metadata.owner_references.as_mut().unwrap()[0].controller = Some(false);
    assert!(selector_of(&s, &p).is_empty(), "an owner that is not the controller");
}

#[test]
fn the_stateful_set_owner_adds_its_requirements() {
    let s = store(vec![stateful_set(
        "db",
        "pg",
        json!({"matchLabels": {"app": "pg"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]}),
    )]);
    let p = pod("db", json!({"app": "pg", "tier": "db"}), Some(("apps/v1", "StatefulSet", "pg")));
    assert_eq!(selector_of(&s, &p), ["app In pg", "tier In db"]);
}

#[test]
fn the_replication_controller_owner_merges_its_map() {
    let s = store(vec![
        replication_controller("default", "rc1", json!({"app": "web", "tier": "front"})),
        service("default", "web", json!({"app": "web"})),
    ]);
    let p = pod("default", json!({"app": "web", "tier": "front"}), Some(("v1", "ReplicationController", "rc1")));
    assert_eq!(selector_of(&s, &p), ["app In web", "tier In front"]);
    // A disjoint Service and controller: both count (upstream's "disjoined" case).
    let s = store(vec![
        replication_controller("default", "rc1", json!({"foo": "bar"})),
        service("default", "web", json!({"baz": "blah"})),
    ]);
    let p = pod("default", json!({"foo": "bar", "baz": "blah"}), Some(("v1", "ReplicationController", "rc1")));
    assert_eq!(selector_of(&s, &p), ["baz In blah", "foo In bar"]);
}

#[test]
fn an_unset_empty_or_invalid_controller_selector_adds_nothing() {
    for selector in [json!({}), json!({"matchExpressions": [{"key": "a", "operator": "Like"}]})] {
        let s = store(vec![replica_set("default", "rs1", selector.clone())]);
        let p = pod("default", json!({"a": "b"}), Some(("apps/v1", "ReplicaSet", "rs1")));
        assert!(selector_of(&s, &p).is_empty(), "{selector}");
    }
    let s = store(vec![replication_controller("default", "rc1", Value::Null)]);
    let p = pod("default", json!({"a": "b"}), Some(("v1", "ReplicationController", "rc1")));
    assert!(selector_of(&s, &p).is_empty());
}

#[test]
fn upsert_replaces_and_delete_removes() {
    let mut s = store(vec![service("default", "web", json!({"app": "web"}))]);
    let p = pod("default", json!({"app": "web", "v": "2"}), Some(("apps/v1", "ReplicaSet", "rs1")));
    s.upsert(service("default", "web", json!({"v": "2"})));
    assert_eq!(selector_of(&s, &p), ["v In 2"]);
    s.upsert(replica_set("default", "rs1", json!({"matchLabels": {"app": "web"}})));
    assert_eq!(selector_of(&s, &p), ["app In web", "v In 2"]);
    s.delete(SpreadSelectorKind::Service, "default/web");
    assert_eq!(selector_of(&s, &p), ["app In web"]);
    s.delete(SpreadSelectorKind::ReplicaSet, "default/rs1");
    assert!(selector_of(&s, &p).is_empty());
    assert!(s.by_namespace.is_empty(), "an emptied namespace is dropped");
    // A Service losing its selector stops selecting.
    s.upsert(service("default", "web", json!({"app": "web"})));
    s.upsert(service("default", "web", Value::Null));
    assert!(selector_of(&s, &p).is_empty());
}
