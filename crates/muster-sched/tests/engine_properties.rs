//! The engine over random event sequences: pods placed by a cycle are assumed, then the world
//! confirms their binding or reports it failed (forget), CPU pods finish, nodes are cordoned and
//! return. After every step: no device is allocated twice, no gang is partly on nodes, nodes
//! count exactly the pods on them, and no claim stays allocated for a pod that holds no node.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_sched::{Change, Cluster, Engine, PodState, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::json;

mod common;

fn pod(name: &str, group: Option<&str>, gpus: u8, cpu: u8, priority: i32) -> Box<Pod> {
    let claims = if gpus > 0 {
        json!([{"name": "gpus", "resourceClaimTemplateName": format!("gpus-{gpus}")}])
    } else {
        json!([])
    };
    let mut spec = json!({"resourceClaims": claims, "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]});
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    Box::new(serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"}, "spec": spec})).unwrap())
}

fn cordon(i: usize, on: bool) -> Box<Node> {
    Box::new(
        serde_json::from_value(
            json!({"metadata": {"name": format!("n{i}"), "labels": {"rack": format!("r{}", i % 2)}},
            "spec": {"unschedulable": on},
            "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}}}),
        )
        .unwrap(),
    )
}

/// What must hold after every step. `broken`: gangs that lost a member to preemption (classic
/// preemption does not look at its victims' groups, and the default `disruptionMode: single`
/// lets a member go alone), which may be left partly on nodes.
fn check(c: &Cluster, broken: &HashSet<String>) -> Result<(), String> {
    let mut seen = HashSet::new();
    for claim in &c.claims {
        let status = claim.claim.status.as_ref();
        for r in status
            .iter()
            .flat_map(|s| s.allocation.iter())
            .flat_map(|a| a.devices.iter())
            .flat_map(|d| d.results.iter().flatten())
        {
            if !seen.insert((r.pool.clone(), r.device.clone())) {
                return Err(format!("{}/{} allocated twice", r.pool, r.device));
            }
        }
        let allocated = status.and_then(|s| s.allocation.as_ref()).is_some();
        let consumers = status.and_then(|s| s.reserved_for.as_ref()).map_or(0, Vec::len);
        if allocated && consumers == 0 {
            return Err(format!("claim {} allocated with no consumer", claim.key()));
        }
    }
    for p in &c.pods {
        // A pod bound to a node that was deleted still holds its claims (until the pod is gone).
        let holds = p.state.on_node().is_some() || matches!(p.state, PodState::BoundElsewhere(_));
        if !holds && p.state != PodState::Deleted {
            for i in p.claims.iter().flatten() {
                let reserved = c.claims[*i].claim.status.as_ref().and_then(|s| s.reserved_for.as_ref());
                if reserved.is_some_and(|r| r.iter().any(|r| Some(&r.name) == p.pod.meta().name.as_ref())) {
                    return Err(format!("{} holds no node but claim {} is reserved for it", p.key, c.claims[*i].key()));
                }
            }
        }
    }
    for g in &c.groups {
        let on = g
            .members
            .iter()
            .filter(|m| {
                let state = &c.pod(**m).state;
                state.on_node().is_some() || matches!(state, PodState::BoundElsewhere(_))
            })
            .count();
        if g.gang && on > 0 && on < g.min_count && !broken.contains(&g.key) {
            return Err(format!("{}: {on} members on nodes, minCount {}", g.key, g.min_count));
        }
    }
    let mut requested: HashMap<u32, i64> = HashMap::new();
    for p in c.pods.iter().filter(|p| p.state != PodState::Deleted) {
        if let Some(n) = p.state.on_node() {
            *requested.entry(n.0).or_default() += p.requests.iter().map(|(_, v)| *v).sum::<i64>();
        }
    }
    for (i, n) in c.nodes.iter().enumerate() {
        let want = requested.get(&(i as u32)).copied().unwrap_or(0);
        if n.requested.iter().sum::<i64>() + n.detail.scalar_requested.iter().sum::<i64>() != want {
            return Err(format!("{}: requested {:?}, its pods ask {want}", n.name(), n.requested));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    #[test]
    fn no_device_twice_and_no_partial_gang_across_bindings_failures_and_churn(
        node_gpus in prop::collection::vec(1u8..5, 1..4),
        // Gangs: members, minCount, GPUs per member.
        gangs in prop::collection::vec((1u8..4, 1u8..4, 0u8..3), 0..4),
        // Single pods: GPUs, cpu, priority (higher ones preempt lower running ones).
        singles in prop::collection::vec((0u8..3, 1u8..4, 0i32..3), 0..6),
        // Per step: fail bindings (one bit per placement), finish a CPU pod, cordon a node, and a
        // CPU pod (cpu, priority) that arrives — big ones preempt.
        steps in prop::collection::vec(
            (any::<u16>(), any::<u8>(), prop::option::of(0usize..8), prop::option::of((1u8..9, 0i32..3))),
            1..8,
        ),
    ) {
        run(node_gpus, gangs, singles, steps)?;
    }
}

/// Input of [`run`]'s steps: fail bindings (one bit per placement), finish a CPU pod, cordon a
/// node, and a CPU pod (cpu, priority) that arrives.
type Step = (u16, u8, Option<usize>, Option<(u8, i32)>);

fn run(
    node_gpus: Vec<u8>,
    gangs: Vec<(u8, u8, u8)>,
    singles: Vec<(u8, u8, i32)>,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    let (nodes, slices) = common::gpu_nodes(&node_gpus, "rack", "r");
    let (classes, templates) = (common::gpu_class(), common::gpu_templates());
    let mut pods = Vec::new();
    let mut groups: Vec<PodGroup> = Vec::new();
    for (g, (members, min, gpus)) in gangs.iter().enumerate() {
        let name = format!("g{g}");
        groups.push(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": (*min).min(*members)}}}}))
            .unwrap(),
        );
        for m in 0..*members {
            pods.push(pod(&format!("g{g}-{m}"), Some(&name), *gpus, 1, 0));
        }
    }
    for (i, (gpus, cpu, priority)) in singles.iter().enumerate() {
        pods.push(pod(&format!("s{i}"), None, *gpus, *cpu, *priority));
    }
    let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(groups);
    cluster.add_claims(Vec::new(), &templates);
    let ctx = common::dra(&slices, &classes);
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
    let mut cordoned = vec![false; node_gpus.len()];
    let mut broken: HashSet<String> = HashSet::new();
    for (step, (fail_bits, finish, cordon_node, arrival)) in steps.iter().enumerate() {
        let now = step as u64 * 20_000;
        if let Some((cpu, priority)) = arrival {
            engine.apply(Change::UpsertPod(pod(&format!("late-{step}"), None, 0, *cpu, *priority)), now).unwrap();
        }
        let plan = engine.schedule(now);
        // Preemption victims: their gangs may be left broken; the world deletes them.
        let victims: Vec<String> = plan
            .pod_preemptions
            .iter()
            .flat_map(|r| r.victims.iter())
            .chain(plan.preempted.iter().map(|(v, _)| v))
            .map(|v| engine.cluster().pod(*v).key.clone())
            .collect();
        for key in &victims {
            let id = engine.cluster().pod_id(key).unwrap();
            if let Some(Ok(g)) = engine.cluster().pod(id).group {
                broken.insert(engine.cluster().groups[g].key.clone());
            }
        }
        prop_assert!(
            check(engine.cluster(), &broken).is_ok(),
            "after scheduling: {:?}",
            check(engine.cluster(), &broken)
        );
        for key in victims {
            engine.apply(Change::DeletePod(key), now).unwrap();
        }
        // The world binds what was placed, or fails to: one bit per placement, one per gang
        // (a gang's members leave Permit together and are bound as one).
        let mut bit: HashMap<String, usize> = HashMap::new();
        for (k, (pod, node)) in plan.placements.iter().enumerate() {
            if !matches!(engine.cluster().pod(*pod).state, PodState::Assumed(_)) {
                continue; // forgotten with its gang already
            }
            let who = match engine.cluster().pod(*pod).group {
                Some(Ok(g)) => engine.cluster().groups[g].key.clone(),
                _ => engine.cluster().pod(*pod).key.clone(),
            };
            let next = bit.len();
            let b = *bit.entry(who).or_insert(next.max(k));
            if fail_bits >> (b % 16) & 1 == 1 {
                engine.forget(*pod, now);
            } else {
                let mut bound = Box::new(engine.cluster().pod(*pod).pod.object());
                bound.spec.as_mut().unwrap().node_name = Some(engine.cluster().node(*node).name().to_string());
                engine.apply(Change::UpsertPod(bound), now).unwrap();
            }
            prop_assert!(
                check(engine.cluster(), &broken).is_ok(),
                "after binding: {:?}",
                check(engine.cluster(), &broken)
            );
        }
        // A bound CPU-only pod outside gangs finishes.
        let done: Vec<String> = engine
            .cluster()
            .pods
            .iter()
            .filter(|p| matches!(p.state, PodState::Bound(_)) && p.claims.is_empty() && p.group.is_none())
            .map(|p| p.key.clone())
            .collect();
        if !done.is_empty() {
            let key = done[*finish as usize % done.len()].clone();
            engine.apply(Change::DeletePod(key), now).unwrap();
        }
        // 0..4: node n cordoned or back; 4..8: node n-4 deleted, or added again.
        match cordon_node {
            Some(n) if *n < node_gpus.len() => {
                cordoned[*n] = !cordoned[*n];
                engine.apply(Change::UpsertNode(cordon(*n, cordoned[*n])), now).unwrap();
            }
            Some(n) if (4..4 + node_gpus.len()).contains(n) => {
                let n = n - 4;
                if engine.cluster().node_id(&format!("n{n}")).is_some() {
                    engine.apply(Change::DeleteNode(format!("n{n}")), now).unwrap();
                } else {
                    engine.apply(Change::UpsertNode(cordon(n, cordoned[n])), now).unwrap();
                }
            }
            _ => {}
        }
        prop_assert!(check(engine.cluster(), &broken).is_ok(), "after churn: {:?}", check(engine.cluster(), &broken));
    }
    // Every pending pod is somewhere in the queue: each entry with pending pods is queued.
    let (active, backoff, unschedulable) = engine.queue().counts();
    let c = engine.cluster();
    let entries: HashSet<_> = (0..c.pods.len() as u32)
        .map(muster_sched::PodId)
        .filter(|p| c.pod(*p).state == PodState::Pending)
        .map(|p| c.entry_of(p))
        .collect();
    prop_assert!(
        active + backoff + unschedulable >= entries.len(),
        "{} entries with pending pods, {} queued",
        entries.len(),
        active + backoff + unschedulable
    );
    Ok(())
}

/// Found by the property above: a pod's kept verdict outlived its deletion (it was running, so no
/// queue entry forgot it), and an equivalence check then compared a pod with the vacant slot.
#[test]
fn a_deleted_pods_kept_verdict_serves_no_other_pod() {
    run(
        vec![3],
        vec![(1, 1, 0)],
        vec![(0, 1, 0), (1, 2, 1), (0, 1, 0)],
        vec![(56693, 0, None, Some((6, 2))), (9660, 0, None, Some((1, 2))), (1738, 49, None, None), (0, 0, None, None)],
    )
    .unwrap();
}
