//! An engine whose DRA inputs are its own takes ResourceSlice and DeviceClass changes one at a
//! time (`cycle/device_changes.rs`): what it remembered of the old devices never decides.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use muster_sched::{
    BorrowedDevices, Change, Cluster, DeviceChange, Engine, Plan, PodState, SchedulerConfig, SchedulerNames,
};
use proptest::prelude::*;
use serde_json::json;

mod common;

fn claim(name: &str) -> Box<ResourceClaim> {
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}))
        .unwrap(),
    )
}

fn pod(name: &str, node: Option<&str>) -> Box<Pod> {
    let mut p = json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": format!("{name}-gpu")}],
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    Box::new(serde_json::from_value(p).unwrap())
}

/// Node `n{node}`'s slice with `gpus` devices; those in `tainted` carry a NoSchedule taint.
fn slice(node: usize, gpus: u8, tainted: &[u8]) -> Box<ResourceSlice> {
    let devices = (0..gpus)
        .map(|d| match tainted.contains(&d) {
            true => json!({"name": format!("gpu-{d}"), "taints": [{"key": "broken", "effect": "NoSchedule"}]}),
            false => json!({"name": format!("gpu-{d}")}),
        })
        .collect();
    Box::new(common::node_slice(node, devices))
}

fn engine(nodes: usize, gpus: &[u8]) -> Engine<'static> {
    let (nodes, slices) = common::gpu_nodes(&gpus[..nodes], "rack", "r");
    let cluster =
        Cluster::build(nodes, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
    Engine::with_own_dra(cluster, SchedulerConfig::default(), common::dra(&slices, &common::gpu_class()))
}

fn arrive(engine: &mut Engine<'_>, name: &str, now: u64) {
    engine.apply(Change::UpsertClaim(claim(&format!("{name}-gpu"))), now).unwrap();
    engine.apply(Change::UpsertPod(pod(name, None)), now).unwrap();
}

/// The devices each placed pod's claim got, as `pod node/device`, and the pods bound by the world.
fn bind(engine: &mut Engine<'_>, plan: &Plan, now: u64) -> Vec<String> {
    let mut out = Vec::new();
    for (p, n) in &plan.placements {
        let c = engine.cluster();
        let (key, node) = (c.pod(*p).key.clone(), c.node(*n).name().to_string());
        let name = key.trim_start_matches("ml/");
        let claim = c.claims.iter().find(|x| x.key() == format!("{key}-gpu")).unwrap();
        let result = &claim.claim.status.as_ref().unwrap().allocation.as_ref().unwrap().devices.as_ref().unwrap();
        out.push(format!("{key} {node}/{}", result.results.as_ref().unwrap()[0].device));
        engine.apply(Change::UpsertPod(pod(name, Some(&node))), now).unwrap();
    }
    out
}

#[test]
fn a_driver_publishing_more_devices_reaches_a_waiting_pod() {
    let mut e = engine(1, &[1]);
    arrive(&mut e, "first", 0);
    arrive(&mut e, "second", 0);
    let first = e.schedule(0);
    assert_eq!(bind(&mut e, &first, 0), ["ml/first n0/gpu-0"]);
    assert_eq!(first.unschedulable.len(), 1, "one GPU, held");
    e.apply_devices(DeviceChange::UpsertSlice(slice(0, 2, &[])), 5_000).unwrap();
    let second = e.schedule(5_000);
    assert_eq!(bind(&mut e, &second, 5_000), ["ml/second n0/gpu-1"]);
}

#[test]
fn a_tainted_device_is_not_given_and_a_deleted_slice_wakes_no_one() {
    let mut e = engine(2, &[1, 1]);
    e.apply_devices(DeviceChange::UpsertSlice(slice(1, 1, &[0])), 0).unwrap();
    arrive(&mut e, "a", 0);
    let first = e.schedule(0);
    assert_eq!(bind(&mut e, &first, 0), ["ml/a n0/gpu-0"]);
    arrive(&mut e, "b", 100);
    let second = e.schedule(100);
    assert!(second.placements.is_empty());
    let message = second.unschedulable.get(0).unwrap().1.message();
    assert_eq!(message, "0/2 nodes are available: 2 cannot allocate all claims.");
    assert_eq!(e.queue().counts(), (0, 0, 1));
    // Upstream's DynamicResources registers no event for a slice deleted: it cannot help.
    e.apply_devices(DeviceChange::DeleteSlice("n1".into()), 200).unwrap();
    assert_eq!(e.queue().counts(), (0, 0, 1));
    // The node's slice comes back untainted: b is woken and placed there.
    e.apply_devices(DeviceChange::UpsertSlice(slice(1, 1, &[])), 300).unwrap();
    assert_eq!(e.queue().counts(), (0, 1, 0));
    let third = e.schedule(2_000);
    assert_eq!(bind(&mut e, &third, 2_000), ["ml/b n1/gpu-0"]);
}

#[test]
fn a_class_changed_reads_the_devices_again() {
    let mut e = engine(1, &[2]);
    let only_gpu_1 = serde_json::from_value(json!({"metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].index == 1"}}]}}))
    .unwrap();
    e.apply_devices(
        DeviceChange::UpsertSlice(Box::new(common::node_slice(
            0,
            vec![
                json!({"name": "gpu-0", "attributes": {"index": {"int": 0}}}),
                json!({"name": "gpu-1", "attributes": {"index": {"int": 1}}}),
            ],
        ))),
        0,
    )
    .unwrap();
    e.apply_devices(DeviceChange::UpsertClass(Box::new(only_gpu_1)), 0).unwrap();
    arrive(&mut e, "a", 0);
    let first = e.schedule(0);
    assert_eq!(bind(&mut e, &first, 0), ["ml/a n0/gpu-1"]);
    arrive(&mut e, "b", 100);
    assert!(e.schedule(100).placements.is_empty(), "gpu-0 is not of the class");
    e.apply_devices(DeviceChange::UpsertClass(Box::new(common::gpu_class().remove(0))), 200).unwrap();
    let second = e.schedule(2_000);
    assert_eq!(bind(&mut e, &second, 2_000), ["ml/b n0/gpu-0"]);
    e.apply_devices(DeviceChange::DeleteClass("gpu".into()), 3_000).unwrap();
    arrive(&mut e, "c", 3_000);
    let third = e.schedule(3_000);
    let message = third.unschedulable.get(0).unwrap().1.message();
    assert_eq!(message, "0/1 nodes are available: request gpu: device class gpu does not exist.");
}

#[test]
fn an_engine_over_borrowed_inputs_takes_no_device_change() {
    let (nodes, slices) = common::gpu_nodes(&[1], "rack", "r");
    let cluster =
        Cluster::build(nodes, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
    let ctx = common::dra(&slices, &common::gpu_class());
    let mut e = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
    assert_eq!(e.apply_devices(DeviceChange::DeleteSlice("n0".into()), 0), Err(BorrowedDevices));
}

#[derive(Clone, Debug)]
enum Op {
    /// Node's slice published again with this many devices, these tainted.
    Publish(usize, u8, Vec<u8>),
    Unpublish(usize),
    Arrive,
    /// The running pod of this rank finishes (pod and claim deleted).
    Finish(usize),
    Schedule,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..3, 0u8..4, prop::collection::vec(0u8..4, 0..2)).prop_map(|(n, g, t)| Op::Publish(n, g, t)),
        1 => (0usize..3).prop_map(Op::Unpublish),
        3 => Just(Op::Arrive),
        2 => (0usize..4).prop_map(Op::Finish),
        3 => Just(Op::Schedule),
    ]
}

/// What one engine did over `ops`: each schedule's placements (with devices) and verdicts.
fn run(ops: &[Op], remember: bool) -> Vec<String> {
    let mut e = engine(3, &[1, 2, 1]);
    if !remember {
        e = e.without_dra_memo().without_verdict_reuse();
    }
    let (mut out, mut next, mut now) = (Vec::new(), 0, 0u64);
    let mut slices: [Option<Box<ResourceSlice>>; 3] =
        [Some(slice(0, 1, &[])), Some(slice(1, 2, &[])), Some(slice(2, 1, &[]))];
    for op in ops {
        now += 500;
        match op {
            Op::Publish(n, gpus, tainted) => {
                slices[*n] = Some(slice(*n, *gpus, tainted));
                e.apply_devices(DeviceChange::UpsertSlice(slice(*n, *gpus, tainted)), now).unwrap();
            }
            Op::Unpublish(n) => {
                slices[*n] = None;
                e.apply_devices(DeviceChange::DeleteSlice(format!("n{n}")), now).unwrap();
            }
            Op::Arrive => {
                arrive(&mut e, &format!("p{next}"), now);
                next += 1;
            }
            Op::Finish(rank) => {
                let c = e.cluster();
                let running: Vec<String> =
                    c.pods.iter().filter(|p| matches!(p.state, PodState::Bound(_))).map(|p| p.key.clone()).collect();
                if let Some(key) = running.get(*rank) {
                    e.apply(Change::DeletePod(key.clone()), now).unwrap();
                    e.apply(Change::DeleteClaim(format!("{key}-gpu")), now).unwrap();
                }
            }
            Op::Schedule => {
                let plan = e.schedule(now);
                let placed = bind(&mut e, &plan, now);
                for p in &placed {
                    let (node, device) = p.split_once(' ').unwrap().1.split_once('/').unwrap();
                    let n: usize = node[1..].parse().unwrap();
                    let s = slices[n].as_ref().expect("a device of a published slice");
                    let d = s.spec.devices.iter().flatten().find(|d| d.name == device).expect("a published device");
                    assert!(d.taints.is_none(), "{p}: a tainted device");
                }
                let c = e.cluster();
                let verdicts = plan.unschedulable.iter().map(|(p, f)| format!("{} {}", c.pod(p).key, f.message()));
                out.push(format!("{placed:?} {:?}", verdicts.collect::<Vec<_>>()));
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// Every remembered verdict (the allocator's per node, a waiting pod's kept one, an
    /// equivalent pod's) is dropped when the devices it read change: the decisions are those of
    /// an engine that remembers nothing.
    #[test]
    fn remembered_verdicts_never_outlive_the_devices_they_read(ops in prop::collection::vec(op(), 1..40)) {
        prop_assert_eq!(run(&ops, true), run(&ops, false));
    }
}
