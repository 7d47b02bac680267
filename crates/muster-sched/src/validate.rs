//! What the 1.37 API server refuses on create, checked where the cluster model is built, so that
//! `plan` and `check` (which both build it) reject the same input with the same words. Each rule
//! lives here once; the model's builders call it for the objects they read. Messages follow
//! apimachinery's `field.Error` wording (`Unsupported value: ...: supported values: ...`,
//! `Invalid value: ...`, `Required value: ...`, `Forbidden: ...`); the field is the API server's
//! path.
//!
//! Problems that are not API-server rules (the input is valid but suspicious) are warnings,
//! reported elsewhere, never here.

use k8s_openapi::api::core::v1::{Affinity, NodeSelectorRequirement, PodSpec, Taint, Toleration};
use k8s_openapi::api::resource::v1::{CapacityRequirements, DeviceClaim, DeviceClass, DeviceSelector};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::cluster::ModelError;

mod claims;
mod dra_names;
pub mod meta;
mod pods;
mod slices;

pub use claims::status as claim_status;
pub use meta::object_meta;
pub use pods::pod_structure;
pub use slices::device_taint_rule;
pub mod volumes;

/// A problem with one field: the API server's path and its message.
pub type FieldError = (String, String);

/// `field.NotSupported`: the value, then the supported values, quoted, in upstream's order.
pub fn unsupported(value: &str, supported: &[&str]) -> String {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    format!("Unsupported value: {value:?}: supported values: {}", list.join(", "))
}

/// `field.Invalid`: the value as Go's `%v`-ish rendering upstream prints (strings quoted).
pub(crate) fn invalid(value: impl std::fmt::Display, detail: &str) -> String {
    format!("Invalid value: {value}: {detail}")
}

/// The taint effects upstream knows (`validateTaintEffect`), in its order.
const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// `validateTaintEffect` (pkg/apis/core/validation): required on a node's taint, optional (empty
/// matches every effect) on a toleration, else one of NoSchedule, PreferNoSchedule, NoExecute.
fn taint_effect(effect: &str, allow_empty: bool, path: String) -> Option<FieldError> {
    if effect.is_empty() {
        return (!allow_empty).then(|| (path, "Required value".to_string()));
    }
    (!TAINT_EFFECTS.contains(&effect)).then(|| (path, unsupported(effect, &TAINT_EFFECTS)))
}

/// A node's `spec.taints` (`validateNodeTaints`: each effect is required and known).
pub fn node_taints(taints: &[Taint]) -> Vec<FieldError> {
    taints
        .iter()
        .enumerate()
        .filter_map(|(i, t)| taint_effect(&t.effect, false, format!("spec.taints[{i}].effect")))
        .collect()
}

/// `ValidateTolerations` (pkg/apis/core/validation): the operator is Equal (or empty, which
/// defaults to it) or Exists — plus Lt and Gt, which muster implements (KEP 5471,
/// `TaintTolerationComparisonOperators`, whose values must be integers); an empty key needs
/// Exists; Exists takes no value; the effect is empty or a known one; `tolerationSeconds` needs
/// NoExecute.
pub fn tolerations(tolerations: &[Toleration], path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let key = t.key.as_deref().unwrap_or_default();
        let op = t.operator.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        let effect = t.effect.as_deref().unwrap_or_default();
        if key.is_empty() && op != "Exists" {
            out.push((
                format!("{at}.operator"),
                invalid(
                    format!("{op:?}"),
                    "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
                ),
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            out.push((
                format!("{at}.effect"),
                invalid(format!("{effect:?}"), "effect must be 'NoExecute' when `tolerationSeconds` is set"),
            ));
        }
        match op {
            "" | "Equal" => {}
            "Exists" => {
                if !value.is_empty() {
                    out.push((
                        format!("{at}.operator"),
                        invalid(format!("{value:?}"), "value must be empty when `operator` is 'Exists'"),
                    ));
                }
            }
            "Lt" | "Gt" => {
                if value.parse::<i64>().is_err() {
                    out.push((format!("{at}.value"), invalid(format!("{value:?}"), "value must be a valid integer")));
                }
            }
            other => out.push((format!("{at}.operator"), unsupported(other, &["Equal", "Exists", "Lt", "Gt"]))),
        }
        if let Some(e) = taint_effect(effect, true, format!("{at}.effect")) {
            out.push(e);
        }
    }
    out
}

/// `ValidateNodeSelectorRequirement` (pkg/apis/core/validation): In and NotIn need values,
/// Exists and DoesNotExist take none, Gt and Lt take exactly one; any other operator is invalid.
pub fn node_selector_requirement(r: &NodeSelectorRequirement, path: &str) -> Option<FieldError> {
    let n = r.values.as_ref().map_or(0, Vec::len);
    let values = format!("{path}.values");
    match r.operator.as_str() {
        "In" | "NotIn" if n == 0 => {
            Some((values, "Required value: must be specified when `operator` is 'In' or 'NotIn'".into()))
        }
        "Exists" | "DoesNotExist" if n > 0 => {
            Some((values, "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'".into()))
        }
        "Gt" | "Lt" if n != 1 => {
            Some((values, "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'".into()))
        }
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => None,
        other => Some((format!("{path}.operator"), invalid(format!("{other:?}"), "not a valid selector operator"))),
    }
}

/// A pod's tolerations and node affinity (required and preferred terms, expressions and fields).
pub fn pod_spec(spec: &PodSpec) -> Vec<FieldError> {
    let mut out = tolerations(spec.tolerations.as_deref().unwrap_or_default(), "spec.tolerations");
    let Some(node) = spec.affinity.as_ref().and_then(|a: &Affinity| a.node_affinity.as_ref()) else {
        return out;
    };
    let base = "spec.affinity.nodeAffinity";
    let mut term = |term: &k8s_openapi::api::core::v1::NodeSelectorTerm, path: String| {
        for (list, name) in [(&term.match_expressions, "matchExpressions"), (&term.match_fields, "matchFields")] {
            for (k, r) in list.iter().flatten().enumerate() {
                out.extend(node_selector_requirement(r, &format!("{path}.{name}[{k}]")));
            }
        }
    };
    if let Some(required) = node.required_during_scheduling_ignored_during_execution.as_ref() {
        for (j, t) in required.node_selector_terms.iter().enumerate() {
            term(t, format!("{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{j}]"));
        }
    }
    for (j, p) in node.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
        term(&p.preference, format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{j}].preference"));
    }
    out
}

/// The `+k8s:minimum=1` declarative rule: "must be greater than or equal to 1".
fn at_least_one(value: i32, path: &str) -> Option<FieldError> {
    (value < 1).then(|| (path.to_string(), invalid(value, "must be greater than or equal to 1")))
}

/// A PodGroup's gang size: `spec.schedulingPolicy.gang.minCount` is `+k8s:minimum=1`
/// (k8s.io/api scheduling/v1beta1 types, declarative validation).
pub fn pod_group(g: &PodGroup) -> Vec<FieldError> {
    let mut out: Vec<FieldError> = g
        .spec
        .scheduling_policy
        .gang
        .as_ref()
        .and_then(|gang| at_least_one(gang.min_count, "spec.schedulingPolicy.gang.minCount"))
        .into_iter()
        .collect();
    let keys = g.spec.scheduling_constraints.as_ref().and_then(|c| c.topology.as_ref());
    topology(keys.map(|t| t.iter().map(|t| t.key.as_str()).collect()), &mut out);
    out
}

/// `spec.schedulingConstraints.topology` of a PodGroup or CompositePodGroup: at most one entry
/// (`+k8s:maxItems=1`: "only a single topology constraint can be specified"), whose `key` is a
/// node label key (required).
fn topology(keys: Option<Vec<&str>>, out: &mut Vec<FieldError>) {
    let Some(keys) = keys else { return };
    let path = "spec.schedulingConstraints.topology";
    too_many(path, keys.len(), 1, out);
    for (i, key) in keys.iter().enumerate() {
        let at = format!("{path}[{i}].key");
        if key.is_empty() {
            out.push((at, "Required value".into()));
        } else {
            out.extend(meta::qualified_name(key, &at));
        }
    }
}

/// A CompositePodGroup's `spec.schedulingPolicy.gang.minGroupCount` is `+k8s:minimum=1`
/// (k8s.io/api scheduling/v1alpha3 `CompositeGangSchedulingPolicy`).
pub fn composite_pod_group(c: &CompositePodGroup) -> Vec<FieldError> {
    let mut out: Vec<FieldError> = c
        .spec
        .scheduling_policy
        .gang
        .as_ref()
        .and_then(|gang| at_least_one(gang.min_group_count, "spec.schedulingPolicy.gang.minGroupCount"))
        .into_iter()
        .collect();
    let keys = c.spec.scheduling_constraints.as_ref().and_then(|c| c.topology.as_ref());
    topology(keys.map(|t| t.iter().map(|t| t.key.as_str()).collect()), &mut out);
    out
}

/// `HighestUserDefinablePriority`: the largest value a class outside `system-` may have.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;

/// `ValidatePriorityClass` (pkg/apis/scheduling/validation) and the priority admission plugin:
/// a user class's `value` is at most 1,000,000,000; `preemptionPolicy` is PreemptLowerPriority
/// or Never; only one class may be the global default (admission refuses a second one). System
/// classes (`system-` prefix) are muster's built-ins and are not checked here.
pub fn priority_classes(classes: &[PriorityClass]) -> Vec<ModelError> {
    let mut out = Vec::new();
    let mut default: Option<&str> = None;
    let mut sorted: Vec<&PriorityClass> = classes.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for pc in sorted {
        let name = pc.metadata.name.as_deref().unwrap_or_default();
        let mut err = |field: &str, message: String| {
            out.push(ModelError {
                kind: "PriorityClass",
                object: name.to_string(),
                field: Some(field.to_string()),
                message,
            })
        };
        if !name.starts_with("system-") && pc.value.unwrap_or(0) > HIGHEST_USER_DEFINABLE_PRIORITY {
            err(
                "value",
                format!(
                    "Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
                ),
            );
        }
        if let Some(p) = pc.preemption_policy.as_deref()
            && !matches!(p, "PreemptLowerPriority" | "Never")
        {
            err("preemptionPolicy", unsupported(p, &["PreemptLowerPriority", "Never"]));
        }
        if pc.global_default == Some(true) {
            match default {
                None => default = Some(name),
                Some(first) => err(
                    "globalDefault",
                    format!(
                        "Forbidden: PriorityClass {first} is already marked as default. Only one default can exist"
                    ),
                ),
            }
        }
    }
    out
}

/// `validateDeviceAllocationMode` (pkg/apis/resource/validation), after API defaulting: an empty
/// mode is ExactCount and an ExactCount `count` of 0 (or none) becomes 1, so a negative count is
/// what ExactCount refuses ("must be greater than zero"); All takes no count; other modes are
/// unsupported.
fn allocation_mode(mode: Option<&str>, count: Option<i64>, path: &str, out: &mut Vec<FieldError>) {
    let count = count.unwrap_or(0);
    match mode.unwrap_or_default() {
        "" | "ExactCount" => {
            if count < 0 {
                out.push((format!("{path}.count"), invalid(count, "must be greater than zero")));
            }
        }
        "All" => {
            if count != 0 {
                out.push((
                    format!("{path}.count"),
                    invalid(count, "must not be specified when allocationMode is 'All'"),
                ));
            }
        }
        other => out.push((format!("{path}.allocationMode"), unsupported(other, &["All", "ExactCount"]))),
    }
}

/// Consumable-capacity requests (`capacity.requests`): quantities, which the API server refuses
/// below zero as it refuses every resource quantity ("must be greater than or equal to 0").
fn capacity(c: Option<&CapacityRequirements>, path: &str, out: &mut Vec<FieldError>) {
    for (name, q) in c.and_then(|c| c.requests.as_ref()).into_iter().flatten() {
        let Quantity(text) = q;
        let field = format!("{path}.capacity.requests[{name}]");
        match muster_api::quantity::parse(text) {
            Ok(v) if v.signum() < 0 => {
                out.push((field, invalid(format!("{text:?}"), "must be greater than or equal to 0")));
            }
            Ok(_) => {}
            Err(e) => out.push((field, invalid(format!("{text:?}"), &e.to_string()))),
        }
    }
}

/// A claim's (or a template's) `devices`: each request's, and each `firstAvailable`
/// subrequest's, allocation mode with its count, and its capacity requests. `path` is the
/// path of the `devices` field (`spec.devices`, `spec.spec.devices`).
pub fn device_claim(devices: &DeviceClaim, path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    claims::structure(devices, path, &mut out);
    for (i, r) in devices.requests.iter().flatten().enumerate() {
        let at = format!("{path}.requests[{i}]");
        if let Some(e) = r.exactly.as_ref() {
            let p = format!("{at}.exactly");
            allocation_mode(e.allocation_mode.as_deref(), e.count, &p, &mut out);
            capacity(e.capacity.as_ref(), &p, &mut out);
            selector_costs(e.selectors.as_deref(), &p, &mut out);
        }
        for (j, s) in r.first_available.iter().flatten().enumerate() {
            let p = format!("{at}.firstAvailable[{j}]");
            allocation_mode(s.allocation_mode.as_deref(), s.count, &p, &mut out);
            capacity(s.capacity.as_ref(), &p, &mut out);
            selector_costs(s.selectors.as_deref(), &p, &mut out);
        }
    }
    out
}

/// The namespace label that admin access to devices requires (`DRAAdminNamespaceLabelKey`).
pub const ADMIN_ACCESS_LABEL: &str = "resource.kubernetes.io/admin-access";

/// `AuthorizedForAdmin`: a claim (or template) that asks for admin access must live in a
/// namespace labelled `resource.kubernetes.io/admin-access: "true"`; the first such request is
/// named. `namespace_labels` is `None` when the input does not define the namespace (the API
/// server could not find it, so could not grant admin access either).
pub fn admin_access(
    devices: &DeviceClaim,
    path: &str,
    namespace: &str,
    namespace_labels: Option<&std::collections::BTreeMap<String, String>>,
) -> Vec<FieldError> {
    let Some(i) = devices
        .requests
        .iter()
        .flatten()
        .position(|r| r.exactly.as_ref().is_some_and(|e| e.admin_access == Some(true)))
    else {
        return Vec::new();
    };
    if namespace_labels.and_then(|l| l.get(ADMIN_ACCESS_LABEL)).is_some_and(|v| v == "true") {
        return Vec::new();
    }
    let missing = if namespace_labels.is_none() {
        format!(" (the input defines no Namespace {namespace:?}; add it with that label)")
    } else {
        String::new()
    };
    vec![(
        format!("{path}.requests[{i}].exactly.adminAccess"),
        format!(
            "Forbidden: admin access to devices requires the `{ADMIN_ACCESS_LABEL}: true` label on the containing namespace{missing}"
        ),
    )]
}

/// Upstream's limits on a ResourceSlice (`ResourceSliceMaxDevices`,
/// `ResourceSliceMaxDevicesWithAdvancedFeatures`, `ResourceSliceMaxCounterSets`,
/// `ResourceSliceMaxCountersPerCounterSet`).
pub const SLICE_MAX_DEVICES: usize = 128;
pub const SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES: usize = 64;
pub const SLICE_MAX_COUNTER_SETS: usize = 8;
pub const COUNTER_SET_MAX_COUNTERS: usize = 32;

/// A ResourceSlice as `validateResourceSliceSpec` checks it: driver and pool named, the pool's
/// counts, where its devices live, `devices` and `sharedCounters` not both (since 1.35 counter
/// sets live in slices of their own), the list limits (64 devices once any device has taints,
/// consumes counters or has list attributes), and each device and counter set. A list over its
/// limit is reported alone, as upstream does, without checking its items.
pub fn resource_slice(slice: &k8s_openapi::api::resource::v1::ResourceSlice) -> Vec<FieldError> {
    let mut out = Vec::new();
    let spec = &slice.spec;
    slices::pool_and_nodes(spec, &mut out);
    if spec.devices.is_some() && spec.shared_counters.is_some() {
        out.push(("spec".into(), invalid("\"\"", "only one of `sharedCounters` or `devices` is allowed")));
    }
    let devices = spec.devices.as_deref().unwrap_or_default();
    let counters = spec.shared_counters.as_deref().unwrap_or_default();
    let advanced = devices.iter().any(|d| {
        d.taints.as_ref().is_some_and(|t| !t.is_empty())
            || d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty())
            || d.attributes
                .iter()
                .flatten()
                .any(|(_, a)| a.bools.is_some() || a.ints.is_some() || a.strings.is_some() || a.versions.is_some())
    });
    let max_devices = if advanced { SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES } else { SLICE_MAX_DEVICES };
    let before = out.len();
    too_many("spec.devices", devices.len(), max_devices, &mut out);
    too_many("spec.sharedCounters", counters.len(), SLICE_MAX_COUNTER_SETS, &mut out);
    for (i, set) in counters.iter().enumerate() {
        let n = set.counters.len();
        too_many(&format!("spec.sharedCounters[{i}].counters"), n, COUNTER_SET_MAX_COUNTERS, &mut out);
    }
    if out.len() == before {
        slices::devices_and_counters(spec, &mut out);
    }
    out
}

/// `field.TooMany`.
pub(crate) fn too_many(path: &str, n: usize, max: usize, out: &mut Vec<FieldError>) {
    if n > max {
        out.push((path.into(), format!("Too many: {n}: must have at most {max} items")));
    }
}

/// A DeviceClass (`validateDeviceClassSpec`): at most 32 selectors, each with its CEL and within
/// the cost limit; at most 32 configs, each opaque with a driver; a valid `extendedResourceName`.
pub fn device_class(class: &DeviceClass) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(spec) = class.spec.as_ref() else { return out };
    let selectors = spec.selectors.as_deref().unwrap_or_default();
    if selectors.len() > claims::REQUESTS_MAX {
        too_many("spec.selectors", selectors.len(), claims::REQUESTS_MAX, &mut out);
    } else {
        for (k, s) in selectors.iter().enumerate() {
            if s.cel.is_none() {
                out.push((format!("spec.selectors[{k}].cel"), "Required value".into()));
            }
        }
        selector_costs(Some(selectors), "spec", &mut out);
    }
    let configs = spec.config.as_deref().unwrap_or_default();
    too_many("spec.config", configs.len(), claims::REQUESTS_MAX, &mut out);
    for (i, c) in configs.iter().enumerate().take(claims::REQUESTS_MAX) {
        match c.opaque.as_ref() {
            None => out.push((format!("spec.config[{i}].opaque"), "Required value".into())),
            Some(o) => dra_names::driver_name(&o.driver, &format!("spec.config[{i}].opaque.driver"), &mut out),
        }
    }
    if let Some(name) = spec.extended_resource_name.as_deref()
        && !is_extended_resource_name(name)
    {
        let at = "spec.extendedResourceName".to_string();
        out.push((at, invalid(format!("{name:?}"), "must be a valid extended resource name")));
    }
    out
}

/// `IsExtendedResourceName`: a name with a domain outside `kubernetes.io/`, not itself a
/// `requests.` name, whose `requests.` form is a qualified name.
fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native && !name.starts_with("requests.") && meta::qualified_name_problems(&format!("requests.{name}")).is_empty()
}

/// `validateCELSelector`: a selector whose worst-case cost, estimated as cel-go estimates it with
/// the DRA size limits, is above `CELSelectorExpressionMaxCost` (1,000,000) is refused ("too
/// complex, exceeds cost limit"), however cheap it would be on the devices at hand. A selector that
/// does not compile is not judged here: `check` reports compile errors with the expression, and
/// the allocator reports them for the claims that use it.
fn selector_costs(selectors: Option<&[DeviceSelector]>, path: &str, out: &mut Vec<FieldError>) {
    static ENV: std::sync::OnceLock<muster_cel::Env> = std::sync::OnceLock::new();
    let env = ENV.get_or_init(muster_cel::Env::default);
    for (k, s) in selectors.into_iter().flatten().enumerate() {
        let Some(cel) = s.cel.as_ref() else { continue };
        if let Ok(p) = env.compile(&cel.expression)
            && p.estimated_cost > muster_cel::SELECTOR_COST_LIMIT
        {
            out.push((
                format!("{path}.selectors[{k}].cel.expression"),
                "Forbidden: too complex, exceeds cost limit".into(),
            ));
        }
    }
}

/// Allocated devices that no ResourceSlice publishes: each `status.allocation.devices.results[i]`
/// of a claim whose (driver, pool, device) is not among `published`. NOT an API-server rule (the
/// API server does not look at slices, and a driver may republish its slices after the claim was
/// allocated), so the caller reports these as warnings, never as errors.
pub fn unpublished_allocations(
    claim: &k8s_openapi::api::resource::v1::ResourceClaim,
    published: &std::collections::HashSet<(String, String, String)>,
) -> Vec<FieldError> {
    let results = claim.status.as_ref().and_then(|s| s.allocation.as_ref()).and_then(|a| a.devices.as_ref());
    results
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, r)| !published.contains(&(r.driver.clone(), r.pool.clone(), r.device.clone())))
        .map(|(i, r)| {
            (
                format!("status.allocation.devices.results[{i}]"),
                format!(
                    "allocated device {}/{}/{} (driver/pool/device) is not published by any ResourceSlice in the input",
                    r.driver, r.pool, r.device
                ),
            )
        })
        .collect()
}

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for \
validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// `IsDNS1123Label`: a name such as a container's, a device's, a request's or a namespace.
pub fn dns_label(value: &str, path: &str) -> Option<FieldError> {
    if is_dns_label(value) {
        return None;
    }
    let message = if value.len() > 63 {
        format!("Invalid value: {value:?}: must be no more than 63 characters")
    } else {
        format!("Invalid value: {value:?}: {DNS1123_LABEL_MSG}")
    };
    Some((path.to_string(), message))
}

/// `IsDNS1123Subdomain`: an object's name (most kinds).
pub fn dns_subdomain(value: &str, path: &str) -> Option<FieldError> {
    dns_subdomain_problem(value).map(|p| (path.to_string(), format!("Invalid value: {value:?}: {p}")))
}

/// What `IsDNS1123Subdomain` says about `value`, if anything.
pub fn dns_subdomain_problem(value: &str) -> Option<&'static str> {
    if value.len() > 253 {
        Some("must be no more than 253 characters")
    } else if value.is_empty() || !value.split('.').all(is_dns_label) {
        Some(DNS1123_SUBDOMAIN_MSG)
    } else {
        None
    }
}

/// Field errors as model errors on one object.
pub fn on(kind: &'static str, object: &str, errors: Vec<FieldError>) -> Vec<ModelError> {
    errors
        .into_iter()
        .map(|(field, message)| ModelError { kind, object: object.to_string(), field: Some(field), message })
        .collect()
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn names_follow_rfc_1123() {
        assert_eq!(dns_subdomain("gpu-node.rack-1", "metadata.name"), None);
        assert_eq!(dns_label("trainer", "spec.containers[0].name"), None);
        for bad in ["stress-pod-__INDEX__", "{{.Index}}", "Upper", "-lead", "trail-", "a..b", ""] {
            let (field, message) = dns_subdomain(bad, "metadata.name").expect(bad);
            assert_eq!(field, "metadata.name");
            assert!(
                message.starts_with(&format!("Invalid value: {bad:?}: a lowercase RFC 1123 subdomain")),
                "{message}"
            );
        }
        assert!(dns_label("gpu.0", "spec.devices[0].name").is_some(), "no dots in a label");
        assert!(dns_label(&"a".repeat(64), "x").unwrap().1.ends_with("must be no more than 63 characters"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_has_one_topology_constraint_at_most_with_a_label_key() {
        let group = |topology: serde_json::Value| -> PodGroup {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "g"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "schedulingConstraints": {"topology": topology}}}))
            .unwrap()
        };
        assert!(pod_group(&group(serde_json::json!([{"key": "topology.kubernetes.io/rack"}]))).is_empty());
        let two = pod_group(&group(serde_json::json!([{"key": "a"}, {"key": "b"}])));
        assert_eq!(
            two,
            [("spec.schedulingConstraints.topology".into(), "Too many: 2: must have at most 1 items".into())]
        );
        let bad = pod_group(&group(serde_json::json!([{"key": ""}])));
        assert_eq!(bad, [("spec.schedulingConstraints.topology[0].key".into(), "Required value".into())]);
        let bad = pod_group(&group(serde_json::json!([{"key": "a b"}])));
        assert_eq!(bad[0].0, "spec.schedulingConstraints.topology[0].key");
    }

    #[test]
    fn unsupported_lists_values_in_order() {
        assert_eq!(
            unsupported("Bogus", &TAINT_EFFECTS),
            "Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
        );
    }

    #[test]
    fn selector_operators_and_value_counts() {
        let req = |op: &str, n: usize| NodeSelectorRequirement {
            key: "k".into(),
            operator: op.into(),
            values: Some(vec!["1".into(); n]),
        };
        assert!(node_selector_requirement(&req("In", 1), "p").is_none());
        assert!(node_selector_requirement(&req("In", 0), "p").unwrap().1.contains("'In' or 'NotIn'"));
        assert!(node_selector_requirement(&req("Exists", 1), "p").unwrap().0.ends_with(".values"));
        assert!(node_selector_requirement(&req("Gt", 2), "p").is_some());
        assert_eq!(node_selector_requirement(&req("Like", 1), "p").unwrap().0, "p.operator");
    }

    #[test]
    fn device_counts_after_defaulting() {
        use k8s_openapi::api::resource::v1::{DeviceRequest, ExactDeviceRequest};
        let claim = |mode: Option<&str>, count: Option<i64>| DeviceClaim {
            requests: Some(vec![DeviceRequest {
                name: "r".into(),
                exactly: Some(ExactDeviceRequest {
                    device_class_name: "c".into(),
                    allocation_mode: mode.map(str::to_string),
                    count,
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        };
        // API defaulting turns an ExactCount count of 0 (or none) into 1; All without a count is fine.
        assert!(device_claim(&claim(None, Some(0)), "d").is_empty());
        assert!(device_claim(&claim(Some("All"), None), "d").is_empty());
        assert_eq!(device_claim(&claim(Some("ExactCount"), Some(-3)), "d")[0].0, "d.requests[0].exactly.count");
        assert_eq!(device_claim(&claim(Some("All"), Some(1)), "d").len(), 1);
    }

    #[test]
    fn one_global_default_and_user_values() {
        let pc = |name: &str, value: i32, default: bool| PriorityClass {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            value: Some(value),
            global_default: Some(default),
            ..Default::default()
        };
        assert!(priority_classes(&[pc("a", 1_000_000_000, true), pc("b", 5, false)]).is_empty());
        let errs = priority_classes(&[pc("b", 1, true), pc("a", 1_000_000_001, true)]);
        let fields: Vec<_> = errs.iter().map(|e| (e.object.as_str(), e.field.as_deref().unwrap())).collect();
        assert_eq!(fields, [("a", "value"), ("b", "globalDefault")]);
    }

    #[test]
    fn tolerations_operators_and_effects() {
        let tol = |op: &str, effect: &str| Toleration {
            key: Some("k".into()),
            operator: Some(op.into()),
            value: Some("1".into()),
            effect: Some(effect.into()),
            ..Default::default()
        };
        assert!(tolerations(&[tol("Equal", "NoSchedule"), tol("Gt", "")], "t").is_empty());
        let errs = tolerations(&[tol("Matches", "Sometimes")], "t");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].0, "t[0].operator");
        assert_eq!(errs[1].0, "t[0].effect");
    }
}

#[cfg(test)]
mod slice_tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{Counter, CounterSet, Device, ResourcePool, ResourceSlice, ResourceSliceSpec};

    fn slice(devices: usize, sets: usize) -> ResourceSlice {
        ResourceSlice {
            spec: ResourceSliceSpec {
                driver: "gpu.example.com".into(),
                pool: ResourcePool { name: "node-1".into(), generation: 1, resource_slice_count: 1 },
                node_name: Some("node-1".into()),
                devices: (devices > 0)
                    .then(|| (0..devices).map(|i| Device { name: format!("gpu-{i}"), ..Default::default() }).collect()),
                shared_counters: (sets > 0).then(|| {
                    (0..sets)
                        .map(|i| CounterSet {
                            name: format!("set-{i}"),
                            counters: [("memory".to_string(), Counter { value: Quantity("80Gi".into()) })].into(),
                        })
                        .collect()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_slice_publishes_devices_or_counter_sets_within_the_limits() {
        assert!(resource_slice(&slice(8, 0)).is_empty());
        assert!(resource_slice(&slice(0, 2)).is_empty());
        let both = resource_slice(&slice(8, 1));
        assert_eq!(both.len(), 1);
        assert_eq!(both[0].1, "Invalid value: \"\": only one of `sharedCounters` or `devices` is allowed");
        assert_eq!(
            resource_slice(&slice(129, 0)),
            vec![("spec.devices".to_string(), "Too many: 129: must have at most 128 items".to_string())]
        );
        let mut nameless = slice(1, 0);
        nameless.spec.pool.name.clear();
        assert_eq!(resource_slice(&nameless), vec![("spec.pool.name".to_string(), "Required value".to_string())]);
    }
}
