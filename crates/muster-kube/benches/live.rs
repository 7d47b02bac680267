//! `muster run` against the in-process fake API server (`muster-fakeapi`, a test double) on
//! loopback: how fast pods go from pending to bound with their claims written, and how long a
//! large cluster takes from start to the first binding. Run with
//! `cargo bench -p muster-kube --bench live` (arguments: `throughput NODES DEVICES PODS`,
//! `startup NODES PODS DEVICES_PER_NODE`, `slices NODES CHANGES`; no argument runs all three at
//! the sizes).
//!
//! The fake and the scheduler share this process (and its two cores here), so the figures are
//! a lower bound on what muster does against a real API server with cores of its own.

use std::time::Instant;

/// As the `muster` binary: mimalloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use muster_fakeapi::FakeApi;
use muster_sched::SchedulerNames;
use serde_json::{Value, json};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let n = |i: usize, default: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    match args.first().map(String::as_str) {
        Some("throughput") => throughput(&rt, n(1, 500), n(2, 10), n(3, 5_000)),
        Some("startup") => startup(&rt, n(1, 5_000), n(2, 50_000), n(3, 8)),
        Some("slices") => slices(n(1, 5_000), n(2, 2_000)),
        _ => {
            throughput(&rt, 500, 10, 5_000);
            startup(&rt, 5_000, 50_000, 8);
            slices(5_000, 2_000);
        }
    }
}

/// `pods` pending pods, each with a one-GPU claim from a template, on `nodes` × `devices`.
fn throughput(rt: &tokio::runtime::Runtime, nodes: usize, devices: usize, pods: usize) {
    let mut objects = cluster(nodes, devices);
    objects.extend((0..pods).map(|i| pod(&format!("job-{i:05}"), None)));
    let started = Instant::now();
    let api = rt.block_on(FakeApi::new().with_objects(objects).start("127.0.0.1:0".parse().unwrap())).unwrap();
    let loaded = started.elapsed();
    let before = api.requests().len();
    let summary = run(rt, &api);
    let writes: Vec<_> = api.requests()[before..]
        .iter()
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
        .cloned()
        .collect();
    let bound = api.list("pods").iter().filter(|p| p["spec"]["nodeName"].is_string()).count();
    let allocated = api.list("resourceclaims").iter().filter(|c| c["status"]["allocation"].is_object()).count();
    let synced = summary.synced_ms.unwrap_or(0);
    let total_ms = summary.total_ms;
    let binding_ms = total_ms.saturating_sub(synced).max(1);
    println!("throughput: {nodes} nodes x {devices} devices, {pods} pods with a one-device claim from a template");
    println!("  fake loaded in {:.2} s (kube-controller-manager stand-in created the claims)", loaded.as_secs_f64());
    println!("  watches synced after {synced} ms; all bound after {total_ms} ms");
    println!(
        "  bound {bound}, claims allocated {allocated}: {:.0} pods/s from the first listing to idle",
        bound as f64 * 1000.0 / binding_ms as f64
    );
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for r in &writes {
        let what = format!(
            "{} {}{}",
            r.verb,
            r.resource,
            r.subresource.as_deref().map(|s| format!("/{s}")).unwrap_or_default()
        );
        *by_kind.entry(what).or_default() += 1;
    }
    println!("  write calls: {} ({:.2} per pod)", writes.len(), writes.len() as f64 / bound.max(1) as f64);
    for (what, count) in by_kind {
        println!("    {what}: {count}");
    }
    rt.block_on(api.shutdown());
}

/// A large cluster, mostly running: `pods` pods of which one in 50 is pending, on `nodes` nodes
/// with `devices` devices each; the time from start to the first binding.
fn startup(rt: &tokio::runtime::Runtime, nodes: usize, pods: usize, devices: usize) {
    let mut objects = cluster(nodes, devices);
    for i in 0..pods {
        let node = (i % 50 != 0).then(|| format!("node-{:05}", i % nodes));
        objects.push(pod(&format!("p-{i:06}"), node.as_deref()));
    }
    let api = rt.block_on(FakeApi::new().with_objects(objects).start("127.0.0.1:0".parse().unwrap())).unwrap();
    let summary = run(rt, &api);
    println!("startup: {nodes} nodes, {} devices, {pods} pods ({} pending)", nodes * devices, pods.div_ceil(50));
    println!(
        "  watches synced after {} ms; first binding after {} ms; idle after {} ms; bound {}",
        summary.synced_ms.unwrap_or(0),
        summary.first_bound_ms.unwrap_or(0),
        summary.total_ms,
        summary.bound
    );
    println!("  peak RSS of the process (fake and scheduler): {} MiB", peak_rss_mib());
    rt.block_on(api.shutdown());
}

struct Timed {
    synced_ms: Option<u64>,
    first_bound_ms: Option<u64>,
    bound: usize,
    total_ms: u64,
}

fn run(rt: &tokio::runtime::Runtime, api: &muster_fakeapi::Running) -> Timed {
    let dir = std::env::temp_dir().join(format!("muster-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let options = muster_kube::Options {
        kubeconfig: Some(kubeconfig),
        scheduler_names: SchedulerNames(vec!["muster".into()]),
        exit_when_idle: true,
        leader_elect: false,
        qps: 0.0,
        ..Default::default()
    };
    let started = Instant::now();
    let s = rt.block_on(muster_kube::run(options, std::future::pending())).unwrap();
    let total_ms = started.elapsed().as_millis() as u64;
    let _ = std::fs::remove_dir_all(&dir);
    Timed { synced_ms: s.synced_ms, first_bound_ms: s.first_bound_ms, bound: s.bound, total_ms }
}

/// One node's ResourceSlice as its driver publishes it: 8 GPUs, each with a counter set and two
/// partitions that share it, `gpu-0` tainted by an XID when `sick`.
fn gpu_slice(node: usize, sick: bool) -> k8s_openapi::api::resource::v1::ResourceSlice {
    let name = format!("node-{node:05}");
    let full = json!({"memory": {"value": "80Gi"}});
    let half = json!({"memory": {"value": "40Gi"}});
    let mut devices = Vec::new();
    let mut sets = Vec::new();
    for g in 0..8 {
        let uses = |d: String, amount: &Value| json!({"name": d, "consumesCounters": [{"counterSet": format!("gpu-{g}"), "counters": amount}]});
        let mut gpu = uses(format!("gpu-{g}"), &full);
        if sick && g == 0 {
            gpu["taints"] = json!([{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]);
        }
        devices.extend([gpu, uses(format!("gpu-{g}-mig-a"), &half), uses(format!("gpu-{g}-mig-b"), &half)]);
        sets.push(json!({"name": format!("gpu-{g}"), "counters": full}));
    }
    serde_json::from_value(json!({"metadata": {"name": format!("{name}-gpu")},
        "spec": {"driver": "gpu.example.com", "nodeName": name, "sharedCounters": sets, "devices": devices,
                 "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}}}))
    .unwrap()
}

/// What one ResourceSlice change costs the live loop with a DeviceTaintRule in the cluster and
/// health propagation on (`DraInputs::take_changes`, the views it hands the engine applied to a
/// slice index): the pools of the changed slices, side by side with the whole view built and
/// compared (what the loop did before). `nodes` slices, `changes` of them flipping an XID taint.
fn slices(nodes: usize, changes: usize) {
    use muster_kube::devices::DraInputs;
    use muster_kube::observed::Object;
    use muster_sched::DeviceChange;
    let rule: k8s_openapi::api::resource::v1::DeviceTaintRule = serde_json::from_value(json!({
        "metadata": {"name": "maintenance"},
        "spec": {"deviceSelector": {"pool": "node-00000"}, "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}
    }))
    .unwrap();
    let setup = || {
        let mut inputs = DraInputs::default();
        inputs.upsert(Object::DeviceTaintRule(Box::new(rule.clone())));
        for i in 0..nodes {
            inputs.upsert(Object::ResourceSlice(Box::new(gpu_slice(i, false))));
        }
        let index = muster_alloc::SliceIndex::new(inputs.view(true));
        (inputs, index)
    };
    let apply = |index: &mut muster_alloc::SliceIndex, out: Vec<DeviceChange>| {
        for change in out {
            match change {
                DeviceChange::UpsertSlice(s) => drop(index.upsert(*s)),
                DeviceChange::DeleteSlice(n) => drop(index.delete(&n)),
                _ => {}
            }
        }
    };
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let (mut pools, mut whole) = (setup(), setup());
    let mut sick = vec![false; nodes];
    for k in 0..changes {
        let node = k * 7_919 % nodes;
        sick[node] = !sick[node];
        for (i, (inputs, index)) in [&mut pools, &mut whole].into_iter().enumerate() {
            inputs.upsert(Object::ResourceSlice(Box::new(gpu_slice(node, sick[node]))));
            let started = Instant::now();
            let out = match i {
                0 => inputs.take_changes(true, index),
                _ => muster_sched::slice_changes(index, inputs.view(true), true),
            };
            apply(index, out);
            times[i].push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let [mut by_pool, mut rebuilt] = times;
    let same = pools.1.slices().map(|(_, s)| s).eq(whole.1.slices().map(|(_, s)| s));
    println!("slices: {nodes} ResourceSlices (8 GPUs x 3 devices each), a DeviceTaintRule, health propagation on");
    println!(
        "  one slice change, median of {changes}: {:.1} µs by pool, {:.1} µs with the whole view rebuilt; same slices: {same}",
        median(&mut by_pool),
        median(&mut rebuilt)
    );
}

fn cluster(nodes: usize, devices: usize) -> Vec<Value> {
    let mut out = vec![
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
               "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
               "metadata": {"name": "one-gpu", "namespace": "bench"},
               "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}),
    ];
    for i in 0..nodes {
        let name = format!("node-{i:05}");
        out.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                       "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"}}}));
        let devs: Vec<Value> = (0..devices).map(|d| json!({"name": format!("gpu-{d}")})).collect();
        out.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{name}-gpu")},
            "spec": {"driver": "gpu.example.com", "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": devs}}));
    }
    out
}

/// A pod of muster's: pending with a one-GPU claim from the template, or bound without one.
fn pod(name: &str, node: Option<&str>) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "bench"},
        "spec": {"schedulerName": "muster",
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}});
    match node {
        Some(n) => {
            p["spec"]["nodeName"] = json!(n);
            p["status"] = json!({"phase": "Running"});
        }
        None => {
            p["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
            p["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
        }
    }
    p
}

fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    kb / 1024
}
