//! PodTopologySpread: `topologySpreadConstraints` with `whenUnsatisfiable: DoNotSchedule` filter
//! (a node is rejected when placing the pod there would make its domain's count of matching
//! pods exceed the global minimum by more than `maxSkew`); `ScheduleAnyway` constraints score
//! (fewer matching pods in the node's domains is better). Pods without constraints get the
//! cluster's default constraints (`PodTopologySpreadArgs`).
//!
//! Default constraints select what upstream's `DefaultSelector` selects: the pods matching the
//! labels of every Service in the pod's namespace that selects it and of its ReplicationController,
//! and the `spec.selector` of its ReplicaSet or StatefulSet ([`crate::spread_selectors`], which
//! holds them). A pod nothing selects gets no default constraint; a pod with its own constraints
//! never gets them.

use muster_api::PodObject;
use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;

use crate::cluster::{Cluster, NodeId, NodeInfo};
use crate::framework::{CycleState, MAX_NODE_SCORE, Rejection};
use crate::plugins::pod_matcher::{Namespaces, Operator, PodMatcher, Selector, label_key_requirements, pod_labels};
use crate::plugins::{node_affinity, taint_toleration};
use crate::topology::{Domains, HOSTNAME, TopologyCache};

pub const NAME: &str = "PodTopologySpread";
pub const REASON: &str = "node(s) didn't match pod topology spread constraints";
pub const REASON_MISSING_LABEL: &str = "node(s) didn't match pod topology spread constraints (missing required label)";

/// How default constraints are chosen (`defaultingType`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum DefaultingType {
    /// Upstream's system defaults: hostname maxSkew 3, zone maxSkew 5, both ScheduleAnyway.
    #[default]
    System,
    /// `defaultConstraints` as given.
    List,
}

/// `PodTopologySpreadArgs`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PodTopologySpreadArgs {
    pub default_constraints: Vec<TopologySpreadConstraint>,
    pub defaulting_type: DefaultingType,
}

impl Eq for PodTopologySpreadArgs {}

impl PodTopologySpreadArgs {
    /// Whether some default constraint has `whenUnsatisfiable == action`.
    fn has_defaults(&self, action: &str) -> bool {
        match self.defaulting_type {
            DefaultingType::List => self.default_constraints.iter().any(|c| c.when_unsatisfiable == action),
            DefaultingType::System => action == "ScheduleAnyway",
        }
    }

    /// The constraints a pod without its own gets (before the selector is set).
    fn defaults(&self) -> Vec<TopologySpreadConstraint> {
        match self.defaulting_type {
            DefaultingType::List => self.default_constraints.clone(),
            DefaultingType::System => [(HOSTNAME, 3), ("topology.kubernetes.io/zone", 5)]
                .into_iter()
                .map(|(key, skew)| TopologySpreadConstraint {
                    topology_key: key.into(),
                    max_skew: skew,
                    when_unsatisfiable: "ScheduleAnyway".into(),
                    ..Default::default()
                })
                .collect(),
        }
    }
}

/// Whether PodTopologySpread's Filter may reject the pod: it has a `DoNotSchedule` constraint of
/// its own, or none of its own and a `DoNotSchedule` default (which applies only when something
/// selects the pod: a broad answer). Only such a pod is helped by another pod's arrival or
/// relabeling (upstream's `isSchedulableAfterPodChange` looks at the hard constraints only).
pub fn may_filter(pod: &crate::cluster::PodInfo, args: &PodTopologySpreadArgs) -> bool {
    pod.spread_hard.unwrap_or_else(|| args.has_defaults("DoNotSchedule"))
}

/// Whether some of the spec's own constraints are `DoNotSchedule`; `None` when it has none (the
/// default constraints apply). Kept in [`crate::cluster::PodInfo::spread_hard`].
pub fn own_hard(spec: &k8s_openapi::api::core::v1::PodSpec) -> Option<bool> {
    let own = spec.topology_spread_constraints.as_deref().filter(|c| !c.is_empty())?;
    Some(own.iter().any(|c| c.when_unsatisfiable == "DoNotSchedule"))
}

/// One constraint, its selector parsed and its defaults applied.
#[derive(Clone, Debug)]
pub struct Constraint {
    pub max_skew: i64,
    pub topology_key: String,
    pub matcher: PodMatcher,
    /// Whether the incoming pod matches the selector itself.
    pub self_match: bool,
    pub min_domains: i64,
    pub honor_node_affinity: bool,
    pub honor_taints: bool,
}

/// The pod's constraints with `whenUnsatisfiable == action` (its own, or the defaults), and
/// whether they are the system defaults. The defaults apply only when something selects the pod
/// (`buildDefaultConstraints`): their selector is the pod's default selector, built at most once
/// per attempt and only when a default constraint has this action.
pub fn constraints(
    state: &CycleState<'_>,
    cluster: &Cluster,
    args: &PodTopologySpreadArgs,
    action: &str,
) -> (Vec<Constraint>, bool) {
    let pod = &state.pod.pod;
    let own = pod.spec().and_then(|s| s.topology_spread_constraints.as_deref()).unwrap_or(&[]);
    if !own.is_empty() {
        return (parse(own, pod, action, None), false);
    }
    if !args.has_defaults(action) {
        return (Vec::new(), false);
    }
    let selector = state.default_spread_selector.get_or_init(|| cluster.spread_selectors.default_selector(pod));
    if selector.is_empty() {
        return (Vec::new(), false);
    }
    let system = args.defaulting_type == DefaultingType::System;
    (parse(&args.defaults(), pod, action, Some(Selector::Requirements(selector.clone()))), system)
}

/// The pod's DoNotSchedule constraints as its queueing hints read them (`getConstraints`): its
/// own, or the DoNotSchedule defaults when something selects it.
pub fn hard_constraints(pod: &dyn PodObject, cluster: &Cluster, args: &PodTopologySpreadArgs) -> Vec<Constraint> {
    let own = pod.spec().and_then(|s| s.topology_spread_constraints.as_deref()).unwrap_or(&[]);
    if !own.is_empty() {
        return parse(own, pod, "DoNotSchedule", None);
    }
    if !args.has_defaults("DoNotSchedule") {
        return Vec::new();
    }
    let selector = cluster.spread_selectors.default_selector(pod);
    if selector.is_empty() {
        return Vec::new();
    }
    parse(&args.defaults(), pod, "DoNotSchedule", Some(Selector::Requirements(selector)))
}

impl Constraint {
    /// Whether a pod of `namespace` with `labels` counts for the constraint.
    pub fn selects(&self, namespace: &str, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.matcher.all.iter().all(|(ns, selector)| ns.matches(namespace, || None) && selector.matches_labels(labels))
    }
}

fn parse(
    list: &[TopologySpreadConstraint],
    pod: &dyn PodObject,
    action: &str,
    default_selector: Option<Selector>,
) -> Vec<Constraint> {
    let ns = pod.meta().namespace.clone().unwrap_or_else(|| "default".into());
    let labels = pod_labels(pod);
    list.iter()
        .filter(|c| c.when_unsatisfiable == action)
        .map(|c| {
            let selector = match &default_selector {
                Some(s) => s.clone(),
                None => Selector::from_label_selector(c.label_selector.as_ref()).with(label_key_requirements(
                    c.match_label_keys.as_deref().unwrap_or(&[]),
                    labels,
                    Operator::In,
                )),
            };
            Constraint {
                max_skew: i64::from(c.max_skew),
                topology_key: c.topology_key.clone(),
                self_match: selector.matches(pod),
                matcher: PodMatcher { all: vec![(Namespaces::One(ns.clone()), selector)], skip_terminating: true },
                min_domains: i64::from(c.min_domains.unwrap_or(1)),
                honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
            }
        })
        .collect()
}

/// Whether some node may not count for the constraint (a policy to honour that can reject).
fn needs_node(c: &Constraint, state: &CycleState<'_>) -> bool {
    c.honor_taints || (c.honor_node_affinity && (state.node_selector.is_some() || state.required_affinity.is_some()))
}

/// Whether the node counts for the constraint (`matchNodeInclusionPolicies`).
fn included(c: &Constraint, state: &CycleState<'_>, node: &NodeInfo) -> bool {
    (!c.honor_node_affinity || node_affinity::filter(state, node).is_ok())
        && (!c.honor_taints || taint_toleration::filter(state, node).is_ok())
}

/// The domains of each constraint's key, and whether a node has every key.
fn has_all_keys(domains: &[Arc<Domains>], node: NodeId) -> bool {
    domains.iter().all(|d| d.of(node).is_some())
}

/// What PreFilter computed for the DoNotSchedule constraints.
#[derive(Clone, Debug)]
pub struct SpreadFilter {
    constraints: Vec<Constraint>,
    /// Per constraint: its key's domains, the matching pods per domain (summed over the
    /// constraints sharing the key, as upstream keys counts by topology pair), how many domains
    /// are eligible, and the smallest count among them.
    keys: Vec<KeyCounts>,
}

#[derive(Clone, Debug)]
struct KeyCounts {
    domains: Arc<Domains>,
    counts: Vec<i64>,
    num_domains: i64,
    min: i64,
}

/// PreFilter: counts of matching pods per domain over the eligible nodes. `None` when the pod
/// has no DoNotSchedule constraint.
pub fn pre_filter(
    state: &CycleState<'_>,
    cluster: &Cluster,
    cache: &mut TopologyCache,
    args: &PodTopologySpreadArgs,
) -> Option<Box<SpreadFilter>> {
    let (constraints, _) = constraints(state, cluster, args, "DoNotSchedule");
    if constraints.is_empty() {
        return None;
    }
    if let [c] = &constraints[..]
        && !needs_node(c, state)
    {
        // One constraint counting every node with its key: the memo's per-domain totals.
        let fp = c.matcher.fingerprint();
        cache.memos.counts(cluster, fp, |n| c.matcher.count_on(n, cluster));
        let (_, domains, counts) = cache.count_totals(cluster, fp, &Arc::from(c.topology_key.as_str()));
        let min = counts.iter().copied().min().unwrap_or(i64::from(i32::MAX));
        let keys = vec![KeyCounts { num_domains: domains.len() as i64, domains, counts, min }];
        return Some(Box::new(SpreadFilter { constraints, keys }));
    }
    let domains: Vec<Arc<Domains>> = constraints.iter().map(|c| cache.domains.get(cluster, &c.topology_key)).collect();
    let mut keys: Vec<KeyCounts> = domains
        .iter()
        .map(|d| KeyCounts { domains: d.clone(), counts: vec![0; d.len()], num_domains: 0, min: 0 })
        .collect();
    let mut eligible: Vec<Vec<bool>> = domains.iter().map(|d| vec![false; d.len()]).collect();
    let all_keys: Vec<bool> = (0..cluster.nodes.len()).map(|i| has_all_keys(&domains, NodeId(i as u32))).collect();
    for (ci, c) in constraints.iter().enumerate() {
        // Constraints sharing a key share its counts (the first one's entry).
        let k = constraints.iter().position(|o| o.topology_key == c.topology_key).unwrap_or(ci);
        let check = needs_node(c, state);
        let counts = cache.memos.counts(cluster, c.matcher.fingerprint(), |n| c.matcher.count_on(n, cluster));
        for (i, node) in cluster.nodes.iter().enumerate() {
            if !all_keys[i] || (check && !included(c, state, node)) {
                continue;
            }
            let d = domains[ci].ids[i] as usize;
            eligible[k][d] = true;
            keys[k].counts[d] += i64::from(counts[i]);
        }
    }
    for (k, e) in keys.iter_mut().zip(&eligible) {
        k.num_domains = e.iter().filter(|x| **x).count() as i64;
        k.min = e.iter().zip(&k.counts).filter(|(x, _)| **x).map(|(_, c)| *c).min().unwrap_or(i64::from(i32::MAX));
    }
    // Each constraint reads its key's entry.
    let keys = constraints
        .iter()
        .enumerate()
        .map(|(ci, c)| keys[constraints.iter().position(|o| o.topology_key == c.topology_key).unwrap_or(ci)].clone())
        .collect();
    Some(Box::new(SpreadFilter { constraints, keys }))
}

/// Why a node fails a constraint, for `muster why`: the constraint's key, the node's domain, its
/// count, the global minimum and maxSkew.
pub fn explain(s: &SpreadFilter, node: NodeId) -> Option<String> {
    for (c, k) in s.constraints.iter().zip(&s.keys) {
        let Some(d) = k.domains.of(node) else {
            return Some(format!("no label {}", c.topology_key));
        };
        let (count, min) = skew_parts(c, k, d);
        if count + i64::from(c.self_match) - min > c.max_skew {
            return Some(format!(
                "{}={}: {} matching pod(s) + {} - global minimum {} > maxSkew {}",
                c.topology_key,
                k.domains.values[d as usize],
                count,
                i64::from(c.self_match),
                min,
                c.max_skew
            ));
        }
    }
    None
}

fn skew_parts(c: &Constraint, k: &KeyCounts, domain: u32) -> (i64, i64) {
    let min = if k.num_domains < c.min_domains { 0 } else { k.min };
    (k.counts[domain as usize], min)
}

/// Filter: every constraint's key on the node, and the skew within maxSkew.
pub fn filter(s: &SpreadFilter, node: NodeId) -> Result<(), Rejection> {
    for (c, k) in s.constraints.iter().zip(&s.keys) {
        let Some(d) = k.domains.of(node) else {
            return Err(Rejection::new(NAME, true, REASON_MISSING_LABEL));
        };
        let (count, min) = skew_parts(c, k, d);
        if count + i64::from(c.self_match) - min > c.max_skew {
            return Err(Rejection::new(NAME, false, REASON));
        }
    }
    Ok(())
}

/// PreScore + Score + NormalizeScore over the feasible nodes: the normalized score of each, or
/// `None` when the pod has no ScheduleAnyway constraint (the plugin is skipped).
pub fn score(
    state: &CycleState<'_>,
    feasible: &[NodeId],
    cluster: &Cluster,
    cache: &mut TopologyCache,
    args: &PodTopologySpreadArgs,
) -> Option<Vec<i64>> {
    let (constraints, system) = constraints(state, cluster, args, "ScheduleAnyway");
    if constraints.is_empty() || cluster.nodes.is_empty() {
        return None;
    }
    let require_all = !system;
    let domains: Vec<Arc<Domains>> = constraints.iter().map(|c| cache.domains.get(cluster, &c.topology_key)).collect();
    let ignored: Vec<bool> = feasible.iter().map(|n| require_all && !has_all_keys(&domains, *n)).collect();
    let scored = ignored.iter().filter(|i| !**i).count();
    let mut raw = vec![0f64; feasible.len()];
    for (ci, c) in constraints.iter().enumerate() {
        let d = &domains[ci];
        let hostname = c.topology_key == HOSTNAME;
        // The domains of the scored nodes (a node without the key is in the "" domain upstream).
        let mut wanted = vec![false; d.len()];
        let mut missing = false;
        for (n, _) in feasible.iter().zip(&ignored).filter(|(_, i)| !**i) {
            match d.of(*n) {
                Some(x) => wanted[x as usize] = true,
                None => missing = true,
            }
        }
        let size = if hostname { scored } else { wanted.iter().filter(|w| **w).count() + usize::from(missing) };
        let weight = ((size + 2) as f64).ln();
        let counts = cache.memos.counts(cluster, c.matcher.fingerprint(), |n| c.matcher.count_on(n, cluster));
        let mut per_domain = vec![0i64; d.len()];
        if !hostname {
            for (i, node) in cluster.nodes.iter().enumerate() {
                let id = NodeId(i as u32);
                let Some(x) = d.of(id) else { continue };
                if !wanted[x as usize] || (require_all && !has_all_keys(&domains, id)) || !included(c, state, node) {
                    continue;
                }
                per_domain[x as usize] += i64::from(counts[i]);
            }
        }
        for (j, n) in feasible.iter().enumerate() {
            let Some(x) = d.of(*n).filter(|_| !ignored[j]) else { continue };
            let count = if hostname { i64::from(counts[n.0 as usize]) } else { per_domain[x as usize] };
            raw[j] += count as f64 * weight + (c.max_skew - 1) as f64;
        }
    }
    let raw: Vec<i64> = raw.iter().map(|s| s.round() as i64).collect();
    Some(normalize(&raw, &ignored))
}

/// NormalizeScore: fewer matching pods is better; ignored nodes get 0.
fn normalize(raw: &[i64], ignored: &[bool]) -> Vec<i64> {
    let scored = || raw.iter().zip(ignored).filter(|(_, i)| !**i).map(|(s, _)| *s);
    let min = scored().min().unwrap_or(0);
    let max = scored().max().unwrap_or(0);
    raw.iter()
        .zip(ignored)
        .map(|(s, i)| match (*i, max) {
            (true, _) => 0,
            (false, 0) => MAX_NODE_SCORE,
            (false, _) => MAX_NODE_SCORE * (max + min - s) / max,
        })
        .collect()
}

#[cfg(test)]
#[path = "pod_topology_spread_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "pod_topology_spread_defaults_tests.rs"]
mod defaults_tests;
