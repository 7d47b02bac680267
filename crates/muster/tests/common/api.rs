//! A scenario put into a cluster through its API only, as a person would with `kubectl create`:
//! the objects created in dependency order with the server's own metadata, their given status
//! written through the status subresource, the cluster's controllers waited for, and taken away
//! again afterwards. Works against a real Kubernetes 1.37 API server (`MUSTER_E2E_KUBECONFIG`)
//! and against the fake (`muster-fakeapi`, a test double) alike: only API calls, no back door.
//!
//! What a real cluster needs that a scenario does not say, done here for every target:
//! - nodes get a `Ready` condition (the scenarios' nodes have no kubelet; the node lifecycle
//!   controller lifts the `node.kubernetes.io/not-ready` taint that admission put on them, and
//!   the suite waits for that) and kwok's annotation (where kwok runs, it keeps them Ready);
//! - the server ignores given UIDs, so UIDs the input refers to (owner references, a claim's
//!   `reservedFor`) are rewritten to the created objects' UIDs;
//! - a pod's `spec.priority` is left to the Priority admission plugin when it names a class;
//! - pods the scenario lets `default-scheduler` have are given to muster's own name, so that the
//!   cluster's kube-scheduler keeps its hands off;
//! - a pod deleted on a node without a kubelet stays `Terminating` forever: a kubelet stand-in
//!   ([`kubelet`]) removes such pods while muster runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope, pinned_kind};
use serde_json::{Value, json};

/// The scheduler name pods get instead of `default-scheduler` (or none).
pub const SCHEDULER: &str = "muster";

/// The order kinds are created in: what is referred to before what refers to it.
const ORDER: &[&str] = &[
    "Namespace",
    "PriorityClass",
    "DeviceClass",
    "StorageClass",
    "CSIDriver",
    "Node",
    "CSINode",
    "PersistentVolume",
    "ResourceSlice",
    "DeviceTaintRule",
    "CSIStorageCapacity",
    "Service",
    "ResourceClaimTemplate",
    "PersistentVolumeClaim",
    "PodDisruptionBudget",
    "Workload",
    "CompositePodGroup",
    "PodGroup",
    "ResourceClaim",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "StatefulSet",
    "Job",
];

/// One object the suite created (or a controller made for it), to delete afterwards.
#[derive(Clone, Debug)]
pub struct Made {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub name: String,
}

/// A scenario in the cluster: what the suite created, the namespaces it used, the input's
/// literal pod and claim names, and its workloads' names (to read generated names by).
#[derive(Default)]
pub struct Placed {
    pub made: Vec<Made>,
    pub namespaces: BTreeSet<String>,
    pub literal: BTreeSet<String>,
    pub workloads: Vec<String>,
    /// The input's pods and claims (`Kind ns/name`) as given, to tell this run's work apart.
    pub before: BTreeMap<String, Value>,
}

impl Placed {
    /// What the comparison needs to know of the input: its pods' and claims' names and states,
    /// and its workloads.
    pub fn of(objects: &[Value]) -> Placed {
        let mut placed = Placed::default();
        for o in objects {
            let kind = s(&o["kind"]);
            if matches!(kind.as_str(), "Pod" | "ResourceClaim") {
                placed.literal.insert(key_of(o));
                placed.before.insert(format!("{kind} {}", key_of(o)), o.clone());
            }
            if matches!(kind.as_str(), "ReplicaSet" | "Deployment" | "StatefulSet" | "Job" | "ReplicationController") {
                placed.workloads.push(key_of(o));
            }
        }
        placed
    }
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

pub fn key_of(v: &Value) -> String {
    let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
    format!("{ns}/{}", s(&v["metadata"]["name"]))
}

async fn resource_of(client: &Client, v: &Value) -> Result<(ApiResource, bool), String> {
    let av = s(&v["apiVersion"]);
    let (group, version) = av.split_once('/').unwrap_or(("", &av));
    let gvk = GroupVersionKind::gvk(group, version, &s(&v["kind"]));
    let (ar, caps) = pinned_kind(client, &gvk).await.map_err(|e| format!("{av} {}: {e}", s(&v["kind"])))?;
    Ok((ar, caps.scope == Scope::Namespaced))
}

fn api(client: &Client, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

/// The input made ready for an API server: scheduler names, priorities (a pod's `priority`
/// without a class gets a PriorityClass of that value: the Priority admission plugin refuses a
/// priority it did not compute), node readiness.
pub fn prepare(objects: &mut Vec<Value>) {
    let mut classes: BTreeMap<String, i64> = BTreeMap::new();
    for o in objects.iter_mut() {
        let kind = s(&o["kind"]);
        if kind == "Node" {
            ready(o);
            // kwok, where installed, keeps such nodes Ready and plays their kubelet.
            o["metadata"]["annotations"]["kwok.x-k8s.io/node"] = json!("fake");
        }
        let spec = match kind.as_str() {
            "Pod" => Some(&mut o["spec"]),
            "ReplicaSet" | "Deployment" | "StatefulSet" | "Job" | "ReplicationController" => {
                Some(&mut o["spec"]["template"]["spec"])
            }
            _ => None,
        };
        if let Some(spec) = spec.filter(|s| s.is_object()) {
            if spec["schedulerName"].as_str().is_none_or(|n| n == "default-scheduler") {
                spec["schedulerName"] = json!(SCHEDULER);
            }
            if spec["priorityClassName"].is_string()
                && let Some(m) = spec.as_object_mut()
            {
                m.remove("priority");
            } else if let Some(value) = spec["priority"].as_i64() {
                let class = format!("muster-e2e-priority-{value}");
                spec["priorityClassName"] = json!(class);
                spec.as_object_mut().map(|m| m.remove("priority"));
                classes.insert(class, value);
            }
        }
    }
    let given: BTreeSet<String> =
        objects.iter().filter(|o| o["kind"] == "PriorityClass").map(|o| s(&o["metadata"]["name"])).collect();
    let classes = classes.into_iter().filter(|(c, _)| !given.contains(c)).map(|(name, value)| {
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
            "description": "A pod of the scenario gives this priority without a class; the API server takes it from one."})
    });
    objects.extend(classes);
    objects.sort_by_key(|o| ORDER.iter().position(|k| *k == o["kind"]).unwrap_or(ORDER.len()));
}

/// A `Ready=True` condition, as a kubelet reports it (kept when the input gives one).
fn ready(node: &mut Value) {
    if !node["status"].is_object() {
        node["status"] = json!({});
    }
    let conditions = node["status"]["conditions"].as_array().cloned().unwrap_or_default();
    if conditions.iter().any(|c| c["type"] == "Ready") {
        return;
    }
    let now = k8s_openapi::jiff::Timestamp::now();
    let time = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now)).unwrap();
    let mut conditions = conditions;
    conditions.push(json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
        "lastHeartbeatTime": time, "lastTransitionTime": time}));
    node["status"]["conditions"] = json!(conditions);
}

/// Creates `objects` (already [`prepare`]d), then writes their status. UIDs in owner
/// references and `reservedFor` are mapped to the created objects'.
pub async fn create_all(client: &Client, objects: &[Value], placed: &mut Placed) -> Result<(), String> {
    let mut uids: HashMap<String, String> = HashMap::new();
    let (mut statuses, mut owners) = (Vec::new(), Vec::new());
    for o in objects {
        let (ar, namespaced) = resource_of(client, o).await?;
        let ns = namespaced.then(|| o["metadata"]["namespace"].as_str().unwrap_or("default").to_string());
        if let Some(ns) = &ns
            && placed.namespaces.insert(ns.clone())
        {
            ensure_namespace(client, ns).await?;
        }
        let mut body = o.clone();
        let dangling = strip_server_fields(&mut body, &uids);
        let created = create_one(client, &ar, ns.as_deref(), &body).await?;
        let Some(created) = created else { continue }; // a namespace that was there
        let name = s(&created["metadata"]["name"]);
        if dangling {
            owners.push((ar.clone(), ns.clone(), name.clone(), o["metadata"]["ownerReferences"].clone()));
        }
        if let Some(old) = o["metadata"]["uid"].as_str() {
            uids.insert(old.to_string(), s(&created["metadata"]["uid"]));
        }
        placed.made.push(Made { resource: ar.clone(), namespace: ns.clone(), name: name.clone() });
        if o["status"].is_object() {
            statuses.push((ar, ns, name, o["status"].clone()));
        }
    }
    // Owners created after their dependents: the references now, with the owners' UIDs (a
    // real controller has adopted the orphan by then, to the same owner).
    for (ar, ns, name, mut refs) in owners {
        map_uids(&mut refs, &uids);
        let patch = json!({"metadata": {"ownerReferences": refs}});
        api(client, &ar, ns.as_deref())
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("owners of {} {name}: {e}", ar.kind))?;
    }
    for (ar, ns, name, mut status) in statuses {
        map_uids(&mut status, &uids);
        let patch = json!({"status": status});
        api(client, &ar, ns.as_deref())
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("status of {} {name}: {e}", ar.kind))?;
    }
    Ok(())
}

async fn create_one(
    client: &Client,
    ar: &ApiResource,
    ns: Option<&str>,
    body: &Value,
) -> Result<Option<Value>, String> {
    let obj: DynamicObject = serde_json::from_value(body.clone()).map_err(|e| e.to_string())?;
    match api(client, ar, ns).create(&PostParams::default(), &obj).await {
        Ok(made) => Ok(Some(serde_json::to_value(made).map_err(|e| e.to_string())?)),
        Err(kube::Error::Api(e)) if e.code == 409 && ar.kind == "Namespace" => Ok(None),
        Err(e) => Err(format!("create {} {}: {e}", ar.kind, key_of(body))),
    }
}

async fn ensure_namespace(client: &Client, ns: &str) -> Result<(), String> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    if namespaces.get_opt(ns).await.map_err(|e| e.to_string())?.is_some() {
        return Ok(());
    }
    let body = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    match namespaces.create(&PostParams::default(), &body).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(format!("namespace {ns}: {e}")),
    }
}

/// What the server sets on create, taken out; owner references' UIDs mapped, and those to an
/// owner not created yet left out (a dependent of a missing owner is garbage-collected).
/// Whether some were left out.
fn strip_server_fields(body: &mut Value, uids: &HashMap<String, String>) -> bool {
    if let Some(meta) = body["metadata"].as_object_mut() {
        for field in ["uid", "resourceVersion", "generation", "managedFields"] {
            meta.remove(field);
        }
    }
    if let Some(m) = body.as_object_mut() {
        m.remove("status");
    }
    let Some(owners) = body["metadata"]["ownerReferences"].as_array_mut() else { return false };
    let before = owners.len();
    owners.retain(|o| o["uid"].as_str().is_none_or(|u| uids.contains_key(u)));
    let dangling = owners.len() < before;
    for o in owners {
        map_uids(o, uids);
    }
    dangling
}

/// Every `uid` field under `v` that names an input UID, rewritten to the created object's.
fn map_uids(v: &mut Value, uids: &HashMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match (k.as_str(), x.as_str().and_then(|u| uids.get(u))) {
                    ("uid", Some(new)) => *x = json!(new),
                    _ => map_uids(x, uids),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| map_uids(x, uids)),
        _ => {}
    }
}

/// Waits until the cluster's controllers are done with the input: no node carries a
/// not-ready/unreachable taint the input did not give it, every pod's claims from templates
/// exist, and the pods and claims stay the same for `quiet`.
pub async fn settle(client: &Client, placed: &Placed, objects: &[Value], quiet: Duration) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = None;
    loop {
        let pending = not_settled(client, placed, objects).await?;
        let now = snapshot(client, placed).await?;
        if pending.is_none() && last.as_ref() == Some(&now) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the cluster did not settle in 90 s: {}", pending.unwrap_or_default()));
        }
        last = Some(now);
        tokio::time::sleep(quiet.max(Duration::from_millis(20))).await;
    }
}

/// What the cluster still owes the input, in words; `None` when nothing.
async fn not_settled(client: &Client, placed: &Placed, objects: &[Value]) -> Result<Option<String>, String> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    for o in objects.iter().filter(|o| o["kind"] == "Node") {
        let name = s(&o["metadata"]["name"]);
        let node = nodes.get(&name).await.map_err(|e| e.to_string())?;
        let given = |k: &str| o["spec"]["taints"].as_array().is_some_and(|t| t.iter().any(|t| t["key"] == k));
        for t in node.spec.and_then(|s| s.taints).unwrap_or_default() {
            if matches!(t.key.as_str(), "node.kubernetes.io/not-ready" | "node.kubernetes.io/unreachable")
                && !given(&t.key)
            {
                return Ok(Some(format!(
                    "node {name} keeps the {} taint (nodes without a kubelet need kwok's controller, or \
                     the node lifecycle controller to read their Ready condition)",
                    t.key
                )));
            }
        }
    }
    for ns in &placed.namespaces {
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
        for p in pods.list(&ListParams::default()).await.map_err(|e| e.to_string())? {
            let templated = p
                .spec
                .iter()
                .flat_map(|s| s.resource_claims.iter().flatten())
                .filter(|c| c.resource_claim_template_name.is_some());
            let recorded = p.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
            let templates: Api<k8s_openapi::api::resource::v1::ResourceClaimTemplate> =
                Api::namespaced(client.clone(), ns);
            for c in templated {
                let template = c.resource_claim_template_name.as_deref().unwrap_or_default();
                // A template that does not exist: the controller makes nothing; nothing to wait for.
                let exists = templates.get_opt(template).await.map_err(|e| e.to_string())?.is_some();
                if exists && !recorded.is_some_and(|r| r.iter().any(|r| r.name == c.name)) {
                    return Ok(Some(format!(
                        "pod {ns}/{} waits for its claim {}",
                        p.metadata.name.unwrap_or_default(),
                        c.name
                    )));
                }
            }
        }
    }
    Ok(None)
}

/// The names of the pods and claims in the scenario's namespaces.
async fn snapshot(client: &Client, placed: &Placed) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for ns in &placed.namespaces {
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
        let claims: Api<k8s_openapi::api::resource::v1::ResourceClaim> = Api::namespaced(client.clone(), ns);
        let lp = ListParams::default();
        names
            .extend(pods.list(&lp).await.map_err(|e| e.to_string())?.items.into_iter().filter_map(|p| p.metadata.name));
        names.extend(
            claims.list(&lp).await.map_err(|e| e.to_string())?.items.into_iter().filter_map(|c| c.metadata.name),
        );
    }
    Ok(names)
}

/// The kubelet's part in a deletion, for nodes that have none: a pod marked for deletion is
/// removed at once. Runs until `stop` fires.
pub async fn kubelet(client: Client, namespaces: Vec<String>, mut stop: tokio::sync::oneshot::Receiver<()>) {
    loop {
        for ns in &namespaces {
            let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
            let Ok(list) = pods.list(&ListParams::default()).await else { continue };
            for p in list.items.iter().filter(|p| p.metadata.deletion_timestamp.is_some()) {
                let _ = pods
                    .delete(p.metadata.name.as_deref().unwrap_or_default(), &DeleteParams::default().grace_period(0))
                    .await;
            }
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

/// Deletes what the suite created and what the cluster made for it (objects in the scenario's
/// namespaces owned, directly or not, by something the suite created), finalizers lifted, in
/// passes until none is left (a controller may make a replacement between two deletions).
/// Nothing else in the cluster is touched.
pub async fn clean(client: &Client, placed: &Placed) -> Result<(), String> {
    let roots: Vec<&Made> = placed.made.iter().filter(|m| m.resource.kind != "Namespace").collect();
    let mut uids: BTreeSet<String> = BTreeSet::new();
    for m in &roots {
        if let Ok(Some(o)) = api(client, &m.resource, m.namespace.as_deref()).get_opt(&m.name).await {
            uids.extend(o.metadata.uid);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let mut present = Vec::new();
        // Workloads first (created last), then what they made.
        for m in roots.iter().rev() {
            if api(client, &m.resource, m.namespace.as_deref())
                .get_opt(&m.name)
                .await
                .map_err(|e| e.to_string())?
                .is_some()
            {
                present.push((*m).clone());
            }
        }
        present.extend(owned(client, placed, &mut uids).await?);
        if present.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            let names: Vec<String> = present.iter().map(|m| format!("{} {}", m.resource.kind, m.name)).collect();
            return Err(format!("not deleted in 90 s: {}", names.join(", ")));
        }
        for m in &present {
            delete(client, m).await?;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn delete(client: &Client, m: &Made) -> Result<(), String> {
    let api = api(client, &m.resource, m.namespace.as_deref());
    let lift = json!({"metadata": {"finalizers": null}});
    let _ = api.patch(&m.name, &PatchParams::default(), &Patch::Merge(&lift)).await;
    match api.delete(&m.name, &DeleteParams::default().grace_period(0)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(format!("delete {} {}: {e}", m.resource.kind, m.name)),
    }
}

/// The objects in the scenario's namespaces whose owner chain leads to one of `uids` (which
/// gains theirs): the ReplicaSets, pods and claims the controllers made.
async fn owned(client: &Client, placed: &Placed, uids: &mut BTreeSet<String>) -> Result<Vec<Made>, String> {
    let mut kinds = Vec::new();
    for (group, version, kind) in
        [("apps", "v1", "ReplicaSet"), ("", "v1", "Pod"), ("resource.k8s.io", "v1", "ResourceClaim")]
    {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        kinds.push(pinned_kind(client, &gvk).await.map_err(|e| e.to_string())?.0);
    }
    let mut found = Vec::new();
    // Owner chains are at most three long here: Deployment → ReplicaSet → pod → claim.
    for _ in 0..3 {
        for ar in &kinds {
            for ns in &placed.namespaces {
                for o in api(client, ar, Some(ns)).list(&ListParams::default()).await.map_err(|e| e.to_string())? {
                    let owned = o.metadata.owner_references.iter().flatten().any(|r| uids.contains(&r.uid));
                    let uid = o.metadata.uid.clone().unwrap_or_default();
                    if owned && !found.iter().any(|(u, _): &(String, Made)| *u == uid) {
                        uids.insert(uid.clone());
                        let name = o.metadata.name.unwrap_or_default();
                        found.push((uid, Made { resource: ar.clone(), namespace: Some(ns.clone()), name }));
                    }
                }
            }
        }
    }
    Ok(found.into_iter().map(|(_, m)| m).collect())
}

/// A pod or claim key as the comparison reads it: the input's names as they are; a name a
/// controller generated as its workload's name and `-*` (a real cluster's suffixes are random).
pub fn normalized(key: &str, placed: &Placed) -> String {
    if placed.literal.contains(key) {
        return key.to_string();
    }
    let workload = placed.workloads.iter().filter(|w| key.starts_with(&format!("{w}-"))).max_by_key(|w| w.len());
    workload.map_or_else(|| key.to_string(), |w| format!("{w}-*"))
}

/// A list of allocated devices (a claim's `status.allocation.devices.results`, or a plan's
/// `claims[].devices`) as `driver/pool/device for request` each.
pub fn devices(list: &Value) -> BTreeSet<String> {
    let line =
        |d: &Value| format!("{}/{}/{} for {}", s(&d["driver"]), s(&d["pool"]), s(&d["device"]), s(&d["request"]));
    list.as_array().into_iter().flatten().map(line).collect()
}

/// One claim's devices as a line: `claim KEY: driver/pool/device for request, …`, a generated
/// claim keyed by its consumers.
pub fn claim_line(key: &str, consumers: &[String], devices: &BTreeSet<String>, placed: &Placed) -> String {
    let key = if placed.literal.contains(key) {
        key.to_string()
    } else {
        let mut c: Vec<String> = consumers.to_vec();
        c.sort();
        format!("for [{}]", c.join(", "))
    };
    format!("claim {key}: {}", devices.iter().cloned().collect::<Vec<_>>().join(", "))
}

/// What `muster run` did, read through the API, as sorted lines: `bound POD NODE`,
/// `unschedulable POD`, `preempted POD`, and the claims it allocated ([`claim_line`]).
pub async fn outcome(client: &Client, placed: &Placed) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let mut present = BTreeSet::new();
    for ns in &placed.namespaces {
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
        for p in pods.list(&ListParams::default()).await.map_err(|e| e.to_string())? {
            let p = serde_json::to_value(p).map_err(|e| e.to_string())?;
            let key = key_of(&p);
            present.insert(key.clone());
            let node = s(&p["spec"]["nodeName"]);
            let before = placed.before.get(&format!("Pod {key}"));
            let was_bound = before.is_some_and(|b| !s(&b["spec"]["nodeName"]).is_empty());
            if !node.is_empty() && !was_bound {
                lines.push(format!("bound {} {node}", normalized(&key, placed)));
            }
            let conditions = p["status"]["conditions"].as_array().cloned().unwrap_or_default();
            if node.is_empty() && conditions.iter().any(|c| c["type"] == "PodScheduled" && c["status"] == "False") {
                lines.push(format!("unschedulable {}", normalized(&key, placed)));
            }
        }
        let claims: Api<k8s_openapi::api::resource::v1::ResourceClaim> = Api::namespaced(client.clone(), ns);
        for c in claims.list(&ListParams::default()).await.map_err(|e| e.to_string())? {
            let c = serde_json::to_value(c).map_err(|e| e.to_string())?;
            let key = key_of(&c);
            let allocation = &c["status"]["allocation"];
            if placed
                .before
                .get(&format!("ResourceClaim {key}"))
                .is_some_and(|b| b["status"]["allocation"] == *allocation)
            {
                continue; // allocated in the input: not this run's
            }
            let devices = devices(&allocation["devices"]["results"]);
            if devices.is_empty() {
                continue;
            }
            let consumers: Vec<String> = c["status"]["reservedFor"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| match r["resource"].as_str() {
                    Some("pods") => normalized(&format!("{ns}/{}", s(&r["name"])), placed),
                    _ => format!("podgroup {ns}/{}", s(&r["name"])),
                })
                .collect();
            lines.push(claim_line(&key, &consumers, &devices, placed));
        }
    }
    for key in placed.before.keys().filter_map(|k| k.strip_prefix("Pod ")) {
        if !present.contains(key) {
            lines.push(format!("preempted {key}"));
        }
    }
    lines.sort();
    Ok(lines)
}
