//! The verbs: get, list, create, update, patch, delete, and the `binding` subresources. Each
//! holds the store's lock for the whole request, so a write and the controller stand-in's
//! follow-up writes are seen together.

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use crate::http::{Params, Target, error, json};
use crate::patch::{self, PatchKind};
use crate::registry;
use crate::selectors::Selector;
use crate::server::Shared;
use crate::status::{ApiError, ApiResult};
use crate::store::{self, Key, Part, Store, meta_str};

pub(crate) fn dispatch(
    shared: &std::sync::Arc<Shared>,
    t: &Target,
    verb: &str,
    params: &Params,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    if verb == "watch" {
        return crate::watch::start(shared.clone(), t, params);
    }
    let result = {
        let mut store = shared.store();
        let result = run(&mut store, t, verb, params, headers, body);
        if let Ok((_, v)) = &result
            && shared.controllers
            && !matches!(verb, "get" | "list")
        {
            let name = t.name.as_deref().or_else(|| meta_str(v, "name")).unwrap_or_default().to_string();
            let ns = t.ns.as_deref().or_else(|| meta_str(v, "namespace")).unwrap_or("default").to_string();
            match registry::get(t.res).plural {
                "pods" => crate::controllers::after_pod_write(&mut store, &ns, &name),
                "podgroups" if verb == "delete" => crate::controllers::after_pod_group_delete(&mut store, &ns, &name),
                "podgroups" => crate::controllers::after_pod_group_write(&mut store, &ns, &name),
                plural @ ("persistentvolumes" | "persistentvolumeclaims") => {
                    crate::volume_controller::after_write(&mut store, plural, &ns, &name)
                }
                "resourceclaims" if verb != "delete" => crate::drivers::after_claim_write(&mut store, &ns, &name),
                plural if crate::workloads::PLURALS.contains(&plural) && verb != "delete" => {
                    crate::workloads::after_write(&mut store, &ns)
                }
                _ => {}
            }
        }
        result
    };
    let result = result.map(|(code, mut v)| {
        if t.served != t.res {
            registry::convert(&mut v, t.served);
        }
        (code, v)
    });
    match result {
        Ok((code, v)) if matches!(verb, "get" | "list") && crate::table::wanted(headers) => {
            let include = params.get("includeObject").is_some_and(|i| i == "Object");
            json(code, &crate::table::render(t.res, &v, include))
        }
        Ok((code, v)) => json(code, &v),
        Err(e) => error(&e),
    }
}

fn run(
    store: &mut Store,
    t: &Target,
    verb: &str,
    params: &Params,
    headers: &HeaderMap,
    body: &Bytes,
) -> ApiResult<(u16, Value)> {
    let rt = registry::get(t.res);
    let pod_binding = rt.plural == "pods" && t.sub.as_deref() == Some("binding");
    match (verb, t.sub.as_deref()) {
        (_, Some("binding")) if pod_binding && verb != "create" => {
            Err(ApiError::method_not_allowed("pods/binding only takes create"))
        }
        ("list", _) => list(store, t, params).map(|v| (200, v)),
        ("get", _) => get(store, t).map(|v| (200, v)),
        ("create", None) => store.create(t.res, t.ns.as_deref(), parse_body(body)?).map(|v| (201, v)),
        ("create", Some("binding")) if rt.plural == "pods" => {
            crate::binding::bind(store, t, &parse_body(body)?).map(|v| (201, v))
        }
        ("update", sub) => update(store, t, part(sub), params, body).map(|v| (200, v)),
        ("patch", sub) => patch(store, t, part(sub), params, headers, body),
        ("delete", None) => delete(store, t, body).map(|v| (200, v)),
        _ => Err(ApiError::method_not_allowed(format!("{verb} is not supported on {}", rt.qualified()))),
    }
}

/// `status`, and a claim's `binding`, change only `status`.
fn part(sub: Option<&str>) -> Part {
    if sub.is_some() { Part::Status } else { Part::Main }
}

pub(crate) fn key(t: &Target) -> ApiResult<Key> {
    let name = t.name.as_deref().ok_or_else(|| ApiError::method_not_allowed("a name is required"))?;
    Ok(store::key(t.res, t.ns.as_deref(), name))
}

fn parse_body(body: &Bytes) -> ApiResult<Value> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))
}

fn get(store: &Store, t: &Target) -> ApiResult<Value> {
    let k = key(t)?;
    let rt = registry::get(t.res);
    store.get(t.res, &k).map(|v| (**v).clone()).ok_or_else(|| ApiError::not_found(&rt.qualified(), &k.1))
}

/// A page of the collection: `limit`, `continue` (`{rv}|{namespace}|{name}` of the last item
/// sent; every page carries the first page's resourceVersion, as upstream), and selectors.
fn list(store: &Store, t: &Target, params: &Params) -> ApiResult<Value> {
    let rt = registry::get(t.res);
    let sel = Selector::parse(
        params.get("labelSelector").map(String::as_str),
        params.get("fieldSelector").map(String::as_str),
    )?;
    let limit = match params.get("limit").map(|l| l.parse::<usize>()) {
        Some(Ok(0)) | None => usize::MAX,
        Some(Ok(n)) => n,
        Some(Err(_)) => return Err(ApiError::bad_request("limit must be a non-negative integer")),
    };
    let (rv, after) = match params.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => parse_continue(c)?,
        None => (store.resource_version(), None),
    };
    let mut matching = store.list_after(t.res, t.ns.as_deref(), after.as_ref()).filter(|(_, v)| sel.matches(v));
    let items: Vec<(&Key, &std::sync::Arc<Value>)> = matching.by_ref().take(limit).collect();
    let remaining = matching.count();
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if remaining > 0
        && let Some((k, _)) = items.last()
    {
        metadata["continue"] = json!(format!("{rv}|{}|{}", k.0, k.1));
        metadata["remainingItemCount"] = json!(remaining);
    }
    let items: Vec<Value> = items.into_iter().map(|(_, v)| (**v).clone()).collect();
    Ok(
        json!({"kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(), "metadata": metadata, "items": items}),
    )
}

fn parse_continue(token: &str) -> ApiResult<(u64, Option<Key>)> {
    let bad = || ApiError::new(400, "BadRequest", "continue key is not valid");
    let mut parts = token.splitn(3, '|');
    let rv = parts.next().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
    let ns = parts.next().ok_or_else(bad)?;
    let name = parts.next().ok_or_else(bad)?;
    Ok((rv, Some((ns.to_string(), name.to_string()))))
}

fn manager(params: &Params) -> &str {
    params.get("fieldManager").map_or("unknown", String::as_str)
}

fn update(store: &mut Store, t: &Target, part: Part, params: &Params, body: &Bytes) -> ApiResult<Value> {
    let k = key(t)?;
    let old = store.get(t.res, &k).cloned();
    let new = store.update(t.res, &k, parse_body(body)?, part)?;
    if let Some(old) = old {
        store.owners.updated(&(t.res, k), manager(params), &old, &new);
    }
    Ok(new)
}

fn patch(
    store: &mut Store,
    t: &Target,
    part: Part,
    params: &Params,
    headers: &HeaderMap,
    body: &Bytes,
) -> ApiResult<(u16, Value)> {
    let ct = headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let kind = PatchKind::from_content_type(ct)
        .ok_or_else(|| ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})")))?;
    let p = patch::parse(kind, body)?;
    let meta_ok = p.get("metadata").is_none_or(|m| m.is_object() || m.is_null());
    if kind != PatchKind::Json && !(p.is_object() && meta_ok) {
        return Err(ApiError::bad_request("the patch must be an object, and its metadata too"));
    }
    if kind == PatchKind::Apply {
        return apply(store, t, part, params, p);
    }
    let k = key(t)?;
    let old = store.get(t.res, &k).cloned();
    let old = old.ok_or_else(|| ApiError::not_found(&registry::get(t.res).qualified(), &k.1))?;
    let new = store.update(t.res, &k, patch::apply(kind, &old, &p)?, part)?;
    store.owners.updated(&(t.res, k), manager(params), &old, &new);
    Ok((200, new))
}

/// Server-side apply: creates the object when absent, else merges the applied configuration,
/// refusing to change another manager's fields unless `force=true` ([`crate::fields`]).
fn apply(store: &mut Store, t: &Target, part: Part, params: &Params, p: Value) -> ApiResult<(u16, Value)> {
    let manager = params.get("fieldManager").filter(|m| !m.is_empty());
    let manager =
        manager.ok_or_else(|| ApiError::invalid("PatchOptions", "", "fieldManager", "is required for apply patch"))?;
    let k = key(t)?;
    let id = (t.res, k.clone());
    let Some(old) = store.get(t.res, &k).cloned() else {
        if part == Part::Status {
            return Err(ApiError::not_found(&registry::get(t.res).qualified(), &k.1));
        }
        let mut obj = p.clone();
        obj["metadata"]["name"] = json!(k.1);
        let created = store.create(t.res, t.ns.as_deref(), obj)?;
        store.owners.applied(id, manager, &p);
        return Ok((201, created));
    };
    if params.get("force").is_none_or(|f| f != "true") {
        store.owners.check_apply(&id, manager, &old, &p)?;
    }
    let mut patched = patch::apply(PatchKind::Apply, &old, &p)?;
    // Apply carries no precondition unless the configuration names a resourceVersion.
    if meta_str(&p, "resourceVersion").is_none() && patched["metadata"].is_object() {
        patched["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    }
    let new = store.update(t.res, &k, patched, part)?;
    store.owners.applied(id, manager, &p);
    Ok((200, new))
}

/// DELETE with an optional `DeleteOptions` body (`preconditions.uid`, `.resourceVersion`).
fn delete(store: &mut Store, t: &Target, body: &Bytes) -> ApiResult<Value> {
    let opts: Value = if body.is_empty() { Value::Null } else { parse_body(body)? };
    let pre = &opts["preconditions"];
    store.delete(t.res, &key(t)?, pre["uid"].as_str(), pre["resourceVersion"].as_str())
}
