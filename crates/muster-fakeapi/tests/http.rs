//! Raw HTTP: discovery, and bad requests answered with a `Status` (never a dead server).

mod common;

use common::start;
use muster_fakeapi::FakeApi;
use serde_json::Value;

async fn call(client: &kube::Client, method: &str, uri: &str, ct: &str, body: &str) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ct)
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let res = client.send(req).await.expect("an answer");
    let status = res.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(res.into_body()).await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn discovery_names_every_resource_and_subresource() {
    let (_fake, client) = start(FakeApi::new()).await;
    let json = "application/json";
    let (_, version) = call(&client, "GET", "/version", json, "").await;
    assert_eq!(version["gitVersion"], "v1.37.0");
    let (_, core) = call(&client, "GET", "/api/v1", json, "").await;
    let names: Vec<&str> = core["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"pods/binding") && names.contains(&"pods/status") && names.contains(&"nodes"));
    let (_, groups) = call(&client, "GET", "/apis", json, "").await;
    let groups: Vec<&str> = groups["groups"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    for g in ["resource.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "events.k8s.io", "policy", "apps", "batch"]
    {
        assert!(groups.contains(&g), "{g}");
    }
    let (_, dra) = call(&client, "GET", "/apis/resource.k8s.io/v1", json, "").await;
    let names: Vec<&str> = dra["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"resourceclaims/binding") && names.contains(&"devicetaintrules/status"));
    let (_, alpha) = call(&client, "GET", "/apis/scheduling.k8s.io/v1alpha3", json, "").await;
    assert!(alpha["resources"].as_array().unwrap().iter().any(|r| r["name"] == "compositepodgroups/status"));
}

#[tokio::test]
async fn bad_requests_get_a_status_and_the_server_lives() {
    let (fake, client) = start(FakeApi::new()).await;
    let pods = "/api/v1/namespaces/ml/pods";
    let (json, merge, apply) = ("application/json", "application/merge-patch+json", "application/apply-patch+yaml");
    let pod = r#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}"#;
    assert_eq!(call(&client, "POST", pods, json, pod).await.0, 201);
    let cases: &[(&str, &str, &str, &str, u16)] = &[
        ("POST", pods, json, "not json", 400),
        ("POST", pods, json, r#"{"metadata":"x"}"#, 400),
        ("POST", pods, json, r#"{"metadata":{"name":"q"},"spec":{"containers":[]},"status":5}"#, 400),
        ("POST", pods, json, r#"{"kind":"Node","metadata":{"name":"q"}}"#, 400),
        ("POST", pods, json, r#"{"metadata":{"generateName":"g-"},"spec":{"containers":[{"name":"c"}]},"#, 400),
        ("PATCH", "/api/v1/namespaces/ml/pods/p", apply, "- a\n- b\n", 400),
        ("PATCH", "/api/v1/namespaces/ml/pods/p?fieldManager=t", apply, "metadata: 5\n", 400),
        ("PATCH", "/api/v1/namespaces/ml/pods/p", apply, "spec: {}\n", 422),
        ("PATCH", "/api/v1/namespaces/ml/pods/p", merge, r#"{"metadata":5}"#, 400),
        ("PATCH", "/api/v1/namespaces/ml/pods/p", merge, r#"{"spec":{"containers":"x"}}"#, 400),
        ("PATCH", "/api/v1/namespaces/ml/pods/p", "text/plain", "{}", 415),
        ("PATCH", "/api/v1/namespaces/ml/pods/p", "application/json-patch+json", r#"[{"op":"nope"}]"#, 400),
        ("GET", "/api/v1/namespaces/ml/pods?limit=x", json, "", 400),
        ("GET", "/api/v1/namespaces/ml/pods?continue=garbage", json, "", 400),
        ("GET", "/api/v1/namespaces/ml/pods?watch=1&resourceVersion=abc", json, "", 400),
        ("GET", "/api/v1/namespaces/ml/pods?labelSelector=a%20in%20(", json, "", 400),
        ("PUT", "/api/v1/namespaces/ml/pods/missing", json, pod, 404),
        ("DELETE", pods, json, "", 405),
        ("GET", "/apis/unknown.io/v1/things", json, "", 404),
        ("POST", "/api/v1/namespaces/ml/pods/p/binding", json, r#"{"metadata":{"name":"p"}}"#, 422),
        ("POST", "/api/v1/namespaces/ml/pods?dryRun=All", json, pod, 400),
        ("PUT", "/api/v1/namespaces/ml/pods/p/binding", json, pod, 405),
        ("POST", "/api/v1/namespaces/ml/pods/p/status", json, pod, 405),
        ("DELETE", "/api/v1/namespaces/ml/pods/p", json, "{", 400),
    ];
    for (method, uri, ct, body, want) in cases {
        let (code, status) = call(&client, method, uri, ct, body).await;
        assert_eq!(code, *want, "{method} {uri} {body}: {status}");
        assert_eq!(status["kind"], "Status", "{method} {uri}");
        assert_eq!(status["code"], *want, "{method} {uri}");
    }
    assert!(fake.get("v1", "pods", Some("ml"), "p").is_some(), "nothing broke the pod");
    assert_eq!(fake.requests().len(), cases.len() + 1);
    let huge = format!(r#"{{"metadata":{{"name":"big","annotations":{{"a":"{}"}}}}}}"#, "x".repeat(17 << 20));
    let (code, status) = call(&client, "POST", pods, json, &huge).await;
    assert_eq!((code, status["reason"].as_str()), (413, Some("RequestEntityTooLarge")));
}
