//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch for
//! the lists a scheduler writes, and a minimal server-side apply.
//!
//! Strategic merge: lists named in `merge_key` are merged element by element on their key
//! (`conditions` by `type`, `reservedFor` by `uid`, `containers` by `name`…), an element with
//! `$patch: delete` removes its match; `finalizers` merge as a set (and
//! `$deleteFromPrimitiveList/finalizers` removes from it); every other list is replaced, `null`
//! removes a key, maps merge recursively. Upstream reads merge keys from the Go struct tags of
//! every type; the fake knows only the table below.
//!
//! Apply: the body (YAML or JSON) is merged as a strategic merge patch; conflicts with other
//! managers' fields are [`crate::fields`]'s. Fields a manager applied before and leaves out now
//! are not removed.

use serde_json::{Map, Value};

use crate::status::ApiError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchKind {
    /// The patch type of a `Content-Type` (parameters ignored).
    pub fn from_content_type(ct: &str) -> Option<PatchKind> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(PatchKind::Apply),
            _ => None,
        }
    }
}

/// Parses a patch body: YAML for apply, JSON otherwise.
pub fn parse(kind: PatchKind, body: &[u8]) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(body).map_err(|e| ApiError::bad_request(format!("patch is not UTF-8: {e}")))?;
    match kind {
        PatchKind::Apply => serde_saphyr::from_str::<Value>(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML apply patch: {e}"))),
        _ => serde_json::from_str(text).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}"))),
    }
}

/// `target` with `patch` applied.
pub fn apply(kind: PatchKind, target: &Value, patch: &Value) -> Result<Value, ApiError> {
    let mut out = target.clone();
    match kind {
        PatchKind::Merge => json_patch::merge(&mut out, patch),
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut out, &ops)
                .map_err(|e| ApiError::new(422, "Invalid", format!("the JSON patch cannot be applied: {e}")))?;
        }
        PatchKind::Strategic | PatchKind::Apply => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a strategic merge patch must be a JSON object"));
            }
            strategic(&mut out, patch);
        }
    }
    Ok(out)
}

/// The merge key of a list field, `Some("")` for a set of primitives, `None` when replaced.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "conditions" | "taints" => "type",
        "reservedFor" | "ownerReferences" => "uid",
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "resourceClaims"
        | "resourceClaimStatuses" => "name",
        "podIPs" | "hostIPs" => "ip",
        "finalizers" => "",
        _ => return None,
    })
}

/// Applies a strategic merge patch object to `target` in place.
pub fn strategic(target: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        *target = Value::Object(without_directives(p));
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("made an object above");
    for (k, v) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            delete_primitives(t, field, v);
        } else if k.starts_with('$') {
            continue;
        } else if v.is_null() {
            t.remove(k);
        } else if let (Some(key), Some(items)) = (merge_key(k), v.as_array()) {
            let list = t.entry(k.clone()).or_insert_with(|| Value::Array(Vec::new()));
            merge_list(list, items, key);
        } else if v.is_object() {
            strategic(t.entry(k.clone()).or_insert(Value::Null), v);
        } else {
            t.insert(k.clone(), v.clone());
        }
    }
}

fn without_directives(p: &Map<String, Value>) -> Map<String, Value> {
    p.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn delete_primitives(t: &mut Map<String, Value>, field: &str, gone: &Value) {
    let gone = gone.as_array().cloned().unwrap_or_default();
    if let Some(Value::Array(list)) = t.get_mut(field) {
        list.retain(|x| !gone.contains(x));
    }
}

/// Merges `items` into the list `list` by `key` ("" for a set of primitives).
fn merge_list(list: &mut Value, items: &[Value], key: &str) {
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    let list = list.as_array_mut().expect("made an array above");
    for item in items {
        if key.is_empty() || !item.is_object() {
            if !list.contains(item) {
                list.push(item.clone());
            }
            continue;
        }
        let id = item.get(key);
        let pos = list.iter().position(|x| x.get(key) == id);
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => drop(list.remove(i)),
            (None, true) => {}
            (Some(i), false) => strategic(&mut list[i], item),
            (None, false) => {
                let mut fresh = Value::Object(Map::new());
                strategic(&mut fresh, item);
                list.push(fresh);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_merge_by_type_and_other_lists_are_replaced() {
        let pod = json!({"spec": {"tolerations": [{"key": "a"}]}, "status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}});
        let patch = json!({"spec": {"tolerations": [{"key": "b"}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
                       "nominatedNodeName": "n1"}});
        let out = apply(PatchKind::Strategic, &pod, &patch).unwrap();
        assert_eq!(out["status"]["conditions"][0], json!({"type": "Ready", "status": "False"}));
        assert_eq!(out["status"]["conditions"][1]["reason"], "Unschedulable");
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "b"}]));
        assert_eq!(out["status"]["nominatedNodeName"], "n1");
    }

    #[test]
    fn reserved_for_delete_by_uid_and_finalizers_as_a_set() {
        let claim = json!({"metadata": {"finalizers": ["a"]}, "status": {"reservedFor": [
            {"resource": "pods", "name": "p", "uid": "1"}, {"resource": "pods", "name": "q", "uid": "2"}]}});
        let patch = json!({"metadata": {"uid": "x", "finalizers": ["a", "b"]},
            "status": {"reservedFor": [{"$patch": "delete", "uid": "1"}]}});
        let out = apply(PatchKind::Strategic, &claim, &patch).unwrap();
        assert_eq!(out["status"]["reservedFor"], json!([{"resource": "pods", "name": "q", "uid": "2"}]));
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        let del = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        assert_eq!(apply(PatchKind::Strategic, &out, &del).unwrap()["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn merge_json_and_apply() {
        let doc = json!({"a": {"b": 1, "c": [1, 2]}});
        assert_eq!(
            apply(PatchKind::Merge, &doc, &json!({"a": {"b": null, "c": [3]}})).unwrap(),
            json!({"a": {"c": [3]}})
        );
        let ops = json!([{"op": "replace", "path": "/a/b", "value": 2}]);
        assert_eq!(apply(PatchKind::Json, &doc, &ops).unwrap()["a"]["b"], 2);
        assert_eq!(apply(PatchKind::Json, &doc, &json!([{"op": "remove", "path": "/x"}])).unwrap_err().code, 422);
        let yaml = parse(PatchKind::Apply, b"a:\n  d: x\n").unwrap();
        assert_eq!(apply(PatchKind::Apply, &doc, &yaml).unwrap()["a"], json!({"b": 1, "c": [1, 2], "d": "x"}));
    }
}
