//! `POST pods/{name}/binding`: what the pod registry's binding storage does when a scheduler
//! binds — 404 for a missing pod, 409 for a pod already bound or being deleted or whose uid is
//! not the binding's, else `spec.nodeName` set and `PodScheduled=True`, answered with a
//! `Status{status: Success}` 201.

use serde_json::{Value, json};

use crate::http::Target;
use crate::ops::key;
use crate::registry;
use crate::status::{self, ApiError, ApiResult};
use crate::store::{self, Store, meta_str};

/// `POST pods/{name}/binding`: sets `spec.nodeName` and `PodScheduled=True`, as the pod
/// registry's binding storage does.
pub(crate) fn bind(store: &mut Store, t: &Target, binding: &Value) -> ApiResult<Value> {
    let k = key(t)?;
    let rt = registry::get(t.res);
    let node = binding["target"]["name"].as_str().filter(|n| !n.is_empty());
    let node = node.ok_or_else(|| ApiError::invalid("Binding", &k.1, "target.name", "a node name is required"))?;
    if meta_str(binding, "name").is_some_and(|n| n != k.1) {
        return Err(ApiError::bad_request("the binding's name does not match the URL"));
    }
    let old = store.get(t.res, &k).cloned().ok_or_else(|| ApiError::not_found(&rt.qualified(), &k.1))?;
    if let Some(uid) = meta_str(binding, "uid").filter(|u| !u.is_empty() && Some(*u) != meta_str(&old, "uid")) {
        let why = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta_str(&old, "uid").unwrap_or("")
        );
        return Err(ApiError::conflict(&rt.qualified(), &k.1, &why));
    }
    if old["metadata"].get("deletionTimestamp").is_some_and(|d| !d.is_null()) {
        return Err(ApiError::conflict(
            &rt.qualified(),
            &k.1,
            &format!("pod {} is being deleted, cannot be assigned to a host", k.1),
        ));
    }
    if let Some(at) = old["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return Err(ApiError::conflict(
            &rt.qualified(),
            &k.1,
            &format!("pod {} is already assigned to node \"{at}\"", k.1),
        ));
    }
    let mut new = (*old).clone();
    new["spec"]["nodeName"] = json!(node);
    set_condition(
        &mut new,
        json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": store::now()}),
    );
    store.write(t.res, k, old, new);
    Ok(status::success(201))
}

/// Adds `condition` to `status.conditions`, replacing one of the same type.
fn set_condition(obj: &mut Value, condition: Value) {
    if !obj["status"]["conditions"].is_array() {
        obj["status"]["conditions"] = json!([]);
    }
    let list = obj["status"]["conditions"].as_array_mut().expect("made an array above");
    list.retain(|c| c["type"] != condition["type"]);
    list.push(condition);
}
