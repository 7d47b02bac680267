//! The allocator's inputs besides objects: feature switches and the allocated state.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::slice_index::LocalSlice;

/// Allocator-level feature switches (upstream's `Features`, one per DRA gate family).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    pub admin_access: bool,
    pub prioritized_list: bool,
    pub partitionable_devices: bool,
    pub device_taints: bool,
    pub device_binding_and_status: bool,
    pub consumable_capacity: bool,
    pub list_type_attributes: bool,
}

impl Features {
    /// Kubernetes 1.37's defaults: every feature but the alpha ListTypeAttributes.
    pub fn kubernetes_1_37() -> Self {
        Features {
            admin_access: true,
            prioritized_list: true,
            partitionable_devices: true,
            device_taints: true,
            device_binding_and_status: true,
            consumable_capacity: true,
            list_type_attributes: false,
        }
    }

    /// Sets a feature by upstream's name (`AdminAccess`, `PrioritizedList`, ...); false for an
    /// unknown name.
    pub fn set(&mut self, name: &str, on: bool) -> bool {
        let f = match name {
            "AdminAccess" => &mut self.admin_access,
            "PrioritizedList" => &mut self.prioritized_list,
            "PartitionableDevices" => &mut self.partitionable_devices,
            "DeviceTaints" => &mut self.device_taints,
            "DeviceBindingAndStatus" => &mut self.device_binding_and_status,
            "ConsumableCapacity" => &mut self.consumable_capacity,
            "ListTypeAttributes" => &mut self.list_type_attributes,
            _ => return false,
        };
        *f = on;
        true
    }
}

/// A device: (driver, pool, device).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// What allocated claims hold of one device.
#[derive(Clone, Debug, Default)]
struct Held {
    /// Allocated exclusively.
    dedicated: bool,
    /// Shares allocated (multi-allocatable device, consumable capacity).
    shares: u32,
    /// Capacity consumed by the shares, summed, in nano-units per capacity name.
    capacity: Option<BTreeMap<String, i128>>,
}

/// The device results of a claim's allocation (none when it is not allocated).
pub fn allocation_results(
    c: &ResourceClaim,
) -> impl Iterator<Item = &k8s_openapi::api::resource::v1::DeviceRequestAllocationResult> {
    c.status
        .as_ref()
        .and_then(|st| st.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
}

/// A consumed capacity in nano-units (a malformed quantity counts as zero, as the API server
/// would not have accepted it).
fn nanos(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i128 {
    muster_api::quantity::parse(&q.0).map(|q| q.nanos()).unwrap_or(0)
}

type Fast<K, V> = hashbrown::HashMap<K, V, std::hash::BuildHasherDefault<muster_cel::IdHasher>>;

/// A driver, pool or device name as a key of [`AllocatedState`]'s maps: inline when it is short
/// (as most are), so that a lookup compares the name it finds without a visit to the heap (at
/// full scale the state is read from memory, not cache, and each such visit is a miss). Looked up
/// by the name's bytes (`Borrow<[u8]>`: it hashes and compares as them).
#[derive(Clone)]
enum Key {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

/// The longest name a [`Key`] holds inline (with its length and tag, the size of a `String`).
const INLINE_KEY: usize = 22;

impl Key {
    fn bytes(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..*len as usize],
            Key::Heap(b) => b,
        }
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(self.bytes()).expect("a key is made from a str")
    }
}

impl From<&[u8]> for Key {
    fn from(b: &[u8]) -> Key {
        if b.len() > INLINE_KEY {
            return Key::Heap(b.into());
        }
        let mut bytes = [0; INLINE_KEY];
        bytes[..b.len()].copy_from_slice(b);
        Key::Inline { len: b.len() as u8, bytes }
    }
}

impl std::borrow::Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.bytes()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes().hash(state)
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Devices already in use by allocated claims, looked up by (driver, pool, device) without
/// building keys.
#[derive(Clone, Debug, Default)]
pub struct AllocatedState {
    held: Fast<Key, Fast<Key, Fast<Key, Held>>>,
}

/// What allocated claims hold of one pool's devices: [`AllocatedState::pool`], looked up once so
/// that each device costs one lookup by its name.
#[derive(Clone, Copy, Debug)]
pub struct PoolHeld<'s>(Option<&'s Fast<Key, Held>>);

impl<'s> PoolHeld<'s> {
    fn get(self, device: &str) -> Option<&'s Held> {
        self.0?.get(device.as_bytes())
    }

    /// Is the device exclusively allocated?
    pub fn is_dedicated(self, device: &str) -> bool {
        self.get(device).is_some_and(|h| h.dedicated)
    }

    /// `IsDeviceAllocated`: dedicated, or with shares, or with consumed capacity.
    pub fn in_use(self, device: &str) -> bool {
        self.get(device).is_some_and(|h| h.dedicated || h.shares > 0 || h.capacity.is_some())
    }

    /// Capacity consumed by the device's shares, if any share consumed some.
    pub fn capacity(self, device: &str) -> Option<&'s BTreeMap<String, i128>> {
        self.get(device).and_then(|h| h.capacity.as_ref())
    }
}

/// The value under `key`, inserted as the default when missing; one lookup, and the key is
/// copied only when inserted.
fn slot<'m, V: Default>(map: &'m mut Fast<Key, V>, key: &str) -> &'m mut V {
    map.entry_ref(key.as_bytes()).or_default()
}

impl AllocatedState {
    /// What allocated claims hold of the devices of pool (`driver`, `pool`).
    pub fn pool(&self, driver: &str, pool: &str) -> PoolHeld<'_> {
        PoolHeld(self.held.get(driver.as_bytes()).and_then(|pools| pools.get(pool.as_bytes())))
    }

    /// Which devices of `slices` (a node's own, in a fixed order) allocated claims hold: one bit
    /// per device, in order (a name listed twice in a pool: its first place). `None` when the
    /// bits would not say everything held in those slices' pools: a share or consumed capacity,
    /// a held device none of the slices lists, more than 128 devices. Equal bits over the same
    /// slices: the same devices in use, so the same allocator answers on them.
    pub fn held_bits<'a>(&self, slices: impl IntoIterator<Item = LocalSlice<'a>>) -> Option<u128> {
        let mut slices = slices.into_iter();
        let Some(first) = slices.next() else { return Some(0) };
        let Some(second) = slices.next() else { return self.held_bits_in(&[first]) };
        let all: Vec<LocalSlice<'a>> = [first, second].into_iter().chain(slices).collect();
        self.held_bits_in(&all)
    }

    fn held_bits_in(&self, slices: &[LocalSlice<'_>]) -> Option<u128> {
        if slices.iter().map(|s| s.names.len()).sum::<usize>() > u128::BITS as usize {
            return None;
        }
        let mut bits = 0u128;
        let mut first = 0;
        for (i, s) in slices.iter().enumerate() {
            let same_pool = |o: &LocalSlice<'_>| o.driver == s.driver && o.pool == s.pool;
            // Each pool once, at its first slice: its held devices looked up in its slices.
            if !slices[..i].iter().any(same_pool) {
                for (name, held) in self.pool(s.driver, s.pool).0.into_iter().flatten() {
                    let name = name.as_str();
                    if !held.dedicated || held.shares > 0 || held.capacity.is_some() {
                        return None;
                    }
                    let mut at = first;
                    let place = slices[i..].iter().find_map(|o| {
                        let found = same_pool(o).then(|| o.names.position(name)).flatten().map(|p| at + p);
                        at += o.names.len();
                        found
                    });
                    bits |= 1 << place?;
                }
            }
            first += s.names.len();
        }
        Some(bits)
    }

    fn entry(&mut self, id: &DeviceId) -> &mut Held {
        self.entry_of(&id.driver, &id.pool, &id.device)
    }

    fn entry_of(&mut self, driver: &str, pool: &str, device: &str) -> &mut Held {
        slot(slot(slot(&mut self.held, driver), pool), device)
    }

    /// Records a device as exclusively allocated.
    pub fn mark_dedicated(&mut self, id: &DeviceId) {
        self.entry(id).dedicated = true;
    }

    /// Is the device exclusively allocated?
    pub fn is_dedicated(&self, driver: &str, pool: &str, device: &str) -> bool {
        self.pool(driver, pool).is_dedicated(device)
    }

    /// `IsDeviceAllocated`: dedicated, or with shares, or with consumed capacity.
    pub fn in_use(&self, driver: &str, pool: &str, device: &str) -> bool {
        self.pool(driver, pool).in_use(device)
    }

    /// Capacity consumed by the device's shares, if any share consumed some.
    pub fn capacity(&self, driver: &str, pool: &str, device: &str) -> Option<&BTreeMap<String, i128>> {
        self.pool(driver, pool).capacity(device)
    }

    /// What the scheduler derives from claims with `status.allocation`: admin-access results never
    /// count as allocated; results with a share ID are shares (with ConsumableCapacity on).
    pub fn from_claims<'a>(claims: impl IntoIterator<Item = &'a ResourceClaim>, features: Features) -> Self {
        let mut s = AllocatedState::default();
        for c in claims {
            s.add_claim(c, features);
        }
        s
    }

    /// Adds what one claim's allocation holds. Results come in runs of one pool: each run's
    /// pool is looked up once.
    pub fn add_claim(&mut self, c: &ResourceClaim, features: Features) {
        let mut results = allocation_results(c).filter(|r| r.admin_access != Some(true)).peekable();
        while let Some(first) = results.next() {
            let devices = slot(slot(&mut self.held, &first.driver), &first.pool);
            for r in std::iter::once(first).chain(std::iter::from_fn(|| results.next_if(|r| same_pool(r, first)))) {
                let held = slot(devices, &r.device);
                if features.consumable_capacity && r.share_id.is_some() {
                    held.shares += 1;
                    if let Some(cc) = &r.consumed_capacity {
                        let sum = held.capacity.get_or_insert_with(BTreeMap::new);
                        for (k, q) in cc {
                            let v = nanos(q);
                            *sum.entry(k.clone()).or_default() += v;
                        }
                    }
                } else {
                    held.dedicated = true;
                }
            }
        }
    }

    /// Takes back what [`AllocatedState::add_claim`] added for the same claim (Unreserve, a
    /// gang rolled back): the state is as if the claim had never been added.
    pub fn remove_claim(&mut self, c: &ResourceClaim, features: Features) {
        let mut results = allocation_results(c).filter(|r| r.admin_access != Some(true)).peekable();
        while let Some(first) = results.next() {
            let run = std::iter::once(first).chain(std::iter::from_fn(|| results.next_if(|r| same_pool(r, first))));
            let pools = self.held.get_mut(first.driver.as_bytes());
            let Some(devices) = pools.and_then(|p| p.get_mut(first.pool.as_bytes())) else {
                run.for_each(drop);
                continue;
            };
            for r in run {
                // One lookup: the device's entry is changed, and removed when nothing holds it.
                let hashbrown::hash_map::EntryRef::Occupied(mut entry) = devices.entry_ref(r.device.as_bytes()) else {
                    continue;
                };
                let held = entry.get_mut();
                if features.consumable_capacity && r.share_id.is_some() {
                    held.shares = held.shares.saturating_sub(1);
                    if let (Some(sum), Some(cc)) = (held.capacity.as_mut(), &r.consumed_capacity) {
                        for (k, q) in cc {
                            let v = nanos(q);
                            if let Some(x) = sum.get_mut(k) {
                                *x -= v;
                            }
                        }
                    }
                    if held.shares == 0 {
                        held.capacity = None;
                    }
                } else {
                    held.dedicated = false;
                }
                if !held.dedicated && held.shares == 0 && held.capacity.is_none() {
                    entry.remove();
                }
            }
        }
    }
}

/// Do two results name devices of one pool?
fn same_pool(
    a: &k8s_openapi::api::resource::v1::DeviceRequestAllocationResult,
    b: &k8s_openapi::api::resource::v1::DeviceRequestAllocationResult,
) -> bool {
    a.pool == b.pool && a.driver == b.driver
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Does any allocated claim hold a device of pool (`driver`, `pool`)? (An entry is removed
    /// when nothing holds its device any more: `held_bits` counts on it.)
    fn holds_in(s: &AllocatedState, driver: &str, pool: &str) -> bool {
        s.pool(driver, pool).0.is_some_and(|devices| !devices.is_empty())
    }

    fn claim(results: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c"},
            "spec": {},
            "status": {"allocation": {"devices": {"results": results}}}
        }))
        .unwrap()
    }

    #[test]
    fn results_of_pools_in_turn_are_each_added_and_taken_back() {
        let f = Features::kubernetes_1_37();
        let r = |driver: &str, pool: &str, device: &str| serde_json::json!({"request": "r", "driver": driver, "pool": pool, "device": device});
        let a = claim(serde_json::json!([
            r("d", "p", "gpu-0"),
            r("d", "p", "gpu-1"),
            r("d", "q", "gpu-0"),
            r("e", "q", "gpu-0"),
            r("d", "p", "gpu-2"),
        ]));
        let mut s = AllocatedState::from_claims([&a], f);
        for (driver, pool, device) in
            [("d", "p", "gpu-0"), ("d", "p", "gpu-1"), ("d", "p", "gpu-2"), ("d", "q", "gpu-0"), ("e", "q", "gpu-0")]
        {
            assert!(s.is_dedicated(driver, pool, device), "{driver}/{pool}/{device}");
        }
        assert!(!s.in_use("e", "p", "gpu-0"));
        s.remove_claim(&a, f);
        assert!(!holds_in(&s, "d", "p") && !holds_in(&s, "d", "q") && !holds_in(&s, "e", "q"));
    }

    fn slice(name: &str, pool: &str, devices: &[&str]) -> k8s_openapi::api::resource::v1::ResourceSlice {
        let devices: Vec<_> = devices.iter().map(|d| serde_json::json!({"name": d})).collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"driver": "d", "nodeName": "n", "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}
        }))
        .unwrap()
    }

    #[test]
    fn held_bits_name_the_dedicated_devices_and_nothing_else() {
        let f = Features::kubernetes_1_37();
        let r = |pool: &str, device: &str| serde_json::json!({"request": "r", "driver": "d", "pool": pool, "device": device});
        let index = crate::SliceIndex::new([
            slice("a", "p", &["gpu-0", "gpu-1"]),
            slice("b", "q", &["nic-0"]),
            slice("c", "p", &["gpu-2"]),
        ]);
        let bits = |s: &AllocatedState| s.held_bits(index.local_slices("n"));
        let mut s = AllocatedState::default();
        assert_eq!(bits(&s), Some(0));
        let a = claim(serde_json::json!([r("p", "gpu-1"), r("q", "nic-0"), r("p", "gpu-2")]));
        s.add_claim(&a, f);
        assert_eq!(bits(&s), Some(0b1110), "gpu-2 is in the pool's second slice, after nic-0");
        // A held device the slices do not list: the bits would not say it.
        let b = claim(serde_json::json!([r("p", "gpu-9")]));
        s.add_claim(&b, f);
        assert_eq!(bits(&s), None);
        s.remove_claim(&b, f);
        assert_eq!(bits(&s), Some(0b1110));
        // A share: the bits cannot say how much of the device is left.
        let c = claim(serde_json::json!([
            {"request": "r", "driver": "d", "pool": "p", "device": "gpu-0", "shareID": "00000000-0000-0000-0000-000000000001"}
        ]));
        s.add_claim(&c, f);
        assert_eq!(bits(&s), None);
        s.remove_claim(&c, f);
        s.remove_claim(&a, f);
        assert_eq!(bits(&s), Some(0));
        assert_eq!(s.held_bits(index.local_slices("elsewhere")), Some(0), "no slice of its own");
        let many: Vec<String> = (0..129).map(|i| format!("gpu-{i}")).collect();
        let big = crate::SliceIndex::new([slice("a", "p", &many.iter().map(String::as_str).collect::<Vec<_>>())]);
        assert_eq!(s.held_bits(big.local_slices("n")), None, "more devices than bits");
    }

    #[test]
    fn names_inline_or_not_are_found_by_their_text() {
        let f = Features::kubernetes_1_37();
        let names = ["", "gpu-0", &"p".repeat(INLINE_KEY), &"q".repeat(INLINE_KEY + 1), &"long-".repeat(20)];
        let r = |n: &str| serde_json::json!({"request": "r", "driver": n, "pool": n, "device": n});
        let a = claim(serde_json::Value::Array(names.iter().map(|n| r(n)).collect()));
        let mut s = AllocatedState::from_claims([&a], f);
        for n in names {
            assert!(s.is_dedicated(n, n, n), "{n:?}");
            assert!(!s.in_use(n, n, &format!("{n}x")), "{n:?}x");
        }
        assert!(!s.in_use("p", "p", "p"), "a prefix of an inline name is another name");
        s.remove_claim(&a, f);
        assert!(names.iter().all(|n| !holds_in(&s, n, n)));
    }

    #[test]
    fn remove_claim_takes_back_exactly_what_add_claim_added() {
        let f = Features::kubernetes_1_37();
        let a = claim(serde_json::json!([
            {"request": "r", "driver": "d", "pool": "p", "device": "gpu-0"},
            {"request": "r", "driver": "d", "pool": "p", "device": "nic-0", "shareID": "00000000-0000-0000-0000-000000000001",
             "consumedCapacity": {"bandwidth": "10G"}},
        ]));
        let b = claim(serde_json::json!([
            {"request": "r", "driver": "d", "pool": "p", "device": "nic-0", "shareID": "00000000-0000-0000-0000-000000000002",
             "consumedCapacity": {"bandwidth": "5G"}},
        ]));
        let mut s = AllocatedState::from_claims([&a, &b], f);
        assert!(s.is_dedicated("d", "p", "gpu-0"));
        assert_eq!(s.capacity("d", "p", "nic-0").unwrap()["bandwidth"], 15_000_000_000_000_000_000);
        s.remove_claim(&a, f);
        assert!(!s.in_use("d", "p", "gpu-0"));
        assert!(s.in_use("d", "p", "nic-0"), "b's share is still there");
        assert_eq!(s.capacity("d", "p", "nic-0").unwrap()["bandwidth"], 5_000_000_000_000_000_000);
        assert!(holds_in(&s, "d", "p"));
        s.remove_claim(&b, f);
        assert!(!s.in_use("d", "p", "nic-0"));
        assert!(!holds_in(&s, "d", "p"), "nothing of the pool is held any more");
    }
}
