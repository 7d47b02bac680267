//! DRA drivers, as a stand-in (a test double): run synchronously after every write of a
//! ResourceClaim, it meets the binding conditions of the devices the claim's allocation names at
//! once — as a driver of fabric-attached devices does once it has attached them — by adding each
//! device's `status.devices` entry with every `bindingConditions` type `True`. A device whose
//! entry exists already is left alone (a test may have written it, e.g. with a failure
//! condition).
//!
//! Not modelled: attaching that takes time or fails, and everything else drivers do (publishing
//! ResourceSlices is the manifests' job here).

use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::{Value, json};

use crate::registry;
use crate::store::{self, Store};

/// Runs the stand-in after a write of the claim `ns/name`.
pub(crate) fn after_claim_write(store: &mut Store, ns: &str, name: &str) {
    let claims = registry::by_path("resource.k8s.io", "v1", "resourceclaims").expect("in the resource table");
    let key = store::key(claims, Some(ns), name);
    let Some(old) = store.get(claims, &key).cloned() else { return };
    // Most claims have no device with binding conditions: looked at in the JSON first.
    let results = old["status"]["allocation"]["devices"]["results"].as_array();
    let conditions = |r: &Value| r["bindingConditions"].as_array().is_some_and(|c| !c.is_empty());
    if !results.is_some_and(|r| r.iter().any(conditions)) {
        return;
    }
    let Ok(claim) = serde_json::from_value::<ResourceClaim>((*old).clone()) else { return };
    let added = attached(&claim);
    if added.is_empty() {
        return;
    }
    let mut new = (*old).clone();
    let devices = &mut new["status"]["devices"];
    if !devices.is_array() {
        *devices = json!([]);
    }
    if let Some(list) = devices.as_array_mut() {
        list.extend(added);
    }
    store.write(claims, key, old, new);
}

/// The `status.devices` entries to add: one per allocated device with binding conditions and no
/// entry yet.
fn attached(claim: &ResourceClaim) -> Vec<Value> {
    let status = claim.status.as_ref();
    let results = status.and_then(|s| s.allocation.as_ref()).and_then(|a| a.devices.as_ref()?.results.as_ref());
    let existing = status.and_then(|s| s.devices.as_deref()).unwrap_or_default();
    let now = store::now();
    results
        .into_iter()
        .flatten()
        .filter(|r| r.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()))
        .filter(|r| !existing.iter().any(|d| d.driver == r.driver && d.pool == r.pool && d.device == r.device))
        .map(|r| {
            let conditions: Vec<Value> = r
                .binding_conditions
                .iter()
                .flatten()
                .map(|c| {
                    json!({"type": c, "status": "True", "reason": "Attached",
                    "message": "attached by the fake API's driver stand-in", "lastTransitionTime": now})
                })
                .collect();
            json!({"driver": r.driver, "pool": r.pool, "device": r.device, "conditions": conditions})
        })
        .collect()
}
