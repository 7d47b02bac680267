//! `muster convert`: rewrites the outdated forms `muster check` names (workload-spec.md §12) into
//! Kubernetes 1.37 objects, and never changes what a valid object means.
//!
//! Documents that need no change are copied byte for byte, comments included, and so are the
//! items of a List that need none. An object that does is written anew from its located tree,
//! keeping the comment lines written above its fields, and every change made on an assumption
//! carries a `# muster convert: ...` comment. What is converted:
//!
//! - DeviceTaintRule (`spec.nodeName`, `spec.deviceName`, `spec.taints[]`) → resource.k8s.io/v1
//!   with `spec.deviceSelector {driver, pool, device}` and one rule per taint; the pool is the node
//!   name (node-local drivers name their pool after the node), the driver comes from a slice that
//!   publishes the device, or from the input's DeviceClass selectors, or is left to fill in;
//! - DeviceClass → resource.k8s.io/v1, a CEL selector that does not compile rewritten
//!   ([`crate::check::cel_text::rewrite`]) when the rewrite compiles; one that compiles is kept;
//! - ResourceSlice → resource.k8s.io/v1, v1beta1's `basic:` unwrapped ([`slices`]);
//! - ResourceClaimTemplate / ResourceClaim: `deviceClassName` + `count` in the claim spec, or
//!   v1beta1's request fields, → `devices.requests[].exactly`;
//! - PodGroup and Workload → scheduling.k8s.io/v1beta1 ([`workload`]);
//! - pods that join a PodGroup by label → `spec.schedulingGroup.podGroupName`; pods' (and pod
//!   templates') `resourceClaims[].source` → its fields in the entry ([`classic`]).
//!
//! Classic DRA objects cannot be converted faithfully ([`classic`]): they are kept as written and
//! named with why, as is any object whose conversion meets a field of the wrong shape. The output
//! is then judged by [`check::check`]; every object it finds an error in is named too, so that
//! `convert` exits 0 exactly when `check` passes what it printed.

use std::fmt::Write as _;

use muster_manifest::Pos;
use muster_manifest::yaml::{Node, Value};

use crate::check::cel_text;
use crate::check::{self, Index, Obj, Source, label_membership, objects_of, request_name, seq, str_of};
use crate::text;

mod classic;
mod slices;
mod tree;
mod workload;

use tree::{Src, Style, Y, indentation, write_doc, write_seq};

/// Checks that `field` of `o` (its value in the tree being rewritten is `y`) is a mapping or
/// nothing, as a rewrite that adds keys to it needs; the error names the object, the field and
/// where it is written.
fn mapping(o: &Obj<'_, '_>, field: &str, y: Option<&Y>, node: Option<&Node<'_>>) -> Res<()> {
    let what = match y {
        None | Some(Y::Map(_)) => return Ok(()),
        Some(y) if y.is_null() => return Ok(()),
        Some(Y::Seq(_)) => "a list".to_string(),
        Some(Y::Scalar(s, _)) => format!("the scalar {}", crate::text::clip(&text::double_quoted(s), 60)),
    };
    let pos = node.map_or(o.node.pos, |n| n.pos);
    Err(Refuse { pos, why: format!("{field}: expected a mapping, found {what}; cannot convert it") })
}

/// Why an object cannot be converted, and where.
#[derive(Debug)]
struct Refuse {
    pos: Pos,
    why: String,
}

type Res<T> = Result<T, Refuse>;

/// An object `convert` leaves as written, and why: it could not be converted faithfully, or the
/// output would not be a valid 1.37 object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub file: usize,
    /// Where in the input; None when only the converted output places it.
    pub pos: Option<Pos>,
    pub object: String,
    pub why: String,
}

/// What converting one object reads besides the object: the input's index and its file's text.
struct Cx<'c> {
    ix: &'c Index,
    src: &'c Src<'c>,
}

impl Cx<'_> {
    fn y(&self, n: &Node<'_>) -> Y {
        Y::from_node(n, self.src)
    }
}

fn note(s: impl std::fmt::Display) -> String {
    format!("muster convert: {s}")
}

// ---------------------------------------------------------------------------------------------
// Converting objects.

/// An object converted: the documents that replace it, each with its leading comments.
type Converted = Vec<(Y, Vec<String>)>;

/// Converts one object, or None when it is already in its 1.37 form; an error when a field the
/// rewrite adds to is not a mapping.
fn convert_object(o: &Obj<'_, '_>, cx: &Cx<'_>) -> Res<Option<Converted>> {
    classic::refuse(o)?;
    match o.kind.as_str() {
        "DeviceTaintRule" => device_taint_rule(o, cx),
        "DeviceClass" => Ok(device_class(o, cx)),
        "ResourceSlice" => slices::resource_slice(o, cx),
        "ResourceClaim" => claim(o, cx, "spec"),
        "ResourceClaimTemplate" => claim(o, cx, "spec.spec"),
        "PodGroup" => workload::pod_group(o, cx),
        "Workload" => workload::workload(o, cx),
        "Pod" => pod(o, cx),
        "Deployment" | "ReplicaSet" | "StatefulSet" | "Job" => pod_template_owner(o, cx),
        _ => Ok(None),
    }
}

fn version_note(o: &Obj<'_, '_>, to: &str) -> Option<String> {
    (o.api_version != to).then(|| note(format!("apiVersion {} became {to}", o.api_version)))
}

fn device_taint_rule(o: &Obj<'_, '_>, cx: &Cx<'_>) -> Res<Option<Converted>> {
    let ix = cx.ix;
    const V1: &str = "resource.k8s.io/v1";
    let spec = o.get("spec");
    let old = spec.is_some_and(|s| ["nodeName", "deviceName", "taints"].iter().any(|k| s.get(k).is_some()));
    if !old && o.api_version == V1 {
        return Ok(None);
    }
    let mut base = cx.y(o.node);
    mapping(o, "spec", base.get("spec"), spec)?;
    mapping(o, "metadata", base.get("metadata"), o.get("metadata"))?;
    base.set("apiVersion", Y::plain(V1));
    base.remove("status");
    let mut doc_notes: Vec<String> = version_note(o, V1).into_iter().collect();
    let node = spec.and_then(|s| str_of(s.get("nodeName")));
    let device = spec.and_then(|s| str_of(s.get("deviceName")));
    // The selector: what was there, then pool/device from the node and device names.
    let selector_node = spec.and_then(|s| s.get("deviceSelector"));
    let mut selector = selector_node.map_or_else(Y::map, |n| cx.y(n));
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
        Some(t) if spec.is_some_and(|s| s.get("taint").is_some()) => {
            return Err(Refuse {
                pos: t.pos,
                why: "spec.taints and spec.taint: both written; cannot tell which taints the rules carry".into(),
            });
        }
        Some(t) => seq(Some(t)).iter().map(|n| cx.y(n)).collect(),
        None => spec.and_then(|s| s.get("taint")).map(|n| cx.y(n)).into_iter().collect(),
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

/// Rewrites the CEL selectors of a list (`selectors: [{cel: {expression}}]`) that do not compile
/// in place; true when one changed.
fn rewrite_selectors(list: Option<&mut Y>) -> bool {
    let Some(Y::Seq(items)) = list else { return false };
    let mut changed = false;
    for sel in items {
        let Some(cel) = sel.get_mut("cel") else { continue };
        let Some(expr) = cel.get("expression").and_then(Y::str).map(str::to_string) else { continue };
        // A selector that compiles has a meaning, which a rewrite would change: `check` warns
        // about what it reads, `convert` keeps it as written.
        if muster_cel::Env::default().compile(&expr).is_ok() {
            continue;
        }
        // Rewritten only into an expression that compiles; otherwise kept, and `check` names it.
        let rw = cel_text::rewrite(&expr);
        if rw.notes.is_empty() || muster_cel::Env::default().compile(&rw.text).is_err() {
            continue;
        }
        changed = true;
        cel.set("expression", Y::Scalar(rw.text, Style::Folded)).extend(rw.notes.iter().map(note));
    }
    changed
}

fn device_class(o: &Obj<'_, '_>, cx: &Cx<'_>) -> Option<Converted> {
    const V1: &str = "resource.k8s.io/v1";
    let mut y = cx.y(o.node);
    let changed = rewrite_selectors(y.path_mut("spec.selectors"));
    if !changed && o.api_version == V1 {
        return None;
    }
    y.set("apiVersion", Y::plain(V1));
    Some(vec![(y, version_note(o, V1).into_iter().collect())])
}

fn claim(o: &Obj<'_, '_>, cx: &Cx<'_>, prefix: &str) -> Res<Option<Converted>> {
    const V1: &str = "resource.k8s.io/v1";
    let mut y = cx.y(o.node);
    let mut changed = false;
    let cs_node = o.get(prefix);
    if let Some(cs) = y.path_mut(prefix) {
        // The flat form: deviceClassName, count (and friends) in the claim spec.
        if cs_node.is_some_and(|n| n.get("deviceClassName").is_some() || n.get("count").is_some()) {
            changed = true;
            let moved_comments: Vec<String> =
                ["deviceClassName", "count", "allocationMode", "selectors", "adminAccess"]
                    .iter()
                    .flat_map(|k| cs.comments_of(k))
                    .collect();
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
            let (devices, devices_comments) = cs.take("devices").unwrap_or((Y::map(), Vec::new()));
            let mut devices = Some(devices).filter(|d| !d.is_null()).unwrap_or_else(Y::map);
            mapping(o, &devices_field, Some(&devices), devices_node)?;
            let mut requests = match devices.remove("requests") {
                Some(Y::Seq(r)) => r,
                None => Vec::new(),
                Some(r) if r.is_null() => Vec::new(),
                Some(_) => {
                    return Err(Refuse {
                        pos: devices_node.and_then(|d| d.get("requests")).map_or(o.node.pos, |n| n.pos),
                        why: format!("{devices_field}.requests: expected a list; cannot convert it"),
                    });
                }
            };
            requests.insert(0, request);
            let what = if had_count { "deviceClassName and count" } else { "deviceClassName (count 1 assumed)" };
            let c = devices.set("requests", Y::Seq(requests));
            c.extend(moved_comments);
            c.push(note(format!(
                "{prefix}.{what} became request {name:?} (containers may name it in resources.claims[].request)"
            )));
            cs.set_first("devices", devices).extend(devices_comments);
        }
        // v1beta1 requests: the fields of `exactly` directly in the request.
        if let Some(Y::Seq(requests)) = cs.path_mut("devices.requests") {
            let request_nodes = check::seq(o.get(&format!("{prefix}.devices.requests")));
            for (i, r) in requests.iter_mut().enumerate() {
                let moved: Vec<(String, Y, Vec<String>)> = [
                    "deviceClassName",
                    "allocationMode",
                    "count",
                    "selectors",
                    "adminAccess",
                    "tolerations",
                    "capacity",
                    "derivedAttributes",
                ]
                .into_iter()
                .filter_map(|k| r.take(k).map(|(v, c)| (k.to_string(), v, c)))
                .collect();
                if moved.is_empty() {
                    continue;
                }
                changed = true;
                let mut exactly = r.remove("exactly").filter(|e| !e.is_null()).unwrap_or_else(Y::map);
                let exactly_node = request_nodes.get(i).and_then(|n| n.get("exactly"));
                mapping(o, &format!("{prefix}.devices.requests[{i}].exactly"), Some(&exactly), exactly_node)?;
                for (k, v, c) in moved {
                    if exactly.get(&k).is_some() {
                        let field = format!("{prefix}.devices.requests[{i}]");
                        return Err(Refuse {
                            pos: request_nodes.get(i).and_then(|n| n.get(&k)).map_or(o.node.pos, |n| n.pos),
                            why: format!(
                                "{field}.{k}: written both in the request and in {field}.exactly; cannot tell which one holds"
                            ),
                        });
                    }
                    exactly.set(&k, v).extend(c);
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

/// The object's `spec` to rewrite: added when missing, an empty mapping when written as nothing
/// (`spec:`), an error when it is not a mapping.
fn spec_of<'y>(o: &Obj<'_, '_>, y: &'y mut Y) -> Res<&'y mut Y> {
    mapping(o, "spec", y.get("spec"), o.get("spec"))?;
    if y.get("spec").is_none_or(Y::is_null) {
        y.set("spec", Y::map());
    }
    Ok(y.get_mut("spec").expect("set above"))
}

fn pod(o: &Obj<'_, '_>, cx: &Cx<'_>) -> Res<Option<Converted>> {
    let membership = label_membership(o, cx.ix);
    if membership.is_none() && !classic::has_claim_sources(o, "spec") {
        return Ok(None);
    }
    let mut y = cx.y(o.node);
    let mut changed = classic::flatten_claim_sources(o, &mut y, "spec")?;
    if let Some((k, group)) = membership {
        let key = k.as_str().unwrap_or_default();
        let s = spec_of(o, &mut y)?;
        s.set_first("schedulingGroup", Y::Map(vec![("podGroupName".into(), Y::text(&group), Vec::new())])).push(note(
            format!("joins PodGroup {group} (the label {key}: {group} has no effect on membership; it is kept)"),
        ));
        changed = true;
    }
    Ok(changed.then(|| vec![(y, Vec::new())]))
}

/// A workload (Deployment, Job, ...) whose pod template names claims through `source`.
fn pod_template_owner(o: &Obj<'_, '_>, cx: &Cx<'_>) -> Res<Option<Converted>> {
    if !classic::has_claim_sources(o, "spec.template.spec") {
        return Ok(None);
    }
    let mut y = cx.y(o.node);
    let changed = classic::flatten_claim_sources(o, &mut y, "spec.template.spec")?;
    Ok(changed.then(|| vec![(y, Vec::new())]))
}

// ---------------------------------------------------------------------------------------------
// Files.

/// Converts one file's text; None when nothing in it changes. Objects that cannot be converted
/// are kept as written and added to `refused`.
fn convert_text(file: usize, text: &str, ix: &Index, refused: &mut Vec<Refusal>) -> anyhow::Result<Option<String>> {
    let mut out = String::new();
    let mut changed = false;
    let all_lines: Vec<&str> = text.lines().collect();
    for piece in check::pieces(text) {
        let ptext = &text[piece.range.clone()];
        let Some(docs) = &piece.docs else {
            // Report where, as the loader does.
            let e = muster_manifest::yaml::parse_stream_at(ptext, piece.line_offset).expect_err("it failed before");
            anyhow::bail!("line {}: invalid YAML: {}", e.pos, e.message);
        };
        let srcs: Vec<Src<'_>> = docs.iter().map(|d| Src { lines: &all_lines, floor: d.pos.line }).collect();
        let converted: Vec<Option<DocOut>> =
            docs.iter().zip(&srcs).map(|(d, src)| convert_doc(file, &d.root, &Cx { ix, src }, refused)).collect();
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
        let one = docs.len() == 1;
        for (i, ((d, c), src)) in docs.iter().zip(converted).zip(&srcs).enumerate() {
            if i > 0 {
                out.push_str("---\n");
            }
            let parts = match c {
                None => vec![(Y::from_node(&d.root, src), Vec::new())],
                Some(DocOut::Docs(parts)) => parts,
                Some(DocOut::List(items, rebuilt)) => {
                    let body = &lines[first_line.saturating_sub(1).min(tail_start)..tail_start.min(lines.len())];
                    let first = piece.line_offset + first_line as u32;
                    match one.then(|| splice_list(body, first, &d.root, items)).flatten() {
                        Some(text) => {
                            out.push_str(&text);
                            continue;
                        }
                        None => rebuilt,
                    }
                }
            };
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

/// A document converted.
enum DocOut {
    /// The documents that replace it.
    Docs(Converted),
    /// A List: what each item became (None: as written), and the list written anew.
    List(Vec<Option<Converted>>, Converted),
}

/// A document converted (a `List` item by item), or None when nothing in it changes.
fn convert_doc(file: usize, root: &Node<'_>, cx: &Cx<'_>, refused: &mut Vec<Refusal>) -> Option<DocOut> {
    let mut objs = Vec::new();
    objects_of(file, root, None, &mut objs);
    let is_list = !objs.is_empty() && !objs[0].node.pos.eq(&root.pos);
    let mut one = |o: &Obj<'_, '_>| match convert_object(o, cx) {
        Ok(c) => c,
        Err(r) => {
            refused.push(Refusal { file, pos: Some(r.pos), object: o.display(), why: r.why });
            None
        }
    };
    if !is_list {
        return objs.first().and_then(&mut one).map(DocOut::Docs);
    }
    let converted: Vec<Option<Converted>> = objs.iter().map(&mut one).collect();
    if converted.iter().all(Option::is_none) {
        return None;
    }
    let mut items = Vec::new();
    for (o, c) in objs.iter().zip(converted.iter().cloned()) {
        match c {
            None => items.push(cx.y(o.node)),
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
    let mut list = cx.y(root);
    list.set("items", Y::Seq(items));
    let rebuilt = vec![(list, Vec::new())];
    let direct = seq(root.get("items"));
    if direct.len() == objs.len() && direct.iter().zip(&objs).all(|(n, o)| n.pos == o.node.pos) {
        return Some(DocOut::List(converted, rebuilt));
    }
    Some(DocOut::Docs(rebuilt))
}

/// A List written one item per `- ` line, as the last field of the document: its text (`body`,
/// the document's lines from line `first`) with each converted item written anew in its place and
/// every other line as it was. None when the items are not laid out so.
fn splice_list(body: &[&str], first: u32, root: &Node<'_>, converted: Vec<Option<Converted>>) -> Option<String> {
    let Value::Map(entries) = &root.value else { return None };
    if entries.last()?.0.as_str() != Some("items") {
        return None;
    }
    let items_line = (entries.last()?.0.pos.line.checked_sub(first)?) as usize;
    // Where each item starts (its `- ` line) and the comment lines directly above it.
    let mut starts: Vec<(usize, usize)> = Vec::new();
    let mut floor = items_line;
    for item in seq(root.get("items")) {
        let at = item.pos.line.checked_sub(first)? as usize;
        let line = body.get(at)?;
        let prefix: String = line.chars().take((item.pos.col as usize).saturating_sub(1)).collect();
        if at <= floor || prefix.trim() != "-" {
            return None;
        }
        let mut from = at;
        while from > floor + 1 && body[from - 1].trim_start().starts_with('#') {
            from -= 1;
        }
        starts.push((from, indentation(line)));
        floor = at;
    }
    let mut out: String = body[..starts.first()?.0].concat();
    for (i, c) in converted.into_iter().enumerate() {
        let (from, indent) = starts[i];
        let to = starts.get(i + 1).map_or(body.len(), |s| s.0);
        match c {
            None => out.push_str(&body[from..to].concat()),
            Some(parts) => {
                for (mut y, notes) in parts {
                    if let Y::Map(e) = &mut y
                        && let Some(first) = e.first_mut()
                    {
                        first.2.splice(0..0, notes);
                    }
                    write_seq(&mut out, &[y], indent);
                }
            }
        }
    }
    Some(out)
}

/// What `convert` made of the input: the texts of the files that change (source index, text),
/// and every object that is not a valid 1.37 object in that output, with why.
#[derive(Debug, Default)]
pub struct Outcome {
    pub texts: Vec<(usize, String)>,
    pub refused: Vec<Refusal>,
}

impl Outcome {
    /// The text of source `i` after conversion.
    pub fn text<'s>(&'s self, i: usize, sources: &'s [Source]) -> &'s str {
        self.texts.iter().find(|(j, _)| *j == i).map_or(sources[i].text.as_str(), |(_, t)| t.as_str())
    }
}

/// Converts every source. An object that cannot be converted faithfully is kept as written and
/// named in [`Outcome::refused`]; so is every object that `check` finds an error in once
/// converted, so that an empty `refused` means `check` passes the output. An error when a file
/// is not YAML.
pub fn convert(sources: &[Source]) -> anyhow::Result<Outcome> {
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
    let mut outcome = Outcome::default();
    for (file, s) in sources.iter().enumerate() {
        match convert_text(file, &s.text, &ix, &mut outcome.refused) {
            Ok(Some(t)) => outcome.texts.push((file, t)),
            Ok(None) => {}
            Err(e) => anyhow::bail!("{}: {e}", s.name),
        }
    }
    recheck(sources, &mut outcome);
    Ok(outcome)
}

/// Adds what `check` finds wrong in the output to `refused` (objects already refused are named
/// once). Positions are kept for files that did not change, where they are the input's.
fn recheck(sources: &[Source], outcome: &mut Outcome) {
    let output: Vec<Source> = (0..sources.len())
        .map(|i| Source { name: sources[i].name.clone(), text: outcome.text(i, sources).to_string() })
        .collect();
    let mut found = Vec::new();
    for f in check::check(&output) {
        if f.severity != check::Severity::Error {
            continue;
        }
        let object = f.object.clone().unwrap_or_default();
        if outcome.refused.iter().any(|r| r.file == f.file && r.object == object) {
            continue;
        }
        let changed = outcome.texts.iter().any(|(j, _)| *j == f.file);
        let why = match &f.field {
            Some(field) => format!("{field}: {}", f.message),
            None => f.message.clone(),
        };
        found.push(Refusal { file: f.file, pos: f.pos.filter(|_| !changed), object, why });
    }
    outcome.refused.extend(found);
}

/// `file:line:col: Object: why`, as `check` places its findings.
fn refusal_line(sources: &[Source], r: &Refusal) -> String {
    let mut s = format!("error: {}", sources[r.file].name);
    if let Some(p) = r.pos {
        let _ = write!(s, ":{p}");
    }
    if !r.object.is_empty() {
        let _ = write!(s, ": {}", text::one_line(&r.object));
    }
    let _ = write!(s, ": {}", r.why.replace('\n', "\n    "));
    s
}

/// `muster convert PATH [-w]`: the converted files to standard output (several files each after a
/// `# Source: PATH` line), or written in place. Exit status 1 when some object is not a valid
/// 1.37 object in the output (each is named on standard error, with why; the rest is converted),
/// 2 when the input cannot be read or parsed.
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
    let outcome = match convert(&sources) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    if write && sources.iter().any(|s| &*s.name == "<stdin>") {
        anyhow::bail!("-w cannot write standard input back; leave it out to print the result");
    }
    if write {
        for (i, text) in &outcome.texts {
            std::fs::write(&*sources[*i].name, text)?;
            eprintln!("converted {}", sources[*i].name);
        }
        if outcome.texts.is_empty() {
            eprintln!("nothing to convert");
        }
    } else {
        print!("{}", printed(&sources, &outcome));
    }
    for r in &outcome.refused {
        eprintln!("{}", refusal_line(&sources, r));
    }
    if outcome.refused.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let n = outcome.refused.len();
    eprintln!(
        "{n} error{}: the objects named are not valid Kubernetes 1.37 objects in the output, as `muster check` judges \
         them (those that could not be converted are kept as written); everything else is converted",
        if n == 1 { "" } else { "s" }
    );
    Ok(ExitCode::from(1))
}

/// What `convert` prints: every file, converted or as written, each after a `# Source: PATH`
/// line when there are several.
pub fn printed(sources: &[Source], outcome: &Outcome) -> String {
    let several = sources.len() > 1;
    let mut out = String::new();
    for (i, s) in sources.iter().enumerate() {
        let text = outcome.text(i, sources);
        if several {
            let _ = writeln!(out, "# Source: {}", s.name);
        }
        out.push_str(text);
        if several && !text.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// `convert` on one text: what it prints and what it names.
#[cfg(test)]
fn convert_str(text: &str) -> (String, Vec<Refusal>) {
    let sources = vec![Source { name: "t.yaml".into(), text: text.into() }];
    let outcome = convert(&sources).expect("the text is YAML");
    (printed(&sources, &outcome), outcome.refused)
}

#[cfg(test)]
mod tests {
    use super::convert_str;

    #[test]
    fn comments_above_fields_are_kept_in_a_converted_object() {
        let text = "# the group\napiVersion: scheduling.k8s.io/v1alpha3\nkind: PodGroup\nmetadata: {name: g, namespace: a}\n\
                    spec:\n  # four workers\n  minCount: 4\n  #\n  # priority\n  priorityClassName: x\n";
        let (out, _) = convert_str(text);
        assert!(out.starts_with("# the group\n# muster convert: apiVersion"), "{out}");
        assert!(out.contains("  # four workers\n  # muster convert: spec.minCount became"), "{out}");
        assert!(out.contains("  #\n  # priority\n  priorityClassName: x\n"), "{out}");
        assert_eq!(out.matches("the group").count(), 1, "{out}");
    }

    #[test]
    fn no_comment_is_taken_from_a_block_scalar_or_for_a_flow_entry() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {scheduling.k8s.io/group-name: g}\n\
                    spec:\n  containers:\n  - name: c\n    image: i\n    args:\n    - |\n      # a shell comment\n    \
                    command: [a,\n      # flow\n      b]\n";
        let (out, _) = convert_str(text);
        assert_eq!(out.matches("# a shell comment").count(), 1, "{out}");
        assert!(!out.contains("    # a shell comment\n    command"), "{out}");
    }

    #[test]
    fn a_request_field_written_twice_is_named() {
        let text = "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: c}\nspec:\n  devices:\n    \
                    requests:\n    - name: r\n      deviceClassName: a\n      exactly: {deviceClassName: b}\n";
        let (out, refused) = convert_str(text);
        assert_eq!(out, text);
        assert_eq!(refused[0].pos.map(|p| p.line), Some(8));
        assert_eq!(
            refused[0].why,
            "spec.devices.requests[0].deviceClassName: written both in the request and in \
             spec.devices.requests[0].exactly; cannot tell which one holds"
        );
    }

    #[test]
    fn a_taint_rule_with_taint_and_taints_is_named() {
        let text = "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceTaintRule\nmetadata: {name: r}\nspec:\n  \
                    nodeName: n\n  deviceName: gpu-0\n  taint: {key: a, effect: NoSchedule}\n  taints: [{key: b, effect: NoSchedule}]\n";
        let (out, refused) = convert_str(text);
        assert_eq!(out, text);
        assert!(refused[0].why.starts_with("spec.taints and spec.taint: both written"), "{refused:?}");
    }

    #[test]
    fn a_list_keeps_the_items_it_does_not_convert_as_written() {
        let text = "apiVersion: v1\nkind: List\nitems:\n# first\n- {apiVersion: v1, kind: Node, metadata: {name: n}}  # as is\n\
                    - apiVersion: scheduling.k8s.io/v1alpha3\n  kind: PodGroup\n  metadata: {name: g}\n  spec: {minCount: 2}\n\
                    - apiVersion: v1   # last\n  kind: Node\n  metadata: {name: m}\n";
        let (out, refused) = convert_str(text);
        assert!(refused.is_empty(), "{refused:?}");
        assert!(out.starts_with("apiVersion: v1\nkind: List\nitems:\n# first\n- {apiVersion: v1, kind: Node, metadata: {name: n}}  # as is\n# muster convert"), "{out}");
        assert!(
            out.ends_with("        minCount: 2\n- apiVersion: v1   # last\n  kind: Node\n  metadata: {name: m}\n"),
            "{out}"
        );
    }
}
