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

/// One memo: a value per node, each valid at the recorded node generation; and totals per
/// domain of topology keys, kept up to date as nodes change.
#[derive(Clone, Debug)]
struct NodeMemo<T> {
    key: u64,
    at: Vec<u64>,
    values: Vec<T>,
    used: u64,
    /// (topology key, its domains, the values summed per domain).
    totals: Vec<(Arc<str>, Arc<Domains>, Vec<i64>)>,
}

/// Per-domain sums of a memo's values for one topology key.
pub type Totals = (Arc<str>, Arc<Domains>, Vec<i64>);

/// How many totals one memo keeps.
const MAX_TOTALS: usize = 8;

/// Whether two interned keys are the same key.
pub fn same_key(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// How many memos of each kind are kept (the least recently used is replaced).
const MAX_MEMOS: usize = 32;

/// The caches the inter-pod plugins keep across a scheduler's attempts: the two halves can be
/// borrowed at once.
#[derive(Clone, Debug, Default)]
pub struct TopologyCache {
    pub domains: DomainCache,
    pub memos: NodeMemos,
    /// ImageLocality's image states, rebuilt with the topology (when a node changes).
    pub images: crate::plugins::image_locality::ImageStates,
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
    /// The [`Cluster::namespace_generation`] the memos were counted at.
    namespaces_at: u64,
}

impl NodeMemos {
    /// Some namespace's labels changed: a count read through a `namespaceSelector` may be stale,
    /// so every memo is counted again (namespaces change seldom).
    fn follow_namespaces(&mut self, cluster: &Cluster) {
        if self.namespaces_at != cluster.namespace_generation {
            self.namespaces_at = cluster.namespace_generation;
            self.counts.clear();
            self.scores.clear();
        }
    }

    /// `count(node)` for every node, refreshed where the node changed. Inlined: its scan of the
    /// nodes' generations is PreFilter's hot loop, and keeps its bounds in registers there.
    #[inline(always)]
    pub fn counts(&mut self, cluster: &Cluster, key: u64, count: impl Fn(&NodeInfo) -> u32) -> &[u32] {
        self.follow_namespaces(cluster);
        self.clock += 1;
        let memo = memo_for(&mut self.counts, key, cluster.nodes.len(), self.clock);
        let changed = refresh(memo, cluster, |_| false, count);
        for (_, domains, totals) in &mut memo.totals {
            for (i, old) in &changed {
                if let Some(d) = domains.of(NodeId(*i as u32)) {
                    totals[d as usize] += i64::from(memo.values[*i]) - i64::from(*old);
                }
            }
        }
        &memo.values
    }

    /// [`NodeMemos::counts`] for weighted per-key contributions (what existing pods' terms give
    /// the incoming pod); nodes `skip` says contribute nothing.
    pub fn scores(
        &mut self,
        cluster: &Cluster,
        key: u64,
        skip: impl Fn(&NodeInfo) -> bool,
        score: impl Fn(&NodeInfo) -> KeyScores,
    ) -> &[KeyScores] {
        self.follow_namespaces(cluster);
        self.clock += 1;
        let memo = memo_for(&mut self.scores, key, cluster.nodes.len(), self.clock);
        let changed = refresh(memo, cluster, skip, score);
        // A key no total sums yet: they are all summed again from every node.
        let new_key = changed
            .iter()
            .flat_map(|(i, _)| &memo.values[*i])
            .any(|(x, _)| !memo.totals.iter().any(|(k, _, _)| same_key(k, x)));
        if new_key {
            memo.totals.clear();
        }
        for (k, domains, totals) in &mut memo.totals {
            for (i, old) in &changed {
                let Some(d) = domains.of(NodeId(*i as u32)) else { continue };
                let now: i64 = memo.values[*i].iter().filter(|(x, _)| same_key(x, k)).map(|(_, v)| v).sum();
                let was: i64 = old.iter().filter(|(x, _)| same_key(x, k)).map(|(_, v)| v).sum();
                totals[d as usize] += now - was;
            }
        }
        &memo.values
    }
}

impl TopologyCache {
    /// The per-domain totals of the count memo `key` over the domains of `topology_key` (after
    /// [`NodeMemos::counts`] refreshed it).
    pub fn count_totals(&mut self, cluster: &Cluster, key: u64, topology_key: &Arc<str>) -> Totals {
        let domains = self.domains.get(cluster, topology_key);
        let memo = self.memos.counts.iter_mut().find(|m| m.key == key).expect("counts() made the memo");
        totals_of(memo, topology_key, domains, |v| i64::from(*v))
    }

    /// The per-domain totals of the score memo `key` for every topology key its values name
    /// (after [`NodeMemos::scores`] refreshed it).
    pub fn score_totals(&mut self, cluster: &Cluster, key: u64) -> Vec<Totals> {
        let Some(i) = self.memos.scores.iter().position(|m| m.key == key) else { return Vec::new() };
        let mut keys: Vec<Arc<str>> = self.memos.scores[i].totals.iter().map(|(k, _, _)| k.clone()).collect();
        // Keys not summed yet (a new memo, or a key that appeared): found among the values.
        if keys.is_empty()
            || self.memos.scores[i].totals.iter().any(|(k, d, _)| !Arc::ptr_eq(d, &self.domains.get(cluster, k)))
        {
            keys.clear();
            for v in self.memos.scores[i].values.iter().flatten() {
                if !keys.iter().any(|k| same_key(k, &v.0)) {
                    keys.push(v.0.clone());
                }
            }
            self.memos.scores[i].totals.clear();
        }
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let domains = self.domains.get(cluster, &k);
            let memo = &mut self.memos.scores[i];
            let sum = |v: &KeyScores| v.iter().filter(|(x, _)| same_key(x, &k)).map(|(_, s)| s).sum::<i64>();
            out.push(totals_of(memo, &k, domains, sum));
        }
        out
    }
}

/// The memo's totals for `key` over `domains`, built from every node's value when missing.
fn totals_of<T>(memo: &mut NodeMemo<T>, key: &Arc<str>, domains: Arc<Domains>, value: impl Fn(&T) -> i64) -> Totals {
    if let Some(t) = memo.totals.iter().find(|(k, d, _)| same_key(k, key) && Arc::ptr_eq(d, &domains)) {
        return t.clone();
    }
    let mut totals = vec![0i64; domains.len()];
    for (i, v) in memo.values.iter().enumerate() {
        if let Some(d) = domains.of(NodeId(i as u32)) {
            totals[d as usize] += value(v);
        }
    }
    if memo.totals.len() >= MAX_TOTALS {
        memo.totals.clear();
    }
    memo.totals.retain(|(k, _, _)| !same_key(k, key));
    let t = (key.clone(), domains, totals);
    memo.totals.push(t.clone());
    t
}

fn memo_for<T: Clone + Default>(memos: &mut Vec<NodeMemo<T>>, key: u64, nodes: usize, clock: u64) -> &mut NodeMemo<T> {
    let fresh = || NodeMemo { key, at: Vec::new(), values: Vec::new(), used: 0, totals: Vec::new() };
    let i = match memos.iter().position(|m| m.key == key) {
        Some(i) => i,
        None if memos.len() < MAX_MEMOS => {
            memos.push(fresh());
            memos.len() - 1
        }
        None => {
            let (i, _) = memos.iter().enumerate().min_by_key(|(_, m)| m.used).expect("MAX_MEMOS > 0");
            memos[i] = fresh();
            i
        }
    };
    let memo = &mut memos[i];
    memo.used = clock;
    if memo.at.len() != nodes {
        memo.at.resize(nodes, u64::MAX);
        memo.values.resize(nodes, T::default());
        // Totals were summed over the old node list.
        memo.totals.clear();
    }
    memo
}

/// Recomputes the values of the nodes whose generation moved; returns them with their old
/// values.
fn refresh<T: Default>(
    memo: &mut NodeMemo<T>,
    cluster: &Cluster,
    skip: impl Fn(&NodeInfo) -> bool,
    compute: impl Fn(&NodeInfo) -> T,
) -> Vec<(usize, T)> {
    let mut changed = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        if memo.at[i] == node.generation {
            continue;
        }
        memo.at[i] = node.generation;
        let new = if skip(node) { T::default() } else { compute(node) };
        changed.push((i, std::mem::replace(&mut memo.values[i], new)));
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::PodId;
    use crate::plugins::pod_matcher::{Namespaces, PodMatcher, Selector};
    use crate::plugins::test_cluster::{cluster, pod, zoned};
    use serde_json::json;

    fn matcher() -> PodMatcher {
        let sel =
            Selector::from_label_selector(Some(&serde_json::from_value(json!({"matchLabels": {"app": "x"}})).unwrap()));
        PodMatcher { all: vec![(Namespaces::One("default".into()), sel)], skip_terminating: true }
    }

    fn totals(cache: &mut TopologyCache, c: &Cluster, m: &PodMatcher) -> Vec<i64> {
        let fp = m.fingerprint();
        cache.memos.counts(c, fp, |n| m.count_on(n, c));
        cache.count_totals(c, fp, &Arc::from("zone")).2
    }

    /// Totals kept across changes equal totals computed afresh, through Reserve-like accounting
    /// and its undo.
    #[test]
    fn totals_follow_the_nodes_that_changed() {
        let nodes = vec![zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")];
        let pods = vec![
            pod("e1", &[("app", "x")], Some("a"), json!({})),
            pod("p1", &[("app", "x")], None, json!({})),
            pod("p2", &[("app", "y")], None, json!({})),
        ];
        let mut c = cluster(nodes, pods);
        let m = matcher();
        let mut kept = TopologyCache::default();
        assert_eq!(totals(&mut kept, &c, &m), vec![1, 0]);
        let (p1, p2) = (PodId(1), PodId(2));
        let before = c.nodes[2].generation;
        let info = c.pods[1].clone();
        let _ = c.nodes[2].account(&info, p1, 1);
        c.nodes[2].generation = c.fresh_generation();
        let other = c.pods[2].clone();
        let _ = c.nodes[0].account(&other, p2, 1);
        assert_eq!(totals(&mut kept, &c, &m), vec![1, 1]);
        assert_eq!(totals(&mut TopologyCache::default(), &c, &m), vec![1, 1]);
        // Unreserve puts the generation back with the pods.
        let _ = c.nodes[2].account(&info, p1, -1);
        c.nodes[2].generation = before;
        assert_eq!(totals(&mut kept, &c, &m), vec![1, 0]);
    }

    /// A namespace's new labels count at once: the memos counted through a `namespaceSelector`
    /// before the store changed them are dropped.
    #[test]
    fn a_namespace_label_change_drops_the_memos() {
        use crate::store::Change;
        let nodes = vec![zoned("a", "z1"), zoned("c", "z2")];
        let pods = vec![pod("e1", &[("app", "x")], Some("a"), json!({}))];
        let mut c = cluster(nodes, pods);
        let sel =
            Selector::from_label_selector(Some(&serde_json::from_value(json!({"matchLabels": {"app": "x"}})).unwrap()));
        let prod = Selector::from_label_selector(Some(
            &serde_json::from_value(json!({"matchLabels": {"env": "prod"}})).unwrap(),
        ));
        let m = PodMatcher {
            all: vec![(Namespaces::Terms { names: vec![], selector: prod }, sel)],
            skip_terminating: true,
        };
        let mut kept = TopologyCache::default();
        assert_eq!(totals(&mut kept, &c, &m), vec![0, 0], "default has no env label yet");
        let ns: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(json!({"metadata": {"name": "default", "labels": {"env": "prod"}}})).unwrap();
        c.apply(Change::UpsertNamespace(Box::new(ns))).unwrap();
        assert_eq!(totals(&mut kept, &c, &m), vec![1, 0]);
        c.apply(Change::DeleteNamespace("default".into())).unwrap();
        assert_eq!(totals(&mut kept, &c, &m), vec![0, 0]);
    }
}
