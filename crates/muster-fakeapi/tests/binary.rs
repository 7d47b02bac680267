//! The `muster-fakeapi` binary: preloads manifests, prints its URL, writes a kubeconfig, and
//! stops cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

#[tokio::test]
async fn serves_the_manifests_until_sigterm() {
    let dir = std::env::temp_dir().join(format!("muster-fakeapi-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/gpu-training");
    let mut child = Command::new(env!("CARGO_BIN_EXE_muster-fakeapi"))
        .args(["--listen", "127.0.0.1:0", "--write-kubeconfig"])
        .arg(&kubeconfig)
        .arg(examples)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("serving http://127.0.0.1:"), "{first}");
    let written = lines.next().unwrap().unwrap();
    assert!(written.contains("kubeconfig written"), "{written}");

    let kc = Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(kube::Client::try_from(config).unwrap(), "ml");
    assert_eq!(pods.list(&ListParams::default()).await.unwrap().items.len(), 4);

    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    assert!(child.wait().unwrap().success(), "a clean exit on SIGTERM");
    std::fs::remove_dir_all(&dir).ok();
}
