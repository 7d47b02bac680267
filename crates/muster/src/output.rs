//! How a plan is shown: a table for people, JSON for scripts (a contract), YAML for `kubectl`.

use std::collections::HashMap;
use std::fmt::Write;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use muster_controllers::eviction::{Eviction, TaintSource, rule_condition, taint_text};
use muster_sched::{Cluster, Effect, NodeId, Plan, PodId, PodState};
use serde_json::{Value, json};

use crate::memory::{World, changed_claim_ids, changed_claims, changed_pods};
use crate::text::{cell, cell_width, one_line, push_cell};
use muster_controllers::podgroup::{GroupStatusOptions, changed_composite_pod_groups, changed_pod_groups};

/// What a plan's effects do to each pod, in their order (the plan's): bound to a node, or left
/// with `PodScheduled=False` and its message. The table's and the JSON's rows.
struct Rows {
    bound: Vec<(PodId, NodeId)>,
    unschedulable: Vec<(PodId, std::sync::Arc<str>)>,
}

impl Rows {
    fn of(effects: &[Effect]) -> Rows {
        let mut rows = Rows { bound: Vec::new(), unschedulable: Vec::new() };
        for e in effects {
            match e {
                Effect::Bind { pod, node } => rows.bound.push((*pod, *node)),
                Effect::PodsUnschedulable { pods, message, .. } => {
                    let text = message.text();
                    rows.unschedulable.extend(pods.iter().map(|p| (*p, text.clone())))
                }
                _ => {}
            }
        }
        rows
    }
}

/// Devices allocated to a claim, as `driver/pool/device` per result.
fn claim_devices(c: &muster_sched::ClaimInfo) -> Vec<(String, String, String, String)> {
    c.claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| (r.request.clone(), r.driver.clone(), r.pool.clone(), r.device.clone()))
        .collect()
}

/// The devices a placed pod got through its claims, grouped by pool:
/// `gpu.nvidia.com/node-1: gpu-0 gpu-1`.
fn pod_devices(c: &Cluster, pod: muster_sched::PodId) -> Vec<String> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (_, driver, pool, device) in c.pod(pod).claims.iter().flatten().flat_map(|i| claim_devices(&c.claims[*i])) {
        let key = format!("{driver}/{pool}");
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, devices)) => devices.push(device),
            None => groups.push((key, vec![device])),
        }
    }
    groups.into_iter().map(|(k, d)| format!("{k}: {}", d.join(" "))).collect()
}

/// A device with binding conditions: `driver/pool/device`, its conditions, its failure conditions.
type BindingWait = (String, Vec<String>, Vec<String>);

/// The devices of a placed pod that have binding conditions (DeviceBindingAndStatus): PreBind
/// waits until the driver sets each condition True on the claim's device status (or one of the
/// failure conditions, which sends the pod back to scheduling): `(driver/pool/device,
/// conditions, failure conditions)`.
fn binding_waits(c: &Cluster, pod: muster_sched::PodId) -> Vec<BindingWait> {
    let mut out = Vec::new();
    for i in c.pod(pod).claims.iter().flatten() {
        let results = c.claims[*i].claim.status.as_ref().and_then(|s| s.allocation.as_ref());
        let results = results.and_then(|a| a.devices.as_ref()).and_then(|d| d.results.as_ref());
        for r in results.into_iter().flatten() {
            let conditions = r.binding_conditions.clone().unwrap_or_default();
            if conditions.is_empty() {
                continue;
            }
            let device = format!("{}/{}/{}", r.driver, r.pool, r.device);
            if !out.iter().any(|(d, _, _)| *d == device) {
                out.push((device, conditions, r.binding_failure_conditions.clone().unwrap_or_default()));
            }
        }
    }
    out
}

fn binding_waits_json(c: &Cluster, pod: muster_sched::PodId) -> Vec<Value> {
    binding_waits(c, pod)
        .into_iter()
        .map(|(device, conditions, failure)| json!({"device": device, "conditions": conditions, "failureConditions": failure}))
        .collect()
}

/// The table's section for pods placed on devices with binding conditions: they are not bound
/// until the driver reports the devices ready.
fn push_binding_waits(out: &mut String, c: &Cluster, bound: &[(PodId, NodeId)]) {
    let waiting: Vec<(&str, Vec<BindingWait>)> = bound
        .iter()
        .map(|(p, _)| (c.pod(*p).key.as_str(), binding_waits(c, *p)))
        .filter(|(_, w)| !w.is_empty())
        .collect();
    if waiting.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nWAITING AT PREBIND (device binding conditions)");
    for (pod, waits) in waiting {
        for (device, conditions, failure) in waits {
            let fails = if failure.is_empty() { String::new() } else { format!("; fails on {}", failure.join(", ")) };
            let _ = writeln!(out, "{pod}: binds once the driver reports {} on {device}{fails}", conditions.join(", "));
        }
    }
}

/// Pods this run left alone, with why.
fn skipped(cluster: &Cluster) -> Vec<(&str, String)> {
    cluster
        .pods
        .iter()
        .filter_map(|p| {
            let why = match &p.state {
                PodState::OtherScheduler(name) => format!("schedulerName {name:?} is not served by this scheduler"),
                PodState::Gated(gates) => format!("waiting for scheduling gates: {}", gates.join(", ")),
                _ => return None,
            };
            Some((p.key.as_str(), why))
        })
        .collect()
}

/// A time as the API server writes it (RFC 3339, seconds, UTC).
fn time_text(t: &Time) -> String {
    serde_json::to_value(t).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// When an eviction is due, in words: `at 2026-12-01T09:05:00Z (tolerationSeconds 300)`,
/// `immediately (the taint has no timeAdded)`, `300s after the taint is added (...)`.
fn eviction_when(e: &Eviction) -> String {
    let seconds = e.toleration_seconds.map(|s| format!(" (tolerationSeconds {s})")).unwrap_or_default();
    match (&e.at, e.toleration_seconds) {
        (Some(t), _) => format!("at {}{seconds}", time_text(t)),
        (None, None | Some(0)) => "immediately (the taint has no timeAdded)".into(),
        (None, Some(s)) => format!("{s}s after the taint is added (the taint has no timeAdded)"),
    }
}

/// One eviction as a table line.
fn eviction_line(e: &Eviction) -> String {
    let verb = if e.dry_run { "would be evicted" } else { "evicted" };
    format!(
        "{}: device {} has taint {} ({}) \u{2014} {verb} {}",
        e.pod,
        e.device,
        taint_text(&e.taint),
        e.source,
        eviction_when(e)
    )
}

fn eviction_json(e: &Eviction) -> Value {
    json!({
        "pod": e.pod,
        "claim": e.claim,
        "device": {"driver": e.device.driver, "pool": e.device.pool, "device": e.device.device},
        "taint": {
            "key": e.taint.key,
            "value": e.taint.value,
            "effect": e.taint.effect,
            "timeAdded": e.taint.time_added.as_ref().map(time_text),
        },
        "source": e.source.to_string(),
        "rule": e.source.rule(),
        "propagatedFrom": e.source.propagated_from(),
        "at": e.at.as_ref().map(time_text),
        "tolerationSeconds": e.toleration_seconds,
        "dryRun": e.dry_run,
    })
}

/// Health propagation's taints, one entry per (pool, full device, taint, origin), with the devices
/// that got it, in device order.
fn propagation_groups(world: &World) -> Vec<(String, String, String, Vec<&str>)> {
    let mut groups: Vec<(String, String, String, Vec<&str>)> = Vec::new();
    let mut index: HashMap<(String, String, String), usize> = HashMap::new();
    for (key, taints) in world.taints.propagated() {
        for t in taints {
            let (TaintSource::HealthPropagation { from, origin }, pool) =
                (&t.source, format!("{}/{}", key.driver, key.pool))
            else {
                continue;
            };
            let (full, taint, origin) = (format!("{pool}/{from}"), taint_text(&t.taint), origin.to_string());
            match index.entry((full, taint, origin)) {
                std::collections::hash_map::Entry::Occupied(e) => groups[*e.get()].3.push(&key.device),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let (full, taint, origin) = e.key().clone();
                    e.insert(groups.len());
                    groups.push((full, taint, origin, vec![&key.device]));
                }
            }
        }
    }
    groups
}

/// Upstream's reason when a node's allocation fails with an invalid pool; it names none.
const INVALID_POOLS: &str = "invalid resource pools were encountered";

/// An unschedulable pod's reason, with the invalid pools and why each is invalid when the reason
/// is upstream's [`INVALID_POOLS`] (found once, the first time one is needed).
fn reason_text(world: &World, message: String, invalid: &std::cell::OnceCell<String>) -> String {
    if !message.contains(INVALID_POOLS) {
        return message;
    }
    let pools = invalid.get_or_init(|| {
        let index = muster_alloc::SliceIndex::new(world.slices.clone());
        let features = muster_alloc::Features::kubernetes_1_37();
        let mut found = std::collections::BTreeSet::new();
        for n in &world.cluster.nodes {
            for p in &index.gather(Some(&n.detail.node), features).get().pools {
                if let Some(why) = &p.invalid {
                    found.insert(format!("pool {}/{}: {why}", p.driver, p.name));
                }
            }
        }
        found.into_iter().collect::<Vec<_>>().join("; ")
    });
    if pools.is_empty() { message } else { format!("{message} ({pools})") }
}

/// The PodGroup condition a group's cycle leads to, in words.
fn group_outcome(o: &muster_sched::GroupOutcome) -> &'static str {
    match o {
        muster_sched::GroupOutcome::Scheduled { .. } => "Scheduled",
        muster_sched::GroupOutcome::Waiting { .. } => "Waiting",
        muster_sched::GroupOutcome::Unschedulable { .. } => "Unschedulable",
        muster_sched::GroupOutcome::SchedulerError => "SchedulerError",
    }
}

/// A CompositePodGroup tree's outcome, as its `CompositePodGroupInitiallyScheduled` condition's
/// reason says it.
fn composite_outcome(t: &muster_sched::CompositeResult) -> &'static str {
    if t.invalid { "Invalid" } else { group_outcome(&t.outcome) }
}

/// `-o json`. Field names are a contract: scripts and later versions depend on them.
pub fn json(world: &World, plan: &Plan) -> Value {
    let c = &world.cluster;
    let invalid = std::cell::OnceCell::new();
    let effects = muster_sched::effects::effects(c, plan);
    let rows = Rows::of(&effects);
    // Each claim's node: the first placement of a pod that uses it, indexed once.
    let mut claim_node: HashMap<usize, &str> = HashMap::new();
    for (p, n) in &rows.bound {
        for i in c.pod(*p).claims.iter().flatten() {
            claim_node.entry(i.index()).or_insert_with(|| c.node(*n).name());
        }
    }
    json!({
        "placements": rows.bound.iter().map(|(p, n)| json!({"pod": c.pod(*p).key, "node": c.node(*n).name(), "devices": pod_devices(c, *p), "bindingConditions": binding_waits_json(c, *p)})).collect::<Vec<_>>(),
        "unschedulable": rows.unschedulable.iter().map(|(p, m)| json!({"pod": c.pod(*p).key, "reason": reason_text(world, m.to_string(), &invalid)})).collect::<Vec<_>>(),
        "skipped": skipped(c).into_iter().map(|(pod, reason)| json!({"pod": pod, "reason": reason})).collect::<Vec<_>>(),
        "ignored": world.manifests.ignored.iter().map(|((v, k), n)| json!({"apiVersion": v, "kind": k, "count": n})).collect::<Vec<_>>(),
        "claims": changed_claim_ids(c, &effects).into_iter().map(|id| {
            let (i, x) = (id.index(), &c.claims[id]);
            let reserved = x.claim.status.as_ref().and_then(|s| s.reserved_for.as_ref()).into_iter().flatten();
            let pods: Vec<&str> = reserved.clone().filter(|r| r.resource == "pods").map(|r| r.name.as_str()).collect();
            let groups: Vec<&str> = reserved.filter(|r| r.resource == "podgroups").map(|r| r.name.as_str()).collect();
            let ns = x.claim.metadata.namespace.as_deref().unwrap_or("default");
            let node = claim_node.get(&i);
            json!({
                "claim": x.key(),
                "pods": pods.iter().map(|p| format!("{ns}/{p}")).collect::<Vec<_>>(),
                "podGroups": groups.iter().map(|g| format!("{ns}/{g}")).collect::<Vec<_>>(),
                "node": node,
                "devices": claim_devices(x).into_iter().map(|(request, driver, pool, device)| json!({"request": request, "driver": driver, "pool": pool, "device": device})).collect::<Vec<_>>(),
            })
        }).collect::<Vec<_>>(),
        "evictions": world.evictions.iter().map(eviction_json).collect::<Vec<_>>(),
        "propagatedTaints": world.taints.propagated().iter().flat_map(|(key, taints)| taints.iter().map(move |t| json!({
            "device": {"driver": key.driver, "pool": key.pool, "device": key.device},
            "taint": {"key": t.taint.key, "value": t.taint.value, "effect": t.taint.effect, "timeAdded": t.taint.time_added.as_ref().map(time_text)},
            "from": t.source.propagated_from(),
            "source": t.source.to_string(),
        }))).collect::<Vec<_>>(),
        "preempted": plan.preempted.iter().map(|(p, g)| json!({"pod": c.pod(*p).key, "by": format!("{}/{}", g.kind(), c.node_key(*g))}))
            .chain(plan.pod_preemptions.iter().flat_map(|r| r.victims.iter().map(move |v| json!({"pod": c.pod(*v).key, "by": format!("pod/{}", c.pod(r.pod).key)}))))
            .collect::<Vec<_>>(),
        "groups": plan.groups.iter().map(|g| {
            let info = &c.groups[g.group];
            let (placed, scheduled) = g.outcome.counts();
            json!({
                "podGroup": info.key,
                "policy": if info.gang { "gang" } else { "basic" },
                "minCount": info.min_count,
                "outcome": group_outcome(&g.outcome),
                "placed": placed,
                "alreadyRunning": scheduled,
                "message": g.message(),
                "preemption": g.preemption.as_ref().map(ToString::to_string),
            })
        }).collect::<Vec<_>>(),
        "compositePodGroups": plan.composites.iter().map(|t| {
            let info = &c.composites[t.composite];
            let (placed, scheduled) = t.outcome.counts();
            json!({
                "compositePodGroup": info.key,
                "policy": if info.gang { "gang" } else { "basic" },
                "minGroupCount": info.min_group_count,
                "outcome": composite_outcome(t),
                "placed": placed,
                "alreadyRunning": scheduled,
                "message": t.message(),
                "preemption": t.preemption.as_ref().map(ToString::to_string),
            })
        }).collect::<Vec<_>>(),
        "volumeBindings": c.volumes.decisions.iter().map(volume_decision_json(c)).collect::<Vec<_>>(),
        "warnings": c.warnings,
        "created": created_json(world),
        "controllerNotes": world.controller_notes,
    })
}

/// `-o json`'s `volumeBindings`: each claim VolumeBinding's Reserve bound, to a PersistentVolume
/// (`volume`) or by provisioning on the chosen node (`selectedNode`, the annotation written).
fn volume_decision_json(c: &Cluster) -> impl Fn(&muster_sched::volumes::VolumeDecision) -> Value + '_ {
    use muster_sched::volumes::Binding;
    |d| {
        let mut j = json!({"pod": c.pod(d.pod).key, "claim": format!("{}/{}", d.namespace, d.claim)});
        match &d.binding {
            Binding::Volume(v) => j["volume"] = json!(v),
            Binding::Provision(n) => j["selectedNode"] = json!(n),
        }
        j
    }
}

/// The table's notes for VolumeBinding's decisions.
fn volume_decision_note(c: &Cluster, d: &muster_sched::volumes::VolumeDecision) -> String {
    use muster_sched::volumes::{ANN_SELECTED_NODE, Binding};
    let what = match &d.binding {
        Binding::Volume(v) => format!("bound to PersistentVolume {v}"),
        Binding::Provision(n) => format!("to be provisioned on {n} ({ANN_SELECTED_NODE}={n})"),
    };
    format!("note: claim {}/{} of {} {what}", d.namespace, d.claim, c.pod(d.pod).key)
}

/// `-o json`'s `created`: every object the workload controllers created, in creation order, with
/// its controller (`by`) and the workload at the top of the chain (`workload`).
fn created_json(world: &World) -> Vec<Value> {
    world
        .created
        .iter()
        .map(|c| json!({"object": c.object.reference().to_string(), "by": c.by.to_string(), "workload": c.root.to_string()}))
        .collect()
}

/// `-o yaml`: the ReplicaSets the workload controllers created, and their pods the plan did not
/// attempt ([`created_yaml`]); the changed claims, pods, PodGroups and CompositePodGroups (with the
/// conditions kube-scheduler would write, see [`changed_pod_groups`] and
/// [`changed_composite_pod_groups`]) as a multi-document stream, then the DeviceTaintRules with the `EvictionInProgress` condition
/// the device-taint-eviction controller would write. A condition that cannot be written (a
/// group's without `--now`, a rule's without the taint's `timeAdded`) is named in a comment line
/// before its object.
pub fn yaml(world: &World, plan: &Plan, groups: &GroupStatusOptions) -> anyhow::Result<String> {
    let mut out = String::new();
    let effects = muster_sched::effects::effects(&world.cluster, plan);
    created_yaml(&mut out, world, &effects)?;
    for (claim, note) in changed_claims(&world.cluster, &effects, groups.now.as_ref()) {
        out.push_str("---\n");
        if let Some(note) = note {
            let _ = writeln!(out, "# {}", one_line(&note));
        }
        out.push_str(&serde_saphyr::to_string(&claim)?);
    }
    for pod in changed_pods(&world.cluster, &effects) {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&pod)?);
    }
    volumes_yaml(&mut out, &world.cluster)?;
    for g in changed_pod_groups(&world.cluster, plan, groups) {
        push_with_note(&mut out, g.not_written.as_deref(), &g.group)?;
    }
    for g in changed_composite_pod_groups(&world.cluster, plan, groups) {
        push_with_note(&mut out, g.not_written.as_deref(), &g.composite)?;
    }
    for rule in &world.rules {
        let (status, reason, message) = rule_condition(rule, &world.evictions);
        let mut v = serde_json::to_value(rule)?;
        out.push_str("---\n");
        // lastTransitionTime is the taint's timeAdded (a plan reads no clock). Without one the
        // condition cannot be written as the API requires it; it is shown as a comment instead.
        match &rule.spec.taint.time_added {
            Some(t) => {
                let mut cond = json!({
                    "type": "EvictionInProgress",
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": time_text(t),
                });
                if let Some(g) = rule.metadata.generation {
                    cond["observedGeneration"] = g.into();
                }
                let mut conds: Vec<Value> = rule
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .filter(|c| c.type_ != "EvictionInProgress")
                    .map(serde_json::to_value)
                    .collect::<Result<_, _>>()?;
                conds.push(cond);
                v["status"] = json!({"conditions": conds});
            }
            None => {
                let _ = writeln!(
                    out,
                    "# EvictionInProgress={status} ({reason}: {}) is not written: the taint has no timeAdded",
                    one_line(&message)
                );
            }
        }
        out.push_str(&serde_saphyr::to_string(&v)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// What VolumeBinding's decisions change, as the API server would hold it after PreBind: each
/// chosen PersistentVolume with its `claimRef`, each claim to provision with its selected node.
fn volumes_yaml(out: &mut String, c: &Cluster) -> anyhow::Result<()> {
    use muster_sched::volumes::Binding;
    for d in &c.volumes.decisions {
        let line = volume_decision_note(c, d);
        let note = Some(line.trim_start_matches("note: "));
        match &d.binding {
            Binding::Volume(v) => {
                if let Some(pv) = c.volumes.volumes.get(v) {
                    push_with_note(out, note, pv)?;
                }
            }
            Binding::Provision(_) => {
                if let Some(pvc) = c.volumes.claim(&d.namespace, &d.claim) {
                    push_with_note(out, note, pvc)?;
                }
            }
        }
    }
    Ok(())
}

/// The objects the workload controllers created that the rest of the stream does not hold: every
/// ReplicaSet, and the pods the plan's effects do not write (those are written with the changed
/// pods, bound, with their condition, or as victims) — pods for another scheduler or gated.
fn created_yaml(out: &mut String, world: &World, effects: &[muster_sched::Effect]) -> anyhow::Result<()> {
    use muster_sched::Effect;
    let c = &world.cluster;
    let written: std::collections::HashSet<&str> = effects
        .iter()
        .flat_map(|e| match e {
            Effect::Bind { pod, .. } | Effect::Evict { pod, .. } => std::slice::from_ref(pod),
            Effect::PodsUnschedulable { pods, .. } => pods,
            _ => &[],
        })
        .map(|p| c.pod(*p).key.as_str())
        .collect();
    for created in &world.created {
        match &created.object {
            muster_controllers::CreatedObject::ReplicaSet(rs) => push_with_note(out, None, &**rs)?,
            muster_controllers::CreatedObject::Pod(pod) => {
                let r = created.object.reference();
                if !written.contains(format!("{}/{}", r.namespace, r.name).as_str()) {
                    push_with_note(out, None, &**pod)?;
                }
            }
        }
    }
    Ok(())
}

/// One document of a `-o yaml` stream: `---`, the comment line naming what is not written, the
/// object.
fn push_with_note<T: serde::Serialize>(out: &mut String, note: Option<&str>, object: &T) -> anyhow::Result<()> {
    out.push_str("---\n");
    if let Some(note) = note {
        let _ = writeln!(out, "# {}", one_line(note));
    }
    out.push_str(&serde_saphyr::to_string(object)?);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(())
}

/// The table's `CREATED BY CONTROLLERS` section, after the plan's: what the workload controllers
/// created, one line each (`ns/pod  <- Deployment ns/web (ReplicaSet ns/web-…)`), then their
/// notes; nothing when they created nothing and had nothing to say.
fn push_created_section(out: &mut String, world: &World) {
    if world.created.is_empty() && world.controller_notes.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    let rows: Vec<(String, String)> = world
        .created
        .iter()
        .map(|c| {
            let r = c.object.reference();
            let object = if r.kind == "Pod" { format!("{}/{}", r.namespace, r.name) } else { r.to_string() };
            let by = if c.by == c.root { c.by.to_string() } else { format!("{} ({})", c.root, c.by) };
            (object, by)
        })
        .collect();
    let w = rows.iter().map(|(o, _)| o.len()).max().unwrap_or(0);
    let _ = writeln!(out, "CREATED BY CONTROLLERS");
    for (object, by) in rows {
        let _ = writeln!(out, "{object:<w$}   <- {by}");
    }
    for n in &world.controller_notes {
        let _ = writeln!(out, "note: {n}");
    }
}

/// The default table.
pub fn table(world: &World, plan: &Plan) -> String {
    let c = &world.cluster;
    let mut out = String::new();
    let Rows { bound, unschedulable } = Rows::of(&muster_sched::effects::effects(c, plan));
    if !bound.is_empty() {
        let rows: Vec<(&str, &str, Vec<String>)> =
            bound.iter().map(|(p, n)| (c.pod(*p).key.as_str(), c.node(*n).name(), pod_devices(c, *p))).collect();
        let w = rows.iter().map(|(p, _, _)| cell_width(p)).max().unwrap_or(0).max("POD".len());
        let with_devices = rows.iter().any(|(_, _, d)| !d.is_empty());
        let wn = rows.iter().map(|(_, n, _)| cell_width(n)).max().unwrap_or(0).max("NODE".len());
        push_cell(&mut out, "POD", w);
        out.push_str("   ");
        if with_devices {
            push_cell(&mut out, "NODE", wn);
            out.push_str("   DEVICES\n");
        } else {
            out.push_str("NODE\n");
        }
        for (p, n, d) in rows {
            push_cell(&mut out, p, w);
            out.push_str("   ");
            if with_devices {
                let devices = if d.is_empty() { "-".to_string() } else { d.join("; ") };
                push_cell(&mut out, n, wn);
                let _ = writeln!(out, "   {devices}");
            } else {
                let _ = writeln!(out, "{}", cell(n));
            }
        }
    }
    push_binding_waits(&mut out, c, &bound);
    if !plan.groups.is_empty() || !plan.composites.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "POD GROUPS");
        for t in &plan.composites {
            let _ = writeln!(
                out,
                "{} (composite): {} — {}",
                c.composites[t.composite].key,
                composite_outcome(t),
                t.message()
            );
        }
        for g in &plan.groups {
            let _ = writeln!(out, "{}: {} — {}", c.groups[g.group].key, group_outcome(&g.outcome), g.message());
        }
    }
    if !plan.preempted.is_empty() || !plan.pod_preemptions.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "PREEMPTED");
        for (p, g) in &plan.preempted {
            let _ = writeln!(out, "{}: to make room for {} {}", c.pod(*p).key, g.kind(), c.node_key(*g));
        }
        for r in &plan.pod_preemptions {
            let against = if r.against_budgets.is_empty() {
                String::new()
            } else {
                format!(" (against PodDisruptionBudget {})", r.against_budgets.join(", "))
            };
            for v in &r.victims {
                let _ = writeln!(out, "{}: to make room for pod {}{against}", c.pod(*v).key, c.pod(r.pod).key);
            }
        }
    }
    if !unschedulable.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "UNSCHEDULABLE");
        let invalid = std::cell::OnceCell::new();
        for (p, message) in &unschedulable {
            let _ = writeln!(out, "{}: {}", c.pod(*p).key, reason_text(world, message.to_string(), &invalid));
        }
    }
    let skipped = skipped(c);
    if !skipped.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "NOT FOR THIS SCHEDULER");
        for (p, why) in &skipped {
            let _ = writeln!(out, "{p}: {why}");
        }
    }
    for (dry_run, heading) in [
        (false, "EVICTED (NoExecute device taints)"),
        (true, "DRY RUN (DeviceTaintRules with effect None, as if NoExecute)"),
    ] {
        let lines: Vec<String> = world.evictions.iter().filter(|e| e.dry_run == dry_run).map(eviction_line).collect();
        if !lines.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            let _ = writeln!(out, "{heading}");
            for l in lines {
                let _ = writeln!(out, "{l}");
            }
        }
    }
    push_created_section(&mut out, world);
    if !out.is_empty() {
        out.push('\n');
    }
    let _ = write!(
        out,
        "{} placed, {} unschedulable, {} skipped on {} nodes",
        bound.len(),
        unschedulable.len(),
        skipped.len(),
        c.nodes.len()
    );
    out.push('\n');
    for d in &c.volumes.decisions {
        let _ = writeln!(out, "{}", volume_decision_note(c, d));
    }
    for w in &c.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if let Some(s) = world.manifests.ignored_summary() {
        let _ = writeln!(out, "{s}");
    }
    for (full, taint, origin, devices) in propagation_groups(world) {
        let n = devices.len();
        let _ = writeln!(
            out,
            "note: health propagation: taint {taint} of {full} ({origin}) also applies to the {n} device{} sharing its counters",
            if n == 1 { "" } else { "s" }
        );
    }
    if !world.unused.is_empty() {
        let kinds: Vec<String> = world.unused.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(out, "note: read but not used by this version's scheduling: {}", kinds.join(", "));
    }
    out
}
