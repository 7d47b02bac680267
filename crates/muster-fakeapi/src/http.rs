//! The HTTP edge: parses an API path into a resource, namespace, name and subresource, derives
//! the Kubernetes verb, logs the request, applies injected faults, and hands it to
//! [`crate::ops`] (or [`crate::discovery`] and [`crate::watch`]).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::Value;

use crate::faults::Request;
use crate::registry::{self, ResId};
use crate::server::Shared;
use crate::status::ApiError;

/// An API path, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// Where the objects are kept ([`registry::storage`] of the URL's resource).
    pub res: ResId,
    /// The URL's resource: the version requests and answers are in.
    pub served: ResId,
    /// The URL's namespace (`None` for cluster-scoped resources and all-namespace requests).
    pub ns: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
}

pub type Params = HashMap<String, String>;

pub(crate) async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let params: Params = Query::try_from_uri(&uri).map(|q| q.0).unwrap_or_default();
    if method == Method::GET
        && let Some(found) = crate::discovery::serve(&shared, uri.path())
    {
        let response = found.map_or_else(|e| error(&e), |v| json(200, &v));
        shared.log(plain_request(uri.path(), response.status().as_u16()));
        return response;
    }
    let target = match parse_path(uri.path()) {
        Ok(t) => t,
        Err(e) => {
            shared.log(plain_request(uri.path(), e.code));
            return error(&e);
        }
    };
    let Some(verb) = verb(&method, &target, &params) else {
        let mut request = describe(&target, method.as_str());
        request.status = 405;
        shared.log(request);
        return error(&ApiError::method_not_allowed(format!("{method} is not supported")));
    };
    let mut request = describe(&target, verb);
    let Ok(body) = axum::body::to_bytes(body, crate::server::BODY_LIMIT).await else {
        request.status = 413;
        shared.log(request);
        let limit = crate::server::BODY_LIMIT;
        return error(&ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than {limit} bytes"),
        ));
    };
    if params.get("dryRun").is_some_and(|d| !d.is_empty()) {
        request.status = 400;
        shared.log(request);
        return error(&ApiError::bad_request("dryRun is not supported by the fake API server"));
    }
    if let Some(code) = shared.injected(&request) {
        request.status = code;
        shared.log(request);
        return error(&ApiError::injected(code));
    }
    if !matches!(verb, "get" | "list" | "watch")
        && let Some(delay) = shared.write_delay()
    {
        tokio::time::sleep(delay).await;
    }
    let body = in_storage_version(&target, body);
    // No request may take the server down: a panic is a 500 (and a bug in the fake).
    let dispatch = || crate::ops::dispatch(&shared, &target, verb, &params, &headers, &body);
    let response = std::panic::catch_unwind(std::panic::AssertUnwindSafe(dispatch))
        .unwrap_or_else(|_| error(&ApiError::new(500, "InternalError", "the fake API server failed on this request")));
    request.status = response.status().as_u16();
    shared.log(request);
    response
}

/// A body in the URL's version, converted to the storage version ([`registry::convert`]).
fn in_storage_version(t: &Target, body: axum::body::Bytes) -> axum::body::Bytes {
    if t.served == t.res {
        return body;
    }
    let served = registry::get(t.served).api_version();
    match serde_json::from_slice::<Value>(&body) {
        Ok(mut v) if v["apiVersion"] == served.as_str() => {
            registry::convert(&mut v, t.res);
            serde_json::to_vec(&v).map_or(body, axum::body::Bytes::from)
        }
        _ => body,
    }
}

/// A request outside the API paths (discovery, probes, unknown paths): the path as its name.
fn plain_request(path: &str, status: u16) -> Request {
    Request {
        verb: "get".into(),
        group: String::new(),
        resource: String::new(),
        subresource: None,
        namespace: None,
        name: Some(path.to_string()),
        status,
    }
}

fn describe(t: &Target, verb: &str) -> Request {
    let rt = registry::get(t.res);
    Request {
        verb: verb.into(),
        group: rt.group.into(),
        resource: rt.plural.into(),
        subresource: t.sub.clone(),
        namespace: t.ns.clone(),
        name: t.name.clone(),
        status: 0,
    }
}

/// The Kubernetes verb of a request, as the API server's request-info resolver names it.
fn verb(method: &Method, t: &Target, params: &Params) -> Option<&'static str> {
    let watch = params.get("watch").is_some_and(|w| w == "true" || w == "1");
    Some(match (method.as_str(), t.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    })
}

fn not_found(path: &str) -> ApiError {
    ApiError::new(404, "NotFound", format!("the server could not find the requested resource ({path})"))
}

/// `/api/v1[/namespaces/{ns}]/{plural}[/{name}[/{sub}]]`, and `/apis/{group}/{version}/…`.
pub fn parse_path(path: &str) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found(path)),
    };
    let namespaced =
        |plural: &str| registry::by_path(group, version, plural).is_some_and(|r| registry::get(r).namespaced);
    let (ns, rest) = match rest {
        ["namespaces", ns, plural, ..] if namespaced(plural) => (Some(ns.to_string()), &rest[2..]),
        _ => (None, rest),
    };
    let [plural, tail @ ..] = rest else { return Err(not_found(path)) };
    let res = registry::by_path(group, version, plural).ok_or_else(|| not_found(path))?;
    let (name, sub) = match tail {
        [] => (None, None),
        [name] => (Some(name.to_string()), None),
        [name, sub] if registry::get(res).subresources.contains(sub) => (Some(name.to_string()), Some(sub.to_string())),
        _ => return Err(not_found(path)),
    };
    Ok(Target { res: registry::storage(res), served: res, ns, name, sub })
}

pub fn json(code: u16, v: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(v).unwrap_or_default();
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    r
}

pub fn error(e: &ApiError) -> Response {
    json(e.code, &e.body())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let pods = registry::by_path("", "v1", "pods").unwrap();
        let t = parse_path("/api/v1/namespaces/ml/pods/p/binding").unwrap();
        let binding = Some("binding".into());
        assert_eq!(t, Target { res: pods, served: pods, ns: Some("ml".into()), name: Some("p".into()), sub: binding });
        assert_eq!(parse_path("/api/v1/pods").unwrap().ns, None);
        let ns = parse_path("/api/v1/namespaces/ml").unwrap();
        assert_eq!((registry::get(ns.res).plural, ns.name.as_deref()), ("namespaces", Some("ml")));
        let claims = parse_path("/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c/status").unwrap();
        assert_eq!(claims.sub.as_deref(), Some("status"));
        assert_eq!(parse_path("/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c/exec").unwrap_err().code, 404);
        assert_eq!(parse_path("/apis/nope/v1/things").unwrap_err().code, 404);
    }
}
