//! Properties of simulations whose devices fail and get tainted: over random small traces with
//! random GPU failures (fatal and not), recoveries and DeviceTaintRules (NoSchedule, NoExecute,
//! dry runs), no device is allocated twice, no gang is partly running, and no bound pod holds a
//! device with a NoExecute taint or a fatal XID's taint at any step; with every GPU recovered and
//! every rule deleted in the end, every job that fits the cluster finishes. Same trace, same report.

mod common;

use common::{GPUS_PER_NODE, job, run_checked};
use k8s_openapi::api::resource::v1::DeviceTaintRule;
use muster_sim::Report;
use muster_sim::trace::{ClusterEvent, EventKind, Trace};
use proptest::prelude::*;
use serde_json::json;

/// (arrival minute, duration minutes, pods, gang, gpus per pod)
type JobShape = (u64, u64, u32, bool, u32);

/// (minute, node, device, what): what 0 = fatal XID, 1 = application XID, 2 = NoExecute rule on the
/// node's pool, 3 = NoSchedule rule on the device, 4 = dry-run rule; each undone 20 minutes later.
type DeviceEvent = (u64, usize, u32, u8);

fn rule(name: &str, selector: serde_json::Value, effect: &str) -> EventKind {
    let rule: DeviceTaintRule = serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"deviceSelector": selector, "taint": {"key": "example.com/maintenance", "effect": effect}}}))
    .unwrap();
    EventKind::DeviceTaintRule(Box::new(rule))
}

fn trace(shapes: &[JobShape], devices: &[DeviceEvent], nodes: usize) -> Trace {
    let jobs = shapes.iter().enumerate().map(|(i, shape)| job(i, *shape, 0)).collect();
    let mut events = Vec::new();
    for (k, &(at, node, device, what)) in devices.iter().enumerate() {
        let (node, device) = (format!("n{}", node % nodes), format!("gpu-{}", device % GPUS_PER_NODE));
        let name = format!("r{k}");
        let (start, end) = match what {
            0 | 1 => (
                EventKind::GpuFailure {
                    node: node.clone(),
                    device: device.clone(),
                    xid: if what == 0 { 79 } else { 13 },
                },
                EventKind::GpuRecovery { node, device },
            ),
            2 => (rule(&name, json!({"pool": node}), "NoExecute"), EventKind::DeleteDeviceTaintRule(name)),
            3 => (
                rule(&name, json!({"pool": node, "device": device}), "NoSchedule"),
                EventKind::DeleteDeviceTaintRule(name),
            ),
            _ => (rule(&name, json!({"pool": node}), "None"), EventKind::DeleteDeviceTaintRule(name)),
        };
        events.push(ClusterEvent { at: at * 60_000, kind: start });
        events.push(ClusterEvent { at: at * 60_000 + 1_200_000, kind: end });
    }
    Trace { jobs, events, ..Trace::default() }
}

fn simulate(shapes: &[JobShape], devices: &[DeviceEvent], nodes: usize) -> Result<Report, TestCaseError> {
    run_checked(trace(shapes, devices, nodes), nodes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn failing_and_tainted_devices_are_never_held_nor_double_booked(
        nodes in 1usize..4,
        shapes in prop::collection::vec((0u64..30, 1u64..60, 1u32..4, any::<bool>(), 0u32..5), 1..10),
        devices in prop::collection::vec((0u64..60, 0usize..4, 0u32..4, 0u8..5), 0..5),
    ) {
        let report = simulate(&shapes, &devices, nodes)?;
        prop_assert_eq!(report.summary.finished + report.summary.running + report.summary.pending, shapes.len());
        for (j, (_, _, pods, gang, gpus)) in report.jobs.iter().zip(&shapes) {
            // Run to the end with every GPU recovered and every rule deleted: what can fit, ran.
            let fits = *gpus <= GPUS_PER_NODE && (!gang || pods * gpus <= nodes as u32 * GPUS_PER_NODE);
            prop_assert_eq!(j.state == "finished", fits, "{}: {:?} ({:?})", j.name, j.state, j.reason);
        }
        let again = simulate(&shapes, &devices, nodes)?;
        prop_assert_eq!(report.json(), again.json());
    }
}

#[test]
fn a_fatal_xid_fails_its_holder_and_an_application_xid_does_not() {
    let shapes = [(0, 60, 1, false, 4)];
    let report = simulate(&shapes, &[(10, 0, 1, 1)], 1).unwrap();
    assert_eq!((report.summary.gpu_failures, report.summary.restarts), (0, 0));
    let report = simulate(&shapes, &[(10, 0, 1, 0)], 1).unwrap();
    assert_eq!((report.summary.gpu_failures, report.summary.restarts), (1, 1));
    // It runs again once the GPU recovers, 20 minutes later.
    assert_eq!(report.jobs[0].state, "finished");
}
