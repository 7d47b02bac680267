//! The resources the fake serves: one table row per (group, version, plural), never a match per
//! kind. A row says how the resource is addressed, which subresources it has and how a written
//! body is checked (by deserialising it into its `k8s-openapi` type).

use k8s_openapi::api::{apps, batch, coordination, core, events, policy, resource, scheduling, storage};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One served resource.
#[derive(Debug)]
pub struct ResourceType {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// Subresources besides the object itself: `status`, `binding`.
    pub subresources: &'static [&'static str],
    /// Decodes a body as the `k8s-openapi` type; the error is serde's message.
    pub validate: fn(&Value) -> Result<(), String>,
}

impl ResourceType {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// Whether writes to the object itself keep `status` as stored.
    pub fn has_status(&self) -> bool {
        self.subresources.contains(&"status")
    }

    /// `pods` or `podgroups.scheduling.k8s.io`, as Kubernetes names a resource in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.to_string() } else { format!("{}.{}", self.plural, self.group) }
    }
}

fn check<T: DeserializeOwned>(v: &Value) -> Result<(), String> {
    T::deserialize(v).map(drop).map_err(|e| e.to_string())
}

macro_rules! row {
    ($g:expr, $v:expr, $kind:expr, $plural:expr, $ns:expr, [$($sub:expr),*], $ty:ty) => {
        ResourceType {
            group: $g,
            version: $v,
            kind: $kind,
            plural: $plural,
            namespaced: $ns,
            subresources: &[$($sub),*],
            validate: check::<$ty>,
        }
    };
}

const NS: bool = true;
const CLUSTER: bool = false;

/// Every served resource.
pub static RESOURCES: &[ResourceType] = &[
    row!("", "v1", "Pod", "pods", NS, ["status", "binding"], core::v1::Pod),
    row!("", "v1", "Node", "nodes", CLUSTER, ["status"], core::v1::Node),
    row!("", "v1", "Namespace", "namespaces", CLUSTER, ["status"], core::v1::Namespace),
    row!("", "v1", "Event", "events", NS, [], core::v1::Event),
    row!("", "v1", "Service", "services", NS, ["status"], core::v1::Service),
    row!("", "v1", "ReplicationController", "replicationcontrollers", NS, ["status"], core::v1::ReplicationController),
    row!("events.k8s.io", "v1", "Event", "events", NS, [], events::v1::Event),
    row!("coordination.k8s.io", "v1", "Lease", "leases", NS, [], coordination::v1::Lease),
    row!(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        NS,
        ["status"],
        policy::v1::PodDisruptionBudget
    ),
    row!("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", CLUSTER, [], scheduling::v1::PriorityClass),
    row!("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups", NS, ["status"], scheduling::v1beta1::PodGroup),
    row!("scheduling.k8s.io", "v1beta1", "Workload", "workloads", NS, ["status"], scheduling::v1beta1::Workload),
    row!("scheduling.k8s.io", "v1alpha3", "PodGroup", "podgroups", NS, ["status"], scheduling::v1alpha3::PodGroup),
    row!("scheduling.k8s.io", "v1alpha3", "Workload", "workloads", NS, ["status"], scheduling::v1alpha3::Workload),
    row!(
        "scheduling.k8s.io",
        "v1alpha3",
        "CompositePodGroup",
        "compositepodgroups",
        NS,
        ["status"],
        scheduling::v1alpha3::CompositePodGroup
    ),
    row!("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", CLUSTER, [], resource::v1::DeviceClass),
    row!("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", CLUSTER, [], resource::v1::ResourceSlice),
    row!(
        "resource.k8s.io",
        "v1",
        "DeviceTaintRule",
        "devicetaintrules",
        CLUSTER,
        ["status"],
        resource::v1::DeviceTaintRule
    ),
    row!(
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        "resourceclaims",
        NS,
        ["status", "binding"],
        resource::v1::ResourceClaim
    ),
    row!(
        "resource.k8s.io",
        "v1",
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
        NS,
        [],
        resource::v1::ResourceClaimTemplate
    ),
    row!("apps", "v1", "Deployment", "deployments", NS, ["status"], apps::v1::Deployment),
    row!("apps", "v1", "ReplicaSet", "replicasets", NS, ["status"], apps::v1::ReplicaSet),
    row!("apps", "v1", "StatefulSet", "statefulsets", NS, ["status"], apps::v1::StatefulSet),
    row!("batch", "v1", "Job", "jobs", NS, ["status"], batch::v1::Job),
    row!("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", NS, ["status"], core::v1::PersistentVolumeClaim),
    row!("", "v1", "PersistentVolume", "persistentvolumes", CLUSTER, ["status"], core::v1::PersistentVolume),
    row!("storage.k8s.io", "v1", "StorageClass", "storageclasses", CLUSTER, [], storage::v1::StorageClass),
    row!("storage.k8s.io", "v1", "CSINode", "csinodes", CLUSTER, [], storage::v1::CSINode),
    row!("storage.k8s.io", "v1", "CSIDriver", "csidrivers", CLUSTER, [], storage::v1::CSIDriver),
    row!("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", NS, [], storage::v1::CSIStorageCapacity),
];

/// A resource's index in [`RESOURCES`]: the store keys objects by it.
pub type ResId = usize;

/// The resource at `/api(s)/{group}/{version}/{plural}`.
pub fn by_path(group: &str, version: &str, plural: &str) -> Option<ResId> {
    RESOURCES.iter().position(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource of an object's `apiVersion` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<ResId> {
    RESOURCES.iter().position(|r| r.kind == kind && r.api_version() == api_version)
}

/// The first resource with `plural`, whatever its group and version.
pub fn by_plural(plural: &str) -> Option<ResId> {
    RESOURCES.iter().position(|r| r.plural == plural)
}

/// The row objects of `id` are kept under: the first of its group and plural, as an API server
/// keeps one storage version of a resource served in several (`scheduling.k8s.io` PodGroups and
/// Workloads are stored as `v1beta1` and served as `v1alpha3` too).
pub fn storage(id: ResId) -> ResId {
    let r = &RESOURCES[id];
    RESOURCES.iter().position(|s| s.group == r.group && s.plural == r.plural).unwrap_or(id)
}

/// `v` (an object, or a list of them) as version `id` serves it. In 1.37 the `v1alpha3` and
/// `v1beta1` scheduling types have the same fields, so a conversion is the `apiVersion` alone.
/// Anything else (a `Status`, an object of another group) is left as it is.
pub fn convert(v: &mut Value, id: ResId) {
    let r = get(id);
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(|i| convert(i, id));
    }
    let same_group = v["apiVersion"].as_str().is_some_and(|av| av.split_once('/').is_some_and(|(g, _)| g == r.group));
    if same_group && !r.group.is_empty() {
        v["apiVersion"] = Value::from(r.api_version());
    }
}

/// Every resource of `plural` (`podgroups` in two versions; `events` in two groups).
pub fn all_by_plural(plural: &str) -> impl Iterator<Item = ResId> + '_ {
    (0..RESOURCES.len()).filter(move |&i| RESOURCES[i].plural == plural)
}

pub fn get(id: ResId) -> &'static ResourceType {
    &RESOURCES[id]
}

/// The (group, version) pairs served, in table order, without repeats.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_addressable_by_path_and_kind() {
        for (i, r) in RESOURCES.iter().enumerate() {
            assert_eq!(by_path(r.group, r.version, r.plural), Some(i), "{}", r.qualified());
            assert_eq!(by_kind(&r.api_version(), r.kind), Some(i), "{}", r.kind);
        }
        assert!(group_versions().contains(&("scheduling.k8s.io", "v1alpha3")));
    }

    #[test]
    fn served_versions_share_one_storage_version() {
        let alpha = by_path("scheduling.k8s.io", "v1alpha3", "podgroups").unwrap();
        let beta = by_path("scheduling.k8s.io", "v1beta1", "podgroups").unwrap();
        assert_eq!((storage(alpha), storage(beta)), (beta, beta));
        let composite = by_path("scheduling.k8s.io", "v1alpha3", "compositepodgroups").unwrap();
        assert_eq!(storage(composite), composite, "served in one version only");
        let events = by_path("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(storage(events), events, "another group: another resource");
        let mut list = serde_json::json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroupList",
            "items": [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup"}]});
        convert(&mut list, alpha);
        assert_eq!(list["items"][0]["apiVersion"], "scheduling.k8s.io/v1alpha3");
        assert_eq!(list["apiVersion"], "scheduling.k8s.io/v1alpha3");
        let mut status = serde_json::json!({"apiVersion": "v1", "kind": "Status"});
        convert(&mut status, alpha);
        assert_eq!(status["apiVersion"], "v1");
    }
}
