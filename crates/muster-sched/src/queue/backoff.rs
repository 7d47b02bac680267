//! The backoff queues' storage: entries by backoff key, then queue order, kept in one window per
//! key. Keys are few (with `SchedulerPopFromBackoffQ` they are whole seconds, and a backoff
//! lasts at most ten), so an insertion is a push into its key's window, not a search of every
//! entry in backoff; a window whose backoff is over leaves whole. A window's entries are sorted
//! once, at its first pop after they came (an event wakes many, and they are then popped one by
//! one); entries that come while it is being popped wait in a heap beside the sorted ones.
//!
//! Removal is lazy: the queue says which key lost an entry, the window counts it, and the item
//! stays in its window until popped, when the caller's `live` check (the entry's place, key and
//! order in the queue's info) skips it. A window whose count reaches zero is dropped at once, so
//! every window held has an entry to give and the first key is always a real one. An entry
//! removed and added back under the same key and order leaves two like items: the first popped
//! takes the entry, the second no longer passes `live`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::Millis;
use super::ranks::{Rank, Renumbering};
use crate::cycle::QueueEntry;

type Item = Reverse<(Rank, QueueEntry)>;

#[derive(Clone, Debug, Default)]
pub(super) struct BackoffQueue {
    windows: BTreeMap<Millis, Window>,
    /// Entries held in all windows, stale items not counted.
    len: usize,
}

#[derive(Clone, Debug, Default)]
struct Window {
    /// Sorted ascending: the last is the first in queue order.
    sorted: Vec<Item>,
    /// Items that came since `sorted` was made.
    fresh: BinaryHeap<Item>,
    /// Items of both that are entries still in this window.
    live: usize,
}

impl Window {
    /// Takes the first item in queue order, stale or not.
    fn pop(&mut self) -> Option<Item> {
        if self.sorted.is_empty() {
            self.sorted = std::mem::take(&mut self.fresh).into_vec();
            self.sorted.sort_unstable();
        }
        let fresh_first = matches!((self.sorted.last(), self.fresh.peek()), (Some(s), Some(f)) if f > s);
        if fresh_first { self.fresh.pop() } else { self.sorted.pop() }
    }

    fn into_items(self) -> Vec<Item> {
        let mut items = self.sorted;
        items.extend(self.fresh.into_vec());
        items
    }
}

impl BackoffQueue {
    pub(super) fn insert(&mut self, key: Millis, order: Rank, entry: QueueEntry) {
        let window = self.windows.entry(key).or_default();
        window.fresh.push(Reverse((order, entry)));
        window.live += 1;
        self.len += 1;
    }

    /// An entry held under `key` left the queue by other means (removed): its item goes stale.
    pub(super) fn forget(&mut self, key: Millis) {
        let Some(window) = self.windows.get_mut(&key) else {
            debug_assert!(false, "no backoff window {key} to forget an entry of");
            return;
        };
        debug_assert!(window.live > 0, "backoff window {key} has no entry to forget");
        window.live -= 1;
        self.len -= 1;
        if window.live == 0 {
            self.windows.remove(&key);
        }
    }

    pub(super) fn first_key(&self) -> Option<Millis> {
        self.windows.first_key_value().map(|(k, _)| *k)
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first entry by key, then order, for which `live` holds.
    pub(super) fn pop_first(
        &mut self,
        mut live: impl FnMut(Millis, Rank, QueueEntry) -> bool,
    ) -> Option<(Millis, Rank, QueueEntry)> {
        let mut first = self.windows.first_entry()?;
        let key = *first.key();
        let window = first.get_mut();
        while let Some(Reverse((order, entry))) = window.pop() {
            if !live(key, order, entry) {
                continue;
            }
            window.live -= 1;
            self.len -= 1;
            if window.live == 0 {
                first.remove();
            }
            return Some((key, order, entry));
        }
        debug_assert!(false, "backoff window {key} counted entries its heap did not hold");
        let lost = window.live;
        first.remove();
        self.len -= lost;
        None
    }

    /// Moves every item to its order's new rank; a stale item whose rank no key held goes (its
    /// entry is no longer there to take).
    pub(super) fn renumber(&mut self, map: &Renumbering) {
        let moved = |Reverse((rank, entry)): Item| Some(Reverse((map.of(rank)?, entry)));
        for window in self.windows.values_mut() {
            // The mapping keeps the order: `sorted` stays sorted.
            window.sorted = std::mem::take(&mut window.sorted).into_iter().filter_map(moved).collect();
            window.fresh = std::mem::take(&mut window.fresh).into_iter().filter_map(moved).collect();
        }
    }

    /// Takes out the first window if `ready` says its key is done: its items (stale ones too,
    /// for the caller's `live` check) in no particular order.
    pub(super) fn take_first_if(&mut self, ready: impl FnOnce(Millis) -> bool) -> Option<(Millis, Vec<Item>)> {
        let first = self.windows.first_entry()?;
        if !ready(*first.key()) {
            return None;
        }
        let (key, window) = first.remove_entry();
        self.len -= window.live;
        Some((key, window.into_items()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use proptest::prelude::*;

    use super::*;
    use crate::cluster::PodId;

    /// A rank by priority, then entry.
    fn order(priority: i32, entry: u32) -> Rank {
        (priority as Rank) << 32 | Rank::from(entry)
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert { entry: u32, key: Millis, priority: i32 },
        Remove { entry: u32 },
        PopFirst,
        TakeFirst { upto: Millis },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u32..12, 0u64..4, 0i32..3).prop_map(|(entry, k, priority)| Op::Insert { entry, key: k * 1000, priority }),
            2 => (0u32..12).prop_map(|entry| Op::Remove { entry }),
            2 => Just(Op::PopFirst),
            1 => (0u64..4).prop_map(|k| Op::TakeFirst { upto: k * 1000 }),
        ]
    }

    proptest! {
        /// Against a sorted set of (key, order, entry) with eager removal: the same entries come
        /// out in the same order, the same length and first key after every step.
        #[test]
        fn pops_as_a_sorted_set_would(ops in prop::collection::vec(op(), 0..80)) {
            let mut queue = BackoffQueue::default();
            let mut model: BTreeSet<(Millis, Rank, QueueEntry)> = BTreeSet::new();
            // What the queue's info says of each entry in backoff: its key and order.
            let mut held: HashMap<QueueEntry, (Millis, Rank)> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert { entry, key, priority } => {
                        let o = order(priority, entry);
                        let entry = QueueEntry::Pod(PodId(entry));
                        if held.contains_key(&entry) { continue; }
                        queue.insert(key, o, entry);
                        model.insert((key, o, entry));
                        held.insert(entry, (key, o));
                    }
                    Op::Remove { entry } => {
                        let entry = QueueEntry::Pod(PodId(entry));
                        if let Some((key, o)) = held.remove(&entry) {
                            queue.forget(key);
                            model.remove(&(key, o, entry));
                        }
                    }
                    Op::PopFirst => {
                        let live = |k: Millis, o: Rank, e: QueueEntry| held.get(&e) == Some(&(k, o));
                        let got = queue.pop_first(live);
                        let want = model.pop_first();
                        prop_assert_eq!(&got, &want);
                        if let Some((_, _, e)) = got { held.remove(&e); }
                    }
                    Op::TakeFirst { upto } => {
                        let got = queue.take_first_if(|k| k <= upto);
                        let want_key = model.first().map(|(k, _, _)| *k).filter(|k| *k <= upto);
                        prop_assert_eq!(got.as_ref().map(|(k, _)| *k), want_key);
                        if let Some((key, items)) = got {
                            let mut live: Vec<QueueEntry> = items
                                .into_iter()
                                .filter(|Reverse((o, e))| held.get(e) == Some(&(key, *o)))
                                .map(|Reverse((_, e))| e)
                                .collect();
                            live.sort();
                            live.dedup();
                            let mut want: Vec<QueueEntry> = model.iter().filter(|(k, _, _)| *k == key).map(|(_, _, e)| *e).collect();
                            want.sort();
                            prop_assert_eq!(&live, &want);
                            model.retain(|(k, _, _)| *k != key);
                            for e in live { held.remove(&e); }
                        }
                    }
                }
                prop_assert_eq!(queue.len(), model.len());
                prop_assert_eq!(queue.first_key(), model.first().map(|(k, _, _)| *k));
            }
        }
    }
}
