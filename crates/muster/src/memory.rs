//! The in-memory world: a cluster read from manifests, and a plan written back into the objects
//! as the API server would hold them afterwards.

use std::collections::HashMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use muster_manifest::{Diagnostic, Manifests, Object, Origin};
use muster_sched::eviction::{DeviceKey, DeviceTaints, Eviction, evictions, rule_selects};
use muster_sched::{Cluster, ModelError, Plan, SchedulerNames};

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
}

impl World {
    /// Reads `paths` and builds the cluster. On failure, returns every problem found.
    pub fn load<P: AsRef<Path>>(
        paths: &[P],
        names: &SchedulerNames,
        options: Options,
    ) -> Result<World, Vec<Diagnostic>> {
        let manifests = muster_manifest::load_paths(paths)?;
        Self::from_manifests_with(manifests, names, options)
    }

    pub fn from_manifests(manifests: Manifests, names: &SchedulerNames) -> Result<World, Vec<Diagnostic>> {
        Self::from_manifests_with(manifests, names, Options::default())
    }

    pub fn from_manifests_with(
        mut manifests: Manifests,
        names: &SchedulerNames,
        options: Options,
    ) -> Result<World, Vec<Diagnostic>> {
        let mut nodes = Vec::new();
        let mut pods = Vec::new();
        let mut classes = Vec::new();
        let mut unused: Vec<(&'static str, usize)> = Vec::new();
        let mut bad: Vec<ModelError> = Vec::new();
        let mut origins: HashMap<(&'static str, String), Origin> = HashMap::new();
        let (mut device_classes, mut slices, mut claims, mut templates, mut rules, mut groups) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for l in std::mem::take(&mut manifests.objects) {
            let key = object_key(
                l.object.metadata().namespace.as_deref(),
                l.object.metadata().name.as_deref(),
                l.object.is_namespaced(),
            );
            origins.insert((l.object.kind(), key.clone()), l.origin);
            match l.object {
                Object::Node(n) => nodes.push(*n),
                Object::Pod(p) => pods.push(p),
                Object::PriorityClass(pc) => classes.push(*pc),
                Object::DeviceClass(c) => device_classes.push(*c),
                Object::ResourceSlice(s) => slices.push(*s),
                Object::ResourceClaim(c) => claims.push(*c),
                Object::ResourceClaimTemplate(t) => templates.push(*t),
                Object::DeviceTaintRule(r) => rules.push(*r),
                Object::PodGroup(g) => groups.push(*g),
                // The cluster reads PodGroups as v1beta1; v1alpha3 has the same scheduling fields.
                Object::PodGroupV1alpha3(g) => {
                    let mut v = serde_json::to_value(&*g).expect("k8s-openapi types serialize");
                    v["apiVersion"] = "scheduling.k8s.io/v1beta1".into();
                    match serde_json::from_value(v) {
                        Ok(g) => groups.push(g),
                        Err(e) => bad.push(ModelError {
                            kind: "PodGroup",
                            object: key,
                            field: None,
                            message: format!("cannot be read as scheduling.k8s.io/v1beta1: {e}"),
                        }),
                    }
                }
                other => match unused.iter_mut().find(|(k, _)| *k == other.kind()) {
                    Some((_, n)) => *n += 1,
                    None => unused.push((other.kind(), 1)),
                },
            }
        }
        unused.sort();
        let mut cluster = Cluster::build(nodes, pods, &classes, names).map_err(|mut errs| {
            errs.append(&mut bad);
            errs.into_iter().map(|e| model_diagnostic(e, &origins)).collect::<Vec<_>>()
        })?;
        if !bad.is_empty() {
            return Err(bad.into_iter().map(|e| model_diagnostic(e, &origins)).collect());
        }
        // PodGroups first: a member's claim entry identical to its group's is the group's claim.
        cluster.add_pod_groups(groups);
        cluster.add_claims(claims, &templates);
        cluster.map_extended_resources(&device_classes);
        // The taints as published, with their sources; then the slices as the scheduler sees them.
        let mut taints = DeviceTaints::new(&slices, &rules);
        apply_taint_rules(&mut slices, &rules);
        if options.health_propagation {
            taints.propagate_health(&slices);
            apply_propagated_taints(&mut slices, &taints);
        }
        let evictions =
            evictions(cluster.claims.iter().map(|c| &c.claim), cluster.pods.iter().map(|p| &*p.pod), &taints);
        Ok(World { manifests, cluster, unused, device_classes, slices, rules, taints, evictions })
    }
}

/// DeviceTaintRules, applied as the scheduler sees slices: each rule's taint is added to every
/// device its selector names (driver, pool, device; a rule without a selector names every device,
/// as upstream's code does).
fn apply_taint_rules(slices: &mut [ResourceSlice], rules: &[DeviceTaintRule]) {
    for rule in rules {
        for s in slices.iter_mut() {
            let (driver, pool) = (s.spec.driver.as_str(), s.spec.pool.name.as_str());
            for d in s.spec.devices.iter_mut().flatten() {
                if rule_selects(rule, driver, pool, &d.name) {
                    d.taints.get_or_insert_with(Vec::new).push(rule.spec.taint.clone());
                }
            }
        }
    }
}

/// Health propagation, applied after the rules: each device gets the taints
/// [`DeviceTaints::propagate_health`] copied to it from its full device.
fn apply_propagated_taints(slices: &mut [ResourceSlice], taints: &DeviceTaints) {
    let propagated = taints.propagated();
    if propagated.is_empty() {
        return;
    }
    for s in slices.iter_mut() {
        let (driver, pool) = (s.spec.driver.clone(), s.spec.pool.name.clone());
        for d in s.spec.devices.iter_mut().flatten() {
            if let Some(extra) = propagated.get(&DeviceKey::new(&driver, &pool, &d.name)) {
                d.taints.get_or_insert_with(Vec::new).extend(extra.iter().map(|t| t.taint.clone()));
            }
        }
    }
}

fn object_key(ns: Option<&str>, name: Option<&str>, namespaced: bool) -> String {
    let name = name.unwrap_or_default();
    match ns {
        Some(ns) if namespaced => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

fn model_diagnostic(e: ModelError, origins: &HashMap<(&'static str, String), Origin>) -> Diagnostic {
    let origin = origins.get(&(e.kind, e.object.clone()));
    Diagnostic {
        file: origin.map_or_else(|| "<input>".into(), |o| o.file.clone()),
        pos: origin.map(|o| o.pos),
        object: Some(format!("{} {}", e.kind, e.object)),
        field: e.field,
        message: e.message,
    }
}

/// The ResourceClaims a plan created or changed, as the API server would hold them.
pub fn changed_claims(cluster: &Cluster) -> Vec<ResourceClaim> {
    cluster.claims.iter().filter(|c| c.changed).map(|c| c.claim.clone()).collect()
}

/// The pods a plan changed, as the API server would hold them after binding (spec.nodeName set,
/// PodScheduled=True) or after a failed attempt (PodScheduled=False, reason Unschedulable).
pub fn changed_pods(cluster: &Cluster, plan: &Plan) -> Vec<Pod> {
    let mut out = Vec::with_capacity(plan.placements.len() + plan.unschedulable.len());
    for (pod_id, node_id) in &plan.placements {
        let mut pod = (*cluster.pod(*pod_id).pod).clone();
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(cluster.node(*node_id).name().to_string());
        }
        set_scheduled_condition(&mut pod, "True", None, None);
        out.push(pod);
    }
    for (pod_id, err) in &plan.unschedulable {
        let mut pod = (*cluster.pod(*pod_id).pod).clone();
        set_scheduled_condition(&mut pod, "False", Some("Unschedulable"), Some(err.message()));
        out.push(pod);
    }
    // Preemption victims get DisruptionTarget before the scheduler deletes them.
    for (pod_id, g) in &plan.preempted {
        let mut pod = (*cluster.pod(*pod_id).pod).clone();
        let conds = pod.status.get_or_insert_with(PodStatus::default).conditions.get_or_insert_with(Vec::new);
        conds.retain(|c| c.type_ != "DisruptionTarget");
        conds.push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("PreemptionByScheduler".into()),
            message: Some(format!(
                "muster: preempting to make room for a higher-priority pod group (podgroup {})",
                cluster.groups[*g].key
            )),
            ..Default::default()
        });
        out.push(pod);
    }
    out
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
