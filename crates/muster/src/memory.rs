//! The in-memory world: a cluster read from manifests, and a plan written back into the objects
//! as the API server would hold them afterwards.

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use muster_controllers::Created;
use muster_controllers::eviction::{DeviceTaints, Eviction};
use muster_manifest::{Diagnostic, Manifests};
use muster_sched::effects::Preemptor;
use muster_sched::{ClaimId, Cluster, Effect, PodId, SchedulerNames};

mod build;
mod origins;
pub use build::Builder;

/// How a world is built from manifests.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Copy NoSchedule/NoExecute taints of a full device to the devices that share its counter set
    /// (its partitions); see [`DeviceTaints::propagate_health`]. On by default.
    pub health_propagation: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { health_propagation: true }
    }
}

/// The inputs of a run: the cluster built from the manifests, and what the manifests held that the
/// cluster does not (objects muster ignores, kinds this version reads but does not use).
pub struct World {
    /// The manifests, with `objects` moved into the cluster.
    pub manifests: Manifests,
    pub cluster: Cluster,
    /// Kinds that were read but that this version's scheduling does not use yet, with counts.
    pub unused: Vec<(&'static str, usize)>,
    /// DeviceClasses and ResourceSlices (with DeviceTaintRules applied, then health propagation),
    /// which the plan reads but never changes.
    pub device_classes: Vec<DeviceClass>,
    pub slices: Vec<ResourceSlice>,
    /// The input's DeviceTaintRules, as given.
    pub rules: Vec<DeviceTaintRule>,
    /// Every device's taints with where each came from (health propagation's included).
    pub taints: DeviceTaints,
    /// The bound pods that NoExecute device taints evict (and the dry runs of effect-None rules),
    /// from the input's allocated claims. The evictions happen after this plan: the pods stay in
    /// the snapshot the plan schedules against.
    pub evictions: Vec<Eviction>,
    /// What the workload controllers created before the plan (ReplicaSets, pods; the pods are in
    /// `cluster`), each with its controller, in creation order; see [`muster_controllers`].
    pub created: Vec<Created>,
    /// The controllers' notes: workloads that created nothing or less than asked, and why.
    pub controller_notes: Vec<String>,
    /// Warnings about objects of the input, located (also in `cluster.warnings`, as text): input
    /// the API server accepts but that looks wrong, such as an allocation naming a device no
    /// ResourceSlice publishes.
    pub warnings: Vec<Diagnostic>,
}

impl World {
    pub fn from_manifests(manifests: Manifests, names: &SchedulerNames) -> Result<World, Vec<Diagnostic>> {
        Self::from_manifests_with(manifests, names, Options::default())
    }

    /// The world of objects already read.
    pub fn from_manifests_with(
        mut manifests: Manifests,
        names: &SchedulerNames,
        options: Options,
    ) -> Result<World, Vec<Diagnostic>> {
        let mut builder = Builder::new(names, options);
        for l in std::mem::take(&mut manifests.objects) {
            builder.add(l);
        }
        builder.finish(manifests)
    }

    /// The world of `paths`, or every error of the input: when some objects do not load, the
    /// cluster model is still built from those that do and its errors (a missing PriorityClass,
    /// ...) are reported after the loader's, as `check` reports both. A model error about an
    /// object that did not load, or naming one (`PriorityClass "x"`), is left out: it would only
    /// echo the first. Each object goes to the world as soon as it is decoded ([`Builder::add`]).
    pub fn load(
        paths: &[std::path::PathBuf],
        names: &SchedulerNames,
        options: Options,
    ) -> Result<World, Vec<Diagnostic>> {
        let mut builder = Builder::new(names, options);
        let mut partial = muster_manifest::load_paths_partial_with(paths, &mut |l| {
            builder.add(l);
            None
        });
        let built = builder.finish(std::mem::take(&mut partial.manifests));
        if partial.errors.is_empty() {
            return built;
        }
        let mut errors = std::mem::take(&mut partial.errors);
        let Err(model) = built else { return Err(errors) };
        for d in model {
            if !partial.echoes(&d) && !errors.iter().any(|e| e.pos == d.pos && e.message == d.message) {
                errors.push(d);
            }
        }
        Err(errors)
    }
}

/// The ResourceClaims a plan touched, in the store's order: those its effects write (allocation
/// and reservedFor, the special extended-resources claim), those of its preemption victims (as
/// the store holds them once the victims are gone), and those the controllers created from
/// templates for it.
pub fn changed_claim_ids(cluster: &Cluster, effects: &[Effect]) -> Vec<ClaimId> {
    let generated = cluster.claims.iter().enumerate().filter(|(_, c)| c.generated && !c.deleted);
    let mut ids: Vec<ClaimId> = generated.map(|(i, _)| ClaimId(i as u32)).collect();
    for e in effects {
        match e {
            Effect::WriteClaimStatus { claim } | Effect::CreateExtendedClaim { claim, .. } => ids.push(*claim),
            Effect::Evict { pod, .. } => ids.extend(cluster.pod(*pod).claims.iter().flatten()),
            _ => {}
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The ResourceClaims a plan created or changed ([`changed_claim_ids`]), as the API server would
/// hold them, each with a note on what could not be written. DynamicResources' PreBind sets
/// `allocationTimestamp` on an allocation with devices that have binding conditions (then waits
/// for them): with `now` it is written, without it the note says so (a plan reads no clock).
pub fn changed_claims(
    cluster: &Cluster,
    effects: &[Effect],
    now: Option<&Time>,
) -> Vec<(ResourceClaim, Option<String>)> {
    let ids = changed_claim_ids(cluster, effects);
    let mut out = Vec::with_capacity(ids.len());
    for c in ids.into_iter().map(|id| &cluster.claims[id]) {
        let mut claim = c.claim.clone();
        let mut note = None;
        if let Some(allocation) = claim.status.as_mut().and_then(|s| s.allocation.as_mut()) {
            let waits = allocation
                .devices
                .iter()
                .flat_map(|d| d.results.iter().flatten())
                .any(|r| r.binding_conditions.as_ref().is_some_and(|b| !b.is_empty()));
            if waits && allocation.allocation_timestamp.is_none() {
                match now {
                    Some(t) => allocation.allocation_timestamp = Some(t.clone()),
                    None => {
                        note = Some(
                            "allocationTimestamp (set at PreBind: its devices have binding conditions) is not written: it needs --now (a plan reads no clock)"
                                .to_string(),
                        )
                    }
                }
            }
        }
        out.push((*claim, note));
    }
    out
}

/// The pods a plan's effects write, as the API server would hold them after binding
/// (spec.nodeName set, PodScheduled=True), after a failed attempt (PodScheduled=False with the
/// effect's reason and message), and victims of preemption as they are before their deletion
/// (DisruptionTarget=True): bound pods first, then unschedulable ones, then victims, each in the
/// effects' order.
pub fn changed_pods(cluster: &Cluster, effects: &[Effect]) -> Vec<Pod> {
    // A pod object is 2 KiB and more: the list is sized once, not grown.
    let written = |e: &Effect| match e {
        Effect::Bind { .. } | Effect::Evict { .. } => 1,
        Effect::PodsUnschedulable { pods, .. } => pods.len(),
        _ => 0,
    };
    let mut out = Vec::with_capacity(effects.iter().map(written).sum());
    for e in effects {
        if let Effect::Bind { pod, node } = e {
            let mut pod = cluster.pod(*pod).pod.object();
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = Some(cluster.node(*node).name().to_string());
            }
            set_scheduled_condition(&mut pod, "True", None, None);
            out.push(pod);
        }
    }
    for e in effects {
        if let Effect::PodsUnschedulable { pods, reason, message } = e {
            for p in pods.iter() {
                let mut pod = cluster.pod(*p).pod.object();
                set_scheduled_condition(&mut pod, "False", Some(reason), Some(message.to_string()));
                out.push(pod);
            }
        }
    }
    for e in effects {
        if let Effect::Evict { pod, by } = e {
            out.push(victim(cluster, *pod, *by));
        }
    }
    out
}

/// A preemption victim with the DisruptionTarget condition the scheduler sets before deleting it.
fn victim(cluster: &Cluster, pod_id: PodId, by: Preemptor) -> Pod {
    let by = match by {
        Preemptor::Group(g) => format!("a higher-priority pod group ({} {})", g.kind(), cluster.node_key(g)),
        Preemptor::Pod(p) => format!("a higher-priority pod ({})", cluster.pod(p).key),
    };
    let mut pod = cluster.pod(pod_id).pod.object();
    let conds = pod.status.get_or_insert_with(PodStatus::default).conditions.get_or_insert_with(Vec::new);
    conds.retain(|c| c.type_ != "DisruptionTarget");
    conds.push(PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        reason: Some("PreemptionByScheduler".into()),
        message: Some(format!("muster: preempting to make room for {by}")),
        ..Default::default()
    });
    pod
}

fn set_scheduled_condition(pod: &mut Pod, status: &str, reason: Option<&str>, message: Option<String>) {
    let st = pod.status.get_or_insert_with(PodStatus::default);
    if reason.is_some() && st.phase.is_none() {
        st.phase = Some("Pending".into());
    }
    let conds = st.conditions.get_or_insert_with(Vec::new);
    conds.retain(|c| c.type_ != "PodScheduled");
    // lastTransitionTime is left out: a plan reads no clock, so that its output is reproducible.
    conds.push(PodCondition {
        type_: "PodScheduled".into(),
        status: status.into(),
        reason: reason.map(str::to_string),
        message,
        ..Default::default()
    });
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
