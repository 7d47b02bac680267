//! Properties of simulations over random small traces: no device is allocated to two pods at any
//! instant, no gang is ever partly running, and at the end every job is finished, running or
//! pending (with a reason); run to the end, the only jobs left pending are those that cannot fit
//! the cluster at all; the free and stranded devices kept current agree with a fresh count at
//! every step. Same trace, same report, with or without the allocator's memory.

use muster_sched::{Cluster, Engine, SchedulerConfig, SchedulerNames};
use muster_sim::trace::{ClusterEvent, EventKind, Trace};
use muster_sim::{Options, Report, Sim};
use proptest::prelude::*;

mod common;

use common::{GPUS_PER_NODE, cluster};

/// (arrival minute, duration minutes, pods, gang, gpus per pod, high priority)
type JobShape = (u64, u64, u32, bool, u32, bool);

fn trace(shapes: &[JobShape], drains: &[(u64, usize)], nodes: usize) -> Trace {
    let jobs = shapes
        .iter()
        .enumerate()
        .map(|(i, &(a, d, p, g, n, high))| common::job(i, (a, d, p, g, n), if high { 100 } else { 0 }))
        .collect();
    let mut events = Vec::new();
    for &(at, node) in drains {
        let node = format!("n{}", node % nodes);
        events.push(ClusterEvent { at: at * 60_000, kind: EventKind::DrainNode(node.clone()) });
        events.push(ClusterEvent { at: at * 60_000 + 600_000, kind: EventKind::ReturnNode(node) });
    }
    Trace { jobs, events, ..Trace::default() }
}

fn simulate(shapes: &[JobShape], drains: &[(u64, usize)], nodes: usize, memo: bool) -> Result<Report, TestCaseError> {
    let (node_objs, slices, classes) = cluster(nodes);
    let c = Cluster::build(node_objs, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
    let ctx = muster_sched::DraContext {
        index: muster_alloc::SliceIndex::new(slices.clone()),
        classes: classes.clone(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let engine = Engine::new(c, SchedulerConfig::default(), Some(&ctx));
    let engine = if memo { engine } else { engine.without_dra_memo().without_verdict_reuse() };
    let options = Options {
        devices: (nodes as u64) * u64::from(GPUS_PER_NODE),
        default_class: Some("gpu".into()),
        // Two nodes per rack: the per-rack counts are checked at every step too.
        inventory: muster_sim::fragmentation::Inventory::from_slices(&slices)
            .with_racks(|n| n[1..].parse::<usize>().ok().map(|i| format!("rack-{}", i / 2))),
        ..Options::default()
    };
    let mut sim = Sim::new(engine, trace(shapes, drains, nodes), options);
    let mut steps = 0;
    while sim.step().map_err(|e| TestCaseError::fail(e.to_string()))? {
        steps += 1;
        prop_assert!(steps < 100_000, "the simulation does not end");
        if let Err(e) = sim.check() {
            return Err(TestCaseError::fail(format!("at {} ms: {e}", sim.now())));
        }
    }
    Ok(sim.report())
}

fn job() -> impl Strategy<Value = JobShape> {
    (0u64..30, 1u64..60, 1u32..4, any::<bool>(), 0u32..5, prop::bool::weighted(0.2))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_device_twice_no_partial_gang_every_job_accounted(
        nodes in 1usize..4,
        shapes in prop::collection::vec(job(), 1..10),
        drains in prop::collection::vec((0u64..60, 0usize..4), 0..3),
    ) {
        let report = simulate(&shapes, &drains, nodes, true)?;
        prop_assert_eq!(report.jobs.len(), shapes.len());
        prop_assert_eq!(report.summary.finished + report.summary.running + report.summary.pending, shapes.len());
        prop_assert!(report.summary.gpu_utilization <= 1.0);
        let f = &report.summary.fragmentation;
        let devices = (nodes as u32 * GPUS_PER_NODE) as f64;
        prop_assert!(f.mean_stranded_gpus <= f.mean_free_gpus && f.mean_free_gpus <= devices, "{f:?}");
        prop_assert!(f.peak_stranded_gpus as f64 <= devices, "{f:?}");
        for (j, (_, _, pods, gang, gpus, _)) in report.jobs.iter().zip(&shapes) {
            prop_assert!(matches!(j.state, "finished" | "running" | "pending"));
            if j.state == "pending" {
                prop_assert!(j.reason.is_some(), "{} pending without a reason", j.name);
            }
            // Run to the end with every drained node back: what can fit, ran.
            let fits = *gpus <= GPUS_PER_NODE && (!gang || pods * gpus <= nodes as u32 * GPUS_PER_NODE);
            prop_assert_eq!(j.state == "finished", fits, "{}: {:?} ({:?})", j.name, j.state, j.reason);
        }
        let again = simulate(&shapes, &drains, nodes, true)?;
        prop_assert_eq!(report.json(), again.json());
        // The allocator's remembered verdicts (kept across claims confirmed, released and
        // preempted) and the verdicts of equivalent pods never change a decision.
        let fresh = simulate(&shapes, &drains, nodes, false)?;
        prop_assert_eq!(report.json(), fresh.json());
    }
}

/// A case random traces found: a high-priority gang preempting while others come and go.
#[test]
fn a_preempting_gang_keeps_the_device_count_exact() {
    let shapes = [
        (14, 10, 1, false, 4, false),
        (13, 44, 3, false, 1, false),
        (27, 1, 2, true, 3, true),
        (0, 43, 3, false, 2, false),
    ];
    if let Err(e) = simulate(&shapes, &[], 2, true) {
        panic!("{e}");
    }
}
