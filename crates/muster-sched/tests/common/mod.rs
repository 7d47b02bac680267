//! Fixtures shared by the pod-group property tests: nodes with a GPU driver's ResourceSlices, the
//! `gpu` DeviceClass, `gpus-1`/`gpus-2` claim templates, and a plan over them.

#![allow(dead_code)] // each test file uses what it needs

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use muster_sched::{Cluster, DraContext, Plan, Scheduler, SchedulerConfig};
use serde_json::json;

/// Nodes `n0`, `n1`, ... (8 cpu, 64Gi) labelled `label=<prefix><i % 2>`, and one slice per node
/// with `node_gpus[i]` devices of driver `gpu.example.com`.
pub fn gpu_nodes(node_gpus: &[u8], label: &str, prefix: &str) -> (Vec<Node>, Vec<ResourceSlice>) {
    let nodes = (0..node_gpus.len())
        .map(|i| {
            serde_json::from_value(
                json!({"metadata": {"name": format!("n{i}"), "labels": {label: format!("{prefix}{}", i % 2)}},
                "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}}}),
            )
            .unwrap()
        })
        .collect();
    let slices = node_gpus
        .iter()
        .enumerate()
        .map(|(i, n)| node_slice(i, (0..*n).map(|d| json!({"name": format!("gpu-{d}")})).collect()))
        .collect();
    (nodes, slices)
}

/// The `gpu` DeviceClass (every device of `gpu.example.com`).
pub fn gpu_class() -> Vec<DeviceClass> {
    vec![
        serde_json::from_value(json!({"metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}))
        .unwrap(),
    ]
}

/// Templates `gpus-1` and `gpus-2` in namespace `ml`.
pub fn gpu_templates() -> Vec<ResourceClaimTemplate> {
    (1..=2)
        .map(|n| {
            serde_json::from_value(json!({"metadata": {"name": format!("gpus-{n}"), "namespace": "ml"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": n}}]}}}}))
            .unwrap()
        })
        .collect()
}

/// The DRA inputs over `slices` and `classes`, with Kubernetes 1.37's features.
pub fn dra(slices: &[ResourceSlice], classes: &[DeviceClass]) -> DraContext {
    DraContext {
        index: muster_alloc::SliceIndex::new(slices.to_vec()),
        classes: classes.to_vec(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    }
}

/// The plan over `cluster` with DRA inputs, with or without the allocator memo.
pub fn plan_with_dra(cluster: &mut Cluster, slices: &[ResourceSlice], classes: &[DeviceClass], memo: bool) -> Plan {
    let ctx = dra(slices, classes);
    let mut s = Scheduler::with_dra(cluster, SchedulerConfig::default(), &ctx);
    if !memo {
        s = s.without_dra_memo().without_verdict_reuse();
    }
    s.plan()
}

/// Pod `name` of PodGroup `group` (namespace `ml`): `gpus` GPUs through the `gpus-{gpus}`
/// template (no claim when 0), `cpu` cores, and the `priority` given (none when `None`).
pub fn member(
    name: &str,
    group: &str,
    gpus: u8,
    cpu: u32,
    priority: Option<i32>,
) -> Box<k8s_openapi::api::core::v1::Pod> {
    let claims = if gpus > 0 {
        json!([{"name": "gpus", "resourceClaimTemplateName": format!("gpus-{gpus}")}])
    } else {
        json!([])
    };
    let mut spec = json!({"schedulingGroup": {"podGroupName": group}, "resourceClaims": claims,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]});
    if let Some(p) = priority {
        spec["priority"] = json!(p);
    }
    Box::new(serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"}, "spec": spec})).unwrap())
}

/// Node `n{i}`'s slice of `gpu.example.com` devices, one pool of one slice.
pub fn node_slice(i: usize, devices: Vec<serde_json::Value>) -> ResourceSlice {
    serde_json::from_value(json!({"metadata": {"name": format!("n{i}")},
        "spec": {"driver": "gpu.example.com", "nodeName": format!("n{i}"), "devices": devices,
                 "pool": {"name": format!("n{i}"), "generation": 1, "resourceSliceCount": 1}}}))
    .unwrap()
}

/// CompositePodGroup `ml/<name>` of Workload `w`: a gang of `min` child groups (basic when 0),
/// under `parent`, in one `block` when `block`.
pub fn composite(
    name: &str,
    parent: Option<&str>,
    min: u8,
    block: bool,
) -> k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup {
    let policy = if min == 0 { json!({"basic": {}}) } else { json!({"gang": {"minGroupCount": min}}) };
    let mut spec = json!({"workloadRef": {"workloadName": "w", "templateName": "t"}, "schedulingPolicy": policy});
    if let Some(p) = parent {
        spec["parentCompositePodGroupName"] = json!(p);
    }
    if block {
        spec["schedulingConstraints"] = json!({"topology": [{"key": "block"}]});
    }
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"}, "spec": spec})).unwrap()
}

/// Claim `ml/<name>` for one GPU of class `gpu`; when `holder` is given, allocated to pod
/// `ml/<holder.0>` on node `n<holder.1>`'s `gpu-0` (with the node selector the allocator writes:
/// the claim's devices are that node's).
pub fn gpu_claim(name: &str, holder: Option<(&str, usize)>) -> k8s_openapi::api::resource::v1::ResourceClaim {
    let mut c = json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}});
    if let Some((pod, node)) = holder {
        c["status"] = json!({
            "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": format!("n{node}"), "device": "gpu-0"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [format!("n{node}")]}]}]}},
            "reservedFor": [{"resource": "pods", "name": pod, "uid": format!("uid-{pod}")}]});
    }
    serde_json::from_value(c).unwrap()
}
