//! Order keys as numbers: each [`OrderKey`] an entry in the queue holds gets a rank, a `u64`
//! whose order is the keys' order, so that the active queue's heap and the backoff windows
//! compare and move two words, not a priority, a time and a name (an entry woken by an event is
//! pushed, sorted and popped again every time).
//!
//! A key's rank is given when the first entry with it comes and kept while any entry holds it
//! (an entry lets go by its rank; keys no entry holds are dropped in bulk, later). A new key is
//! ranked between its neighbours. When two neighbours leave no room, every key is ranked again,
//! evenly spaced, and the caller moves its items to the new ranks (the mapping keeps their
//! order). Keys come mostly in order (a new pod sorts after the pods of its priority that came
//! before it), so a new key is ranked a fixed step after its predecessor: appends do not halve
//! the room, and renumbering is rare. A snapshot's entries, in no particular order, are ranked
//! together in one pass ([`Ranks::hold_all`]).
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

/// Keys no entry holds are dropped once there are this many, and more than keys held.
const DEAD_KEYS: usize = 1 << 10;

#[derive(Clone, Debug, Default)]
pub(super) struct Ranks {
    /// Each key held, and keys held before and not dropped yet: its rank.
    keys: BTreeMap<OrderKey, Rank>,
    /// How many entries hold each rank; a rank no entry holds is absent. An entry lets go of
    /// its key by its rank, without a search by key.
    holders: foldhash::HashMap<Rank, u32>,
}

/// Each key's old rank and its new one, by old rank, after every key was ranked anew.
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
        let (rank, renumbering) = match self.after_last(order) {
            Some(rank) => (self.insert(order, rank), None),
            None => match self.keys.get(order) {
                Some(rank) => (*rank, None),
                None => match self.room(order) {
                    Some(rank) => (self.insert(order, rank), None),
                    None => {
                        let renumbering = self.renumber_with(order.clone());
                        (self.keys[order], Some(renumbering))
                    }
                },
            },
        };
        *self.holders.entry(rank).or_default() += 1;
        (rank, renumbering)
    }

    /// The rank of a key past the last one (most new pods: one comparison finds the place), if
    /// there is room after the last; what [`Ranks::room`] would give.
    fn after_last(&self, order: &OrderKey) -> Option<Rank> {
        let Some((last, r)) = self.keys.last_key_value() else { return Some(STEP) };
        let rank = (last < order && Rank::MAX - r >= 2).then(|| r + ((Rank::MAX - r) / 2).min(STEP));
        debug_assert!(rank.is_none_or(|rank| Some(rank) == self.room(order)));
        rank
    }

    fn insert(&mut self, order: &OrderKey, rank: Rank) -> Rank {
        self.keys.insert(order.clone(), rank);
        rank
    }

    /// [`Ranks::hold`] for many entries at once (a snapshot's pending entries, in no particular
    /// order): every key is ranked anew in one pass rather than each between its neighbours.
    /// Their ranks, in the order given, and how the ranks given before moved.
    pub(super) fn hold_all(&mut self, orders: &[&OrderKey]) -> (Vec<Rank>, Renumbering) {
        let mut by_key: Vec<usize> = (0..orders.len()).collect();
        by_key.sort_by(|a, b| orders[*a].cmp(orders[*b]));
        // The keys known and the new ones merged in order, each new one with the orders that
        // name it; every key is then ranked by its place.
        let known = std::mem::take(&mut self.keys);
        let mut merged: Vec<(OrderKey, Rank)> = Vec::with_capacity(known.len() + orders.len());
        let mut place = vec![0usize; orders.len()];
        let mut known = known.into_iter().peekable();
        for i in by_key {
            let order = orders[i];
            while let Some(k) = known.next_if(|(k, _)| k < order) {
                merged.push(k);
            }
            match (known.next_if(|(k, _)| k == order), merged.last()) {
                (Some(k), _) => merged.push(k),
                (None, Some((last, _))) if last == order => {}
                (None, _) => merged.push((order.clone(), 0)),
            }
            place[i] = merged.len() - 1;
        }
        merged.extend(known);
        let (renumbering, spacing) = self.install(merged);
        let ranks: Vec<Rank> = place.into_iter().map(|p| spacing * (p as Rank + 1)).collect();
        for rank in &ranks {
            *self.holders.entry(*rank).or_default() += 1;
        }
        (ranks, renumbering)
    }

    /// One entry that held the key ranked `rank` left the queue.
    pub(super) fn release(&mut self, rank: Rank) {
        let Some(holders) = self.holders.get_mut(&rank) else {
            debug_assert!(false, "released rank {rank}, which no entry held");
            return;
        };
        *holders -= 1;
        if *holders == 0 {
            self.holders.remove(&rank);
            let dead = self.keys.len() - self.holders.len();
            if dead >= DEAD_KEYS && dead > self.holders.len() {
                // Ranks stay as they are: dropping keys leaves the others in order.
                self.keys.retain(|_, r| self.holders.contains_key(r));
            }
        }
    }

    /// A free rank between `order`'s neighbours, if there is one.
    fn room(&self, order: &OrderKey) -> Option<Rank> {
        let before = self.keys.range(..order).next_back().map(|(_, r)| *r);
        let after = self.keys.range((Bound::Excluded(order), Bound::Unbounded)).next().map(|(_, r)| *r);
        // Ranks 0 and `Rank::MAX` are never given: the ends are free of keys.
        let (low, high) = (before.unwrap_or(0), after.unwrap_or(Rank::MAX));
        let gap = high - low;
        (gap >= 2).then(|| low + (gap / 2).min(STEP))
    }

    /// Drops the keys no entry holds, adds `new` (a key not among them, ranked 0: it maps from
    /// nothing), and ranks every key again, evenly spaced in order.
    fn renumber_with(&mut self, new: OrderKey) -> Renumbering {
        let held = |r: &Rank| self.holders.contains_key(r);
        let mut keys: Vec<(OrderKey, Rank)> =
            std::mem::take(&mut self.keys).into_iter().filter(|(_, r)| held(r)).collect();
        let at = keys.partition_point(|(k, _)| *k < new);
        keys.insert(at, (new, 0));
        self.install(keys).0
    }

    /// Takes `keys` (sorted, distinct; a new one ranked 0) as the keys, each ranked by its place,
    /// evenly spaced; how the ranks held before moved, and the spacing.
    fn install(&mut self, mut keys: Vec<(OrderKey, Rank)>) -> (Renumbering, Rank) {
        let spacing = Rank::MAX / (keys.len() as Rank + 1);
        let mut moves = Vec::with_capacity(self.holders.len());
        for (i, (_, rank)) in keys.iter_mut().enumerate() {
            let old = std::mem::replace(rank, spacing * (i as Rank + 1));
            if old != 0 {
                moves.push((old, *rank));
            }
        }
        let holders = std::mem::take(&mut self.holders);
        self.holders = moves.iter().filter_map(|(old, new)| Some((*new, *holders.get(old)?))).collect();
        // Sorted input: the map is built in one pass.
        self.keys = keys.into_iter().collect();
        (Renumbering(moves), spacing)
    }

    /// How many distinct keys are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.holders.len()
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

    /// The model's ranks after a renumbering.
    fn follow(held: &mut BTreeMap<OrderKey, (Rank, u32)>, map: &Renumbering) {
        for (r, _) in held.values_mut() {
            *r = map.of(*r).expect("a held key's rank maps");
        }
    }

    proptest! {
        /// After any holds (one at a time or in batches) and releases, ranks order as the keys
        /// held do and equal keys share one; a renumbering maps every earlier rank of a held key
        /// to its new one.
        #[test]
        fn ranks_follow_the_keys(ops in prop::collection::vec((0u8..4, 0i32..3, 0u8..40), 0..300)) {
            let mut ranks = Ranks::default();
            let mut held: BTreeMap<OrderKey, (Rank, u32)> = BTreeMap::new();
            for (kind, priority, name) in ops {
                let k = key(priority, &format!("n{name}"));
                match kind {
                    // A batch of a few keys, some of them twice.
                    0 => {
                        let batch: Vec<OrderKey> = (0..5u8).map(|i| key((priority + i32::from(i)) % 3, &format!("n{}", (name + 7 * i) % 40))).collect();
                        let orders: Vec<&OrderKey> = batch.iter().chain(batch.iter().take(2)).collect();
                        let (got, map) = ranks.hold_all(&orders);
                        follow(&mut held, &map);
                        for (o, rank) in orders.into_iter().zip(got) {
                            let e = held.entry(o.clone()).or_insert((rank, 0));
                            prop_assert_eq!(e.0, rank);
                            e.1 += 1;
                        }
                    }
                    1 if held.contains_key(&k) => {
                        ranks.release(held[&k].0);
                        let e = held.get_mut(&k).expect("checked");
                        e.1 -= 1;
                        if e.1 == 0 { held.remove(&k); }
                    }
                    _ => {
                        let (rank, renumbered) = ranks.hold(&k);
                        if let Some(map) = renumbered {
                            follow(&mut held, &map);
                        }
                        let e = held.entry(k).or_insert((rank, 0));
                        prop_assert_eq!(e.0, rank);
                        e.1 += 1;
                    }
                }
                let in_order: Vec<Rank> = held.values().map(|(r, _)| *r).collect();
                prop_assert!(in_order.windows(2).all(|w| w[0] < w[1]), "ranks out of key order: {:?}", in_order);
                prop_assert_eq!(ranks.len(), held.len());
            }
        }
    }
}
