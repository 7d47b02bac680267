//! Properties of simulations with inference endpoints that an HPA scales (to zero, too), beside
//! jobs that may preempt their replicas: over random load curves, no device is allocated twice and
//! no gang is partly running at any step; an endpoint never has more than `maxReplicas` nor,
//! once synced, fewer than `minReplicas`; with the load at zero in the end, it is back at
//! `minReplicas`; the same trace gives the same report.

mod common;

use common::{job, run_checked};
use muster_sim::Report;
use muster_sim::trace::behavior::{Behavior, Policy, Rules, Select};
use muster_sim::trace::{Endpoint, Trace};
use proptest::prelude::*;

/// (min replicas, max replicas, cold start seconds, GPUs per replica, load values every 10 minutes)
type EndpointShape = (u32, u32, u64, u32, Vec<u32>);
/// (arrival minute, duration minutes, pods, gang, GPUs per pod, high priority)
type JobShape = (u64, u64, u32, bool, u32, bool);

fn trace(endpoints: &[EndpointShape], jobs: &[JobShape]) -> Trace {
    let endpoints = endpoints
        .iter()
        .enumerate()
        .map(|(i, (min, max, cold, gpus, load))| {
            let mut load: Vec<(u64, f64)> =
                load.iter().enumerate().map(|(k, v)| (k as u64 * 600_000, f64::from(*v))).collect();
            load.push((load.len() as u64 * 600_000, 0.0)); // demand ends
            Endpoint {
                name: format!("e{i}"),
                namespace: "default".into(),
                class: "serving".into(),
                gpus_per_pod: *gpus,
                device_class: None,
                priority: Some(50),
                cpu: None,
                memory: None,
                min_replicas: *min,
                max_replicas: (*max).max(*min).max(1),
                target: 10.0,
                cold_start: cold * 1000,
                cold_start_max: cold * 1000,
                load,
                // Every other endpoint scales under slow policies (a pod per 30 s up, per 60 s
                // down, a minute's up window).
                behavior: (i % 2 == 1).then(slow_behavior),
            }
        })
        .collect();
    let jobs = jobs
        .iter()
        .enumerate()
        .map(|(i, &(a, d, p, g, n, high))| job(i, (a, d, p, g, n), if high { 100 } else { 0 }))
        .collect();
    Trace { jobs, endpoints, ..Trace::default() }
}

fn slow_behavior() -> Behavior {
    let rules = |seconds: u64, window| Rules {
        window,
        select: Select::Max,
        policies: vec![Policy { percent: false, value: 1, period: seconds * 1000 }],
        tolerance: None,
    };
    Behavior { scale_up: rules(30, Some(60_000)), scale_down: rules(60, None) }
}

fn simulate(endpoints: &[EndpointShape], jobs: &[JobShape], nodes: usize) -> Result<Report, TestCaseError> {
    run_checked(trace(endpoints, jobs), nodes)
}

fn endpoint() -> impl Strategy<Value = EndpointShape> {
    (0u32..3, 1u32..5, 0u64..300, 0u32..3, prop::collection::vec(prop_oneof![Just(0u32), 1u32..60], 1..6))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn replicas_stay_within_bounds_and_devices_are_never_double_booked(
        nodes in 1usize..4,
        endpoints in prop::collection::vec(endpoint(), 1..3),
        jobs in prop::collection::vec((0u64..40, 1u64..60, 1u32..3, any::<bool>(), 0u32..5, any::<bool>()), 0..6),
    ) {
        let report = simulate(&endpoints, &jobs, nodes)?;
        for (line, (min, max, _, _, _)) in report.endpoints.iter().zip(&endpoints) {
            let max = (*max).max(*min).max(1);
            prop_assert!(line.peak_replicas <= max, "{line:?}");
            // Demand ended long before the last sync: back at minReplicas.
            prop_assert_eq!(line.replicas, *min, "{:?}", line);
        }
        // Every device held is a job's or a replica's: the classes' sum is the total, each step.
        for sample in &report.samples {
            prop_assert_eq!(sample.per_class.iter().sum::<u64>(), sample.allocated, "at {}", sample.at);
        }
        prop_assert!(report.class_names.iter().any(|c| c == "serving"));
        let again = simulate(&endpoints, &jobs, nodes)?;
        prop_assert_eq!(report.json(), again.json());
    }
}

#[test]
fn from_zero_the_first_replica_serves_after_the_sync_and_the_cold_start() {
    // Demand at 0 s; the sync at 0 s scales to 1; bound at once; serving 90 s later.
    let report = simulate(&[(0, 2, 90, 1, vec![5])], &[], 1).unwrap();
    let e = &report.endpoints[0];
    assert_eq!((e.cold_starts, e.cold_start_seconds.p50), (1, Some(90.0)), "{e:?}");
    assert_eq!(e.peak_replicas, 1);
    // No GPU to place it on: the demand ends first, and no cold start is counted.
    let report = simulate(&[(0, 2, 90, 8, vec![5])], &[], 1).unwrap();
    assert_eq!(report.endpoints[0].cold_starts, 0, "{:?}", report.endpoints[0]);
}
