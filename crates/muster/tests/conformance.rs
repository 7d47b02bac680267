//! Upstream's allocator test table (tests/conformance/allocator, 223 cases) through
//! `muster conformance allocator`, the same command users run.

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn all_upstream_allocator_cases_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["conformance", "allocator", "tests/conformance/allocator"])
        .current_dir(&root)
        .output()
        .unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    let failures: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(report.lines().last(), Some("223 passed, 0 failed"));
    assert_eq!(report.lines().filter(|l| l.starts_with("PASS ")).count(), 223);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_failing_case_is_reported_and_fails_the_run() {
    // A case whose expectation is wrong on purpose: the runner must say FAIL and exit 1.
    let dir = common::TempDir::new("conformance");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let good = std::fs::read_to_string(root.join("tests/conformance/allocator/002-simple.yaml")).unwrap();
    std::fs::write(dir.join("001-wrong.yaml"), good.replace("device: device-1", "device: device-9")).unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_muster")).args(["conformance", "allocator"]).arg(dir.path()).output().unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.starts_with("FAIL simple: allocations differ"), "{report}");
    assert_eq!(report.lines().last(), Some("0 passed, 1 failed"));
    assert_eq!(out.status.code(), Some(1));
}
