//! Objects the allocator's tests share.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use serde_json::json;

/// Node n1 with `n` GPUs; `without_model` names the one device that has no `model` attribute
/// (the class's selector then fails at run time on it).
pub fn objects(n: usize, without_model: Option<usize>) -> (Vec<ResourceSlice>, Vec<DeviceClass>, Node) {
    let devices: Vec<_> = (0..n)
        .map(|i| match without_model {
            Some(j) if j == i => json!({"name": format!("gpu-{i}"), "attributes": {"index": {"int": i}}}),
            _ => json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": "h100"}}}),
        })
        .collect();
    let slice = serde_json::from_value(json!({"metadata": {"name": "n1-gpus"}, "spec": {"driver": "gpu.example.com",
        "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}, "devices": devices}}))
    .unwrap();
    let class = serde_json::from_value(json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [
        {"cel": {"expression": "device.attributes['gpu.example.com'].model == 'h100'"}}]}}))
    .unwrap();
    let node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    (vec![slice], vec![class], node)
}
