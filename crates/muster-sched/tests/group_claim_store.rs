//! PodGroup claims (KEP 5729) taken one object at a time, in any order, as a live world's watches
//! deliver them: the members' entries identical to the group's resolve to the one claim the
//! resourceclaim controller made for the group (recorded in the group's status), and the gang is
//! scheduled — nodes and devices — exactly as when the cluster is built at once from the same
//! objects and the template.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_sched::{Change, Cluster, Engine, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::json;

mod common;

#[derive(Clone, Debug)]
enum Object {
    Pod(Box<Pod>),
    Group(Box<PodGroup>),
    Claim(Box<ResourceClaim>),
}

/// PodGroup `ml/pg` sharing one `gpus-1` claim, entry `shared`.
fn group(min_count: u8) -> PodGroup {
    serde_json::from_value(json!({"metadata": {"name": "pg", "namespace": "ml", "uid": "u-pg"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                 "resourceClaims": [{"name": "shared", "resourceClaimTemplateName": "gpus-1"}]}}))
    .unwrap()
}

fn member(i: usize, cpu: u8) -> Box<Pod> {
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": format!("m{i}"), "namespace": "ml"},
            "spec": {"schedulingGroup": {"podGroupName": "pg"},
                     "resourceClaims": [{"name": "shared", "resourceClaimTemplateName": "gpus-1"}],
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()},
                                                                "claims": [{"name": "shared"}]}}]}}))
        .unwrap(),
    )
}

/// What the controller writes: the group's claim, and the group with its status naming it.
fn controller_made(group: &PodGroup) -> (ResourceClaim, PodGroup) {
    let claim = muster_sched::cluster::generate_group_claim(group, "shared", &common::gpu_templates()[0]);
    let mut recorded = group.clone();
    recorded.status = Some(
        serde_json::from_value(json!({"resourceClaimStatuses": [
        {"name": "shared", "resourceClaimName": claim.metadata.name}]}))
        .unwrap(),
    );
    (claim, recorded)
}

/// Pod → node, and the devices of each allocated claim.
type Outcome = (BTreeMap<String, String>, BTreeMap<String, Vec<String>>);

fn outcome(engine: &mut Engine<'_>, now: u64) -> Outcome {
    let plan = engine.schedule(now);
    let c = engine.cluster();
    let placed = plan.placements.iter().map(|(p, n)| (c.pod(*p).key.clone(), c.node(*n).name().to_string())).collect();
    let devices = c
        .claims
        .iter()
        .filter_map(|info| {
            let allocation = info.claim.status.as_ref()?.allocation.as_ref()?;
            let results = allocation.devices.as_ref()?.results.iter().flatten();
            let names = results.map(|r| format!("{}/{}", r.pool, r.device)).collect();
            Some((info.claim.metadata.name.clone().unwrap_or_default(), names))
        })
        .collect();
    (placed, devices)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn a_group_claim_taken_in_any_order_is_scheduled_as_one_built_at_once(
        node_gpus in prop::collection::vec(0u8..3, 1..4),
        cpus in prop::collection::vec(1u8..6, 1..5),
        min in 1u8..5,
        order in prop::collection::vec(any::<u32>(), 12),
    ) {
        let min = min.min(cpus.len() as u8);
        let (nodes, slices) = common::gpu_nodes(&node_gpus, "rack", "r");
        let classes = common::gpu_class();
        let ctx = common::dra(&slices, &classes);
        let members: Vec<Box<Pod>> = cpus.iter().enumerate().map(|(i, c)| member(i, *c)).collect();

        let mut at_once = Cluster::build(nodes.clone(), members.clone(), &[], &SchedulerNames::default()).unwrap();
        at_once.add_pod_groups(vec![group(min)]);
        at_once.add_claims(Vec::new(), &common::gpu_templates());
        let want = outcome(&mut Engine::new(at_once, SchedulerConfig::default(), Some(&ctx)), 0);

        let (claim, recorded) = controller_made(&group(min));
        let mut objects: Vec<Object> = members.into_iter().map(Object::Pod).collect();
        objects.push(Object::Group(Box::new(group(min))));
        objects.push(Object::Group(Box::new(recorded)));
        objects.push(Object::Claim(Box::new(claim)));
        let mut keyed: Vec<(u32, usize, Object)> =
            objects.into_iter().enumerate().map(|(i, o)| (order[i % order.len()], i, o)).collect();
        keyed.sort_by_key(|(k, i, _)| (*k, *i));
        // The group's status is written after the group is created.
        let first = keyed.iter().position(|(_, _, o)| matches!(o, Object::Group(g) if g.status.is_none())).unwrap();
        let second = keyed.iter().position(|(_, _, o)| matches!(o, Object::Group(g) if g.status.is_some())).unwrap();
        if second < first {
            keyed.swap(first, second);
        }
        let cluster = Cluster::build(nodes, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
        let mut engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
        for (_, _, o) in keyed {
            let change = match o {
                Object::Pod(p) => Change::UpsertPod(p),
                Object::Group(g) => Change::UpsertPodGroup(g),
                Object::Claim(c) => Change::UpsertClaim(c),
            };
            engine.apply(change, 0).unwrap();
        }
        prop_assert_eq!(outcome(&mut engine, 0), want);
    }
}
