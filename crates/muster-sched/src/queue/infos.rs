//! The queue's record of each entry, found by the entry's own id: pods, PodGroups and
//! CompositePodGroup trees are slots of the store's arrays (ids reused once freed), so each kind
//! has a table from slot to the record's place, and the records sit together in one array. A
//! waiting gang is looked up several times each time an event wakes it (requeued, popped, failed
//! again); here each look is two indexings, no hashing.
//!
//! A table is as long as the highest slot queued so far, four bytes a slot (the store reuses
//! freed slots: its length stays within the store's); the records are as many as the entries
//! queued, however many pods run.

use crate::cycle::QueueEntry;

/// No record for this slot.
const NONE: u32 = u32::MAX;

/// Entries' records by entry.
#[derive(Clone, Debug)]
pub(super) struct Infos<T> {
    /// Per kind of entry (pod, group, tree), per slot: the record's place in `records`.
    places: [Vec<u32>; 3],
    /// The records with their entries, in no particular order.
    records: Vec<(QueueEntry, T)>,
}

impl<T> Default for Infos<T> {
    fn default() -> Self {
        Infos { places: [Vec::new(), Vec::new(), Vec::new()], records: Vec::new() }
    }
}

/// The table and the slot of `entry`.
fn slot(entry: QueueEntry) -> (usize, usize) {
    match entry {
        QueueEntry::Pod(p) => (0, p.0 as usize),
        QueueEntry::Group(g) => (1, g.index()),
        QueueEntry::Composite(r) => (2, r.index()),
    }
}

impl<T> Infos<T> {
    fn place(&self, entry: QueueEntry) -> Option<usize> {
        let (table, i) = slot(entry);
        let place = *self.places[table].get(i)?;
        (place != NONE).then_some(place as usize)
    }

    pub(super) fn get(&self, entry: &QueueEntry) -> Option<&T> {
        self.place(*entry).map(|p| &self.records[p].1)
    }

    pub(super) fn get_mut(&mut self, entry: &QueueEntry) -> Option<&mut T> {
        self.place(*entry).map(|p| &mut self.records[p].1)
    }

    pub(super) fn contains_key(&self, entry: &QueueEntry) -> bool {
        self.place(*entry).is_some()
    }

    /// Records `info` for `entry`; the record it had, if any.
    pub(super) fn insert(&mut self, entry: QueueEntry, info: T) -> Option<T> {
        if let Some(p) = self.place(entry) {
            return Some(std::mem::replace(&mut self.records[p].1, info));
        }
        let (table, i) = slot(entry);
        let places = &mut self.places[table];
        if places.len() <= i {
            places.resize(i + 1, NONE);
        }
        places[i] = u32::try_from(self.records.len()).expect("fewer than 2^32 queued entries");
        self.records.push((entry, info));
        None
    }

    /// Removes `entry`'s record: the last record takes its place.
    pub(super) fn remove(&mut self, entry: &QueueEntry) -> Option<T> {
        let p = self.place(*entry)?;
        let (table, i) = slot(*entry);
        self.places[table][i] = NONE;
        let (_, info) = self.records.swap_remove(p);
        if let Some((moved, _)) = self.records.get(p) {
            let (table, i) = slot(*moved);
            self.places[table][i] = p as u32;
        }
        Some(info)
    }

    /// Every record, in no particular order.
    pub(super) fn values(&self) -> impl Iterator<Item = &T> {
        self.records.iter().map(|(_, info)| info)
    }

    /// Every record, to change, in no particular order.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.records.iter_mut().map(|(_, info)| info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{CompositeId, GroupId, PodId};

    #[test]
    fn each_kind_of_entry_has_its_own_slots_and_a_removal_moves_the_last_record() {
        let mut infos = Infos::default();
        let (pod, group, tree) =
            (QueueEntry::Pod(PodId(3)), QueueEntry::Group(GroupId(3)), QueueEntry::Composite(CompositeId(0)));
        assert_eq!(infos.insert(pod, "pod"), None);
        assert_eq!(infos.insert(group, "group"), None);
        assert_eq!(infos.insert(group, "group again"), Some("group"));
        assert_eq!((infos.get(&pod), infos.get(&group), infos.get(&tree)), (Some(&"pod"), Some(&"group again"), None));
        assert!(!infos.contains_key(&QueueEntry::Pod(PodId(2))), "a slot below one in use holds nothing");
        assert!(!infos.contains_key(&QueueEntry::Pod(PodId(40))), "nor one past the end");
        assert_eq!(infos.insert(tree, "tree"), None);
        assert_eq!(infos.remove(&pod), Some("pod"), "the first record goes; the last (the tree's) takes its place");
        assert_eq!(infos.remove(&pod), None);
        assert_eq!((infos.get(&group), infos.get(&tree)), (Some(&"group again"), Some(&"tree")));
        *infos.get_mut(&group).expect("recorded") = "changed";
        let mut all: Vec<_> = infos.values().copied().collect();
        all.sort();
        assert_eq!(all, ["changed", "tree"]);
    }
}
