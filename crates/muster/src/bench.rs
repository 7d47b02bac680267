//! `muster bench`: generated clusters in scheduler_perf's shapes, timed end to end.
//!
//! Figures come from wall-clock time around whole phases (never from a timed unit test) and go
//! into BENCHMARKS.md.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use muster_sched::{Cluster, Scheduler, SchedulerConfig, SchedulerNames};

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

/// scheduler_perf's `node-default.yaml`: 4 cpu, 32Gi, 110 pods.
pub fn basic_node(i: usize) -> Node {
    let list: BTreeMap<String, Quantity> =
        [("cpu", "4"), ("memory", "32Gi"), ("pods", "110")].into_iter().map(|(k, v)| (k.to_string(), q(v))).collect();
    Node {
        metadata: ObjectMeta { name: Some(format!("scheduler-perf-{i:05}")), ..Default::default() },
        status: Some(NodeStatus { capacity: Some(list.clone()), allocatable: Some(list), ..Default::default() }),
        ..Default::default()
    }
}

/// scheduler_perf's `pod-default.yaml`: one pause container with 100m cpu and 500Mi memory. With
/// `shapes > 1`, pod i asks `i % shapes` KiB more memory, so that consecutive pods differ.
pub fn basic_pod(i: usize, shapes: usize) -> Pod {
    let memory = format!("{}Ki", 500 * 1024 + i % shapes.max(1));
    let list: BTreeMap<String, Quantity> =
        [("cpu", "100m".to_string()), ("memory", memory)].into_iter().map(|(k, v)| (k.to_string(), q(&v))).collect();
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("pod-{i:06}")),
            namespace: Some("sched-basic".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "pause".into(),
                image: Some("registry.k8s.io/pause:3.10".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(list.clone()),
                    limits: Some(list),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn basic_objects(nodes: usize, pods: usize, shapes: usize) -> (Vec<Node>, Vec<Box<Pod>>) {
    ((0..nodes).map(basic_node).collect(), (0..pods).map(|i| Box::new(basic_pod(i, shapes))).collect())
}

/// Writes the SchedulingBasic cluster as one multi-document YAML file (a dump to load).
pub fn write_yaml(path: &std::path::Path, nodes: usize, pods: usize) -> anyhow::Result<()> {
    use std::io::Write;
    let (ns, ps) = basic_objects(nodes, pods, 1);
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    for n in &ns {
        writeln!(w, "---")?;
        w.write_all(serde_saphyr::to_string(n)?.as_bytes())?;
    }
    for p in &ps {
        writeln!(w, "---")?;
        w.write_all(serde_saphyr::to_string(p)?.as_bytes())?;
    }
    w.flush()?;
    Ok(())
}

/// Peak resident memory of this process (`VmHWM`), in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Times the plan cycle (not the generation or the snapshot build) `iterations` times.
pub fn plan(
    nodes: usize,
    pods: usize,
    shapes: usize,
    iterations: usize,
    config: &SchedulerConfig,
) -> anyhow::Result<String> {
    let (ns, ps) = basic_objects(nodes, pods, shapes);
    let t = Instant::now();
    let base = Cluster::build(ns, ps, &[], &SchedulerNames::default())
        .map_err(|e| anyhow::anyhow!("{} model errors", e.len()))?;
    let build = t.elapsed();
    let mut runs = Vec::new();
    let mut placed = 0;
    for _ in 0..iterations.max(1) {
        let mut cluster = base.clone();
        let t = Instant::now();
        let plan = Scheduler::new(&mut cluster, config.clone()).plan();
        runs.push(t.elapsed());
        placed = plan.placements.len();
    }
    runs.sort();
    let median = runs[runs.len() / 2];
    let best = runs[0];
    Ok(format!(
        "SchedulingBasic: {nodes} nodes, {pods} pending pods in {shapes} shape(s), {iterations} runs\n  snapshot build: {:.3} s\n  plan cycle: median {:.3} s ({:.0} pods/s), best {:.3} s ({:.0} pods/s)\n  placed: {placed}/{pods}\n  peak RSS: {:.0} MiB\n",
        secs(build),
        secs(median),
        pods as f64 / secs(median),
        secs(best),
        pods as f64 / secs(best),
        peak_rss_mib().unwrap_or(f64::NAN)
    ))
}
