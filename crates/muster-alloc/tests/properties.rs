//! Invariants of allocations over random slices, classes and claims: what never happens.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use muster_alloc::{AllocatedState, Allocator, DeviceDomain, DomainValue, Features, Outcome, SliceIndex};
use muster_cel::Env;
use proptest::prelude::*;
use serde_json::json;

#[derive(Clone, Debug)]
struct Dev {
    model: u8,
    numa: u8,
    tainted: bool,
    /// Units drawn from the pool's counter set, if any.
    counter: Option<u8>,
}

#[derive(Clone, Debug)]
struct Req {
    count: u8,
    only_model_a: bool,
    tolerates: bool,
}

#[derive(Clone, Debug)]
struct ClaimSpec {
    requests: Vec<Req>,
    same_numa: bool,
}

fn dev() -> impl Strategy<Value = Dev> {
    (0u8..3, 0u8..2, prop::bool::weighted(0.2), prop::option::weighted(0.4, 1u8..4))
        .prop_map(|(model, numa, tainted, counter)| Dev { model, numa, tainted, counter })
}

fn claim() -> impl Strategy<Value = ClaimSpec> {
    (prop::collection::vec((1u8..3, any::<bool>(), prop::bool::weighted(0.3)), 1..3), prop::bool::weighted(0.3))
        .prop_map(|(reqs, same_numa)| ClaimSpec {
            requests: reqs
                .into_iter()
                .map(|(count, only_model_a, tolerates)| Req { count, only_model_a, tolerates })
                .collect(),
            same_numa,
        })
}

const MODELS: [&str; 3] = ["a", "b", "c"];

fn slices(pools: &[(Vec<Dev>, u8)]) -> Vec<ResourceSlice> {
    let mut out = Vec::new();
    for (p, (devs, capacity)) in pools.iter().enumerate() {
        let devices: Vec<serde_json::Value> = devs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut v = json!({"name": format!("dev-{i}"), "attributes": {
                    "model": {"string": MODELS[d.model as usize]}, "numa": {"int": d.numa}}});
                if d.tainted {
                    v["taints"] = json!([{"key": "bad", "value": "x", "effect": "NoSchedule"}]);
                }
                if let Some(c) = d.counter {
                    v["consumesCounters"] =
                        json!([{"counterSet": "units", "counters": {"u": {"value": c.to_string()}}}]);
                }
                v
            })
            .collect();
        out.push(
            serde_json::from_value(json!({
                "metadata": {"name": format!("pool-{p}-devices")},
                "spec": {"driver": "drv", "nodeName": "node-1", "devices": devices,
                         "pool": {"name": format!("pool-{p}"), "generation": 1, "resourceSliceCount": 2}}
            }))
            .unwrap(),
        );
        out.push(
            serde_json::from_value(json!({
                "metadata": {"name": format!("pool-{p}-counters")},
                "spec": {"driver": "drv", "nodeName": "node-1",
                         "sharedCounters": [{"name": "units", "counters": {"u": {"value": capacity.to_string()}}}],
                         "pool": {"name": format!("pool-{p}"), "generation": 1, "resourceSliceCount": 2}}
            }))
            .unwrap(),
        );
    }
    out
}

fn claims(specs: &[ClaimSpec]) -> Vec<ResourceClaim> {
    specs
        .iter()
        .enumerate()
        .map(|(ci, c)| {
            let requests: Vec<serde_json::Value> = c
                .requests
                .iter()
                .enumerate()
                .map(|(ri, r)| {
                    let mut exactly = json!({"deviceClassName": if r.only_model_a { "model-a" } else { "any" },
                                             "allocationMode": "ExactCount", "count": r.count});
                    if r.tolerates {
                        exactly["tolerations"] = json!([{"key": "bad", "operator": "Exists"}]);
                    }
                    json!({"name": format!("r{ri}"), "exactly": exactly})
                })
                .collect();
            let mut devices = json!({"requests": requests});
            if c.same_numa {
                devices["constraints"] = json!([{"matchAttribute": "drv/numa"}]);
            }
            serde_json::from_value(
                json!({"metadata": {"name": format!("c{ci}"), "namespace": "ns"}, "spec": {"devices": devices}}),
            )
            .unwrap()
        })
        .collect()
}

fn classes() -> Vec<DeviceClass> {
    vec![
        serde_json::from_value(json!({"metadata": {"name": "any"}, "spec": {"selectors": [{"cel": {"expression": "device.driver == 'drv'"}}]}})).unwrap(),
        serde_json::from_value(json!({"metadata": {"name": "model-a"}, "spec": {"selectors": [{"cel": {"expression": "device.attributes['drv'].model == 'a'"}}]}})).unwrap(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn allocations_respect_every_rule(
        pools in prop::collection::vec((prop::collection::vec(dev(), 1..6), 2u8..8), 1..3),
        specs in prop::collection::vec(claim(), 1..3),
    ) {
        let slices = slices(&pools);
        let claims = claims(&specs);
        let classes = classes();
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-1"}})).unwrap();
        let env = Env::default();
        let index = SliceIndex::new(slices.clone());
        let state = AllocatedState::default();
        let refs: Vec<&ResourceClaim> = claims.iter().collect();
        let run = || Allocator::new(Features::kubernetes_1_37(), &state, &classes, &index, &env).allocate(Some(&node), &refs);
        let first = run();
        prop_assert_eq!(&first, &run(), "same input, same output");
        let Ok(Outcome::Allocated(results)) = first else { return Ok(()) };

        let dev_of = |pool: &str, name: &str| -> Dev {
            let p: usize = pool.trim_start_matches("pool-").parse().unwrap();
            let i: usize = name.trim_start_matches("dev-").parse().unwrap();
            pools[p].0[i].clone()
        };
        let mut seen = HashSet::new();
        let mut drawn: BTreeMap<String, u32> = BTreeMap::new();
        for (ci, (spec, alloc)) in specs.iter().zip(&results).enumerate() {
            let res = alloc.devices.as_ref().and_then(|d| d.results.clone()).unwrap_or_default();
            // Every request got exactly its count.
            for (ri, r) in spec.requests.iter().enumerate() {
                let n = res.iter().filter(|x| x.request == format!("r{ri}")).count();
                prop_assert_eq!(n, r.count as usize, "claim {} request {}", ci, ri);
            }
            let mut numas = HashSet::new();
            for x in &res {
                // No device is allocated twice.
                prop_assert!(seen.insert((x.pool.clone(), x.device.clone())), "{}/{} twice", x.pool, x.device);
                let d = dev_of(&x.pool, &x.device);
                let ri: usize = x.request.trim_start_matches('r').parse().unwrap();
                let req = &spec.requests[ri];
                // Selectors hold, taints are tolerated.
                prop_assert!(!req.only_model_a || d.model == 0);
                prop_assert!(!d.tainted || req.tolerates);
                numas.insert(d.numa);
                if let Some(c) = d.counter {
                    *drawn.entry(x.pool.clone()).or_default() += u32::from(c);
                }
            }
            // matchAttribute holds.
            prop_assert!(!spec.same_numa || numas.len() <= 1);
        }
        // No counter set is overdrawn.
        for (pool, used) in drawn {
            let p: usize = pool.trim_start_matches("pool-").parse().unwrap();
            prop_assert!(used <= u32::from(pools[p].1), "{} draws {} of {}", pool, used, pools[p].1);
        }
    }

    /// A gang's device domain (beyond upstream): within it, every device of the constrained driver
    /// has the domain's value; what fits within a domain fits without one; no domain is
    /// `allocate` exactly.
    #[test]
    fn allocations_within_a_domain_stay_inside_it(
        pools in prop::collection::vec((prop::collection::vec(dev(), 1..6), 2u8..8), 1..3),
        specs in prop::collection::vec(claim(), 1..3),
        value in 0i64..2,
    ) {
        let slices = slices(&pools);
        let claims = claims(&specs);
        let classes = classes();
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-1"}})).unwrap();
        let env = Env::default();
        let index = SliceIndex::new(slices.clone());
        let state = AllocatedState::default();
        let refs: Vec<&ResourceClaim> = claims.iter().collect();
        let allocator = Allocator::new(Features::kubernetes_1_37(), &state, &classes, &index, &env);
        let domain = DeviceDomain {
            attribute: "drv/numa".into(),
            value: DomainValue::Int(value),
            drivers: std::sync::Arc::new(["drv".to_string()].into()),
            list_types: false,
        };
        let unrestricted = allocator.allocate(Some(&node), &refs);
        prop_assert_eq!(&unrestricted, &allocator.allocate_within(Some(&node), &refs, None));
        let within = allocator.allocate_within(Some(&node), &refs, Some(&domain));
        if let Ok(Outcome::Allocated(results)) = &within {
            prop_assert!(matches!(unrestricted, Ok(Outcome::Allocated(_))), "fits within a domain, not without");
            for x in results.iter().flat_map(|a| a.devices.iter()).flat_map(|d| d.results.iter().flatten()) {
                let p: usize = x.pool.trim_start_matches("pool-").parse().unwrap();
                let i: usize = x.device.trim_start_matches("dev-").parse().unwrap();
                prop_assert_eq!(i64::from(pools[p].0[i].numa), value, "{}/{} outside the domain", x.pool, x.device);
            }
        }
    }
}
