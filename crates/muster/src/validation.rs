//! The API server's validation of each object as read, in the one layer `check`, `plan`, `why`,
//! `devices` and `sim` share: every object's names, labels and annotations, and the rules of
//! its kind that do not need other objects (a pod's containers, claims, spread constraints and
//! affinity terms; a claim's status; a DeviceTaintRule; a Service's and a ReplicationController's
//! selector). The rules themselves live in
//! [`muster_sched::validate`]; this only says which apply to which object. Rules that need
//! other objects (admin access and its namespace, slices' devices against claims) are where the
//! model is built.

use muster_manifest::Object;
use muster_sched::validate::{self, FieldError};

/// Everything the API server would refuse in `o` on its own.
pub(crate) fn object(o: &Object) -> Vec<FieldError> {
    let mut out = names(o);
    out.extend(validate::object_meta(o.metadata()));
    match o {
        Object::Pod(p) => out.extend(p.spec.as_ref().map(validate::pod_structure).unwrap_or_default()),
        Object::ResourceClaim(c) => out.extend(c.status.as_ref().map(validate::claim_status).unwrap_or_default()),
        Object::DeviceTaintRule(r) => out.extend(validate::device_taint_rule(r)),
        // The selectors PodTopologySpread's default constraints read: label maps.
        Object::Service(s) => {
            out.extend(s.spec.as_ref().and_then(|s| s.selector.as_ref()).map(selector_labels).unwrap_or_default())
        }
        Object::ReplicationController(rc) => {
            out.extend(rc.spec.as_ref().and_then(|s| s.selector.as_ref()).map(selector_labels).unwrap_or_default())
        }
        _ => {}
    }
    out
}

/// A Service's or ReplicationController's `spec.selector`: label keys and values.
fn selector_labels(selector: &std::collections::BTreeMap<String, String>) -> Vec<FieldError> {
    validate::meta::labels(selector, "spec.selector")
}

/// The names the API server checks on the objects muster reads: every object's name (a DNS
/// subdomain; a Namespace's, a DNS label) and namespace, and the names inside that must be DNS
/// labels (containers, device requests and subrequests, a slice's devices).
fn names(o: &Object) -> Vec<FieldError> {
    use validate::{dns_label, dns_subdomain};
    let meta = o.metadata();
    let mut out = Vec::new();
    if let Some(name) = meta.name.as_deref() {
        out.extend(match o {
            Object::Namespace(_) => dns_label(name, "metadata.name"),
            _ => dns_subdomain(name, "metadata.name"),
        });
    }
    if let Some(ns) = meta.namespace.as_deref().filter(|_| o.is_namespaced()) {
        out.extend(dns_label(ns, "metadata.namespace"));
    }
    let requests = |devices: Option<&k8s_openapi::api::resource::v1::DeviceClaim>, path: &str, out: &mut Vec<_>| {
        for (i, r) in devices.and_then(|d| d.requests.as_ref()).into_iter().flatten().enumerate() {
            out.extend(dns_label(&r.name, &format!("{path}.requests[{i}].name")));
            for (j, sub) in r.first_available.iter().flatten().enumerate() {
                out.extend(dns_label(&sub.name, &format!("{path}.requests[{i}].firstAvailable[{j}].name")));
            }
        }
    };
    match o {
        Object::Pod(p) => {
            let spec = p.spec.as_ref();
            for (list, field) in [
                (spec.map(|s| &s.containers[..]), "containers"),
                (spec.and_then(|s| s.init_containers.as_deref()), "initContainers"),
            ] {
                for (i, c) in list.into_iter().flatten().enumerate() {
                    out.extend(dns_label(&c.name, &format!("spec.{field}[{i}].name")));
                }
            }
        }
        Object::ResourceClaim(c) => {
            requests(c.spec.as_ref().and_then(|s| s.devices.as_ref()), "spec.devices", &mut out)
        }
        Object::ResourceClaimTemplate(t) => {
            let devices = t.spec.as_ref().and_then(|s| s.spec.as_ref()).and_then(|s| s.devices.as_ref());
            requests(devices, "spec.spec.devices", &mut out)
        }
        Object::ResourceSlice(s) => {
            for (i, d) in s.spec.devices.iter().flatten().enumerate() {
                out.extend(dns_label(&d.name, &format!("spec.devices[{i}].name")));
            }
        }
        _ => {}
    }
    out
}
