//! Node selection: `spec.nodeSelector`, node affinity terms and their operators
//! (`k8s.io/component-helpers/scheduling/corev1/nodeaffinity`); and metav1 label selectors
//! (`LabelSelectorAsSelector`), as PodDisruptionBudgets use them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// What a node exposes to selection: its labels and its name (for `matchFields` on `metadata.name`).
#[derive(Clone, Copy)]
pub struct NodeView<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// A metav1 `LabelSelector`: every `matchLabels` pair and every `matchExpressions` requirement
/// (`In`, `NotIn`, `Exists`, `DoesNotExist`) holds. The empty selector matches everything; an
/// unknown operator matches nothing (the API server rejects it).
pub fn label_selector_matches(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    labels: &BTreeMap<String, String>,
) -> bool {
    let pairs = sel.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    pairs
        && sel.match_expressions.iter().flatten().all(|r| {
            let value = labels.get(&r.key);
            let values = r.values.as_deref().unwrap_or(&[]);
            match r.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

/// A `spec.nodeSelector` map matches when every pair is a node label.
pub fn node_selector_map_matches(selector: &BTreeMap<String, String>, node: NodeView<'_>) -> bool {
    selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
}

/// Required node affinity: the terms are ORed. A selector without terms matches nothing.
pub fn node_selector_matches(sel: &NodeSelector, node: NodeView<'_>) -> bool {
    sel.node_selector_terms.iter().any(|t| term_matches(t, node))
}

/// One term: all expressions and all fields must match. A term with neither matches nothing.
pub fn term_matches(term: &NodeSelectorTerm, node: NodeView<'_>) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs.iter().all(|r| requirement_matches(r, node.labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            // Only `metadata.name` is a valid field key; anything else never matches.
            r.key == "metadata.name" && requirement_matches(r, Some(node.name))
        })
}

/// One requirement against a label (or field) value that may be absent.
pub fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or(&[]);
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value, values) else { return false };
            match (v.parse::<i64>(), bound.parse::<i64>()) {
                (Ok(v), Ok(b)) => {
                    if r.operator == "Gt" {
                        v > b
                    } else {
                        v < b
                    }
                }
                _ => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn operators() {
        assert!(requirement_matches(&req("z", "In", &["a", "b"]), Some("b")));
        assert!(!requirement_matches(&req("z", "In", &["a"]), None));
        assert!(requirement_matches(&req("z", "NotIn", &["a"]), None), "NotIn matches absent labels");
        assert!(!requirement_matches(&req("z", "NotIn", &["a"]), Some("a")));
        assert!(requirement_matches(&req("z", "Exists", &[]), Some("")));
        assert!(requirement_matches(&req("z", "DoesNotExist", &[]), None));
        assert!(requirement_matches(&req("gpus", "Gt", &["4"]), Some("8")));
        assert!(!requirement_matches(&req("gpus", "Gt", &["8"]), Some("8")));
        assert!(requirement_matches(&req("gpus", "Lt", &["8"]), Some("4")));
        assert!(!requirement_matches(&req("gpus", "Lt", &["8"]), Some("four")));
        assert!(!requirement_matches(&req("z", "Bogus", &[]), Some("a")));
    }

    #[test]
    fn terms_are_ored_requirements_anded() {
        let l = labels(&[("zone", "a"), ("gpu", "h100")]);
        let node = NodeView { name: "n1", labels: &l };
        let term =
            |rs: Vec<NodeSelectorRequirement>| NodeSelectorTerm { match_expressions: Some(rs), match_fields: None };
        let sel = NodeSelector {
            node_selector_terms: vec![
                term(vec![req("zone", "In", &["b"])]),
                term(vec![req("zone", "In", &["a"]), req("gpu", "Exists", &[])]),
            ],
        };
        assert!(node_selector_matches(&sel, node));
        let sel = NodeSelector {
            node_selector_terms: vec![term(vec![req("zone", "In", &["a"]), req("gpu", "In", &["a100"])])],
        };
        assert!(!node_selector_matches(&sel, node));
        assert!(
            !node_selector_matches(&NodeSelector { node_selector_terms: vec![NodeSelectorTerm::default()] }, node),
            "an empty term matches nothing"
        );
    }

    #[test]
    fn match_fields_on_metadata_name() {
        let l = labels(&[]);
        let node = NodeView { name: "gpu-7", labels: &l };
        let t = NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![req("metadata.name", "In", &["gpu-7"])]),
        };
        assert!(term_matches(&t, node));
        let t = NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![req("metadata.labels", "In", &["gpu-7"])]),
        };
        assert!(!term_matches(&t, node));
    }

    #[test]
    fn label_selectors() {
        let sel: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
            serde_json::from_value(serde_json::json!({"matchLabels": {"app": "db"}, "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"}]}))
            .unwrap();
        let labels = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert!(label_selector_matches(&sel, &labels(&[("app", "db"), ("tier", "a")])));
        assert!(!label_selector_matches(&sel, &labels(&[("app", "db"), ("tier", "c")])));
        assert!(!label_selector_matches(&sel, &labels(&[("app", "db"), ("tier", "a"), ("canary", "1")])));
        assert!(!label_selector_matches(&sel, &labels(&[("tier", "a")])));
        assert!(label_selector_matches(&Default::default(), &labels(&[])), "the empty selector matches all");
    }

    #[test]
    fn node_selector_map() {
        let l = labels(&[("zone", "a")]);
        let node = NodeView { name: "n", labels: &l };
        assert!(node_selector_map_matches(&labels(&[("zone", "a")]), node));
        assert!(!node_selector_map_matches(&labels(&[("zone", "b")]), node));
        assert!(node_selector_map_matches(&labels(&[]), node));
    }
}
