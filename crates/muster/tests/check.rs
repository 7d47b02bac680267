//! `muster check` and `muster convert` as a user runs them: findings, exit codes, and converted
//! files that load and check clean.

use serde_json::Value;

mod common;
use common::{muster, muster_stdin, root, stderr, stdout};

/// `muster check -o json FILE`: the exit code and the findings.
fn findings(path: &str) -> (Option<i32>, Vec<Value>) {
    let o = muster(&["check", "-o", "json", path]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    (o.status.code(), v.as_array().unwrap().clone())
}

/// (line, severity, field) of each finding.
fn summary(f: &[Value]) -> Vec<(u64, String, String)> {
    f.iter()
        .map(|f| {
            (
                f["line"].as_u64().unwrap(),
                f["severity"].as_str().unwrap().to_string(),
                f["field"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn has(f: &[Value], line: u64, severity: &str, field: &str, text: &str) -> bool {
    f.iter().any(|f| {
        f["line"] == line
            && f["severity"] == severity
            && f["field"] == field
            && f["message"].as_str().unwrap().contains(text)
    })
}

#[test]
fn check_names_every_outdated_form_of_the_seed_article() {
    let o = muster(&["check", "tests/check/seed-examples.yaml"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    insta::assert_snapshot!("check_seed_examples", stdout(&o));
    let (_, f) = findings("tests/check/seed-examples.yaml");
    // workload-spec.md §12, row by row.
    assert!(has(&f, 4, "error", "apiVersion", "DeviceTaintRule in resource.k8s.io/v1"));
    assert!(has(&f, 9, "error", "spec.nodeName", "deviceSelector"));
    assert!(has(&f, 10, "error", "spec.deviceName", "deviceSelector.device"));
    assert!(has(&f, 11, "error", "spec.taints", "one taint"));
    assert!(has(&f, 15, "error", "apiVersion", "serves no DeviceClass in resource.k8s.io/v1alpha3"));
    assert!(has(&f, 23, "warning", "spec.selectors[0].cel.expression", "'nvidia.com' is not a driver's name"));
    assert!(has(&f, 23, "warning", "spec.selectors[0].cel.expression", "productName"));
    assert!(has(&f, 24, "warning", "spec.selectors[0].cel.expression", "memory is a capacity"));
    assert!(has(&f, 24, "error", "spec.selectors[0].cel.expression", "80Gi is not CEL"));
    assert!(has(&f, 25, "warning", "spec.selectors[0].cel.expression", "\"nvlink\""));
    assert!(has(&f, 27, "error", "apiVersion", "ResourceClaimTemplate is GA in resource.k8s.io/v1"));
    assert!(has(&f, 33, "error", "spec.spec.deviceClassName", "devices.requests[]"));
    assert!(has(&f, 34, "error", "spec.spec.count", "exactly.count"));
    assert!(has(&f, 41, "error", "spec.minCount", "schedulingPolicy.gang.minCount"));
    assert!(has(&f, 42, "error", "spec.scheduleTimeoutSeconds", "no scheduleTimeoutSeconds in any version"));
    assert!(has(&f, 49, "warning", "spec.schedulingGroup", "labels have no effect"));
    // The 1.37 forms.
    let fix = |line: u64, field: &str| {
        let at = |x: &&Value| x["line"] == line && x["field"] == field;
        let x = f.iter().filter(at).find(|x| x["severity"] == "error").or_else(|| f.iter().find(at));
        x.unwrap()["fix"].as_str().unwrap().to_string()
    };
    assert_eq!(
        fix(9, "spec.nodeName"),
        "spec.deviceSelector: {driver: gpu.nvidia.com, pool: worker-01, device: nvidia-gpu-0}"
    );
    assert!(
        fix(24, "spec.selectors[0].cel.expression")
            .contains("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0")
    );
    assert_eq!(
        fix(33, "spec.spec.deviceClassName"),
        "spec.spec.devices.requests: [{name: gpus, exactly: {deviceClassName: nvidia-h100-nvlink, allocationMode: ExactCount, count: 8}}]"
    );
    assert!(fix(41, "spec.minCount").starts_with("spec.schedulingPolicy: {gang: {minCount: 4}}"));
    assert_eq!(fix(49, "spec.schedulingGroup"), "spec.schedulingGroup: {podGroupName: training-job-001}");
    // Every finding has the JSON contract's fields, and names its object.
    for x in &f {
        for k in ["file", "line", "column", "severity", "object", "field", "message", "fix"] {
            assert!(x.get(k).is_some(), "{k} missing in {x}");
        }
        assert_eq!(x["file"], "tests/check/seed-examples.yaml");
        assert!(x["object"].as_str().unwrap().contains(' '), "{x}");
    }
    // The loader's errors that a finding explains are not repeated.
    assert_eq!(f.iter().filter(|x| x["line"] == 41).count(), 1, "{f:#?}");
}

#[test]
fn check_reports_missing_references() {
    let (code, f) = findings("tests/check/references.yaml");
    assert_eq!(code, Some(1));
    assert_eq!(
        summary(&f),
        [
            (8, "error".into(), "spec.priorityClassName".into()),
            (10, "error".into(), "spec.schedulingGroup.podGroupName".into()),
            (13, "error".into(), "spec.resourceClaims[0].resourceClaimTemplateName".into()),
            (15, "error".into(), "spec.resourceClaims[1].resourceClaimName".into()),
            (21, "error".into(), "spec.containers[0].resources.claims[0].name".into()),
            (34, "error".into(), "spec.spec.devices.requests[0].exactly.deviceClassName".into()),
            (39, "error".into(), "spec.spec.devices.requests[1].firstAvailable[0].deviceClassName".into()),
            (49, "error".into(), "spec.schedulingPolicy".into()),
        ]
    );
    // A template of another namespace does not count.
    assert!(has(
        &f,
        13,
        "error",
        "spec.resourceClaims[0].resourceClaimTemplateName",
        "ResourceClaimTemplate ml/eight-gpus"
    ));
}

#[test]
fn check_reports_cel_compile_errors_on_their_line() {
    let (code, f) = findings("tests/check/cel-errors.yaml");
    assert_eq!(code, Some(1));
    // The first selector of the class compiles; the second fails on its second line (a folded
    // block), the claim's in a quoted scalar, the subrequest's in a flow mapping.
    let at: Vec<(u64, u64, &str)> = f
        .iter()
        .map(|x| (x["line"].as_u64().unwrap(), x["column"].as_u64().unwrap(), x["field"].as_str().unwrap()))
        .collect();
    assert_eq!(
        at,
        [
            (13, 67, "spec.selectors[1].cel.expression"),
            (28, 98, "spec.devices.requests[0].exactly.selectors[0].cel.expression"),
            (34, 71, "spec.devices.requests[1].firstAvailable[0].selectors[0].cel.expression"),
        ]
    );
    assert!(f[0]["message"].as_str().unwrap().starts_with("class broken: selector #1: CEL compile error:"));
    assert!(f[0]["message"].as_str().unwrap().contains("undeclared reference to 'startswith'"));
    assert!(f[1]["message"].as_str().unwrap().starts_with("claim ml/shared: selector #0: CEL compile error:"));
}

#[test]
fn check_reads_selectors_against_the_input_devices() {
    let (code, f) = findings("tests/check/unknown-attributes.yaml");
    assert_eq!(code, Some(0), "warnings only: {f:#?}");
    assert!(has(&f, 36, "warning", "spec.selectors[0].cel.expression", "attribute gpu.nvidia.com/nvlink"));
    assert!(has(&f, 36, "warning", "spec.selectors[0].cel.expression", "productName, type"));
    assert!(has(&f, 37, "warning", "spec.selectors[0].cel.expression", "memory is a capacity"));
    assert!(has(&f, 47, "warning", "spec.selectors[0].cel.expression", "under 'nvidia.com'"));
    assert!(has(&f, 32, "warning", "spec.selectors", "selects none of the 2 devices"));
    assert!(has(&f, 32, "warning", "spec.selectors", "no such key: nvlink"));
    assert!(has(&f, 55, "warning", "spec.selectors", "selects none of the 2 devices"));
    // The guarded class and the slice itself are fine.
    assert!(f.iter().all(|x| !x["object"].as_str().unwrap().contains("guarded")), "{f:#?}");
    assert_eq!(f.len(), 6, "{f:#?}");
}

#[test]
fn check_names_older_forms_too() {
    let (code, f) = findings("tests/check/old-forms.yaml");
    assert_eq!(code, Some(1));
    assert!(has(&f, 11, "error", "spec.taints", "one rule per taint (2 rules)"));
    // A v1beta1 template is read as v1 where the beta API is enabled: a warning, and its flat
    // request is v1beta1's right form (a v1 object written so is an error, see below).
    assert!(has(&f, 18, "warning", "apiVersion", "only where the beta API is enabled; read as resource.k8s.io/v1"));
    assert!(!f.iter().any(|x| x["line"] == 28), "{f:#?}");
    assert!(has(&f, 38, "error", "spec.deviceClassName", "devices.requests[]"));
    assert!(has(&f, 54, "error", "spec.schedulingPolicy", "required value"));
    assert!(has(&f, 62, "warning", "spec.schedulingGroup", "scheduling.x-k8s.io/pod-group"));
}

/// The v1beta1 form of a request inside a v1 object is an error that says where the fields moved.
#[test]
fn a_v1_claim_with_v1beta1_request_fields_is_an_error() {
    let dir = common::TempDir::new("check-flat");
    let path = dir.join("flat.yaml");
    std::fs::write(&path, "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: two, namespace: ml}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpus\n        deviceClassName: gpu.example.com\n        count: 2\n").unwrap();
    let (code, f) = findings(path.to_str().unwrap());
    assert_eq!(code, Some(1));
    assert!(has(&f, 9, "error", "spec.spec.devices.requests[0]", "deviceClassName, count moved into"), "{f:#?}");
}

#[test]
fn check_passes_the_bundled_examples() {
    // Each example is a cluster of its own (several reuse node names); those without manifests
    // (the openb CSV sample) have nothing to check.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let manifests = |d: &std::path::Path| {
        std::fs::read_dir(d).unwrap().any(|e| {
            let p = e.unwrap().path();
            p.is_dir() || p.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        })
    };
    let mut dirs: Vec<_> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir() && manifests(p)).collect();
    dirs.sort();
    assert!(dirs.len() >= 5);
    for d in dirs {
        let o = muster(&["check", d.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", d.display(), stdout(&o));
        assert!(stdout(&o).starts_with("0 errors, 0 warnings in "), "{}: {}", d.display(), stdout(&o));
    }
}

#[test]
fn check_keeps_the_loaders_errors() {
    let o = muster(&["check", "tests/bad-input/05-bad-quantity.yaml", "tests/bad-input/02-duplicate-key.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("tests/bad-input/05-bad-quantity.yaml:12:17: error: Pod ml/trainer: spec.containers[0].resources.limits.memory: invalid quantity \"80GB\""), "{out}");
    assert!(out.contains("tests/bad-input/02-duplicate-key.yaml:5:3: error: invalid YAML: duplicate key"), "{out}");
    assert!(out.ends_with("2 errors, 0 warnings in 2 files\n"), "{out}");
}

#[test]
fn check_exits_2_when_the_input_cannot_be_read() {
    let o = muster(&["check", "tests/check/no-such-file.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("tests/check/no-such-file.yaml: cannot read"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
}

#[test]
fn check_finds_an_object_defined_in_two_files() {
    let class = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: nvidia-h100-nvlink\nspec: {}\n";
    let o = muster_stdin(&["check", "examples/gpu-training/job.yaml", "-"], class);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stdout(&o),
        "<stdin>:1:1: error: DeviceClass nvidia-h100-nvlink: defined twice; first defined at examples/gpu-training/job.yaml:4:1\n\n\
         1 error, 0 warnings in 2 files\n"
    );
}

#[test]
fn convert_rewrites_the_seed_article_into_valid_1_37_objects() {
    let o = muster(&["convert", "tests/check/seed-examples.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    insta::assert_snapshot!("convert_seed_examples", text);
    // It loads strictly...
    let m = muster_manifest::load_str("converted.yaml", &text).unwrap_or_else(|d| panic!("{d:#?}"));
    let kinds: Vec<String> =
        m.objects.iter().map(|l| format!("{} {}", l.object.api_version(), l.object.kind())).collect();
    assert_eq!(
        kinds,
        [
            "resource.k8s.io/v1 DeviceTaintRule",
            "resource.k8s.io/v1 DeviceClass",
            "resource.k8s.io/v1 ResourceClaimTemplate",
            "scheduling.k8s.io/v1beta1 PodGroup",
            "v1 Pod",
        ]
    );
    // ...and checks without errors or warnings.
    let c = muster_stdin(&["check", "-"], &text);
    assert_eq!(c.status.code(), Some(0), "{}", stdout(&c));
    assert_eq!(stdout(&c), "0 errors, 0 warnings in 1 file\n");
}

#[test]
fn convert_rewrites_older_forms_and_keeps_valid_objects_as_written() {
    let o = muster(&["convert", "tests/check/old-forms.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let m = muster_manifest::load_str("converted.yaml", &text).unwrap_or_else(|d| panic!("{d:#?}"));
    let names: Vec<String> = m.objects.iter().map(|l| l.object.display_name()).collect();
    assert_eq!(
        names,
        [
            "DeviceTaintRule node-7-gpu-3-0",
            "DeviceTaintRule node-7-gpu-3-1",
            "ResourceClaimTemplate ml/two-gpus",
            "ResourceClaim ml/one-gpu",
            "DeviceClass gpu.example.com",
            "PodGroup ml/infer",
            "Pod ml/infer-0",
        ]
    );
    // The DeviceClass was valid: it is copied as written.
    let original = std::fs::read_to_string(root().join("tests/check/old-forms.yaml")).unwrap();
    let class = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu.example.com\nspec:\n  selectors:\n  - cel:\n      expression: device.driver == 'gpu.example.com'\n";
    assert!(original.contains(class) && text.contains(class));
    let c = muster_stdin(&["check", "-"], &text);
    assert_eq!(stdout(&c), "0 errors, 0 warnings in 1 file\n");
    // Files that need nothing are printed unchanged.
    let same = muster(&["convert", "examples/gpu-training/job.yaml"]);
    assert_eq!(stdout(&same), std::fs::read_to_string(root().join("examples/gpu-training/job.yaml")).unwrap());
}

#[test]
fn convert_says_what_it_could_not_infer() {
    let rule = "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceTaintRule\nmetadata:\n  name: r\nspec:\n  nodeName: n1\n  deviceName: d0\n  taints:\n  - {key: k, effect: NoExecute}\n";
    let o = muster_stdin(&["convert", "-"], rule);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("# muster convert: fill in spec.deviceSelector.driver"), "{text}");
    assert!(!text.contains("driver:"), "{text}");
    muster_manifest::load_str("r.yaml", &text).unwrap_or_else(|d| panic!("{d:#?}"));
    // In a List, items are converted in place.
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}",
        "apiVersion: scheduling.k8s.io/v1alpha3\n  kind: PodGroup\n  metadata: {name: g}\n  spec: {minCount: 2}\n"
    );
    let o = muster_stdin(&["convert", "-"], &list);
    let text = stdout(&o);
    assert!(
        text.contains("  - apiVersion: scheduling.k8s.io/v1beta1")
            || text.contains("- apiVersion: scheduling.k8s.io/v1beta1"),
        "{text}"
    );
    let m = muster_manifest::load_str("l.yaml", &text).unwrap_or_else(|d| panic!("{d:#?}\n{text}"));
    assert_eq!(m.objects.len(), 1);
}

#[test]
fn convert_writes_in_place() {
    let dir = std::env::temp_dir().join(format!("muster-convert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("seed.yaml");
    std::fs::copy(root().join("tests/check/seed-examples.yaml"), &file).unwrap();
    let o = muster(&["convert", "-w", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let printed = muster(&["convert", "tests/check/seed-examples.yaml"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), stdout(&printed));
    let again = muster(&["check", file.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
    // Converting a converted file changes nothing.
    let o = muster(&["convert", "-w", file.to_str().unwrap()]);
    assert!(stderr(&o).contains("nothing to convert"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn workload_objects_check_clean_and_convert_keeps_them_byte_for_byte() {
    for (dir, file) in [
        ("tests/scenarios/workload-controllers", "workloads.yaml"),
        ("tests/scenarios/workload-controllers-dump", "dump.yaml"),
        ("examples/quickstart", "workloads.yaml"),
    ] {
        let (code, f) = findings(dir);
        assert_eq!(code, Some(0), "{dir}: {f:?}");
        assert!(f.is_empty(), "{dir}: {f:?}");
        let path = format!("{dir}/{file}");
        let o = muster(&["convert", dir]);
        assert_eq!(o.status.code(), Some(0), "{dir}: {}", stderr(&o));
        let written = std::fs::read_to_string(root().join(&path)).unwrap();
        assert!(stdout(&o).contains(&written), "{path}");
    }
}

#[test]
fn check_follows_references_in_workload_templates() {
    let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ml}\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      priorityClassName: gold\n      resourceClaims:\n      - {name: gpu, resourceClaimTemplateName: one-gpu}\n      containers:\n      - name: web\n        image: nginx\n";
    let o = muster_stdin(&["check", "-o", "json", "-"], text);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    let f = v.as_array().unwrap();
    assert_eq!(
        summary(f),
        [
            (11, "error".to_string(), "spec.template.spec.priorityClassName".to_string()),
            (13, "error".to_string(), "spec.template.spec.resourceClaims[0].resourceClaimTemplateName".to_string()),
        ],
        "{f:?}"
    );
}

/// `check` and `plan` judge a negative quantity alike: the same messages, file, line and field.
#[test]
fn check_and_plan_reject_negative_quantities_alike() {
    let path = "tests/bad-input/15-negative-quantity.yaml";
    let checked = stdout(&muster(&["check", path]));
    let planned = stderr(&muster(&["plan", path]));
    for (at, object, field, value) in [
        ("3:1", "Node small", "status.allocatable.cpu", "-1"),
        ("10:1", "Pod ml/greedy", "spec.containers[0].resources.requests.cpu", "-100"),
    ] {
        let message = format!("{object}: {field}: invalid quantity \"{value}\": must be greater than or equal to 0");
        assert!(checked.contains(&format!("{path}:{at}: error: {message}")), "{checked}");
        assert!(planned.contains(&format!("error: {path}:{at}: {message}")), "{planned}");
    }
}

/// `check` and `plan` judge what the API server refuses alike (gang sizes, taint effects,
/// toleration and node affinity operators, PriorityClasses, device requests, keys in the wrong
/// letter case, a document that is not YAML among valid ones): every error `plan` gives (exit 2)
/// is one `check` gives (exit 1), with the same file, line, object and field.
#[test]
fn check_and_plan_reject_api_server_rules_alike() {
    for (path, errors) in [
        ("tests/bad-input/16-gang-min-count.yaml", 2),
        ("tests/bad-input/17-unsupported-operators.yaml", 4),
        ("tests/bad-input/18-priority-classes.yaml", 3),
        ("tests/bad-input/19-device-count.yaml", 4),
        ("tests/bad-input/21-resource-slices.yaml", 2),
        ("tests/bad-input/22-miscased-keys.yaml", 5),
        ("tests/bad-input/23-admin-access.yaml", 2),
        ("tests/bad-input/24-names.yaml", 4),
    ] {
        let (c, p) = (muster(&["check", path]), muster(&["plan", path]));
        assert_eq!(c.status.code(), Some(1), "{path}");
        assert_eq!(p.status.code(), Some(2), "{path}");
        let (checked, planned) = (stdout(&c), stderr(&p));
        let lines: Vec<&str> = planned.lines().filter_map(|l| l.strip_prefix("error: ")).collect();
        assert_eq!(lines.len(), errors, "{planned}");
        for line in lines {
            let (at, message) = line.strip_prefix(path).unwrap().trim_start_matches(':').split_once(": ").unwrap();
            assert!(checked.contains(&format!("{path}:{at}: error: {message}")), "{line}\n{checked}");
        }
    }
}

/// A gang's device topology (beyond upstream): a malformed key or scope is an error in `check`
/// and `plan` alike, with the object and the annotation; an attribute no device publishes is a
/// warning that names what the driver publishes, and so is one value on every node in cluster
/// scope.
#[test]
fn device_topology_annotations_are_checked() {
    let path = "tests/check/device-topology.yaml";
    let (code, f) = findings(path);
    assert_eq!(code, Some(1));
    let field = "metadata.annotations[muster.dev/device-topology-key]";
    assert!(has(&f, 16, "error", field, "must be a fully qualified device attribute"), "{f:#?}");
    let scope = "metadata.annotations[muster.dev/device-topology-scope]";
    assert!(has(&f, 25, "error", scope, "Unsupported value: \"rack\""), "{f:#?}");
    assert!(
        has(
            &f,
            39,
            "warning",
            field,
            "no device of the input's ResourceSlices has the attribute gpu.nvidia.com/cliqueId"
        ),
        "{f:#?}"
    );
    assert!(has(&f, 39, "warning", field, "attributes under 'gpu.nvidia.com': cliqueID, partition8, type"), "{f:#?}");
    let one = "gpu.nvidia.com/partition8 is 0 on all 2 nodes that publish it: in cluster scope they make one domain";
    assert!(has(&f, 74, "warning", field, one), "{f:#?}");
    assert_eq!(f.len(), 4, "{f:#?}");
    let p = muster(&["plan", path]);
    assert_eq!(p.status.code(), Some(2), "{}", stderr(&p));
    assert!(
        stderr(&p).contains("PodGroup ml/bare-name: metadata.annotations[muster.dev/device-topology-key]"),
        "{}",
        stderr(&p)
    );
}

/// An input that lists its Namespaces but not one its pods live in: `check` warns (exit 0) and
/// `plan` plans with the same warning, once per namespace.
#[test]
fn a_pod_in_a_namespace_the_input_does_not_define_is_a_warning() {
    let path = "tests/check/undefined-namespace.yaml";
    let message = "Pod shop/web-1: metadata.namespace: namespace \"shop\" is not among the input's Namespaces; \
                   muster plans as if it existed without labels";
    let c = muster(&["check", path]);
    assert_eq!(c.status.code(), Some(0), "{}", stdout(&c));
    assert!(stdout(&c).contains(&format!("{path}:12:1: warning: {message}")), "{}", stdout(&c));
    assert!(stdout(&c).ends_with("0 errors, 1 warning in 1 file\n"), "{}", stdout(&c));
    let p = muster(&["plan", path]);
    assert_eq!(p.status.code(), Some(0), "{}", stderr(&p));
    assert!(stdout(&p).contains(&format!("warning: {message}")), "{}", stdout(&p));
}

/// An allocation naming a device no ResourceSlice publishes is not an API-server rule (drivers
/// may lag): `check` warns (exit 0) and `plan` plans with a warning line, both naming the claim
/// and the device.
#[test]
fn unpublished_allocated_device_is_a_warning_in_check_and_plan() {
    let path = "tests/check/unpublished-allocation.yaml";
    let message = "ResourceClaim ml/stale-gpu: status.allocation.devices.results[0]: allocated device \
                   gpu.example.com/node-1/gpu-7 (driver/pool/device) is not published by any ResourceSlice in the input";
    let c = muster(&["check", path]);
    assert_eq!(c.status.code(), Some(0), "{}", stdout(&c));
    assert!(stdout(&c).contains(&format!("{path}:27:1: warning: {message}")), "{}", stdout(&c));
    let p = muster(&["plan", path]);
    assert_eq!(p.status.code(), Some(0), "{}", stderr(&p));
    assert!(stdout(&p).contains(&format!("warning: {message}")), "{}", stdout(&p));
}

/// A selector too costly for the API server (estimated worst case above 1,000,000) is refused
/// alike by `check` and `plan`, in a DeviceClass and in a claim.
#[test]
fn check_and_plan_refuse_selectors_too_complex_alike() {
    let path = "tests/bad-input/20-selector-too-complex.yaml";
    let checked = stdout(&muster(&["check", path]));
    let planned = stderr(&muster(&["plan", path]));
    for (at, object, field) in [
        ("3:1", "DeviceClass every-pair", "spec.selectors[0].cel.expression"),
        ("14:1", "ResourceClaim ml/picky", "spec.devices.requests[0].exactly.selectors[0].cel.expression"),
    ] {
        let message = format!("{object}: {field}: Forbidden: too complex, exceeds cost limit");
        assert!(checked.contains(&format!("{path}:{at}: error: {message}")), "{checked}");
        assert!(planned.contains(&format!("error: {path}:{at}: {message}")), "{planned}");
    }
}

/// `devices` refuses the ResourceSlices `check` and `plan` refuse, with the same lines, instead of
/// listing devices of a slice that could not exist.
#[test]
fn devices_refuses_the_slices_plan_refuses() {
    let path = "tests/bad-input/21-resource-slices.yaml";
    let (d, p) = (muster(&["devices", path]), muster(&["plan", path]));
    assert_eq!(d.status.code(), Some(2));
    assert!(stdout(&d).is_empty(), "no device listed");
    let errors = |s: String| s.lines().filter(|l| l.starts_with("error: ")).map(String::from).collect::<Vec<_>>();
    let listed = errors(stderr(&d));
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed, errors(stderr(&p)));
}

/// A claim's (or template's, or subrequest's) own selectors that, with its class, select no device
/// of the input are a warning naming what the devices report for what the selectors test; a
/// template spelled as the driver publishes is clean.
#[test]
fn claim_selectors_that_select_no_device_are_a_warning() {
    let path = "tests/check/claim-selects-nothing.yaml";
    let o = muster(&["check", path]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!(
        "{path}:35:9: warning: ResourceClaim ml/misspelled: spec.devices.requests[0].exactly.selectors: with class gpu, \
         selects none of the 2 devices of the input's ResourceSlices; the devices report attribute gpu.example.com/family: \"Hopper\" (2)"
    )), "{out}");
    assert!(out.contains("ResourceClaimTemplate ml/too-big: spec.spec.devices.requests[0].firstAvailable[0].selectors: with class gpu, selects none"), "{out}");
    assert!(out.contains("the devices report capacity gpu.example.com/memory: 80Gi (2)"), "{out}");
    assert!(!out.contains("ml/hopper"), "{out}");
    assert!(out.contains("0 errors, 2 warnings"), "{out}");
}

/// For a whole tree of bad input (files that do not load beside files whose objects break the
/// API server's rules), `check` and `plan` report the same number of errors, each of `plan`'s on
/// an object `check` names in the same file (`check` words an outdated form as such, and places a
/// missing reference on its field).
#[test]
fn check_and_plan_report_as_many_errors_for_a_tree() {
    let (c, p) = (muster(&["check", "tests/bad-input"]), muster(&["plan", "tests/bad-input"]));
    let (checked, planned) = (stdout(&c), stderr(&p));
    let plan_errors: Vec<&str> = planned.lines().filter_map(|l| l.strip_prefix("error: ")).collect();
    let check_errors: Vec<&str> = checked.lines().filter(|l| l.contains(": error: ")).collect();
    assert!(plan_errors.len() >= 39, "{planned}");
    assert_eq!(check_errors.len(), plan_errors.len(), "{checked}\n{planned}");
    assert!(planned.contains(&format!("{} errors in the input", plan_errors.len())), "{planned}");
    for line in &plan_errors {
        // `file:line:col: Object name: ...` → the file and the object.
        let (place, rest) = line.split_once(": ").unwrap();
        let file = place.split(':').next().unwrap();
        let object = rest.split(": ").next().unwrap();
        assert!(
            check_errors.iter().any(|c| c.starts_with(file) && c.contains(&format!(": error: {object}"))),
            "{line}\n{checked}"
        );
    }
}

/// A device's node-allocatable resources in the 1.36 form are read as 1.37's with a warning that
/// names the new form, worded alike by `check` and `plan`; `convert` writes the 1.37 form, which
/// loads with only the note that muster does not act on the (alpha) feature.
#[test]
fn node_allocatable_resources_in_the_1_36_form_are_read_with_a_warning() {
    let path = "tests/check/node-allocatable-1-36.yaml";
    let (c, p) = (muster(&["check", path]), muster(&["plan", path]));
    assert_eq!(c.status.code(), Some(0), "{}", stdout(&c));
    assert_eq!(p.status.code(), Some(0), "{}", stderr(&p));
    let want = "ResourceSlice n1-cpus: spec.devices[0].nodeAllocatableResourceMappings: the Kubernetes 1.36 form of \
                node-allocatable resources (alpha, gate DRANodeAllocatableResources); read as 1.37's `nodeAllocatableResources`";
    assert!(stdout(&c).contains(&format!("{path}:18:5: warning: {want}")), "{}", stdout(&c));
    assert!(stdout(&p).contains(&format!("warning: {path}:18:5: {want}")), "{}", stdout(&p));
    let converted = muster(&["convert", path]);
    assert_eq!(converted.status.code(), Some(0), "{}", stderr(&converted));
    let out = stdout(&converted);
    assert!(out.contains("nodeAllocatableResources:") && out.contains("capacityMultiplier"), "{out}");
    let m = muster_manifest::load_str("converted.yaml", &out).expect("loads");
    let fields: Vec<_> = m.warnings.iter().filter_map(|w| w.field.clone()).collect();
    assert_eq!(fields, ["spec.devices[0].nodeAllocatableResources"]);
    assert!(m.warnings[0].message.contains("read but not acted on"), "{:?}", m.warnings);
}
