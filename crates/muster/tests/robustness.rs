//! Hostile input at the edges: huge names, empty mappings, control characters, special files.
//! Every input is generated here; nothing large is committed.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

mod common;
use common::{muster, muster_stdin, root, stderr, stdout};

/// A fresh directory for one test.
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
fn names_of_70000_characters_are_refused_and_the_longest_valid_ones_render() {
    // A name the API server refuses (over 253 characters) is refused with its message cut,
    // never echoed in full, never a panic.
    let name = "n".repeat(70_000);
    let text = cluster_named(&name);
    for args in [&["plan", "-"][..], &["devices", "-"], &["why", "pod/default/big", "-"]] {
        let o = muster_stdin(args, &text);
        assert_eq!(o.status.code(), Some(2), "{:?}: {}", &args[..1], stdout(&o));
        let err = stderr(&o);
        assert!(err.contains("must be no more than "), "{:?}: {}", &args[..1], &err[..err.len().min(2000)]);
        assert!(err.len() < 20_000, "{:?}: the name is cut in the messages ({} bytes)", &args[..1], err.len());
    }
    // The longest name the API server takes (253 characters, 63 per label) fills its columns.
    let long = ["n".repeat(63), "n".repeat(63), "n".repeat(63), "n".repeat(61)].join(".");
    let label = "n".repeat(63);
    // A driver name is at most 63 characters (a CSI driver's rule).
    let text = cluster_named(&long)
        .replacen(&format!("  - name: {long}\n"), &format!("  - name: {label}\n"), 1)
        .replacen(&format!("driver: {long}"), &format!("driver: {label}"), 1);
    for args in [
        &["plan", "-"][..],
        &["devices", "-"],
        &["devices", "-", "--selector", "true"],
        &["why", "pod/default/big", "-"],
    ] {
        let o = muster_stdin(args, &text);
        assert_eq!(o.status.code(), Some(0), "{:?}: {}", &args[..1], stderr(&o));
        assert!(stdout(&o).contains(&long[..200]), "{:?}", &args[..1]);
    }
}

/// Did `convert` succeed but for references to objects not in its input (which `check`, and so
/// `convert`, names as errors)?
fn converted_but_dangling(code: Option<i32>, err: &str) -> bool {
    code == Some(0)
        || (code == Some(1)
            && err.lines().filter(|l| l.starts_with("error: ")).all(|l| l.ends_with("is not in the input")))
}

/// `muster convert -` on `text`: (exit code, stdout, stderr).
fn convert(text: &str) -> (Option<i32>, String, String) {
    let o = muster_stdin(&["convert", "-"], text);
    (o.status.code(), stdout(&o), stderr(&o))
}

#[test]
fn convert_reads_empty_mappings_as_empty() {
    let pg = "apiVersion: scheduling.k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: g\n";
    for spec in ["spec:\n", "spec: ~\n", "spec: null\n", ""] {
        let (code, out, err) = convert(&format!("{pg}{spec}"));
        assert_eq!(code, Some(0), "{spec:?}: {err}");
        assert!(out.contains("schedulingPolicy:\n    basic: {}"), "{spec:?}: {out}");
        muster_manifest::load_str("converted.yaml", &out).unwrap_or_else(|d| panic!("{spec:?}: {d:#?}\n{out}"));
    }
    // A pod joining a PodGroup by label, with an empty spec.
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {scheduling.k8s.io/group-name: g}\nspec:\n";
    let (code, out, err) = convert(&format!("{pg}spec: {{minCount: 2}}\n---\n{pod}"));
    // Converted; and named, since the API server refuses a pod without containers.
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Pod default/p: spec.containers: Required value"), "{err}");
    assert!(out.contains("schedulingGroup:\n    podGroupName: g"), "{out}");
    // A DeviceTaintRule with an empty deviceSelector and metadata, split in two.
    let rule = "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceTaintRule\nmetadata:\nspec:\n  deviceSelector:\n  \
                nodeName: n1\n  deviceName: gpu-0\n  taints:\n  - {key: a, effect: NoSchedule}\n  - {key: b, effect: NoSchedule}\n";
    let (code, out, err) = convert(rule);
    // The rule had no name, so the split rules' names are not valid either: converted, and named.
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("metadata.name: Invalid value: \"<unnamed>-1\""), "{err}");
    assert!(out.contains("name: <unnamed>-1") || out.contains("name: '<unnamed>-1'"), "{out}");
    assert!(out.contains("pool: n1"), "{out}");
    // A flat claim with an empty devices mapping; a v1beta1 request with an empty exactly.
    let claim = "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata:\n  name: c\nspec:\n  \
                 deviceClassName: gpu\n  devices:\n";
    let (code, out, err) = convert(claim);
    assert!(converted_but_dangling(code, &err), "{err}");
    assert!(out.contains("deviceClassName: gpu"), "{out}");
    let claim = "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata:\n  name: c\nspec:\n  devices:\n    \
                 requests:\n    - name: r\n      deviceClassName: gpu\n      exactly:\n";
    let (code, out, err) = convert(claim);
    assert!(converted_but_dangling(code, &err), "{err}");
    assert!(out.contains("exactly:\n        deviceClassName: gpu"), "{out}");
}

#[test]
fn convert_refuses_scalars_and_lists_where_it_adds_keys() {
    let cases = [
        (
            "apiVersion: scheduling.k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: g\nspec: 3\n",
            "5:7: PodGroup default/g: spec: expected a mapping, found the scalar \"3\"",
        ),
        (
            "apiVersion: scheduling.k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: g\nspec: [1]\n",
            "5:7: PodGroup default/g: spec: expected a mapping, found a list",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {scheduling.k8s.io/group-name: g}\nspec: x\n",
            "6:7: Pod default/p: spec: expected a mapping, found the scalar \"x\"",
        ),
        (
            "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceTaintRule\nmetadata:\n  name: r\nspec:\n  \
             deviceSelector: x\n  nodeName: n1\n",
            "6:19: DeviceTaintRule r: spec.deviceSelector: expected a mapping",
        ),
        (
            "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceTaintRule\nmetadata:\n  name: r\nspec: [x]\n",
            "5:7: DeviceTaintRule r: spec: expected a mapping, found a list",
        ),
        (
            "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceTaintRule\nmetadata: x\nspec:\n  nodeName: n1\n",
            "3:11: DeviceTaintRule <unnamed>: metadata: expected a mapping",
        ),
        (
            "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata:\n  name: c\nspec:\n  \
             deviceClassName: gpu\n  devices: x\n",
            "7:12: ResourceClaim default/c: spec.devices: expected a mapping",
        ),
        (
            "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata:\n  name: c\nspec:\n  \
             deviceClassName: gpu\n  devices: {requests: x}\n",
            "7:23: ResourceClaim default/c: spec.devices.requests: expected a list",
        ),
        (
            "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimTemplate\nmetadata:\n  name: t\nspec:\n  spec:\n    \
             devices:\n      requests:\n      - name: r\n        deviceClassName: gpu\n        exactly: [x]\n",
            "11:18: ResourceClaimTemplate default/t: spec.spec.devices.requests[0].exactly: expected a mapping",
        ),
    ];
    for (text, want) in cases {
        let (code, out, err) = convert(text);
        // Kept as written, named with why; the rest of the input is still converted.
        assert_eq!(code, Some(1), "{text}\n{out}{err}");
        assert!(err.contains(&format!("error: <stdin>:{want}")), "{text}\nwant {want}\ngot {err}");
        assert_eq!(out, text, "an object that cannot be converted is printed as written");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Names and texts with every kind of character YAML cannot hold as it is.
const NASTY: &str = r#"\0\n\r\t\x01\e\x7f\u0085\u2028\u2029\ufeff #x: y- '\"\\"#;

#[test]
fn yaml_output_with_control_characters_reads_back() {
    let text = format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n\nstatus:\n  allocatable: {{cpu: '4', memory: 8Gi, pods: '10'}}\n\
---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: {{example.com/note: \"v{NASTY}\"}}\nspec:\n  \
containers:\n  - name: c\n    resources:\n      requests: {{cpu: '1'}}\n"
    );
    let o = muster_stdin(&["plan", "-", "-o", "yaml"], &text);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let m = muster_manifest::load_str("plan.yaml", &out).unwrap_or_else(|d| panic!("{d:#?}\n{out}"));
    // Names, label keys and values, drivers and effects are validated (the API server refuses
    // such text in them); annotation values are free text and carry every character through the
    // output and back.
    let note = |l: &muster_manifest::Loaded| {
        l.object.metadata().annotations.as_ref().and_then(|m| m.get("example.com/note").cloned())
    };
    assert!(m.objects.iter().any(|l| note(l).is_some_and(|v| v.starts_with("v\0\n"))), "{out}");
    let o = muster_stdin(&["check", "-"], &out);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
}

#[test]
fn convert_output_with_control_characters_reads_back() {
    let text = format!(
        "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceTaintRule\nmetadata:\n  name: \"r{NASTY}\"\nspec:\n  \
nodeName: \"true\"\n  deviceName: \"gpu{NASTY}\"\n  taints:\n  - {{key: a, effect: NoSchedule}}\n  - {{key: b, effect: NoSchedule}}\n\
---\napiVersion: scheduling.k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: \"g{NASTY}\"\nspec: {{minCount: 2, \
scheduleTimeoutSeconds: \"1{NASTY}\"}}\n\
---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {{scheduling.k8s.io/group-name: \"g{NASTY}\"}}\nspec:\n  \
containers: [{{name: c}}]\n\
---\napiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata:\n  name: \"c{NASTY}\"\nspec:\n  \
deviceClassName: \"yes\"\n  selectors:\n  - cel: {{expression: \"device.attributes['x'].y == '{NASTY}' && \
device.capacity['gpu.nvidia.com'].memory >= '80Gi'\"}}\n"
    );
    let (code, out, err) = convert(&text);
    // The names are not valid Kubernetes names: converted, and named as check names them.
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("DeviceClass \"yes\" is not in the input"), "{err}");
    assert!(err.lines().all(|l| !l.starts_with('\t')), "names are written on one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let m = muster_manifest::load_str("converted.yaml", &out).unwrap_or_else(|d| panic!("{d:#?}\n{out}"));
    let names: Vec<&str> = m.objects.iter().filter_map(|l| l.object.metadata().name.as_deref()).collect();
    assert!(names.contains(&"r\0\n\r\t\u{1}\u{1b}\u{7f}\u{85}\u{2028}\u{2029}\u{feff} #x: y- '\"\\-1"), "{names:?}");
    assert!(out.contains("pool: 'true'"), "a name that reads as a boolean is quoted: {out}");
}

/// `n` pods on `n / 8` eight-GPU nodes, each pod with its own ResourceClaim.
fn claims_cluster(n: usize) -> String {
    let mut s = String::from(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu\nspec:\n  selectors:\n  \
         - cel: {expression: \"device.driver == 'gpu.example.com'\"}\n",
    );
    for k in 0..n.div_ceil(8) {
        s += &format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{k}\nstatus:\n  allocatable: {{cpu: '64', memory: \
             512Gi, pods: '110'}}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: s-{k}\n\
             spec:\n  driver: gpu.example.com\n  nodeName: node-{k}\n  pool: {{name: node-{k}, generation: 1, \
             resourceSliceCount: 1}}\n  devices:\n"
        );
        for d in 0..8 {
            s += &format!("  - name: gpu-{d}\n");
        }
    }
    for i in 0..n {
        s += &format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: c-{i}\nspec:\n  devices:\n    \
             requests:\n    - name: r\n      exactly: {{deviceClassName: gpu}}\n---\napiVersion: v1\nkind: Pod\n\
             metadata:\n  name: p-{i}\nspec:\n  resourceClaims:\n  - {{name: g, resourceClaimName: c-{i}}}\n  \
             containers:\n  - name: c\n    resources:\n      claims: [{{name: g}}]\n"
        );
    }
    s
}

#[test]
fn json_claims_name_the_node_of_the_pod_that_uses_them() {
    // The claims' nodes are looked up in an index built once (it was a search per claim).
    let o = muster_stdin(&["plan", "-", "-o", "json"], &claims_cluster(400));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let placed: std::collections::HashMap<&str, &str> = v["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["pod"].as_str().unwrap(), p["node"].as_str().unwrap()))
        .collect();
    let claims = v["claims"].as_array().unwrap();
    assert_eq!((placed.len(), claims.len()), (400, 400));
    for c in claims {
        let pod = c["pods"][0].as_str().unwrap();
        assert_eq!(c["node"].as_str(), Some(placed[pod]), "{c}");
        assert_eq!(c["devices"][0]["pool"].as_str(), Some(placed[pod]), "{c}");
    }
}

#[test]
fn long_refused_input_is_not_echoed_in_full() {
    // A 1 MB selector: refused (over 10 KiB) with its start echoed, not all of it.
    let expr = "device.driver == 'x' && ".repeat(40_000) + "true";
    let class = format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: big\nspec:\n  selectors:\n  - cel:\n      \
         expression: \"{expr}\"\n"
    );
    for args in [&["check", "-"][..], &["devices", "-", "--class", "big"], &["convert", "-"]] {
        let o = muster_stdin(args, &class);
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(!err.contains("panicked"), "{err}");
        if args[0] != "convert" {
            assert_ne!(o.status.code(), Some(0), "{:?}", args[0]);
            let text = out.clone() + &err;
            assert!(
                text.contains("expression is longer than 10240 bytes"),
                "{:?}: {}",
                args[0],
                &text[..text.len().min(2000)]
            );
            assert!(text.contains("more bytes)"), "{:?}: {}", args[0], &text[..text.len().min(2000)]);
            assert!(text.len() < 4000, "{:?}: {} bytes of messages", args[0], text.len());
        }
    }
    // A 1 MB value where a number belongs: the loader's message quotes its start and end.
    let big = "x".repeat(1 << 20);
    let pod = format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  priority: {big}\n  containers: []\n");
    let o = muster_stdin(&["plan", "-"], &pod);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("<stdin>:6:13: Pod default/p: spec.priority: invalid type: string \"xxx"),
        "{}",
        &err[..err.len().min(500)]
    );
    assert!(err.contains("bytes)\u{2026}xxx") && err.contains("xxx\", expected i32"), "{err}");
    assert!(err.len() < 2000, "{} bytes", err.len());
}

#[test]
fn a_dangling_symlink_is_named_itself() {
    let dir = temp_dir("dangling");
    std::fs::write(dir.join("a.yaml"), "apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n").unwrap();
    std::os::unix::fs::symlink(dir.join("missing.yaml"), dir.join("b.yaml")).unwrap();
    let link = dir.join("b.yaml").display().to_string();
    for cmd in ["plan", "check", "devices"] {
        let o = muster(&[cmd, dir.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        let want = format!("{link}: cannot read: dangling symbolic link to {}", dir.join("missing.yaml").display());
        assert!(stderr(&o).contains(&want), "{cmd}: want {want}\ngot {}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs muster, killing it (and failing) if it has not finished in 60 s.
fn muster_within_a_minute(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("muster {args:?} hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn special_files_in_a_directory_are_skipped_not_opened() {
    let dir = temp_dir("fifo");
    std::fs::write(
        dir.join("a.yaml"),
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n\nstatus:\n  allocatable: {cpu: '1', pods: '1'}\n",
    )
    .unwrap();
    let fifo = dir.join("pipe.yaml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // A directory that links to itself is read once.
    std::os::unix::fs::symlink(&dir, dir.join("loop")).unwrap();
    let want = format!("warning: {}: skipped: not a regular file (a FIFO)", fifo.display());
    for args in
        [&["plan", dir.to_str().unwrap()][..], &["check", dir.to_str().unwrap()], &["convert", dir.to_str().unwrap()]]
    {
        let o = muster_within_a_minute(args);
        assert_eq!(o.status.code(), Some(0), "{:?}: {}", args[0], stderr(&o));
        assert!(stderr(&o).contains(&want), "{:?}: {}", args[0], stderr(&o));
        assert!(stderr(&o).contains("loop: skipped: directory"), "{:?}: {}", args[0], stderr(&o));
    }
    let o = muster_within_a_minute(&["plan", dir.to_str().unwrap()]);
    assert!(stdout(&o).contains("0 placed, 0 unschedulable, 0 skipped on 1 nodes"), "{}", stdout(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn invalid_pools_are_named_with_why() {
    let text = "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\nstatus: {allocatable: {cpu: '4', pods: '10'}}\n\
---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: a}\n\
---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s1}\nspec: {driver: d, nodeName: node-1, \
pool: {name: pool-1, generation: 1, resourceSliceCount: 2}, devices: [{name: dev-1}]}\n\
---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s2}\nspec: {driver: d, nodeName: node-1, \
pool: {name: pool-1, generation: 1, resourceSliceCount: 2}, devices: [{name: dev-1}]}\n\
---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, \
exactly: {deviceClassName: a}}]}}\n\
---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  resourceClaims: [{name: g, resourceClaimName: c}]\n  \
containers: [{name: c, resources: {claims: [{name: g}]}}]\n";
    let want = "0/1 nodes are available: 1 invalid resource pools were encountered. (pool d/pool-1: duplicate device \
                name dev-1)";
    let o = muster_stdin(&["plan", "-"], text);
    assert!(stdout(&o).contains(&format!("default/p: {want}")), "{}", stdout(&o));
    let o = muster_stdin(&["plan", "-", "-o", "json"], text);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["unschedulable"][0]["reason"], want);
}

/// A selector under the per-evaluation cost limit but costly on every device: the command stops
/// evaluating when its total CEL budget is spent, and says so for each device left.
#[test]
fn devices_stop_at_the_command_cel_budget() {
    let dir = std::env::temp_dir().join(format!("muster-budget-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let devices: String = (0..20).map(|i| format!("  - name: d{i}\n")).collect();
    let file = dir.join("slice.yaml");
    std::fs::write(&file, format!("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: s}}\nspec:\n  driver: x.example.com\n  nodeName: n\n  pool: {{name: p, generation: 1, resourceSliceCount: 1}}\n  devices:\n{devices}")).unwrap();
    let list = format!("[{}]", (0..30).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
    let selector = format!("{list}.all(x, {list}.exists(y, y == x))");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["devices", file.to_str().unwrap(), "--selector", &selector])
        .env("MUSTER_CEL_BUDGET", "20000")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("not evaluated: this command's CEL cost budget (20000) is spent"), "{out}");
    let first = out.lines().find(|l| l.split_whitespace().nth(2) == Some("d0")).unwrap_or_default();
    assert!(first.ends_with("yes"), "the first devices are evaluated: {out}");
}

/// `check` evaluates a DeviceClass over the input's devices within the same budget, and says when
/// it stopped.
#[test]
fn check_stops_at_the_command_cel_budget() {
    let dir = std::env::temp_dir().join(format!("muster-check-budget-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let devices: String = (0..20).map(|i| format!("  - name: d{i}\n")).collect();
    let list = format!("[{}]", (0..30).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
    let file = dir.join("cluster.yaml");
    std::fs::write(&file, format!("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: s}}\nspec:\n  driver: x.example.com\n  nodeName: n\n  pool: {{name: p, generation: 1, resourceSliceCount: 1}}\n  devices:\n{devices}---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: costly}}\nspec:\n  selectors:\n  - cel:\n      expression: \"{list}.all(x, {list}.exists(y, y == x))\"\n")).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["check", file.to_str().unwrap()])
        .env("MUSTER_CEL_BUDGET", "20000")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "a warning, not an error: {out}");
    assert!(out.contains("DeviceClass costly: spec.selectors: checked against 6 of the 20 devices of the input's ResourceSlices only: this command's CEL cost budget (20000) is spent"), "{out}");
}

/// `why` judges devices within the same budget, and says how many it left unjudged.
#[test]
fn why_stops_at_the_command_cel_budget() {
    let dir = std::env::temp_dir().join(format!("muster-why-budget-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let devices: String = (0..20).map(|i| format!("  - name: d{i}\n")).collect();
    // Selects no device (x == -1 never holds), at a cost that spends a small budget quickly.
    let list = format!("[{}]", (0..30).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
    let text = format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: n}}\nstatus: {{allocatable: {{cpu: '4', memory: 4Gi, pods: '10'}}}}\n---\n\
         apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: s}}\nspec:\n  driver: x.example.com\n  nodeName: n\n  pool: {{name: p, generation: 1, resourceSliceCount: 1}}\n  devices:\n{devices}---\n\
         apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: costly}}\nspec:\n  selectors:\n  - cel:\n      expression: \"{list}.exists(x, {list}.exists(y, x == -1))\"\n---\n\
         apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: c, namespace: ml}}\nspec:\n  devices:\n    requests:\n    - name: r\n      exactly: {{deviceClassName: costly}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: ml}}\nspec:\n  resourceClaims: [{{name: r, resourceClaimName: c}}]\n  containers: [{{name: c}}]\n"
    );
    let file = dir.join("cluster.yaml");
    std::fs::write(&file, text).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["why", "pod/ml/p", file.to_str().unwrap()])
        .env("MUSTER_CEL_BUDGET", "20000")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("not evaluated: this command's CEL cost budget (20000) is spent"),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `muster plan ... | head -c1`: the reader goes away; muster ends quietly, killed by SIGPIPE as
/// other command-line tools are, not with a panic about a failed write. The plan's JSON (2,000
/// placements) is larger than a pipe's buffer, so the write does meet the closed pipe.
#[test]
fn a_closed_output_pipe_ends_muster_quietly() {
    use std::io::{Read, Write};
    use std::os::unix::process::ExitStatusExt;
    let mut yaml = String::new();
    for i in 0..20 {
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: node-{i}}}\nstatus: {{allocatable: {{cpu: '200', memory: 400Gi, pods: '200'}}}}\n---\n"
        ));
    }
    for i in 0..2000 {
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: pod-{i}, namespace: default}}\nspec: {{containers: [{{name: c, image: x}}]}}\n---\n"
        ));
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["plan", "-", "-o", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(yaml.as_bytes());
    });
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap(); // then the pipe is dropped
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(13), "ended by SIGPIPE: {:?}", out.status);
}
