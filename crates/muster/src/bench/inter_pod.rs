//! `muster bench inter-pod`: scheduler_perf's shapes for the inter-pod plugins —
//! TopologySpreading, SchedulingPodAntiAffinity, SchedulingPreferredPodAffinity — generated in
//! memory: SchedulingBasic nodes (with zone and hostname labels), init pods already bound, then
//! the measured pods pending. Times the plan cycle only.

use k8s_openapi::api::core::v1::Pod;
use muster_sched::{Cluster, SchedulerConfig, SchedulerNames};
use serde_json::json;

use super::{basic_node, basic_pod, peak_rss_mib, secs};

/// Which shape.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// `pod-with-topology-spreading.yaml`: zone, maxSkew 5, DoNotSchedule, over `color: blue`;
    /// init pods are `pod-default.yaml` pods.
    TopologySpreading,
    /// `pod-with-pod-anti-affinity.yaml`: required anti-affinity on the hostname to `color: green`.
    PodAntiAffinity,
    /// `pod-with-preferred-pod-affinity.yaml`: preferred affinity (weight 1) on the hostname to
    /// `color: red`.
    PreferredPodAffinity,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::TopologySpreading => "TopologySpreading",
            Shape::PodAntiAffinity => "SchedulingPodAntiAffinity",
            Shape::PreferredPodAffinity => "SchedulingPreferredPodAffinity",
        }
    }

    /// Pod `i` of the shape in `namespace` (the terms name both namespaces the bench uses, so
    /// that they select the other pods; upstream's template names `sched-test` and `sched-setup`,
    /// namespaces its pods are not created in).
    fn pod(self, i: usize, namespace: &str, init: bool) -> Box<Pod> {
        let mut pod = basic_pod(i, 1);
        pod.metadata.namespace = Some(namespace.into());
        let spec = pod.spec.as_mut().expect("basic pods have a spec");
        let namespaces = json!(["sched-0", "sched-1"]);
        let (color, extra) = match self {
            Shape::TopologySpreading if init => return Box::new(pod),
            Shape::TopologySpreading => (
                "blue",
                json!({"topologySpreadConstraints": [{"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"color": "blue"}}}]}),
            ),
            Shape::PodAntiAffinity => (
                "green",
                json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname",
                     "namespaces": namespaces}]}}}),
            ),
            Shape::PreferredPodAffinity => (
                "red",
                json!({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": {"color": "red"}},
                     "topologyKey": "kubernetes.io/hostname", "namespaces": namespaces}}]}}}),
            ),
        };
        pod.metadata.labels = Some([("color".to_string(), color.to_string())].into());
        if let Some(c) = extra.get("topologySpreadConstraints") {
            spec.topology_spread_constraints = serde_json::from_value(c.clone()).ok();
        }
        if let Some(a) = extra.get("affinity") {
            spec.affinity = serde_json::from_value(a.clone()).ok();
        }
        Box::new(pod)
    }
}

/// The cluster: `nodes` nodes in three zones, `init` pods bound (one per node, round-robin),
/// `measure` pods pending.
fn objects(shape: Shape, nodes: usize, init: usize, measure: usize) -> Cluster {
    let ns: Vec<_> = (0..nodes)
        .map(|i| {
            let mut n = basic_node(i);
            let name = n.metadata.name.clone().unwrap_or_default();
            n.metadata.labels = Some(
                [
                    ("topology.kubernetes.io/zone".to_string(), format!("moon-{}", i % 3 + 1)),
                    ("kubernetes.io/hostname".to_string(), name),
                ]
                .into(),
            );
            n
        })
        .collect();
    let mut pods: Vec<Box<Pod>> = Vec::with_capacity(init + measure);
    for i in 0..init {
        let mut p = shape.pod(i, "sched-0", true);
        p.metadata.name = Some(format!("init-{i:06}"));
        if let Some(s) = p.spec.as_mut() {
            s.node_name = basic_node(i % nodes.max(1)).metadata.name;
        }
        pods.push(p);
    }
    for i in 0..measure {
        pods.push(shape.pod(i, "sched-1", false));
    }
    Cluster::build(ns, pods, &[], &SchedulerNames::default()).expect("generated objects are valid")
}

/// Times the plan cycle over the measured pods `iterations` times.
pub fn inter_pod(
    shape: Shape,
    nodes: usize,
    init: usize,
    measure: usize,
    iterations: usize,
    config: &SchedulerConfig,
) -> anyhow::Result<String> {
    let base = objects(shape, nodes, init, measure);
    let (median, best, placed) = super::time_plans(&base, config, iterations);
    Ok(format!(
        "{}: {nodes} nodes (3 zones), {init} init pods bound, {measure} measured pods, {} runs\n  plan cycle: median {:.3} s ({:.0} pods/s), best {:.3} s ({:.0} pods/s)\n  placed: {placed}/{measure}\n  peak RSS: {:.0} MiB\n",
        shape.name(),
        iterations.max(1),
        secs(median),
        measure as f64 / secs(median),
        secs(best),
        measure as f64 / secs(best),
        peak_rss_mib().unwrap_or(f64::NAN)
    ))
}
