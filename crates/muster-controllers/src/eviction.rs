//! Device taints with where each came from, health propagation to partitions, and the pods that
//! NoExecute device taints evict (the device-taint-eviction controller of kube-controller-manager,
//! computed for a snapshot).
//!
//! [`DeviceTaints`] collects the taints of every device: the driver's own (from the ResourceSlices
//! of a pool's highest generation), the DeviceTaintRules', and — muster's addition — those
//! [`DeviceTaints::propagate_health`] copies from a full device to its partitions. [`evictions`]
//! then walks the allocated claims: for each allocated device and each of its `NoExecute` taints,
//! the tolerations copied into the allocation result decide when the claim's consumers go:
//!
//! - no copied toleration matches: at the taint's `timeAdded`;
//! - every matching toleration has no `tolerationSeconds`: never (no entry is returned);
//! - otherwise: `timeAdded` + the smallest `tolerationSeconds` (negative counts as 0).
//!
//! Consumers are the pods in `status.reservedFor`; a `podgroups` entry stands for every pod of the
//! claim's namespace whose `spec.schedulingGroup.podGroupName` names it. Only bound pods
//! (`spec.nodeName` set) are evicted; pending pods are kept off such devices by the allocator.
//! A DeviceTaintRule whose taint has effect `None` is simulated as `NoExecute` and its evictions are
//! returned as dry runs (what the controller writes into the rule's status before an admin switches
//! the effect). Driver taints with effect `None` (health hints such as non-fatal XIDs) and unknown
//! effects evict nothing and are not simulated.
//!
//! No clock is read: a taint without `timeAdded` (the API server sets it on create) gives an
//! eviction without a time, which callers report as such.

use muster_api::PodObject;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use k8s_openapi::api::resource::v1::{
    CounterSet, Device, DeviceTaint, DeviceTaintRule, DeviceToleration, ResourceClaim, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::SignedDuration;

pub const NO_SCHEDULE: &str = "NoSchedule";
pub const NO_EXECUTE: &str = "NoExecute";
pub const NONE: &str = "None";

/// A device, by its place in the cluster's pools.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceKey {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

impl DeviceKey {
    pub fn new(driver: &str, pool: &str, device: &str) -> Self {
        DeviceKey { driver: driver.into(), pool: pool.into(), device: device.into() }
    }
}

impl fmt::Display for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// Where a device's taint comes from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaintSource {
    /// The driver published it in the device's ResourceSlice.
    ResourceSlice,
    /// A DeviceTaintRule, by name.
    Rule(String),
    /// Copied by health propagation from the full device `from` (a device name in the same pool),
    /// which got it from `origin`.
    HealthPropagation { from: String, origin: Box<TaintSource> },
}

impl TaintSource {
    /// The DeviceTaintRule behind this taint, directly or through propagation.
    pub fn rule(&self) -> Option<&str> {
        match self {
            TaintSource::ResourceSlice => None,
            TaintSource::Rule(name) => Some(name),
            TaintSource::HealthPropagation { origin, .. } => origin.rule(),
        }
    }

    /// The full device the taint was propagated from, if it was.
    pub fn propagated_from(&self) -> Option<&str> {
        match self {
            TaintSource::HealthPropagation { from, .. } => Some(from),
            _ => None,
        }
    }
}

/// `ResourceSlice`, `DeviceTaintRule NAME`, `health propagation from DEVICE (ORIGIN)`.
impl fmt::Display for TaintSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaintSource::ResourceSlice => f.write_str("ResourceSlice"),
            TaintSource::Rule(name) => write!(f, "DeviceTaintRule {name}"),
            TaintSource::HealthPropagation { from, origin } => write!(f, "health propagation from {from} ({origin})"),
        }
    }
}

/// A taint and where it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct SourcedTaint {
    pub taint: DeviceTaint,
    pub source: TaintSource,
}

/// `key=value:Effect`, or `key:Effect` without a value, as kubectl writes taints.
pub fn taint_text(t: &DeviceTaint) -> String {
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

/// Does `rule` name the device? Set selector fields must equal the device's; a rule without a
/// selector names every device (as upstream's code treats it; its API documentation says none).
pub fn rule_selects(rule: &DeviceTaintRule, driver: &str, pool: &str, device: &str) -> bool {
    let sel = rule.spec.device_selector.as_ref();
    sel.and_then(|s| s.driver.as_deref()).is_none_or(|d| d == driver)
        && sel.and_then(|s| s.pool.as_deref()).is_none_or(|p| p == pool)
        && sel.and_then(|s| s.device.as_deref()).is_none_or(|n| n == device)
}

/// The taints of every device, with their sources.
#[derive(Clone, Debug, Default)]
pub struct DeviceTaints {
    /// Driver-set taints, from the slices of each pool's highest generation.
    from_slices: BTreeMap<DeviceKey, Vec<DeviceTaint>>,
    /// Every rule's name and taint, with the rule (matched against device keys on lookup, so that
    /// allocated devices that are no longer published still get them).
    rules: Vec<DeviceTaintRule>,
    /// Taints added by health propagation, in the order they were added.
    propagated: BTreeMap<DeviceKey, Vec<SourcedTaint>>,
}

/// The highest `pool.generation` per (driver, pool).
fn highest_generations(slices: &[ResourceSlice]) -> HashMap<(&str, &str), i64> {
    let mut max: HashMap<(&str, &str), i64> = HashMap::new();
    for s in slices {
        let g = max.entry((s.spec.driver.as_str(), s.spec.pool.name.as_str())).or_insert(s.spec.pool.generation);
        *g = (*g).max(s.spec.pool.generation);
    }
    max
}

/// The slices of each pool's highest generation, in input order.
fn current_slices(slices: &[ResourceSlice]) -> impl Iterator<Item = &ResourceSlice> {
    let max = highest_generations(slices);
    slices.iter().filter(move |s| max[&(s.spec.driver.as_str(), s.spec.pool.name.as_str())] == s.spec.pool.generation)
}

impl DeviceTaints {
    /// The taints of `slices` as drivers published them (without any rule applied) and `rules`.
    pub fn new(slices: &[ResourceSlice], rules: &[DeviceTaintRule]) -> Self {
        let mut from_slices: BTreeMap<DeviceKey, Vec<DeviceTaint>> = BTreeMap::new();
        for s in current_slices(slices) {
            for d in s.spec.devices.iter().flatten() {
                let taints = d.taints.as_deref().unwrap_or_default();
                if !taints.is_empty() {
                    from_slices
                        .entry(DeviceKey::new(&s.spec.driver, &s.spec.pool.name, &d.name))
                        .or_default()
                        .extend(taints.iter().cloned());
                }
            }
        }
        DeviceTaints { from_slices, rules: rules.to_vec(), propagated: BTreeMap::new() }
    }

    /// Every taint of a device: the driver's, then the rules' (in input order), then propagated
    /// ones.
    pub fn of(&self, key: &DeviceKey) -> Vec<SourcedTaint> {
        let mut out: Vec<SourcedTaint> = self
            .from_slices
            .get(key)
            .into_iter()
            .flatten()
            .map(|t| SourcedTaint { taint: t.clone(), source: TaintSource::ResourceSlice })
            .collect();
        for r in &self.rules {
            if rule_selects(r, &key.driver, &key.pool, &key.device) {
                out.push(SourcedTaint {
                    taint: r.spec.taint.clone(),
                    source: TaintSource::Rule(r.metadata.name.clone().unwrap_or_default()),
                });
            }
        }
        out.extend(self.propagated.get(key).into_iter().flatten().cloned());
        out
    }

    /// The taints health propagation added, per device.
    pub fn propagated(&self) -> &BTreeMap<DeviceKey, Vec<SourcedTaint>> {
        &self.propagated
    }

    /// Health propagation (muster's, not upstream's): a `NoSchedule` or `NoExecute` taint on a
    /// *full device* also applies to every other device of the same driver and pool that consumes
    /// from that device's counter set, so that a sick GPU's MIG partitions are not handed out
    /// either (and, for `NoExecute`, their consumers are evicted).
    ///
    /// A device is the full device of a counter set when it consumes every counter the set
    /// defines, each at the set's full value (compared as quantities), and the set defines at least
    /// one counter. "Consumes from a counter set" means having a `consumesCounters` entry for it.
    /// Only the current generation of each pool is read. Taints with effect `None` or an unknown
    /// effect are not propagated, nor are taints that were themselves propagated (no chains); a
    /// device that already carries a taint with the same key, value and effect does not get a
    /// copy. Returns how many taints were added.
    pub fn propagate_health(&mut self, slices: &[ResourceSlice]) -> usize {
        // Counter sets and devices per (driver, pool), in input order.
        type Pool<'a> = (BTreeMap<&'a str, &'a CounterSet>, Vec<&'a Device>);
        let mut pools: BTreeMap<(&str, &str), Pool> = BTreeMap::new();
        for s in current_slices(slices) {
            let p = pools.entry((s.spec.driver.as_str(), s.spec.pool.name.as_str())).or_default();
            for set in s.spec.shared_counters.iter().flatten() {
                p.0.entry(set.name.as_str()).or_insert(set);
            }
            p.1.extend(s.spec.devices.iter().flatten());
        }
        let mut added = 0;
        for ((driver, pool), (sets, devices)) in &pools {
            for full in devices {
                for set_name in full.consumes_counters.iter().flatten().map(|c| c.counter_set.as_str()) {
                    let Some(set) = sets.get(set_name) else { continue };
                    if !is_full(full, set) {
                        continue;
                    }
                    let taints: Vec<SourcedTaint> = self
                        .of(&DeviceKey::new(driver, pool, &full.name))
                        .into_iter()
                        .filter(|t| {
                            (t.taint.effect == NO_SCHEDULE || t.taint.effect == NO_EXECUTE)
                                && t.source.propagated_from().is_none()
                        })
                        .collect();
                    if taints.is_empty() {
                        continue;
                    }
                    for part in devices {
                        if part.name == full.name
                            || !part.consumes_counters.iter().flatten().any(|c| c.counter_set == set_name)
                        {
                            continue;
                        }
                        let key = DeviceKey::new(driver, pool, &part.name);
                        let existing = self.of(&key);
                        for t in &taints {
                            let same = |e: &SourcedTaint| {
                                e.taint.key == t.taint.key
                                    && e.taint.value.as_deref().unwrap_or("") == t.taint.value.as_deref().unwrap_or("")
                                    && e.taint.effect == t.taint.effect
                            };
                            let copied = self.propagated.get(&key).into_iter().flatten().any(same);
                            if existing.iter().any(same) || copied {
                                continue;
                            }
                            self.propagated.entry(key.clone()).or_default().push(SourcedTaint {
                                taint: t.taint.clone(),
                                source: TaintSource::HealthPropagation {
                                    from: full.name.clone(),
                                    origin: Box::new(t.source.clone()),
                                },
                            });
                            added += 1;
                        }
                    }
                }
            }
        }
        added
    }
}

/// Does `device` consume every counter of `set` at the set's full value?
fn is_full(device: &Device, set: &CounterSet) -> bool {
    let Some(consumption) = device.consumes_counters.iter().flatten().find(|c| c.counter_set == set.name) else {
        return false;
    };
    let qty = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| muster_api::quantity::parse(&q.0).ok();
    !set.counters.is_empty()
        && set.counters.iter().all(|(name, total)| {
            let used = consumption.counters.get(name).and_then(|c| qty(&c.value));
            used.is_some() && used == qty(&total.value)
        })
}

/// One pod that a device taint evicts (or, for a dry run, would evict).
#[derive(Clone, Debug, PartialEq)]
pub struct Eviction {
    /// `namespace/name`.
    pub pod: String,
    /// The allocated claim that holds the device, `namespace/name`.
    pub claim: String,
    pub device: DeviceKey,
    /// The taint as it is (effect `None` for a dry run).
    pub taint: DeviceTaint,
    pub source: TaintSource,
    /// When: the taint's `timeAdded` plus `toleration_seconds`; `None` when the taint has no
    /// `timeAdded` (the eviction is then due `toleration_seconds` after the taint is added).
    pub at: Option<Time>,
    /// The smallest `tolerationSeconds` of the matching tolerations (clamped at 0); `None` when
    /// no copied toleration matches the taint (evicted as soon as it is added).
    pub toleration_seconds: Option<i64>,
    /// The taint's effect is `None` (from a DeviceTaintRule): simulated as `NoExecute`.
    pub dry_run: bool,
}

/// Does a copied toleration match the taint (`DeviceToleration.ToleratesTaint`)?
fn tolerates(tol: &DeviceToleration, taint: &DeviceTaint) -> bool {
    if tol.effect.as_deref().is_some_and(|e| !e.is_empty() && e != taint.effect) {
        return false;
    }
    if tol.key.as_deref().is_some_and(|k| !k.is_empty() && k != taint.key) {
        return false;
    }
    match tol.operator.as_deref().unwrap_or("") {
        "" | "Equal" => tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

/// `Some(None)`: evicted when the taint is added; `Some(Some(s))`: `s` seconds later; `None`:
/// tolerated forever.
fn toleration_seconds(tols: &[DeviceToleration], taint: &DeviceTaint) -> Option<Option<i64>> {
    let matching: Vec<&DeviceToleration> = tols.iter().filter(|t| tolerates(t, taint)).collect();
    if matching.is_empty() {
        return Some(None);
    }
    matching.iter().filter_map(|t| t.toleration_seconds).map(|s| s.max(0)).min().map(Some)
}

fn claim_key(c: &ResourceClaim) -> String {
    format!("{}/{}", namespace(c.metadata.namespace.as_deref()), c.metadata.name.as_deref().unwrap_or_default())
}

fn namespace(ns: Option<&str>) -> &str {
    ns.filter(|n| !n.is_empty()).unwrap_or("default")
}

/// The pods `claims`' NoExecute device taints evict, and the dry runs of `None` DeviceTaintRules,
/// sorted (dry runs last, then by pod, claim, device, taint and source) and without duplicates.
/// `pods` are every pod of the snapshot; those without `spec.nodeName` are never evicted.
pub fn evictions<'a, P: PodObject + ?Sized + 'a>(
    claims: impl IntoIterator<Item = &'a ResourceClaim>,
    pods: impl IntoIterator<Item = &'a P>,
    taints: &DeviceTaints,
) -> Vec<Eviction> {
    // Bound pods by (namespace, name) and by (namespace, pod group).
    let mut by_name: HashMap<(&str, &str), &P> = HashMap::new();
    let mut by_group: HashMap<(&str, &str), Vec<&P>> = HashMap::new();
    for p in pods {
        let bound = p.node_name().is_some_and(|n| !n.is_empty());
        let Some(spec) = p.spec().filter(|_| bound) else { continue };
        let ns = namespace(p.meta().namespace.as_deref());
        by_name.insert((ns, p.meta().name.as_deref().unwrap_or_default()), p);
        if let Some(g) = spec.scheduling_group.as_ref().and_then(|g| g.pod_group_name.as_deref()) {
            by_group.entry((ns, g)).or_default().push(p);
        }
    }
    let pod_key = |p: &P| {
        format!("{}/{}", namespace(p.meta().namespace.as_deref()), p.meta().name.as_deref().unwrap_or_default())
    };
    let mut out = Vec::new();
    for claim in claims {
        let Some(status) = claim.status.as_ref() else { continue };
        let results = status.allocation.as_ref().and_then(|a| a.devices.as_ref()).and_then(|d| d.results.as_ref());
        let Some(results) = results else { continue };
        let ns = namespace(claim.metadata.namespace.as_deref());
        // The claim's consumers, bound ones only.
        let mut consumers: BTreeSet<String> = BTreeSet::new();
        for r in status.reserved_for.iter().flatten() {
            let group = r.api_group.as_deref().unwrap_or("");
            match (group, r.resource.as_str()) {
                ("", "pods") => {
                    if let Some(p) = by_name.get(&(ns, r.name.as_str())) {
                        let uid = p.meta().uid.as_deref().unwrap_or("");
                        if r.uid.is_empty() || uid.is_empty() || uid == r.uid {
                            consumers.insert(pod_key(p));
                        }
                    }
                }
                ("scheduling.k8s.io", "podgroups") => {
                    consumers.extend(by_group.get(&(ns, r.name.as_str())).into_iter().flatten().map(|p| pod_key(p)));
                }
                _ => {}
            }
        }
        if consumers.is_empty() {
            continue;
        }
        for result in results {
            let device = DeviceKey::new(&result.driver, &result.pool, &result.device);
            let tols = result.tolerations.as_deref().unwrap_or_default();
            for st in taints.of(&device) {
                let dry_run = match st.taint.effect.as_str() {
                    NO_EXECUTE => false,
                    NONE if matches!(st.source, TaintSource::Rule(_)) => true,
                    _ => continue,
                };
                let simulated = DeviceTaint { effect: NO_EXECUTE.into(), ..st.taint.clone() };
                let Some(seconds) = toleration_seconds(tols, &simulated) else { continue };
                let at = st.taint.time_added.as_ref().map(|t| {
                    let d = SignedDuration::from_secs(seconds.unwrap_or(0));
                    Time(t.0.checked_add(d).unwrap_or(k8s_openapi::jiff::Timestamp::MAX))
                });
                for pod in &consumers {
                    out.push(Eviction {
                        pod: pod.clone(),
                        claim: claim_key(claim),
                        device: device.clone(),
                        taint: st.taint.clone(),
                        source: st.source.clone(),
                        at: at.clone(),
                        toleration_seconds: seconds,
                        dry_run,
                    });
                }
            }
        }
    }
    let sort_key = |e: &Eviction| {
        (
            e.dry_run,
            e.pod.clone(),
            e.claim.clone(),
            e.device.clone(),
            e.taint.key.clone(),
            e.taint.value.clone(),
            e.taint.effect.clone(),
            e.source.clone(),
        )
    };
    out.sort_by_cached_key(sort_key);
    out.dedup_by(|a, b| sort_key(a) == sort_key(b));
    out
}

/// What a DeviceTaintRule's `EvictionInProgress` condition says, from the evictions it causes
/// (directly or through health propagation): `(status, reason, message)`.
pub fn rule_condition(rule: &DeviceTaintRule, evictions: &[Eviction]) -> (&'static str, &'static str, String) {
    let name = rule.metadata.name.as_deref().unwrap_or_default();
    let mine: Vec<&Eviction> = evictions.iter().filter(|e| e.source.rule() == Some(name)).collect();
    let pods: BTreeSet<&str> = mine.iter().map(|e| e.pod.as_str()).collect();
    let namespaces: BTreeSet<&str> = pods.iter().filter_map(|p| p.split_once('/').map(|(ns, _)| ns)).collect();
    let counted = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let (pods_n, ns_n) = (counted(pods.len(), "pod", "pods"), counted(namespaces.len(), "namespace", "namespaces"));
    match rule.spec.taint.effect.as_str() {
        NO_EXECUTE if pods.is_empty() => ("False", "Completed", "no pods need to be evicted".into()),
        NO_EXECUTE => {
            let need = if pods.len() == 1 { "needs" } else { "need" };
            ("True", "PodsPendingEviction", format!("{pods_n} in {ns_n} {need} to be evicted"))
        }
        NONE => ("False", "NoEffect", format!("dry run: with effect NoExecute, {pods_n} in {ns_n} would be evicted")),
        _ => ("False", "OtherEffect", format!("effect {} evicts no pods", rule.spec.taint.effect)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::core::v1::{PodSchedulingGroup, PodSpec};
    use k8s_openapi::api::resource::v1::{
        AllocationResult, Counter, Device, DeviceAllocationResult, DeviceCounterConsumption,
        DeviceRequestAllocationResult, DeviceTaintRuleSpec, DeviceTaintSelector, ResourceClaimConsumerReference,
        ResourceClaimStatus, ResourcePool, ResourceSliceSpec,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn time(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn taint(key: &str, effect: &str, added: Option<&str>) -> DeviceTaint {
        DeviceTaint { key: key.into(), value: Some("v".into()), effect: effect.into(), time_added: added.map(time) }
    }

    fn device(name: &str, taints: Vec<DeviceTaint>) -> Device {
        Device { name: name.into(), taints: (!taints.is_empty()).then_some(taints), ..Default::default() }
    }

    fn slice(pool: &str, generation: i64, devices: Vec<Device>) -> ResourceSlice {
        ResourceSlice {
            metadata: ObjectMeta { name: Some(format!("{pool}-{generation}")), ..Default::default() },
            spec: ResourceSliceSpec {
                driver: "gpu.example.com".into(),
                pool: ResourcePool { name: pool.into(), generation, resource_slice_count: 1 },
                node_name: Some(pool.into()),
                devices: Some(devices),
                ..Default::default()
            },
        }
    }

    fn rule(name: &str, device: Option<&str>, t: DeviceTaint) -> DeviceTaintRule {
        DeviceTaintRule {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: DeviceTaintRuleSpec {
                device_selector: Some(DeviceTaintSelector {
                    driver: Some("gpu.example.com".into()),
                    pool: Some("node-1".into()),
                    device: device.map(Into::into),
                }),
                taint: t,
            },
            status: None,
        }
    }

    fn toleration(key: &str, seconds: Option<i64>) -> DeviceToleration {
        DeviceToleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(NO_EXECUTE.into()),
            toleration_seconds: seconds,
            ..Default::default()
        }
    }

    fn claim(name: &str, device: &str, tols: Vec<DeviceToleration>, consumers: &[(&str, &str)]) -> ResourceClaim {
        ResourceClaim {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("ml".into()), ..Default::default() },
            spec: Default::default(),
            status: Some(ResourceClaimStatus {
                allocation: Some(AllocationResult {
                    devices: Some(DeviceAllocationResult {
                        results: Some(vec![DeviceRequestAllocationResult {
                            request: "gpu".into(),
                            driver: "gpu.example.com".into(),
                            pool: "node-1".into(),
                            device: device.into(),
                            tolerations: (!tols.is_empty()).then_some(tols),
                            ..Default::default()
                        }]),
                        config: None,
                    }),
                    ..Default::default()
                }),
                reserved_for: Some(
                    consumers
                        .iter()
                        .map(|(resource, name)| ResourceClaimConsumerReference {
                            api_group: (*resource == "podgroups").then(|| "scheduling.k8s.io".into()),
                            resource: (*resource).into(),
                            name: (*name).into(),
                            uid: String::new(),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
        }
    }

    fn pod(name: &str, node: Option<&str>, group: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("ml".into()), ..Default::default() },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                scheduling_group: group.map(|g| PodSchedulingGroup { pod_group_name: Some(g.into()) }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn summary(ev: &[Eviction]) -> Vec<String> {
        ev.iter()
            .map(|e| {
                let at = e.at.as_ref().map_or("-".to_string(), |t| t.0.to_string());
                let dry = if e.dry_run { " dry-run" } else { "" };
                format!("{} {} {} {} ({}){dry}", e.pod, e.device.device, taint_text(&e.taint), at, e.source)
            })
            .collect()
    }

    #[test]
    fn toleration_seconds_decide_when() {
        let slices = vec![slice("node-1", 1, ["gpu-0", "gpu-1", "gpu-2", "gpu-3"].map(|d| device(d, vec![])).into())];
        let rules = vec![rule("fault", None, taint("fault", NO_EXECUTE, Some("2026-12-01T09:00:00Z")))];
        let taints = DeviceTaints::new(&slices, &rules);
        let claims = vec![
            claim("a", "gpu-0", vec![], &[("pods", "a")]),
            claim("b", "gpu-1", vec![toleration("fault", Some(300)), toleration("", Some(600))], &[("pods", "b")]),
            claim("c", "gpu-2", vec![toleration("fault", None)], &[("pods", "c")]),
            claim("d", "gpu-3", vec![toleration("fault", Some(-5)), toleration("other", Some(1))], &[("pods", "d")]),
        ];
        let pods = ["a", "b", "c", "d"].map(|n| pod(n, Some("node-1"), None));
        let ev = evictions(&claims, &pods, &taints);
        assert_eq!(
            summary(&ev),
            [
                "ml/a gpu-0 fault=v:NoExecute 2026-12-01T09:00:00Z (DeviceTaintRule fault)",
                "ml/b gpu-1 fault=v:NoExecute 2026-12-01T09:05:00Z (DeviceTaintRule fault)",
                "ml/d gpu-3 fault=v:NoExecute 2026-12-01T09:00:00Z (DeviceTaintRule fault)",
            ]
        );
        assert_eq!(ev[1].toleration_seconds, Some(300));
        assert_eq!(ev[2].toleration_seconds, Some(0));
        assert_eq!(ev[0].toleration_seconds, None);
    }

    #[test]
    fn only_bound_consumers_are_evicted_and_pod_groups_expand() {
        let slices = vec![slice("node-1", 1, vec![device("gpu-0", vec![taint("xid", NO_EXECUTE, None)])])];
        let taints = DeviceTaints::new(&slices, &[]);
        let claims = vec![claim("shared", "gpu-0", vec![], &[("podgroups", "workers"), ("pods", "pending")])];
        let pods = vec![
            pod("w-1", Some("node-1"), Some("workers")),
            pod("w-0", Some("node-1"), Some("workers")),
            pod("w-2", None, Some("workers")),
            pod("other", Some("node-1"), Some("others")),
            pod("pending", None, None),
        ];
        let ev = evictions(&claims, &pods, &taints);
        assert_eq!(
            summary(&ev),
            ["ml/w-0 gpu-0 xid=v:NoExecute - (ResourceSlice)", "ml/w-1 gpu-0 xid=v:NoExecute - (ResourceSlice)"]
        );
        assert!(ev.iter().all(|e| e.at.is_none() && e.claim == "ml/shared"));
    }

    #[test]
    fn none_rules_are_dry_runs_and_other_effects_evict_nothing() {
        let slices = vec![slice(
            "node-1",
            1,
            vec![device("gpu-0", vec![taint("unmonitored", NONE, Some("2026-12-01T08:00:00Z"))])],
        )];
        let rules = vec![
            rule("drain-test", Some("gpu-0"), taint("drain", NONE, Some("2026-12-01T10:00:00Z"))),
            rule("maintenance", Some("gpu-0"), taint("maint", NO_SCHEDULE, Some("2026-12-01T10:00:00Z"))),
        ];
        let taints = DeviceTaints::new(&slices, &rules);
        let claims = vec![claim("a", "gpu-0", vec![toleration("maint", None)], &[("pods", "a")])];
        let pods = vec![pod("a", Some("node-1"), None)];
        let ev = evictions(&claims, &pods, &taints);
        assert_eq!(summary(&ev), ["ml/a gpu-0 drain=v:None 2026-12-01T10:00:00Z (DeviceTaintRule drain-test) dry-run"]);
        assert_eq!(rule_condition(&rules[0], &ev).1, "NoEffect");
        assert_eq!(rule_condition(&rules[1], &ev).1, "OtherEffect");
    }

    #[test]
    fn only_the_highest_generation_counts_and_stale_reservations_are_skipped() {
        let slices = vec![
            slice("node-1", 1, vec![device("gpu-0", vec![taint("old", NO_EXECUTE, None)])]),
            slice("node-1", 2, vec![device("gpu-0", vec![])]),
        ];
        let taints = DeviceTaints::new(&slices, &[]);
        assert!(taints.of(&DeviceKey::new("gpu.example.com", "node-1", "gpu-0")).is_empty());
        let slices = vec![slice("node-1", 1, vec![device("gpu-0", vec![taint("xid", NO_EXECUTE, None)])])];
        let taints = DeviceTaints::new(&slices, &[]);
        let mut c = claim("a", "gpu-0", vec![], &[("pods", "a")]);
        c.status.as_mut().unwrap().reserved_for.as_mut().unwrap()[0].uid = "uid-1".into();
        let mut p = pod("a", Some("node-1"), None);
        p.metadata.uid = Some("uid-2".into());
        assert!(evictions([&c], [&p], &taints).is_empty());
        p.metadata.uid = Some("uid-1".into());
        assert_eq!(evictions([&c], [&p], &taints).len(), 1);
    }

    fn counters(pairs: &[(&str, &str)]) -> BTreeMap<String, Counter> {
        pairs.iter().map(|(k, v)| (k.to_string(), Counter { value: Quantity(v.to_string()) })).collect()
    }

    fn consuming(name: &str, pairs: &[(&str, &str)], taints: Vec<DeviceTaint>) -> Device {
        Device {
            consumes_counters: Some(vec![DeviceCounterConsumption {
                counter_set: "gpu-0-counter-set".into(),
                counters: counters(pairs),
                ..Default::default()
            }]),
            ..device(name, taints)
        }
    }

    /// An H100 as the NVIDIA driver publishes it with dynamic MIG: a counter set, the full GPU
    /// (consumes all of it) and two 1g.10gb placements.
    fn mig_slices(gpu_taints: Vec<DeviceTaint>, full_memory: &str) -> Vec<ResourceSlice> {
        let mut counters_slice = slice("node-1", 1, vec![]);
        counters_slice.spec.devices = None;
        counters_slice.spec.shared_counters = Some(vec![CounterSet {
            name: "gpu-0-counter-set".into(),
            counters: counters(&[("memory", "80Gi"), ("memory-slice-0", "1"), ("memory-slice-1", "1")]),
        }]);
        let devices = vec![
            consuming(
                "gpu-0",
                &[("memory", full_memory), ("memory-slice-0", "1"), ("memory-slice-1", "1")],
                gpu_taints,
            ),
            consuming("gpu-0-mig-1g10gb-19-0", &[("memory", "10Gi"), ("memory-slice-0", "1")], vec![]),
            consuming(
                "gpu-0-mig-1g10gb-19-1",
                &[("memory", "10Gi"), ("memory-slice-1", "1")],
                vec![taint("xid", NO_SCHEDULE, None)],
            ),
            device("other", vec![]),
        ];
        vec![counters_slice, slice("node-1", 1, devices)]
    }

    #[test]
    fn full_device_taints_propagate_to_its_partitions() {
        let gpu_taints = vec![taint("xid", NO_SCHEDULE, None), taint("hint", NONE, None)];
        // 81920Mi is 80Gi: quantities compare by value, not by text.
        let slices = mig_slices(gpu_taints, "81920Mi");
        let rules = vec![rule("fault", Some("gpu-0"), taint("fault", NO_EXECUTE, Some("2026-12-01T09:00:00Z")))];
        let mut taints = DeviceTaints::new(&slices, &rules);
        assert_eq!(taints.propagate_health(&slices), 3);
        let texts = |d: &str| -> Vec<String> {
            taints
                .of(&DeviceKey::new("gpu.example.com", "node-1", d))
                .iter()
                .map(|t| format!("{} ({})", taint_text(&t.taint), t.source))
                .collect()
        };
        assert_eq!(
            texts("gpu-0-mig-1g10gb-19-0"),
            [
                "xid=v:NoSchedule (health propagation from gpu-0 (ResourceSlice))",
                "fault=v:NoExecute (health propagation from gpu-0 (DeviceTaintRule fault))"
            ]
        );
        // Already has xid=v:NoSchedule from its own slice: only the rule's taint is copied.
        assert_eq!(
            texts("gpu-0-mig-1g10gb-19-1"),
            [
                "xid=v:NoSchedule (ResourceSlice)",
                "fault=v:NoExecute (health propagation from gpu-0 (DeviceTaintRule fault))"
            ]
        );
        assert!(texts("other").is_empty());
        // Propagation is idempotent.
        assert_eq!(taints.propagate_health(&slices), 0);
        // A consumer of a partition is evicted through the propagated NoExecute taint.
        let mut c = claim("infer", "gpu-0-mig-1g10gb-19-0", vec![], &[("pods", "infer")]);
        c.status.as_mut().unwrap().allocation.as_mut().unwrap().devices.as_mut().unwrap().results.as_mut().unwrap()
            [0]
        .pool = "node-1".into();
        let ev = evictions([&c], [&pod("infer", Some("node-1"), None)], &taints);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].source.rule(), Some("fault"));
        assert_eq!(ev[0].source.propagated_from(), Some("gpu-0"));
        assert_eq!(rule_condition(&rules[0], &ev).0, "True");
    }

    #[test]
    fn a_device_that_does_not_consume_the_whole_set_is_not_full() {
        let slices = mig_slices(vec![taint("xid", NO_EXECUTE, None)], "40Gi");
        let mut taints = DeviceTaints::new(&slices, &[]);
        assert_eq!(taints.propagate_health(&slices), 0);
        assert!(taints.propagated().is_empty());
    }
}
