//! A pod's effective resource request, computed as the scheduler computes it.
//!
//! This follows `k8s.io/component-helpers/resource.PodRequests` in 1.37: sidecar-aware init
//! containers (KEP 753), pod-level resources (KEP 2837, beta and on by default), in-place resize
//! (the larger of the spec and the allocated resources), and pod overhead. The request defaulting the
//! API server would have applied to a manifest that never went through it (a limit without a request
//! means a request equal to the limit) is applied here too, so hand-written YAML is read the way the
//! cluster would hold it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::quantity::{self, Quantity};

/// Resource name → amount, ordered by name so that every walk over it is deterministic.
pub type ResourceMap = BTreeMap<String, Quantity>;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// The scheduler's stand-in CPU request for a container that sets none (`DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// The scheduler's stand-in memory request for a container that sets none (`DefaultMemoryRequest`).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// A field that does not hold a valid quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: invalid quantity {value:?}: {source}")]
pub struct QuantityFieldError {
    /// JSON path of the field inside the object, e.g. `spec.containers[0].resources.requests.cpu`.
    pub field: String,
    pub value: String,
    pub source: quantity::QuantityError,
}

/// Parses a `ResourceList` field; `field` is its path, used in errors. A negative quantity is an
/// error, as the API server's validation makes it for every resource list (requests, limits,
/// overhead, pod-level resources, a node's capacity and allocatable).
pub fn parse_list(
    list: Option<&BTreeMap<String, ApiQuantity>>,
    field: &str,
) -> Result<ResourceMap, QuantityFieldError> {
    let mut out = ResourceMap::new();
    for (name, q) in list.into_iter().flatten() {
        let v = quantity::parse(&q.0)
            .and_then(|v| if v.signum() < 0 { Err(quantity::QuantityError::Negative) } else { Ok(v) })
            .map_err(|source| QuantityFieldError { field: format!("{field}.{name}"), value: q.0.clone(), source })?;
        out.insert(name.clone(), v);
    }
    Ok(out)
}

/// True for the resources a pod may set at pod level: `cpu`, `memory` and `hugepages-*`.
pub fn is_pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// True for names the scheduler accounts as "scalar" resources (extended resources, hugepages,
/// attachable volumes): everything but cpu, memory, ephemeral-storage and pods.
pub fn is_scalar_resource(name: &str) -> bool {
    !matches!(name, CPU | MEMORY | EPHEMERAL_STORAGE | PODS)
}

/// The prefix of the resource name every DeviceClass implicitly backs (KEP 5004):
/// `deviceclass.resource.kubernetes.io/<class>`.
pub const DEVICE_CLASS_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// `IsExtendedResourceName`: a domain-qualified name outside `kubernetes.io` that is not a
/// quota name (`requests.*`).
pub fn is_extended_resource_name(name: &str) -> bool {
    let Some((domain, rest)) = name.split_once('/') else { return false };
    let native = domain == "kubernetes.io" || domain.ends_with(".kubernetes.io");
    !native && !rest.is_empty() && !name.starts_with("requests.")
}

/// `IsDRAExtendedResourceName`: an extended resource name, or a DeviceClass's implicit one.
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.strip_prefix(DEVICE_CLASS_RESOURCE_PREFIX).is_some_and(|c| !c.is_empty())
}

/// A pod's request as NodeResourcesFit filters on it, and the "non-zero" cpu/memory used by scoring.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodRequests {
    /// What the pod asks of a node (only non-zero entries).
    pub requests: ResourceMap,
    /// CPU in millicores with the 100m default for containers that set none (scoring only).
    pub non_zero_milli_cpu: i64,
    /// Memory in bytes with the 200Mi default for containers that set none (scoring only).
    pub non_zero_memory: i64,
}

fn add_into(acc: &mut ResourceMap, add: &ResourceMap) {
    for (k, v) in add {
        let e = acc.entry(k.clone()).or_default();
        *e = e.checked_add(*v).unwrap_or(*e);
    }
}

fn max_into(acc: &mut ResourceMap, other: &ResourceMap) {
    for (k, v) in other {
        let e = acc.entry(k.clone()).or_default();
        if *v > *e {
            *e = *v;
        }
    }
}

/// A container's requests after API defaulting: a resource with a limit but no request requests
/// the limit.
fn container_requests(c: &Container, path: &str) -> Result<ResourceMap, QuantityFieldError> {
    let res = c.resources.as_ref();
    let mut req = parse_list(res.and_then(|r| r.requests.as_ref()), &format!("{path}.resources.requests"))?;
    let limits = parse_list(res.and_then(|r| r.limits.as_ref()), &format!("{path}.resources.limits"))?;
    for (k, v) in limits {
        req.entry(k).or_insert(v);
    }
    Ok(req)
}

/// Computes the pod's effective request (see the module docs for the rules).
pub fn pod_requests(spec: &PodSpec, status: Option<&PodStatus>) -> Result<PodRequests, QuantityFieldError> {
    // Parse every container once.
    let mut regular = Vec::with_capacity(spec.containers.len());
    for (i, c) in spec.containers.iter().enumerate() {
        let mut req = container_requests(c, &format!("spec.containers[{i}]"))?;
        // In-place resize: the larger of what the spec asks and what the kubelet allocated.
        if let Some(cs) =
            status.and_then(|s| s.container_statuses.as_ref()).and_then(|v| v.iter().find(|cs| cs.name == c.name))
            && let Some(alloc) = cs.allocated_resources.as_ref()
        {
            let alloc = parse_list(Some(alloc), &format!("status.containerStatuses[{}].allocatedResources", c.name))?;
            max_into(&mut req, &alloc);
        }
        regular.push(req);
    }
    let mut init = Vec::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        init.push((sidecar, container_requests(c, &format!("spec.initContainers[{i}]"))?));
    }
    let pod_level = spec.resources.as_ref();
    let mut pod_req = parse_list(pod_level.and_then(|r| r.requests.as_ref()), "spec.resources.requests")?;
    let pod_lim = parse_list(pod_level.and_then(|r| r.limits.as_ref()), "spec.resources.limits")?;
    // Defaulting: a pod-level limit without a pod-level request, for a resource no container
    // requests, makes the pod-level request equal to the limit.
    for (k, v) in &pod_lim {
        let container_asks = regular.iter().any(|r| r.contains_key(k)) || init.iter().any(|(_, r)| r.contains_key(k));
        if is_pod_level_resource(k) && !container_asks {
            pod_req.entry(k.clone()).or_insert(*v);
        }
    }
    pod_req.retain(|k, _| is_pod_level_resource(k));
    let overhead = parse_list(spec.overhead.as_ref(), "spec.overhead")?;

    let aggregate = |non_missing: bool| -> ResourceMap {
        let fill = |r: &ResourceMap| -> ResourceMap {
            let mut r = r.clone();
            if non_missing {
                r.entry(CPU.into()).or_insert(Quantity::from_millis(DEFAULT_MILLI_CPU_REQUEST));
                r.entry(MEMORY.into()).or_insert(Quantity::from_units(DEFAULT_MEMORY_REQUEST));
            }
            r
        };
        let mut sum = ResourceMap::new();
        for r in &regular {
            add_into(&mut sum, &fill(r));
        }
        let mut sidecars = ResourceMap::new();
        let mut init_peak = ResourceMap::new();
        for (sidecar, r) in &init {
            let r = fill(r);
            if *sidecar {
                add_into(&mut sidecars, &r);
                max_into(&mut init_peak, &sidecars);
            } else {
                let mut with = sidecars.clone();
                add_into(&mut with, &r);
                max_into(&mut init_peak, &with);
            }
        }
        add_into(&mut sum, &sidecars);
        max_into(&mut sum, &init_peak);
        for (k, v) in &pod_req {
            sum.insert(k.clone(), *v);
        }
        add_into(&mut sum, &overhead);
        sum
    };

    let mut requests = aggregate(false);
    requests.retain(|_, v| !v.is_zero());
    let non_zero = aggregate(true);
    Ok(PodRequests {
        requests,
        non_zero_milli_cpu: non_zero.get(CPU).map_or(0, |q| q.milli_value()),
        non_zero_memory: non_zero.get(MEMORY).map_or(0, |q| q.value()),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn extended_resource_names() {
        use super::{is_dra_extended_resource_name as dra, is_extended_resource_name as ext};
        assert!(ext("nvidia.com/gpu"));
        assert!(ext("example.com/big-gpu"));
        assert!(!ext("cpu"));
        assert!(!ext("hugepages-2Mi"));
        assert!(!ext("kubernetes.io/foo"));
        assert!(!ext("deviceclass.resource.kubernetes.io/gpu"));
        assert!(!ext("requests.nvidia.com/gpu"));
        assert!(dra("nvidia.com/gpu"));
        assert!(dra("deviceclass.resource.kubernetes.io/gpu.example.com"));
        assert!(!dra("deviceclass.resource.kubernetes.io/"));
    }

    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    fn reqs(p: &Pod) -> PodRequests {
        pod_requests(p.spec.as_ref().unwrap(), p.status.as_ref()).unwrap()
    }

    fn get(r: &PodRequests, name: &str) -> Quantity {
        r.requests.get(name).copied().unwrap_or_default()
    }

    #[test]
    fn sums_containers_and_takes_the_init_peak() {
        let p = pod(serde_json::json!({"spec": {
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m"}}}
        ]}}));
        let r = reqs(&p);
        assert_eq!(get(&r, CPU).milli_value(), 3000, "init container peak wins");
        assert_eq!(get(&r, MEMORY).value(), 1 << 30);
        assert_eq!(r.non_zero_milli_cpu, 3000);
        assert_eq!(r.non_zero_memory, (1 << 30) + DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn sidecars_add_to_the_regular_containers() {
        let p = pod(serde_json::json!({"spec": {
            "initContainers": [
                {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"name": "init", "resources": {"requests": {"cpu": "2"}}}
            ],
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}}));
        // regular + sidecars = 2; init peak = sidecar 1 + init 2 = 3.
        assert_eq!(get(&reqs(&p), CPU).milli_value(), 3000);
    }

    #[test]
    fn pod_level_resources_override_cpu_and_memory_only() {
        // workload-spec.md §8.2's example.
        let p = pod(serde_json::json!({"spec": {
        "resources": {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"cpu": "8", "memory": "16Gi"}},
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "1"}}}],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}},
            {"name": "b"}
        ]}}));
        let r = reqs(&p);
        assert_eq!(get(&r, CPU).milli_value(), 4000);
        assert_eq!(get(&r, MEMORY).value(), 8 << 30);
        assert_eq!(get(&r, "example.com/gpu").value(), 1);
        assert_eq!(r.non_zero_milli_cpu, 4000, "a pod-level value is used as is");
    }

    #[test]
    fn pod_level_limit_defaults_the_request() {
        let p = pod(serde_json::json!({"spec": {
            "resources": {"limits": {"memory": "2Gi"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}}));
        assert_eq!(get(&reqs(&p), MEMORY).value(), 2 << 30);
    }

    #[test]
    fn limits_default_requests_and_overhead_is_added() {
        let p = pod(serde_json::json!({"spec": {
            "overhead": {"cpu": "250m"},
            "containers": [{"name": "a", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}}]}}));
        let r = reqs(&p);
        assert_eq!(get(&r, CPU).milli_value(), 2250);
        assert_eq!(get(&r, "nvidia.com/gpu").value(), 1);
    }

    #[test]
    fn best_effort_pods_request_nothing_but_score_with_defaults() {
        let p = pod(serde_json::json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}));
        let r = reqs(&p);
        assert!(r.requests.is_empty());
        assert_eq!(r.non_zero_milli_cpu, 2 * DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(r.non_zero_memory, 2 * DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn resized_containers_use_the_larger_of_spec_and_allocation() {
        let p = pod(serde_json::json!({
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"containerStatuses": [{"name": "a", "image": "x", "imageID": "", "ready": true,
                "restartCount": 0, "allocatedResources": {"cpu": "3"}}]}}));
        assert_eq!(get(&reqs(&p), CPU).milli_value(), 3000);
    }

    #[test]
    fn bad_quantities_name_the_field() {
        let p = pod(serde_json::json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"memory": "80GB"}}}]}}));
        let e = pod_requests(p.spec.as_ref().unwrap(), None).unwrap_err();
        assert_eq!(e.field, "spec.containers[0].resources.requests.memory");
        assert_eq!(
            e.to_string(),
            "spec.containers[0].resources.requests.memory: invalid quantity \"80GB\": unknown quantity suffix \"GB\""
        );
    }
}
