//! The nodes whose generations moved, in order [beyond upstream; an optimization that changes no
//! decision]: what lets a waiting pod's kept verdict ([`crate::cycle`]'s `kept_verdicts`) look at
//! the few nodes that changed since it was last brought up to date instead of every node.
//!
//! Every change of a node's generation (its pods and requests: `NodeInfo::account`, an assumed
//! pod's Reserve and Unreserve, a victim's eviction and restore) and of its DRA generation (its
//! devices taken or freed) is noted here, with the node; the store's and the scheduler's code that
//! writes them notes it in the same step. A change of a node itself (added, updated, deleted) or
//! of the DRA inputs forgets every kept verdict, and is noted too. Debug builds check, for every
//! verdict read through the journal, that each node it does not list still has the generations
//! the verdict holds.
//!
//! Bounded: at [`NodeJournal::CAPACITY`] entries the journal drops its older half (a move of a
//! few kilobytes), and a verdict older than what it keeps reads every node once (as without the
//! journal). Dropping all of them instead would send every reader back to every node at once,
//! at each restart; with gangs' trial placements noting two entries per member, that was often.

use crate::cluster::NodeId;

/// Nodes whose generations moved, each noted at its change (a node may appear many times).
#[derive(Clone, Debug, Default)]
pub struct NodeJournal {
    /// The position of `log[0]`: entries before it were dropped.
    start: u64,
    log: Vec<NodeId>,
}

impl NodeJournal {
    /// At most this many entries are kept.
    pub const CAPACITY: usize = 1 << 13;

    /// The position a reader takes now: [`NodeJournal::since`] it lists what is noted later.
    pub fn now(&self) -> u64 {
        self.start + self.log.len() as u64
    }

    /// `node`'s generation or DRA generation moved.
    pub fn note(&mut self, node: NodeId) {
        if self.log.len() >= Self::CAPACITY {
            let dropped = self.log.len() / 2;
            self.start += dropped as u64;
            self.log.drain(..dropped);
        }
        self.log.push(node);
    }

    /// The nodes noted since position `at` (with repeats), or `None` when some were dropped.
    pub fn since(&self, at: u64) -> Option<&[NodeId]> {
        let from = at.checked_sub(self.start)?;
        self.log.get(from as usize..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_what_was_noted_since_a_position_until_its_half_is_dropped() {
        let mut j = NodeJournal::default();
        let at = j.now();
        j.note(NodeId(3));
        j.note(NodeId(1));
        assert_eq!(j.since(at), Some(&[NodeId(3), NodeId(1)][..]));
        assert_eq!(j.since(j.now()), Some(&[][..]));
        let recent = j.now() + NodeJournal::CAPACITY as u64 / 2;
        for i in 0..NodeJournal::CAPACITY {
            j.note(NodeId(i as u32));
        }
        assert_eq!(j.since(at), None, "the older half is gone");
        let kept = j.since(recent).expect("the newer half is kept");
        assert_eq!(kept.len(), NodeJournal::CAPACITY / 2);
        assert_eq!(kept.first(), Some(&NodeId(NodeJournal::CAPACITY as u32 / 2)));
        let later = j.now();
        j.note(NodeId(7));
        assert_eq!(j.since(later), Some(&[NodeId(7)][..]));
    }
}
