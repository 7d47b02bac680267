//! The 1.36 form of DRA node-allocatable resources (KEP 5517, alpha, gate
//! `DRANodeAllocatableResources`): a device's `nodeAllocatableResourceMappings[resource] =
//! {capacityKey?, allocationMultiplier?}`. 1.37 renamed it `nodeAllocatableResources` and split
//! each entry into `mapping` (the device models the resource itself) and `overhead` (per pod or
//! container); the 1.36 entry is a mapping: `{capacityKey, capacityMultiplier}` when it names a
//! capacity, else `{deviceMultiplier}`, the multiplier defaulting to 1 as 1.36 defaulted it.
//!
//! The loader rewrites such a device before the strict decode (every other field is still checked
//! where it was written) and reports each rewrite with a warning that names the 1.37 form, as the
//! beta API versions are reported: nothing is refused, nothing changes silently.

use std::borrow::Cow;

use crate::yaml::{Node, Pos, Value};

/// The 1.36 field.
pub const OLD_FIELD: &str = "nodeAllocatableResourceMappings";
/// The 1.37 field.
pub const NEW_FIELD: &str = "nodeAllocatableResources";

/// One device rewritten: its field path and where the 1.36 field was.
pub struct Rewritten {
    pub field: String,
    pub pos: Pos,
}

/// `node` with every device's 1.36 field in the 1.37 form, and what was rewritten; `None` when
/// the object is not a ResourceSlice or has no device in the 1.36 form.
pub fn rewrite<'a>(kind: &str, node: &Node<'a>) -> Option<(Node<'a>, Vec<Rewritten>)> {
    if kind != "ResourceSlice" {
        return None;
    }
    let Value::Seq(devices) = &node.get("spec")?.get("devices")?.value else { return None };
    let old = |d: &Node<'_>| d.get(OLD_FIELD).is_some() || d.get("basic").is_some_and(|b| b.get(OLD_FIELD).is_some());
    if !devices.iter().any(old) {
        return None;
    }
    let mut node = node.clone();
    let mut done = Vec::new();
    let spec = entry_mut(&mut node, "spec")?;
    let Value::Seq(devices) = &mut entry_mut(spec, "devices")?.value else { return None };
    for (i, device) in devices.iter_mut().enumerate() {
        // v1beta1 keeps a device's fields under `basic`.
        let (device, path) = match entry_mut(device, "basic") {
            Some(basic) => (basic, format!("spec.devices[{i}].basic")),
            None => (device, format!("spec.devices[{i}]")),
        };
        if let Some(pos) = rename(device) {
            done.push(Rewritten { field: format!("{path}.{OLD_FIELD}"), pos });
        }
    }
    Some((node, done))
}

/// The warning for one rewritten device.
pub fn warning() -> String {
    format!(
        "the Kubernetes 1.36 form of node-allocatable resources (alpha, gate DRANodeAllocatableResources); read \
         as 1.37's `{NEW_FIELD}`, each entry a `mapping` ({{capacityKey, capacityMultiplier}} or \
         {{deviceMultiplier}}); muster does not count node-allocatable resources against a node's allocatable"
    )
}

/// Devices already in the 1.37 form: each field path and position (the feature is read but not
/// acted on, which the loader says once per slice).
pub fn in_1_37_form(kind: &str, node: &Node<'_>) -> Vec<Rewritten> {
    let devices = match node.get("spec").and_then(|s| s.get("devices")).map(|d| &d.value) {
        Some(Value::Seq(devices)) if kind == "ResourceSlice" => devices,
        _ => return Vec::new(),
    };
    let key_pos = |d: &Node<'_>| match &d.value {
        Value::Map(entries) => entries.iter().find(|(k, _)| k.as_str() == Some(NEW_FIELD)).map(|(k, _)| k.pos),
        _ => None,
    };
    devices
        .iter()
        .enumerate()
        .filter_map(|(i, d)| key_pos(d).map(|pos| Rewritten { field: format!("spec.devices[{i}].{NEW_FIELD}"), pos }))
        .collect()
}

/// The warning for a device in the 1.37 form.
pub fn unacted() -> String {
    "node-allocatable resources (alpha, gate DRANodeAllocatableResources, off by default in 1.37) are read but \
     not acted on: muster does not count them against a node's allocatable"
        .to_string()
}

fn entry_mut<'n, 'a>(node: &'n mut Node<'a>, key: &str) -> Option<&'n mut Node<'a>> {
    match &mut node.value {
        Value::Map(entries) => entries.iter_mut().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v),
        _ => None,
    }
}

fn scalar<'a>(text: &str, pos: Pos) -> Node<'a> {
    Node { pos, value: Value::Scalar { text: Cow::Owned(text.to_string()), plain: false } }
}

/// Renames the device's 1.36 field and reshapes each entry; the position of the old key.
fn rename(device: &mut Node<'_>) -> Option<Pos> {
    let Value::Map(entries) = &mut device.value else { return None };
    let (key, value) = entries.iter_mut().find(|(k, _)| k.as_str() == Some(OLD_FIELD))?;
    let pos = key.pos;
    *key = scalar(NEW_FIELD, key.pos);
    if let Value::Map(resources) = &mut value.value {
        for (_, mapping) in resources.iter_mut() {
            *mapping = reshape(mapping);
        }
    }
    Some(pos)
}

/// `{capacityKey?, allocationMultiplier?}` → `{mapping: {...}}`; other keys are kept inside
/// `mapping`, where the strict decode names them.
fn reshape<'a>(old: &Node<'a>) -> Node<'a> {
    let Value::Map(fields) = &old.value else { return old.clone() };
    let has_key = fields.iter().any(|(k, _)| k.as_str() == Some("capacityKey"));
    let multiplier = if has_key { "capacityMultiplier" } else { "deviceMultiplier" };
    let mut inner: Vec<(Node<'a>, Node<'a>)> = fields
        .iter()
        .map(|(k, v)| match k.as_str() {
            Some("allocationMultiplier") => (scalar(multiplier, k.pos), v.clone()),
            _ => (k.clone(), v.clone()),
        })
        .collect();
    if !fields.iter().any(|(k, _)| k.as_str() == Some("allocationMultiplier")) {
        inner.push((scalar(multiplier, old.pos), scalar("1", old.pos)));
    }
    let mapping = Node { pos: old.pos, value: Value::Map(inner) };
    Node { pos: old.pos, value: Value::Map(vec![(scalar("mapping", old.pos), mapping)]) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::ResourceSlice;

    const SLICE: &str = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\nspec:\n  \
        driver: cpu.example.com\n  nodeName: n\n  pool: {name: n, generation: 1, resourceSliceCount: 1}\n  devices:\n  \
        - name: cores\n    capacity: {cpu.example.com/cores: {value: '64'}}\n    nodeAllocatableResourceMappings:\n      \
        cpu: {capacityKey: cpu.example.com/cores, allocationMultiplier: '2'}\n  - name: gpu\n    \
        nodeAllocatableResourceMappings:\n      memory: {allocationMultiplier: 2Gi}\n  - name: plain\n";

    #[test]
    fn the_1_36_mappings_become_1_37_mappings() {
        let docs = crate::yaml::parse_stream(SLICE).unwrap();
        let (node, done) = rewrite("ResourceSlice", &docs[0].root).expect("rewritten");
        let fields: Vec<&str> = done.iter().map(|r| r.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.devices[0].nodeAllocatableResourceMappings", "spec.devices[1].nodeAllocatableResourceMappings"]
        );
        assert_eq!(done[0].pos.line, 11);
        let slice: ResourceSlice = crate::de::from_node(&node).expect("strict decode");
        let devices = slice.spec.devices.unwrap();
        let cpu = &devices[0].node_allocatable_resources.as_ref().unwrap()["cpu"];
        let m = cpu.mapping.as_ref().unwrap();
        assert_eq!(m.capacity_key.as_deref(), Some("cpu.example.com/cores"));
        assert_eq!(m.capacity_multiplier.as_ref().map(|q| q.0.as_str()), Some("2"));
        let memory = devices[1].node_allocatable_resources.as_ref().unwrap()["memory"].mapping.as_ref().unwrap();
        assert_eq!(memory.device_multiplier.as_ref().map(|q| q.0.as_str()), Some("2Gi"));
        assert!(devices[2].node_allocatable_resources.is_none());
    }

    #[test]
    fn slices_in_the_1_37_form_are_left_alone() {
        let text = SLICE.replace(OLD_FIELD, "x");
        let docs = crate::yaml::parse_stream(&text).unwrap();
        assert!(rewrite("ResourceSlice", &docs[0].root).is_none());
        assert!(rewrite("Pod", &docs[0].root).is_none());
    }
}
