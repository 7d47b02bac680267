//! `muster run` end to end, against `muster-fakeapi` (an in-process fake API server: a test
//! double, see its crate docs for what it does not model). Every scenario under
//! `tests/scenarios/` is loaded into the fake and run with `muster run --exit-when-idle`; the
//! pods bound, the pods marked unschedulable and the claims' allocations must be those
//! `muster plan` gives on the same manifests. The request log of every run must be allowed by
//! the ClusterRole and Role of `deploy/manifests/muster.yaml`.
//!
//! Against a real cluster: see the README ("muster run"); these tests need none.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::rbac::RequestAttributes;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use muster_fakeapi::{FakeApi, Request, RequestMatcher};
use serde_json::Value;

/// Scenarios whose `run` differs from their `plan` by design, with the reason.
const NOT_LIVE: &[(&str, &str)] = &[
    ("composite-pod-group", "CompositePodGroups are not watched yet (the store does not take them one at a time)"),
    ("composite-preemption", "CompositePodGroups are not watched yet"),
    ("podgroup-claim", "PodGroups with resourceClaims are not taken one at a time yet"),
    ("podgroup-claim-rollback", "PodGroups with resourceClaims are not taken one at a time yet"),
];

/// What a world did: pods bound (pod → node), pods left unschedulable, devices per claim,
/// pods preempted.
#[derive(Debug, Default, PartialEq, Eq)]
struct Outcome {
    bound: BTreeMap<String, String>,
    unschedulable: BTreeSet<String>,
    devices: BTreeMap<String, BTreeSet<String>>,
    preempted: BTreeSet<String>,
}

fn scenario_inputs(dir: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
    let (mut inputs, mut args) = (Vec::new(), Vec::new());
    for line in expected.lines().map(str::trim) {
        if let Some(i) = line.strip_prefix("inputs:") {
            inputs.extend(i.split_whitespace().map(|p| dir.join(p)));
        } else if let Some(a) = line.strip_prefix("args:") {
            args.extend(a.split_whitespace().map(String::from));
        }
    }
    if inputs.is_empty() {
        inputs.push(dir.to_path_buf());
    }
    (inputs, args)
}

fn plan_outcome(inputs: &[PathBuf], args: &[String]) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .arg("plan")
        .args(inputs)
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "plan: {}", String::from_utf8_lossy(&out.stderr));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut o = Outcome::default();
    for p in plan["placements"].as_array().unwrap() {
        o.bound.insert(s(&p["pod"]), s(&p["node"]));
    }
    for p in plan["unschedulable"].as_array().unwrap() {
        o.unschedulable.insert(s(&p["pod"]));
    }
    for p in plan["preempted"].as_array().unwrap() {
        o.preempted.insert(s(&p["pod"]));
    }
    for c in plan["claims"].as_array().unwrap() {
        let devices: BTreeSet<String> = c["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| format!("{}/{}/{} for {}", s(&d["driver"]), s(&d["pool"]), s(&d["device"]), s(&d["request"])))
            .collect();
        if !devices.is_empty() {
            o.devices.insert(s(&c["claim"]), devices);
        }
    }
    o
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// The manifests loaded into a fake API server, `muster run` until idle; what the fake holds
/// then, and its request log.
fn run_outcome(
    inputs: &[PathBuf],
    args: &[String],
    rt: &tokio::runtime::Runtime,
) -> Result<(Outcome, Vec<Request>), String> {
    let objects = muster_fakeapi::manifests::load(inputs).unwrap();
    let before: BTreeMap<String, Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Pod" || o["kind"] == "ResourceClaim")
        .map(|o| {
            (format!("{} {}/{}", s(&o["kind"]), s(&o["metadata"]["namespace"]), s(&o["metadata"]["name"])), o.clone())
        })
        .collect();
    let api = rt
        .block_on(FakeApi::new().with_objects(objects).start("127.0.0.1:0".parse().unwrap()))
        .map_err(|e| format!("the fake API server refused the manifests: {e}"))?;
    let (status, stderr) = run_muster(&api, args);
    if !status {
        return Err(format!("muster run failed:\n{stderr}"));
    }
    let outcome = fake_outcome(&api, &before);
    let requests = api.requests();
    rt.block_on(api.shutdown());
    Ok((outcome, requests))
}

fn run_muster(api: &muster_fakeapi::Running, args: &[String]) -> (bool, String) {
    let dir = tempdir();
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["run", "--exit-when-idle", "--leader-elect=false", "--kube-api-qps=0"])
        .args(["--scheduler-name", "default-scheduler", "--scheduler-name", "muster"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .env("MUSTER_LOG", "warn")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn tempdir() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir =
        std::env::temp_dir().join(format!("muster-e2e-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Pods bound by this run (not those bound in the input), pods marked unschedulable, and the
/// devices of every claim this run allocated. `before`: the input's pods and claims, by
/// `Kind namespace/name`.
fn fake_outcome(api: &muster_fakeapi::Running, before: &BTreeMap<String, Value>) -> Outcome {
    let mut o = Outcome::default();
    let pods = api.list("pods");
    for (key, _) in before.iter().filter(|(k, _)| k.starts_with("Pod ")) {
        let key = key.trim_start_matches("Pod ");
        if !pods.iter().any(|p| format!("{}/{}", s(&p["metadata"]["namespace"]), s(&p["metadata"]["name"])) == key) {
            o.preempted.insert(key.to_string());
        }
    }
    for p in pods {
        let key = format!("{}/{}", s(&p["metadata"]["namespace"]), s(&p["metadata"]["name"]));
        let node = s(&p["spec"]["nodeName"]);
        let was_bound = before.get(&format!("Pod {key}")).is_some_and(|b| !s(&b["spec"]["nodeName"]).is_empty());
        if !node.is_empty() && !was_bound {
            o.bound.insert(key.clone(), node.clone());
        }
        let conditions = p["status"]["conditions"].as_array().cloned().unwrap_or_default();
        if conditions.iter().any(|c| c["type"] == "PodScheduled" && c["status"] == "False") && node.is_empty() {
            o.unschedulable.insert(key);
        }
    }
    for c in api.list("resourceclaims") {
        let key = format!("{}/{}", s(&c["metadata"]["namespace"]), s(&c["metadata"]["name"]));
        let allocation = &c["status"]["allocation"];
        if before.get(&format!("ResourceClaim {key}")).is_some_and(|b| b["status"]["allocation"] == *allocation) {
            continue; // allocated in the input: not this run's
        }
        let results = allocation["devices"]["results"].as_array().cloned().unwrap_or_default();
        let devices: BTreeSet<String> = results
            .iter()
            .map(|d| format!("{}/{}/{} for {}", s(&d["driver"]), s(&d["pool"]), s(&d["device"]), s(&d["request"])))
            .collect();
        if !devices.is_empty() {
            o.devices.insert(key, devices);
        }
    }
    o
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn scenarios() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(common::root().join("tests/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expected.txt").exists())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn every_scenario_runs_live_as_it_plans_and_within_the_rbac() {
    let rt = runtime();
    let mut failures = Vec::new();
    let mut requests = Vec::new();
    let mut ran = 0;
    for dir in scenarios() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if NOT_LIVE.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let (inputs, args) = scenario_inputs(&dir);
        let planned = plan_outcome(&inputs, &args);
        let started = std::time::Instant::now();
        let (live, log) = match run_outcome(&inputs, &args, &rt) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        eprintln!("{name}: {} ms", started.elapsed().as_millis());
        ran += 1;
        let deletes = log.iter().filter(|r| r.verb == "delete" && r.resource == "pods").count();
        if deletes != planned.preempted.len() {
            failures.push(format!("{name}: {deletes} pod deletions for {} victims", planned.preempted.len()));
        }
        requests.extend(log);
        if planned != live {
            failures.push(format!("{name}:\n  plan {planned:?}\n  run  {live:?}"));
        }
    }
    assert!(ran >= 25, "only {ran} scenarios ran");
    assert!(failures.is_empty(), "{} scenario(s) differ:\n{}", failures.len(), failures.join("\n"));
    assert_rbac_covers(&requests);
}

/// Every request is allowed by the shipped roles.
fn assert_rbac_covers(requests: &[Request]) {
    let (cluster_rules, role_rules) = shipped_rules();
    let mut refused = BTreeSet::new();
    for r in requests.iter().filter(|r| !r.resource.is_empty()) {
        let attributes = RequestAttributes {
            verb: r.verb.clone(),
            group: r.group.clone(),
            resource: match &r.subresource {
                Some(sub) => format!("{}/{sub}", r.resource),
                None => r.resource.clone(),
            },
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        };
        if !attributes.allowed_by(&cluster_rules, &[("muster-system", &role_rules)]) {
            refused.insert(format!("{} {}/{}", r.verb, r.group, attributes.resource));
        }
    }
    assert!(refused.is_empty(), "requests the shipped RBAC refuses: {refused:?}");
}

fn shipped_rules() -> (Vec<PolicyRule>, Vec<PolicyRule>) {
    let text = std::fs::read_to_string(common::root().join("deploy/manifests/muster.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let mut cluster = Vec::new();
    let mut role = Vec::new();
    for d in docs {
        match d["kind"].as_str() {
            Some("ClusterRole") => {
                cluster.extend(serde_json::from_value::<ClusterRole>(d).unwrap().rules.unwrap_or_default())
            }
            Some("Role") => role.extend(serde_json::from_value::<Role>(d).unwrap().rules.unwrap_or_default()),
            _ => {}
        }
    }
    (cluster, role)
}

/// A claim write that conflicts (another writer changed the claim meanwhile) is read again and
/// retried; the pod is bound all the same, with its claim allocated once.
#[test]
fn a_conflicting_claim_write_is_retried() {
    let rt = runtime();
    let inputs = vec![common::root().join("examples/gpu-training")];
    let objects = muster_fakeapi::manifests::load(&inputs).unwrap();
    let api = rt.block_on(FakeApi::new().with_objects(objects).start("127.0.0.1:0".parse().unwrap())).unwrap();
    api.faults().fail_next(RequestMatcher::new("update", "resourceclaims").subresource("status"), 409, 2);
    let (ok, stderr) = run_muster(&api, &[]);
    assert!(ok, "{stderr}");
    let outcome = fake_outcome(&api, &BTreeMap::new());
    assert_eq!(outcome, plan_outcome(&inputs, &[]));
    let log = api.requests();
    let conflicts = log.iter().filter(|r| r.status == 409).count();
    let rereads = log.iter().filter(|r| r.verb == "get" && r.resource == "resourceclaims").count();
    assert_eq!((conflicts, rereads), (2, 2), "two conflicts, each followed by a read");
    rt.block_on(api.shutdown());
}

/// A binding the API server refuses (500) fails the binding cycle: the pod is forgotten, its
/// claim's reservation given back (Unreserve), and it is retried after backoff and bound.
#[test]
fn a_failed_binding_is_unreserved_and_retried() {
    let rt = runtime();
    let inputs = vec![common::root().join("examples/gpu-training")];
    let objects = muster_fakeapi::manifests::load(&inputs).unwrap();
    let api = rt.block_on(FakeApi::new().with_objects(objects).start("127.0.0.1:0".parse().unwrap())).unwrap();
    api.faults().fail_next(RequestMatcher::new("create", "pods").subresource("binding"), 500, 1);
    let (ok, stderr) = run_muster(&api, &[]);
    assert!(ok, "{stderr}");
    assert_eq!(fake_outcome(&api, &BTreeMap::new()).bound.len(), 4, "every trainer bound in the end");
    let log = api.requests();
    let unreserves = log
        .iter()
        .filter(|r| r.verb == "patch" && r.resource == "resourceclaims" && r.subresource.as_deref() == Some("status"));
    assert_eq!(unreserves.count(), 1, "one Unreserve");
    // Every claim reserved for exactly its one pod, no device in two claims.
    let mut seen = BTreeSet::new();
    for c in api.list("resourceclaims") {
        assert_eq!(c["status"]["reservedFor"].as_array().map(Vec::len), Some(1), "{c:#}");
        for d in c["status"]["allocation"]["devices"]["results"].as_array().unwrap() {
            assert!(seen.insert(format!("{}/{}/{}", s(&d["driver"]), s(&d["pool"]), s(&d["device"]))), "device twice");
        }
    }
    rt.block_on(api.shutdown());
}
