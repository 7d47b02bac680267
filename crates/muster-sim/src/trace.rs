//! muster's trace format (`apiVersion: muster.dev/v1alpha1`, `kind: Trace`): jobs that arrive,
//! run for a while and finish, and cluster events at given times. Parsed strictly: unknown
//! fields are refused, and every error names the file, the line where one is known, and the
//! field. An Alibaba openb pod list is read into the same [`Trace`] by [`crate::openb`], whose
//! docs give the mapping.
//!
//! ```yaml
//! apiVersion: muster.dev/v1alpha1
//! kind: Trace
//! jobs:
//! - name: train-a          # unique; pods are <name>-<i>, claims <name>-<i>-gpus
//!   arrival: 0s            # ms, s, m, h, d, combined (1h30m); a bare 0 is allowed
//!   duration: 1h           # how long each pod runs once bound (> 0)
//!   pods: 8                # default 1, at most 100,000 (maxReplicas too)
//!   gang: true             # a PodGroup with minCount = pods
//!   gpusPerPod: 8          # a ResourceClaim per pod asking exactly this many devices
//!   deviceClass: gpu.example.com  # default: the cluster's only DeviceClass
//!   priority: 1000         # or priorityClassName (a PriorityClass of the cluster)
//!   class: training        # a label for per-class statistics (default "default")
//!   namespace: ml          # default "default"
//!   cpu: "4"               # requests per pod, optional
//!   memory: 16Gi
//! events:
//! - at: 2h
//!   drainNode: node-3      # cordon the node and evict its pods (their jobs are requeued)
//! - at: 3h
//!   returnNode: node-3     # uncordon it
//! - at: 4h                 # the GPU's driver reports an XID: it taints the device
//!   gpuFailure: {node: node-5, device: gpu-2, xid: 79}   # (a fatal XID also kills its pods)
//! - at: 6h
//!   gpuRecovery: {node: node-5, device: gpu-2}           # the driver removes its XID taints
//! - at: 1d                 # an admin's DeviceTaintRule (resource.k8s.io/v1 spec), by name
//!   deviceTaintRule:
//!     metadata: {name: rack-a-maintenance}
//!     spec:
//!       deviceSelector: {pool: node-7}
//!       taint: {key: example.com/maintenance, effect: NoExecute}
//! - at: 1d2h
//!   deleteDeviceTaintRule: rack-a-maintenance
//! ```
//!
//! A GPU failure is modelled on NVIDIA's DRA driver with health checks on: the device gets the taint
//! `gpu.nvidia.com/xid=<xid>`, effect `NoSchedule` for a fatal XID and `None` for the XIDs the
//! driver treats as the application's own (13, 31, 43, 45, 68, 109); the driver never sets
//! `NoExecute`. A fatal XID also ends the processes on the GPU: the pods holding it (or, with
//! health propagation, one of its partitions) fail and their jobs restart.
//!
//! Inference endpoints scaled by an HPA, down to zero, are documented in [`endpoints`].

use std::fmt;

pub mod behavior;
pub mod endpoints;
pub use endpoints::{Endpoint, Hpa};

use serde::Deserialize;
use serde_saphyr::Spanned;

/// Virtual time and durations, in milliseconds.
pub type Millis = u64;

/// A parsed, checked trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    pub jobs: Vec<Job>,
    pub events: Vec<ClusterEvent>,
    /// Inference endpoints and the HPA that scales them.
    pub endpoints: Vec<Endpoint>,
    pub hpa: Hpa,
}

/// One job of the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub name: String,
    pub namespace: String,
    pub arrival: Millis,
    pub duration: Millis,
    pub pods: u32,
    pub gang: bool,
    pub gpus_per_pod: u32,
    pub device_class: Option<String>,
    pub priority: Option<i32>,
    pub priority_class_name: Option<String>,
    pub class: String,
    pub cpu: Option<String>,
    pub memory: Option<String>,
    /// A CEL expression every device of the claim must also match (the request's `selectors`).
    /// Set by importers ([`crate::openb`]: the GPU models a pod may run on); muster's YAML has no
    /// field for it.
    pub device_selector: Option<String>,
    /// The request's `capacity.requests` (name, quantity): the share of each device the pod
    /// consumes (consumable capacity). Set by importers ([`crate::openb`]: a fraction of a GPU);
    /// empty asks for whole devices.
    pub capacity_requests: Vec<(String, String)>,
}

/// A cluster event at a time.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterEvent {
    pub at: Millis,
    pub kind: EventKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum EventKind {
    /// `spec.unschedulable = true`, then every pod on the node evicted.
    DrainNode(String),
    /// `spec.unschedulable = false`.
    ReturnNode(String),
    /// A GPU of the node reports an XID error (see the module's docs).
    GpuFailure { node: String, device: String, xid: u32 },
    /// The GPU recovers: its XID taints are removed.
    GpuRecovery { node: String, device: String },
    /// A DeviceTaintRule created, or replaced by name.
    DeviceTaintRule(Box<k8s_openapi::api::resource::v1::DeviceTaintRule>),
    /// A DeviceTaintRule deleted, by name.
    DeleteDeviceTaintRule(String),
}

impl EventKind {
    /// Whether the event changes the DRA inputs (ResourceSlices, DeviceTaintRules).
    pub fn changes_devices(&self) -> bool {
        !matches!(self, EventKind::DrainNode(_) | EventKind::ReturnNode(_))
    }
}

/// A trace that cannot be read: where and why.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceError {
    pub file: String,
    /// 1-based line and column, where known.
    pub line: Option<u64>,
    pub column: Option<u64>,
    /// The field, as a path (`jobs[2].duration`), where known.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for TraceError {}

/// The most pods one job (or replicas one endpoint) may have: muster's bound, so that one line
/// of a trace cannot ask for billions of objects.
pub const MAX_PODS: u32 = 100_000;

/// The API version and kind a trace must declare.
pub const API_VERSION: &str = "muster.dev/v1alpha1";
pub const KIND: &str = "Trace";

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TraceFile {
    api_version: Spanned<String>,
    kind: Spanned<String>,
    #[serde(default)]
    jobs: Vec<JobFile>,
    #[serde(default)]
    events: Vec<EventFile>,
    #[serde(default)]
    endpoints: Vec<endpoints::EndpointFile>,
    hpa: Option<endpoints::HpaFile>,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct JobFile {
    name: Spanned<String>,
    arrival: Spanned<Duration>,
    duration: Spanned<Duration>,
    #[serde(default = "one")]
    pods: u32,
    #[serde(default)]
    gang: bool,
    #[serde(default)]
    gpus_per_pod: u32,
    device_class: Option<String>,
    priority: Option<i32>,
    priority_class_name: Option<String>,
    class: Option<String>,
    namespace: Option<String>,
    cpu: Option<Spanned<String>>,
    memory: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EventFile {
    at: Spanned<Duration>,
    drain_node: Option<String>,
    return_node: Option<String>,
    gpu_failure: Option<GpuFile>,
    gpu_recovery: Option<GpuFile>,
    device_taint_rule: Option<Box<k8s_openapi::api::resource::v1::DeviceTaintRule>>,
    delete_device_taint_rule: Option<String>,
}

/// A GPU, by node and device name; with the XID for a failure.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuFile {
    node: String,
    device: String,
    xid: Option<u32>,
}

/// A duration as the trace writes it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Duration(Millis);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 0s, 500ms, 90s, 15m, 2h, 1d or 1h30m")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Duration, E> {
                if v == 0 {
                    Ok(Duration(0))
                } else {
                    Err(E::custom(format!("{v} has no unit: write {v}s, {v}m, {v}h, {v}d or {v}ms")))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Duration, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom("a duration cannot be negative")),
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
                parse_duration(v).map(Duration).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Parses `500ms`, `90s`, `15m`, `2h`, `1d` and sums of them (`1h30m`); `0` alone is zero.
pub fn parse_duration(s: &str) -> Result<Millis, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err("an empty duration".into());
    }
    let bad = || format!("{s:?} is not a duration (write 0s, 500ms, 90s, 15m, 2h, 1d or 1h30m)");
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut total: u64 = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if start == i {
            return Err(bad());
        }
        let n: u64 = s[start..i].parse().map_err(|_| bad())?;
        let unit_start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let scale: u64 = match &s[unit_start..i] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        total = n.checked_mul(scale).and_then(|v| total.checked_add(v)).ok_or_else(|| format!("{s:?} is too long"))?;
    }
    Ok(total)
}

/// Writes `ms` as the trace would (`1h30m`, `90s`, `0s`).
pub fn format_duration(ms: Millis) -> String {
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    let mut rest = ms;
    for (unit, scale) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
        if rest >= scale {
            out.push_str(&format!("{}{unit}", rest / scale));
            rest %= scale;
        }
    }
    out
}

/// Whether `s` is a DNS-1123 label (what a pod's name prefix must be).
pub(crate) fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

impl Trace {
    /// Parses a trace read from `file` (the name is for errors only).
    pub fn parse(file: &str, text: &str) -> Result<Trace, TraceError> {
        let err = |line: Option<u64>, column: Option<u64>, field: Option<String>, message: String| TraceError {
            file: file.to_string(),
            line,
            column,
            field,
            message,
        };
        let raw: TraceFile = serde_saphyr::from_str(text).map_err(|e| {
            let loc = e.location();
            // serde-saphyr's message carries its own position; keep the first line only.
            let message = e.to_string();
            let message = message.lines().next().unwrap_or_default().to_string();
            err(loc.map(|l| l.line()), loc.map(|l| l.column()), None, message)
        })?;
        let at = |s: &serde_saphyr::Location| (Some(s.line()), Some(s.column()));
        if raw.api_version.value != API_VERSION {
            let (l, c) = at(&raw.api_version.referenced);
            return Err(err(
                l,
                c,
                Some("apiVersion".into()),
                format!("{:?}: expected {API_VERSION:?}", raw.api_version.value),
            ));
        }
        if raw.kind.value != KIND {
            let (l, c) = at(&raw.kind.referenced);
            return Err(err(l, c, Some("kind".into()), format!("{:?}: expected {KIND:?}", raw.kind.value)));
        }
        let mut seen = std::collections::HashMap::new();
        let mut jobs = Vec::with_capacity(raw.jobs.len());
        for (i, j) in raw.jobs.into_iter().enumerate() {
            let (l, c) = at(&j.name.referenced);
            let field = |f: &str| Some(format!("jobs[{i}].{f}"));
            let name = j.name.value;
            if !dns_label(&name) || name.len() > 50 {
                return Err(err(
                    l,
                    c,
                    field("name"),
                    format!("{name:?}: expected lowercase letters, digits and '-', at most 50 characters"),
                ));
            }
            let namespace = j.namespace.unwrap_or_else(|| "default".into());
            if !dns_label(&namespace) {
                return Err(err(l, c, field("namespace"), format!("{namespace:?} is not a namespace name")));
            }
            if let Some(first) = seen.insert((namespace.clone(), name.clone()), i) {
                return Err(err(l, c, field("name"), format!("{name:?} is also the name of jobs[{first}]")));
            }
            if j.duration.value.0 == 0 {
                let (l, c) = at(&j.duration.referenced);
                return Err(err(l, c, field("duration"), "must be longer than 0s".into()));
            }
            if j.pods == 0 || j.pods > MAX_PODS {
                return Err(err(l, c, field("pods"), format!("{}: expected 1 to {MAX_PODS}", j.pods)));
            }
            if j.priority.is_some() && j.priority_class_name.is_some() {
                return Err(err(l, c, field("priority"), "give priority or priorityClassName, not both".into()));
            }
            if j.device_class.is_some() && j.gpus_per_pod == 0 {
                return Err(err(l, c, field("deviceClass"), "set without gpusPerPod".into()));
            }
            for (f, q) in [("cpu", &j.cpu), ("memory", &j.memory)] {
                if let Some(q) = q
                    && let Err(e) = muster_api::quantity::parse(&q.value)
                {
                    let (l, c) = at(&q.referenced);
                    return Err(err(l, c, field(f), format!("{:?} is not a quantity ({e})", q.value)));
                }
            }
            jobs.push(Job {
                name,
                namespace,
                arrival: j.arrival.value.0,
                duration: j.duration.value.0,
                pods: j.pods,
                gang: j.gang,
                gpus_per_pod: j.gpus_per_pod,
                device_class: j.device_class,
                priority: j.priority,
                priority_class_name: j.priority_class_name,
                class: j.class.unwrap_or_else(|| "default".into()),
                cpu: j.cpu.map(|q| q.value),
                memory: j.memory.map(|q| q.value),
                device_selector: None,
                capacity_requests: Vec::new(),
            });
        }
        let mut events = Vec::with_capacity(raw.events.len());
        for (i, e) in raw.events.into_iter().enumerate() {
            let (l, c) = at(&e.at.referenced);
            let at_ms = e.at.value.0;
            let kind = event_kind(e).map_err(|(field, message)| {
                err(l, c, Some(format!("events[{i}]{}", field.map(|f| format!(".{f}")).unwrap_or_default())), message)
            })?;
            events.push(ClusterEvent { at: at_ms, kind });
        }
        let mut taken: std::collections::HashSet<(String, String)> =
            jobs.iter().map(|j| (j.namespace.clone(), j.name.clone())).collect();
        let endpoints = raw
            .endpoints
            .into_iter()
            .enumerate()
            .map(|(i, e)| endpoints::endpoint(file, i, e, &mut taken))
            .collect::<Result<Vec<_>, _>>()?;
        let hpa = endpoints::hpa(raw.hpa).map_err(|(field, message)| err(None, None, Some(field), message))?;
        Ok(Trace { jobs, events, endpoints, hpa })
    }
}

/// The one kind of event an entry names, checked: (the field at fault, the message) otherwise.
fn event_kind(e: EventFile) -> Result<EventKind, (Option<String>, String)> {
    let named = [
        e.drain_node.is_some(),
        e.return_node.is_some(),
        e.gpu_failure.is_some(),
        e.gpu_recovery.is_some(),
        e.device_taint_rule.is_some(),
        e.delete_device_taint_rule.is_some(),
    ];
    if named.iter().filter(|n| **n).count() != 1 {
        let kinds = "drainNode, returnNode, gpuFailure, gpuRecovery, deviceTaintRule, deleteDeviceTaintRule";
        return Err((None, format!("expected exactly one of {kinds}")));
    }
    if let Some(n) = e.drain_node {
        return Ok(EventKind::DrainNode(n));
    }
    if let Some(n) = e.return_node {
        return Ok(EventKind::ReturnNode(n));
    }
    if let Some(g) = e.gpu_failure {
        let xid = g.xid.ok_or((Some("gpuFailure.xid".into()), "required: the XID the GPU reports".into()))?;
        return Ok(EventKind::GpuFailure { node: g.node, device: g.device, xid });
    }
    if let Some(g) = e.gpu_recovery {
        if g.xid.is_some() {
            return Err((Some("gpuRecovery.xid".into()), "a recovery names no XID".into()));
        }
        return Ok(EventKind::GpuRecovery { node: g.node, device: g.device });
    }
    if let Some(name) = e.delete_device_taint_rule {
        return Ok(EventKind::DeleteDeviceTaintRule(name));
    }
    let rule = e.device_taint_rule.expect("counted above");
    let name = rule.metadata.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Err((Some("deviceTaintRule.metadata.name".into()), "required".into()));
    }
    let mut problems: Vec<_> = muster_sched::validate::dns_subdomain(name, "metadata.name").into_iter().collect();
    problems.extend(muster_sched::validate::object_meta(&rule.metadata));
    problems.extend(muster_sched::validate::device_taint_rule(&rule));
    if let Some((field, message)) = problems.into_iter().next() {
        return Err((Some(format!("deviceTaintRule.{field}")), message));
    }
    Ok(EventKind::DeviceTaintRule(rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_format() {
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration("90s"), Ok(90_000));
        assert_eq!(parse_duration("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration("250ms"), Ok(250));
        assert_eq!(parse_duration("1d"), Ok(86_400_000));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("h").is_err());
        assert_eq!(format_duration(5_400_000), "1h30m");
        assert_eq!(format_duration(0), "0s");
        assert_eq!(format_duration(1_500), "1s500ms");
    }

    const GOOD: &str = "apiVersion: muster.dev/v1alpha1\nkind: Trace\njobs:\n- name: a\n  arrival: 0\n  duration: 1h\n  pods: 2\n  gang: true\n  gpusPerPod: 8\n  class: training\nevents:\n- at: 2h\n  drainNode: n1\n";

    #[test]
    fn a_trace_parses_with_defaults() {
        let t = Trace::parse("t.yaml", GOOD).unwrap();
        assert_eq!(t.jobs.len(), 1);
        let j = &t.jobs[0];
        assert_eq!((j.arrival, j.duration, j.pods, j.gang, j.gpus_per_pod), (0, 3_600_000, 2, true, 8));
        assert_eq!((j.namespace.as_str(), j.class.as_str()), ("default", "training"));
        assert_eq!(t.events, [ClusterEvent { at: 7_200_000, kind: EventKind::DrainNode("n1".into()) }]);
    }

    #[test]
    fn unknown_fields_are_refused_with_their_line() {
        let text = GOOD.replace("  class: training\n", "  clas: training\n");
        let e = Trace::parse("t.yaml", &text).unwrap_err();
        assert_eq!(e.line, Some(10), "{e}");
        assert!(e.to_string().starts_with("t.yaml:10:"), "{e}");
        assert!(e.message.contains("clas"), "{e}");
    }

    #[test]
    fn bad_values_name_their_field_and_line() {
        let e = Trace::parse("t.yaml", &GOOD.replace("duration: 1h", "duration: 1y")).unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("not a duration"), "{e}");
        let e = Trace::parse("t.yaml", &GOOD.replace("pods: 2", "pods: 4000000000")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("jobs[0].pods"), "{e}");
        let e = Trace::parse("t.yaml", &GOOD.replace("duration: 1h", "duration: 0s")).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(6), Some("jobs[0].duration")), "{e}");
        let twice = GOOD.replace("events:", "- name: a\n  arrival: 1s\n  duration: 1s\nevents:");
        let e = Trace::parse("t.yaml", &twice).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(11), Some("jobs[1].name")), "{e}");
        assert!(e.message.contains("also the name of jobs[0]"), "{e}");
        let e = Trace::parse("t.yaml", &GOOD.replace("v1alpha1", "v1")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("apiVersion"));
        let e = Trace::parse("t.yaml", &GOOD.replace("  drainNode: n1\n", "")).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(12), Some("events[0]")), "{e}");
    }

    fn with_event(event: &str) -> Result<Trace, TraceError> {
        Trace::parse("t.yaml", &GOOD.replace("  drainNode: n1\n", event))
    }

    #[test]
    fn device_events_parse() {
        let t = with_event("  gpuFailure: {node: n1, device: gpu-2, xid: 79}\n").unwrap();
        let failure = EventKind::GpuFailure { node: "n1".into(), device: "gpu-2".into(), xid: 79 };
        assert_eq!(t.events[0], ClusterEvent { at: 7_200_000, kind: failure });
        let t = with_event("  gpuRecovery: {node: n1, device: gpu-2}\n").unwrap();
        assert_eq!(t.events[0].kind, EventKind::GpuRecovery { node: "n1".into(), device: "gpu-2".into() });
        let rule = "  deviceTaintRule:\n    metadata: {name: wave-1}\n    spec:\n      deviceSelector: {pool: n1}\n      taint: {key: example.com/maintenance, effect: NoExecute}\n";
        let t = with_event(rule).unwrap();
        let EventKind::DeviceTaintRule(r) = &t.events[0].kind else { panic!("{:?}", t.events[0]) };
        assert_eq!((r.metadata.name.as_deref(), r.spec.taint.effect.as_str()), (Some("wave-1"), "NoExecute"));
        let t = with_event("  deleteDeviceTaintRule: wave-1\n").unwrap();
        assert_eq!(t.events[0].kind, EventKind::DeleteDeviceTaintRule("wave-1".into()));
        assert!(t.events.iter().all(|e| e.kind.changes_devices()));
    }

    #[test]
    fn bad_device_events_name_their_field() {
        let e = with_event("  gpuFailure: {node: n1, device: gpu-2}\n").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(12), Some("events[0].gpuFailure.xid")), "{e}");
        let e = with_event("  gpuRecovery: {node: n1, device: gpu-2, xid: 79}\n").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("events[0].gpuRecovery.xid"), "{e}");
        let e = with_event("  drainNode: n1\n  deleteDeviceTaintRule: r\n").unwrap_err();
        assert!(e.message.contains("exactly one of"), "{e}");
        let bad_name =
            "  deviceTaintRule:\n    metadata: {name: Wave_1}\n    spec:\n      taint: {key: k, effect: NoSchedule}\n";
        let e = with_event(bad_name).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("events[0].deviceTaintRule.metadata.name"), "{e}");
        let bad_effect =
            "  deviceTaintRule:\n    metadata: {name: w}\n    spec:\n      taint: {key: k, effect: Sometimes}\n";
        let e = with_event(bad_effect).unwrap_err();
        assert!(e.field.as_deref().is_some_and(|f| f.starts_with("events[0].deviceTaintRule.spec.taint")), "{e}");
        let e = with_event("  gpuFailure: {node: n1, device: gpu-2, xid: -1}\n").unwrap_err();
        assert_eq!(e.line, Some(13), "{e}");
    }
}
