//! An allocation charged to a CEL budget (one scheduling attempt's) stops with a fatal error
//! once the budget is spent, and allocates as without one while it lasts.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use muster_alloc::{AllocError, AllocatedState, Allocator, Features, Outcome, SliceIndex};
use muster_cel::{Budget, Env};
use serde_json::json;

mod common;

/// Node n1 with eight GPUs, the class `gpu` and a claim for all eight.
fn objects() -> (Vec<ResourceSlice>, Vec<DeviceClass>, ResourceClaim, Node) {
    let (slices, classes, node) = common::objects(8, None);
    let claim = serde_json::from_value(json!({"metadata": {"name": "c", "namespace": "ml"}, "spec": {"devices": {
        "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 8}}]}}}))
    .unwrap();
    (slices, classes, claim, node)
}

#[test]
fn a_spent_budget_stops_the_allocation_and_an_ample_one_changes_nothing() {
    let (slices, classes, claim, node) = objects();
    let (env, state, index) = (Env::default(), AllocatedState::default(), SliceIndex::new(slices.clone()));
    let allocator = || Allocator::new(Features::kubernetes_1_37(), &state, &classes, &index, &env);
    let unbounded = allocator().allocate(Some(&node), &[&claim]);
    assert!(matches!(unbounded, Ok(Outcome::Allocated(_))), "{unbounded:?}");

    let ample = Budget::new(Budget::ATTEMPT);
    assert_eq!(allocator().with_budget(Some(&ample)).allocate(Some(&node), &[&claim]), unbounded);
    assert!(!ample.is_spent());

    let tiny = Budget::new(5);
    match allocator().with_budget(Some(&tiny)).allocate(Some(&node), &[&claim]) {
        Err(AllocError::Fatal(m)) => {
            assert!(m.contains("the CEL cost budget of this scheduling attempt (5) is spent"), "{m}")
        }
        other => panic!("expected the budget to stop the allocation, got {other:?}"),
    }
}

#[test]
fn a_remembered_class_verdict_is_charged_as_if_evaluated() {
    let (slices, classes, claim, node) = objects();
    let (env, state, index) = (Env::default(), AllocatedState::default(), SliceIndex::new(slices.clone()));
    let allocator = || Allocator::new(Features::kubernetes_1_37(), &state, &classes, &index, &env);
    // The first call evaluates the class's selector on the eight devices, the second reads the
    // verdicts the index kept: the same answer, the same charge.
    let (first, second) = (Budget::new(Budget::ATTEMPT), Budget::new(Budget::ATTEMPT));
    let a = allocator().with_budget(Some(&first)).allocate(Some(&node), &[&claim]);
    let b = allocator().with_budget(Some(&second)).allocate(Some(&node), &[&claim]);
    assert!(matches!(a, Ok(Outcome::Allocated(_))), "{a:?}");
    assert_eq!(a, b);
    assert!(first.spent() > 0);
    assert_eq!(first.spent(), second.spent());
    // A budget spent before the call stops it, remembered verdicts or not.
    let tiny = Budget::new(5);
    assert!(matches!(allocator().with_budget(Some(&tiny)).allocate(Some(&node), &[&claim]), Err(AllocError::Fatal(_))));
}
