//! Order keys as numbers: each [`OrderKey`] an entry in the queue holds gets a rank, a `u64`
//! whose order is the keys' order, so that the active queue's heap and the backoff windows
//! compare and move two words, not a priority, a time and a name (an entry woken by an event is
//! pushed, sorted and popped again every time).
//!
//! A key's rank is given when the first entry with it comes and kept while any entry holds it;
//! a new key is ranked between its neighbours. When two neighbours leave no room, every key is
//! ranked again, evenly spaced, and the caller moves its items to the new ranks (the mapping
//! keeps their order). Keys come mostly in order (a new pod sorts after the pods of its
//! priority that came before it), so a new key is ranked a fixed step after its predecessor:
//! appends do not halve the room, and renumbering is rare.
//!
//! Exact: among the keys held, ranks order as the keys do, and equal keys have equal ranks. A
//! rank freed with its key may be given to another key later; an item left stale with it then
//! looks like an item of the new key, which is what an entry removed and added back under the
//! same key leaves (the queue's check of an item's entry settles both alike).

use std::collections::BTreeMap;
use std::ops::Bound;

use super::OrderKey;

/// An order key's number.
pub(super) type Rank = u64;

/// How far after its predecessor a new key is ranked, room allowing.
const STEP: Rank = 1 << 32;

#[derive(Clone, Debug, Default)]
pub(super) struct Ranks {
    /// Each key held: its rank and how many entries hold it.
    keys: BTreeMap<OrderKey, (Rank, u32)>,
}

/// Every held key's old rank and its new one, by old rank ([`Ranks::hold`] renumbered).
pub(super) struct Renumbering(Vec<(Rank, Rank)>);

impl Renumbering {
    /// The new rank of an item ranked `old`; `None` when no key held `old` (a stale item).
    pub(super) fn of(&self, old: Rank) -> Option<Rank> {
        let i = self.0.binary_search_by_key(&old, |(o, _)| *o).ok()?;
        Some(self.0[i].1)
    }
}

impl Ranks {
    /// The rank of `order` for one more entry that holds it, and, when every key had to be
    /// ranked again to make room, how the ranks given before moved.
    pub(super) fn hold(&mut self, order: &OrderKey) -> (Rank, Option<Renumbering>) {
        if let Some((rank, holders)) = self.keys.get_mut(order) {
            *holders += 1;
            return (*rank, None);
        }
        if let Some(rank) = self.room(order) {
            self.keys.insert(order.clone(), (rank, 1));
            return (rank, None);
        }
        self.keys.insert(order.clone(), (0, 1));
        let renumbering = self.renumber();
        (self.keys[order].0, Some(renumbering))
    }

    /// One entry that held `order` left the queue.
    pub(super) fn release(&mut self, order: &OrderKey) {
        let Some((_, holders)) = self.keys.get_mut(order) else {
            debug_assert!(false, "released an order key no entry held");
            return;
        };
        *holders -= 1;
        if *holders == 0 {
            self.keys.remove(order);
        }
    }

    /// A free rank between `order`'s neighbours, if there is one.
    fn room(&self, order: &OrderKey) -> Option<Rank> {
        let before = self.keys.range(..order).next_back().map(|(_, (r, _))| *r);
        let after = self.keys.range((Bound::Excluded(order), Bound::Unbounded)).next().map(|(_, (r, _))| *r);
        // Ranks 0 and `Rank::MAX` are never given: the ends are free of keys.
        let (low, high) = (before.unwrap_or(0), after.unwrap_or(Rank::MAX));
        let gap = high - low;
        (gap >= 2).then(|| low + (gap / 2).min(STEP))
    }

    /// Ranks every key again, evenly spaced in order; the key just added (rank 0) maps from
    /// nothing.
    fn renumber(&mut self) -> Renumbering {
        let spacing = Rank::MAX / (self.keys.len() as Rank + 1);
        let mut moves = Vec::with_capacity(self.keys.len());
        for (i, (rank, _)) in self.keys.values_mut().enumerate() {
            let new = spacing * (i as Rank + 1);
            if *rank != 0 {
                moves.push((*rank, new));
            }
            *rank = new;
        }
        Renumbering(moves)
    }

    /// How many distinct keys are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;

    use proptest::prelude::*;

    use super::*;

    fn key(priority: i32, name: &str) -> OrderKey {
        OrderKey { priority: Reverse(priority), created: None, key: name.into() }
    }

    #[test]
    fn appended_keys_are_never_renumbered_and_keys_put_before_the_last_one_eventually_are() {
        let mut ranks = Ranks::default();
        let mut last = 0;
        for i in 0..10_000 {
            let (rank, renumbered) = ranks.hold(&key(0, &format!("p{i:05}")));
            assert!(renumbered.is_none(), "append {i} renumbered");
            assert!(rank > last);
            last = rank;
        }
        let renumbered = (0..200).rev().filter(|i| ranks.hold(&key(-1, &format!("q{i:05}"))).1.is_some()).count();
        assert!(renumbered >= 1, "200 keys each put before the last ran out of room");
        assert_eq!(ranks.len(), 10_200);
    }

    proptest! {
        /// After any holds and releases, ranks order as the keys held do; a renumbering maps
        /// every earlier rank of a held key to its new one.
        #[test]
        fn ranks_follow_the_keys(ops in prop::collection::vec((any::<bool>(), 0i32..3, 0u8..40), 0..300)) {
            let mut ranks = Ranks::default();
            let mut held: BTreeMap<OrderKey, (Rank, u32)> = BTreeMap::new();
            for (add, priority, name) in ops {
                let k = key(priority, &format!("n{name}"));
                if add || !held.contains_key(&k) {
                    let (rank, renumbered) = ranks.hold(&k);
                    if let Some(map) = renumbered {
                        for (r, _) in held.values_mut() {
                            *r = map.of(*r).expect("a held key's rank maps");
                        }
                    }
                    let e = held.entry(k).or_insert((rank, 0));
                    prop_assert_eq!(e.0, rank);
                    e.1 += 1;
                } else {
                    ranks.release(&k);
                    let e = held.get_mut(&k).expect("checked");
                    e.1 -= 1;
                    if e.1 == 0 { held.remove(&k); }
                }
                let in_order: Vec<Rank> = held.values().map(|(r, _)| *r).collect();
                prop_assert!(in_order.windows(2).all(|w| w[0] < w[1]), "ranks out of key order: {:?}", in_order);
                prop_assert_eq!(ranks.len(), held.len());
            }
        }
    }
}
