//! Per-kind defaulting and validation the real API server does on writes, as far as a scheduler
//! notices it:
//!
//! - a created object's `status` is dropped when its kind has a status subresource (not for
//!   nodes; preloaded objects keep theirs), a namespace's is `Active`;
//! - a created pod gets `spec.schedulerName: default-scheduler`, `spec.priority` (and
//!   `preemptionPolicy`) from its PriorityClass or the global default class (403 when the class
//!   does not exist, as the Priority admission plugin answers), and `status.phase: Pending`;
//! - a pod's `spec.nodeName` cannot change once set (binding sets it);
//! - a ResourceClaim's `spec` is immutable; its `status.reservedFor` holds at most 256 entries,
//!   unique by uid, and only while the claim is allocated; its `status.allocation` cannot change
//!   once set: it may only be cleared, and only when nothing is reserved.
//!
//! Everything else the real server validates is not checked.

use serde_json::{Value, json};

use crate::registry::{self, ResId};
use crate::status::{ApiError, ApiResult};
use crate::store::{Store, meta_str};

/// The most consumers a claim may list (`ResourceClaimReservedForMaxSize`).
pub const RESERVED_FOR_MAX: usize = 256;

/// Defaults and checks a created object. `restore`: a preloaded object, stored as a cluster
/// already holds it — a pod's given `spec.priority` is kept even where its class disagrees.
pub fn on_create(store: &Store, res: ResId, obj: &mut Value, restore: bool) -> ApiResult<()> {
    if !restore {
        reset_status(res, obj);
    }
    match registry::get(res).kind {
        "Pod" => default_pod(store, obj, restore),
        "ResourceClaim" => check_claim_status(obj),
        _ => Ok(()),
    }
}

pub fn on_update(_store: &Store, res: ResId, old: &Value, new: &Value) -> ApiResult<()> {
    let rt = registry::get(res);
    match (rt.group, rt.kind) {
        ("", "Pod") => check_pod_update(old, new),
        ("resource.k8s.io", "ResourceClaim") => check_claim_update(old, new),
        _ => Ok(()),
    }
}

/// A created object's status is the server's, as the registries' `PrepareForCreate` do: dropped
/// for kinds with a status subresource (nodes excepted: kubelets register theirs), `Active`
/// for a namespace.
fn reset_status(res: ResId, obj: &mut Value) {
    let rt = registry::get(res);
    let Some(m) = obj.as_object_mut() else { return };
    match rt.kind {
        "Node" => {}
        "Namespace" => drop(m.insert("status".into(), json!({"phase": "Active"}))),
        _ if rt.has_status() => drop(m.remove("status")),
        _ => {}
    }
}

fn default_pod(store: &Store, pod: &mut Value, restore: bool) -> ApiResult<()> {
    if !pod["spec"].is_object() {
        return Err(ApiError::invalid("Pod", meta_str(pod, "name").unwrap_or(""), "spec", "spec is required"));
    }
    if pod["spec"].get("schedulerName").is_none_or(|s| s.as_str().is_none_or(str::is_empty)) {
        pod["spec"]["schedulerName"] = json!("default-scheduler");
    }
    if !(restore && pod["spec"]["priority"].is_i64()) {
        resolve_priority(store, pod)?;
    }
    if pod.get("status").and_then(|s| s.get("phase")).is_none_or(Value::is_null) {
        pod["status"]["phase"] = json!("Pending");
    }
    Ok(())
}

/// The Priority admission plugin: the class named, else the global default, else 0.
fn resolve_priority(store: &Store, pod: &mut Value) -> ApiResult<()> {
    let pcs = registry::by_path("scheduling.k8s.io", "v1", "priorityclasses").expect("in the table");
    let classes: Vec<&Value> = store.list(pcs, None).map(|(_, v)| &**v).collect();
    let wanted = pod["spec"]["priorityClassName"].as_str().filter(|n| !n.is_empty()).map(str::to_string);
    let class = match &wanted {
        Some(name) => Some(*classes.iter().find(|c| meta_str(c, "name") == Some(name)).ok_or_else(|| {
            ApiError::new(
                403,
                "Forbidden",
                format!(
                    "pods \"{}\" is forbidden: no PriorityClass with name {name} was found",
                    meta_str(pod, "name").unwrap_or("")
                ),
            )
        })?),
        None => classes.iter().find(|c| c["globalDefault"].as_bool() == Some(true)).copied(),
    };
    let value = class.and_then(|c| c["value"].as_i64()).unwrap_or(0);
    if let Some(given) = pod["spec"]["priority"].as_i64()
        && given != value
    {
        let msg = format!(
            "pods \"{}\" is forbidden: the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name",
            meta_str(pod, "name").unwrap_or("")
        );
        return Err(ApiError::new(403, "Forbidden", msg));
    }
    pod["spec"]["priority"] = json!(value);
    if let Some(c) = class {
        if wanted.is_none() {
            pod["spec"]["priorityClassName"] = c["metadata"]["name"].clone();
        }
        let policy = c.get("preemptionPolicy").cloned().unwrap_or(json!("PreemptLowerPriority"));
        pod["spec"].as_object_mut().map(|s| s.entry("preemptionPolicy").or_insert(policy));
    }
    Ok(())
}

fn check_pod_update(old: &Value, new: &Value) -> ApiResult<()> {
    let was = old["spec"]["nodeName"].as_str().filter(|n| !n.is_empty());
    if was.is_some() && new["spec"]["nodeName"].as_str() != was {
        let name = meta_str(old, "name").unwrap_or("");
        return Err(ApiError::invalid("Pod", name, "spec.nodeName", "field is immutable once the pod is bound"));
    }
    Ok(())
}

fn check_claim_status(claim: &Value) -> ApiResult<()> {
    let name = meta_str(claim, "name").unwrap_or("");
    let reserved = claim["status"]["reservedFor"].as_array().map(Vec::as_slice).unwrap_or_default();
    let invalid = |why: String| Err(ApiError::invalid("ResourceClaim", name, "status.reservedFor", &why));
    if reserved.len() > RESERVED_FOR_MAX {
        return invalid(format!("{}: must have at most {RESERVED_FOR_MAX} items", reserved.len()));
    }
    if !reserved.is_empty() && claim["status"]["allocation"].is_null() {
        return invalid("may not be specified when `allocated` is not set".into());
    }
    for (i, r) in reserved.iter().enumerate() {
        if reserved[..i].iter().any(|o| o["uid"] == r["uid"]) {
            return invalid(format!("Duplicate value: uid {}", r["uid"]));
        }
    }
    Ok(())
}

fn check_claim_update(old: &Value, new: &Value) -> ApiResult<()> {
    let name = meta_str(old, "name").unwrap_or("");
    if old.get("spec") != new.get("spec") {
        return Err(ApiError::invalid("ResourceClaim", name, "spec", "field is immutable"));
    }
    check_claim_status(new)?;
    let (was, is) = (&old["status"]["allocation"], &new["status"]["allocation"]);
    if !was.is_null() && !is.is_null() && was != is {
        return Err(ApiError::invalid("ResourceClaim", name, "status.allocation", "field is immutable once set"));
    }
    let reserved = new["status"]["reservedFor"].as_array().is_some_and(|r| !r.is_empty());
    if !was.is_null() && is.is_null() && reserved {
        let why = "may not be cleared while status.reservedFor is not empty";
        return Err(ApiError::invalid("ResourceClaim", name, "status.allocation", why));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(allocation: Value, reserved: usize) -> Value {
        let r: Vec<Value> =
            (0..reserved).map(|i| json!({"resource": "pods", "name": format!("p{i}"), "uid": i.to_string()})).collect();
        json!({"metadata": {"name": "c"}, "spec": {}, "status": {"allocation": allocation, "reservedFor": r}})
    }

    #[test]
    fn claim_allocation_is_immutable_and_cleared_only_when_unreserved() {
        let a = json!({"devices": {"results": [{"device": "g0"}]}});
        let b = json!({"devices": {"results": [{"device": "g1"}]}});
        assert!(check_claim_update(&claim(Value::Null, 0), &claim(a.clone(), 1)).is_ok());
        assert_eq!(check_claim_update(&claim(a.clone(), 1), &claim(b, 1)).unwrap_err().code, 422);
        assert_eq!(check_claim_update(&claim(a.clone(), 1), &claim(Value::Null, 1)).unwrap_err().code, 422);
        assert!(check_claim_update(&claim(a.clone(), 1), &claim(Value::Null, 0)).is_ok());
        let e = check_claim_update(&claim(a.clone(), 1), &claim(a, 257)).unwrap_err();
        assert!(e.message.contains("status.reservedFor"), "{}", e.message);
    }
}
