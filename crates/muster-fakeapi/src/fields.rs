//! A minimal field ownership for server-side apply: enough for apply conflicts between managers
//! (kube-lease-manager relies on them for mutual exclusion), nothing like real `managedFields`.
//!
//! Each object has a table of leaf paths to the manager that last set them. An apply by manager
//! M that would change a leaf another manager owns is a 409 Conflict unless `force=true`;
//! otherwise M owns the leaves it applied. Any other write hands the leaves it changes to its
//! manager (`fieldManager`, else `unknown`) and drops the ones it removes. Nothing of this is
//! visible in the object (`metadata.managedFields` is not written).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::registry::ResId;
use crate::status::ApiError;
use crate::store::Key;

type Path = Vec<String>;

/// Who owns which leaf, per object.
#[derive(Debug, Default)]
pub struct Owners(HashMap<(ResId, Key), BTreeMap<Path, String>>);

/// The leaves of an apply body: scalars and lists, under maps (identity fields left out).
fn leaves(v: &Value) -> Vec<(Path, &Value)> {
    fn walk<'v>(v: &'v Value, path: &mut Path, out: &mut Vec<(Path, &'v Value)>) {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, child) in m {
                    path.push(k.clone());
                    walk(child, path, out);
                    path.pop();
                }
            }
            _ => out.push((path.clone(), v)),
        }
    }
    let mut out = Vec::new();
    walk(v, &mut Vec::new(), &mut out);
    let identity = |p: &Path| {
        matches!(
            p.iter().map(String::as_str).collect::<Vec<_>>().as_slice(),
            ["apiVersion"] | ["kind"] | ["metadata", "name" | "namespace" | "resourceVersion" | "uid"]
        )
    };
    out.retain(|(p, _)| !identity(p));
    out
}

fn at<'v>(v: &'v Value, path: &Path) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, k| v.get(k)).filter(|v| !v.is_null())
}

impl Owners {
    /// Refuses an apply by `manager` of `patch` to `stored` that changes another manager's leaf.
    pub fn check_apply(&self, id: &(ResId, Key), manager: &str, stored: &Value, patch: &Value) -> Result<(), ApiError> {
        let Some(table) = self.0.get(id) else { return Ok(()) };
        let conflicts: Vec<String> = leaves(patch)
            .into_iter()
            .filter(|(p, v)| table.get(p).is_some_and(|m| m != manager) && at(stored, p) != Some(*v))
            .map(|(p, _)| format!("conflict with \"{}\": .{}", table[&p], p.join(".")))
            .collect();
        if conflicts.is_empty() {
            return Ok(());
        }
        let message = format!("Apply failed with {} conflict(s): {}", conflicts.len(), conflicts.join("; "));
        Err(ApiError::new(409, "Conflict", message))
    }

    /// `manager` owns every leaf of `patch`.
    pub fn applied(&mut self, id: (ResId, Key), manager: &str, patch: &Value) {
        let table = self.0.entry(id).or_default();
        for (p, _) in leaves(patch) {
            table.insert(p, manager.to_string());
        }
    }

    /// A non-apply write from `old` to `new`: changed leaves move to `manager`, removed ones go.
    pub fn updated(&mut self, id: &(ResId, Key), manager: &str, old: &Value, new: &Value) {
        let Some(table) = self.0.get_mut(id) else { return };
        table.retain(|p, _| at(new, p).is_some());
        for (p, owner) in table.iter_mut() {
            if at(old, p) != at(new, p) {
                *owner = manager.to_string();
            }
        }
    }

    pub fn forget(&mut self, id: &(ResId, Key)) {
        self.0.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn another_managers_field_conflicts_until_it_is_removed() {
        let mut owners = Owners::default();
        let id = (0, ("ns".to_string(), "l".to_string()));
        let a = json!({"apiVersion": "v1", "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10}});
        owners.applied(id.clone(), "ma", &a);
        let b = json!({"spec": {"holderIdentity": "b", "leaseDurationSeconds": 10}});
        let e = owners.check_apply(&id, "mb", &a, &b).unwrap_err();
        assert_eq!(e.code, 409);
        assert!(e.message.contains(".spec.holderIdentity") && !e.message.contains("leaseDuration"), "{}", e.message);
        assert!(owners.check_apply(&id, "ma", &a, &b).is_ok(), "its own field");
        let released = json!({"spec": {"leaseDurationSeconds": 10}});
        owners.updated(&id, "mb", &a, &released);
        assert!(owners.check_apply(&id, "mb", &released, &b).is_ok(), "the field is gone, and its owner");
    }
}
