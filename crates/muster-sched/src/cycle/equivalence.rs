//! Equivalent pods: two pending pods that every Filter plugin and DefaultPreemption judge alike on
//! any cluster state, so that once one is found unschedulable the other is too until the cluster
//! changes. kube-scheduler tries each (upstream dropped its equivalence cache in 1.12); muster
//! gives the second the first's verdict without a cycle, which changes no decision and no reason.
//!
//! Equivalent means equal in everything a Filter, PreFilter or PostFilter reads: requests,
//! priority and preemption policy, namespace, owners (spreading's default constraints), labels
//! where inter-pod terms can read them, node selector, affinity, tolerations, spread constraints, host ports,
//! the nominated node, volumes (none of them generic ephemeral: their claims are the pod's own), and claims with equal specs that nobody has allocated or reserved. A
//! plugin that reads a new part of a pod must add it here. Only verdicts made of per-node
//! rejections are reused: a PreFilter or group message, or a plugin's error, may name the pod's
//! own objects.

use k8s_openapi::api::core::v1::ContainerPort;
use k8s_openapi::api::resource::v1::ResourceClaimSpec;

use crate::stored_pod::StoredPod;

use super::*;
use crate::cluster::PodInfo;

/// At most this many classes are remembered per batch: a batch of pods that are all different
/// costs each pod at most this many key comparisons.
pub(super) const MAX_CLASSES: usize = 64;

/// What equivalent pods share and is cheap to compare, checked before [`equivalent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ClassKey {
    shape: u32,
    priority: i32,
    claims: usize,
}

pub(super) fn key(p: &PodInfo) -> ClassKey {
    ClassKey { shape: p.shape, priority: p.priority, claims: p.claims.len() }
}

/// A class of equivalent pods found unschedulable: the pod whose cycle found it, its verdict,
/// and what that pod's failure waits for (an equivalent pod's waits for the same: the hints read
/// the verdict and the parts of the pod equivalence compares).
pub(super) struct FailedClass {
    pub(super) key: ClassKey,
    pub(super) pod: PodId,
    pub(super) verdict: FitError,
    pub(super) wake: Wake,
    pub(super) checked: Checked,
}

/// Whether the verdict `e` on `pod` may serve equivalent pods.
pub(super) fn cacheable(c: &Cluster, pod: PodId, e: &FitError) -> bool {
    e.pre_filter.is_none() && e.group.is_none() && e.error.is_none() && own_claims_free(c, c.pod(pod))
}

/// Whether pending pods `a` and `b` are judged alike by every plugin on any state (`specs`: the
/// claims' spec classes known so far).
pub(super) fn equivalent(c: &Cluster, classes: &Classes, a: PodId, b: PodId) -> bool {
    let (pa, pb) = (c.pod(a), c.pod(b));
    // One shape is one `requests` and `non_zero` (the store numbers each pair once): compared by
    // its number, without reading the requests.
    debug_assert!(pa.shape != pb.shape || (pa.requests == pb.requests && pa.non_zero == pb.non_zero));
    a != b
        && pa.shape == pb.shape
        && pa.priority == pb.priority
        && pa.dra_extended == pb.dra_extended
        && pb.stale_extended_claim.is_none()
        && own_claims_free(c, pb)
        && same_claim_specs(c, &classes.specs, pa, pb)
        && same_pods(c, &classes.pods, a, b)
}

/// A class of equivalent pods by name, so that it can be kept: pods of equal signatures are
/// [`equivalent`] (their shapes, priorities, pod classes and claims' spec classes are equal, their
/// claims their own, and neither has labels that matter or extended resources served through DRA).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Signature {
    shape: u32,
    priority: i32,
    pod: u64,
    claims: Vec<u64>,
}

/// `pod`'s [`Signature`]; `None` for a pod the signature cannot name (labels that matter,
/// extended resources through DRA, claims not its own or not found).
pub(super) fn signature(c: &Cluster, classes: &Classes, pod: PodId) -> Option<Signature> {
    let p = c.pod(pod);
    if !p.dra_extended.is_empty() || p.stale_extended_claim.is_some() || !own_claims_free(c, p) || labels_matter(c, p) {
        return None;
    }
    classes.specs.make_room();
    classes.pods.make_room();
    let claims =
        p.claims.iter().map(|r| r.as_ref().ok().map(|id| classes.specs.class_of(c, *id))).collect::<Option<_>>()?;
    Some(Signature { shape: p.shape, priority: p.priority, pod: classes.pods.class_of(c, pod), claims })
}

/// The classes that make comparing two pods cheap: their claims' specs, and the pods themselves.
#[derive(Default)]
pub(super) struct Classes {
    pub(super) specs: SpecClasses,
    pub(super) pods: PodClasses,
}

/// [`same_pod`] for pods `a` and `b`, by their classes (and their labels, when labels matter).
fn same_pods(c: &Cluster, pods: &PodClasses, a: PodId, b: PodId) -> bool {
    let labels_matter = labels_matter(c, c.pod(a));
    let (pa, pb) = (&c.pod(a).pod, &c.pod(b).pod);
    pods.make_room();
    let same = pods.class_of(c, a) == pods.class_of(c, b) && (!labels_matter || pa.meta().labels == pb.meta().labels);
    debug_assert_eq!(same, same_pod(pa, pb, labels_matter), "pods {a:?} and {b:?} classed wrong");
    same
}

/// Labels decide a Filter verdict only through inter-pod terms: an existing pod's required
/// anti-affinity, or the pod's own affinity or spread constraints (which may select the pod
/// itself). Without any, pods that differ only in labels are judged alike. Read from the terms
/// the store parsed (`affinity`, `spread_hard`: `None` when the pod has none), not the object.
fn labels_matter(c: &Cluster, p: &PodInfo) -> bool {
    debug_assert_eq!(p.spread_hard.is_some(), {
        let spread = p.pod.spec().and_then(|s| s.topology_spread_constraints.as_ref());
        spread.is_some_and(|t| !t.is_empty())
    });
    c.inter_pod.required_anti_affinity > 0 || p.affinity.is_some() || p.spread_hard.is_some()
}

/// Not in a PodGroup, and every claim resolved, unallocated and reserved for nobody.
pub(super) fn own_claims_free(c: &Cluster, p: &PodInfo) -> bool {
    p.group.is_none() && p.claims.iter().all(|r| r.as_ref().is_ok_and(|id| !c.claims[id.index()].in_use()))
}

fn same_claim_specs(c: &Cluster, specs: &SpecClasses, a: &PodInfo, b: &PodInfo) -> bool {
    specs.make_room();
    a.claims.len() == b.claims.len()
        && a.claims.iter().zip(&b.claims).all(|(x, y)| match (x, y) {
            (Ok(x), Ok(y)) => {
                let same = specs.class_of(c, *x) == specs.class_of(c, *y);
                debug_assert_eq!(same, c.claims[x.index()].claim.spec == c.claims[y.index()].claim.spec);
                same
            }
            _ => false,
        })
}

/// At most this many spec classes are kept (each holds a copy of its spec); past it they are
/// forgotten, and claims are classed again under new numbers.
const MAX_SPEC_CLASSES: usize = 1 << 12;

/// Claims by spec: two claims in one class have equal specs, so the pods that wait with claims
/// from one template compare their claims by a number each, not field by field (a claim's spec
/// is compared with the classes' specs once per spec of the claim).
///
/// Why it is exact: a claim joins a class when its spec equals the class's (a copy of the spec
/// that opened it), and its class is read again only while the claim keeps the spec it was
/// classed with ([`crate::cluster::ClaimInfo::spec_stamp`], new whenever a slot's spec may have
/// changed). Two claims of one class are then equal to one spec, unchanged since.
#[derive(Default)]
pub(super) struct SpecClasses(std::cell::RefCell<ClaimSpecs>);

#[derive(Default)]
struct ClaimSpecs {
    /// Per claim slot: the stamp of the spec it was classed with, and its class.
    by_claim: Vec<(u64, u64)>,
    /// By spec fingerprint: each class's number and spec.
    specs: std::collections::HashMap<u64, Vec<(u64, Option<ResourceClaimSpec>)>>,
    /// Classes in `specs`.
    open: usize,
    /// The last class number given. Numbers are never given twice, not even after the classes
    /// are forgotten: a number read before that can never equal one given after.
    last: u64,
}

impl SpecClasses {
    /// Forgets every class when there are too many, before a comparison (not inside one: the
    /// claims it reads are then all classed again).
    fn make_room(&self) {
        let mut classes = self.0.borrow_mut();
        if classes.open >= MAX_SPEC_CLASSES {
            *classes = ClaimSpecs { last: classes.last, ..ClaimSpecs::default() };
        }
    }

    /// The class of `claim`'s spec as it is now.
    fn class_of(&self, c: &Cluster, claim: crate::cluster::ClaimId) -> u64 {
        let info = &c.claims[claim];
        let mut classes = self.0.borrow_mut();
        if let Some(&(stamp, class)) = classes.by_claim.get(claim.index())
            && stamp == info.spec_stamp
        {
            return class;
        }
        let ClaimSpecs { by_claim, specs, open, last } = &mut *classes;
        let bucket = specs.entry(info.spec_fingerprint).or_default();
        let class = match bucket.iter().find(|(_, spec)| *spec == info.claim.spec) {
            Some(&(class, _)) => class,
            None => {
                *last += 1;
                *open += 1;
                bucket.push((*last, info.claim.spec.clone()));
                *last
            }
        };
        if by_claim.len() <= claim.index() {
            by_claim.resize(claim.index() + 1, (0, 0));
        }
        by_claim[claim.index()] = (info.spec_stamp, class);
        class
    }
}

/// At most this many pod classes are kept (each holds a copy of its first pod); past it they
/// are forgotten, and pods are classed again under new numbers.
const MAX_POD_CLASSES: usize = 1 << 12;

/// Pods by what [`same_pod`] compares, labels aside: pods of one class are alike in all of it,
/// so equivalent pods that wait together are compared by a number each, not field by field,
/// at every attempt (a pod is compared with the classes' first pods once per stamp).
///
/// Why it is exact: a pod joins a class when [`same_pod`] finds it alike the copy of the pod
/// that opened it (an equivalence: every part is compared for equality), and its class is read
/// again only while the pod keeps the stamp it was classed with ([`StoredPod::stamp`], new
/// whenever the pod is made or its status may change). Numbers are never given twice.
#[derive(Default)]
pub(super) struct PodClasses(std::cell::RefCell<PodTable>);

#[derive(Default)]
struct PodTable {
    /// Per pod slot: the stamp of the pod it was classed with, and its class.
    by_pod: Vec<(u64, u64)>,
    /// By [`pod_fingerprint`]: each class's number and first pod.
    firsts: std::collections::HashMap<u64, Vec<(u64, StoredPod)>>,
    /// Classes in `firsts`.
    open: usize,
    /// The last class number given.
    last: u64,
}

impl PodClasses {
    /// Forgets every class when there are too many, before a comparison (not inside one).
    fn make_room(&self) {
        let mut t = self.0.borrow_mut();
        if t.open >= MAX_POD_CLASSES {
            *t = PodTable { last: t.last, ..PodTable::default() };
        }
    }

    /// The class of pod `pod` as it is now.
    fn class_of(&self, c: &Cluster, pod: PodId) -> u64 {
        let p = &c.pod(pod).pod;
        let (stamp, slot) = (p.stamp(), pod.0 as usize);
        let mut t = self.0.borrow_mut();
        if let Some(&(s, class)) = t.by_pod.get(slot)
            && s == stamp
            && stamp != 0
        {
            return class;
        }
        let PodTable { by_pod, firsts, open, last } = &mut *t;
        let bucket = firsts.entry(pod_fingerprint(p)).or_default();
        let class = match bucket.iter().find(|(_, first)| same_pod(first, p, false)) {
            Some(&(class, _)) => class,
            None => {
                *last += 1;
                *open += 1;
                bucket.push((*last, p.detached()));
                *last
            }
        };
        if by_pod.len() <= slot {
            by_pod.resize(slot + 1, (0, 0));
        }
        by_pod[slot] = (stamp, class);
        class
    }
}

/// A hash of some of what [`same_pod`] compares (pods it finds alike hash alike).
fn pod_fingerprint(p: &StoredPod) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(0).build_hasher();
    let meta = p.meta();
    meta.namespace.hash(&mut h);
    for o in meta.owner_references.iter().flatten() {
        (&o.uid, &o.name, &o.kind).hash(&mut h);
    }
    p.node_name().hash(&mut h);
    p.status().and_then(|s| s.nominated_node_name.as_deref()).hash(&mut h);
    p.containers().len().hash(&mut h);
    if let Some(s) = p.spec() {
        s.node_selector.hash(&mut h);
        (&s.priority_class_name, &s.scheduler_name, &s.preemption_policy).hash(&mut h);
        s.tolerations.as_ref().map(Vec::len).hash(&mut h);
        s.volumes.as_ref().map(Vec::len).hash(&mut h);
    }
    h.finish()
}

fn same_pod(a: &StoredPod, b: &StoredPod, labels_matter: bool) -> bool {
    let (ma, mb) = (a.meta(), b.meta());
    let (Some(sa), Some(sb)) = (a.spec(), b.spec()) else { return false };
    let nominated = |p: &StoredPod| p.status().and_then(|s| s.nominated_node_name.clone());
    ma.namespace == mb.namespace
        && (!labels_matter || ma.labels == mb.labels)
        && ma.owner_references == mb.owner_references
        && sa.node_selector == sb.node_selector
        && sa.affinity == sb.affinity
        && sa.tolerations == sb.tolerations
        && sa.topology_spread_constraints == sb.topology_spread_constraints
        && sa.preemption_policy == sb.preemption_policy
        && sa.priority_class_name == sb.priority_class_name
        && sa.scheduler_name == sb.scheduler_name
        && a.node_name() == b.node_name()
        && ports(a) == ports(b)
        && nominated(a) == nominated(b)
        && sa.volumes == sb.volumes
        && !sa.volumes.iter().flatten().any(|v| v.ephemeral.is_some())
}

/// Each container's ports and restart policy (init containers first, then regular ones).
fn ports(pod: &StoredPod) -> Vec<(bool, Option<&str>, &[ContainerPort])> {
    pod.containers().iter().map(|c| (c.init, c.restart_policy.as_deref(), &c.ports[..])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClaimId;
    use k8s_openapi::api::resource::v1::ResourceClaim;

    /// Claim `ml/<name>` asking `count` devices of class `gpu`.
    fn claim(name: &str, count: i64) -> ResourceClaim {
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]}}}))
        .unwrap()
    }

    #[test]
    fn claims_share_a_spec_class_exactly_while_their_specs_are_equal() {
        let mut c =
            Cluster::build(Vec::new(), Vec::<StoredPod>::new(), &[], &crate::SchedulerNames::default()).unwrap();
        c.add_claims(vec![claim("a", 1), claim("b", 1), claim("c", 2)], &[]);
        let specs = SpecClasses::default();
        let class = |c: &Cluster, i: u32| specs.class_of(c, ClaimId(i));
        assert_eq!(class(&c, 0), class(&c, 1), "equal specs, one class");
        assert_ne!(class(&c, 0), class(&c, 2));
        // A status written back keeps the spec and its class.
        let mut written = claim("a", 1);
        written.status = Some(Default::default());
        c.claims[ClaimId(0)].respec(written);
        assert_eq!(class(&c, 0), class(&c, 1));
        // A spec replaced: the class is found again, and the other claims keep theirs.
        c.claims[ClaimId(1)].respec(claim("b", 2));
        assert_eq!(class(&c, 1), class(&c, 2), "b now asks what c asks");
        assert_ne!(class(&c, 0), class(&c, 1));
        // A slot taken by a new claim is classed by its own spec.
        c.claims[ClaimId(2)] = crate::cluster::ClaimInfo::new(claim("d", 1), false, None);
        assert_eq!(class(&c, 2), class(&c, 0));
    }

    #[test]
    fn classes_numbered_again_past_the_cap_still_follow_the_specs() {
        let n = MAX_SPEC_CLASSES as i64 + 100;
        let mut c =
            Cluster::build(Vec::new(), Vec::<StoredPod>::new(), &[], &crate::SchedulerNames::default()).unwrap();
        // Claim 2i and 2i + 1 ask i devices: n distinct specs, two claims each.
        c.add_claims((0..2 * n).map(|i| claim(&format!("c{i}"), 1 + i / 2)).collect(), &[]);
        let specs = SpecClasses::default();
        let mut numbers_seen = std::collections::HashSet::new();
        for i in 0..n as u32 {
            specs.make_room();
            let (a, b) = (specs.class_of(&c, ClaimId(2 * i)), specs.class_of(&c, ClaimId(2 * i + 1)));
            assert_eq!(a, b, "claims {} and {} ask alike", 2 * i, 2 * i + 1);
            assert!(numbers_seen.insert(a), "spec {i}'s number is its own");
            // A claim classed before the classes were forgotten is classed again: never alike
            // a different spec.
            if i > 0 {
                assert_ne!(specs.class_of(&c, ClaimId(2 * i - 1)), a);
            }
        }
    }
}
