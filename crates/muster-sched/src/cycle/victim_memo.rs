//! What classic preemption found on each node for a class of equivalent pods, kept while the node
//! does not change [beyond upstream; an optimization that changes no decision].
//!
//! Why: DefaultPreemption tries up to `numCandidates` nodes (100 of 1,000) for a pod that fits
//! nowhere: on each it takes every pod of lower priority out of the snapshot, tries the pod, and
//! reprieves the victims one by one with a trial each. When pods of one kind preempt one after
//! another, each preemption changes one node, and the next pod of the kind would try the others
//! again and find what the first found.
//!
//! What is kept: per class of equivalent pods ([`super::equivalence::Signature`]) and node, the
//! node's generations, the shared-pool generation, and what was found there: the victims the pod
//! needs gone, or that evicting every pod of lower priority is not enough.
//!
//! Why it is exact: `selectVictimsOnNode` reads the pod (pods of one class are judged alike by
//! every Filter plugin and by DefaultPreemption), the node's pods and devices (its generations
//! move with every change of them, and a trial's evictions put them back as they were), the
//! shared pools (their generation), and the PodDisruptionBudgets: findings are used only while the
//! cluster has none. Its trials must not look past the node: only a pod whose Filter verdicts
//! depend on each node alone (no PodTopologySpread or InterPodAffinity constraint, no volumes,
//! outside any PodGroup) uses them. Debug builds check every finding reused against a new one.

use super::equivalence::Signature;
use super::kept_verdicts::NodeGenerations;
use crate::cluster::{NodeId, PodId};

/// At most this many classes keep findings (the least recently used goes first).
const MAX_CLASSES: usize = 8;

/// What was found on one node, and the node's generations then.
#[derive(Clone)]
struct Finding {
    at: NodeGenerations,
    /// The victims (sorted); `None`: evicting every pod of lower priority is not enough.
    victims: Option<Vec<PodId>>,
}

struct ClassFindings {
    signature: Signature,
    /// The shared-pool generation the findings hold for.
    shared: u64,
    /// Per node slot.
    found: Vec<Option<Finding>>,
    used: u64,
}

/// See the module documentation.
#[derive(Default)]
pub(super) struct VictimMemo {
    classes: Vec<ClassFindings>,
    tick: u64,
}

impl VictimMemo {
    /// What was found on `node` for pods of `signature`, when its generations are still `now`
    /// and the shared pools' still `shared`: `Some(None)` when evicting every pod of lower
    /// priority was not enough.
    pub(super) fn get(
        &mut self,
        signature: &Signature,
        shared: u64,
        node: NodeId,
        now: NodeGenerations,
    ) -> Option<Option<&[PodId]>> {
        self.tick += 1;
        let class = self.classes.iter_mut().find(|c| c.signature == *signature && c.shared == shared)?;
        class.used = self.tick;
        let finding = class.found.get(node.0 as usize)?.as_ref().filter(|f| f.at == now)?;
        Some(finding.victims.as_deref())
    }

    /// Keeps what was found on `node` (its generations `now`, the shared pools' `shared`) for pods
    /// of `signature`, in a memo sized for `slots` nodes.
    pub(super) fn put(
        &mut self,
        (signature, shared): (&Signature, u64),
        (node, now, slots): (NodeId, NodeGenerations, usize),
        victims: Option<Vec<PodId>>,
    ) {
        let i = match self.classes.iter().position(|c| c.signature == *signature) {
            Some(i) => i,
            None if self.classes.len() < MAX_CLASSES => {
                self.classes.push(ClassFindings { signature: signature.clone(), shared, found: Vec::new(), used: 0 });
                self.classes.len() - 1
            }
            None => {
                let oldest = (0..self.classes.len()).min_by_key(|&i| self.classes[i].used).unwrap_or(0);
                self.classes[oldest] =
                    ClassFindings { signature: signature.clone(), shared, found: Vec::new(), used: 0 };
                oldest
            }
        };
        let class = &mut self.classes[i];
        if class.shared != shared {
            class.shared = shared;
            class.found.clear();
        }
        class.used = self.tick;
        if class.found.len() < slots {
            class.found.resize(slots, None);
        }
        if let Some(slot) = class.found.get_mut(node.0 as usize) {
            *slot = Some(Finding { at: now, victims });
        }
    }

    /// Nodes were added or removed: nothing kept holds.
    pub(super) fn clear(&mut self) {
        self.classes.clear();
    }
}
