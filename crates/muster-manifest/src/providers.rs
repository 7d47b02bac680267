//! Objects of kinds muster does not read that make ResourceClaimTemplates at run time: a DRA
//! driver's controller creates the template when the object is created (NVIDIA's ComputeDomain
//! makes the template of its IMEX channels). A pod naming such a template waits for it rather
//! than failing, and messages name the object that will make it.

use crate::yaml::Node;

/// A ResourceClaimTemplate an object of the input will have made at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProvidedTemplate {
    pub namespace: String,
    pub name: String,
    /// `ComputeDomain ml/imex (NVIDIA's DRA driver, IMEX channels)`.
    pub by: String,
}

struct Provider {
    group: &'static str,
    kind: &'static str,
    /// Where the object names the template it makes.
    template_name: &'static [&'static str],
    who: &'static str,
}

const PROVIDERS: &[Provider] = &[Provider {
    group: "resource.nvidia.com",
    kind: "ComputeDomain",
    template_name: &["spec", "channel", "resourceClaimTemplate", "name"],
    who: "NVIDIA's DRA driver, IMEX channels",
}];

/// The template `node` (an object of `api_version`/`kind`) makes, if its kind is a known provider.
pub fn provided_template(api_version: &str, kind: &str, node: &Node<'_>) -> Option<ProvidedTemplate> {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    let p = PROVIDERS.iter().find(|p| p.group == group && p.kind == kind)?;
    let name = p.template_name.iter().try_fold(node, |n, k| n.get(k))?.as_str()?.to_string();
    let meta = node.get("metadata");
    let namespace = meta.and_then(|m| m.get("namespace")).and_then(Node::as_str).unwrap_or("default").to_string();
    let object = meta.and_then(|m| m.get("name")).and_then(Node::as_str).unwrap_or("<unnamed>");
    Some(ProvidedTemplate { by: format!("{kind} {namespace}/{object} ({})", p.who), namespace, name })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compute_domain_provides_its_channel_template() {
        let docs = crate::yaml::parse_stream(
            "apiVersion: resource.nvidia.com/v1beta1\nkind: ComputeDomain\nmetadata: {name: imex, namespace: ml}\nspec:\n  numNodes: 2\n  channel:\n    resourceClaimTemplate: {name: imex-channel}\n",
        )
        .unwrap();
        let p = provided_template("resource.nvidia.com/v1beta1", "ComputeDomain", &docs[0].root).unwrap();
        assert_eq!(
            p,
            ProvidedTemplate {
                namespace: "ml".into(),
                name: "imex-channel".into(),
                by: "ComputeDomain ml/imex (NVIDIA's DRA driver, IMEX channels)".into()
            }
        );
        assert_eq!(provided_template("example.com/v1", "ComputeDomain", &docs[0].root), None);
    }
}
