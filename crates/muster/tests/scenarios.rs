//! Scenario tests: each folder under `tests/scenarios/` holds manifests and an `expected.txt`:
//!
//! ```text
//! # comments
//! args: --scoring most-allocated          (optional: extra flags for `muster plan`)
//! config: ../../configs/x.yaml            (optional: `--config` with this file, from the folder)
//! inputs: ../../../examples/quickstart    (optional: paths instead of the folder itself)
//! ns/pod -> node                          (placed there)
//! ns/pod !! message                       (unschedulable with exactly this message)
//! ns/pod => driver/pool: dev dev          (the devices the pod got, as the table shows them;
//!                                          pods without such a line are not checked)
//! evict: ns/pod at 2026-12-01T09:00:00Z   (a NoExecute device taint evicts the pod then)
//! evict: ns/pod immediately               (... as soon as the taint is added: it has no timeAdded)
//! evict: ns/pod after 300s                (... 300 s after the taint is added: no timeAdded)
//! evict: ns/pod never                     (the pod is not evicted: it has no eviction entry)
//! dry-run: ns/pod at 2026-...             (an effect-None DeviceTaintRule would evict it then)
//! preempted: ns/pod by podgroup/ns/name  (a running pod preempted for a PodGroup; the JSON
//!                                          `preempted` list must be exactly these lines)
//! allocated-claims: 4                     (claims with devices after the plan: a gang rolled
//!                                          back leaves none of its claims allocated)
//! created: Pod ns/web-x by ReplicaSet ns/web  (the workload controllers created it; when any
//!                                          `created:` line is given, the JSON `created` list must
//!                                          be exactly these)
//! ```
//!
//! The plan must match exactly: no other pod placed or left unschedulable, and the JSON
//! `evictions` hold exactly the `evict:` and `dry-run:` entries listed (one per pod and time).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

fn run(dir: &Path) -> Result<(), String> {
    let expected = std::fs::read_to_string(dir.join("expected.txt")).map_err(|e| e.to_string())?;
    let mut args: Vec<String> = Vec::new();
    let mut inputs: Vec<String> = Vec::new();
    let mut want_placed = BTreeMap::new();
    let mut want_failed = BTreeMap::new();
    let mut want_devices = BTreeMap::new();
    let mut want_evictions = BTreeSet::new();
    let mut never_evicted = Vec::new();
    let mut want_allocated: Option<usize> = None;
    let mut want_preempted = BTreeSet::new();
    let mut want_created = BTreeSet::new();
    for line in expected.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if let Some(c) = line.strip_prefix("created:") {
            want_created.insert(c.trim().to_string());
        } else if let Some(p) = line.strip_prefix("preempted:") {
            want_preempted.insert(p.trim().to_string());
        } else if let Some(n) = line.strip_prefix("allocated-claims:") {
            want_allocated = Some(n.trim().parse().map_err(|e| format!("allocated-claims: {e}"))?);
        } else if let Some(pod) = line.strip_prefix("evict:").and_then(|l| l.trim().strip_suffix(" never")) {
            never_evicted.push(pod.trim().to_string());
        } else if line.starts_with("evict:") || line.starts_with("dry-run:") {
            want_evictions.insert(line.split_whitespace().collect::<Vec<_>>().join(" "));
        } else if let Some(c) = line.strip_prefix("config:") {
            args.extend(["--config".to_string(), dir.join(c.trim()).to_string_lossy().into_owned()]);
        } else if let Some(a) = line.strip_prefix("args:") {
            args.extend(a.split_whitespace().map(String::from));
        } else if let Some(i) = line.strip_prefix("inputs:") {
            inputs.extend(i.split_whitespace().map(|p| dir.join(p).to_string_lossy().into_owned()));
        } else if let Some((pod, devices)) = line.split_once(" => ") {
            want_devices.insert(pod.to_string(), devices.to_string());
        } else if let Some((pod, node)) = line.split_once(" -> ") {
            want_placed.insert(pod.to_string(), node.to_string());
        } else if let Some((pod, msg)) = line.split_once(" !! ") {
            want_failed.insert(pod.to_string(), msg.to_string());
        } else {
            return Err(format!("bad line in expected.txt: {line}"));
        }
    }
    if inputs.is_empty() {
        inputs.push(dir.to_string_lossy().into_owned());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .arg("plan")
        .args(&inputs)
        .args(&args)
        .args(["-o", "json"])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("muster plan failed:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let got_placed: BTreeMap<String, String> = v["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["pod"].as_str().unwrap().to_string(), p["node"].as_str().unwrap().to_string()))
        .collect();
    let got_failed: BTreeMap<String, String> = v["unschedulable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["pod"].as_str().unwrap().to_string(), p["reason"].as_str().unwrap().to_string()))
        .collect();
    let mut problems = Vec::new();
    let got_evictions: BTreeSet<String> = v["evictions"]
        .as_array()
        .ok_or("no \"evictions\" in the JSON")?
        .iter()
        .map(|e| {
            let kind = if e["dryRun"].as_bool().unwrap() { "dry-run:" } else { "evict:" };
            let when = match (e["at"].as_str(), e["tolerationSeconds"].as_i64()) {
                (Some(at), _) => format!("at {at}"),
                (None, None | Some(0)) => "immediately".to_string(),
                (None, Some(s)) => format!("after {s}s"),
            };
            format!("{kind} {} {when}", e["pod"].as_str().unwrap())
        })
        .collect();
    let got_preempted: BTreeSet<String> = v["preempted"]
        .as_array()
        .ok_or("no \"preempted\" in the JSON")?
        .iter()
        .map(|p| format!("{} by {}", p["pod"].as_str().unwrap_or(""), p["by"].as_str().unwrap_or("")))
        .collect();
    if got_preempted != want_preempted {
        problems.push(format!("preempted:\n  want {want_preempted:?}\n  got  {got_preempted:?}"));
    }
    if !want_created.is_empty() {
        let got: BTreeSet<String> = v["created"]
            .as_array()
            .ok_or("no \"created\" in the JSON")?
            .iter()
            .map(|c| format!("{} by {}", c["object"].as_str().unwrap_or(""), c["by"].as_str().unwrap_or("")))
            .collect();
        if got != want_created {
            problems.push(format!("created:\n  want {want_created:?}\n  got  {got:?}"));
        }
    }
    if let Some(want) = want_allocated {
        let got = v["claims"]
            .as_array()
            .ok_or("no \"claims\" in the JSON")?
            .iter()
            .filter(|c| c["devices"].as_array().is_some_and(|d| !d.is_empty()))
            .count();
        if got != want {
            problems.push(format!("allocated claims: want {want}, got {got}"));
        }
    }
    for pod in &never_evicted {
        if let Some(e) = got_evictions.iter().find(|e| e.starts_with(&format!("evict: {pod} "))) {
            problems.push(format!("{pod} should never be evicted, got {e}"));
        }
    }
    if got_evictions != want_evictions {
        problems.push(format!("evictions:\n  want {want_evictions:?}\n  got  {got_evictions:?}"));
    }
    for (pod, want) in &want_devices {
        let got = v["placements"].as_array().unwrap().iter().find(|p| p["pod"] == pod.as_str()).map(|p| {
            p["devices"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect::<Vec<_>>().join(" | ")
        });
        if got.as_deref() != Some(want.as_str()) {
            problems.push(format!("devices of {pod}:\n  want {want}\n  got  {got:?}"));
        }
    }
    if got_placed != want_placed {
        problems.push(format!("placements:\n  want {want_placed:?}\n  got  {got_placed:?}"));
    }
    if got_failed != want_failed {
        problems.push(format!("unschedulable:\n  want {want_failed:?}\n  got  {got_failed:?}"));
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
}

#[test]
fn scenarios() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/scenarios");
    let mut dirs: Vec<_> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    assert!(dirs.len() >= 5);
    let mut failures = Vec::new();
    for d in &dirs {
        if let Err(e) = run(d) {
            failures.push(format!("{}: {e}", d.file_name().unwrap().to_string_lossy()));
        }
    }
    assert!(failures.is_empty(), "{} of {} scenarios failed:\n{}", failures.len(), dirs.len(), failures.join("\n\n"));
}
