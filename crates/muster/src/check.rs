//! `muster check`: validates manifests without scheduling anything.
//!
//! Four passes, every finding with file, line, column, object and field:
//!
//! 1. Schema: the strict loader (`muster_manifest`) on every file, and a scan of the located YAML
//!    tree for the outdated forms of workload-spec.md §12 (the seed article's v1alpha3 DeviceClass,
//!    `spec.spec.deviceClassName` + `count`, `spec.minCount`, `scheduleTimeoutSeconds`, group
//!    membership by label, old DeviceTaintRule shape), each named with its 1.37 form. Where a scan
//!    finding explains a loader error at the same place, only the scan finding is kept.
//! 2. References: claims, templates, DeviceClasses, PodGroups and PriorityClasses that objects name
//!    exist in the input.
//! 3. CEL: every selector compiles (`muster_cel`), errors placed on the line of the expression.
//! 4. Attributes and capacities that selectors read exist on some device of the input's
//!    ResourceSlices, and each DeviceClass selects at least one of them, as does each claim
//!    request's own selectors with its class (when there are slices; without slices, what NVIDIA's
//!    driver publishes is the reference).
//!
//! Exit status: 0 without errors (warnings allowed), 1 with errors, 2 when the input cannot be read.

pub(crate) mod cel_text;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceSlice;
use muster_cel::{DeviceView, Env, SelectorOwner};
use muster_manifest::yaml::{self, Node, Value};
use muster_manifest::{Found, Pos};
use serde_json::json;

use cel_text::{NVIDIA_DRIVER, driver_for_domain, nvidia_name_problem};

/// How bad a finding is: errors make `check` exit 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One problem: where, which object and field, what is wrong, and the 1.37 form when there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Index of the file in the inputs (output order).
    pub file: usize,
    pub pos: Option<Pos>,
    pub severity: Severity,
    /// `Kind namespace/name` (namespaced kinds, `default` when unset) or `Kind name`.
    pub object: Option<String>,
    pub field: Option<String>,
    pub message: String,
    pub fix: Option<String>,
}

/// One input file and its text.
pub struct Source {
    pub name: Arc<str>,
    pub text: String,
}

/// Reads `paths` as `muster plan` does (files; directories recursively for `*.yaml`, `*.yml`,
/// `*.json`, hidden entries skipped; `-` for standard input). Returns the problems that made some
/// input unreadable.
pub fn read_inputs(paths: &[PathBuf]) -> Result<Vec<Source>, Vec<String>> {
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    for p in paths {
        if p.as_path() == Path::new("-") {
            let mut text = String::new();
            match std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
                Ok(_) => sources.push(Source { name: "<stdin>".into(), text }),
                Err(e) => errors.push(format!("<stdin>: cannot read standard input: {e}")),
            }
            continue;
        }
        for found in muster_manifest::find_files(p) {
            match found {
                Found::File(f) => match std::fs::read_to_string(&f) {
                    Ok(text) => sources.push(Source { name: f.display().to_string().into(), text }),
                    Err(e) => errors.push(format!("{}: cannot read: {e}", f.display())),
                },
                Found::Error(f, e) => errors.push(format!("{}: {e}", f.display())),
                Found::Skipped(f, why) => eprintln!("warning: {}: skipped: {why}", f.display()),
            }
        }
    }
    if errors.is_empty() && sources.is_empty() {
        errors.push("no manifest files (*.yaml, *.yml, *.json) found".into());
    }
    if errors.is_empty() { Ok(sources) } else { Err(errors) }
}

// ---------------------------------------------------------------------------------------------
// The located tree, object by object.

/// One document of a file: the piece of text between document markers that holds it.
pub(crate) struct Piece<'a> {
    /// Byte range of the piece in the file.
    pub range: std::ops::Range<usize>,
    /// Lines before the piece.
    pub line_offset: u32,
    /// None when the piece is not valid YAML (the loader reports it).
    pub docs: Option<Vec<yaml::Document<'a>>>,
}

/// Parses a file piece by piece, so that one bad document does not hide the others.
pub(crate) fn pieces(text: &str) -> Vec<Piece<'_>> {
    let cuts = yaml::split_documents(text, 0);
    cuts.iter()
        .enumerate()
        .map(|(i, &(start, line))| {
            let end = cuts.get(i + 1).map_or(text.len(), |c| c.0);
            Piece { range: start..end, line_offset: line, docs: yaml::parse_stream_at(&text[start..end], line).ok() }
        })
        .collect()
}

/// An object as written: its node, kind, and identity.
pub(crate) struct Obj<'n, 'a> {
    pub file: usize,
    pub node: &'n Node<'a>,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// Namespace as the API would hold it (`default` for namespaced kinds without one).
    pub namespace: String,
}

impl Obj<'_, '_> {
    pub fn display(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }

    pub fn get(&self, path: &str) -> Option<&Node<'_>> {
        get_path(self.node, path)
    }
}

/// Kinds whose objects live in a namespace (among those the input may hold).
pub(crate) fn namespaced(kind: &str) -> bool {
    matches!(
        kind,
        "Pod"
            | "ResourceClaim"
            | "ResourceClaimTemplate"
            | "PodGroup"
            | "Workload"
            | "CompositePodGroup"
            | "PodDisruptionBudget"
            | "Deployment"
            | "StatefulSet"
            | "DaemonSet"
            | "ReplicaSet"
            | "Job"
            | "CronJob"
            | "Service"
            | "ConfigMap"
            | "Secret"
            | "ServiceAccount"
    )
}

/// `a.b.c` under `node`.
pub(crate) fn get_path<'n, 'a>(node: &'n Node<'a>, path: &str) -> Option<&'n Node<'a>> {
    path.split('.').try_fold(node, |n, k| n.get(k))
}

/// The key node and value node of `key` in a mapping.
pub(crate) fn entry<'n, 'a>(node: &'n Node<'a>, key: &str) -> Option<(&'n Node<'a>, &'n Node<'a>)> {
    match &node.value {
        Value::Map(entries) => entries.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(k, v)| (k, v)),
        _ => None,
    }
}

pub(crate) fn seq<'n, 'a>(node: Option<&'n Node<'a>>) -> &'n [Node<'a>] {
    match node.map(|n| &n.value) {
        Some(Value::Seq(items)) => items,
        _ => &[],
    }
}

pub(crate) fn str_of<'n>(node: Option<&'n Node<'_>>) -> Option<&'n str> {
    node.and_then(Node::as_str).filter(|s| !s.is_empty())
}

/// The objects of a document, `List`s expanded (items of `PodList` and such default their kind).
pub(crate) fn objects_of<'n, 'a>(
    file: usize,
    node: &'n Node<'a>,
    list_default: Option<(&str, &str)>,
    out: &mut Vec<Obj<'n, 'a>>,
) {
    if !matches!(node.value, Value::Map(_)) {
        return;
    }
    // A key in other letter cases (`apiversion`) is read as the loader reads it (it reports it).
    let field = |key: &str| str_of(node.get(key)).or_else(|| str_of(miscased(node, key)));
    let (api_version, kind) = match (field("apiVersion"), field("kind"), list_default) {
        (Some(v), Some(k), _) => (v.to_string(), k.to_string()),
        (v, k, Some((dv, dk))) => (v.unwrap_or(dv).to_string(), k.unwrap_or(dk).to_string()),
        _ => return,
    };
    if kind == "List" || (kind.ends_with("List") && node.get("items").is_some()) {
        let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty()).map(str::to_string);
        for item in seq(node.get("items")) {
            objects_of(file, item, item_kind.as_deref().map(|k| (api_version.as_str(), k)), out);
        }
        return;
    }
    let name = str_of(get_path(node, "metadata.name")).unwrap_or("<unnamed>").to_string();
    let namespace = if namespaced(&kind) {
        str_of(get_path(node, "metadata.namespace")).unwrap_or("default").to_string()
    } else {
        String::new()
    };
    out.push(Obj { file, node, api_version, kind, name, namespace });
}

/// The value under `key` spelled in other letter cases, if the mapping has one.
fn miscased<'n, 'a>(node: &'n Node<'a>, key: &str) -> Option<&'n Node<'a>> {
    let Value::Map(entries) = &node.value else { return None };
    entries.iter().find(|(k, _)| k.as_str().is_some_and(|k| k != key && k.eq_ignore_ascii_case(key))).map(|(_, v)| v)
}

// ---------------------------------------------------------------------------------------------
// What the input defines, for references and for inferring a driver.

/// What the whole input defines.
#[derive(Default)]
pub(crate) struct Index {
    /// (kind, namespace, name) → where it is defined first.
    pub defined: HashMap<(String, String, String), (usize, Pos)>,
    /// DeviceClass name → the driver domains its selectors read (vendor domains mapped to their
    /// driver) or test with `device.driver == '...'`.
    pub class_drivers: BTreeMap<String, BTreeSet<String>>,
    /// DeviceClass name → its selectors' CEL texts (`None`: a selector without one).
    pub class_selectors: BTreeMap<String, Option<Vec<String>>>,
    pub slices: Vec<ResourceSlice>,
    /// ResourceClaimTemplates that objects of the input will have made at run time.
    pub provided_templates: Vec<muster_manifest::providers::ProvidedTemplate>,
}

impl Index {
    pub fn build(objects: &[Obj<'_, '_>]) -> Index {
        let mut ix = Index::default();
        for o in objects {
            ix.defined.entry((o.kind.clone(), o.namespace.clone(), o.name.clone())).or_insert((o.file, o.node.pos));
            ix.provided_templates.extend(muster_manifest::providers::provided_template(
                &o.api_version,
                &o.kind,
                o.node,
            ));
            match o.kind.as_str() {
                "DeviceClass" => {
                    let mut drivers = BTreeSet::new();
                    for sel in seq(o.get("spec.selectors")) {
                        let Some(expr) = get_path(sel, "cel.expression").and_then(Node::as_str) else { continue };
                        for r in cel_text::refs(expr) {
                            let d = driver_for_domain(&r.domain).map_or(r.domain.clone(), str::to_string);
                            if d != "resource.kubernetes.io" {
                                drivers.insert(d);
                            }
                        }
                        let t = cel_text::tokens(expr);
                        for w in t.windows(5) {
                            if w[0].text == "device" && w[1].text == "." && w[2].text == "driver" && w[3].text == "==" {
                                drivers.insert(cel_text::unquote(w[4].text));
                            }
                        }
                    }
                    ix.class_drivers.insert(o.name.clone(), drivers);
                    let texts = seq(o.get("spec.selectors"))
                        .iter()
                        .map(|sel| get_path(sel, "cel.expression").and_then(Node::as_str).map(str::to_string))
                        .collect();
                    ix.class_selectors.entry(o.name.clone()).or_insert(texts);
                }
                "ResourceSlice" if o.api_version == "resource.k8s.io/v1" => {
                    if let Ok(s) = muster_manifest::de::from_node::<ResourceSlice>(o.node) {
                        ix.slices.push(s);
                    }
                }
                // A beta slice publishes its devices as v1's would.
                "ResourceSlice" => {
                    if let Some(Ok(muster_manifest::Object::ResourceSlice(s))) =
                        muster_manifest::beta::decode(&o.api_version, &o.kind, o.node)
                    {
                        ix.slices.push(*s);
                    }
                }
                _ => {}
            }
        }
        ix
    }

    pub fn has(&self, kind: &str, namespace: &str, name: &str) -> bool {
        self.defined.contains_key(&(kind.to_string(), namespace.to_string(), name.to_string()))
    }

    /// The driver (and pool) of a DeviceTaintRule written with a node and device name, and why.
    pub fn infer_driver(&self, node: Option<&str>, device: Option<&str>) -> Option<(String, Option<String>, String)> {
        // A slice that publishes the device on that node says exactly.
        for s in &self.slices {
            let on_node = node.is_none_or(|n| s.spec.node_name.as_deref() == Some(n) || s.spec.pool.name == n);
            if on_node && device.is_some_and(|d| s.spec.devices.iter().flatten().any(|x| x.name == d)) {
                return Some((
                    s.spec.driver.clone(),
                    Some(s.spec.pool.name.clone()),
                    format!("from ResourceSlice {}", s.metadata.name.as_deref().unwrap_or("")),
                ));
            }
        }
        let all: BTreeSet<&String> = self.class_drivers.values().flatten().collect();
        if all.len() == 1 {
            let d = all.into_iter().next().expect("one");
            let classes: Vec<&str> =
                self.class_drivers.iter().filter(|(_, ds)| ds.contains(d)).map(|(n, _)| n.as_str()).collect();
            return Some((
                d.clone(),
                None,
                format!("inferred from the selectors of DeviceClass {}", classes.join(", ")),
            ));
        }
        None
    }
}

/// Pod labels and annotations other schedulers use for group membership.
pub(crate) const GROUP_LABEL_KEYS: &[&str] =
    &["scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io", "scheduling.k8s.io/group-name"];

/// A pod that tries to join a PodGroup by a label (or annotation): (key node, PodGroup name).
pub(crate) fn label_membership<'n, 'a>(o: &Obj<'n, 'a>, ix: &Index) -> Option<(&'n Node<'a>, String)> {
    if o.kind != "Pod" || o.get("spec.schedulingGroup").is_some() {
        return None;
    }
    let node: &'n Node<'a> = o.node;
    for path in ["metadata.labels", "metadata.annotations"] {
        let Some(Value::Map(entries)) = get_path(node, path).map(|n| &n.value) else { continue };
        for (k, v) in entries {
            let (Some(key), Some(value)) = (k.as_str(), str_of(Some(v))) else { continue };
            let names_group = ix.has("PodGroup", &o.namespace, value);
            if names_group || GROUP_LABEL_KEYS.contains(&key) {
                // A label naming a PodGroup only by accident (app: x with a PodGroup x) is still
                // worth a warning: it shows the author's intent.
                return Some((k, value.to_string()));
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Positions inside scalars.

/// The position of byte `offset` of the value of scalar `node`, as written in `text`: for block
/// scalars (`>`, `|`) and multi-line plain or quoted ones, line by line (folding joins lines with
/// one character, a space or a newline, which keeps the count).
pub(crate) fn locate(lines: &[&str], node: &Node<'_>, value: &str, offset: usize) -> Pos {
    let at = node.pos;
    let Some(first) = lines.get(at.line as usize - 1) else { return at };
    let start_char = first.chars().nth(at.col as usize - 1).unwrap_or(' ');
    let offset_chars = value[..value.floor_char_boundary(offset.min(value.len()))].chars().count();
    if start_char == '>' || start_char == '|' {
        let mut left = offset_chars;
        let mut indent = None;
        for (i, l) in lines.iter().enumerate().skip(at.line as usize) {
            if l.trim().is_empty() {
                if left == 0 {
                    return Pos { line: i as u32 + 1, col: 1 };
                }
                left -= 1;
                continue;
            }
            let ind = l.len() - l.trim_start().len();
            let ind = *indent.get_or_insert(ind);
            let content: String = l.chars().skip(ind).collect();
            let n = content.chars().count();
            if left <= n {
                return Pos { line: i as u32 + 1, col: (ind + left) as u32 + 1 };
            }
            left -= n + 1;
        }
        return at;
    }
    let quoted = start_char == '\'' || start_char == '"';
    let mut left = offset_chars;
    let rest = first.chars().count().saturating_sub(at.col as usize - 1 + usize::from(quoted));
    if left <= rest {
        return Pos { line: at.line, col: at.col + u32::from(quoted) + left as u32 };
    }
    left -= rest + 1;
    for (i, l) in lines.iter().enumerate().skip(at.line as usize) {
        let ind = l.len() - l.trim_start().len();
        let n = l.trim().chars().count();
        if left <= n {
            return Pos { line: i as u32 + 1, col: (ind + left) as u32 + 1 };
        }
        left -= n + 1;
    }
    at
}

/// The byte offset of a 1-based line and column (in characters) of `src`.
fn offset_of(src: &str, line: usize, column: usize) -> usize {
    let mut off = 0;
    for (i, l) in src.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return off + l.char_indices().nth(column.saturating_sub(1)).map_or(l.len(), |(b, _)| b);
        }
        off += l.len();
    }
    src.len()
}

// ---------------------------------------------------------------------------------------------
// The checks.

struct Checker<'s> {
    /// Each file's lines, to place positions inside scalars.
    lines: &'s [Vec<&'s str>],
    ix: &'s Index,
    env: Env,
    findings: Vec<Finding>,
    /// Positions whose loader error a scan finding explains.
    covered: HashSet<(usize, Pos)>,
    /// Devices of the input's slices, converted once: (driver/pool/device, view).
    devices: Vec<(String, Result<DeviceView, String>)>,
    /// domain → attribute names, domain → capacity names, over every device of the input.
    attributes: BTreeMap<String, BTreeSet<String>>,
    capacities: BTreeMap<String, BTreeSet<String>>,
    /// The command's total CEL cost for evaluating classes over the devices.
    budget: muster_cel::Budget,
}

/// `path: value`, a field in its 1.37 form.
fn fix_yaml(path: &str, value: &str) -> String {
    format!("{path}: {value}")
}

impl<'s> Checker<'s> {
    fn new(lines: &'s [Vec<&'s str>], ix: &'s Index) -> Self {
        let mut attributes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut capacities: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut devices = Vec::new();
        for s in &ix.slices {
            let driver = &s.spec.driver;
            for d in s.spec.devices.iter().flatten() {
                let split = |k: &str| match k.split_once('/') {
                    Some((dom, n)) => (dom.to_string(), n.to_string()),
                    None => (driver.clone(), k.to_string()),
                };
                for k in d.attributes.iter().flat_map(|m| m.keys()) {
                    let (dom, n) = split(k);
                    attributes.entry(dom).or_default().insert(n);
                }
                for k in d.capacity.iter().flat_map(|m| m.keys()) {
                    let (dom, n) = split(k);
                    capacities.entry(dom).or_default().insert(n);
                }
                let id = format!("{driver}/{}/{}", s.spec.pool.name, d.name);
                devices.push((id, DeviceView::new(driver, d).map_err(|e| e.to_string())));
            }
        }
        Checker {
            lines,
            ix,
            env: Env::default(),
            findings: Vec::new(),
            covered: HashSet::new(),
            devices,
            attributes,
            capacities,
            budget: muster_cel::Budget::new(crate::devices::command_budget()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        o: &Obj<'_, '_>,
        pos: Pos,
        severity: Severity,
        field: &str,
        message: String,
        fix: Option<String>,
        covers: bool,
    ) {
        if covers {
            self.covered.insert((o.file, pos));
        }
        self.findings.push(Finding {
            file: o.file,
            pos: Some(pos),
            severity,
            object: Some(o.display()),
            field: (!field.is_empty()).then(|| field.to_string()),
            message,
            fix,
        });
    }

    fn object(&mut self, o: &Obj<'_, '_>) {
        self.version(o);
        match o.kind.as_str() {
            "DeviceTaintRule" => self.device_taint_rule(o),
            "DeviceClass" => self.device_class(o),
            "ResourceClaim" => self.claim_spec(o, "spec"),
            "ResourceClaimTemplate" => self.claim_spec(o, "spec.spec"),
            "PodGroup" => {
                self.pod_group(o);
                self.device_topology(o);
            }
            "Workload" => {
                for (i, t) in seq(o.get("spec.podGroupTemplates")).iter().enumerate() {
                    self.priority_class(o, t, &format!("spec.podGroupTemplates[{i}].priorityClassName"));
                }
                self.device_topology(o);
            }
            "Pod" => self.pod(o),
            "KubeSchedulerConfiguration" => self.findings.extend(crate::config::findings(o.file, o.node)),
            // Workloads' pod templates: the references their pods will carry.
            "Deployment" | "ReplicaSet" | "StatefulSet" | "Job" => {
                if let Some(spec) = o.get("spec.template.spec") {
                    self.claim_refs(o, spec.get("resourceClaims"), "spec.template.spec.resourceClaims");
                    self.priority_class(o, spec, "spec.template.spec.priorityClassName");
                }
            }
            _ => {}
        }
    }

    /// An apiVersion muster does not read for a kind it reads.
    fn version(&mut self, o: &Obj<'_, '_>) {
        let versions = muster_manifest::object::supported_versions(&o.kind);
        if versions.is_empty() || versions.contains(&o.api_version.as_str()) {
            return;
        }
        let preferred = match o.kind.as_str() {
            "PodGroup" | "Workload" => "scheduling.k8s.io/v1beta1",
            _ => versions[0],
        };
        let (group, version) = o.api_version.split_once('/').unwrap_or(("", &o.api_version));
        let message = match (group, version, o.kind.as_str()) {
            ("resource.k8s.io", "v1alpha3", "DeviceTaintRule") => format!(
                "{} {}: muster reads DeviceTaintRule in {preferred}, where it is GA in Kubernetes 1.37",
                o.api_version, o.kind
            ),
            ("resource.k8s.io", "v1alpha3", k) => {
                format!(
                    "Kubernetes 1.37 serves no {k} in resource.k8s.io/v1alpha3 (only DeviceTaintRule); {k} is GA in {preferred}"
                )
            }
            ("resource.k8s.io", _, k) => {
                format!("{} {k} is deprecated; muster reads {k} in {preferred}, where it is GA", o.api_version)
            }
            ("scheduling.k8s.io", "v1alpha1" | "v1alpha2", k) => format!(
                "Kubernetes 1.37 does not serve {} (removed without conversion); {k} is served as {}",
                o.api_version,
                versions.join(" and ")
            ),
            (_, _, k) => format!(
                "{} {k} is not a Kubernetes 1.37 form muster reads; use {}",
                o.api_version,
                versions.join(" or ")
            ),
        };
        let pos = o.get("apiVersion").map_or(o.node.pos, |n| n.pos);
        // A beta version 1.37 still serves where it is enabled is read as v1, with a warning (the
        // loader's, worded the same for `plan`).
        if muster_manifest::beta::reads(&o.api_version, &o.kind) {
            let message = muster_manifest::beta::warning(&o.api_version, &o.kind);
            self.push(o, pos, Severity::Warning, "apiVersion", message, Some(fix_yaml("apiVersion", preferred)), true);
            return;
        }
        self.push(o, pos, Severity::Error, "apiVersion", message, Some(fix_yaml("apiVersion", preferred)), true);
    }

    fn device_taint_rule(&mut self, o: &Obj<'_, '_>) {
        let Some(spec) = o.get("spec") else { return };
        let node = str_of(spec.get("nodeName"));
        let device = str_of(spec.get("deviceName"));
        let taints = seq(spec.get("taints"));
        let old = spec.get("nodeName").is_some() || spec.get("deviceName").is_some() || spec.get("taints").is_some();
        if old {
            let mut selector = Vec::new();
            match self.ix.infer_driver(node, device) {
                Some((d, pool, _)) => {
                    selector.push(format!("driver: {d}"));
                    if let Some(p) = pool.or(node.map(str::to_string)) {
                        selector.push(format!("pool: {p}"));
                    }
                }
                None => {
                    selector.push("driver: <the device's driver>".into());
                    if let Some(n) = node {
                        selector.push(format!("pool: {n}"));
                    }
                }
            }
            if let Some(d) = device {
                selector.push(format!("device: {d}"));
            }
            let fix = fix_yaml("spec.deviceSelector", &format!("{{{}}}", selector.join(", ")));
            if let Some((k, _)) = entry(spec, "nodeName") {
                let m = "DeviceTaintRule has no spec.nodeName in any version: it selects devices with spec.deviceSelector \
                         {driver, pool, device}; node-local drivers (such as gpu.nvidia.com) name their pool after the node";
                self.push(o, k.pos, Severity::Error, "spec.nodeName", m.into(), Some(fix.clone()), true);
            }
            if let Some((k, _)) = entry(spec, "deviceName") {
                let m = "DeviceTaintRule has no spec.deviceName in any version: the device is spec.deviceSelector.device, \
                         with its driver and pool (device names are unique only within a pool)";
                self.push(o, k.pos, Severity::Error, "spec.deviceName", m.into(), Some(fix), true);
            }
            if let Some((k, _)) = entry(spec, "taints") {
                let m = if taints.len() > 1 {
                    format!(
                        "a DeviceTaintRule has one taint, spec.taint: write one rule per taint ({} rules)",
                        taints.len()
                    )
                } else {
                    "a DeviceTaintRule has one taint, spec.taint {key, value, effect}, not a list".to_string()
                };
                let fix = taints.first().map(|t| fix_yaml("spec.taint", &flow(t)));
                self.push(o, k.pos, Severity::Error, "spec.taints", m, fix, true);
            }
            return;
        }
        if spec.get("taint").is_none() {
            let pos = entry(o.node, "spec").map_or(o.node.pos, |(k, _)| k.pos);
            let m = "required value: the taint to apply, {key, value, effect}";
            self.push(o, pos, Severity::Error, "spec.taint", m.into(), None, false);
        }
        if spec.get("deviceSelector").is_none() {
            let pos = entry(o.node, "spec").map_or(o.node.pos, |(k, _)| k.pos);
            let m = "without spec.deviceSelector the rule taints no device (an empty selector {} taints all)";
            self.push(o, pos, Severity::Warning, "spec.deviceSelector", m.into(), None, false);
        }
    }

    fn device_class(&mut self, o: &Obj<'_, '_>) {
        let mut programs = Vec::new();
        let mut all_compiled = true;
        for (i, sel) in seq(o.get("spec.selectors")).iter().enumerate() {
            let field = format!("spec.selectors[{i}].cel.expression");
            match self.cel(o, sel, &field, SelectorOwner::Class(&o.name), i) {
                Some(p) => programs.push((i, p)),
                None => all_compiled &= get_path(sel, "cel.expression").is_none(),
            }
        }
        if self.devices.is_empty() || programs.is_empty() || !all_compiled {
            return;
        }
        // Which devices does the class select? As `muster devices --class` evaluates it.
        let (mut matched, mut errors) = (0usize, Vec::new());
        let mut evaluated = 0usize;
        'devices: for (id, view) in &self.devices {
            let Ok(view) = view else { continue };
            let mut ok = true;
            for (i, p) in &programs {
                let Some(verdict) = self.env.eval_charged(p, view, &self.budget) else { break 'devices };
                match verdict {
                    Ok(true) => {}
                    Ok(false) => {
                        ok = false;
                        break;
                    }
                    Err(e) => {
                        errors.push(muster_cel::selector_runtime_error(SelectorOwner::Class(&o.name), *i, id, &e));
                        ok = false;
                        break;
                    }
                }
            }
            matched += usize::from(ok);
            evaluated += 1;
        }
        let pos = entry(o.node, "spec").and_then(|(_, s)| entry(s, "selectors")).map_or(o.node.pos, |(k, _)| k.pos);
        let n = self.devices.len();
        if self.budget.is_spent() && evaluated < self.devices.iter().filter(|(_, v)| v.is_ok()).count() {
            let m = format!(
                "checked against {evaluated} of the {n} devices of the input's ResourceSlices only: this command's CEL cost budget ({}) is spent",
                self.budget.total()
            );
            self.push(o, pos, Severity::Warning, "spec.selectors", m, None, false);
            return;
        }
        let failing = |errors: &[String]| {
            format!(
                "the selectors fail on {} of them, first: {}",
                errors.len(),
                errors.first().map_or("", |e| e.as_str())
            )
        };
        let m = match (matched, errors.is_empty()) {
            (0, true) => format!(
                "selects none of the {n} devices of the input's ResourceSlices (`muster devices PATH... --class {}` shows each verdict)",
                o.name
            ),
            (0, false) => {
                format!("selects none of the {n} devices of the input's ResourceSlices: {}", failing(&errors))
            }
            (_, false) => format!("of the {n} devices of the input's ResourceSlices, {}", failing(&errors)),
            (_, true) => return,
        };
        self.push(o, pos, Severity::Warning, "spec.selectors", m, None, false);
    }

    /// Compiles the selector `sel` (`{cel: {expression}}`) and checks what it reads.
    fn cel(
        &mut self,
        o: &Obj<'_, '_>,
        sel: &Node<'_>,
        field: &str,
        owner: SelectorOwner<'_>,
        index: usize,
    ) -> Option<Arc<muster_cel::Program>> {
        let expr_node = get_path(sel, "cel.expression")?;
        let expr = expr_node.as_str()?;
        let lines: &'s [&'s str] = &self.lines[o.file];
        let compiled = self.env.compile(expr);
        if let Err(e) = &compiled {
            let at = locate(lines, expr_node, expr, offset_of(expr, e.line, e.column));
            let bare = cel_text::bare_quantities(expr);
            let mut m = String::new();
            if let Some(q) = bare.first() {
                let _ = write!(
                    m,
                    "{} is not CEL: a quantity is compared with quantity() and compareTo(), e.g. x.compareTo(quantity('{}')) >= 0; ",
                    q.text, q.text
                );
            }
            m.push_str(&muster_cel::selector_compile_error(owner, index, e));
            let rw = cel_text::rewrite(expr);
            let fix = (!rw.notes.is_empty() && self.env.compile(&rw.text).is_ok()).then(|| rw.text.clone());
            self.push(o, at, Severity::Error, field, m, fix, false);
        }
        // Attribute and capacity names.
        let mut seen = HashSet::new();
        let mut domains_reported = HashSet::new();
        for r in cel_text::refs(expr) {
            if !seen.insert((r.capacity, r.domain.clone(), r.name.clone())) {
                continue;
            }
            let word = if r.capacity { "capacity" } else { "attributes" };
            let domain_at = locate(lines, expr_node, expr, r.domain_tok.0);
            let name_at = r.name_tok.map_or(domain_at, |(s, _)| locate(lines, expr_node, expr, s));
            if !self.devices.is_empty() || !self.attributes.is_empty() || !self.capacities.is_empty() {
                // Against the input's devices.
                let known_domain = self.attributes.contains_key(&r.domain) || self.capacities.contains_key(&r.domain);
                if !known_domain {
                    if domains_reported.insert(r.domain.clone()) {
                        let have: BTreeSet<&String> = self.attributes.keys().chain(self.capacities.keys()).collect();
                        let m = format!(
                            "no device of the input's ResourceSlices has attributes or capacities under '{}'; their domains: {}",
                            r.domain,
                            have.into_iter().cloned().collect::<Vec<_>>().join(", ")
                        );
                        let fix = driver_for_domain(&r.domain).map(|d| format!("device.{word}['{d}']"));
                        self.push(o, domain_at, Severity::Warning, field, m, fix, false);
                    }
                    continue;
                }
                let Some(name) = &r.name else { continue };
                let (mine, other) = if r.capacity {
                    (&self.capacities, &self.attributes)
                } else {
                    (&self.attributes, &self.capacities)
                };
                if r.guard || mine.get(&r.domain).is_some_and(|s| s.contains(name)) {
                    continue;
                }
                let kind = if r.capacity { "capacity" } else { "attribute" };
                let mut m = format!("no device of the input's ResourceSlices has the {kind} {}/{name}", r.domain);
                let mut fix = None;
                if other.get(&r.domain).is_some_and(|s| s.contains(name)) {
                    let (is, other_word) =
                        if r.capacity { ("an attribute", "attributes") } else { ("a capacity", "capacity") };
                    let _ = write!(m, ": {name} is {is}");
                    fix = Some(format!("device.{other_word}['{}'].{name}", r.domain));
                } else {
                    let names: Vec<&str> = mine.get(&r.domain).into_iter().flatten().map(String::as_str).collect();
                    let _ = write!(m, "; their {kind} names under {}: {}", r.domain, names.join(", "));
                }
                self.push(o, name_at, Severity::Warning, field, m, fix, false);
                continue;
            }
            // Without slices: what the drivers are known to publish.
            let driver = driver_for_domain(&r.domain);
            if let Some(d) = driver
                && domains_reported.insert(r.domain.clone())
            {
                let m = format!(
                    "'{}' is not a driver's name: attributes and capacities are keyed by the driver that publishes them ({d})",
                    r.domain
                );
                self.push(o, domain_at, Severity::Warning, field, m, Some(format!("device.{word}['{d}']")), false);
            }
            let effective = driver.unwrap_or(&r.domain);
            if effective != NVIDIA_DRIVER || r.guard {
                continue;
            }
            let Some(name) = &r.name else { continue };
            if let Some((m, renamed)) = nvidia_name_problem(r.capacity, name) {
                let fix = match renamed {
                    Some(n) => Some(format!("device.{word}['{NVIDIA_DRIVER}'].{n}")),
                    None if !r.capacity && cel_text::NVIDIA_CAPACITIES.contains(&name.as_str()) => {
                        Some(format!("device.capacity['{NVIDIA_DRIVER}'].{name}"))
                    }
                    None if r.capacity && cel_text::NVIDIA_ATTRIBUTES.contains(&name.as_str()) => {
                        Some(format!("device.attributes['{NVIDIA_DRIVER}'].{name}"))
                    }
                    None => None,
                };
                self.push(o, name_at, Severity::Warning, field, m, fix, false);
            }
        }
        compiled.ok()
    }

    fn class_ref(&mut self, o: &Obj<'_, '_>, node: Option<&Node<'_>>, field: &str) {
        let Some(n) = node else { return };
        let Some(class) = str_of(Some(n)) else { return };
        if !self.ix.has("DeviceClass", "", class) {
            let m = format!("DeviceClass {class:?} is not in the input");
            self.push(o, n.pos, Severity::Error, field, m, None, false);
        }
    }

    /// A ResourceClaim's spec or a template's `spec.spec`.
    fn claim_spec(&mut self, o: &Obj<'_, '_>, prefix: &str) {
        let Some(cs) = o.get(prefix) else { return };
        let owner_name = o.display().split_once(' ').map_or(String::new(), |(_, n)| n.to_string());
        let owner = SelectorOwner::Claim(&owner_name);
        // The seed article's flat form: deviceClassName and count directly in the claim spec.
        let flat = entry(cs, "deviceClassName");
        let flat_count = entry(cs, "count");
        if flat.is_some() || flat_count.is_some() {
            let class = str_of(cs.get("deviceClassName")).unwrap_or("<class>");
            let mode = str_of(cs.get("allocationMode")).unwrap_or("ExactCount");
            let count = cs.get("count").and_then(Node::as_str).unwrap_or("1");
            let exactly = if mode == "All" {
                format!("{{deviceClassName: {class}, allocationMode: All}}")
            } else {
                format!("{{deviceClassName: {class}, allocationMode: ExactCount, count: {count}}}")
            };
            let fix = fix_yaml(
                &format!("{prefix}.devices.requests"),
                &format!("[{{name: {}, exactly: {exactly}}}]", request_name(class)),
            );
            if let Some((k, v)) = flat {
                let m = format!(
                    "a claim has no {prefix}.deviceClassName: devices are asked for in {prefix}.devices.requests[], \
                     each {{name, exactly: {{deviceClassName, allocationMode, count}}}}"
                );
                self.push(o, k.pos, Severity::Error, &format!("{prefix}.deviceClassName"), m, Some(fix.clone()), true);
                self.class_ref(o, Some(v), &format!("{prefix}.deviceClassName"));
            }
            if let Some((k, _)) = flat_count {
                let m = format!(
                    "a claim has no {prefix}.count: the number of devices is {prefix}.devices.requests[].exactly.count, with allocationMode: ExactCount"
                );
                let fix = if flat.is_some() { None } else { Some(fix) };
                self.push(o, k.pos, Severity::Error, &format!("{prefix}.count"), m, fix, true);
            }
            for key in ["allocationMode", "selectors", "adminAccess"] {
                if let Some((k, _)) = entry(cs, key) {
                    let m = format!(
                        "a claim has no {prefix}.{key}: it belongs in {prefix}.devices.requests[].exactly.{key}"
                    );
                    self.push(o, k.pos, Severity::Error, &format!("{prefix}.{key}"), m, None, true);
                }
            }
            for (j, sel) in seq(cs.get("selectors")).iter().enumerate() {
                self.cel(o, sel, &format!("{prefix}.selectors[{j}].cel.expression"), owner, j);
            }
        }
        for (i, req) in seq(get_path(cs, "devices.requests")).iter().enumerate() {
            let path = format!("{prefix}.devices.requests[{i}]");
            // v1beta1's request: the fields of `exactly` directly in the request.
            let moved: Vec<(&Node<'_>, &str)> =
                ["deviceClassName", "allocationMode", "count", "selectors", "adminAccess", "tolerations", "capacity"]
                    .into_iter()
                    .filter_map(|k| entry(req, k).map(|(kn, _)| (kn, k)))
                    .collect();
            if let Some((first, _)) = moved.first() {
                let names: Vec<&str> = moved.iter().map(|(_, k)| *k).collect();
                let m = format!(
                    "the resource.k8s.io/v1beta1 form of a request: in resource.k8s.io/v1 {} moved into {path}.exactly",
                    names.join(", ")
                );
                let fields: Vec<String> =
                    moved.iter().map(|(_, k)| format!("{k}: {}", req.get(k).map_or(String::new(), flow))).collect();
                let fix = fix_yaml(&format!("{path}.exactly"), &format!("{{{}}}", fields.join(", ")));
                let pos = first.pos;
                for (kn, _) in &moved {
                    self.covered.insert((o.file, kn.pos));
                }
                // In a v1beta1 object it is the right form (read as v1, with the apiVersion's
                // warning): its class and selectors are checked as v1's `exactly`'s are.
                if o.api_version == "resource.k8s.io/v1beta1" {
                    self.class_ref(o, req.get("deviceClassName"), &format!("{path}.deviceClassName"));
                    self.request_selectors(o, req, &path, owner);
                    continue;
                }
                self.push(o, pos, Severity::Error, &path, m, Some(fix), true);
                self.class_ref(o, req.get("deviceClassName"), &format!("{path}.deviceClassName"));
                for (j, sel) in seq(req.get("selectors")).iter().enumerate() {
                    self.cel(o, sel, &format!("{path}.selectors[{j}].cel.expression"), owner, j);
                }
            }
            self.class_ref(o, get_path(req, "exactly.deviceClassName"), &format!("{path}.exactly.deviceClassName"));
            if let Some(exactly) = req.get("exactly") {
                self.request_selectors(o, exactly, &format!("{path}.exactly"), owner);
            }
            for (k, sub) in seq(req.get("firstAvailable")).iter().enumerate() {
                let sp = format!("{path}.firstAvailable[{k}]");
                self.class_ref(o, sub.get("deviceClassName"), &format!("{sp}.deviceClassName"));
                self.request_selectors(o, sub, &sp, owner);
            }
        }
    }

    /// A request's (or subrequest's) selectors: each compiled and checked, then, with its class's,
    /// evaluated on the input's devices as the allocator evaluates them (class first): a warning
    /// when together they select none of them (a vendor attribute value no device publishes).
    fn request_selectors(&mut self, o: &Obj<'_, '_>, req: &Node<'_>, path: &str, owner: SelectorOwner<'_>) {
        let sels = seq(req.get("selectors"));
        let mut programs = Vec::new();
        for (j, sel) in sels.iter().enumerate() {
            programs.extend(self.cel(o, sel, &format!("{path}.selectors[{j}].cel.expression"), owner, j));
        }
        let Some(class) = str_of(req.get("deviceClassName")) else { return };
        let Some(Some(class_texts)) = self.ix.class_selectors.get(class) else { return };
        let class_programs: Option<Vec<_>> = class_texts.iter().map(|t| self.env.compile(t).ok()).collect();
        let (Some(class_programs), false) = (class_programs, programs.is_empty()) else { return };
        if programs.len() < sels.len() || self.devices.is_empty() {
            return;
        }
        let (mut matched, mut evaluated, mut first_error) = (0usize, 0usize, None);
        'devices: for (id, view) in &self.devices {
            let Ok(view) = view else { continue };
            let mut ok = true;
            for (from_class, (i, p)) in class_programs
                .iter()
                .enumerate()
                .map(|x| (true, x))
                .chain(programs.iter().enumerate().map(|x| (false, x)))
            {
                let Some(verdict) = self.env.eval_charged(p, view, &self.budget) else { break 'devices };
                match verdict {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => {
                        let who = if from_class { SelectorOwner::Class(class) } else { owner };
                        first_error.get_or_insert_with(|| muster_cel::selector_runtime_error(who, i, id, &e));
                    }
                }
                ok = false;
                break;
            }
            matched += usize::from(ok);
            evaluated += 1;
        }
        if matched > 0 || evaluated < self.devices.iter().filter(|(_, v)| v.is_ok()).count() {
            return;
        }
        let n = self.devices.len();
        let texts: Vec<&str> =
            sels.iter().filter_map(|s| get_path(s, "cel.expression").and_then(Node::as_str)).collect();
        let why = match first_error {
            Some(e) => format!("the selectors fail on some of them, first: {e}"),
            None => {
                let slices: Vec<&ResourceSlice> = self.ix.slices.iter().collect();
                match crate::devices::what_selectors_test(&texts, &slices) {
                    Some(t) => format!("the devices report {t}"),
                    None => format!("`muster devices PATH... --class {class} --selector ...` shows each verdict"),
                }
            }
        };
        let m = format!("with class {class}, selects none of the {n} devices of the input's ResourceSlices; {why}");
        let pos = entry(req, "selectors").map_or(req.pos, |(k, _)| k.pos);
        self.push(o, pos, Severity::Warning, &format!("{path}.selectors"), m, None, false);
    }

    /// Beyond upstream: a gang's device topology key names an attribute some device of the
    /// input's slices publishes (a malformed key or scope is the model's error, reported once).
    fn device_topology(&mut self, o: &Obj<'_, '_>) {
        use muster_sched::device_topology::{KEY_ANNOTATION, SCOPE_ANNOTATION};
        let Some((_, v)) = o.get("metadata.annotations").and_then(|a| entry(a, KEY_ANNOTATION)) else { return };
        let Some((domain, name)) = str_of(Some(v)).and_then(|k| k.split_once('/')) else { return };
        if self.attributes.get(domain).is_some_and(|n| n.contains(name)) {
            let scope = o.get("metadata.annotations").and_then(|a| entry(a, SCOPE_ANNOTATION));
            if str_of(scope.map(|(_, v)| v)) != Some("node") {
                self.one_value_everywhere(o, v.pos, &format!("{domain}/{name}"));
            }
            return;
        }
        if self.devices.is_empty() {
            return;
        }
        let known = match self.attributes.get(domain) {
            Some(names) => {
                format!("attributes under '{domain}': {}", names.iter().cloned().collect::<Vec<_>>().join(", "))
            }
            None => format!(
                "no device has attributes under '{domain}'; their domains: {}",
                self.attributes.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        };
        let m = format!(
            "no device of the input's ResourceSlices has the attribute {domain}/{name}, so the group fits in no domain \
             ({known})"
        );
        let field = format!("metadata.annotations[{KEY_ANNOTATION}]");
        self.push(o, v.pos, Severity::Warning, &field, m, None, false);
    }

    /// In cluster scope, every node's devices having one and the same value of `key` makes one
    /// domain of unrelated nodes: the mark of IDs that only mean something within a node.
    fn one_value_everywhere(&mut self, o: &Obj<'_, '_>, pos: Pos, key: &str) {
        let mut per_node: BTreeMap<&str, BTreeSet<muster_alloc::DomainValue>> = BTreeMap::new();
        for sl in &self.ix.slices {
            let Some(node) = sl.spec.node_name.as_deref() else { continue };
            for d in sl.spec.devices.iter().flatten() {
                if let Ok(view) = DeviceView::new(&sl.spec.driver, d) {
                    per_node.entry(node).or_default().extend(muster_alloc::values_of(&view, key, false));
                }
            }
        }
        // Nodes whose devices lack the attribute are in no domain.
        let sets: Vec<&BTreeSet<muster_alloc::DomainValue>> = per_node.values().filter(|v| !v.is_empty()).collect();
        let Some(first) = sets.first().copied() else { return };
        if sets.len() < 2 || first.len() != 1 || sets.iter().any(|v| *v != first) {
            return;
        }
        let value = first.iter().next().map(ToString::to_string).unwrap_or_default();
        let m = format!(
            "{key} is {value} on all {} nodes that publish it: in cluster scope they make one domain; if the value only \
             means something within a node (a Fabric Manager partition), set {}: node",
            sets.len(),
            muster_sched::device_topology::SCOPE_ANNOTATION
        );
        let field = format!("metadata.annotations[{}]", muster_sched::device_topology::KEY_ANNOTATION);
        self.push(o, pos, Severity::Warning, &field, m, None, false);
    }

    fn pod_group(&mut self, o: &Obj<'_, '_>) {
        let spec = o.get("spec");
        let min = spec.and_then(|s| entry(s, "minCount"));
        let beta = if o.api_version == "scheduling.k8s.io/v1beta1" {
            ""
        } else {
            " (with apiVersion scheduling.k8s.io/v1beta1, preferred)"
        };
        if let Some((k, v)) = min {
            let m = "PodGroup has no spec.minCount: the gang size is spec.schedulingPolicy.gang.minCount \
                     (spec.schedulingPolicy is required: gang or basic)";
            let fix =
                format!("{}{beta}", fix_yaml("spec.schedulingPolicy", &format!("{{gang: {{minCount: {}}}}}", flow(v))));
            self.push(o, k.pos, Severity::Error, "spec.minCount", m.into(), Some(fix), true);
        }
        if let Some((k, v)) = spec.and_then(|s| entry(s, "scheduleTimeoutSeconds")) {
            let m = format!(
                "PodGroup has no scheduleTimeoutSeconds in any version: in Kubernetes 1.37 a gang waits for its pods at \
                 most the scheduler's fixed 5-minute Permit timeout, then retries with backoff (muster: \
                 --gang-wait-timeout, default 300s); remove scheduleTimeoutSeconds: {}",
                flow(v)
            );
            self.push(o, k.pos, Severity::Error, "spec.scheduleTimeoutSeconds", m, None, true);
        }
        let policy = spec.and_then(|s| s.get("schedulingPolicy"));
        match policy {
            None if min.is_none() => {
                let pos = entry(o.node, "spec").map_or(o.node.pos, |(k, _)| k.pos);
                let m = "required value: the group's policy, gang (all-or-nothing, with minCount) or basic";
                let fix = fix_yaml("spec.schedulingPolicy", "{gang: {minCount: N}} or {basic: {}}");
                self.push(o, pos, Severity::Error, "spec.schedulingPolicy", m.into(), Some(fix), false);
            }
            Some(p) if usize::from(p.get("gang").is_some()) + usize::from(p.get("basic").is_some()) != 1 => {
                let m = "exactly one of gang and basic must be set";
                self.push(o, p.pos, Severity::Error, "spec.schedulingPolicy", m.into(), None, false);
            }
            _ => {}
        }
        if let Some(s) = spec {
            self.priority_class(o, s, "spec.priorityClassName");
            self.claim_refs(o, s.get("resourceClaims"), "spec.resourceClaims");
        }
    }

    fn priority_class(&mut self, o: &Obj<'_, '_>, holder: &Node<'_>, field: &str) {
        let Some(n) = holder.get("priorityClassName") else { return };
        let Some(name) = str_of(Some(n)) else { return };
        if !matches!(name, "system-cluster-critical" | "system-node-critical")
            && !self.ix.has("PriorityClass", "", name)
        {
            let m = format!("PriorityClass {name:?} is not in the input (nor a system class)");
            self.push(o, n.pos, Severity::Error, field, m, None, false);
        }
    }

    /// `resourceClaims[]` of a pod or PodGroup: each names a claim or a template of the namespace.
    fn claim_refs(&mut self, o: &Obj<'_, '_>, list: Option<&Node<'_>>, path: &str) {
        for (i, c) in seq(list).iter().enumerate() {
            for (key, kind) in
                [("resourceClaimTemplateName", "ResourceClaimTemplate"), ("resourceClaimName", "ResourceClaim")]
            {
                let Some(n) = c.get(key) else { continue };
                let Some(name) = str_of(Some(n)) else { continue };
                if self.ix.has(kind, &o.namespace, name) {
                    continue;
                }
                let field = format!("{path}[{i}].{key}");
                let by = self.ix.provided_templates.iter().find(|t| t.namespace == o.namespace && t.name == name);
                match by.filter(|_| kind == "ResourceClaimTemplate") {
                    Some(t) => {
                        let m = format!(
                            "{kind} {}/{name} is made at run time by {}; the pod waits for it",
                            o.namespace, t.by
                        );
                        self.push(o, n.pos, Severity::Warning, &field, m, None, false);
                    }
                    None => {
                        let m = format!("{kind} {}/{name} is not in the input", o.namespace);
                        self.push(o, n.pos, Severity::Error, &field, m, None, false);
                    }
                }
            }
        }
    }

    fn pod(&mut self, o: &Obj<'_, '_>) {
        let Some(spec) = o.get("spec") else { return };
        self.claim_refs(o, spec.get("resourceClaims"), "spec.resourceClaims");
        self.priority_class(o, spec, "spec.priorityClassName");
        if let Some(n) = get_path(spec, "schedulingGroup.podGroupName")
            && let Some(name) = str_of(Some(n))
            && !self.ix.has("PodGroup", &o.namespace, name)
        {
            let m = format!(
                "PodGroup {}/{name} is not in the input (the pod waits until it exists; a pod joins a group of its own namespace)",
                o.namespace
            );
            self.push(o, n.pos, Severity::Error, "spec.schedulingGroup.podGroupName", m, None, false);
        }
        if let Some((k, group)) = label_membership(o, self.ix) {
            let key = k.as_str().unwrap_or_default();
            let m = format!(
                "the label or annotation {key}: {group} does not make the pod a member of a PodGroup: membership is \
                 spec.schedulingGroup.podGroupName (a PodGroup of the pod's namespace); labels have no effect"
            );
            let fix = fix_yaml("spec.schedulingGroup", &format!("{{podGroupName: {group}}}"));
            self.push(o, k.pos, Severity::Warning, "spec.schedulingGroup", m, Some(fix), false);
        }
        // Containers name the pod's claims.
        let claims: HashSet<&str> =
            seq(spec.get("resourceClaims")).iter().filter_map(|c| str_of(c.get("name"))).collect();
        for list in ["initContainers", "containers"] {
            for (i, c) in seq(spec.get(list)).iter().enumerate() {
                for (j, rc) in seq(get_path(c, "resources.claims")).iter().enumerate() {
                    let Some(n) = rc.get("name") else { continue };
                    if let Some(name) = str_of(Some(n))
                        && !claims.contains(name)
                    {
                        let m = format!("the pod has no spec.resourceClaims entry named {name:?}");
                        self.push(
                            o,
                            n.pos,
                            Severity::Error,
                            &format!("spec.{list}[{i}].resources.claims[{j}].name"),
                            m,
                            None,
                            false,
                        );
                    }
                }
            }
        }
    }
}

/// The request name `convert` gives the single request of a flat claim.
pub(crate) fn request_name(class: &str) -> &'static str {
    let c = class.to_ascii_lowercase();
    if c.contains("gpu") || c.contains("nvidia") { "gpus" } else { "devices" }
}

/// A node as one-line flow YAML (for messages).
pub(crate) fn flow(n: &Node<'_>) -> String {
    match &n.value {
        Value::Scalar { text, plain } => {
            if *plain || (!text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))) {
                text.to_string()
            } else {
                serde_json::to_string(text.as_ref()).unwrap_or_default()
            }
        }
        Value::Seq(items) => format!("[{}]", items.iter().map(flow).collect::<Vec<_>>().join(", ")),
        Value::Map(entries) => format!(
            "{{{}}}",
            entries.iter().map(|(k, v)| format!("{}: {}", flow(k), flow(v))).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `muster check PATH... [-o json]`: prints the findings; exit status 0 without errors, 1 with
/// errors, 2 when some input cannot be read.
pub fn run(paths: &[PathBuf], json_output: bool) -> anyhow::Result<std::process::ExitCode> {
    let sources = match read_inputs(paths) {
        Ok(s) => s,
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            return Ok(std::process::ExitCode::from(2));
        }
    };
    let findings = check(&sources);
    if json_output {
        println!("{}", serde_json::to_string_pretty(&json(&sources, &findings))?);
    } else {
        print!("{}", human(&sources, &findings));
    }
    let errors = findings.iter().any(|f| f.severity == Severity::Error);
    Ok(std::process::ExitCode::from(u8::from(errors)))
}

/// The whole check: every finding, sorted by file (input order), line and column.
pub fn check(sources: &[Source]) -> Vec<Finding> {
    let parsed: Vec<Vec<Piece<'_>>> = sources.iter().map(|s| pieces(&s.text)).collect();
    let mut objects = Vec::new();
    for (file, ps) in parsed.iter().enumerate() {
        for p in ps {
            for d in p.docs.iter().flatten() {
                objects_of(file, &d.root, None, &mut objects);
            }
        }
    }
    let ix = Index::build(&objects);
    let lines: Vec<Vec<&str>> = sources.iter().map(|s| s.text.lines().collect()).collect();
    let mut ck = Checker::new(&lines, &ix);
    for o in &objects {
        ck.object(o);
    }
    // The same object in two files (the loader reports repeats within a file).
    let mut first: HashMap<(&str, &str, &str), &Obj<'_, '_>> = HashMap::new();
    for o in &objects {
        if o.name == "<unnamed>" || muster_manifest::object::supported_versions(&o.kind).is_empty() {
            continue;
        }
        match first.get(&(o.kind.as_str(), o.namespace.as_str(), o.name.as_str())) {
            Some(f) if f.file != o.file => {
                let m = format!("defined twice; first defined at {}:{}", sources[f.file].name, f.node.pos);
                ck.push(o, o.node.pos, Severity::Error, "", m, None, false);
            }
            Some(_) => {}
            None => {
                first.insert((&o.kind, &o.namespace, &o.name), o);
            }
        }
    }
    // The strict loader, file by file; errors the scan explained are dropped.
    for (file, s) in sources.iter().enumerate() {
        let Err(diags) = muster_manifest::load_str(&s.name, &s.text) else { continue };
        for d in diags {
            if d.pos.is_some_and(|p| ck.covered.contains(&(file, p))) {
                continue;
            }
            ck.findings.push(Finding {
                file,
                pos: d.pos,
                severity: Severity::Error,
                object: d.object.map(|o| default_namespace(&o)),
                field: d.field.filter(|f| !f.is_empty()),
                message: d.message,
                fix: None,
            });
        }
    }
    model_findings(sources, &mut ck.findings);
    let mut findings = ck.findings;
    findings.sort_by_key(|f| (f.file, f.pos.map(|p| (p.line, p.col))));
    findings.dedup();
    findings
}

/// What building the cluster model finds (the layer `plan` shares: negative quantities, a
/// missing PriorityClass, a pod without a spec, ...), from the objects that load, as `plan`
/// reports it: each problem on an object of the input that no other finding is about and that
/// does not only echo an object that did not load. When the model builds, its located warnings
/// (an allocation naming a device no slice publishes) are warnings here too.
fn model_findings(sources: &[Source], findings: &mut Vec<Finding>) {
    let texts: Vec<(&str, &str)> = sources.iter().map(|s| (&*s.name, s.text.as_str())).collect();
    let mut partial = muster_manifest::load_texts_partial(&texts);
    let all = std::mem::take(&mut partial.manifests);
    // Objects of the input (not those a workload controller would create: their problems are
    // their template's, which the scan reports on the workload).
    let input: HashSet<String> = all.objects.iter().map(|l| default_namespace(&l.object.display_name())).collect();
    let (diags, severity) = match crate::memory::World::from_manifests(all, &muster_sched::SchedulerNames::default()) {
        Err(diags) => (diags, Severity::Error),
        Ok(world) => (world.warnings, Severity::Warning),
    };
    // The scan's own findings, by object: a model error on a field the scan already reported
    // (the same field, or one inside the other) is the same problem in other words.
    let mut scanned: HashMap<String, Vec<Option<String>>> = HashMap::new();
    for f in findings.iter() {
        if let Some(o) = f.object.clone() {
            scanned.entry(o).or_default().push(f.field.clone());
        }
    }
    let seen = |object: &str, field: Option<&str>| {
        scanned.get(object).is_some_and(|fields| {
            fields.iter().any(|f| match (f.as_deref(), field) {
                (Some(a), Some(b)) => within(a, b) || within(b, a),
                _ => true,
            })
        })
    };
    for d in diags {
        if partial.echoes(&d) {
            continue;
        }
        let object = d.object.map(|o| default_namespace(&o));
        if object.as_ref().is_none_or(|o| seen(o, d.field.as_deref()) || !input.contains(o)) {
            continue;
        }
        let file = sources.iter().position(|s| *s.name == *d.file).unwrap_or(0);
        findings.push(Finding {
            file,
            pos: d.pos,
            severity,
            object,
            field: d.field.filter(|f| !f.is_empty()),
            message: d.message,
            fix: None,
        });
    }
}

/// Whether field path `inner` is `outer` or a field inside it (`spec.devices[1].name` is inside
/// `spec.devices[1]`; `spec.devices[10]` is not).
fn within(inner: &str, outer: &str) -> bool {
    inner.strip_prefix(outer).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The loader names objects as written (`Pod x`); namespaced kinds are named `Pod default/x`.
fn default_namespace(object: &str) -> String {
    match object.split_once(' ') {
        Some((kind, name)) if namespaced(kind) && !name.contains('/') && name != "<unnamed>" => {
            format!("{kind} default/{name}")
        }
        _ => object.to_string(),
    }
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// `N errors, M warnings in K files`.
pub fn summary(findings: &[Finding], files: usize) -> String {
    let errors = findings.iter().filter(|f| f.severity == Severity::Error).count();
    format!("{}, {} in {}", plural(errors, "error"), plural(findings.len() - errors, "warning"), plural(files, "file"))
}

/// The human report: findings grouped by file (a blank line between files), each
/// `file:line:col: severity: Object: field: message`, its 1.37 form indented below, and the summary.
pub fn human(sources: &[Source], findings: &[Finding]) -> String {
    let mut out = String::new();
    let mut last_file = None;
    for f in findings {
        if last_file.is_some_and(|l| l != f.file) {
            out.push('\n');
        }
        last_file = Some(f.file);
        out.push_str(&sources[f.file].name);
        if let Some(p) = f.pos {
            let _ = write!(out, ":{p}");
        }
        let _ = write!(out, ": {}: ", f.severity.as_str());
        if let Some(o) = &f.object {
            let _ = write!(out, "{o}: ");
        }
        if let Some(field) = &f.field {
            let _ = write!(out, "{field}: ");
        }
        let mut lines = f.message.lines();
        out.push_str(lines.next().unwrap_or(""));
        out.push('\n');
        for l in lines {
            let _ = writeln!(out, "    {l}");
        }
        if let Some(fix) = &f.fix {
            let mut lines = fix.lines();
            let _ = writeln!(out, "  1.37: {}", lines.next().unwrap_or(""));
            for l in lines {
                let _ = writeln!(out, "        {l}");
            }
        }
    }
    if !findings.is_empty() {
        out.push('\n');
    }
    out.push_str(&summary(findings, sources.len()));
    out.push('\n');
    out
}

/// `-o json`: a list of `{file, line, column, severity, object, field, message, fix}`.
pub fn json(sources: &[Source], findings: &[Finding]) -> serde_json::Value {
    serde_json::Value::Array(
        findings
            .iter()
            .map(|f| {
                json!({
                    "file": &*sources[f.file].name,
                    "line": f.pos.map(|p| p.line),
                    "column": f.pos.map(|p| p.col),
                    "severity": f.severity.as_str(),
                    "object": f.object,
                    "field": f.field,
                    "message": f.message,
                    "fix": f.fix,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> Vec<Finding> {
        check(&[Source { name: "t.yaml".into(), text: text.into() }])
    }

    #[test]
    fn locates_offsets_in_block_and_flow_scalars() {
        let text = "a:\n  e: >\n    one two\n    three\n  f: 'x y'\n";
        let docs = yaml::parse_stream(text).unwrap();
        let e = get_path(&docs[0].root, "a.e").unwrap();
        let v = e.as_str().unwrap();
        assert_eq!(v, "one two three\n");
        let text: Vec<&str> = text.lines().collect();
        let text = &text[..];
        assert_eq!(locate(text, e, v, 4), Pos { line: 3, col: 9 });
        assert_eq!(locate(text, e, v, 8), Pos { line: 4, col: 5 });
        let f = get_path(&docs[0].root, "a.f").unwrap();
        assert_eq!(locate(text, f, "x y", 2), Pos { line: 5, col: 9 });
    }

    #[test]
    fn a_field_is_within_itself_and_its_parents_only() {
        assert!(within("spec.devices[1].name", "spec.devices[1]"));
        assert!(within("spec.devices[1]", "spec.devices[1]"));
        assert!(within("spec.devices[1]", "spec.devices"));
        assert!(!within("spec.devices[10]", "spec.devices[1]"));
        assert!(!within("spec.devicesX", "spec.devices"));
    }

    #[test]
    fn valid_objects_have_no_findings() {
        let f = run(
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\nspec:\n  schedulingPolicy: {gang: {minCount: 2}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {workload: g}}\nspec:\n  schedulingGroup: {podGroupName: g}\n  containers: [{name: c, image: i}]\n",
        );
        assert_eq!(f, vec![]);
    }

    #[test]
    fn a_pod_group_without_policy_is_an_error() {
        let f = run(
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec: {}\n",
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].object.as_deref(), Some("PodGroup ml/g"));
        assert_eq!(f[0].field.as_deref(), Some("spec.schedulingPolicy"));
        assert_eq!(f[0].pos, Some(Pos { line: 4, col: 1 }));
    }
}
