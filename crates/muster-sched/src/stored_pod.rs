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
//! are derived before packing and kept until the store takes them. Readers see the rest through
//! [`PodObject`], as they see a `Pod`, with the container lists empty; [`StoredPod::object`]
//! rebuilds the whole pod for the outputs that print it.

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerStatus, EphemeralContainer, Pod, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use muster_api::resources::{self, BorrowedRequests, QuantityFieldError};
use muster_api::{PodObject, Quantity};

/// The spec's container lists, as packed: `initContainers`, `containers`, `ephemeralContainers`.
type SpecContainers = (Option<Vec<Container>>, Vec<Container>, Option<Vec<EphemeralContainer>>);
/// The status's container lists, as packed: init, regular, ephemeral.
type StatusContainers = (Option<Vec<ContainerStatus>>, Option<Vec<ContainerStatus>>, Option<Vec<ContainerStatus>>);

/// A pod's requests as derived from its containers (`resources::pod_requests`), kept in a small
/// form until the store takes them: a map per pod would hold about 600 bytes until then.
#[derive(Clone, Debug)]
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

/// A pod as the store keeps it (see the module).
#[derive(Clone, Debug, Default)]
pub struct StoredPod {
    /// The object's parts, the container lists taken out of the spec and the status.
    meta: ObjectMeta,
    spec: Option<Box<PodSpec>>,
    status: Option<Box<PodStatus>>,
    /// [`SpecContainers`] as JSON; empty when the pod has no spec.
    spec_containers: Box<[u8]>,
    /// [`StatusContainers`] as JSON; empty when the status has none of them.
    status_containers: Box<[u8]>,
    /// `metadata.managedFields` as JSON; empty when there are none.
    managed_fields: Box<[u8]>,
    containers: Box<[ContainerView]>,
    /// The requests derived from the containers before they were packed, until the store takes
    /// them ([`StoredPod::take_requests`]).
    requests: Option<Box<Result<Requests, QuantityFieldError>>>,
}

impl From<Box<Pod>> for StoredPod {
    fn from(pod: Box<Pod>) -> StoredPod {
        StoredPod::new(pod)
    }
}

impl StoredPod {
    /// Takes the pod's container lists out and packs them.
    pub fn new(mut pod: Box<Pod>) -> StoredPod {
        let requests = pod
            .spec
            .as_ref()
            .map(|spec| Box::new(resources::pod_requests_borrowed(spec, pod.status.as_ref()).map(Requests::from)));
        let (spec_containers, containers) = match pod.spec.as_mut() {
            Some(spec) => {
                let lists: SpecContainers = (
                    spec.init_containers.take(),
                    std::mem::take(&mut spec.containers),
                    spec.ephemeral_containers.take(),
                );
                let inits = lists.0.iter().flatten().map(|c| ContainerView::of(c, true));
                let views = inits.chain(lists.1.iter().map(|c| ContainerView::of(c, false))).collect();
                (pack(&lists), views)
            }
            None => (Box::default(), Box::default()),
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
        StoredPod {
            meta: metadata,
            managed_fields,
            spec: spec.map(Box::new),
            status: status.map(Box::new),
            spec_containers,
            status_containers,
            containers,
            requests,
        }
    }

    /// The pod's requests, derived from its containers when it was packed; `None` once taken, or
    /// when the pod has no spec.
    pub fn take_requests(&mut self) -> Option<Result<Requests, QuantityFieldError>> {
        self.requests.take().map(|r| *r)
    }

    pub fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    /// The spec, its container lists empty (read [`StoredPod::containers`]).
    pub fn spec(&self) -> Option<&PodSpec> {
        self.spec.as_deref()
    }

    /// The status, its container statuses taken out.
    pub fn status(&self) -> Option<&PodStatus> {
        self.status.as_deref()
    }

    /// The status to change, if the pod has one.
    pub fn status_mut(&mut self) -> Option<&mut PodStatus> {
        self.status.as_deref_mut()
    }

    /// The status to change, created when the pod has none.
    pub fn ensure_status(&mut self) -> &mut PodStatus {
        self.status.get_or_insert_with(Box::default)
    }

    /// What the scheduler reads of each container, init containers first.
    pub fn containers(&self) -> &[ContainerView] {
        &self.containers
    }

    /// `spec.initContainers` and `spec.containers`, whole.
    pub fn spec_containers(&self) -> (Vec<Container>, Vec<Container>) {
        let (init, regular, _) = self.unpack_spec();
        (init.unwrap_or_default(), regular)
    }

    /// True when the two specs are equal, container lists included.
    pub fn same_spec(&self, other: &StoredPod) -> bool {
        self.spec == other.spec && self.spec_containers == other.spec_containers
    }

    /// The whole object, as it was given (with the changes the store made to its status).
    pub fn object(&self) -> Pod {
        let mut pod = Pod {
            metadata: self.meta.clone(),
            spec: self.spec.as_deref().cloned(),
            status: self.status.as_deref().cloned(),
        };
        if let Some(spec) = pod.spec.as_mut() {
            (spec.init_containers, spec.containers, spec.ephemeral_containers) = self.unpack_spec();
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
        if self.spec_containers.is_empty() {
            return Default::default();
        }
        unpack(&self.spec_containers)
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
}
