//! ResourceSlices of the versions before resource.k8s.io/v1 (v1beta1, v1beta2, v1alpha3) → v1:
//! the `basic:` wrapper that v1beta1 and v1alpha3 put around a device's attributes, capacity,
//! counters, taints and node fields is removed and its fields are written in the device, as the
//! API server converts them. v1beta2 has the v1 shape: only the apiVersion changes.

use super::{Converted, Cx, Refuse, Res, Y, mapping, note, version_note};
use crate::check::{Obj, seq};

const V1: &str = "resource.k8s.io/v1";

/// The slice in resource.k8s.io/v1, or None when it is in that form already.
pub(super) fn resource_slice(o: &Obj<'_, '_>, cx: &Cx<'_>) -> Res<Option<Converted>> {
    let devices = seq(o.get("spec.devices"));
    let wrapped = devices.iter().any(|d| d.get("basic").is_some());
    if !wrapped && o.api_version == V1 {
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
    Ok(Some(vec![(y, version_note(o, V1).into_iter().collect())]))
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
}
