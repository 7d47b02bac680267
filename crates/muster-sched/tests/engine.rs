//! The engine, one change at a time: stories a live cluster tells.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use muster_sched::effects::{PodEvent, Pods};
use muster_sched::{Change, Cluster, Effect, Engine, PodState, SchedulerConfig, SchedulerNames};
use serde_json::json;

mod common;

fn claim(name: &str, allocated_to: Option<(&str, &str)>) -> Box<ResourceClaim> {
    let mut c = json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}});
    if let Some((pod, device)) = allocated_to {
        c["status"] = json!({
            "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n0", "device": device}]}},
            "reservedFor": [{"resource": "pods", "name": pod, "uid": format!("uid-{pod}")}]});
    }
    Box::new(serde_json::from_value(c).unwrap())
}

fn pod(name: &str, claim: &str, node: Option<&str>) -> Box<Pod> {
    let mut p = json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}], "containers": [{"name": "c"}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
        p["status"] = json!({"phase": "Running"});
    }
    Box::new(serde_json::from_value(p).unwrap())
}

/// One node `n0` with `gpus` devices, and the DRA inputs for it.
fn one_node(gpus: u8) -> (Cluster, Vec<k8s_openapi::api::resource::v1::ResourceSlice>) {
    let (nodes, slices) = common::gpu_nodes(&[gpus], "rack", "r");
    (Cluster::build(nodes, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap(), slices)
}

/// A pod arrives before the claim it names: it waits, saying which claim it misses, and is placed
/// once the claim arrives (woken by the claim's arrival and, with nothing else to do, tried at once
/// though its backoff is not over: `SchedulerPopFromBackoffQ`).
#[test]
fn a_pod_whose_claim_arrives_later_waits_for_it_then_runs() {
    let (cluster, slices) = one_node(2);
    let classes = common::gpu_class();
    let ctx = common::dra(&slices, &classes);
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
    engine.apply(Change::UpsertPod(pod("trainer", "trainer-gpu", None)), 0).unwrap();
    let first = engine.schedule(0);
    assert!(first.placements.is_empty());
    assert_eq!(
        first.unschedulable.get(0).unwrap().1.message(),
        "0/1 nodes are available: resourceclaim \"trainer-gpu\" not found."
    );
    assert_eq!(engine.queue().counts(), (0, 0, 1), "waiting in the unschedulable pool");
    let pod = first.unschedulable.get(0).unwrap().0;
    let message = "0/1 nodes are available: resourceclaim \"trainer-gpu\" not found.".to_string();
    assert_eq!(
        engine.effects(&first),
        [Effect::PodsUnschedulable { pods: Pods::One(pod), reason: "Unschedulable", message: message.into() }]
    );

    engine.apply(Change::UpsertClaim(claim("trainer-gpu", None)), 500).unwrap();
    assert_eq!(engine.queue().counts(), (0, 1, 0), "woken into its 1 s backoff");
    let second = engine.schedule(500);
    let c = engine.cluster();
    let placed: Vec<(&str, &str)> =
        second.placements.iter().map(|(p, n)| (c.pod(*p).key.as_str(), c.node(*n).name())).collect();
    assert_eq!(placed, [("ml/trainer", "n0")]);
    let (pod, node) = second.placements[0];
    let claim = muster_sched::ClaimId(c.claims.iter().position(|x| x.key() == "ml/trainer-gpu").unwrap() as u32);
    assert_eq!(
        engine.effects(&second),
        [
            Effect::WriteClaimStatus { claim },
            Effect::Bind { pod, node },
            Effect::Event { pod, event: PodEvent::Scheduled { node } },
        ]
    );
    let event = PodEvent::Scheduled { node };
    assert_eq!(&*event.note(engine.cluster(), pod), "Successfully assigned ml/trainer to n0");
    let c = engine.cluster();
    let status = c.claims.iter().find(|x| x.key() == "ml/trainer-gpu").unwrap().claim.status.as_ref().unwrap();
    assert_eq!(status.reserved_for.as_ref().unwrap()[0].name, "trainer");
}

/// A running pod holds the node's only GPU; a second pod waits. When the first finishes and the
/// claim controller deallocates its claim, the second pod gets the GPU.
#[test]
fn a_deallocated_claim_gives_its_device_to_a_waiting_pod() {
    let (nodes, slices) = common::gpu_nodes(&[1], "rack", "r");
    let classes = common::gpu_class();
    let pods = vec![pod("first", "first-gpu", Some("n0")), pod("second", "second-gpu", None)];
    let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    cluster.add_claims(vec![*claim("first-gpu", Some(("first", "gpu-0"))), *claim("second-gpu", None)], &[]);
    let ctx = common::dra(&slices, &classes);
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
    let first = engine.schedule(0);
    assert_eq!(first.unschedulable.len(), 1);
    assert_eq!(
        first.unschedulable.get(0).unwrap().1.message(),
        "0/1 nodes are available: 1 cannot allocate all claims."
    );

    // The pod finishes; then the claim controller clears the reservation and the allocation.
    engine.apply(Change::DeletePod("ml/first".into()), 5_000).unwrap();
    assert!(engine.schedule(5_000).placements.is_empty(), "the claim still holds the device");
    engine.apply(Change::UpsertClaim(claim("first-gpu", None)), 6_000).unwrap();
    let second = engine.schedule(6_000);
    let c = engine.cluster();
    assert_eq!(second.placements.len(), 1);
    let (p, _) = second.placements[0];
    assert_eq!(c.pod(p).key, "ml/second");
    assert!(matches!(c.pod(p).state, PodState::Assumed(_)));
    let status = c.claims.iter().find(|x| x.key() == "ml/second-gpu").unwrap().claim.status.as_ref().unwrap();
    let device = &status.allocation.as_ref().unwrap().devices.as_ref().unwrap().results.as_ref().unwrap()[0].device;
    assert_eq!(device, "gpu-0");
}

/// A gang whose pods come one by one, the first before its PodGroup: nothing runs until
/// `minCount` pods exist, then all of them are placed in one cycle.
#[test]
fn a_gang_arriving_pod_by_pod_is_placed_whole_once_min_count_pods_exist() {
    let nodes = (0..2)
        .map(|i| {
            serde_json::from_value(json!({"metadata": {"name": format!("n{i}")},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}))
            .unwrap()
        })
        .collect();
    let cluster =
        Cluster::build(nodes, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), None);
    let member = |i: usize| -> Box<Pod> {
        Box::new(
            serde_json::from_value(json!({"metadata": {"name": format!("train-{i}"), "namespace": "ml"},
                "spec": {"schedulingGroup": {"podGroupName": "train"},
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}))
            .unwrap(),
        )
    };
    engine.apply(Change::UpsertPod(member(0)), 0).unwrap();
    let alone = engine.schedule(0);
    assert_eq!(alone.unschedulable.len(), 1);
    assert!(
        alone.unschedulable.get(0).unwrap().1.message().contains("podgroup \"ml/train\" not found"),
        "{}",
        alone.unschedulable.get(0).unwrap().1.message()
    );

    let group = serde_json::from_value(json!({"metadata": {"name": "train", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}))
    .unwrap();
    engine.apply(Change::UpsertPodGroup(Box::new(group)), 1_000).unwrap();
    let mut now = 1_000;
    for i in 1..3 {
        let plan = engine.schedule(now);
        assert!(plan.placements.is_empty(), "{i} of 3 pods: the gang waits");
        assert!(matches!(
            plan.groups[..],
            [] | [muster_sched::GroupResult { outcome: muster_sched::GroupOutcome::Waiting { .. }, .. }]
        ));
        now += 20_000;
        engine.apply(Change::UpsertPod(member(i)), now).unwrap();
    }
    let plan = engine.schedule(now);
    assert_eq!(plan.placements.len(), 3, "{:?}", plan.groups);
    assert!(matches!(plan.groups[0].outcome, muster_sched::GroupOutcome::Scheduled { placed: 3, .. }));
}

/// A PodDisruptionBudget added with no status counts the pods it covers now; a deleted one is
/// gone.
#[test]
fn budgets_come_and_go() {
    let node = serde_json::from_value(json!({"metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}))
    .unwrap();
    let web = |i: usize| -> Box<Pod> {
        Box::new(
            serde_json::from_value(
                json!({"metadata": {"name": format!("web-{i}"), "namespace": "ml", "labels": {"app": "web"}},
                "spec": {"nodeName": "n0", "containers": [{"name": "c"}]}, "status": {"phase": "Running"}}),
            )
            .unwrap(),
        )
    };
    let cluster = Cluster::build(vec![node], vec![web(0), web(1), web(2)], &[], &SchedulerNames::default()).unwrap();
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), None);
    let budget = serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ml"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}))
    .unwrap();
    engine.apply(Change::UpsertPodDisruptionBudget(Box::new(budget)), 0).unwrap();
    let b = &engine.cluster().budgets;
    assert_eq!((b.len(), b[0].key.as_str(), b[0].disruptions_allowed), (1, "ml/web", 1));
    engine.apply(Change::DeletePodDisruptionBudget("ml/web".into()), 0).unwrap();
    assert!(engine.cluster().budgets.is_empty());
}

/// A node goes away while a pod is assumed onto it: the pod is forgotten (its device given back)
/// and placed on another node after its backoff (an error's: waited out, to the end of its window).
#[test]
fn a_pod_assumed_onto_a_deleted_node_is_placed_elsewhere() {
    let (nodes, slices) = common::gpu_nodes(&[1, 1], "rack", "r");
    let classes = common::gpu_class();
    let mut cluster =
        Cluster::build(nodes, vec![pod("trainer", "trainer-gpu", None)], &[], &SchedulerNames::default()).unwrap();
    cluster.add_claims(vec![*claim("trainer-gpu", None)], &[]);
    let ctx = common::dra(&slices, &classes);
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
    let first = engine.schedule(0);
    let (p, n) = first.placements[0];
    let gone = engine.cluster().node(n).name().to_string();
    engine.apply(Change::DeleteNode(gone.clone()), 100).unwrap();
    let c = engine.cluster();
    assert_eq!(c.pod(p).state, PodState::Pending);
    let status = c.claims.iter().find(|x| x.key() == "ml/trainer-gpu").unwrap().claim.status.as_ref();
    assert!(status.is_none_or(|s| s.allocation.is_none()), "the device was given back");
    assert!(engine.schedule(100).placements.is_empty(), "backing off");
    assert_eq!(engine.next_wakeup(), Some(2_000), "1 s from 100 ms, to the end of that second's window");
    let second = engine.schedule(2_000);
    let c = engine.cluster();
    let placed: Vec<&str> = second.placements.iter().map(|(_, n)| c.node(*n).name()).collect();
    assert_eq!(placed.len(), 1);
    assert_ne!(placed[0], gone);
}

/// PriorityClasses are resolved when a pod comes, as admission does: a new global default gives
/// later pods its value; deleting it leaves the pods the store has as they are.
#[test]
fn priority_classes_apply_to_pods_that_come_later() {
    let cluster =
        Cluster::build(Vec::new(), Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), None);
    let plain = |name: &str, class: Option<&str>| -> Box<Pod> {
        let mut spec = json!({"containers": [{"name": "c"}]});
        if let Some(c) = class {
            spec["priorityClassName"] = json!(c);
        }
        Box::new(serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"}, "spec": spec})).unwrap())
    };
    let class =
        serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 1000, "globalDefault": true})).unwrap();
    engine.apply(Change::UpsertPriorityClass(Box::new(class)), 0).unwrap();
    engine.apply(Change::UpsertPod(plain("a", None)), 0).unwrap();
    engine.apply(Change::DeletePriorityClass("high".into()), 0).unwrap();
    engine.apply(Change::UpsertPod(plain("b", None)), 0).unwrap();
    let c = engine.cluster();
    let priority = |key: &str| c.pod(c.pod_id(key).unwrap()).priority;
    assert_eq!((priority("ml/a"), priority("ml/b")), (1000, 0));
    let refused = engine.apply(Change::UpsertPod(plain("c", Some("high"))), 0).unwrap_err();
    assert_eq!(refused.message, "PriorityClass \"high\" not found");
}

/// A pending pod's own `PodScheduled=False` condition, written after a failed attempt, comes back
/// through the store without moving it out of the unschedulable pool (as upstream's
/// `isPodUpdated` ignores status); a change to what the scheduler reads (a label) does, into
/// backoff.
#[test]
fn a_status_only_update_leaves_an_unschedulable_pod_waiting() {
    let (cluster, _) = one_node(0);
    let mut engine = Engine::new(cluster, SchedulerConfig::default(), None);
    let mut big: Pod = serde_json::from_value(json!({"metadata": {"name": "big", "namespace": "ml", "uid": "u"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "64"}}}]}}))
    .unwrap();
    engine.apply(Change::UpsertPod(Box::new(big.clone())), 0).unwrap();
    assert_eq!(engine.schedule(0).unschedulable.len(), 1);
    assert_eq!(engine.queue().counts(), (0, 0, 1));
    big.status = Some(
        serde_json::from_value(
            json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}),
        )
        .unwrap(),
    );
    big.metadata.resource_version = Some("7".into());
    engine.apply(Change::UpsertPod(Box::new(big.clone())), 10).unwrap();
    assert_eq!(engine.queue().counts(), (0, 0, 1), "still waiting");
    big.metadata.labels = Some([("tier".to_string(), "batch".to_string())].into());
    engine.apply(Change::UpsertPod(Box::new(big)), 20).unwrap();
    assert_eq!(engine.queue().counts(), (0, 1, 0), "a real change: tried again after its backoff");
}

/// A pod of `cpu` cores at `priority`, on `node` (running) or pending.
fn cpu_pod(name: &str, cpu: u32, priority: i32, node: Option<&str>) -> Box<Pod> {
    let mut p = json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"priority": priority, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
        p["status"] = json!({"phase": "Running"});
    }
    Box::new(serde_json::from_value(p).unwrap())
}

/// The engine keeps the lowest priority of a bound pod between batches (preemption's quick
/// "nothing to preempt"): a lower-priority pod coming to a node, or a running pod's priority
/// lowered in place, must let a waiting pod preempt it.
#[test]
fn a_waiting_pod_preempts_a_lower_priority_pod_that_came_after_it_failed() {
    for lowered_in_place in [false, true] {
        let (nodes, _) = common::gpu_nodes(&[0, 0], "rack", "r");
        let cluster =
            Cluster::build(nodes, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
        let mut engine = Engine::new(cluster, SchedulerConfig::default(), None);
        engine.apply(Change::UpsertPod(cpu_pod("a", 8, 5, Some("n0"))), 0).unwrap();
        engine.apply(Change::UpsertPod(cpu_pod("b", 8, 5, Some("n1"))), 0).unwrap();
        engine.apply(Change::UpsertPod(cpu_pod("z", 0, 5, Some("n0"))), 0).unwrap();
        engine.apply(Change::UpsertPod(cpu_pod("p", 8, 5, None)), 0).unwrap();
        // Nothing below priority 5 runs: p waits.
        assert!(engine.schedule(0).placements.is_empty());
        if lowered_in_place {
            engine.apply(Change::UpsertPod(cpu_pod("b", 8, 0, Some("n1"))), 10_000).unwrap();
        } else {
            engine.apply(Change::DeletePod("ml/b".into()), 10_000).unwrap();
            engine.apply(Change::UpsertPod(cpu_pod("low", 8, 0, Some("n1"))), 10_000).unwrap();
        }
        // A release elsewhere wakes p: it preempts the priority-0 pod on n1.
        engine.apply(Change::DeletePod("ml/z".into()), 20_000).unwrap();
        let plan = engine.schedule(20_000);
        let victim = if lowered_in_place { "ml/b" } else { "ml/low" };
        let victims: Vec<&str> = plan
            .pod_preemptions
            .iter()
            .flat_map(|p| &p.victims)
            .map(|v| engine.cluster().pod(*v).key.as_str())
            .collect();
        assert_eq!(victims, [victim], "lowered in place: {lowered_in_place}");
    }
}

/// A world that binds a copy of the store's pod (`Change::UpsertStoredPod`, the simulator's
/// way) leaves the engine as one that sends the whole object back bound (a watch's way): the pod
/// bound where it was assumed, the same object, the same queue, the same next decisions.
#[test]
fn a_bound_copy_of_the_stored_pod_confirms_the_assumption_as_the_whole_object_does() {
    let classes = common::gpu_class();
    let (_, slices) = common::gpu_nodes(&[2], "rack", "r");
    let ctx = common::dra(&slices, &classes);
    let run = |stored: bool| {
        let (cluster, _) = one_node(2);
        let mut engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
        for (name, claim_name) in [("a", "a-gpu"), ("b", "b-gpu")] {
            engine.apply(Change::UpsertClaim(claim(claim_name, None)), 0).unwrap();
            engine.apply(Change::UpsertPod(pod(name, claim_name, None)), 0).unwrap();
        }
        let plan = engine.schedule(0);
        assert_eq!(plan.placements.len(), 2);
        for &(p, n) in &plan.placements {
            let c = engine.cluster();
            let node = c.node(n).name().to_string();
            let change = if stored {
                let mut copy = Box::new(c.pod(p).pod.clone());
                copy.set_node_name(Some(node));
                copy.ensure_status().phase = Some("Running".into());
                Change::UpsertStoredPod(copy)
            } else {
                let mut whole = Box::new(c.pod(p).pod.object());
                whole.spec.as_mut().unwrap().node_name = Some(node);
                whole.status.get_or_insert_with(Default::default).phase = Some("Running".into());
                Change::UpsertPod(whole)
            };
            engine.apply(change, 100).unwrap();
            assert!(matches!(engine.cluster().pod(p).state, PodState::Bound(m) if m == n));
        }
        engine.apply(Change::UpsertClaim(claim("c-gpu", None)), 200).unwrap();
        engine.apply(Change::UpsertPod(pod("c", "c-gpu", None)), 200).unwrap();
        let next = engine.schedule(200);
        let c = engine.cluster();
        let objects: Vec<Pod> = ["ml/a", "ml/b"].iter().map(|k| c.pod(c.pod_id(k).unwrap()).pod.object()).collect();
        let verdicts: Vec<String> = next.unschedulable.runs().map(|(_, e)| e.message()).collect();
        (objects, verdicts, engine.queue().counts(), engine.effects(&next))
    };
    let (whole, copy) = (run(false), run(true));
    assert_eq!(whole.1, ["0/1 nodes are available: 1 cannot allocate all claims."]);
    assert_eq!(whole, copy);
}
