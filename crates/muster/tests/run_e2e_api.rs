//! The end-to-end scenarios put into a cluster **through its API only** — created in order,
//! statuses written, controllers waited for, removed afterwards — then `muster run
//! --exit-when-idle`: what it binds, marks unschedulable, preempts and allocates must be what
//! `muster plan` gives on the same manifests (names a controller generated compared by their
//! workload's name).
//!
//! With `MUSTER_E2E_KUBECONFIG=PATH` the suite runs against that cluster (a throwaway one: kind
//! with kwok, see the README); otherwise against one `muster-fakeapi` (a test double) shared by
//! every scenario, which also checks that a scenario's cleanup leaves nothing behind.
//! `MUSTER_E2E_ONLY=name` runs one scenario.
//!
//! Creation times: the scheduling queue orders pods of one priority by `creationTimestamp`, and
//! `plan` orders the input's pods, which have none, by name. The fake stamps every object with
//! one frozen time, so the two agree; a real API server stamps the second of each create, and a
//! scenario created across a second boundary may then see an order-sensitive pod placed
//! differently (`workload-controllers-dump`'s bare pod `debug` did, against the fake's wall
//! clock). `run_e2e.rs` is the faster sibling: the fake
//! preloaded, names exact, the request log checked against the RBAC.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::api::{self, Placed};
use kube::Client;
use serde_json::Value;

/// Scenarios that cannot be put into a cluster through its API as they plan, with why.
const NOT_VIA_API: &[(&str, &str)] = &[];

struct Target {
    client: Client,
    kubeconfig: PathBuf,
    real: bool,
    fake: Option<muster_fakeapi::Running>,
}

fn target(rt: &tokio::runtime::Runtime, dir: &Path) -> Target {
    if let Some(path) = std::env::var_os("MUSTER_E2E_KUBECONFIG") {
        let kubeconfig = PathBuf::from(path);
        let client = rt.block_on(muster_kube::client(Some(&kubeconfig))).expect("MUSTER_E2E_KUBECONFIG: a client");
        return Target { client, kubeconfig, real: true, fake: None };
    }
    // One creation time for everything (the fake's frozen clock): the queue then orders pods as
    // the plan does (by priority, then name), not by the second the suite happened to create
    // each one in. On a real cluster that race remains (see the module's notes).
    let started = k8s_openapi::jiff::Timestamp::now().as_second();
    let frozen = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(started).expect("now is a valid time"),
    );
    let fake = muster_fakeapi::FakeApi::new().creation_time(frozen);
    let fake = rt.block_on(fake.start("127.0.0.1:0".parse().unwrap())).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    let client = rt.block_on(muster_kube::client(Some(&kubeconfig))).unwrap();
    Target { client, kubeconfig, real: false, fake: Some(fake) }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// `muster plan`'s outcome as the lines [`api::outcome`] reads from the cluster.
fn plan_lines(inputs: &[PathBuf], args: &[String], placed: &Placed) -> Vec<String> {
    let plan = common::plan_json(inputs, args);
    let mut lines = Vec::new();
    let list = |field: &str| plan[field].as_array().cloned().unwrap_or_default();
    for p in list("placements") {
        lines.push(format!("bound {} {}", api::normalized(&s(&p["pod"]), placed), s(&p["node"])));
    }
    for p in list("unschedulable") {
        lines.push(format!("unschedulable {}", api::normalized(&s(&p["pod"]), placed)));
    }
    for p in list("preempted") {
        lines.push(format!("preempted {}", s(&p["pod"])));
    }
    for c in list("claims") {
        let devices = api::devices(&c["devices"]);
        if devices.is_empty() {
            continue;
        }
        let pods = c["pods"].as_array().into_iter().flatten().map(|p| api::normalized(&s(p), placed));
        let groups = c["podGroups"].as_array().into_iter().flatten().map(|g| format!("podgroup {}", s(g)));
        let consumers: Vec<String> = pods.chain(groups).collect();
        lines.push(api::claim_line(&s(&c["claim"]), &consumers, &devices, placed));
    }
    lines.sort();
    lines
}

/// `muster run --exit-when-idle` against the target, serving [`api::SCHEDULER`] (or, with a
/// configuration, its profiles, `default-scheduler` renamed as the pods were).
fn run_muster(target: &Target, args: &[String], dir: &Path) -> Result<(), String> {
    let mut args = args.to_vec();
    if let Some(i) = args.iter().position(|a| a == "--config") {
        let text = std::fs::read_to_string(&args[i + 1]).unwrap();
        let renamed = text.replace("schedulerName: default-scheduler", &format!("schedulerName: {}", api::SCHEDULER));
        let path = dir.join("config.yaml");
        std::fs::write(&path, renamed).unwrap();
        args[i + 1] = path.to_string_lossy().into_owned();
    } else {
        args.extend(["--scheduler-name".to_string(), api::SCHEDULER.to_string()]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["run", "--exit-when-idle", "--leader-elect=false", "--kube-api-qps=0"])
        .arg("--kubeconfig")
        .arg(&target.kubeconfig)
        .args(&args)
        .env("MUSTER_LOG", "warn")
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("muster run failed:\n{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// One scenario through the API: the lines `plan` gives and the lines the cluster shows.
fn one(rt: &tokio::runtime::Runtime, target: &Target, dir: &Path, tmp: &Path) -> Result<(), String> {
    let (inputs, args) = common::scenario_inputs(dir);
    let manifests = muster_manifest::load_paths(&inputs).map_err(|ds| format!("{} diagnostics", ds.len()))?;
    let mut objects: Vec<Value> = manifests.objects.iter().map(|l| l.object.to_json()).collect();
    let mut placed = Placed::of(&objects);
    let planned = plan_lines(&inputs, &args, &placed);
    api::prepare(&mut objects);
    let quiet = if target.real { Duration::from_secs(2) } else { Duration::ZERO };
    let result = rt.block_on(async {
        api::create_all(&target.client, &objects, &mut placed).await?;
        api::settle(&target.client, &placed, &objects, quiet).await
    });
    let result = result.and_then(|()| {
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let namespaces = placed.namespaces.iter().cloned().collect();
        let kubelet = rt.spawn(api::kubelet(target.client.clone(), namespaces, stopped));
        let ran = run_muster(target, &args, tmp);
        let _ = stop.send(());
        let _ = rt.block_on(kubelet);
        ran?;
        let live = rt.block_on(api::outcome(&target.client, &placed))?;
        if live == planned { Ok(()) } else { Err(diff(&planned, &live)) }
    });
    let cleaned = rt.block_on(api::clean(&target.client, &placed));
    result.and(cleaned)
}

fn diff(planned: &[String], live: &[String]) -> String {
    let only =
        |a: &[String], b: &[String]| a.iter().filter(|l| !b.contains(l)).cloned().collect::<Vec<_>>().join("\n    ");
    format!("plan only:\n    {}\n  run only:\n    {}", only(planned, live), only(live, planned))
}

#[test]
fn every_scenario_created_through_the_api_runs_as_it_plans() {
    let rt = runtime();
    let tmp = common::TempDir::new("e2e-api");
    let target = target(&rt, tmp.path());
    let (mut failures, mut ran) = (Vec::new(), 0);
    for dir in common::scenarios() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if NOT_VIA_API.iter().any(|(n, _)| *n == name) || std::env::var("MUSTER_E2E_ONLY").is_ok_and(|o| o != name) {
            continue;
        }
        let started = std::time::Instant::now();
        if let Err(e) = one(&rt, &target, &dir, tmp.path()) {
            failures.push(format!("{name}: {e}"));
        }
        eprintln!("{name}: {} ms", started.elapsed().as_millis());
        ran += 1;
    }
    assert!(ran >= 25 || std::env::var("MUSTER_E2E_ONLY").is_ok(), "only {ran} scenarios ran");
    assert!(failures.is_empty(), "{} scenario(s) differ:\n{}", failures.len(), failures.join("\n"));
    if let Some(fake) = &target.fake {
        for kind in ["pods", "resourceclaims", "nodes", "resourceslices", "deployments", "jobs", "replicasets"] {
            assert_eq!(fake.list(kind), Vec::<Value>::new(), "the cleanup left {kind} behind");
        }
    }
}
