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
