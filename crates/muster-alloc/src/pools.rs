//! Gathering the pools a node can allocate from (upstream's `GatherPools`, spec §2).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, OnceLock, RwLock};

use muster_cel::{DeviceError, DeviceView};

use k8s_openapi::api::core::v1::{Node, NodeSelector};
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use muster_api::Quantity;
use muster_api::selectors::{NodeView, node_selector_matches};

use crate::state::Features;

/// A candidate device and where it sits in the search order.
#[derive(Clone, Copy)]
pub struct Cand<'a> {
    pub pool: usize,
    pub slice: usize,
    pub index: usize,
    /// The slice's position in the cluster's slice list.
    pub global: usize,
    pub slice_ref: &'a ResourceSlice,
    pub device: &'a Device,
}

/// What a node sees: its pools in search order, and every targeting device of every usable pool,
/// in search order.
pub struct Gathered<'a> {
    pub pools: Vec<Pool<'a>>,
    pub cands: Vec<Cand<'a>>,
}

/// One pool as seen from a node.
pub struct Pool<'a> {
    pub driver: &'a str,
    pub name: &'a str,
    /// Some slices of the pool's current generation are missing.
    pub incomplete: bool,
    /// Why the pool is unusable (duplicate device names), if it is.
    pub invalid: Option<String>,
    /// The device slices that target the node, by name, with their position in the cluster's
    /// slice list.
    pub slices: Vec<(usize, &'a ResourceSlice)>,
    /// Counter sets of the pool (partitionable devices): set → counter → value.
    pub counter_sets: BTreeMap<&'a str, BTreeMap<&'a str, Quantity>>,
    /// Devices of the pool's current generation that do not target the node: they still draw on
    /// the pool's counters.
    pub other_devices: Vec<&'a Device>,
}

/// Does a slice's (or device's) node selection include `node`?
pub fn node_matches(
    node: Option<&Node>,
    name: Option<&str>,
    all: Option<bool>,
    selector: Option<&NodeSelector>,
) -> bool {
    if let Some(n) = name.filter(|n| !n.is_empty()) {
        return node.is_some_and(|node| node.metadata.name.as_deref() == Some(n));
    }
    if all == Some(true) {
        return true;
    }
    if let Some(sel) = selector {
        let Some(node) = node else { return false };
        let empty = BTreeMap::new();
        let view = NodeView {
            name: node.metadata.name.as_deref().unwrap_or(""),
            labels: node.metadata.labels.as_ref().unwrap_or(&empty),
        };
        return node_selector_matches(sel, view);
    }
    false
}

/// Does a device of this slice offer itself to `node` (per-device node selection)?
pub fn device_matches(node: Option<&Node>, slice: &ResourceSlice, d: &Device) -> bool {
    slice.spec.per_device_node_selection != Some(true)
        || node_matches(node, d.node_name.as_deref(), d.all_nodes, d.node_selector.as_ref())
}

fn ignored(slice: &ResourceSlice, features: Features) -> bool {
    !features.partitionable_devices
        && (slice.spec.per_device_node_selection.is_some()
            || slice.spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty()))
}

fn relevant(node: Option<&Node>, slice: &ResourceSlice) -> bool {
    let s = &slice.spec;
    if s.node_name.as_deref().is_some_and(|n| !n.is_empty()) || s.all_nodes == Some(true) || s.node_selector.is_some() {
        return node_matches(node, s.node_name.as_deref(), s.all_nodes, s.node_selector.as_ref());
    }
    if s.per_device_node_selection == Some(true) {
        return s.devices.iter().flatten().any(|d| device_matches(node, slice, d));
    }
    false
}

/// A selector's verdict on a device and the runtime cost its evaluation spent.
pub(crate) type Known = (Result<bool, Arc<muster_cel::RuntimeError>>, u64);

/// How many DeviceClass selector verdicts a [`SliceIndex`] keeps (about 40 MiB).
const MAX_VERDICTS: usize = 1 << 20;

type Fast<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<muster_cel::IdHasher>>;

/// What one node saw: (fingerprint of its labels, partitionable devices on?, the result).
type GatheredFor<'a> = (u64, bool, Arc<Gathered<'a>>);

/// One device's CEL view, converted on first use (or the conversion error upstream reports).
type ViewCell = OnceLock<Result<Arc<DeviceView>, DeviceError>>;

/// Slices of one pool seen from a node: the highest generation and its relevant slices (with
/// their position in the cluster's list).
type Group<'a> = (i64, Vec<(usize, &'a ResourceSlice)>);

/// The cluster's ResourceSlices, indexed once per snapshot: by the node they are local to, the
/// ones that are not node-local, and by pool. An allocation call then looks only at the slices
/// that can matter to its node.
pub struct SliceIndex<'a> {
    slices: &'a [ResourceSlice],
    /// Each device's CEL view, converted once on first use (slice, device).
    views: Vec<Vec<ViewCell>>,
    /// Where each slice's devices start in one numbering of all devices (for `verdicts`).
    first_device: Vec<u32>,
    /// DeviceClass selectors' verdicts on devices, with the cost each evaluation spent: a
    /// class's selector gives the same answer on the same device every time, so later calls
    /// read it (and charge its cost to their budget as if they had evaluated it). At most
    /// [`MAX_VERDICTS`] are kept; claims' own selectors are not kept (there can be one per claim).
    verdicts: std::sync::Mutex<Fast<u64, Known>>,
    /// What each node sees, gathered once: keyed by node name, a fingerprint of its labels, and
    /// whether partitionable devices are on (the only feature gathering depends on).
    gathered: RwLock<Fast<String, Vec<GatheredFor<'a>>>>,
    node_local: Fast<&'a str, Vec<usize>>,
    shared: Vec<usize>,
    by_pool: Fast<&'a str, Fast<&'a str, Vec<usize>>>,
}

impl<'a> SliceIndex<'a> {
    pub fn new(slices: &'a [ResourceSlice]) -> Self {
        let views: Vec<Vec<ViewCell>> =
            slices.iter().map(|s| s.spec.devices.iter().flatten().map(|_| OnceLock::new()).collect()).collect();
        let first_device = views
            .iter()
            .scan(0u32, |next, v| {
                let first = *next;
                *next = next.saturating_add(v.len() as u32);
                Some(first)
            })
            .collect();
        let mut index = SliceIndex {
            slices,
            views,
            first_device,
            verdicts: std::sync::Mutex::default(),
            gathered: RwLock::default(),
            node_local: Fast::default(),
            shared: Vec::new(),
            by_pool: Fast::default(),
        };
        for (i, s) in slices.iter().enumerate() {
            match s.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
                Some(n) => index.node_local.entry(n).or_default().push(i),
                None => index.shared.push(i),
            }
            index
                .by_pool
                .entry(s.spec.driver.as_str())
                .or_default()
                .entry(s.spec.pool.name.as_str())
                .or_default()
                .push(i);
        }
        index
    }

    /// Node-local slices of `node`, then the shared ones, in input order within each.
    fn for_node(&self, node: Option<&Node>) -> impl Iterator<Item = (usize, &'a ResourceSlice)> + '_ {
        let local = node.and_then(|n| n.metadata.name.as_deref()).and_then(|n| self.node_local.get(n));
        let mut ids: Vec<usize> = local.into_iter().flatten().chain(&self.shared).copied().collect();
        ids.sort_unstable();
        ids.into_iter().map(|i| (i, &self.slices[i]))
    }

    /// Are all slices of the pool local to `node` (published with its `nodeName`)?
    pub fn pool_is_local_to(&self, driver: &str, pool: &str, node: &str) -> bool {
        self.pool(driver, pool).all(|s| s.spec.node_name.as_deref() == Some(node))
    }

    /// What `node` sees, gathered on first use.
    pub fn gather(&self, node: Option<&Node>, features: Features) -> Arc<Gathered<'a>> {
        use std::hash::{Hash, Hasher};
        let name = node.and_then(|n| n.metadata.name.as_deref()).unwrap_or_default();
        let labels = node.and_then(|n| n.metadata.labels.as_ref()).filter(|l| !l.is_empty()).map_or(0, |l| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            l.hash(&mut h);
            h.finish()
        });
        let partitionable = features.partitionable_devices;
        let cached =
            self.gathered.read().unwrap_or_else(|e| e.into_inner()).get(name).and_then(|v| {
                v.iter().find(|(l, p, _)| *l == labels && *p == partitionable).map(|(_, _, g)| g.clone())
            });
        if let Some(g) = cached {
            return g;
        }
        let pools = gather(node, self, features);
        let mut cands = Vec::new();
        for (pi, p) in pools.iter().enumerate() {
            if p.incomplete || p.invalid.is_some() {
                continue;
            }
            for (si, (global, s)) in p.slices.iter().enumerate() {
                for (di, d) in s.spec.devices.iter().flatten().enumerate() {
                    cands.push(Cand { pool: pi, slice: si, index: di, global: *global, slice_ref: s, device: d });
                }
            }
        }
        let g = Arc::new(Gathered { pools, cands });
        self.gathered.write().unwrap_or_else(|e| e.into_inner()).entry(name.to_string()).or_default().push((
            labels,
            partitionable,
            g.clone(),
        ));
        g
    }

    /// A DeviceClass selector's remembered verdict on a device, with its evaluation's cost.
    pub(crate) fn class_verdict(&self, program: u32, slice: usize, device: usize) -> Option<Known> {
        let key = self.verdict_key(program, slice, device);
        self.verdicts.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned()
    }

    /// Remembers a DeviceClass selector's verdict (see `verdicts`).
    pub(crate) fn remember_class_verdict(&self, program: u32, slice: usize, device: usize, verdict: Known) {
        let key = self.verdict_key(program, slice, device);
        let mut verdicts = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        if verdicts.len() < MAX_VERDICTS {
            verdicts.insert(key, verdict);
        }
    }

    fn verdict_key(&self, program: u32, slice: usize, device: usize) -> u64 {
        (u64::from(program) << 32) | u64::from(self.first_device[slice].saturating_add(device as u32))
    }

    /// The CEL view of device `device` of slice `slice`, converted on first use.
    pub fn view(&self, slice: usize, device: usize) -> Result<Arc<DeviceView>, DeviceError> {
        self.views[slice][device]
            .get_or_init(|| {
                let s = &self.slices[slice];
                let d = &s.spec.devices.as_deref().unwrap_or(&[])[device];
                DeviceView::new(&s.spec.driver, d).map(Arc::new)
            })
            .clone()
    }

    /// The first device of an allocated claim that carries a NoExecute taint its allocation
    /// result does not tolerate (taints from the pool's newest slices, DeviceTaintRules applied):
    /// upstream gives such a claim no new reservations (KEP 5055). `driver/pool/device: key=value`.
    pub fn untolerated_no_execute(&self, claim: &k8s_openapi::api::resource::v1::ResourceClaim) -> Option<String> {
        for r in crate::state::allocation_results(claim) {
            let newest = self.pool(&r.driver, &r.pool).map(|s| s.spec.pool.generation).max();
            let device = self
                .pool(&r.driver, &r.pool)
                .filter(|s| Some(s.spec.pool.generation) == newest)
                .flat_map(|s| s.spec.devices.iter().flatten())
                .find(|d| d.name == r.device);
            for t in device.and_then(|d| d.taints.as_ref()).into_iter().flatten() {
                if t.effect != "NoExecute" {
                    continue;
                }
                let value = t.value.as_deref().unwrap_or("");
                let tolerated = r
                    .tolerations
                    .iter()
                    .flatten()
                    .any(|tol| crate::allocator::tolerates(tol, &t.key, value, &t.effect));
                if !tolerated {
                    return Some(format!("{}/{}/{}: {}={value}:NoExecute", r.driver, r.pool, r.device, t.key));
                }
            }
        }
        None
    }

    /// The cluster's slices, in input order.
    pub(crate) fn slices(&self) -> &'a [ResourceSlice] {
        self.slices
    }

    /// A device of the pool's newest generation: (slice in the cluster's list, device in it).
    pub(crate) fn find_device(&self, driver: &str, pool: &str, device: &str) -> Option<(usize, usize)> {
        let ids = self.by_pool.get(driver).and_then(|p| p.get(pool))?;
        let newest = ids.iter().map(|i| self.slices[*i].spec.pool.generation).max()?;
        ids.iter().filter(|i| self.slices[**i].spec.pool.generation == newest).find_map(|i| {
            let devices = self.slices[*i].spec.devices.as_deref().unwrap_or(&[]);
            devices.iter().position(|d| d.name == device).map(|d| (*i, d))
        })
    }

    fn pool(&self, driver: &str, pool: &str) -> impl Iterator<Item = &'a ResourceSlice> + '_ {
        self.by_pool.get(driver).and_then(|p| p.get(pool)).into_iter().flatten().map(|i| &self.slices[*i])
    }
}

/// The pools `node` sees, in search order: by (driver, pool name), then pools with devices that
/// have binding conditions last.
fn gather<'a>(node: Option<&Node>, index: &SliceIndex<'a>, features: Features) -> Vec<Pool<'a>> {
    // (driver, pool) → (generation, relevant slices).
    let mut groups: BTreeMap<(&'a str, &'a str), Group<'a>> = BTreeMap::new();
    for (at, slice) in index.for_node(node) {
        if ignored(slice, features) || !relevant(node, slice) {
            continue;
        }
        let key = (slice.spec.driver.as_str(), slice.spec.pool.name.as_str());
        let generation = slice.spec.pool.generation;
        let entry = groups.entry(key).or_insert((generation, Vec::new()));
        if generation > entry.0 {
            *entry = (generation, vec![(at, slice)]);
        } else if generation == entry.0 {
            entry.1.push((at, slice));
        }
    }
    let mut pools = Vec::new();
    for ((driver, name), (generation, mut relevant)) in groups {
        let count = relevant[0].1.spec.pool.resource_slice_count;
        let mut incomplete = false;
        let mut others: Vec<&'a ResourceSlice> = Vec::new();
        if relevant.len() as i64 != count {
            if index.pool(driver, name).any(|s| s.spec.pool.generation > generation) {
                // A newer generation exists elsewhere: this node's view is obsolete.
                continue;
            }
            let current: Vec<&'a ResourceSlice> =
                index.pool(driver, name).filter(|s| s.spec.pool.generation == generation).collect();
            incomplete = current.len() as i64 != count;
            others = current.into_iter().filter(|s| !relevant.iter().any(|(_, r)| std::ptr::eq(*r, *s))).collect();
        }
        relevant.sort_by(|a, b| a.1.metadata.name.cmp(&b.1.metadata.name));
        let has_counters = |s: &ResourceSlice| {
            features.partitionable_devices && s.spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty())
        };
        let (counter_slices, device_slices): (Vec<_>, Vec<_>) =
            relevant.into_iter().partition(|(_, s)| has_counters(s));
        let counter_slices: Vec<&'a ResourceSlice> = counter_slices.into_iter().map(|(_, s)| s).collect();
        let (other_counter_slices, other_device_slices): (Vec<_>, Vec<_>) =
            others.into_iter().partition(|s| has_counters(s));
        let mut invalid = None;
        let mut names = HashSet::new();
        for d in device_slices.iter().flat_map(|(_, s)| s.spec.devices.iter().flatten()) {
            if !names.insert(d.name.as_str()) {
                invalid = Some(format!("duplicate device name {}", d.name));
                break;
            }
        }
        let mut counter_sets: BTreeMap<&'a str, BTreeMap<&'a str, Quantity>> = BTreeMap::new();
        let other_devices: Vec<&'a Device> =
            other_device_slices.iter().flat_map(|s| s.spec.devices.iter().flatten()).collect();
        if features.partitionable_devices {
            for set in
                counter_slices.iter().chain(&other_counter_slices).flat_map(|s| s.spec.shared_counters.iter().flatten())
            {
                if counter_sets.contains_key(set.name.as_str()) {
                    invalid.get_or_insert(format!("duplicate counter set name {}", set.name));
                    continue;
                }
                let counters = set
                    .counters
                    .iter()
                    .map(|(k, c)| (k.as_str(), muster_api::quantity::parse(&c.value.0).unwrap_or_default()))
                    .collect();
                counter_sets.insert(set.name.as_str(), counters);
            }
            let devices = device_slices
                .iter()
                .flat_map(|(_, s)| s.spec.devices.iter().flatten())
                .chain(other_devices.iter().copied());
            for d in devices {
                for cc in d.consumes_counters.iter().flatten() {
                    match counter_sets.get(cc.counter_set.as_str()) {
                        None => {
                            invalid.get_or_insert(format!("counter set {} not found", cc.counter_set));
                        }
                        Some(set) => {
                            if let Some(c) = cc.counters.keys().find(|c| !set.contains_key(c.as_str())) {
                                invalid
                                    .get_or_insert(format!("counter {c} not found in counter set {}", cc.counter_set));
                            }
                        }
                    }
                }
            }
        }
        pools.push(Pool {
            driver,
            name,
            incomplete,
            invalid,
            slices: if incomplete { Vec::new() } else { device_slices },
            counter_sets,
            other_devices,
        });
    }
    // Pools whose targeting devices have binding conditions go last (stable, so each group stays
    // in (driver, name) order).
    pools.sort_by_key(|p| {
        p.slices.iter().flat_map(|(_, s)| s.spec.devices.iter().flatten()).any(|d| d.binding_conditions.is_some())
    });
    pools
}
