//! `muster bench churn`: a living cluster fed one change at a time through the engine — running
//! pods finish, new pods arrive, nodes are cordoned and return — each change followed by
//! scheduling until nothing is ready, as `muster run` and `muster sim` will drive it.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeSpec, Pod, PodStatus};
use muster_sched::{Change, Cluster, Engine, PodState, SchedulerConfig, SchedulerNames};

use super::{SplitMix64, basic_node, basic_pod, micros, peak_rss_mib, percentile, secs};

/// One external event and the change it is.
enum Event {
    Finish(String),
    Arrive(Box<Pod>),
    Node(Box<Node>),
}

/// A SchedulingBasic pod bound to a node, running.
fn running_pod(i: usize, nodes: usize) -> Box<Pod> {
    let mut pod = basic_pod(i, 1);
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(basic_node(i % nodes).metadata.name.unwrap_or_default());
    }
    pod.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
    Box::new(pod)
}

/// A pod no node can take: required pod affinity, over the hostname, to pods labelled
/// `app: absent`, which never come. InterPodAffinity rejects it on every node.
fn waiting_pod(i: usize) -> Box<Pod> {
    let mut pod = basic_pod(i, 1);
    pod.metadata.name = Some(format!("waiting-{i:06}"));
    if let Some(spec) = pod.spec.as_mut() {
        let term = serde_json::json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "absent"}}}]}});
        spec.affinity = serde_json::from_value(term).ok();
    }
    Box::new(pod)
}

/// The events, made one at a time as a watch would decode them (the object is fresh in memory
/// when it is applied; making it is not timed): 45 % a running pod finishes, 45 % a pod arrives,
/// 10 % a node is cordoned or returns.
struct Events {
    rng: SplitMix64,
    live: Vec<usize>,
    cordoned: Vec<bool>,
    next: usize,
}

impl Events {
    fn new(nodes: usize, running: usize, seed: u64) -> Self {
        Events { rng: SplitMix64(seed), live: (0..running).collect(), cordoned: vec![false; nodes], next: running }
    }

    fn next(&mut self) -> Event {
        let roll = self.rng.below(100);
        if roll < 45 && !self.live.is_empty() {
            let i = self.live.swap_remove(self.rng.below(self.live.len() as u64) as usize);
            Event::Finish(format!("sched-basic/pod-{i:06}"))
        } else if roll < 90 {
            self.live.push(self.next);
            self.next += 1;
            Event::Arrive(Box::new(basic_pod(self.next - 1, 1)))
        } else {
            let n = self.rng.below(self.cordoned.len() as u64) as usize;
            self.cordoned[n] = !self.cordoned[n];
            let mut node = basic_node(n);
            node.spec = Some(NodeSpec { unschedulable: Some(self.cordoned[n]), ..Default::default() });
            Event::Node(Box::new(node))
        }
    }
}

/// Runs the churn and reports events/s and the cost of one pod add or delete.
/// `waiting` pods that never fit wait in the unschedulable pool meanwhile (the queueing hints decide
/// which events wake them).
pub fn churn(nodes: usize, running: usize, count: usize, seed: u64, waiting: usize) -> anyhow::Result<String> {
    let mut bound: Vec<Box<Pod>> = (0..running).map(|i| running_pod(i, nodes)).collect();
    bound.extend((0..waiting).map(waiting_pod));
    let cluster = Cluster::build((0..nodes).map(basic_node).collect(), bound, &[], &SchedulerNames::default())
        .map_err(|e| anyhow::anyhow!("{} model errors", e.len()))?;
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), None);
    let mut events = Events::new(nodes, running, seed);
    let (mut adds, mut deletes, mut placed, mut confirms) = (Vec::new(), Vec::new(), 0usize, 0usize);
    let mut failed = 0usize;
    if waiting > 0 {
        failed += engine.schedule(0).unschedulable.len();
    }
    let mut confirm_time = Duration::ZERO;
    let (mut total, mut making) = (Duration::ZERO, Duration::ZERO);
    for step in 0..count {
        let now = step as u64 * 10;
        let t = Instant::now();
        let event = events.next();
        making += t.elapsed();
        let start = Instant::now();
        let change = match event {
            Event::Finish(key) => Change::DeletePod(key),
            Event::Arrive(pod) => Change::UpsertPod(pod),
            Event::Node(node) => Change::UpsertNode(node),
        };
        let kind = match change {
            Change::UpsertPod(_) => Some(&mut adds),
            Change::DeletePod(_) => Some(&mut deletes),
            _ => None,
        };
        let t = Instant::now();
        engine.apply(change, now).map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Some(times) = kind {
            times.push(t.elapsed());
        }
        let plan = engine.schedule(now);
        placed += plan.placements.len();
        failed += plan.unschedulable.len();
        // The world binds what was placed: the pod comes back bound, confirming the assumption.
        let t = Instant::now();
        for (pod, node) in plan.placements {
            let mut bound = Box::new(engine.cluster().pod(pod).pod.object());
            if let Some(spec) = bound.spec.as_mut() {
                spec.node_name = Some(engine.cluster().node(node).name().to_string());
            }
            engine.apply(Change::UpsertPod(bound), now).map_err(|e| anyhow::anyhow!("{e}"))?;
            confirms += 1;
        }
        confirm_time += t.elapsed();
        total += start.elapsed();
    }
    adds.sort();
    deletes.sort();
    let c = engine.cluster();
    let bound = c.pods.iter().filter(|p| matches!(p.state, PodState::Bound(_))).count();
    let pending = c.pods.iter().filter(|p| p.state == PodState::Pending).count();
    let (active, backoff, unschedulable) = engine.queue().counts();
    Ok(format!(
        "churn: {nodes} nodes, {running} running pods, {waiting} never fitting, {count} events (seed {seed})\n  total: {:.3} s ({:.0} events/s), of which confirming {confirms} bindings {:.3} s (making the events, not counted: {:.3} s)\n  apply: pod add median {:.2} µs (p99 {:.2} µs, max {:.0} µs), pod delete median {:.2} µs (p99 {:.2} µs, max {:.0} µs)\n  placed: {placed}, failed attempts: {failed}; at the end {bound} bound, {pending} pending (queue: {active} active, {backoff} backoff, {unschedulable} unschedulable)\n  peak RSS: {:.0} MiB\n",
        secs(total),
        count as f64 / secs(total),
        secs(confirm_time),
        secs(making),
        micros(percentile(&adds, 50)),
        micros(percentile(&adds, 99)),
        micros(adds.last().copied().unwrap_or_default()),
        micros(percentile(&deletes, 50)),
        micros(percentile(&deletes, 99)),
        micros(deletes.last().copied().unwrap_or_default()),
        peak_rss_mib().unwrap_or(f64::NAN)
    ))
}
