//! The object store: every object as JSON (unknown fields kept), one global numeric
//! `resourceVersion`, and a bounded history of change events for watches.
//!
//! Writes here do what the API server's generic registry does — metadata the server owns
//! (`uid`, `creationTimestamp`, `generation`, `resourceVersion`), preconditions, status
//! isolation, finalizer-aware deletion — and call the per-kind hooks in [`crate::admission`].
//! The store never blocks and never awaits: the HTTP layer holds its lock for one request.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::admission;
use crate::fields::Owners;
use crate::registry::{self, ResId};
use crate::status::{ApiError, ApiResult};

/// `(namespace or "", name)`.
pub type Key = (String, String);

/// How many events the history keeps by default; a watch from before them gets 410 Gone.
pub const HISTORY: usize = 100_000;

/// One change. `old` is `None` for a creation, `new` is `None` for a removal (then `old` carries
/// the removal's resourceVersion).
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub res: ResId,
    pub old: Option<Arc<Value>>,
    pub new: Option<Arc<Value>>,
}

/// Which part of an object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The object: `status` is kept as stored when the kind has a status subresource.
    Main,
    /// `…/status` (and a claim's `…/binding`): only `status` changes.
    Status,
}

/// The store. Not `Clone`: one per server, behind a lock.
pub struct Store {
    rv: u64,
    uids: u64,
    objects: Vec<BTreeMap<Key, Arc<Value>>>,
    history: VecDeque<Arc<Event>>,
    /// Every event after this resourceVersion is in `history`.
    history_start: u64,
    history_limit: usize,
    /// The `creationTimestamp` every created object gets instead of the wall clock's second (a
    /// frozen clock, for tests that compare with a plan: see `FakeApi::creation_time`).
    pub creation_time: Option<Value>,
    changed: tokio::sync::watch::Sender<u64>,
    /// Who set which fields, for apply conflicts.
    pub owners: Owners,
}

impl Default for Store {
    fn default() -> Self {
        Store {
            rv: 0,
            uids: 0,
            objects: registry::RESOURCES.iter().map(|_| BTreeMap::new()).collect(),
            history: VecDeque::new(),
            history_start: 0,
            history_limit: HISTORY,
            creation_time: None,
            changed: tokio::sync::watch::Sender::new(0),
            owners: Owners::default(),
        }
    }
}

/// The key of `name` in `ns` for resource `res` (cluster-scoped resources ignore `ns`).
pub fn key(res: ResId, ns: Option<&str>, name: &str) -> Key {
    let ns = if registry::get(res).namespaced { ns.unwrap_or("default") } else { "" };
    (ns.to_string(), name.to_string())
}

pub fn meta_str<'v>(obj: &'v Value, field: &str) -> Option<&'v str> {
    obj.get("metadata")?.get(field)?.as_str()
}

pub fn now() -> Value {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let Ok(t) = k8s_openapi::jiff::Timestamp::from_second(i64::try_from(secs).unwrap_or(0)) else { return Value::Null };
    serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t)).unwrap_or(Value::Null)
}

/// The object without `metadata` and `status`: what `generation` counts changes of.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    v
}

impl Store {
    /// A store whose history keeps `limit` events (at least one).
    pub fn with_history_limit(limit: usize) -> Store {
        Store { history_limit: limit.max(1), ..Store::default() }
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// A receiver told the resourceVersion after every change.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub fn get(&self, res: ResId, key: &Key) -> Option<&Arc<Value>> {
        self.objects[res].get(key)
    }

    /// Objects of `res` in key order, in `ns` when given.
    pub fn list<'s>(&'s self, res: ResId, ns: Option<&'s str>) -> impl Iterator<Item = (&'s Key, &'s Arc<Value>)> + 's {
        self.objects[res].iter().filter(move |(k, _)| ns.is_none_or(|ns| k.0 == ns))
    }

    /// Objects of `res` after `after` in key order, in `ns` when given (a list page's rest).
    pub fn list_after<'s>(
        &'s self,
        res: ResId,
        ns: Option<&'s str>,
        after: Option<&Key>,
    ) -> impl Iterator<Item = (&'s Key, &'s Arc<Value>)> + 's {
        use std::ops::Bound::{Excluded, Unbounded};
        let from = after.map_or(Unbounded, |k| Excluded(k.clone()));
        self.objects[res].range((from, Unbounded)).filter(move |(k, _)| ns.is_none_or(|ns| k.0 == ns))
    }

    /// Events of `res` after `rv`, or `None` when some of them are no longer kept.
    pub fn events_after(&self, res: ResId, rv: u64) -> Option<Vec<Arc<Event>>> {
        if rv < self.history_start {
            return None;
        }
        let from = self.history.partition_point(|e| e.rv <= rv);
        Some(self.history.range(from..).filter(|e| e.res == res).cloned().collect())
    }

    /// The oldest resourceVersion a watch can resume from.
    pub fn oldest(&self) -> u64 {
        self.history_start
    }

    /// Forgets every event: a watch from any older resourceVersion gets 410 Gone.
    pub fn expire_history(&mut self) {
        self.history.clear();
        self.history_start = self.rv;
    }

    /// Creates `obj` in `ns` (the URL's namespace when given; else the object's; else default).
    pub fn create(&mut self, res: ResId, ns: Option<&str>, obj: Value) -> ApiResult<Value> {
        self.create_inner(res, ns, obj, false)
    }

    /// Stores a preloaded object, keeping its `uid` and `creationTimestamp` when set: a restored
    /// dump (the workload controllers' owner references name those UIDs).
    pub fn preload(&mut self, res: ResId, obj: Value) -> ApiResult<Value> {
        let ns = meta_str(&obj, "namespace").map(str::to_string);
        self.create_inner(res, ns.as_deref(), obj, true)
    }

    fn create_inner(&mut self, res: ResId, ns: Option<&str>, mut obj: Value, restore: bool) -> ApiResult<Value> {
        prepare_body(res, &mut obj)?;
        let name = self.assign_name(&mut obj)?;
        let key = create_key(res, ns, &obj, &name)?;
        if self.objects[res].contains_key(&key) {
            return Err(ApiError::already_exists(&registry::get(res).qualified(), &name));
        }
        validate(res, &obj)?;
        admission::on_create(self, res, &mut obj, restore)?;
        self.uids += 1;
        let uid = format!("00000000-0000-4000-8000-{:012x}", self.uids);
        let created = self.creation_time.clone().unwrap_or_else(now);
        server_metadata(res, &key, &mut obj, uid, restore, created);
        validate(res, &obj)?;
        Ok(self.commit(res, key, None, obj))
    }

    fn assign_name(&mut self, obj: &mut Value) -> ApiResult<String> {
        if let Some(name) = meta_str(obj, "name").filter(|n| !n.is_empty()) {
            return Ok(name.to_string());
        }
        let Some(prefix) = meta_str(obj, "generateName").map(str::to_string) else {
            return Err(ApiError::invalid("object", "", "metadata.name", "name or generateName is required"));
        };
        let name = format!("{prefix}{:05x}", (self.uids + 1) * 7919 % 0x100000);
        obj["metadata"]["name"] = json!(name);
        Ok(name)
    }

    /// Replaces the object at `key` (a PUT, or a PATCH's result) within `part`.
    pub fn update(&mut self, res: ResId, key: &Key, mut obj: Value, part: Part) -> ApiResult<Value> {
        let rt = registry::get(res);
        let old = self.objects[res].get(key).cloned().ok_or_else(|| ApiError::not_found(&rt.qualified(), &key.1))?;
        prepare_body(res, &mut obj)?;
        check_preconditions(res, &old, &obj)?;
        let new = compose(res, &old, obj, part);
        admission::on_update(self, res, &old, &new)?;
        validate(res, &new)?;
        Ok(self.write(res, key.clone(), old, new))
    }

    /// Stores `new` over `old` unless nothing changed; removes it when its deletion waited only
    /// for the finalizers it no longer has.
    pub fn write(&mut self, res: ResId, key: Key, old: Arc<Value>, mut new: Value) -> Value {
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        if new == *old {
            return new;
        }
        let deleting = new["metadata"].get("deletionTimestamp").is_some_and(|t| !t.is_null());
        let finalizers = new["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
        if deleting && !finalizers {
            self.objects[res].insert(key.clone(), Arc::new(new));
            return self.remove(res, &key).unwrap_or_default();
        }
        if spec_part(&new) != spec_part(&old) {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(0);
            new["metadata"]["generation"] = json!(generation + 1);
        }
        self.commit(res, key, Some(old), new)
    }

    /// Deletes the object at `key`: marks it when it has finalizers, removes it otherwise.
    pub fn delete(&mut self, res: ResId, key: &Key, uid: Option<&str>, rv: Option<&str>) -> ApiResult<Value> {
        let rt = registry::get(res);
        let old = self.objects[res].get(key).cloned().ok_or_else(|| ApiError::not_found(&rt.qualified(), &key.1))?;
        if let Some(uid) = uid.filter(|u| Some(*u) != meta_str(&old, "uid")) {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(&old, "uid").unwrap_or("")
            );
            return Err(ApiError::conflict(&rt.qualified(), &key.1, &why));
        }
        if let Some(rv) = rv.filter(|rv| Some(*rv) != meta_str(&old, "resourceVersion")) {
            let why = format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta_str(&old, "resourceVersion").unwrap_or("")
            );
            return Err(ApiError::conflict(&rt.qualified(), &key.1, &why));
        }
        let finalizers = old["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
        if !finalizers {
            return self.remove(res, key).ok_or_else(|| ApiError::not_found(&rt.qualified(), &key.1));
        }
        if old["metadata"].get("deletionTimestamp").is_some_and(|t| !t.is_null()) {
            return Ok((*old).clone());
        }
        let mut new = (*old).clone();
        new["metadata"]["deletionTimestamp"] = now();
        new["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        Ok(self.commit(res, key.clone(), Some(old), new))
    }

    /// Removes the object at `key` now (a DELETED event carrying the removal's version).
    pub fn remove(&mut self, res: ResId, key: &Key) -> Option<Value> {
        let old = self.objects[res].remove(key)?;
        self.owners.forget(&(res, key.clone()));
        self.rv += 1;
        let mut last = (*old).clone();
        last["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.record(Event { rv: self.rv, res, old: Some(Arc::new(last.clone())), new: None });
        Some(last)
    }

    /// Bumps the resourceVersion, stores `new` and records the event.
    fn commit(&mut self, res: ResId, key: Key, old: Option<Arc<Value>>, mut new: Value) -> Value {
        self.rv += 1;
        new["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let new = Arc::new(new);
        self.objects[res].insert(key, new.clone());
        self.record(Event { rv: self.rv, res, old, new: Some(new.clone()) });
        (*new).clone()
    }

    fn record(&mut self, event: Event) {
        if self.history.len() >= self.history_limit
            && let Some(dropped) = self.history.pop_front()
        {
            self.history_start = dropped.rv;
        }
        self.history.push_back(Arc::new(event));
        self.changed.send_replace(self.rv);
    }
}

/// Where a created object goes: the URL's namespace, else the body's, else `default`; a body
/// naming another namespace than the URL is refused.
fn create_key(res: ResId, ns: Option<&str>, obj: &Value, name: &str) -> ApiResult<Key> {
    let body_ns = meta_str(obj, "namespace").filter(|_| registry::get(res).namespaced);
    let key = key(res, ns.or(body_ns), name);
    if body_ns.is_some_and(|b| b != key.0) {
        let why = "the namespace of the provided object does not match the namespace sent on the request";
        return Err(ApiError::bad_request(why));
    }
    Ok(key)
}

/// The metadata the server owns on a created object: namespace, uid and creationTimestamp
/// (kept from a restored object that has them), generation 1, no deletion marks.
fn server_metadata(res: ResId, key: &Key, obj: &mut Value, uid: String, restore: bool, created: Value) {
    let Some(meta) = obj["metadata"].as_object_mut() else { return }; // prepare_body made it one
    if registry::get(res).namespaced {
        meta.insert("namespace".into(), json!(key.0));
    } else {
        meta.remove("namespace");
    }
    let missing = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v.as_str() == Some(""));
    if !restore || missing(meta.get("uid")) {
        meta.insert("uid".into(), json!(uid));
    }
    if !restore || missing(meta.get("creationTimestamp")) {
        meta.insert("creationTimestamp".into(), created);
    }
    meta.insert("generation".into(), json!(1));
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
}

/// Sets `apiVersion` and `kind` when absent; refuses a body of another kind or without metadata.
fn prepare_body(res: ResId, obj: &mut Value) -> ApiResult<()> {
    let rt = registry::get(res);
    let Some(m) = obj.as_object_mut() else { return Err(ApiError::bad_request("the body is not a JSON object")) };
    let api_version = rt.api_version();
    let v = m.entry("apiVersion").or_insert_with(|| json!(api_version));
    if v != &json!(api_version) {
        return Err(ApiError::bad_request(format!("apiVersion {v} does not match the URL's {api_version}")));
    }
    let k = m.entry("kind").or_insert_with(|| json!(rt.kind));
    if k != &json!(rt.kind) {
        return Err(ApiError::bad_request(format!("kind {k} does not match the URL's {}", rt.kind)));
    }
    let meta = m.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        return Err(ApiError::bad_request("metadata is not an object"));
    }
    Ok(())
}

/// Decodes the object as its `k8s-openapi` type: 400 with serde's message when it does not.
pub fn validate(res: ResId, obj: &Value) -> ApiResult<()> {
    let rt = registry::get(res);
    (rt.validate)(obj).map_err(|e| ApiError::bad_request(format!("{} in body is invalid: {e}", rt.kind)))
}

fn check_preconditions(res: ResId, old: &Value, obj: &Value) -> ApiResult<()> {
    let rt = registry::get(res);
    let name = meta_str(old, "name").unwrap_or_default();
    if let Some(rv) = meta_str(obj, "resourceVersion").filter(|rv| !rv.is_empty())
        && Some(rv) != meta_str(old, "resourceVersion")
    {
        let why = "the object has been modified; please apply your changes to the latest version and try again";
        return Err(ApiError::conflict(&rt.qualified(), name, why));
    }
    if let Some(uid) = meta_str(obj, "uid").filter(|u| !u.is_empty())
        && Some(uid) != meta_str(old, "uid")
    {
        let why = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta_str(old, "uid").unwrap_or("")
        );
        return Err(ApiError::conflict(&rt.qualified(), name, &why));
    }
    if let Some(n) = meta_str(obj, "name").filter(|n| *n != name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

/// The object a write of `obj` to `part` leaves: server-owned metadata from `old`, and `status`
/// (or everything but `status`) from `old` as the part says.
fn compose(res: ResId, old: &Value, obj: Value, part: Part) -> Value {
    let mut new = match part {
        Part::Status => {
            let mut n = old.clone();
            match obj.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => drop(n.as_object_mut().and_then(|m| m.remove("status"))),
            }
            n
        }
        Part::Main => obj,
    };
    if part == Part::Main && registry::get(res).has_status() {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => drop(new.as_object_mut().and_then(|m| m.remove("status"))),
        }
    }
    for field in [
        "uid",
        "creationTimestamp",
        "generation",
        "namespace",
        "name",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old["metadata"].get(field) {
            Some(v) => new["metadata"][field] = v.clone(),
            None => drop(new["metadata"].as_object_mut().and_then(|m| m.remove(field))),
        }
    }
    new
}
