//! The adapter for Alibaba's `cluster-trace-gpu-v2023` "openb" CSV files: a node list builds the
//! cluster, a pod list becomes a [`Trace`]. Columns are found by their header name.
//!
//! Node list (`sn,cpu_milli,memory_mib,gpu,model`), one row per node:
//! - a Node named `sn` (label `kubernetes.io/hostname`), allocatable `cpu: <cpu_milli>m`,
//!   `memory: <memory_mib>Mi`, `pods: 110`;
//! - when `gpu` > 0, a ResourceSlice `<sn>-gpus` of driver [`DRIVER`] (pool `<sn>`) publishing
//!   devices `gpu-0` … `gpu-<n-1>`, each with the string attribute `model` and the capacity
//!   [`SHARE_CAPACITY`]` = 1000` with `allowMultipleAllocations: true`, so that pods asking for a
//!   part of a GPU can share one;
//! - one DeviceClass [`DEVICE_CLASS`] selecting the driver's devices.
//!
//! Pod list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
//! deletion_time,scheduled_time`; `gpu_spec`, `qos` and `pod_phase` may be absent), one row per
//! pod, each a job of one pod (no gangs):
//! - requests `cpu: <cpu_milli>m`, `memory: <memory_mib>Mi` (left out when 0);
//! - `num_gpu` > 0: a claim of `num_gpu` devices of [`DEVICE_CLASS`]; with `gpu_spec` (models
//!   separated by `|`; empty or `nan`: any model) a CEL selector on the `model` attribute; with
//!   `num_gpu` = 1 and `gpu_milli` < 1000, the request asks `capacity.requests: {milli:
//!   <gpu_milli>}`, a share of one GPU; a whole GPU asks for no capacity and so consumes all of it
//!   (a device's unrequested capacity is consumed whole); `num_gpu` = 0: no claim, `gpu_spec`
//!   ignored;
//! - arrival = `creation_time`, rebased so that the first simulated arrival is at 0 s; duration =
//!   `deletion_time − scheduled_time` (times in whole seconds);
//! - class (for per-class statistics): `cpu-only`, `gpu-share`, `gpu-whole` (one GPU) or
//!   `gpu-multi`; `qos` and `pod_phase` are read but not used.
//!
//! Rows the simulation cannot run are left out and counted in [`Skipped`] (the binary warns):
//! never scheduled (no `scheduled_time`), never deleted (no `deletion_time`: no duration), and
//! zero duration. Anything else that is wrong — a missing or non-numeric cell, a negative or huge
//! number, `deletion_time` before `scheduled_time`, `scheduled_time` before `creation_time`, a
//! share of more than one GPU, a name used twice — is an error naming the file, line, column
//! and column name.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{CELDeviceSelector, DeviceClass, DeviceClassSpec, DeviceSelector, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use crate::csv::{Cell, Row, Table};
use crate::trace::{Job, Trace, TraceError, dns_label};

/// The driver of the devices an openb node list publishes.
pub const DRIVER: &str = "gpu.openb.alibaba";
/// The DeviceClass selecting them, which openb pods ask for.
pub const DEVICE_CLASS: &str = "gpu.openb.alibaba";
/// The consumable capacity of each GPU (1000 = the whole GPU), which fractional pods request.
pub const SHARE_CAPACITY: &str = "milli";

/// Bounds on numbers, far above any real cluster: beyond them a row is refused.
const MAX_CPU_MILLI: u64 = 1_000_000_000;
const MAX_MEMORY_MIB: u64 = 1_000_000_000;
/// A ResourceSlice publishes at most 128 devices.
const MAX_GPUS: u64 = 128;
/// Seconds: about 31,700 years, whose milliseconds still fit a `u64` with room to add.
const MAX_SECONDS: u64 = 1_000_000_000_000;

/// The cluster an openb node list describes, each object with the line it came from.
pub struct OpenbCluster {
    pub nodes: Vec<(u64, Node)>,
    pub slices: Vec<(u64, ResourceSlice)>,
    pub device_class: DeviceClass,
}

/// An openb pod list read as a trace, with the rows left out.
#[derive(Debug)]
pub struct PodList {
    pub trace: Trace,
    pub skipped: Skipped,
}

/// Rows of a pod list the simulation cannot run, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Skipped {
    /// No `scheduled_time`: the pod was never scheduled.
    pub never_scheduled: usize,
    /// A `scheduled_time` but no `deletion_time`: how long it ran is unknown.
    pub never_deleted: usize,
    /// `deletion_time` = `scheduled_time`.
    pub zero_duration: usize,
}

impl Skipped {
    pub fn total(&self) -> usize {
        self.never_scheduled + self.never_deleted + self.zero_duration
    }

    /// "3 rows not simulated: 2 never scheduled (no scheduled_time), 1 …", or `None`.
    pub fn summary(&self) -> Option<String> {
        if self.total() == 0 {
            return None;
        }
        let reasons: Vec<String> = [
            (self.never_scheduled, "never scheduled (no scheduled_time)"),
            (self.never_deleted, "never deleted (no deletion_time, so no duration)"),
            (self.zero_duration, "ran for 0 s (deletion_time = scheduled_time)"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{n} {why}"))
        .collect();
        let rows = if self.total() == 1 { "row" } else { "rows" };
        Some(format!("{} {rows} not simulated: {}", self.total(), reasons.join(", ")))
    }
}

/// Whether `text` is an openb pod list: its first line names the columns `name`, `num_gpu` and
/// `creation_time`.
pub fn is_pod_list(text: &str) -> bool {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(header) = text.lines().find(|l| !l.trim().is_empty()) else { return false };
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    ["name", "num_gpu", "creation_time"].iter().all(|c| columns.contains(c))
}

/// Checks a name the objects will carry (a node's or a pod's).
fn name<'t>(cell: Cell<'t>, max: usize) -> Result<&'t str, TraceError> {
    if !dns_label(cell.text) || cell.text.len() > max {
        return Err(cell
            .error(format!("{:?}: expected lowercase letters, digits and '-', at most {max} characters", cell.text)));
    }
    Ok(cell.text)
}

/// Checks a GPU model name (a device attribute's string value, at most 64 characters; no
/// character that would need quoting in CEL).
fn model(cell: Cell<'_>, model: &str) -> Result<(), TraceError> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    if model.is_empty() || model.len() > 64 || !model.bytes().all(ok) {
        return Err(cell.error(format!(
            "{model:?} is not a GPU model (letters, digits, '-', '_' and '.', at most 64 characters)"
        )));
    }
    Ok(())
}

/// Remembers names, refusing one seen on an earlier line.
fn unique(seen: &mut HashMap<String, u64>, cell: Cell<'_>) -> Result<(), TraceError> {
    if let Some(first) = seen.insert(cell.text.to_string(), cell.line) {
        return Err(cell.error(format!("{:?} is also on line {first}", cell.text)));
    }
    Ok(())
}

fn built<T: serde::de::DeserializeOwned>(cell: Cell<'_>, value: serde_json::Value) -> Result<T, TraceError> {
    serde_json::from_value(value).map_err(|e| cell.error(format!("cannot build the object: {e}")))
}

/// Reads an openb node list from `text` (`file` names it in errors) and builds the cluster.
pub fn parse_nodes(file: &str, text: &str) -> Result<OpenbCluster, TraceError> {
    let table = Table::parse(file, text)?;
    let (sn, cpu, memory) = (table.required("sn")?, table.required("cpu_milli")?, table.required("memory_mib")?);
    let (gpu, model_col) = (table.required("gpu")?, table.required("model")?);
    let mut seen = HashMap::new();
    let (mut nodes, mut slices) = (Vec::new(), Vec::new());
    for row in &table.rows {
        let cell = |i| table.cell(row, i);
        let node = name(cell(sn), 58)?;
        unique(&mut seen, cell(sn))?;
        let cpu = cell(cpu).uint(MAX_CPU_MILLI)?;
        let memory = cell(memory).uint(MAX_MEMORY_MIB)?;
        let gpus = cell(gpu).uint(MAX_GPUS)?;
        nodes.push((row.line, built(cell(sn), node_object(node, cpu, memory))?));
        if gpus == 0 {
            continue;
        }
        let m = cell(model_col);
        if m.is_empty() {
            return Err(m.error(format!("missing: the node has {gpus} GPUs, of which model?")));
        }
        model(m, m.text)?;
        slices.push((row.line, built(m, slice(node, m.text, gpus))?));
    }
    Ok(OpenbCluster { nodes, slices, device_class: device_class() })
}

/// The Node of one row.
fn node_object(name: &str, cpu_milli: u64, memory_mib: u64) -> serde_json::Value {
    let resources = json!({"cpu": format!("{cpu_milli}m"), "memory": format!("{memory_mib}Mi"), "pods": "110"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": resources, "allocatable": resources}
    })
}

/// The DeviceClass of the openb GPUs.
fn device_class() -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta { name: Some(DEVICE_CLASS.into()), ..Default::default() },
        spec: Some(DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector { expression: format!("device.driver == {DRIVER:?}") }),
            }]),
            ..Default::default()
        }),
    }
}

/// The ResourceSlice of one node's GPUs.
fn slice(node: &str, model: &str, gpus: u64) -> serde_json::Value {
    let devices: Vec<serde_json::Value> = (0..gpus)
        .map(|i| {
            json!({
                "name": format!("gpu-{i}"),
                "attributes": {"model": {"string": model}},
                "capacity": {SHARE_CAPACITY: {"value": "1000"}},
                "allowMultipleAllocations": true
            })
        })
        .collect();
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {
            "driver": DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices
        }
    })
}

/// One pod row, checked.
struct PodRow {
    name: String,
    cpu_milli: u64,
    memory_mib: u64,
    gpus: u64,
    gpu_milli: u64,
    models: Vec<String>,
    creation: u64,
    /// (scheduled, deletion), or why the row cannot run.
    run: Result<(u64, u64), Skip>,
}

#[derive(Clone, Copy)]
enum Skip {
    NeverScheduled,
    NeverDeleted,
    ZeroDuration,
}

/// The pod list's column indexes.
struct PodColumns {
    name: usize,
    cpu: usize,
    memory: usize,
    num_gpu: usize,
    gpu_milli: usize,
    gpu_spec: Option<usize>,
    creation: usize,
    deletion: usize,
    scheduled: usize,
}

impl PodColumns {
    fn of(table: &Table<'_>) -> Result<PodColumns, TraceError> {
        Ok(PodColumns {
            name: table.required("name")?,
            cpu: table.required("cpu_milli")?,
            memory: table.required("memory_mib")?,
            num_gpu: table.required("num_gpu")?,
            gpu_milli: table.required("gpu_milli")?,
            gpu_spec: table.column("gpu_spec"),
            creation: table.required("creation_time")?,
            deletion: table.required("deletion_time")?,
            scheduled: table.required("scheduled_time")?,
        })
    }
}

/// Reads one pod row.
fn pod_row(table: &Table<'_>, c: &PodColumns, row: &Row<'_>) -> Result<PodRow, TraceError> {
    let cell = |i| table.cell(row, i);
    let name = name(cell(c.name), 50)?.to_string();
    let gpus = cell(c.num_gpu).uint(MAX_GPUS)?;
    let milli_cell = cell(c.gpu_milli);
    let gpu_milli = milli_cell.uint(1_000)?;
    match (gpus, gpu_milli) {
        (0, 0) | (1, 1..=1000) => {}
        (0, _) => return Err(milli_cell.error(format!("{gpu_milli} with num_gpu 0: expected 0"))),
        (_, 1000) => {}
        (1, _) => return Err(milli_cell.error("0 with num_gpu 1: expected 1 to 1000")),
        _ => return Err(milli_cell.error(format!("{gpu_milli}: a share is of one GPU (num_gpu 1); expected 1000"))),
    }
    let mut models = Vec::new();
    if let Some(spec) = c.gpu_spec.map(cell).filter(|s| !s.is_empty()) {
        for m in spec.text.split('|') {
            model(spec, m)?;
            models.push(m.to_string());
        }
    }
    let creation = cell(c.creation).uint(MAX_SECONDS)?;
    let scheduled_cell = cell(c.scheduled);
    let scheduled = scheduled_cell.opt_uint(MAX_SECONDS)?;
    let deletion_cell = cell(c.deletion);
    let deletion = deletion_cell.opt_uint(MAX_SECONDS)?;
    let run = match (scheduled, deletion) {
        (None, _) => Err(Skip::NeverScheduled),
        (Some(s), _) if s < creation => {
            return Err(scheduled_cell.error(format!("{s} is before creation_time {creation}")));
        }
        (Some(_), None) => Err(Skip::NeverDeleted),
        (Some(s), Some(d)) if d < s => {
            return Err(deletion_cell.error(format!("{d} is before scheduled_time {s}")));
        }
        (Some(s), Some(d)) if d == s => Err(Skip::ZeroDuration),
        (Some(s), Some(d)) => Ok((s, d)),
    };
    Ok(PodRow {
        name,
        cpu_milli: cell(c.cpu).uint(MAX_CPU_MILLI)?,
        memory_mib: cell(c.memory).uint(MAX_MEMORY_MIB)?,
        gpus,
        gpu_milli,
        models,
        creation,
        run,
    })
}

/// The job of one runnable pod row, arriving `arrival` ms into the simulation.
fn job(row: PodRow, arrival: u64, duration: u64) -> Job {
    let share = row.gpus == 1 && row.gpu_milli < 1000;
    let class = match row.gpus {
        0 => "cpu-only",
        1 if share => "gpu-share",
        1 => "gpu-whole",
        _ => "gpu-multi",
    };
    let selector = (row.gpus > 0 && !row.models.is_empty()).then(|| {
        let models: Vec<String> = row.models.iter().map(|m| format!("{m:?}")).collect();
        format!("device.attributes[{DRIVER:?}].model in [{}]", models.join(", "))
    });
    Job {
        name: row.name,
        namespace: "default".into(),
        arrival,
        duration,
        pods: 1,
        gang: false,
        gpus_per_pod: row.gpus as u32,
        device_class: (row.gpus > 0).then(|| DEVICE_CLASS.to_string()),
        priority: None,
        priority_class_name: None,
        class: class.into(),
        cpu: (row.cpu_milli > 0).then(|| format!("{}m", row.cpu_milli)),
        memory: (row.memory_mib > 0).then(|| format!("{}Mi", row.memory_mib)),
        device_selector: selector,
        capacity_requests: if share { vec![(SHARE_CAPACITY.into(), row.gpu_milli.to_string())] } else { Vec::new() },
    }
}

/// Reads an openb pod list from `text` (`file` names it in errors) as a trace.
pub fn parse_pods(file: &str, text: &str) -> Result<PodList, TraceError> {
    let table = Table::parse(file, text)?;
    let columns = PodColumns::of(&table)?;
    let mut seen = HashMap::new();
    let mut rows = Vec::with_capacity(table.rows.len());
    let mut skipped = Skipped::default();
    for row in &table.rows {
        let pod = pod_row(&table, &columns, row)?;
        unique(&mut seen, table.cell(row, columns.name))?;
        match pod.run {
            Ok(_) => rows.push(pod),
            Err(Skip::NeverScheduled) => skipped.never_scheduled += 1,
            Err(Skip::NeverDeleted) => skipped.never_deleted += 1,
            Err(Skip::ZeroDuration) => skipped.zero_duration += 1,
        }
    }
    let first = rows.iter().map(|r| r.creation).min().unwrap_or(0);
    let jobs = rows
        .into_iter()
        .filter_map(|r| {
            let (scheduled, deletion) = r.run.ok()?;
            let (arrival, duration) = ((r.creation - first) * 1_000, (deletion - scheduled) * 1_000);
            Some(job(r, arrival, duration))
        })
        .collect();
    Ok(PodList { trace: Trace { jobs, ..Trace::default() }, skipped })
}

#[cfg(test)]
#[path = "openb_tests.rs"]
mod tests;
