//! Kubernetes RBAC, as the API server's authorizer applies it, for checking muster's roles
//! against the requests muster makes: whether a set of `PolicyRule`s allows one request, and the
//! request attributes (verb, group, resource/subresource, namespace, name) of an HTTP request as
//! an API server derives them. The deployment test checks the shipped ClusterRole and Role with
//! it; the end-to-end tests of `muster run` check every request in the fake API server's log.

#![allow(dead_code)] // each test file uses what it needs

use k8s_openapi::api::rbac::v1::PolicyRule;

/// Whether `rules` allow `verb` on `resource` (with its subresource, as in `pods/status`) of API
/// group `group` (`""` for the core group), for the object `name` (`None` for requests that name
/// no object: list, watch of a collection, create).
///
/// This is upstream's rule matching: `*` matches every group, verb or resource; `*/status`
/// matches the `status` subresource of every resource; `pods` does *not* cover `pods/status`;
/// a rule with `resourceNames` matches only requests that name one of them (so never a create or
/// a list). Non-resource URLs are not handled here (see [`request_attributes`]).
pub fn cluster_role_allows(
    rules: &[PolicyRule],
    group: &str,
    resource_with_subresource: &str,
    verb: &str,
    name: Option<&str>,
) -> bool {
    rules.iter().any(|rule| rule_allows(rule, group, resource_with_subresource, verb, name))
}

/// Whether one rule allows the request (see [`cluster_role_allows`]); for checking that every
/// rule of a role is used by some request.
pub fn rule_allows(
    rule: &PolicyRule,
    group: &str,
    resource_with_subresource: &str,
    verb: &str,
    name: Option<&str>,
) -> bool {
    let any_or = |list: Option<&Vec<String>>, want: &str| list.is_some_and(|l| l.iter().any(|x| x == "*" || x == want));
    if !any_or(Some(&rule.verbs), verb) || !any_or(rule.api_groups.as_ref(), group) {
        return false;
    }
    let subresource = resource_with_subresource.split_once('/').map(|(_, sub)| sub);
    let resource_ok = rule.resources.as_ref().is_some_and(|rs| {
        rs.iter().any(|r| {
            r == "*"
                || r == resource_with_subresource
                || subresource.is_some_and(|sub| r.strip_prefix("*/") == Some(sub))
        })
    });
    if !resource_ok {
        return false;
    }
    match rule.resource_names.as_deref() {
        None | Some([]) => true,
        Some(names) => name.is_some_and(|n| !n.is_empty() && names.iter().any(|x| x == n)),
    }
}

/// What an API server's authorizer sees of one resource request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestAttributes {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// The API group, `""` for the core group.
    pub group: String,
    /// The resource, with `/subresource` when there is one: `pods/binding`.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl RequestAttributes {
    /// Whether the request is allowed by cluster-wide `cluster_rules` or by one of `roles`, each a
    /// namespace and the rules a RoleBinding grants there.
    pub fn allowed_by(&self, cluster_rules: &[PolicyRule], roles: &[(&str, &[PolicyRule])]) -> bool {
        let name = self.name.as_deref();
        cluster_role_allows(cluster_rules, &self.group, &self.resource, &self.verb, name)
            || roles.iter().any(|(ns, rules)| {
                self.namespace.as_deref() == Some(*ns)
                    && cluster_role_allows(rules, &self.group, &self.resource, &self.verb, name)
            })
    }
}

/// The attributes of a request `METHOD /path?query`, as the API server's request-info resolver
/// derives them; `None` for a non-resource request (`/version`, `/api`, `/apis/{g}/{v}`
/// discovery, `/healthz`), which every authenticated client may make (`system:discovery`).
///
/// GET of a collection is `list`, or `watch` with `watch=true`; a `fieldSelector` of
/// `metadata.name=X` names the object, as upstream does. DELETE of a collection is
/// `deletecollection`.
pub fn request_attributes(method: &str, path_and_query: &str) -> Option<RequestAttributes> {
    let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    // As upstream: namespaces/{ns}/... names the namespace; what follows is the resource, unless
    // it is a subresource of the Namespace itself (namespaces/{name}/status, .../finalize).
    let (namespace, rest) = match rest {
        ["namespaces", ns, more @ ..] => match more {
            [] | ["status" | "finalize", ..] => (Some(*ns), rest),
            _ => (Some(*ns), more),
        },
        _ => (None, rest),
    };
    let (resource, name, subresource) = match rest {
        [] => return None,
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub, ..] => (*resource, Some(*name), Some(*sub)),
    };
    let params: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    let param = |key: &str| params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    let watch = matches!(param("watch"), Some("true" | "1"));
    let mut name = name.map(str::to_string);
    if name.is_none()
        && let Some(selector) = param("fieldSelector")
        && let Some(n) = selector.split(',').find_map(|s| s.strip_prefix("metadata.name="))
    {
        name = Some(n.to_string());
    }
    let collection = rest.len() == 1;
    let verb = match method.to_ascii_uppercase().as_str() {
        "GET" | "HEAD" if watch => "watch",
        "GET" | "HEAD" if collection => "list",
        "GET" | "HEAD" => "get",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if collection => "deletecollection",
        "DELETE" => "delete",
        _ => return None,
    };
    let resource = match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    Some(RequestAttributes {
        verb: verb.to_string(),
        group: group.to_string(),
        resource,
        namespace: namespace.map(str::to_string),
        name,
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
