//! How a plan is shown: a table for people, JSON for scripts (a contract), YAML for `kubectl`.

use std::fmt::Write;

use muster_sched::{Cluster, Plan, PodState};
use serde_json::{Value, json};

use crate::memory::{World, changed_claims, changed_pods};

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

/// `-o json`. Field names are a contract: scripts and later versions depend on them.
pub fn json(world: &World, plan: &Plan) -> Value {
    let c = &world.cluster;
    json!({
        "placements": plan.placements.iter().map(|(p, n)| json!({"pod": c.pod(*p).key, "node": c.node(*n).name(), "devices": pod_devices(c, *p)})).collect::<Vec<_>>(),
        "unschedulable": plan.unschedulable.iter().map(|(p, e)| json!({"pod": c.pod(*p).key, "reason": e.message()})).collect::<Vec<_>>(),
        "skipped": skipped(c).into_iter().map(|(pod, reason)| json!({"pod": pod, "reason": reason})).collect::<Vec<_>>(),
        "ignored": world.manifests.ignored.iter().map(|((v, k), n)| json!({"apiVersion": v, "kind": k, "count": n})).collect::<Vec<_>>(),
        "claims": c.claims.iter().filter(|x| x.changed).map(|x| {
            let pods: Vec<&str> = x.claim.status.as_ref().and_then(|s| s.reserved_for.as_ref()).into_iter().flatten()
                .map(|r| r.name.as_str()).collect();
            let ns = x.claim.metadata.namespace.as_deref().unwrap_or("default");
            let node = plan.placements.iter().find(|(p, _)| c.pod(*p).claims.iter().flatten().any(|i| c.claims[*i].key() == x.key()))
                .map(|(_, n)| c.node(*n).name());
            json!({
                "claim": x.key(),
                "pods": pods.iter().map(|p| format!("{ns}/{p}")).collect::<Vec<_>>(),
                "node": node,
                "devices": claim_devices(x).into_iter().map(|(request, driver, pool, device)| json!({"request": request, "driver": driver, "pool": pool, "device": device})).collect::<Vec<_>>(),
            })
        }).collect::<Vec<_>>(),
        "warnings": c.warnings,
    })
}

/// `-o yaml`: the changed pods as a multi-document stream.
pub fn yaml(world: &World, plan: &Plan) -> anyhow::Result<String> {
    let mut out = String::new();
    for claim in changed_claims(&world.cluster) {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&claim)?);
    }
    for pod in changed_pods(&world.cluster, plan) {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&pod)?);
    }
    Ok(out)
}

/// The default table.
pub fn table(world: &World, plan: &Plan) -> String {
    let c = &world.cluster;
    let mut out = String::new();
    if !plan.placements.is_empty() {
        let rows: Vec<(&str, &str, Vec<String>)> = plan
            .placements
            .iter()
            .map(|(p, n)| (c.pod(*p).key.as_str(), c.node(*n).name(), pod_devices(c, *p)))
            .collect();
        let w = rows.iter().map(|(p, _, _)| p.len()).max().unwrap_or(0).max("POD".len());
        let with_devices = rows.iter().any(|(_, _, d)| !d.is_empty());
        let wn = rows.iter().map(|(_, n, _)| n.len()).max().unwrap_or(0).max("NODE".len());
        if with_devices {
            let _ = writeln!(out, "{:<w$}   {:<wn$}   DEVICES", "POD", "NODE");
        } else {
            let _ = writeln!(out, "{:<w$}   NODE", "POD");
        }
        for (p, n, d) in rows {
            if with_devices {
                let devices = if d.is_empty() { "-".to_string() } else { d.join("; ") };
                let _ = writeln!(out, "{p:<w$}   {n:<wn$}   {devices}");
            } else {
                let _ = writeln!(out, "{p:<w$}   {n}");
            }
        }
    }
    if !plan.unschedulable.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "UNSCHEDULABLE");
        for (p, e) in &plan.unschedulable {
            let _ = writeln!(out, "{}: {}", c.pod(*p).key, e.message());
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
    if !out.is_empty() {
        out.push('\n');
    }
    let _ = write!(
        out,
        "{} placed, {} unschedulable, {} skipped on {} nodes",
        plan.placements.len(),
        plan.unschedulable.len(),
        skipped.len(),
        c.nodes.len()
    );
    out.push('\n');
    for w in &c.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if let Some(s) = world.manifests.ignored_summary() {
        let _ = writeln!(out, "{s}");
    }
    if !world.unused.is_empty() {
        let kinds: Vec<String> = world.unused.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(out, "note: read but not used by this version's scheduling: {}", kinds.join(", "));
    }
    out
}
