//! The shape of a claim's `devices` as `validateDeviceClaim` checks it — list limits, unique
//! request names, exactly one of `exactly`/`firstAvailable`, a class named, constraints and
//! configs that name real requests, device tolerations — and the parts of a claim's `status`
//! that a snapshot can get wrong (at most 256 `reservedFor` entries, none without an
//! allocation, at most 32 results). Allocation modes, counts, capacities and selector costs are
//! in the parent module.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use k8s_openapi::api::resource::v1::{DeviceClaim, DeviceToleration, ResourceClaimStatus};

use super::dra_names::{driver_name, fully_qualified_attribute};
use super::meta::{label_value, qualified_name};
use super::{FieldError, dns_label, dns_subdomain, invalid, too_many, unsupported};

/// `DeviceRequestsMaxSize`, also the limit on constraints, configs, selectors and results.
pub const REQUESTS_MAX: usize = 32;
/// `FirstAvailableDeviceRequestMaxSize`.
pub const SUBREQUESTS_MAX: usize = 8;
/// `DeviceTolerationsMaxLength`.
pub const TOLERATIONS_MAX: usize = 16;
/// `ResourceClaimReservedForMaxSize`.
pub const RESERVED_FOR_MAX: usize = 256;

/// Device taint effects, sorted as upstream lists them.
const DEVICE_TAINT_EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "None"];

/// A request name and the subrequest names under it (none for an `exactly` request).
type RequestNames<'a> = BTreeMap<&'a str, BTreeSet<&'a str>>;

/// `validateDeviceClaim`'s structural rules for `devices` at `path`.
pub fn structure(devices: &DeviceClaim, path: &str, out: &mut Vec<FieldError>) {
    let requests = devices.requests.as_deref().unwrap_or_default();
    let at = format!("{path}.requests");
    if requests.len() > REQUESTS_MAX {
        too_many(&at, requests.len(), REQUESTS_MAX, out);
    } else {
        let mut seen = HashSet::new();
        for (i, r) in requests.iter().enumerate() {
            request(r, &format!("{at}[{i}]"), out);
            if !seen.insert(r.name.as_str()) {
                out.push((format!("{at}[{i}]"), format!("Duplicate value: {:?}", r.name)));
            }
        }
    }
    let names: RequestNames<'_> = requests
        .iter()
        .map(|r| (r.name.as_str(), r.first_available.iter().flatten().map(|s| s.name.as_str()).collect()))
        .collect();
    constraints(devices, &names, path, out);
    configs(devices, &names, path, out);
}

fn request(r: &k8s_openapi::api::resource::v1::DeviceRequest, at: &str, out: &mut Vec<FieldError>) {
    let subrequests = r.first_available.as_deref().unwrap_or_default();
    match (&r.exactly, subrequests.is_empty()) {
        (None, true) => {
            out.push((at.into(), "Required value: exactly one of `exactly` or `firstAvailable` is required".into()))
        }
        (Some(_), false) => out.push((
            at.into(),
            invalid("null", "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"),
        )),
        (Some(e), true) => {
            let p = format!("{at}.exactly");
            class_name(&e.device_class_name, &p, out);
            selectors(e.selectors.as_deref().unwrap_or_default(), &p, out);
            tolerations(e.tolerations.as_deref().unwrap_or_default(), &p, out);
        }
        (None, false) if subrequests.len() > SUBREQUESTS_MAX => {
            too_many(&format!("{at}.firstAvailable"), subrequests.len(), SUBREQUESTS_MAX, out)
        }
        (None, false) => {
            let mut seen = HashSet::new();
            for (j, s) in subrequests.iter().enumerate() {
                let p = format!("{at}.firstAvailable[{j}]");
                class_name(&s.device_class_name, &p, out);
                selectors(s.selectors.as_deref().unwrap_or_default(), &p, out);
                tolerations(s.tolerations.as_deref().unwrap_or_default(), &p, out);
                if !seen.insert(s.name.as_str()) {
                    out.push((p, format!("Duplicate value: {:?}", s.name)));
                }
            }
        }
    }
}

fn class_name(name: &str, at: &str, out: &mut Vec<FieldError>) {
    let path = format!("{at}.deviceClassName");
    if name.is_empty() {
        out.push((path, "Required value".into()));
    } else {
        out.extend(dns_subdomain(name, &path));
    }
}

fn selectors(selectors: &[k8s_openapi::api::resource::v1::DeviceSelector], at: &str, out: &mut Vec<FieldError>) {
    let path = format!("{at}.selectors");
    if selectors.len() > REQUESTS_MAX {
        return too_many(&path, selectors.len(), REQUESTS_MAX, out);
    }
    for (k, s) in selectors.iter().enumerate() {
        if s.cel.is_none() {
            out.push((format!("{path}[{k}].cel"), "Required value".into()));
        }
    }
}

/// `validateDeviceToleration` for each toleration of a request (at most 16). The operator is
/// defaulted to Equal by the API server before validation, so an absent one is Equal.
pub fn tolerations(tolerations: &[DeviceToleration], at: &str, out: &mut Vec<FieldError>) {
    let path = format!("{at}.tolerations");
    if tolerations.len() > TOLERATIONS_MAX {
        return too_many(&path, tolerations.len(), TOLERATIONS_MAX, out);
    }
    for (i, t) in tolerations.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if let Some(key) = t.key.as_deref().filter(|k| !k.is_empty()) {
            out.extend(qualified_name(key, &format!("{p}.key")));
        }
        let value = t.value.as_deref().unwrap_or_default();
        match t.operator.as_deref().unwrap_or("Equal") {
            "Exists" if !value.is_empty() => {
                out.push((format!("{p}.value"), invalid(format!("{value:?}"), "must be empty for operator `Exists`")))
            }
            "Exists" => {}
            "Equal" => out.extend(label_value(value, &format!("{p}.value"))),
            other => out.push((format!("{p}.operator"), unsupported(other, &["Equal", "Exists"]))),
        }
        if let Some(e) = t.effect.as_deref().filter(|e| !e.is_empty() && !DEVICE_TAINT_EFFECTS.contains(e)) {
            out.push((format!("{p}.effect"), unsupported(e, &DEVICE_TAINT_EFFECTS)));
        }
    }
}

/// `validateRequestNameRef`: `request` or `request/subrequest`, naming one of the claim's.
fn request_ref(name: &str, names: &RequestNames<'_>, path: &str, out: &mut Vec<FieldError>) {
    let segments: Vec<&str> = name.split('/').collect();
    let why = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";
    if segments.len() > 2 {
        return out.push((path.into(), invalid(format!("{name:?}"), why)));
    }
    for s in &segments {
        out.extend(dns_label(s, path));
    }
    let known = match segments[..] {
        [r] => names.contains_key(r),
        [r, s] => names.get(r).is_some_and(|subs| subs.contains(s)),
        _ => false,
    };
    if !known {
        out.push((path.into(), invalid(format!("{name:?}"), why)));
    }
}

fn request_refs(list: &[String], names: &RequestNames<'_>, path: &str, out: &mut Vec<FieldError>) {
    if list.len() > REQUESTS_MAX {
        return too_many(path, list.len(), REQUESTS_MAX, out);
    }
    let mut seen = HashSet::new();
    for (i, name) in list.iter().enumerate() {
        request_ref(name, names, &format!("{path}[{i}]"), out);
        if !seen.insert(name.as_str()) {
            out.push((format!("{path}[{i}]"), format!("Duplicate value: {name:?}")));
        }
    }
}

/// `validateSlice` with the claim limit: a list over 32 items is reported alone; otherwise each
/// item is checked at its path, the requests it names first.
fn each_naming_requests<T>(
    list: &[T],
    at: &str,
    names: &RequestNames<'_>,
    requests: impl Fn(&T) -> &[String],
    mut check: impl FnMut(&T, String, &mut Vec<FieldError>),
    out: &mut Vec<FieldError>,
) {
    if list.len() > REQUESTS_MAX {
        return too_many(at, list.len(), REQUESTS_MAX, out);
    }
    for (i, item) in list.iter().enumerate() {
        let p = format!("{at}[{i}]");
        request_refs(requests(item), names, &format!("{p}.requests"), out);
        check(item, p, out);
    }
}

/// `validateDeviceConstraint`: the requests it names exist; a fully qualified `matchAttribute`
/// or `distinctAttribute`.
fn constraints(devices: &DeviceClaim, names: &RequestNames<'_>, path: &str, out: &mut Vec<FieldError>) {
    let list = devices.constraints.as_deref().unwrap_or_default();
    fn requests(c: &k8s_openapi::api::resource::v1::DeviceConstraint) -> &[String] {
        c.requests.as_deref().unwrap_or_default()
    }
    let check = |c: &k8s_openapi::api::resource::v1::DeviceConstraint, p: String, out: &mut Vec<FieldError>| match (
        &c.match_attribute,
        &c.distinct_attribute,
    ) {
        (Some(a), _) => fully_qualified_attribute(a, &format!("{p}.matchAttribute"), out),
        (None, Some(a)) => fully_qualified_attribute(a, &format!("{p}.distinctAttribute"), out),
        (None, None) => out
            .push((p, "Required value: exactly one of \"matchAttribute\" or \"distinctAttribute\" is required".into())),
    };
    each_naming_requests(list, &format!("{path}.constraints"), names, requests, check, out);
}

/// `validateDeviceClaimConfiguration`: requests it names exist; an opaque config with a driver.
fn configs(devices: &DeviceClaim, names: &RequestNames<'_>, path: &str, out: &mut Vec<FieldError>) {
    let list = devices.config.as_deref().unwrap_or_default();
    fn requests(c: &k8s_openapi::api::resource::v1::DeviceClaimConfiguration) -> &[String] {
        c.requests.as_deref().unwrap_or_default()
    }
    let check =
        |c: &k8s_openapi::api::resource::v1::DeviceClaimConfiguration, p: String, out: &mut Vec<FieldError>| match c
            .opaque
            .as_ref()
        {
            None => out.push((format!("{p}.opaque"), "Required value".into())),
            Some(o) => driver_name(&o.driver, &format!("{p}.opaque.driver"), out),
        };
    each_naming_requests(list, &format!("{path}.config"), names, requests, check, out);
}

/// A claim's status: `reservedFor` within its limit, unique, and only on an allocated claim;
/// at most 32 allocation results.
pub fn status(status: &ResourceClaimStatus) -> Vec<FieldError> {
    let mut out = Vec::new();
    let reserved = status.reserved_for.as_deref().unwrap_or_default();
    if reserved.len() > RESERVED_FOR_MAX {
        too_many("status.reservedFor", reserved.len(), RESERVED_FOR_MAX, &mut out);
    } else {
        let mut seen = HashSet::new();
        for (i, r) in reserved.iter().enumerate() {
            let key = (r.resource.as_str(), r.name.as_str(), r.uid.as_str());
            if !seen.insert(key) {
                out.push((format!("status.reservedFor[{i}]"), format!("Duplicate value: {:?}", r.name)));
            }
        }
    }
    if !reserved.is_empty() && status.allocation.is_none() {
        out.push(("status.reservedFor".into(), "Forbidden: may not be specified when `allocated` is not set".into()));
    }
    let results = status.allocation.as_ref().and_then(|a| a.devices.as_ref()).and_then(|d| d.results.as_ref());
    if let Some(results) = results {
        too_many("status.allocation.devices.results", results.len(), REQUESTS_MAX, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errs(v: serde_json::Value) -> Vec<FieldError> {
        let mut out = Vec::new();
        structure(&serde_json::from_value(v).expect("a DeviceClaim"), "spec.devices", &mut out);
        out
    }

    #[test]
    fn a_valid_claim_passes() {
        let ok = errs(json!({
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2,
                 "tolerations": [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]}},
                {"name": "nic", "firstAvailable": [{"name": "fast", "deviceClassName": "nic"}, {"name": "slow", "deviceClassName": "nic"}]}
            ],
            "constraints": [{"requests": ["gpu", "nic/fast"], "matchAttribute": "example.com/pcieRoot"}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {}}}]
        }));
        assert!(ok.is_empty(), "{ok:?}");
    }

    #[test]
    fn requests_are_named_once_and_have_one_form() {
        let e = errs(json!({"requests": [
            {"name": "a"},
            {"name": "a", "exactly": {"deviceClassName": ""}},
            {"name": "b", "exactly": {"deviceClassName": "c"}, "firstAvailable": [{"name": "x", "deviceClassName": "c"}]}
        ]}));
        let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.devices.requests[0]",
                "spec.devices.requests[1].exactly.deviceClassName",
                "spec.devices.requests[1]",
                "spec.devices.requests[2]"
            ]
        );
        assert_eq!(e[2].1, "Duplicate value: \"a\"");
    }

    #[test]
    fn thirty_three_requests_are_too_many() {
        let many: Vec<_> =
            (0..33).map(|i| json!({"name": format!("r{i}"), "exactly": {"deviceClassName": "c"}})).collect();
        assert_eq!(
            errs(json!({"requests": many})),
            [("spec.devices.requests".into(), "Too many: 33: must have at most 32 items".into())]
        );
    }

    #[test]
    fn constraints_and_configs_name_real_requests() {
        let e = errs(json!({
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}],
            "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": "pcieRoot"}, {"requests": ["gpu"]}],
            "config": [{"requests": ["gpu/x"]}]
        }));
        let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.devices.constraints[0].requests[1]",
                "spec.devices.constraints[0].matchAttribute",
                "spec.devices.constraints[1]",
                "spec.devices.config[0].requests[0]",
                "spec.devices.config[0].opaque"
            ]
        );
    }

    #[test]
    fn device_tolerations() {
        let e = errs(json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c", "tolerations": [
            {"key": "k", "operator": "Exists", "value": "v"},
            {"key": "k", "operator": "Gt", "value": "1", "effect": "PreferNoSchedule"}
        ]}}]}));
        let msgs: Vec<&str> = e.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "Invalid value: \"v\": must be empty for operator `Exists`",
                "Unsupported value: \"Gt\": supported values: \"Equal\", \"Exists\"",
                "Unsupported value: \"PreferNoSchedule\": supported values: \"NoExecute\", \"NoSchedule\", \"None\""
            ]
        );
    }

    #[test]
    fn status_limits() {
        let reserved: Vec<_> =
            (0..257).map(|i| json!({"resource": "pods", "name": format!("p{i}"), "uid": format!("u{i}")})).collect();
        let s: ResourceClaimStatus = serde_json::from_value(json!({"reservedFor": reserved})).unwrap();
        let fields: Vec<String> = status(&s).into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["status.reservedFor", "status.reservedFor"], "too many, and no allocation");
    }
}
