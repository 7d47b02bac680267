//! The store: the same objects reached through any sequence of changes — drafts applied first,
//! objects deleted and added again, pods applied before the nodes they are bound to, objects
//! that come and go — give the same cluster and the same plan as building the final state at
//! once.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_sched::{Change, Cluster, PodState, Scheduler, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::json;

#[derive(Clone, Debug)]
struct NodeSpec {
    cpu: u32,
    zone: u8,
    cordoned: bool,
}

#[derive(Clone, Debug)]
struct PodSpec {
    cpu_m: u32,
    priority: i32,
    /// Bound to this node (an index into the nodes, which may not exist).
    node: Option<usize>,
    finished: bool,
    /// Names PodGroup `grp-<i>` (which may not exist).
    group: Option<usize>,
}

fn node(i: usize, s: &NodeSpec) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": format!("node-{i}"), "labels": {"topology.kubernetes.io/zone": format!("z{}", s.zone)}},
        "spec": {"unschedulable": s.cordoned},
        "status": {"allocatable": {"cpu": s.cpu.to_string(), "memory": "8Gi", "pods": "4"}}}))
    .unwrap()
}

fn pod(i: usize, s: &PodSpec) -> Box<Pod> {
    let mut spec = json!({"priority": s.priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": format!("{}m", s.cpu_m)}}}]});
    if let Some(n) = s.node {
        spec["nodeName"] = json!(format!("node-{n}"));
    }
    if let Some(g) = s.group {
        spec["schedulingGroup"] = json!({"podGroupName": format!("grp-{g}")});
    }
    let phase = if s.finished {
        "Succeeded"
    } else if s.node.is_some() {
        "Running"
    } else {
        "Pending"
    };
    Box::new(
        serde_json::from_value(json!({"metadata": {"name": format!("pod-{i}"), "namespace": "s"},
            "spec": spec, "status": {"phase": phase}}))
        .unwrap(),
    )
}

/// PodGroup `grp-<i>`: a gang of `min_count`, or the basic policy when 0.
fn group(i: usize, min_count: u8) -> PodGroup {
    let policy = if min_count == 0 { json!({"basic": {}}) } else { json!({"gang": {"minCount": min_count}}) };
    serde_json::from_value(json!({"metadata": {"name": format!("grp-{i}"), "namespace": "s"},
        "spec": {"schedulingPolicy": policy}}))
    .unwrap()
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (1u32..5, 0u8..3, prop::bool::weighted(0.2)).prop_map(|(cpu, zone, cordoned)| NodeSpec { cpu, zone, cordoned })
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        100u32..3000,
        -1i32..2,
        prop::option::weighted(0.4, 0usize..5),
        prop::bool::weighted(0.1),
        prop::option::weighted(0.3, 0usize..3),
    )
        .prop_map(|(cpu_m, priority, node, finished, group)| PodSpec { cpu_m, priority, node, finished, group })
}

/// One step of a history: which object (nodes first, then pods), and what happens to it.
#[derive(Clone, Debug)]
enum Step {
    /// Apply a draft version of the object (replaced later by its final version).
    Draft(usize, u8),
    /// Delete the object (added again later, when it is in the final state).
    Delete(usize),
}

/// What a cluster looks like from outside: nodes by name (allocatable and requested cpu, pods,
/// cordoned), the node order, and each pod's state with node names.
fn observe(c: &Cluster) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut nodes: Vec<String> = c
        .nodes
        .iter()
        .filter(|n| !n.detail.removed)
        .map(|n| {
            format!(
                "{} cpu {}/{} pods {} cordoned {}",
                n.name(),
                n.requested[0],
                n.allocatable[0],
                n.num_pods,
                n.unschedulable
            )
        })
        .collect();
    nodes.sort();
    let order = c.node_order.iter().map(|n| c.node(*n).name().to_string()).collect();
    let mut pods: Vec<String> = c
        .pods
        .iter()
        .filter(|p| p.state != PodState::Deleted)
        .map(|p| {
            let state = match &p.state {
                PodState::Bound(n) => format!("bound {}", c.node(*n).name()),
                other => format!("{other:?}"),
            };
            format!("{} {state} prio {} req {:?}", p.key, p.priority, p.requests)
        })
        .collect();
    // Each group's members, by name (a group gone from the store has none).
    for g in &c.groups {
        let members: Vec<&str> = g.members.iter().map(|m| c.pod(*m).key.as_str()).collect();
        if !members.is_empty() {
            pods.push(format!("{}: {members:?}", g.key));
        }
    }
    pods.sort();
    (nodes, order, pods)
}

/// (pod, node) or (pod, message), by name.
type Named = Vec<(String, String)>;

/// A plan as names: placements in order, and unschedulable pods with their messages.
fn plan_names(c: &mut Cluster) -> (Named, Named) {
    let plan = Scheduler::new(&mut *c, SchedulerConfig::default()).plan();
    let placed = plan.placements.iter().map(|(p, n)| (c.pod(*p).key.clone(), c.node(*n).name().to_string())).collect();
    let mut failed: Vec<(String, String)> =
        plan.unschedulable.iter().map(|(p, e)| (c.pod(p).key.clone(), e.message())).collect();
    failed.sort();
    (placed, failed)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_history_of_changes_gives_the_store_and_plan_of_the_final_state(
        nodes in prop::collection::vec(node_spec(), 0..5),
        pods in prop::collection::vec(pod_spec(), 0..10),
        drafts in prop::collection::vec((0usize..15, 0u8..4, any::<bool>()), 0..12),
        ghosts in prop::collection::vec(pod_spec(), 0..3),
        // PodGroups grp-0..: minCount (0 = basic), and whether the history deletes it once first.
        groups in prop::collection::vec((0u8..3, any::<bool>()), 0..3),
        order_seed in any::<u64>(),
    ) {
        let names = SchedulerNames::default();
        let final_nodes: Vec<Node> = nodes.iter().enumerate().map(|(i, s)| node(i, s)).collect();
        let final_pods: Vec<Box<Pod>> = pods.iter().enumerate().map(|(i, s)| pod(i, s)).collect();
        let final_groups: Vec<PodGroup> = groups.iter().enumerate().map(|(i, (min, _))| group(i, *min)).collect();
        let mut at_once = Cluster::build(final_nodes.clone(), final_pods.clone(), &[], &names).unwrap();
        at_once.add_pod_groups(final_groups.clone());

        // A history: drafts and deletions of the final objects, ghost pods that come and go, then
        // each final object, in an order mixed by the seed.
        let objects = nodes.len() + pods.len();
        let mut history: Vec<Change> = Vec::new();
        for (i, g) in ghosts.iter().enumerate() {
            let mut p = pod(100 + i, g);
            p.metadata.name = Some(format!("ghost-{i}"));
            history.push(Change::UpsertPod(p));
        }
        for (target, variant, delete) in &drafts {
            if objects == 0 {
                break;
            }
            let step = if *delete { Step::Delete(target % objects) } else { Step::Draft(target % objects, *variant) };
            history.push(match step {
                Step::Draft(i, v) if i < nodes.len() => {
                    let s = NodeSpec { cpu: nodes[i].cpu + u32::from(v), zone: v % 3, cordoned: v % 2 == 0 };
                    Change::UpsertNode(Box::new(node(i, &s)))
                }
                Step::Draft(i, v) => {
                    let p = &pods[i - nodes.len()];
                    let s = PodSpec { cpu_m: p.cpu_m + 50 * u32::from(v), priority: i32::from(v), node: p.node.filter(|_| v % 2 == 0), finished: v == 3, group: p.group };
                    Change::UpsertPod(pod(i - nodes.len(), &s))
                }
                Step::Delete(i) if i < nodes.len() => Change::DeleteNode(format!("node-{i}")),
                Step::Delete(i) => Change::DeletePod(format!("s/pod-{}", i - nodes.len())),
            });
        }
        // Mix the drafts (keeping each object's drafts before its final version, which follow).
        let mut x = order_seed | 1;
        for i in (1..history.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            history.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for i in 0..ghosts.len() {
            history.push(Change::DeletePod(format!("s/ghost-{i}")));
        }
        for (i, (min, delete)) in groups.iter().enumerate() {
            if *delete {
                history.push(Change::UpsertPodGroup(Box::new(group(i, (min + 1) % 3))));
                history.push(Change::DeletePodGroup(format!("s/grp-{i}")));
            }
        }
        let mut finals: Vec<Change> = final_nodes.into_iter().map(|n| Change::UpsertNode(Box::new(n)))
            .chain(final_pods.into_iter().map(Change::UpsertPod))
            .chain(final_groups.into_iter().map(|g| Change::UpsertPodGroup(Box::new(g)))).collect();
        for i in (1..finals.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            finals.swap(i, (x % (i as u64 + 1)) as usize);
        }
        history.extend(finals);

        let mut one_by_one = Cluster::build(Vec::new(), Vec::<muster_sched::StoredPod>::new(), &[], &names).unwrap();
        for change in history {
            one_by_one.apply(change).unwrap();
        }
        // Pods of one spec share it; a spec goes when its last pod does.
        let (specs, unheld) = one_by_one.shared_specs();
        prop_assert_eq!(unheld, 0);
        prop_assert!(specs <= pods.len(), "{} specs for {} pods", specs, pods.len());
        prop_assert_eq!(observe(&one_by_one), observe(&at_once));
        prop_assert_eq!(plan_names(&mut one_by_one), plan_names(&mut at_once));
    }
}
