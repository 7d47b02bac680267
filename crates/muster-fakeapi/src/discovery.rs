//! Legacy (unaggregated) discovery, from the resource table: `/version`, `/api`, `/api/v1`,
//! `/apis`, `/apis/{group}`, `/apis/{group}/{version}`, and `/healthz`-style probes. kube-rs's
//! typed `Api<K>` needs none of it; kubectl does.

use serde_json::{Value, json};

use crate::registry::{self, RESOURCES, ResourceType};
use crate::server::Shared;
use crate::status::ApiError;

/// The answer for a discovery path, or `None` when `path` is an API path.
pub(crate) fn serve(shared: &Shared, path: &str) -> Option<Result<Value, ApiError>> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    Some(match segs.as_slice() {
        ["version"] => Ok(version()),
        ["healthz" | "readyz" | "livez"] => Ok(json!("ok")),
        ["api"] => Ok(api_versions(shared)),
        ["apis"] => Ok(group_list()),
        ["api", v] => resource_list("", v),
        ["apis", g] => group(g).ok_or_else(|| not_found(path)),
        ["apis", g, v] => resource_list(g, v),
        _ => return None,
    })
}

fn not_found(path: &str) -> ApiError {
    ApiError::new(404, "NotFound", format!("the server could not find the requested resource ({path})"))
}

fn version() -> Value {
    json!({"major": "1", "minor": "37", "gitVersion": "v1.37.0", "gitCommit": "muster-fakeapi",
        "gitTreeState": "clean", "buildDate": "2026-12-01T00:00:00Z", "goVersion": "none",
        "compiler": "muster-fakeapi", "platform": "linux/amd64"})
}

fn api_versions(shared: &Shared) -> Value {
    let addr = shared.addr.lock().map(|a| a.clone()).unwrap_or_default();
    json!({"kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]})
}

fn versions_of(group: &str) -> Vec<Value> {
    let gvs = registry::group_versions();
    gvs.iter()
        .filter(|(g, _)| *g == group)
        .map(|(g, v)| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect()
}

fn group(name: &str) -> Option<Value> {
    let versions = versions_of(name);
    let preferred = versions.first()?.clone();
    Some(
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": versions, "preferredVersion": preferred}),
    )
}

fn group_list() -> Value {
    let mut names: Vec<&str> = Vec::new();
    for (g, _) in registry::group_versions() {
        if !g.is_empty() && !names.contains(&g) {
            names.push(g);
        }
    }
    let groups: Vec<Value> = names.into_iter().filter_map(group).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

const VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];

/// kubectl's short names (`kubectl get po`), as upstream serves them.
fn short_names(plural: &str) -> &'static [&'static str] {
    match plural {
        "pods" => &["po"],
        "nodes" => &["no"],
        "namespaces" => &["ns"],
        "events" => &["ev"],
        "poddisruptionbudgets" => &["pdb"],
        "priorityclasses" => &["pc"],
        "deployments" => &["deploy"],
        "replicasets" => &["rs"],
        "statefulsets" => &["sts"],
        "persistentvolumeclaims" => &["pvc"],
        "persistentvolumes" => &["pv"],
        "storageclasses" => &["sc"],
        _ => &[],
    }
}

fn entries(r: &ResourceType) -> Vec<Value> {
    let singular = r.kind.to_lowercase();
    let mut out = vec![json!({"name": r.plural, "singularName": singular, "namespaced": r.namespaced,
        "kind": r.kind, "verbs": VERBS, "shortNames": short_names(r.plural)})];
    for sub in r.subresources {
        let (kind, verbs): (&str, &[&str]) = match (*sub, r.plural) {
            ("binding", "pods") => ("Binding", &["create"]),
            _ => (r.kind, &["get", "patch", "update"]),
        };
        out.push(json!({"name": format!("{}/{sub}", r.plural), "singularName": "", "namespaced": r.namespaced,
            "kind": kind, "verbs": verbs}));
    }
    out
}

fn resource_list(group: &str, version: &str) -> Result<Value, ApiError> {
    let rows: Vec<&ResourceType> = RESOURCES.iter().filter(|r| r.group == group && r.version == version).collect();
    if rows.is_empty() {
        let path = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
        return Err(not_found(&path));
    }
    let gv = rows[0].api_version();
    let resources: Vec<Value> = rows.into_iter().flat_map(entries).collect();
    Ok(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}
