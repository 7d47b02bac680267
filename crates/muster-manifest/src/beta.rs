//! `resource.k8s.io` objects in the beta versions Kubernetes 1.37 still serves when a cluster
//! enables them (v1beta1, v1beta2): decoded strictly in their own version, then converted to the
//! v1 form muster reads, as the API server converts them. The loader reports each such object with
//! a warning that names the v1 form; nothing is dropped. v1beta2 has v1's shape; v1beta1 wraps a
//! device's fields in `basic` and puts an exact request's fields on the request itself.

use k8s_openapi::api::resource::{v1, v1beta1, v1beta2};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::de::{DeError, from_node};
use crate::object::Object;
use crate::yaml::Node;

/// The kinds read in a beta version.
const KINDS: &[&str] = &["DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceTaintRule"];

/// Whether `api_version`/`kind` is a beta form muster reads (as v1, with [`warning`]).
pub fn reads(api_version: &str, kind: &str) -> bool {
    match api_version {
        "resource.k8s.io/v1beta1" => KINDS.contains(&kind) && kind != "DeviceTaintRule",
        "resource.k8s.io/v1beta2" => KINDS.contains(&kind),
        _ => false,
    }
}

/// `Some` when `api_version`/`kind` is a beta form muster converts: the v1 object, or the errors
/// of decoding it in its own version.
pub fn decode(api_version: &str, kind: &str, node: &Node<'_>) -> Option<Result<Object, Vec<DeError>>> {
    if !reads(api_version, kind) {
        return None;
    }
    match api_version {
        "resource.k8s.io/v1beta1" => decode_v1beta1(kind, node),
        "resource.k8s.io/v1beta2" => decode_v1beta2(kind, node),
        _ => None,
    }
}

/// The warning for an object read in a beta version.
pub fn warning(api_version: &str, kind: &str) -> String {
    format!(
        "{api_version} {kind} is served by Kubernetes 1.37 only where the beta API is enabled; read as \
         resource.k8s.io/v1 (`muster convert` writes the v1 form)"
    )
}

fn decode_v1beta1(kind: &str, node: &Node<'_>) -> Option<Result<Object, Vec<DeError>>> {
    Some(match kind {
        "DeviceClass" => {
            upgrade::<v1beta1::DeviceClass, v1::DeviceClass>(node, |_| {}).map(|o| Object::DeviceClass(Box::new(o)))
        }
        "ResourceClaim" => upgrade::<v1beta1::ResourceClaim, v1::ResourceClaim>(node, |v| {
            requests(v.pointer_mut("/spec/devices/requests"))
        })
        .map(|o| Object::ResourceClaim(Box::new(o))),
        "ResourceClaimTemplate" => upgrade::<v1beta1::ResourceClaimTemplate, v1::ResourceClaimTemplate>(node, |v| {
            requests(v.pointer_mut("/spec/spec/devices/requests"))
        })
        .map(|o| Object::ResourceClaimTemplate(Box::new(o))),
        "ResourceSlice" => {
            upgrade::<v1beta1::ResourceSlice, v1::ResourceSlice>(node, |v| unwrap_basic(v.pointer_mut("/spec/devices")))
                .map(|o| Object::ResourceSlice(Box::new(o)))
        }
        _ => return None,
    })
}

fn decode_v1beta2(kind: &str, node: &Node<'_>) -> Option<Result<Object, Vec<DeError>>> {
    Some(match kind {
        "DeviceClass" => {
            upgrade::<v1beta2::DeviceClass, v1::DeviceClass>(node, |_| {}).map(|o| Object::DeviceClass(Box::new(o)))
        }
        "ResourceClaim" => upgrade::<v1beta2::ResourceClaim, v1::ResourceClaim>(node, |_| {})
            .map(|o| Object::ResourceClaim(Box::new(o))),
        "ResourceClaimTemplate" => upgrade::<v1beta2::ResourceClaimTemplate, v1::ResourceClaimTemplate>(node, |_| {})
            .map(|o| Object::ResourceClaimTemplate(Box::new(o))),
        "ResourceSlice" => upgrade::<v1beta2::ResourceSlice, v1::ResourceSlice>(node, |_| {})
            .map(|o| Object::ResourceSlice(Box::new(o))),
        "DeviceTaintRule" => upgrade::<v1beta2::DeviceTaintRule, v1::DeviceTaintRule>(node, |_| {})
            .map(|o| Object::DeviceTaintRule(Box::new(o))),
        _ => return None,
    })
}

/// Decodes `node` as `B` (strict, with positions), reshapes its JSON with `reshape`, and reads it
/// as `V`.
fn upgrade<B, V>(node: &Node<'_>, reshape: impl FnOnce(&mut Value)) -> Result<V, Vec<DeError>>
where
    B: DeserializeOwned + Serialize,
    V: DeserializeOwned + k8s_openapi::Resource,
{
    let beta: B = from_node(node)?;
    let mut value = serde_json::to_value(&beta).map_err(|e| vec![internal(node, e)])?;
    reshape(&mut value);
    value["apiVersion"] = V::API_VERSION.into();
    serde_json::from_value(value).map_err(|e| vec![internal(node, e)])
}

fn internal(node: &Node<'_>, e: serde_json::Error) -> DeError {
    DeError { message: format!("cannot be read as resource.k8s.io/v1: {e}"), path: None, pos: Some(node.pos) }
}

/// v1beta1 requests: an exact request's fields move under `exactly` (a request with
/// `firstAvailable` has none of them).
fn requests(list: Option<&mut Value>) {
    const EXACT: &[&str] =
        &["deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity"];
    let Some(Value::Array(list)) = list else { return };
    for r in list.iter_mut().filter_map(Value::as_object_mut) {
        let mut exactly = Map::new();
        for k in EXACT {
            if let Some(v) = r.remove(*k) {
                exactly.insert((*k).to_string(), v);
            }
        }
        if !exactly.is_empty() {
            r.insert("exactly".into(), Value::Object(exactly));
        }
    }
}

/// v1beta1 devices: the fields of `basic` become the device's own.
fn unwrap_basic(devices: Option<&mut Value>) {
    let Some(Value::Array(devices)) = devices else { return };
    for d in devices.iter_mut().filter_map(Value::as_object_mut) {
        if let Some(Value::Object(basic)) = d.remove("basic") {
            d.extend(basic);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(text: &str) -> Result<Object, Vec<DeError>> {
        let docs = crate::yaml::parse_stream(text).unwrap();
        let root = &docs[0].root;
        let v = root.get("apiVersion").and_then(Node::as_str).unwrap();
        let k = root.get("kind").and_then(Node::as_str).unwrap();
        decode(v, k, root).expect("a beta kind")
    }

    #[test]
    fn a_v1beta1_slice_loses_its_basic_wrapper() {
        let o = object("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceSlice\nmetadata: {name: s}\nspec:\n  driver: gpu.example.com\n  nodeName: n1\n  pool: {name: n1, generation: 1, resourceSliceCount: 1}\n  devices:\n  - name: gpu-0\n    basic:\n      attributes:\n        model: {string: h100}\n      capacity:\n        memory: {value: 80Gi}\n").unwrap();
        let Object::ResourceSlice(s) = o else { panic!("{o:?}") };
        let d = &s.spec.devices.as_ref().unwrap()[0];
        assert_eq!(d.name, "gpu-0");
        assert_eq!(d.attributes.as_ref().unwrap()["model"].string.as_deref(), Some("h100"));
        assert_eq!(d.capacity.as_ref().unwrap()["memory"].value.0, "80Gi");
    }

    #[test]
    fn a_v1beta1_claim_gets_exactly_and_keeps_first_available() {
        let o = object("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimTemplate\nmetadata: {name: t, namespace: ml}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        deviceClassName: gpu.example.com\n        allocationMode: ExactCount\n        count: 2\n        selectors:\n        - cel: {expression: 'device.attributes[\"gpu.example.com\"].model == \"h100\"'}\n      - name: any\n        firstAvailable:\n        - name: big\n          deviceClassName: gpu.example.com\n").unwrap();
        let Object::ResourceClaimTemplate(t) = o else { panic!("{o:?}") };
        let requests = t.spec.unwrap().spec.unwrap().devices.unwrap().requests.unwrap();
        let e = requests[0].exactly.as_ref().unwrap();
        assert_eq!((e.device_class_name.as_str(), e.count), ("gpu.example.com", Some(2)));
        assert_eq!(e.selectors.as_ref().unwrap().len(), 1);
        assert!(requests[1].exactly.is_none());
        assert_eq!(requests[1].first_available.as_ref().unwrap()[0].name, "big");
    }

    #[test]
    fn beta_objects_are_decoded_strictly_in_their_own_version() {
        let e = object(
            "apiVersion: resource.k8s.io/v1beta2\nkind: DeviceClass\nmetadata: {name: c}\nspec:\n  selector: []\n",
        )
        .unwrap_err();
        assert_eq!(e[0].message, "unknown field \"selector\"");
        let e = object("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceSlice\nmetadata: {name: s}\nspec:\n  driver: d\n  nodeName: n\n  pool: {name: n, generation: 1, resourceSliceCount: 1}\n  devices:\n  - name: gpu-0\n    attributes: {}\n").unwrap_err();
        assert_eq!(e[0].message, "unknown field \"attributes\"", "v1's form in a v1beta1 object");
    }
}
