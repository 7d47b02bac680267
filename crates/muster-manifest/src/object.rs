//! The Kubernetes kinds muster reads, as `k8s-openapi` 1.37 types.

use std::any::TypeId;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::api::scheduling::{v1 as sched_v1, v1alpha3 as sched_a3, v1beta1 as sched_b1};
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{NamespaceResourceScope, Resource};

use crate::de::{DeError, from_node};
use crate::yaml::Node;

macro_rules! kinds {
    ($($variant:ident => $ty:ty),* $(,)?) => {
        /// One object of a kind muster understands.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Object {
            $($variant(Box<$ty>),)*
        }

        impl Object {
            pub fn api_version(&self) -> &'static str {
                match self { $(Object::$variant(_) => <$ty as Resource>::API_VERSION,)* }
            }

            pub fn group(&self) -> &'static str {
                match self { $(Object::$variant(_) => <$ty as Resource>::GROUP,)* }
            }

            pub fn kind(&self) -> &'static str {
                match self { $(Object::$variant(_) => <$ty as Resource>::KIND,)* }
            }

            pub fn metadata(&self) -> &ObjectMeta {
                match self { $(Object::$variant(o) => &o.metadata,)* }
            }

            pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
                match self { $(Object::$variant(o) => &mut o.metadata,)* }
            }

            pub fn is_namespaced(&self) -> bool {
                match self { $(Object::$variant(_) => namespaced::<$ty>(),)* }
            }

            /// The object as the API server would return it (JSON with apiVersion and kind).
            pub fn to_json(&self) -> serde_json::Value {
                let v = match self { $(Object::$variant(o) => serde_json::to_value(o),)* };
                v.expect("k8s-openapi types always serialize")
            }
        }

        /// Every (apiVersion, kind) muster reads.
        pub const SUPPORTED: &[(&str, &str)] = &[$((<$ty as Resource>::API_VERSION, <$ty as Resource>::KIND),)*];

        /// Whether objects of `kind` (one muster reads) live in a namespace; `None` for other kinds.
        pub fn kind_is_namespaced(kind: &str) -> Option<bool> {
            $(
                if kind == <$ty as Resource>::KIND {
                    return Some(namespaced::<$ty>());
                }
            )*
            None
        }

        /// Decodes `node` as `apiVersion`/`kind`, or `None` when muster does not read that kind.
        pub(crate) fn decode(api_version: &str, kind: &str, node: &Node<'_>) -> Option<Result<Object, Vec<DeError>>> {
            $(
                if api_version == <$ty as Resource>::API_VERSION && kind == <$ty as Resource>::KIND {
                    return Some(from_node::<$ty>(node).map(|o| Object::$variant(Box::new(o))));
                }
            )*
            None
        }
    };
}

kinds! {
    Node => core::Node,
    Namespace => core::Namespace,
    Pod => core::Pod,
    PriorityClass => sched_v1::PriorityClass,
    DeviceClass => resource::DeviceClass,
    ResourceSlice => resource::ResourceSlice,
    ResourceClaim => resource::ResourceClaim,
    ResourceClaimTemplate => resource::ResourceClaimTemplate,
    DeviceTaintRule => resource::DeviceTaintRule,
    PodGroup => sched_b1::PodGroup,
    PodGroupV1alpha3 => sched_a3::PodGroup,
    Workload => sched_b1::Workload,
    WorkloadV1alpha3 => sched_a3::Workload,
    CompositePodGroup => sched_a3::CompositePodGroup,
    PodDisruptionBudget => policy::PodDisruptionBudget,
    Deployment => apps::Deployment,
    ReplicaSet => apps::ReplicaSet,
    StatefulSet => apps::StatefulSet,
    Job => batch::Job,
    PersistentVolumeClaim => core::PersistentVolumeClaim,
    PersistentVolume => core::PersistentVolume,
    StorageClass => storage::StorageClass,
    CSINode => storage::CSINode,
    CSIDriver => storage::CSIDriver,
    CSIStorageCapacity => storage::CSIStorageCapacity,
    Service => core::Service,
    ReplicationController => core::ReplicationController,
}

fn namespaced<T: Resource + 'static>() -> bool {
    TypeId::of::<T::Scope>() == TypeId::of::<NamespaceResourceScope>()
}

impl Object {
    /// `Kind namespace/name` or `Kind name`, as messages name objects.
    pub fn display_name(&self) -> String {
        let m = self.metadata();
        let name = m.name.as_deref().unwrap_or("<unnamed>");
        match m.namespace.as_deref() {
            Some(ns) if self.is_namespaced() => format!("{} {ns}/{name}", self.kind()),
            _ => format!("{} {name}", self.kind()),
        }
    }
}

/// The versions muster reads for `kind`, if it reads the kind at all.
pub fn supported_versions(kind: &str) -> Vec<&'static str> {
    SUPPORTED.iter().filter(|(_, k)| *k == kind).map(|(v, _)| *v).collect()
}
