//! PodGroups and Workloads → scheduling.k8s.io/v1beta1 (workload-spec.md §1.1, §12): the seed
//! article's `spec.minCount` / `scheduleTimeoutSeconds`, and the whole of 1.36's v1alpha2 shape:
//! `podGroupTemplateRef.workload.{workloadName, podGroupTemplateName}` became
//! `workloadRef.{workloadName, templateName}`, `disruptionMode: Pod | PodGroup` became
//! `disruptionMode: {single: {}} | {all: {}}`, and the condition `PodGroupScheduled` became
//! `PodGroupInitiallyScheduled`.

use super::{Converted, Cx, Refuse, Res, Y, mapping, note, spec_of, version_note};
use crate::check::{self, Obj};
use muster_manifest::yaml::Node;

const BETA: &str = "scheduling.k8s.io/v1beta1";

/// Is `o` in a version muster reads for its kind?
fn served(o: &Obj<'_, '_>) -> bool {
    muster_manifest::object::supported_versions(&o.kind).contains(&o.api_version.as_str())
}

/// Is this `disruptionMode` the 1.36 string form?
fn old_disruption(n: Option<&Node<'_>>) -> bool {
    n.is_some_and(|n| n.as_str().is_some() && !n.is_null())
}

pub(super) fn pod_group(o: &Obj<'_, '_>, cx: &Cx<'_>) -> Res<Option<Converted>> {
    let spec = o.get("spec");
    let min = spec.and_then(|s| s.get("minCount"));
    let timeout = spec.and_then(|s| s.get("scheduleTimeoutSeconds"));
    let policy = spec.and_then(|s| s.get("schedulingPolicy"));
    let template_ref = spec.and_then(|s| s.get("podGroupTemplateRef"));
    let disruption = spec.and_then(|s| s.get("disruptionMode"));
    let old_shape = min.is_some() || timeout.is_some() || template_ref.is_some() || old_disruption(disruption);
    if !old_shape && policy.is_some() && served(o) {
        return Ok(None);
    }
    if let (Some(m), Some(p)) = (min, policy) {
        same_gang_size(m, p)?;
    }
    let mut y = cx.y(o.node);
    y.set("apiVersion", Y::plain(BETA));
    let s = spec_of(o, &mut y)?;
    if let Some(r) = template_ref {
        workload_ref(o, cx, s, r)?;
    }
    disruption_mode(s, "spec", disruption)?;
    let min_y = s.take("minCount");
    let timeout_comments = s.take("scheduleTimeoutSeconds").map(|(_, c)| c).unwrap_or_default();
    if policy.is_none() {
        let (p, comments, why) = match min_y {
            Some((m, c)) => (
                Y::Map(vec![("gang".into(), Y::Map(vec![("minCount".into(), m, Vec::new())]), Vec::new())]),
                c,
                "spec.minCount became spec.schedulingPolicy.gang.minCount".to_string(),
            ),
            None => (
                Y::Map(vec![("basic".into(), Y::map(), Vec::new())]),
                Vec::new(),
                "spec.schedulingPolicy is required; basic (no gang) assumed, write gang: {minCount: N} for all-or-nothing"
                    .to_string(),
            ),
        };
        let c = s.set_first("schedulingPolicy", p);
        c.extend(comments);
        c.push(note(why));
    }
    if let (Some(m), Some(_)) = (min, policy) {
        s.comment(
            "schedulingPolicy",
            note(format!("dropped spec.minCount: {}, as in schedulingPolicy", check::flow(m))),
        );
    }
    if let Some((_, _, c)) = s.entries_mut().first_mut() {
        c.extend(timeout_comments);
    }
    if let Some(t) = timeout {
        let t = check::flow(t);
        // The note goes on the first entry (schedulingPolicy, set above or written first).
        if let Some((_, _, c)) = s.entries_mut().first_mut() {
            c.push(note(format!(
                "dropped scheduleTimeoutSeconds: {t}: no such field in Kubernetes 1.37; the scheduler waits at most \
                 its fixed 5-minute Permit timeout (muster: --gang-wait-timeout, default 300s)"
            )));
        }
    }
    rename_scheduled_condition(&mut y);
    Ok(Some(vec![(y, version_note(o, BETA).into_iter().collect())]))
}

/// Both `spec.minCount` and `spec.schedulingPolicy`: dropping minCount keeps the meaning only when
/// the policy is a gang of that size.
fn same_gang_size(min: &Node<'_>, policy: &Node<'_>) -> Res<()> {
    let gang = policy.get("gang").and_then(|g| g.get("minCount")).and_then(|n| n.as_str());
    if gang.is_some() && gang == min.as_str() {
        return Ok(());
    }
    Err(Refuse {
        pos: min.pos,
        why: format!(
            "spec.minCount: {} and spec.schedulingPolicy: {} both give the gang's size; cannot tell which one holds",
            check::flow(min),
            check::flow(policy)
        ),
    })
}

/// `podGroupTemplateRef: {workload: {workloadName, podGroupTemplateName}}` → `workloadRef:
/// {workloadName, templateName}`, in its place.
fn workload_ref(o: &Obj<'_, '_>, cx: &Cx<'_>, spec: &mut Y, r: &Node<'_>) -> Res<()> {
    const FIELD: &str = "spec.podGroupTemplateRef";
    let refuse = |why: &str| Err(Refuse { pos: r.pos, why: format!("{FIELD}: {why}; cannot convert it") });
    let workload = r.get("workload");
    let other = match &r.value {
        muster_manifest::yaml::Value::Map(e) => e.iter().find(|(k, _)| k.as_str() != Some("workload")),
        _ => return refuse("expected a mapping {workload: {workloadName, podGroupTemplateName}}"),
    };
    if let Some((k, _)) = other {
        return refuse(&format!("unknown field {:?} (1.36 has only workload)", k.as_str().unwrap_or("")));
    }
    let mut new = Y::map();
    if let Some(w) = workload {
        let wy = cx.y(w);
        mapping(o, &format!("{FIELD}.workload"), Some(&wy), Some(w))?;
        let entries = if let Y::Map(e) = wy { e } else { Vec::new() };
        for (k, v, _) in entries {
            match k.as_str() {
                "workloadName" => new.set("workloadName", v),
                "podGroupTemplateName" => new.set("templateName", v),
                other => return refuse(&format!("workload: unknown field {other:?}")),
            };
        }
    }
    let Y::Map(entries) = spec else { return Ok(()) };
    if let Some(e) = entries.iter_mut().find(|(k, _, _)| k == "podGroupTemplateRef") {
        e.0 = "workloadRef".into();
        e.1 = new;
        e.2.push(note(
            "podGroupTemplateRef.workload.{workloadName, podGroupTemplateName} became workloadRef.{workloadName, templateName}",
        ));
    }
    Ok(())
}

/// `disruptionMode: Pod | PodGroup` (1.36) → `{single: {}} | {all: {}}`, in place at `field`
/// of `owner`.
fn disruption_mode(owner: &mut Y, field: &str, n: Option<&Node<'_>>) -> Res<()> {
    let Some(n) = n.filter(|n| old_disruption(Some(n))) else { return Ok(()) };
    let mode = match n.as_str() {
        Some("Pod") => "single",
        Some("PodGroup") => "all",
        Some(other) => {
            return Err(Refuse {
                pos: n.pos,
                why: format!("{field}.disruptionMode: {other:?} is neither Pod nor PodGroup; cannot convert it"),
            });
        }
        None => return Ok(()),
    };
    owner
        .set("disruptionMode", Y::Map(vec![(mode.into(), Y::map(), Vec::new())]))
        .push(note(format!("disruptionMode: {} became {{{mode}: {{}}}}", n.as_str().unwrap_or_default())));
    Ok(())
}

/// The 1.36 condition type `PodGroupScheduled` in a written status is `PodGroupInitiallyScheduled`.
fn rename_scheduled_condition(y: &mut Y) {
    let Some(Y::Seq(conditions)) = y.path_mut("status.conditions") else { return };
    for c in conditions {
        if c.get("type").and_then(Y::str) == Some("PodGroupScheduled") {
            c.set("type", Y::plain("PodGroupInitiallyScheduled")).push(note("condition PodGroupScheduled was renamed"));
        }
    }
}

/// A Workload → v1beta1: 1.36's string `disruptionMode` in each PodGroup template.
pub(super) fn workload(o: &Obj<'_, '_>, cx: &Cx<'_>) -> Res<Option<Converted>> {
    let templates = check::seq(o.get("spec.podGroupTemplates"));
    let old = templates.iter().any(|t| old_disruption(t.get("disruptionMode")));
    if !old && (served(o) || o.api_version != "scheduling.k8s.io/v1alpha2") {
        return Ok(None);
    }
    let mut y = cx.y(o.node);
    y.set("apiVersion", Y::plain(BETA));
    if let Some(Y::Seq(items)) = y.path_mut("spec.podGroupTemplates") {
        for (i, (item, node)) in items.iter_mut().zip(templates).enumerate() {
            let field = format!("spec.podGroupTemplates[{i}]");
            mapping(o, &field, Some(item), Some(node))?;
            disruption_mode(item, &field, node.get("disruptionMode"))?;
        }
    }
    Ok(Some(vec![(y, version_note(o, BETA).into_iter().collect())]))
}

#[cfg(test)]
mod tests {
    use super::super::convert_str;

    #[test]
    fn a_half_converted_pod_group_is_completed() {
        let text = "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\nspec:\n  \
                    podGroupTemplateRef: {workload: {workloadName: w, podGroupTemplateName: t}}\n  \
                    schedulingPolicy: {basic: {}}\n";
        let (out, _) = convert_str(text);
        assert!(out.contains("  workloadRef:\n    workloadName: w\n    templateName: t\n"), "{out}");
    }

    #[test]
    fn a_min_count_beside_a_policy_is_dropped_only_when_they_agree() {
        let text = |min: u32| {
            format!(
                "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: g}}\nspec:\n  \
                 schedulingPolicy: {{gang: {{minCount: 4}}}}\n  minCount: {min}\n"
            )
        };
        let (out, refused) = convert_str(&text(4));
        assert!(refused.is_empty() && !out.contains("\n  minCount:"), "{out}");
        assert!(out.contains("# muster convert: dropped spec.minCount: 4, as in schedulingPolicy"), "{out}");
        let (out, refused) = convert_str(&text(8));
        assert_eq!(out, text(8));
        assert!(
            refused[0].why.starts_with("spec.minCount: 8 and spec.schedulingPolicy: {gang: {minCount: 4}}"),
            "{refused:?}"
        );
    }

    #[test]
    fn an_unknown_disruption_mode_or_reference_is_named() {
        for (spec, why) in [
            ("disruptionMode: Gang", "spec.disruptionMode: \"Gang\" is neither Pod nor PodGroup; cannot convert it"),
            (
                "podGroupTemplateRef: {job: {name: j}}",
                "spec.podGroupTemplateRef: unknown field \"job\" (1.36 has only workload); cannot convert it",
            ),
            (
                "podGroupTemplateRef: x",
                "spec.podGroupTemplateRef: expected a mapping {workload: {workloadName, podGroupTemplateName}}; cannot convert it",
            ),
        ] {
            let text = format!(
                "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {{name: g}}\nspec:\n  \
                 schedulingPolicy: {{basic: {{}}}}\n  {spec}\n"
            );
            let (out, refused) = convert_str(&text);
            assert_eq!(out, text);
            assert_eq!(refused[0].why, why);
        }
    }
}
