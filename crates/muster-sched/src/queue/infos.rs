//! The queue's record of each entry, found by the entry's own id: pods, PodGroups and
//! CompositePodGroup trees are slots of the store's arrays (ids reused once freed), so each kind
//! is a table indexed by slot, not a hash map. A waiting gang is looked up several times each
//! time an event wakes it (requeued, popped, failed again); here each look is an index.
//!
//! A table is as long as the highest slot queued so far, and the store reuses freed slots: its
//! length stays within the store's.

use crate::cycle::QueueEntry;

/// Entries' records by entry, one table per kind of entry.
#[derive(Clone, Debug)]
pub(super) struct Infos<T> {
    pods: Vec<Option<T>>,
    groups: Vec<Option<T>>,
    composites: Vec<Option<T>>,
}

impl<T> Default for Infos<T> {
    fn default() -> Self {
        Infos { pods: Vec::new(), groups: Vec::new(), composites: Vec::new() }
    }
}

impl<T> Infos<T> {
    fn table(&self, entry: QueueEntry) -> (&Vec<Option<T>>, usize) {
        match entry {
            QueueEntry::Pod(p) => (&self.pods, p.0 as usize),
            QueueEntry::Group(g) => (&self.groups, g.index()),
            QueueEntry::Composite(r) => (&self.composites, r.index()),
        }
    }

    fn table_mut(&mut self, entry: QueueEntry) -> (&mut Vec<Option<T>>, usize) {
        match entry {
            QueueEntry::Pod(p) => (&mut self.pods, p.0 as usize),
            QueueEntry::Group(g) => (&mut self.groups, g.index()),
            QueueEntry::Composite(r) => (&mut self.composites, r.index()),
        }
    }

    pub(super) fn get(&self, entry: &QueueEntry) -> Option<&T> {
        let (table, i) = self.table(*entry);
        table.get(i)?.as_ref()
    }

    pub(super) fn get_mut(&mut self, entry: &QueueEntry) -> Option<&mut T> {
        let (table, i) = self.table_mut(*entry);
        table.get_mut(i)?.as_mut()
    }

    pub(super) fn contains_key(&self, entry: &QueueEntry) -> bool {
        self.get(entry).is_some()
    }

    /// Records `info` for `entry`; the record it had, if any.
    pub(super) fn insert(&mut self, entry: QueueEntry, info: T) -> Option<T> {
        let (table, i) = self.table_mut(entry);
        if table.len() <= i {
            table.resize_with(i + 1, || None);
        }
        table[i].replace(info)
    }

    pub(super) fn remove(&mut self, entry: &QueueEntry) -> Option<T> {
        let (table, i) = self.table_mut(*entry);
        table.get_mut(i)?.take()
    }

    /// Every record, in no particular order.
    pub(super) fn values(&self) -> impl Iterator<Item = &T> {
        self.pods.iter().chain(&self.groups).chain(&self.composites).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{CompositeId, GroupId, PodId};

    #[test]
    fn each_kind_of_entry_has_its_own_slots() {
        let mut infos = Infos::default();
        let (pod, group, tree) =
            (QueueEntry::Pod(PodId(3)), QueueEntry::Group(GroupId(3)), QueueEntry::Composite(CompositeId(0)));
        assert_eq!(infos.insert(pod, "pod"), None);
        assert_eq!(infos.insert(group, "group"), None);
        assert_eq!(infos.insert(group, "group again"), Some("group"));
        assert_eq!((infos.get(&pod), infos.get(&group), infos.get(&tree)), (Some(&"pod"), Some(&"group again"), None));
        assert!(!infos.contains_key(&QueueEntry::Pod(PodId(2))), "a slot below one in use holds nothing");
        assert!(!infos.contains_key(&QueueEntry::Pod(PodId(40))), "nor one past the end");
        assert_eq!(infos.remove(&pod), Some("pod"));
        assert_eq!(infos.remove(&pod), None);
        *infos.get_mut(&group).expect("recorded") = "changed";
        assert_eq!(infos.values().copied().collect::<Vec<_>>(), ["changed"]);
    }
}
