//! Topology domains and per-node memos for the inter-pod plugins (PodTopologySpread,
//! InterPodAffinity): which domain of a topology key each node is in, and what each node
//! contributes for a given matcher (how many of its pods match), kept across attempts.
//!
//! A node's entry is valid while the node's generation is the one it was computed at: every
//! change of the node's pods (Reserve, Unreserve, preemption, the store) moves the generation,
//! and an Unreserve puts the earlier generation back together with the earlier pods. Domains are
//! rebuilt when the store changes a node (`Cluster::topology_generation`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::cluster::{Cluster, NodeId, NodeInfo};

/// The node-name topology key (a domain per node).
pub const HOSTNAME: &str = "kubernetes.io/hostname";

/// What one node gives per topology key (a term's weight, summed).
pub type KeyScores = Vec<(Arc<str>, i64)>;

/// No domain: the node lacks the label or is removed.
pub const NO_DOMAIN: u32 = u32::MAX;

/// The domains of one topology key: a dense id per node index.
#[derive(Clone, Debug, Default)]
pub struct Domains {
    pub ids: Vec<u32>,
    /// Domain id → the label value.
    pub values: Vec<String>,
}

impl Domains {
    pub fn build(cluster: &Cluster, key: &str) -> Domains {
        let mut index: HashMap<&str, u32> = HashMap::new();
        let mut values = Vec::new();
        let ids = cluster
            .nodes
            .iter()
            .map(|n| match n.detail.labels.get(key) {
                Some(v) if !n.detail.removed => *index.entry(v.as_str()).or_insert_with(|| {
                    values.push(v.clone());
                    values.len() as u32 - 1
                }),
                _ => NO_DOMAIN,
            })
            .collect();
        Domains { ids, values }
    }

    /// The node's domain, if it has the label.
    #[inline]
    pub fn of(&self, node: NodeId) -> Option<u32> {
        self.ids.get(node.0 as usize).copied().filter(|d| *d != NO_DOMAIN)
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// One memo: a value per node, each valid at the recorded node generation.
#[derive(Clone, Debug)]
struct NodeMemo<T> {
    key: u64,
    at: Vec<u64>,
    values: Vec<T>,
    used: u64,
}

/// How many memos of each kind are kept (the least recently used is replaced).
const MAX_MEMOS: usize = 32;

/// The caches the inter-pod plugins keep across a scheduler's attempts: the two halves can be
/// borrowed at once.
#[derive(Clone, Debug, Default)]
pub struct TopologyCache {
    pub domains: DomainCache,
    pub memos: NodeMemos,
}

/// Domains per topology key.
#[derive(Clone, Debug, Default)]
pub struct DomainCache {
    /// The `Cluster::topology_generation` and node count the domains were built for.
    built_for: (u64, usize),
    by_key: HashMap<String, Arc<Domains>>,
}

impl DomainCache {
    /// The domains of `key` in the cluster as it is.
    pub fn get(&mut self, cluster: &Cluster, key: &str) -> Arc<Domains> {
        let now = (cluster.topology_generation, cluster.nodes.len());
        if self.built_for != now {
            self.built_for = now;
            self.by_key.clear();
        }
        if let Some(d) = self.by_key.get(key) {
            return d.clone();
        }
        let d = Arc::new(Domains::build(cluster, key));
        self.by_key.insert(key.to_string(), d.clone());
        d
    }
}

/// Per-node values keyed by what they were computed for (a matcher's fingerprint).
#[derive(Clone, Debug, Default)]
pub struct NodeMemos {
    counts: Vec<NodeMemo<u32>>,
    scores: Vec<NodeMemo<KeyScores>>,
    clock: u64,
}

impl NodeMemos {
    /// `count(node)` for every node (0 for those `skip` says), refreshed where the node changed.
    pub fn counts(
        &mut self,
        cluster: &Cluster,
        key: u64,
        skip: impl Fn(&NodeInfo) -> bool,
        count: impl Fn(&NodeInfo) -> u32,
    ) -> &[u32] {
        self.clock += 1;
        let memo = memo_for(&mut self.counts, key, cluster.nodes.len(), self.clock);
        refresh(memo, cluster, skip, count);
        &memo.values
    }

    /// [`NodeMemos::counts`] for weighted per-key contributions (what existing pods' terms give
    /// the incoming pod).
    pub fn scores(
        &mut self,
        cluster: &Cluster,
        key: u64,
        skip: impl Fn(&NodeInfo) -> bool,
        score: impl Fn(&NodeInfo) -> KeyScores,
    ) -> &[KeyScores] {
        self.clock += 1;
        let memo = memo_for(&mut self.scores, key, cluster.nodes.len(), self.clock);
        refresh(memo, cluster, skip, score);
        &memo.values
    }
}

fn memo_for<T: Clone + Default>(memos: &mut Vec<NodeMemo<T>>, key: u64, nodes: usize, clock: u64) -> &mut NodeMemo<T> {
    let i = match memos.iter().position(|m| m.key == key) {
        Some(i) => i,
        None if memos.len() < MAX_MEMOS => {
            memos.push(NodeMemo { key, at: Vec::new(), values: Vec::new(), used: 0 });
            memos.len() - 1
        }
        None => {
            let (i, _) = memos.iter().enumerate().min_by_key(|(_, m)| m.used).expect("MAX_MEMOS > 0");
            memos[i] = NodeMemo { key, at: Vec::new(), values: Vec::new(), used: 0 };
            i
        }
    };
    let memo = &mut memos[i];
    memo.used = clock;
    if memo.at.len() != nodes {
        memo.at.resize(nodes, u64::MAX);
        memo.values.resize(nodes, T::default());
    }
    memo
}

fn refresh<T: Default>(
    memo: &mut NodeMemo<T>,
    cluster: &Cluster,
    skip: impl Fn(&NodeInfo) -> bool,
    compute: impl Fn(&NodeInfo) -> T,
) {
    for (i, node) in cluster.nodes.iter().enumerate() {
        if memo.at[i] == node.generation {
            continue;
        }
        memo.at[i] = node.generation;
        memo.values[i] = if skip(node) { T::default() } else { compute(node) };
    }
}
