//! What the simulator's property tests share: a cluster of 4-GPU nodes, jobs from a shape tuple,
//! and a whole run checked at every step.

// Each test binary uses a part of this module.
#![allow(dead_code)]
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use muster_sched::{Cluster, SchedulerConfig, SchedulerNames};
use muster_sim::devices::DeviceInputs;
use muster_sim::trace::{Job, Trace};
use muster_sim::{Options, Report, SimError};
use proptest::test_runner::TestCaseError;
use serde_json::json;

pub const GPUS_PER_NODE: u32 = 4;

/// `nodes` nodes `n0`... of 4 GPUs each (driver `gpu.example.com`, one pool per node), and the
/// DeviceClass `gpu` that selects them.
pub fn cluster(nodes: usize) -> (Vec<Node>, Vec<ResourceSlice>, Vec<DeviceClass>) {
    let node_objs = (0..nodes)
        .map(|n| {
            serde_json::from_value(
                json!({"metadata": {"name": format!("n{n}"), "labels": {"kubernetes.io/hostname": format!("n{n}")}},
                "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}}),
            )
            .unwrap()
        })
        .collect();
    let slices = (0..nodes)
        .map(|n| {
            let devices: Vec<_> = (0..GPUS_PER_NODE).map(|d| json!({"name": format!("gpu-{d}")})).collect();
            serde_json::from_value(json!({"metadata": {"name": format!("n{n}-gpu")},
                "spec": {"driver": "gpu.example.com", "nodeName": format!("n{n}"),
                    "pool": {"name": format!("n{n}"), "generation": 1, "resourceSliceCount": 1}, "devices": devices}}))
            .unwrap()
        })
        .collect();
    let class = json!({"metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}});
    (node_objs, slices, vec![serde_json::from_value(class).unwrap()])
}

/// Job `j<i>` of (arrival minute, duration minutes, pods, gang, GPUs per pod), one CPU a pod.
pub fn job(i: usize, (arrival, duration, pods, gang, gpus): (u64, u64, u32, bool, u32), priority: i32) -> Job {
    Job {
        name: format!("j{i}"),
        namespace: "default".into(),
        arrival: arrival * 60_000,
        duration: duration * 60_000,
        pods,
        gang,
        gpus_per_pod: gpus,
        device_class: None,
        priority: Some(priority),
        priority_class_name: None,
        class: if gang { "gang".into() } else { "single".into() },
        cpu: Some("1".into()),
        memory: None,
        device_selector: None,
        capacity_requests: Vec::new(),
    }
}

/// `trace` run to the end over `nodes` nodes through `muster_sim::run_observing`, the world
/// checked (`Sim::check`) after every step.
pub fn run_checked(trace: Trace, nodes: usize) -> Result<Report, TestCaseError> {
    let (node_objs, slices, classes) = cluster(nodes);
    let c = Cluster::build(node_objs, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
    let options = Options {
        devices: (nodes as u64) * u64::from(GPUS_PER_NODE),
        default_class: Some("gpu".into()),
        inventory: muster_sim::fragmentation::Inventory::from_slices(&slices),
        ..Options::default()
    };
    let inputs = DeviceInputs::new(slices, Vec::new(), classes, true);
    let mut steps = 0;
    let mut observe = |sim: &muster_sim::Sim<'_, '_>| {
        steps += 1;
        if steps > 200_000 {
            return Err(SimError("the simulation does not end".into()));
        }
        sim.check().map_err(|e| SimError(format!("at {} ms: {e}", sim.now())))
    };
    muster_sim::run_observing(c, &SchedulerConfig::default(), inputs, trace, options, None, &mut observe)
        .map_err(|e| TestCaseError::fail(e.to_string()))
}
