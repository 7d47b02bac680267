//! The scheduling-group kinds and events through typed kube 5 clients.

mod common;

use common::{code, start};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::api::scheduling::{v1alpha3, v1beta1};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use muster_fakeapi::FakeApi;
use serde_json::json;

#[tokio::test]
async fn pod_groups_in_both_versions_with_status() {
    let (fake, client) = start(FakeApi::new()).await;
    let beta: Api<v1beta1::PodGroup> = Api::namespaced(client.clone(), "ml");
    let group = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}});
    let g: v1beta1::PodGroup = serde_json::from_value(group).unwrap();
    beta.create(&PostParams::default(), &g).await.unwrap();
    let status = json!({"status": {"conditions": [{"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable",
        "message": "2 pods wait", "lastTransitionTime": "2026-12-01T00:00:00Z"}]}});
    let patched = beta.patch_status("g", &PatchParams::default(), &Patch::Strategic(&status)).await.unwrap();
    assert_eq!(patched.status.unwrap().conditions.unwrap()[0].reason, "Unschedulable");
    let spec = json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}, "status": null});
    let p = beta.patch("g", &PatchParams::default(), &Patch::Merge(&spec)).await.unwrap();
    assert!(p.status.is_some(), "status kept by a write to the object");
    assert_eq!(p.metadata.generation, Some(2), "a spec change bumps the generation");
    // One object, served in both versions (as an API server converts from its storage version).
    let alpha: Api<v1alpha3::PodGroup> = Api::namespaced(client.clone(), "ml");
    let as_alpha = alpha.get("g").await.unwrap();
    assert_eq!(as_alpha.spec.scheduling_policy.gang.map(|g| g.min_count), Some(3));
    let raw = alpha.get_metadata("g").await.unwrap();
    assert_eq!(raw.types.unwrap().api_version, "scheduling.k8s.io/v1alpha3");
    let made: v1alpha3::PodGroup = serde_json::from_value(json!({"apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "PodGroup", "metadata": {"name": "h"}, "spec": {"schedulingPolicy": {"basic": {}}}}))
    .unwrap();
    alpha.create(&PostParams::default(), &made).await.unwrap();
    let names: Vec<String> =
        beta.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|g| g.metadata.name).collect();
    assert_eq!(names, ["g", "h"], "a v1alpha3 PodGroup is a v1beta1 PodGroup too");
    assert_eq!(fake.list("podgroups").len(), 2, "kept once");
    assert_eq!(
        fake.get("scheduling.k8s.io/v1alpha3", "podgroups", Some("ml"), "h").unwrap()["apiVersion"],
        "scheduling.k8s.io/v1alpha3"
    );
    assert_eq!(code(alpha.get("missing").await), 404);
}

#[tokio::test]
async fn a_watch_in_one_version_sees_writes_in_the_other() {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let (_fake, client) = start(FakeApi::new()).await;
    let alpha: Api<v1alpha3::PodGroup> = Api::namespaced(client.clone(), "ml");
    let mut events = watcher::watcher(alpha, watcher::Config::default()).boxed();
    assert!(matches!(events.next().await, Some(Ok(watcher::Event::Init))));
    assert!(matches!(events.next().await, Some(Ok(watcher::Event::InitDone))));
    let beta: Api<v1beta1::PodGroup> = Api::namespaced(client, "ml");
    let g: v1beta1::PodGroup = serde_json::from_value(json!({"apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup", "metadata": {"name": "g"}, "spec": {"schedulingPolicy": {"basic": {}}}}))
    .unwrap();
    beta.create(&PostParams::default(), &g).await.unwrap();
    match events.next().await {
        Some(Ok(watcher::Event::Apply(seen))) => assert_eq!(seen.metadata.name.as_deref(), Some("g")),
        other => panic!("expected the PodGroup: {other:?}"),
    }
}

#[tokio::test]
async fn the_event_recorder_creates_then_patches_a_series() {
    let (fake, client) = start(FakeApi::new()).await;
    let reporter = Reporter { controller: "muster".into(), instance: Some("muster-0".into()) };
    let recorder = Recorder::new(client.clone(), reporter);
    let pod = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some("p".into()),
        namespace: Some("ml".into()),
        uid: Some("u".into()),
        ..Default::default()
    };
    let ev = Event {
        type_: EventType::Warning,
        reason: "FailedScheduling".into(),
        note: Some("0/3 nodes are available".into()),
        action: "Scheduling".into(),
        secondary: None,
    };
    recorder.publish(&ev, &pod).await.unwrap();
    recorder.publish(&ev, &pod).await.unwrap();
    let events: Api<K8sEvent> = Api::namespaced(client, "ml");
    let list = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].series.as_ref().map(|s| s.count), Some(2));
    let verbs: Vec<String> =
        fake.requests().into_iter().filter(|r| r.group == "events.k8s.io").map(|r| r.verb).collect();
    assert_eq!(verbs[..2], ["create", "patch"]);
}
