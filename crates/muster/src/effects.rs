//! `muster plan -o effects`: what the live scheduler would send to the API server for this plan,
//! in order — one line per write or event ([`muster_sched::effects`]), rendered with names.

use std::fmt::Write as _;

use muster_sched::effects::{EventType, Message, PodEvent};
use muster_sched::volumes::Binding;
use muster_sched::{Cluster, Effect, Plan};

use crate::text::one_line;

/// One line per effect.
pub fn render(cluster: &Cluster, plan: &Plan) -> String {
    let mut out = String::new();
    let pod = |p: muster_sched::PodId| cluster.pod(p).key.as_str();
    for e in muster_sched::effects::effects(cluster, plan) {
        let _ = match e {
            Effect::Evict { pod: p, by } => writeln!(
                out,
                "evict   pod {} (DisruptionTarget=True, PreemptionByScheduler; for {})",
                pod(p),
                by.describe(cluster)
            ),
            Effect::BindVolumes { pod: p, decisions } => {
                for d in decisions {
                    let _ = match d.binding {
                        Binding::Volume(pv) => writeln!(
                            out,
                            "update  persistentvolume {pv} claimRef {}/{} (VolumeBinding, for pod {})",
                            d.namespace,
                            d.claim,
                            pod(p)
                        ),
                        Binding::Provision(node) => writeln!(
                            out,
                            "update  persistentvolumeclaim {}/{} volume.kubernetes.io/selected-node={node} (VolumeBinding, for pod {})",
                            d.namespace,
                            d.claim,
                            pod(p)
                        ),
                    };
                }
                writeln!(out, "wait    until the claims of pod {} are bound", pod(p))
            }
            Effect::CreateExtendedClaim { pod: p, claim } => writeln!(
                out,
                "create  resourceclaim {} (extended resources of pod {}), then the pod's extendedResourceClaimStatus",
                cluster.claims[claim].key(),
                pod(p)
            ),
            Effect::WriteClaimStatus { claim } => {
                let info = &cluster.claims[claim];
                let status = info.claim.status.as_ref();
                let devices = status
                    .and_then(|s| s.allocation.as_ref())
                    .and_then(|a| a.devices.as_ref())
                    .and_then(|d| d.results.as_ref())
                    .map_or(0, Vec::len);
                let consumers: Vec<String> = status
                    .and_then(|s| s.reserved_for.as_ref())
                    .into_iter()
                    .flatten()
                    .map(|r| format!("{} {}", r.resource.trim_end_matches('s'), r.name))
                    .collect();
                writeln!(
                    out,
                    "write   resourceclaim {} status: allocation of {devices} device(s), reservedFor {}",
                    info.key(),
                    consumers.join(", ")
                )
            }
            Effect::Bind { pod: p, node } => {
                writeln!(out, "bind    pod {} to node {}", pod(p), cluster.node(node).name())
            }
            Effect::PodsUnschedulable { pods, reason, message } => {
                // Worded once for all the pods and their events.
                let rendered = message.text();
                let text = one_line(&rendered).to_string();
                let event = PodEvent::FailedScheduling { message: Message::Text(rendered) };
                for &p in pods.iter() {
                    let _ = writeln!(out, "status  pod {} PodScheduled=False {reason}: {text}", pod(p));
                    write_event(&mut out, cluster, p, &event);
                }
                Ok(())
            }
            Effect::GroupCondition { group, type_, status, reason, message } => writeln!(
                out,
                "status  {} {} {type_}={status} {reason}: {}",
                group.kind(),
                cluster.node_key(group),
                one_line(&message.text())
            ),
            Effect::Event { pod: p, event } => {
                write_event(&mut out, cluster, p, &event);
                Ok(())
            }
        };
    }
    out
}

/// One line for an event about pod `p`.
fn write_event(out: &mut String, cluster: &Cluster, p: muster_sched::PodId, event: &PodEvent) {
    let (reason, note) = (event.reason(), event.note(cluster, p));
    let kind = match event.kind() {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    };
    let _ = writeln!(out, "event   pod {} {kind} {reason}: {}", cluster.pod(p).key, one_line(&note));
}
