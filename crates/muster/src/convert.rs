//! `muster convert`: rewrites the outdated forms `muster check` names (workload-spec.md §12) into
//! Kubernetes 1.37 objects.
//!
//! Documents that need no change are copied byte for byte, comments included. A document that
//! does is written anew from its located tree (the comment lines before it are kept), and every
//! change made on an assumption carries a `# muster convert: ...` comment. What is converted:
//!
//! - DeviceTaintRule (`spec.nodeName`, `spec.deviceName`, `spec.taints[]`) → resource.k8s.io/v1
//!   with `spec.deviceSelector {driver, pool, device}` and one rule per taint; the pool is the node
//!   name (node-local drivers name their pool after the node), the driver comes from a slice that
//!   publishes the device, or from the input's DeviceClass selectors, or is left to fill in;
//! - DeviceClass → resource.k8s.io/v1, CEL rewritten ([`crate::check::cel_text::rewrite`]);
//! - ResourceClaimTemplate / ResourceClaim: `deviceClassName` + `count` in the claim spec, or
//!   v1beta1's request fields, → `devices.requests[].exactly`;
//! - PodGroup → scheduling.k8s.io/v1beta1 with `schedulingPolicy.gang.minCount`,
//!   `scheduleTimeoutSeconds` dropped;
//! - pods that join a PodGroup by label → `spec.schedulingGroup.podGroupName`.

use std::fmt::Write as _;

use muster_manifest::yaml::{Node, Resolved, Value, resolve_plain};

use crate::check::cel_text;
use crate::check::{self, Index, Obj, Source, label_membership, objects_of, request_name, seq, str_of};
use crate::text;

/// A YAML tree to write: scalars keep their text and whether they were quoted; map entries
/// carry the comment lines written before them.
#[derive(Clone, Debug, PartialEq)]
enum Y {
    Scalar(String, Style),
    Seq(Vec<Y>),
    Map(Vec<(String, Y, Vec<String>)>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    /// Written plain (its YAML reading depends on the text: `4` is a number).
    Plain,
    /// Always a string.
    Quoted,
    /// A string written as a folded block (`>-`), one line per line of the text.
    Folded,
}

impl Y {
    fn from_node(n: &Node<'_>) -> Y {
        match &n.value {
            Value::Scalar { text, plain } => {
                Y::Scalar(text.to_string(), if *plain { Style::Plain } else { Style::Quoted })
            }
            Value::Seq(items) => Y::Seq(items.iter().map(Y::from_node).collect()),
            Value::Map(entries) => Y::Map(
                entries
                    .iter()
                    .map(|(k, v)| (k.as_str().unwrap_or("").to_string(), Y::from_node(v), Vec::new()))
                    .collect(),
            ),
        }
    }

    fn plain(s: &str) -> Y {
        Y::Scalar(s.to_string(), Style::Plain)
    }

    /// A string from the input (a name): plain when it reads back as that string, quoted when
    /// plain it would read as something else (`true`, `1`, `~`, `a: b`).
    fn text(s: &str) -> Y {
        match resolve_plain(s) {
            Resolved::Str if !needs_quotes(s) => Y::plain(s),
            _ => Y::string(s),
        }
    }

    fn string(s: &str) -> Y {
        Y::Scalar(s.to_string(), Style::Quoted)
    }

    fn map() -> Y {
        Y::Map(Vec::new())
    }

    fn get(&self, key: &str) -> Option<&Y> {
        match self {
            Y::Map(e) => e.iter().find(|(k, _, _)| k == key).map(|(_, v, _)| v),
            _ => None,
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Y> {
        match self {
            Y::Map(e) => e.iter_mut().find(|(k, _, _)| k == key).map(|(_, v, _)| v),
            _ => None,
        }
    }

    fn path_mut(&mut self, path: &str) -> Option<&mut Y> {
        path.split('.').try_fold(self, |y, k| y.get_mut(k))
    }

    fn remove(&mut self, key: &str) -> Option<Y> {
        match self {
            Y::Map(e) => e.iter().position(|(k, _, _)| k == key).map(|i| e.remove(i).1),
            _ => None,
        }
    }

    /// Is this written as nothing (`key:`, `~`, `null`), which reads as an empty mapping?
    fn is_null(&self) -> bool {
        matches!(self, Y::Scalar(s, Style::Plain) if matches!(resolve_plain(s), Resolved::Null))
    }

    /// The entries of a mapping; a value of another kind is replaced by an empty mapping first
    /// (callers check with [`mapping`] that it is a mapping or nothing).
    fn entries_mut(&mut self) -> &mut Vec<(String, Y, Vec<String>)> {
        if !matches!(self, Y::Map(_)) {
            *self = Y::map();
        }
        match self {
            Y::Map(e) => e,
            _ => unreachable!("made a mapping above"),
        }
    }

    /// Sets `key` (in place if present, else appended) and returns its comment list.
    fn set(&mut self, key: &str, value: Y) -> &mut Vec<String> {
        let e = self.entries_mut();
        let i = match e.iter().position(|(k, _, _)| k == key) {
            Some(i) => {
                e[i].1 = value;
                i
            }
            None => {
                e.push((key.to_string(), value, Vec::new()));
                e.len() - 1
            }
        };
        &mut e[i].2
    }

    /// Inserts `key` first.
    fn set_first(&mut self, key: &str, value: Y) -> &mut Vec<String> {
        let e = self.entries_mut();
        e.retain(|(k, _, _)| k != key);
        e.insert(0, (key.to_string(), value, Vec::new()));
        &mut e[0].2
    }

    fn comment(&mut self, key: &str, note: String) {
        if let Y::Map(e) = self
            && let Some((_, _, c)) = e.iter_mut().find(|(k, _, _)| k == key)
        {
            c.push(note);
        }
    }

    fn str(&self) -> Option<&str> {
        match self {
            Y::Scalar(s, _) => Some(s),
            _ => None,
        }
    }
}

/// Checks that `field` of `o` (its value in the tree being rewritten is `y`) is a mapping or
/// nothing, as a rewrite that adds keys to it needs; the error names the object, the field and
/// where it is written.
fn mapping(o: &Obj<'_, '_>, field: &str, y: Option<&Y>, node: Option<&Node<'_>>) -> anyhow::Result<()> {
    let what = match y {
        None | Some(Y::Map(_)) => return Ok(()),
        Some(y) if y.is_null() => return Ok(()),
        Some(Y::Seq(_)) => "a list".to_string(),
        Some(Y::Scalar(s, _)) => format!("the scalar {}", crate::text::clip(&serde_json::to_string(s)?, 60)),
    };
    let pos = node.map_or(o.node.pos, |n| n.pos);
    anyhow::bail!("line {pos}: {}: {field}: expected a mapping, found {what}; cannot convert it", o.display())
}

fn note(s: impl std::fmt::Display) -> String {
    format!("muster convert: {s}")
}

// ---------------------------------------------------------------------------------------------
// Writing YAML.

fn needs_quotes(s: &str) -> bool {
    s.is_empty()
        || s.starts_with(|c: char| " -?:,[]{}#&*!|>'\"%@`".contains(c))
        || s.ends_with([' ', ':'])
        || s.contains(": ")
        || s.contains(" #")
        || s.contains(text::special)
}

fn scalar(s: &str, style: Style) -> String {
    match style {
        Style::Plain if !needs_quotes(s) => s.to_string(),
        _ if !s.contains(['\\']) && !s.contains(text::special) => {
            format!("'{}'", s.replace('\'', "''"))
        }
        _ => text::double_quoted(s),
    }
}

fn key(k: &str) -> String {
    if needs_quotes(k) || matches!(muster_manifest::yaml::resolve_plain(k), muster_manifest::yaml::Resolved::Null) {
        scalar(k, Style::Quoted)
    } else {
        k.to_string()
    }
}

fn comments(out: &mut String, indent: usize, c: &[String]) {
    for line in c.iter().flat_map(|c| c.lines()) {
        let _ = writeln!(out, "{:indent$}# {}", "", text::one_line(line));
    }
}

/// The value after `key:` (a scalar, `{}`, `[]`) or None when it goes on the next lines.
fn inline(y: &Y) -> Option<String> {
    match y {
        Y::Scalar(s, Style::Folded) if s.contains(|c| text::special(c) && c != '\n') => Some(scalar(s, Style::Quoted)),
        Y::Scalar(s, Style::Folded) if s.contains('\n') || s.len() > 60 => None,
        Y::Scalar(s, Style::Folded) => Some(scalar(s, Style::Quoted)),
        Y::Scalar(s, _) if s.contains('\n') && literal_ok(s) => None,
        Y::Scalar(s, style) => Some(scalar(s, *style)),
        Y::Seq(v) if v.is_empty() => Some("[]".into()),
        Y::Map(e) if e.is_empty() => Some("{}".into()),
        _ => None,
    }
}

/// Can a multi-line string be written as a literal block (`|`)?
fn literal_ok(s: &str) -> bool {
    !s.starts_with([' ', '\n'])
        && !s.contains(['\r', '\t'])
        && !s.trim_end_matches('\n').ends_with(' ')
        && !s.ends_with("\n\n")
        && !s.contains(|c| text::special(c) && c != '\n')
}

/// Writes the value of an entry whose `key:` is already written (without a newline).
fn value_after_key(out: &mut String, y: &Y, indent: usize) {
    if let Some(s) = inline(y) {
        let _ = writeln!(out, " {s}");
        return;
    }
    match y {
        Y::Scalar(s, Style::Folded) => {
            out.push_str(" >-\n");
            for l in s.lines() {
                let _ = writeln!(out, "{:w$}{l}", "", w = indent + 2);
            }
        }
        Y::Scalar(s, _) => {
            out.push_str(if s.ends_with('\n') { " |\n" } else { " |-\n" });
            for l in s.trim_end_matches('\n').lines() {
                if l.is_empty() {
                    out.push('\n');
                } else {
                    let _ = writeln!(out, "{:w$}{l}", "", w = indent + 2);
                }
            }
        }
        Y::Map(e) => {
            out.push('\n');
            write_map(out, e, indent + 2);
        }
        Y::Seq(items) => {
            out.push('\n');
            write_seq(out, items, indent);
        }
    }
}

fn write_map(out: &mut String, entries: &[(String, Y, Vec<String>)], indent: usize) {
    for (k, v, c) in entries {
        comments(out, indent, c);
        let _ = write!(out, "{:indent$}{}:", "", key(k));
        value_after_key(out, v, indent);
    }
}

/// Sequence items at `indent` (`- ` at the key's indentation, as kubectl writes them).
fn write_seq(out: &mut String, items: &[Y], indent: usize) {
    for item in items {
        match item {
            Y::Map(e) if !e.is_empty() => {
                comments(out, indent, &e[0].2);
                let (k, v, _) = &e[0];
                let _ = write!(out, "{:indent$}- {}:", "", key(k));
                value_after_key(out, v, indent + 2);
                write_map(out, &e[1..], indent + 2);
            }
            Y::Seq(inner) if !inner.is_empty() => {
                let _ = writeln!(out, "{:indent$}-", "");
                write_seq(out, inner, indent + 2);
            }
            other => {
                let s = inline(other).unwrap_or_else(|| match other {
                    Y::Scalar(s, _) => text::double_quoted(s),
                    _ => unreachable!("non-empty collections are handled above"),
                });
                let _ = writeln!(out, "{:indent$}- {s}", "");
            }
        }
    }
}

/// One document: its comment lines, then the object.
fn write_doc(out: &mut String, y: &Y, doc_comments: &[String]) {
    comments(out, 0, doc_comments);
    match y {
        Y::Map(e) => write_map(out, e, 0),
        other => value_after_key(out, other, 0),
    }
}

// ---------------------------------------------------------------------------------------------
// Converting objects.

/// An object converted: the documents that replace it, each with its leading comments.
type Converted = Vec<(Y, Vec<String>)>;

/// Converts one object, or None when it is already in its 1.37 form; an error when a field the
/// rewrite adds to is not a mapping.
fn convert_object(o: &Obj<'_, '_>, ix: &Index) -> anyhow::Result<Option<Converted>> {
    match o.kind.as_str() {
        "DeviceTaintRule" => device_taint_rule(o, ix),
        "DeviceClass" => Ok(device_class(o)),
        "ResourceClaim" => claim(o, "spec"),
        "ResourceClaimTemplate" => claim(o, "spec.spec"),
        "PodGroup" => pod_group(o),
        "Pod" => pod(o, ix),
        _ => Ok(None),
    }
}

fn version_note(o: &Obj<'_, '_>, to: &str) -> Option<String> {
    (o.api_version != to).then(|| note(format!("apiVersion {} became {to}", o.api_version)))
}

fn device_taint_rule(o: &Obj<'_, '_>, ix: &Index) -> anyhow::Result<Option<Converted>> {
    const V1: &str = "resource.k8s.io/v1";
    let spec = o.get("spec");
    let old = spec.is_some_and(|s| ["nodeName", "deviceName", "taints"].iter().any(|k| s.get(k).is_some()));
    if !old && o.api_version == V1 {
        return Ok(None);
    }
    let mut base = Y::from_node(o.node);
    mapping(o, "spec", base.get("spec"), spec)?;
    mapping(o, "metadata", base.get("metadata"), o.get("metadata"))?;
    base.set("apiVersion", Y::plain(V1));
    base.remove("status");
    let mut doc_notes: Vec<String> = version_note(o, V1).into_iter().collect();
    let node = spec.and_then(|s| str_of(s.get("nodeName")));
    let device = spec.and_then(|s| str_of(s.get("deviceName")));
    // The selector: what was there, then pool/device from the node and device names.
    let selector_node = spec.and_then(|s| s.get("deviceSelector"));
    let mut selector = selector_node.map_or_else(Y::map, Y::from_node);
    mapping(o, "spec.deviceSelector", Some(&selector), selector_node)?;
    if selector.is_null() {
        selector = Y::map();
    }
    let mut driver_note = None;
    if node.is_some() || device.is_some() {
        let inferred = ix.infer_driver(node, device);
        if selector.get("driver").is_none() {
            match &inferred {
                Some((d, _, why)) => {
                    selector.set("driver", Y::text(d)).push(note(format!("driver {why}")));
                }
                None => {
                    driver_note = Some(note(
                        "fill in spec.deviceSelector.driver (the driver that publishes the device): no ResourceSlice \
                     or DeviceClass of the input names it, and without it the rule matches the device in that pool of every driver",
                    ))
                }
            }
        }
        if let Some(n) = node
            && selector.get("pool").is_none()
        {
            let pool = inferred.as_ref().and_then(|(_, p, _)| p.clone()).unwrap_or_else(|| n.to_string());
            let why = if pool == n {
                format!("pool is spec.nodeName {n}: node-local drivers (gpu.nvidia.com) name their pool after the node")
            } else {
                format!("pool {pool} is the pool of the slice that publishes the device on node {n}")
            };
            selector.set("pool", Y::text(&pool)).push(note(why));
        }
        if let Some(d) = device
            && selector.get("device").is_none()
        {
            let c = selector.set("device", Y::text(d));
            let nvidia = inferred.as_ref().is_some_and(|(dr, p, _)| dr == cel_text::NVIDIA_DRIVER && p.is_none());
            if nvidia && !is_nvidia_device_name(d) {
                c.push(note(format!(
                    "{} names devices gpu-<minor> (MIG: gpu-<minor>-mig-...): check {d} against the node's ResourceSlice",
                    cel_text::NVIDIA_DRIVER
                )));
            }
        }
    }
    let taints: Vec<Y> = match spec.and_then(|s| s.get("taints")) {
        Some(t) => seq(Some(t)).iter().map(Y::from_node).collect(),
        None => spec.and_then(|s| s.get("taint")).map(Y::from_node).into_iter().collect(),
    };
    let mut out = Vec::new();
    let n = taints.len().max(1);
    for i in 0..n {
        let mut y = base.clone();
        let mut notes = doc_notes.clone();
        if n > 1 {
            let name = format!("{}-{i}", o.name);
            match y.get_mut("metadata") {
                Some(m) => {
                    m.set("name", Y::text(&name));
                }
                None => {
                    y.set("metadata", Y::Map(vec![("name".into(), Y::text(&name), Vec::new())]));
                }
            }
            notes.push(note(format!("rule {} of {n} made from {} (a DeviceTaintRule has one taint)", i + 1, o.name)));
        }
        let mut new_spec = Y::map();
        let c = new_spec.set("deviceSelector", selector.clone());
        c.extend(driver_note.clone());
        match taints.get(i) {
            Some(t) => {
                new_spec.set("taint", t.clone());
            }
            None => {
                new_spec
                    .set("taint", Y::Map(vec![("key".into(), Y::string(""), Vec::new())]))
                    .push(note("fill in the taint: {key, value, effect}; the rule had none"));
            }
        }
        if n == 1 && spec.is_some_and(|s| s.get("taints").is_some()) {
            new_spec.comment("taint", note("spec.taints[] became spec.taint (a DeviceTaintRule has one taint)"));
        }
        y.set("spec", new_spec);
        out.push((y, std::mem::take(&mut notes)));
        doc_notes.clear();
        doc_notes.extend(version_note(o, V1));
    }
    Ok(Some(out))
}

fn is_nvidia_device_name(d: &str) -> bool {
    d.strip_prefix("gpu-").is_some_and(|rest| rest.split('-').next().is_some_and(|m| m.parse::<u32>().is_ok()))
}

/// Rewrites the CEL selectors of a list (`selectors: [{cel: {expression}}]`) in place; true when
/// one changed.
fn rewrite_selectors(list: Option<&mut Y>) -> bool {
    let Some(Y::Seq(items)) = list else { return false };
    let mut changed = false;
    for sel in items {
        let Some(cel) = sel.get_mut("cel") else { continue };
        let Some(expr) = cel.get("expression").and_then(Y::str).map(str::to_string) else { continue };
        let rw = cel_text::rewrite(&expr);
        if rw.notes.is_empty() {
            continue;
        }
        changed = true;
        let mut notes: Vec<String> = rw.notes.iter().map(note).collect();
        if let Err(e) = muster_cel::Env::default().compile(&rw.text) {
            notes.push(note(format!("the rewritten expression does not compile, fix it by hand: {e}")));
        }
        cel.set("expression", Y::Scalar(rw.text, Style::Folded)).extend(notes);
    }
    changed
}

fn device_class(o: &Obj<'_, '_>) -> Option<Converted> {
    const V1: &str = "resource.k8s.io/v1";
    let mut y = Y::from_node(o.node);
    let changed = rewrite_selectors(y.path_mut("spec.selectors"));
    if !changed && o.api_version == V1 {
        return None;
    }
    y.set("apiVersion", Y::plain(V1));
    Some(vec![(y, version_note(o, V1).into_iter().collect())])
}

fn claim(o: &Obj<'_, '_>, prefix: &str) -> anyhow::Result<Option<Converted>> {
    const V1: &str = "resource.k8s.io/v1";
    let mut y = Y::from_node(o.node);
    let mut changed = false;
    let cs_node = o.get(prefix);
    if let Some(cs) = y.path_mut(prefix) {
        // The flat form: deviceClassName, count (and friends) in the claim spec.
        if cs_node.is_some_and(|n| n.get("deviceClassName").is_some() || n.get("count").is_some()) {
            changed = true;
            let class = cs.remove("deviceClassName");
            let count = cs.remove("count");
            let had_count = count.is_some();
            let mode = cs.remove("allocationMode");
            let selectors = cs.remove("selectors");
            let admin = cs.remove("adminAccess");
            let class_name = class.as_ref().and_then(Y::str).unwrap_or("").to_string();
            let name = request_name(&class_name);
            let mut exactly = Y::map();
            match class {
                Some(c) => {
                    exactly.set("deviceClassName", c);
                }
                None => {
                    exactly.set("deviceClassName", Y::string("")).push(note("fill in the DeviceClass"));
                }
            }
            let all = mode.as_ref().and_then(Y::str) == Some("All");
            exactly.set("allocationMode", Y::plain(if all { "All" } else { "ExactCount" }));
            if !all {
                exactly.set("count", count.unwrap_or_else(|| Y::plain("1")));
            }
            if let Some(s) = selectors {
                exactly.set("selectors", s);
            }
            if let Some(a) = admin {
                exactly.set("adminAccess", a);
            }
            let request =
                Y::Map(vec![("name".into(), Y::text(name), Vec::new()), ("exactly".into(), exactly, Vec::new())]);
            let devices_field = format!("{prefix}.devices");
            let devices_node = o.get(&devices_field);
            let mut devices = cs.remove("devices").filter(|d| !d.is_null()).unwrap_or_else(Y::map);
            mapping(o, &devices_field, Some(&devices), devices_node)?;
            let mut requests = match devices.remove("requests") {
                Some(Y::Seq(r)) => r,
                None => Vec::new(),
                Some(r) if r.is_null() => Vec::new(),
                Some(_) => anyhow::bail!(
                    "line {}: {}: {devices_field}.requests: expected a list; cannot convert it",
                    devices_node.and_then(|d| d.get("requests")).map_or(o.node.pos, |n| n.pos),
                    o.display()
                ),
            };
            requests.insert(0, request);
            let what = if had_count { "deviceClassName and count" } else { "deviceClassName (count 1 assumed)" };
            devices.set("requests", Y::Seq(requests)).push(note(format!(
                "{prefix}.{what} became request {name:?} (containers may name it in resources.claims[].request)"
            )));
            cs.set_first("devices", devices);
        }
        // v1beta1 requests: the fields of `exactly` directly in the request.
        if let Some(Y::Seq(requests)) = cs.path_mut("devices.requests") {
            let request_nodes = check::seq(o.get(&format!("{prefix}.devices.requests")));
            for (i, r) in requests.iter_mut().enumerate() {
                let moved: Vec<(String, Y)> = [
                    "deviceClassName",
                    "allocationMode",
                    "count",
                    "selectors",
                    "adminAccess",
                    "tolerations",
                    "capacity",
                ]
                .into_iter()
                .filter_map(|k| r.remove(k).map(|v| (k.to_string(), v)))
                .collect();
                if moved.is_empty() {
                    continue;
                }
                changed = true;
                let mut exactly = r.remove("exactly").filter(|e| !e.is_null()).unwrap_or_else(Y::map);
                let exactly_node = request_nodes.get(i).and_then(|n| n.get("exactly"));
                mapping(o, &format!("{prefix}.devices.requests[{i}].exactly"), Some(&exactly), exactly_node)?;
                for (k, v) in moved {
                    exactly.set(&k, v);
                }
                r.set("exactly", exactly).push(note("the request's fields moved into exactly (resource.k8s.io/v1)"));
            }
            for r in requests.iter_mut() {
                changed |= rewrite_selectors(r.path_mut("exactly.selectors"));
                if let Some(Y::Seq(subs)) = r.get_mut("firstAvailable") {
                    for s in subs {
                        changed |= rewrite_selectors(s.get_mut("selectors"));
                    }
                }
            }
        }
    }
    if !changed && o.api_version == V1 {
        return Ok(None);
    }
    y.set("apiVersion", Y::plain(V1));
    Ok(Some(vec![(y, version_note(o, V1).into_iter().collect())]))
}

fn pod_group(o: &Obj<'_, '_>) -> anyhow::Result<Option<Converted>> {
    const BETA: &str = "scheduling.k8s.io/v1beta1";
    let spec = o.get("spec");
    let min = spec.and_then(|s| s.get("minCount"));
    let timeout = spec.and_then(|s| s.get("scheduleTimeoutSeconds"));
    let policy = spec.and_then(|s| s.get("schedulingPolicy"));
    let served = muster_manifest::object::supported_versions("PodGroup").contains(&o.api_version.as_str());
    if min.is_none() && timeout.is_none() && policy.is_some() && served {
        return Ok(None);
    }
    let mut y = Y::from_node(o.node);
    y.set("apiVersion", Y::plain(BETA));
    let s = spec_of(o, &mut y)?;
    let min_y = s.remove("minCount");
    s.remove("scheduleTimeoutSeconds");
    if policy.is_none() {
        let (p, why) = match min_y {
            Some(m) => (
                Y::Map(vec![("gang".into(), Y::Map(vec![("minCount".into(), m, Vec::new())]), Vec::new())]),
                "spec.minCount became spec.schedulingPolicy.gang.minCount".to_string(),
            ),
            None => (
                Y::Map(vec![("basic".into(), Y::map(), Vec::new())]),
                "spec.schedulingPolicy is required; basic (no gang) assumed, write gang: {minCount: N} for all-or-nothing"
                    .to_string(),
            ),
        };
        s.set_first("schedulingPolicy", p).push(note(why));
    }
    if let Some(t) = timeout {
        let t = check::flow(t);
        // The note goes on the first entry (schedulingPolicy, set above or written first).
        if let Some((_, _, c)) = s.entries_mut().first_mut() {
            c.push(note(format!(
                "dropped scheduleTimeoutSeconds: {t}: no such field in Kubernetes 1.37; the scheduler waits at most \
                 its fixed 5-minute Permit timeout (muster: --gang-wait-timeout, default 300s)"
            )));
        }
    }
    Ok(Some(vec![(y, version_note(o, BETA).into_iter().collect())]))
}

/// The object's `spec` to rewrite: added when missing, an empty mapping when written as nothing
/// (`spec:`), an error when it is not a mapping.
fn spec_of<'y>(o: &Obj<'_, '_>, y: &'y mut Y) -> anyhow::Result<&'y mut Y> {
    mapping(o, "spec", y.get("spec"), o.get("spec"))?;
    if y.get("spec").is_none_or(Y::is_null) {
        y.set("spec", Y::map());
    }
    Ok(y.get_mut("spec").expect("set above"))
}

fn pod(o: &Obj<'_, '_>, ix: &Index) -> anyhow::Result<Option<Converted>> {
    let Some((k, group)) = label_membership(o, ix) else { return Ok(None) };
    let key = k.as_str().unwrap_or_default();
    let mut y = Y::from_node(o.node);
    let s = spec_of(o, &mut y)?;
    s.set_first("schedulingGroup", Y::Map(vec![("podGroupName".into(), Y::text(&group), Vec::new())])).push(note(
        format!("joins PodGroup {group} (the label {key}: {group} has no effect on membership; it is kept)"),
    ));
    Ok(Some(vec![(y, Vec::new())]))
}

// ---------------------------------------------------------------------------------------------
// Files.

/// Converts one file's text; None when nothing in it changes.
fn convert_text(file: usize, text: &str, ix: &Index) -> anyhow::Result<Option<String>> {
    let mut out = String::new();
    let mut changed = false;
    for piece in check::pieces(text) {
        let ptext = &text[piece.range.clone()];
        let Some(docs) = &piece.docs else {
            // Report where, as the loader does.
            let e = muster_manifest::yaml::parse_stream_at(ptext, piece.line_offset).expect_err("it failed before");
            anyhow::bail!("line {}: invalid YAML: {}", e.pos, e.message);
        };
        let mut converted: Vec<Option<Converted>> = Vec::new();
        for d in docs {
            converted.push(convert_doc(file, &d.root, ix)?);
        }
        if converted.iter().all(Option::is_none) {
            out.push_str(ptext);
            continue;
        }
        changed = true;
        // Keep the lines before the first document (the marker and comments) and the comment
        // lines after the last one.
        let lines: Vec<&str> = ptext.split_inclusive('\n').collect();
        let first_line = docs[0].pos.line.saturating_sub(piece.line_offset) as usize;
        let head: String = lines.iter().take(first_line.saturating_sub(1)).copied().collect();
        let tail_start = lines
            .iter()
            .rposition(|l| !(l.trim().is_empty() || l.starts_with('#')))
            .map_or(lines.len(), |i| i + 1)
            .max(first_line);
        let tail: String = lines[tail_start.min(lines.len())..].concat();
        out.push_str(&head);
        if !head.is_empty() && !head.ends_with('\n') {
            out.push('\n');
        }
        for (i, (d, c)) in docs.iter().zip(converted).enumerate() {
            if i > 0 {
                out.push_str("---\n");
            }
            let parts = c.unwrap_or_else(|| vec![(Y::from_node(&d.root), Vec::new())]);
            for (j, (y, notes)) in parts.iter().enumerate() {
                if j > 0 {
                    out.push_str("---\n");
                }
                write_doc(&mut out, y, notes);
            }
        }
        out.push_str(&tail);
    }
    Ok(changed.then_some(out))
}

/// A document converted (a `List` item by item), or None when nothing in it changes.
fn convert_doc(file: usize, root: &Node<'_>, ix: &Index) -> anyhow::Result<Option<Converted>> {
    let mut objs = Vec::new();
    objects_of(file, root, None, &mut objs);
    let is_list = !objs.is_empty() && !objs[0].node.pos.eq(&root.pos);
    if !is_list {
        return objs.first().map_or(Ok(None), |o| convert_object(o, ix));
    }
    let converted: Vec<Option<Converted>> = objs.iter().map(|o| convert_object(o, ix)).collect::<Result<_, _>>()?;
    if converted.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut items = Vec::new();
    for (o, c) in objs.iter().zip(converted) {
        match c {
            None => items.push(Y::from_node(o.node)),
            Some(parts) => {
                for (mut y, notes) in parts {
                    if let Y::Map(e) = &mut y
                        && let Some(first) = e.first_mut()
                    {
                        first.2.splice(0..0, notes);
                    }
                    items.push(y);
                }
            }
        }
    }
    let mut list = Y::from_node(root);
    list.set("items", Y::Seq(items));
    Ok(Some(vec![(list, Vec::new())]))
}

/// The converted texts of the sources that change: (source index, text).
pub fn convert(sources: &[Source]) -> anyhow::Result<Vec<(usize, String)>> {
    let parsed: Vec<Vec<check::Piece<'_>>> = sources.iter().map(|s| check::pieces(&s.text)).collect();
    let mut objects = Vec::new();
    for (file, ps) in parsed.iter().enumerate() {
        for p in ps {
            for d in p.docs.iter().flatten() {
                objects_of(file, &d.root, None, &mut objects);
            }
        }
    }
    let ix = Index::build(&objects);
    let mut out = Vec::new();
    for (file, s) in sources.iter().enumerate() {
        match convert_text(file, &s.text, &ix) {
            Ok(Some(t)) => out.push((file, t)),
            Ok(None) => {}
            Err(e) => anyhow::bail!("{}: {e}", s.name),
        }
    }
    Ok(out)
}

/// `muster convert PATH [-w]`: the converted files to standard output (several files each after a
/// `# Source: PATH` line), or written in place. Exit status 2 when the input cannot be read or
/// parsed.
pub fn run(path: &std::path::Path, write: bool) -> anyhow::Result<std::process::ExitCode> {
    use std::process::ExitCode;
    let sources = match check::read_inputs(std::slice::from_ref(&path.to_path_buf())) {
        Ok(s) => s,
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    let converted = match convert(&sources) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    if write {
        if sources.iter().any(|s| &*s.name == "<stdin>") {
            anyhow::bail!("-w cannot write standard input back; leave it out to print the result");
        }
        for (i, text) in &converted {
            std::fs::write(&*sources[*i].name, text)?;
            eprintln!("converted {}", sources[*i].name);
        }
        if converted.is_empty() {
            eprintln!("nothing to convert");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let several = sources.len() > 1;
    let mut out = String::new();
    for (i, s) in sources.iter().enumerate() {
        let text = converted.iter().find(|(j, _)| *j == i).map_or(s.text.as_str(), |(_, t)| t.as_str());
        if several {
            let _ = writeln!(out, "# Source: {}", s.name);
        }
        out.push_str(text);
        if several && !text.ends_with('\n') {
            out.push('\n');
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}
