//! The verbs through a kube 5 client: create, get, list pages, replace preconditions, patches,
//! status isolation, binding, finalizer-aware deletion, faults.

mod common;

use common::{code, pod, start};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use muster_fakeapi::{FakeApi, RequestMatcher};
use serde_json::json;

#[tokio::test]
async fn create_get_list_pages_and_defaults() {
    let (fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    for i in 0..5 {
        pods.create(&PostParams::default(), &pod("ml", &format!("p{i}"))).await.unwrap();
    }
    assert_eq!(code(pods.create(&PostParams::default(), &pod("ml", "p0")).await), 409);
    let got = pods.get("p3").await.unwrap();
    let rv: u64 = got.metadata.resource_version.as_deref().unwrap().parse().unwrap();
    assert!(rv > 0 && got.metadata.uid.is_some() && got.metadata.creation_timestamp.is_some());
    assert_eq!(got.status.unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(got.spec.unwrap().priority, Some(0));
    let mut running = pod("ml", "claims-running");
    running.status = Some(serde_json::from_value(json!({"phase": "Running"})).unwrap());
    let created = pods.create(&PostParams::default(), &running).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"), "a created object's status is the server's");
    pods.delete("claims-running", &DeleteParams::default()).await.unwrap();
    let named = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"generateName": "gen-"},
        "spec": {"containers": [{"name": "c"}]}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let name = named.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() > 4, "{name}");
    pods.delete(&name, &DeleteParams::default()).await.unwrap();

    let first = pods.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().expect("a continue token");
    let second = pods.list(&ListParams::default().limit(2).continue_token(&token)).await.unwrap();
    let third = pods
        .list(&ListParams::default().limit(2).continue_token(second.metadata.continue_.as_deref().unwrap()))
        .await
        .unwrap();
    assert_eq!(third.items.len(), 1);
    assert_eq!(third.metadata.continue_, None);
    let all =
        Api::<Pod>::all(client).list(&ListParams::default().labels("app=t").fields("metadata.name!=p0")).await.unwrap();
    assert_eq!(all.items.len(), 4);
    assert_eq!(fake.list("pods").len(), 5);
    fake.shutdown().await;
}

#[tokio::test]
async fn stale_replace_conflicts_and_status_is_isolated() {
    let (fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    let created = pods.create(&PostParams::default(), &pod("ml", "p")).await.unwrap();
    let mut changed = created.clone();
    changed.metadata.labels = Some([("x".to_string(), "1".to_string())].into());
    changed.status.as_mut().unwrap().phase = Some("Running".into());
    let replaced = pods.replace("p", &PostParams::default(), &changed).await.unwrap();
    assert_eq!(replaced.status.unwrap().phase.as_deref(), Some("Pending"), "status kept on the main resource");
    let e = pods.replace("p", &PostParams::default(), &changed).await;
    let Err(kube::Error::Api(s)) = e else { panic!("stale resourceVersion accepted") };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));

    let stale = json!({"metadata": {"resourceVersion": created.metadata.resource_version, "labels": {"z": "3"}}});
    assert_eq!(
        code(pods.patch("p", &PatchParams::default(), &Patch::Merge(&stale)).await),
        409,
        "a patch precondition"
    );
    let patch = json!({"metadata": {"labels": {"y": "2"}}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
    let after = pods.patch_status("p", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(after.status.unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(after.spec.unwrap().node_name, None, "status writes change only status");
    assert!(!after.metadata.labels.unwrap().contains_key("y"));
    assert_eq!(fake.get("v1", "pods", Some("ml"), "p").unwrap()["status"]["phase"], "Running");
}

#[tokio::test]
async fn strategic_patch_on_conditions_keeps_the_others() {
    let (_fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    pods.create(&PostParams::default(), &pod("ml", "p")).await.unwrap();
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    pods.patch_status("p", &PatchParams::default(), &Patch::Strategic(&ready)).await.unwrap();
    let unsched = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        "nominatedNodeName": "n2"}});
    let p = pods.patch_status("p", &PatchParams::default(), &Patch::Strategic(&unsched)).await.unwrap();
    let status = p.status.unwrap();
    let types: Vec<&str> = status.conditions.iter().flatten().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["Ready", "PodScheduled"]);
    assert_eq!(status.nominated_node_name.as_deref(), Some("n2"));
}

fn claim(name: &str) -> ResourceClaim {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}))
    .unwrap()
}

#[tokio::test]
async fn claim_reserved_for_delete_by_uid_and_validation() {
    let (_fake, client) = start(FakeApi::new()).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client, "ml");
    let c = claims.create(&PostParams::default(), &claim("c")).await.unwrap();
    let allocation = json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "g0"}]}});
    let mut with = c.clone();
    with.status = Some(serde_json::from_value(json!({"allocation": allocation,
        "reservedFor": [{"resource": "pods", "name": "a", "uid": "ua"}, {"resource": "pods", "name": "b", "uid": "ub"}]}))
    .unwrap());
    let c = claims.replace_status("c", &PostParams::default(), &with).await.unwrap();
    let unreserve =
        json!({"metadata": {"uid": c.metadata.uid}, "status": {"reservedFor": [{"$patch": "delete", "uid": "ua"}]}});
    let c = claims.patch_status("c", &PatchParams::default(), &Patch::Strategic(&unreserve)).await.unwrap();
    let left: Vec<String> = c.status.as_ref().unwrap().reserved_for.iter().flatten().map(|r| r.uid.clone()).collect();
    assert_eq!(left, ["ub"]);
    let other = json!({"status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "g1"}]}}}});
    assert_eq!(code(claims.patch_status("c", &PatchParams::default(), &Patch::Merge(&other)).await), 422);
    let clear = json!({"status": {"allocation": null}});
    assert_eq!(
        code(claims.patch_status("c", &PatchParams::default(), &Patch::Merge(&clear)).await),
        422,
        "still reserved"
    );
    let too_many: Vec<_> =
        (0..257).map(|i| json!({"resource": "pods", "name": format!("p{i}"), "uid": format!("u{i}")})).collect();
    let big = json!({"status": {"reservedFor": too_many}});
    assert_eq!(code(claims.patch_status("c", &PatchParams::default(), &Patch::Merge(&big)).await), 422);
    let twice = json!({"status": {"reservedFor": [{"resource": "pods", "name": "b", "uid": "ub"}, {"resource": "pods", "name": "b", "uid": "ub"}]}});
    assert_eq!(code(claims.patch_status("c", &PatchParams::default(), &Patch::Merge(&twice)).await), 422);
    let spec = json!({"spec": {"devices": {"requests": []}}});
    assert_eq!(code(claims.patch("c", &PatchParams::default(), &Patch::Merge(&spec)).await), 422, "spec is immutable");
    let via_binding = json!({"status": {"reservedFor": null, "allocation": null}});
    let pp = PatchParams::default();
    let freed: ResourceClaim =
        claims.patch_subresource("binding", "c", &pp, &Patch::Merge(&via_binding)).await.unwrap();
    assert!(freed.status.unwrap().allocation.is_none());
}

#[tokio::test]
async fn binding_sets_the_node_once() {
    let (fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    let p = pods.create(&PostParams::default(), &pod("ml", "p")).await.unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p", "namespace": "ml", "uid": p.metadata.uid},
        "target": {"kind": "Node", "name": "n1"}});
    let pp = PostParams::default();
    let status: kube::core::Status = pods.create_subresource("binding", "p", &pp, &binding).await.unwrap();
    assert_eq!(status.code, 201);
    let bound = pods.get("p").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let cond = bound.status.unwrap().conditions.unwrap();
    assert!(cond.iter().any(|c| c.type_ == "PodScheduled" && c.status == "True"));
    let again = pods.create_subresource::<_, kube::core::Status>("binding", "p", &pp, &binding).await;
    assert_eq!(code(again), 409);
    let missing = json!({"metadata": {"name": "q"}, "target": {"kind": "Node", "name": "n1"}});
    assert_eq!(code(pods.create_subresource::<_, kube::core::Status>("binding", "q", &pp, &missing).await), 404);
    let other_uid = json!({"metadata": {"name": "p", "uid": "not-its-uid"}, "target": {"kind": "Node", "name": "n1"}});
    assert_eq!(code(pods.create_subresource::<_, kube::core::Status>("binding", "p", &pp, &other_uid).await), 409);
    let mut held = pod("ml", "held");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.create(&pp, &held).await.unwrap();
    pods.delete("held", &DeleteParams::default()).await.unwrap();
    let bind_held = json!({"metadata": {"name": "held"}, "target": {"kind": "Node", "name": "n1"}});
    assert_eq!(
        code(pods.create_subresource::<_, kube::core::Status>("binding", "held", &pp, &bind_held).await),
        409,
        "being deleted"
    );
    let moved = json!({"spec": {"nodeName": "n2"}});
    assert_eq!(code(pods.patch("p", &PatchParams::default(), &Patch::Merge(&moved)).await), 422);
    let last = fake.requests().into_iter().rev().find(|r| r.subresource.as_deref() == Some("binding")).unwrap();
    assert_eq!((last.verb.as_str(), last.status, last.name.as_deref()), ("create", 409, Some("held")));
}

#[tokio::test]
async fn deletion_waits_for_finalizers_and_honours_the_uid() {
    let (fake, client) = start(FakeApi::new()).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client, "ml");
    let mut c = claim("c");
    c.metadata.finalizers = Some(vec!["resource.kubernetes.io/delete-protection".into()]);
    let c = claims.create(&PostParams::default(), &c).await.unwrap();
    let wrong = DeleteParams {
        preconditions: Some(Preconditions { uid: Some("nope".into()), resource_version: None }),
        ..Default::default()
    };
    assert_eq!(code(claims.delete("c", &wrong).await), 409);
    let right = DeleteParams {
        preconditions: Some(Preconditions { uid: c.metadata.uid.clone(), resource_version: None }),
        ..Default::default()
    };
    let marked = claims.delete("c", &right).await.unwrap().left().expect("the object");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(fake.get("resource.k8s.io/v1", "resourceclaims", Some("ml"), "c").is_some(), "kept for its finalizer");
    let unfinal = json!({"metadata": {"finalizers": null}});
    claims.patch("c", &PatchParams::default(), &Patch::Merge(&unfinal)).await.unwrap();
    assert!(
        fake.get("resource.k8s.io/v1", "resourceclaims", Some("ml"), "c").is_none(),
        "gone with its last finalizer"
    );
    let pods: Api<Pod> = Api::namespaced(claims.clone().into_client(), "ml");
    pods.create(&PostParams::default(), &pod("ml", "p")).await.unwrap();
    pods.delete("p", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(pods.get("p").await), 404, "no kubelet: a pod goes at once");
}

#[tokio::test]
async fn injected_faults_then_success() {
    let (fake, client) = start(FakeApi::new()).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    pods.create(&PostParams::default(), &pod("ml", "p")).await.unwrap();
    fake.faults().fail_next(RequestMatcher::new("patch", "pods").subresource("status"), 409, 1);
    fake.faults().fail_next(RequestMatcher::new("get", "pods"), 500, 1);
    let patch = json!({"status": {"phase": "Running"}});
    assert_eq!(code(pods.patch_status("p", &PatchParams::default(), &Patch::Merge(&patch)).await), 409);
    pods.patch_status("p", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(code(pods.get("p").await), 500);
    // kube 5's client retries 429, 503 and 504 by itself (RetryPolicy::server_retry, on by
    // default): one call, three requests.
    fake.faults().fail_next(RequestMatcher::new("get", "pods"), 503, 2);
    assert!(pods.get("p").await.is_ok());
    let statuses: Vec<(String, u16)> = fake.requests().into_iter().map(|r| (r.verb, r.status)).collect();
    let tail: Vec<(&str, u16)> = statuses.iter().rev().take(6).rev().map(|(v, s)| (v.as_str(), *s)).collect();
    assert_eq!(tail, [("patch", 409), ("patch", 200), ("get", 500), ("get", 503), ("get", 503), ("get", 200)]);
    fake.faults().delay(std::time::Duration::from_millis(200));
    let t = std::time::Instant::now();
    pods.patch_status("p", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert!(t.elapsed() >= std::time::Duration::from_millis(200));
}
