//! Gathering the pools a node can allocate from (upstream's `GatherPools`, spec §2).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelector};
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use muster_api::Quantity;
use muster_api::selectors::{NodeView, node_selector_matches};

use crate::state::Features;

/// A slice as a gathering holds it: its slot in the [`crate::SliceIndex`], and the slice.
pub(crate) type Held = (usize, Arc<ResourceSlice>);

self_cell::self_cell!(
    /// What one node sees ([`Gathered`]), holding the slices it refers to: a change of the index
    /// after it was gathered leaves it whole (the index drops it from its cache).
    pub struct GatheredCell {
        owner: Vec<Held>,
        #[covariant]
        dependent: Gathered,
    }
);

impl GatheredCell {
    /// The pools and candidates.
    pub fn get(&self) -> &Gathered<'_> {
        self.borrow_dependent()
    }

    /// Gathers what `node` sees from `slices`: every slice that may target it, and every other
    /// slice of their pools.
    pub(crate) fn gather(node: Option<&Node>, slices: Vec<Held>, features: Features) -> GatheredCell {
        GatheredCell::new(slices, |held| {
            let pools = gather(node, held, features);
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
            Gathered { pools, cands }
        })
    }
}

/// A candidate device and where it sits in the search order.
#[derive(Clone, Copy)]
pub struct Cand<'a> {
    pub pool: usize,
    pub slice: usize,
    pub index: usize,
    /// The slice's slot in the [`crate::SliceIndex`].
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
    /// The device slices that target the node, by name, with their slot in the index.
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

/// Slices of one pool seen from a node: the highest generation and its relevant slices (with
/// their slot).
type Group<'a> = (i64, Vec<(usize, &'a ResourceSlice)>);

/// The pools `node` sees, in search order: by (driver, pool name), then pools with devices that
/// have binding conditions last.
/// `held` is every slice that may target the node and every other slice of their pools.
fn gather<'a>(node: Option<&Node>, held: &'a [Held], features: Features) -> Vec<Pool<'a>> {
    // Every held slice of each pool, by name.
    let mut members: BTreeMap<(&'a str, &'a str), Vec<&'a ResourceSlice>> = BTreeMap::new();
    for (_, s) in held {
        members.entry((s.spec.driver.as_str(), s.spec.pool.name.as_str())).or_default().push(s);
    }
    for m in members.values_mut() {
        m.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    }
    let pool = |driver: &'a str, name: &'a str| members.get(&(driver, name)).map_or(&[][..], Vec::as_slice);
    // (driver, pool) → (generation, relevant slices).
    let mut groups: BTreeMap<(&'a str, &'a str), Group<'a>> = BTreeMap::new();
    for (at, slice) in held.iter().map(|(at, s)| (*at, &**s)) {
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
        // By name: the slice count is read from the first (slices of one generation that disagree
        // on it are a driver's bug; upstream reads the first its lister gives, in no set order).
        relevant.sort_by(|a, b| a.1.metadata.name.cmp(&b.1.metadata.name));
        let count = relevant[0].1.spec.pool.resource_slice_count;
        let mut incomplete = false;
        let mut others: Vec<&'a ResourceSlice> = Vec::new();
        if relevant.len() as i64 != count {
            if pool(driver, name).iter().any(|s| s.spec.pool.generation > generation) {
                // A newer generation exists elsewhere: this node's view is obsolete.
                continue;
            }
            let current: Vec<&'a ResourceSlice> =
                pool(driver, name).iter().copied().filter(|s| s.spec.pool.generation == generation).collect();
            incomplete = current.len() as i64 != count;
            others = current.into_iter().filter(|s| !relevant.iter().any(|(_, r)| std::ptr::eq(*r, *s))).collect();
        }
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
