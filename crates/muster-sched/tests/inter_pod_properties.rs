//! Invariants of PodTopologySpread and InterPodAffinity over random clusters: after a plan, no
//! DoNotSchedule constraint's skew exceeds maxSkew among the placed pods (when the pods already
//! running kept it), and no required anti-affinity is violated — also when gangs are placed and
//! rolled back (their Reserves undone).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_sched::{Cluster, PodState, Scheduler, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::json;

#[derive(Clone, Debug)]
struct PodSpec {
    app: u8,
    /// 0: none, 1: zone spread, 2: hostname spread, 3: hostname anti-affinity, 4: zone anti-affinity.
    rule: u8,
    max_skew: i32,
    cpu: u32,
    /// Member of gang g (minCount = 2), if any.
    gang: Option<u8>,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (0u8..2, 0u8..5, 1i32..3, 1u32..5, prop::option::weighted(0.3, 0u8..3))
        .prop_map(|(app, rule, max_skew, cpu, gang)| PodSpec { app, rule, max_skew, cpu, gang })
}

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

fn build(nodes: &[(u8, u32)], pods: &[PodSpec]) -> Cluster {
    let nodes: Vec<Node> = nodes
        .iter()
        .enumerate()
        .map(|(i, (zone, cpu))| {
            serde_json::from_value(json!({
                "metadata": {"name": format!("n{i}"), "labels": {ZONE: format!("z{zone}"), HOST: format!("n{i}")}},
                "status": {"allocatable": {"cpu": cpu.to_string(), "memory": "64Gi", "pods": "110"}}
            }))
            .unwrap()
        })
        .collect();
    let pods: Vec<Box<Pod>> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let app = format!("a{}", p.app);
            let sel = json!({"matchLabels": {"app": app}});
            let mut spec =
                json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": p.cpu.to_string()}}}]});
            match p.rule {
                1 | 2 => {
                    let key = if p.rule == 1 { ZONE } else { HOST };
                    spec["topologySpreadConstraints"] = json!([{"maxSkew": p.max_skew, "topologyKey": key,
                        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]);
                }
                3 | 4 => {
                    let key = if p.rule == 3 { HOST } else { ZONE };
                    spec["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                        [{"topologyKey": key, "labelSelector": sel}]}});
                }
                _ => {}
            }
            if let Some(g) = p.gang {
                spec["schedulingGroup"] = json!({"podGroupName": format!("g{g}")});
            }
            Box::new(
                serde_json::from_value(json!({
                    "metadata": {"name": format!("p{i:03}"), "namespace": "ns", "labels": {"app": app}},
                    "spec": spec
                }))
                .unwrap(),
            )
        })
        .collect();
    let mut c = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    let groups: Vec<PodGroup> = (0..3)
        .map(|g| {
            serde_json::from_value(json!({"metadata": {"name": format!("g{g}"), "namespace": "ns"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}))
            .unwrap()
        })
        .collect();
    c.add_pod_groups(groups);
    c
}

fn label<'a>(c: &'a Cluster, n: muster_sched::NodeId, key: &str) -> &'a str {
    c.node(n).detail.labels.get(key).map(String::as_str).unwrap_or("")
}

/// Placed pods per (app, domain of `key`); every domain of the key present (0 if empty).
fn counts(c: &Cluster, key: &str, app: &str) -> BTreeMap<String, i64> {
    let mut m: BTreeMap<String, i64> = c.nodes.iter().map(|n| (n.detail.labels[key].clone(), 0)).collect();
    for p in &c.pods {
        if let Some(n) = p.state.on_node()
            && p.pod.meta().labels.as_ref().and_then(|l| l.get("app")).map(String::as_str) == Some(app)
        {
            *m.entry(label(c, n, key).to_string()).or_default() += 1;
        }
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn spread_and_anti_affinity_hold(
        nodes in prop::collection::vec((0u8..3, 2u32..12), 1..7),
        pods in prop::collection::vec(pod_spec(), 1..24),
    ) {
        let mut cluster = build(&nodes, &pods);
        let _ = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
        for (i, spec) in pods.iter().enumerate() {
            let p = &cluster.pods[i];
            prop_assert!(matches!(p.state, PodState::Pending | PodState::Assumed(_)));
            let Some(node) = p.state.on_node() else { continue };
            let app = format!("a{}", spec.app);
            match spec.rule {
                // A placed pod kept its constraint at its placement; the skew can only have grown
                // by later placements of pods with the same rule, which checked it too — so the
                // final skew of the domains is within maxSkew for the largest maxSkew used.
                1 | 2 => {
                    let key = if spec.rule == 1 { ZONE } else { HOST };
                    let largest = pods.iter().filter(|o| o.rule == spec.rule && o.app == spec.app).map(|o| o.max_skew).max().unwrap_or(0);
                    let only_spread = pods.iter().all(|o| o.app != spec.app || o.rule == spec.rule);
                    if only_spread {
                        let m = counts(&cluster, key, &app);
                        let (min, max) = (m.values().min().copied().unwrap_or(0), m.values().max().copied().unwrap_or(0));
                        prop_assert!(max - min <= i64::from(largest), "{key} {m:?} maxSkew {largest}");
                    }
                }
                3 | 4 => {
                    let key = if spec.rule == 3 { HOST } else { ZONE };
                    let domain = label(&cluster, node, key).to_string();
                    for (j, other) in cluster.pods.iter().enumerate() {
                        if j == i || other.pod.meta().labels.as_ref().and_then(|l| l.get("app")) != Some(&app) {
                            continue;
                        }
                        if let Some(n) = other.state.on_node() {
                            prop_assert!(label(&cluster, n, key) != domain, "p{i} and p{j} share {key}={domain}");
                        }
                    }
                }
                _ => {}
            }
        }
    }
}
