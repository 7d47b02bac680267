//! Server-side printing for kubectl: a `meta.k8s.io/v1` `Table` when a get or list asks for one
//! (`Accept: application/json;as=Table;…`), with kubectl's columns for pods (`-o wide`: IP,
//! node, nominated node), nodes and ResourceClaims, and NAME/AGE for everything else. Watches
//! always stream objects (kubectl prints those too).

use axum::http::HeaderMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::registry::{self, ResId};

/// Whether the client asked for a Table.
pub fn wanted(headers: &HeaderMap) -> bool {
    headers.get_all(axum::http::header::ACCEPT).iter().any(|v| v.to_str().is_ok_and(|s| s.contains("as=Table")))
}

/// `kubectl`'s short age: `42s`, `5m3s`, `17m`, `3h12m`, `20h`, `2d4h`, `30d`.
pub fn age(created: &Value) -> String {
    let Ok(t) = serde_json::from_value::<Time>(created.clone()) else { return "<unknown>".into() };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let s = (now - t.0.as_second()).max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => format!("{m}m{}s", s % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if d < 8 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

fn col(name: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": "string", "format": format, "description": "", "priority": priority})
}

fn columns(kind: &str) -> Vec<Value> {
    let names: &[(&str, u8)] = match kind {
        "Pod" => &[
            ("Name", 0),
            ("Ready", 0),
            ("Status", 0),
            ("Restarts", 0),
            ("Age", 0),
            ("IP", 1),
            ("Node", 1),
            ("Nominated Node", 1),
        ],
        "Node" => &[("Name", 0), ("Status", 0), ("Roles", 0), ("Age", 0), ("Version", 0)],
        "ResourceClaim" => &[("Name", 0), ("State", 0), ("Age", 0)],
        _ => &[("Name", 0), ("Age", 0)],
    };
    names.iter().map(|(n, p)| col(n, *p)).collect()
}

fn or_none(v: &Value) -> Value {
    match v.as_str() {
        Some(s) if !s.is_empty() => json!(s),
        _ => json!("<none>"),
    }
}

fn pod_status(o: &Value) -> String {
    if o["metadata"].get("deletionTimestamp").is_some_and(|d| !d.is_null()) {
        return "Terminating".into();
    }
    if o["spec"]["schedulingGates"].as_array().is_some_and(|g| !g.is_empty()) {
        return "SchedulingGated".into();
    }
    o["status"]["phase"].as_str().unwrap_or("Unknown").to_string()
}

fn node_status(o: &Value) -> String {
    let conditions = o["status"]["conditions"].as_array().into_iter().flatten();
    let ready = conditions.into_iter().find(|c| c["type"] == "Ready").map(|c| c["status"] == "True");
    let mut s = match ready {
        Some(true) => "Ready".to_string(),
        Some(false) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if o["spec"]["unschedulable"].as_bool() == Some(true) {
        s.push_str(",SchedulingDisabled");
    }
    s
}

fn claim_state(o: &Value) -> &'static str {
    let allocated = !o["status"]["allocation"].is_null();
    let reserved = o["status"]["reservedFor"].as_array().is_some_and(|r| !r.is_empty());
    match (o["metadata"].get("deletionTimestamp").is_some_and(|d| !d.is_null()), allocated, reserved) {
        (true, _, _) => "deleted",
        (false, true, true) => "allocated,reserved",
        (false, true, false) => "allocated",
        (false, false, true) => "reserved",
        (false, false, false) => "pending",
    }
}

fn cells(kind: &str, o: &Value) -> Vec<Value> {
    let name = o["metadata"]["name"].clone();
    let age = json!(age(&o["metadata"]["creationTimestamp"]));
    match kind {
        "Pod" => {
            let n = o["spec"]["containers"].as_array().map_or(0, Vec::len);
            vec![
                name,
                json!(format!("0/{n}")),
                json!(pod_status(o)),
                json!("0"),
                age,
                or_none(&o["status"]["podIP"]),
                or_none(&o["spec"]["nodeName"]),
                or_none(&o["status"]["nominatedNodeName"]),
            ]
        }
        "Node" => {
            let version = o["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap_or("");
            vec![name, json!(node_status(o)), json!("<none>"), age, json!(version)]
        }
        "ResourceClaim" => vec![name, json!(claim_state(o)), age],
        _ => vec![name, age],
    }
}

fn row(kind: &str, o: &Value, include_object: bool) -> Value {
    let object = if include_object {
        o.clone()
    } else {
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
    };
    json!({"cells": cells(kind, o), "object": object})
}

/// The Table for a get (`answer` is the object) or a list (`answer` is the list).
pub fn render(res: ResId, answer: &Value, include_object: bool) -> Value {
    let kind = registry::get(res).kind;
    let (rows, metadata): (Vec<Value>, Value) = match answer.get("items").and_then(Value::as_array) {
        Some(items) => (items.iter().map(|o| row(kind, o, include_object)).collect(), answer["metadata"].clone()),
        None => {
            (vec![row(kind, answer, include_object)], json!({"resourceVersion": answer["metadata"]["resourceVersion"]}))
        }
    };
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": columns(kind), "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_print_like_kubectl() {
        let pods = registry::by_path("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": {"phase": "Running"}});
        let t = render(pods, &json!({"metadata": {"resourceVersion": "5"}, "items": [pod]}), false);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["p", "0/1", "Running", "0", age(&json!("2020-01-01T00:00:00Z")), "<none>", "n1", "<none>"])
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert!(age(&json!("2020-01-01T00:00:00Z")).ends_with('d'));
    }
}
