//! A DeviceClass or claim selector on any text: compiled in the DRA CEL environment (with its
//! cost estimate) and, when it compiles, evaluated against a device with attributes and
//! capacities of every type. Errors are fine; a panic is not, nor going past the cost limit.
#![no_main]

use std::sync::OnceLock;

use k8s_openapi::api::resource::v1::Device;
use libfuzzer_sys::fuzz_target;
use muster_cel::{DeviceView, Env};

fn device() -> &'static DeviceView {
    static VIEW: OnceLock<DeviceView> = OnceLock::new();
    VIEW.get_or_init(|| {
        let device: Device = serde_json::from_value(serde_json::json!({
            "name": "gpu-0",
            "attributes": {
                "model": {"string": "H100"},
                "index": {"int": 3},
                "healthy": {"bool": true},
                "driverVersion": {"version": "550.54.15"},
                "gpu.example.com/numa": {"int": 1}
            },
            "capacity": {"memory": {"value": "80Gi"}, "cores": {"value": "132"}}
        }))
        .expect("a valid device");
        DeviceView::new("gpu.example.com", &device).expect("a device view")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let env = Env::default();
    if let Ok(program) = env.compile(src) {
        let _ = env.eval(&program, device());
    }
});
