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
//! A node whose own pools hold nothing takes its free generation each time it is free again
//! (`Scheduler::dra_generation_after_release`): its verdicts at that generation hold every time.
//! A verdict computed at a free generation is moved aside, not dropped, when a verdict at another
//! generation replaces it, and read back from there (one aside per node and table).

use crate::cluster::NodeId;
use crate::plugins::dynamic_resources::Verdict;

/// How many fingerprints keep a table at once.
const MAX_TABLES: usize = 32;

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

/// Beside each slot, read only when its generations do not match or a verdict is stored (kept
/// apart so that the slots a Filter walk reads stay small).
#[derive(Default)]
struct Aside {
    /// The slot's `at` is the node's free generation.
    free: bool,
    /// The last verdict computed at a free generation, when another replaced it: (its
    /// generations, whether they were a free generation, the verdict).
    kept: Option<Box<(Generations, bool, Verdict)>>,
}

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
    /// Verdicts read back from aside (computed at a free generation, replaced since).
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

    /// The table for `fingerprint`, made (or taken over from the oldest) when missing.
    pub fn table(&mut self, fingerprint: u64) -> usize {
        if let Some(i) = self.tables.iter().position(|t| t.fingerprint == fingerprint) {
            return i;
        }
        let nodes = self.nodes;
        let empty = || Table {
            fingerprint,
            slots: (0..nodes).map(|_| Slot::EMPTY).collect(),
            aside: (0..nodes).map(|_| Aside::default()).collect(),
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
        t.aside.iter_mut().for_each(|a| *a = Aside::default());
        i
    }

    /// The remembered verdict, if it was computed at `at` (one set aside comes back as the last
    /// verdict).
    pub fn get(&mut self, table: usize, node: NodeId, at: Generations) -> Option<&Verdict> {
        if !self.reuse {
            return None;
        }
        let t = &mut self.tables[table];
        let (slot, aside) = (&mut t.slots[node.0 as usize], &mut t.aside[node.0 as usize]);
        if slot.at != at && aside.kept.as_ref().is_some_and(|k| k.0 == at) {
            let (was_at, was_free, was) = (slot.at, aside.free, slot.verdict.take());
            let kept = *aside.kept.take().expect("checked just above");
            (slot.at, aside.free, slot.verdict) = (kept.0, kept.1, Some(kept.2));
            aside.kept = was.map(|v| Box::new((was_at, was_free, v)));
            self.counts.read_from_aside += 1;
        }
        slot.verdict.as_ref().filter(|_| slot.at == at)
    }

    /// Remember `verdict` for `at` (`free`: the node's free generation) and hand it back.
    pub fn put(&mut self, table: usize, node: NodeId, at: Generations, free: bool, verdict: Verdict) -> &Verdict {
        self.counts.computed += 1;
        let t = &mut self.tables[table];
        let (slot, aside) = (&mut t.slots[node.0 as usize], &mut t.aside[node.0 as usize]);
        if aside.free
            && slot.at != at
            && let Some(v) = slot.verdict.take()
        {
            aside.kept = Some(Box::new((slot.at, true, v)));
        }
        (slot.at, aside.free) = (at, free);
        slot.verdict.insert(verdict)
    }

    /// Take the verdict out (Reserve is about to make it stale), or a copy of one computed at
    /// a free generation (it holds again when the node is free again).
    pub fn take_unless_free(&mut self, table: usize, node: NodeId) -> Option<Verdict> {
        let t = &mut self.tables[table];
        let slot = &mut t.slots[node.0 as usize];
        if t.aside[node.0 as usize].free { slot.verdict.clone() } else { slot.verdict.take() }
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
        m.put(t, NodeId(1), at, false, ok());
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
        m.put(t, NodeId(0), at, false, ok());
        assert!(m.get(t, NodeId(0), at).is_none());
        assert!(m.last(t, NodeId(0)).is_some());
    }

    #[test]
    fn a_free_verdict_replaced_by_another_comes_back_at_its_generation() {
        let mut m = DraMemo::new(1);
        let t = m.table(1);
        let (free, busy, other) = (
            Generations { node: 5, shared: 0 },
            Generations { node: 6, shared: 0 },
            Generations { node: 7, shared: 0 },
        );
        m.put(t, NodeId(0), free, true, ok());
        m.put(t, NodeId(0), busy, false, Ok(Err(crate::framework::Rejection::new("DynamicResources", true, "busy"))));
        assert!(m.get(t, NodeId(0), busy).is_some_and(|v| matches!(v, Ok(Err(_)))));
        assert!(m.get(t, NodeId(0), free).is_some_and(|v| matches!(v, Ok(Ok(_)))), "the free verdict was set aside");
        assert!(matches!(m.last(t, NodeId(0)), Some(Ok(Ok(_)))), "and is the last verdict again");
        assert!(m.get(t, NodeId(0), busy).is_some(), "the busy one is aside now, still valid at its generation");
        // A verdict not at a free generation is replaced, not set aside.
        m.put(t, NodeId(0), other, false, ok());
        m.put(t, NodeId(0), free, true, ok());
        assert!(m.get(t, NodeId(0), other).is_none());
    }

    #[test]
    fn the_oldest_table_is_replaced_and_forgets_its_verdicts() {
        let mut m = DraMemo::new(1);
        let at = Generations { node: 0, shared: 0 };
        let first = m.table(0);
        m.put(first, NodeId(0), at, true, ok());
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
