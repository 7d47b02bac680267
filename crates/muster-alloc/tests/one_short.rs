//! A request one device short: the search stops once every candidate was looked at (upstream
//! tries every combination of the rest) and still reports a selector error on any device it
//! would have reached.

use k8s_openapi::api::resource::v1::ResourceClaim;
use muster_alloc::{AllocError, AllocatedState, Allocator, Features, Outcome, SliceIndex};
use muster_cel::Env;
use serde_json::json;

mod common;
use common::objects;

fn claim(name: &str, count: u32) -> ResourceClaim {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"}, "spec": {"devices": {
        "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": count}}]}}}))
    .unwrap()
}

/// A claim that holds `device` of n1's pool.
fn holding(device: &str) -> ResourceClaim {
    let mut c = claim("other", 1);
    c.status = serde_json::from_value(json!({"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": "gpu.example.com", "pool": "n1", "device": device}]}}}))
    .unwrap();
    c
}

fn allocate(without_model: Option<usize>, held: &[&str], count: u32) -> Result<Outcome, AllocError> {
    allocate_of(8, without_model, held, count)
}

fn allocate_of(n: usize, without_model: Option<usize>, held: &[&str], count: u32) -> Result<Outcome, AllocError> {
    let (slices, classes, node) = objects(n, without_model);
    let (env, index) = (Env::default(), SliceIndex::new(slices.clone()));
    let mut state = AllocatedState::default();
    for d in held {
        state.add_claim(&holding(d), Features::kubernetes_1_37());
    }
    let wanted = claim("c", count);
    Allocator::new(Features::kubernetes_1_37(), &state, &classes, &index, &env).allocate(Some(&node), &[&wanted])
}

#[test]
fn eight_wanted_with_seven_free_is_unsatisfiable_and_seven_are_allocated() {
    for held in ["gpu-0", "gpu-3", "gpu-7"] {
        assert_eq!(allocate(None, &[held], 8), Ok(Outcome::Unsatisfiable), "gpu {held} held");
        assert!(matches!(allocate(None, &[held], 7), Ok(Outcome::Allocated(_))), "gpu {held} held");
    }
    assert_eq!(allocate(None, &["gpu-1", "gpu-5"], 7), Ok(Outcome::Unsatisfiable));
}

#[test]
fn a_selector_error_after_the_held_device_is_still_reported() {
    // gpu-2 is held: from the third pick on, fewer candidates remain than devices wanted. The
    // error on gpu-7 is found by the first pass, before any combination is cut short.
    for held in [&["gpu-2"][..], &["gpu-0", "gpu-6"], &[]] {
        match allocate(Some(7), held, 8) {
            Err(AllocError::Fatal(m)) => assert!(m.contains("gpu-7"), "{m}"),
            other => panic!("expected the selector error on gpu-7 with {held:?} held, got {other:?}"),
        }
    }
}

#[test]
fn held_devices_after_the_free_ones_are_not_counted_as_left() {
    // 24 GPUs, the last 8 held, 17 wanted: the free ones are too few, but so many candidates
    // follow each of them that counting positions alone would leave 2^16 combinations to try.
    let held: Vec<String> = (16..24).map(|i| format!("gpu-{i}")).collect();
    let held: Vec<&str> = held.iter().map(String::as_str).collect();
    assert_eq!(allocate_of(24, None, &held, 17), Ok(Outcome::Unsatisfiable));
    assert!(matches!(allocate_of(24, None, &held, 16), Ok(Outcome::Allocated(_))));
}
