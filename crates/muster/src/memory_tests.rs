//! The memory world hands the engine the selectors PodTopologySpread's default constraints read:
//! Services and ReplicationControllers from the input, ReplicaSets and StatefulSets from the input
//! and from the workload controllers.

use muster_sched::SchedulerNames;
use muster_sched::plugins::pod_matcher::Requirement;

use super::World;

const INPUT: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {tier: front}, ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, tier: front}}
    spec: {containers: [{name: c, image: x}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy, namespace: shop}
spec: {selector: {app: legacy}}
---
apiVersion: v1
kind: Pod
metadata:
  name: legacy-abcde
  namespace: shop
  labels: {app: legacy}
  ownerReferences: [{apiVersion: v1, kind: ReplicationController, name: legacy, uid: u-1, controller: true}]
spec: {containers: [{name: c, image: x}]}
"#;

/// Each pod's default selector, as `key=value` for its `In` requirements.
fn selectors() -> Vec<(String, Vec<String>)> {
    let partial = muster_manifest::load_texts_partial(&[("input.yaml", INPUT)]);
    assert!(partial.errors.is_empty(), "{:?}", partial.errors);
    let world = World::from_manifests(partial.manifests, &SchedulerNames::default()).unwrap();
    let c = &world.cluster;
    let shown = |r: &Requirement| format!("{}={}", r.key, r.values.join(","));
    c.pods
        .iter()
        .map(|p| (p.key.clone(), c.spread_selectors.default_selector(&p.pod).iter().map(shown).collect()))
        .collect()
}

#[test]
fn services_and_controllers_reach_the_cluster() {
    let got = selectors();
    let of = |prefix: &str| got.iter().find(|(k, _)| k.starts_with(prefix)).map(|(_, s)| s.clone()).unwrap();
    // The Deployment's ReplicaSet (created by the controller) adds its selector, hash included.
    let web = of("shop/web-");
    assert_eq!(web[0], "tier=front", "{web:?}");
    assert!(web.contains(&"app=web".to_string()) && web.iter().any(|r| r.starts_with("pod-template-hash=")), "{web:?}");
    assert_eq!(of("shop/db-0"), ["app=db"]);
    assert_eq!(of("shop/legacy-"), ["app=legacy"]);
}
