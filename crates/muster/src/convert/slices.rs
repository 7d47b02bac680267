//! ResourceSlices of the versions before resource.k8s.io/v1 (v1beta1, v1beta2, v1alpha3) → v1:
//! the `basic:` wrapper that v1beta1 and v1alpha3 put around a device's attributes, capacity,
//! counters, taints and node fields is removed and its fields are written in the device, as the
//! API server converts them. v1beta2 has the v1 shape: only the apiVersion changes. A device's
//! 1.36 `nodeAllocatableResourceMappings` becomes 1.37's `nodeAllocatableResources`, each entry a
//! `mapping` (see `muster_manifest::node_allocatable`).

use super::{Converted, Cx, Refuse, Res, Y, mapping, note, version_note};
use crate::check::{Obj, seq};

const V1: &str = "resource.k8s.io/v1";

/// The slice in resource.k8s.io/v1, or None when it is in that form already.
pub(super) fn resource_slice(o: &Obj<'_, '_>, cx: &Cx<'_>) -> Res<Option<Converted>> {
    let devices = seq(o.get("spec.devices"));
    let wrapped = devices.iter().any(|d| d.get("basic").is_some());
    let old_mappings = |d: &muster_manifest::yaml::Node<'_>| {
        let field = muster_manifest::node_allocatable::OLD_FIELD;
        d.get(field).is_some() || d.get("basic").is_some_and(|b| b.get(field).is_some())
    };
    let mappings = devices.iter().any(old_mappings);
    if !wrapped && !mappings && o.api_version == V1 {
        return Ok(None);
    }
    let mut y = cx.y(o.node);
    y.set("apiVersion", Y::plain(V1));
    if wrapped && let Some(Y::Seq(items)) = y.path_mut("spec.devices") {
        for (i, (item, node)) in items.iter_mut().zip(devices).enumerate() {
            let field = format!("spec.devices[{i}]");
            mapping(o, &field, Some(item), Some(node))?;
            unwrap_basic(o, &field, item, node)?;
        }
        y.comment_path(
            "spec",
            "devices",
            note("each device's basic: fields are written in the device (resource.k8s.io/v1 has no basic)"),
        );
    }
    if mappings && let Some(Y::Seq(items)) = y.path_mut("spec.devices") {
        for item in items.iter_mut() {
            node_allocatable(item);
        }
    }
    Ok(Some(vec![(y, version_note(o, V1).into_iter().collect())]))
}

/// `nodeAllocatableResourceMappings[r] = {capacityKey?, allocationMultiplier?}` (1.36) →
/// `nodeAllocatableResources[r] = {mapping: {capacityKey, capacityMultiplier} | {deviceMultiplier}}`
/// (1.37), the multiplier 1 where 1.36 defaulted it.
fn node_allocatable(device: &mut Y) {
    use muster_manifest::node_allocatable::{NEW_FIELD, OLD_FIELD};
    let Y::Map(entries) = device else { return };
    let Some(entry) = entries.iter_mut().find(|(k, _, _)| k == OLD_FIELD) else { return };
    entry.0 = NEW_FIELD.to_string();
    entry.2.push(note(format!(
        "{OLD_FIELD} (Kubernetes 1.36) became {NEW_FIELD}: each entry a mapping, allocationMultiplier its \
         capacityMultiplier (with capacityKey) or deviceMultiplier"
    )));
    let Y::Map(resources) = &mut entry.1 else { return };
    for (_, old, _) in resources.iter_mut() {
        let Y::Map(fields) = old else { continue };
        let multiplier =
            if fields.iter().any(|(k, _, _)| k == "capacityKey") { "capacityMultiplier" } else { "deviceMultiplier" };
        let mut inner = std::mem::take(fields);
        match inner.iter_mut().find(|(k, _, _)| k == "allocationMultiplier") {
            Some(m) => m.0 = multiplier.to_string(),
            None => inner.push((multiplier.to_string(), Y::plain("1"), Vec::new())),
        }
        *old = Y::Map(vec![("mapping".to_string(), Y::Map(inner), Vec::new())]);
    }
}

/// Writes the fields of `device.basic` in the device, where `basic` was.
fn unwrap_basic(o: &Obj<'_, '_>, field: &str, device: &mut Y, node: &muster_manifest::yaml::Node<'_>) -> Res<()> {
    let Y::Map(entries) = device else { return Ok(()) };
    let Some(at) = entries.iter().position(|(k, _, _)| k == "basic") else { return Ok(()) };
    let (_, basic, comments) = entries.remove(at);
    let basic_field = format!("{field}.basic");
    mapping(o, &basic_field, Some(&basic), node.get("basic"))?;
    let Y::Map(mut fields) = basic else { return Ok(()) };
    if let Some((k, _, _)) = fields.iter().find(|(k, _, _)| entries.iter().any(|(e, _, _)| e == k)) {
        return Err(Refuse {
            pos: node.get(k).map_or(node.pos, |n| n.pos),
            why: format!("{field}.{k}: written both in the device and in {basic_field}; cannot tell which one holds"),
        });
    }
    if let Some(first) = fields.first_mut() {
        first.2.splice(0..0, comments);
    }
    entries.splice(at..at, fields);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::convert_str;

    const HEAD: &str = "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceSlice\nmetadata: {name: s}\nspec:\n  \
                        driver: d.example\n  nodeName: n\n  pool: {name: n, generation: 1, resourceSliceCount: 1}\n  devices:\n";

    #[test]
    fn a_device_without_basic_fields_keeps_its_name() {
        let (out, refused) = convert_str(&format!("{HEAD}  - name: a\n    basic:\n  - name: b\n    basic: {{}}\n"));
        assert!(refused.is_empty(), "{refused:?}");
        assert!(out.contains("  devices:\n  - name: a\n  - name: b\n") && !out.contains("    basic"), "{out}");
    }

    #[test]
    fn a_field_written_twice_is_named_and_the_slice_kept() {
        let text = format!(
            "{HEAD}  - name: a\n    attributes: {{x: {{int: 1}}}}\n    basic: {{attributes: {{x: {{int: 2}}}}}}\n"
        );
        let (out, refused) = convert_str(&text);
        assert_eq!(out, text);
        assert_eq!(
            refused[0].why,
            "spec.devices[0].attributes: written both in the device and in spec.devices[0].basic; cannot tell which one holds"
        );
    }

    #[test]
    fn the_1_36_node_allocatable_mappings_become_the_1_37_form() {
        let text = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\nspec:\n  \
            driver: cpu.example.com\n  nodeName: n\n  pool: {name: n, generation: 1, resourceSliceCount: 1}\n  devices:\n  \
            - name: cores\n    capacity: {cpu.example.com/cores: {value: '64'}}\n    nodeAllocatableResourceMappings:\n      \
            cpu: {capacityKey: cpu.example.com/cores, allocationMultiplier: '2'}\n  - name: gpu\n    \
            nodeAllocatableResourceMappings:\n      memory: {}\n";
        let (out, refused) = convert_str(text);
        assert!(refused.is_empty(), "{refused:?}");
        assert!(!out.contains("nodeAllocatableResourceMappings:\n"), "{out}");
        assert!(out.contains("capacityMultiplier: '2'") || out.contains("capacityMultiplier: \"2\""), "{out}");
        assert!(out.contains("deviceMultiplier: 1"), "{out}");
        let m = muster_manifest::load_str("out.yaml", &out).expect("the 1.37 form loads");
        // Only the note that the (alpha) feature is read but not acted on; no 1.36 form left.
        assert!(m.warnings.iter().all(|w| w.message.contains("read but not acted on")), "{:?}", m.warnings);
        assert_eq!(convert_str(&out).0, out, "converting twice is converting once");
    }
}
