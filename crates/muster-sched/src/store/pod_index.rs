//! The store's pods by `namespace/name`, kept by the name's hash rather than by a copy of the
//! name: a pod add clones no key into the index, a delete frees none, and a lookup compares the
//! name with the slot's own key (which the caller reads next anyway) instead of a second copy
//! stored elsewhere in memory. Names whose hashes collide are kept by name in a side map, so a
//! lookup is exact whatever the hashes.

use std::hash::BuildHasher;

use crate::cluster::{NameMap, PodId, PodInfo};
use crate::slots::Slots;

type ByHash = std::collections::HashMap<u64, PodId, std::hash::BuildHasherDefault<muster_cel::IdHasher>>;

#[derive(Clone, Debug, Default)]
pub(super) struct PodIndex<S = foldhash::fast::RandomState> {
    hasher: S,
    /// The first pod of each name hash.
    by_hash: ByHash,
    /// Pods whose name hash another pod had when they came, by name.
    collided: NameMap<String, PodId>,
}

impl<S: BuildHasher> PodIndex<S> {
    pub(super) fn with_capacity(n: usize) -> Self
    where
        S: Default,
    {
        PodIndex {
            hasher: S::default(),
            by_hash: ByHash::with_capacity_and_hasher(n, Default::default()),
            collided: NameMap::default(),
        }
    }

    /// The pod named `key`, reading names from `pods` (the slots the ids index).
    pub(super) fn get(&self, key: &str, pods: &Slots<PodInfo>) -> Option<PodId> {
        let h = self.hasher.hash_one(key);
        match self.by_hash.get(&h) {
            Some(&id) if pods[id.0 as usize].key == key => Some(id),
            _ if self.collided.is_empty() => None,
            _ => self.collided.get(key).copied(),
        }
    }

    /// Adds pod `id` named `key` (not in the index yet).
    pub(super) fn insert(&mut self, key: &str, id: PodId, pods: &Slots<PodInfo>) {
        let h = self.hasher.hash_one(key);
        match self.by_hash.get(&h) {
            Some(&other) if other != id && pods[other.0 as usize].key != key => {
                self.collided.insert(key.to_string(), id);
            }
            _ => drop(self.by_hash.insert(h, id)),
        }
    }

    /// Takes out the pod named `key`, if indexed.
    pub(super) fn remove(&mut self, key: &str, pods: &Slots<PodInfo>) -> Option<PodId> {
        let h = self.hasher.hash_one(key);
        match self.by_hash.get(&h) {
            Some(&id) if pods[id.0 as usize].key == key => self.by_hash.remove(&h),
            _ if self.collided.is_empty() => None,
            _ => self.collided.remove(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name hashes alike: every pod after the first goes to the side map.
    type Colliding = std::hash::BuildHasherDefault<ZeroHasher>;

    #[derive(Default)]
    struct ZeroHasher;

    impl std::hash::Hasher for ZeroHasher {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, _: &[u8]) {}
    }

    fn pods(names: &[&str]) -> Slots<PodInfo> {
        names
            .iter()
            .map(|n| {
                let mut p = PodInfo::vacant();
                p.key = (*n).into();
                p
            })
            .collect()
    }

    fn exercise<S: BuildHasher + Default>() {
        let slots = pods(&["a/x", "a/y", "b/x"]);
        let mut index: PodIndex<S> = PodIndex::with_capacity(4);
        for (i, p) in slots.iter().enumerate() {
            index.insert(&p.key, PodId(i as u32), &slots);
        }
        for (i, p) in slots.iter().enumerate() {
            assert_eq!(index.get(&p.key, &slots), Some(PodId(i as u32)), "{}", p.key);
        }
        assert_eq!(index.get("c/z", &slots), None);
        // Taking out the first of a hash leaves the others found.
        assert_eq!(index.remove("a/x", &slots), Some(PodId(0)));
        assert_eq!(index.get("a/x", &slots), None);
        assert_eq!(index.get("a/y", &slots), Some(PodId(1)));
        assert_eq!(index.get("b/x", &slots), Some(PodId(2)));
        assert_eq!(index.remove("a/x", &slots), None);
        // A name that comes back is found again.
        index.insert("a/x", PodId(0), &slots);
        assert_eq!(index.get("a/x", &slots), Some(PodId(0)));
        assert_eq!(index.remove("b/x", &slots), Some(PodId(2)));
        assert_eq!(index.get("b/x", &slots), None);
        assert_eq!(index.get("a/y", &slots), Some(PodId(1)));
    }

    #[test]
    fn finds_every_pod_by_name() {
        exercise::<foldhash::fast::RandomState>();
    }

    #[test]
    fn finds_every_pod_when_all_names_collide() {
        exercise::<Colliding>();
    }

    /// Random adds and deletes over a few names, slots reused as the store reuses them: the
    /// index answers as a map by name does, with real hashes and with all hashes equal.
    fn agrees_with_a_map<S: BuildHasher + Default>(ops: &[(bool, u8)]) {
        let mut slots: Slots<PodInfo> = Slots::new();
        let mut free: Vec<PodId> = Vec::new();
        let mut reference: std::collections::BTreeMap<String, PodId> = Default::default();
        let mut index: PodIndex<S> = PodIndex::with_capacity(0);
        for &(add, n) in ops {
            let key = format!("ns/pod-{}", n % 12);
            if add && !reference.contains_key(&key) {
                let id = free.pop().unwrap_or_else(|| {
                    slots.push(PodInfo::vacant());
                    PodId(slots.len() as u32 - 1)
                });
                index.insert(&key, id, &slots);
                slots[id.0 as usize].key = key.clone();
                reference.insert(key, id);
            } else if !add {
                let got = index.remove(&key, &slots);
                assert_eq!(got, reference.remove(&key), "remove {key}");
                if let Some(id) = got {
                    slots[id.0 as usize] = PodInfo::vacant();
                    free.push(id);
                }
            }
            for i in 0..12 {
                let key = format!("ns/pod-{i}");
                assert_eq!(index.get(&key, &slots), reference.get(&key).copied(), "get {key}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn answers_as_a_map_by_name(ops in proptest::collection::vec((proptest::bool::ANY, 0u8..24), 0..80)) {
            agrees_with_a_map::<foldhash::fast::RandomState>(&ops);
            agrees_with_a_map::<Colliding>(&ops);
        }
    }
}
