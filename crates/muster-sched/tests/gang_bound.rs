//! The gang bound (a gang cycle the nodes' free resources and devices show hopeless fails without
//! trying members) never changes a decision: plans with and without it place the same pods on
//! the same nodes, preempt the same pods and give every group the same outcome. It fires when
//! minCount is out of reach, and stays out of the way of devices that serve several claims,
//! partitionable devices, requests for all devices, preemption, and clusters where Filter stops
//! early (the next start index must move as before). A gang cycle that would fail on the bound
//! as the last one did is only counted, and a kept reading never outlives a change it depends on
//! (while a preemption that changed nothing it read leaves it standing).
//! Classic preemption of pods outside groups, whose trials the bound may cut short, decides as
//! without it.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaimTemplate, ResourceSlice};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_sched::{Change, Cluster, Engine, GroupOutcome, Plan, PodState, Scheduler, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::{Value, json};

mod common;

/// The reason a gang cycle gives when the bound failed it.
const NOT_TRIED: &str = "no member was tried";

/// PodGroup `ml/<name>`: a gang of `min` (basic when 0) at `priority`.
fn group(name: &str, min: u32, priority: i32) -> PodGroup {
    let policy = if min == 0 { json!({"basic": {}}) } else { json!({"gang": {"minCount": min}}) };
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"schedulingPolicy": policy, "priority": priority}}))
    .unwrap()
}

/// Member `name` of `group`: `cpu` cores, and the claim template `template` (none when `None`).
fn member(name: &str, group: &str, template: Option<&str>, cpu: u32, priority: i32) -> Box<Pod> {
    let claims = template.map_or(json!([]), |t| json!([{"name": "gpus", "resourceClaimTemplateName": t}]));
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
            "spec": {"schedulingGroup": {"podGroupName": group}, "resourceClaims": claims, "priority": priority,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]}}))
        .unwrap(),
    )
}

/// A pod of priority 0 running on `node`, asking `cpu` cores.
fn running(name: &str, node: &str, cpu: u32) -> Box<Pod> {
    running_at(name, node, cpu, 0)
}

/// A pod of `priority` running on `node`, asking `cpu` cores.
fn running_at(name: &str, node: &str, cpu: u32, priority: i32) -> Box<Pod> {
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
            "spec": {"nodeName": node, "priority": priority,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]},
            "status": {"phase": "Running"}}))
        .unwrap(),
    )
}

/// Template `name` in `ml` with one request of class `gpu`: `exactly` as given.
fn template(name: &str, exactly: Value) -> ResourceClaimTemplate {
    let mut exactly = exactly;
    exactly["deviceClassName"] = json!("gpu");
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}))
    .unwrap()
}

/// The plan over these objects, with or without the bound.
fn plan(
    nodes: &[Node],
    slices: &[ResourceSlice],
    pods: &[Box<Pod>],
    groups: &[PodGroup],
    templates: &[ResourceClaimTemplate],
    bound: bool,
) -> (Plan, Cluster) {
    let mut cluster = Cluster::build(nodes.to_vec(), pods.to_vec(), &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(groups.to_vec());
    cluster.add_claims(Vec::new(), templates);
    let classes = common::gpu_class();
    let ctx = common::dra(slices, &classes);
    let s = Scheduler::with_dra(&mut cluster, SchedulerConfig::default(), &ctx);
    let mut s = if bound { s.with_gang_bound() } else { s };
    let plan = s.plan();
    (plan, cluster)
}

/// What must not differ: placements (in order, with nodes), victims, and each group's outcome.
type Decisions = (Vec<(u32, u32)>, Vec<u32>, Vec<(u32, GroupOutcome)>);

/// The decisions of a plan, and whether the bound failed some group cycle.
fn decisions(plan: &Plan) -> (Decisions, bool) {
    let placements = plan.placements.iter().map(|(p, n)| (p.0, n.0)).collect();
    let victims = plan.preempted.iter().map(|(p, _)| p.0).collect();
    let outcome = |o: &GroupOutcome| match *o {
        // The bound does not know how many members would have fitted before the rollback.
        GroupOutcome::Unschedulable { scheduled, .. } => {
            GroupOutcome::Unschedulable { placed: 0, scheduled, failed: 0 }
        }
        ref o => o.clone(),
    };
    let groups = plan.groups.iter().map(|r| (r.group.0, outcome(&r.outcome))).collect();
    let fired = plan.groups.iter().any(|r| r.message().contains(NOT_TRIED));
    ((placements, victims, groups), fired)
}

/// Both plans decide alike; returns the bounded plan and whether the bound fired.
fn same_both_ways(
    nodes: &[Node],
    slices: &[ResourceSlice],
    pods: &[Box<Pod>],
    groups: &[PodGroup],
    templates: &[ResourceClaimTemplate],
) -> (Plan, bool) {
    let (with, _) = plan(nodes, slices, pods, groups, templates, true);
    let (without, _) = plan(nodes, slices, pods, groups, templates, false);
    let ((a, fired), (b, _)) = (decisions(&with), decisions(&without));
    assert_eq!(a, b, "the bound changed a decision");
    (with, fired)
}

#[test]
fn fires_when_min_count_is_out_of_reach() {
    let (nodes, slices) = common::gpu_nodes(&[1, 1], "rack", "r");
    let pods: Vec<Box<Pod>> = (0..3).map(|m| member(&format!("g-{m}"), "g", Some("gpus-1"), 1, 0)).collect();
    let (plan, fired) = same_both_ways(&nodes, &slices, &pods, &[group("g", 3, 0)], &common::gpu_templates());
    assert!(fired);
    assert_eq!(
        plan.groups[0].message(),
        "podgroup ml/g cannot be placed together: at most 2 of its 3 pending pods fit the nodes' free resources and \
         devices, 0 already running, minCount 3; nothing was placed (no member was tried)"
    );
    assert_eq!(plan.unschedulable.len(), 3);
}

#[test]
fn devices_that_serve_several_claims_are_not_counted() {
    let slices = vec![common::node_slice(0, vec![json!({"name": "gpu-0", "allowMultipleAllocations": true})])];
    let (nodes, _) = common::gpu_nodes(&[1], "rack", "r");
    let pods: Vec<Box<Pod>> = (0..2).map(|m| member(&format!("g-{m}"), "g", Some("gpus-1"), 1, 0)).collect();
    let (plan, fired) = same_both_ways(&nodes, &slices, &pods, &[group("g", 2, 0)], &common::gpu_templates());
    assert!(!fired);
    assert!(matches!(plan.groups[0].outcome, GroupOutcome::Scheduled { placed: 2, .. }), "{:?}", plan.groups);
}

#[test]
fn a_claim_the_members_share_is_not_counted_per_member() {
    // One GPU, one claim for it that all three members name: they fit together on node-0.
    let (nodes, slices) = common::gpu_nodes(&[1], "rack", "r");
    let claim: k8s_openapi::api::resource::v1::ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "shared", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 1}}]}}}))
    .unwrap();
    let pods: Vec<Box<Pod>> = (0..3)
        .map(|m| {
            let mut pod = member(&format!("g-{m}"), "g", None, 1, 0);
            let claims = json!([{"name": "gpus", "resourceClaimName": "shared"}]);
            pod.spec.as_mut().unwrap().resource_claims = Some(serde_json::from_value(claims).unwrap());
            pod
        })
        .collect();
    let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(vec![group("g", 3, 0)]);
    cluster.add_claims(vec![claim], &[]);
    let classes = common::gpu_class();
    let ctx = common::dra(&slices, &classes);
    let plan = Scheduler::with_dra(&mut cluster, SchedulerConfig::default(), &ctx).with_gang_bound().plan();
    assert!(!plan.groups[0].message().contains(NOT_TRIED), "{}", plan.groups[0].message());
    assert!(matches!(plan.groups[0].outcome, GroupOutcome::Scheduled { placed: 3, .. }), "{:?}", plan.groups);
}

#[test]
fn partitionable_devices_are_counted_one_claim_each() {
    let partition = |name: &str| json!({"name": name, "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "1"}}}]});
    // One pool of two slices: the counters, and the partitions drawing on them.
    let slice = |name: &str, extra: Value| -> ResourceSlice {
        let mut spec = json!({"driver": "gpu.example.com", "nodeName": "n0",
            "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 2}});
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    let counters = json!({"sharedCounters": [{"name": "mem", "counters": {"memory": {"value": "2"}}}]});
    let devices = json!({"devices": [partition("p-0"), partition("p-1"), partition("p-2")]});
    let slices = vec![slice("n0-counters", counters), slice("n0-devices", devices)];
    let (nodes, _) = common::gpu_nodes(&[1], "rack", "r");
    let two: Vec<Box<Pod>> = (0..2).map(|m| member(&format!("g-{m}"), "g", Some("gpus-1"), 1, 0)).collect();
    let (plan, fired) = same_both_ways(&nodes, &slices, &two, &[group("g", 2, 0)], &common::gpu_templates());
    assert!(!fired, "{:?}", plan.groups);
    assert!(matches!(plan.groups[0].outcome, GroupOutcome::Scheduled { placed: 2, .. }), "{:?}", plan.groups);
    // Three partitions, counters for two: the bound counts three, the allocator finds two.
    let three: Vec<Box<Pod>> = (0..3).map(|m| member(&format!("g-{m}"), "g", Some("gpus-1"), 1, 0)).collect();
    let (plan, fired) = same_both_ways(&nodes, &slices, &three, &[group("g", 3, 0)], &common::gpu_templates());
    assert!(!fired, "{:?}", plan.groups);
    assert!(matches!(plan.groups[0].outcome, GroupOutcome::Unschedulable { .. }), "{:?}", plan.groups);
}

#[test]
fn a_request_for_all_devices_counts_as_none() {
    let (nodes, slices) = common::gpu_nodes(&[2, 3], "rack", "r");
    let templates = vec![template("all", json!({"allocationMode": "All"}))];
    let pods: Vec<Box<Pod>> = (0..2).map(|m| member(&format!("g-{m}"), "g", Some("all"), 1, 0)).collect();
    let (plan, fired) = same_both_ways(&nodes, &slices, &pods, &[group("g", 2, 0)], &templates);
    assert!(!fired);
    assert!(matches!(plan.groups[0].outcome, GroupOutcome::Scheduled { placed: 2, .. }), "{:?}", plan.groups);
}

#[test]
fn preemption_still_makes_room() {
    // Both nodes full of priority-0 pods: the bound fails the first cycle, preemption evicts them
    // and the group fits.
    let (nodes, slices) = common::gpu_nodes(&[1, 1], "rack", "r");
    let mut pods = vec![running("r-0", "n0", 8), running("r-1", "n1", 8)];
    pods.extend((0..2).map(|m| member(&format!("g-{m}"), "g", Some("gpus-1"), 4, 10)));
    let (plan, _) = same_both_ways(&nodes, &slices, &pods, &[group("g", 2, 10)], &common::gpu_templates());
    assert!(matches!(plan.groups[0].outcome, GroupOutcome::Scheduled { placed: 2, .. }), "{:?}", plan.groups);
    assert_eq!(plan.preempted.len(), 2);
}

#[test]
fn not_when_filter_would_stop_early() {
    // 150 nodes: Filter looks for 100 feasible ones, so a cycle with room on more nodes moves the
    // next start index even when it fails; the bound stays out, and later placements agree.
    let (nodes, slices) = common::gpu_nodes(&[1; 150], "rack", "r");
    let mut pods: Vec<Box<Pod>> =
        (0..160).map(|m| member(&format!("big-{m:03}"), "big", Some("gpus-1"), 1, 10)).collect();
    pods.extend((0..4).map(|m| member(&format!("small-{m}"), "small", Some("gpus-1"), 1, 0)));
    let groups = [group("big", 160, 10), group("small", 4, 0)];
    let (plan, fired) = same_both_ways(&nodes, &slices, &pods, &groups, &common::gpu_templates());
    assert!(!fired);
    assert_eq!(plan.placements.len(), 4);
}

/// A cluster's objects: nodes, their slices, pods and PodGroups.
type Objects = (Vec<Node>, Vec<ResourceSlice>, Vec<Box<Pod>>, Vec<PodGroup>);

/// Nodes with `gpus[i]` devices, each running a pod of `busy[i]` cores (0: none); gangs of
/// (members, minCount, GPUs per member (0: no claim), cores per member), even ones at priority 10.
fn random_objects(gpus: &[u8], busy: &[u8], gangs: &[(u8, u8, u8, u8)]) -> Objects {
    let (nodes, slices) = common::gpu_nodes(gpus, "rack", "r");
    let mut pods: Vec<Box<Pod>> = Vec::new();
    for (i, cpu) in busy.iter().enumerate().take(gpus.len()).filter(|(_, c)| **c > 0) {
        pods.push(running(&format!("run-{i}"), &format!("n{i}"), u32::from(*cpu)));
    }
    let mut groups = Vec::new();
    for (g, (members, min, per, cpu)) in gangs.iter().enumerate() {
        let priority = if g % 2 == 0 { 10 } else { 0 };
        groups.push(group(&format!("g{g}"), u32::from(*min), priority));
        let t = (*per > 0).then(|| format!("gpus-{per}"));
        for m in 0..*members {
            pods.push(member(&format!("g{g}-{m}"), &format!("g{g}"), t.as_deref(), u32::from(*cpu), priority));
        }
    }
    (nodes, slices, pods, groups)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_bound_changes_no_decision(
        gpus in prop::collection::vec(0u8..4, 1..6),
        busy in prop::collection::vec(0u8..9, 6),
        gangs in prop::collection::vec((1u8..6, 0u8..6, 0u8..3, 1u8..6), 1..6),
    ) {
        let (nodes, slices, pods, groups) = random_objects(&gpus, &busy, &gangs);
        let templates = common::gpu_templates();
        let (with, _) = plan(&nodes, &slices, &pods, &groups, &templates, true);
        let (without, _) = plan(&nodes, &slices, &pods, &groups, &templates, false);
        prop_assert_eq!(decisions(&with).0, decisions(&without).0);
    }
}

/// An engine over `objects` at steps 20 s apart: every placement is bound, then the bound pod
/// `finish[step]` picks (gang members included) finishes, releasing its node and devices; at
/// every third step a priority-0 pod of 1 core also comes, bound to the node the pick names
/// (preemption may find a victim where it found none). Each step's decisions.
fn engine_run(objects: &Objects, finish: &[u8], bound: bool) -> Vec<Decisions> {
    let (nodes, slices, pods, groups) = objects;
    let mut cluster = Cluster::build(nodes.clone(), pods.clone(), &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(groups.clone());
    cluster.add_claims(Vec::new(), &common::gpu_templates());
    let classes = common::gpu_class();
    let ctx = common::dra(slices, &classes);
    let engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
    let mut engine = if bound { engine.with_gang_bound() } else { engine };
    let mut out = Vec::new();
    // A cycle the plan only counts as repeated stands for the group's last result.
    let mut last: std::collections::BTreeMap<u32, GroupOutcome> = std::collections::BTreeMap::new();
    for (step, pick) in finish.iter().enumerate() {
        let now = step as u64 * 20_000;
        let plan = engine.schedule(now);
        let (placements, victims, mut groups) = decisions(&plan).0;
        last.extend(groups.iter().cloned());
        groups.extend(plan.repeated.groups.iter().map(|g| (g.0, last[&g.0].clone())));
        groups.sort_by_key(|(g, _)| *g);
        for (v, _) in &plan.preempted {
            let key = engine.cluster().pod(*v).key.clone();
            engine.apply(Change::DeletePod(key), now).unwrap();
        }
        for (pod, node) in &plan.placements {
            if !matches!(engine.cluster().pod(*pod).state, PodState::Assumed(_)) {
                continue;
            }
            // The input's pod, bound (not the store's copy: the world writes what it created).
            let key = &engine.cluster().pod(*pod).key;
            let mut bound =
                pods.iter().find(|p| format!("ml/{}", p.metadata.name.as_deref().unwrap()) == *key).unwrap().clone();
            bound.spec.as_mut().unwrap().node_name = Some(engine.cluster().node(*node).name().to_string());
            engine.apply(Change::UpsertPod(bound), now).unwrap();
        }
        let on_nodes: Vec<String> = engine
            .cluster()
            .pods
            .iter()
            .filter(|p| matches!(p.state, PodState::Bound(_)))
            .map(|p| p.key.clone())
            .collect();
        if !on_nodes.is_empty() {
            engine.apply(Change::DeletePod(on_nodes[*pick as usize % on_nodes.len()].clone()), now).unwrap();
        }
        if step % 3 == 2 {
            let node = format!("n{}", *pick as usize % nodes.len());
            engine.apply(Change::UpsertPod(running(&format!("low-{step}"), &node, 1)), now).unwrap();
        }
        out.push((placements, victims, groups));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    #[test]
    fn the_bound_changes_no_decision_over_releases(
        gpus in prop::collection::vec(0u8..4, 1..5),
        busy in prop::collection::vec(0u8..9, 5),
        gangs in prop::collection::vec((1u8..6, 1u8..6, 0u8..3, 1u8..6), 1..5),
        finish in prop::collection::vec(any::<u8>(), 1..8),
    ) {
        let objects = random_objects(&gpus, &busy, &gangs);
        prop_assert_eq!(engine_run(&objects, &finish, true), engine_run(&objects, &finish, false));
    }
}

/// An engine with the bound over nodes of 8 cores and no devices, running `pods`, with `groups`.
macro_rules! cpu_engine {
    ($engine:ident, $nodes:expr, $pods:expr, $groups:expr, $bound:expr) => {
        let (nodes, slices) = common::gpu_nodes(&[0; $nodes], "rack", "r");
        let mut cluster = Cluster::build(nodes, $pods, &[], &SchedulerNames::default()).unwrap();
        cluster.add_pod_groups($groups);
        let classes = common::gpu_class();
        let ctx = common::dra(&slices, &classes);
        let engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
        let mut $engine = if $bound { engine.with_gang_bound() } else { engine };
    };
}

#[test]
fn a_cycle_that_would_repeat_its_verdict_is_only_counted() {
    // n0 full; n1 has 3 free cores: no member of 4 cores fits anywhere.
    let pods = vec![running("r-0", "n0", 8), running("r-1", "n1", 3), running("r-2", "n1", 2), running("z", "n0", 0)];
    let members: Vec<Box<Pod>> = (0..3).map(|m| member(&format!("g-{m}"), "g", None, 4, 0)).collect();
    cpu_engine!(engine, 2, [pods, members].concat(), vec![group("g", 3, 0)], true);
    let first = engine.schedule(0);
    assert!(first.groups[0].message().contains("at most 0 of its 3 pending pods"), "{}", first.groups[0].message());
    // A pod that held no core leaves: the gang is tried again and would report the same.
    engine.apply(Change::DeletePod("ml/z".into()), 20_000).unwrap();
    let same = engine.schedule(20_000);
    assert!(same.groups.is_empty(), "{:?}", same.groups);
    assert_eq!((same.repeated.groups.len(), same.repeated.pods), (1, 3));
    // Two cores free on n1: one member fits now, and the verdict says so.
    engine.apply(Change::DeletePod("ml/r-2".into()), 40_000).unwrap();
    let more = engine.schedule(40_000);
    assert!(more.groups[0].message().contains("at most 1 of its 3 pending pods"), "{}", more.groups[0].message());
    assert!(more.repeated.groups.is_empty());
    // A fourth member: the kept reading is forgotten, the cycle reads the group afresh.
    engine.apply(Change::UpsertPod(member("g-3", "g", None, 4, 0)), 60_000).unwrap();
    let grown = engine.schedule(60_000);
    assert!(grown.groups[0].message().contains("at most 1 of its 4 pending pods"), "{}", grown.groups[0].message());
}

#[test]
fn a_lower_priority_pod_coming_to_a_node_ends_the_repeats() {
    // Both nodes full of pods at the gang's priority: nothing to preempt.
    let run = || vec![running_at("r-0", "n0", 8, 10), running_at("r-1", "n1", 8, 10), running_at("z", "n0", 0, 10)];
    let members = || -> Vec<Box<Pod>> { (0..2).map(|m| member(&format!("g-{m}"), "g", None, 4, 10)).collect() };
    for in_place in [false, true] {
        let mut outcomes = Vec::new();
        for bound in [true, false] {
            cpu_engine!(engine, 2, [run(), members()].concat(), vec![group("g", 2, 10)], bound);
            assert!(engine.schedule(0).placements.is_empty());
            if in_place {
                // r-1's priority lowered where it runs (no event names it), then a release elsewhere.
                engine.apply(Change::UpsertPod(running_at("r-1", "n1", 8, 0)), 20_000).unwrap();
                engine.apply(Change::DeletePod("ml/z".into()), 20_000).unwrap();
            } else {
                // r-1 leaves and a priority-0 pod takes its node, in one step: the room is as
                // before, but preemption now has a victim.
                engine.apply(Change::DeletePod("ml/r-1".into()), 20_000).unwrap();
                engine.apply(Change::UpsertPod(running_at("low", "n1", 8, 0)), 20_000).unwrap();
            }
            let plan = engine.schedule(20_000);
            assert!(plan.repeated.groups.is_empty());
            let key = |v: &muster_sched::PodId| engine.cluster().pod(*v).key.clone();
            outcomes.push((plan.placements.len(), plan.preempted.iter().map(|(v, _)| key(v)).collect::<Vec<_>>()));
        }
        let victim = if in_place { "ml/r-1" } else { "ml/low" };
        assert_eq!(outcomes[0], (2, vec![victim.to_string()]), "in place: {in_place}");
        assert_eq!(outcomes[0], outcomes[1]);
    }
}

#[test]
fn a_preemption_keeps_the_readings_it_did_not_change() {
    // Both nodes full, n0 of a priority-0 pod: gang g (priority 0, two members of 4 cores) waits
    // on the bound with nothing it could preempt.
    let pods = vec![running("low", "n0", 8), running_at("mid", "n1", 8, 10)];
    let members = || -> Vec<Box<Pod>> { (0..2).map(|m| member(&format!("g-{m}"), "g", None, 4, 0)).collect() };
    let mut outcomes = Vec::new();
    for bound in [true, false] {
        cpu_engine!(engine, 2, [pods.clone(), members()].concat(), vec![group("g", 2, 0)], bound);
        assert!(engine.schedule(0).placements.is_empty());
        // A pod of priority 100 preempts `low` and takes n0: g is woken in the same batch, and
        // finds the room it found before.
        engine.apply(Change::UpsertPod(single("hp", 0, 8, 100)), 20_000).unwrap();
        let plan = engine.schedule(20_000);
        let key = |v: &muster_sched::PodId| engine.cluster().pod(*v).key.clone();
        let victims: Vec<String> = plan.pod_preemptions.iter().flat_map(|p| p.victims.iter().map(key)).collect();
        assert_eq!(victims, ["ml/low"]);
        let placed: Vec<String> = plan.placements.iter().map(|(p, _)| key(p)).collect();
        assert_eq!(placed, ["ml/hp"]);
        if bound {
            // Its reading outlived the preemption (which touched none of what it read).
            assert_eq!(plan.repeated.groups.len(), 1, "{:?}", plan.groups);
            assert!(plan.groups.is_empty());
        } else {
            assert!(matches!(plan.groups[0].outcome, GroupOutcome::Unschedulable { .. }));
        }
        outcomes.push((placed, victims));
    }
    assert_eq!(outcomes[0], outcomes[1]);
}

/// A pod outside any group (uid `uid-<name>`): `cpu` cores, and the claim `<name>-gpus` when it
/// has GPUs.
fn single(name: &str, gpus: u8, cpu: u8, priority: i32) -> Box<Pod> {
    let claims = match gpus {
        0 => json!([]),
        _ => json!([{"name": "gpus", "resourceClaimName": format!("{name}-gpus")}]),
    };
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
            "spec": {"resourceClaims": claims, "priority": priority,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]}}))
        .unwrap(),
    )
}

/// Claim `<pod>-gpus` for `gpus` GPUs.
fn gpus_claim(pod: &str, gpus: u8) -> Box<k8s_openapi::api::resource::v1::ResourceClaim> {
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": format!("{pod}-gpus"), "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": gpus}}]}}}))
        .unwrap(),
    )
}

/// One step's placements (pod key, node index) and victims (pod keys).
type StepDecisions = (Vec<(String, u32)>, Vec<String>);

/// Pods outside groups arriving one a step (20 s apart; (GPUs, cores, priority 10 or 0)) on
/// nodes with `gpus[i]` devices; each step's effects carried out as a world would (victims
/// deleted, claims written, pods bound). Each step's placements (pod key, node) and victims.
fn singles_run(gpus: &[u8], arrivals: &[(u8, u8, bool)], bound: bool) -> Vec<StepDecisions> {
    use muster_sched::Effect;
    let (nodes, slices) = common::gpu_nodes(gpus, "rack", "r");
    let cluster = Cluster::build(nodes, Vec::<Box<Pod>>::new(), &[], &SchedulerNames::default()).unwrap();
    let classes = common::gpu_class();
    let ctx = common::dra(&slices, &classes);
    let engine = Engine::new(cluster, SchedulerConfig::default(), Some(&ctx));
    let mut engine = if bound { engine.with_gang_bound() } else { engine };
    let mut made = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (step, &(gpus, cpu, high)) in arrivals.iter().enumerate() {
        let (now, name) = (step as u64 * 20_000, format!("p{step:02}"));
        if gpus > 0 {
            engine.apply(Change::UpsertClaim(gpus_claim(&name, gpus)), now).unwrap();
        }
        let pod = single(&name, gpus, cpu, if high { 10 } else { 0 });
        made.insert(format!("ml/{name}"), pod.clone());
        engine.apply(Change::UpsertPod(pod), now).unwrap();
        let plan = engine.schedule(now);
        let key = |p: &muster_sched::PodId| engine.cluster().pod(*p).key.clone();
        let victims: Vec<String> = plan.pod_preemptions.iter().flat_map(|r| r.victims.iter().map(key)).collect();
        let placed: Vec<(String, u32)> = plan.placements.iter().map(|(p, n)| (key(p), n.0)).collect();
        for effect in engine.effects(&plan) {
            let c = engine.cluster();
            let change = match effect {
                Effect::Evict { pod, .. } => Change::DeletePod(c.pod(pod).key.clone()),
                Effect::WriteClaimStatus { claim } => Change::UpsertClaim(c.claims[claim].claim.clone()),
                Effect::Bind { pod, node } => {
                    let mut bound: Box<Pod> = made[&c.pod(pod).key].clone();
                    bound.spec.as_mut().unwrap().node_name = Some(c.node(node).name().to_string());
                    Change::UpsertPod(bound)
                }
                _ => continue,
            };
            engine.apply(change, now).unwrap();
        }
        out.push((placed, victims));
    }
    out
}

#[test]
fn classic_preemption_still_makes_room() {
    // n0's cores go to a priority-0 pod with one of its two GPUs; a priority-10 pod that wants
    // the other GPU and half the cores is rejected for its cores (a rejection preemption can
    // resolve): with the victim's cores and GPU free the trial fits, and it evicts. A pod that
    // wants more cores than the node has finds no candidate.
    let steps = [(1, 8, false), (1, 4, true), (0, 9, true)];
    let with = singles_run(&[2], &steps, true);
    assert_eq!(with, singles_run(&[2], &steps, false));
    assert_eq!(with[1], (vec![("ml/p01".to_string(), 0)], vec!["ml/p00".to_string()]));
    assert_eq!(with[2], (Vec::new(), Vec::new()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Classic preemption of pods outside groups decides alike with and without the bound (which
    /// ends a trial where no copy of the pod fits the node with its lower-priority pods gone).
    #[test]
    fn the_bound_changes_no_classic_preemption(
        gpus in prop::collection::vec(0u8..3, 1..4),
        arrivals in prop::collection::vec((0u8..3, 1u8..9, any::<bool>()), 1..10),
    ) {
        prop_assert_eq!(singles_run(&gpus, &arrivals, true), singles_run(&gpus, &arrivals, false));
    }
}
