//! InterPodAffinity: required pod affinity and anti-affinity filter — the pod's own terms
//! against the pods in each topology domain, and existing pods' required anti-affinity against
//! the pod; preferred terms (the pod's and existing pods') and existing pods' required affinity
//! (`hardPodAffinityWeight`) score.
//!
//! Terms are parsed once per pod ([`AffinityTerms::of`]): namespaces (`namespaces`,
//! `namespaceSelector` as [`crate::plugins::pod_matcher`] resolves them, the pod's own namespace
//! when neither is set) and the label selector with `matchLabelKeys` (`In` the pod's value) and
//! `mismatchLabelKeys` (`NotIn`) merged, as the API server merges them when the pod is created.

use muster_api::PodObject;
use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PodAffinityTerm, WeightedPodAffinityTerm};

use crate::cluster::{Cluster, NodeId, NodeInfo};
use crate::framework::{CycleState, MAX_NODE_SCORE, Rejection};
use crate::plugins::pod_matcher::{Namespaces, Operator, PodMatcher, Selector, label_key_requirements, pod_labels};
use crate::topology::{DomainCache, Domains, KeyScores, TopologyCache, Totals, same_key};

pub const NAME: &str = "InterPodAffinity";
pub const REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
pub const REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
pub const REASON_EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";

/// `InterPodAffinityArgs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterPodAffinityArgs {
    /// The score weight of an existing pod's required affinity term the incoming pod matches.
    pub hard_pod_affinity_weight: i64,
    /// Skip existing pods' preferred terms when the incoming pod has no preferred terms.
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        InterPodAffinityArgs { hard_pod_affinity_weight: 1, ignore_preferred_terms_of_existing_pods: false }
    }
}

/// One term (`framework.AffinityTerm`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AffinityTerm {
    pub namespaces: Namespaces,
    pub selector: Selector,
    pub topology_key: Arc<str>,
}

impl AffinityTerm {
    fn parse(t: &PodAffinityTerm, pod: &dyn PodObject) -> AffinityTerm {
        let labels = pod_labels(pod);
        let mut extra = label_key_requirements(t.match_label_keys.as_deref().unwrap_or(&[]), labels, Operator::In);
        extra.extend(label_key_requirements(t.mismatch_label_keys.as_deref().unwrap_or(&[]), labels, Operator::NotIn));
        let selector = Selector::from_label_selector(t.label_selector.as_ref()).with(extra);
        let mut names = t.namespaces.clone().unwrap_or_default();
        if names.is_empty() && t.namespace_selector.is_none() {
            names.push(pod.meta().namespace.clone().unwrap_or_else(|| "default".into()));
        }
        AffinityTerm {
            namespaces: Namespaces::Terms {
                names,
                selector: Selector::from_label_selector(t.namespace_selector.as_ref()),
            },
            selector,
            topology_key: intern(&t.topology_key),
        }
    }

    /// `AffinityTerm.Matches`: the pod's namespace (and its labels, for a namespace selector) and
    /// the pod's labels.
    pub fn matches(&self, pod: &dyn PodObject, cluster: &Cluster) -> bool {
        let ns = pod.meta().namespace.as_deref().unwrap_or("default");
        self.namespaces.matches(ns, || cluster.namespace_labels.get(ns)) && self.selector.matches(pod)
    }

    /// [`AffinityTerm::matches`] for a pod of `namespace` with `labels`.
    pub fn matches_labels(
        &self,
        namespace: &str,
        labels: &std::collections::BTreeMap<String, String>,
        cluster: &Cluster,
    ) -> bool {
        self.namespaces.matches(namespace, || cluster.namespace_labels.get(namespace))
            && self.selector.matches_labels(labels)
    }
}

/// Topology keys shared by every term naming them (compared by pointer first); at most 1024.
fn intern(key: &str) -> Arc<str> {
    static KEYS: std::sync::Mutex<Vec<Arc<str>>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut keys) = KEYS.lock() else { return Arc::from(key) };
    if let Some(k) = keys.iter().find(|k| &***k == key) {
        return k.clone();
    }
    let k: Arc<str> = Arc::from(key);
    if keys.len() < 1024 {
        keys.push(k.clone());
    }
    k
}

/// A preferred term and its weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightedTerm {
    pub term: AffinityTerm,
    pub weight: i64,
}

/// Whether the pod has required pod affinity or anti-affinity terms: only such a pod is helped
/// by another pod's arrival or relabeling (upstream's `isSchedulableAfterPodChange` looks at the
/// pending pod's own required terms).
pub fn has_required_terms(pod: &crate::cluster::PodInfo) -> bool {
    pod.affinity.as_ref().is_some_and(|t| !t.required_affinity.is_empty() || !t.required_anti_affinity.is_empty())
}

/// A pod's affinity and anti-affinity terms, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AffinityTerms {
    pub required_affinity: Vec<AffinityTerm>,
    pub required_anti_affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<WeightedTerm>,
    pub preferred_anti_affinity: Vec<WeightedTerm>,
}

impl AffinityTerms {
    /// The pod's terms; `None` when it has none.
    pub fn of(pod: &dyn PodObject) -> Option<Arc<AffinityTerms>> {
        let affinity = pod.spec()?.affinity.as_ref()?;
        let required = |terms: Option<&Vec<PodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms.into_iter().flatten().map(|t| AffinityTerm::parse(t, pod)).collect()
        };
        let preferred = |terms: Option<&Vec<WeightedPodAffinityTerm>>| -> Vec<WeightedTerm> {
            terms
                .into_iter()
                .flatten()
                .map(|t| WeightedTerm {
                    term: AffinityTerm::parse(&t.pod_affinity_term, pod),
                    weight: i64::from(t.weight),
                })
                .collect()
        };
        let a = affinity.pod_affinity.as_ref();
        let anti = affinity.pod_anti_affinity.as_ref();
        let terms = AffinityTerms {
            required_affinity: required(a.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())),
            required_anti_affinity: required(
                anti.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            ),
            preferred_affinity: preferred(
                a.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            ),
            preferred_anti_affinity: preferred(
                anti.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            ),
        };
        (terms != AffinityTerms::default()).then(|| Arc::new(terms))
    }

    fn has_preferred(&self) -> bool {
        !self.preferred_affinity.is_empty() || !self.preferred_anti_affinity.is_empty()
    }
}

fn matcher(terms: &[&AffinityTerm]) -> PodMatcher {
    PodMatcher {
        all: terms.iter().map(|t| (t.namespaces.clone(), t.selector.clone())).collect(),
        skip_terminating: false,
    }
}

/// A key of the incoming pod's namespace and labels (what existing pods' terms look at).
fn pod_signature(pod: &dyn PodObject) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    pod.meta().namespace.hash(&mut h);
    pod_labels(pod).hash(&mut h);
    h.finish()
}

/// Per topology key: the domains and a value per domain.
#[derive(Clone, Debug)]
struct DomainCounts {
    key: Arc<str>,
    domains: Arc<Domains>,
    counts: Vec<i64>,
}

fn entry<'a>(
    all: &'a mut Vec<DomainCounts>,
    key: &Arc<str>,
    cluster: &Cluster,
    cache: &mut DomainCache,
) -> &'a mut DomainCounts {
    let i = match all.iter().position(|d| same_key(&d.key, key)) {
        Some(i) => i,
        None => {
            let domains = cache.get(cluster, key);
            all.push(DomainCounts { key: key.clone(), counts: vec![0; domains.len()], domains });
            all.len() - 1
        }
    };
    &mut all[i]
}

/// What PreFilter computed (`preFilterState`).
#[derive(Clone, Debug)]
pub struct AffinityFilter {
    terms: Option<Arc<AffinityTerms>>,
    /// Pods matching all required affinity terms, per domain of each term's key.
    affinity: Vec<DomainCounts>,
    /// No pod matches all the required affinity terms anywhere.
    affinity_empty: bool,
    /// The pod matches all its own required affinity terms.
    self_affinity: bool,
    /// Pods matching each required anti-affinity term, per domain of its key.
    anti_affinity: Vec<DomainCounts>,
    /// Existing pods' required anti-affinity terms the pod matches, per domain of their key.
    existing_anti_affinity: Vec<DomainCounts>,
}

/// PreFilter; `None` when the pod has no required terms and no existing pod has required
/// anti-affinity (the plugin is skipped).
pub fn pre_filter(state: &CycleState<'_>, cluster: &Cluster, cache: &mut TopologyCache) -> Option<Box<AffinityFilter>> {
    let terms = state.pod.affinity.clone();
    let required =
        terms.as_ref().is_some_and(|t| !t.required_affinity.is_empty() || !t.required_anti_affinity.is_empty());
    if !required && cluster.inter_pod.required_anti_affinity == 0 {
        return None;
    }
    let mut s = AffinityFilter {
        terms: terms.clone(),
        affinity: Vec::new(),
        affinity_empty: true,
        self_affinity: false,
        anti_affinity: Vec::new(),
        existing_anti_affinity: Vec::new(),
    };
    if cluster.inter_pod.required_anti_affinity > 0 {
        existing_anti_affinity(&mut s, state, cluster, cache);
    }
    let Some(t) = terms.as_deref() else { return Some(Box::new(s)) };
    if !t.required_affinity.is_empty() {
        let all: Vec<&AffinityTerm> = t.required_affinity.iter().collect();
        let m = matcher(&all);
        s.self_affinity = m.matches(&state.pod.pod, cluster);
        let fp = m.fingerprint();
        cache.memos.counts(cluster, fp, |n| m.count_on(n, cluster));
        for term in &t.required_affinity {
            let totals = cache.count_totals(cluster, fp, &term.topology_key);
            add_totals(&mut s.affinity, &totals, 1, cluster, &mut cache.domains);
        }
        s.affinity_empty = s.affinity.iter().all(|e| e.counts.iter().all(|c| *c == 0));
    }
    for term in &t.required_anti_affinity {
        let m = matcher(&[term]);
        let fp = m.fingerprint();
        cache.memos.counts(cluster, fp, |n| m.count_on(n, cluster));
        let totals = cache.count_totals(cluster, fp, &term.topology_key);
        add_totals(&mut s.anti_affinity, &totals, 1, cluster, &mut cache.domains);
    }
    Some(Box::new(s))
}

/// Adds per-domain totals (times `factor`) to the entry of their key.
fn add_totals(all: &mut Vec<DomainCounts>, totals: &Totals, factor: i64, cluster: &Cluster, domains: &mut DomainCache) {
    let (key, d, t) = totals;
    let e = entry(all, key, cluster, domains);
    if !Arc::ptr_eq(&e.domains, d) {
        return;
    }
    for (c, x) in e.counts.iter_mut().zip(t) {
        *c += x * factor;
    }
}

/// Existing pods' required anti-affinity terms that the incoming pod matches: the domains they
/// close to it.
fn existing_anti_affinity(
    s: &mut AffinityFilter,
    state: &CycleState<'_>,
    cluster: &Cluster,
    cache: &mut TopologyCache,
) {
    let pod = &state.pod.pod;
    let key = pod_signature(pod) ^ 0xa7a7;
    cache.memos.scores(
        cluster,
        key,
        |n| n.anti_affinity_pods == 0,
        |n| {
            let mut keys: KeyScores = Vec::new();
            for p in &n.detail.pods {
                let Some(t) = cluster.pod(*p).affinity.as_deref() else { continue };
                for term in t.required_anti_affinity.iter().filter(|t| t.matches(pod, cluster)) {
                    keys.push((term.topology_key.clone(), 1));
                }
            }
            keys
        },
    );
    for totals in cache.score_totals(cluster, key) {
        add_totals(&mut s.existing_anti_affinity, &totals, 1, cluster, &mut cache.domains);
    }
}

fn count_at(all: &[DomainCounts], key: &Arc<str>, node: NodeId) -> Option<i64> {
    let e = all.iter().find(|e| same_key(&e.key, key))?;
    let d = e.domains.of(node)?;
    Some(e.counts[d as usize])
}

/// Filter: the pod's affinity, its anti-affinity, then existing pods' anti-affinity.
pub fn filter(s: &AffinityFilter, node: NodeId) -> Result<(), Rejection> {
    let empty = AffinityTerms::default();
    let terms = s.terms.as_deref().unwrap_or(&empty);
    let mut pods_exist = true;
    for t in &terms.required_affinity {
        match count_at(&s.affinity, &t.topology_key, node) {
            None => return Err(Rejection::new(NAME, true, REASON_AFFINITY)),
            Some(c) if c <= 0 => pods_exist = false,
            Some(_) => {}
        }
    }
    // The first pod of a group whose affinity matches itself may go anywhere.
    if !(pods_exist || s.affinity_empty && s.self_affinity) {
        return Err(Rejection::new(NAME, true, REASON_AFFINITY));
    }
    for t in &terms.required_anti_affinity {
        if count_at(&s.anti_affinity, &t.topology_key, node).is_some_and(|c| c > 0) {
            return Err(Rejection::new(NAME, false, REASON_ANTI_AFFINITY));
        }
    }
    for e in &s.existing_anti_affinity {
        if e.domains.of(node).is_some_and(|d| e.counts[d as usize] > 0) {
            return Err(Rejection::new(NAME, false, REASON_EXISTING_ANTI_AFFINITY));
        }
    }
    Ok(())
}

/// For `muster why`: the term and domain behind a rejection.
pub fn explain(s: &AffinityFilter, node: NodeId) -> Option<String> {
    let terms = s.terms.as_deref();
    for t in terms.map_or(&[][..], |t| &t.required_anti_affinity[..]) {
        if let Some(c) = count_at(&s.anti_affinity, &t.topology_key, node).filter(|c| *c > 0) {
            return Some(format!("{c} pod(s) matching an anti-affinity term in the node's {} domain", t.topology_key));
        }
    }
    for e in &s.existing_anti_affinity {
        if let Some(d) = e.domains.of(node).filter(|d| e.counts[*d as usize] > 0) {
            return Some(format!(
                "{} existing pod(s) with required anti-affinity against this pod in {}={}",
                e.counts[d as usize], e.key, e.domains.values[d as usize]
            ));
        }
    }
    None
}

/// PreScore + Score + NormalizeScore over the feasible nodes, or `None` when skipped.
pub fn score(
    state: &CycleState<'_>,
    feasible: &[NodeId],
    cluster: &Cluster,
    cache: &mut TopologyCache,
    args: &InterPodAffinityArgs,
) -> Option<Vec<i64>> {
    let terms = state.pod.affinity.as_deref();
    let has_constraints = terms.is_some_and(AffinityTerms::has_preferred);
    if args.ignore_preferred_terms_of_existing_pods && !has_constraints {
        return None;
    }
    if !has_constraints && cluster.inter_pod.with_affinity == 0 {
        return None;
    }
    let mut topology: Vec<DomainCounts> = Vec::new();
    if let Some(t) = terms.filter(|_| has_constraints) {
        let weighted =
            t.preferred_affinity.iter().map(|w| (w, 1)).chain(t.preferred_anti_affinity.iter().map(|w| (w, -1)));
        for (w, sign) in weighted {
            let m = matcher(&[&w.term]);
            let fp = m.fingerprint();
            cache.memos.counts(cluster, fp, |n| m.count_on(n, cluster));
            let totals = cache.count_totals(cluster, fp, &w.term.topology_key);
            add_totals(&mut topology, &totals, w.weight * sign, cluster, &mut cache.domains);
        }
    }
    existing_terms_score(&mut topology, state, cluster, cache, args);
    if topology.is_empty() {
        return None;
    }
    let raw: Vec<i64> = feasible
        .iter()
        .map(|n| topology.iter().filter_map(|e| e.domains.of(*n).map(|d| e.counts[d as usize])).sum())
        .collect();
    Some(normalize(&raw))
}

/// Existing pods' required affinity (hardPodAffinityWeight) and preferred terms the incoming
/// pod matches, per domain of the existing pod's node.
fn existing_terms_score(
    topology: &mut Vec<DomainCounts>,
    state: &CycleState<'_>,
    cluster: &Cluster,
    cache: &mut TopologyCache,
    args: &InterPodAffinityArgs,
) {
    if cluster.inter_pod.with_affinity == 0 {
        return;
    }
    let pod = &state.pod.pod;
    let hard = args.hard_pod_affinity_weight;
    let key = pod_signature(pod) ^ (hard as u64).rotate_left(17);
    cache.memos.scores(cluster, key, |n| n.affinity_pods == 0, |n| existing_on(n, cluster, pod, hard));
    for totals in cache.score_totals(cluster, key) {
        add_totals(topology, &totals, 1, cluster, &mut cache.domains);
    }
}

/// What the terms of the pods on one node give the incoming pod, by topology key.
fn existing_on(n: &NodeInfo, cluster: &Cluster, pod: &dyn PodObject, hard: i64) -> KeyScores {
    let mut out: HashMap<Arc<str>, i64> = HashMap::new();
    for p in &n.detail.pods {
        let Some(t) = cluster.pod(*p).affinity.as_deref() else { continue };
        if hard > 0 {
            for term in t.required_affinity.iter().filter(|t| t.matches(pod, cluster)) {
                *out.entry(term.topology_key.clone()).or_default() += hard;
            }
        }
        for w in t.preferred_affinity.iter().filter(|w| w.term.matches(pod, cluster)) {
            *out.entry(w.term.topology_key.clone()).or_default() += w.weight;
        }
        for w in t.preferred_anti_affinity.iter().filter(|w| w.term.matches(pod, cluster)) {
            *out.entry(w.term.topology_key.clone()).or_default() -= w.weight;
        }
    }
    let mut v: KeyScores = out.into_iter().collect();
    v.sort();
    v
}

/// NormalizeScore: scaled between the lowest and the highest score.
fn normalize(raw: &[i64]) -> Vec<i64> {
    let min = raw.iter().copied().min().unwrap_or(0);
    let max = raw.iter().copied().max().unwrap_or(0);
    let diff = max - min;
    raw.iter()
        .map(|s| if diff > 0 { (MAX_NODE_SCORE as f64 * ((s - min) as f64 / diff as f64)) as i64 } else { 0 })
        .collect()
}

#[cfg(test)]
#[path = "inter_pod_affinity_tests.rs"]
mod tests;
