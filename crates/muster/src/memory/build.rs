//! Building a [`World`] from manifests. Each object is taken as it is read ([`Builder::add`]):
//! validated, sorted by kind, and a pod packed for the store at once ([`StoredPod`]), so that the
//! whole input is never held decoded (at 500,000 pods that is the peak of a run). Then
//! [`Builder::finish`] runs the controllers, builds the cluster and makes the checks that need
//! every object.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_controllers::Workloads;
use muster_controllers::eviction::evictions;
use muster_controllers::slice_view::scheduling_view;
use muster_manifest::{Diagnostic, Loaded, Manifests, Object};
use muster_sched::spread_selectors::SpreadSelector;
use muster_sched::volumes::Volumes;
use muster_sched::{Cluster, ModelError, PodObject, SchedulerNames, StoredPod};

use super::origins::Origins;
use super::{Options, World};

/// A world being built, object by object.
pub struct Builder<'n> {
    names: &'n SchedulerNames,
    options: Options,
    nodes: Vec<Node>,
    pods: Vec<StoredPod>,
    classes: Vec<PriorityClass>,
    unused: Vec<(&'static str, usize)>,
    bad: Vec<ModelError>,
    composites: Vec<CompositePodGroup>,
    budgets: Vec<PodDisruptionBudget>,
    origins: Origins,
    workloads: Workloads,
    workload_annotations: HashMap<String, BTreeMap<String, String>>,
    device_classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
    claims: Vec<ResourceClaim>,
    templates: Vec<ResourceClaimTemplate>,
    rules: Vec<DeviceTaintRule>,
    groups: Vec<PodGroup>,
    namespaces: Namespaces,
    storage: Volumes,
    spread_selectors: Vec<SpreadSelector>,
}

impl<'n> Builder<'n> {
    pub fn new(names: &'n SchedulerNames, options: Options) -> Builder<'n> {
        Builder {
            names,
            options,
            nodes: Vec::new(),
            pods: Vec::new(),
            classes: Vec::new(),
            unused: Vec::new(),
            bad: Vec::new(),
            composites: Vec::new(),
            budgets: Vec::new(),
            origins: Origins::default(),
            workloads: Workloads::default(),
            workload_annotations: HashMap::new(),
            device_classes: Vec::new(),
            slices: Vec::new(),
            claims: Vec::new(),
            templates: Vec::new(),
            rules: Vec::new(),
            groups: Vec::new(),
            namespaces: Namespaces::default(),
            storage: Volumes { enabled: true, ..Default::default() },
            spread_selectors: Vec::new(),
        }
    }

    /// Takes one object of the input: checks it, and keeps it with its kind.
    pub fn add(&mut self, l: Loaded) {
        let key = object_key(
            l.object.metadata().namespace.as_deref(),
            l.object.metadata().name.as_deref(),
            l.object.is_namespaced(),
        );
        self.origins.insert(l.object.kind(), key.clone(), l.origin);
        self.bad.extend(muster_sched::validate::on(l.object.kind(), &key, crate::validation::object(&l.object)));
        // Beyond upstream: a gang's device topology, on a PodGroup or the Workload it names.
        if matches!(l.object.kind(), "PodGroup" | "Workload") {
            let annotations = l.object.metadata().annotations.as_ref();
            self.bad.extend(muster_sched::validate::on(
                l.object.kind(),
                &key,
                muster_sched::device_topology::errors(annotations),
            ));
            if l.object.kind() == "Workload"
                && let Some(a) = annotations
            {
                self.workload_annotations.insert(key.clone(), a.clone());
            }
        }
        match l.object {
            Object::Node(n) => self.nodes.push(*n),
            Object::Namespace(n) => self.namespaces.add(*n),
            Object::Pod(p) => self.pods.push(StoredPod::new(p)),
            Object::PriorityClass(pc) => self.classes.push(*pc),
            Object::DeviceClass(c) => self.device_classes.push(*c),
            Object::ResourceSlice(s) => self.slices.push(*s),
            Object::ResourceClaim(c) => self.claims.push(*c),
            Object::ResourceClaimTemplate(t) => self.templates.push(*t),
            Object::DeviceTaintRule(r) => self.rules.push(*r),
            Object::PodGroup(g) => self.groups.push(*g),
            Object::CompositePodGroup(c) => self.composites.push(*c),
            Object::PodDisruptionBudget(b) => self.budgets.push(*b),
            Object::Deployment(d) => self.workloads.deployments.push(*d),
            Object::ReplicaSet(r) => self.workloads.replica_sets.push(*r),
            Object::StatefulSet(s) => self.workloads.stateful_sets.push(*s),
            Object::Job(j) => self.workloads.jobs.push(*j),
            // Read for their selectors: PodTopologySpread's default constraints.
            Object::Service(svc) => self.spread_selectors.push(SpreadSelector::service(&svc)),
            Object::ReplicationController(rc) => {
                self.spread_selectors.push(SpreadSelector::replication_controller(&rc))
            }
            // A Workload is used when it carries a gang's device topology (read above); the
            // scheduler otherwise works on the PodGroups stamped from it.
            Object::Workload(ref w) if device_topology(&w.metadata) => {}
            Object::WorkloadV1alpha3(ref w) if device_topology(&w.metadata) => {}
            Object::PersistentVolumeClaim(c) => {
                let ns = c.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                self.storage.claims.insert((ns, c.metadata.name.clone().unwrap_or_default()), *c);
            }
            Object::PersistentVolume(v) => {
                self.storage.volumes.insert(v.metadata.name.clone().unwrap_or_default(), *v);
            }
            Object::StorageClass(c) => {
                self.storage.classes.insert(c.metadata.name.clone().unwrap_or_default(), *c);
            }
            Object::CSINode(n) => {
                self.storage.csi_nodes.insert(n.metadata.name.clone().unwrap_or_default(), *n);
            }
            Object::CSIDriver(d) => {
                self.storage.csi_drivers.insert(d.metadata.name.clone().unwrap_or_default(), *d);
            }
            Object::CSIStorageCapacity(c) => {
                self.storage.capacities.insert(key.clone(), *c);
            }
            // The cluster reads PodGroups as v1beta1; v1alpha3 has the same scheduling fields.
            Object::PodGroupV1alpha3(g) => {
                let mut v = serde_json::to_value(&*g).expect("k8s-openapi types serialize");
                v["apiVersion"] = "scheduling.k8s.io/v1beta1".into();
                match serde_json::from_value(v) {
                    Ok(g) => self.groups.push(g),
                    Err(e) => self.bad.push(ModelError {
                        kind: "PodGroup",
                        object: key,
                        field: None,
                        message: format!("cannot be read as scheduling.k8s.io/v1beta1: {e}"),
                    }),
                }
            }
            other => match self.unused.iter_mut().find(|(k, _)| *k == other.kind()) {
                Some((_, n)) => *n += 1,
                None => self.unused.push((other.kind(), 1)),
            },
        }
    }

    /// The world of every object added; `manifests` holds what the loader kept besides them.
    pub fn finish(self, mut manifests: Manifests) -> Result<World, Vec<Diagnostic>> {
        let Builder {
            names,
            options,
            nodes,
            mut pods,
            classes,
            mut unused,
            mut bad,
            composites,
            budgets,
            mut origins,
            mut workloads,
            workload_annotations,
            device_classes,
            slices,
            claims,
            templates,
            rules,
            groups,
            namespaces,
            mut storage,
            mut spread_selectors,
        } = self;
        unused.sort();
        // What the API server refuses in the objects the model reads besides nodes, pods and
        // PriorityClasses (those are checked as the cluster is built).
        bad.extend(api_server_rules(&groups, &composites, &claims, &templates, &device_classes));
        bad.extend(namespaces.admin_access(&claims, &templates));
        bad.extend(muster_sched::validate::volumes::all(&storage));
        for sl in &slices {
            let name = sl.metadata.name.clone().unwrap_or_default();
            bad.extend(muster_sched::validate::on("ResourceSlice", &name, muster_sched::validate::resource_slice(sl)));
        }
        // The workload controllers, before the snapshot: their pods are scheduled like any other.
        let expansion = {
            let existing: Vec<&dyn PodObject> = pods.iter().map(|p| p as &dyn PodObject).collect();
            muster_controllers::expand(&mut workloads, &existing)
        };
        pods.extend(expansion.pods().map(|p| StoredPod::new(Box::new(p.clone()))));
        // The ephemeral-volume and StatefulSet controllers: the claims of pods' generic ephemeral
        // volumes and of StatefulSets' volumeClaimTemplates.
        let made = {
            let all: Vec<&dyn PodObject> = pods.iter().map(|p| p as &dyn PodObject).collect();
            let existing = storage.claims.keys().cloned().collect();
            let mut made = muster_controllers::ephemeral::claims_for(&all, &existing);
            made.extend(muster_controllers::statefulset::claims_for(&workloads.stateful_sets, &all, &existing));
            made
        };
        for c in made {
            let key = (c.metadata.namespace.clone().unwrap_or_default(), c.metadata.name.clone().unwrap_or_default());
            storage.claims.insert(key, c);
        }
        // A created pod's problems (an unknown PriorityClass in a template) point at its workload.
        for c in &expansion.created {
            let root = (c.root.kind, format!("{}/{}", c.root.namespace, c.root.name));
            if let Some(origin) = origins.get(root.0, &root.1).cloned() {
                let r = c.object.reference();
                origins.insert(r.kind, format!("{}/{}", r.namespace, r.name), origin);
            }
        }
        let mut cluster = Cluster::build(nodes, pods, &classes, names).map_err(|mut errs| {
            errs.append(&mut bad);
            errs.into_iter().map(|e| model_diagnostic(e, &mut origins)).collect::<Vec<_>>()
        })?;
        if !bad.is_empty() {
            return Err(bad.into_iter().map(|e| model_diagnostic(e, &mut origins)).collect());
        }
        // PodGroups first: a member's claim entry identical to its group's is the group's claim.
        cluster.workload_annotations = workload_annotations;
        cluster.add_pod_groups(groups);
        cluster.add_composite_pod_groups(composites);
        cluster.add_disruption_budgets(budgets);
        storage.default_class();
        cluster.volumes = storage;
        cluster.template_providers = manifests
            .provided_templates
            .iter()
            .map(|t| ((t.namespace.clone(), t.name.clone()), t.by.clone()))
            .collect();
        cluster.namespace_labels = namespaces.with_name_labels();
        // Those the controllers created included.
        spread_selectors.extend(workloads.replica_sets.iter().map(SpreadSelector::replica_set));
        spread_selectors.extend(workloads.stateful_sets.iter().map(SpreadSelector::stateful_set));
        for s in spread_selectors {
            cluster.spread_selectors.upsert(s);
        }
        cluster.add_claims(claims, &templates);
        cluster.map_extended_resources(&device_classes);
        // Allocations naming devices no slice publishes: warnings (not an API-server rule).
        let located_warnings: Vec<Diagnostic> = {
            let published: std::collections::HashSet<(String, String, String)> = slices
                .iter()
                .flat_map(|s| {
                    s.spec
                        .devices
                        .iter()
                        .flatten()
                        .map(|d| (s.spec.driver.clone(), s.spec.pool.name.clone(), d.name.clone()))
                })
                .collect();
            let mut found = Vec::new();
            for c in cluster.claims.iter().filter(|c| !c.generated) {
                let object = object_key(
                    c.claim.metadata.namespace.as_deref().or(Some("default")),
                    c.claim.metadata.name.as_deref(),
                    true,
                );
                let warnings = muster_sched::validate::unpublished_allocations(&c.claim, &published);
                found.extend(muster_sched::validate::on("ResourceClaim", &object, warnings));
            }
            found.extend(namespaces.undefined(cluster.pods.iter().map(|p| &p.pod)));
            // Objects read in a beta version come first, as the loader found them.
            let mut located = std::mem::take(&mut manifests.warnings);
            cluster.warnings.extend(located.iter().map(ToString::to_string));
            cluster.warnings.extend(found.iter().map(ToString::to_string));
            located.extend(found.into_iter().map(|w| model_diagnostic(w, &mut origins)));
            located
        };
        // The taints as published, with their sources; then the slices as the scheduler sees them.
        let (slices, taints) = scheduling_view(&slices, &rules, options.health_propagation);
        let evictions =
            evictions(cluster.claims.iter().map(|c| &*c.claim), cluster.pods.iter().map(|p| &p.pod), &taints);
        Ok(World {
            manifests,
            cluster,
            unused,
            device_classes,
            slices,
            rules,
            taints,
            evictions,
            created: expansion.created,
            controller_notes: expansion.notes,
            warnings: located_warnings,
        })
    }
}

/// Whether an object carries muster's device-topology annotation.
fn device_topology(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.annotations.as_ref().is_some_and(|a| a.contains_key(muster_sched::device_topology::KEY_ANNOTATION))
}

/// The API server's rules for PodGroups, CompositePodGroups, ResourceClaims and
/// ResourceClaimTemplates (see [`muster_sched::validate`]).
fn api_server_rules(
    groups: &[PodGroup],
    composites: &[CompositePodGroup],
    claims: &[ResourceClaim],
    templates: &[ResourceClaimTemplate],
    classes: &[DeviceClass],
) -> Vec<ModelError> {
    use muster_sched::validate;
    let key = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        object_key(m.namespace.as_deref().or(Some("default")), m.name.as_deref(), true)
    };
    let mut out = Vec::new();
    for g in groups {
        out.extend(validate::on("PodGroup", &key(&g.metadata), validate::pod_group(g)));
    }
    for c in composites {
        out.extend(validate::on("CompositePodGroup", &key(&c.metadata), validate::composite_pod_group(c)));
    }
    for c in claims {
        if let Some(devices) = c.spec.as_ref().and_then(|s| s.devices.as_ref()) {
            out.extend(validate::on(
                "ResourceClaim",
                &key(&c.metadata),
                validate::device_claim(devices, "spec.devices"),
            ));
        }
    }
    for t in templates {
        if let Some(devices) = t.spec.as_ref().and_then(|s| s.spec.as_ref()).and_then(|s| s.devices.as_ref()) {
            let errors = validate::device_claim(devices, "spec.spec.devices");
            out.extend(validate::on("ResourceClaimTemplate", &key(&t.metadata), errors));
        }
    }
    for c in classes {
        let name = c.metadata.name.clone().unwrap_or_default();
        out.extend(validate::on("DeviceClass", &name, validate::device_class(c)));
    }
    out
}

/// The Namespaces of the input, by name, with their labels.
#[derive(Default)]
struct Namespaces {
    labels: BTreeMap<String, BTreeMap<String, String>>,
}

impl Namespaces {
    /// Each listed namespace's labels, with the name label the API server adds to every one.
    fn with_name_labels(&self) -> HashMap<String, BTreeMap<String, String>> {
        let labels = muster_sched::plugins::pod_matcher::namespace_labels;
        self.labels.iter().map(|(name, own)| (name.clone(), labels(name, Some(own)))).collect()
    }

    fn add(&mut self, ns: k8s_openapi::api::core::v1::Namespace) {
        let name = ns.metadata.name.unwrap_or_default();
        self.labels.insert(name, ns.metadata.labels.unwrap_or_default());
    }

    /// Admin access asked for in a namespace without the admin-access label: refused, as the API
    /// server refuses it.
    fn admin_access(&self, claims: &[ResourceClaim], templates: &[ResourceClaimTemplate]) -> Vec<ModelError> {
        use muster_sched::validate;
        let mut out = Vec::new();
        let mut one = |kind, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, devices, path| {
            let ns = meta.namespace.as_deref().unwrap_or("default");
            let key = object_key(Some(ns), meta.name.as_deref(), true);
            out.extend(validate::on(kind, &key, validate::admin_access(devices, path, ns, self.labels.get(ns))));
        };
        for c in claims {
            if let Some(d) = c.spec.as_ref().and_then(|s| s.devices.as_ref()) {
                one("ResourceClaim", &c.metadata, d, "spec.devices");
            }
        }
        for t in templates {
            if let Some(d) = t.spec.as_ref().and_then(|s| s.spec.as_ref()).and_then(|s| s.devices.as_ref()) {
                one("ResourceClaimTemplate", &t.metadata, d, "spec.spec.devices");
            }
        }
        out
    }

    /// When the input defines Namespaces, a pod in a namespace it does not define is a warning
    /// (one per namespace, on its first pod); inputs that define none are taken as they are.
    fn undefined<'p>(&self, pods: impl Iterator<Item = &'p StoredPod>) -> Vec<ModelError> {
        const ALWAYS: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];
        if self.labels.is_empty() {
            return Vec::new();
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for p in pods {
            let ns = p.meta().namespace.as_deref().unwrap_or("default");
            if ALWAYS.contains(&ns) || self.labels.contains_key(ns) || !seen.insert(ns.to_string()) {
                continue;
            }
            out.push(ModelError {
                kind: "Pod",
                object: object_key(Some(ns), p.meta().name.as_deref(), true),
                field: Some("metadata.namespace".into()),
                message: format!(
                    "namespace {ns:?} is not among the input's Namespaces; muster plans as if it existed without labels"
                ),
            });
        }
        out
    }
}

fn object_key(ns: Option<&str>, name: Option<&str>, namespaced: bool) -> String {
    let name = name.unwrap_or_default();
    match ns {
        Some(ns) if namespaced => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

fn model_diagnostic(e: ModelError, origins: &mut Origins) -> Diagnostic {
    let origin = origins.get(e.kind, &e.object);
    Diagnostic {
        file: origin.map_or_else(|| "<input>".into(), |o| o.file.clone()),
        pos: origin.map(|o| o.pos),
        object: Some(format!("{} {}", e.kind, e.object)),
        field: e.field,
        message: e.message,
    }
}
