//! A small world around the engine, as `muster sim` will be: pods with template claims arrive,
//! the resourceclaim controller creates their claims, the engine places them, the world binds
//! them, they finish, and the controller releases their claims so that waiting pods get the
//! devices. Two GPUs, five one-GPU pods of ten seconds each: never more than two run at once,
//! and all five finish.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use muster_controllers::resourceclaim::{Release, claims_for, release};
use muster_sched::{Change, Cluster, DraContext, Engine, PodState, SchedulerConfig, SchedulerNames};
use serde_json::json;

fn objects() -> (Node, ResourceSlice, DeviceClass, ResourceClaimTemplate) {
    let node = serde_json::from_value(json!({"metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}}}))
    .unwrap();
    let slice = serde_json::from_value(json!({"metadata": {"name": "n0-gpus"},
        "spec": {"driver": "gpu.example.com", "nodeName": "n0", "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}))
    .unwrap();
    let class = serde_json::from_value(json!({"metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}))
    .unwrap();
    let template = serde_json::from_value(json!({"metadata": {"name": "one-gpu", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}))
    .unwrap();
    (node, slice, class, template)
}

fn job(i: usize) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": format!("job-{i}"), "namespace": "ml", "uid": format!("uid-{i}")},
        "spec": {"containers": [{"name": "c"}], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}}))
    .unwrap()
}

#[test]
fn claims_are_created_used_and_released_as_pods_come_and_go() {
    let (node, slice, class, template) = objects();
    let (slices, classes, templates) = (vec![slice], vec![class], vec![template]);
    let ctx = DraContext {
        index: muster_alloc::SliceIndex::new(slices.clone()),
        classes: classes.clone(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let cluster =
        Cluster::build(vec![node], Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
    let mut started: Vec<(String, u64)> = Vec::new();
    let mut finished = Vec::new();
    let mut most_running = 0;
    for second in 0..60u64 {
        let now = second * 1_000;
        // Arrivals: one pod a second; the claim controller makes its claim.
        if second < 5 {
            let pod = job(second as usize);
            engine.apply(Change::UpsertPod(Box::new(pod.clone())), now).unwrap();
            let (claims, with_status) = claims_for(&pod, &templates, None).expect("a template entry");
            for c in claims {
                engine.apply(Change::UpsertClaim(Box::new(c)), now).unwrap();
            }
            engine.apply(Change::UpsertPod(with_status), now).unwrap();
        }
        // Completions: ten seconds after its start a pod succeeds.
        for (key, _) in started.iter().filter(|(_, at)| now == at + 10_000) {
            let id = engine.cluster().pod_id(key).unwrap();
            let mut pod = Box::new(engine.cluster().pod(id).pod.object());
            pod.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
            engine.apply(Change::UpsertPod(pod), now).unwrap();
            finished.push(key.clone());
        }
        // The claim controller releases what finished pods held.
        let c = engine.cluster();
        let releases: Vec<Release> = c
            .claims
            .iter()
            .filter_map(|info| release(&info.claim, |name| c.pod_id(&format!("ml/{name}")).map(|p| &c.pod(p).pod)))
            .collect();
        for r in releases {
            match r {
                Release::Update(claim) => engine.apply(Change::UpsertClaim(claim), now).unwrap(),
                Release::Delete(key) => engine.apply(Change::DeleteClaim(key), now).unwrap(),
            }
        }
        // Scheduling, then binding what was placed.
        let plan = engine.schedule(now);
        for (pod, node) in plan.placements {
            let mut bound = Box::new(engine.cluster().pod(pod).pod.object());
            bound.spec.as_mut().unwrap().node_name = Some(engine.cluster().node(node).name().to_string());
            bound.status.get_or_insert_with(Default::default).phase = Some("Running".into());
            started.push((engine.cluster().pod(pod).key.clone(), now));
            engine.apply(Change::UpsertPod(bound), now).unwrap();
        }
        let running = engine.cluster().pods.iter().filter(|p| matches!(p.state, PodState::Bound(_))).count();
        most_running = most_running.max(running);
    }
    assert_eq!(most_running, 2, "two GPUs: two pods at a time");
    assert_eq!(finished.len(), 5, "every pod ran: {started:?}");
    // First come, first served: jobs 0 and 1 at once, 2 when 0 finishes, 3 when 1 finishes — at
    // 11 s: tried and rejected at 10 s, it is still backing off at 11 s, but with nothing else
    // to do the scheduler takes it from the backoff queue (SchedulerPopFromBackoffQ; without
    // the gate it waited to 12 s) — and 4 when 2 finishes. (A claim's arrival wakes only the
    // pods that name it; waking every waiting pod let job 4 overtake job 3.)
    let starts: Vec<(&str, u64)> = started.iter().map(|(k, at)| (k.as_str(), at / 1_000)).collect();
    assert_eq!(starts, [("ml/job-0", 0), ("ml/job-1", 1), ("ml/job-2", 10), ("ml/job-3", 11), ("ml/job-4", 20)]);
}
