//! `ValidatePodSpec`'s rules for the parts of a pod muster reads besides tolerations and node
//! affinity (those are in the parent module, where the store checks them): containers present
//! and uniquely named, the pod's `resourceClaims` and the containers' references to them,
//! `topologySpreadConstraints`, and pod (anti-)affinity terms.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{PodAffinityTerm, PodSpec, TopologySpreadConstraint};

use super::meta::{label_selector, qualified_name};
use super::{FieldError, dns_label, invalid, unsupported};

/// The whole of this module's rules for one pod's spec.
pub fn pod_structure(spec: &PodSpec) -> Vec<FieldError> {
    let mut out = containers(spec);
    out.extend(resource_claims(spec));
    out.extend(spread_constraints(spec.topology_spread_constraints.as_deref().unwrap_or_default()));
    out.extend(affinity_terms(spec));
    out
}

/// At least one container; container names unique across init and regular containers.
fn containers(spec: &PodSpec) -> Vec<FieldError> {
    let mut out = Vec::new();
    if spec.containers.is_empty() {
        out.push(("spec.containers".into(), "Required value".into()));
    }
    let mut seen = HashSet::new();
    let init = spec.init_containers.iter().flatten().enumerate().map(|(i, c)| (i, c, "initContainers"));
    for (i, c, list) in init.chain(spec.containers.iter().enumerate().map(|(i, c)| (i, c, "containers"))) {
        if !c.name.is_empty() && !seen.insert(c.name.as_str()) {
            out.push((format!("spec.{list}[{i}].name"), format!("Duplicate value: {:?}", c.name)));
        }
    }
    out
}

/// The pod's `resourceClaims` (unique DNS-label names, exactly one source each) and each
/// container's `resources.claims` (present in that list, not twice).
fn resource_claims(spec: &PodSpec) -> Vec<FieldError> {
    let mut out = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, c) in spec.resource_claims.iter().flatten().enumerate() {
        let at = format!("spec.resourceClaims[{i}]");
        if !names.insert(c.name.as_str()) {
            out.push((format!("{at}.name"), format!("Duplicate value: {:?}", c.name)));
        }
        let shown = || format!("{{name: {:?}}}", c.name);
        match (&c.resource_claim_name, &c.resource_claim_template_name) {
            (Some(_), Some(_)) => out.push((
                at,
                invalid(shown(), "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"),
            )),
            (None, None) => out
                .push((at, invalid(shown(), "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))),
            _ => {}
        }
    }
    let known: Vec<&str> = names.iter().copied().collect();
    let lists =
        [("initContainers", spec.init_containers.as_deref().unwrap_or_default()), ("containers", &spec.containers)];
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            let claims = c.resources.as_ref().and_then(|r| r.claims.as_deref()).unwrap_or_default();
            let mut seen = HashSet::new();
            for (j, rc) in claims.iter().enumerate() {
                let at = format!("spec.{list}[{i}].resources.claims[{j}]");
                if rc.name.is_empty() {
                    out.push((at, "Required value".into()));
                    continue;
                }
                let key = match rc.request.as_deref() {
                    Some(r) if !r.is_empty() => format!("{}/{r}", rc.name),
                    _ => rc.name.clone(),
                };
                if !seen.insert(key.clone()) {
                    out.push((at.clone(), format!("Duplicate value: {key:?}")));
                }
                if !names.contains(rc.name.as_str()) {
                    let list =
                        if known.is_empty() { " which is empty".into() } else { format!(": {}", known.join(", ")) };
                    out.push((
                        at,
                        format!("Not found: {:?}: must be one of the names in pod.spec.resourceClaims{list}", rc.name),
                    ));
                }
            }
        }
    }
    out
}

const WHEN_UNSATISFIABLE: [&str; 2] = ["DoNotSchedule", "ScheduleAnyway"];
const INCLUSION_POLICIES: [&str; 2] = ["Honor", "Ignore"];

/// `validateTopologySpreadConstraints`.
fn spread_constraints(constraints: &[TopologySpreadConstraint]) -> Vec<FieldError> {
    let mut out = Vec::new();
    let mut pairs = HashSet::new();
    for (i, c) in constraints.iter().enumerate() {
        let at = format!("spec.topologySpreadConstraints[{i}]");
        if c.max_skew <= 0 {
            out.push((format!("{at}.maxSkew"), invalid(c.max_skew, "must be greater than zero")));
        }
        if c.topology_key.is_empty() {
            out.push((format!("{at}.topologyKey"), "Required value: can not be empty".into()));
        } else {
            out.extend(qualified_name(&c.topology_key, &format!("{at}.topologyKey")));
        }
        let when = c.when_unsatisfiable.as_str();
        if !WHEN_UNSATISFIABLE.contains(&when) {
            out.push((format!("{at}.whenUnsatisfiable"), unsupported(when, &WHEN_UNSATISFIABLE)));
        }
        if let Some(min) = c.min_domains {
            if min <= 0 {
                out.push((format!("{at}.minDomains"), invalid(min, "must be greater than 0")));
            } else if when != "DoNotSchedule" {
                let why = format!("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {when}");
                out.push((format!("{at}.minDomains"), invalid(min, &why)));
            }
        }
        if !pairs.insert((c.topology_key.as_str(), when)) {
            out.push((at.clone(), format!("Duplicate value: \"{{{}, {when}}}\"", c.topology_key)));
        }
        for (field, policy) in
            [("nodeAffinityPolicy", &c.node_affinity_policy), ("nodeTaintsPolicy", &c.node_taints_policy)]
        {
            if let Some(p) = policy.as_deref().filter(|p| !INCLUSION_POLICIES.contains(p)) {
                out.push((format!("{at}.{field}"), unsupported(p, &INCLUSION_POLICIES)));
            }
        }
        if let Some(s) = c.label_selector.as_ref() {
            out.extend(label_selector(s, &format!("{at}.labelSelector")));
        }
        for (k, key) in c.match_label_keys.iter().flatten().enumerate() {
            out.extend(qualified_name(key, &format!("{at}.matchLabelKeys[{k}]")));
        }
    }
    out
}

/// `validatePodAffinityTerm`: a topology key, valid selectors, DNS-label namespaces, qualified
/// label keys.
fn affinity_term(t: &PodAffinityTerm, at: &str, out: &mut Vec<FieldError>) {
    if t.topology_key.is_empty() {
        out.push((format!("{at}.topologyKey"), "Required value: can not be empty".into()));
    } else {
        out.extend(qualified_name(&t.topology_key, &format!("{at}.topologyKey")));
    }
    if let Some(s) = t.label_selector.as_ref() {
        out.extend(label_selector(s, &format!("{at}.labelSelector")));
    }
    if let Some(s) = t.namespace_selector.as_ref() {
        out.extend(label_selector(s, &format!("{at}.namespaceSelector")));
    }
    for (k, ns) in t.namespaces.iter().flatten().enumerate() {
        out.extend(dns_label(ns, &format!("{at}.namespaces[{k}]")));
    }
    for (field, keys) in [("matchLabelKeys", &t.match_label_keys), ("mismatchLabelKeys", &t.mismatch_label_keys)] {
        for (k, key) in keys.iter().flatten().enumerate() {
            out.extend(qualified_name(key, &format!("{at}.{field}[{k}]")));
        }
    }
}

/// Pod affinity and anti-affinity, required and preferred (weights 1–100).
fn affinity_terms(spec: &PodSpec) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(a) = spec.affinity.as_ref() else { return out };
    let kinds = [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ];
    for (kind, lists) in kinds {
        let Some((required, preferred)) = lists else { continue };
        let base = format!("spec.affinity.{kind}");
        for (i, t) in required.iter().flatten().enumerate() {
            affinity_term(t, &format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"), &mut out);
        }
        for (i, w) in preferred.iter().flatten().enumerate() {
            let at = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            if !(1..=100).contains(&w.weight) {
                out.push((format!("{at}.weight"), invalid(w.weight, "must be in the range 1-100")));
            }
            affinity_term(&w.pod_affinity_term, &format!("{at}.podAffinityTerm"), &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).expect("a PodSpec")
    }

    fn fields(errs: &[FieldError]) -> Vec<&str> {
        errs.iter().map(|(f, _)| f.as_str()).collect()
    }

    #[test]
    fn containers_are_required_and_unique() {
        assert_eq!(fields(&pod_structure(&spec(json!({"containers": []})))), ["spec.containers"]);
        let twice = spec(json!({"initContainers": [{"name": "a"}], "containers": [{"name": "a"}]}));
        assert_eq!(pod_structure(&twice), [("spec.containers[0].name".into(), "Duplicate value: \"a\"".into())]);
    }

    #[test]
    fn claims_have_one_source_and_containers_name_them() {
        let s = spec(json!({
            "resourceClaims": [{"name": "gpu"}, {"name": "nic", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}],
            "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}, {"name": "gpu"}, {"name": "fpga"}]}}]
        }));
        let errs = pod_structure(&s);
        assert_eq!(
            fields(&errs),
            [
                "spec.resourceClaims[0]",
                "spec.resourceClaims[1]",
                "spec.containers[0].resources.claims[1]",
                "spec.containers[0].resources.claims[2]"
            ]
        );
        assert!(errs[0].1.ends_with("must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"));
        assert_eq!(errs[3].1, "Not found: \"fpga\": must be one of the names in pod.spec.resourceClaims: gpu, nic");
    }

    #[test]
    fn spread_constraints_as_the_api_server_checks_them() {
        let s = spec(json!({"containers": [{"name": "c"}], "topologySpreadConstraints": [
            {"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Sometimes"},
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2,
             "nodeTaintsPolicy": "Maybe", "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Like"}]}},
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
        ]}));
        let errs = pod_structure(&s);
        assert_eq!(
            fields(&errs),
            [
                "spec.topologySpreadConstraints[0].maxSkew",
                "spec.topologySpreadConstraints[0].topologyKey",
                "spec.topologySpreadConstraints[0].whenUnsatisfiable",
                "spec.topologySpreadConstraints[1].minDomains",
                "spec.topologySpreadConstraints[1].nodeTaintsPolicy",
                "spec.topologySpreadConstraints[1].labelSelector.matchExpressions[0].operator",
                "spec.topologySpreadConstraints[2]",
            ]
        );
        assert!(errs[3].1.ends_with("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"));
    }

    #[test]
    fn affinity_terms_need_a_topology_key_and_weights_in_range() {
        let s = spec(json!({"containers": [{"name": "c"}], "affinity": {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ""}]},
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 0, "podAffinityTerm": {"topologyKey": "zone", "namespaces": ["Bad_NS"]}}]}
        }}));
        assert_eq!(
            fields(&pod_structure(&s)),
            [
                "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
                "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.namespaces[0]",
                "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
            ]
        );
    }
}
