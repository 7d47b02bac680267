//! The cluster's ResourceSlices as the allocator reads them: owned, kept in stable slots, indexed
//! by the node they are local to, the ones that are not node-local, and by pool; updated one slice
//! at a time. What each node sees is gathered on first use and kept until a change of one of the
//! pools it sees.
//!
//! What is remembered here is a function of the slices alone (devices' CEL views, DeviceClass
//! selectors' verdicts on devices, each node's gathering), so an update forgets exactly what read
//! the changed slice, and says which nodes' views it changed ([`Touched`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use muster_cel::{DeviceError, DeviceView};

use crate::pools::{GatheredCell, Held};
use crate::state::Features;

/// A selector's verdict on a device and the runtime cost its evaluation spent.
pub(crate) type Known = (Result<bool, Arc<muster_cel::RuntimeError>>, u64);

/// How many DeviceClass selector verdicts a [`SliceIndex`] keeps (about 40 MiB).
const MAX_VERDICTS: usize = 1 << 20;

type Fast<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<muster_cel::IdHasher>>;

/// What one node saw: (fingerprint of its labels, partitionable devices on?, the result).
type GatheredFor = (u64, bool, Arc<GatheredCell>);

/// One device's CEL view, converted on first use (or the conversion error upstream reports).
type ViewCell = OnceLock<Result<Arc<DeviceView>, DeviceError>>;

/// One slice and what is remembered of its devices.
struct Slot {
    slice: Arc<ResourceSlice>,
    /// Its devices' names, packed.
    names: DeviceNames,
    /// Each device's CEL view, converted once on first use.
    views: Box<[ViewCell]>,
    /// Where the slice's devices start in the numbering of `verdicts`' keys: a slice gets a fresh
    /// range each time it changes, so verdicts on its old devices are never read again.
    first_device: u32,
}

/// A slice's device names, in order, packed in one buffer with a hash of each: a name is looked
/// up without touching the devices.
#[derive(Debug, Default)]
pub struct DeviceNames {
    text: String,
    ends: Vec<u32>,
    hashes: Vec<u64>,
}

fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one(name)
}

impl DeviceNames {
    fn of(slice: &ResourceSlice) -> Self {
        let mut names = DeviceNames::default();
        for d in slice.spec.devices.iter().flatten() {
            names.text.push_str(&d.name);
            names.ends.push(names.text.len() as u32);
            names.hashes.push(name_hash(&d.name));
        }
        names
    }

    /// How many devices the slice lists.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Does the slice list no device?
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Where the first device named `name` is in the slice's list.
    pub fn position(&self, name: &str) -> Option<usize> {
        let hash = name_hash(name);
        self.hashes.iter().enumerate().filter(|(_, h)| **h == hash).map(|(i, _)| i).find(|&i| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            &self.text[start..self.ends[i] as usize] == name
        })
    }
}

/// One slice published with a node's `nodeName`, as [`crate::AllocatedState::held_bits`] reads
/// it.
#[derive(Clone, Copy, Debug)]
pub struct LocalSlice<'s> {
    pub driver: &'s str,
    pub pool: &'s str,
    pub names: &'s DeviceNames,
}

/// Which nodes' view of the devices a change of slices changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Touched {
    /// None (no slice of that name).
    #[default]
    None,
    /// Only these nodes' (the pools' slices are all local to them).
    Nodes(BTreeSet<String>),
    /// Any node's (a pool it changed has a slice that is not node-local).
    All,
}

impl Touched {
    fn add(&mut self, other: Touched) {
        *self = match (std::mem::take(self), other) {
            (Touched::All, _) | (_, Touched::All) => Touched::All,
            (Touched::None, t) | (t, Touched::None) => t,
            (Touched::Nodes(mut a), Touched::Nodes(b)) => {
                a.extend(b);
                Touched::Nodes(a)
            }
        };
    }
}

/// One pool's slices, and the node they are all published for, if one: whether a claim's devices
/// are local to a node is one comparison, not a walk over the pool's slices.
#[derive(Default)]
struct PoolSlots {
    slots: BTreeSet<usize>,
    /// The `nodeName` every slice of the pool has, when they all have the same one.
    local_to: Option<String>,
}

/// The cluster's ResourceSlices, indexed: an allocation call looks only at the slices that can
/// matter to its node. Slices are kept by name; [`SliceIndex::upsert`] and
/// [`SliceIndex::delete`] change one, at a cost proportional to its pool.
#[derive(Default)]
pub struct SliceIndex {
    slots: Vec<Option<Slot>>,
    vacant: Vec<usize>,
    by_name: HashMap<String, usize>,
    /// Node name → slots of the slices published with that `nodeName`.
    node_local: HashMap<String, BTreeSet<usize>, foldhash::fast::RandomState>,
    /// Slots of the slices without a `nodeName`.
    shared: BTreeSet<usize>,
    /// Driver → pool → slots of the pool's slices.
    by_pool: HashMap<String, HashMap<String, PoolSlots, foldhash::fast::RandomState>, foldhash::fast::RandomState>,
    /// The next unused number of `verdicts`' device numbering, and how many devices the slices
    /// hold: when the numbering has run far ahead, it starts again (and the verdicts with it).
    next_device: u32,
    devices: u32,
    /// DeviceClass selectors' verdicts on devices, with the cost each evaluation spent: a
    /// class's selector gives the same answer on the same device every time, so later calls
    /// read it (and charge its cost to their budget as if they had evaluated it). At most
    /// [`MAX_VERDICTS`] are kept; claims' own selectors are not kept (there can be one per claim).
    verdicts: Mutex<Fast<u64, Known>>,
    /// What each node sees, gathered once: keyed by node name, a fingerprint of its labels, and
    /// whether partitionable devices are on (the only feature gathering depends on).
    gathered: RwLock<HashMap<String, Vec<GatheredFor>, foldhash::fast::RandomState>>,
}

impl SliceIndex {
    /// An index of `slices`, in their order. A later slice of the same name as an earlier one is
    /// kept too, but [`SliceIndex::upsert`] and [`SliceIndex::delete`] reach only the later one.
    pub fn new(slices: impl IntoIterator<Item = ResourceSlice>) -> Self {
        let mut index = SliceIndex::default();
        for s in slices {
            let slot = index.vacant_slot();
            index.put(slot, Arc::new(s));
        }
        index
    }

    /// The slices back, in slot order (the order given to [`SliceIndex::new`] while nothing
    /// changed).
    pub fn into_slices(mut self) -> Vec<ResourceSlice> {
        // The gatherings hold the slices too: dropped first, so that each slice is moved out.
        self.gathered.get_mut().unwrap_or_else(|e| e.into_inner()).clear();
        self.slots.into_iter().flatten().map(|s| Arc::unwrap_or_clone(s.slice)).collect()
    }

    /// Adds the slice, or replaces the one of its name.
    pub fn upsert(&mut self, slice: ResourceSlice) -> Touched {
        let name = slice.metadata.name.clone().unwrap_or_default();
        let mut touched = Touched::None;
        let slot = match self.by_name.get(&name).copied() {
            Some(slot) => {
                touched.add(self.take(slot));
                slot
            }
            None => self.vacant_slot(),
        };
        self.put(slot, Arc::new(slice));
        touched.add(self.touched_by(slot));
        self.forget_gathered(&touched);
        touched
    }

    /// Removes the slice named `name`, if there is one.
    pub fn delete(&mut self, name: &str) -> Touched {
        let Some(slot) = self.by_name.get(name).copied() else { return Touched::None };
        let touched = self.take(slot);
        self.by_name.remove(name);
        self.vacant.push(slot);
        self.forget_gathered(&touched);
        touched
    }

    fn vacant_slot(&mut self) -> usize {
        self.vacant.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        })
    }

    /// Puts `slice` into the vacant `slot` and into every index.
    fn put(&mut self, slot: usize, slice: Arc<ResourceSlice>) {
        let n = slice.spec.devices.as_ref().map_or(0, Vec::len) as u32;
        if self.next_device.checked_add(n).is_none_or(|end| end > self.devices.saturating_mul(2).max(1 << 16)) {
            self.renumber();
        }
        let first_device = self.next_device;
        self.next_device += n;
        self.devices += n;
        let name = slice.metadata.name.clone().unwrap_or_default();
        match slice.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
            Some(node) => drop(self.node_local.entry(node.to_string()).or_default().insert(slot)),
            None => drop(self.shared.insert(slot)),
        }
        let pools = self.by_pool.entry(slice.spec.driver.clone()).or_default();
        pools.entry(slice.spec.pool.name.clone()).or_default().slots.insert(slot);
        self.by_name.insert(name, slot);
        let views = (0..n).map(|_| OnceLock::new()).collect();
        debug_assert!(self.slots[slot].is_none(), "a slice put into an occupied slot");
        let names = DeviceNames::of(&slice);
        let (driver, pool) = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
        self.slots[slot] = Some(Slot { slice, names, views, first_device });
        self.locate(&driver, &pool);
    }

    /// Finds again the node every slice of the pool is published for, after a change of its
    /// slices.
    fn locate(&mut self, driver: &str, pool: &str) {
        let Some(set) = self.by_pool.get(driver).and_then(|p| p.get(pool)) else { return };
        let mut nodes = set.slots.iter().map(|&i| self.slots[i].as_ref().and_then(|s| s.slice.spec.node_name.as_ref()));
        let first = nodes.next().flatten();
        let local_to = first.filter(|n| nodes.all(|m| m == Some(*n))).cloned();
        if let Some(set) = self.by_pool.get_mut(driver).and_then(|p| p.get_mut(pool)) {
            set.local_to = local_to;
        }
    }

    /// Takes the slice in `slot` out of every index and leaves the slot vacant; returns the nodes
    /// whose view it was part of.
    fn take(&mut self, slot: usize) -> Touched {
        let touched = self.touched_by(slot);
        let Some(s) = self.slots[slot].as_ref() else { return touched };
        let slice = s.slice.clone();
        self.devices -= s.views.len() as u32;
        match slice.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
            Some(node) => {
                if let Some(set) = self.node_local.get_mut(node) {
                    set.remove(&slot);
                    if set.is_empty() {
                        self.node_local.remove(node);
                    }
                }
            }
            None => drop(self.shared.remove(&slot)),
        }
        if let Some(pools) = self.by_pool.get_mut(&slice.spec.driver) {
            if let Some(set) = pools.get_mut(&slice.spec.pool.name) {
                set.slots.remove(&slot);
                if set.slots.is_empty() {
                    pools.remove(&slice.spec.pool.name);
                }
            }
            if pools.is_empty() {
                self.by_pool.remove(&slice.spec.driver);
            }
        }
        self.slots[slot] = None;
        self.locate(&slice.spec.driver, &slice.spec.pool.name);
        touched
    }

    /// The nodes that see the pool of the slice in `slot`: those its node-local slices name, or
    /// every node when one of its slices is not node-local.
    fn touched_by(&self, slot: usize) -> Touched {
        let Some(s) = self.slots[slot].as_ref() else { return Touched::None };
        let mut nodes = BTreeSet::new();
        for member in self.pool_slots(&s.slice.spec.driver, &s.slice.spec.pool.name).chain([slot]) {
            let Some(m) = self.slots[member].as_ref() else { continue };
            match m.slice.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
                Some(node) => drop(nodes.insert(node.to_string())),
                None => return Touched::All,
            }
        }
        Touched::Nodes(nodes)
    }

    fn forget_gathered(&mut self, touched: &Touched) {
        let gathered = self.gathered.get_mut().unwrap_or_else(|e| e.into_inner());
        match touched {
            Touched::None => {}
            Touched::All => gathered.clear(),
            Touched::Nodes(nodes) => {
                for n in nodes {
                    gathered.remove(n);
                }
            }
        }
    }

    /// Numbers every slice's devices again from 0, forgetting the verdicts.
    fn renumber(&mut self) {
        let mut next = 0u32;
        for s in self.slots.iter_mut().flatten() {
            s.first_device = next;
            next = next.saturating_add(s.views.len() as u32);
        }
        self.next_device = next;
        self.verdicts.get_mut().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn pool_slots<'s>(&'s self, driver: &str, pool: &str) -> impl Iterator<Item = usize> + 's {
        self.by_pool.get(driver).and_then(|p| p.get(pool)).into_iter().flat_map(|p| &p.slots).copied()
    }

    /// The slices of a pool.
    pub(crate) fn pool(&self, driver: &str, pool: &str) -> impl Iterator<Item = &ResourceSlice> + '_ {
        self.pool_slots(driver, pool).map(|i| self.slice(i))
    }

    /// The slice in `slot`.
    ///
    /// # Panics
    /// When the slot is vacant: slots come from this index's gatherings and lookups.
    pub(crate) fn slice(&self, slot: usize) -> &ResourceSlice {
        &self.slots[slot].as_ref().expect("an occupied slot").slice
    }

    /// The slice named `name`.
    pub fn get(&self, name: &str) -> Option<&ResourceSlice> {
        self.by_name.get(name).map(|slot| self.slice(*slot))
    }

    /// Every slice with its slot, in slot order.
    pub fn slices(&self) -> impl Iterator<Item = (usize, &ResourceSlice)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|s| (i, &*s.slice)))
    }

    /// How many slices are indexed.
    pub fn len(&self) -> usize {
        self.slots.len() - self.vacant.len()
    }

    /// Is no slice indexed?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slices published with `node`'s `nodeName`, in slot order (the same order while none
    /// of them changes).
    pub fn local_slices<'s>(&'s self, node: &str) -> impl Iterator<Item = LocalSlice<'s>> + 's {
        let slots = self.node_local.get(node).into_iter().flatten();
        slots.filter_map(|&i| self.slots[i].as_ref()).map(|s| LocalSlice {
            driver: &s.slice.spec.driver,
            pool: &s.slice.spec.pool.name,
            names: &s.names,
        })
    }

    /// Are all slices of the pool local to `node` (published with its `nodeName`)?
    pub fn pool_is_local_to(&self, driver: &str, pool: &str, node: &str) -> bool {
        let local = match self.by_pool.get(driver).and_then(|p| p.get(pool)) {
            None => true,
            Some(set) => set.local_to.as_deref() == Some(node),
        };
        debug_assert_eq!(local, self.pool(driver, pool).all(|s| s.spec.node_name.as_deref() == Some(node)));
        local
    }

    /// What `node` sees, gathered on first use.
    pub fn gather(&self, node: Option<&Node>, features: Features) -> Arc<GatheredCell> {
        use std::hash::BuildHasher;
        let name = node.and_then(|n| n.metadata.name.as_deref()).unwrap_or_default();
        let labels = node
            .and_then(|n| n.metadata.labels.as_ref())
            .filter(|l| !l.is_empty())
            .map_or(0, |l| foldhash::fast::FixedState::default().hash_one(l));
        let partitionable = features.partitionable_devices;
        let cached =
            self.gathered.read().unwrap_or_else(|e| e.into_inner()).get(name).and_then(|v| {
                v.iter().find(|(l, p, _)| *l == labels && *p == partitionable).map(|(_, _, g)| g.clone())
            });
        if let Some(g) = cached {
            return g;
        }
        let g = Arc::new(GatheredCell::gather(node, self.held_for(name), features));
        self.gathered.write().unwrap_or_else(|e| e.into_inner()).entry(name.to_string()).or_default().push((
            labels,
            partitionable,
            g.clone(),
        ));
        g
    }

    /// The slices that may target node `name` (its node-local ones and the shared ones), with
    /// every other slice of their pools.
    fn held_for(&self, name: &str) -> Vec<Held> {
        let mut slots: BTreeSet<usize> = self.node_local.get(name).into_iter().flatten().copied().collect();
        slots.extend(&self.shared);
        let pools: BTreeSet<(&str, &str)> = slots
            .iter()
            .map(|i| {
                let s = self.slice(*i);
                (s.spec.driver.as_str(), s.spec.pool.name.as_str())
            })
            .collect();
        let mates: Vec<usize> = pools.into_iter().flat_map(|(driver, pool)| self.pool_slots(driver, pool)).collect();
        slots.extend(mates);
        slots.into_iter().map(|i| (i, self.slots[i].as_ref().expect("an occupied slot").slice.clone())).collect()
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
        let first = self.slots[slice].as_ref().map_or(0, |s| s.first_device);
        (u64::from(program) << 32) | u64::from(first.saturating_add(device as u32))
    }

    /// The CEL view of device `device` of the slice in `slice`, converted on first use.
    pub fn view(&self, slice: usize, device: usize) -> Result<Arc<DeviceView>, DeviceError> {
        let s = self.slots[slice].as_ref().expect("an occupied slot");
        s.views[device]
            .get_or_init(|| {
                let d = &s.slice.spec.devices.as_deref().unwrap_or(&[])[device];
                DeviceView::new(&s.slice.spec.driver, d).map(Arc::new)
            })
            .clone()
    }

    /// The first device of an allocated claim that carries a NoExecute taint its allocation
    /// result does not tolerate (taints from the pool's newest slices, DeviceTaintRules applied):
    /// upstream gives such a claim no new reservations (KEP 5055). `driver/pool/device: key=value`.
    pub fn untolerated_no_execute(&self, claim: &k8s_openapi::api::resource::v1::ResourceClaim) -> Option<String> {
        for r in crate::state::allocation_results(claim) {
            let device = self.find_device(&r.driver, &r.pool, &r.device).map(|(s, d)| {
                let devices = self.slice(s).spec.devices.as_deref().unwrap_or(&[]);
                &devices[d]
            });
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

    /// A device of the pool's newest generation: (slot of its slice, device in it). The first
    /// slice by name that publishes it, when several do.
    pub(crate) fn find_device(&self, driver: &str, pool: &str, device: &str) -> Option<(usize, usize)> {
        let newest = self.pool(driver, pool).map(|s| s.spec.pool.generation).max()?;
        let mut slots: Vec<usize> =
            self.pool_slots(driver, pool).filter(|i| self.slice(*i).spec.pool.generation == newest).collect();
        slots.sort_by(|a, b| self.slice(*a).metadata.name.cmp(&self.slice(*b).metadata.name));
        slots.into_iter().find_map(|i| {
            let devices = self.slice(i).spec.devices.as_deref().unwrap_or(&[]);
            devices.iter().position(|d| d.name == device).map(|d| (i, d))
        })
    }
}
