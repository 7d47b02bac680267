//! `muster sim` scenarios: each folder under `tests/sim/` holds cluster manifests
//! (`cluster.yaml`), a trace (`trace.yaml`) and an `expected.txt`:
//!
//! ```text
//! # comments
//! args: --until 0s                       (optional: extra flags for `muster sim`)
//! summary.finished = 2                   (a value of the JSON report, by a dotted path; jobs are
//! jobs[train-b].start = 3600              addressed by name; numbers compare as numbers)
//! compare-plan: cluster.yaml pods.yaml   (every job's nodes equal the nodes `muster plan` gives
//!                                         its pods over these files, and the jobs left pending
//!                                         are those with unschedulable pods)
//! ```
//!
//! Every scenario also runs twice: the JSON must be byte-identical.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

mod common;

fn lookup<'v>(report: &'v Value, path: &str) -> Result<&'v Value, String> {
    let mut v = report;
    for segment in path.split('.') {
        v = match segment.split_once('[') {
            Some((field, rest)) => {
                let name = rest.strip_suffix(']').ok_or_else(|| format!("bad path {path}"))?;
                let list = v.get(field).and_then(Value::as_array).ok_or_else(|| format!("{path}: no list {field}"))?;
                list.iter().find(|j| j["name"] == name).ok_or_else(|| format!("{path}: no element named {name}"))?
            }
            None => v.get(segment).ok_or_else(|| format!("{path}: no field {segment}"))?,
        };
    }
    Ok(v)
}

fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Jobs' sorted nodes and pending jobs, from `muster plan -o json` (pods are `<job>-<i>`).
fn plan_jobs(dir: &Path, files: &[&str]) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let mut args = vec!["plan".to_string()];
    args.extend(files.iter().map(|f| dir.join(f).to_string_lossy().into_owned()));
    args.extend(["-o".into(), "json".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = common::muster(&args);
    assert!(out.status.success(), "plan: {}", common::stderr(&out));
    let plan: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let job = |pod: &str| {
        let name = pod.split_once('/').unwrap().1;
        name.rsplit_once('-').unwrap().0.to_string()
    };
    let mut nodes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in plan["placements"].as_array().unwrap() {
        nodes.entry(job(p["pod"].as_str().unwrap())).or_default().push(p["node"].as_str().unwrap().to_string());
    }
    for n in nodes.values_mut() {
        n.sort();
    }
    let mut pending: Vec<String> =
        plan["unschedulable"].as_array().unwrap().iter().map(|p| job(p["pod"].as_str().unwrap())).collect();
    pending.dedup();
    (nodes, pending)
}

fn run(dir: &Path) -> Result<(), String> {
    let expected = std::fs::read_to_string(dir.join("expected.txt")).map_err(|e| e.to_string())?;
    let mut args = vec![
        "sim".to_string(),
        dir.join("cluster.yaml").to_string_lossy().into_owned(),
        "--trace".into(),
        dir.join("trace.yaml").to_string_lossy().into_owned(),
        "-o".into(),
        "json".into(),
    ];
    let mut checks = Vec::new();
    let mut compare = None;
    for line in expected.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if let Some(a) = line.strip_prefix("args:") {
            args.extend(a.split_whitespace().map(String::from));
        } else if let Some(files) = line.strip_prefix("compare-plan:") {
            compare = Some(files.split_whitespace().map(String::from).collect::<Vec<_>>());
        } else {
            let (path, value) = line.split_once(" = ").ok_or_else(|| format!("bad line {line:?}"))?;
            let value: Value = serde_json::from_str(value).map_err(|e| format!("{line:?}: {e}"))?;
            checks.push((path.to_string(), value));
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = common::muster(&args);
    if !first.status.success() {
        return Err(format!("sim failed: {}", common::stderr(&first)));
    }
    let second = common::muster(&args);
    if first.stdout != second.stdout {
        return Err("two runs gave different JSON".into());
    }
    let report: Value = serde_json::from_slice(&first.stdout).map_err(|e| e.to_string())?;
    let mut errors = Vec::new();
    for (path, want) in &checks {
        match lookup(&report, path) {
            Ok(got) if same(got, want) => {}
            Ok(got) => errors.push(format!("{path}: expected {want}, got {got}")),
            Err(e) => errors.push(e),
        }
    }
    if let Some(files) = compare {
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        let (plan_nodes, plan_pending) = plan_jobs(dir, &files);
        for job in report["jobs"].as_array().unwrap() {
            let name = job["name"].as_str().unwrap();
            let nodes: Vec<String> =
                job["nodes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect();
            let want = plan_nodes.get(name).cloned().unwrap_or_default();
            if nodes != want {
                errors.push(format!("job {name}: sim placed it on {nodes:?}, plan on {want:?}"));
            }
            let pending = job["state"] == "pending";
            if pending != plan_pending.iter().any(|p| p == name) {
                errors.push(format!("job {name}: pending in the sim: {pending}; the plan disagrees"));
            }
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(errors.join("\n")) }
}

#[test]
fn sim_scenarios() {
    let root = common::root().join("tests/sim");
    let mut dirs: Vec<_> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    assert!(dirs.len() >= 3, "scenarios under {}", root.display());
    let mut failures = Vec::new();
    for dir in &dirs {
        if let Err(e) = run(dir) {
            failures.push(format!("{}:\n{e}", dir.file_name().unwrap().to_string_lossy()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_bad_trace_names_its_file_line_and_field() {
    let dir = std::env::temp_dir().join(format!("muster-sim-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.yaml");
    std::fs::write(
        &trace,
        "apiVersion: muster.dev/v1alpha1\nkind: Trace\njobs:\n- name: a\n  arrival: 0s\n  duration: 1h\n  gpus: 8\n",
    )
    .unwrap();
    let out = common::muster(&["sim", "tests/sim/gang-waits/cluster.yaml", "--trace", trace.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(err.starts_with(&format!("error: {}:7:", trace.display())), "{err}");
    assert!(err.contains("gpus"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_html_report_is_self_contained_and_the_same_twice() {
    let args = ["sim", "tests/sim/drain/cluster.yaml", "--trace", "tests/sim/drain/trace.yaml", "-o", "html"];
    let first = common::muster(&args);
    assert!(first.status.success(), "{}", common::stderr(&first));
    assert_eq!(first.stdout, common::muster(&args).stdout, "two runs gave different HTML");
    let html = common::stdout(&first);
    assert!(html.starts_with("<!DOCTYPE html>"));
    // No gang in this trace: no gang-wait figure.
    assert_eq!(
        html.matches("<svg ").count(),
        7,
        "allocation, pending pods, wait CDF, free and stranded, largest free block, preemptions and evictions, GPU-hours lost"
    );
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"));
    // Every plot has data: a line with more than its starting point.
    let paths: Vec<&str> = html.split("<path d=\"").skip(1).map(|p| p.split('"').next().unwrap()).collect();
    assert_eq!(
        paths.len(),
        10,
        "allocation in all and for the one class, pending pods, CDF, free, stranded, largest, preempted, evicted, lost: {paths:?}"
    );
    assert!(paths.iter().all(|d| d.contains(" L")), "{paths:?}");
    assert!(html.contains("with fewer than 4 free"), "the caption defines stranded devices");
    assert!(html.contains("evicted (1)") && html.contains("GPU-hours lost, cumulative (2.0 in all)"));
    assert!(html.contains("<td>a</td><td>default</td>"), "the worst-waits table lists the jobs");
}

/// `--compare`: the same trace under LeastAllocated and MostAllocated, side by side. On the
/// packing trace MostAllocated keeps a node whole for the 4-GPU job, which then does not wait.
#[test]
fn compare_runs_the_trace_under_each_configuration_side_by_side() {
    let base = ["sim", "tests/sim/packing-least/cluster.yaml", "--trace", "tests/sim/packing-least/trace.yaml"];
    let with = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let o = common::muster(&args);
        assert!(o.status.success(), "{}", common::stderr(&o));
        common::stdout(&o)
    };
    let json = with(&["--compare", "most-allocated", "-o", "json"]);
    assert_eq!(json, with(&["--compare", "most-allocated", "-o", "json"]), "the same bytes twice");
    let v: Value = serde_json::from_str(&json).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!((runs[0]["name"].as_str(), runs[1]["name"].as_str()), (Some("least-allocated"), Some("most-allocated")));
    assert_eq!(lookup(&runs[0], "jobs[big].waitSeconds").unwrap(), &Value::from(3540.0));
    assert_eq!(lookup(&runs[1], "jobs[big].waitSeconds").unwrap(), &Value::from(0.0));
    // The configurations run at once, each as it runs alone.
    for (i, scoring) in ["least-allocated", "most-allocated"].into_iter().enumerate() {
        let alone: Value = serde_json::from_str(&with(&["--scoring", scoring, "-o", "json"])).unwrap();
        let mut run = runs[i].clone();
        run.as_object_mut().unwrap().remove("name");
        assert_eq!(run, alone, "{scoring} compared and alone");
    }
    let text = with(&["--compare", "least-allocated", "--compare", "most-allocated"]);
    assert!(text.lines().next().unwrap().ends_with("least-allocated   most-allocated"), "{text}");
    assert!(text.contains("wait p95                           59m00s               0s"), "{text}");
    assert!(text.contains("stranded devices, mean                3.0              2.0"), "{text}");
    let html = with(&["--compare", "most-allocated", "-o", "html"]);
    assert_eq!(
        html.matches("<figure>").count(),
        7,
        "allocation, pending, wait CDF, stranded, largest free block, preempted or evicted, GPU-hours lost (no gangs)"
    );
    assert!(html.contains(">least-allocated</th>") && html.contains(">most-allocated</th>"));
    let o = common::muster(&[&base[..], &["--compare", "fastest"]].concat());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        common::stderr(&o)
            .contains("--compare fastest: neither least-allocated, most-allocated nor a configuration file")
    );
}

/// The openb sample: the cluster from its node list, the trace from its pod list (recognised by
/// the header), the rows that cannot run counted on stderr, the summary pinned.
#[test]
fn the_openb_sample_runs_from_its_csv_files() {
    let args = [
        "sim",
        "--openb-nodes",
        "examples/sim-openb/nodes.csv",
        "--trace",
        "examples/sim-openb/pods.csv",
        "-o",
        "json",
    ];
    let first = common::muster(&args);
    assert!(first.status.success(), "{}", common::stderr(&first));
    assert_eq!(first.stdout, common::muster(&args).stdout, "two runs gave different JSON");
    assert_eq!(
        common::stderr(&first),
        "warning: examples/sim-openb/pods.csv: 5 rows not simulated: 3 never scheduled (no scheduled_time), 1 never \
         deleted (no deletion_time, so no duration), 1 ran for 0 s (deletion_time = scheduled_time)\n"
    );
    let report: Value = serde_json::from_slice(&first.stdout).unwrap();
    let note = common::stderr(&first).strip_prefix("warning: ").unwrap().trim_end().to_string();
    assert_eq!(report["notes"], serde_json::json!([note]), "the report keeps the note");
    for (path, want) in [
        ("summary.jobs", 195.0),
        ("summary.finished", 195.0),
        ("summary.pending", 0.0),
        ("summary.gpuUtilization", 0.614169),
        ("summary.waitSeconds.p50", 0.0),
        ("summary.waitSeconds.p95", 4192.0),
        ("summary.waitSeconds.p99", 12147.0),
        ("summary.simulatedSeconds", 32946.0),
        ("classes.gpu-share.jobs", 76.0),
        ("classes.gpu-multi.jobs", 32.0),
        ("classes.cpu-only.waitSeconds.p99", 0.0),
        // gpu_spec A100: the only A100 node; a share of a GPU.
        ("jobs[openb-pod-0001].waitSeconds", 0.0),
    ] {
        let got = lookup(&report, path).unwrap();
        assert!(same(got, &Value::from(want)), "{path}: expected {want}, got {got}");
    }
    assert_eq!(lookup(&report, "jobs[openb-pod-0001].nodes").unwrap(), &serde_json::json!(["openb-node-0007"]));
}

#[test]
fn a_bad_openb_row_names_its_file_line_and_column() {
    let dir = std::env::temp_dir().join(format!("muster-sim-openb-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pods = dir.join("pods.csv");
    let header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,\
                  scheduled_time\n";
    std::fs::write(&pods, format!("{header}p-1,1000,1024,1,1000,,LS,Running,10,5,8\n")).unwrap();
    let out =
        common::muster(&["sim", "--openb-nodes", "examples/sim-openb/nodes.csv", "--trace", pods.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        common::stderr(&out),
        format!("error: {}:2:39: scheduled_time: 8 is before creation_time 10\n", pods.display())
    );
    let nodes = dir.join("nodes.csv");
    std::fs::write(&nodes, "sn,cpu_milli,memory_mib,gpu,model\nn1,4000,1024,2,\n").unwrap();
    let out =
        common::muster(&["sim", "--openb-nodes", nodes.to_str().unwrap(), "--trace", "examples/sim-openb/pods.csv"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains(&format!("error: {}:2:16: model: missing", nodes.display())),
        "{}",
        common::stderr(&out)
    );
    let out = common::muster(&["sim", "--trace", "examples/sim-openb/pods.csv"]);
    assert_eq!(out.status.code(), Some(2), "neither PATH nor --openb-nodes");
    std::fs::remove_dir_all(&dir).unwrap();
}
