//! Every CEL selector of the upstream allocator test table (tests/conformance/allocator), checked
//! directly: compile errors and device conversion errors must read exactly as the expected
//! errors, and every device the expected allocations hand out must satisfy its class and request
//! selectors.

use std::path::Path;

use k8s_openapi::api::resource::v1::{DeviceClass, DeviceRequest, ResourceClaim, ResourceSlice};
use muster_cel::{DeviceView, Env, SelectorOwner};
use muster_manifest::Object;

struct Case {
    name: String,
    classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
    claims: Vec<ResourceClaim>,
    expect: serde_json::Value,
}

fn load(path: &Path) -> Case {
    let text = std::fs::read_to_string(path).unwrap();
    let m = muster_manifest::load_str_documents(&path.display().to_string(), &text).unwrap();
    let mut case =
        Case { name: String::new(), classes: vec![], slices: vec![], claims: vec![], expect: Default::default() };
    for l in m.objects {
        match l.object {
            Object::DeviceClass(c) => case.classes.push(*c),
            Object::ResourceSlice(s) => case.slices.push(*s),
            Object::ResourceClaim(c) => case.claims.push(*c),
            _ => {}
        }
    }
    let docs = muster_manifest::yaml::parse_stream(&text).unwrap();
    let last: serde_json::Value = muster_manifest::de::from_node(&docs.last().unwrap().root).unwrap();
    case.name = last["metadata"]["name"].as_str().unwrap().to_string();
    case.expect = last["spec"]["expect"].clone();
    case
}

fn selectors_of_class(c: &DeviceClass) -> Vec<String> {
    c.spec
        .as_ref()
        .and_then(|s| s.selectors.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
        .collect()
}

/// (request name as results name it, class, selectors) for every request and subrequest.
fn requests(claim: &ResourceClaim) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    let reqs: &[DeviceRequest] =
        claim.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.requests.as_deref()).unwrap_or(&[]);
    let sels = |s: &Option<Vec<k8s_openapi::api::resource::v1::DeviceSelector>>| -> Vec<String> {
        s.iter().flatten().filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone())).collect()
    };
    for r in reqs {
        if let Some(e) = &r.exactly {
            out.push((r.name.clone(), e.device_class_name.clone(), sels(&e.selectors)));
        }
        for sub in r.first_available.iter().flatten() {
            out.push((format!("{}/{}", r.name, sub.name), sub.device_class_name.clone(), sels(&sub.selectors)));
        }
    }
    out
}

#[test]
fn upstream_selectors_behave_as_upstream() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/allocator");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 223);
    let env = Env::default();
    let (mut compiled, mut evaluated, mut compile_errors, mut device_errors) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for f in &files {
        let case = load(f);
        let expected_error = case.expect["error"].as_str().unwrap_or("").to_string();
        // Compile every selector; a compile error must be the case's expected error.
        for class in &case.classes {
            for (i, src) in selectors_of_class(class).iter().enumerate() {
                match env.compile(src) {
                    Ok(_) => compiled += 1,
                    Err(e) => {
                        compile_errors += 1;
                        let owner = SelectorOwner::Class(class.metadata.name.as_deref().unwrap());
                        let msg = muster_cel::selector_compile_error(owner, i, &e);
                        if msg != expected_error {
                            failures.push(format!("{}: {msg:?} != {expected_error:?}", case.name));
                        }
                    }
                }
            }
        }
        for claim in &case.claims {
            for (_, _, sels) in requests(claim) {
                for (i, src) in sels.iter().enumerate() {
                    match env.compile(src) {
                        Ok(_) => compiled += 1,
                        Err(e) => {
                            compile_errors += 1;
                            let owner = SelectorOwner::Claim(claim.metadata.name.as_deref().unwrap());
                            let msg = muster_cel::selector_compile_error(owner, i, &e);
                            if msg != expected_error {
                                failures.push(format!("{}: {msg:?} != {expected_error:?}", case.name));
                            }
                        }
                    }
                }
            }
        }
        // Device conversion errors read as upstream's.
        for slice in &case.slices {
            for d in slice.spec.devices.iter().flatten() {
                if let Err(e) = DeviceView::new(&slice.spec.driver, d) {
                    device_errors += 1;
                    if !expected_error.is_empty() && !expected_error.ends_with(&e.to_string()) {
                        failures.push(format!("{}: device error {e} vs {expected_error:?}", case.name));
                    }
                }
            }
        }
        // Every allocated device satisfies its class and request selectors.
        for (claim, alloc) in case.claims.iter().zip(case.expect["allocations"].as_array().into_iter().flatten()) {
            let reqs = requests(claim);
            for r in alloc["devices"]["results"].as_array().into_iter().flatten() {
                let (req, pool, dev) =
                    (r["request"].as_str().unwrap(), r["pool"].as_str().unwrap(), r["device"].as_str().unwrap());
                let Some((_, class, sels)) = reqs.iter().find(|(n, _, _)| n == req) else { continue };
                let slice = case
                    .slices
                    .iter()
                    .find(|s| {
                        s.spec.pool.name == pool
                            && s.spec.driver == r["driver"].as_str().unwrap()
                            && s.spec.devices.iter().flatten().any(|d| d.name == dev)
                    })
                    .unwrap();
                let device = slice.spec.devices.iter().flatten().find(|d| d.name == dev).unwrap();
                let view = DeviceView::new(&slice.spec.driver, device).unwrap();
                let class_sels = case
                    .classes
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(class))
                    .map(selectors_of_class)
                    .unwrap_or_default();
                for src in class_sels.iter().chain(sels) {
                    let p = env.compile(src).unwrap();
                    evaluated += 1;
                    if env.eval(&p, &view) != Ok(true) {
                        failures.push(format!("{}: {src} on {pool}/{dev}: {:?}", case.name, env.eval(&p, &view)));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    // The table holds 300 selectors (3 do not compile), 3 devices with unconvertible attributes, and
    // 334 (selector, allocated device) pairs.
    assert_eq!((compiled, compile_errors, device_errors, evaluated), (297, 3, 3, 334));
}
