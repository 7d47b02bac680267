//! A pod's last Filter verdict, kept while it fits nowhere [beyond upstream; an optimization that
//! changes no decision].
//!
//! Why: a pod that fits no node waits in the unschedulable pool and is tried again at every event
//! that could help it (a pod deleted anywhere, a claim deallocated): kube-scheduler filters every
//! node again each time, though the event changed one node. A world with hundreds of pods waiting
//! for a whole GPU node spends most of its time there.
//!
//! What is kept: for each node, its generation and its DRA generation when the pod was filtered
//! there, and the rejection it got. The next attempt takes a node whose generations did not move
//! as rejected again, with the same rejection, without running a Filter plugin; every other node
//! is filtered as usual. When every node filtered again is rejected as it was, the kept verdict
//! stands as it is; otherwise the verdict is built as the attempt always builds it. A verdict's
//! rejections are sorted (not in the order a start index met them), so either way it is the
//! verdict a full attempt would give. Debug builds check each node of a standing verdict against
//! the Filter plugins before DynamicResources (its allocator verdicts are not recomputed there:
//! that would spend the attempt's CEL budget).
//!
//! Why it is exact: a Filter plugin's answer on a node depends on the pod, the node (its
//! generation moves with every change of its labels, taints, pods and requests, and every node
//! change of the store empties the kept verdicts), the devices in use on it (its DRA generation,
//! and the shared-pool generation for devices of shared pools) and the pod's claims (their
//! fingerprint). Only attempts whose answers depend on nothing else are kept: a pod alone (not
//! in a PodGroup), no PodTopologySpread or InterPodAffinity constraint (those count pods on other
//! nodes), no volumes, no node or device restriction of a group cycle. A pod changed, deleted or
//! added by the store, or whose claim the store replaced, loses its kept verdict.
//!
//! Which nodes' generations moved since a verdict was last brought up to date is read from the
//! node journal ([`crate::node_journal`]) when it reaches back that far: only those nodes are
//! filtered again, and when each is rejected as it was, the verdict stands without a look at the
//! others (debug builds check every other node's generations). Otherwise, or when one of them
//! fits or is rejected otherwise, the attempt visits every node from the start index as above.
//! That first look spends a CEL budget of its own and leaves its allocator verdicts remembered,
//! so the walk that may follow spends no more of the attempt's budget than without it.
//!
//! A verdict also serves the pods equivalent to its pod ([`super::equivalence`]: judged alike by
//! every Filter plugin on any state), as the pods of one kind that wait together take turns.

use crate::cluster::{ClaimId, Cluster, NodeId, PodId};
use crate::framework::{FitError, Rejection};

/// At most this many pods' verdicts are kept (the oldest goes first): pods that wait long are
/// few kinds, and each kind's first pod is the one tried (the others get its verdict).
const MAX_KEPT: usize = 32;

/// A node's generations when it was filtered: the node's and its DRA generation.
pub(super) type NodeGenerations = (u64, u64);

/// Node `node`'s generations now (`dra`: the DRA generation per node slot; 0 for a slot past it).
pub(super) fn generations(c: &Cluster, dra: &[u64], node: NodeId) -> NodeGenerations {
    (c.node(node).generation, dra.get(node.0 as usize).copied().unwrap_or(0))
}

/// One pod's last verdict, with what it was computed against.
pub(super) struct KeptVerdict {
    pod: PodId,
    /// Whether the verdict serves pods equivalent to `pod` ([`super::equivalence`]): its claims
    /// were its own (unallocated, reserved for nobody).
    shareable: bool,
    /// The fingerprint of the pod's pending claims.
    claims: u64,
    /// The shared-pool DRA generation.
    shared: u64,
    /// Per node slot: its generations when filtered and its rejection (an index into
    /// `error.rejections`); `u16::MAX` for a node that was not filtered.
    seen: Vec<(u64, u64, u16)>,
    /// The node journal's position when `seen` last held every node's generations.
    at: u64,
    error: FitError,
}

impl KeptVerdict {
    /// The rejection `node` got, when its generations are still `now`.
    pub(super) fn rejection(&self, node: NodeId, now: NodeGenerations) -> Option<&Rejection> {
        let &(generation, dra, i) = self.seen.get(node.0 as usize)?;
        (i != u16::MAX && (generation, dra) == now).then(|| &self.error.rejections()[i as usize])
    }

    /// The rejection `node` got, whatever its generations now.
    pub(super) fn previous(&self, node: NodeId) -> Option<&Rejection> {
        let &(_, _, i) = self.seen.get(node.0 as usize)?;
        (i != u16::MAX).then(|| &self.error.rejections()[i as usize])
    }

    /// The nodes in `again` were filtered again and rejected as they were: their generations
    /// now are the ones the verdict holds for, as of the node journal's position `at`.
    pub(super) fn refresh(&mut self, again: &[NodeId], generations: impl Fn(NodeId) -> NodeGenerations, at: u64) {
        for &node in again {
            let (generation, dra) = generations(node);
            let seen = &mut self.seen[node.0 as usize];
            (seen.0, seen.1) = (generation, dra);
        }
        self.at = at;
    }

    /// The node journal's position as of which the verdict holds every node's generations.
    pub(super) fn at(&self) -> u64 {
        self.at
    }

    pub(super) fn error(&self) -> &FitError {
        &self.error
    }
}

/// The kept verdicts of one scheduler.
#[derive(Default)]
pub(super) struct KeptVerdicts {
    entries: Vec<KeptVerdict>,
    /// Scratch for building an entry's `seen`, reused.
    spare: Vec<(u64, u64, u16)>,
}

impl KeptVerdicts {
    /// `pod`'s kept verdict, or a pod's `equivalent` to it, taken out, when it was computed with
    /// the same claims and shared generation (otherwise it is dropped).
    pub(super) fn take(
        &mut self,
        pod: PodId,
        (claims, shared): (u64, u64),
        equivalent: impl Fn(PodId) -> bool,
    ) -> Option<KeptVerdict> {
        let i = match self.entries.iter().position(|e| e.pod == pod) {
            Some(i) => i,
            None => self.entries.iter().position(|e| e.shareable && e.claims == claims && equivalent(e.pod))?,
        };
        let kept = self.entries.remove(i);
        if kept.claims == claims && kept.shared == shared {
            return Some(kept);
        }
        self.spare = kept.seen;
        None
    }

    /// Keeps `error`, the verdict of `pod` over every node, with each node's generations
    /// (`generations`) as of the node journal's position `at`; `reuse` is an earlier entry whose
    /// memory is taken over.
    pub(super) fn keep(
        &mut self,
        (pod, shareable): (PodId, bool),
        (claims, shared): (u64, u64),
        error: FitError,
        (num_slots, at): (usize, u64),
        generations: impl Fn(NodeId) -> NodeGenerations,
        reuse: Option<KeptVerdict>,
    ) {
        let mut seen = reuse.map_or_else(|| std::mem::take(&mut self.spare), |r| r.seen);
        seen.clear();
        seen.resize(num_slots, (0, 0, u16::MAX));
        for &(node, i) in error.node_statuses().iter() {
            let (generation, dra) = generations(node);
            seen[node.0 as usize] = (generation, dra, i);
        }
        self.put_back(KeptVerdict { pod, shareable, claims, shared, seen, at, error });
    }

    /// Puts back a verdict [`KeptVerdicts::take`] took out, still standing.
    pub(super) fn put_back(&mut self, kept: KeptVerdict) {
        if self.entries.len() >= MAX_KEPT {
            self.spare = self.entries.remove(0).seen;
        }
        self.entries.push(kept);
    }

    /// `pod` changed (or left, or its slot was taken by a new pod).
    pub(super) fn forget_pod(&mut self, pod: PodId) {
        self.entries.retain(|e| e.pod != pod);
    }

    /// The store replaced `claim`: the pods that use it lose their verdicts.
    pub(super) fn forget_users_of(&mut self, claim: ClaimId, cluster: &Cluster) {
        self.entries.retain(|e| !cluster.pod(e.pod).claims.iter().any(|c| c.as_ref().is_ok_and(|c| *c == claim)));
    }

    /// Nodes changed: nothing kept holds.
    pub(super) fn clear(&mut self) {
        self.entries.clear();
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
