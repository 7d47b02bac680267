//! `muster bench`: generated clusters in scheduler_perf's shapes, timed end to end.
//!
//! Figures come from wall-clock time around whole phases (never from a timed unit test) and go
//! into BENCHMARKS.md.

mod churn;
mod inter_pod;
mod output;
mod sim;

pub use output::output;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSchedulingGroup, PodSpec, ResourceRequirements};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use muster_sched::{Cluster, GroupOutcome, Plan, QueueEntry, Scheduler, SchedulerConfig, SchedulerNames};

pub use churn::churn;
pub use inter_pod::{Shape, inter_pod};
pub use sim::sim;

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

/// `bench load`: reads `paths` and builds the world as `plan` does (each object taken by the world
/// as it is decoded, so reading and building are one phase), with the time and the peak resident
/// memory.
pub fn load(paths: &[std::path::PathBuf]) -> anyhow::Result<String> {
    let t = Instant::now();
    let names = SchedulerNames::default();
    let world = crate::memory::World::load(paths, &names, crate::memory::Options::default())
        .map_err(|d| anyhow::anyhow!("{} input errors, first: {}", d.len(), d[0]))?;
    let total = t.elapsed();
    Ok(format!(
        "load: {} nodes, {} pods\n  read, decode and build: {:.3} s\n  peak RSS: {:.0} MiB\n",
        world.cluster.nodes.len(),
        world.cluster.pods.len(),
        secs(total),
        peak_rss_mib().unwrap_or(f64::NAN)
    ))
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

/// Plans a copy of `base` `iterations` times (at least once): the median and best plan-cycle
/// times, and how many pods the last plan placed.
pub(crate) fn time_plans(base: &Cluster, config: &SchedulerConfig, iterations: usize) -> (Duration, Duration, usize) {
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
    (runs[runs.len() / 2], runs[0], placed)
}

/// `base` with `count - 1` further profiles, `profile-1`…, each scoring the other way from the
/// one before (LeastAllocated ↔ MostAllocated), for pods that alternate between them.
pub fn alternating_profiles(base: SchedulerConfig, count: usize) -> SchedulerConfig {
    use muster_sched::ScoringStrategy::{LeastAllocated, MostAllocated};
    let mut strategy = base.scoring_strategy;
    let profiles = (1..count)
        .map(|k| {
            strategy = if strategy == MostAllocated { LeastAllocated } else { MostAllocated };
            let config = SchedulerConfig { scoring_strategy: strategy, ..base.clone() };
            muster_sched::Profile { scheduler_name: format!("profile-{k}"), config }
        })
        .collect();
    SchedulerConfig { profiles, ..base }
}

/// Times the plan cycle (not the generation or the snapshot build) `iterations` times. Where the
/// configuration has further profiles, pod `i` takes profile `i mod (profiles + 1)`.
pub fn plan(
    nodes: usize,
    pods: usize,
    shapes: usize,
    iterations: usize,
    config: &SchedulerConfig,
) -> anyhow::Result<String> {
    let (ns, mut ps) = basic_objects(nodes, pods, shapes);
    let mut names = SchedulerNames::default();
    names.0.extend(config.profiles.iter().map(|p| p.scheduler_name.clone()));
    let every = config.profiles.len() + 1;
    for (i, p) in ps.iter_mut().enumerate().filter(|(i, _)| i % every != 0) {
        let spec = p.spec.as_mut().expect("basic pods have a spec");
        spec.scheduler_name = Some(config.profiles[i % every - 1].scheduler_name.clone());
    }
    let t = Instant::now();
    let base = Cluster::build(ns, ps, &[], &names).map_err(|e| anyhow::anyhow!("{} model errors", e.len()))?;
    let build = t.elapsed();
    let (median, best, placed) = time_plans(&base, config, iterations);
    Ok(format!(
        "SchedulingBasic: {nodes} nodes, {pods} pending pods in {shapes} shape(s), {every} profile(s), {iterations} runs\n  snapshot build: {:.3} s\n  plan cycle: median {:.3} s ({:.0} pods/s), best {:.3} s ({:.0} pods/s)\n  placed: {placed}/{pods}\n  peak RSS: {:.0} MiB\n",
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
    serde_json::from_value(nvidia_gpu(i, i % 7 != 6)).expect("a valid device")
}

/// Full GPU number `i` (its slot on the node is `i % 8`) as dra-driver-nvidia-gpu v0.4 publishes
/// it (landscape.md §4.1): an H100 80GB HBM3, or an A100-SXM4-80GB.
fn nvidia_gpu(i: usize, h100: bool) -> serde_json::Value {
    let (product, memory, arch, cc) = if h100 {
        ("NVIDIA H100 80GB HBM3", "81559Mi", "Hopper", "9.0.0")
    } else {
        ("NVIDIA A100-SXM4-80GB", "81920Mi", "Ampere", "8.0.0")
    };
    serde_json::json!({
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
    })
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
        let index = muster_alloc::SliceIndex::new(case.slices.clone());
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
    let index = SliceIndex::new(slices);
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
        index: muster_alloc::SliceIndex::new(slices),
        classes: classes.clone(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let t = Instant::now();
    let plan = Scheduler::with_dra(&mut cluster, SchedulerConfig::default(), &ctx).plan();
    let elapsed = t.elapsed();
    // Every allocated device must be distinct: the bench checks the plan it times.
    let total = distinct_devices(&cluster)?;
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

/// Counts the devices the plan allocated to the cluster's claims; fails when one is allocated
/// twice.
fn distinct_devices(cluster: &Cluster) -> anyhow::Result<usize> {
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
            devices.insert((r.driver.clone(), r.pool.clone(), r.device.clone()));
        }
    }
    anyhow::ensure!(devices.len() == total, "{} devices allocated more than once", total - devices.len());
    Ok(total)
}

/// A gang PodGroup (`scheduling.k8s.io/v1beta1`) of `min_count` pods, optionally asking for its
/// pods to share one domain of a node label (`schedulingConstraints.topology`).
fn gang_group(namespace: &str, name: &str, min_count: usize, topology: Option<&str>) -> PodGroup {
    use k8s_openapi::api::scheduling::v1beta1::{
        GangSchedulingPolicy, PodGroupSchedulingConstraints, PodGroupSchedulingPolicy, PodGroupSpec, TopologyConstraint,
    };
    PodGroup {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some(namespace.into()), ..Default::default() },
        spec: PodGroupSpec {
            scheduling_policy: PodGroupSchedulingPolicy {
                gang: Some(GangSchedulingPolicy { min_count: min_count as i32 }),
                ..Default::default()
            },
            scheduling_constraints: topology.map(|key| PodGroupSchedulingConstraints {
                topology: Some(vec![TopologyConstraint { key: key.into() }]),
            }),
            ..Default::default()
        },
        status: None,
    }
}

/// Joins `pod` to the PodGroup `group` (`spec.schedulingGroup.podGroupName`).
fn join_group(pod: &mut Pod, group: &str) {
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    spec.scheduling_group = Some(PodSchedulingGroup { pod_group_name: Some(group.into()) });
}

/// `sorted[p%]`, for p in 0..=100.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted.get((sorted.len() * p / 100).min(sorted.len().saturating_sub(1))).copied().unwrap_or_default()
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// scheduler_perf's `gangscheduling/5000Nodes_3000Gangs_9000Pods`: SchedulingBasic nodes, and
/// `gangs` PodGroups with `schedulingPolicy.gang.minCount = per_gang`, each joined by `per_gang`
/// SchedulingBasic pods. Times the whole plan cycle `iterations` times (median), and, in as many
/// separate runs that drive the queue themselves, every group attempt (`schedule_group`) one by
/// one. Every gang must be scheduled whole.
pub fn gang(nodes: usize, gangs: usize, per_gang: usize, iterations: usize) -> anyhow::Result<String> {
    let per_gang = per_gang.max(1);
    let iterations = iterations.max(1);
    let pods = gangs * per_gang;
    let name = |g: usize| format!("gang-{g:05}");
    let node_objs: Vec<Node> = (0..nodes).map(basic_node).collect();
    let pod_objs: Vec<Box<Pod>> = (0..pods)
        .map(|i| {
            let mut p = basic_pod(i, 1);
            join_group(&mut p, &name(i / per_gang));
            Box::new(p)
        })
        .collect();
    let groups: Vec<PodGroup> = (0..gangs).map(|g| gang_group("sched-basic", &name(g), per_gang, None)).collect();
    let build = || -> anyhow::Result<Cluster> {
        let mut c = Cluster::build(node_objs.clone(), pod_objs.clone(), &[], &SchedulerNames::default())
            .map_err(|e| anyhow::anyhow!("{} model errors", e.len()))?;
        c.add_pod_groups(groups.clone());
        c.add_claims(Vec::new(), &[]);
        Ok(c)
    };
    // The bench checks the plan it times: every gang whole, every pod placed.
    let check = |plan: &Plan| -> anyhow::Result<()> {
        let whole = plan
            .groups
            .iter()
            .filter(|r| matches!(r.outcome, GroupOutcome::Scheduled { placed, .. } if placed == per_gang))
            .count();
        anyhow::ensure!(
            plan.groups.len() == gangs && whole == gangs,
            "{whole} of {gangs} gangs scheduled whole ({} group results); first: {:?}",
            plan.groups.len(),
            plan.groups.iter().find(|r| !matches!(r.outcome, GroupOutcome::Scheduled { .. })).map(|r| r.message())
        );
        anyhow::ensure!(plan.placements.len() == pods, "{} of {pods} pods placed", plan.placements.len());
        Ok(())
    };
    let mut runs = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let mut cluster = build()?;
        let t = Instant::now();
        let plan = Scheduler::new(&mut cluster, SchedulerConfig::default()).plan();
        runs.push(t.elapsed());
        check(&plan)?;
    }
    // The same plan with the queue driven here, so that each group attempt is timed by itself.
    let mut attempts = Vec::with_capacity(iterations * gangs);
    let mut queues = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let mut cluster = build()?;
        let mut scheduler = Scheduler::new(&mut cluster, SchedulerConfig::default());
        let mut plan = Plan::default();
        let t = Instant::now();
        let entries = scheduler.entries();
        queues.push(t.elapsed());
        for entry in entries {
            let t = Instant::now();
            match entry {
                QueueEntry::Group(g) => scheduler.schedule_group(g, &mut plan),
                QueueEntry::Pod(p) => anyhow::bail!("pod {p:?} is queued outside its gang"),
                QueueEntry::Composite(r) => anyhow::bail!("compositepodgroup {} in a benchmark without trees", r.0),
            }
            attempts.push(t.elapsed());
        }
        check(&plan)?;
    }
    runs.sort();
    attempts.sort();
    queues.sort();
    let (median, best) = (runs[runs.len() / 2], runs[0]);
    let mean = attempts.iter().sum::<Duration>() / attempts.len().max(1) as u32;
    Ok(format!(
        "gang scheduling: {nodes} nodes, {gangs} gangs x {per_gang} pods (gang minCount {per_gang}), {pods} pods, {iterations} runs\n  plan cycle: median {:.3} s ({:.0} gangs/s, {:.0} pods/s), best {:.3} s ({:.0} gangs/s)\n  average group attempt: {:.1} us (median plan / {gangs} group attempts; upstream 5.7 ms)\n  group attempts timed one by one ({} in {iterations} runs): mean {:.1} us, p50 {:.1} us, p99 {:.1} us, max {:.1} us; queue (entries) {:.3} s\n  scheduled: {gangs}/{gangs} gangs whole, {pods}/{pods} pods placed\n",
        secs(median),
        gangs as f64 / secs(median),
        pods as f64 / secs(median),
        secs(best),
        gangs as f64 / secs(best),
        micros(median) / gangs.max(1) as f64,
        attempts.len(),
        micros(mean),
        micros(percentile(&attempts, 50)),
        micros(percentile(&attempts, 99)),
        micros(attempts.last().copied().unwrap_or_default()),
        secs(queues[queues.len() / 2]),
    ))
}

/// splitmix64 (Steele, Lea, Flood 2014): the bench's only source of variety, seeded, so that a
/// seed always gives the same jobs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (the modulo bias is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The rack label of the GPU bench's nodes.
const RACK_LABEL: &str = "topology.kubernetes.io/rack";
/// Nodes per rack (an NVL-sized rack of 8-GPU servers).
const RACK_NODES: usize = 18;
/// GPUs per node.
const NODE_GPUS: usize = 8;

/// A p5.48xlarge-like node with 8 H100s, in rack `i / 18`.
fn gpu_node(i: usize) -> Node {
    let name = format!("h100-{i:05}");
    let list: BTreeMap<String, Quantity> = [("cpu", "191500m"), ("memory", "2000Gi"), ("pods", "110")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), q(v)))
        .collect();
    let labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", name.clone()),
        ("node.kubernetes.io/instance-type", "p5.48xlarge".into()),
        (RACK_LABEL, format!("rack-{:02}", i / RACK_NODES)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Node {
        metadata: ObjectMeta { name: Some(name), labels: Some(labels), ..Default::default() },
        status: Some(NodeStatus { capacity: Some(list.clone()), allocatable: Some(list), ..Default::default() }),
        ..Default::default()
    }
}

/// A training pod asking `gpus` H100s through the template `h100-<gpus>`, with 20 cpu and 200Gi
/// of memory per GPU.
fn gpu_pod(name: &str, gpus: usize) -> Pod {
    use k8s_openapi::api::core::v1::{PodResourceClaim, ResourceClaim};
    let list: BTreeMap<String, Quantity> = [("cpu", format!("{}", 20 * gpus)), ("memory", format!("{}Gi", 200 * gpus))]
        .into_iter()
        .map(|(k, v)| (k.to_string(), q(&v)))
        .collect();
    Pod {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some("ml".into()), ..Default::default() },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "trainer".into(),
                image: Some("nvcr.io/nvidia/pytorch:25.01-py3".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(list),
                    claims: Some(vec![ResourceClaim { name: "gpus".into(), request: None }]),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            resource_claims: Some(vec![PodResourceClaim {
                name: "gpus".into(),
                resource_claim_name: None,
                resource_claim_template_name: Some(format!("h100-{gpus}")),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The GPU bench's jobs: what was generated, for the report and the checks.
#[derive(Default)]
struct GpuJobs {
    pods: Vec<Box<Pod>>,
    groups: Vec<PodGroup>,
    /// GPUs each pod asks, by pod name.
    gpus: std::collections::HashMap<String, usize>,
    singles: usize,
    gang_pods: usize,
    rack_constrained: usize,
    demand: usize,
}

/// `jobs` jobs, mixed by a splitmix64 seeded with `seed`: 97 % single pods asking 1 (50 %), 2
/// (25 %), 4 (15 %) or 8 (10 %) GPUs; 3 % gangs of 4 (40 %), 8 (25 %), 16 (20 %), 32 (10 %) or
/// 64 (5 %) pods of 8 or 4 GPUs each (even odds), as PodGroups with minCount = size. A gang that
/// fits in one rack asks to stay in one (`schedulingConstraints.topology` on the rack label).
/// A gang's size (4 to 64 pods, smaller ones more often) and GPUs per pod (4 or 8), as the `gpu`
/// and `sim` benches draw them.
fn gang_shape(rng: &mut SplitMix64) -> (usize, usize) {
    let size = match rng.below(20) {
        0..8 => 4,
        8..13 => 8,
        13..17 => 16,
        17..19 => 32,
        _ => 64,
    };
    (size, if rng.below(2) == 0 { 8 } else { 4 })
}

fn gpu_jobs(jobs: usize, seed: u64) -> GpuJobs {
    let mut rng = SplitMix64(seed);
    let mut out = GpuJobs::default();
    for j in 0..jobs {
        let name = format!("job-{j:05}");
        if rng.below(100) < 3 {
            let (size, gpus) = gang_shape(&mut rng);
            let fits_rack = size * gpus <= RACK_NODES * NODE_GPUS;
            out.rack_constrained += usize::from(fits_rack);
            out.groups.push(gang_group("ml", &name, size, fits_rack.then_some(RACK_LABEL)));
            for w in 0..size {
                let pod_name = format!("{name}-worker-{w:02}");
                let mut pod = gpu_pod(&pod_name, gpus);
                join_group(&mut pod, &name);
                out.pods.push(Box::new(pod));
                out.gpus.insert(pod_name, gpus);
            }
            out.gang_pods += size;
            out.demand += size * gpus;
        } else {
            let gpus = match rng.below(20) {
                0..10 => 1,
                10..15 => 2,
                15..18 => 4,
                _ => 8,
            };
            out.pods.push(Box::new(gpu_pod(&name, gpus)));
            out.gpus.insert(name, gpus);
            out.singles += 1;
            out.demand += gpus;
        }
    }
    out
}

/// The `gpu` and `sim` benches' cluster: `nodes` nodes, each with one slice of `NODE_GPUS`
/// H100s (driver `gpu.nvidia.com`), and the `nvidia-h100` DeviceClass.
fn h100_cluster(
    nodes: usize,
) -> anyhow::Result<(
    Vec<Node>,
    Vec<k8s_openapi::api::resource::v1::ResourceSlice>,
    Vec<k8s_openapi::api::resource::v1::DeviceClass>,
)> {
    let node_objs: Vec<Node> = (0..nodes).map(gpu_node).collect();
    let slices = node_objs
        .iter()
        .enumerate()
        .map(|(i, node)| perf_slice(node, "gpu.nvidia.com", NODE_GPUS, |d| nvidia_gpu(i * NODE_GPUS + d, true)))
        .collect();
    let classes = vec![serde_json::from_value(serde_json::json!({
        "metadata": {"name": "nvidia-h100"},
        "spec": {"selectors": [{"cel": {"expression": H100_SELECTOR}}]}
    }))?];
    Ok((node_objs, slices, classes))
}

/// A GPU cluster: `nodes` p5-like nodes with 8 H100s each (ResourceSlices as dra-driver-nvidia-gpu
/// publishes them, nodes in racks of 18), the DeviceClass `nvidia-h100` selecting H100s by CEL,
/// ResourceClaimTemplates for 1, 2, 4 and 8 GPUs, and `jobs` jobs from [`gpu_jobs`]. Times the
/// whole plan cycle `iterations` times (median); each run gets a cluster built from copies of the
/// objects and fresh DRA inputs, outside the timer. Checks that devices are allocated once, that
/// each placed pod got its GPUs, and that gangs are all or nothing.
pub fn gpu(
    nodes: usize,
    jobs: usize,
    seed: u64,
    iterations: usize,
    config: &SchedulerConfig,
) -> anyhow::Result<String> {
    use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
    let iterations = iterations.max(1);
    let (node_objs, slices, classes) = h100_cluster(nodes)?;
    let templates: Vec<ResourceClaimTemplate> = [1, 2, 4, 8]
        .into_iter()
        .map(|n| {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("h100-{n}"), "namespace": "ml"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "nvidia-h100", "allocationMode": "ExactCount", "count": n}}]}}}
            }))
        })
        .collect::<Result<_, _>>()?;
    let generated = gpu_jobs(jobs, seed);
    let pods = generated.pods.len();
    let gangs = generated.groups.len();
    // Each run starts from a fresh snapshot, built outside the timer.
    let fresh_cluster = || -> anyhow::Result<Cluster> {
        let mut cluster = Cluster::build(node_objs.clone(), generated.pods.clone(), &[], &SchedulerNames::default())
            .map_err(|e| anyhow::anyhow!("{} model errors", e.len()))?;
        cluster.add_pod_groups(generated.groups.clone());
        cluster.add_claims(Vec::new(), &templates);
        Ok(cluster)
    };
    let mut runs = Vec::with_capacity(iterations);
    let mut report = String::new();
    // Each run indexes the slices afresh (no remembered verdict or gathering carries over) and
    // takes them back after, so that they are never held twice.
    let mut slices = slices;
    for _ in 0..iterations {
        let mut cluster = fresh_cluster()?;
        let ctx = muster_sched::DraContext {
            index: muster_alloc::SliceIndex::new(std::mem::take(&mut slices)),
            classes: classes.clone(),
            env: muster_cel::Env::default(),
            features: muster_alloc::Features::kubernetes_1_37(),
        };
        let t = Instant::now();
        let plan = Scheduler::with_dra(&mut cluster, config.clone(), &ctx).plan();
        runs.push(t.elapsed());
        slices = ctx.index.into_slices();
        // The bench checks the plan it times.
        let devices = distinct_devices(&cluster)?;
        let asked: usize = plan.placements.iter().map(|(p, _)| generated.gpus[cluster.pod(*p).name()]).sum();
        anyhow::ensure!(devices == asked, "{devices} devices allocated for {asked} GPUs asked by the placed pods");
        let mut scheduled = 0;
        let mut unschedulable = 0;
        let mut other = 0;
        for r in &plan.groups {
            let size = cluster.groups[r.group].members.len();
            match r.outcome {
                GroupOutcome::Scheduled { placed, .. } => {
                    anyhow::ensure!(placed == size, "gang {} scheduled with {placed} of {size} pods", r.group.0);
                    scheduled += 1;
                }
                GroupOutcome::Unschedulable { .. } => unschedulable += 1,
                _ => other += 1,
            }
        }
        anyhow::ensure!(plan.groups.len() == gangs, "{} group results for {gangs} gangs", plan.groups.len());
        let gang_placed = plan.placements.iter().filter(|(p, _)| cluster.pod(*p).group.is_some()).count();
        let first_refusal = plan
            .groups
            .iter()
            .find(|r| !matches!(r.outcome, GroupOutcome::Scheduled { .. }))
            .map(|r| {
                let m: String = r.message().chars().take(200).collect();
                format!("  first gang not scheduled: {m}\n")
            })
            .unwrap_or_default();
        report = format!(
            "  pods: {} placed, {} pending ({} single pods placed, {gang_placed} gang pods placed)\n  gangs: {scheduled} scheduled, {unschedulable} unschedulable, {other} other\n  devices allocated: {devices} of {}, all distinct, each placed pod has its GPUs\n{first_refusal}",
            plan.placements.len(),
            pods - plan.placements.len(),
            plan.placements.len() - gang_placed,
            nodes * NODE_GPUS,
        );
    }
    // One more run with the queue driven here: where the time goes, by kind of attempt.
    let mut breakdown = String::from("  where the time goes (one run, each attempt timed):\n");
    {
        let mut cluster = fresh_cluster()?;
        let ctx = muster_sched::DraContext {
            index: muster_alloc::SliceIndex::new(slices),
            classes: classes.clone(),
            env: muster_cel::Env::default(),
            features: muster_alloc::Features::kubernetes_1_37(),
        };
        let mut scheduler = Scheduler::with_dra(&mut cluster, config.clone(), &ctx);
        let mut plan = Plan::default();
        // single placed, single unschedulable, gang scheduled, gang not scheduled
        let mut kinds = [(0usize, Duration::ZERO); 4];
        let t = Instant::now();
        let entries = scheduler.entries();
        let queue = t.elapsed();
        for entry in entries {
            let t = Instant::now();
            let kind = match entry {
                QueueEntry::Pod(p) => match scheduler.schedule_one(p) {
                    muster_sched::Outcome::Placed(_) => 0,
                    muster_sched::Outcome::Unschedulable(_) => 1,
                },
                QueueEntry::Group(_) | QueueEntry::Composite(_) => {
                    scheduler.schedule(entry, &mut plan);
                    match plan.groups.last().map(|r| &r.outcome) {
                        Some(GroupOutcome::Scheduled { .. }) => 2,
                        _ => 3,
                    }
                }
            };
            kinds[kind].0 += 1;
            kinds[kind].1 += t.elapsed();
        }
        breakdown += &format!("    queue: {:.3} s\n", secs(queue));
        for (label, (n, d)) in
            ["single pods placed", "single pods unschedulable", "gangs scheduled", "gangs not scheduled"]
                .iter()
                .zip(kinds)
        {
            breakdown += &format!("    {label}: {n}, {:.3} s ({:.0} us each)\n", secs(d), micros(d) / n.max(1) as f64);
        }
    }
    runs.sort();
    let (median, best) = (runs[runs.len() / 2], runs[0]);
    Ok(format!(
        "GPU cluster: {nodes} nodes x {NODE_GPUS} H100 ({} racks of {RACK_NODES}), {jobs} jobs (seed {seed}): {} single pods, {gangs} gangs with {} pods ({} gangs with a rack constraint), {iterations} runs\n  GPU demand: {} of {} GPUs ({:.0} %)\n  plan cycle: median {:.3} s ({:.0} pods/s), best {:.3} s\n{report}{breakdown}  peak RSS: {:.0} MiB\n",
        nodes.div_ceil(RACK_NODES),
        generated.singles,
        generated.gang_pods,
        generated.rack_constrained,
        generated.demand,
        nodes * NODE_GPUS,
        100.0 * generated.demand as f64 / (nodes * NODE_GPUS).max(1) as f64,
        secs(median),
        pods as f64 / secs(median),
        secs(best),
        peak_rss_mib().unwrap_or(f64::NAN)
    ))
}
