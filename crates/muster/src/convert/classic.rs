//! Classic DRA (resource.k8s.io/v1alpha2, Kubernetes 1.26–1.30): what `convert` refuses, and the
//! one part it converts.
//!
//! A classic claim names a ResourceClass (`resourceClassName`) and driver parameters
//! (`parametersRef`) that the driver, not the scheduler, turned into an allocation. Nothing in the
//! object says which devices that was, so no 1.37 claim (device requests that the scheduler
//! allocates with CEL selectors) means the same: such objects are kept as written and named with
//! the reason. A pod's `resourceClaims[].source.{resourceClaimName, resourceClaimTemplateName}`
//! is only a wrapper, which 1.31 removed: its fields are written in the entry, as they mean the same.

use super::{Refuse, Res, Y, mapping, note};
use crate::check::{Obj, seq};

const V1ALPHA2: &str = "resource.k8s.io/v1alpha2";

/// An error when `o` is a classic DRA object, saying why it cannot be converted.
pub(super) fn refuse(o: &Obj<'_, '_>) -> Res<()> {
    let why = if o.api_version == V1ALPHA2 { Some(alpha2_reason(&o.kind)) } else { claim_reason(o) };
    match why {
        None => Ok(()),
        Some(why) => Err(Refuse { pos: o.node.get("apiVersion").map_or(o.node.pos, |n| n.pos), why }),
    }
}

fn alpha2_reason(kind: &str) -> String {
    let what = match kind {
        "ResourceClass" => {
            "a ResourceClass hands claims to its driver, which allocates them with parameters muster cannot read; \
             write a resource.k8s.io/v1 DeviceClass whose CEL selectors pick the driver's devices"
        }
        "ResourceClaim" | "ResourceClaimTemplate" => {
            "a classic claim asks its ResourceClass's driver to allocate (resourceClassName, parametersRef); \
             nothing in it says which devices that means: write spec.devices.requests (deviceClassName, count, \
             selectors) by hand"
        }
        "ResourceClaimParameters" | "ResourceClassParameters" => {
            "driver parameters have no resource.k8s.io/v1 object; a claim's or class's config.opaque carries them"
        }
        "PodSchedulingContext" => "the scheduler negotiates with no driver in 1.37; delete it",
        "ResourceSlice" => {
            "its namedResources form (1.30) has no faithful v1 form here; let the driver publish v1 slices"
        }
        _ => "Kubernetes 1.37 serves nothing of that version",
    };
    format!("{V1ALPHA2} {kind} is classic DRA (Kubernetes 1.26-1.30), which 1.37 removed; {what}")
}

/// Why a claim or template of another version carries classic fields, if it does.
fn claim_reason(o: &Obj<'_, '_>) -> Option<String> {
    let spec = match o.kind.as_str() {
        "ResourceClaim" => "spec",
        "ResourceClaimTemplate" => "spec.spec",
        _ => return None,
    };
    let s = o.get(spec)?;
    let classic_mode = s
        .get("allocationMode")
        .and_then(|m| m.as_str())
        .is_some_and(|m| matches!(m, "WaitForFirstConsumer" | "Immediate") && s.get("deviceClassName").is_none());
    let fields: Vec<&str> = ["resourceClassName", "parametersRef"].into_iter().filter(|f| s.get(f).is_some()).collect();
    if fields.is_empty() && !classic_mode {
        return None;
    }
    let named = if fields.is_empty() { "allocationMode".to_string() } else { fields.join(" and ") };
    Some(format!(
        "{spec}.{named}: classic DRA (Kubernetes 1.26-1.30), which 1.37 removed: the class's driver allocated the \
         claim with parameters muster cannot read, so no device request means the same; write \
         {spec}.devices.requests (deviceClassName, count, selectors) by hand"
    ))
}

/// Does the pod spec at `spec_path` name a claim through `source`?
pub(super) fn has_claim_sources(o: &Obj<'_, '_>, spec_path: &str) -> bool {
    seq(o.get(&format!("{spec_path}.resourceClaims"))).iter().any(|n| n.get("source").is_some())
}

/// Writes the fields of each `resourceClaims[].source` of the pod spec at `spec_path` in the
/// entry itself; true when there was one.
pub(super) fn flatten_claim_sources(o: &Obj<'_, '_>, y: &mut Y, spec_path: &str) -> Res<bool> {
    if !has_claim_sources(o, spec_path) {
        return Ok(false);
    }
    let field = format!("{spec_path}.resourceClaims");
    let nodes = seq(o.get(&field));
    let Some(Y::Seq(items)) = y.path_mut(&field) else { return Ok(false) };
    for (i, (item, node)) in items.iter_mut().zip(nodes).enumerate() {
        let Y::Map(entries) = item else { continue };
        let Some(at) = entries.iter().position(|(k, _, _)| k == "source") else { continue };
        let (_, source, mut comments) = entries.remove(at);
        let source_field = format!("{field}[{i}].source");
        mapping(o, &source_field, Some(&source), node.get("source"))?;
        let Y::Map(mut fields) = source else { continue };
        if let Some((k, _, _)) = fields.iter().find(|(k, _, _)| entries.iter().any(|(e, _, _)| e == k)) {
            return Err(Refuse {
                pos: node.pos,
                why: format!("{field}[{i}].{k}: written both in the entry and in {source_field}"),
            });
        }
        comments.push(note(format!(
            "{source_field}'s fields are written in the entry (Kubernetes 1.31 removed source; same meaning)"
        )));
        if let Some(first) = fields.first_mut() {
            first.2.splice(0..0, comments);
        }
        entries.splice(at..at, fields);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::super::convert_str;

    #[test]
    fn every_classic_kind_is_named_with_why() {
        for kind in
            ["ResourceClass", "ResourceClaimParameters", "PodSchedulingContext", "ResourceSlice", "ResourceClaim"]
        {
            let text = format!("apiVersion: resource.k8s.io/v1alpha2\nkind: {kind}\nmetadata: {{name: x}}\n");
            let (out, refused) = convert_str(&text);
            assert_eq!(out, text);
            assert!(
                refused[0].why.starts_with(&format!("resource.k8s.io/v1alpha2 {kind} is classic DRA")),
                "{refused:?}"
            );
        }
        let template = "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\nspec:\n  spec:\n    \
                        parametersRef: {kind: P, name: p}\n";
        let (_, refused) = convert_str(template);
        assert!(refused[0].why.starts_with("spec.spec.parametersRef: classic DRA"), "{refused:?}");
    }

    #[test]
    fn a_pod_templates_claim_source_is_moved_into_the_entry() {
        let text = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      \
                    resourceClaims:\n      - name: c\n        source: {resourceClaimName: shared}\n      containers: [{name: c, image: i}]\n      \
                    restartPolicy: Never\n";
        let (out, _) = convert_str(text);
        assert!(
            out.contains(
                "      - name: c\n        # muster convert: spec.template.spec.resourceClaims[0].source's fields"
            ),
            "{out}"
        );
        assert!(out.contains("        resourceClaimName: shared\n") && !out.contains("source:"), "{out}");
        let both = text.replace("source:", "resourceClaimName: other\n        source:");
        let (out, refused) = convert_str(&both);
        assert_eq!(out, both);
        assert!(
            refused[0].why.contains("written both in the entry and in spec.template.spec.resourceClaims[0].source"),
            "{refused:?}"
        );
    }
}
