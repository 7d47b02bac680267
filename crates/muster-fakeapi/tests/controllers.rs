//! Preloaded manifests (what `muster plan` reads) and the kube-controller-manager stand-in:
//! workloads expanded into pods, claims made from templates and released with their pods.

mod common;

use std::path::PathBuf;

use common::{code, start};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use muster_fakeapi::{FakeApi, manifests};
use serde_json::json;

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

#[tokio::test]
async fn template_claims_are_created_and_released_with_their_pod() {
    let objects = manifests::load(&[repo("examples/gpu-training")]).expect("the example loads");
    let (fake, client) = start(FakeApi::new().with_objects(objects)).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "ml");
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    assert_eq!(fake.list("resourceslices").len(), 4);
    let made = claims.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(made.len(), 4, "one claim per trainer, from the template");
    let trainer = pods.get("trainer-0").await.unwrap();
    let recorded = trainer.status.unwrap().resource_claim_statuses.unwrap();
    let claim_name = recorded[0].resource_claim_name.clone().unwrap();
    let claim = claims.get(&claim_name).await.unwrap();
    assert_eq!(claim.metadata.owner_references.unwrap()[0].uid, trainer.metadata.uid.clone().unwrap());

    // The scheduler allocates and reserves; the pod goes; the claim goes with it.
    let uid = trainer.metadata.uid.unwrap();
    let status = json!({"status": {"allocation": {"devices": {"results": []}},
        "reservedFor": [{"resource": "pods", "name": "trainer-0", "uid": uid}]}});
    claims.patch_status(&claim_name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    pods.delete("trainer-0", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(claims.get(&claim_name).await), 404);
    assert_eq!(fake.list("resourceclaims").len(), 3);

    // A new pod naming the template gets its claim at once.
    let mut p: serde_json::Value = fake.get("v1", "pods", Some("ml"), "trainer-1").unwrap();
    p["metadata"] = json!({"name": "trainer-9", "namespace": "ml"});
    p["spec"].as_object_mut().unwrap().remove("priority");
    p.as_object_mut().unwrap().remove("status");
    let p: Pod = serde_json::from_value(p).unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
    let statuses = pods.get("trainer-9").await.unwrap().status.unwrap().resource_claim_statuses.unwrap();
    assert!(claims.get(statuses[0].resource_claim_name.as_deref().unwrap()).await.is_ok());
}

#[tokio::test]
async fn shared_claims_lose_finished_pods_and_are_deallocated_with_the_last() {
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": "ml", "finalizers": ["resource.kubernetes.io/delete-protection"]},
        "spec": {"devices": {"requests": []}}});
    let (fake, client) = start(FakeApi::new().with_objects(vec![claim])).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let claims: Api<ResourceClaim> = Api::namespaced(client, "ml");
    let a = pods.create(&PostParams::default(), &common::pod("ml", "a")).await.unwrap();
    let b = pods.create(&PostParams::default(), &common::pod("ml", "b")).await.unwrap();
    let reserved: Vec<_> =
        [&a, &b].iter().map(|p| json!({"resource": "pods", "name": p.metadata.name, "uid": p.metadata.uid})).collect();
    let status = json!({"status": {"allocation": {"devices": {"results": []}}, "reservedFor": reserved}});
    claims.patch_status("shared", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let done = json!({"status": {"phase": "Succeeded"}});
    pods.patch_status("a", &PatchParams::default(), &Patch::Merge(&done)).await.unwrap();
    let c = claims.get("shared").await.unwrap();
    assert_eq!(c.status.as_ref().unwrap().reserved_for.as_ref().unwrap().len(), 1, "a finished");
    pods.delete("b", &DeleteParams::default()).await.unwrap();
    let c = claims.get("shared").await.unwrap();
    assert!(c.status.unwrap().allocation.is_none(), "deallocated with its last consumer");
    assert!(c.metadata.finalizers.unwrap_or_default().is_empty(), "and its protection lifted");
    drop(fake);
}

#[tokio::test]
async fn a_deleted_pod_group_takes_its_claim_and_releases_the_ones_reserved_for_it() {
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "channel", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "ch", "exactly": {"deviceClassName": "imex"}}]}}}});
    let group = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                 "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": "channel"}]}});
    let other = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": "ml", "finalizers": ["resource.kubernetes.io/delete-protection"]},
        "spec": {"devices": {"requests": []}}});
    let (fake, client) = start(FakeApi::new().with_objects(vec![template, group, other])).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "ml");
    let made: Vec<String> = fake
        .list("resourceclaims")
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(String::from))
        .filter(|n| n != "shared")
        .collect();
    assert_eq!(made.len(), 1, "one claim for the group's template entry: {made:?}");
    // The scheduler allocates both for the group.
    let g: serde_json::Value = fake.get("scheduling.k8s.io/v1beta1", "podgroups", Some("ml"), "g").unwrap();
    let consumer =
        json!({"resource": "podgroups", "apiGroup": "scheduling.k8s.io", "name": "g", "uid": g["metadata"]["uid"]});
    let status = json!({"status": {"allocation": {"devices": {"results": []}}, "reservedFor": [consumer]}});
    for name in [made[0].as_str(), "shared"] {
        claims.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    }
    let groups: Api<k8s_openapi::api::scheduling::v1beta1::PodGroup> = Api::namespaced(client, "ml");
    groups.delete("g", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(claims.get(&made[0]).await), 404, "the group's own claim goes with it");
    let c = claims.get("shared").await.unwrap();
    let status = c.status.unwrap();
    assert!(status.allocation.is_none() && status.reserved_for.is_none(), "released: {status:?}");
    assert!(c.metadata.finalizers.unwrap_or_default().is_empty(), "and its protection lifted");
}

#[tokio::test]
async fn workloads_are_expanded_into_pods_at_preload() {
    let objects = manifests::load(&[repo("tests/scenarios/workload-controllers")]).expect("the scenario loads");
    let (fake, client) = start(FakeApi::new().with_objects(objects)).await;
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    let names: Vec<String> =
        pods.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|p| p.metadata.name).collect();
    for want in ["kv-0", "kv-1", "kv-2", "train-0-gxv6x", "train-1-zp5wj", "infer-6d566d64ff-jrflm"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    assert_eq!(fake.list("replicasets").len(), 1);
    assert_eq!(fake.list("deployments").len(), 1);
    assert!(fake.get("apps/v1", "statefulsets", Some("ml"), "kv").is_some());
    let quick = manifests::load(&[repo("examples/quickstart")]).expect("the quickstart loads");
    let (fake, _) = start(FakeApi::new().with_objects(quick)).await;
    let high = fake.get("v1", "pods", Some("ml"), "train-resnet-0").unwrap();
    assert_eq!(high["spec"]["priority"], 100000, "priority resolved from the PriorityClass");
    assert_eq!(high["metadata"]["creationTimestamp"], "2026-12-01T09:00:00Z", "kept from the manifest");
}

#[tokio::test]
async fn without_controllers_nothing_is_made_for_the_scheduler() {
    let objects = manifests::load(&[repo("examples/gpu-training")]).expect("the example loads");
    let (fake, client) = start(FakeApi::new().controllers(false).with_objects(objects)).await;
    assert!(fake.list("resourceclaims").is_empty(), "no claims from templates");
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    pods.delete("trainer-0", &DeleteParams::default()).await.unwrap();
    assert!(pods.get("trainer-1").await.unwrap().status.unwrap().resource_claim_statuses.is_none());
}

#[tokio::test]
async fn workloads_created_through_the_api_get_their_pods_and_claims() {
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}});
    let (fake, client) = start(FakeApi::new().with_objects(vec![template])).await;
    let spec = json!({"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never",
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]});
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"completions": 4, "parallelism": 2, "completionMode": "Indexed", "template": {"spec": spec}}});
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), "ml");
    jobs.create(&PostParams::default(), &serde_json::from_value(job).unwrap()).await.unwrap();
    let mut spec = spec.clone();
    spec["restartPolicy"] = json!("Always");
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "infer", "namespace": "ml"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "infer"}},
                 "template": {"metadata": {"labels": {"app": "infer"}}, "spec": spec}}});
    let deploys: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), "ml");
    deploys.create(&PostParams::default(), &serde_json::from_value(deploy).unwrap()).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    let listed = pods.list(&ListParams::default()).await.unwrap().items;
    let names: Vec<&str> = listed.iter().filter_map(|p| p.metadata.name.as_deref()).collect();
    assert_eq!(names.iter().filter(|n| n.starts_with("train-")).count(), 2, "parallelism 2: {names:?}");
    assert_eq!(names.iter().filter(|n| n.starts_with("infer-")).count(), 3, "3 replicas: {names:?}");
    assert_eq!(fake.list("replicasets").len(), 1, "the Deployment's ReplicaSet");
    assert_eq!(fake.list("resourceclaims").len(), 5, "a claim per pod, from the template");
    // The Job written again (as a controller's status update would) makes no more pods.
    let mut j = jobs.get("train").await.unwrap();
    j.metadata.labels = Some([("touched".to_string(), "yes".to_string())].into());
    jobs.replace("train", &PostParams::default(), &j).await.unwrap();
    assert_eq!(fake.list("pods").len(), 5);
}
