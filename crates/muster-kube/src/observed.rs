//! What the watches report, as one message type the scheduler's loop takes in order.

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha3;
use k8s_openapi::api::scheduling::v1beta1::{PodGroup, Workload};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use muster_sched::spread_selectors::{SpreadSelector, SpreadSelectorKind};
use muster_sched::store::Change;
use muster_sched::volumes::{StorageKind, StorageObject};

/// The kinds muster watches, in the order a first listing is applied (what others refer to
/// first, then pods, then the PodDisruptionBudgets whose allowed disruptions are counted from
/// the pods when they have no status), so that the first schedule sees one consistent snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    PriorityClass,
    Namespace,
    Node,
    DeviceClass,
    ResourceSlice,
    DeviceTaintRule,
    /// Workloads: what muster keeps of them is the device topology their PodGroups inherit.
    Workload,
    CompositePodGroup,
    PodGroup,
    /// PodGroups read as `scheduling.k8s.io/v1alpha3` too: a server that does not convert
    /// between the versions (the fake) keeps those created in that version apart.
    PodGroupV1alpha3,
    ResourceClaim,
    StorageClass,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    Service,
    ReplicationController,
    ReplicaSet,
    StatefulSet,
    Pod,
    PodDisruptionBudget,
}

impl Kind {
    pub const ALL: [Kind; 23] = [
        Kind::PriorityClass,
        Kind::Namespace,
        Kind::Node,
        Kind::DeviceClass,
        Kind::ResourceSlice,
        Kind::DeviceTaintRule,
        Kind::Workload,
        Kind::CompositePodGroup,
        Kind::PodGroup,
        Kind::PodGroupV1alpha3,
        Kind::ResourceClaim,
        Kind::StorageClass,
        Kind::CSIDriver,
        Kind::CSINode,
        Kind::CSIStorageCapacity,
        Kind::PersistentVolume,
        Kind::PersistentVolumeClaim,
        Kind::Service,
        Kind::ReplicationController,
        Kind::ReplicaSet,
        Kind::StatefulSet,
        Kind::Pod,
        Kind::PodDisruptionBudget,
    ];

    /// DeviceClasses, ResourceSlices and DeviceTaintRules: the allocator's inputs, which the
    /// engine takes as a whole (a change rebuilds the slice index).
    pub fn is_dra_input(self) -> bool {
        matches!(self, Kind::DeviceClass | Kind::ResourceSlice | Kind::DeviceTaintRule)
    }

    /// The storage kinds the volume plugins read, as the store names them.
    fn storage(self) -> Option<StorageKind> {
        Some(match self {
            Kind::StorageClass => StorageKind::Class,
            Kind::CSIDriver => StorageKind::CsiDriver,
            Kind::CSIStorageCapacity => StorageKind::Capacity,
            Kind::CSINode => StorageKind::CsiNode,
            Kind::PersistentVolume => StorageKind::Volume,
            Kind::PersistentVolumeClaim => StorageKind::Claim,
            _ => return None,
        })
    }

    /// The kinds whose selectors PodTopologySpread's default constraints read.
    fn spread(self) -> Option<SpreadSelectorKind> {
        Some(match self {
            Kind::Service => SpreadSelectorKind::Service,
            Kind::ReplicationController => SpreadSelectorKind::ReplicationController,
            Kind::ReplicaSet => SpreadSelectorKind::ReplicaSet,
            Kind::StatefulSet => SpreadSelectorKind::StatefulSet,
            _ => return None,
        })
    }
}

/// One object as a watch reported it.
#[derive(Clone, Debug)]
pub enum Object {
    PriorityClass(Box<PriorityClass>),
    Namespace(Box<Namespace>),
    Node(Box<Node>),
    DeviceClass(Box<DeviceClass>),
    ResourceSlice(Box<ResourceSlice>),
    DeviceTaintRule(Box<DeviceTaintRule>),
    PodDisruptionBudget(Box<PodDisruptionBudget>),
    Workload(Box<Workload>),
    CompositePodGroup(Box<v1alpha3::CompositePodGroup>),
    PodGroup(Box<PodGroup>),
    PodGroupV1alpha3(Box<v1alpha3::PodGroup>),
    ResourceClaim(Box<ResourceClaim>),
    StorageClass(Box<StorageClass>),
    CSIDriver(Box<CSIDriver>),
    CSIStorageCapacity(Box<CSIStorageCapacity>),
    CSINode(Box<CSINode>),
    PersistentVolume(Box<PersistentVolume>),
    PersistentVolumeClaim(Box<PersistentVolumeClaim>),
    Service(Box<Service>),
    ReplicationController(Box<ReplicationController>),
    ReplicaSet(Box<ReplicaSet>),
    StatefulSet(Box<StatefulSet>),
    Pod(Box<Pod>),
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::PriorityClass(_) => Kind::PriorityClass,
            Object::Namespace(_) => Kind::Namespace,
            Object::Node(_) => Kind::Node,
            Object::DeviceClass(_) => Kind::DeviceClass,
            Object::ResourceSlice(_) => Kind::ResourceSlice,
            Object::DeviceTaintRule(_) => Kind::DeviceTaintRule,
            Object::PodDisruptionBudget(_) => Kind::PodDisruptionBudget,
            Object::Workload(_) => Kind::Workload,
            Object::CompositePodGroup(_) => Kind::CompositePodGroup,
            Object::PodGroup(_) => Kind::PodGroup,
            Object::PodGroupV1alpha3(_) => Kind::PodGroupV1alpha3,
            Object::ResourceClaim(_) => Kind::ResourceClaim,
            Object::StorageClass(_) => Kind::StorageClass,
            Object::CSIDriver(_) => Kind::CSIDriver,
            Object::CSIStorageCapacity(_) => Kind::CSIStorageCapacity,
            Object::CSINode(_) => Kind::CSINode,
            Object::PersistentVolume(_) => Kind::PersistentVolume,
            Object::PersistentVolumeClaim(_) => Kind::PersistentVolumeClaim,
            Object::Service(_) => Kind::Service,
            Object::ReplicationController(_) => Kind::ReplicationController,
            Object::ReplicaSet(_) => Kind::ReplicaSet,
            Object::StatefulSet(_) => Kind::StatefulSet,
            Object::Pod(_) => Kind::Pod,
        }
    }

    /// The engine's change for this object, for the kinds the store takes one at a time.
    pub fn upsert(self) -> Option<Change> {
        Some(match self {
            Object::PriorityClass(o) => Change::UpsertPriorityClass(o),
            Object::Namespace(o) => Change::UpsertNamespace(o),
            Object::Node(o) => Change::UpsertNode(o),
            Object::PodDisruptionBudget(o) => Change::UpsertPodDisruptionBudget(o),
            Object::Workload(o) => Change::UpsertWorkload(o),
            Object::CompositePodGroup(o) => Change::UpsertCompositePodGroup(o),
            Object::PodGroup(o) => Change::UpsertPodGroup(o),
            Object::PodGroupV1alpha3(o) => Change::UpsertPodGroup(Box::new(as_v1beta1(*o)?)),
            Object::ResourceClaim(o) => Change::UpsertClaim(o),
            Object::Pod(o) => Change::UpsertPod(o),
            Object::StorageClass(o) => storage(StorageObject::Class(*o)),
            Object::CSIDriver(o) => storage(StorageObject::CsiDriver(*o)),
            Object::CSIStorageCapacity(o) => storage(StorageObject::Capacity(*o)),
            Object::CSINode(o) => storage(StorageObject::CsiNode(*o)),
            Object::PersistentVolume(o) => storage(StorageObject::Volume(*o)),
            Object::PersistentVolumeClaim(o) => storage(StorageObject::Claim(*o)),
            Object::Service(o) => spread(SpreadSelector::service(&o)),
            Object::ReplicationController(o) => spread(SpreadSelector::replication_controller(&o)),
            Object::ReplicaSet(o) => spread(SpreadSelector::replica_set(&o)),
            Object::StatefulSet(o) => spread(SpreadSelector::stateful_set(&o)),
            Object::DeviceClass(_) | Object::ResourceSlice(_) | Object::DeviceTaintRule(_) => return None,
        })
    }
}

/// A v1alpha3 PodGroup in the v1beta1 form the store reads (the scheduling fields are the same).
fn as_v1beta1(g: v1alpha3::PodGroup) -> Option<PodGroup> {
    let mut v = serde_json::to_value(g).ok()?;
    v["apiVersion"] = "scheduling.k8s.io/v1beta1".into();
    serde_json::from_value(v).ok()
}

fn spread(selector: SpreadSelector) -> Change {
    Change::UpsertSpreadSelector(Box::new(selector))
}

fn storage(object: StorageObject) -> Change {
    Change::UpsertStorage(Box::new(object))
}

/// The engine's change for a deletion, for the kinds the store takes one at a time.
pub fn delete(kind: Kind, key: String) -> Option<Change> {
    Some(match kind {
        Kind::PriorityClass => Change::DeletePriorityClass(key),
        Kind::Namespace => Change::DeleteNamespace(key),
        Kind::Node => Change::DeleteNode(key),
        Kind::PodDisruptionBudget => Change::DeletePodDisruptionBudget(key),
        Kind::Workload => Change::DeleteWorkload(key),
        Kind::CompositePodGroup => Change::DeleteCompositePodGroup(key),
        Kind::PodGroup | Kind::PodGroupV1alpha3 => Change::DeletePodGroup(key),
        Kind::ResourceClaim => Change::DeleteClaim(key),
        Kind::Pod => Change::DeletePod(key),
        Kind::DeviceClass | Kind::ResourceSlice | Kind::DeviceTaintRule => return None,
        Kind::StorageClass
        | Kind::CSIDriver
        | Kind::CSINode
        | Kind::CSIStorageCapacity
        | Kind::PersistentVolume
        | Kind::PersistentVolumeClaim => Change::DeleteStorage(kind.storage()?, key),
        Kind::Service | Kind::ReplicationController | Kind::ReplicaSet | Kind::StatefulSet => {
            Change::DeleteSpreadSelector(kind.spread()?, key)
        }
    })
}

/// A watched type: its kind and how it is wrapped.
pub trait Watched:
    kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
    const KIND: Kind;
    fn wrap(self) -> Object;
}

macro_rules! watched {
    ($($ty:ty => $kind:ident),* $(,)?) => {$(
        impl Watched for $ty {
            const KIND: Kind = Kind::$kind;
            fn wrap(self) -> Object {
                Object::$kind(Box::new(self))
            }
        }
    )*};
}

watched! {
    PriorityClass => PriorityClass,
    Namespace => Namespace,
    Node => Node,
    DeviceClass => DeviceClass,
    ResourceSlice => ResourceSlice,
    DeviceTaintRule => DeviceTaintRule,
    PodDisruptionBudget => PodDisruptionBudget,
    Workload => Workload,
    v1alpha3::CompositePodGroup => CompositePodGroup,
    PodGroup => PodGroup,
    v1alpha3::PodGroup => PodGroupV1alpha3,
    ResourceClaim => ResourceClaim,
    StorageClass => StorageClass,
    CSIDriver => CSIDriver,
    CSIStorageCapacity => CSIStorageCapacity,
    CSINode => CSINode,
    PersistentVolume => PersistentVolume,
    PersistentVolumeClaim => PersistentVolumeClaim,
    Service => Service,
    ReplicationController => ReplicationController,
    ReplicaSet => ReplicaSet,
    StatefulSet => StatefulSet,
    Pod => Pod,
}

/// `namespace/name`, or `name` for a cluster-scoped object: the store's keys.
pub fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// A resourceVersion as the number the API server issues (the assume cache compares them as
/// numbers, as upstream's does); `None` for one that is not a number.
pub fn resource_version(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref().and_then(|v| v.parse().ok())
}
