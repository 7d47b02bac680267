//! `validateResourceSliceSpec`'s rules beyond the ones the parent module applies first (driver,
//! pool, devices-or-counters, list limits): where the slice's devices live (exactly one of
//! `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`), the pool's counts, each
//! device's attributes, capacities, taints, counter consumption and binding conditions, each
//! counter set; and a DeviceTaintRule's selector and taint.

use std::collections::HashSet;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, DeviceTaint, DeviceTaintRule, ResourceSliceSpec};

use super::dra_names::{device_name, driver_name, pool_name, qualified_attribute};
use super::meta::{label_value, qualified_name};
use super::{FieldError, dns_label, invalid, too_many};

/// `ResourceSliceMaxAttributesAndCapacitiesPerDevice`.
const ATTRIBUTES_AND_CAPACITIES_MAX: usize = 32;
/// `DeviceAttributeMaxValueLength`.
const ATTRIBUTE_VALUE_MAX: usize = 64;
/// `DeviceTaintsMaxLength`.
const TAINTS_MAX: usize = 16;
/// `ResourceSliceMaxDeviceCounterConsumptionsPerDevice`.
const COUNTER_CONSUMPTIONS_MAX: usize = 2;
/// `BindingConditionsMaxSize` and `BindingFailureConditionsMaxSize`.
const BINDING_CONDITIONS_MAX: usize = 4;
const DEVICE_TAINT_EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "None"];

/// The pool's counts and the slice's node selection.
pub fn pool_and_nodes(spec: &ResourceSliceSpec, out: &mut Vec<FieldError>) {
    driver_name(&spec.driver, "spec.driver", out);
    pool_name(&spec.pool.name, "spec.pool.name", out);
    if spec.pool.resource_slice_count <= 0 {
        let v = spec.pool.resource_slice_count;
        out.push(("spec.pool.resourceSliceCount".into(), invalid(v, "must be greater than zero")));
    }
    if spec.pool.generation < 0 {
        let v = spec.pool.generation;
        out.push(("spec.pool.generation".into(), invalid(v, "must be greater than or equal to zero")));
    }
    let mut set = Vec::new();
    match spec.node_name.as_deref() {
        Some("") => {
            out.push(("spec.nodeName".into(), invalid("\"\"", "must be either unset or set to a non-empty string")))
        }
        Some(n) => {
            set.push("`nodeName`");
            out.extend(super::dns_subdomain(n, "spec.nodeName"));
        }
        None => {}
    }
    if let Some(sel) = spec.node_selector.as_ref() {
        set.push("`nodeSelector`");
        if sel.node_selector_terms.len() != 1 {
            let why = "must have exactly one node selector term";
            out.push(("spec.nodeSelector.nodeSelectorTerms".into(), invalid(sel.node_selector_terms.len(), why)));
        }
    }
    for (field, value) in [("allNodes", spec.all_nodes), ("perDeviceNodeSelection", spec.per_device_node_selection)] {
        match value {
            Some(true) => set.push(if field == "allNodes" { "`allNodes`" } else { "`perDeviceNodeSelection`" }),
            Some(false) => out.push((format!("spec.{field}"), invalid(false, "must be either unset or set to true"))),
            None => {}
        }
    }
    const ONE_OF: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match set.len() {
        0 => out.push(("spec".into(), format!("Required value: {ONE_OF}"))),
        1 => {}
        _ => out.push((
            "spec".into(),
            invalid(format!("{{{}}}", set.join(", ")), &format!("{ONE_OF}, but multiple fields are set")),
        )),
    }
}

/// Each device, each counter set, device names unique.
pub fn devices_and_counters(spec: &ResourceSliceSpec, out: &mut Vec<FieldError>) {
    let per_device = spec.per_device_node_selection == Some(true);
    let mut names = HashSet::new();
    for (i, d) in spec.devices.iter().flatten().enumerate() {
        let at = format!("spec.devices[{i}]");
        device(d, &at, per_device, out);
        if !names.insert(d.name.as_str()) {
            out.push((at, format!("Duplicate value: {:?}", d.name)));
        }
    }
    let mut sets = HashSet::new();
    for (i, s) in spec.shared_counters.iter().flatten().enumerate() {
        let at = format!("spec.sharedCounters[{i}]");
        if s.name.is_empty() {
            out.push((format!("{at}.name"), "Required value".into()));
        } else {
            out.extend(dns_label(&s.name, &format!("{at}.name")));
        }
        if s.counters.is_empty() {
            out.push((format!("{at}.counters"), "Required value".into()));
        }
        for k in s.counters.keys() {
            out.extend(dns_label(k, &format!("{at}.counters")));
        }
        if !sets.insert(s.name.as_str()) {
            out.push((at, format!("Duplicate value: {:?}", s.name)));
        }
    }
}

fn device(d: &Device, at: &str, per_device: bool, out: &mut Vec<FieldError>) {
    let attributes = d.attributes.as_ref().map_or(0, |a| a.len());
    let capacities = d.capacity.as_ref().map_or(0, |c| c.len());
    if attributes + capacities > ATTRIBUTES_AND_CAPACITIES_MAX {
        let why =
            format!("the total number of attributes and capacities must not exceed {ATTRIBUTES_AND_CAPACITIES_MAX}");
        out.push((at.into(), invalid(attributes + capacities, &why)));
    }
    for (name, a) in d.attributes.iter().flatten() {
        qualified_attribute(name, &format!("{at}.attributes"), out);
        attribute(a, &format!("{at}.attributes[{name}]"), out);
    }
    for name in d.capacity.iter().flatten().map(|(k, _)| k) {
        qualified_attribute(name, &format!("{at}.capacity"), out);
    }
    let taints = d.taints.as_deref().unwrap_or_default();
    if taints.len() > TAINTS_MAX {
        too_many(&format!("{at}.taints"), taints.len(), TAINTS_MAX, out);
    } else {
        for (k, t) in taints.iter().enumerate() {
            taint(t, &format!("{at}.taints[{k}]"), out);
        }
    }
    counter_consumption(d, at, out);
    node_selection(d, at, per_device, out);
    binding_conditions(d, at, out);
}

/// `validateDeviceAttribute`: exactly one value; strings and versions at most 64 characters;
/// versions SemVer 2.0; lists not empty.
fn attribute(a: &DeviceAttribute, at: &str, out: &mut Vec<FieldError>) {
    let mut values = 0;
    if a.bool.is_some() {
        values += 1;
    }
    if a.int.is_some() {
        values += 1;
    }
    if let Some(s) = a.string.as_deref() {
        values += 1;
        if s.len() > ATTRIBUTE_VALUE_MAX {
            out.push(super::dra_names::too_long(&format!("{at}.string"), ATTRIBUTE_VALUE_MAX));
        }
    }
    if let Some(v) = a.version.as_deref() {
        values += 1;
        if muster_cel::semver::Semver::parse(v).is_err() {
            let why = "must be a string compatible with semver.org spec 2.0.0";
            out.push((format!("{at}.version"), invalid(format!("{v:?}"), why)));
        }
        if v.len() > ATTRIBUTE_VALUE_MAX {
            out.push(super::dra_names::too_long(&format!("{at}.version"), ATTRIBUTE_VALUE_MAX));
        }
    }
    for (field, len) in [
        ("bools", a.bools.as_ref().map(Vec::len)),
        ("ints", a.ints.as_ref().map(Vec::len)),
        ("strings", a.strings.as_ref().map(Vec::len)),
        ("versions", a.versions.as_ref().map(Vec::len)),
    ] {
        if let Some(n) = len {
            values += 1;
            if n == 0 {
                out.push((format!("{at}.{field}"), invalid("[]", "must not be empty if specified")));
            }
        }
    }
    if values != 1 {
        out.push((at.into(), invalid("{}", "exactly one value must be specified")));
    }
}

/// `validateDeviceTaint`: a label-name key, a label value, a known effect.
pub fn taint(t: &DeviceTaint, at: &str, out: &mut Vec<FieldError>) {
    out.extend(qualified_name(&t.key, &format!("{at}.key")));
    if let Some(v) = t.value.as_deref().filter(|v| !v.is_empty()) {
        out.extend(label_value(v, &format!("{at}.value")));
    }
    match t.effect.as_str() {
        "" => out.push((format!("{at}.effect"), "Required value".into())),
        e if !DEVICE_TAINT_EFFECTS.contains(&e) => {
            out.push((format!("{at}.effect"), super::unsupported(e, &DEVICE_TAINT_EFFECTS)))
        }
        _ => {}
    }
}

fn counter_consumption(d: &Device, at: &str, out: &mut Vec<FieldError>) {
    let list = d.consumes_counters.as_deref().unwrap_or_default();
    let path = format!("{at}.consumesCounters");
    if list.len() > COUNTER_CONSUMPTIONS_MAX {
        return too_many(&path, list.len(), COUNTER_CONSUMPTIONS_MAX, out);
    }
    let mut seen = HashSet::new();
    for (i, c) in list.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if c.counter_set.is_empty() {
            out.push((format!("{p}.counterSet"), "Required value".into()));
        }
        if c.counters.is_empty() {
            out.push((format!("{p}.counters"), "Required value".into()));
        }
        if !seen.insert(c.counter_set.as_str()) {
            out.push((p, format!("Duplicate value: {:?}", c.counter_set)));
        }
    }
}

/// With `perDeviceNodeSelection`, each device says where it is (exactly one of `nodeName`,
/// `nodeSelector`, `allNodes`); without it, none may.
fn node_selection(d: &Device, at: &str, per_device: bool, out: &mut Vec<FieldError>) {
    let mut set = Vec::new();
    if d.node_name.is_some() {
        set.push("`nodeName`");
    }
    if d.node_selector.is_some() {
        set.push("`nodeSelector`");
    }
    if d.all_nodes == Some(true) {
        set.push("`allNodes`");
    }
    const ONE_OF: &str = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when \
                          `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
    if per_device {
        match set.len() {
            0 => out.push((at.into(), format!("Required value: {ONE_OF}"))),
            1 => {}
            _ => out.push((at.into(), invalid(format!("{{{}}}", set.join(", ")), ONE_OF))),
        }
    } else if d.node_name.is_some() || d.node_selector.is_some() || d.all_nodes.is_some() {
        let why = "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
        out.push((at.into(), invalid("null", why)));
    }
}

/// `validateDeviceBindingParameters`: at most 4 of each, both or neither, no overlap.
fn binding_conditions(d: &Device, at: &str, out: &mut Vec<FieldError>) {
    let ok = d.binding_conditions.as_deref().unwrap_or_default();
    let failed = d.binding_failure_conditions.as_deref().unwrap_or_default();
    too_many(&format!("{at}.bindingConditions"), ok.len(), BINDING_CONDITIONS_MAX, out);
    too_many(&format!("{at}.bindingFailureConditions"), failed.len(), BINDING_CONDITIONS_MAX, out);
    for (i, c) in failed.iter().enumerate() {
        if ok.contains(c) {
            let why = "bindingFailureConditions must not overlap with bindingConditions";
            out.push((format!("{at}.bindingFailureConditions[{i}]"), invalid(format!("{c:?}"), why)));
        }
    }
    if ok.is_empty() && !failed.is_empty() {
        let why = "bindingConditions are required to use bindingFailureConditions";
        out.push((format!("{at}.bindingConditions"), invalid("[]", why)));
    }
    if failed.is_empty() && !ok.is_empty() {
        let why = "bindingFailureConditions are required to use bindingConditions";
        out.push((format!("{at}.bindingFailureConditions"), invalid("[]", why)));
    }
}

/// `ValidateDeviceTaintRule`: the selector's driver, pool and device names; the taint.
pub fn device_taint_rule(rule: &DeviceTaintRule) -> Vec<FieldError> {
    let mut out = Vec::new();
    if let Some(s) = rule.spec.device_selector.as_ref() {
        if let Some(d) = s.driver.as_deref() {
            driver_name(d, "spec.deviceSelector.driver", &mut out);
        }
        if let Some(p) = s.pool.as_deref() {
            pool_name(p, "spec.deviceSelector.pool", &mut out);
        }
        if let Some(d) = s.device.as_deref() {
            device_name(d, "spec.deviceSelector.device", &mut out);
        }
    }
    taint(&rule.spec.taint, "spec.taint", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errs(v: serde_json::Value) -> Vec<FieldError> {
        let spec: ResourceSliceSpec = serde_json::from_value(v).expect("a ResourceSliceSpec");
        let mut out = Vec::new();
        pool_and_nodes(&spec, &mut out);
        devices_and_counters(&spec, &mut out);
        out
    }

    fn base() -> serde_json::Value {
        json!({"driver": "gpu.example.com", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
               "nodeName": "node-1", "devices": [{"name": "gpu-0", "attributes": {
                   "model": {"string": "H100"}, "gpu.example.com/driverVersion": {"version": "550.54.15"}},
                   "capacity": {"memory": {"value": "80Gi"}}}]})
    }

    #[test]
    fn a_valid_slice_passes() {
        assert!(errs(base()).is_empty(), "{:?}", errs(base()));
    }

    #[test]
    fn node_selection_is_one_of_four() {
        let mut both = base();
        both["allNodes"] = json!(true);
        let e = errs(both);
        assert_eq!(e.len(), 1);
        assert!(e[0].1.starts_with("Invalid value: {`nodeName`, `allNodes`}: exactly one of"), "{e:?}");
        let mut none = base();
        none.as_object_mut().unwrap().remove("nodeName");
        assert!(errs(none)[0].1.starts_with("Required value: exactly one of `nodeName`"));
    }

    #[test]
    fn pool_counts() {
        let mut s = base();
        s["pool"] = json!({"name": "node-1", "generation": -1, "resourceSliceCount": 0});
        let fields: Vec<String> = errs(s).into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["spec.pool.resourceSliceCount", "spec.pool.generation"]);
    }

    #[test]
    fn attributes_have_one_valid_value() {
        let mut s = base();
        s["devices"][0]["attributes"] = json!({
            "model": {"string": "H100", "int": 3},
            "driverVersion": {"version": "v550"},
            "memory-gb": {"int": 80},
            "serial": {"string": "x".repeat(65)}
        });
        let e = errs(s);
        let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.devices[0].attributes[driverVersion].version",
                "spec.devices[0].attributes",
                "spec.devices[0].attributes[model]",
                "spec.devices[0].attributes[serial].string"
            ]
        );
    }

    #[test]
    fn taints_counters_and_bindings() {
        let mut s = base();
        s["devices"][0]["taints"] = json!([{"key": "example.com/broken", "effect": "PreferNoSchedule"}]);
        s["devices"][0]["bindingConditions"] = json!(["Ready"]);
        s["devices"][0]["consumesCounters"] = json!([{"counterSet": "", "counters": {}}]);
        let fields: Vec<String> = errs(s).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "spec.devices[0].taints[0].effect",
                "spec.devices[0].consumesCounters[0].counterSet",
                "spec.devices[0].consumesCounters[0].counters",
                "spec.devices[0].bindingFailureConditions"
            ]
        );
    }

    #[test]
    fn duplicate_devices_and_per_device_nodes() {
        let mut s = base();
        s["devices"] = json!([{"name": "a", "nodeName": "node-1"}, {"name": "a"}]);
        let fields: Vec<String> = errs(s).into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["spec.devices[0]", "spec.devices[1]"]);
    }
}
