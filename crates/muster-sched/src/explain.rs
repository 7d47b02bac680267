//! Why a pod fits or does not fit each node of a snapshot (`muster why`): every node's first
//! failing Filter in upstream order, and for nodes that pass the node Filters, DynamicResources'
//! verdict with the device accounting of each claim the pod still needs allocated.
//!
//! It runs the same plugins the cycle runs, on every node (the cycle stops after
//! `numFeasibleNodesToFind` feasible nodes; an explanation does not), reads the snapshot and
//! changes nothing: no Reserve, no assumed pod.

use muster_alloc::AllocatedState;
use muster_alloc::explain::{ClaimExplanation, Explainer};

use crate::cluster::{Cluster, NodeId, PodId};
use crate::cycle::run_all_filters;
use crate::framework::{CycleState, Rejection};
use crate::plugins::dynamic_resources::{self, DraContext};
use crate::plugins::{inter_pod_affinity, pod_topology_spread};
use crate::pre_filter_reason::PreFilterReason;

/// What one node says to the pod.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeVerdict {
    /// Every Filter passes: the pod could go there.
    Feasible,
    /// A node Filter (NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
    /// NodeResourcesFit) rejects the node: the first one, in upstream's order.
    Filter(Rejection),
    /// PodTopologySpread or InterPodAffinity rejects the node, with what it counted there (which
    /// constraint and domain's skew, which term's pods).
    InterPod { rejection: Rejection, detail: Option<String> },
    /// A volume plugin (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone) rejects
    /// the node, with what it saw there (which claim, volume, zone, disk or driver limit).
    Volume { rejection: Rejection, detail: Option<String> },
    /// DynamicResources rejects the node, with the accounting of the claims it tried to allocate
    /// (empty when an allocated claim is not available on the node).
    Dra { rejection: Rejection, claims: Vec<ClaimExplanation> },
    /// The allocator found a problem no node can fix (the whole attempt fails with `message`).
    DraError { message: String, claims: Vec<ClaimExplanation> },
}

impl NodeVerdict {
    /// The plugin that rejects the node, if one does.
    pub fn plugin(&self) -> Option<&'static str> {
        match self {
            NodeVerdict::Feasible => None,
            NodeVerdict::Filter(r)
            | NodeVerdict::Dra { rejection: r, .. }
            | NodeVerdict::InterPod { rejection: r, .. }
            | NodeVerdict::Volume { rejection: r, .. } => Some(r.plugin),
            NodeVerdict::DraError { .. } => Some(dynamic_resources::NAME),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeExplanation {
    pub node: NodeId,
    pub verdict: NodeVerdict,
}

/// A pod against every node of a snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct PodExplanation {
    /// A PreFilter failure: no node was tried (`nodes` is empty).
    pub pre_filter: Option<PreFilterReason>,
    /// Every node, in the cluster's node order.
    pub nodes: Vec<NodeExplanation>,
}

impl PodExplanation {
    pub fn feasible(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().filter(|n| n.verdict == NodeVerdict::Feasible).map(|n| n.node)
    }
}

/// Explains `pod` against the snapshot `cluster` as it stands (devices in use are read from the
/// claims' allocations). A pod of a PodGroup is explained as its group's cycle would try it.
pub fn explain_pod(cluster: &Cluster, pod_id: PodId, dra: Option<&DraContext>) -> PodExplanation {
    explain_pod_within(cluster, pod_id, dra, None)
}

/// [`explain_pod`], the devices' selectors evaluated within a total CEL cost `budget` (a
/// command's): devices left when it is spent are not judged.
pub fn explain_pod_within(
    cluster: &Cluster,
    pod_id: PodId,
    dra: Option<&DraContext>,
    budget: Option<&muster_cel::Budget>,
) -> PodExplanation {
    explain_pod_configured(cluster, pod_id, dra, budget, &crate::SchedulerConfig::default())
}

/// [`explain_pod_within`] under the scheduler's configuration (PodTopologySpread's default
/// constraints, NodeAffinity's added affinity).
pub fn explain_pod_configured(
    cluster: &Cluster,
    pod_id: PodId,
    dra: Option<&DraContext>,
    budget: Option<&muster_cel::Budget>,
    config: &crate::SchedulerConfig,
) -> PodExplanation {
    let spread = &config.pod_topology_spread;
    let pod = cluster.pod(pod_id);
    let mut state = CycleState::new(pod);
    state.add_affinity(config.added_affinity.as_ref());
    let mut out = PodExplanation { pre_filter: None, nodes: Vec::new() };
    if cluster.node_order.is_empty() {
        out.pre_filter = Some(PreFilterReason::NoNodes);
        return out;
    }
    let spec_claims = pod.pod.spec().and_then(|s| s.resource_claims.as_ref()).is_some_and(|c| !c.is_empty());
    let has_claims = !pod.claims.is_empty() || !pod.dra_extended.is_empty();
    if has_claims || spec_claims {
        if dra.is_none() {
            out.pre_filter = Some(PreFilterReason::NoDraInputs);
            return out;
        }
        let classes = dra.and_then(|ctx| dynamic_resources::pre_filter_classes(pod, cluster, &ctx.classes));
        if let Some(why) = dynamic_resources::pre_filter(pod, cluster).or(classes) {
            out.pre_filter = Some(why);
            return out;
        }
    }
    if let Some(Err(why)) = &pod.group {
        out.pre_filter = Some(PreFilterReason::Group((**why).clone()));
        return out;
    }
    match crate::volumes::pre_filter(&pod.pod, cluster) {
        Ok(v) => state.volumes = v,
        Err(why) => {
            out.pre_filter = Some(why.into());
            return out;
        }
    }
    state.pre_filter_inter_pod(cluster, &mut crate::topology::TopologyCache::default(), spread);
    let allocated = dra
        .filter(|_| has_claims)
        .map(|ctx| AllocatedState::from_claims(cluster.claims.iter().map(|c| &*c.claim), ctx.features));
    let (pending, _) = if has_claims { dynamic_resources::pending_claims(pod, cluster) } else { (Vec::new(), 0) };
    let mut ids: Vec<NodeId> =
        (0..cluster.nodes.len() as u32).map(NodeId).filter(|n| !cluster.node(*n).detail.removed).collect();
    ids.sort_by(|a, b| cluster.node(*a).name().cmp(cluster.node(*b).name()));
    for node_id in ids {
        let node = cluster.node(node_id);
        let verdict = match run_all_filters(&state, node_id, node, cluster) {
            Err(r) if r.plugin == pod_topology_spread::NAME => {
                let detail = state.spread.as_deref().and_then(|s| pod_topology_spread::explain(s, node_id));
                NodeVerdict::InterPod { rejection: r, detail }
            }
            Err(r) if r.plugin == inter_pod_affinity::NAME => {
                let detail = state.pod_affinity.as_deref().and_then(|s| inter_pod_affinity::explain(s, node_id));
                NodeVerdict::InterPod { rejection: r, detail }
            }
            Err(r) if r.plugin.starts_with("Volume") || r.plugin == crate::plugins::node_volume_limits::NAME => {
                let detail = state
                    .volumes
                    .as_deref()
                    .and_then(|v| crate::volumes::explain(v, r.plugin, &pod.pod, node, cluster));
                NodeVerdict::Volume { rejection: r, detail }
            }
            Err(r) => NodeVerdict::Filter(r),
            Ok(()) => match (dra, &allocated) {
                (Some(ctx), Some(allocated)) => {
                    if let Err(r) = dynamic_resources::allocated_claims_fit(pod, node, cluster) {
                        NodeVerdict::Dra { rejection: r, claims: Vec::new() }
                    } else {
                        let mask = dynamic_resources::extended_mask(pod, node);
                        let extended =
                            (mask != 0).then(|| dynamic_resources::extended_claim(pod, mask, &cluster.resources));
                        let mut claims = pending.clone();
                        claims.extend(extended.as_ref().map(|e| &e.claim));
                        let explain = || {
                            let mut e = Explainer::new(ctx.features, allocated, &ctx.classes, &ctx.index, &ctx.env);
                            if let Some(b) = budget {
                                e = e.with_budget(b);
                            }
                            claims.iter().map(|c| e.claim(Some(&node.detail.node), c)).collect()
                        };
                        match dynamic_resources::allocate(&claims, node, ctx, allocated, None, budget) {
                            Ok(Ok(_)) => NodeVerdict::Feasible,
                            Ok(Err(rejection)) => NodeVerdict::Dra { rejection, claims: explain() },
                            Err(message) => NodeVerdict::DraError { message, claims: explain() },
                        }
                    }
                }
                _ => NodeVerdict::Feasible,
            },
        };
        out.nodes.push(NodeExplanation { node: node_id, verdict });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SchedulerNames;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
    use muster_alloc::explain::DeviceStatus;
    use muster_alloc::{Features, SliceIndex};
    use serde_json::json;

    fn node(name: &str, extra: serde_json::Value) -> Node {
        let mut v = json!({"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}});
        if let (Some(a), Some(b)) = (v.as_object_mut(), extra.as_object()) {
            for (k, x) in b {
                a.insert(k.clone(), x.clone());
            }
        }
        serde_json::from_value(v).unwrap()
    }

    fn pod(name: &str, spec: serde_json::Value) -> Box<Pod> {
        Box::new(serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"}, "spec": spec})).unwrap())
    }

    #[test]
    fn every_node_gets_its_first_failing_filter() {
        let nodes = vec![
            node("a-cordoned", json!({"spec": {"unschedulable": true}})),
            node("b-small", json!({})),
            node("c-tainted", json!({"spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}})),
        ];
        let p = pod("big", json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "8"}}}]}));
        let cluster = Cluster::build(nodes, vec![p], &[], &SchedulerNames::default()).unwrap();
        let e = explain_pod(&cluster, PodId(0), None);
        let got: Vec<(&str, Option<&str>, String)> = e
            .nodes
            .iter()
            .map(|n| {
                let NodeVerdict::Filter(r) = &n.verdict else { panic!("{n:?}") };
                (cluster.node(n.node).name(), n.verdict.plugin(), r.reasons.join("; "))
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a-cordoned", Some("NodeUnschedulable"), "node(s) were unschedulable".to_string()),
                ("b-small", Some("NodeResourcesFit"), "Insufficient cpu".to_string()),
                ("c-tainted", Some("TaintToleration"), "node(s) had untolerated taint {gpu: yes}".to_string()),
            ]
        );
        assert_eq!(e.feasible().count(), 0);
    }

    #[test]
    fn dra_rejection_comes_with_the_device_accounting() {
        let nodes = vec![node("n1", json!({}))];
        let p = pod(
            "trainer",
            json!({
                "containers": [{"name": "c"}],
                "resourceClaims": [{"name": "gpus", "resourceClaimName": "two-gpus"}]
            }),
        );
        let mut cluster = Cluster::build(nodes, vec![p], &[], &SchedulerNames::default()).unwrap();
        let claim: ResourceClaim = serde_json::from_value(json!({
            "metadata": {"name": "two-gpus", "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}]}}
        }))
        .unwrap();
        cluster.add_claims(vec![claim], &[]);
        let slices: Vec<ResourceSlice> = vec![serde_json::from_value(json!({
            "metadata": {"name": "s"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0"}, {"name": "gpu-1", "taints": [{"key": "bad", "effect": "NoSchedule"}]}]}
        }))
        .unwrap()];
        let classes: Vec<DeviceClass> =
            vec![serde_json::from_value(json!({"metadata": {"name": "gpu"}, "spec": {}})).unwrap()];
        let ctx = DraContext {
            index: SliceIndex::new(slices.clone()),
            classes: classes.clone(),
            env: muster_cel::Env::default(),
            features: Features::kubernetes_1_37(),
        };
        let e = explain_pod(&cluster, PodId(0), Some(&ctx));
        let NodeVerdict::Dra { rejection, claims } = &e.nodes[0].verdict else { panic!("{e:?}") };
        assert_eq!(rejection.reasons, vec!["cannot allocate all claims"]);
        let r = &claims[0].requests[0];
        assert_eq!((claims[0].claim.as_str(), r.available(), r.short()), ("ml/two-gpus", 1, 1));
        assert!(matches!(&r.devices[1].status, DeviceStatus::Tainted(t) if t.key == "bad"));
    }
}
