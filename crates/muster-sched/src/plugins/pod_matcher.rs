//! Which existing pods a topology spread constraint or a pod (anti-)affinity term counts: label
//! selectors as `labels.Selector` (compiled once, `matchLabelKeys`/`mismatchLabelKeys` merged
//! in), namespaces, and the count of matching pods on a node.
//!
//! A `namespaceSelector` is matched against the namespace's labels as the input's Namespace
//! objects give them ([`Cluster::namespace_labels`], which holds the name label the API server
//! adds); a namespace the input does not list carries only that label,
//! `kubernetes.io/metadata.name: <name>`. A selector of `{}` selects every namespace.

use muster_api::PodObject;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::cluster::{Cluster, NodeInfo};

/// The label every namespace carries (set by the API server).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A Namespace's labels as the API server holds them: its own, with the name label set to its
/// name (the server overwrites whatever was written there).
pub fn namespace_labels(name: &str, own: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    let mut labels = own.cloned().unwrap_or_default();
    labels.insert(NAMESPACE_NAME_LABEL.to_string(), name.to_string());
    labels
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// `labels.Selector`: `Nothing` (a nil `LabelSelector`) or every requirement (none: everything).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Selector {
    Nothing,
    Requirements(Vec<Requirement>),
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// A pod's labels (none when unset).
pub fn pod_labels(pod: &dyn PodObject) -> &BTreeMap<String, String> {
    pod.meta().labels.as_ref().unwrap_or(&NO_LABELS)
}

impl Selector {
    /// `LabelSelectorAsSelector`: nil is Nothing, `{}` everything; an unknown operator (the
    /// API server rejects it) selects nothing.
    pub fn from_label_selector(sel: Option<&LabelSelector>) -> Selector {
        let Some(sel) = sel else { return Selector::Nothing };
        let mut reqs: Vec<Requirement> = sel
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement { key: k.clone(), operator: Operator::In, values: vec![v.clone()] })
            .collect();
        for e in sel.match_expressions.iter().flatten() {
            let operator = match e.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                _ => return Selector::Nothing,
            };
            let mut values = e.values.clone().unwrap_or_default();
            values.sort();
            reqs.push(Requirement { key: e.key.clone(), operator, values });
        }
        Selector::Requirements(reqs)
    }

    /// Adds requirements (`matchLabelKeys` merged into the selector). A Nothing selector with
    /// added requirements selects by them alone, as `mergeLabelSetWithSelector` does.
    pub fn with(self, extra: Vec<Requirement>) -> Selector {
        if extra.is_empty() {
            return self;
        }
        match self {
            Selector::Nothing => Selector::Requirements(extra),
            Selector::Requirements(mut r) => {
                r.extend(extra);
                Selector::Requirements(r)
            }
        }
    }

    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::Requirements(r) => r.iter().all(|r| r.matches(labels)),
        }
    }

    pub fn matches(&self, pod: &dyn PodObject) -> bool {
        self.matches_labels(pod_labels(pod))
    }
}

/// `matchLabelKeys` (`In` the pod's value) or `mismatchLabelKeys` (`NotIn`): requirements for
/// the keys the pod has a label for.
pub fn label_key_requirements(
    keys: &[String],
    labels: &BTreeMap<String, String>,
    operator: Operator,
) -> Vec<Requirement> {
    keys.iter()
        .filter_map(|k| labels.get(k).map(|v| Requirement { key: k.clone(), operator, values: vec![v.clone()] }))
        .collect()
}

/// Which namespaces a term or constraint looks at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Namespaces {
    /// One namespace (a spread constraint: the pod's own).
    One(String),
    /// An affinity term's `namespaces` and `namespaceSelector` (ORed; the selector Nothing
    /// when unset).
    Terms { names: Vec<String>, selector: Selector },
}

impl Namespaces {
    /// Whether `namespace` is one of these; `labels` gives a namespace's labels when the input
    /// lists it (asked only for a selector that reads labels).
    pub fn matches<'l>(&self, namespace: &str, labels: impl FnOnce() -> Option<&'l BTreeMap<String, String>>) -> bool {
        match self {
            Namespaces::One(ns) => ns == namespace,
            Namespaces::Terms { names, selector } => {
                names.iter().any(|n| n == namespace) || selector_matches_namespace(selector, namespace, labels)
            }
        }
    }
}

/// A namespace selector against a namespace's labels (see the module docs).
fn selector_matches_namespace<'l>(
    selector: &Selector,
    namespace: &str,
    labels: impl FnOnce() -> Option<&'l BTreeMap<String, String>>,
) -> bool {
    match selector {
        Selector::Requirements(r) if r.is_empty() => true,
        Selector::Requirements(_) => match labels() {
            Some(listed) => selector.matches_labels(listed),
            None => {
                let labels = BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), namespace.to_string())]);
                selector.matches_labels(&labels)
            }
        },
        _ => false,
    }
}

/// Existing pods a constraint or term counts: namespace and selector; the conjunction of
/// several for an affinity's "matches all terms".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodMatcher {
    pub all: Vec<(Namespaces, Selector)>,
    /// Terminating pods (with a `deletionTimestamp`) are not counted (PodTopologySpread).
    pub skip_terminating: bool,
}

impl PodMatcher {
    pub fn matches(&self, pod: &dyn PodObject, cluster: &Cluster) -> bool {
        if self.skip_terminating && pod.meta().deletion_timestamp.is_some() {
            return false;
        }
        let ns = pod.meta().namespace.as_deref().unwrap_or("default");
        self.all.iter().all(|(n, s)| n.matches(ns, || cluster.namespace_labels.get(ns)) && s.matches(pod))
    }

    /// A stable fingerprint, the key of the per-node count memo.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        self.hash(&mut h);
        h.finish()
    }

    /// How many pods on the node match.
    pub fn count_on(&self, node: &NodeInfo, cluster: &Cluster) -> u32 {
        node.detail.pods.iter().filter(|p| self.matches(&cluster.pod(**p).pod, cluster)).count() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selector(v: serde_json::Value) -> Selector {
        Selector::from_label_selector(Some(&serde_json::from_value(v).unwrap()))
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn nil_selects_nothing_and_empty_everything() {
        assert!(!Selector::from_label_selector(None).matches_labels(&labels(&[("a", "b")])));
        assert!(selector(json!({})).matches_labels(&labels(&[])));
    }

    #[test]
    fn match_label_keys_merge_into_nil_selector() {
        let s =
            Selector::Nothing.with(label_key_requirements(&["app".into()], &labels(&[("app", "web")]), Operator::In));
        assert!(s.matches_labels(&labels(&[("app", "web")])));
        assert!(!s.matches_labels(&labels(&[("app", "db")])));
    }

    #[test]
    fn expressions() {
        let s = selector(
            json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}, {"key": "app", "operator": "Exists"}]}),
        );
        assert!(s.matches_labels(&labels(&[("app", "x")])));
        assert!(!s.matches_labels(&labels(&[("app", "x"), ("tier", "db")])));
        assert!(!s.matches_labels(&labels(&[("tier", "web")])));
    }

    #[test]
    fn namespace_selector_sees_only_the_name_label() {
        let any = Namespaces::Terms { names: vec![], selector: selector(json!({})) };
        assert!(any.matches("team-a", || None));
        let by_name = Namespaces::Terms {
            names: vec![],
            selector: selector(json!({"matchLabels": {NAMESPACE_NAME_LABEL: "team-a"}})),
        };
        assert!(by_name.matches("team-a", || None) && !by_name.matches("team-b", || None));
        let other =
            Namespaces::Terms { names: vec!["x".into()], selector: selector(json!({"matchLabels": {"env": "prod"}})) };
        assert!(other.matches("x", || None) && !other.matches("team-a", || None));
        let prod = labels(&[("env", "prod"), (NAMESPACE_NAME_LABEL, "team-a")]);
        assert!(other.matches("team-a", || Some(&prod)), "a listed namespace's own labels are read");
    }
}
