//! kube-scheduler 1.37's in-tree plugins: which extension points each implements, which ones
//! muster runs, and how a profile's `plugins` resolve against the default set (upstream's
//! `mergePluginSet` and the framework's MultiPoint expansion).

use super::schema::{PluginRef, PluginSet, Plugins};

/// Where a plugin stands in muster.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Support {
    /// muster runs it at every extension point it has.
    Runs,
    /// An in-tree plugin muster does not run yet.
    Missing,
}

/// An in-tree plugin: its name, the extension points it implements, its default weight at Score
/// (0 when it does not score) and whether muster runs it.
pub struct InTree {
    pub name: &'static str,
    pub points: &'static [&'static str],
    pub default_weight: i32,
    pub support: Support,
}

const FILTERING: &[&str] = &["preFilter", "filter", "preScore", "score"];

/// The default plugins of kube-scheduler 1.37 (MultiPoint, in order) with the DRA and workload
/// plugins that 1.37 enables with their feature gates, then the placement plugins.
pub const IN_TREE: &[InTree] = &[
    InTree { name: "SchedulingGates", points: &["preEnqueue"], default_weight: 0, support: Support::Runs },
    InTree { name: "PrioritySort", points: &["queueSort"], default_weight: 0, support: Support::Runs },
    InTree { name: "NodeUnschedulable", points: &["filter"], default_weight: 0, support: Support::Runs },
    InTree { name: "NodeName", points: &["filter"], default_weight: 0, support: Support::Runs },
    InTree {
        name: "TaintToleration",
        points: &["filter", "preScore", "score"],
        default_weight: 3,
        support: Support::Runs,
    },
    InTree { name: "NodeAffinity", points: FILTERING, default_weight: 2, support: Support::Runs },
    InTree { name: "NodePorts", points: &["preFilter", "filter"], default_weight: 0, support: Support::Runs },
    InTree {
        name: "NodeResourcesFit",
        points: &["preFilter", "filter", "preScore", "score", "placementScore"],
        default_weight: 1,
        support: Support::Runs,
    },
    InTree { name: "VolumeRestrictions", points: &["preFilter", "filter"], default_weight: 0, support: Support::Runs },
    InTree { name: "NodeVolumeLimits", points: &["preFilter", "filter"], default_weight: 0, support: Support::Runs },
    InTree {
        name: "VolumeBinding",
        points: &["preFilter", "filter", "preScore", "score", "reserve", "preBind"],
        default_weight: 1,
        support: Support::Runs,
    },
    InTree { name: "VolumeZone", points: &["preFilter", "filter"], default_weight: 0, support: Support::Runs },
    InTree { name: "PodTopologySpread", points: FILTERING, default_weight: 2, support: Support::Runs },
    InTree { name: "InterPodAffinity", points: FILTERING, default_weight: 2, support: Support::Runs },
    InTree {
        name: "DynamicResources",
        points: &["preEnqueue", "preFilter", "filter", "postFilter", "reserve", "preBind", "podGroupPostFilter"],
        default_weight: 0,
        support: Support::Runs,
    },
    InTree { name: "DefaultPreemption", points: &["postFilter"], default_weight: 0, support: Support::Runs },
    InTree {
        name: "NodeResourcesBalancedAllocation",
        points: &["preScore", "score"],
        default_weight: 1,
        support: Support::Runs,
    },
    InTree { name: "ImageLocality", points: &["score"], default_weight: 1, support: Support::Runs },
    InTree {
        name: "GangScheduling",
        points: &["preEnqueue", "permit", "placementFeasible"],
        default_weight: 0,
        support: Support::Runs,
    },
    InTree { name: "TopologyPlacement", points: &["placementGenerate"], default_weight: 0, support: Support::Runs },
    InTree { name: "PodGroupPodsCount", points: &["placementScore"], default_weight: 1, support: Support::Runs },
    InTree { name: "DefaultBinder", points: &["bind"], default_weight: 0, support: Support::Runs },
];

pub fn in_tree(name: &str) -> Option<&'static InTree> {
    IN_TREE.iter().find(|p| p.name == name)
}

/// A plugin enabled at one extension point, with its weight (Score and PlacementScore).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enabled {
    pub name: String,
    pub weight: i64,
}

/// The plugins a profile runs at `point`: the point's own `enabled` list first, then the
/// MultiPoint plugins (the defaults merged with the profile's `multiPoint`) that implement the
/// point and that the point does not disable. A weight of 0 or none is 1, as the framework
/// defaults it; the default plugins keep their default weights.
pub fn effective(plugins: Option<&Plugins>, point: &str) -> Vec<Enabled> {
    let empty = PluginSet::default();
    let (multi, specific) = match plugins {
        Some(p) => (p.multi_point.as_ref().unwrap_or(&empty), set_at(p, point).unwrap_or(&empty)),
        None => (&empty, &empty),
    };
    let mut out: Vec<Enabled> = specific.enabled.iter().map(enabled).collect();
    if has_star(&specific.disabled) {
        return out;
    }
    for p in merged_multi_point(multi) {
        let implements = in_tree(&p.name).is_none_or(|t| t.points.contains(&point));
        let disabled = specific.disabled.iter().any(|d| d.name == p.name);
        if implements && !disabled && !out.iter().any(|o| o.name == p.name) {
            out.push(p);
        }
    }
    out
}

fn set_at<'p>(p: &'p Plugins, point: &str) -> Option<&'p PluginSet> {
    p.points().into_iter().find(|(n, _)| *n == point).map(|(_, s)| s)
}

fn has_star(list: &[PluginRef]) -> bool {
    list.iter().any(|d| d.name == "*")
}

fn enabled(p: &PluginRef) -> Enabled {
    Enabled { name: p.name.clone(), weight: i64::from(p.weight.filter(|w| *w != 0).unwrap_or(1)) }
}

/// The default MultiPoint set with the profile's `multiPoint` merged in (`mergePluginSet`):
/// defaults not disabled, re-configured ones in place, then the other enabled ones.
fn merged_multi_point(custom: &PluginSet) -> Vec<Enabled> {
    let mut out = Vec::new();
    let mut replaced = vec![false; custom.enabled.len()];
    if !has_star(&custom.disabled) {
        for d in IN_TREE {
            if custom.disabled.iter().any(|x| x.name == d.name) {
                continue;
            }
            match custom.enabled.iter().position(|e| e.name == d.name) {
                Some(i) => {
                    replaced[i] = true;
                    out.push(enabled(&custom.enabled[i]));
                }
                None => out.push(Enabled { name: d.name.into(), weight: i64::from(d.default_weight.max(1)) }),
            }
        }
    }
    for (i, e) in custom.enabled.iter().enumerate() {
        if !replaced[i] {
            out.push(enabled(e));
        }
    }
    out
}
