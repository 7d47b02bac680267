//! `pluginConfig[].args`: read with the plugin's own args type (strict, every field of the 1.37
//! API), validated as kube-scheduler validates them, and applied where muster runs the plugin.

use muster_manifest::yaml::Node;
use serde::de::DeserializeOwned;

use super::schema::{
    DefaultPreemptionArgs, DynamicResourcesArgs, InterPodAffinityArgs, NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs, PodTopologySpreadArgs, ResourceSpec, VolumeBindingArgs,
};
use super::{Judge, parse_strategy, plugins};

/// Reads and applies the args of plugin `name` (at `at`, `profiles[i].pluginConfig[k]`).
pub(super) fn apply(j: &mut Judge<'_, '_, '_>, at: &str, name: &str, node: Option<&Node<'_>>) {
    let args_at = format!("{at}.args");
    if plugins::in_tree(name).is_none() {
        j.error(
            &format!("{at}.name"),
            format!("{name:?} is not a plugin of kube-scheduler 1.37; muster runs no out-of-tree plugins"),
        );
        return;
    }
    match name {
        "NodeResourcesFit" => {
            if let Some(a) = read::<NodeResourcesFitArgs>(j, &args_at, node) {
                node_resources_fit(j, &args_at, a);
            }
        }
        "NodeResourcesBalancedAllocation" => {
            if let Some(a) = read::<NodeResourcesBalancedAllocationArgs>(j, &args_at, node) {
                kind(j, &args_at, name, a.api_version.as_deref(), a.kind.as_deref());
                if !a.resources.is_empty() {
                    resources(j, &format!("{args_at}.resources"), &a.resources);
                    let cpu_memory = a.resources.len() == 2
                        && a.resources.iter().all(|r| matches!(r.name.as_str(), "cpu" | "memory"));
                    if !cpu_memory {
                        j.error(&format!("{args_at}.resources"), "muster balances cpu and memory only, for now");
                    }
                }
            }
        }
        "DefaultPreemption" => {
            if let Some(a) = read::<DefaultPreemptionArgs>(j, &args_at, node) {
                kind(j, &args_at, name, a.api_version.as_deref(), a.kind.as_deref());
                default_preemption(j, &args_at, &a);
            }
        }
        "InterPodAffinity" => {
            if let Some(a) = read::<InterPodAffinityArgs>(j, &args_at, node) {
                kind(j, &args_at, name, a.api_version.as_deref(), a.kind.as_deref());
                match a.hard_pod_affinity_weight {
                    Some(w) if !(0..=100).contains(&w) => {
                        j.error(&format!("{args_at}.hardPodAffinityWeight"), format!("{w}: not in valid range [0-100]"))
                    }
                    Some(w) => j.config.inter_pod_affinity.hard_pod_affinity_weight = i64::from(w),
                    None => {}
                }
                if let Some(b) = a.ignore_preferred_terms_of_existing_pods {
                    j.config.inter_pod_affinity.ignore_preferred_terms_of_existing_pods = b;
                }
            }
        }
        "PodTopologySpread" => {
            if let Some(a) = read::<PodTopologySpreadArgs>(j, &args_at, node) {
                kind(j, &args_at, name, a.api_version.as_deref(), a.kind.as_deref());
                pod_topology_spread(j, &args_at, &a);
                j.config.pod_topology_spread = muster_sched::plugins::pod_topology_spread::PodTopologySpreadArgs {
                    defaulting_type: match a.defaulting_type.as_deref() {
                        Some("List") => muster_sched::plugins::pod_topology_spread::DefaultingType::List,
                        _ => muster_sched::plugins::pod_topology_spread::DefaultingType::System,
                    },
                    default_constraints: a.default_constraints,
                };
            }
        }
        "VolumeBinding" => {
            if let Some(a) = read::<VolumeBindingArgs>(j, &args_at, node) {
                kind(j, &args_at, name, a.api_version.as_deref(), a.kind.as_deref());
                match a.bind_timeout_seconds {
                    Some(t) if t < 0 => {
                        j.error(&format!("{args_at}.bindTimeoutSeconds"), format!("{t}: must not be negative"))
                    }
                    Some(t) => j.config.volume_bind_timeout_seconds = t as u64,
                    None => {}
                }
                if !a.shape.is_empty()
                    && let Some(points) = shape(j, &format!("{args_at}.shape"), &a.shape)
                {
                    j.config.volume_binding_shape = points;
                }
            }
        }
        "NodeAffinity" => {
            if let Some(a) = read::<NodeAffinityArgs>(j, &args_at, node) {
                kind(j, &args_at, name, a.api_version.as_deref(), a.kind.as_deref());
                if let Some(added) = a.added_affinity {
                    added_affinity(j, &format!("{args_at}.addedAffinity"), added);
                }
            }
        }
        "DynamicResources" => {
            if let Some(a) = read::<DynamicResourcesArgs>(j, &args_at, node) {
                kind(j, &args_at, name, a.api_version.as_deref(), a.kind.as_deref());
                if a.filter_timeout.is_some() {
                    j.warn(
                        &format!("{args_at}.filterTimeout"),
                        "not used: muster's allocator has no time limit per node (its answer never depends on time)",
                    );
                }
                if let Some(t) = a.binding_timeout.as_deref() {
                    let at = format!("{args_at}.bindingTimeout");
                    match super::duration::millis(t) {
                        Ok(ms) if ms > 0 => j.config.dra_binding_timeout_ms = ms as u64,
                        Ok(_) => j.error(&at, format!("{t:?}: must be positive")),
                        Err(e) => j.error(&at, e),
                    }
                }
            }
        }
        other => j.error(&format!("{at}.name"), format!("plugin {other:?} takes no args")),
    }
}

/// The args as `T`; errors (unknown fields, wrong types) are reported under `at`.
fn read<T: DeserializeOwned + Default>(j: &mut Judge<'_, '_, '_>, at: &str, node: Option<&Node<'_>>) -> Option<T> {
    let Some(node) = node.filter(|n| !n.is_null()) else { return Some(T::default()) };
    match muster_manifest::de::from_node::<T>(node) {
        Ok(v) => Some(v),
        Err(errs) => {
            for e in errs {
                let path = match e.path.as_deref().filter(|p| !p.is_empty()) {
                    Some(p) => format!("{at}.{p}"),
                    None => at.to_string(),
                };
                j.j.errors.push(super::Problem { pos: e.pos, path, message: e.message });
            }
            None
        }
    }
}

/// The args' own `apiVersion`/`kind`, when written, must be the plugin's.
fn kind(j: &mut Judge<'_, '_, '_>, at: &str, plugin: &str, api_version: Option<&str>, kind: Option<&str>) {
    if let Some(v) = api_version.filter(|v| *v != "kubescheduler.config.k8s.io/v1") {
        j.error(&format!("{at}.apiVersion"), format!("{v:?}: expected kubescheduler.config.k8s.io/v1"));
    }
    let want = format!("{plugin}Args");
    if let Some(k) = kind.filter(|k| *k != want) {
        j.error(&format!("{at}.kind"), format!("args for plugin {plugin} were not of type {want}, got {k}"));
    }
}

fn node_resources_fit(j: &mut Judge<'_, '_, '_>, at: &str, a: NodeResourcesFitArgs) {
    kind(j, at, "NodeResourcesFit", a.api_version.as_deref(), a.kind.as_deref());
    if !a.ignored_resources.is_empty() || !a.ignored_resource_groups.is_empty() {
        j.error(&format!("{at}.ignoredResources"), "muster does not ignore resources in NodeResourcesFit's Filter yet");
    }
    let Some(s) = a.scoring_strategy else { return };
    let sat = format!("{at}.scoringStrategy");
    if let Some(t) = s.type_.as_deref() {
        match parse_strategy(t) {
            Ok(strategy) => j.config.scoring_strategy = strategy,
            Err(e) => j.error(&format!("{sat}.type"), e.to_string()),
        }
    }
    let rtcr = format!("{sat}.requestedToCapacityRatio");
    match (&s.requested_to_capacity_ratio, s.type_.as_deref() == Some("RequestedToCapacityRatio")) {
        (Some(_), false) => j.error(&rtcr, "Forbidden: must be nil when type is not RequestedToCapacityRatio"),
        (None, true) => j.error(&rtcr, "Required value: must be specified when type is RequestedToCapacityRatio"),
        (Some(r), true) => {
            if let Some(points) = shape(j, &format!("{rtcr}.shape"), &r.shape) {
                j.config.utilization_shape = points;
            }
        }
        (None, false) => {}
    }
    if !s.resources.is_empty() {
        resources(j, &format!("{sat}.resources"), &s.resources);
        j.config.scoring_resources =
            s.resources.iter().map(|r| (r.name.clone(), r.weight.filter(|w| *w != 0).unwrap_or(1))).collect();
    }
}

/// `ValidateNodeAffinityArgs`: the added affinity's selectors parse as node selectors (known
/// operators, values as each operator needs); a valid one is applied to every pod.
fn added_affinity(j: &mut Judge<'_, '_, '_>, at: &str, added: k8s_openapi::api::core::v1::NodeAffinity) {
    use muster_sched::validate::node_selector_requirement;
    let before = j.errors_so_far();
    let term = |j: &mut Judge<'_, '_, '_>, t: &k8s_openapi::api::core::v1::NodeSelectorTerm, path: String| {
        for (list, name) in [(&t.match_expressions, "matchExpressions"), (&t.match_fields, "matchFields")] {
            for (k, r) in list.iter().flatten().enumerate() {
                if let Some((field, message)) = node_selector_requirement(r, &format!("{path}.{name}[{k}]")) {
                    j.error(&field, message);
                }
            }
        }
    };
    let required = "requiredDuringSchedulingIgnoredDuringExecution";
    for (i, t) in added
        .required_during_scheduling_ignored_during_execution
        .iter()
        .flat_map(|r| &r.node_selector_terms)
        .enumerate()
    {
        term(j, t, format!("{at}.{required}.nodeSelectorTerms[{i}]"));
    }
    let preferred = "preferredDuringSchedulingIgnoredDuringExecution";
    for (i, p) in added.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
        term(j, &p.preference, format!("{at}.{preferred}[{i}].preference"));
    }
    if j.errors_so_far() == before {
        j.config.added_affinity = Some(muster_sched::AddedAffinity(added));
    }
}

/// `validateFunctionShape`: at least one point, utilizations increasing within 0..=100, scores
/// within 0..=10; a valid shape is returned, its scores scaled to 0..=100.
fn shape(
    j: &mut Judge<'_, '_, '_>,
    at: &str,
    points: &[super::schema::ShapePoint],
) -> Option<Vec<muster_sched::ShapePoint>> {
    if points.is_empty() {
        j.error(at, "Required value: at least one point must be specified");
        return None;
    }
    let before = j.errors_so_far();
    if let Some(i) = (1..points.len()).find(|&i| points[i - 1].utilization >= points[i].utilization) {
        let u = points[i].utilization;
        j.error(
            &format!("{at}[{i}].utilization"),
            format!("Invalid value: {u}: values must be sorted in increasing order"),
        );
    }
    for (i, p) in points.iter().enumerate() {
        if !(0..=100).contains(&p.utilization) {
            let u = p.utilization;
            j.error(&format!("{at}[{i}].utilization"), format!("Invalid value: {u}: not in valid range [0, 100]"));
        }
        if !(0..=10).contains(&p.score) {
            j.error(&format!("{at}[{i}].score"), format!("Invalid value: {}: not in valid range [0, 10]", p.score));
        }
    }
    (j.errors_so_far() == before).then(|| {
        points
            .iter()
            .map(|p| muster_sched::ShapePoint { utilization: p.utilization.into(), score: i64::from(p.score) * 10 })
            .collect()
    })
}

/// Scored resources: weights 1..=100 (0 means 1), names not repeated.
fn resources(j: &mut Judge<'_, '_, '_>, at: &str, list: &[ResourceSpec]) {
    for (i, r) in list.iter().enumerate() {
        if let Some(w) = r.weight.filter(|w| !(0..=100).contains(w)) {
            j.error(
                &format!("{at}[{i}].weight"),
                format!("{w}: resource weight of {} not in valid range [1, 100]", r.name),
            );
        }
        if list[..i].iter().any(|o| o.name == r.name) {
            j.error(&format!("{at}[{i}].name"), format!("Duplicate value: {:?}", r.name));
        }
    }
}

fn default_preemption(j: &mut Judge<'_, '_, '_>, at: &str, a: &DefaultPreemptionArgs) {
    if let Some(p) = a.min_candidate_nodes_percentage.filter(|p| !(0..=100).contains(p)) {
        j.error(&format!("{at}.minCandidateNodesPercentage"), format!("{p}: not in valid range [0, 100]"));
    }
    if let Some(n) = a.min_candidate_nodes_absolute.filter(|n| *n < 0) {
        j.error(&format!("{at}.minCandidateNodesAbsolute"), format!("{n}: not in valid range [0, inf)"));
    }
    if a.min_candidate_nodes_percentage == Some(0) && a.min_candidate_nodes_absolute == Some(0) {
        j.error(at, "minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero");
    }
    if a.min_candidate_nodes_percentage.is_some() || a.min_candidate_nodes_absolute.is_some() {
        j.warn(at, "not used: muster's preemption considers every node, not a shortlist");
    }
}

fn pod_topology_spread(j: &mut Judge<'_, '_, '_>, at: &str, a: &PodTopologySpreadArgs) {
    let defaulting = a.defaulting_type.as_deref().unwrap_or("System");
    if !matches!(defaulting, "System" | "List") {
        j.error(
            &format!("{at}.defaultingType"),
            format!("Unsupported value: {defaulting:?}: supported values: \"List\", \"System\""),
        );
    }
    if defaulting == "System" && !a.default_constraints.is_empty() {
        j.error(
            &format!("{at}.defaultConstraints"),
            "when .defaultConstraints are not empty, .defaultingType must be \"List\"",
        );
    }
    for (i, c) in a.default_constraints.iter().enumerate() {
        if c.label_selector.is_some() {
            j.error(
                &format!("{at}.defaultConstraints[{i}].labelSelector"),
                "constraint must not define a selector, as they deduced for each pod",
            );
        }
        if c.max_skew <= 0 {
            j.error(
                &format!("{at}.defaultConstraints[{i}].maxSkew"),
                format!("{}: must be greater than zero", c.max_skew),
            );
        }
        if !matches!(c.when_unsatisfiable.as_str(), "DoNotSchedule" | "ScheduleAnyway") {
            j.error(
                &format!("{at}.defaultConstraints[{i}].whenUnsatisfiable"),
                format!(
                    "Unsupported value: {:?}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
                    c.when_unsatisfiable
                ),
            );
        }
    }
}
