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

/// See the module documentation.
pub struct DraMemo {
    /// False: verdicts are stored (callers read them back) but never reused.
    reuse: bool,
    nodes: usize,
    tables: Vec<(u64, Vec<Slot>)>,
    /// The table replaced next when all [`MAX_TABLES`] are in use.
    next_victim: usize,
}

impl DraMemo {
    pub fn new(nodes: usize) -> Self {
        DraMemo { reuse: true, nodes, tables: Vec::new(), next_victim: 0 }
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
        if let Some(i) = self.tables.iter().position(|(f, _)| *f == fingerprint) {
            return i;
        }
        let empty =
            || (0..self.nodes).map(|_| Slot { at: Generations { node: 0, shared: 0 }, verdict: None }).collect();
        if self.tables.len() < MAX_TABLES {
            self.tables.push((fingerprint, empty()));
            return self.tables.len() - 1;
        }
        let i = self.next_victim;
        self.next_victim = (self.next_victim + 1) % MAX_TABLES;
        let (f, slots) = &mut self.tables[i];
        *f = fingerprint;
        for s in slots.iter_mut() {
            s.verdict = None;
        }
        i
    }

    /// The remembered verdict, if it was computed at `at`.
    pub fn get(&self, table: usize, node: NodeId, at: Generations) -> Option<&Verdict> {
        if !self.reuse {
            return None;
        }
        let slot = &self.tables[table].1[node.0 as usize];
        slot.verdict.as_ref().filter(|_| slot.at == at)
    }

    /// Remember `verdict` for `at` and hand it back.
    pub fn put(&mut self, table: usize, node: NodeId, at: Generations, verdict: Verdict) -> &Verdict {
        let slot = &mut self.tables[table].1[node.0 as usize];
        slot.at = at;
        slot.verdict.insert(verdict)
    }

    /// Take the verdict out (Reserve is about to make it stale).
    pub fn take(&mut self, table: usize, node: NodeId) -> Option<Verdict> {
        self.tables[table].1[node.0 as usize].verdict.take()
    }

    /// The verdict last stored, whatever its generations.
    pub fn last(&self, table: usize, node: NodeId) -> Option<&Verdict> {
        self.tables[table].1[node.0 as usize].verdict.as_ref()
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
        m.put(t, NodeId(1), at, ok());
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
        m.put(t, NodeId(0), at, ok());
        assert!(m.get(t, NodeId(0), at).is_none());
        assert!(m.last(t, NodeId(0)).is_some());
    }

    #[test]
    fn the_oldest_table_is_replaced_and_forgets_its_verdicts() {
        let mut m = DraMemo::new(1);
        let at = Generations { node: 0, shared: 0 };
        let first = m.table(0);
        m.put(first, NodeId(0), at, ok());
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
