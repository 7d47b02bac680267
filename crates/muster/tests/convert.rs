//! `muster convert`'s promises, over every manifest of the repository and on inputs of each kind
//! it converts or refuses (`tests/convert/`):
//!
//! 1. either `muster check` finds no errors in what `convert` prints, or `convert` exits non-zero
//!    naming each object it could not convert and why;
//! 2. converting what `convert` printed changes nothing;
//! 3. a valid Kubernetes 1.37 file comes out byte for byte, comments included.

use std::path::{Path, PathBuf};

mod common;
use common::{muster, muster_stdin, root, stderr, stdout};

/// The YAML and JSON files under `dir` (relative to the repository root), sorted.
fn manifests(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(root().join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        let rel = dir.join(p.file_name().unwrap());
        if p.is_dir() {
            manifests(&rel, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")) {
            out.push(rel);
        }
    }
}

fn all_manifests() -> Vec<String> {
    let mut files = Vec::new();
    manifests(Path::new("examples"), &mut files);
    manifests(Path::new("tests"), &mut files);
    assert!(files.len() > 100, "the repository's manifests are found: {}", files.len());
    files.iter().map(|f| f.to_str().unwrap().to_string()).collect()
}

/// Checks promise 1 for one run of `convert` on `what`; the error lines name `name`.
fn clean_or_named(what: &str, name: &str, code: Option<i32>, out: &str, err: &str) {
    assert!(!err.contains("panicked"), "{what}: {err}");
    match code {
        Some(0) => {
            let c = muster_stdin(&["check", "-"], out);
            assert_eq!(c.status.code(), Some(0), "{what}: convert exited 0 but check finds errors:\n{}", stdout(&c));
        }
        Some(1) => {
            let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
            assert!(!errors.is_empty(), "{what}: exit 1 without a named object: {err}");
            for e in errors {
                assert!(e.starts_with(&format!("error: {name}")), "{what}: {e}");
            }
        }
        other => panic!("{what}: exit {other:?}: {err}"),
    }
}

#[test]
fn every_manifest_converts_into_what_check_passes_or_names_what_it_cannot() {
    let mut unchanged_valid = 0;
    for file in all_manifests() {
        let o = muster(&["convert", &file]);
        let (code, out, err) = (o.status.code(), stdout(&o), stderr(&o));
        if code == Some(2) {
            // Not YAML: only the files meant to be invalid, and reported, not crashed on.
            assert!(file.starts_with("tests/bad-input/"), "{file}: {err}");
            assert!(err.starts_with(&format!("error: {file}: ")) && !err.contains("panicked"), "{file}: {err}");
            continue;
        }
        clean_or_named(&file, &file, code, &out, &err);
        // Idempotence: what convert printed converts to itself.
        let again = muster_stdin(&["convert", "-"], &out);
        assert_eq!(stdout(&again), out, "{file}: converting the output changed it");
        // A file check passes without errors comes out as written (objects in a beta version,
        // or in 1.36's form of node-allocatable resources, which check reads with a warning, are
        // converted to their 1.37 form).
        let written = std::fs::read_to_string(root().join(&file)).unwrap();
        let checked = muster(&["check", &file]);
        let report = stdout(&checked);
        let older =
            report.contains("only where the beta API is enabled") || report.contains("the Kubernetes 1.36 form");
        if checked.status.code() == Some(0) && !older {
            assert_eq!(out, written, "{file}: valid 1.37 input was changed");
            unchanged_valid += 1;
        }
    }
    assert!(unchanged_valid > 50, "{unchanged_valid}");
}

/// The directories that hold manifests directly.
fn manifest_dirs() -> Vec<String> {
    let mut dirs: Vec<String> =
        all_manifests().iter().filter_map(|f| Path::new(f).parent().map(|p| p.to_str().unwrap().to_string())).collect();
    dirs.dedup();
    dirs
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

fn read_tree(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    manifests(dir, &mut files);
    files.into_iter().map(|f| (f.clone(), std::fs::read_to_string(root().join(f)).unwrap())).collect()
}

#[test]
fn every_manifest_directory_converts_in_place_into_what_check_passes_or_names_what_it_cannot() {
    let tmp = std::env::temp_dir().join(format!("muster-convert-dirs-{}", std::process::id()));
    for dir in manifest_dirs() {
        let copy = tmp.join(&dir);
        copy_tree(&root().join(&dir), &copy);
        let o = muster(&["convert", "-w", copy.to_str().unwrap()]);
        let (code, err) = (o.status.code(), stderr(&o));
        if code == Some(2) {
            assert!(dir.starts_with("tests/bad-input"), "{dir}: {err}");
            continue;
        }
        assert!(!err.contains("panicked"), "{dir}: {err}");
        if code == Some(0) {
            let c = muster(&["check", copy.to_str().unwrap()]);
            assert_eq!(c.status.code(), Some(0), "{dir}: converted, but check finds errors:\n{}", stdout(&c));
        } else {
            assert_eq!(code, Some(1), "{dir}: {err}");
            assert!(err.lines().any(|l| l.starts_with(&format!("error: {}", copy.display()))), "{dir}: {err}");
        }
        let once = read_tree(&copy);
        let o = muster(&["convert", "-w", copy.to_str().unwrap()]);
        assert!(stderr(&o).contains("nothing to convert"), "{dir}: the second run converted again: {}", stderr(&o));
        assert_eq!(read_tree(&copy), once, "{dir}");
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// `convert FILE`: (exit code, stdout, stderr), after checking promises 1 and 2.
fn convert(file: &str) -> (Option<i32>, String, String) {
    let o = muster(&["convert", file]);
    let (code, out, err) = (o.status.code(), stdout(&o), stderr(&o));
    clean_or_named(file, file, code, &out, &err);
    assert_eq!(stdout(&muster_stdin(&["convert", "-"], &out)), out, "{file}");
    (code, out, err)
}

#[test]
fn beta_resource_slices_and_claims_become_v1() {
    let (code, out, err) = convert("tests/convert/beta-slices.yaml");
    assert_eq!(code, Some(0), "{err}");
    insta::assert_snapshot!("convert_beta_slices", out);
    let m = muster_manifest::load_str("converted.yaml", &out).unwrap_or_else(|d| panic!("{d:#?}"));
    let mut devices = 0;
    for l in &m.objects {
        assert_eq!(l.object.api_version(), "resource.k8s.io/v1", "{}", l.object.display_name());
        if let muster_manifest::Object::ResourceSlice(s) = &l.object {
            for d in s.spec.devices.iter().flatten() {
                devices += 1;
                assert!(d.attributes.as_ref().is_some_and(|a| a.contains_key("index")), "{}", d.name);
            }
        }
    }
    assert_eq!(devices, 4, "every device keeps its attributes once basic: is gone");
    assert!(out.contains("    # The board's index, as the driver counts them.\n    attributes:"), "{out}");
    assert!(out.contains("    taints:\n    - key: acme.example/degraded"), "{out}");
}

#[test]
fn v1alpha2_workloads_and_pod_groups_become_v1beta1_completely() {
    let (code, out, err) = convert("tests/convert/workload-v1alpha2.yaml");
    assert_eq!(code, Some(0), "{err}");
    insta::assert_snapshot!("convert_workload_v1alpha2", out);
    let m = muster_manifest::load_str("converted.yaml", &out).unwrap_or_else(|d| panic!("{d:#?}"));
    let group = m
        .objects
        .iter()
        .find_map(|l| match &l.object {
            muster_manifest::Object::PodGroup(g) => Some(g),
            _ => None,
        })
        .expect("a v1beta1 PodGroup");
    let r = group.spec.workload_ref.as_ref().expect("workloadRef");
    assert_eq!((r.workload_name.as_str(), r.template_name.as_str()), ("sweep", "trials"));
    assert!(group.spec.disruption_mode.as_ref().is_some_and(|d| d.all.is_some()));
    assert!(!out.contains("  podGroupTemplateRef:") && !out.contains("type: PodGroupScheduled"), "{out}");
}

#[test]
fn valid_selectors_and_comments_are_kept_byte_for_byte() {
    let file = "tests/convert/valid-selectors.yaml";
    let (code, out, err) = convert(file);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, std::fs::read_to_string(root().join(file)).unwrap());
    // In a List with an object to convert, the valid claim keeps its selector and its comment.
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let claim = &text[text.rfind("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim").unwrap()..];
    let item = claim.lines().enumerate().fold(String::new(), |mut s, (i, l)| {
        s += if i == 0 { "- " } else { "  " };
        s += l;
        s += "\n";
        s
    });
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n{item}- apiVersion: scheduling.k8s.io/v1alpha2\n  kind: PodGroup\n  \
         metadata: {{name: g, namespace: lab}}\n  spec: {{schedulingPolicy: {{basic: {{}}}}}}\n"
    );
    let o = muster_stdin(&["convert", "-"], &list);
    let out = stdout(&o);
    assert!(out.starts_with(&format!("apiVersion: v1\nkind: List\nitems:\n{item}")), "{out}");
    assert!(out.contains("scheduling.k8s.io/v1beta1") && !out.contains("muster convert: dropped"), "{out}");
}

#[test]
fn classic_dra_objects_are_named_with_why_and_kept_as_written() {
    let file = "tests/convert/classic-dra.yaml";
    let (code, out, err) = convert(file);
    assert_eq!(code, Some(1), "{err}");
    insta::assert_snapshot!("convert_classic_dra_stderr", err);
    for object in ["ResourceClass fpga.acme.example", "ResourceClaimTemplate lab/one-fpga"] {
        assert!(err.lines().any(|l| l.contains(object) && l.contains("classic DRA")), "{object}: {err}");
    }
    let written = std::fs::read_to_string(root().join(file)).unwrap();
    let kept = &written[..written.find("apiVersion: v1\nkind: Pod").unwrap()];
    assert!(out.starts_with(kept), "{out}");
    // The pod's source wrapper is gone; its claim and comment are kept.
    assert!(out.contains("  # The FPGA the bitstream is loaded on.\n  - name: fpga\n"), "{out}");
    assert!(out.contains("    resourceClaimTemplateName: one-fpga\n") && !out.contains("source:"), "{out}");
    // A v1 claim with classic fields is refused too, with the field named.
    let claim = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: lab}\nspec:\n  \
                 resourceClassName: fpga.acme.example\n  allocationMode: WaitForFirstConsumer\n";
    let o = muster_stdin(&["convert", "-"], claim);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("error: <stdin>:1:13: ResourceClaim lab/c: spec.resourceClassName: classic DRA"));
    assert_eq!(stdout(&o), claim);
}
