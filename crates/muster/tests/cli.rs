//! The `muster` command as a user runs it: exit codes, outputs, error messages.

use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::{muster, root, stderr, stdout};

#[test]
fn plan_quickstart_table() {
    let o = muster(&["plan", "examples/quickstart"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!("plan_quickstart_table", stdout(&o));
}

#[test]
fn plan_json_contract() {
    let o = muster(&["plan", "examples/quickstart", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // The contract: these keys and shapes; scripts depend on them.
    let placements = v["placements"].as_array().unwrap();
    assert!(placements.iter().all(|p| p["pod"].is_string() && p["node"].is_string()));
    assert!(placements.iter().any(|p| p["pod"] == "ml/train-resnet-0" && p["node"] == "gpu-b1"));
    let unschedulable = v["unschedulable"].as_array().unwrap();
    assert!(unschedulable.iter().all(|p| p["pod"].is_string() && p["reason"].is_string()));
    assert_eq!(
        unschedulable.iter().find(|u| u["pod"] == "data/etl-big").unwrap()["reason"],
        "0/5 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu, 2 node(s) had untolerated taint {nvidia.com/gpu: present}."
    );
    // The Deployment is read and expanded: its ReplicaSet and pod are listed in `created`.
    assert_eq!(v["ignored"], serde_json::json!([]));
    let created = v["created"].as_array().unwrap();
    assert_eq!(created.len(), 2);
    assert!(created[0]["object"].as_str().unwrap().starts_with("ReplicaSet shop/web-"));
    assert_eq!(created[0]["by"], "Deployment shop/web");
    assert!(created[1]["object"].as_str().unwrap().starts_with("Pod shop/web-"));
    assert_eq!(created[1]["by"].as_str(), created[0]["object"].as_str());
    assert_eq!(created[1]["workload"], "Deployment shop/web");
    insta::assert_json_snapshot!("plan_quickstart_json", v);
}

#[test]
fn plan_yaml_holds_the_changed_pods_as_the_api_server_would() {
    let o = muster(&["plan", "examples/quickstart", "-o", "yaml"]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    let m = muster_manifest::load_str("plan.yaml", &text).expect("the output is valid input");
    let pods: Vec<_> = m
        .objects
        .iter()
        .filter_map(|l| match &l.object {
            muster_manifest::Object::Pod(p) => Some(p),
            _ => None,
        })
        .collect();
    assert_eq!(pods.len(), 6, "4 placed (one created by the Deployment's ReplicaSet) + 2 unschedulable");
    let replica_sets: Vec<_> = m
        .objects
        .iter()
        .filter_map(|l| match &l.object {
            muster_manifest::Object::ReplicaSet(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(replica_sets.len(), 1, "the ReplicaSet the Deployment created");
    let rs_name = replica_sets[0].metadata.name.as_deref().unwrap();
    let web = pods
        .iter()
        .find(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with(&format!("{rs_name}-"))))
        .unwrap();
    assert!(web.spec.as_ref().unwrap().node_name.is_some());
    assert_eq!(web.metadata.owner_references.as_ref().unwrap()[0].name, rs_name);
    let resnet = pods.iter().find(|p| p.metadata.name.as_deref() == Some("train-resnet-0")).unwrap();
    assert_eq!(resnet.spec.as_ref().unwrap().node_name.as_deref(), Some("gpu-b1"));
    let cond = &resnet.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
    assert_eq!((cond.type_.as_str(), cond.status.as_str()), ("PodScheduled", "True"));
    let etl = pods.iter().find(|p| p.metadata.name.as_deref() == Some("etl-big")).unwrap();
    let cond = &etl.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
    assert_eq!((cond.status.as_str(), cond.reason.as_deref()), ("False", Some("Unschedulable")));
}

/// `-o yaml` writes the pods as the plan's effects leave them, as `run` sends them: a PodGroup
/// whose members' priorities differ from its own is a SchedulerError (the alpha restriction), and
/// its members' PodScheduled condition says so in the YAML as in `-o effects`.
#[test]
fn plan_yaml_and_effects_agree_on_a_scheduler_error() {
    let dir = common::TempDir::new("cli-group-error");
    let manifests = dir.join("group.yaml");
    std::fs::write(
        &manifests,
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\n\
         apiVersion: v1\nkind: Node\nmetadata: {name: n0}\nstatus: {allocatable: {cpu: '8', memory: 64Gi, pods: '110'}}\n---\n\
         apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\n\
         spec: {schedulingPolicy: {gang: {minCount: 1}}, priorityClassName: high}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: g-0, namespace: ml}\n\
         spec: {priorityClassName: high, schedulingGroup: {podGroupName: g}, containers: [{name: c, image: busybox}]}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: g-1, namespace: ml}\n\
         spec: {schedulingGroup: {podGroupName: g}, containers: [{name: c, image: busybox}]}\n",
    )
    .unwrap();
    let path = manifests.to_str().unwrap();
    let effects = muster(&["plan", path, "-o", "effects"]);
    assert_eq!(effects.status.code(), Some(0), "{}", stderr(&effects));
    for pod in ["ml/g-0", "ml/g-1"] {
        let line = format!("status  pod {pod} PodScheduled=False SchedulerError: ");
        assert!(stdout(&effects).contains(&line), "{}", stdout(&effects));
    }
    let yaml = muster(&["plan", path, "-o", "yaml"]);
    assert_eq!(yaml.status.code(), Some(0), "{}", stderr(&yaml));
    let m = muster_manifest::load_str("plan.yaml", &stdout(&yaml)).expect("the output is valid input");
    let reasons: Vec<(&str, Option<&str>)> = m
        .objects
        .iter()
        .filter_map(|l| match &l.object {
            muster_manifest::Object::Pod(p) => Some(p),
            _ => None,
        })
        .map(|p| {
            let cond =
                p.status.as_ref().unwrap().conditions.as_ref().unwrap().iter().find(|c| c.type_ == "PodScheduled");
            (p.metadata.name.as_deref().unwrap(), cond.unwrap().reason.as_deref())
        })
        .collect();
    assert_eq!(reasons, [("g-0", Some("SchedulerError")), ("g-1", Some("SchedulerError"))]);
}

/// `-o json`'s `claims` are the claims the plan's effects name: the preemptors' claims, written
/// with their allocation and reservedFor, and the victims' claims, released once the victims are
/// gone; the claims of pods the plan did not touch are not listed.
#[test]
fn plan_json_lists_the_claims_the_effects_touch() {
    let o = muster(&["plan", "tests/scenarios/gang-preemption", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let claims: Vec<(&str, usize, usize)> = v["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (c["claim"].as_str().unwrap(), c["pods"].as_array().unwrap().len(), c["devices"].as_array().unwrap().len())
        })
        .collect();
    assert_eq!(
        claims,
        [
            ("ml/batch-low-0-gpus", 0, 0),
            ("ml/batch-low-1-gpus", 0, 0),
            ("ml/lone-low-gpus", 0, 0),
            ("ml/train-high-0-gpus-sc9vf", 1, 4),
            ("ml/train-high-1-gpus-cz5wj", 1, 4),
        ]
    );
}

#[test]
fn same_input_same_output_byte_for_byte() {
    for format in ["table", "json", "yaml"] {
        let a = muster(&["plan", "examples/quickstart", "examples/gpu-training", "examples/mig", "-o", format]);
        let b = muster(&["plan", "examples/quickstart", "examples/gpu-training", "examples/mig", "-o", format]);
        assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
        assert!(!a.stdout.is_empty());
        assert_eq!(a.stdout, b.stdout, "{format}");
    }
}

#[test]
fn reads_standard_input() {
    let text = std::fs::read_to_string(root().join("examples/quickstart/nodes.yaml")).unwrap()
        + "\n---\n"
        + "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}\n";
    let mut child = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["plan", "-", "-o", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["placements"][0]["pod"], "default/p");
}

#[test]
fn scheduler_name_flag_selects_pods() {
    let o = muster(&["plan", "examples/quickstart", "--scheduler-name", "volcano", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let placed: Vec<&str> = v["placements"].as_array().unwrap().iter().map(|p| p["pod"].as_str().unwrap()).collect();
    assert_eq!(placed, ["data/batch-0"]);
}

/// Every kind of bad input, one file each: exit code 2 and a message with file:line:col, the
/// object and the field.
#[test]
fn bad_input_messages() {
    let dir = root().join("tests/bad-input");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 10);
    let mut report = String::new();
    for f in &files {
        let rel = f.strip_prefix(root()).unwrap().to_str().unwrap().to_string();
        let o = muster(&["plan", &rel]);
        assert_eq!(o.status.code(), Some(2), "{rel} must be rejected");
        assert!(o.stdout.is_empty(), "{rel}: no plan on bad input");
        report.push_str(&format!("$ muster plan {rel}\n{}\n", stderr(&o)));
    }
    insta::assert_snapshot!("bad_input_messages", report);
}

#[test]
fn all_errors_are_listed_not_only_the_first() {
    let o = muster(&["plan", "tests/bad-input"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    let lines = err.lines().filter(|l| l.starts_with("error: ")).count();
    assert!(lines >= 12, "{err}");
}

#[test]
fn missing_path_is_an_error() {
    let o = muster(&["plan", "no/such/dir"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no/such/dir: cannot read"), "{}", stderr(&o));
}

#[test]
fn help_documents_every_flag() {
    let o = muster(&["plan", "--help"]);
    let help = stdout(&o);
    for flag in [
        "--output",
        "--scheduler-name",
        "--scoring",
        "--config",
        "--percentage-of-nodes-to-score",
        "--no-health-propagation",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
}

#[test]
fn config_file_selects_bin_packing() {
    let dir = common::TempDir::new("cli");
    let cfg = dir.join("sched.yaml");
    std::fs::write(&cfg, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n").unwrap();
    let o = muster(&["plan", "tests/scenarios/spread-or-pack", "--config", cfg.to_str().unwrap(), "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let nodes: Vec<&str> = v["placements"].as_array().unwrap().iter().map(|p| p["node"].as_str().unwrap()).collect();
    assert_eq!(nodes, ["node-a", "node-a", "node-a"]);
}

#[test]
fn check_and_plan_judge_a_configuration_alike() {
    let dir = common::TempDir::new("cli-cfg");
    let cfg = dir.join("sched.yaml");
    std::fs::write(&cfg, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 4\npercentageOfNodesToScore: 101\nprofiles:\n- plugins:\n    placementScore:\n      enabled:\n      - name: PodGroupPodsCount\n        weight: 5\n    score:\n      enabled:\n      - name: Coscheduling\n").unwrap();
    let path = cfg.to_str().unwrap();
    let check = muster(&["check", path]);
    assert_eq!(check.status.code(), Some(1), "{}", stdout(&check));
    let plan = muster(&["plan", "examples/quickstart", "--config", path]);
    assert_ne!(plan.status.code(), Some(0));
    // check: `file:L:C: error: message`; plan: `file:L:C: message` after `error: ` / `warning: `.
    let from_check: Vec<String> = stdout(&check)
        .lines()
        .filter(|l| l.contains("KubeSchedulerConfiguration"))
        .map(|l| l.replacen(" error: ", " ", 1).replacen(" warning: ", " ", 1))
        .collect();
    let mut from_plan: Vec<String> = stderr(&plan)
        .lines()
        .filter(|l| l.contains("KubeSchedulerConfiguration"))
        .map(|l| l.trim_start_matches("error: ").trim_start_matches("warning: ").to_string())
        .collect();
    from_plan.sort_by_key(|l| from_check.iter().position(|c| c == l));
    assert_eq!(from_check.len(), 3, "{from_check:?}");
    assert_eq!(from_check, from_plan);
}

#[test]
fn a_pod_on_devices_with_binding_conditions_is_shown_waiting_at_prebind() {
    let o = muster(&["plan", "tests/scenarios/binding-conditions"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(
            "WAITING AT PREBIND (device binding conditions)\nml/infer-0: binds once the driver reports \
             fabric.example.com/attached on fabric.example.com/node-1/gpu-0; fails on fabric.example.com/attach-failed\n"
        ),
        "{}",
        stdout(&o)
    );
    let o = muster(&["plan", "tests/scenarios/binding-conditions", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["placements"][0]["bindingConditions"],
        serde_json::json!([{"device": "fabric.example.com/node-1/gpu-0", "conditions": ["fabric.example.com/attached"],
                            "failureConditions": ["fabric.example.com/attach-failed"]}])
    );
    let o = muster(&["plan", "examples/quickstart", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["placements"][0]["bindingConditions"], serde_json::json!([]), "always present");
}

#[test]
fn devices_shows_which_devices_a_class_selects() {
    // An "80GB" H100 reports 81559Mi < 80Gi: the class selects the A100s (81920Mi) only.
    let o = muster(&["devices", "examples/gpu-devices", "--class", "h100-80gi"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!("devices_h100_80gi", stdout(&o));
}

#[test]
fn devices_no_match_note_names_only_what_the_selectors_test() {
    let o = muster(&["devices", "tests/devices/no-match.yaml", "--class", "h100"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let note = out.lines().find(|l| l.starts_with("note: no device matches")).expect("a note");
    assert!(
        note.contains("attribute gpu.example.com/productName: \"Example H100 80GB HBM3\" (2), absent (1)"),
        "{note}"
    );
    assert!(note.contains("capacity gpu.example.com/memory: 81559Mi (2), absent (1)"), "{note}");
    for untested in ["multiprocessors", "copyEngines", "decoders", "architecture"] {
        assert!(!note.contains(untested), "{untested} is not tested by the selector: {note}");
    }
    insta::assert_snapshot!("devices_no_match_note", out);
}

#[test]
fn devices_json_contract() {
    let o = muster(&["devices", "examples/gpu-devices", "--class", "nvidia-h100", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 24);
    for d in devices {
        for key in ["driver", "pool", "device", "node", "match", "error"] {
            assert!(d.get(key).is_some(), "{key} missing in {d}");
        }
    }
    let matched: Vec<&str> =
        devices.iter().filter(|d| d["match"] == true).map(|d| d["pool"].as_str().unwrap()).collect();
    assert_eq!(matched.len(), 16);
    assert!(matched.iter().all(|p| p.starts_with("h100-")));
}

#[test]
fn devices_reports_runtime_and_compile_errors() {
    let o = muster(&[
        "devices",
        "examples/gpu-devices",
        "--selector",
        "device.attributes['gpu.nvidia.com'].nvlink",
        "-o",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["devices"][0]["error"],
        "--selector on device gpu.nvidia.com/a100-node-1/gpu-0: CEL runtime error: no such key: nvlink. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields"
    );
    let o = muster(&["devices", "examples/gpu-devices", "--selector", "device.atributes.x == 1"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: --selector: CEL compile error: compilation failed: ERROR: <input>:1:7: undefined field 'atributes'\n | device.atributes.x == 1\n | ......^\n"
    );
}

#[test]
fn plan_table_reports_evictions() {
    let o = muster(&["plan", "tests/scenarios/noexecute-eviction"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!("plan_noexecute_eviction_table", stdout(&o));
    // Through health propagation: the drain rule on the full GPU reaches its MIG placements.
    let o = muster(&["plan", "tests/scenarios/mig-health-eviction"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!("plan_mig_health_eviction_table", stdout(&o));
}

#[test]
fn plan_json_evictions_contract() {
    let o = muster(&["plan", "tests/scenarios/mig-health-eviction", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["evictions"][1],
        serde_json::json!({
            "pod": "serving/infer-b",
            "claim": "serving/infer-b-mig",
            "device": {"driver": "gpu.nvidia.com", "pool": "h100-a", "device": "gpu-0-mig-1g10gb-19-1"},
            "taint": {"key": "example.com/drain", "value": "xid-79", "effect": "NoExecute", "timeAdded": "2026-12-01T09:00:00Z"},
            "source": "health propagation from gpu-0 (DeviceTaintRule h100-a-gpu-0-drain)",
            "rule": "h100-a-gpu-0-drain",
            "propagatedFrom": "gpu-0",
            "at": "2026-12-01T09:10:00Z",
            "tolerationSeconds": 600,
            "dryRun": false,
        })
    );
    // Two taints of gpu-0 (the driver's XID, the rule's drain), each copied to its 7 placements.
    let propagated = v["propagatedTaints"].as_array().unwrap();
    assert_eq!(propagated.len(), 14);
    assert!(propagated.iter().all(|p| p["from"] == "gpu-0"));
    let o = muster(&["plan", "tests/scenarios/mig-health-eviction", "--no-health-propagation", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["evictions"], serde_json::json!([]));
    assert_eq!(v["propagatedTaints"], serde_json::json!([]));
}

#[test]
fn plan_yaml_writes_device_taint_rule_status() {
    let o = muster(&["plan", "tests/scenarios/noexecute-eviction", "-o", "yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let m = muster_manifest::load_str("plan.yaml", &text).expect("the output is valid input");
    let conditions: Vec<(String, String, String, String, String)> = m
        .objects
        .iter()
        .filter_map(|l| match &l.object {
            muster_manifest::Object::DeviceTaintRule(r) => Some(r),
            _ => None,
        })
        .map(|r| {
            let c = &r.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
            let t = serde_json::to_value(&c.last_transition_time).unwrap();
            (c.type_.clone(), c.status.clone(), c.reason.clone(), c.message.clone(), t.as_str().unwrap().to_string())
        })
        .collect();
    let row = |s: &str, r: &str, m: &str, t: &str| {
        ("EvictionInProgress".to_string(), s.to_string(), r.to_string(), m.to_string(), t.to_string())
    };
    assert_eq!(
        conditions,
        [
            row("True", "PodsPendingEviction", "4 pods in 1 namespace need to be evicted", "2026-12-01T09:00:00Z"),
            row(
                "False",
                "NoEffect",
                "dry run: with effect NoExecute, 1 pod in 1 namespace would be evicted",
                "2026-12-01T10:00:00Z"
            ),
        ]
    );
}

/// DynamicResources' PreBind sets `allocationTimestamp` on an allocation whose devices have
/// binding conditions; a plan reads no clock, so only `--now` gives it, and without it a comment
/// says what is missing. Claims without binding conditions never get one.
#[test]
fn binding_conditions_get_an_allocation_timestamp_only_with_now() {
    let with = muster(&["plan", "tests/scenarios/binding-conditions", "-o", "yaml", "--now", "2026-01-01T00:00:00Z"]);
    assert!(with.status.success(), "{}", stderr(&with));
    assert!(stdout(&with).contains("allocationTimestamp: \"2026-01-01T00:00:00Z\""), "{}", stdout(&with));
    let without = muster(&["plan", "tests/scenarios/binding-conditions", "-o", "yaml"]);
    let text = stdout(&without);
    assert!(!text.contains("allocationTimestamp:"), "{text}");
    assert!(
        text.contains("# allocationTimestamp (set at PreBind: its devices have binding conditions) is not written")
    );
    let plain = muster(&["plan", "examples/gpu-training", "-o", "yaml", "--now", "2026-01-01T00:00:00Z"]);
    assert!(!stdout(&plain).contains("allocationTimestamp"), "no binding conditions, no timestamp");
}

/// A plan's `-o yaml` (the created ReplicaSet, the pods bound or with their condition, the
/// claims) read back with the workloads that made it, as a cluster dump would hold them: the
/// controllers find every replica there and create nothing more.
#[test]
fn a_dump_with_every_replica_gets_no_new_pod() {
    let dir = "tests/scenarios/workload-controllers";
    let o = muster(&["plan", dir, "-o", "yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let dump = Path::new(env!("CARGO_TARGET_TMPDIR")).join("workload-controllers-after.yaml");
    std::fs::write(&dump, &o.stdout).unwrap();
    let o = muster(&["plan", dir, dump.to_str().unwrap(), "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["created"], serde_json::json!([]), "{v:#}");
    assert_eq!(v["controllerNotes"], serde_json::json!([]), "{v:#}");
    assert_eq!(v["placements"], serde_json::json!([]), "every placed pod is bound now");
    let pending: Vec<&str> =
        v["unschedulable"].as_array().unwrap().iter().map(|u| u["pod"].as_str().unwrap()).collect();
    assert_eq!(pending, ["ml/kv-2", "ml/train-1-zp5wj"]);
}

/// `-o effects`: what the live scheduler would send, in order — a preemption's victim evicted
/// before the preemptor is bound, claim statuses written before their pods are bound, a pod that
/// fits nowhere marked PodScheduled=False with its event.
#[test]
fn plan_effects_are_what_run_would_send_in_order() {
    let mut report = String::new();
    for dir in ["tests/scenarios/pod-preemption", "examples/gpu-gang"] {
        let o = muster(&["plan", dir, "-o", "effects"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        report.push_str(&format!("$ muster plan {dir} -o effects\n{}\n", stdout(&o)));
    }
    insta::assert_snapshot!("plan_effects", report);
}
