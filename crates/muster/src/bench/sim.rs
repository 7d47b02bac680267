//! `muster bench sim`: the simulator at the scale of issue 13 — NODES × 8 H100 (the `gpu`
//! bench's cluster), JOBS jobs arriving over DAYS simulated days, mixed as the `gpu` bench mixes
//! them (singles of 1–8 GPUs, gangs of 4–64 pods) with durations drawn by the same seeded PRNG.
//! Reports wall time, events/s and the share of time in the engine.

use std::time::Instant;

use muster_sched::{Cluster, Engine, SchedulerConfig, SchedulerNames};
use muster_sim::trace::{Job, Trace};
use muster_sim::world::{Options, Sim, Stopwatch};

use super::{NODE_GPUS, SplitMix64, peak_rss_mib};

struct Wall(Instant);

impl Stopwatch for Wall {
    fn nanos(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// `jobs` jobs over `days` days: arrivals uniform over the span (sorted), 97 % single pods of 1
/// (50 %), 2 (25 %), 4 (15 %) or 8 (10 %) GPUs running 5 minutes to 4 hours; 3 % gangs of 4 to
/// 64 pods of 8 or 4 GPUs running 30 minutes to 6 hours; priorities 0 (80 %) or 100.
pub fn trace(jobs: usize, days: u64, seed: u64) -> Trace {
    let mut rng = SplitMix64(seed);
    let span = days * 86_400_000;
    let mut arrivals: Vec<u64> = (0..jobs).map(|_| rng.below(span.max(1))).collect();
    arrivals.sort_unstable();
    let minutes = |rng: &mut SplitMix64, lo: u64, hi: u64| (lo + rng.below(hi - lo + 1)) * 60_000;
    let jobs = arrivals
        .into_iter()
        .enumerate()
        .map(|(j, arrival)| {
            let gang = rng.below(100) < 3;
            let (pods, gpus, duration, class) = if gang {
                let (size, gpus) = super::gang_shape(&mut rng);
                (size as u32, gpus as u32, minutes(&mut rng, 30, 360), "training") // at most 64 and 8
            } else {
                let gpus = match rng.below(20) {
                    0..10 => 1,
                    10..15 => 2,
                    15..18 => 4,
                    _ => 8,
                };
                (1, gpus, minutes(&mut rng, 5, 240), "batch")
            };
            let priority = if rng.below(5) == 0 { 100 } else { 0 };
            Job {
                name: format!("job-{j:06}"),
                namespace: "ml".into(),
                arrival,
                duration,
                pods,
                gang,
                gpus_per_pod: gpus,
                device_class: Some("nvidia-h100".into()),
                priority: Some(priority),
                priority_class_name: None,
                class: class.into(),
                cpu: Some(format!("{}", 20 * gpus)),
                memory: Some(format!("{}Gi", 200 * gpus)),
                device_selector: None,
                capacity_requests: Vec::new(),
            }
        })
        .collect();
    Trace { jobs, ..Trace::default() }
}

pub fn sim(
    nodes: usize,
    jobs: usize,
    days: u64,
    seed: u64,
    config: &SchedulerConfig,
    wall_limit: Option<f64>,
    verdict_reuse: bool,
) -> anyhow::Result<String> {
    let (node_objs, slices, classes) = super::h100_cluster(nodes)?;
    let trace = trace(jobs, days, seed);
    let pods: u64 = trace.jobs.iter().map(|j| u64::from(j.pods)).sum();
    let cluster = Cluster::build(node_objs, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default())
        .map_err(|e| anyhow::anyhow!("{} model errors", e.len()))?;
    let inventory = muster_sim::fragmentation::Inventory::from_slices(&slices);
    let ctx = muster_sched::DraContext {
        index: muster_alloc::SliceIndex::new(slices),
        classes: classes.clone(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let devices = (nodes * NODE_GPUS) as u64;
    let wall = Wall(Instant::now());
    let engine = Engine::new(cluster, config.clone(), Some(&ctx)).with_gang_bound();
    let engine = if verdict_reuse { engine } else { engine.without_verdict_reuse() };
    let options =
        Options { until: None, seed, devices, samples: false, default_class: None, inventory, ..Default::default() };
    let mut sim = Sim::new(engine, trace, options).with_stopwatch(&wall);
    let mut steps = 0u64;
    let mut stopped = None;
    while sim.step().map_err(|e| anyhow::anyhow!("{e}"))? {
        steps += 1;
        if let Some(limit) = wall_limit
            && steps.is_multiple_of(64)
            && wall.nanos() as f64 / 1e9 > limit
        {
            stopped = Some(sim.now());
            break;
        }
    }
    let timing = sim.timing();
    let reused = sim.engine().reused_verdicts();
    let kept = sim.engine().kept_rejections();
    let journal = sim.engine().journal_verdicts();
    let findings = sim.engine().preemption_findings_reused();
    let allocations = sim.engine().dra_memo_counts();
    let report = sim.report();
    let total = wall.nanos() as f64 / 1e9;
    let s = &report.summary;
    let not_arrived = report.jobs.iter().filter(|j| j.state == "pending" && j.arrival > s.simulated_seconds).count();
    let stopped = match stopped {
        Some(at) => format!(
            "  STOPPED by --wall-limit at simulated {:.2} days (the figures below are up to then)\n",
            at as f64 / 86_400_000.0
        ),
        None => String::new(),
    };
    Ok(format!(
        "sim: {nodes} nodes x {NODE_GPUS} GPUs, {jobs} jobs ({pods} pods) over {days} days (seed {seed})\n{stopped}  wall: {total:.2} s; {} events, {} steps: {:.0} events/s\n  time in the engine: {:.1} %, in the world: {:.1} %\n  engine: {} schedule calls, {} pods placed, {} found unschedulable ({reused} of them by an equivalent pod's verdict), {} gang attempts ({} repeating their last failure from its kept reading); {kept} node Filters skipped (unchanged since the pod's last verdict; {journal} verdicts standing on the node journal's changed nodes alone); {findings} preemption findings reused (nodes unchanged since an equivalent pod's trial); {} allocator verdicts computed for Filter ({} read back for a state the node's devices were in before)\n  simulated {:.1} days: {} finished, {} running, {} pending ({} of them not arrived yet); GPU utilization {:.1} %; wait p50 {} s, p95 {} s, p99 {} s; {} preemptions\n  gang wait p50 {} s, p95 {} s, p99 {} s; free devices {:.1} on average, {:.1} stranded (nodes with < {} free)\n  peak RSS: {:.0} MiB\n",
        s.events,
        s.steps,
        s.events as f64 / total,
        timing.engine_ns as f64 / timing.total_ns.max(1) as f64 * 100.0,
        100.0 - timing.engine_ns as f64 / timing.total_ns.max(1) as f64 * 100.0,
        timing.schedule_calls,
        timing.placed,
        timing.unschedulable,
        timing.group_attempts,
        timing.group_repeats,
        allocations.computed,
        allocations.read_from_aside,
        s.simulated_seconds / 86_400.0,
        s.finished,
        s.running,
        s.pending,
        not_arrived,
        s.gpu_utilization * 100.0,
        fmt(s.wait_seconds.p50),
        fmt(s.wait_seconds.p95),
        fmt(s.wait_seconds.p99),
        s.preemptions,
        fmt(s.gang_wait_seconds.p50),
        fmt(s.gang_wait_seconds.p95),
        fmt(s.gang_wait_seconds.p99),
        s.fragmentation.mean_free_gpus,
        s.fragmentation.mean_stranded_gpus,
        s.fragmentation.gpus_per_pod,
        peak_rss_mib().unwrap_or(f64::NAN)
    ))
}

fn fmt(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.0}"))
}
