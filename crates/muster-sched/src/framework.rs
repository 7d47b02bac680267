//! The scheduling framework's vocabulary: plugin statuses, per-pod cycle state, fit errors.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, PreferredSchedulingTerm, Toleration};

use crate::cluster::{NodeId, PodInfo, ResourceId};

/// The highest score a Score plugin gives (`framework.MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;

/// Why a Filter rejected a node (`fwk.Status` with code Unschedulable or
/// UnschedulableAndUnresolvable). Reasons are upstream's texts.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rejection {
    pub plugin: &'static str,
    /// True for UnschedulableAndUnresolvable: preempting pods on the node would not help.
    pub unresolvable: bool,
    pub reasons: Vec<Cow<'static, str>>,
}

impl Rejection {
    pub fn new(plugin: &'static str, unresolvable: bool, reason: impl Into<Cow<'static, str>>) -> Self {
        Rejection { plugin, unresolvable, reasons: vec![reason.into()] }
    }
}

/// What PreFilter computes once per pod and Filter/Score read for every node (`CycleState`).
pub struct CycleState<'a> {
    pub pod: &'a PodInfo,
    /// The pod's cpu (milli), memory and ephemeral-storage requests.
    pub inline_requests: [i64; 3],
    /// True when the pod requests nothing beyond cpu, memory and ephemeral-storage.
    pub only_inline_requests: bool,
    pub tolerations: &'a [Toleration],
    /// Tolerations that can tolerate PreferNoSchedule taints (TaintToleration PreScore).
    pub prefer_tolerations: Vec<&'a Toleration>,
    pub node_selector: Option<&'a BTreeMap<String, String>>,
    pub required_affinity: Option<&'a NodeSelector>,
    pub preferred_affinity: &'a [PreferredSchedulingTerm],
    /// NodeAffinity's `addedAffinity` from the configuration: applied to every pod besides its own.
    pub added_required: Option<&'a NodeSelector>,
    pub added_preferred: &'a [PreferredSchedulingTerm],
    /// The containers' host ports (NodePorts); empty for most pods.
    pub host_ports: Vec<crate::plugins::node_ports::HostPort<'a>>,
    /// PodTopologySpread's and InterPodAffinity's PreFilter state; `None` when the plugin is
    /// skipped for the pod (set by [`CycleState::pre_filter_inter_pod`]).
    pub spread: Option<Box<crate::plugins::pod_topology_spread::SpreadFilter>>,
    pub pod_affinity: Option<Box<crate::plugins::inter_pod_affinity::AffinityFilter>>,
    /// The volume plugins' PreFilter state; `None` when they all skip the pod.
    pub volumes: Option<Box<crate::volumes::PodVolumeState>>,
    /// PodTopologySpread's default selector for the pod, built once per attempt when a default
    /// constraint needs it ([`crate::spread_selectors`]).
    pub default_spread_selector: std::cell::OnceCell<Vec<crate::plugins::pod_matcher::Requirement>>,
}

impl<'a> CycleState<'a> {
    pub fn new(pod: &'a PodInfo) -> Self {
        let spec = pod.pod.spec().expect("the model only holds pods with a spec");
        let tolerations = spec.tolerations.as_deref().unwrap_or(&[]);
        let node_affinity = spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
        let mut inline_requests = [0; 3];
        for &(id, v) in pod.requests.iter() {
            if let Some(slot) = inline_requests.get_mut(id.0 as usize) {
                *slot = v;
            }
        }
        CycleState {
            pod,
            inline_requests,
            only_inline_requests: pod.requests.iter().all(|(id, _)| (id.0 as usize) < 3),
            tolerations,
            prefer_tolerations: tolerations
                .iter()
                .filter(|t| matches!(t.effect.as_deref(), None | Some("") | Some("PreferNoSchedule")))
                .collect(),
            node_selector: spec.node_selector.as_ref().filter(|s| !s.is_empty()),
            required_affinity: node_affinity
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            preferred_affinity: node_affinity
                .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref())
                .unwrap_or(&[]),
            added_required: None,
            added_preferred: &[],
            host_ports: crate::plugins::node_ports::host_ports(&pod.pod),
            spread: None,
            pod_affinity: None,
            volumes: None,
            default_spread_selector: std::cell::OnceCell::new(),
        }
    }

    /// NodeAffinity's `addedAffinity` (`NodeAffinityArgs`), which the scheduler enforces on every
    /// pod in addition to the pod's own node affinity.
    pub fn add_affinity(&mut self, added: Option<&'a crate::AddedAffinity>) {
        let Some(a) = added else { return };
        self.added_required = a.0.required_during_scheduling_ignored_during_execution.as_ref();
        self.added_preferred = a.0.preferred_during_scheduling_ignored_during_execution.as_deref().unwrap_or(&[]);
    }

    /// PreFilter of PodTopologySpread and InterPodAffinity, which count the pods around each
    /// node (`cache` keeps per-node counts across attempts).
    pub fn pre_filter_inter_pod(
        &mut self,
        cluster: &crate::cluster::Cluster,
        cache: &mut crate::topology::TopologyCache,
        spread: &crate::plugins::pod_topology_spread::PodTopologySpreadArgs,
    ) {
        self.spread = crate::plugins::pod_topology_spread::pre_filter(self, cluster, cache, spread);
        self.pod_affinity = crate::plugins::inter_pod_affinity::pre_filter(self, cluster, cache);
    }

    #[inline]
    pub fn request(&self, id: ResourceId) -> i64 {
        if let Some(v) = self.inline_requests.get(id.0 as usize) {
            return *v;
        }
        self.pod.requests.iter().find(|(r, _)| *r == id).map_or(0, |(_, v)| *v)
    }
}

/// Why a pod fits no node (`framework.FitError`), with each node's first failing Filter. A
/// verdict is never changed once made: its clones share it, and the message rendered from it.
#[derive(Clone, Debug)]
pub struct FitError {
    pub num_all_nodes: usize,
    /// Each node's rejection, for a verdict over the nodes; shared by the verdict's clones (an
    /// equivalent pod's verdict is this one), so a copy moves one reference count.
    nodes: Option<std::sync::Arc<NodeRejections>>,
    /// Why the pod failed before any node was tried (PreFilter, PreEnqueue); boxed, as it is
    /// rare and a verdict is copied for every member of a failed group.
    pub pre_filter: Option<Box<crate::pre_filter_reason::PreFilterReason>>,
    /// The pod-group cycle's verdict for a member of a group that was not placed; it replaces
    /// the per-node summary (the member may fit on its own). Shared with the group's result.
    pub group: Option<std::sync::Arc<crate::cycle::GroupReason>>,
    /// A Filter plugin's error that aborted the attempt; it replaces the per-node summary. Boxed,
    /// as it is rare.
    pub error: Option<Box<FilterError>>,
}

/// A verdict over the nodes: the distinct rejections, sorted; for every node, which one it got
/// (an index into `rejections`), in node-name order; and [`FitError::message`] once rendered.
#[derive(Debug)]
struct NodeRejections {
    rejections: Box<[Rejection]>,
    node_statuses: Box<[(NodeId, u16)]>,
    rendered: std::sync::OnceLock<std::sync::Arc<str>>,
}

impl PartialEq for FitError {
    fn eq(&self, other: &Self) -> bool {
        let same_nodes = match (&self.nodes, &other.nodes) {
            (Some(a), Some(b)) => {
                std::sync::Arc::ptr_eq(a, b) || (a.rejections == b.rejections && a.node_statuses == b.node_statuses)
            }
            (a, b) => a.is_none() && b.is_none(),
        };
        self.num_all_nodes == other.num_all_nodes
            && same_nodes
            && self.pre_filter == other.pre_filter
            && self.group == other.group
            && self.error == other.error
    }
}

impl Eq for FitError {}

/// A Filter plugin that returned an error on a node (not a rejection): kube-scheduler stops the
/// attempt at once (`findNodesThatPassFilters`), whatever other nodes would say, runs no
/// PostFilter, and gives the pod `PodScheduled=False` with reason `SchedulerError`; the pod is
/// retried after its backoff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    pub plugin: &'static str,
    /// The node whose Filter failed.
    pub node: NodeId,
    pub error: String,
}

impl FilterError {
    /// Upstream's text (`RunFilterPlugins` wraps a plugin's error status).
    pub fn message(&self) -> String {
        format!("running {:?} filter plugin: {}", self.plugin, self.error)
    }
}

impl FitError {
    /// Every node of `num_all_nodes` rejected: `node_statuses` says with which of `rejections`.
    pub fn rejected(num_all_nodes: usize, rejections: Vec<Rejection>, node_statuses: Vec<(NodeId, u16)>) -> Self {
        let nodes = NodeRejections {
            rejections: rejections.into(),
            node_statuses: node_statuses.into(),
            rendered: Default::default(),
        };
        FitError { num_all_nodes, nodes: Some(nodes.into()), pre_filter: None, group: None, error: None }
    }

    /// A failure decided before any node was tried (PreFilter, PreEnqueue).
    pub fn pre_filter(num_all_nodes: usize, why: crate::pre_filter_reason::PreFilterReason) -> Self {
        FitError { num_all_nodes, nodes: None, pre_filter: Some(Box::new(why)), group: None, error: None }
    }

    /// A member of a PodGroup whose cycle failed: the group's reason.
    pub fn group(num_all_nodes: usize, reason: std::sync::Arc<crate::cycle::GroupReason>) -> Self {
        FitError { num_all_nodes, nodes: None, pre_filter: None, group: Some(reason), error: None }
    }

    /// The attempt ended with a Filter plugin's error on `node`.
    pub fn filter_error(num_all_nodes: usize, plugin: &'static str, node: NodeId, error: String) -> Self {
        let error = Some(Box::new(FilterError { plugin, node, error }));
        FitError { num_all_nodes, nodes: None, pre_filter: None, group: None, error }
    }

    /// Whether `other` is a copy of this verdict over the nodes (their rejections shared, not
    /// compared): the verdict an equivalent pod was given.
    pub fn is_copy_of(&self, other: &FitError) -> bool {
        let plain = |e: &FitError| e.pre_filter.is_none() && e.group.is_none() && e.error.is_none();
        let shared = match (&self.nodes, &other.nodes) {
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        };
        shared && self.num_all_nodes == other.num_all_nodes && plain(self) && plain(other)
    }

    /// The distinct rejections the nodes gave, sorted (none for a verdict not over the nodes).
    pub fn rejections(&self) -> &[Rejection] {
        self.nodes.as_ref().map_or(&[], |n| &n.rejections)
    }

    /// For every node, which of [`FitError::rejections`] it got, in node-name order.
    pub fn node_statuses(&self) -> &[(NodeId, u16)] {
        self.nodes.as_ref().map_or(&[], |n| &n.node_statuses)
    }

    /// The `PodScheduled=False` condition's reason: `SchedulerError` when an error aborted the
    /// attempt, `Unschedulable` otherwise.
    pub fn reason(&self) -> &'static str {
        if self.error.is_some() { "SchedulerError" } else { "Unschedulable" }
    }

    /// Reason → number of nodes that gave it.
    pub fn histogram(&self) -> BTreeMap<&str, usize> {
        let mut per_rejection = vec![0usize; self.rejections().len()];
        for (_, r) in self.node_statuses() {
            per_rejection[*r as usize] += 1;
        }
        let mut h = BTreeMap::new();
        for (rej, n) in self.rejections().iter().zip(per_rejection) {
            for reason in &rej.reasons {
                *h.entry(reason.as_ref()).or_default() += n;
            }
        }
        h
    }

    /// [`FitError::message`], rendered once per verdict over the nodes (and shared by its
    /// clones), every time for others.
    pub fn shared_message(&self) -> std::sync::Arc<str> {
        match &self.nodes {
            Some(n) if self.group.is_none() && self.error.is_none() && self.pre_filter.is_none() => {
                n.rendered.get_or_init(|| self.message().into()).clone()
            }
            _ => self.message().into(),
        }
    }

    /// kube-scheduler's message: `0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had
    /// untolerated taint {dedicated: batch}.` (reasons sorted as strings, as upstream sorts them).
    pub fn message(&self) -> String {
        if let Some(g) = &self.group {
            return g.to_string();
        }
        if let Some(e) = &self.error {
            return e.message();
        }
        let mut msg = format!("0/{} nodes are available:", self.num_all_nodes);
        if let Some(p) = &self.pre_filter {
            msg.push_str(&format!(" {p}."));
        }
        let mut parts: Vec<String> = self.histogram().into_iter().map(|(r, n)| format!("{n} {r}")).collect();
        parts.sort();
        if !parts.is_empty() {
            msg.push_str(&format!(" {}.", parts.join(", ")));
        }
        msg
    }
}

#[cfg(test)]
mod tests {
    /// A verdict is copied into the plan for every member of a failed group (millions in a
    /// simulated week): what is rare in it stays behind a pointer.
    #[test]
    fn a_verdict_stays_small() {
        assert!(std::mem::size_of::<super::FitError>() <= 48, "{}", std::mem::size_of::<super::FitError>());
    }
}
