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

/// The selector: driver, product name and a memory floor.
pub const H100_SELECTOR: &str = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) >= 0";

/// A realistic full-GPU device of dra-driver-nvidia-gpu (landscape.md §4.1); every 7th is an A100.
pub fn gpu_device(i: usize) -> k8s_openapi::api::resource::v1::Device {
    let (product, memory, arch, cc) = if i % 7 == 6 {
        ("NVIDIA A100-SXM4-80GB", "81920Mi", "Ampere", "8.0.0")
    } else {
        ("NVIDIA H100 80GB HBM3", "81559Mi", "Hopper", "9.0.0")
    };
    serde_json::from_value(serde_json::json!({
        "name": format!("gpu-{}", i % 8),
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": format!("GPU-{i:08x}-40a0-40ae-3fc5-82b8ff8b8138")},
            "productName": {"string": product},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": arch},
            "cudaComputeCapability": {"version": cc},
            "driverVersion": {"version": "580.105.8"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "addressingMode": {"string": "HMM"},
            "resource.kubernetes.io/pciBusID": {"string": format!("0000:{:02x}:00.0", 0x53 + i % 8)},
            "resource.kubernetes.io/pcieRoot": {"string": format!("pci0000:{:02x}", 0x44 + i % 8)},
            "resource.kubernetes.io/numaNode": {"int": (i % 8 / 4) as i64}
        },
        "capacity": {"memory": {"value": memory}}
    }))
    .expect("a valid device")
}

/// Times compiling and evaluating [`H100_SELECTOR`] over `devices` device views.
pub fn cel(devices: usize, iterations: usize) -> anyhow::Result<String> {
    use muster_cel::{DeviceView, Env, Verdicts};
    // Compile: a fresh environment each time, so that nothing is cached.
    let compiles = 2000;
    let t = Instant::now();
    for _ in 0..compiles {
        let env = Env::default();
        std::hint::black_box(env.compile(H100_SELECTOR).map_err(|e| anyhow::anyhow!("{e}"))?);
    }
    let compile = t.elapsed() / compiles;
    // Devices as a cluster holds them (read from slices), then converted in one pass, as the
    // scheduler converts a slice's devices when it sees the slice.
    let published: Vec<_> = (0..devices).map(gpu_device).collect();
    let views: Vec<DeviceView> =
        published.iter().map(|d| DeviceView::new("gpu.nvidia.com", d)).collect::<Result<_, _>>()?;
    drop(published);
    let env = Env::default();
    let program = env.compile(H100_SELECTOR).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut runs = Vec::new();
    let mut matched = 0;
    for _ in 0..iterations.max(1) {
        matched = 0;
        let t = Instant::now();
        for v in &views {
            if env.eval(&program, v) == Ok(true) {
                matched += 1;
            }
        }
        runs.push(t.elapsed());
    }
    runs.sort();
    let per_eval = runs[runs.len() / 2].as_nanos() as f64 / devices as f64;
    let mut verdicts = Verdicts::default();
    for (i, v) in views.iter().enumerate() {
        verdicts.insert(program.id, i as u32, env.eval(&program, v));
    }
    let lookups = 10_000_000u64;
    let t = Instant::now();
    let mut hits = 0u64;
    for k in 0..lookups {
        let device = (k.wrapping_mul(2_654_435_761) % devices as u64) as u32;
        if let Some(Ok(true)) = verdicts.get(program.id, std::hint::black_box(device)) {
            hits += 1;
        }
    }
    let lookup = t.elapsed().as_nanos() as f64 / lookups as f64;
    Ok(format!(
        "CEL selector over {devices} GPU device views ({matched} match), {iterations} runs\n  compile: {:.1} us\n  evaluate: {per_eval:.0} ns per device (median run)\n  cached verdict lookup: {lookup:.1} ns ({hits} hits)\n",
        compile.as_nanos() as f64 / 1000.0
    ))
}

/// Times one allocation call per upstream test case (tests/conformance/allocator), `reps` times
/// each, with parsing and setup outside the timer; reports the median and p90 of the per-case
/// medians.
pub fn alloc_conformance(dir: &std::path::Path, reps: usize) -> anyhow::Result<String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut medians = Vec::new();
    for f in &files {
        let case = crate::conformance::load(f)?;
        let env = muster_cel::Env::default();
        let index = muster_alloc::SliceIndex::new(&case.slices);
        let _ = case.execute(&env, &index); // warm the selector cache, as a running scheduler has it
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) {
            let t = Instant::now();
            let r = case.execute(&env, &index);
            times.push(t.elapsed());
            std::hint::black_box(r).ok();
        }
        times.sort();
        medians.push(times[times.len() / 2]);
    }
    medians.sort();
    let at = |p: usize| medians[(medians.len() * p / 100).min(medians.len() - 1)];
    Ok(format!(
        "allocator over {} conformance cases, {reps} calls each\n  per-call time, median of per-case medians: {:.2} us\n  p90: {:.2} us, max: {:.2} us\n",
        medians.len(),
        at(50).as_secs_f64() * 1e6,
        at(90).as_secs_f64() * 1e6,
        medians.last().map_or(0.0, |d| d.as_secs_f64() * 1e6)
    ))
}

/// scheduler_perf's DRA shape: `nodes` nodes with `per_node` devices of one driver, one class
/// with a CEL selector, `claims` one-device claims allocated one after another, each on the first
/// node that can hold it (nodes found full are not tried again: the claims are identical).
pub fn alloc_scale(nodes: usize, per_node: usize, claims: usize) -> anyhow::Result<String> {
    use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
    use muster_alloc::{AllocatedState, Allocator, DeviceId, Features, Outcome, SliceIndex};
    let driver = "test-driver.cdi.k8s.io";
    let node_objs: Vec<Node> = (0..nodes)
        .map(|i| Node {
            metadata: ObjectMeta { name: Some(format!("node-{i:04}")), ..Default::default() },
            ..Default::default()
        })
        .collect();
    let slices: Vec<ResourceSlice> = node_objs
        .iter()
        .map(|node| {
            perf_slice(node, driver, per_node, |d| {
                serde_json::json!({"name": format!("device-{d}"), "attributes": {"model": {"string": "sim-gpu"}, "index": {"int": d}}, "capacity": {"memory": {"value": "16Gi"}}})
            })
        })
        .collect();
    let classes = vec![perf_class(driver)];
    let claim_objs: Vec<ResourceClaim> = (0..claims)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("claim-{i:05}"), "namespace": "bench"},
                "spec": one_device_claim_spec()
            }))
            .expect("a valid claim")
        })
        .collect();
    let env = muster_cel::Env::default();
    let index = SliceIndex::new(&slices);
    let features = Features::kubernetes_1_37();
    let mut state = AllocatedState::default();
    let mut cursor = 0;
    let (mut placed, mut calls) = (0, 0);
    let t = Instant::now();
    for claim in &claim_objs {
        while cursor < node_objs.len() {
            calls += 1;
            let outcome = Allocator::new(features, &state, &classes, &index, &env)
                .allocate(Some(&node_objs[cursor]), &[claim])
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            match outcome {
                Outcome::Allocated(results) => {
                    for r in results.iter().flat_map(|a| a.devices.iter().flat_map(|d| d.results.iter().flatten())) {
                        state.mark_dedicated(&DeviceId {
                            driver: r.driver.clone(),
                            pool: r.pool.clone(),
                            device: r.device.clone(),
                        });
                    }
                    placed += 1;
                    break;
                }
                Outcome::Unsatisfiable => cursor += 1,
            }
        }
    }
    let elapsed = t.elapsed();
    Ok(format!(
        "allocator at scale: {nodes} nodes x {per_node} devices, {claims} one-device claims\n  placed {placed} with {calls} allocation calls in {:.3} s: {:.0} claims/s ({:.2} us per call)\n",
        elapsed.as_secs_f64(),
        placed as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / calls as f64
    ))
}

/// scheduler_perf's "SchedulingWithResourceClaimTemplate": `nodes` nodes with `per_node` devices
/// of one driver, one class with a CEL selector, `pods` pending pods each with one one-device
/// claim from a template. Times the plan cycle (claim generation and snapshot outside the timer).
pub fn plan_dra(nodes: usize, per_node: usize, pods: usize) -> anyhow::Result<String> {
    use k8s_openapi::api::resource::v1::{ResourceClaimTemplate, ResourceSlice};
    let driver = "test-driver.cdi.k8s.io";
    let node_objs: Vec<Node> = (0..nodes).map(basic_node).collect();
    let slices: Vec<ResourceSlice> = node_objs
        .iter()
        .map(|node| {
            perf_slice(
                node,
                driver,
                per_node,
                |d| serde_json::json!({"name": format!("device-{d}"), "attributes": {"model": {"string": "sim-gpu"}}}),
            )
        })
        .collect();
    let classes = vec![perf_class(driver)];
    let templates: Vec<ResourceClaimTemplate> = vec![serde_json::from_value(serde_json::json!({
        "metadata": {"name": "one-device", "namespace": "sched-basic"},
        "spec": {"spec": one_device_claim_spec()}
    }))?];
    let pod_objs: Vec<Box<Pod>> = (0..pods)
        .map(|i| {
            let mut p = basic_pod(i, 1);
            let spec = p.spec.as_mut().expect("generated pods have a spec");
            spec.resource_claims = Some(vec![k8s_openapi::api::core::v1::PodResourceClaim {
                name: "gpu".into(),
                resource_claim_name: None,
                resource_claim_template_name: Some("one-device".into()),
            }]);
            Box::new(p)
        })
        .collect();
    let mut cluster = Cluster::build(node_objs, pod_objs, &[], &SchedulerNames::default())
        .map_err(|e| anyhow::anyhow!("{} model errors", e.len()))?;
    cluster.add_claims(Vec::new(), &templates);
    let ctx = muster_sched::DraContext {
        index: muster_alloc::SliceIndex::new(&slices),
        classes: &classes,
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let t = Instant::now();
    let plan = Scheduler::with_dra(&mut cluster, SchedulerConfig::default(), &ctx).plan();
    let elapsed = t.elapsed();
    // Every allocated device must be distinct: the bench checks the plan it times.
    let mut devices = std::collections::HashSet::new();
    let mut total = 0;
    for c in &cluster.claims {
        for r in c
            .claim
            .status
            .iter()
            .flat_map(|s| s.allocation.iter())
            .flat_map(|a| a.devices.iter())
            .flat_map(|d| d.results.iter().flatten())
        {
            total += 1;
            devices.insert((r.pool.clone(), r.device.clone()));
        }
    }
    anyhow::ensure!(devices.len() == total, "{} devices allocated more than once", total - devices.len());
    Ok(format!(
        "SchedulingWithResourceClaimTemplate: {nodes} nodes x {per_node} devices, {pods} pods with one claim each\n  plan cycle: {:.3} s ({:.0} pods/s)\n  placed: {}/{pods}, unschedulable: {}, devices allocated: {total}, all distinct\n",
        elapsed.as_secs_f64(),
        plan.placements.len() as f64 / elapsed.as_secs_f64(),
        plan.placements.len(),
        plan.unschedulable.len()
    ))
}

/// One ResourceSlice holding `per_node` devices (built by `device`) of `driver` for `node`, in a
/// pool named after the node: the shape of scheduler_perf's DRA driver.
fn perf_slice(
    node: &Node,
    driver: &str,
    per_node: usize,
    device: impl Fn(usize) -> serde_json::Value,
) -> k8s_openapi::api::resource::v1::ResourceSlice {
    let node = node.metadata.name.as_deref().expect("bench nodes are named");
    let devices: Vec<serde_json::Value> = (0..per_node).map(device).collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{node}-{driver}")},
        "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}
    }))
    .expect("a valid slice")
}

/// The DeviceClass `test-class`: every device of `driver`, by a CEL selector.
fn perf_class(driver: &str) -> k8s_openapi::api::resource::v1::DeviceClass {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "test-class"},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{driver}'")}}]}
    }))
    .expect("a valid class")
}

/// A claim spec asking for exactly one device of `test-class`.
fn one_device_claim_spec() -> serde_json::Value {
    serde_json::json!({"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class", "allocationMode": "ExactCount", "count": 1}}]}})
}
