//! What every controller shares: the pods it sees (the input's and those created so far), which of
//! them it owns or adopts (`ClaimPods`), and a pod from its template (`GetPodFromTemplate` in
//! `pkg/controller/controller_utils.go`).

use muster_api::PodObject;
use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use muster_api::selectors::label_selector_matches;

use crate::naming::generated_name;

/// A controller: the object that owns what it creates.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owner<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub meta: &'a ObjectMeta,
}

impl<'a> Owner<'a> {
    pub fn namespace(&self) -> &'a str {
        self.meta.namespace.as_deref().unwrap_or("default")
    }

    pub fn name(&self) -> &'a str {
        self.meta.name.as_deref().unwrap_or_default()
    }

    pub fn uid(&self) -> &'a str {
        self.meta.uid.as_deref().unwrap_or_default()
    }

    /// `metav1.NewControllerRef`: controller and blockOwnerDeletion set.
    pub fn controller_ref(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.into(),
            kind: self.kind.into(),
            name: self.name().into(),
            uid: self.uid().into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// Whether `meta` names this owner as its controller: same kind and name, and the same UID
    /// when the reference has one (a UID muster derived never appears in an input's references,
    /// so a reference by name to an object given without a UID still counts).
    pub fn controls(&self, meta: &ObjectMeta) -> bool {
        controller_of(meta).is_some_and(|r| {
            r.kind == self.kind
                && r.name == self.name()
                && (r.uid.is_empty() || r.uid == self.uid() || !self.uid_given())
        })
    }

    /// Whether the input gave the owner its UID (rather than [`crate::naming::uid`]).
    fn uid_given(&self) -> bool {
        self.uid() != crate::naming::uid(self.kind, self.namespace(), self.name())
    }

    /// The ownership rule of `ClaimObject` (`pkg/controller/controller_ref_manager.go`): an object
    /// this owner controls and `selector` still matches (one it no longer matches is released),
    /// or an orphan (no controller) that is not being deleted and that `selector` matches, which
    /// the controller adopts. An empty selector (which the API server refuses) adopts nothing.
    pub fn claims(&self, meta: &ObjectMeta, selector: &LabelSelector) -> bool {
        if meta.namespace.as_deref().unwrap_or("default") != self.namespace() {
            return false;
        }
        let matches = || label_selector_matches(selector, meta.labels.as_ref().unwrap_or(&Default::default()));
        if controller_of(meta).is_some() {
            return self.controls(meta) && matches();
        }
        let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && selector.match_expressions.as_ref().is_none_or(|m| m.is_empty());
        !empty && meta.deletion_timestamp.is_none() && matches()
    }
}

/// `metav1.GetControllerOf`.
pub(crate) fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// `controller.IsPodActive`: not Succeeded, not Failed, not being deleted.
pub(crate) fn is_active(pod: &dyn PodObject) -> bool {
    let phase = pod.status().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed")) && pod.meta().deletion_timestamp.is_none()
}

pub(crate) fn phase(pod: &dyn PodObject) -> &str {
    pod.status().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// `GetPodFromTemplate`: the template's labels, annotations, finalizers and spec, `generateName`
/// `<owner>-`, the owner's namespace, and the owner as controller. The name is the caller's.
pub(crate) fn from_template(template: &PodTemplateSpec, owner: &Owner<'_>) -> Pod {
    let t = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            namespace: Some(owner.namespace().into()),
            generate_name: Some(format!("{}-", owner.name())),
            labels: t.labels,
            annotations: t.annotations,
            finalizers: t.finalizers,
            owner_references: Some(vec![owner.controller_ref()]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// The pods the controllers see: the input's, then those created, with every name taken.
pub struct Pods<'a> {
    existing: &'a [&'a dyn PodObject],
    created: Vec<Pod>,
    names: HashSet<(String, String)>,
}

impl<'a> Pods<'a> {
    pub fn new(existing: &'a [&'a dyn PodObject]) -> Self {
        let names = existing
            .iter()
            .map(|p| {
                let ns = p.meta().namespace.clone().unwrap_or_else(|| "default".into());
                (ns, p.meta().name.clone().unwrap_or_default())
            })
            .collect();
        Pods { existing, created: Vec::new(), names }
    }

    pub fn iter(&self) -> impl Iterator<Item = &dyn PodObject> {
        self.existing.iter().copied().chain(self.created.iter().map(|p| p as &dyn PodObject))
    }

    /// The pods `owner` owns or adopts (see [`Owner::claims`]).
    pub(crate) fn claimed<'s>(
        &'s self,
        owner: &'s Owner<'_>,
        selector: &'s LabelSelector,
    ) -> impl Iterator<Item = &'s dyn PodObject> {
        self.iter().filter(move |p| owner.claims(p.meta(), selector))
    }

    pub fn taken(&self, namespace: &str, name: &str) -> bool {
        self.names.contains(&(namespace.to_string(), name.to_string()))
    }

    /// A name for `generateName: base` in `namespace` that no pod has: the suffix is derived from
    /// namespace, base and a counter (the API server's is random; on a clash it fails the create
    /// and the controller retries, as the counter does here).
    pub(crate) fn generate_name(&self, namespace: &str, base: &str) -> String {
        (0u64..)
            .map(|i| generated_name(base, &[namespace, base, &i.to_string()]))
            .find(|n| !self.taken(namespace, n))
            .expect("some name is free")
    }

    /// Adds a created pod (it has a name and a namespace), gives it the UID the API server would
    /// (derived, see [`crate::naming::uid`]), and returns a copy for the record.
    pub(crate) fn add(&mut self, mut pod: Pod) -> Pod {
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        pod.metadata.uid = Some(crate::naming::uid("Pod", &ns, pod.metadata.name.as_deref().unwrap_or_default()));
        self.names.insert((ns, pod.metadata.name.clone().unwrap_or_default()));
        self.created.push(pod.clone());
        pod
    }
}
