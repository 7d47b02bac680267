//! The queueing hints that look at an event's object: PodTopologySpread's and InterPodAffinity's
//! `isSchedulableAfterPodChange` and `isSchedulableAfterNodeChange`. A pending pod one of them
//! rejected is woken by another pod's arrival, departure or relabeling only when that pod could
//! count for its spread constraints or its affinity terms, and by a node's arrival, departure or
//! relabeling only when the node carries the topology keys they spread or meet over.
//!
//! Beyond upstream (each only wakes a pod upstream would leave waiting until the five-minute
//! flush, where a Filter verdict could change): an anti-affinity term is met or left term by
//! term (upstream asks for a pod matching all of the pending pod's anti-affinity terms); any
//! node's change wakes a pod InterPodAffinity rejected while a running pod has required
//! anti-affinity (its terms' keys are not the pending pod's), and so does a node's deletion
//! (upstream does not register it: it counts a deleted node's pods until they are deleted;
//! muster's store stops counting them at once); a pod the store moves between nodes (a pod of
//! the API never moves) is a departure and an arrival.

use std::collections::BTreeMap;

use crate::cluster::{Cluster, PodId, PodInfo};
use crate::plugins::inter_pod_affinity::AffinityTerms;
use crate::plugins::pod_matcher::pod_labels;
use crate::plugins::pod_topology_spread::{self, PodTopologySpreadArgs};
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
    if e.pre_filter.is_some() || e.group.is_some() || e.rejections().is_empty() {
        return Checked::default();
    }
    let is = |name: &str| e.rejections().iter().any(|r| r.plugin == name);
    let (spreads, affine) = (is(pod_topology_spread::NAME), is(crate::plugins::inter_pod_affinity::NAME));
    let others = e
        .rejections()
        .iter()
        .filter(|r| r.plugin != pod_topology_spread::NAME && r.plugin != crate::plugins::inter_pod_affinity::NAME)
        .fold(Wake::NONE, |w, r| w.union(Wake::for_plugin(r.plugin)));
    let events = wake.intersection(WITH_OBJECT).without(others);
    Checked { events, spread: spreads, affinity: affine, group: 0 }
}

/// What the hints read of a pending pod, hashed (never 0): pods with equal hashes are likely
/// judged alike, and [`same_inputs`] says whether they are.
pub fn group_of(pod: &PodInfo) -> u64 {
    use std::hash::{Hash, Hasher};
    let (meta, spec) = (pod.pod.meta(), pod.pod.spec());
    let mut h = std::hash::DefaultHasher::new();
    meta.namespace.hash(&mut h);
    meta.labels.hash(&mut h);
    format!("{:?}", meta.owner_references).hash(&mut h);
    if let Some(spec) = spec {
        spec.scheduler_name.hash(&mut h);
        format!("{:?}{:?}", spec.affinity, spec.topology_spread_constraints).hash(&mut h);
    }
    h.finish() | 1
}

/// Whether the hints judge two pending pods alike on any event: the same namespace, labels,
/// owners (the default spread constraints' selectors), scheduler name (the profile's args),
/// affinity and spread constraints.
pub fn same_inputs(a: &PodInfo, b: &PodInfo) -> bool {
    let (ma, mb) = (a.pod.meta(), b.pod.meta());
    let (sa, sb) = (a.pod.spec(), b.pod.spec());
    ma.namespace == mb.namespace
        && ma.labels == mb.labels
        && ma.owner_references == mb.owner_references
        && sa.map(|s| (&s.scheduler_name, &s.affinity, &s.topology_spread_constraints))
            == sb.map(|s| (&s.scheduler_name, &s.affinity, &s.topology_spread_constraints))
}

/// An event's object as the hints read it, made once per event.
pub enum Seen<'a> {
    /// No object: every hint says yes.
    Nothing,
    Pod(PodChange<'a>),
    Node(NodeChange<'a>),
}

impl<'a> Seen<'a> {
    pub fn of(cluster: &'a Cluster, event: Wake, subject: &'a Subject) -> Seen<'a> {
        match subject {
            Subject::None => Seen::Nothing,
            Subject::Pod { id, before } => Seen::Pod(PodChange::of(cluster, *id, before, event)),
            Subject::Node { id, old_labels, taints_changed } => {
                let node = &cluster.nodes[id.0 as usize];
                let now = (!event.intersects(Wake::NODE_DELETED)).then_some(&node.detail.labels);
                let before = match (event.intersects(Wake::NODE_ADDED), old_labels) {
                    (true, _) => None,
                    (false, Some(old)) => Some(old),
                    (false, None) => Some(&node.detail.labels),
                };
                Seen::Node(NodeChange { before, now, taints_changed: *taints_changed })
            }
        }
    }

    /// Whether the object may help `pod`, which waits for the event through `checked`: the hint
    /// of some plugin that rejected it says Queue. `spread` gives the pod's PodTopologySpread
    /// args (its profile's), asked only when that plugin rejected it.
    pub fn queues<'s>(
        &self,
        cluster: &Cluster,
        pod: PodId,
        checked: Checked,
        spread: impl FnOnce(&PodInfo) -> &'s PodTopologySpreadArgs,
    ) -> bool {
        let pending = cluster.pod(pod);
        let args = || spread(pending);
        match self {
            Seen::Nothing => true,
            Seen::Pod(change) => {
                (checked.affinity && affinity_pod_hint(pending, change, cluster))
                    || (checked.spread && spread_pod_hint(pending, change, cluster, args()))
            }
            Seen::Node(change) => {
                (checked.affinity && affinity_node_hint(pending, change, cluster))
                    || (checked.spread && spread_node_hint(pending, change, cluster, args()))
            }
        }
    }
}

/// A pod on a node as a hint sees it.
pub struct PodSide<'a> {
    namespace: &'a str,
    labels: &'a BTreeMap<String, String>,
    /// The pod itself, where the hint needs more than its labels (a deleted pod's terms).
    info: &'a PodInfo,
}

/// An assigned pod's change, as the hints tell the cases apart.
pub enum PodChange<'a> {
    /// It came to a node (a binding confirmed included).
    Added(PodSide<'a>),
    /// It left its node, or was deleted.
    Deleted(PodSide<'a>),
    /// Its labels changed on its node.
    Relabeled(PodSide<'a>, PodSide<'a>),
    /// It left one node for another (the store allows it; a pod of the API never does): a
    /// deletion there and an arrival here.
    Moved(PodSide<'a>, PodSide<'a>),
}

impl<'a> PodChange<'a> {
    fn of(cluster: &'a Cluster, id: PodId, before: &'a PodBefore, event: Wake) -> PodChange<'a> {
        let side = |info: &'a PodInfo, labels: Option<&'a BTreeMap<String, String>>| PodSide {
            namespace: info.pod.meta().namespace.as_deref().unwrap_or("default"),
            labels: labels.unwrap_or_else(|| pod_labels(&info.pod)),
            info,
        };
        let current = cluster.pod(id);
        let old = || match before {
            PodBefore::Same => side(current, None),
            PodBefore::Labels(l) => side(current, Some(l)),
            PodBefore::Deleted(p) => side(p, None),
        };
        let (added, deleted) =
            (event.intersects(Wake::ASSIGNED_POD_ADDED), event.intersects(Wake::ASSIGNED_POD_DELETED));
        match (added, deleted) {
            (true, true) => PodChange::Moved(old(), side(current, None)),
            (true, false) => PodChange::Added(side(current, None)),
            (false, true) => PodChange::Deleted(old()),
            (false, false) => PodChange::Relabeled(old(), side(current, None)),
        }
    }
}

/// PodTopologySpread: a pod of the pending pod's namespace that comes or goes matching a hard
/// constraint's selector, or whose relabeling changes whether one matches.
fn spread_pod_hint(pending: &PodInfo, change: &PodChange<'_>, cluster: &Cluster, args: &PodTopologySpreadArgs) -> bool {
    let ns = pending.pod.meta().namespace.as_deref().unwrap_or("default");
    let constraints = pod_topology_spread::hard_constraints(&pending.pod, cluster, args);
    // `involvedInTopologySpreading`: a pod of another namespace never counts.
    let counts = |s: &PodSide<'_>| s.namespace == ns && constraints.iter().any(|c| c.selects(s.namespace, s.labels));
    match change {
        PodChange::Added(side) | PodChange::Deleted(side) => counts(side),
        PodChange::Moved(old, new) => counts(old) || counts(new),
        PodChange::Relabeled(old, new) => {
            old.namespace == ns
                && old.labels != new.labels
                && constraints
                    .iter()
                    .any(|c| c.selects(old.namespace, old.labels) != c.selects(new.namespace, new.labels))
        }
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
    let anti_terms = || 0..terms.required_anti_affinity.len();
    let gone = |old: &PodSide<'_>| {
        anti_terms().any(|i| anti(old, i))
            || old
                .info
                .affinity
                .as_ref()
                .is_some_and(|t| t.required_anti_affinity.iter().any(|term| term.matches(&pending.pod, cluster)))
    };
    match change {
        PodChange::Added(new) => all(new),
        PodChange::Deleted(old) => gone(old),
        PodChange::Moved(old, new) => all(new) || gone(old),
        PodChange::Relabeled(old, new) => {
            (!all(old) && all(new)) || anti_terms().any(|i| anti(old, i) && !anti(new, i))
        }
    }
}

/// A node's change: its labels before (`None`: it is new) and now (`None`: it is deleted).
pub struct NodeChange<'a> {
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
