//! The cluster model: a snapshot of nodes and pods with the indexes the scheduling cycle needs.
//!
//! Built from `k8s-openapi` objects (from YAML in `plan`, from watches in `run`), it resolves what
//! the API server and kubelet would have resolved before the scheduler sees a pod: priorities from
//! PriorityClasses, effective requests, and each node's requested resources from the pods bound to
//! it. Resource names are interned into small integer ids so that the Filter and Score hot paths
//! work on dense `i64` vectors.

use muster_api::PodObject;
use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, PodResourceClaimStatus, Taint};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use muster_api::resources;
use muster_api::taints::PREFER_NO_SCHEDULE;

pub use crate::slots::Slots;
pub use crate::unresolved::Unresolved;

use crate::fastdiv::Divisor;
use crate::stored_pod::StoredPod;

/// A resource name interned for the hot path. `CPU` is counted in millicores, everything else in
/// whole units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId(pub u16);

impl ResourceId {
    pub const CPU: ResourceId = ResourceId(0);
    pub const MEMORY: ResourceId = ResourceId(1);
    pub const EPHEMERAL_STORAGE: ResourceId = ResourceId(2);
}

/// A map looked up by names or other keys on every change: foldhash, randomly seeded (SipHash,
/// std's default, was a tenth of a pod add). Nothing iterates one where the order could show.
pub(crate) type NameMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The interned resource names of one snapshot.
#[derive(Clone, Debug)]
pub struct ResourceNames {
    names: Vec<String>,
    ids: NameMap<String, ResourceId>,
}

impl Default for ResourceNames {
    fn default() -> Self {
        let mut r = ResourceNames { names: Vec::new(), ids: NameMap::default() };
        for n in [resources::CPU, resources::MEMORY, resources::EPHEMERAL_STORAGE] {
            r.intern(n);
        }
        r
    }
}

impl ResourceNames {
    pub fn intern(&mut self, name: &str) -> ResourceId {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = ResourceId(u16::try_from(self.names.len()).expect("fewer than 65536 resource names"));
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    pub fn get(&self, name: &str) -> Option<ResourceId> {
        self.ids.get(name).copied()
    }

    pub fn name(&self, id: ResourceId) -> &str {
        &self.names[id.0 as usize]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Converts a quantity to the unit the scheduler counts `id` in.
fn amount(id: ResourceId, q: muster_api::Quantity) -> i64 {
    if id == ResourceId::CPU { q.milli_value() } else { q.value() }
}

/// Number of resources counted inline in [`NodeInfo`] (cpu, memory, ephemeral-storage).
const INLINE: usize = 3;

/// A node as the scheduler sees it (`framework.NodeInfo`).
///
/// The fields every Filter and Score reads for every node sit inline, in under two cache lines;
/// the rest (the object, labels, taints, extended resources) is behind one pointer, read only when
/// a pod or node needs it.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// Allocatable cpu (milli), memory and ephemeral-storage.
    pub allocatable: [i64; INLINE],
    /// The same, as divisors for the Score plugins (1 where allocatable is not positive).
    pub allocatable_divisors: [Divisor; INLINE],
    /// What the node's pods request of the same.
    pub requested: [i64; INLINE],
    /// CPU (milli) and memory requested with the scheduler's non-zero defaults (scoring).
    pub non_zero_requested: [i64; 2],
    /// `pods` in allocatable.
    pub allowed_pods: i64,
    /// Pods on the node (bound in the input, or placed by this plan).
    pub num_pods: i64,
    /// Bumped whenever the node's requested resources change.
    pub generation: u64,
    pub unschedulable: bool,
    pub has_taints: bool,
    pub has_prefer_no_schedule_taint: bool,
    /// Pods on the node with pod affinity or anti-affinity terms, and those with required
    /// anti-affinity (InterPodAffinity looks at these nodes only).
    pub affinity_pods: u32,
    pub anti_affinity_pods: u32,
    pub detail: Box<NodeDetail>,
}

/// The parts of a node that are read rarely.
#[derive(Clone, Debug)]
pub struct NodeDetail {
    pub node: Node,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Allocatable and requested amounts of the other resources, indexed by `ResourceId - 3`.
    pub scalar_allocatable: Vec<i64>,
    pub scalar_requested: Vec<i64>,
    pub pods: Vec<PodId>,
    /// Deleted from the cluster: its id is kept (ids never shift) but no pod goes there and
    /// no topology domain or node list includes it.
    pub removed: bool,
}

impl NodeInfo {
    pub fn name(&self) -> &str {
        &self.detail.name
    }

    pub fn allocatable(&self, id: ResourceId) -> i64 {
        let i = id.0 as usize;
        if i < INLINE {
            self.allocatable[i]
        } else {
            self.detail.scalar_allocatable.get(i - INLINE).copied().unwrap_or(0)
        }
    }

    pub fn requested(&self, id: ResourceId) -> i64 {
        let i = id.0 as usize;
        if i < INLINE { self.requested[i] } else { self.detail.scalar_requested.get(i - INLINE).copied().unwrap_or(0) }
    }

    /// Adds a pod's requests (Reserve / assume); `sign` -1 removes them (Unreserve). Returns
    /// what the cluster-wide counts of pods with affinity terms change by ([`Cluster::inter_pod`]).
    #[must_use]
    pub fn account(&mut self, pod: &PodInfo, id: PodId, sign: i64) -> InterPodPods {
        for &(rid, v) in pod.requests.iter() {
            let i = rid.0 as usize;
            if i < INLINE {
                self.requested[i] += sign * v;
            } else {
                let r = &mut self.detail.scalar_requested;
                if r.len() <= i - INLINE {
                    r.resize(i - INLINE + 1, 0);
                }
                r[i - INLINE] += sign * v;
            }
        }
        self.non_zero_requested[0] += sign * pod.non_zero[0];
        self.non_zero_requested[1] += sign * pod.non_zero[1];
        self.num_pods += sign;
        self.generation += 1;
        if sign > 0 {
            self.detail.pods.push(id);
        } else {
            self.detail.pods.retain(|p| *p != id);
        }
        let Some(terms) = pod.affinity.as_deref() else { return InterPodPods::default() };
        let anti = i64::from(!terms.required_anti_affinity.is_empty());
        self.affinity_pods = (i64::from(self.affinity_pods) + sign) as u32;
        self.anti_affinity_pods = (i64::from(self.anti_affinity_pods) + sign * anti) as u32;
        InterPodPods { with_affinity: sign, required_anti_affinity: sign * anti }
    }
}

/// How many pods on nodes have pod affinity or anti-affinity terms, and required anti-affinity:
/// when none has, InterPodAffinity is skipped for pods without terms of their own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InterPodPods {
    pub with_affinity: i64,
    pub required_anti_affinity: i64,
}

impl InterPodPods {
    pub fn add(&mut self, d: InterPodPods) {
        self.with_affinity += d.with_affinity;
        self.required_anti_affinity += d.required_anti_affinity;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodId(pub u32);

/// A stable id: a slot of one of the store's slot arrays ([`Slots`]), which it indexes directly
/// (`v[id]`).
macro_rules! slot_id {
    ($(#[$doc:meta])* $id:ident => $info:ty) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $id(pub u32);

        impl $id {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::ops::Index<$id> for Slots<$info> {
            type Output = $info;
            fn index(&self, id: $id) -> &$info {
                &self[id.0 as usize]
            }
        }

        impl std::ops::IndexMut<$id> for Slots<$info> {
            fn index_mut(&mut self, id: $id) -> &mut $info {
                &mut self[id.0 as usize]
            }
        }
    };
}

slot_id! {
    /// A ResourceClaim in the store: a slot of [`Cluster::claims`].
    ClaimId => ClaimInfo
}
slot_id! {
    /// A PodGroup in the store: a slot of [`Cluster::groups`].
    GroupId => GroupInfo
}
slot_id! {
    /// A CompositePodGroup in the store: a slot of [`Cluster::composites`].
    CompositeId => CompositeInfo
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// Where a pod stands before the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Bound to a node in the input (`spec.nodeName` set).
    Bound(NodeId),
    /// Bound to a node the input does not have: its usage is counted nowhere.
    BoundElsewhere(String),
    /// Waiting for this scheduler.
    Pending,
    /// Waiting for another scheduler (its `schedulerName`).
    OtherScheduler(String),
    /// Held back by `spec.schedulingGates` (their names).
    Gated(Vec<String>),
    /// Succeeded or Failed: holds nothing.
    Terminated,
    /// Was running on the node; preempted by this plan to make room for a PodGroup.
    Preempted(NodeId),
    /// Was pending; assumed onto the node by this plan (Reserve), not yet bound.
    Assumed(NodeId),
    /// The slot of a pod deleted from the store, free for a later pod.
    Deleted,
}

impl PodState {
    /// The node whose resources the pod holds: bound in the input, or assumed by this plan.
    pub fn on_node(&self) -> Option<NodeId> {
        match self {
            PodState::Bound(n) | PodState::Assumed(n) => Some(*n),
            _ => None,
        }
    }
}

/// A pod's resolved claims: most pods have one, kept in place (read on every equivalence check
/// of a waiting pod without a look elsewhere).
pub type PodClaims = smallvec::SmallVec<[Result<ClaimId, Box<Unresolved>>; 1]>;

/// A pod and what the scheduler derived from it (`framework.PodInfo`).
///
/// Laid out in declaration order, one cache line first: a waiting pod is read at every event
/// that wakes it, and what the equivalence check reads of it (shape, priority, claims, group, a
/// stale extended claim) sits in its first line, its state and extended resources in the next.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct PodInfo {
    /// Pods with equal `requests` and `non_zero` share a shape, and pods that share one have
    /// equal ones (a number is never given to two pairs): the resource Score plugins give them
    /// equal scores on a node in a given state.
    pub shape: u32,
    pub priority: i32,
    /// The pod's resource claims (`spec.resourceClaims`), resolved: an index into
    /// [`Cluster::claims`], or why the claim is not there. Once the pod is placed with devices
    /// for extended resources, the special extended-resources claim follows them.
    pub claims: PodClaims,
    /// The PodGroup the pod joins (`spec.schedulingGroup.podGroupName`): an index into
    /// [`Cluster::groups`], or why it is not there.
    pub group: Option<Result<GroupId, Box<Unresolved>>>,
    /// A special extended-resources claim left from an earlier attempt (pending pods only).
    pub stale_extended_claim: Option<Box<str>>,
    pub state: PodState,
    /// The pod's extended resources that a DeviceClass backs (KEP 5004), sorted by resource
    /// name, with the class: served through DRA on nodes that do not advertise the resource.
    pub dra_extended: Vec<(ResourceId, String)>,
    /// Some of its own `topologySpreadConstraints` are `DoNotSchedule` (`None`: it has none, the
    /// plugin's default constraints apply): what the queueing hints ask of every failed pod.
    pub spread_hard: Option<bool>,
    /// `spec.preemptionPolicy` is `Never` (`None`: unset, its PriorityClass decides): read on
    /// every attempt of a gang's members, kept beside the rest (the field is immutable).
    pub preemption_never: Option<bool>,
    /// The pod's pod affinity and anti-affinity terms, parsed; `None` when it has none.
    pub affinity: Option<std::sync::Arc<crate::plugins::inter_pod_affinity::AffinityTerms>>,
    /// CPU (milli) and memory with the non-zero defaults, for scoring.
    pub non_zero: [i64; 2],
    /// Non-zero requests per resource id, sorted by id; shared by the pods of one shape (a pod
    /// of a known shape allocates none, and frees none when it goes).
    pub requests: std::sync::Arc<[(ResourceId, i64)]>,
    /// `namespace/name`.
    pub key: String,
    /// The object, its container lists packed ([`StoredPod`]).
    pub pod: StoredPod,
}

// What a waiting pod's equivalence check reads fits in the first cache line (see `PodInfo`).
const _: () = assert!(
    std::mem::offset_of!(PodInfo, stale_extended_claim) + std::mem::size_of::<Option<Box<str>>>() <= 64
        && std::mem::offset_of!(PodInfo, preemption_never) < 128
);

impl PodInfo {
    /// An empty slot (a deleted pod's).
    pub fn vacant() -> PodInfo {
        PodInfo {
            pod: StoredPod::default(),
            key: String::new(),
            priority: 0,
            requests: std::sync::Arc::default(),
            non_zero: [0, 0],
            shape: 0,
            state: PodState::Deleted,
            claims: PodClaims::new(),
            dra_extended: Vec::new(),
            stale_extended_claim: None,
            group: None,
            affinity: None,
            preemption_never: None,
            spread_hard: None,
        }
    }

    pub fn namespace(&self) -> &str {
        self.pod.meta().namespace.as_deref().unwrap_or("default")
    }

    pub fn name(&self) -> &str {
        self.pod.meta().name.as_deref().unwrap_or_default()
    }
}

/// A problem that keeps an object out of the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError {
    pub kind: &'static str,
    /// `namespace/name` or `name`.
    pub object: String,
    pub field: Option<String>,
    pub message: String,
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: ", self.kind, self.object)?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Which pods this scheduler is responsible for.
#[derive(Clone, Debug)]
pub struct SchedulerNames(pub Vec<String>);

impl Default for SchedulerNames {
    fn default() -> Self {
        SchedulerNames(vec!["default-scheduler".into(), "muster".into()])
    }
}

impl SchedulerNames {
    /// An unset `schedulerName` means `default-scheduler`, as API defaulting sets it.
    pub fn serves(&self, name: Option<&str>) -> bool {
        let name = name.filter(|n| !n.is_empty()).unwrap_or("default-scheduler");
        self.0.iter().any(|n| n == name)
    }
}

/// What makes two pods score alike: their requests, then their non-zero cpu/memory (looked up by
/// the requests' slice: a pod's shape is found without copying its requests).
type Shapes = NameMap<std::sync::Arc<[(ResourceId, i64)]>, Vec<([i64; 2], u32)>>;

/// The built-in PriorityClasses every cluster has.
const SYSTEM_PRIORITY_CLASSES: [(&str, i32); 2] =
    [("system-cluster-critical", 2_000_000_000), ("system-node-critical", 2_000_001_000)];

/// A snapshot of the cluster.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    pub resources: ResourceNames,
    /// Nodes sorted by name.
    pub nodes: Vec<NodeInfo>,
    /// The order Filter walks nodes in: round-robin over zones, as kube-scheduler's node tree lists
    /// them (zones in order of first appearance among nodes sorted by name).
    pub node_order: Vec<NodeId>,
    /// Every pod by its slot ([`PodId`]): sorted by `namespace/name` in a snapshot built at once;
    /// a new pod takes a deleted one's slot or a new one at the end. Never moved as it grows.
    pub pods: Slots<PodInfo>,
    /// True when some node has a PreferNoSchedule taint (TaintToleration scoring matters).
    pub any_prefer_no_schedule: bool,
    /// Things worth telling the user that are not errors.
    pub warnings: Vec<String>,
    /// ResourceClaims: those in the input, then those generated from templates for pending pods.
    pub claims: Slots<ClaimInfo>,
    /// PodGroups sorted by `namespace/name`, with their members.
    pub groups: Slots<GroupInfo>,
    /// CompositePodGroups sorted by `namespace/name`, with their children.
    pub composites: Slots<CompositeInfo>,
    /// PodDisruptionBudgets sorted by `namespace/name`, with the disruptions they allow.
    pub budgets: Vec<BudgetInfo>,
    /// PriorityClass values by name (with the system classes), and the global default's value.
    pub priority_classes: BTreeMap<String, i32>,
    pub default_priority: i32,
    /// PriorityClasses with `preemptionPolicy: Never` (admission copies it into pods and groups).
    pub never_preempting_classes: std::collections::BTreeSet<String>,
    /// The global default PriorityClass, if any.
    pub default_priority_class: Option<String>,
    /// Which pods this scheduler serves (`schedulerName`).
    pub scheduler_names: SchedulerNames,
    /// Pods on nodes with pod affinity terms (see [`InterPodPods`]).
    pub inter_pod: InterPodPods,
    /// Moves whenever the store adds, changes or removes a node (topology domains are rebuilt).
    pub topology_generation: u64,
    /// How many nodes report container images (`status.images`): ImageLocality runs only when
    /// some do.
    pub nodes_with_images: usize,
    /// Pod shapes seen so far, with their ids (`shape_count` of them).
    shapes: Shapes,
    shape_count: u32,
    /// The pods' specs, one per distinct spec ([`crate::stored_pod::SpecTable`]).
    pub(crate) specs: crate::stored_pod::SpecTable,
    /// Source of generation values (see [`Cluster::fresh_generation`]).
    generation_counter: u64,
    /// The nodes whose generations moved, in order ([`crate::node_journal`]).
    pub node_journal: crate::node_journal::NodeJournal,
    /// Indexes by name, built on the first [`Cluster::apply`] (a plan never needs them).
    pub(crate) index: Option<Box<crate::store::Index>>,
    /// Extended resources DeviceClasses back (KEP 5004), to the class's name: set by
    /// [`Cluster::map_extended_resources`], applied to every pod the store takes.
    extended_classes: HashMap<String, String>,
    /// ResourceClaimTemplates that objects muster does not read will have a driver's controller
    /// make at run time, by (namespace, name), with the object that makes them: a pod naming one
    /// waits for it, and its reason says so.
    pub template_providers: HashMap<(String, String), String>,
    /// The labels of the Namespaces the input lists, by name, each with the
    /// `kubernetes.io/metadata.name` label the API server adds: what a pod affinity term's
    /// `namespaceSelector` reads. A namespace not listed carries only that label.
    pub namespace_labels: HashMap<String, BTreeMap<String, String>>,
    /// Moves whenever the store changes some namespace's labels: the inter-pod plugins' memos
    /// drop what they counted before ([`crate::topology::NodeMemos`]).
    pub namespace_generation: u64,
    /// Each Workload's annotations (`namespace/name`), for what a PodGroup naming it inherits
    /// (the device topology, [`crate::device_topology`]); set before [`Cluster::add_pod_groups`],
    /// or changed one at a time ([`crate::store::Change::UpsertWorkload`]).
    pub workload_annotations: HashMap<String, BTreeMap<String, String>>,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and CSIDrivers, and
    /// VolumeBinding's decisions (see [`crate::volumes`]).
    pub volumes: crate::volumes::Volumes,
    /// The selectors of the Services, ReplicationControllers, ReplicaSets and StatefulSets,
    /// which PodTopologySpread's default constraints are built from (see
    /// [`crate::spread_selectors`]).
    pub spread_selectors: crate::spread_selectors::SpreadSelectors,
}

/// `namespace/name` of a namespaced object (`default` when the namespace is unset): the store's
/// keys. Built without `format!`'s machinery: every pod the store takes is keyed so.
pub fn object_key(meta: &ObjectMeta) -> String {
    muster_api::key::namespaced(
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// A PodDisruptionBudget (`policy/v1`) and the disruptions it allows now.
#[derive(Clone, Debug)]
pub struct BudgetInfo {
    pub budget: k8s_openapi::api::policy::v1::PodDisruptionBudget,
    /// `namespace/name`.
    pub key: String,
    /// `status.disruptionsAllowed` when the input has a status; otherwise what the disruption
    /// controller would compute from the running pods the selector matches.
    pub disruptions_allowed: i32,
}

/// A node of a group tree: a PodGroup (a leaf, index into [`Cluster::groups`]) or a
/// CompositePodGroup (index into [`Cluster::composites`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupNode {
    Group(GroupId),
    Composite(CompositeId),
}

impl GroupNode {
    /// The lowercase kind, as `muster why` targets name it: `podgroup` or `compositepodgroup`.
    pub fn kind(self) -> &'static str {
        match self {
            GroupNode::Group(_) => "podgroup",
            GroupNode::Composite(_) => "compositepodgroup",
        }
    }
}

/// The deepest group tree muster schedules: a root CompositePodGroup, two levels below it, and
/// the PodGroups as leaves (KEP 6012 allows a hierarchy of depth 4).
pub const MAX_TREE_DEPTH: usize = 4;

/// Why a group tree cannot be scheduled (names are `namespace/name`; worded by `Display`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeError {
    /// The parent `node` names by `parentCompositePodGroupName` is not in the input: the tree
    /// waits for it (kube-scheduler's PreEnqueue parks it until the parent is observed).
    MissingParent { node: String, parent: String },
    /// A bad layout (the CompositePodGroup condition's reason `Invalid`): a cycle in the parent
    /// chain, the chain from the node round to the first one it meets again.
    Cycle(Vec<String>),
    /// A bad layout: a tree deeper than [`MAX_TREE_DEPTH`], root first.
    TooDeep(Vec<String>),
}

impl TreeError {
    /// A bad layout rather than a parent still to come.
    pub fn invalid(&self) -> bool {
        !matches!(self, TreeError::MissingParent { .. })
    }
}

impl std::fmt::Display for TreeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TreeError::MissingParent { node, parent } => {
                write!(f, "{node} waits for its parent compositepodgroup {parent}, which is not in the input")
            }
            TreeError::Cycle(names) => {
                write!(f, "the parent chain has a cycle: {} (each names the next as its parent)", names.join(", "))
            }
            TreeError::TooDeep(names) => write!(
                f,
                "the group tree is {} levels deep ({}); at most {MAX_TREE_DEPTH} are allowed",
                names.len(),
                names.join(" > ")
            ),
        }
    }
}

/// A CompositePodGroup (`scheduling.k8s.io/v1alpha3`, alpha): an inner node of a group tree.
#[derive(Clone, Debug)]
pub struct CompositeInfo {
    pub composite: CompositePodGroup,
    /// `namespace/name`.
    pub key: String,
    /// `schedulingPolicy.gang.minGroupCount`: child groups that must be scheduled together; 1 for
    /// the basic policy.
    pub min_group_count: usize,
    pub gang: bool,
    /// `spec.parentCompositePodGroupName`, resolved; `Err` names a parent missing from the input.
    pub parent: Option<Result<CompositeId, String>>,
    /// The groups naming this one as parent, in `namespace/name` order.
    pub children: Vec<GroupNode>,
    /// As [`GroupInfo::priority`].
    pub priority: Result<i32, PriorityClassNotFound>,
    /// As [`GroupInfo::topology_key`]: the whole tree in one domain.
    pub topology_key: Option<String>,
}

/// A group's `spec.priorityClassName` that names no PriorityClass of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorityClassNotFound(pub String);

impl std::fmt::Display for PriorityClassNotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PriorityClass {:?} not found", self.0)
    }
}

/// A PodGroup (read as `scheduling.k8s.io/v1beta1`) and its members.
#[derive(Clone, Debug)]
pub struct GroupInfo {
    pub group: PodGroup,
    /// `namespace/name`.
    pub key: String,
    /// `schedulingPolicy.gang.minCount`; 1 for the basic policy.
    pub min_count: usize,
    /// True for a gang policy: all of minCount or nothing.
    pub gang: bool,
    /// Every pod naming the group, in `namespace/name` order, whatever its state.
    pub members: Vec<PodId>,
    /// `spec.parentCompositePodGroupName`, resolved; `Err` names a parent missing from the input.
    pub parent: Option<Result<CompositeId, String>>,
    /// The group's priority as the Priority admission plugin resolves it (`spec.priority`, else
    /// `spec.priorityClassName`, else the global default); `Err` names a missing class.
    pub priority: Result<i32, PriorityClassNotFound>,
    /// `schedulingConstraints.topology[0].key`: all members in one domain of this node label.
    pub topology_key: Option<String>,
    /// The device-attribute topology of its annotations or its Workload's [beyond upstream];
    /// `Err` says what is wrong with them.
    pub device_topology: Option<Result<crate::device_topology::DeviceTopology, String>>,
}

/// The annotation that marks the special claim kube-scheduler creates for a pod's extended
/// resources served through DRA.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// A ResourceClaim and what this plan did with it.
#[derive(Clone, Debug)]
pub struct ClaimInfo {
    pub claim: Box<ResourceClaim>,
    /// Created from a pod's ResourceClaimTemplate by this plan (as kube-controller-manager would).
    pub generated: bool,
    /// A hash of the claim's spec: claims from one template share it, so the allocator's answer
    /// for one can serve the others.
    pub spec_fingerprint: u64,
    /// Unique to this slot's spec: a new one is drawn when a claim is stored in the slot and
    /// whenever a replacement changes the spec, so that what was derived from an earlier spec
    /// is known to be stale (only compared for equality: the values decide nothing).
    pub spec_stamp: u64,
    /// A PodGroup claim (KEP 5729): the group (index into `Cluster::groups`) whose members use it
    /// through an identical `spec.resourceClaims` entry; it is reserved for the PodGroup.
    pub group: Option<GroupId>,
    /// Devices the spec surely takes once allocated: the counts of its `ExactCount` requests
    /// without admin access (a request for all devices or a prioritized list counts none). Read
    /// by the gang bound, which must not walk every member's spec on every attempt.
    pub exact_devices: u32,
    /// Live pods whose resolved claims name this slot.
    pub users: u32,
    /// Deleted from the store (no longer found by name). While pods still name it, the slot
    /// keeps the claim without its status; once none does, it is vacant and a new claim reuses
    /// it: the store holds as many claims as exist and are in use, not as many as ever existed.
    pub deleted: bool,
    /// The status has an allocation or a reservation ([`ClaimInfo::status_changed`] keeps it):
    /// read beside the spec stamp by the pods that compare claims on every attempt, without a
    /// look at the status.
    in_use: bool,
}

/// FNV-1a over `parts` (with a separator): stable across Rust versions and platforms, so that
/// names derived from it are the same on every machine.
pub fn stable_hash(parts: &[&str]) -> u64 {
    let mut h = Fnv::default();
    for p in parts {
        h.part(p.as_bytes());
    }
    h.0
}

/// [`stable_hash`]'s state, fed one part at a time (or as an `io::Write`, with
/// [`Fnv::end_part`] after the part's last byte).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn end_part(&mut self) {
        self.bytes(&[0xff]);
    }

    fn part(&mut self, bytes: &[u8]) {
        self.bytes(bytes);
        self.end_part();
    }
}

impl std::io::Write for Fnv {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Five characters from the API server's name-generator alphabet, derived from `parts` (the API
/// server's are random; these are reproducible).
pub fn name_suffix(parts: &[&str]) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = stable_hash(parts);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// A hash of a claim's spec.
pub fn fingerprint(c: &ResourceClaim) -> u64 {
    // The spec's JSON hashed as it is written, not gathered into a string first: the same
    // value as `stable_hash(&[&json])`.
    let mut h = Fnv::default();
    if serde_json::to_writer(&mut h, &c.spec).is_err() {
        return stable_hash(&[""]);
    }
    h.end_part();
    h.0
}

/// A stamp ([`ClaimInfo::spec_stamp`], a pod's) no value had before, in this process.
pub(crate) fn fresh_stamp() -> u64 {
    static STAMPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    STAMPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// [`ClaimInfo::exact_devices`] counted from the spec.
fn exact_devices(c: &ResourceClaim) -> u32 {
    let requests = c.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.requests.as_deref()).unwrap_or(&[]);
    let mut total = 0u32;
    for e in requests.iter().filter_map(|r| r.exactly.as_ref()) {
        let exact = e.allocation_mode.as_deref().is_none_or(|m| m == "ExactCount");
        if exact && e.admin_access != Some(true) {
            total = total.saturating_add(u32::try_from(e.count.unwrap_or(1).max(0)).unwrap_or(u32::MAX));
        }
    }
    total
}

impl ClaimInfo {
    /// A claim as the store keeps it; `generated` when this plan created it (the plan then
    /// reports it, whatever the scheduler did with it).
    pub fn new(claim: ResourceClaim, generated: bool, group: Option<GroupId>) -> ClaimInfo {
        let spec_fingerprint = fingerprint(&claim);
        let exact_devices = exact_devices(&claim);
        ClaimInfo {
            claim: Box::new(claim),
            generated,
            spec_fingerprint,
            spec_stamp: fresh_stamp(),
            group,
            exact_devices,
            users: 0,
            deleted: false,
            in_use: false,
        }
        .with_status_read()
    }

    /// A slot no claim holds (see [`ClaimInfo::deleted`]).
    pub fn vacant() -> ClaimInfo {
        ClaimInfo {
            claim: Box::default(),
            generated: false,
            spec_fingerprint: 0,
            spec_stamp: fresh_stamp(),
            group: None,
            exact_devices: 0,
            users: 0,
            deleted: true,
            in_use: false,
        }
    }

    fn with_status_read(mut self) -> ClaimInfo {
        self.status_changed();
        self
    }

    /// Whether the status has an allocation or names a consumer, as of the last
    /// [`ClaimInfo::status_changed`].
    pub fn in_use(&self) -> bool {
        debug_assert_eq!(self.in_use, self.status_in_use(), "claim {}: status changed unannounced", self.key());
        self.in_use
    }

    /// Every change of `claim.status` is followed by this.
    pub fn status_changed(&mut self) {
        self.in_use = self.status_in_use();
    }

    fn status_in_use(&self) -> bool {
        self.claim
            .status
            .as_ref()
            .is_some_and(|s| s.allocation.is_some() || s.reserved_for.as_ref().is_some_and(|r| !r.is_empty()))
    }

    /// The spec was replaced: what is derived from it follows.
    pub fn respec(&mut self, claim: ResourceClaim) -> ResourceClaim {
        let spec_fingerprint = fingerprint(&claim);
        if spec_fingerprint != self.spec_fingerprint || claim.spec != self.claim.spec {
            self.spec_stamp = fresh_stamp();
        }
        self.spec_fingerprint = spec_fingerprint;
        self.exact_devices = exact_devices(&claim);
        let old = std::mem::replace(&mut *self.claim, claim);
        self.status_changed();
        old
    }

    /// Whether the claim has an allocation.
    pub fn allocated(&self) -> bool {
        self.claim.status.as_ref().is_some_and(|s| s.allocation.is_some())
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        object_key(&self.claim.metadata)
    }
}

impl Cluster {
    /// Builds the snapshot. Every problem is returned, not only the first.
    pub fn build<P: Into<StoredPod>>(
        nodes: Vec<Node>,
        pods: Vec<P>,
        priority_classes: &[PriorityClass],
        scheduler_names: &SchedulerNames,
    ) -> Result<Cluster, Vec<ModelError>> {
        let mut errors = Vec::new();
        let mut c = Cluster { scheduler_names: scheduler_names.clone(), ..Cluster::default() };
        errors.extend(crate::validate::priority_classes(priority_classes));
        c.set_priority_classes(priority_classes);

        // Objects are large: sort them through an index rather than moving them around.
        let mut nodes: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by(|a, b| {
            nodes[*a].as_ref().map(|n| &n.metadata.name).cmp(&nodes[*b].as_ref().map(|n| &n.metadata.name))
        });
        c.nodes.reserve_exact(nodes.len());
        for node in order.into_iter().filter_map(|i| nodes[i].take()) {
            match c.node_info(node) {
                Ok(info) => c.nodes.push(info),
                Err(e) => errors.push(e),
            }
        }
        // The nodes moved out: their buffer (1.5 KiB a slot) goes before the pods are built.
        drop(nodes);
        c.nodes_with_images =
            c.nodes.iter().filter(|n| crate::plugins::image_locality::has_images(&n.detail.node)).count();
        let node_ids: HashMap<String, NodeId> =
            c.nodes.iter().enumerate().map(|(i, n)| (n.name().to_string(), NodeId(i as u32))).collect();

        // Sorted by borrowed keys: copying every pod's namespace and name would cost the memory
        // of two strings per pod at the peak of the build.
        let pods: Vec<StoredPod> = pods.into_iter().map(Into::into).collect();
        let mut order: Vec<usize> = (0..pods.len()).collect();
        let key = |i: usize| (pods[i].meta().namespace.as_ref(), pods[i].meta().name.as_ref());
        order.sort_by(|a, b| key(*a).cmp(&key(*b)));
        let mut pods: Vec<Option<StoredPod>> = pods.into_iter().map(Some).collect();
        for pod in order.into_iter().filter_map(|i| pods[i].take()) {
            let info = match c.pod_info(pod, |name| node_ids.get(name).copied()) {
                Ok(info) => info,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let id = PodId(c.pods.len() as u32);
            if let PodState::Bound(n) = info.state {
                let d = c.nodes[n.0 as usize].account(&info, id, 1);
                c.inter_pod.add(d);
                c.node_journal.note(n);
            }
            c.pods.push(info);
        }
        c.node_order = zone_interleaved_order(&c.nodes);
        if errors.is_empty() { Ok(c) } else { Err(errors) }
    }

    /// Records the PriorityClasses (with the built-in system classes), the global default's
    /// value and the classes that never preempt.
    pub fn set_priority_classes(&mut self, priority_classes: &[PriorityClass]) {
        let mut classes: BTreeMap<String, i32> =
            SYSTEM_PRIORITY_CLASSES.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let mut global_default: Option<(&str, i32)> = None;
        for pc in priority_classes {
            let name = pc.metadata.name.as_deref().unwrap_or_default();
            let value = pc.value.unwrap_or(0);
            classes.insert(name.to_string(), value);
            if pc.global_default == Some(true) {
                // The API server allows one (`validate::priority_classes` refuses a second in
                // the input); with several, the lowest name wins deterministically.
                if global_default.is_none_or(|(n, _)| name < n) {
                    global_default = Some((name, value));
                }
            }
        }
        self.priority_classes = classes;
        self.never_preempting_classes = priority_classes
            .iter()
            .filter(|pc| pc.preemption_policy.as_deref() == Some("Never"))
            .filter_map(|pc| pc.metadata.name.clone())
            .collect();
        self.default_priority = global_default.map_or(0, |(_, v)| v);
        self.default_priority_class = global_default.map(|(n, _)| n.to_string());
    }

    /// A node as the scheduler sees it, holding no pods yet.
    pub(crate) fn node_info(&mut self, node: Node) -> Result<NodeInfo, ModelError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let status = node.status.as_ref();
        let (list, field) = match status.and_then(|s| s.allocatable.as_ref()) {
            Some(a) => (Some(a), "status.allocatable"),
            None => (status.and_then(|s| s.capacity.as_ref()), "status.capacity"),
        };
        let parsed = resources::parse_list(list, field).map_err(|e| ModelError {
            kind: "Node",
            object: name.clone(),
            field: Some(e.field),
            message: format!("invalid quantity {:?}: {}", e.value, e.source),
        })?;
        let mut allocatable = [0; INLINE];
        let mut scalar_allocatable = Vec::new();
        let mut allowed_pods = 0;
        for (rname, q) in &parsed {
            if rname == resources::PODS {
                allowed_pods = q.value();
                continue;
            }
            let id = self.resources.intern(rname);
            let i = id.0 as usize;
            if i < INLINE {
                allocatable[i] = amount(id, *q);
            } else {
                if scalar_allocatable.len() <= i - INLINE {
                    scalar_allocatable.resize(i - INLINE + 1, 0);
                }
                scalar_allocatable[i - INLINE] = amount(id, *q);
            }
        }
        if allowed_pods == 0 {
            self.warnings.push(format!("node {name} has no `pods` in status.allocatable: no pod fits on it"));
        }
        let spec = node.spec.as_ref();
        let taints = spec.and_then(|s| s.taints.clone()).unwrap_or_default();
        if let Some(e) = crate::validate::on("Node", &name, crate::validate::node_taints(&taints)).into_iter().next() {
            return Err(e);
        }
        let has_prefer = taints.iter().any(|t| t.effect == PREFER_NO_SCHEDULE);
        self.any_prefer_no_schedule |= has_prefer;
        Ok(NodeInfo {
            allocatable_divisors: allocatable.map(|a| Divisor::new(a.max(1) as u64)),
            allocatable,
            requested: [0; INLINE],
            non_zero_requested: [0, 0],
            allowed_pods,
            num_pods: 0,
            generation: 0,
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            has_taints: !taints.is_empty(),
            has_prefer_no_schedule_taint: has_prefer,
            affinity_pods: 0,
            anti_affinity_pods: 0,
            detail: Box::new(NodeDetail {
                labels: node.metadata.labels.clone().unwrap_or_default(),
                name,
                taints,
                scalar_allocatable,
                scalar_requested: Vec::new(),
                pods: Vec::new(),
                removed: false,
                node,
            }),
        })
    }

    /// The pods' specs the store keeps, and how many of them no pod holds (see
    /// [`crate::stored_pod::SpecTable`]).
    pub fn shared_specs(&self) -> (usize, usize) {
        (self.specs.len(), self.specs.unheld())
    }

    /// A pod and what the scheduler derives from it (state, priority, requests, shape); claims
    /// and its PodGroup are resolved later. `node_id` finds the node a bound pod names.
    pub(crate) fn pod_info(
        &mut self,
        mut pod: StoredPod,
        node_id: impl Fn(&str) -> Option<NodeId>,
    ) -> Result<PodInfo, ModelError> {
        let key = object_key(pod.meta());
        let err =
            |field: Option<String>, message: String| ModelError { kind: "Pod", object: key.clone(), field, message };
        let own = pod.take_requests();
        let requests = own.as_deref().or_else(|| pod.spec_requests());
        let (Some(requests), Some(spec)) = (requests, pod.spec()) else {
            return Err(err(Some("spec".into()), "required value".into()));
        };
        if let Some((field, message)) = crate::validate::pod_spec(spec).into_iter().next() {
            return Err(err(Some(field), message));
        }
        let phase = pod.status().and_then(|s| s.phase.as_deref());
        let state = if matches!(phase, Some("Succeeded" | "Failed")) {
            PodState::Terminated
        } else if let Some(node) = pod.node_name().filter(|n| !n.is_empty()) {
            match node_id(node) {
                Some(id) => PodState::Bound(id),
                None => {
                    self.warnings.push(format!(
                        "pod {key} is bound to node {node}, which is not in the input; its usage is not counted"
                    ));
                    PodState::BoundElsewhere(node.to_string())
                }
            }
        } else if !self.scheduler_names.serves(spec.scheduler_name.as_deref()) {
            PodState::OtherScheduler(spec.scheduler_name.clone().unwrap_or_default())
        } else if let Some(gates) = spec.scheduling_gates.as_ref().filter(|g| !g.is_empty()) {
            PodState::Gated(gates.iter().map(|g| g.name.clone()).collect())
        } else {
            PodState::Pending
        };
        let priority = match (spec.priority, spec.priority_class_name.as_deref().filter(|n| !n.is_empty())) {
            (Some(p), _) => p,
            (None, Some(class)) => match self.priority_classes.get(class) {
                Some(v) => *v,
                None => {
                    return Err(err(
                        Some("spec.priorityClassName".into()),
                        format!("PriorityClass {class:?} not found"),
                    ));
                }
            },
            (None, None) => self.default_priority,
        };
        let crate::stored_pod::Requests { requests, non_zero } = requests
            .as_ref()
            .map_err(|e| err(Some(e.field.clone()), format!("invalid quantity {:?}: {}", e.value, e.source)))?;
        let non_zero = *non_zero;
        let mut reqs: Vec<(ResourceId, i64)> = requests
            .iter()
            .filter(|(n, _)| &**n != resources::PODS)
            .map(|(n, q)| {
                let id = self.resources.intern(n);
                (id, amount(id, *q))
            })
            .filter(|(_, v)| *v != 0)
            .collect();
        reqs.sort_unstable();
        let (reqs, shape) = match self.shapes.get_key_value(reqs.as_slice()) {
            Some((shared, shapes)) => {
                let known = shapes.iter().find(|(nz, _)| *nz == non_zero).map(|(_, shape)| *shape);
                (shared.clone(), known)
            }
            None => (std::sync::Arc::from(reqs), None),
        };
        let shape = match shape {
            Some(shape) => shape,
            None => {
                let next = self.shape_count;
                self.shape_count += 1;
                self.shapes.entry(reqs.clone()).or_default().push((non_zero, next));
                next
            }
        };
        let affinity = crate::plugins::inter_pod_affinity::AffinityTerms::of(&pod);
        let preemption_never = spec.preemption_policy.as_deref().map(|p| p == "Never");
        let spread_hard = crate::plugins::pod_topology_spread::own_hard(spec);
        pod.share_spec(&mut self.specs);
        Ok(PodInfo {
            affinity,
            preemption_never,
            spread_hard,
            pod,
            key,
            priority,
            requests: reqs,
            non_zero,
            shape,
            state,
            claims: PodClaims::new(),
            dra_extended: Vec::new(),
            stale_extended_claim: None,
            group: None,
        })
    }

    /// Why a pod's template is not there: not found, or not made yet by the object that will.
    fn missing_template(&self, namespace: &str, template: &str) -> Unresolved {
        let made_by = self.template_providers.get(&(namespace.to_string(), template.to_string())).cloned();
        Unresolved::TemplateNotFound { template: template.to_string(), made_by }
    }

    /// Adds the input's ResourceClaims and resolves every pod's `spec.resourceClaims`: a named
    /// claim must exist; a template claim of a pending pod is generated from its template as
    /// kube-controller-manager's resourceclaim controller would (name `<pod>-<claim>-<suffix>`,
    /// owned by the pod, annotated with the pod's claim name, recorded in
    /// `status.resourceClaimStatuses`).
    pub fn add_claims(&mut self, claims: Vec<ResourceClaim>, templates: &[ResourceClaimTemplate]) {
        let mut index: HashMap<(String, String), ClaimId> = HashMap::new();
        for c in claims {
            let key = (
                c.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
                c.metadata.name.clone().unwrap_or_default(),
            );
            index.insert(key, ClaimId(self.claims.len() as u32));
            self.claims.push(ClaimInfo::new(c, false, None));
        }
        for pi in 0..self.pods.len() {
            let pod = &self.pods[pi];
            let ns = pod.namespace().to_string();
            let pod_name = pod.name().to_string();
            let pending = pod.state == PodState::Pending;
            let spec_claims = pod.pod.spec().and_then(|s| s.resource_claims.clone()).unwrap_or_default();
            let statuses = pod.pod.status().and_then(|s| s.resource_claim_statuses.clone()).unwrap_or_default();
            let group = match pod.group {
                Some(Ok(g)) => Some(g),
                _ => None,
            };
            let mut resolved = PodClaims::new();
            for pc in &spec_claims {
                // An entry identical to one of the PodGroup's is the group's claim (KEP 5729).
                if let Some(g) = group
                    && let Some(entry) = group_entry(&self.groups[g].group, pc).cloned()
                {
                    let r = self.group_claim(g, &entry, &index, templates);
                    if let Ok(at) = r {
                        index.insert((ns.clone(), self.claims[at].claim.metadata.name.clone().unwrap_or_default()), at);
                        if entry.resource_claim_template_name.is_some() {
                            let name = self.claims[at].claim.metadata.name.clone();
                            let status = self.pods[pi].pod.ensure_status();
                            let list = status.resource_claim_statuses.get_or_insert_with(Vec::new);
                            if !list.iter().any(|s| s.name == pc.name) {
                                list.push(PodResourceClaimStatus { name: pc.name.clone(), resource_claim_name: name });
                            }
                        }
                    }
                    resolved.push(r.map_err(Box::new));
                    continue;
                }
                let r = if let Some(name) = pc.resource_claim_name.as_deref() {
                    index
                        .get(&(ns.clone(), name.to_string()))
                        .copied()
                        .ok_or_else(|| Unresolved::ClaimNotFound(name.to_string()))
                } else if let Some(template) = pc.resource_claim_template_name.as_deref() {
                    let existing =
                        statuses.iter().find(|s| s.name == pc.name).and_then(|s| s.resource_claim_name.clone());
                    match existing {
                        Some(name) => index
                            .get(&(ns.clone(), name.clone()))
                            .copied()
                            .ok_or_else(|| Unresolved::ClaimNotFound(name.clone())),
                        None if !pending => Err(Unresolved::NoGeneratedClaim { entry: pc.name.clone() }),
                        None => match find_template(templates, &ns, template) {
                            None => Err(self.missing_template(&ns, template)),
                            Some(t) => {
                                let claim = generate_claim(&self.pods[pi].pod, &pod_name, &ns, &pc.name, t);
                                let name = claim.metadata.name.clone().unwrap_or_default();
                                let at = ClaimId(self.claims.len() as u32);
                                index.insert((ns.clone(), name.clone()), at);
                                self.claims.push(ClaimInfo::new(claim, true, None));
                                let status = self.pods[pi].pod.ensure_status();
                                status.resource_claim_statuses.get_or_insert_with(Vec::new).push(
                                    PodResourceClaimStatus { name: pc.name.clone(), resource_claim_name: Some(name) },
                                );
                                Ok(at)
                            }
                        },
                    }
                } else {
                    Err(Unresolved::NoSource { entry: pc.name.clone() })
                };
                resolved.push(r.map_err(Box::new));
            }
            for c in resolved.iter().flatten() {
                self.claims[*c].users += 1;
            }
            self.pods[pi].claims = resolved;
        }
    }

    /// Finds, for every pending pod, the extended resources a DeviceClass backs (KEP 5004): a
    /// class's `spec.extendedResourceName`, and `deviceclass.resource.kubernetes.io/<class>` for
    /// every class. When several classes name one resource the most recently created wins, then
    /// the lexicographically first name, as kube-scheduler's mapping decides. A special
    /// extended-resources claim the pod already owns (from an earlier attempt) is recorded too.
    /// Call after [`Cluster::add_claims`].
    pub fn map_extended_resources(&mut self, classes: &[DeviceClass]) {
        let mut mapping: HashMap<String, &DeviceClass> = HashMap::new();
        let newer = |a: &DeviceClass, b: &DeviceClass| {
            let (ta, tb) = (&a.metadata.creation_timestamp, &b.metadata.creation_timestamp);
            ta.cmp(tb).reverse().then_with(|| a.metadata.name.cmp(&b.metadata.name)).is_lt()
        };
        for class in classes {
            let name = class.metadata.name.clone().unwrap_or_default();
            mapping.insert(format!("{}{name}", resources::DEVICE_CLASS_RESOURCE_PREFIX), class);
            if let Some(r) = class.spec.as_ref().and_then(|s| s.extended_resource_name.as_deref()) {
                match mapping.get(r) {
                    Some(other) if !newer(class, other) => {}
                    _ => {
                        mapping.insert(r.to_string(), class);
                    }
                }
            }
        }
        self.extended_classes =
            mapping.into_iter().map(|(r, c)| (r, c.metadata.name.clone().unwrap_or_default())).collect();
        for pi in 0..self.pods.len() {
            self.map_pod_extended_resources(pi);
        }
    }

    /// The DRA-backed extended resources of one pending pod, by the classes
    /// [`Cluster::map_extended_resources`] last mapped (the store calls it for every pod it takes).
    pub(crate) fn map_pod_extended_resources(&mut self, pi: usize) {
        let pod = &self.pods[pi];
        if self.extended_classes.is_empty() || pod.state != PodState::Pending {
            return;
        }
        let mut extended: Vec<(ResourceId, String)> = pod
            .requests
            .iter()
            .filter(|(id, v)| *v > 0 && id.0 as usize >= INLINE)
            .filter_map(|(id, _)| {
                let name = self.resources.name(*id);
                if !resources::is_dra_extended_resource_name(name) {
                    return None;
                }
                self.extended_classes.get(name).map(|c| (*id, c.clone()))
            })
            .collect();
        extended.sort_by(|a, b| self.resources.name(a.0).cmp(self.resources.name(b.0)));
        let stale = if extended.is_empty() { None } else { self.owned_extended_claim(pod) };
        let pod = &mut self.pods[pi];
        pod.dra_extended = extended;
        pod.stale_extended_claim = stale.map(String::into_boxed_str);
    }

    /// The special extended-resources claim a pod already owns (from an earlier attempt).
    fn owned_extended_claim(&self, pod: &PodInfo) -> Option<String> {
        let uid = pod.pod.meta().uid.as_deref().unwrap_or_default();
        self.claims
            .iter()
            .find(|c| {
                c.claim.metadata.namespace.as_deref().unwrap_or("default") == pod.namespace()
                    && c.claim
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION))
                        .is_some_and(|v| v == "true")
                    && c.claim
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.controller == Some(true) && o.name == pod.name() && o.uid == uid)
            })
            .map(|c| c.key())
    }

    /// Adds the input's PodGroups and links every pod's `spec.schedulingGroup.podGroupName` to its
    /// group (same namespace). A pod naming a group that is not in the input keeps the reason.
    pub fn add_pod_groups(&mut self, mut groups: Vec<PodGroup>) {
        let key = |g: &PodGroup| object_key(&g.metadata);
        groups.sort_by_key(key);
        let index: HashMap<String, usize> = groups.iter().enumerate().map(|(i, g)| (key(g), i)).collect();
        self.groups = groups.into_iter().map(|g| self.group_info(g)).collect();
        for (pi, pod) in self.pods.iter_mut().enumerate() {
            let Some(name) =
                pod.pod.spec().and_then(|s| s.scheduling_group.as_ref()).and_then(|g| g.pod_group_name.as_deref())
            else {
                continue;
            };
            let group_key = format!("{}/{name}", pod.pod.meta().namespace.as_deref().unwrap_or("default"));
            pod.group = Some(match index.get(&group_key) {
                Some(&gi) => {
                    self.groups[gi].members.push(PodId(pi as u32));
                    Ok(GroupId(gi as u32))
                }
                None => Err(Box::new(Unresolved::GroupNotFound(group_key))),
            });
        }
        let Cluster { groups, pods, .. } = self;
        for g in groups.iter_mut() {
            g.members.sort_by(|a, b| pods[a.0 as usize].key.cmp(&pods[b.0 as usize].key));
        }
    }

    /// `preemptionPolicy: Never`, as admission resolves it: the object's own field, else its
    /// PriorityClass's.
    pub fn never_preempts(&self, policy: Option<&str>, class: Option<&str>) -> bool {
        match policy {
            Some(p) => p == "Never",
            None => class.is_some_and(|c| self.never_preempting_classes.contains(c)),
        }
    }

    /// [`Cluster::never_preempts`] for a pod: its own policy, else its PriorityClass's (its spec
    /// read only when some class says `Never`).
    pub fn pod_never_preempts(&self, pod: &PodInfo) -> bool {
        match pod.preemption_never {
            Some(never) => never,
            None if self.never_preempting_classes.is_empty() => false,
            None => self.never_preempts(None, pod.pod.spec().and_then(|s| s.priority_class_name.as_deref())),
        }
    }

    /// A PodGroup as the scheduler sees it: its policy, priority and topology key, with no
    /// members and no parent linked yet.
    pub(crate) fn group_info(&self, g: PodGroup) -> GroupInfo {
        let policy = &g.spec.scheduling_policy;
        // A minCount below 1 is refused where the model is built from the input
        // (`validate::pod_group`); the clamp only guards objects that arrive another way.
        let (gang, min_count) = match &policy.gang {
            Some(gang) => (true, gang.min_count.max(1) as usize),
            None => (false, 1),
        };
        let priority = self.resolve_priority(g.spec.priority, g.spec.priority_class_name.as_deref());
        let topology_key = g
            .spec
            .scheduling_constraints
            .as_ref()
            .and_then(|c| c.topology.as_ref())
            .and_then(|t| t.first())
            .map(|t| t.key.clone());
        let key = object_key(&g.metadata);
        let device_topology = self.device_topology_of(&g);
        GroupInfo {
            key,
            group: g,
            min_count,
            gang,
            members: Vec::new(),
            parent: None,
            priority,
            topology_key,
            device_topology,
        }
    }

    /// A PodGroup's device topology: its own annotations, else those of the Workload its
    /// `spec.workloadRef` names (same namespace).
    pub(crate) fn device_topology_of(
        &self,
        g: &PodGroup,
    ) -> Option<Result<crate::device_topology::DeviceTopology, String>> {
        use crate::device_topology::{KEY_ANNOTATION, SCOPE_ANNOTATION, from_annotations};
        let own = g.metadata.annotations.as_ref();
        let asks = |a: &BTreeMap<String, String>| a.contains_key(KEY_ANNOTATION) || a.contains_key(SCOPE_ANNOTATION);
        let (annotations, whose) = match own.filter(|a| asks(a)) {
            Some(a) => (a, String::new()),
            None => {
                let ns = g.metadata.namespace.as_deref().unwrap_or("default");
                let name = &g.spec.workload_ref.as_ref()?.workload_name;
                (
                    self.workload_annotations.get(&format!("{ns}/{name}")).filter(|a| asks(a))?,
                    format!("workload {ns}/{name}: "),
                )
            }
        };
        from_annotations(Some(annotations)).map(|r| {
            r.map_err(|errors| {
                let list: Vec<String> = errors.iter().map(|(f, m)| format!("{whose}{f}: {m}")).collect();
                list.join("; ")
            })
        })
    }

    /// A group's priority as admission resolves it: `priority`, else the class's value, else the
    /// global default (0 without one).
    fn resolve_priority(&self, priority: Option<i32>, class: Option<&str>) -> Result<i32, PriorityClassNotFound> {
        match (priority, class.filter(|c| !c.is_empty())) {
            (Some(p), _) => Ok(p),
            (None, Some(class)) => {
                self.priority_classes.get(class).copied().ok_or_else(|| PriorityClassNotFound(class.to_string()))
            }
            (None, None) => Ok(self.default_priority),
        }
    }

    /// Adds the CompositePodGroups and links every PodGroup and CompositePodGroup to its parent
    /// (`spec.parentCompositePodGroupName`, same namespace). Call after
    /// [`Cluster::add_pod_groups`].
    pub fn add_composite_pod_groups(&mut self, mut composites: Vec<CompositePodGroup>) {
        let key = object_key;
        composites.sort_by_key(|c| key(&c.metadata));
        let index: HashMap<String, usize> = composites.iter().enumerate().map(|(i, c)| (key(&c.metadata), i)).collect();
        let resolve = |meta: &ObjectMeta, parent: Option<&str>| {
            let parent = parent?;
            let k = format!("{}/{parent}", meta.namespace.as_deref().unwrap_or("default"));
            Some(index.get(&k).map(|i| CompositeId(*i as u32)).ok_or(k))
        };
        self.composites = composites
            .into_iter()
            .map(|c| {
                let parent = resolve(&c.metadata, c.spec.parent_composite_pod_group_name.as_deref());
                CompositeInfo { parent, ..self.composite_info(c) }
            })
            .collect();
        for gi in (0..self.groups.len() as u32).map(GroupId) {
            let g = &self.groups[gi].group;
            let parent = resolve(&g.metadata, g.spec.parent_composite_pod_group_name.as_deref());
            if let Some(Ok(p)) = parent {
                self.composites[p].children.push(GroupNode::Group(gi));
            }
            self.groups[gi].parent = parent;
        }
        for ci in (0..self.composites.len() as u32).map(CompositeId) {
            if let Some(Ok(p)) = self.composites[ci].parent {
                self.composites[p].children.push(GroupNode::Composite(ci));
            }
        }
        let composites = &mut self.composites;
        let groups = &self.groups;
        for i in 0..composites.len() {
            let mut children = std::mem::take(&mut composites[i].children);
            children.sort_by(|a, b| {
                let k = |n: &GroupNode| match *n {
                    GroupNode::Group(g) => groups[g].key.clone(),
                    GroupNode::Composite(c) => composites[c].key.clone(),
                };
                k(a).cmp(&k(b))
            });
            composites[i].children = children;
        }
    }

    /// A CompositePodGroup's model, not linked into a tree yet (no parent, no children).
    pub(crate) fn composite_info(&self, c: CompositePodGroup) -> CompositeInfo {
        let policy = &c.spec.scheduling_policy;
        // Below 1 is refused at input (`validate::composite_pod_group`); see `group_info`.
        let (gang, min_group_count) = match &policy.gang {
            Some(gang) => (true, gang.min_group_count.max(1) as usize),
            None => (false, 1),
        };
        let priority = self.resolve_priority(c.spec.priority, c.spec.priority_class_name.as_deref());
        let topology_key = c
            .spec
            .scheduling_constraints
            .as_ref()
            .and_then(|c| c.topology.as_ref())
            .and_then(|t| t.first())
            .map(|t| t.key.clone());
        let key = object_key(&c.metadata);
        CompositeInfo {
            topology_key,
            key,
            composite: c,
            min_group_count,
            gang,
            parent: None,
            children: Vec::new(),
            priority,
        }
    }

    /// Adds the PodDisruptionBudgets. Without a `status` (a manifest, not an object read from
    /// a cluster) `disruptionsAllowed` is computed as the disruption controller does for pods
    /// without a scalable controller: expected = the pods the selector matches, healthy = those
    /// running; `minAvailable` (a number, or a percentage of expected rounded up) or
    /// `maxUnavailable` (expected minus it) gives the desired healthy count. Call after the pods
    /// are built.
    pub fn add_disruption_budgets(&mut self, budgets: Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget>) {
        let mut infos: Vec<BudgetInfo> = budgets.into_iter().map(|b| self.budget_info(b)).collect();
        infos.sort_by(|a, b| a.key.cmp(&b.key));
        self.budgets = infos;
    }

    /// A PodDisruptionBudget with the disruptions it allows (see
    /// [`Cluster::add_disruption_budgets`]).
    pub(crate) fn budget_info(&self, b: k8s_openapi::api::policy::v1::PodDisruptionBudget) -> BudgetInfo {
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        let scaled = |v: &IntOrString, total: i32| -> i32 {
            match v {
                IntOrString::Int(i) => *i,
                IntOrString::String(s) => {
                    let p: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
                    ((p * total as i64 + 99) / 100) as i32
                }
            }
        };
        let computed = || {
            let ns = b.metadata.namespace.as_deref().unwrap_or("default");
            let matched: Vec<&PodInfo> = self
                .pods
                .iter()
                .filter(|p| p.pod.meta().namespace.as_deref().unwrap_or("default") == ns)
                .filter(|p| !matches!(p.state, PodState::Terminated | PodState::Deleted))
                .filter(|p| self.budget_selects(&b, p))
                .collect();
            let expected = matched.len() as i32;
            let healthy = matched.iter().filter(|p| matches!(p.state, PodState::Bound(_))).count() as i32;
            let spec = b.spec.as_ref();
            let desired =
                match (spec.and_then(|s| s.min_available.as_ref()), spec.and_then(|s| s.max_unavailable.as_ref())) {
                    (Some(min), _) => scaled(min, expected),
                    (None, Some(max)) => expected - scaled(max, expected),
                    (None, None) => expected,
                };
            (healthy - desired).max(0)
        };
        let allowed = b.status.as_ref().and_then(|s| s.disruptions_allowed).unwrap_or_else(computed);
        let key = object_key(&b.metadata);
        BudgetInfo { key, budget: b, disruptions_allowed: allowed }
    }

    /// Whether a PodDisruptionBudget covers a pod: same namespace and the selector matches its
    /// labels (a budget without a selector covers nothing; an empty one covers every pod).
    pub fn budget_selects(&self, b: &k8s_openapi::api::policy::v1::PodDisruptionBudget, p: &PodInfo) -> bool {
        let same_ns = b.metadata.namespace.as_deref().unwrap_or("default")
            == p.pod.meta().namespace.as_deref().unwrap_or("default");
        let Some(sel) = b.spec.as_ref().and_then(|s| s.selector.as_ref()) else { return false };
        let empty = BTreeMap::new();
        same_ns && muster_api::selectors::label_selector_matches(sel, p.pod.meta().labels.as_ref().unwrap_or(&empty))
    }

    /// The pending members of PodGroup `g` in its cycle's order: priority, then age, then name.
    pub fn pending_members(&self, g: GroupId) -> Vec<PodId> {
        let mut pending: Vec<PodId> =
            self.groups[g].members.iter().copied().filter(|m| self.pod(*m).state == PodState::Pending).collect();
        debug_assert!(pending.is_sorted_by(|a, b| self.pod(*a).key <= self.pod(*b).key), "members are in name order");
        // A stable sort of members in name order: names break the ties without being compared
        // (members of one gang mostly share their priority and age: a pass over a sorted run).
        pending.sort_by(|a, b| {
            let (a, b) = (self.pod(*a), self.pod(*b));
            b.priority
                .cmp(&a.priority)
                .then_with(|| a.pod.meta().creation_timestamp.cmp(&b.pod.meta().creation_timestamp))
        });
        pending
    }

    /// The parent of a group tree node, if it names one.
    pub fn parent(&self, node: GroupNode) -> Option<&Result<CompositeId, String>> {
        match node {
            GroupNode::Group(g) => self.groups[g].parent.as_ref(),
            GroupNode::Composite(c) => self.composites[c].parent.as_ref(),
        }
    }

    /// `namespace/name` of a group tree node.
    pub fn node_key(&self, node: GroupNode) -> &str {
        match node {
            GroupNode::Group(g) => &self.groups[g].key,
            GroupNode::Composite(c) => &self.composites[c].key,
        }
    }

    /// The root of the tree `node` is in: the node itself when it has no parent. A missing
    /// parent, a cycle in the parent chain or a tree deeper than [`MAX_TREE_DEPTH`] is an error.
    pub fn root(&self, node: GroupNode) -> Result<GroupNode, TreeError> {
        let mut at = node;
        let mut path = vec![node];
        while let Some(parent) = self.parent(at) {
            let p = match parent {
                Ok(p) => GroupNode::Composite(*p),
                Err(k) => {
                    return Err(TreeError::MissingParent {
                        node: self.node_key(at).to_string(),
                        parent: k.to_string(),
                    });
                }
            };
            if path.contains(&p) {
                return Err(TreeError::Cycle(path.iter().chain([&p]).map(|n| self.node_key(*n).to_string()).collect()));
            }
            path.push(p);
            at = p;
        }
        if path.len() > MAX_TREE_DEPTH {
            return Err(TreeError::TooDeep(path.iter().rev().map(|n| self.node_key(*n).to_string()).collect()));
        }
        Ok(at)
    }

    /// The PodGroups of the tree under a CompositePodGroup, depth first in name order.
    pub fn leaves(&self, composite: CompositeId) -> Vec<GroupId> {
        let mut out = Vec::new();
        let mut stack: Vec<GroupNode> = vec![GroupNode::Composite(composite)];
        let mut seen: std::collections::HashSet<GroupNode> = std::collections::HashSet::new();
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            match n {
                GroupNode::Group(g) => out.push(g),
                GroupNode::Composite(c) => stack.extend(self.composites[c].children.iter().rev()),
            }
        }
        out
    }

    /// The Workloads a tree's groups name (`spec.workloadRef.workloadName`); a valid tree names
    /// one.
    pub fn tree_workloads(&self, composite: CompositeId) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        let mut stack = vec![composite];
        while let Some(c) = stack.pop() {
            let info = &self.composites[c];
            out.insert(info.composite.spec.workload_ref.workload_name.clone());
            for child in &info.children {
                match *child {
                    GroupNode::Group(g) => {
                        if let Some(w) = &self.groups[g].group.spec.workload_ref {
                            out.insert(w.workload_name.clone());
                        }
                    }
                    GroupNode::Composite(k) if k != composite && !stack.contains(&k) => stack.push(k),
                    GroupNode::Composite(_) => {}
                }
            }
        }
        out
    }

    /// The claim a PodGroup's `spec.resourceClaims` entry names: an existing claim, or one
    /// generated from the template once per PodGroup (owned by it, named from the PodGroup and
    /// the entry, recorded in the PodGroup's `status.resourceClaimStatuses`).
    fn group_claim(
        &mut self,
        g: GroupId,
        entry: &k8s_openapi::api::scheduling::v1beta1::PodGroupResourceClaim,
        index: &HashMap<(String, String), ClaimId>,
        templates: &[ResourceClaimTemplate],
    ) -> Result<ClaimId, Unresolved> {
        let group = &self.groups[g].group;
        let ns = group.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        if let Some(name) = entry.resource_claim_name.as_deref() {
            let at = *index.get(&(ns, name.to_string())).ok_or_else(|| Unresolved::ClaimNotFound(name.to_string()))?;
            self.claims[at].group = Some(g);
            return Ok(at);
        }
        // A claim generated earlier is recorded in the PodGroup's status: use it.
        let generated = group
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .into_iter()
            .flatten()
            .find(|s| s.name == entry.name)
            .and_then(|s| s.resource_claim_name.clone());
        if let Some(name) = generated {
            let at = *index
                .get(&(ns, name.clone()))
                .ok_or_else(|| Unresolved::GroupClaimNotFound { claim: name.clone(), entry: entry.name.clone() })?;
            self.claims[at].group = Some(g);
            return Ok(at);
        }
        let template = entry.resource_claim_template_name.as_deref().unwrap_or_default();
        if let Some(at) = self
            .claims
            .iter()
            .position(|c| {
                c.group == Some(g)
                    && c.claim
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get("resource.kubernetes.io/pod-claim-name"))
                        == Some(&entry.name)
            })
            .map(|i| ClaimId(i as u32))
        {
            return Ok(at);
        }
        let t = find_template(templates, &ns, template)
            .ok_or_else(|| Unresolved::TemplateNotFound { template: template.to_string(), made_by: None })?;
        let claim = generate_group_claim(group, &entry.name, t);
        let name = claim.metadata.name.clone();
        let at = ClaimId(self.claims.len() as u32);
        self.claims.push(ClaimInfo::new(claim, true, Some(g)));
        let status = self.groups[g].group.status.get_or_insert_with(Default::default);
        status.resource_claim_statuses.get_or_insert_with(Vec::new).push(
            k8s_openapi::api::scheduling::v1beta1::PodGroupResourceClaimStatus {
                name: entry.name.clone(),
                resource_claim_name: name,
            },
        );
        Ok(at)
    }

    pub fn node(&self, id: NodeId) -> &NodeInfo {
        &self.nodes[id.0 as usize]
    }

    /// A generation value no state had before. Remembered verdicts (score and allocator memos)
    /// are valid while the generation they were recorded at is current; values are never
    /// reused, so a rolled-back Reserve can put the earlier generation back and with it the
    /// verdicts for that state, without ever matching a verdict of another state.
    /// Pod `pod` (in its slot) comes to node `node` (`sign` 1) or leaves it (-1): the node's
    /// requests, pods and generation ([`NodeInfo::account`]), the cluster's counts of pods with
    /// affinity terms, and the node journal.
    pub fn account(&mut self, node: NodeId, pod: PodId, sign: i64) {
        let Cluster { nodes, pods, inter_pod, node_journal, .. } = self;
        inter_pod.add(nodes[node.0 as usize].account(&pods[pod.0 as usize], pod, sign));
        node_journal.note(node);
    }

    pub fn fresh_generation(&mut self) -> u64 {
        // Above the generations `NodeInfo::account` counts up from 0 while a snapshot is built.
        // A stride, so that the `+ 1`s of `NodeInfo::account` from one fresh value never reach
        // the next one.
        self.generation_counter = self.generation_counter.max(1 << 40) + (1 << 20);
        self.generation_counter
    }

    pub fn pod(&self, id: PodId) -> &PodInfo {
        &self.pods[id.0 as usize]
    }
}

/// `topology.kubernetes.io/region` + zone, as `utilnode.GetZoneKey` builds it.
pub(crate) fn zone_key(labels: &BTreeMap<String, String>) -> String {
    let get = |a: &str, b: &str| labels.get(a).or_else(|| labels.get(b)).cloned().unwrap_or_default();
    let region = get("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region");
    let zone = get("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone");
    if region.is_empty() && zone.is_empty() { String::new() } else { format!("{region}:\x00:{zone}") }
}

/// kube-scheduler's `nodeTree.list()`: one node from each zone in turn (zones in order of first
/// appearance among the nodes sorted by name; removed nodes left out).
pub(crate) fn zone_interleaved_order(nodes: &[NodeInfo]) -> Vec<NodeId> {
    let mut by_name: Vec<usize> = (0..nodes.len()).filter(|i| !nodes[*i].detail.removed).collect();
    if !by_name.is_sorted_by(|a, b| nodes[*a].name() <= nodes[*b].name()) {
        by_name.sort_by(|a, b| nodes[*a].name().cmp(nodes[*b].name()));
    }
    let mut zones: Vec<(String, Vec<NodeId>)> = Vec::new();
    for (i, n) in by_name.into_iter().map(|i| (i, &nodes[i])) {
        let key = zone_key(&n.detail.labels);
        match zones.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(NodeId(i as u32)),
            None => zones.push((key, vec![NodeId(i as u32)])),
        }
    }
    let total: usize = zones.iter().map(|(_, l)| l.len()).sum();
    let mut order = Vec::with_capacity(total);
    let mut round = 0;
    while order.len() < total {
        for (_, list) in &zones {
            if let Some(id) = list.get(round) {
                order.push(*id);
            }
        }
        round += 1;
    }
    order
}

/// The claim kube-controller-manager creates for a pod's template claim. The name's suffix is
/// derived from the pod and claim names (upstream's is random), so that plans are reproducible.
/// The ResourceClaimTemplate `namespace/name` of `templates`.
pub fn find_template<'t>(
    templates: &'t [ResourceClaimTemplate],
    namespace: &str,
    name: &str,
) -> Option<&'t ResourceClaimTemplate> {
    templates.iter().find(|t| {
        t.metadata.name.as_deref() == Some(name) && t.metadata.namespace.as_deref().unwrap_or("default") == namespace
    })
}

/// The entry of `group`'s `spec.resourceClaims` that a member's entry is identical to (same
/// name, claim and template): that entry is the group's claim, not the pod's (KEP 5729).
pub fn group_entry<'g>(
    group: &'g PodGroup,
    entry: &k8s_openapi::api::core::v1::PodResourceClaim,
) -> Option<&'g k8s_openapi::api::scheduling::v1beta1::PodGroupResourceClaim> {
    group.spec.resource_claims.iter().flatten().find(|e| {
        e.name == entry.name
            && e.resource_claim_name == entry.resource_claim_name
            && e.resource_claim_template_name == entry.resource_claim_template_name
    })
}

/// The claim the resourceclaim controller makes from template `t` for entry `entry` of a
/// PodGroup's `spec.resourceClaims` (KEP 5729): named from the PodGroup and the entry (a derived
/// suffix where upstream draws a random one), owned by the PodGroup.
pub fn generate_group_claim(group: &PodGroup, entry: &str, t: &ResourceClaimTemplate) -> ResourceClaim {
    let ns = group.metadata.namespace.as_deref().unwrap_or("default");
    let name = group.metadata.name.as_deref().unwrap_or_default();
    let uid = group.metadata.uid.as_deref().unwrap_or_default();
    generate_claim_for(ns, controller_ref("scheduling.k8s.io/v1beta1", "PodGroup", name, uid), entry, t)
}

pub fn generate_claim(
    pod: &dyn PodObject,
    pod_name: &str,
    ns: &str,
    claim_name: &str,
    t: &ResourceClaimTemplate,
) -> ResourceClaim {
    let uid = pod.meta().uid.as_deref().unwrap_or_default();
    generate_claim_for(ns, controller_ref("v1", "Pod", pod_name, uid), claim_name, t)
}

/// The controller owner reference of a generated claim.
fn controller_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A claim from template `t` for `owner`'s entry `claim_name`, named `<owner>-<entry>-<suffix>`
/// and owned by `owner`.
fn generate_claim_for(
    ns: &str,
    owner_ref: OwnerReference,
    claim_name: &str,
    t: &ResourceClaimTemplate,
) -> ResourceClaim {
    let owner = owner_ref.name.as_str();
    let suffix = name_suffix(&[ns, owner, claim_name]);
    let mut base = format!("{owner}-{claim_name}");
    base.truncate(57);
    let spec = t.spec.as_ref().and_then(|s| s.spec.clone()).unwrap_or_default();
    let template_meta = t.spec.as_ref().and_then(|s| s.metadata.clone()).unwrap_or_default();
    let mut annotations = template_meta.annotations.unwrap_or_default();
    annotations.insert("resource.kubernetes.io/pod-claim-name".into(), claim_name.into());
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(format!("{base}-{suffix}")),
            namespace: Some(ns.into()),
            labels: template_meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![owner_ref]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
