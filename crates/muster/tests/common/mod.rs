//! What the CLI tests share: the repository root, and running the `muster` binary there.

#![allow(dead_code)] // each test file uses what it needs

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root (tests run the binary there, with paths relative to it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `muster ARGS` in the repository root.
pub fn muster(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_muster")).args(args).current_dir(root()).output().unwrap()
}

/// `muster ARGS` with `text` on standard input (written from a thread, so that a large input
/// cannot deadlock against the output pipes).
pub fn muster_stdin(args: &[&str], text: &str) -> Output {
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

/// The scenario directories under `tests/scenarios/` (those with an `expected.txt`), sorted.
pub fn scenarios() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("tests/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expected.txt").exists())
        .collect();
    dirs.sort();
    dirs
}

/// A scenario's inputs and extra arguments, from the `inputs:`, `args:` and `config:` lines of
/// its `expected.txt` (the directory itself when it names no inputs).
pub fn scenario_inputs(dir: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
    let (mut inputs, mut args) = (Vec::new(), Vec::new());
    for line in expected.lines().map(str::trim) {
        if let Some(i) = line.strip_prefix("inputs:") {
            inputs.extend(i.split_whitespace().map(|p| dir.join(p)));
        } else if let Some(a) = line.strip_prefix("args:") {
            args.extend(a.split_whitespace().map(String::from));
        } else if let Some(c) = line.strip_prefix("config:") {
            args.extend(["--config".to_string(), dir.join(c.trim()).to_string_lossy().into_owned()]);
        }
    }
    if inputs.is_empty() {
        inputs.push(dir.to_path_buf());
    }
    (inputs, args)
}

/// `muster plan INPUTS ARGS -o json`, which must succeed, parsed.
pub fn plan_json(inputs: &[PathBuf], args: &[String]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .arg("plan")
        .args(inputs)
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "plan: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A fresh directory under the system's temp dir, removed with what it holds when dropped (a
/// failing test too leaves nothing behind).
pub struct TempDir(PathBuf);

impl TempDir {
    /// `muster-NAME-PID`, emptied if a previous run of this process id left it.
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("muster-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Standard output, which must be UTF-8.
pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Standard error, which must be UTF-8.
pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}
pub mod api;
pub mod rbac;
