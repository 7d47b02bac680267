//! What a DynamicResources error (not a rejection) does to a pod's attempt: it stops the attempt
//! with upstream's `running "DynamicResources" filter plugin: ...` and reason SchedulerError, and
//! its text names the pod's own claims even when pods share a claim-spec fingerprint.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use muster_sched::{Cluster, DraContext, Scheduler, SchedulerConfig, SchedulerNames};
use serde_json::json;

/// A Kubernetes object from its JSON.
macro_rules! from {
    ($v:expr) => {
        serde_json::from_value($v).unwrap()
    };
}

/// Two nodes; on `b`, the first device lacks the attribute the template's selector reads (the
/// allocator's first-fit search evaluates it first).
fn inputs() -> (Vec<Node>, Vec<ResourceSlice>, Vec<DeviceClass>, Vec<ResourceClaimTemplate>) {
    let node = |n: &str| from!(json!({"metadata": {"name": n}, "status": {"allocatable": {"cpu": "8", "pods": "10"}}}));
    let slice = |n: &str, devices: serde_json::Value| {
        from!(json!({"metadata": {"name": n}, "spec": {"driver": "gpu.example.com", "nodeName": n, "devices": devices,
            "pool": {"name": n, "generation": 1, "resourceSliceCount": 1}}}))
    };
    let slices = vec![
        slice("a", json!([{"name": "gpu-0", "attributes": {"mem": {"int": 80}}}])),
        slice("b", json!([{"name": "gpu-0"}, {"name": "gpu-1", "attributes": {"mem": {"int": 80}}}])),
    ];
    let class = from!(json!({"metadata": {"name": "gpu"}, "spec": {}}));
    let template =
        from!(json!({"metadata": {"name": "gpu", "namespace": "ml"}, "spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu",
            "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].mem >= 80"}}]}}]}}}}));
    (vec![node("a"), node("b")], slices, vec![class], vec![template])
}

fn pods() -> Vec<Box<Pod>> {
    (0..3)
        .map(|i| {
            Box::new(from!(json!({"metadata": {"name": format!("p{i}"), "namespace": "ml"}, "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                "containers": [{"name": "c"}]}})))
        })
        .collect()
}

/// Each pod's unschedulable message and condition reason, in pod order.
fn messages(memo: bool) -> Vec<(String, String, &'static str)> {
    let (nodes, slices, classes, templates) = inputs();
    let mut cluster = Cluster::build(nodes, pods(), &[], &SchedulerNames::default()).unwrap();
    cluster.add_claims(Vec::new(), &templates);
    let ctx = DraContext {
        index: muster_alloc::SliceIndex::new(slices.clone()),
        classes: classes.clone(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let mut s = Scheduler::with_dra(&mut cluster, SchedulerConfig::default(), &ctx);
    if !memo {
        s = s.without_dra_memo();
    }
    let plan = s.plan();
    let placed: Vec<_> = plan
        .placements
        .iter()
        .map(|(p, n)| (cluster.pod(*p).key.clone(), cluster.node(*n).name().to_string()))
        .collect();
    assert!(
        placed.is_empty(),
        "an error stops every attempt, though node a could serve the claim: {placed:?} {:?}",
        plan.unschedulable.iter().map(|(_, e)| e.message()).collect::<Vec<_>>()
    );
    let mut out: Vec<_> =
        plan.unschedulable.iter().map(|(p, e)| (cluster.pod(p).key.clone(), e.message(), e.reason())).collect();
    out.sort();
    out
}

#[test]
fn each_pod_sharing_a_fingerprint_names_its_own_claim() {
    let got = messages(true);
    assert_eq!(got.len(), 3);
    for (pod, message, reason) in &got {
        let name = pod.strip_prefix("ml/").unwrap();
        let head = format!("running \"DynamicResources\" filter plugin: claim ml/{name}-gpu-");
        assert!(message.starts_with(&head), "{pod}: {message}");
        assert!(message.contains("on device gpu.example.com/b/gpu-0: CEL runtime error"), "{message}");
        assert_eq!(*reason, "SchedulerError");
    }
    assert_eq!(got, messages(false), "the memo changes no message");
}
