//! Test helpers for the inter-pod plugins: small clusters from JSON, and each node's Filter
//! verdict or normalized score for one incoming pod.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::SchedulerNames;
use crate::cluster::{Cluster, NodeId};
use crate::cycle::run_all_filters;
use crate::framework::CycleState;
use crate::plugins::inter_pod_affinity::{self, InterPodAffinityArgs};
use crate::plugins::pod_topology_spread::{self, PodTopologySpreadArgs};
use crate::topology::TopologyCache;

pub fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    let labels: serde_json::Map<String, Value> = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}
    }))
    .unwrap()
}

/// A node with a zone and its hostname label.
pub fn zoned(name: &str, zone: &str) -> Node {
    node(name, &[("zone", zone), ("kubernetes.io/hostname", name)])
}

/// A pod `name` in namespace `default` (unless `extra` sets metadata.namespace) with `labels`,
/// bound to `on` when given, its spec extended with `spec`.
pub fn pod(name: &str, labels: &[(&str, &str)], on: Option<&str>, spec: Value) -> Box<Pod> {
    let labels: serde_json::Map<String, Value> = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let mut s = json!({"containers": [{"name": "c"}]});
    if let Some(n) = on {
        s["nodeName"] = json!(n);
    }
    for (k, v) in spec.as_object().into_iter().flatten() {
        s[k] = v.clone();
    }
    let ns = spec.get("_namespace").and_then(Value::as_str).unwrap_or("default");
    s.as_object_mut().unwrap().remove("_namespace");
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": s}))
            .unwrap(),
    )
}

pub fn cluster(nodes: Vec<Node>, pods: Vec<Box<Pod>>) -> Cluster {
    Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap()
}

fn incoming(c: &Cluster, name: &str) -> usize {
    c.pods.iter().position(|p| p.name() == name).expect("the incoming pod")
}

/// Each node's Filter verdict for the pod: `None` when it passes, else the reason.
pub fn verdicts(c: &Cluster, name: &str) -> Vec<(String, Option<String>)> {
    let mut state = CycleState::new(&c.pods[incoming(c, name)]);
    state.pre_filter_inter_pod(c, &mut TopologyCache::default(), &PodTopologySpreadArgs::default());
    (0..c.nodes.len())
        .map(|i| {
            let id = NodeId(i as u32);
            let v = run_all_filters(&state, id, &c.nodes[i], c).err().map(|r| r.reasons.join("; "));
            (c.nodes[i].name().to_string(), v)
        })
        .collect()
}

/// The nodes that pass.
pub fn fits(c: &Cluster, name: &str) -> Vec<String> {
    verdicts(c, name).into_iter().filter(|(_, v)| v.is_none()).map(|(n, _)| n).collect()
}

/// PodTopologySpread's normalized scores over every node (all feasible).
pub fn spread_scores(c: &Cluster, name: &str, args: &PodTopologySpreadArgs) -> Option<Vec<i64>> {
    let state = CycleState::new(&c.pods[incoming(c, name)]);
    let all: Vec<NodeId> = (0..c.nodes.len() as u32).map(NodeId).collect();
    pod_topology_spread::score(&state, &all, c, &mut TopologyCache::default(), args)
}

/// InterPodAffinity's normalized scores over every node (all feasible).
pub fn affinity_scores(c: &Cluster, name: &str, args: &InterPodAffinityArgs) -> Option<Vec<i64>> {
    let state = CycleState::new(&c.pods[incoming(c, name)]);
    let all: Vec<NodeId> = (0..c.nodes.len() as u32).map(NodeId).collect();
    inter_pod_affinity::score(&state, &all, c, &mut TopologyCache::default(), args)
}
