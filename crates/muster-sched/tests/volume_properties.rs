//! Property: whatever the volumes, claims and pods, a plan never binds a PersistentVolume to two
//! claims, never puts the pods of one claim bound to a local volume on two nodes, never provisions
//! a claim on two nodes, and never places a pod whose claims VolumeBinding did not serve there.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use muster_sched::volumes::{Binding, Volumes};
use muster_sched::{Cluster, Scheduler, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::json;

#[derive(Clone, Debug)]
struct World {
    nodes: usize,
    /// Local volumes: (node, size in Gi).
    volumes: Vec<(usize, u8)>,
    /// Claims: (size in Gi, provisioned class rather than local volumes).
    claims: Vec<(u8, bool)>,
    /// Pods: the claims each mounts (indexes, taken modulo the claim count).
    pods: Vec<Vec<usize>>,
}

fn world() -> impl Strategy<Value = World> {
    (
        1usize..5,
        prop::collection::vec((0usize..5, 1u8..8), 0..8),
        prop::collection::vec((1u8..8, prop::bool::weighted(0.2)), 1..8),
        prop::collection::vec(prop::collection::vec(0usize..8, 1..3), 1..10),
    )
        .prop_map(|(nodes, volumes, claims, pods)| World { nodes, volumes, claims, pods })
}

fn build(w: &World) -> Cluster {
    let nodes: Vec<Node> = (0..w.nodes)
        .map(|i| {
            serde_json::from_value(json!({
                "metadata": {"name": format!("n{i}"), "labels": {"kubernetes.io/hostname": format!("n{i}")}},
                "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}
            }))
            .unwrap()
        })
        .collect();
    let pods: Vec<Box<Pod>> = w
        .pods
        .iter()
        .enumerate()
        .map(|(i, claims)| {
            let volumes: Vec<_> = claims
                .iter()
                .enumerate()
                .map(|(j, c)| json!({"name": format!("v{j}"), "persistentVolumeClaim": {"claimName": format!("c{}", c % w.claims.len())}}))
                .collect();
            Box::new(
                serde_json::from_value(json!({
                    "metadata": {"name": format!("p{i:02}"), "namespace": "default"},
                    "spec": {"containers": [{"name": "c"}], "volumes": volumes}
                }))
                .unwrap(),
            )
        })
        .collect();
    let mut c = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    let mut v = Volumes { enabled: true, ..Volumes::default() };
    for (name, provisioner) in [("local", "kubernetes.io/no-provisioner"), ("dynamic", "csi.example.com")] {
        let class = json!({"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"});
        v.classes.insert(name.into(), serde_json::from_value(class).unwrap());
    }
    for (i, (node, size)) in w.volumes.iter().enumerate() {
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": format!("pv{i}")},
            "spec": {"capacity": {"storage": format!("{size}Gi")}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "local": {"path": "/mnt"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [format!("n{}", node % w.nodes)]}]}]}}},
            "status": {"phase": "Available"}
        }))
        .unwrap();
        v.volumes.insert(format!("pv{i}"), pv);
    }
    for (i, (size, dynamic)) in w.claims.iter().enumerate() {
        let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": format!("c{i}"), "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": if *dynamic { "dynamic" } else { "local" },
                     "resources": {"requests": {"storage": format!("{size}Gi")}}}
        }))
        .unwrap();
        v.claims.insert(("default".into(), format!("c{i}")), pvc);
    }
    c.volumes = v;
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_volume_twice_and_no_claim_on_two_nodes(w in world()) {
        let mut cluster = build(&w);
        let plan = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
        let node_of: BTreeMap<String, String> = plan
            .placements
            .iter()
            .map(|(p, n)| (cluster.pod(*p).name().to_string(), cluster.node(*n).name().to_string()))
            .collect();
        // Each volume goes to one claim; each claim is decided once.
        let mut volume_claim: BTreeMap<&str, &str> = BTreeMap::new();
        let mut claim_binding: BTreeMap<&str, &Binding> = BTreeMap::new();
        for d in &cluster.volumes.decisions {
            prop_assert!(claim_binding.insert(&d.claim, &d.binding).is_none(), "claim {} decided twice", d.claim);
            if let Binding::Volume(v) = &d.binding {
                prop_assert!(volume_claim.insert(v, &d.claim).is_none(), "volume {v} bound twice");
            }
        }
        // Every placed pod's claims are decided, and the pods of a claim share its node.
        let mut claim_node: BTreeMap<String, String> = BTreeMap::new();
        for (pod, node) in &node_of {
            let i: usize = pod[1..].parse().unwrap();
            for c in &w.pods[i] {
                let claim = format!("c{}", c % w.claims.len());
                let binding = claim_binding.get(claim.as_str());
                prop_assert!(binding.is_some(), "{pod} placed with claim {claim} undecided");
                let want = match binding.unwrap() {
                    Binding::Provision(n) => n.clone(),
                    Binding::Volume(v) => {
                        let pv = &cluster.volumes.volumes[v];
                        let r = pv.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
                        prop_assert_eq!(r.name.as_deref(), Some(claim.as_str()));
                        let terms = &pv.spec.as_ref().unwrap().node_affinity.as_ref().unwrap().required.as_ref().unwrap().node_selector_terms;
                        terms[0].match_expressions.as_ref().unwrap()[0].values.as_ref().unwrap()[0].clone()
                    }
                };
                prop_assert_eq!(&want, node, "{} of {} on {} but bound for {}", claim, pod, node, want);
                let first = claim_node.entry(claim.clone()).or_insert_with(|| node.clone());
                prop_assert_eq!(&*first, node, "claim {} on two nodes", claim);
            }
        }
    }
}

/// Queueing hints: a pod VolumeBinding rejected everywhere waits in the unschedulable pool and is
/// tried again when a volume arrives (not before: an unrelated node change does not matter here,
/// but a storage change does).
#[test]
fn a_pod_waiting_for_a_volume_is_woken_by_its_arrival() {
    use muster_sched::volumes::StorageObject;
    use muster_sched::{Change, Engine};
    let w = World { nodes: 2, volumes: vec![], claims: vec![(1, false)], pods: vec![vec![0]] };
    let mut engine = Engine::new(build(&w), SchedulerConfig::default(), None);
    let first = engine.schedule(0);
    assert!(first.placements.is_empty());
    assert_eq!(
        first.unschedulable.get(0).unwrap().1.message(),
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    );
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": "late"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                 "local": {"path": "/mnt"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}},
        "status": {"phase": "Available"}
    }))
    .unwrap();
    engine.apply(Change::UpsertStorage(Box::new(StorageObject::Volume(pv))), 20_000).unwrap();
    let second = engine.schedule(20_000);
    let placed: Vec<&str> = second.placements.iter().map(|(_, n)| engine.cluster().node(*n).name()).collect();
    assert_eq!(placed, ["n1"]);
}

/// A pod whose binding failed gives its volume back: the volume has no `claimRef` again and the
/// decision is gone, so the pod (or another) can take it on its next attempt.
#[test]
fn a_forgotten_pod_gives_its_volume_back() {
    use muster_sched::Engine;
    let w = World { nodes: 1, volumes: vec![(0, 2)], claims: vec![(1, false)], pods: vec![vec![0]] };
    let mut engine = Engine::new(build(&w), SchedulerConfig::default(), None);
    let first = engine.schedule(0);
    assert_eq!(first.placements.len(), 1);
    let pod = first.placements[0].0;
    assert_eq!(engine.cluster().volumes.decisions.len(), 1);
    engine.forget(pod, 10);
    let v = &engine.cluster().volumes;
    assert!(v.decisions.is_empty());
    assert!(v.volumes["pv0"].spec.as_ref().unwrap().claim_ref.is_none());
    let again = engine.schedule(20_000);
    assert_eq!(again.placements.len(), 1);
    assert_eq!(engine.cluster().volumes.decisions.len(), 1);
}

/// A live world's round trip: the binding confirms the assumed pod (its decisions are carried
/// out and dropped), and a copy of the volume older than the one the scheduler assumed (a watch
/// event sent before its own write) does not undo the assumption, while the write's own copy
/// replaces it.
#[test]
fn a_confirmed_binding_settles_its_decisions_and_stale_copies_are_ignored() {
    use muster_sched::volumes::StorageObject;
    use muster_sched::{Change, Engine};
    let w = World { nodes: 1, volumes: vec![(0, 2)], claims: vec![(1, false)], pods: vec![vec![0]] };
    let mut cluster = build(&w);
    cluster.volumes.volumes.get_mut("pv0").unwrap().metadata.resource_version = Some("10".into());
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), None);
    let plan = engine.schedule(0);
    let (pod, node) = plan.placements[0];
    let claim_ref = |e: &Engine<'_>| e.cluster().volumes.volumes["pv0"].spec.as_ref().unwrap().claim_ref.is_some();
    assert!(claim_ref(&engine), "Reserve assumed the binding");
    let mut stale = engine.cluster().volumes.volumes["pv0"].clone();
    stale.spec.as_mut().unwrap().claim_ref = None;
    stale.metadata.resource_version = Some("9".into());
    engine.apply(Change::UpsertStorage(Box::new(StorageObject::Volume(stale.clone()))), 1).unwrap();
    assert!(claim_ref(&engine), "an older copy does not undo the assumption");
    let mut written = engine.cluster().volumes.volumes["pv0"].clone();
    written.metadata.resource_version = Some("11".into());
    engine.apply(Change::UpsertStorage(Box::new(StorageObject::Volume(written))), 2).unwrap();
    assert_eq!(engine.cluster().volumes.volumes["pv0"].metadata.resource_version.as_deref(), Some("11"));
    let mut bound = Box::new(engine.cluster().pod(pod).pod.object());
    bound.spec.as_mut().unwrap().node_name = Some(engine.cluster().node(node).name().to_string());
    assert_eq!(engine.cluster().volumes.decisions.len(), 1);
    engine.apply(Change::UpsertPod(bound), 3).unwrap();
    assert!(engine.cluster().volumes.decisions.is_empty(), "the confirmed pod's decisions are settled");
}
