//! Hostile input at the edges: huge names, empty mappings, control characters, special files.
//! Every input is generated here; nothing large is committed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[allow(dead_code)]
fn muster(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_muster")).args(args).current_dir(root()).output().unwrap()
}

fn muster_stdin(args: &[&str], text: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let text = text.to_string();
    let writer = std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut stdin, text.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory for one test.
#[allow(dead_code)]
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("muster-robustness-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A node, a pod that fits on it, a pod that fits nowhere and a slice, all with `name`.
fn cluster_named(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\nstatus:\n  allocatable: {{cpu: '4', memory: 8Gi, pods: '10'}}\n\
---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    resources:\n      requests: {{cpu: '1'}}\n\
---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: big\nspec:\n  containers:\n  - name: c\n    resources:\n      requests: {{cpu: '64'}}\n\
---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: s\nspec:\n  driver: {name}\n  nodeName: {name}\n  pool: {{name: {name}, generation: 1, resourceSliceCount: 1}}\n  devices:\n  - name: {name}\n"
    )
}

#[test]
fn table_columns_of_70000_characters_are_cut_not_a_panic() {
    let name = "n".repeat(70_000);
    let text = cluster_named(&name);
    for args in [
        &["plan", "-"][..],
        &["devices", "-"],
        &["devices", "-", "--selector", "true"],
        &["why", "pod/default/big", "-"],
        &["why", &format!("pod/default/{name}"), "-"],
    ] {
        let o = muster_stdin(args, &text);
        assert_eq!(o.status.code(), Some(0), "{:?}: {}", &args[..1], stderr(&o));
        let out = stdout(&o);
        assert!(out.contains('\u{2026}'), "{:?}: the long name is cut: {}", &args[..1], &out[..out.len().min(2000)]);
    }
}
