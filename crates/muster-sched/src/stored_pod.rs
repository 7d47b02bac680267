//! A pod as the store keeps it. A decoded `k8s-openapi` `Pod` is 2,464 bytes of struct before any
//! string (616 of them the status, even when there is none), and each `Container` 2,336 more, with
//! two maps of quantities behind it (issue 16: about 6 KiB per one-container pod).
//!
//! The store keeps the metadata, the spec behind a pointer and the status behind another (only
//! when there is one). It takes out and packs as JSON what the scheduler does not read once the
//! pod's requests are derived: `spec.initContainers`, `spec.containers`,
//! `spec.ephemeralContainers`, `status.{init,,ephemeral}ContainerStatuses` and
//! `metadata.managedFields` (often half of a dumped object; a live store drops them as upstream's
//! informers do). A [`ContainerView`] per container keeps what the scheduler reads of it: its
//! image (ImageLocality), its ports (NodePorts) and its restart policy (sidecars). The requests
//! are derived before packing: the spec keeps those of its pods, and a pod whose container
//! statuses list allocated resources (they may raise them) keeps its own until the store takes
//! them. Readers see the rest through [`PodObject`], as they see a `Pod`, with the container
//! lists empty; [`StoredPod::object`] rebuilds the whole pod for the outputs that print it.
//!
//! The spec without its `nodeName` — packed lists and views included — is a [`SharedSpec`]: the
//! pods of one template (a Deployment's replicas, a Job's pods, a gang's members) hold one
//! between them once the store has them ([`SpecTable`]), and each pod keeps its node beside it
//! ([`StoredPod::node_name`], [`PodObject::node_name`]). A pod add then keeps no spec of its own,
//! and a pod delete frees none: dropping a `PodSpec` reads all of its 1,488 bytes of struct,
//! cold in cache (issue 11, `bench churn`: a pod delete's median 2.2–2.8 µs → 1.4–1.7 µs).

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerStatus, EphemeralContainer, Pod, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use muster_api::resources::{self, BorrowedRequests, QuantityFieldError};
use muster_api::{PodObject, Quantity};
use std::sync::Arc;

/// The spec's container lists, as packed: `initContainers`, `containers`, `ephemeralContainers`.
type SpecContainers = (Option<Vec<Container>>, Vec<Container>, Option<Vec<EphemeralContainer>>);
/// The status's container lists, as packed: init, regular, ephemeral.
type StatusContainers = (Option<Vec<ContainerStatus>>, Option<Vec<ContainerStatus>>, Option<Vec<ContainerStatus>>);

/// A pod's requests as derived from its containers (`resources::pod_requests`), kept in a small
/// form until the store takes them: a map per pod would hold about 600 bytes until then.
#[derive(Clone, Debug, PartialEq)]
pub struct Requests {
    /// Resource name and amount, sorted by name, only non-zero entries.
    pub requests: Box<[(Box<str>, Quantity)]>,
    /// CPU (milli) and memory with the non-zero defaults, for scoring.
    pub non_zero: [i64; 2],
}

impl From<BorrowedRequests<'_>> for Requests {
    fn from(r: BorrowedRequests<'_>) -> Requests {
        Requests {
            requests: r.requests.into_iter().map(|(n, q)| (Box::from(n), q)).collect(),
            non_zero: [r.non_zero_milli_cpu, r.non_zero_memory],
        }
    }
}

/// What the scheduler reads of one container (init containers first, then regular ones).
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerView {
    /// Listed in `spec.initContainers`.
    pub init: bool,
    pub restart_policy: Option<Box<str>>,
    pub image: Option<Box<str>>,
    /// `ports`, as given (empty when none).
    pub ports: Box<[ContainerPort]>,
}

impl ContainerView {
    fn of(c: &Container, init: bool) -> ContainerView {
        ContainerView {
            init,
            restart_policy: c.restart_policy.as_deref().map(Box::from),
            image: c.image.as_deref().map(Box::from),
            ports: c.ports.clone().unwrap_or_default().into_boxed_slice(),
        }
    }

    /// Runs beside the regular containers: a regular container, or a sidecar (an init container
    /// with `restartPolicy: Always`).
    pub fn long_lived(&self) -> bool {
        !self.init || self.restart_policy.as_deref() == Some("Always")
    }
}

/// What the pods of one template share: the spec with its container lists and `nodeName` taken
/// out, the lists packed, the views of the containers. The store keeps one per distinct spec
/// ([`SpecTable`]); a pod that arrives with a spec it has already holds that one.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedSpec {
    /// [`SpecContainers`] as JSON. First, so that comparing two specs compares it first.
    packed: Box<[u8]>,
    /// The spec, its container lists empty and its `nodeName` unset.
    spec: PodSpec,
    /// What follows from the container lists (behind a pointer: the spec's `Arc` stays within
    /// its allocation class).
    derived: Box<Derived>,
}

/// What a [`SharedSpec`] derives from its container lists before packing them.
#[derive(Clone, Debug, PartialEq)]
struct Derived {
    views: Box<[ContainerView]>,
    /// The requests of a pod with this spec and no container statuses (only
    /// `status.containerStatuses[].allocatedResources` changes them), read in place
    /// ([`StoredPod::spec_requests`]): a pod copied from the store and changed needs no unpacking
    /// of its containers, and a pod made keeps no copy of its own.
    requests: Result<Requests, QuantityFieldError>,
}

impl SharedSpec {
    /// The spec's container lists taken out and packed; its `nodeName` taken out and returned.
    /// (Its size keeps its `Arc` in mimalloc's 1,536-byte class, as a boxed `PodSpec` is: a
    /// pod whose spec no other pod shares costs what it did.)
    /// (`requests`: the spec's, derived by the caller before the spec is moved.)
    fn new(mut spec: PodSpec, requests: Result<Requests, QuantityFieldError>) -> (SharedSpec, Option<String>) {
        let node_name = spec.node_name.take();
        let lists: SpecContainers =
            (spec.init_containers.take(), std::mem::take(&mut spec.containers), spec.ephemeral_containers.take());
        let inits = lists.0.iter().flatten().map(|c| ContainerView::of(c, true));
        let views = inits.chain(lists.1.iter().map(|c| ContainerView::of(c, false))).collect();
        (SharedSpec { packed: pack(&lists), spec, derived: Box::new(Derived { views, requests }) }, node_name)
    }
}

/// A pod as the store keeps it (see the module).
#[derive(Clone, Debug, Default)]
pub struct StoredPod {
    /// The object's parts, the container lists taken out of the spec and the status.
    meta: ObjectMeta,
    /// Shared by the pods of one spec once the store has the pod ([`StoredPod::share_spec`]).
    spec: Option<Arc<SharedSpec>>,
    /// `spec.nodeName`, kept per pod: the pods of a template share the rest of their spec.
    node_name: Option<String>,
    status: Option<Box<PodStatus>>,
    /// [`StatusContainers`] as JSON; empty when the status has none of them.
    status_containers: Box<[u8]>,
    /// `metadata.managedFields` as JSON; empty when there are none.
    managed_fields: Box<[u8]>,
    /// The requests derived from the containers and their statuses before they were packed, for
    /// a pod whose container statuses list allocated resources, until the store takes them
    /// ([`StoredPod::take_requests`]); any other pod has its spec's ([`StoredPod::spec_requests`]).
    requests: Option<Box<Result<Requests, QuantityFieldError>>>,
    /// Whether the packed container statuses list allocated resources: then the pod's requests
    /// are its own, not its spec's.
    allocated: bool,
    /// Drawn anew when the pod is made and whenever its status may change, never 0 for a made
    /// pod: what was derived from the pod is stale when its stamp is not this one (a copy keeps
    /// it, as it is equal; only compared for equality).
    stamp: u64,
}

impl From<Box<Pod>> for StoredPod {
    fn from(pod: Box<Pod>) -> StoredPod {
        StoredPod::new(pod)
    }
}

impl StoredPod {
    /// Takes the pod's container lists out and packs them.
    pub fn new(mut pod: Box<Pod>) -> StoredPod {
        // The spec's requests; and the pod's own when its container statuses list allocated
        // resources (they may raise them).
        let spec_requests =
            pod.spec.as_ref().map(|spec| resources::pod_requests_borrowed(spec, None).map(Requests::from));
        let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
        let allocated = statuses.iter().any(|c| c.allocated_resources.is_some());
        let requests = match (pod.spec.as_ref(), pod.status.as_ref()) {
            (Some(spec), Some(status)) if allocated => {
                Some(Box::new(resources::pod_requests_borrowed(spec, Some(status)).map(Requests::from)))
            }
            _ => None,
        };
        let status_containers = match pod.status.as_mut() {
            Some(s)
                if s.init_container_statuses.is_some()
                    || s.container_statuses.is_some()
                    || s.ephemeral_container_statuses.is_some() =>
            {
                let lists: StatusContainers = (
                    s.init_container_statuses.take(),
                    s.container_statuses.take(),
                    s.ephemeral_container_statuses.take(),
                );
                pack(&lists)
            }
            _ => Box::default(),
        };
        let Pod { mut metadata, spec, status } = *pod;
        let managed_fields = metadata.managed_fields.take().map_or_else(Box::default, |m| pack(&m));
        let (spec, node_name) = match spec.zip(spec_requests).map(|(spec, r)| SharedSpec::new(spec, r)) {
            Some((spec, node_name)) => (Some(Arc::new(spec)), node_name),
            None => (None, None),
        };
        StoredPod {
            meta: metadata,
            managed_fields,
            spec,
            node_name,
            status: status.map(Box::new),
            status_containers,
            requests,
            allocated,
            stamp: crate::cluster::fresh_stamp(),
        }
    }

    /// See [`StoredPod::stamp`]'s field: 0 for a pod not made by [`StoredPod::new`].
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    /// A copy holding a spec of its own, not the one it shares with other pods (a copy kept
    /// beside the store does not keep a spec the store let go).
    pub fn detached(&self) -> StoredPod {
        let spec = self.spec.as_deref().map(|s| Arc::new(s.clone()));
        StoredPod { spec, ..self.clone() }
    }

    /// Holds the table's equal spec instead of its own, or files its own there (see
    /// [`SpecTable`]).
    pub fn share_spec(&mut self, table: &mut SpecTable) {
        if let Some(spec) = self.spec.as_mut() {
            table.share(spec);
        }
    }

    /// Tells the table this pod is leaving the store (see [`SpecTable::release`]).
    pub fn release_spec(&self, table: &mut SpecTable) {
        if let Some(spec) = self.spec.as_ref() {
            table.release(spec);
        }
    }

    /// The pod's requests when its container statuses list allocated resources (they count):
    /// those derived when it was packed, the first time; derived again from the unpacked lists
    /// after that (a copy of a pod the store holds, changed). `None` for any other pod (its
    /// requests are [`StoredPod::spec_requests`]) or one without a spec.
    pub fn take_requests(&mut self) -> Option<Box<Result<Requests, QuantityFieldError>>> {
        if let Some(r) = self.requests.take() {
            return Some(r);
        }
        let shared = self.spec.as_deref()?;
        if !self.allocated {
            return None;
        }
        let (_, statuses, _): StatusContainers = unpack(&self.status_containers);
        let statuses = statuses?;
        let mut spec = shared.spec.clone();
        (spec.init_containers, spec.containers, spec.ephemeral_containers) = self.unpack_spec();
        let status = PodStatus { container_statuses: Some(statuses), ..PodStatus::default() };
        Some(Box::new(resources::pod_requests_borrowed(&spec, Some(&status)).map(Requests::from)))
    }

    /// The requests of a pod of this spec without container statuses; `None` without a spec.
    pub fn spec_requests(&self) -> Option<&Result<Requests, QuantityFieldError>> {
        self.spec.as_deref().map(|s| &s.derived.requests)
    }

    /// The pod's requests: its own ([`StoredPod::take_requests`], taken) or its spec's.
    #[cfg(test)]
    fn requests_now(&mut self) -> Option<Result<Requests, QuantityFieldError>> {
        match self.take_requests() {
            Some(own) => Some(*own),
            None => self.spec_requests().cloned(),
        }
    }

    /// Sets `spec.nodeName` (a copy of a stored pod that a world binds).
    pub fn set_node_name(&mut self, node: Option<String>) {
        self.stamp = crate::cluster::fresh_stamp();
        self.node_name = node;
    }

    /// Drops `metadata.managedFields`, as the store does with every pod it takes.
    pub fn drop_managed_fields(&mut self) {
        self.managed_fields = Box::default();
    }

    pub fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    /// The spec, its container lists empty (read [`StoredPod::containers`]) and its `nodeName`
    /// unset (read [`StoredPod::node_name`]).
    pub fn spec(&self) -> Option<&PodSpec> {
        self.spec.as_deref().map(|s| &s.spec)
    }

    /// `spec.nodeName` as given.
    pub fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref()
    }

    /// The status, its container statuses taken out.
    pub fn status(&self) -> Option<&PodStatus> {
        self.status.as_deref()
    }

    /// The status to change, if the pod has one.
    pub fn status_mut(&mut self) -> Option<&mut PodStatus> {
        self.stamp = crate::cluster::fresh_stamp();
        self.status.as_deref_mut()
    }

    /// The status to change, created when the pod has none.
    pub fn ensure_status(&mut self) -> &mut PodStatus {
        self.stamp = crate::cluster::fresh_stamp();
        self.status.get_or_insert_with(Box::default)
    }

    /// What the scheduler reads of each container, init containers first.
    pub fn containers(&self) -> &[ContainerView] {
        self.spec.as_deref().map_or(&[], |s| &s.derived.views)
    }

    /// `spec.initContainers` and `spec.containers`, whole.
    pub fn spec_containers(&self) -> (Vec<Container>, Vec<Container>) {
        let (init, regular, _) = self.unpack_spec();
        (init.unwrap_or_default(), regular)
    }

    /// True when the two specs are equal, container lists and `nodeName` included.
    pub fn same_spec(&self, other: &StoredPod) -> bool {
        let same = match (&self.spec, &other.spec) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || (a.spec == b.spec && a.packed == b.packed),
            (a, b) => a.is_none() && b.is_none(),
        };
        same && self.node_name == other.node_name
    }

    /// The whole object, as it was given (with the changes the store made to its status).
    pub fn object(&self) -> Pod {
        let mut pod =
            Pod { metadata: self.meta.clone(), spec: self.spec().cloned(), status: self.status.as_deref().cloned() };
        if let Some(spec) = pod.spec.as_mut() {
            (spec.init_containers, spec.containers, spec.ephemeral_containers) = self.unpack_spec();
            spec.node_name.clone_from(&self.node_name);
        }
        if !self.managed_fields.is_empty() {
            pod.metadata.managed_fields = Some(unpack(&self.managed_fields));
        }
        if !self.status_containers.is_empty() {
            let status = pod.status.get_or_insert_with(PodStatus::default);
            let lists: StatusContainers = unpack(&self.status_containers);
            (status.init_container_statuses, status.container_statuses, status.ephemeral_container_statuses) = lists;
        }
        pod
    }

    fn unpack_spec(&self) -> SpecContainers {
        match self.spec.as_deref() {
            Some(s) => unpack(&s.packed),
            None => Default::default(),
        }
    }
}

impl PodObject for StoredPod {
    fn meta(&self) -> &ObjectMeta {
        StoredPod::meta(self)
    }

    fn spec(&self) -> Option<&PodSpec> {
        StoredPod::spec(self)
    }

    fn status(&self) -> Option<&PodStatus> {
        StoredPod::status(self)
    }

    fn node_name(&self) -> Option<&str> {
        StoredPod::node_name(self)
    }
}

/// The store's specs, one per distinct spec its pods have: the replicas of a Deployment, the
/// pods of a Job, the members of a gang hold one spec between them, so a pod add keeps no spec
/// of its own and a pod delete frees none (about 1.5 KiB of struct and its container lists per
/// pod). Filed by a hash of the packed lists and of the fields that tell one pod of a template
/// from another (`hostname`, `subdomain`) or one template from another with the same containers
/// (its priority, PodGroup, claims); at most [`SpecTable::PER_HASH`] specs under one hash, compared
/// whole (more only cost the sharing, never a pod's spec). A spec leaves the table when its last
/// pod leaves the store, and a sweep when the table has doubled drops any left only to the table.
#[derive(Clone, Debug, Default)]
pub struct SpecTable {
    /// The first spec filed under each hash.
    first: SpecMap<Arc<SharedSpec>>,
    /// The others (rare: specs whose hashed fields are all equal).
    more: SpecMap<Vec<Arc<SharedSpec>>>,
    /// Specs filed.
    len: usize,
    /// The length at which the next sweep runs.
    sweep_at: usize,
}

type SpecMap<V> = std::collections::HashMap<u64, V, std::hash::BuildHasherDefault<muster_cel::IdHasher>>;

impl SpecTable {
    /// Specs filed under one hash, at most.
    const PER_HASH: usize = 4;
    /// The table's length below which it is never swept.
    const MIN_SWEEP: usize = 1024;

    fn hash(spec: &SharedSpec) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = foldhash::fast::FixedState::with_seed(0).build_hasher();
        let s = &spec.spec;
        spec.packed.hash(&mut h);
        s.hostname.hash(&mut h);
        s.subdomain.hash(&mut h);
        s.priority.hash(&mut h);
        s.scheduling_group.as_ref().map(|g| &g.pod_group_name).hash(&mut h);
        for c in s.resource_claims.iter().flatten() {
            (&c.name, &c.resource_claim_name, &c.resource_claim_template_name).hash(&mut h);
        }
        h.finish()
    }

    /// Specs filed (each held by at least one pod, or left to the next sweep).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Specs filed that no pod holds: none, unless a copy of a pod outlived its slot (a sweep
    /// drops them).
    pub fn unheld(&self) -> usize {
        self.filed().filter(|s| Arc::strong_count(s) == 1).count()
    }

    fn filed(&self) -> impl Iterator<Item = &Arc<SharedSpec>> {
        self.first.values().chain(self.more.values().flatten())
    }

    /// Replaces `spec` with the table's equal one, or files it.
    fn share(&mut self, spec: &mut Arc<SharedSpec>) {
        let h = Self::hash(spec);
        let Some(first) = self.first.get(&h) else {
            self.file(h, Arc::clone(spec));
            return;
        };
        let others = self.more.get(&h).map_or(&[][..], Vec::as_slice);
        match std::iter::once(first).chain(others).find(|s| Arc::ptr_eq(s, spec) || ***s == **spec) {
            Some(same) => *spec = Arc::clone(same),
            None if others.len() + 1 < Self::PER_HASH => self.file(h, Arc::clone(spec)),
            None => {}
        }
    }

    fn file(&mut self, h: u64, spec: Arc<SharedSpec>) {
        self.place(h, spec);
        self.len += 1;
        if self.len >= self.sweep_at.max(Self::MIN_SWEEP) {
            self.sweep();
        }
    }

    /// A pod holding `spec` leaves the store: when it was the last, the spec leaves the table.
    fn release(&mut self, spec: &Arc<SharedSpec>) {
        if Arc::strong_count(spec) == 2 {
            self.unfile(Self::hash(spec), spec);
        }
    }

    fn unfile(&mut self, h: u64, spec: &Arc<SharedSpec>) {
        let others = self.more.get_mut(&h);
        if self.first.get(&h).is_some_and(|f| Arc::ptr_eq(f, spec)) {
            match others.and_then(Vec::pop) {
                Some(next) => drop(self.first.insert(h, next)),
                None => drop(self.first.remove(&h)),
            }
        } else if let Some(others) = others
            && let Some(at) = others.iter().position(|s| Arc::ptr_eq(s, spec))
        {
            others.swap_remove(at);
        } else {
            return;
        }
        if self.more.get(&h).is_some_and(Vec::is_empty) {
            self.more.remove(&h);
        }
        self.len -= 1;
    }

    /// Drops the specs only the table holds (a pod copied elsewhere when its last one left).
    fn sweep(&mut self) {
        let kept: Vec<Arc<SharedSpec>> = self.filed().filter(|s| Arc::strong_count(s) > 1).cloned().collect();
        self.first.clear();
        self.more.clear();
        self.len = kept.len();
        for spec in kept {
            self.place(Self::hash(&spec), spec);
        }
        self.sweep_at = 2 * self.len;
    }

    /// Puts `spec` under hash `h`: first, or among the others.
    fn place(&mut self, h: u64, spec: Arc<SharedSpec>) {
        match self.first.entry(h) {
            std::collections::hash_map::Entry::Vacant(v) => drop(v.insert(spec)),
            std::collections::hash_map::Entry::Occupied(_) => self.more.entry(h).or_default().push(spec),
        }
    }
}

fn pack<T: serde::Serialize>(value: &T) -> Box<[u8]> {
    // Serializing these types into a vector cannot fail: their maps have string keys.
    serde_json::to_vec(value).expect("container lists serialize to JSON").into_boxed_slice()
}

fn unpack<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
    // The bytes were written by `pack` from the same type: they read back.
    serde_json::from_slice(bytes).expect("packed container lists read back")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rich() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}, "managedFields": [{
                "manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": "2026-12-01T00:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {}}}
            }]},
            "spec": {
                "nodeName": "n1",
                "initContainers": [
                    {"name": "setup", "image": "busybox", "resources": {"requests": {"cpu": "2"}}},
                    {"name": "proxy", "image": "envoy:1", "restartPolicy": "Always",
                     "ports": [{"containerPort": 15001, "hostPort": 15001, "protocol": "TCP"}]}
                ],
                "containers": [{
                    "name": "main", "image": "trainer:v2", "command": ["python", "train.py"],
                    "env": [{"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
                                  "limits": {"nvidia.com/gpu": "1"}, "claims": [{"name": "gpu"}]},
                    "ports": [{"containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]
                }],
                "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
                "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}]
            },
            "status": {
                "phase": "Running",
                "startTime": "2026-12-01T00:00:00Z",
                "containerStatuses": [{
                    "name": "main", "image": "trainer:v2", "imageID": "", "ready": true, "restartCount": 3,
                    "state": {"running": {"startedAt": "2026-12-01T00:00:05Z"}},
                    "allocatedResources": {"cpu": "500m"}
                }]
            }
        }))
        .unwrap()
    }

    #[test]
    fn the_object_comes_back_whole() {
        let pod = rich();
        let stored = StoredPod::new(Box::new(pod.clone()));
        assert_eq!(stored.object(), pod);
        let spec = stored.spec().unwrap();
        assert!(spec.containers.is_empty() && spec.init_containers.is_none() && spec.ephemeral_containers.is_none());
        assert!(stored.status().unwrap().container_statuses.is_none());
        assert!(stored.meta().managed_fields.is_none());
        assert_eq!(stored.status().unwrap().phase.as_deref(), Some("Running"));
    }

    /// A copy of a stored pod, changed (bound elsewhere, its phase set), has the requests
    /// `StoredPod::new` derives from the whole object: from the shared spec when the status has
    /// no container statuses, from the unpacked lists when their allocated resources count.
    #[test]
    fn a_changed_copy_has_the_requests_of_the_whole_object() {
        let resized = |cpu: &str| {
            let mut pod = rich();
            pod.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[0].allocated_resources =
                Some([("cpu".to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity(cpu.into()))].into());
            pod
        };
        let without = {
            let mut pod = rich();
            pod.status.as_mut().unwrap().container_statuses = None;
            pod
        };
        let unallocated = {
            let mut pod = rich();
            pod.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[0].allocated_resources = None;
            pod
        };
        // Only allocated resources make a pod's requests its own.
        assert!(StoredPod::new(Box::new(unallocated.clone())).take_requests().is_none());
        assert!(StoredPod::new(Box::new(rich())).take_requests().is_some());
        for pod in [rich(), resized("3"), without, unallocated] {
            let mut stored = StoredPod::new(Box::new(pod.clone()));
            let first = stored.requests_now().unwrap().unwrap();
            let mut copy = stored.clone();
            copy.set_node_name(Some("n2".into()));
            copy.ensure_status().phase = Some("Pending".into());
            let mut whole = copy.object();
            assert_eq!(whole.spec.as_ref().unwrap().node_name.as_deref(), Some("n2"));
            let expected = StoredPod::new(Box::new(whole.clone())).requests_now().unwrap().unwrap();
            assert_eq!(copy.requests_now().unwrap().unwrap(), expected);
            assert_eq!(first, expected, "the node and the phase change no request");
            // Taken again, the same.
            assert_eq!(stored.requests_now().unwrap().unwrap(), first);
            whole.spec = None;
            assert!(StoredPod::new(Box::new(whole)).requests_now().is_none());
        }
        let cpu = |p: Pod| {
            let r = StoredPod::new(Box::new(p)).requests_now().unwrap().unwrap();
            r.requests.iter().find(|(n, _)| &**n == "cpu").map(|(_, q)| q.milli_value())
        };
        // The larger of the init container's 2 and the allocated 3 (with the sidecar's none).
        assert_eq!((cpu(rich()), cpu(resized("3"))), (Some(2000), Some(3000)));
    }

    #[test]
    fn a_pod_without_spec_or_status_comes_back_whole() {
        let pod =
            Pod { metadata: ObjectMeta { name: Some("bare".into()), ..Default::default() }, ..Default::default() };
        let stored = StoredPod::new(Box::new(pod.clone()));
        assert_eq!(stored.object(), pod);
        assert!(stored.containers().is_empty());
    }

    #[test]
    fn the_views_list_init_containers_first() {
        let stored = StoredPod::new(Box::new(rich()));
        let images: Vec<_> = stored.containers().iter().map(|c| c.image.as_deref().unwrap()).collect();
        assert_eq!(images, ["busybox", "envoy:1", "trainer:v2"]);
        let long: Vec<_> = stored.containers().iter().map(ContainerView::long_lived).collect();
        assert_eq!(long, [false, true, true]);
        assert_eq!(stored.containers()[1].ports[0].host_port, Some(15001));
        let (init, regular) = stored.spec_containers();
        assert_eq!((init.len(), regular[0].name.as_str()), (2, "main"));
    }

    #[test]
    fn specs_differing_only_in_a_container_are_not_the_same() {
        let a = StoredPod::new(Box::new(rich()));
        let mut other = rich();
        other.spec.as_mut().unwrap().containers[0].image = Some("trainer:v3".into());
        let b = StoredPod::new(Box::new(other));
        assert!(a.same_spec(&a.clone()));
        assert!(!a.same_spec(&b));
    }

    /// `rich()` bound to `node`, named `name`, its spec changed by `edit`.
    fn replica(name: &str, node: Option<&str>, edit: impl FnOnce(&mut PodSpec)) -> StoredPod {
        let mut pod = rich();
        pod.metadata.name = Some(name.into());
        let spec = pod.spec.as_mut().unwrap();
        spec.node_name = node.map(Into::into);
        edit(spec);
        StoredPod::new(Box::new(pod))
    }

    fn held(pod: &StoredPod) -> &Arc<SharedSpec> {
        pod.spec.as_ref().unwrap()
    }

    #[test]
    fn replicas_share_one_spec_and_keep_their_nodes() {
        let mut table = SpecTable::default();
        let mut a = replica("a", Some("n1"), |_| {});
        let mut b = replica("b", Some("n2"), |_| {});
        let mut c = replica("c", None, |_| {});
        for p in [&mut a, &mut b, &mut c] {
            p.share_spec(&mut table);
        }
        assert!(Arc::ptr_eq(held(&a), held(&b)) && Arc::ptr_eq(held(&a), held(&c)));
        assert_eq!(table.len(), 1);
        assert_eq!((a.node_name(), b.node_name(), c.node_name()), (Some("n1"), Some("n2"), None));
        assert!(a.spec().unwrap().node_name.is_none());
        let mut whole = rich();
        whole.metadata.name = Some("b".into());
        whole.spec.as_mut().unwrap().node_name = Some("n2".into());
        assert_eq!(b.object(), whole);
        assert!(!a.same_spec(&b), "the node is part of the spec");
        assert!(a.same_spec(&replica("a2", Some("n1"), |_| {})));
    }

    #[test]
    fn pods_that_differ_hold_their_own_specs() {
        let mut table = SpecTable::default();
        let mut a = replica("a", None, |_| {});
        let mut hostname = replica("b", None, |s| s.hostname = Some("b".into()));
        let mut selector = replica("c", None, |s| s.node_selector = Some([("zone".into(), "z1".into())].into()));
        for p in [&mut a, &mut hostname, &mut selector] {
            p.share_spec(&mut table);
        }
        assert!(!Arc::ptr_eq(held(&a), held(&hostname)) && !Arc::ptr_eq(held(&a), held(&selector)));
        assert_eq!(selector.spec().unwrap().node_selector.as_ref().unwrap()["zone"], "z1");
        assert_eq!(table.len(), 3);
    }

    #[test]
    fn a_hash_files_a_few_specs_and_the_rest_keep_their_own() {
        let mut table = SpecTable::default();
        // Same containers, hostname, priority, group and claims, so the same hash: only the
        // priority class differs.
        let class = |i: i32| move |s: &mut PodSpec| s.priority_class_name = Some(format!("c{i}"));
        let mut pods: Vec<StoredPod> = (0..6).map(|i| replica("p", None, class(i))).collect();
        for p in &mut pods {
            p.share_spec(&mut table);
        }
        assert_eq!(table.len(), SpecTable::PER_HASH);
        for (i, p) in pods.iter().enumerate() {
            assert_eq!(p.spec().unwrap().priority_class_name, Some(format!("c{i}")));
        }
        // A later pod equal to a filed spec still finds it.
        let mut again = replica("q", None, class(1));
        again.share_spec(&mut table);
        assert!(Arc::ptr_eq(held(&again), held(&pods[1])));
        // The first filed leaves with its pod: the others are still found, and the hash has room.
        let first = pods.remove(0);
        first.release_spec(&mut table);
        drop(first);
        assert_eq!(table.len(), SpecTable::PER_HASH - 1);
        for i in 1..SpecTable::PER_HASH {
            let mut p = replica("r", None, class(i as i32));
            p.share_spec(&mut table);
            assert!(Arc::ptr_eq(held(&p), held(&pods[i - 1])), "class {i}");
        }
        let mut back = replica("s", None, class(0));
        back.share_spec(&mut table);
        assert_eq!(table.len(), SpecTable::PER_HASH);
        assert_eq!(table.unheld(), 0);
    }

    #[test]
    fn a_spec_leaves_the_table_with_its_last_pod() {
        let mut table = SpecTable::default();
        let (mut a, mut b) = (replica("a", Some("n1"), |_| {}), replica("b", Some("n1"), |_| {}));
        a.share_spec(&mut table);
        b.share_spec(&mut table);
        a.release_spec(&mut table);
        drop(a);
        assert_eq!(table.len(), 1, "b still holds it");
        b.release_spec(&mut table);
        drop(b);
        assert!(table.is_empty() && table.first.is_empty() && table.more.is_empty());
    }

    #[test]
    fn a_sweep_drops_the_specs_only_the_table_holds() {
        let mut table = SpecTable::default();
        let mut kept = replica("kept", None, |_| {});
        kept.share_spec(&mut table);
        // A copy held elsewhere when the pod left: the table keeps the spec until a sweep.
        let mut gone = replica("gone", None, |s| s.priority = Some(7));
        gone.share_spec(&mut table);
        let copy = gone.clone();
        let weak = Arc::downgrade(held(&gone));
        gone.release_spec(&mut table);
        drop((gone, copy));
        assert_eq!(table.len(), 2);
        assert!(weak.upgrade().is_some(), "the table still holds it");
        // Two filed: the sweep runs at the insert that files the threshold-th.
        for i in 0..SpecTable::MIN_SWEEP as i32 - 2 {
            let mut p = replica("p", None, |s| s.hostname = Some(format!("h{i}")));
            p.share_spec(&mut table);
        }
        // The sweep ran as the last was filed: only `kept`'s spec and the last one (its pod
        // still held it) stayed.
        assert_eq!(table.len(), 2);
        assert!(weak.upgrade().is_none(), "swept");
        assert!(table.filed().any(|s| Arc::ptr_eq(s, held(&kept))));
    }

    /// A spec no other pod shares costs what a boxed `PodSpec` did: its `Arc` (two counts and
    /// the spec) stays within the 1,536-byte class that holds the 1,488-byte `PodSpec`.
    #[test]
    fn a_shared_spec_fits_the_allocation_class_of_a_boxed_spec() {
        assert!(size_of::<PodSpec>() <= 1536);
        assert!(2 * size_of::<usize>() + size_of::<SharedSpec>() <= 1536, "{}", size_of::<SharedSpec>());
    }
}
