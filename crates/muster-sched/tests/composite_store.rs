//! CompositePodGroup trees taken one object at a time (as a live world's watches deliver them, in
//! any order): the store links each PodGroup and CompositePodGroup to its parent whenever the
//! parent comes, and the tree is then scheduled exactly as when the cluster is built at once. A
//! deleted CompositePodGroup's children wait for it again (nothing of its tree is placed) and are
//! scheduled as before once it is back.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_sched::{Change, Cluster, Engine, SchedulerConfig, SchedulerNames};
use proptest::prelude::*;
use serde_json::json;

mod common;

/// A leaf PodGroup: (members, minCount, cpu per member).
type Leaf = (u8, u8, u8);

/// One tree `t`: the root (gang of `min` child groups, or basic when 0; in one `block` when
/// `block`), a middle CompositePodGroup holding the last leaf when `nested`.
struct Tree {
    min: u8,
    block: bool,
    nested: bool,
    leaves: Vec<Leaf>,
}

#[derive(Clone, Debug)]
enum Object {
    Pod(Box<Pod>),
    Group(Box<PodGroup>),
    Composite(Box<CompositePodGroup>),
}

fn nodes(count: usize) -> Vec<Node> {
    (0..count)
        .map(|i| {
            serde_json::from_value(
                json!({"metadata": {"name": format!("n{i}"), "labels": {"block": format!("b{}", i % 2)}},
                "status": {"allocatable": {"cpu": "6", "memory": "64Gi", "pods": "110"}}}),
            )
            .unwrap()
        })
        .collect()
}

fn objects(tree: &Tree) -> Vec<Object> {
    let mut out = vec![Object::Composite(Box::new(common::composite("t", None, tree.min, tree.block)))];
    if tree.nested {
        out.push(Object::Composite(Box::new(common::composite("t-mid", Some("t"), 1, false))));
    }
    for (l, (members, min_count, cpu)) in tree.leaves.iter().enumerate() {
        let parent = if tree.nested && l + 1 == tree.leaves.len() { "t-mid" } else { "t" };
        let name = format!("t-l{l}");
        out.push(Object::Group(Box::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
                "spec": {"workloadRef": {"workloadName": "w", "templateName": "t"},
                         "parentCompositePodGroupName": parent,
                         "schedulingPolicy": {"gang": {"minCount": min_count}}}}))
            .unwrap(),
        )));
        for m in 0..*members {
            out.push(Object::Pod(common::member(&format!("{name}-{m}"), &name, 0, u32::from(*cpu), None)));
        }
    }
    out
}

/// Pod → node of a plan.
fn placements(engine: &mut Engine<'_>, now: u64) -> BTreeMap<String, String> {
    let plan = engine.schedule(now);
    let c = engine.cluster();
    plan.placements.iter().map(|(p, n)| (c.pod(*p).key.clone(), c.node(*n).name().to_string())).collect()
}

fn at_once(node_count: usize, objects: &[Object]) -> BTreeMap<String, String> {
    let (mut pods, mut groups, mut trees) = (Vec::new(), Vec::new(), Vec::new());
    for o in objects.iter().cloned() {
        match o {
            Object::Pod(p) => pods.push(p),
            Object::Group(g) => groups.push(*g),
            Object::Composite(c) => trees.push(*c),
        }
    }
    let mut cluster = Cluster::build(nodes(node_count), pods, &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(groups);
    cluster.add_composite_pod_groups(trees);
    placements(&mut Engine::new(cluster, SchedulerConfig::default(), None), 0)
}

fn change(o: Object) -> Change {
    match o {
        Object::Pod(p) => Change::UpsertPod(p),
        Object::Group(g) => Change::UpsertPodGroup(g),
        Object::Composite(c) => Change::UpsertCompositePodGroup(c),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn a_tree_taken_in_any_order_is_scheduled_as_one_built_at_once(
        node_count in 1usize..5,
        (min, block, nested) in (0u8..3, prop::bool::ANY, prop::bool::ANY),
        leaves in prop::collection::vec((1u8..4, 1u8..4, 1u8..4), 1..4),
        order in prop::collection::vec(any::<u32>(), 40),
    ) {
        let tree = Tree { min, block, nested, leaves };
        let all = objects(&tree);
        let want = at_once(node_count, &all);
        let mut shuffled: Vec<(u32, Object)> = all.iter().cloned().enumerate().map(|(i, o)| (order[i % order.len()], o)).collect();
        shuffled.sort_by_key(|(k, _)| *k);
        let cluster = Cluster::build(nodes(node_count), Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
        let mut engine = Engine::new(cluster, SchedulerConfig::default(), None);
        for (_, o) in shuffled {
            engine.apply(change(o), 0).unwrap();
        }
        prop_assert_eq!(&placements(&mut engine, 0), &want);
    }

    #[test]
    fn a_deleted_root_holds_its_tree_until_it_is_back(
        node_count in 1usize..5,
        (min, nested) in (0u8..3, prop::bool::ANY),
        leaves in prop::collection::vec((1u8..4, 1u8..4, 1u8..3), 1..4),
    ) {
        let tree = Tree { min, block: false, nested, leaves };
        let all = objects(&tree);
        let want = at_once(node_count, &all);
        let cluster = Cluster::build(nodes(node_count), Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
        let mut engine = Engine::new(cluster, SchedulerConfig::default(), None);
        for o in all.iter().cloned() {
            engine.apply(change(o), 0).unwrap();
        }
        engine.apply(Change::DeleteCompositePodGroup("ml/t".into()), 0).unwrap();
        prop_assert!(placements(&mut engine, 0).is_empty(), "the tree waits for its root");
        engine.apply(change(all[0].clone()), 1_000).unwrap();
        prop_assert_eq!(&placements(&mut engine, 60_000), &want);
    }
}
