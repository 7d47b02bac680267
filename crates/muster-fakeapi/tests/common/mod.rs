//! Shared helpers: a fake on a free loopback port and a kube 5 client built from its kubeconfig.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::Pod;
use kube::config::{KubeConfigOptions, Kubeconfig};
use muster_fakeapi::{FakeApi, Running};
use serde_json::{Value, json};

pub async fn start(fake: FakeApi) -> (Running, kube::Client) {
    let running = fake.start("127.0.0.1:0".parse().unwrap()).await.expect("the fake starts");
    let kubeconfig = Kubeconfig::from_yaml(&running.kubeconfig_yaml()).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.expect("config");
    let client = kube::Client::try_from(config).expect("a client");
    (running, client)
}

pub fn pod_json(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": "t"}},
           "spec": {"schedulerName": "muster", "containers": [{"name": "c", "image": "busybox"}]}})
}

pub fn pod(ns: &str, name: &str) -> Pod {
    serde_json::from_value(pod_json(ns, name)).unwrap()
}

/// The code of a kube API error.
pub fn code<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> u16 {
    match r {
        Err(kube::Error::Api(s)) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}
