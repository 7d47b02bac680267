//! The cluster model as a store that takes one change at a time ([`Cluster::apply`]), as a live
//! scheduler's informers and a simulator's world feed it: nodes and pods added, changed and
//! deleted, each change costing what it touches, never the size of the cluster.
//!
//! Ids are slots that survive other inserts and deletes: a deleted pod's slot is reused by a
//! later pod, a deleted node keeps its slot (marked removed; nothing is placed there). Every
//! decision reads names, not slots, where order matters (the queue's order, victims' order), so
//! the same changes in any order give the same plan. Generations are bumped here, by the store.
//!
//! References are lazy: a pod added with a claim the store does not have yet waits (its PreFilter
//! says which) and is re-resolved when the claim arrives. The store never creates objects: a
//! claim from a template is the one `status.resourceClaimStatuses` names, made by the claim
//! controller (kube-controller-manager in a live cluster; `plan` generates them when it builds
//! the snapshot).
//!
//! DeviceClasses, ResourceSlices and DeviceTaintRules are not changes of the store: they are the
//! allocator's inputs, which a world replaces as a whole.

use muster_api::PodObject;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;

mod composite;
mod group_claims;
mod pod_index;
mod workload;

use crate::cluster::{
    ClaimId, ClaimInfo, Cluster, GroupId, ModelError, NameMap, NodeId, PodId, PodInfo, PodState, Unresolved,
};
use crate::cycle::QueueEntry;
use crate::queue::Wake;
use crate::stored_pod::StoredPod;

/// One change to the cluster.
#[derive(Clone, Debug)]
pub enum Change {
    /// A node added or changed (labels, taints, `unschedulable`, allocatable).
    UpsertNode(Box<Node>),
    /// A node deleted, by name.
    DeleteNode(String),
    /// A pod added or changed (bound, finished, its requests resized).
    UpsertPod(Box<Pod>),
    /// The same, in the form the store keeps: a world that changes a copy of a pod it read from
    /// the store (the simulator binding it) hands it back as it is, rather than rebuilding the
    /// whole object (its container lists unpacked only to be packed again). It is validated as
    /// an `UpsertPod` is.
    UpsertStoredPod(Box<StoredPod>),
    /// A pod deleted, by `namespace/name`.
    DeletePod(String),
    /// A ResourceClaim added or changed (allocated, reserved, deallocated by the claim
    /// controller when its pods are gone).
    UpsertClaim(Box<ResourceClaim>),
    /// A ResourceClaim deleted, by `namespace/name`.
    DeleteClaim(String),
    /// A PodGroup added or changed (its pods join it whenever they come).
    UpsertPodGroup(Box<PodGroup>),
    /// A PodGroup deleted, by `namespace/name`: its pods are scheduled alone, waiting for it.
    DeletePodGroup(String),
    /// A PodDisruptionBudget added or changed (its `status.disruptionsAllowed`, written by the
    /// disruption controller, is what preemption reads; without a status it is computed from
    /// the pods it covers now).
    UpsertPodDisruptionBudget(Box<PodDisruptionBudget>),
    /// A PodDisruptionBudget deleted, by `namespace/name`.
    DeletePodDisruptionBudget(String),
    /// A PriorityClass added or changed. As admission resolves priorities when a pod (or group) is
    /// created, it changes the priority of those that come later, never of those the store has.
    UpsertPriorityClass(Box<PriorityClass>),
    /// A PriorityClass deleted, by name (the same goes).
    DeletePriorityClass(String),
    /// A Workload added or changed: what the store keeps of it is its annotations, the device
    /// topology its PodGroups inherit [beyond upstream].
    UpsertWorkload(Box<k8s_openapi::api::scheduling::v1beta1::Workload>),
    /// A Workload deleted, by `namespace/name`.
    DeleteWorkload(String),
    /// A CompositePodGroup (`scheduling.k8s.io/v1alpha3`) added or changed: the PodGroups and
    /// CompositePodGroups naming it as parent join its tree, which is scheduled as one entry.
    UpsertCompositePodGroup(Box<k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup>),
    /// A CompositePodGroup deleted, by `namespace/name`: its children wait for it again.
    DeleteCompositePodGroup(String),
    /// A Namespace added or changed: its labels are what a pod affinity term's
    /// `namespaceSelector` reads (with the `kubernetes.io/metadata.name` label the API server
    /// adds). As upstream, no pending pod is woken by it: InterPodAffinity does not register
    /// Namespace events.
    UpsertNamespace(Box<k8s_openapi::api::core::v1::Namespace>),
    /// A Namespace deleted, by name: it carries only its name label from now on.
    DeleteNamespace(String),
    /// A PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode or CSIDriver added or
    /// changed: the volume plugins run from then on (a world that sends these watches them).
    UpsertStorage(Box<crate::volumes::StorageObject>),
    /// One of those deleted: its kind, and `namespace/name` (claims) or name.
    DeleteStorage(crate::volumes::StorageKind, String),
    /// A Service, ReplicationController, ReplicaSet or StatefulSet added or changed: what
    /// PodTopologySpread's default constraints read of it (its selector).
    UpsertSpreadSelector(Box<crate::spread_selectors::SpreadSelector>),
    /// One of those deleted: its kind and `namespace/name`.
    DeleteSpreadSelector(crate::spread_selectors::SpreadSelectorKind, String),
}

/// What a change means for the scheduling queue.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    /// The events it was, for entries waiting in the unschedulable pool.
    pub wake: Wake,
    /// The object of those events that queueing hints look at.
    pub subject: Subject,
    /// Entries that now have pending pods (new pods, pods no longer assumed, pods whose missing
    /// claim arrived): each joins the queue, or leaves the pool it waits in.
    pub queue: Vec<QueueEntry>,
    /// Pods that are no longer pending (bound elsewhere, deleted, finished): their entries leave
    /// the queue.
    pub dequeue: Vec<QueueEntry>,
    /// Claims whose object changed (an index into [`Cluster::claims`]), with the object they
    /// had: the devices in use follow ([`crate::Scheduler::claim_replaced`]).
    pub claims: Vec<(ClaimId, Option<Box<ResourceClaim>>)>,
}

/// The pod or node an event was about, as the queueing hints that look at the object read it
/// (`isSchedulableAfterPodChange`, `isSchedulableAfterNodeChange`).
#[derive(Clone, Debug, Default)]
pub enum Subject {
    /// No object to look at (the event wakes every entry waiting for it).
    #[default]
    None,
    /// A pod that came to a node, left one or was relabeled on one: it is at `id` (vacant once
    /// deleted), and `before` says how it was when that differs.
    Pod { id: PodId, before: PodBefore },
    /// A node added, changed or deleted: it is at `id` (marked removed once deleted), with its
    /// labels before a relabeling and whether its taints changed.
    Node { id: NodeId, old_labels: Option<std::collections::BTreeMap<String, String>>, taints_changed: bool },
}

/// How a pod of [`Subject::Pod`] was before the change.
#[derive(Clone, Debug)]
pub enum PodBefore {
    /// As it is now (its labels did not change).
    Same,
    /// With these labels.
    Labels(std::collections::BTreeMap<String, String>),
    /// Deleted: the pod as it was.
    Deleted(Box<PodInfo>),
}

/// The store's indexes by name, built on the first change.
#[derive(Clone, Debug, Default)]
pub struct Index {
    pods: pod_index::PodIndex,
    nodes: NameMap<String, NodeId>,
    groups: NameMap<String, GroupId>,
    /// Slots of deleted pods, reused by new ones.
    free_pods: Vec<PodId>,
    /// Pods bound to nodes the store does not have (yet), by node name.
    elsewhere: NameMap<String, Vec<PodId>>,
    /// Claims by `namespace/name`.
    claims: NameMap<String, ClaimId>,
    /// Slots of deleted claims no pod names any more, reused by new ones.
    free_claims: Vec<ClaimId>,
    /// Pods waiting for a claim the store does not have, by the claim's `namespace/name`.
    claim_waiters: NameMap<String, Vec<PodId>>,
    /// Pods naming a PodGroup the store does not have, by the group's `namespace/name`.
    group_waiters: NameMap<String, Vec<PodId>>,
    /// CompositePodGroups by `namespace/name`.
    composites: NameMap<String, crate::cluster::CompositeId>,
    /// PodGroups and CompositePodGroups naming a parent the store does not have, by the
    /// parent's `namespace/name`.
    parent_waiters: NameMap<String, Vec<crate::cluster::GroupNode>>,
    /// Nodes (not removed) with a PreferNoSchedule taint: TaintToleration scores only when some
    /// node has one.
    prefer_no_schedule: usize,
}

impl Index {
    fn build(c: &Cluster) -> Index {
        let mut index = Index {
            pods: pod_index::PodIndex::with_capacity(c.pods.len()),
            nodes: NameMap::with_capacity_and_hasher(c.nodes.len(), Default::default()),
            ..Index::default()
        };
        for (i, p) in c.pods.iter().enumerate() {
            let id = PodId(i as u32);
            if p.state == PodState::Deleted {
                index.free_pods.push(id);
                continue;
            }
            index.pods.insert(&p.key, id, &c.pods);
            if let PodState::BoundElsewhere(node) = &p.state {
                index.elsewhere.entry(node.clone()).or_default().push(id);
            }
            if let Some(Err(_)) = p.group
                && let Some(name) = group_name(&p.pod)
            {
                index.group_waiters.entry(format!("{}/{name}", p.namespace())).or_default().push(id);
            }
        }
        for (i, n) in c.nodes.iter().enumerate().filter(|(_, n)| !n.detail.removed) {
            index.nodes.insert(n.name().to_string(), NodeId(i as u32));
            index.prefer_no_schedule += usize::from(n.has_prefer_no_schedule_taint);
        }
        index.groups = c.groups.iter().enumerate().map(|(i, g)| (g.key.clone(), GroupId(i as u32))).collect();
        index.composites = c
            .composites
            .iter()
            .enumerate()
            .map(|(i, t)| (t.key.clone(), crate::cluster::CompositeId(i as u32)))
            .collect();
        let groups =
            c.groups.iter().enumerate().map(|(i, g)| (crate::cluster::GroupNode::Group(GroupId(i as u32)), &g.parent));
        let trees = c
            .composites
            .iter()
            .enumerate()
            .map(|(i, t)| (crate::cluster::GroupNode::Composite(crate::cluster::CompositeId(i as u32)), &t.parent));
        for (node, parent) in groups.chain(trees) {
            if let Some(Err(k)) = parent {
                index.parent_waiters.entry(k.clone()).or_default().push(node);
            }
        }
        for (i, info) in c.claims.iter().enumerate() {
            match (info.deleted, info.users) {
                (false, _) => drop(index.claims.insert(info.key(), ClaimId(i as u32))),
                (true, 0) => index.free_claims.push(ClaimId(i as u32)),
                (true, _) => {}
            }
        }
        index
    }
}

/// Whether two versions of a pod differ only where the scheduler does not look: the object's
/// version fields, and its status other than the claims it was given (`resourceClaimStatuses`,
/// `extendedResourceClaimStatus`), which DynamicResources waits for.
fn same_for_scheduling(old: &StoredPod, new: &StoredPod) -> bool {
    let meta = |p: &StoredPod| {
        let mut m = p.meta().clone();
        (m.resource_version, m.generation, m.managed_fields) = (None, None, None);
        m
    };
    let claims = |p: &StoredPod| {
        let status = p.status();
        (
            status.and_then(|s| s.resource_claim_statuses.clone()),
            status.and_then(|s| s.extended_resource_claim_status.clone()),
        )
    };
    old.same_spec(new) && meta(old) == meta(new) && claims(old) == claims(new)
}

/// The PodGroup a pod names (`spec.schedulingGroup.podGroupName`).
fn group_name(pod: &dyn PodObject) -> Option<&str> {
    pod.spec()?.scheduling_group.as_ref()?.pod_group_name.as_deref()
}

impl Cluster {
    /// Applies one change. The cluster is unchanged when an error is returned.
    pub fn apply(&mut self, change: Change) -> Result<Applied, ModelError> {
        if self.index.is_none() {
            self.index = Some(Box::new(Index::build(self)));
        }
        match change {
            Change::UpsertNode(node) => self.upsert_node(*node),
            Change::DeleteNode(name) => Ok(self.delete_node(&name)),
            Change::UpsertPod(pod) => self.upsert_pod(pod),
            Change::UpsertStoredPod(pod) => self.upsert_stored_pod(*pod),
            Change::DeletePod(key) => Ok(self.delete_pod(&key)),
            Change::UpsertClaim(claim) => Ok(self.upsert_claim(*claim)),
            Change::DeleteClaim(key) => Ok(self.delete_claim(&key)),
            Change::UpsertPodGroup(group) => self.upsert_pod_group(*group),
            Change::DeletePodGroup(key) => Ok(self.delete_pod_group(&key)),
            Change::UpsertPodDisruptionBudget(b) => Ok(self.upsert_budget(*b)),
            Change::DeletePodDisruptionBudget(key) => {
                self.budgets.retain(|b| b.key != key);
                Ok(Applied::default())
            }
            Change::UpsertPriorityClass(class) => Ok(self.upsert_priority_class(*class)),
            Change::DeletePriorityClass(name) => Ok(self.delete_priority_class(&name)),
            Change::UpsertWorkload(w) => Ok(self.upsert_workload(*w)),
            Change::DeleteWorkload(key) => Ok(self.delete_workload(&key)),
            Change::UpsertCompositePodGroup(c) => self.upsert_composite_pod_group(*c),
            Change::DeleteCompositePodGroup(key) => Ok(self.delete_composite_pod_group(&key)),
            Change::UpsertNamespace(ns) => Ok(self.upsert_namespace(*ns)),
            Change::DeleteNamespace(name) => Ok(self.delete_namespace(&name)),
            Change::UpsertStorage(object) => {
                self.volumes.upsert(*object);
                Ok(Applied { wake: Wake::STORAGE_CHANGED, ..Applied::default() })
            }
            Change::DeleteStorage(kind, key) => {
                self.volumes.delete(kind, &key);
                Ok(Applied { wake: Wake::STORAGE_CHANGED, ..Applied::default() })
            }
            // Upstream's PodTopologySpread registers no event for these kinds: nothing wakes.
            Change::UpsertSpreadSelector(s) => {
                self.spread_selectors.upsert(*s);
                Ok(Applied::default())
            }
            Change::DeleteSpreadSelector(kind, key) => {
                self.spread_selectors.delete(kind, &key);
                Ok(Applied::default())
            }
        }
    }

    fn index(&mut self) -> &mut Index {
        self.index.get_or_insert_with(Default::default)
    }

    /// The pods' index by name, and the slots it reads the names from.
    fn pod_index(&mut self) -> (&mut pod_index::PodIndex, &crate::slots::Slots<PodInfo>) {
        (&mut self.index.get_or_insert_with(Default::default).pods, &self.pods)
    }

    /// The pod's node by name, if the store has it.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        match &self.index {
            Some(index) => index.nodes.get(name).copied(),
            None => self.nodes.iter().position(|n| n.name() == name && !n.detail.removed).map(|i| NodeId(i as u32)),
        }
    }

    /// The pod with this `namespace/name`, if the store has it.
    pub fn pod_id(&self, key: &str) -> Option<PodId> {
        match &self.index {
            Some(index) => index.pods.get(key, &self.pods),
            None => {
                self.pods.iter().position(|p| p.key == key && p.state != PodState::Deleted).map(|i| PodId(i as u32))
            }
        }
    }

    fn upsert_node(&mut self, mut node: Node) -> Result<Applied, ModelError> {
        node.metadata.managed_fields = None;
        let mut info = self.node_info(node)?;
        let name = info.name().to_string();
        info.generation = self.fresh_generation();
        self.topology_generation = info.generation;
        if let Some(&id) = self.index().nodes.get(&name) {
            self.node_journal.note(id);
        }
        let mut applied = Applied::default();
        let prefers = usize::from(info.has_prefer_no_schedule_taint);
        let images =
            |n: &crate::cluster::NodeInfo| usize::from(crate::plugins::image_locality::has_images(&n.detail.node));
        self.nodes_with_images += images(&info);
        match self.index().nodes.get(&name).copied() {
            Some(id) => {
                self.nodes_with_images -= images(&self.nodes[id.0 as usize]);
                let had = usize::from(self.nodes[id.0 as usize].has_prefer_no_schedule_taint);
                let index = self.index();
                index.prefer_no_schedule = index.prefer_no_schedule + prefers - had;
                let old = &mut self.nodes[id.0 as usize];
                let zone_moved =
                    crate::cluster::zone_key(&old.detail.labels) != crate::cluster::zone_key(&info.detail.labels);
                let (relabeled, taints_changed) =
                    (old.detail.labels != info.detail.labels, old.detail.taints != info.detail.taints);
                applied.wake = Wake::node_updated(relabeled, taints_changed);
                let old_labels = relabeled.then(|| std::mem::take(&mut old.detail.labels));
                applied.subject = Subject::Node { id, old_labels, taints_changed };
                info.requested = old.requested;
                info.non_zero_requested = old.non_zero_requested;
                info.num_pods = old.num_pods;
                info.affinity_pods = old.affinity_pods;
                info.anti_affinity_pods = old.anti_affinity_pods;
                info.detail.scalar_requested = std::mem::take(&mut old.detail.scalar_requested);
                info.detail.pods = std::mem::take(&mut old.detail.pods);
                *old = info;
                if zone_moved {
                    self.node_order = crate::cluster::zone_interleaved_order(&self.nodes);
                }
            }
            None => {
                let id = NodeId(self.nodes.len() as u32);
                self.nodes.push(info);
                self.node_journal.note(id);
                self.index().nodes.insert(name.clone(), id);
                self.index().prefer_no_schedule += prefers;
                // Pods bound to this node before it was seen now count on it.
                for pod in self.index().elsewhere.remove(&name).unwrap_or_default() {
                    self.pods[pod.0 as usize].state = PodState::Bound(id);
                    self.account(id, pod, 1);
                }
                self.node_order = crate::cluster::zone_interleaved_order(&self.nodes);
                applied.wake = Wake::NODE_ADDED;
                applied.subject = Subject::Node { id, old_labels: None, taints_changed: false };
            }
        }
        self.any_prefer_no_schedule = self.index().prefer_no_schedule > 0;
        Ok(applied)
    }

    fn delete_node(&mut self, name: &str) -> Applied {
        let Some(id) = self.index().nodes.remove(name) else { return Applied::default() };
        let subject = Subject::Node { id, old_labels: None, taints_changed: false };
        let mut applied = Applied { wake: Wake::NODE_DELETED, subject, ..Applied::default() };
        let on_node = self.nodes[id.0 as usize].detail.pods.clone();
        for pod in on_node {
            self.account(id, pod, -1);
            let Cluster { pods, index, .. } = self;
            let info = &mut pods[pod.0 as usize];
            // A pod assumed there goes back to the queue; a bound one stays bound to a node the
            // store no longer has (the pod garbage collector deletes it).
            if let PodState::Assumed(_) = info.state {
                info.state = PodState::Pending;
                applied.queue.push(self.entry_of(pod));
            } else {
                info.state = PodState::BoundElsewhere(name.into());
                index.as_mut().expect("built by apply").elsewhere.entry(name.into()).or_default().push(pod);
            }
        }
        let generation = self.fresh_generation();
        self.topology_generation = generation;
        let had = usize::from(self.nodes[id.0 as usize].has_prefer_no_schedule_taint);
        self.nodes_with_images -=
            usize::from(crate::plugins::image_locality::has_images(&self.nodes[id.0 as usize].detail.node));
        let index = self.index();
        index.prefer_no_schedule -= had;
        self.any_prefer_no_schedule = index.prefer_no_schedule > 0;
        let node = &mut self.nodes[id.0 as usize];
        node.detail.removed = true;
        node.unschedulable = true;
        node.generation = generation;
        self.node_journal.note(id);
        self.node_order = crate::cluster::zone_interleaved_order(&self.nodes);
        applied
    }

    fn upsert_pod(&mut self, mut pod: Box<Pod>) -> Result<Applied, ModelError> {
        // As kube-scheduler's informers do (`TransformStripManagedFields`): the engine never
        // reads them, and they are often half of a live object.
        pod.metadata.managed_fields = None;
        self.upsert_stored_pod(StoredPod::new(pod))
    }

    fn upsert_stored_pod(&mut self, mut pod: StoredPod) -> Result<Applied, ModelError> {
        pod.drop_managed_fields();
        let node = pod.node_name().filter(|n| !n.is_empty()).and_then(|n| self.node_id(n));
        let mut info = self.pod_info(pod, |_| node)?;
        let known = self.pod_id(&info.key);
        // A pending pod's update that changes nothing the scheduler reads (its own
        // PodScheduled condition, written after a failed attempt) leaves its queue entry — and
        // its backoff — alone, as upstream's `isPodUpdated` does.
        // One that does is tried again, after the backoff it is in (its entry is kept).
        let still_pending =
            known.filter(|id| self.pods[id.0 as usize].state == PodState::Pending && info.state == PodState::Pending);
        let quiet = still_pending.is_some_and(|id| same_for_scheduling(&self.pods[id.0 as usize].pod, &info.pod));
        let mut applied = Applied::default();
        let id = match known {
            Some(id) => {
                // `spec.resourceClaims` is immutable: the claims resolved when the pod was added
                // stay (with a special extended-resources claim Reserve added).
                let old = &mut self.pods[id.0 as usize];
                let relabeled = old.pod.meta().labels != info.pod.meta().labels;
                let before = match relabeled {
                    true => PodBefore::Labels(old.pod.meta().labels.clone().unwrap_or_default()),
                    false => PodBefore::Same,
                };
                info.claims = std::mem::take(&mut old.claims);
                info.dra_extended = std::mem::take(&mut old.dra_extended);
                info.stale_extended_claim = old.stale_extended_claim.take();
                if info.claims.iter().any(Result::is_err) {
                    // Resolved again below: the status may name a claim now.
                    for c in std::mem::take(&mut info.claims).into_iter().flatten() {
                        self.drop_claim_user(c);
                    }
                }
                let old = self.take_pod(id, &mut applied);
                // The assume cache: an update that does not bind the pod yet does not undo an
                // assumption of this scheduler.
                if let (PodState::Assumed(n), PodState::Pending) = (&old, &info.state) {
                    info.state = PodState::Assumed(*n);
                }
                // A binding that confirms the assumption: VolumeBinding's decisions for it are
                // carried out (the objects they changed come back through the store).
                if matches!(old, PodState::Assumed(_)) && !matches!(info.state, PodState::Assumed(_)) {
                    self.volumes.settled(id);
                }
                // Nor does one that leaves a victim of this scheduler's preemption running (its
                // DisruptionTarget condition, written before its deletion): it stays preempted,
                // its node's resources and devices given to the preemptor, until it is deleted.
                if let (PodState::Preempted(n), Some(_)) = (&old, info.state.on_node()) {
                    info.state = PodState::Preempted(*n);
                }
                // Resources freed only when the pod leaves its node (not when a binding confirms
                // an assumption); a pod that comes to a node or is relabeled there changes
                // what PodTopologySpread and InterPodAffinity count.
                let wake = Wake::pod_updated(&old, &info.state, relabeled);
                if wake != Wake::NONE {
                    applied.subject = Subject::Pod { id, before };
                }
                applied.wake = applied.wake.union(wake);
                id
            }
            None => {
                applied.wake = Wake::pod_updated(&PodState::Deleted, &info.state, false);
                let id = match self.index().free_pods.pop() {
                    Some(id) => id,
                    None => {
                        self.pods.push(PodInfo::vacant());
                        PodId(self.pods.len() as u32 - 1)
                    }
                };
                if applied.wake != Wake::NONE {
                    applied.subject = Subject::Pod { id, before: PodBefore::Same };
                }
                id
            }
        };
        let resolve = info.claims.is_empty() && info.pod.spec().is_some_and(|s| s.resource_claims.is_some());
        let map_extended = known.is_none();
        self.put_pod(id, info, &mut applied);
        if still_pending.is_some() {
            let entry = self.entry_of(id);
            applied.dequeue.retain(|e| *e != entry);
            if quiet {
                applied.queue.retain(|e| *e != entry);
            }
        }
        if map_extended {
            self.map_pod_extended_resources(id.0 as usize);
        }
        if resolve {
            self.resolve_claims(id);
        }
        Ok(applied)
    }

    /// Resolves a pod's `spec.resourceClaims` against the claims the store has: a claim by name,
    /// or the claim the pod's status names for a template entry; an entry identical to one of its
    /// PodGroup's is the group's claim (KEP 5729, [`group_claims`]). One that is missing is an
    /// error the pod's PreFilter reports, and the pod waits for the claim.
    fn resolve_claims(&mut self, id: PodId) {
        let info = &self.pods[id.0 as usize];
        let ns = info.namespace().to_string();
        let group = match info.group {
            Some(Ok(g)) => Some(g),
            _ => None,
        };
        let entries = info.pod.spec().and_then(|s| s.resource_claims.clone()).unwrap_or_default();
        let statuses = info.pod.status().and_then(|s| s.resource_claim_statuses.clone()).unwrap_or_default();
        let mut resolved = crate::cluster::PodClaims::with_capacity(entries.len());
        for entry in &entries {
            let shared = group.filter(|g| self.is_group_entry(*g, entry));
            let name = match (shared, &entry.resource_claim_name, &entry.resource_claim_template_name) {
                (Some(g), _, _) => self.group_claim_name(g, entry, &statuses),
                (None, Some(name), _) => Ok(name.clone()),
                (None, None, Some(template)) => statuses
                    .iter()
                    .find(|s| s.name == entry.name)
                    .and_then(|s| s.resource_claim_name.clone())
                    .ok_or_else(|| Unresolved::WaitingForPodClaim {
                        entry: entry.name.clone(),
                        template: template.clone(),
                    }),
                (None, None, None) => Err(Unresolved::NoSource { entry: entry.name.clone() }),
            };
            let claim = name.and_then(|name| {
                let key = muster_api::key::namespaced(&ns, &name);
                let index = self.index();
                match index.claims.get(&key) {
                    Some(i) => Ok(*i),
                    None => {
                        let waiters = index.claim_waiters.entry(key).or_default();
                        if !waiters.contains(&id) {
                            waiters.push(id);
                        }
                        Err(Unresolved::ClaimNotFound(name))
                    }
                }
            });
            if let (Some(g), Ok(c)) = (shared, &claim) {
                self.claims[*c].group = Some(g);
            }
            resolved.push(claim.map_err(Box::new));
        }
        // A special extended-resources claim Reserve added stays (it follows the entries).
        resolved.extend(self.pods[id.0 as usize].claims.iter().skip(entries.len()).cloned());
        self.set_pod_claims(id, resolved);
    }

    /// Pod `id`'s resolved claims are `claims` from now on: each claim counts its users again.
    fn set_pod_claims(&mut self, id: PodId, claims: crate::cluster::PodClaims) {
        for c in claims.iter().flatten() {
            self.claims[*c].users += 1;
        }
        let old = std::mem::replace(&mut self.pods[id.0 as usize].claims, claims);
        for c in old.into_iter().flatten() {
            self.drop_claim_user(c);
        }
    }

    /// A pod no longer names claim `c`: a deleted claim no pod names gives its slot back.
    pub(crate) fn drop_claim_user(&mut self, c: ClaimId) {
        let info = &mut self.claims[c];
        debug_assert!(info.users > 0, "claim {} lost a user it did not count", info.key());
        info.users = info.users.saturating_sub(1);
        if info.users == 0 && info.deleted {
            self.vacate_claim(c);
        }
    }

    /// The invariant behind claim slots, recounted (for tests; O(pods + claims)): each claim
    /// counts the live pods that name it, and a vacant slot is named by none.
    pub fn claim_users_agree(&self) -> Result<(), String> {
        let mut users = vec![0u32; self.claims.len()];
        for p in self.pods.iter().filter(|p| p.state != PodState::Deleted) {
            for c in p.claims.iter().flatten() {
                users[c.0 as usize] += 1;
            }
        }
        for (i, info) in self.claims.iter().enumerate() {
            if info.users != users[i] {
                return Err(format!(
                    "claim slot {i} ({}) counts {} users, {} pods name it",
                    info.key(),
                    info.users,
                    users[i]
                ));
            }
        }
        Ok(())
    }

    /// Claim slot `c` is vacant: a new claim reuses it.
    fn vacate_claim(&mut self, c: ClaimId) {
        self.claims[c] = ClaimInfo::vacant();
        self.index().free_claims.push(c);
    }

    fn upsert_claim(&mut self, claim: ResourceClaim) -> Applied {
        let key = crate::cluster::object_key(&claim.metadata);
        let mut applied = Applied::default();
        let allocated = |c: &ResourceClaim| c.status.as_ref().and_then(|s| s.allocation.as_ref()).is_some();
        match self.index().claims.get(&key).copied() {
            Some(i) => {
                let info = &mut self.claims[i];
                let old = info.respec(claim);
                // Devices freed: pods DRA rejected may fit now.
                if allocated(&old) && !allocated(&info.claim) {
                    applied.wake = Wake::CLAIM_CHANGED;
                }
                applied.claims.push((i, Some(Box::new(old))));
            }
            None => {
                let info = ClaimInfo::new(claim, false, None);
                let i = match self.index().free_claims.pop() {
                    Some(i) => {
                        self.claims[i] = info;
                        i
                    }
                    None => {
                        self.claims.push(info);
                        ClaimId(self.claims.len() as u32 - 1)
                    }
                };
                self.index().claims.insert(key.clone(), i);
                applied.claims.push((i, None));
                // Pods that waited for it resolve their claims again.
                for pod in self.index().claim_waiters.remove(&key).unwrap_or_default() {
                    if self.pods[pod.0 as usize].state == PodState::Deleted {
                        continue;
                    }
                    self.resolve_claims(pod);
                    if self.pods[pod.0 as usize].state == PodState::Pending {
                        applied.queue.push(self.entry_of(pod));
                    }
                }
            }
        }
        applied
    }

    /// A deleted claim is deallocated and forgotten by name; its slot stays while pods name it
    /// (they are deleted with it, as its owner, or fail when they are scheduled again), and is
    /// vacant once none does.
    fn delete_claim(&mut self, key: &str) -> Applied {
        let Some(i) = self.index().claims.remove(key) else { return Applied::default() };
        let old = self.claims[i].claim.status.take().map(|status| {
            let mut old = self.claims[i].claim.clone();
            old.status = Some(status);
            old
        });
        self.claims[i].status_changed();
        let wake = if old.is_some() { Wake::CLAIM_CHANGED } else { Wake::NONE };
        self.claims[i].deleted = true;
        if self.claims[i].users == 0 {
            self.vacate_claim(i);
        }
        Applied { wake, claims: vec![(i, old)], ..Applied::default() }
    }

    fn delete_pod(&mut self, key: &str) -> Applied {
        let mut applied = Applied::default();
        let (index, pods) = self.pod_index();
        let Some(id) = index.remove(key, pods) else { return applied };
        let was_on_node = self.take_pod(id, &mut applied).on_node().is_some();
        self.volumes.settled(id);
        let gone = std::mem::replace(&mut self.pods[id.0 as usize], PodInfo::vacant());
        gone.pod.release_spec(&mut self.specs);
        for c in gone.claims.iter().flatten() {
            self.drop_claim_user(*c);
        }
        if was_on_node {
            applied.wake = Wake::ASSIGNED_POD_DELETED;
            applied.subject = Subject::Pod { id, before: PodBefore::Deleted(Box::new(gone)) };
        }
        self.index().free_pods.push(id);
        applied
    }

    /// Takes a pod out of every place that counts it (its node, its group, the queue); returns
    /// the state it had. Its slot stays.
    fn take_pod(&mut self, id: PodId, applied: &mut Applied) -> PodState {
        let entry = self.entry_of(id);
        if let Some(n) = self.pods[id.0 as usize].state.on_node() {
            self.account(n, id, -1);
        }
        let Cluster { pods, groups, index, .. } = self;
        let info = &mut pods[id.0 as usize];
        if let PodState::BoundElsewhere(node) = &info.state
            && let Some(list) = index.as_mut().expect("built by apply").elsewhere.get_mut(node)
        {
            list.retain(|p| *p != id);
        }
        if let Some(Ok(g)) = info.group {
            groups[g].members.retain(|m| *m != id);
        }
        if info.state == PodState::Pending && matches!(entry, QueueEntry::Pod(_)) {
            applied.dequeue.push(entry);
        }
        std::mem::replace(&mut info.state, PodState::Deleted)
    }

    /// Puts a pod into its slot and into every place that counts it.
    fn put_pod(&mut self, id: PodId, mut info: PodInfo, applied: &mut Applied) {
        if let Some(name) = group_name(&info.pod).map(str::to_string) {
            let group_key = muster_api::key::namespaced(info.namespace(), &name);
            info.group = Some(match self.index().groups.get(&group_key).copied() {
                Some(g) => {
                    let Cluster { groups, pods, .. } = self;
                    let members = &mut groups[g].members;
                    let at = members.partition_point(|m| pods[m.0 as usize].key < info.key);
                    members.insert(at, id);
                    Ok(g)
                }
                None => {
                    self.index().group_waiters.entry(group_key.clone()).or_default().push(id);
                    Err(Box::new(Unresolved::GroupNotFound(group_key)))
                }
            });
            applied.wake = applied.wake.union(Wake::POD_CHANGED);
        }
        if let Some(n) = info.state.on_node() {
            let d = self.nodes[n.0 as usize].account(&info, id, 1);
            self.inter_pod.add(d);
            self.node_journal.note(n);
        }
        if let PodState::BoundElsewhere(node) = &info.state {
            self.index().elsewhere.entry(node.clone()).or_default().push(id);
        }
        let (index, pods) = self.pod_index();
        index.insert(&info.key, id, pods);
        let pending = info.state == PodState::Pending;
        let Cluster { pods, specs, .. } = self;
        pods[id.0 as usize].pod.release_spec(specs);
        pods[id.0 as usize] = info;
        if pending {
            applied.queue.push(self.entry_of(id));
        }
    }

    fn upsert_pod_group(&mut self, group: PodGroup) -> Result<Applied, ModelError> {
        let mut info = self.group_info(group);
        let mut applied = Applied { wake: Wake::WORKLOAD_CHANGED, ..Applied::default() };
        let key = info.key.clone();
        let existing = self.index().groups.get(&key).copied();
        let before = existing.map(|g| self.tree_before(crate::cluster::GroupNode::Group(g))).unwrap_or_default();
        let g = match existing {
            Some(g) => {
                info.members = std::mem::take(&mut self.groups[g].members);
                info.parent = self.groups[g].parent.take();
                self.groups[g] = info;
                g
            }
            None => {
                let g = GroupId(self.groups.len() as u32);
                self.groups.push(info);
                self.index().groups.insert(key.clone(), g);
                // Pods that named it before it came join it: their own entries give way to the
                // group's.
                for pod in self.index().group_waiters.remove(&key).unwrap_or_default() {
                    let p = &mut self.pods[pod.0 as usize];
                    // The slot may hold another pod by now.
                    let names = group_name(&p.pod).is_some_and(|n| format!("{}/{n}", p.namespace()) == key);
                    if p.state == PodState::Deleted || !names || matches!(p.group, Some(Ok(_))) {
                        continue;
                    }
                    if p.state == PodState::Pending {
                        applied.dequeue.push(QueueEntry::Pod(pod));
                    }
                    p.group = Some(Ok(g));
                    let Cluster { groups, pods, .. } = self;
                    let members = &mut groups[g].members;
                    let at = members.partition_point(|m| pods[m.0 as usize].key < pods[pod.0 as usize].key);
                    members.insert(at, pod);
                }
                g
            }
        };
        let node = crate::cluster::GroupNode::Group(g);
        self.link_parent(node);
        let after = self.tree_leaves(node);
        let moved = self.tree_changed(before, &after);
        applied.dequeue.extend(moved.dequeue);
        applied.queue.extend(moved.queue);
        self.group_claims_changed(g, &mut applied);
        Ok(applied)
    }

    /// A deleted PodGroup's pods wait for it again, each an entry of its own (reported waiting
    /// for the group); its slot stays, with no members.
    fn delete_pod_group(&mut self, key: &str) -> Applied {
        let Some(g) = self.index().groups.remove(key) else { return Applied::default() };
        // It leaves its tree: the tree's other groups keep their entry (or get their new one).
        let node = crate::cluster::GroupNode::Group(g);
        let before = self.tree_before(node);
        let mut applied = Applied { dequeue: vec![QueueEntry::Group(g)], ..Applied::default() };
        self.unlink_group(g);
        let others: Vec<GroupId> = before.leaves().iter().copied().filter(|l| *l != g).collect();
        let moved = self.tree_changed(before, &others);
        applied.dequeue.extend(moved.dequeue);
        applied.queue.extend(moved.queue.into_iter().filter(|e| *e != QueueEntry::Group(g)));
        for pod in std::mem::take(&mut self.groups[g].members) {
            let p = &mut self.pods[pod.0 as usize];
            p.group = Some(Err(Box::new(Unresolved::GroupNotFound(key.to_string()))));
            if p.state == PodState::Pending {
                applied.queue.push(QueueEntry::Pod(pod));
            }
            self.index().group_waiters.entry(key.to_string()).or_default().push(pod);
        }
        applied
    }

    fn upsert_priority_class(&mut self, class: PriorityClass) -> Applied {
        let name = class.metadata.name.clone().unwrap_or_default();
        self.delete_priority_class(&name);
        let value = class.value.unwrap_or(0);
        self.priority_classes.insert(name.clone(), value);
        if class.preemption_policy.as_deref() == Some("Never") {
            self.never_preempting_classes.insert(name.clone());
        }
        // One global default (the API server refuses a second); a later one replaces it.
        if class.global_default == Some(true) {
            self.default_priority = value;
            self.default_priority_class = Some(name);
        }
        Applied::default()
    }

    /// The built-in system classes stay (the API server does not delete them).
    fn delete_priority_class(&mut self, name: &str) -> Applied {
        if !name.starts_with("system-") {
            self.priority_classes.remove(name);
        }
        self.never_preempting_classes.remove(name);
        if self.default_priority_class.as_deref() == Some(name) {
            self.default_priority_class = None;
            self.default_priority = 0;
        }
        Applied::default()
    }

    /// A Namespace's labels replace those it had; the inter-pod memos, whose counts a
    /// `namespaceSelector` may have read, are dropped when they changed
    /// ([`Cluster::namespace_generation`]).
    fn upsert_namespace(&mut self, ns: k8s_openapi::api::core::v1::Namespace) -> Applied {
        let name = ns.metadata.name.unwrap_or_default();
        let labels = crate::plugins::pod_matcher::namespace_labels(&name, ns.metadata.labels.as_ref());
        if self.namespace_labels.get(&name) != Some(&labels) {
            self.namespace_labels.insert(name, labels);
            self.namespace_generation = self.fresh_generation();
        }
        Applied::default()
    }

    fn delete_namespace(&mut self, name: &str) -> Applied {
        if self.namespace_labels.remove(name).is_some() {
            self.namespace_generation = self.fresh_generation();
        }
        Applied::default()
    }

    /// Budgets are few: kept sorted by `namespace/name`, found by search. A budget changes which
    /// victims preemption prefers, never whether a pod fits: it wakes nobody.
    fn upsert_budget(&mut self, budget: PodDisruptionBudget) -> Applied {
        let info = self.budget_info(budget);
        let at = self.budgets.partition_point(|b| b.key < info.key);
        if self.budgets.get(at).is_some_and(|b| b.key == info.key) {
            self.budgets[at] = info;
        } else {
            self.budgets.insert(at, info);
        }
        Applied::default()
    }

    /// The queue entry that schedules a pod: its own, its PodGroup's or its tree's.
    pub fn entry_of(&self, pod: PodId) -> QueueEntry {
        match self.pods[pod.0 as usize].group {
            Some(Ok(g)) => self.entry_of_group(g),
            _ => QueueEntry::Pod(pod),
        }
    }

    /// The queue entry a PodGroup is scheduled in: its own, or its tree's root.
    pub fn entry_of_group(&self, g: GroupId) -> QueueEntry {
        match self.root(crate::cluster::GroupNode::Group(g)) {
            Ok(crate::cluster::GroupNode::Composite(r)) => QueueEntry::Composite(r),
            _ => QueueEntry::Group(g),
        }
    }
}
