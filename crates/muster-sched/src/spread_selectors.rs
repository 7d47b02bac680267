//! The selectors PodTopologySpread's default constraints are built from (upstream's
//! `helper.DefaultSelector`): each Service, ReplicationController, ReplicaSet and StatefulSet of
//! the cluster kept as its kind, namespace, name and selector only, indexed by namespace.
//!
//! A pod's default selector is every selector of a Service in its namespace that selects it
//! (their label maps merged into one set), then the selector of its controller (the owner
//! reference with `controller: true`) when that is a `v1` ReplicationController (its map merged
//! into the set) or an `apps/v1` ReplicaSet or StatefulSet (its `LabelSelector`'s requirements
//! added), looked up by name in the pod's namespace. A controller the cluster does not hold adds
//! nothing; nor does one whose selector is unset or not valid. An empty default selector means
//! no default constraint for the pod.

use muster_api::PodObject;
use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::plugins::pod_matcher::{Operator, Requirement, Selector, pod_labels};

/// The kinds whose selectors the default constraints read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpreadSelectorKind {
    Service,
    ReplicationController,
    ReplicaSet,
    StatefulSet,
}

impl SpreadSelectorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SpreadSelectorKind::Service => "Service",
            SpreadSelectorKind::ReplicationController => "ReplicationController",
            SpreadSelectorKind::ReplicaSet => "ReplicaSet",
            SpreadSelectorKind::StatefulSet => "StatefulSet",
        }
    }

    /// The controller kind an owner reference names (by its group/version and kind, as
    /// upstream compares them), if it is one whose selector counts.
    fn of_owner(api_version: &str, kind: &str) -> Option<SpreadSelectorKind> {
        match (api_version, kind) {
            ("v1", "ReplicationController") => Some(SpreadSelectorKind::ReplicationController),
            ("apps/v1", "ReplicaSet") => Some(SpreadSelectorKind::ReplicaSet),
            ("apps/v1", "StatefulSet") => Some(SpreadSelectorKind::StatefulSet),
            _ => None,
        }
    }
}

/// An object's selector, as the default selector reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectSelector {
    /// A Service's or ReplicationController's `spec.selector` (`None`: unset, selects nothing).
    Labels(Option<BTreeMap<String, String>>),
    /// A ReplicaSet's or StatefulSet's `spec.selector`, parsed.
    LabelSelector(Selector),
}

/// What the store keeps of one Service, ReplicationController, ReplicaSet or StatefulSet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpreadSelector {
    pub kind: SpreadSelectorKind,
    pub namespace: String,
    pub name: String,
    pub selector: ObjectSelector,
}

fn namespace_and_name(meta: &ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_else(|| "default".into()), meta.name.clone().unwrap_or_default())
}

impl SpreadSelector {
    fn new(kind: SpreadSelectorKind, meta: &ObjectMeta, selector: ObjectSelector) -> SpreadSelector {
        let (namespace, name) = namespace_and_name(meta);
        SpreadSelector { kind, namespace, name, selector }
    }

    fn parsed(kind: SpreadSelectorKind, meta: &ObjectMeta, selector: Option<&LabelSelector>) -> SpreadSelector {
        Self::new(kind, meta, ObjectSelector::LabelSelector(Selector::from_label_selector(selector)))
    }

    pub fn service(s: &Service) -> SpreadSelector {
        let selector = s.spec.as_ref().and_then(|s| s.selector.clone());
        Self::new(SpreadSelectorKind::Service, &s.metadata, ObjectSelector::Labels(selector))
    }

    pub fn replication_controller(rc: &ReplicationController) -> SpreadSelector {
        let selector = rc.spec.as_ref().and_then(|s| s.selector.clone());
        Self::new(SpreadSelectorKind::ReplicationController, &rc.metadata, ObjectSelector::Labels(selector))
    }

    pub fn replica_set(rs: &ReplicaSet) -> SpreadSelector {
        Self::parsed(SpreadSelectorKind::ReplicaSet, &rs.metadata, Some(&rs.spec.selector))
    }

    pub fn stateful_set(ss: &StatefulSet) -> SpreadSelector {
        Self::parsed(SpreadSelectorKind::StatefulSet, &ss.metadata, Some(&ss.spec.selector))
    }
}

/// The selectors of one namespace.
#[derive(Clone, Debug, Default)]
struct NamespaceSelectors {
    /// Services with a selector, by name (one without selects no pod and is not kept).
    services: BTreeMap<String, BTreeMap<String, String>>,
    /// ReplicationControllers, ReplicaSets and StatefulSets, by kind and name.
    controllers: HashMap<(SpreadSelectorKind, String), ObjectSelector>,
}

impl NamespaceSelectors {
    fn is_empty(&self) -> bool {
        self.services.is_empty() && self.controllers.is_empty()
    }
}

/// Every Service's, ReplicationController's, ReplicaSet's and StatefulSet's selector, by
/// namespace ([`crate::Cluster::spread_selectors`]).
#[derive(Clone, Debug, Default)]
pub struct SpreadSelectors {
    by_namespace: HashMap<String, NamespaceSelectors>,
}

impl SpreadSelectors {
    /// Adds the object, or replaces the one of that kind and `namespace/name`.
    pub fn upsert(&mut self, s: SpreadSelector) {
        self.delete(s.kind, &format!("{}/{}", s.namespace, s.name));
        let ns = self.by_namespace.entry(s.namespace).or_default();
        match (s.kind, s.selector) {
            (SpreadSelectorKind::Service, ObjectSelector::Labels(Some(map))) => {
                ns.services.insert(s.name, map);
            }
            (SpreadSelectorKind::Service, _) => {}
            (kind, selector) => {
                ns.controllers.insert((kind, s.name), selector);
            }
        }
    }

    /// Removes the object of that kind and `namespace/name`, if held.
    pub fn delete(&mut self, kind: SpreadSelectorKind, key: &str) {
        let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
        let Some(ns) = self.by_namespace.get_mut(namespace) else { return };
        match kind {
            SpreadSelectorKind::Service => {
                ns.services.remove(name);
            }
            kind => {
                ns.controllers.remove(&(kind, name.to_string()));
            }
        }
        if ns.is_empty() {
            self.by_namespace.remove(namespace);
        }
    }

    /// The pod's default selector's requirements (see the module docs); empty when nothing
    /// selects the pod, at once when its namespace holds none of these objects.
    pub fn default_selector(&self, pod: &dyn PodObject) -> Vec<Requirement> {
        let namespace = pod.meta().namespace.as_deref().unwrap_or("default");
        let Some(ns) = self.by_namespace.get(namespace) else { return Vec::new() };
        let labels = pod_labels(pod);
        let mut set: BTreeMap<&str, &str> = BTreeMap::new();
        for selector in ns.services.values() {
            if selector.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                set.extend(selector.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            }
        }
        let mut added: &[Requirement] = &[];
        match controller_selector(ns, pod) {
            Some(ObjectSelector::Labels(Some(map))) => set.extend(map.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
            Some(ObjectSelector::LabelSelector(Selector::Requirements(r))) => added = r,
            _ => {}
        }
        let mut out: Vec<Requirement> = set
            .into_iter()
            .map(|(k, v)| Requirement { key: k.to_string(), operator: Operator::In, values: vec![v.to_string()] })
            .collect();
        out.extend(added.iter().cloned());
        out
    }
}

/// The selector of the pod's controller, when it is a kind that counts and the namespace holds it.
fn controller_selector<'s>(ns: &'s NamespaceSelectors, pod: &dyn PodObject) -> Option<&'s ObjectSelector> {
    if ns.controllers.is_empty() {
        return None;
    }
    let owner = pod.meta().owner_references.as_deref()?.iter().find(|o| o.controller == Some(true))?;
    let kind = SpreadSelectorKind::of_owner(&owner.api_version, &owner.kind)?;
    ns.controllers.get(&(kind, owner.name.clone()))
}

#[cfg(test)]
#[path = "spread_selectors_tests.rs"]
mod tests;
