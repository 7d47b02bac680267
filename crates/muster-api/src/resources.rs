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
    parse_list_at(list, &|| field.to_string())
}

/// [`parse_list`] with the field's path made only for an error (a pod's containers are parsed on
/// every pod the scheduler reads: the paths would cost more than the quantities).
fn parse_list_at(
    list: Option<&BTreeMap<String, ApiQuantity>>,
    field: &dyn Fn() -> String,
) -> Result<ResourceMap, QuantityFieldError> {
    parse_acc(list, field).map(into_map)
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

/// [`PodRequests`] with the names borrowed from the pod, sorted by name: for a caller that keeps
/// them in a form of its own (the store does, for every pod it takes), without a map between.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BorrowedRequests<'a> {
    /// Name and amount, sorted by name, each name once, only non-zero entries.
    pub requests: Vec<(&'a str, Quantity)>,
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
}

/// Resource name (borrowed from the spec) → amount: the few resources a pod names, summed
/// without a map or a string per step (a pod's requests are derived for every pod the store
/// takes). Unordered until [`pod_requests_borrowed`] sorts it.
type Acc<'a> = Vec<(&'a str, Quantity)>;

/// The index of `k` in `acc`, inserted as zero when missing.
fn entry<'a>(acc: &mut Acc<'a>, k: &'a str) -> usize {
    match acc.iter().position(|(n, _)| *n == k) {
        Some(i) => i,
        None => {
            acc.push((k, Quantity::default()));
            acc.len() - 1
        }
    }
}

fn get(acc: &Acc<'_>, k: &str) -> Option<Quantity> {
    acc.iter().find(|(n, _)| *n == k).map(|(_, q)| *q)
}

fn add_into<'a>(acc: &mut Acc<'a>, add: &Acc<'a>) {
    for (k, v) in add {
        let i = entry(acc, k);
        let e = &mut acc[i].1;
        *e = e.checked_add(*v).unwrap_or(*e);
    }
}

fn max_into<'a>(acc: &mut Acc<'a>, other: &Acc<'a>) {
    for (k, v) in other {
        let i = entry(acc, k);
        let e = &mut acc[i].1;
        if *v > *e {
            *e = *v;
        }
    }
}

fn into_map(acc: Acc<'_>) -> ResourceMap {
    acc.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// [`parse_list`] into an [`Acc`] borrowing the names (in the list's order: an error names the
/// same field as `parse_list` would).
fn parse_acc<'a>(
    list: Option<&'a BTreeMap<String, ApiQuantity>>,
    field: &dyn Fn() -> String,
) -> Result<Acc<'a>, QuantityFieldError> {
    let mut out = Acc::with_capacity(list.map_or(0, BTreeMap::len));
    for (name, q) in list.into_iter().flatten() {
        let v = quantity::parse(&q.0)
            .and_then(|v| if v.signum() < 0 { Err(quantity::QuantityError::Negative) } else { Ok(v) })
            .map_err(|source| QuantityFieldError {
                field: format!("{}.{name}", field()),
                value: q.0.clone(),
                source,
            })?;
        out.push((name.as_str(), v));
    }
    Ok(out)
}

/// `r` with the scoring defaults for a missing cpu or memory request when `non_missing`.
fn filled<'r, 'a>(r: &'r Acc<'a>, non_missing: bool) -> std::borrow::Cow<'r, Acc<'a>> {
    if !non_missing || (get(r, CPU).is_some() && get(r, MEMORY).is_some()) {
        return std::borrow::Cow::Borrowed(r);
    }
    let mut r = r.clone();
    if get(&r, CPU).is_none() {
        r.push((CPU, Quantity::from_millis(DEFAULT_MILLI_CPU_REQUEST)));
    }
    if get(&r, MEMORY).is_none() {
        r.push((MEMORY, Quantity::from_units(DEFAULT_MEMORY_REQUEST)));
    }
    std::borrow::Cow::Owned(r)
}

/// A container's requests after API defaulting: a resource with a limit but no request requests
/// the limit.
fn container_requests<'a>(c: &'a Container, path: &dyn Fn() -> String) -> Result<Acc<'a>, QuantityFieldError> {
    let res = c.resources.as_ref();
    let mut req = parse_acc(res.and_then(|r| r.requests.as_ref()), &|| format!("{}.resources.requests", path()))?;
    let limits = parse_acc(res.and_then(|r| r.limits.as_ref()), &|| format!("{}.resources.limits", path()))?;
    for (k, v) in limits {
        if get(&req, k).is_none() {
            req.push((k, v));
        }
    }
    Ok(req)
}

/// Computes the pod's effective request (see the module docs for the rules).
pub fn pod_requests(spec: &PodSpec, status: Option<&PodStatus>) -> Result<PodRequests, QuantityFieldError> {
    let r = pod_requests_borrowed(spec, status)?;
    Ok(PodRequests {
        requests: into_map(r.requests),
        non_zero_milli_cpu: r.non_zero_milli_cpu,
        non_zero_memory: r.non_zero_memory,
    })
}

/// [`pod_requests`], the names borrowed from the pod.
pub fn pod_requests_borrowed<'a>(
    spec: &'a PodSpec,
    status: Option<&'a PodStatus>,
) -> Result<BorrowedRequests<'a>, QuantityFieldError> {
    // Parse every container once.
    let mut regular = Vec::with_capacity(spec.containers.len());
    for (i, c) in spec.containers.iter().enumerate() {
        let mut req = container_requests(c, &|| format!("spec.containers[{i}]"))?;
        // In-place resize: the larger of what the spec asks and what the kubelet allocated.
        if let Some(cs) =
            status.and_then(|s| s.container_statuses.as_ref()).and_then(|v| v.iter().find(|cs| cs.name == c.name))
            && let Some(alloc) = cs.allocated_resources.as_ref()
        {
            let field = || format!("status.containerStatuses[{}].allocatedResources", c.name);
            let alloc = parse_acc(Some(alloc), &field)?;
            max_into(&mut req, &alloc);
        }
        regular.push(req);
    }
    let mut init = Vec::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        init.push((sidecar, container_requests(c, &|| format!("spec.initContainers[{i}]"))?));
    }
    let pod_level = spec.resources.as_ref();
    let mut pod_req = parse_acc(pod_level.and_then(|r| r.requests.as_ref()), &|| "spec.resources.requests".into())?;
    let pod_lim = parse_acc(pod_level.and_then(|r| r.limits.as_ref()), &|| "spec.resources.limits".into())?;
    // Defaulting: a pod-level limit without a pod-level request, for a resource no container
    // requests, makes the pod-level request equal to the limit.
    for (k, v) in &pod_lim {
        let container_asks =
            regular.iter().any(|r| get(r, k).is_some()) || init.iter().any(|(_, r)| get(r, k).is_some());
        if is_pod_level_resource(k) && !container_asks && get(&pod_req, k).is_none() {
            pod_req.push((k, *v));
        }
    }
    pod_req.retain(|(k, _)| is_pod_level_resource(k));
    let overhead = parse_acc(spec.overhead.as_ref(), &|| "spec.overhead".into())?;

    let aggregate = |non_missing: bool| -> Acc<'_> {
        let fill = |r| filled(r, non_missing);
        let mut sum = Acc::new();
        for r in &regular {
            add_into(&mut sum, &fill(r));
        }
        let mut sidecars = Acc::new();
        let mut init_peak = Acc::new();
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
            let i = entry(&mut sum, k);
            sum[i].1 = *v;
        }
        add_into(&mut sum, &overhead);
        sum
    };

    let mut requests = aggregate(false);
    requests.retain(|(_, v)| !v.is_zero());
    requests.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let non_zero = aggregate(true);
    Ok(BorrowedRequests {
        requests,
        non_zero_milli_cpu: get(&non_zero, CPU).map_or(0, |q| q.milli_value()),
        non_zero_memory: get(&non_zero, MEMORY).map_or(0, |q| q.value()),
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

    /// The rules of the module docs written plainly over maps: the reference the borrowed-key
    /// accumulation in [`pod_requests`] must agree with.
    fn reference(spec: &PodSpec, status: Option<&PodStatus>) -> PodRequests {
        let parse = |l: Option<&BTreeMap<String, ApiQuantity>>| parse_list(l, "x").unwrap();
        let container = |c: &Container| {
            let r = c.resources.as_ref();
            let mut req = parse(r.and_then(|r| r.requests.as_ref()));
            for (k, v) in parse(r.and_then(|r| r.limits.as_ref())) {
                req.entry(k).or_insert(v);
            }
            req
        };
        let add = |acc: &mut ResourceMap, m: &ResourceMap| {
            for (k, v) in m {
                let e = acc.entry(k.clone()).or_default();
                *e = e.checked_add(*v).unwrap_or(*e);
            }
        };
        let max = |acc: &mut ResourceMap, m: &ResourceMap| {
            for (k, v) in m {
                let e = acc.entry(k.clone()).or_default();
                *e = (*e).max(*v);
            }
        };
        let regular: Vec<ResourceMap> = spec
            .containers
            .iter()
            .map(|c| {
                let mut r = container(c);
                let statuses = status.and_then(|s| s.container_statuses.as_ref());
                if let Some(a) = statuses.and_then(|v| v.iter().find(|s| s.name == c.name)) {
                    max(&mut r, &parse(a.allocated_resources.as_ref()));
                }
                r
            })
            .collect();
        let init: Vec<(bool, ResourceMap)> = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| (c.restart_policy.as_deref() == Some("Always"), container(c)))
            .collect();
        let level = spec.resources.as_ref();
        let mut pod_req = parse(level.and_then(|r| r.requests.as_ref()));
        for (k, v) in parse(level.and_then(|r| r.limits.as_ref())) {
            let asked = regular.iter().chain(init.iter().map(|(_, r)| r)).any(|r| r.contains_key(&k));
            if is_pod_level_resource(&k) && !asked {
                pod_req.entry(k).or_insert(v);
            }
        }
        pod_req.retain(|k, _| is_pod_level_resource(k));
        let overhead = parse(spec.overhead.as_ref());
        let total = |defaults: bool| {
            let fill = |r: &ResourceMap| {
                let mut r = r.clone();
                if defaults {
                    r.entry(CPU.into()).or_insert(Quantity::from_millis(DEFAULT_MILLI_CPU_REQUEST));
                    r.entry(MEMORY.into()).or_insert(Quantity::from_units(DEFAULT_MEMORY_REQUEST));
                }
                r
            };
            let (mut sum, mut sidecars, mut peak) = (ResourceMap::new(), ResourceMap::new(), ResourceMap::new());
            regular.iter().for_each(|r| add(&mut sum, &fill(r)));
            for (sidecar, r) in &init {
                if *sidecar {
                    add(&mut sidecars, &fill(r));
                    max(&mut peak, &sidecars);
                } else {
                    let mut with = sidecars.clone();
                    add(&mut with, &fill(r));
                    max(&mut peak, &with);
                }
            }
            add(&mut sum, &sidecars);
            max(&mut sum, &peak);
            sum.extend(pod_req.iter().map(|(k, v)| (k.clone(), *v)));
            add(&mut sum, &overhead);
            sum
        };
        let mut requests = total(false);
        requests.retain(|_, v| !v.is_zero());
        let non_zero = total(true);
        PodRequests {
            requests,
            non_zero_milli_cpu: non_zero.get(CPU).map_or(0, |q| q.milli_value()),
            non_zero_memory: non_zero.get(MEMORY).map_or(0, |q| q.value()),
        }
    }

    fn resource_list() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let name = prop::sample::select(vec!["cpu", "memory", "hugepages-2Mi", "nvidia.com/gpu", "ephemeral-storage"]);
        let amount = prop::sample::select(vec!["0", "1", "250m", "2", "1Gi", "512Mi", "3"]);
        prop::collection::btree_map(name, amount, 0..4).prop_map(|m| serde_json::json!(m))
    }

    fn container(name: String) -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        (resource_list(), resource_list(), any::<bool>()).prop_map(move |(requests, limits, always)| {
            let mut c = serde_json::json!({"name": name, "resources": {"requests": requests, "limits": limits}});
            if always {
                c["restartPolicy"] = "Always".into();
            }
            c
        })
    }

    proptest::proptest! {
        #[test]
        fn pod_requests_agree_with_the_plain_rules(
            containers in proptest::collection::vec(container("c".into()), 1..4),
            inits in proptest::collection::vec(container("i".into()), 0..3),
            level in (resource_list(), resource_list()),
            overhead in resource_list(),
            allocated in resource_list(),
        ) {
            let containers: Vec<serde_json::Value> = containers.into_iter().enumerate().map(|(i, mut c)| {
                c["name"] = format!("c{i}").into();
                c.as_object_mut().unwrap().remove("restartPolicy");
                c
            }).collect();
            let p = pod(serde_json::json!({
                "spec": {"containers": containers, "initContainers": inits,
                         "resources": {"requests": level.0, "limits": level.1}, "overhead": overhead},
                "status": {"containerStatuses": [{"name": "c0", "image": "x", "imageID": "", "ready": true,
                    "restartCount": 0, "allocatedResources": allocated}]}}));
            let (spec, status) = (p.spec.as_ref().unwrap(), p.status.as_ref());
            proptest::prop_assert_eq!(pod_requests(spec, status).unwrap(), reference(spec, status));
        }
    }
}
