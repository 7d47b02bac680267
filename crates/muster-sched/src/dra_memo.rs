//! The DynamicResources Filter's memory: the allocator's verdict per (claim-spec fingerprint,
//! node), valid while the node's device generation and the shared-pool generation are the ones
//! it was computed for.
//!
//! Pods whose claims come from one template share a fingerprint, so the second such pod asks
//! the allocator only about the node the first one changed. One dense table per fingerprint
//! (indexed by node) keeps the per-node lookup to an array index; at most [`MAX_TABLES`] tables
//! are kept, the oldest replaced first, so a plan with thousands of distinct claim specs stays
//! small. A forgotten verdict is only computed again: the allocator is deterministic. An error
//! verdict is stored (the cycle reads it back) but the scheduler does not reuse it for another pod:
//! its text names the claims of the pod it was computed for.
//!
//! A verdict also holds whenever the node's devices are again in the state it was computed in:
//! the same slices and Node (the node's device epoch), the same devices of its own pools held,
//! and only held whole ([`muster_alloc::AllocatedState::held_bits`]), the same shared pools. So
//! each verdict is also kept under that [`HeldKey`], set aside beside the slot (up to [`KEEP`]
//! per node and table, the most recently used kept), and read back from there when the slot's
//! generations have moved on but the devices are as they were.

use crate::cluster::NodeId;
use crate::plugins::dynamic_resources::Verdict;

/// How many fingerprints keep a table at once.
const MAX_TABLES: usize = 32;

/// How many verdicts per node and table are kept under their held state.
const KEEP: usize = 3;

/// What the generations were when a verdict was computed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Generations {
    pub node: u64,
    pub shared: u64,
}

struct Slot {
    at: Generations,
    verdict: Option<Verdict>,
}

/// The state of a node's devices a verdict was computed in: the node's device epoch (moved by
/// any change of its slices or of the Node), the bits of its own devices held, and the shared
/// pools' generation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct HeldKey {
    pub epoch: u64,
    pub bits: u128,
    pub shared: u64,
}

/// Verdicts kept under their held state beside a slot, most recently used first (kept apart so
/// that the slots a Filter walk reads stay small).
type Aside = Vec<(HeldKey, Verdict)>;

impl Slot {
    const EMPTY: Slot = Slot { at: Generations { node: 0, shared: 0 }, verdict: None };
}

/// One fingerprint's table: its slots and what is set aside, per node.
struct Table {
    fingerprint: u64,
    slots: Vec<Slot>,
    aside: Vec<Aside>,
}

/// See the module documentation.
pub struct DraMemo {
    /// False: verdicts are stored (callers read them back) but never reused.
    reuse: bool,
    nodes: usize,
    tables: Vec<Table>,
    /// The table replaced next when all [`MAX_TABLES`] are in use.
    next_victim: usize,
    /// Verdicts stored (each one computed by the allocator), and verdicts read back from aside.
    pub counts: MemoCounts,
}

/// What a [`DraMemo`] saw, for benchmarks and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoCounts {
    /// Verdicts stored: each one the allocator computed.
    pub computed: u64,
    /// Verdicts read back by their held state (the node's generations had moved on).
    pub read_from_aside: u64,
}

impl DraMemo {
    pub fn new(nodes: usize) -> Self {
        DraMemo { reuse: true, nodes, tables: Vec::new(), next_victim: 0, counts: MemoCounts::default() }
    }

    /// Forgets every verdict and sizes the tables for `nodes` nodes (the store added nodes).
    pub fn resize(&mut self, nodes: usize) {
        self.nodes = nodes;
        self.tables.clear();
        self.next_victim = 0;
    }

    /// Never reuse a verdict (tests compare plans with and without the memo).
    pub fn disable_reuse(&mut self) {
        self.reuse = false;
    }

    /// Whether verdicts are reused (else a held state need not be named).
    pub fn reuses(&self) -> bool {
        self.reuse
    }

    /// The table for `fingerprint`, made (or taken over from the oldest) when missing.
    pub fn table(&mut self, fingerprint: u64) -> usize {
        if let Some(i) = self.tables.iter().position(|t| t.fingerprint == fingerprint) {
            return i;
        }
        let nodes = self.nodes;
        let empty = || Table {
            fingerprint,
            slots: (0..nodes).map(|_| Slot::EMPTY).collect(),
            aside: (0..nodes).map(|_| Aside::new()).collect(),
        };
        if self.tables.len() < MAX_TABLES {
            self.tables.push(empty());
            return self.tables.len() - 1;
        }
        let i = self.next_victim;
        self.next_victim = (self.next_victim + 1) % MAX_TABLES;
        let t = &mut self.tables[i];
        t.fingerprint = fingerprint;
        t.slots.iter_mut().for_each(|s| *s = Slot::EMPTY);
        t.aside.iter_mut().for_each(Vec::clear);
        i
    }

    /// The remembered verdict, if it was computed at `at`.
    pub fn get(&self, table: usize, node: NodeId, at: Generations) -> Option<&Verdict> {
        let slot = &self.tables[table].slots[node.0 as usize];
        slot.verdict.as_ref().filter(|_| self.reuse && slot.at == at)
    }

    /// The verdict kept for the node's devices in state `held`, if any: it becomes the slot's,
    /// at `at`.
    pub fn get_held(&mut self, table: usize, node: NodeId, held: HeldKey, at: Generations) -> Option<&Verdict> {
        if !self.reuse {
            return None;
        }
        let t = &mut self.tables[table];
        let (slot, aside) = (&mut t.slots[node.0 as usize], &mut t.aside[node.0 as usize]);
        let i = aside.iter().position(|(k, _)| *k == held)?;
        aside[..=i].rotate_right(1);
        (slot.at, slot.verdict) = (at, Some(aside[0].1.clone()));
        self.counts.read_from_aside += 1;
        slot.verdict.as_ref()
    }

    /// Remember `verdict` for `at`, and, unless it is an error, for the state `held` of the node's
    /// devices; hand it back.
    pub fn put(
        &mut self,
        table: usize,
        node: NodeId,
        at: Generations,
        held: Option<HeldKey>,
        verdict: Verdict,
    ) -> &Verdict {
        self.counts.computed += 1;
        let t = &mut self.tables[table];
        let (slot, aside) = (&mut t.slots[node.0 as usize], &mut t.aside[node.0 as usize]);
        if self.reuse
            && let Some(key) = held
            && verdict.is_ok()
        {
            aside.insert(0, (key, verdict.clone()));
            aside.truncate(KEEP);
        }
        slot.at = at;
        slot.verdict.insert(verdict)
    }

    /// Take the verdict out (Reserve is about to make it stale; a copy kept under its held state
    /// stays).
    pub fn take(&mut self, table: usize, node: NodeId) -> Option<Verdict> {
        self.tables[table].slots[node.0 as usize].verdict.take()
    }

    /// The verdict last stored, whatever its generations.
    pub fn last(&self, table: usize, node: NodeId) -> Option<&Verdict> {
        self.tables[table].slots[node.0 as usize].verdict.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Verdict {
        Ok(Ok(Default::default()))
    }

    #[test]
    fn a_verdict_is_reused_only_at_its_generations() {
        let mut m = DraMemo::new(3);
        let t = m.table(7);
        let at = Generations { node: 1, shared: 2 };
        m.put(t, NodeId(1), at, None, ok());
        assert!(m.get(t, NodeId(1), at).is_some());
        assert!(m.get(t, NodeId(1), Generations { node: 3, shared: 2 }).is_none());
        assert!(m.get(t, NodeId(1), Generations { node: 1, shared: 4 }).is_none());
        assert!(m.get(t, NodeId(0), at).is_none());
        assert_eq!(m.table(7), t);
    }

    #[test]
    fn without_reuse_nothing_is_read_back_but_the_last_verdict_is_kept() {
        let mut m = DraMemo::new(1);
        m.disable_reuse();
        let t = m.table(1);
        let at = Generations { node: 0, shared: 0 };
        m.put(t, NodeId(0), at, None, ok());
        assert!(m.get(t, NodeId(0), at).is_none());
        assert!(m.last(t, NodeId(0)).is_some());
    }

    #[test]
    fn a_verdict_comes_back_for_its_held_state_the_least_recently_used_dropped() {
        let mut m = DraMemo::new(1);
        let t = m.table(1);
        let at = |node: u64| Generations { node, shared: 0 };
        let held = |bits: u128| HeldKey { epoch: 0, bits, shared: 0 };
        let busy = || Ok(Err(crate::framework::Rejection::new("DynamicResources", true, "busy")));
        m.put(t, NodeId(0), at(5), Some(held(0)), ok());
        m.put(t, NodeId(0), at(6), Some(held(1)), busy());
        assert!(m.get(t, NodeId(0), at(5)).is_none(), "the slot is at generation 6");
        let back = m.get_held(t, NodeId(0), held(0), at(7));
        assert!(back.is_some_and(|v| matches!(v, Ok(Ok(_)))), "the verdict for nothing held");
        assert!(m.get(t, NodeId(0), at(7)).is_some(), "and it is the slot's, at generation 7");
        assert!(m.get_held(t, NodeId(0), held(1), at(8)).is_some());
        assert!(m.get_held(t, NodeId(0), HeldKey { epoch: 1, ..held(1) }, at(8)).is_none(), "another epoch");
        assert!(m.get_held(t, NodeId(0), HeldKey { shared: 1, ..held(1) }, at(8)).is_none(), "shared pools moved");
        assert_eq!(m.counts, MemoCounts { computed: 2, read_from_aside: 2 });
        // Errors are not kept; three more states push out the least recently used (held 0).
        m.put(t, NodeId(0), at(9), Some(held(9)), Err("CEL budget".into()));
        for b in 2..=4 {
            m.put(t, NodeId(0), at(10 + b as u64), Some(held(b)), ok());
        }
        assert!(m.get_held(t, NodeId(0), held(9), at(20)).is_none());
        assert!(m.get_held(t, NodeId(0), held(1), at(20)).is_none(), "{KEEP} kept: 2, 3, 4");
        for b in 2..=4 {
            assert!(m.get_held(t, NodeId(0), held(b), at(20)).is_some(), "held {b}");
        }
        // Reserve takes the slot's verdict; the one kept under its held state stays.
        assert!(m.take(t, NodeId(0)).is_some());
        assert!(m.get_held(t, NodeId(0), held(4), at(21)).is_some());
    }

    #[test]
    fn the_oldest_table_is_replaced_and_forgets_its_verdicts() {
        let mut m = DraMemo::new(1);
        let at = Generations { node: 0, shared: 0 };
        let first = m.table(0);
        m.put(first, NodeId(0), at, None, ok());
        for f in 1..MAX_TABLES as u64 {
            m.table(f);
        }
        assert_eq!(m.tables.len(), MAX_TABLES);
        let replaced = m.table(999);
        assert_eq!(replaced, first);
        assert!(m.get(replaced, NodeId(0), at).is_none());
        assert_eq!(m.table(999), replaced);
    }
}
