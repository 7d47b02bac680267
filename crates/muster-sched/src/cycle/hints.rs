//! The queueing hints that look at an event's object: PodTopologySpread's and InterPodAffinity's
//! `isSchedulableAfterPodChange` and `isSchedulableAfterNodeChange`. A pending pod one of them
//! rejected is woken by another pod's arrival, departure or relabeling only when that pod could
//! count for its spread constraints or its affinity terms, and by a node's arrival, departure or
//! relabeling only when the node carries the topology keys they spread or meet over.
//!
//! Beyond upstream (each only wakes a pod upstream would leave waiting until the five-minute
//! flush, where a Filter verdict could change): an anti-affinity term is met or left term by term (upstream asks for a pod matching all of the
//! pending pod's anti-affinity terms); any node's change wakes a pod InterPodAffinity rejected
//! while a running pod has required anti-affinity (its terms' keys are not the pending pod's),
//! and so does a node's deletion (upstream does not register it: it counts a deleted node's
//! pods until they are deleted; muster's store stops counting them at once).

use std::collections::BTreeMap;

use crate::cluster::{Cluster, PodId, PodInfo};
use crate::plugins::inter_pod_affinity::AffinityTerms;
use crate::plugins::pod_matcher::pod_labels;
use crate::plugins::pod_topology_spread::{self, Constraint, PodTopologySpreadArgs};
use crate::queue::{Checked, Wake};
use crate::store::{PodBefore, Subject};

use super::FitError;

/// Events that carry an object the hints below look at.
const WITH_OBJECT: Wake = Wake::ASSIGNED_POD_ADDED
    .union(Wake::ASSIGNED_POD_LABELS_CHANGED)
    .union(Wake::ASSIGNED_POD_DELETED)
    .union(Wake::NODE_ADDED)
    .union(Wake::NODE_DELETED)
    .union(Wake::NODE_LABELS_CHANGED)
    .union(Wake::NODE_TAINTS_CHANGED);

/// Which events of `wake` (what a pod's failure `e` waits for) only PodTopologySpread or
/// InterPodAffinity wait for, and which of the two rejected it.
pub fn checked_for(e: &FitError, wake: Wake) -> Checked {
    if e.pre_filter_message.is_some() || e.group_message.is_some() || e.rejections.is_empty() {
        return Checked::default();
    }
    let is = |name: &str| e.rejections.iter().any(|r| r.plugin == name);
    let (spreads, affine) = (is(pod_topology_spread::NAME), is(crate::plugins::inter_pod_affinity::NAME));
    let others = e
        .rejections
        .iter()
        .filter(|r| r.plugin != pod_topology_spread::NAME && r.plugin != crate::plugins::inter_pod_affinity::NAME)
        .fold(Wake::NONE, |w, r| w.union(Wake::for_plugin(r.plugin)));
    let events = wake.intersection(WITH_OBJECT).without(others);
    Checked { events, spread: spreads, affinity: affine }
}

/// Whether the object of `event` may help `pod`, which waits for it through `checked`: the
/// hint of some plugin that rejected it says Queue. No object: yes.
pub fn queues(
    cluster: &Cluster,
    spread: &PodTopologySpreadArgs,
    pod: PodId,
    checked: Checked,
    event: Wake,
    subject: &Subject,
) -> bool {
    let pending = cluster.pod(pod);
    match subject {
        Subject::None => true,
        Subject::Pod { id, before } => {
            let change = PodChange::of(cluster, *id, before, event);
            (checked.spread && spread_pod_hint(pending, &change, cluster, spread))
                || (checked.affinity && affinity_pod_hint(pending, &change, cluster))
        }
        Subject::Node { id, old_labels, taints_changed } => {
            let node = &cluster.nodes[id.0 as usize];
            let now = (!event.intersects(Wake::NODE_DELETED)).then_some(&node.detail.labels);
            let before = match (event.intersects(Wake::NODE_ADDED), old_labels) {
                (true, _) => None,
                (false, Some(old)) => Some(old),
                (false, None) => Some(&node.detail.labels),
            };
            let change = NodeChange { before, now, taints_changed: *taints_changed };
            (checked.spread && spread_node_hint(pending, &change, cluster, spread))
                || (checked.affinity && affinity_node_hint(pending, &change, cluster))
        }
    }
}

/// A pod on a node as a hint sees it.
struct PodSide<'a> {
    namespace: &'a str,
    labels: &'a BTreeMap<String, String>,
    /// The pod itself, where the hint needs more than its labels (a deleted pod's terms).
    info: &'a PodInfo,
}

/// An assigned pod's change: as it was on its node (`None`: it was not on one) and as it is.
struct PodChange<'a> {
    before: Option<PodSide<'a>>,
    now: Option<PodSide<'a>>,
}

impl<'a> PodChange<'a> {
    fn of(cluster: &'a Cluster, id: PodId, before: &'a PodBefore, event: Wake) -> PodChange<'a> {
        let side = |info: &'a PodInfo, labels: Option<&'a BTreeMap<String, String>>| PodSide {
            namespace: info.pod.meta().namespace.as_deref().unwrap_or("default"),
            labels: labels.unwrap_or_else(|| pod_labels(&info.pod)),
            info,
        };
        let current = cluster.pod(id);
        let old = match before {
            PodBefore::Same => side(current, None),
            PodBefore::Labels(l) => side(current, Some(l)),
            PodBefore::Deleted(p) => side(p, None),
        };
        let was = event.intersects(Wake::ASSIGNED_POD_LABELS_CHANGED.union(Wake::ASSIGNED_POD_DELETED));
        let is = event.intersects(Wake::ASSIGNED_POD_LABELS_CHANGED.union(Wake::ASSIGNED_POD_ADDED));
        PodChange { before: was.then_some(old), now: is.then(|| side(current, None)) }
    }
}

/// PodTopologySpread: a pod of the pending pod's namespace that comes or goes matching a hard
/// constraint's selector, or whose relabeling changes whether one matches.
fn spread_pod_hint(pending: &PodInfo, change: &PodChange<'_>, cluster: &Cluster, args: &PodTopologySpreadArgs) -> bool {
    let ns = pending.pod.meta().namespace.as_deref().unwrap_or("default");
    let involved = |s: &Option<PodSide<'_>>| s.as_ref().is_none_or(|s| s.namespace == ns);
    if !involved(&change.before) || !involved(&change.now) {
        return false;
    }
    let constraints = pod_topology_spread::hard_constraints(&pending.pod, cluster, args);
    let selects = |c: &Constraint, s: &PodSide<'_>| c.selects(s.namespace, s.labels);
    match (&change.before, &change.now) {
        (Some(old), Some(new)) => {
            old.labels != new.labels && constraints.iter().any(|c| selects(c, old) != selects(c, new))
        }
        (Some(side), None) | (None, Some(side)) => constraints.iter().any(|c| selects(c, side)),
        (None, None) => false,
    }
}

/// InterPodAffinity: a pod that comes (or is relabeled) to match all the pending pod's affinity
/// terms, or that goes (or is relabeled) out of one of its anti-affinity terms; a pod deleted
/// whose own required anti-affinity selected the pending pod.
fn affinity_pod_hint(pending: &PodInfo, change: &PodChange<'_>, cluster: &Cluster) -> bool {
    let none = AffinityTerms::default();
    let terms = pending.affinity.as_deref().unwrap_or(&none);
    let all = |s: &PodSide<'_>| {
        !terms.required_affinity.is_empty()
            && terms.required_affinity.iter().all(|t| t.matches_labels(s.namespace, s.labels, cluster))
    };
    let anti =
        |s: &PodSide<'_>, i: usize| terms.required_anti_affinity[i].matches_labels(s.namespace, s.labels, cluster);
    let anti_terms = 0..terms.required_anti_affinity.len();
    match (&change.before, &change.now) {
        (Some(old), Some(new)) => (!all(old) && all(new)) || anti_terms.clone().any(|i| anti(old, i) && !anti(new, i)),
        (None, Some(new)) => all(new),
        (Some(old), None) => {
            anti_terms.clone().any(|i| anti(old, i))
                || old
                    .info
                    .affinity
                    .as_ref()
                    .is_some_and(|t| t.required_anti_affinity.iter().any(|term| term.matches(&pending.pod, cluster)))
        }
        (None, None) => false,
    }
}

/// A node's change: its labels before (`None`: it is new) and now (`None`: it is deleted).
struct NodeChange<'a> {
    before: Option<&'a BTreeMap<String, String>>,
    now: Option<&'a BTreeMap<String, String>>,
    taints_changed: bool,
}

/// PodTopologySpread: a node that has (or had) every constraint's topology key comes, goes,
/// gains or loses one, changes one's value, or changes its taints.
fn spread_node_hint(
    pending: &PodInfo,
    change: &NodeChange<'_>,
    cluster: &Cluster,
    args: &PodTopologySpreadArgs,
) -> bool {
    let constraints = pod_topology_spread::hard_constraints(&pending.pod, cluster, args);
    let has_keys = |l: &BTreeMap<String, String>| constraints.iter().all(|c| l.contains_key(&c.topology_key));
    match (change.before, change.now) {
        (Some(old), Some(new)) => {
            let (was, is) = (has_keys(old), has_keys(new));
            was != is
                || (is
                    && (change.taints_changed
                        || constraints.iter().any(|c| old.get(&c.topology_key) != new.get(&c.topology_key))))
        }
        (Some(labels), None) | (None, Some(labels)) => has_keys(labels),
        (None, None) => false,
    }
}

/// InterPodAffinity: a node that gains an affinity term's topology key or changes its value; a
/// new node, or one that loses an anti-affinity term's key or changes its value; a deleted node
/// (the store stops counting its pods); any node while running pods have required anti-affinity
/// (their keys are not the pending pod's).
fn affinity_node_hint(pending: &PodInfo, change: &NodeChange<'_>, cluster: &Cluster) -> bool {
    // A deleted node's pods stop counting at once (their anti-affinity too).
    if change.now.is_none() || cluster.inter_pod.required_anti_affinity > 0 {
        return true;
    }
    let Some(terms) = pending.affinity.as_deref() else { return false };
    fn value<'l>(l: Option<&'l BTreeMap<String, String>>, k: &str) -> Option<&'l String> {
        l.and_then(|l| l.get(k))
    }
    let changed = |k: &str| value(change.before, k) != value(change.now, k);
    let affinity = terms
        .required_affinity
        .iter()
        .any(|t| value(change.now, &t.topology_key).is_some() && changed(&t.topology_key));
    let anti = match change.before {
        None => !terms.required_anti_affinity.is_empty(),
        Some(_) => terms
            .required_anti_affinity
            .iter()
            .any(|t| value(change.before, &t.topology_key).is_some() && changed(&t.topology_key)),
    };
    affinity || anti
}
