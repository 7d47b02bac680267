//! A `SliceIndex` changed one slice at a time answers as one built from the final slices: the
//! same pools and candidates on every node, the same allocations, the same selector verdicts —
//! whatever it gathered and remembered along the way.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use muster_alloc::{AllocatedState, Allocator, Features, SliceIndex, Touched};
use muster_cel::Env;
use proptest::prelude::*;
use serde_json::json;

const NODES: [&str; 3] = ["node-0", "node-1", "node-2"];

/// One version of a slice: which of a few names, where it is published, its pool's generation
/// and slice count, and its devices' models.
#[derive(Clone, Debug)]
struct Version {
    name: u8,
    /// 0–2: local to that node; 3: every node; 4: nodes labelled `rack=a`.
    place: u8,
    pool: u8,
    generation: u8,
    count: u8,
    models: Vec<bool>,
}

#[derive(Clone, Debug)]
enum Op {
    Upsert(Version),
    Delete(u8),
    /// Gather and allocate on every node now (fills the caches a later change must forget).
    Look,
}

fn version() -> impl Strategy<Value = Version> {
    (0u8..6, 0u8..5, 0u8..3, 1u8..3, 1u8..3, prop::collection::vec(any::<bool>(), 0..4)).prop_map(
        |(name, place, pool, generation, count, models)| Version { name, place, pool, generation, count, models },
    )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![5 => version().prop_map(Op::Upsert), 2 => (0u8..6).prop_map(Op::Delete), 2 => Just(Op::Look)]
}

fn slice(v: &Version) -> ResourceSlice {
    let devices: Vec<serde_json::Value> = v
        .models
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"name": format!("dev-{i}"), "attributes": {"model": {"string": if *a { "a" } else { "b" }}}}))
        .collect();
    let mut spec = json!({"driver": "drv", "devices": devices,
        "pool": {"name": format!("pool-{}", v.pool), "generation": v.generation, "resourceSliceCount": v.count}});
    match v.place {
        0..=2 => spec["nodeName"] = json!(NODES[v.place as usize]),
        3 => spec["allNodes"] = json!(true),
        _ => {
            spec["nodeSelector"] = json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "rack", "operator": "In", "values": ["a"]}]}]})
        }
    }
    serde_json::from_value(json!({"metadata": {"name": format!("slice-{}", v.name)}, "spec": spec})).unwrap()
}

fn nodes() -> Vec<Node> {
    NODES
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let labels = if i == 1 { json!({"rack": "a"}) } else { json!({}) };
            serde_json::from_value(json!({"metadata": {"name": n, "labels": labels}})).unwrap()
        })
        .collect()
}

fn classes() -> Vec<DeviceClass> {
    vec![
        serde_json::from_value(json!({"metadata": {"name": "model-a"}, "spec": {"selectors": [{"cel": {"expression": "device.attributes['drv'].model == 'a'"}}]}})).unwrap(),
    ]
}

fn claim() -> ResourceClaim {
    serde_json::from_value(json!({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [
        {"name": "r", "exactly": {"deviceClassName": "model-a", "allocationMode": "ExactCount", "count": 2}}]}}}))
    .unwrap()
}

/// What `node` sees, by name: pools (driver, name, incomplete, invalid, slices, devices that draw
/// on the pool from elsewhere) and candidates (slice, device).
fn seen(index: &SliceIndex, node: Option<&Node>) -> String {
    let cell = index.gather(node, Features::kubernetes_1_37());
    let g = cell.get();
    let mut out = String::new();
    for p in &g.pools {
        let slices: Vec<_> = p.slices.iter().map(|(_, s)| s.metadata.name.clone().unwrap_or_default()).collect();
        let others: Vec<_> = p.other_devices.iter().map(|d| d.name.clone()).collect();
        out += &format!("{}/{} {} {:?} {slices:?} {others:?}\n", p.driver, p.name, p.incomplete, p.invalid);
    }
    for c in &g.cands {
        out += &format!("{}:{} ", c.slice_ref.metadata.name.as_deref().unwrap_or(""), c.device.name);
    }
    out
}

/// Every node's view and the allocation of a claim of two model-a devices on it.
fn answers(index: &SliceIndex, env: &Env) -> Vec<String> {
    let (state, classes, claim) = (AllocatedState::default(), classes(), claim());
    let alloc = Allocator::new(Features::kubernetes_1_37(), &state, &classes, index, env);
    let nodes = nodes();
    nodes
        .iter()
        .map(Some)
        .chain([None])
        .map(|n| {
            let outcome = match alloc.allocate(n, &[&claim]) {
                Ok(muster_alloc::Outcome::Allocated(r)) => format!("{:?}", r[0].devices.as_ref().map(|d| &d.results)),
                Ok(muster_alloc::Outcome::Unsatisfiable) => "unsatisfiable".to_string(),
                Err(e) => format!("error {e:?}"),
            };
            format!("{}{outcome}", seen(index, n))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn changes_one_by_one_answer_as_the_final_slices(ops in prop::collection::vec(op(), 1..24)) {
        let (env, fresh_env) = (Env::default(), Env::default());
        let mut index = SliceIndex::new([]);
        let mut last: BTreeMap<u8, ResourceSlice> = BTreeMap::new();
        for op in &ops {
            match op {
                Op::Upsert(v) => {
                    let touched = index.upsert(slice(v));
                    prop_assert_ne!(touched, Touched::None);
                    last.insert(v.name, slice(v));
                }
                Op::Delete(name) => {
                    let touched = index.delete(&format!("slice-{name}"));
                    prop_assert_eq!(touched == Touched::None, last.remove(name).is_none());
                }
                Op::Look => drop(answers(&index, &env)),
            }
        }
        let fresh = SliceIndex::new(last.into_values());
        prop_assert_eq!(index.len(), fresh.len());
        prop_assert_eq!(answers(&index, &env), answers(&fresh, &fresh_env));
        // Whether a pool is local to a node (kept per pool as slices come and go) is what the
        // final slices say.
        for pool in (0..3).map(|p| format!("pool-{p}")) {
            for node in NODES.iter().chain(&["elsewhere"]) {
                let local = |i: &SliceIndex| i.pool_is_local_to("drv", &pool, node);
                let said = fresh.slices().filter(|(_, s)| s.spec.pool.name == pool)
                    .all(|(_, s)| s.spec.node_name.as_deref() == Some(*node));
                prop_assert_eq!(local(&index), said, "{} on {}", pool, node);
                prop_assert_eq!(local(&fresh), said, "{} on {}", pool, node);
            }
        }
    }
}

#[test]
fn a_change_touches_the_nodes_that_see_its_pool() {
    let local =
        |name: u8, place: u8, pool: u8| Version { name, place, pool, generation: 1, count: 2, models: vec![true] };
    let mut index = SliceIndex::new([]);
    assert_eq!(index.upsert(slice(&local(0, 0, 0))), Touched::Nodes(["node-0".to_string()].into()));
    // Another slice of the same pool, on another node: both nodes see the pool's count change.
    let both = Touched::Nodes(["node-0".to_string(), "node-1".to_string()].into());
    assert_eq!(index.upsert(slice(&local(1, 1, 0))), both);
    assert!(!index.pool_is_local_to("drv", "pool-0", "node-0"), "pool-0 has a slice on node-1 too");
    assert_eq!(index.upsert(slice(&local(2, 2, 1))), Touched::Nodes(["node-2".to_string()].into()));
    assert!(index.pool_is_local_to("drv", "pool-1", "node-2") && !index.pool_is_local_to("drv", "pool-1", "node-0"));
    // A slice for every node: every node.
    assert_eq!(index.upsert(slice(&local(3, 3, 2))), Touched::All);
    // Moved to another pool: the nodes of the old pool and of the new.
    let moved = Touched::Nodes(["node-0".to_string(), "node-1".to_string(), "node-2".to_string()].into());
    assert_eq!(index.upsert(slice(&local(1, 1, 1))), moved);
    assert_eq!(index.delete("slice-3"), Touched::All);
    assert_eq!(index.delete("slice-3"), Touched::None);
    assert_eq!(index.len(), 3);
}
