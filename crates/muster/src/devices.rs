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
    /// Capacities, as `domain/name` → quantity text (to explain a selector that matches nothing).
    pub capacity: Vec<(String, String)>,
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
        }
    }
    if let Some(expr) = selector {
        let p = env.compile(expr).map_err(|e| anyhow::anyhow!("--selector: CEL compile error: {e}"))?;
        programs.push((None, p));
    }
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
                capacity: d
                    .capacity
                    .iter()
                    .flatten()
                    .map(|(k, v)| {
                        let k = if k.contains('/') { k.clone() } else { format!("{}/{k}", slice.spec.driver) };
                        (k, v.value.0.clone())
                    })
                    .collect(),
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
            // The usual cause is a capacity or attribute that is not what the author assumed
            // (an "80GB" H100 reports 81559Mi, less than 80Gi): show what the devices report.
            let mut seen: BTreeMap<(&str, &str), usize> = BTreeMap::new();
            for r in rows {
                for (k, v) in &r.capacity {
                    *seen.entry((k, v)).or_default() += 1;
                }
            }
            if !seen.is_empty() {
                let caps: Vec<String> = seen.iter().map(|((k, v), n)| format!("{k}={v} ({n})")).collect();
                let _ = writeln!(out, "note: no device matches; the capacities they report: {}", caps.join(", "));
            }
        }
    } else {
        let _ = writeln!(out, "{} devices", rows.len());
    }
    out
}

/// The CEL cost budget of one command: [`muster_cel::Budget::COMMAND`], or `MUSTER_CEL_BUDGET`
/// when set to a number.
pub fn command_budget() -> u64 {
    std::env::var("MUSTER_CEL_BUDGET").ok().and_then(|v| v.parse().ok()).unwrap_or(muster_cel::Budget::COMMAND)
}
