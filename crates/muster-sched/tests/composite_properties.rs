//! CompositePodGroup trees over random clusters: what never happens. A tree is placed with at
//! least minGroupCount child groups scheduled, each of them whole, inside one domain of its
//! topology key — or not at all, leaving no claim allocated; every pending pod is placed or
//! reported exactly once; no device is allocated twice; the allocator memo changes nothing.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use muster_sched::{Cluster, GroupOutcome, SchedulerNames};
use proptest::prelude::*;

mod common;
use serde_json::json;

/// A leaf PodGroup: (members, minCount, GPUs per member, cpu per member).
type Leaf = (u8, u8, u8, u8);
/// A tree: (minGroupCount (0 = basic), block topology on the root, leaves; the last leaf sits
/// under a middle CompositePodGroup when `nested`).
type Tree = (u8, bool, Vec<Leaf>, bool);

type Objects = (Vec<Node>, Vec<ResourceSlice>, Vec<Box<Pod>>, Vec<PodGroup>, Vec<CompositePodGroup>);

fn objects(node_gpus: &[u8], trees: &[Tree]) -> Objects {
    let (nodes, slices) = common::gpu_nodes(node_gpus, "block", "b");
    let (mut pods, mut pgs, mut cpgs) = (Vec::new(), Vec::new(), Vec::new());
    for (t, (min, block, leaves, nested)) in trees.iter().enumerate() {
        cpgs.push(common::composite(&format!("t{t}"), None, *min, *block));
        if *nested {
            cpgs.push(common::composite(&format!("t{t}-mid"), Some(&format!("t{t}")), 1, false));
        }
        for (l, (members, min_count, gpus, cpu)) in leaves.iter().enumerate() {
            let parent = if *nested && l + 1 == leaves.len() { format!("t{t}-mid") } else { format!("t{t}") };
            let name = format!("t{t}-l{l}");
            pgs.push(
                serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
                    "spec": {"workloadRef": {"workloadName": "w", "templateName": "t"},
                             "parentCompositePodGroupName": parent,
                             "schedulingPolicy": {"gang": {"minCount": min_count}}}}))
                .unwrap(),
            );
            for m in 0..*members {
                pods.push(common::member(&format!("{name}-{m}"), &name, *gpus, u32::from(*cpu), None));
            }
        }
    }
    (nodes, slices, pods, pgs, cpgs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    #[test]
    fn trees_are_all_or_nothing(
        node_gpus in prop::collection::vec(0u8..5, 1..6),
        trees in prop::collection::vec(
            (0u8..3, prop::bool::ANY, prop::collection::vec((1u8..4, 1u8..4, 0u8..3, 1u8..5), 1..4), prop::bool::ANY),
            1..4),
    ) {
        let (class, templates) = (common::gpu_class(), common::gpu_templates());
        let run = |memo: bool| {
            let (nodes, slices, pods, pgs, cpgs) = objects(&node_gpus, &trees);
            let mut cluster = Cluster::build(nodes, pods, &[], &SchedulerNames::default()).unwrap();
            cluster.add_pod_groups(pgs);
            cluster.add_composite_pod_groups(cpgs);
            cluster.add_claims(Vec::new(), &templates);
            let plan = common::plan_with_dra(&mut cluster, &slices, &class, memo);
            let mut problems = Vec::new();
            let placed: HashMap<u32, u32> = plan.placements.iter().map(|(p, n)| (p.0, n.0)).collect();
            // Every pending pod is placed or unschedulable, once.
            let mut seen = HashSet::new();
            for p in plan.placements.iter().map(|(p, _)| *p).chain(plan.unschedulable.iter().map(|(p, _)| p)) {
                if !seen.insert(p.0) {
                    problems.push(format!("{} reported twice", cluster.pod(p).key));
                }
            }
            if seen.len() != cluster.pods.len() {
                problems.push(format!("{} of {} pods reported", seen.len(), cluster.pods.len()));
            }
            for r in &plan.composites {
                let root = r.composite;
                let leaves = cluster.leaves(root);
                let tree_placed: Vec<u32> = leaves.iter()
                    .flat_map(|g| cluster.groups[*g].members.iter())
                    .filter_map(|m| placed.get(&m.0).copied()).collect();
                let (t, _) = cluster.composites[root].key.trim_start_matches("ml/t").split_at(1);
                let spec = &trees[t.parse::<usize>().unwrap()];
                match r.outcome {
                    GroupOutcome::Scheduled { placed: n, .. } => {
                        if n != tree_placed.len() || n == 0 {
                            problems.push(format!("t{t}: outcome {:?} with {} placed", r.outcome, tree_placed.len()));
                        }
                        // Each leaf is whole: none or at least minCount of its members.
                        let mut whole = 0;
                        for g in &leaves {
                            let info = &cluster.groups[*g];
                            let k = info.members.iter().filter(|m| placed.contains_key(&m.0)).count();
                            if k > 0 && k < info.min_count {
                                problems.push(format!("{}: {k} placed, minCount {}", info.key, info.min_count));
                            }
                            if k >= info.min_count && k > 0 {
                                whole += 1;
                            }
                        }
                        // minGroupCount counts the root's children; a nested middle group holds one leaf.
                        if spec.0 as usize > whole {
                            problems.push(format!("t{t}: {whole} whole child groups, minGroupCount {}", spec.0));
                        }
                        if spec.1 {
                            let blocks: HashSet<u32> = tree_placed.iter().map(|n| n % 2).collect();
                            if blocks.len() > 1 {
                                problems.push(format!("t{t}: placed across blocks"));
                            }
                        }
                    }
                    _ => {
                        if !tree_placed.is_empty() {
                            problems.push(format!("t{t}: not scheduled but {} pods placed", tree_placed.len()));
                        }
                        for g in &leaves {
                            for m in &cluster.groups[*g].members {
                                for c in cluster.pod(*m).claims.iter().flatten() {
                                    if cluster.claims[*c].claim.status.as_ref().and_then(|s| s.allocation.as_ref()).is_some() {
                                        problems.push(format!("t{t}: claim {} stayed allocated", cluster.claims[*c].key()));
                                    }
                                }
                            }
                        }
                    }
                }
            }
            let mut devices = HashSet::new();
            for c in &cluster.claims {
                for r in c.claim.status.iter().flat_map(|s| s.allocation.iter()).flat_map(|a| a.devices.iter()).flat_map(|d| d.results.iter().flatten()) {
                    if !devices.insert((r.pool.clone(), r.device.clone())) {
                        problems.push(format!("{}/{} allocated twice", r.pool, r.device));
                    }
                }
            }
            (problems, plan.placements.clone())
        };
        let (problems, with_memo) = run(true);
        prop_assert!(problems.is_empty(), "{}", problems.join("\n"));
        let (_, without_memo) = run(false);
        prop_assert_eq!(with_memo, without_memo);
    }
}

#[test]
fn parent_chains_with_a_cycle_or_a_missing_parent_are_reported() {
    use muster_sched::{GroupNode, TreeError};
    let cpg = |name: &str, parent: &str| -> CompositePodGroup {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
            "spec": {"workloadRef": {"workloadName": "w", "templateName": "t"}, "parentCompositePodGroupName": parent,
                     "schedulingPolicy": {"basic": {}}}}))
        .unwrap()
    };
    let pg = |name: &str, parent: &str| -> PodGroup {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"},
            "spec": {"parentCompositePodGroupName": parent, "schedulingPolicy": {"basic": {}}}}))
        .unwrap()
    };
    let mut cluster =
        Cluster::build(Vec::new(), Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
    cluster.add_pod_groups(vec![pg("in-cycle", "a"), pg("orphan", "gone")]);
    cluster.add_composite_pod_groups(vec![cpg("a", "b"), cpg("b", "a")]);
    let g = |name: &str| {
        muster_sched::GroupId(cluster.groups.iter().position(|g| g.key == format!("ml/{name}")).unwrap() as u32)
    };
    match cluster.root(GroupNode::Group(g("in-cycle"))) {
        Err(e @ TreeError::Cycle(_)) => {
            assert_eq!(e, TreeError::Cycle(["ml/in-cycle", "ml/a", "ml/b", "ml/a"].map(String::from).to_vec()));
            assert!(e.invalid());
            assert!(e.to_string().contains("cycle: ml/in-cycle, ml/a, ml/b, ml/a"), "{e}");
        }
        other => panic!("want a cycle, got {other:?}"),
    }
    match cluster.root(GroupNode::Group(g("orphan"))) {
        Err(e @ TreeError::MissingParent { .. }) => {
            assert!(!e.invalid());
            assert_eq!(
                e.to_string(),
                "ml/orphan waits for its parent compositepodgroup ml/gone, which is not in the input"
            );
        }
        other => panic!("want a missing parent, got {other:?}"),
    }
}
