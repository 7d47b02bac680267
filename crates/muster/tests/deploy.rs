//! The deployment files (`deploy/`, `Dockerfile`): the plain manifests parse into Kubernetes 1.37
//! objects with no field k8s-openapi does not know; the ClusterRole grants exactly the RBAC table
//! of `muster run` (shared/design/live-and-sim.md section 2, one row per rule below), the Role
//! exactly the leader-election Lease; the Deployment runs `muster run` with its flags, probes and
//! a locked-down security context; the ConfigMap holds a configuration muster accepts; and the
//! Helm chart, rendered with its default values as release `muster` in `muster-system`, gives
//! the same objects as the plain manifests (the Namespace aside).
//!
//! Helm is not installable here, so the chart's templates keep to plain substitution
//! (`{{ .Values.a.b }}`, `{{ .Release.Namespace }}`, `{{ .Release.Name }}`) and [`render`] does
//! it; any other `{{` fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PodSpec, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

mod common;
pub use common::rbac::{RequestAttributes, cluster_role_allows, request_attributes, rule_allows};
use common::root;

const NAMESPACE: &str = "muster-system";
const NAME: &str = "muster";
const MANIFESTS: &str = "deploy/manifests/muster.yaml";
const CHART: &str = "deploy/helm/muster";

/// What `muster run` may do cluster-wide: (API group, resources, verbs), one row per rule of the
/// table in live-and-sim.md section 2, less the Lease (which the Role holds).
const RBAC_TABLE: &[(&str, &[&str], &[&str])] = &[
    ("", &["pods"], &["get", "list", "watch", "delete"]),
    ("", &["pods/binding"], &["create"]),
    ("", &["pods/status"], &["patch"]),
    ("", &["nodes"], &["list", "watch"]),
    ("", &["namespaces"], &["list", "watch"]),
    ("", &["persistentvolumeclaims"], &["get", "list", "watch", "update"]),
    ("", &["persistentvolumes"], &["list", "watch", "update"]),
    ("storage.k8s.io", &["storageclasses", "csinodes", "csidrivers", "csistoragecapacities"], &["list", "watch"]),
    ("", &["services", "replicationcontrollers"], &["list", "watch"]),
    ("apps", &["replicasets", "statefulsets"], &["list", "watch"]),
    ("events.k8s.io", &["events"], &["create", "patch"]),
    ("resource.k8s.io", &["deviceclasses", "resourceslices", "devicetaintrules"], &["list", "watch"]),
    ("resource.k8s.io", &["resourceclaims"], &["get", "list", "watch", "create", "update"]),
    ("resource.k8s.io", &["resourceclaims/status"], &["update", "patch"]),
    ("resource.k8s.io", &["resourceclaims/binding"], &["update", "patch"]),
    ("scheduling.k8s.io", &["priorityclasses", "workloads", "podgroups", "compositepodgroups"], &["list", "watch"]),
    ("scheduling.k8s.io", &["podgroups/status", "compositepodgroups/status"], &["patch"]),
    ("policy", &["poddisruptionbudgets"], &["list", "watch"]),
];

/// The flags `muster run` takes; an argument of the Deployment outside them is a typo.
const RUN_FLAGS: &[&str] = &[
    "config",
    "scheduler-name",
    "leader-elect",
    "lease-namespace",
    "http-listen",
    "log-format",
    "kube-api-qps",
    "kube-api-burst",
    "kubeconfig",
];

// ---------------------------------------------------------------------------------------------
// Reading the files

fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The documents of a multi-document YAML stream, as JSON values (empty documents skipped).
fn documents(file: &str, text: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// `doc` as a typed k8s-openapi object; it must serialize back to exactly `doc`, so that a
/// misspelt or misplaced field (which deserialization would silently drop) fails.
fn typed<T: DeserializeOwned + Serialize>(file: &str, doc: &Value) -> T {
    let object: T = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{file}: {e}\n{doc:#}"));
    let back = serde_json::to_value(&object).unwrap();
    assert_eq!(back, *doc, "{file}: an object does not round-trip through k8s-openapi (unknown or misplaced field?)");
    object
}

fn key(doc: &Value) -> (String, String, String) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (s(&doc["kind"]), s(&doc["metadata"]["namespace"]), s(&doc["metadata"]["name"]))
}

/// The plain manifests, parsed and typed.
struct Manifests {
    docs: Vec<Value>,
    namespace: Namespace,
    service_account: ServiceAccount,
    cluster_role: ClusterRole,
    cluster_role_binding: ClusterRoleBinding,
    role: Role,
    role_binding: RoleBinding,
    config_map: ConfigMap,
    deployment: Deployment,
    service: Service,
}

fn one<T>(kind: &str, mut found: Vec<T>) -> T {
    assert_eq!(found.len(), 1, "{MANIFESTS}: expected one {kind}, found {}", found.len());
    found.pop().unwrap()
}

fn manifests() -> Manifests {
    let docs = documents(MANIFESTS, &read(MANIFESTS));
    let of = |kind: &str| -> Vec<&Value> { docs.iter().filter(|d| d["kind"] == kind).collect() };
    let known = [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
    ];
    for d in &docs {
        let kind = d["kind"].as_str().unwrap_or_default();
        assert!(known.contains(&kind), "{MANIFESTS}: unexpected object kind {kind:?}");
        if kind != "Namespace" && kind != "ClusterRole" && kind != "ClusterRoleBinding" {
            assert_eq!(d["metadata"]["namespace"], NAMESPACE, "{MANIFESTS}: {kind} outside {NAMESPACE}");
        }
    }
    let keys: BTreeSet<_> = docs.iter().map(key).collect();
    assert_eq!(keys.len(), docs.len(), "{MANIFESTS}: an object appears twice");
    macro_rules! get {
        ($t:ty, $kind:literal) => {
            one($kind, of($kind).into_iter().map(|d| typed::<$t>(MANIFESTS, d)).collect())
        };
    }
    Manifests {
        namespace: get!(Namespace, "Namespace"),
        service_account: get!(ServiceAccount, "ServiceAccount"),
        cluster_role: get!(ClusterRole, "ClusterRole"),
        cluster_role_binding: get!(ClusterRoleBinding, "ClusterRoleBinding"),
        role: get!(Role, "Role"),
        role_binding: get!(RoleBinding, "RoleBinding"),
        config_map: get!(ConfigMap, "ConfigMap"),
        deployment: get!(Deployment, "Deployment"),
        service: get!(Service, "Service"),
        docs,
    }
}

// ---------------------------------------------------------------------------------------------
// The chart renderer

/// Renders a template with plain substitution: `{{ .Values.a.b }}` (a scalar of `values`),
/// `{{ .Release.Namespace }}` and `{{ .Release.Name }}`. Any other action is an error, as is a
/// missing, null, list or map value.
fn render(template: &str, values: &Value, release: &str, namespace: &str) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| format!("unclosed {{{{ in {:?}", &rest[start..]))?;
        let action = &after[..end];
        let expr = action.trim();
        if action.starts_with('-') || action.ends_with('-') || action == expr {
            return Err(format!("{{{{{action}}}}}: write `{{{{ .Values.x }}}}` with one space inside, no trimming"));
        }
        let text = match expr {
            ".Release.Namespace" => namespace.to_string(),
            ".Release.Name" => release.to_string(),
            _ => {
                let path = expr
                    .strip_prefix(".Values.")
                    .filter(|p| {
                        p.split('.').all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                    })
                    .ok_or_else(|| {
                        format!("{{{{{action}}}}}: only .Values.a.b, .Release.Namespace and .Release.Name")
                    })?;
                let value = path
                    .split('.')
                    .try_fold(values, |v, k| v.get(k))
                    .ok_or_else(|| format!("no value .Values.{path}"))?;
                match value {
                    Value::String(s) => s.clone(),
                    Value::Bool(b) => b.to_string(),
                    // Helm reads numbers as float64 and prints 50.0 as 50.
                    Value::Number(n) => match n.as_f64() {
                        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
                        _ => n.to_string(),
                    },
                    other => return Err(format!(".Values.{path} is {other}, not a scalar")),
                }
            }
        };
        out.push_str(&text);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    if out.contains("}}") {
        return Err("a `}}` without its `{{`".to_string());
    }
    Ok(out)
}

fn chart_values() -> Value {
    let file = format!("{CHART}/values.yaml");
    serde_saphyr::from_str(&read(&file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Every template of the chart rendered with the default values as release `muster` in
/// `muster-system`: (file name, text), sorted by name.
fn rendered_templates() -> Vec<(String, String)> {
    let values = chart_values();
    let dir = root().join(CHART).join("templates");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let out =
                render(&text, &values, NAME, NAMESPACE).unwrap_or_else(|e| panic!("{CHART}/templates/{name}: {e}"));
            (name, out)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// RBAC

/// (group, resource, verb, resourceName) for each grant of `rules`.
fn grants(rules: &[PolicyRule]) -> BTreeSet<(String, String, String, Option<String>)> {
    let mut out = BTreeSet::new();
    for rule in rules {
        let names: Vec<Option<String>> = match rule.resource_names.as_deref() {
            None | Some([]) => vec![None],
            Some(names) => names.iter().cloned().map(Some).collect(),
        };
        for g in rule.api_groups.iter().flatten() {
            for r in rule.resources.iter().flatten() {
                for v in &rule.verbs {
                    for n in &names {
                        out.insert((g.clone(), r.clone(), v.clone(), n.clone()));
                    }
                }
            }
        }
    }
    out
}

fn assert_no_wildcard(what: &str, rules: &[PolicyRule]) {
    for rule in rules {
        let words = rule.api_groups.iter().chain(rule.resources.iter()).chain(rule.resource_names.iter()).flatten();
        for w in words.chain(&rule.verbs) {
            assert!(!w.contains('*'), "{what}: wildcard {w:?} in {rule:?}");
        }
        assert!(rule.non_resource_urls.is_none(), "{what}: nonResourceURLs in {rule:?}");
        assert!(!rule.verbs.is_empty(), "{what}: a rule without verbs");
    }
}

#[test]
fn manifests_are_kubernetes_objects_in_muster_system() {
    let m = manifests();
    assert_eq!(m.namespace.metadata.name.as_deref(), Some(NAMESPACE));
    assert_eq!(m.docs.len(), 9);
    for name in [&m.service_account.metadata.name, &m.cluster_role.metadata.name, &m.deployment.metadata.name] {
        assert_eq!(name.as_deref(), Some(NAME));
    }
}

#[test]
fn the_cluster_role_grants_exactly_the_rbac_table() {
    let m = manifests();
    let rules = m.cluster_role.rules.clone().unwrap_or_default();
    assert_no_wildcard("ClusterRole muster", &rules);
    assert!(m.cluster_role.aggregation_rule.is_none());
    let expected: BTreeSet<_> = RBAC_TABLE
        .iter()
        .flat_map(|(g, rs, vs)| {
            rs.iter().flat_map(move |r| vs.iter().map(move |v| (g.to_string(), r.to_string(), v.to_string(), None)))
        })
        .collect();
    let actual = grants(&rules);
    let missing: Vec<_> = expected.difference(&actual).collect();
    let extra: Vec<_> = actual.difference(&expected).collect();
    assert!(missing.is_empty() && extra.is_empty(), "ClusterRole muster: missing {missing:?}, extra {extra:?}");
    // One rule per row, so that deploy/README.md can say what each is for.
    assert_eq!(rules.len(), RBAC_TABLE.len());

    // What muster does is allowed; what it must not do is not.
    let allowed = |g: &str, r: &str, v: &str| cluster_role_allows(&rules, g, r, v, Some("x"));
    for (g, r, v) in [
        ("", "pods", "watch"),
        ("", "pods/binding", "create"),
        ("", "pods/status", "patch"),
        ("resource.k8s.io", "resourceclaims/status", "update"),
        ("resource.k8s.io", "resourceclaims/binding", "patch"),
        ("scheduling.k8s.io", "podgroups/status", "patch"),
        ("events.k8s.io", "events", "create"),
        ("storage.k8s.io", "csistoragecapacities", "list"),
    ] {
        assert!(allowed(g, r, v), "{g}/{r} {v} should be allowed");
    }
    for (g, r, v) in [
        ("", "secrets", "get"),
        ("", "pods", "create"),
        ("", "pods", "update"),
        ("", "pods/eviction", "create"),
        ("", "nodes", "patch"),
        ("", "events", "create"),
        ("", "configmaps", "get"),
        ("", "namespaces", "update"),
        ("", "persistentvolumeclaims", "delete"),
        ("storage.k8s.io", "csistoragecapacities", "create"),
        ("coordination.k8s.io", "leases", "get"),
        ("resource.k8s.io", "resourceslices", "update"),
        ("resource.k8s.io", "deviceclasses", "delete"),
        ("scheduling.k8s.io", "podgroups", "update"),
        ("rbac.authorization.k8s.io", "clusterroles", "get"),
    ] {
        assert!(!allowed(g, r, v), "{g}/{r} {v} should not be allowed");
    }
}

#[test]
fn the_role_holds_exactly_the_lease_in_muster_system() {
    let m = manifests();
    let rules = m.role.rules.clone().unwrap_or_default();
    assert_eq!(m.role.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert_no_wildcard("Role", &rules);
    let lease = |v: &str, n: Option<&str>| {
        ("coordination.k8s.io".to_string(), "leases".to_string(), v.to_string(), n.map(str::to_string))
    };
    let expected = BTreeSet::from([lease("create", None), lease("get", Some(NAME)), lease("patch", Some(NAME))]);
    assert_eq!(grants(&rules), expected);
    let allows = |v: &str, n: Option<&str>| cluster_role_allows(&rules, "coordination.k8s.io", "leases", v, n);
    assert!(allows("create", None));
    assert!(!allows("update", Some(NAME)), "kube-lease-manager patches the Lease");
    for v in ["get", "patch"] {
        assert!(allows(v, Some(NAME)), "{v} lease muster");
        assert!(!allows(v, Some("kube-scheduler")), "{v} another lease");
    }
    assert!(!allows("delete", Some(NAME)));
    assert!(!allows("list", None));
    // The Role works in its own namespace only.
    let get = request_attributes("GET", "/apis/coordination.k8s.io/v1/namespaces/muster-system/leases/muster").unwrap();
    assert!(get.allowed_by(&[], &[(NAMESPACE, &rules)]));
    let elsewhere =
        request_attributes("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/muster").unwrap();
    assert!(!elsewhere.allowed_by(&[], &[(NAMESPACE, &rules)]));
}

#[test]
fn the_bindings_give_the_roles_to_the_service_account() {
    let m = manifests();
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: m.service_account.metadata.name.clone().unwrap(),
        namespace: Some(NAMESPACE.into()),
        api_group: None,
    };
    assert_eq!(m.service_account.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert_eq!(m.cluster_role_binding.subjects.as_deref(), Some(std::slice::from_ref(&subject)));
    assert_eq!(
        m.cluster_role_binding.role_ref,
        RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: m.cluster_role.metadata.name.clone().unwrap()
        }
    );
    assert_eq!(m.role_binding.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert_eq!(m.role_binding.subjects.as_deref(), Some(std::slice::from_ref(&subject)));
    assert_eq!(
        m.role_binding.role_ref,
        RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: m.role.metadata.name.clone().unwrap()
        }
    );
}

// ---------------------------------------------------------------------------------------------
// The Deployment

/// The `--flag=value` arguments after `run`.
fn run_flags(args: &[String]) -> BTreeMap<String, Vec<String>> {
    assert_eq!(args.first().map(String::as_str), Some("run"), "the container must run `muster run`: {args:?}");
    let mut flags: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for a in &args[1..] {
        let (k, v) = a
            .strip_prefix("--")
            .and_then(|f| f.split_once('='))
            .unwrap_or_else(|| panic!("argument {a:?}: write flags as --name=value"));
        assert!(RUN_FLAGS.contains(&k), "argument {a:?}: `muster run` has no flag --{k}");
        assert!(run_help().contains(&format!("--{k} ")), "argument {a:?}: `muster run --help` does not list --{k}");
        flags.entry(k.to_string()).or_default().push(v.to_string());
    }
    flags
}

/// `muster run --help`, from the binary.
fn run_help() -> String {
    let out = common::muster(&["run", "--help"]);
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The one value of `--k`.
fn single<'a>(flags: &'a BTreeMap<String, Vec<String>>, k: &str) -> &'a str {
    let v = flags.get(k).unwrap_or_else(|| panic!("--{k} missing"));
    assert_eq!(v.len(), 1, "--{k} given {} times", v.len());
    &v[0]
}

fn pod_spec(d: &Deployment) -> &PodSpec {
    d.spec.template.spec.as_ref().unwrap()
}

#[test]
fn the_deployment_runs_muster_leader_elected_and_locked_down() {
    let m = manifests();
    let d = &m.deployment;
    let spec = &d.spec;
    assert_eq!(spec.replicas, Some(2));
    let pod_labels = spec.template.metadata.as_ref().unwrap().labels.clone().unwrap();
    for (k, v) in spec.selector.match_labels.iter().flatten() {
        assert_eq!(pod_labels.get(k), Some(v), "the selector must match the pod template");
    }
    let pod = pod_spec(d);
    assert_eq!(pod.service_account_name, m.service_account.metadata.name);
    assert_ne!(pod.automount_service_account_token, Some(false), "muster needs its token to reach the API server");
    assert!(pod.scheduler_name.is_none(), "muster's own pods go to the default scheduler");
    assert_eq!(pod.containers.len(), 1);
    let c = &pod.containers[0];
    let image = c.image.as_deref().unwrap();
    assert!(image.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION"))), "image {image} is not the crate's version");

    // Arguments: `run` and known flags; the config file is the ConfigMap's key, mounted.
    let flags = run_flags(c.args.as_deref().unwrap_or_default());
    assert!(c.command.is_none(), "the image's ENTRYPOINT is /muster");
    let single = |k: &str| single(&flags, k);
    let config = Path::new(single("config"));
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|vm| Path::new(&vm.mount_path) == config.parent().unwrap())
        .unwrap_or_else(|| panic!("nothing mounted where --config={} points", config.display()));
    assert_eq!(mount.read_only, Some(true));
    let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).unwrap();
    let cm = volume.config_map.as_ref().expect("the config volume is the ConfigMap");
    assert_eq!(Some(&cm.name), m.config_map.metadata.name.as_ref());
    let file = config.file_name().unwrap().to_str().unwrap();
    assert!(m.config_map.data.as_ref().unwrap().contains_key(file), "the ConfigMap has no key {file}");
    assert_eq!(single("leader-elect"), "true");
    assert!(["text", "json"].contains(&single("log-format")));
    single("kube-api-qps").parse::<f64>().unwrap();
    single("kube-api-burst").parse::<u32>().unwrap();
    assert!(!flags.contains_key("lease-namespace"), "the Lease namespace comes from POD_NAMESPACE");

    // POD_NAMESPACE from the downward API (the Lease's namespace).
    let env = c.env.iter().flatten().find(|e| e.name == "POD_NAMESPACE").expect("POD_NAMESPACE");
    let field = env.value_from.as_ref().and_then(|v| v.field_ref.as_ref()).expect("POD_NAMESPACE from a fieldRef");
    assert_eq!(field.field_path, "metadata.namespace");

    // The HTTP port: listened on, named `metrics`, probed, and what the Service targets.
    let port = single("http-listen").rsplit_once(':').unwrap().1.parse::<i32>().unwrap();
    assert_eq!(port, 10259);
    let ports = c.ports.as_deref().unwrap();
    assert_eq!(ports.len(), 1);
    assert_eq!((ports[0].name.as_deref(), ports[0].container_port), (Some("metrics"), port));
    for (probe, path) in [(&c.liveness_probe, "/healthz"), (&c.readiness_probe, "/readyz")] {
        let get = probe.as_ref().and_then(|p| p.http_get.as_ref()).unwrap_or_else(|| panic!("no HTTP probe of {path}"));
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(get.port, IntOrString::String("metrics".into()));
        assert!(matches!(get.scheme.as_deref(), None | Some("HTTP")));
    }
    let service = m.service.spec.as_ref().unwrap();
    for (k, v) in service.selector.iter().flatten() {
        assert_eq!(pod_labels.get(k), Some(v), "the Service's selector must match the pods");
    }
    let sp = &service.ports.as_deref().unwrap()[0];
    assert_eq!(
        (sp.name.as_deref(), sp.port, sp.target_port.clone()),
        (Some("metrics"), port, Some(IntOrString::String("metrics".into())))
    );

    // Locked down: non-root, read-only root, no capabilities, RuntimeDefault seccomp.
    let psc = pod.security_context.as_ref().unwrap();
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(sc.run_as_non_root, Some(true));
    assert!(psc.run_as_user.is_some_and(|u| u != 0));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_ne!(sc.privileged, Some(true));
    let caps = sc.capabilities.as_ref().unwrap();
    assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_string()][..]));
    assert!(caps.add.as_deref().unwrap_or_default().is_empty());
    for seccomp in [&psc.seccomp_profile, &sc.seccomp_profile] {
        assert_eq!(seccomp.as_ref().map(|s| s.type_.as_str()), Some("RuntimeDefault"));
    }
    assert!(pod.host_network.is_none() && pod.host_pid.is_none());

    // Requests for CPU and memory, a memory limit.
    let res = c.resources.as_ref().unwrap();
    let requests = res.requests.as_ref().unwrap();
    assert!(requests.contains_key("cpu") && requests.contains_key("memory"));
    assert!(res.limits.as_ref().unwrap().contains_key("memory"));

    // The restricted Pod Security Standard is enforced on the namespace.
    let ns_labels = m.namespace.metadata.labels.clone().unwrap();
    assert_eq!(ns_labels.get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("restricted"));
}

#[test]
fn the_config_map_holds_one_muster_profile_that_muster_accepts() {
    let m = manifests();
    let data = m.config_map.data.clone().unwrap();
    assert_eq!(data.len(), 1);
    let (file, text) = data.into_iter().next().unwrap();
    let config: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(config["apiVersion"], "kubescheduler.config.k8s.io/v1");
    assert_eq!(config["kind"], "KubeSchedulerConfiguration");
    let profiles = config["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 1);
    assert_eq!(profiles[0]["schedulerName"], NAME);

    // `muster plan --config` reads it as `muster run --config` will (same loader).
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("deploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(&file);
    std::fs::write(&path, &text).unwrap();
    let path = path.to_str().unwrap();
    let out = common::muster(&["plan", "--config", path, "examples/quickstart", "-o", "json"]);
    assert!(out.status.success(), "muster rejects the ConfigMap's configuration: {}", common::stderr(&out));
    // The loader is strict: a misspelled field is an error; a field muster does not act on is
    // named in a warning that says where the setting lives instead.
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, format!("{text}leaderElectoin:\n  leaderElect: true\n")).unwrap();
    let out = common::muster(&["plan", "--config", bad.to_str().unwrap(), "examples/quickstart"]);
    assert!(!out.status.success(), "muster accepted a configuration with a misspelled field");
    let warned = dir.join("warned.yaml");
    std::fs::write(&warned, format!("{text}leaderElection:\n  leaderElect: true\n")).unwrap();
    let out = common::muster(&["plan", "--config", warned.to_str().unwrap(), "examples/quickstart"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out)
            .contains("leaderElection: not read from the file; it is set by muster run's --leader-elect")
    );
}

// ---------------------------------------------------------------------------------------------
// The chart

#[test]
fn the_chart_renders_the_plain_manifests() {
    let chart: Value = serde_saphyr::from_str(&read(&format!("{CHART}/Chart.yaml"))).unwrap();
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["name"], NAME);
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
    let values = chart_values();
    assert_eq!(values["image"]["tag"], env!("CARGO_PKG_VERSION"));

    let mut rendered = BTreeMap::new();
    for (name, text) in rendered_templates() {
        if name == "NOTES.txt" {
            continue;
        }
        assert!(name.ends_with(".yaml"), "{CHART}/templates/{name}: templates are .yaml files or NOTES.txt");
        for doc in documents(&name, &text) {
            let k = key(&doc);
            assert!(rendered.insert(k.clone(), doc).is_none(), "{name}: {k:?} rendered twice");
        }
    }
    let plain: BTreeMap<_, _> =
        manifests().docs.into_iter().filter(|d| d["kind"] != "Namespace").map(|d| (key(&d), d)).collect();
    let plain_keys: Vec<_> = plain.keys().collect();
    let rendered_keys: Vec<_> = rendered.keys().collect();
    assert_eq!(rendered_keys, plain_keys, "the chart and {MANIFESTS} hold different objects");
    for (k, doc) in &plain {
        assert_eq!(&rendered[k], doc, "{k:?} differs between the chart and {MANIFESTS}");
    }
}

#[test]
fn the_renderer_takes_plain_substitution_only() {
    let values = serde_json::json!({"a": {"b": "x", "n": 50, "f": 0.5, "t": true, "list": [1], "null": null}});
    let r = |t: &str| render(t, &values, "rel", "ns");
    assert_eq!(r("{{ .Values.a.b }}/{{ .Release.Name }}/{{ .Release.Namespace }}").unwrap(), "x/rel/ns");
    assert_eq!(r("{{ .Values.a.n }} {{ .Values.a.f }} {{ .Values.a.t }}").unwrap(), "50 0.5 true");
    for bad in [
        "{{ if .Values.a.t }}x{{ end }}",
        "{{ .Values.a.b | quote }}",
        "{{- .Values.a.b }}",
        "{{.Values.a.b}}",
        "{{ include \"x\" . }}",
        "{{ .Values.a.list }}",
        "{{ .Values.a.null }}",
        "{{ .Values.a.missing }}",
        "{{ .Chart.Name }}",
        "{{ .Values.a.b",
        "x }}",
    ] {
        assert!(r(bad).is_err(), "{bad:?} should be refused");
    }
}

#[test]
fn the_dockerfile_builds_the_muster_binary_as_entrypoint() {
    let dockerfile = read("Dockerfile");
    assert!(dockerfile.contains("cargo build --release --locked -p muster"));
    assert!(dockerfile.contains("gcr.io/distroless/cc-debian12:nonroot"));
    assert!(dockerfile.contains(r#"ENTRYPOINT ["/muster"]"#));
    assert!(dockerfile.contains(r#"CMD ["run"]"#));
    let ignore = read(".dockerignore");
    for line in ["target/", ".git/"] {
        assert!(ignore.lines().any(|l| l.trim() == line), ".dockerignore lacks {line}");
    }
}

// ---------------------------------------------------------------------------------------------
// The RBAC helpers themselves

#[test]
fn request_attributes_follow_the_api_server() {
    let a = |m: &str, p: &str| request_attributes(m, p).unwrap();
    let attrs = |verb: &str, group: &str, resource: &str, ns: Option<&str>, name: Option<&str>| RequestAttributes {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        namespace: ns.map(Into::into),
        name: name.map(Into::into),
    };
    assert_eq!(a("GET", "/api/v1/pods?limit=500"), attrs("list", "", "pods", None, None));
    assert_eq!(a("GET", "/api/v1/pods?watch=true&resourceVersion=5"), attrs("watch", "", "pods", None, None));
    assert_eq!(a("GET", "/api/v1/nodes/n1"), attrs("get", "", "nodes", None, Some("n1")));
    assert_eq!(
        a("POST", "/api/v1/namespaces/ml/pods/p/binding"),
        attrs("create", "", "pods/binding", Some("ml"), Some("p"))
    );
    assert_eq!(
        a("PATCH", "/api/v1/namespaces/ml/pods/p/status"),
        attrs("patch", "", "pods/status", Some("ml"), Some("p"))
    );
    assert_eq!(a("DELETE", "/api/v1/namespaces/ml/pods/p"), attrs("delete", "", "pods", Some("ml"), Some("p")));
    assert_eq!(a("DELETE", "/api/v1/namespaces/ml/pods"), attrs("deletecollection", "", "pods", Some("ml"), None));
    assert_eq!(
        a("PUT", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c/status"),
        attrs("update", "resource.k8s.io", "resourceclaims/status", Some("ml"), Some("c"))
    );
    assert_eq!(
        a("POST", "/apis/events.k8s.io/v1/namespaces/ml/events"),
        attrs("create", "events.k8s.io", "events", Some("ml"), None)
    );
    assert_eq!(
        a(
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/muster-system/leases?watch=1&fieldSelector=metadata.name%3Dmuster"
        ),
        attrs("watch", "coordination.k8s.io", "leases", Some("muster-system"), Some("muster"))
    );
    assert_eq!(a("GET", "/api/v1/namespaces"), attrs("list", "", "namespaces", None, None));
    assert_eq!(a("GET", "/api/v1/namespaces/ml"), attrs("get", "", "namespaces", Some("ml"), Some("ml")));
    assert_eq!(
        a("PUT", "/api/v1/namespaces/ml/finalize"),
        attrs("update", "", "namespaces/finalize", Some("ml"), Some("ml"))
    );
    for discovery in ["/api", "/api/v1", "/apis", "/apis/resource.k8s.io/v1", "/version", "/healthz"] {
        assert_eq!(request_attributes("GET", discovery), None, "{discovery}");
    }
}

#[test]
fn rules_match_as_upstream_does() {
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str], names: &[&str]| PolicyRule {
        api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        resource_names: (!names.is_empty()).then(|| names.iter().map(|s| s.to_string()).collect()),
        non_resource_urls: None,
    };
    let pods = [rule(&[""], &["pods"], &["get"], &[])];
    assert!(cluster_role_allows(&pods, "", "pods", "get", Some("p")));
    assert!(!cluster_role_allows(&pods, "", "pods/status", "get", Some("p")), "pods does not cover pods/status");
    assert!(!cluster_role_allows(&pods, "apps", "pods", "get", Some("p")));
    assert!(!cluster_role_allows(&pods, "", "pods", "list", None));
    let star = [rule(&["*"], &["*/status"], &["*"], &[])];
    assert!(cluster_role_allows(&star, "apps", "deployments/status", "update", Some("d")));
    assert!(!cluster_role_allows(&star, "apps", "deployments", "update", Some("d")));
    let named = [rule(&["coordination.k8s.io"], &["leases"], &["get", "create"], &["muster"])];
    assert!(cluster_role_allows(&named, "coordination.k8s.io", "leases", "get", Some("muster")));
    assert!(!cluster_role_allows(&named, "coordination.k8s.io", "leases", "get", Some("other")));
    assert!(!cluster_role_allows(&named, "coordination.k8s.io", "leases", "create", None), "a create names nothing");
    assert!(rule_allows(&named[0], "coordination.k8s.io", "leases", "get", Some("muster")));
}

/// Every request `muster run` is known to make (live-and-sim.md section 2) is allowed by the
/// shipped roles, and every rule serves at least one of them: the shape of the check the
/// end-to-end tests will make on the fake API server's request log.
#[test]
fn the_roles_allow_the_requests_muster_makes_and_every_rule_is_used() {
    let m = manifests();
    let cluster = m.cluster_role.rules.clone().unwrap();
    let role = m.role.rules.clone().unwrap();
    let requests = [
        ("GET", "/api/v1/pods?watch=true"),
        ("GET", "/api/v1/nodes?limit=500"),
        ("GET", "/api/v1/namespaces/ml/pods/victim"),
        ("DELETE", "/api/v1/namespaces/ml/pods/victim"),
        ("POST", "/api/v1/namespaces/ml/pods/p/binding"),
        ("PATCH", "/api/v1/namespaces/ml/pods/p/status"),
        ("POST", "/apis/events.k8s.io/v1/namespaces/ml/events"),
        ("PATCH", "/apis/events.k8s.io/v1/namespaces/ml/events/p.1"),
        ("GET", "/apis/resource.k8s.io/v1/deviceclasses?watch=true"),
        ("GET", "/apis/resource.k8s.io/v1/resourceslices"),
        ("GET", "/apis/resource.k8s.io/v1/devicetaintrules"),
        ("GET", "/apis/resource.k8s.io/v1/resourceclaims?watch=true"),
        ("GET", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c"),
        ("PUT", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c"),
        ("PUT", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c/status"),
        ("POST", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims"),
        ("PATCH", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c/binding"),
        ("GET", "/apis/scheduling.k8s.io/v1/priorityclasses"),
        ("GET", "/apis/scheduling.k8s.io/v1beta1/podgroups?watch=true"),
        ("PATCH", "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups/g/status"),
        ("GET", "/apis/policy/v1/poddisruptionbudgets"),
        ("GET", "/api/v1/namespaces?watch=true"),
        ("GET", "/api/v1/persistentvolumeclaims?watch=true"),
        ("GET", "/api/v1/namespaces/ml/persistentvolumeclaims/data"),
        ("PUT", "/api/v1/namespaces/ml/persistentvolumeclaims/data"),
        ("GET", "/api/v1/persistentvolumes"),
        ("PUT", "/api/v1/persistentvolumes/pv-a1"),
        ("GET", "/apis/storage.k8s.io/v1/storageclasses?watch=true"),
        ("GET", "/api/v1/services?watch=true"),
        ("GET", "/apis/apps/v1/replicasets"),
        ("POST", "/apis/coordination.k8s.io/v1/namespaces/muster-system/leases"),
        ("PATCH", "/apis/coordination.k8s.io/v1/namespaces/muster-system/leases/muster?fieldManager=muster"),
    ];
    let attrs: Vec<_> = requests.iter().map(|(m, p)| request_attributes(m, p).unwrap()).collect();
    for (a, (method, path)) in attrs.iter().zip(&requests) {
        assert!(a.allowed_by(&cluster, &[(NAMESPACE, &role)]), "{method} {path} ({a:?}) is not allowed");
    }
    for rule in cluster.iter().chain(&role) {
        let used = attrs.iter().any(|a| rule_allows(rule, &a.group, &a.resource, &a.verb, a.name.as_deref()));
        assert!(used, "no request uses {rule:?}");
    }
    let secrets = request_attributes("GET", "/api/v1/namespaces/ml/secrets/s").unwrap();
    assert!(!secrets.allowed_by(&cluster, &[(NAMESPACE, &role)]));
}
