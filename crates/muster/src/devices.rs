//! `muster devices`: every device the manifests' ResourceSlices publish, and which of them a
//! DeviceClass and/or a selector selects (or why evaluating it fails).

use std::collections::BTreeMap;
use std::fmt::Write;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use muster_cel::{DeviceView, Env, Program, SelectorOwner};
use muster_manifest::{Manifests, Object};
use serde_json::json;

use crate::text::{cell_width, push_cell};

/// One device and its verdict.
pub struct Row {
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub node: String,
    pub matched: bool,
    pub error: Option<String>,
    /// What the selectors test, as this device reports it: (`attribute domain/name` or
    /// `capacity domain/name`, the value as text or `absent`), to explain a selector that
    /// matches nothing.
    pub tested: Vec<(String, String)>,
}

/// The attributes and capacities `sources` (selector texts) read: (is a capacity, domain, name),
/// each once, in order of first mention.
fn tested_names(sources: &[&str]) -> Vec<(bool, String, String)> {
    let mut out: Vec<(bool, String, String)> = Vec::new();
    for r in sources.iter().flat_map(|s| crate::check::cel_text::refs(s)) {
        let Some(name) = r.name else { continue };
        let key = (r.capacity, r.domain, name);
        if !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

/// A device's value of one tested attribute or capacity: its text, or `absent`. Names without a
/// domain in the slice belong to the driver's domain.
fn tested_value(driver: &str, d: &k8s_openapi::api::resource::v1::Device, t: &(bool, String, String)) -> String {
    let (capacity, domain, name) = t;
    let qualified = format!("{domain}/{name}");
    let matches = |k: &String| *k == qualified || (domain == driver && k == name);
    let value = if *capacity {
        d.capacity.iter().flatten().find(|(k, _)| matches(k)).map(|(_, c)| c.value.0.clone())
    } else {
        d.attributes.iter().flatten().find(|(k, _)| matches(k)).map(|(_, a)| attribute_text(a))
    };
    value.unwrap_or_else(|| "absent".into())
}

/// An attribute's value as a selector compares it (strings quoted).
fn attribute_text(a: &k8s_openapi::api::resource::v1::DeviceAttribute) -> String {
    let list = |items: Vec<String>| format!("[{}]", items.join(", "));
    let quote = |s: &String| format!("{s:?}");
    if let Some(v) = a.bool {
        v.to_string()
    } else if let Some(v) = a.int {
        v.to_string()
    } else if let Some(v) = &a.string {
        quote(v)
    } else if let Some(v) = &a.version {
        format!("semver {v}")
    } else if let Some(v) = &a.bools {
        list(v.iter().map(ToString::to_string).collect())
    } else if let Some(v) = &a.ints {
        list(v.iter().map(ToString::to_string).collect())
    } else if let Some(v) = &a.strings {
        list(v.iter().map(quote).collect())
    } else if let Some(v) = &a.versions {
        list(v.iter().map(|v| format!("semver {v}")).collect())
    } else {
        "no value".into()
    }
}

/// Which node(s) a device is available on, as the slice says.
fn node_of(slice: &ResourceSlice, device: &k8s_openapi::api::resource::v1::Device) -> String {
    let s = &slice.spec;
    let per_device = s.per_device_node_selection == Some(true);
    let (name, all, selector) = if per_device {
        (device.node_name.as_deref(), device.all_nodes == Some(true), device.node_selector.is_some())
    } else {
        (s.node_name.as_deref(), s.all_nodes == Some(true), s.node_selector.is_some())
    };
    match (name, all, selector) {
        (Some(n), _, _) => n.to_string(),
        (None, true, _) => "<all nodes>".into(),
        (None, false, true) => "<node selector>".into(),
        _ => "<unset>".into(),
    }
}

/// Evaluates the class's selectors and then `selector` on every device.
pub fn evaluate(m: &Manifests, class: Option<&str>, selector: Option<&str>) -> anyhow::Result<Vec<Row>> {
    let env = Env::default();
    // (class selector index, or None for --selector, program)
    let mut programs: Vec<(Option<usize>, std::sync::Arc<Program>)> = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    if let Some(name) = class {
        let c: &DeviceClass = m
            .objects
            .iter()
            .find_map(|l| match &l.object {
                Object::DeviceClass(c) if c.metadata.name.as_deref() == Some(name) => Some(&**c),
                _ => None,
            })
            .ok_or_else(|| anyhow::anyhow!("DeviceClass {name:?} not found in the input"))?;
        for (i, sel) in c.spec.as_ref().and_then(|s| s.selectors.as_ref()).into_iter().flatten().enumerate() {
            let Some(cel) = &sel.cel else {
                anyhow::bail!("class {name}: selector #{i}: CEL expression empty (unsupported selector type?)");
            };
            let p = env.compile(&cel.expression).map_err(|e| {
                anyhow::anyhow!("{}", muster_cel::selector_compile_error(SelectorOwner::Class(name), i, &e))
            })?;
            programs.push((Some(i), p));
            sources.push(cel.expression.clone());
        }
    }
    if let Some(expr) = selector {
        let p = env.compile(expr).map_err(|e| anyhow::anyhow!("--selector: CEL compile error: {e}"))?;
        programs.push((None, p));
        sources.push(expr.to_string());
    }
    let tested = tested_names(&sources.iter().map(String::as_str).collect::<Vec<_>>());
    let mut slices: Vec<&ResourceSlice> = m
        .objects
        .iter()
        .filter_map(|l| match &l.object {
            Object::ResourceSlice(s) => Some(&**s),
            _ => None,
        })
        .collect();
    slices.sort_by(|a, b| {
        (&a.spec.driver, &a.spec.pool.name, &a.metadata.name).cmp(&(
            &b.spec.driver,
            &b.spec.pool.name,
            &b.metadata.name,
        ))
    });
    let mut rows = Vec::new();
    // A bound on the whole command's evaluation (a costly selector over many devices).
    let budget = muster_cel::Budget::new(command_budget());
    for slice in slices {
        for d in slice.spec.devices.iter().flatten() {
            let id = format!("{}/{}/{}", slice.spec.driver, slice.spec.pool.name, d.name);
            let mut row = Row {
                driver: slice.spec.driver.clone(),
                pool: slice.spec.pool.name.clone(),
                device: d.name.clone(),
                node: node_of(slice, d),
                matched: true,
                error: None,
                tested: tested_row(&tested, &slice.spec.driver, d),
            };
            match DeviceView::new(&slice.spec.driver, d) {
                Err(e) => {
                    row.matched = false;
                    row.error = Some(format!("device {id}: {e}"));
                }
                Ok(view) => {
                    // Selectors stop at the first false, as the allocator evaluates them.
                    for (what, p) in &programs {
                        let Some(verdict) = env.eval_charged(p, &view, &budget) else {
                            row.matched = false;
                            row.error = Some(format!(
                                "device {id}: not evaluated: this command's CEL cost budget ({}) is spent",
                                budget.total()
                            ));
                            break;
                        };
                        match verdict {
                            Ok(true) => {}
                            Ok(false) => {
                                row.matched = false;
                                break;
                            }
                            Err(e) => {
                                row.matched = false;
                                row.error = Some(match (what, class) {
                                    (Some(i), Some(c)) => {
                                        muster_cel::selector_runtime_error(SelectorOwner::Class(c), *i, &id, &e)
                                    }
                                    _ => format!("--selector on device {id}: CEL runtime error: {e}"),
                                });
                                break;
                            }
                        }
                    }
                }
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// `-o json`: `{"devices":[{"driver","pool","device","node","match","error"}]}` (a contract).
pub fn json(rows: &[Row]) -> serde_json::Value {
    json!({"devices": rows.iter().map(|r| json!({
        "driver": r.driver, "pool": r.pool, "device": r.device, "node": r.node,
        "match": r.matched, "error": r.error,
    })).collect::<Vec<_>>()})
}

pub fn table(rows: &[Row], filtered: bool) -> String {
    let mut out = String::new();
    let head = ("DRIVER", "POOL", "DEVICE", "NODE");
    let w = |f: fn(&Row) -> &str, h: &str| rows.iter().map(|r| cell_width(f(r))).max().unwrap_or(0).max(h.len());
    let widths = [w(|r| &r.driver, head.0), w(|r| &r.pool, head.1), w(|r| &r.device, head.2), w(|r| &r.node, head.3)];
    let line = |out: &mut String, cells: [&str; 4]| {
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i > 0 {
                out.push_str("   ");
            }
            push_cell(out, c, w);
        }
    };
    line(&mut out, [head.0, head.1, head.2, head.3]);
    out.push_str(if filtered { "   MATCH\n" } else { "\n" });
    for r in rows {
        line(&mut out, [&r.driver, &r.pool, &r.device, &r.node]);
        if filtered {
            out.push_str(match (&r.error, r.matched) {
                (Some(_), _) => "   error",
                (None, true) => "   yes",
                (None, false) => "   no",
            });
        }
        out.push('\n');
    }
    let errors: Vec<&str> = rows.iter().filter_map(|r| r.error.as_deref()).collect();
    if !errors.is_empty() {
        out.push('\n');
        for e in &errors {
            let _ = writeln!(out, "error: {e}");
        }
    }
    let matched = rows.iter().filter(|r| r.matched).count();
    out.push('\n');
    if filtered {
        let _ = writeln!(out, "{matched} of {} devices match", rows.len());
        if matched == 0 && !rows.is_empty() {
            push_no_match_note(&mut out, rows);
        }
    } else {
        let _ = writeln!(out, "{} devices", rows.len());
    }
    out
}

/// What the selector texts `sources` test, as the devices of `slices` report it (for `check`'s
/// warning on a claim whose selectors select nothing): `attribute d/n: "x" (2), absent (1);
/// capacity ...`; `None` when they test no attribute or capacity.
pub(crate) fn what_selectors_test(sources: &[&str], slices: &[&ResourceSlice]) -> Option<String> {
    let tested = tested_names(sources);
    let rows: Vec<Row> = slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten().map(move |d| (s, d)))
        .map(|(s, d)| Row {
            driver: String::new(),
            pool: String::new(),
            device: String::new(),
            node: String::new(),
            matched: false,
            error: None,
            tested: tested_row(&tested, &s.spec.driver, d),
        })
        .collect();
    tested_summary(&rows)
}

/// A device's values of the tested names, labelled `attribute d/n` or `capacity d/n`.
fn tested_row(
    tested: &[(bool, String, String)],
    driver: &str,
    d: &k8s_openapi::api::resource::v1::Device,
) -> Vec<(String, String)> {
    tested
        .iter()
        .map(|t| {
            let word = if t.0 { "capacity" } else { "attribute" };
            (format!("{word} {}/{}", t.1, t.2), tested_value(driver, d, t))
        })
        .collect()
}

/// The usual cause of a selector that matches nothing is an attribute or capacity that is not
/// what the author assumed (an "80GB" H100 reports 81559Mi, less than 80Gi; a product name
/// spelled differently): each attribute and capacity the selectors test, with the values the
/// devices report and how many report each.
fn push_no_match_note(out: &mut String, rows: &[Row]) {
    if let Some(summary) = tested_summary(rows) {
        let _ = writeln!(out, "note: no device matches; what the selectors test, as the devices report it: {summary}");
    }
}

/// Each tested name with the values the rows report and how many report each.
fn tested_summary(rows: &[Row]) -> Option<String> {
    let mut seen: Vec<(&str, BTreeMap<&str, usize>)> = Vec::new();
    for r in rows {
        for (name, value) in &r.tested {
            let i = match seen.iter().position(|(n, _)| n == name) {
                Some(i) => i,
                None => {
                    seen.push((name, BTreeMap::new()));
                    seen.len() - 1
                }
            };
            *seen[i].1.entry(value).or_default() += 1;
        }
    }
    if seen.is_empty() {
        return None;
    }
    let parts: Vec<String> = seen
        .iter()
        .map(|(name, values)| {
            let values: Vec<String> = values.iter().map(|(v, n)| format!("{v} ({n})")).collect();
            format!("{name}: {}", values.join(", "))
        })
        .collect();
    Some(parts.join("; "))
}

/// The CEL cost budget of one command: [`muster_cel::Budget::COMMAND`], or `MUSTER_CEL_BUDGET`
/// when set to a number.
pub fn command_budget() -> u64 {
    std::env::var("MUSTER_CEL_BUDGET").ok().and_then(|v| v.parse().ok()).unwrap_or(muster_cel::Budget::COMMAND)
}

#[cfg(test)]
mod tests {
    use super::tested_names;

    #[test]
    fn tested_names_are_the_attributes_and_capacities_read_once_each() {
        let names = tested_names(&[
            "device.attributes['a.example.com'].model == 'x' && device.capacity['a.example.com'].memory.isGreaterThan(quantity('1Gi'))",
            "has(device.attributes['a.example.com'].model) && device.driver == 'a.example.com'",
        ]);
        assert_eq!(
            names,
            [(false, "a.example.com".into(), "model".into()), (true, "a.example.com".into(), "memory".into())]
        );
    }
}
