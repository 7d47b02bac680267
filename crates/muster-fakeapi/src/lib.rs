//! An in-process **fake Kubernetes 1.37 API server**: a test double for `muster run` (kube-rs
//! clients and watchers), `kubectl` and curl, served over plain HTTP on loopback and reached
//! through a kubeconfig it writes. It is not a Kubernetes implementation and must never be
//! deployed as one.
//!
//! **What it owns.**
//!
//! - An in-memory object store ([`store`]): objects kept as JSON and checked on every write by
//!   deserialising them into their `k8s-openapi` type (400 when they do not decode); one global
//!   numeric `resourceVersion` that every write bumps; a bounded event history for watches;
//!   `uid`, `creationTimestamp`, `generation` and a created object's status set by the server.
//! - The resource table ([`registry`]) and the discovery built from it ([`discovery`]), and the
//!   HTTP edge that parses API paths and derives Kubernetes verbs ([`http`]).
//! - The verbs ([`ops`]): get, list (`limit`/`continue`, label and field [`selectors`]), watch
//!   ([`watch`]: resume, bookmarks, `sendInitialEvents`, 410 Gone), create (`generateName`),
//!   update (resourceVersion and uid preconditions), merge / JSON / strategic-merge / apply
//!   patches ([`patch`], with a minimal field ownership for apply conflicts, [`fields`]), status
//!   subresources, finalizer-aware deletion and `pods/binding`; kubectl tables ([`table`]).
//! - Pod defaulting (scheduler name, priority from PriorityClasses) and the few validations a
//!   scheduler trips over ([`admission`]).
//! - A request log and fault injection ([`Faults`]), for tests.
//!
//! **It also stands in for kube-controller-manager** (on by default; [`FakeApi::controllers`]
//! or `--no-controllers` turns it off): preloaded Deployments, ReplicaSets, StatefulSets and
//! Jobs are expanded into their pods, as `muster plan` does ([`manifests`]; and when created or
//! updated through the API, [`workloads`]), and the
//! resourceclaim controller runs after every pod write ([`controllers`]): claims from templates,
//! and their release when a pod is deleted or finishes; the PV controller and an external
//! provisioner run after every write of a PersistentVolume or PersistentVolumeClaim
//! ([`volume_controller`]): claims bound to the volume that names them, volumes provisioned for
//! claims with a selected node. DRA drivers are stood in for too ([`drivers`]): the binding
//! conditions of allocated devices are met at once.
//!
//! **What it never does.** Schedule anything, run containers or talk to anything but its
//! clients; read files other than the manifests it is given; panic on a request (a body it
//! cannot read is a 400 `Status`; a bug that panics is a 500, not a dead server); grow without
//! bound (the history keeps [`store::HISTORY`] events unless told otherwise, the request log
//! [`server::LOG_LIMIT`] requests, a body at most [`server::BODY_LIMIT`] bytes); pretend to
//! honour what it does not do (`dryRun` is refused with 400 rather than written for real).
//!
//! **What it does not model.**
//!
//! - Authentication, authorization, TLS; admission webhooks and most admission plugins; most
//!   validation (only what [`admission`] lists); pruning of unknown fields (they are kept).
//! - The kubelet: a deleted pod without finalizers is removed at once (no graceful
//!   termination), and pod phases change only when a client writes them. Nodes are as given.
//! - Real server-side apply: no `managedFields`, no list ownership by key, no pruning of fields
//!   a manager stops applying.
//! - Version conversion beyond `apiVersion`: a resource served in several versions (PodGroups and
//!   Workloads, `v1beta1` and `v1alpha3`) is kept once, in its storage version, and served in
//!   each ([`registry::convert`]: in 1.37 their fields are the same). Core `v1` Events are not
//!   `events.k8s.io` Events (another group, another resource).
//! - Namespaces as a lifecycle (objects may name any namespace), garbage collection of owned
//!   objects, `deletecollection`. The workload controllers at run time only create what is
//!   missing ([`workloads`]): no scale-down, rollout or completion.
//! - Protobuf, aggregated discovery and the OpenAPI documents (kubectl falls back to JSON and
//!   legacy discovery; use `kubectl --validate=false`).
//! - Consistent snapshots across list pages (each page reads the current state after the
//!   previous page's last key) and the list `resourceVersion`/`resourceVersionMatch`
//!   parameters (a list is always the current state).

pub mod admission;
pub mod binding;
pub mod controllers;
pub mod discovery;
pub mod drivers;
pub mod faults;
pub mod fields;
pub mod http;
pub mod manifests;
pub mod ops;
pub mod patch;
pub mod registry;
pub mod selectors;
pub mod server;
pub mod status;
pub mod store;
pub mod table;
pub mod volume_controller;
pub mod watch;
pub mod workloads;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

pub use faults::{Faults, Request, RequestMatcher};

use server::Shared;
use store::Store;

/// Builds a fake API server.
#[derive(Clone, Debug)]
pub struct FakeApi {
    objects: Vec<Value>,
    controllers: bool,
    history: usize,
    echo: bool,
    creation_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

impl Default for FakeApi {
    fn default() -> Self {
        FakeApi::new()
    }
}

impl FakeApi {
    pub fn new() -> Self {
        FakeApi { objects: Vec::new(), controllers: true, history: store::HISTORY, echo: false, creation_time: None }
    }

    /// Objects stored before the server starts (each with `apiVersion` and `kind`), as from a
    /// restored dump: their `uid` and `creationTimestamp` are kept when set, and a pod's given
    /// `spec.priority` is kept (missing fields are defaulted as on create). Workloads are not
    /// expanded here; [`manifests::load`] does that. Besides them the server holds what a new
    /// cluster has: the namespaces `default`, `kube-system` (and every namespace the objects
    /// name), and the PriorityClasses `system-node-critical` and `system-cluster-critical`.
    pub fn with_objects(mut self, objects: Vec<Value>) -> Self {
        self.objects.extend(objects);
        self
    }

    /// Whether the kube-controller-manager stand-in runs (default: yes).
    pub fn controllers(mut self, on: bool) -> Self {
        self.controllers = on;
        self
    }

    /// Whether every request is also printed on stderr (`verb resource[/sub] ns/name -> code`).
    pub fn echo_requests(mut self, on: bool) -> Self {
        self.echo = on;
        self
    }

    /// How many change events watches can resume from (default [`store::HISTORY`]); a watch
    /// from an older resourceVersion gets 410 Gone.
    pub fn history_limit(mut self, events: usize) -> Self {
        self.history = events;
        self
    }

    /// A frozen clock for `creationTimestamp`: every object created gets `at` instead of the
    /// wall clock's second [a test double's option; a real API server stamps the time of the
    /// create]. Tests that compare a live run with a plan need it: the scheduling queue orders
    /// pods by creation time, and objects created across a second boundary would otherwise be
    /// ordered by when the test happened to create them.
    pub fn creation_time(mut self, at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Self {
        self.creation_time = Some(at);
        self
    }

    /// Stores the preloaded objects and serves on `addr` (port 0: any free port), on the current
    /// tokio runtime. A preloaded object the server would refuse is an `InvalidData` error.
    pub async fn start(self, addr: SocketAddr) -> std::io::Result<Running> {
        let mut store = Store::with_history_limit(self.history);
        store.creation_time = self.creation_time.map(|t| serde_json::to_value(t).unwrap_or(Value::Null));
        let shared = Arc::new(Shared::new(store, self.controllers, self.echo));
        preload(&shared, self.objects).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        *shared.addr.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = local.to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = server::router(shared.clone());
        let task = tokio::spawn(async move {
            let graceful = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            let _ = graceful.await;
        });
        let handle = Arc::new(Handle { stop: Mutex::new(Some(stop)), task: Mutex::new(Some(task)) });
        Ok(Running { shared, addr: local, handle })
    }
}

/// The order objects are preloaded in: what admission reads first.
fn rank(obj: &Value) -> u8 {
    match obj["kind"].as_str().unwrap_or("") {
        "Namespace" => 0,
        "PriorityClass" => 1,
        "DeviceClass" | "ResourceClaimTemplate" => 2,
        "Pod" => 4,
        _ => 3,
    }
}

fn preload(shared: &Shared, mut objects: Vec<Value>) -> Result<(), String> {
    objects.sort_by_key(rank);
    let mut store = shared.store();
    let ns_res = registry::by_path("", "v1", "namespaces").expect("in the table");
    let mut namespaces: Vec<String> = vec!["default".into(), "kube-system".into()];
    for o in &objects {
        if let Some(ns) = store::meta_str(o, "namespace")
            && !namespaces.iter().any(|n| n == ns)
        {
            namespaces.push(ns.to_string());
        }
    }
    // The namespaces the objects use, made bare unless the objects define them (with labels).
    let defined = |ns: &str| objects.iter().any(|o| o["kind"] == "Namespace" && store::meta_str(o, "name") == Some(ns));
    for ns in namespaces.into_iter().filter(|ns| !defined(ns)) {
        let _ = store.preload(ns_res, json!({"metadata": {"name": ns}, "status": {"phase": "Active"}}));
    }
    bootstrap_priority_classes(&mut store, &objects);
    let (mut pods, mut groups) = (Vec::new(), Vec::new());
    for o in objects {
        let (av, kind) =
            (o["apiVersion"].as_str().unwrap_or("").to_string(), o["kind"].as_str().unwrap_or("").to_string());
        let served = registry::by_kind(&av, &kind).ok_or_else(|| format!("{av} {kind}: not a kind the fake serves"))?;
        let res = registry::storage(served);
        let mut o = o;
        registry::convert(&mut o, res);
        let what = format!("{kind} {}", store::meta_str(&o, "name").unwrap_or(""));
        match store.preload(res, o) {
            Ok(v) if kind == "Pod" => pods.push(v),
            Ok(v) if kind == "PodGroup" => groups.push(v),
            Ok(_) => {}
            Err(e) if e.reason == "AlreadyExists" && kind == "Namespace" => {}
            Err(e) => return Err(format!("{what}: {}", e.message)),
        }
    }
    if shared.controllers {
        for g in groups {
            let ns = store::meta_str(&g, "namespace").unwrap_or("default").to_string();
            controllers::after_pod_group_write(&mut store, &ns, store::meta_str(&g, "name").unwrap_or_default());
        }
        for p in pods {
            let ns = store::meta_str(&p, "namespace").unwrap_or("default").to_string();
            controllers::after_pod_write(&mut store, &ns, store::meta_str(&p, "name").unwrap_or_default());
        }
    }
    Ok(())
}

/// The two PriorityClasses every API server creates at startup, unless the objects bring them.
fn bootstrap_priority_classes(store: &mut Store, objects: &[Value]) {
    let pcs = registry::by_path("scheduling.k8s.io", "v1", "priorityclasses").expect("in the table");
    for (name, value) in [("system-node-critical", 2_000_001_000), ("system-cluster-critical", 2_000_000_000)] {
        let given = objects.iter().any(|o| o["kind"] == "PriorityClass" && store::meta_str(o, "name") == Some(name));
        if !given {
            let class = json!({"metadata": {"name": name}, "value": value, "preemptionPolicy": "PreemptLowerPriority",
                "description": "Used for system critical pods that must not be moved from their current node."});
            let _ = store.preload(pcs, class);
        }
    }
}

struct Handle {
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// A running fake. Cheap to clone; [`Running::shutdown`] stops it for every clone.
#[derive(Clone)]
pub struct Running {
    shared: Arc<Shared>,
    addr: SocketAddr,
    handle: Arc<Handle>,
}

impl Running {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig: cluster `fake` at [`Running::url`], no credentials, context `fake` with
    /// namespace `default`.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             users:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    \
             user: fake\n    namespace: default\ncurrent-context: fake\npreferences: {{}}\n",
            self.url()
        )
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests()
    }

    pub fn faults(&self) -> Faults {
        Faults { shared: self.shared.clone() }
    }

    /// The stored object (`api_version` as `v1` or `group/version`, the plural, the namespace
    /// for namespaced resources).
    pub fn get(&self, api_version: &str, kind_plural: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let served = registry::by_path(group, version, kind_plural)?;
        let res = registry::storage(served);
        let key = store::key(res, namespace, name);
        let mut v = self.shared.store().get(res, &key).map(|v| (**v).clone())?;
        registry::convert(&mut v, served);
        Some(v)
    }

    /// Every object of every resource named `plural` (all groups; a resource served in several
    /// versions once, in its storage version), in key order.
    pub fn list(&self, plural: &str) -> Vec<Value> {
        let store = self.shared.store();
        registry::all_by_plural(plural)
            .flat_map(|r| store.list(r, None).map(|(_, v)| (**v).clone()).collect::<Vec<_>>())
            .collect()
    }

    /// Changes a stored object in place, as another client's update would (watches see it; no
    /// admission, no controllers): a test's hand on the cluster. `false` when it is not there.
    pub fn modify(
        &self,
        api_version: &str,
        kind_plural: &str,
        namespace: Option<&str>,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> bool {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let Some(served) = registry::by_path(group, version, kind_plural) else { return false };
        let res = registry::storage(served);
        let key = store::key(res, namespace, name);
        let mut store = self.shared.store();
        let Some(old) = store.get(res, &key).cloned() else { return false };
        let mut new = (*old).clone();
        change(&mut new);
        store.write(res, key, old, new);
        true
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store().resource_version()
    }

    /// Waits until `done(self)` holds, checking now and after every change to the store; `false`
    /// when `timeout` passes first. For tests: "until every pod is bound".
    pub async fn wait_for(&self, timeout: std::time::Duration, done: impl Fn(&Running) -> bool) -> bool {
        let mut changed = self.shared.store().subscribe();
        let wait = async {
            loop {
                changed.borrow_and_update();
                if done(self) {
                    return;
                }
                if changed.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }

    /// Ends every watch and stops serving; waits for open requests up to 5 s.
    pub async fn shutdown(self) {
        self.shared.close_watches();
        let stop = self.handle.stop.lock().ok().and_then(|mut s| s.take());
        if let Some(stop) = stop {
            let _ = stop.send(());
        }
        let task = self.handle.task.lock().ok().and_then(|mut t| t.take());
        if let Some(mut task) = task
            && tokio::time::timeout(std::time::Duration::from_secs(5), &mut task).await.is_err()
        {
            task.abort();
        }
    }
}
