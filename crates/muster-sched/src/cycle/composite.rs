//! CompositePodGroups (KEP 6012, alpha): a tree of groups scheduled as one queue entry.
//!
//! A CompositePodGroup's children are PodGroups and CompositePodGroups naming it in
//! `spec.parentCompositePodGroupName`; pods still join only their leaf PodGroup. The tree is
//! scheduled top-down through the placement algorithm: a CompositePodGroup with a topology key
//! tries each domain (inside its parent's placement), runs its children one after another inside
//! it — a PodGroup with the group algorithm of [`Scheduler::place_group`], a CompositePodGroup
//! recursively — and is feasible when at least `minGroupCount` children are scheduled (1 for the
//! basic policy). There is no backtracking between children; when a subtree fails, every Reserve
//! it made is undone in reverse order, and when the root fails nothing stays reserved.

use super::*;
use std::sync::Arc;

use super::reasons::{GroupReason, InvalidTree, Preemption, TreeReason};
use crate::cluster::GroupNode;

/// A CompositePodGroup cycle's result: its `CompositePodGroupInitiallyScheduled` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompositeResult {
    /// Index into `Cluster::composites` (the tree's root).
    pub composite: CompositeId,
    /// Pods placed / already running in the whole tree; `Waiting` counts the child groups that
    /// have their pods.
    pub outcome: GroupOutcome,
    /// True when the tree's layout is bad (the condition's reason `Invalid`).
    pub invalid: bool,
    /// The reason, as the condition's message says it (shared with the leaves' results).
    pub reason: Arc<TreeReason>,
    /// What workload-aware preemption did or why it could not help; `None` when not needed.
    pub preemption: Option<Preemption>,
}

impl CompositeResult {
    /// The reason rendered: the condition's message.
    pub fn message(&self) -> String {
        self.reason.to_string()
    }
}

/// What placing a tree (or a subtree) did so far.
#[derive(Default)]
struct TreePlacement {
    placed: Vec<(PodId, NodeId)>,
    failed: UnschedulablePods,
    undo: Vec<Reserved>,
    /// One result per PodGroup tried.
    leaves: Vec<GroupResult>,
}

/// Lengths of a [`TreePlacement`]'s lists: where to roll back to.
type Mark = (usize, usize, usize, usize);

impl TreePlacement {
    fn mark(&self) -> Mark {
        (self.placed.len(), self.failed.len(), self.undo.len(), self.leaves.len())
    }
}

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// One cycle for the tree under the root CompositePodGroup `root`: validate it, wait until
    /// enough child groups have their pods (GangScheduling's PreEnqueue), then place it. Every
    /// pending pod of the tree ends up placed or unschedulable with a reason.
    pub fn schedule_composite(&mut self, root: CompositeId, plan: &mut Plan) {
        let c = &*self.cluster;
        let info = &c.composites[root];
        let (key, min) = (info.key.clone(), info.min_group_count);
        let leaves = c.leaves(root);
        let (mut pending, mut scheduled) = (Vec::new(), 0);
        for g in &leaves {
            let m = self.members(*g);
            pending.extend(m.pending);
            scheduled += m.scheduled;
        }
        // A bad layout is the tree's error (reason Invalid): several Workloads, a leaf too deep.
        let workloads = c.tree_workloads(root);
        let mut invalid =
            (workloads.len() > 1).then(|| InvalidTree::SeveralWorkloads(workloads.iter().cloned().collect()));
        for g in &leaves {
            if let Err(e) = c.root(GroupNode::Group(*g))
                && e.invalid()
            {
                invalid.get_or_insert(InvalidTree::Layout(e));
            }
        }
        if let Some(error) = invalid {
            let reason = TreeReason::Invalid { tree: key, error };
            self.fail_tree(root, plan, GroupOutcome::SchedulerError, true, reason);
            return;
        }
        // Alpha restriction: one priority for the whole tree, the root's.
        let what = || format!("compositepodgroup {key}");
        let mut mismatch =
            super::priority_mismatch(c, &c.composites[root].priority, what, &pending).map(TreeReason::Priority);
        if let (None, Ok(p)) = (&mismatch, &c.composites[root].priority) {
            let odd: Vec<String> = leaves
                .iter()
                .map(|g| &c.groups[*g])
                .filter(|g| g.priority.as_ref() != Ok(p))
                .map(|g| match &g.priority {
                    Ok(q) => format!("podgroup {} has {q}", g.key),
                    Err(e) => format!("podgroup {}: {e}", g.key),
                })
                .collect();
            if !odd.is_empty() {
                mismatch = Some(TreeReason::GroupPriorities { tree: key.clone(), priority: *p, odd });
            }
        }
        if let Some(reason) = mismatch {
            self.fail_tree(root, plan, GroupOutcome::SchedulerError, false, reason);
            return;
        }
        let ready = self.ready_children(root);
        if ready < min {
            let reason = TreeReason::WaitsForChildren { tree: key, ready, min };
            self.fail_tree(root, plan, GroupOutcome::Waiting { exist: ready }, false, reason);
            return;
        }

        let mut out = TreePlacement::default();
        let result = match self.place_composite(root, None, &mut out) {
            Ok(()) if out.placed.is_empty() => Err(TreeReason::NothingPlaced { tree: key.clone(), running: scheduled }),
            r => r,
        };
        let (mut victims, mut against) = (Vec::new(), Vec::new());
        if let Err(reason) = result {
            self.roll_back_to(&mut out, (0, 0, 0, 0));
            // Workload-aware preemption with the whole tree as the preemptor.
            let c = &*self.cluster;
            let members: Vec<PodId> = leaves.iter().flat_map(|g| c.groups[*g].members.iter().copied()).collect();
            let never = self.tree_never_preempts(root, &leaves, &pending);
            let place = |s: &mut Self| {
                let mut t = TreePlacement::default();
                match s.place_composite(root, None, &mut t) {
                    Ok(()) if !t.placed.is_empty() => Some(t),
                    _ => {
                        s.roll_back_to(&mut t, (0, 0, 0, 0));
                        None
                    }
                }
            };
            // Leaves keep their domains: the tree moves only as a whole.
            let preemptor = Preemptor { members: &members, pending: &pending, never, movable: false };
            match self.preempt(preemptor, place, |t: &mut TreePlacement| (&mut t.placed, &mut t.undo)) {
                Ok(p) => {
                    out = p.placement;
                    victims = p.victims;
                    against = p.against_budgets;
                }
                Err(why_not) => {
                    let outcome = GroupOutcome::Unschedulable { placed: 0, scheduled, failed: pending.len() };
                    self.fail_tree(root, plan, outcome, false, reason);
                    if let Some(last) = plan.composites.last_mut() {
                        last.preemption = Some(Preemption::WouldNotHelp(why_not));
                    }
                    return;
                }
            }
        }
        let placed = out.placed.len();
        let victims_named = self.victims(&victims, &against);
        let preemption = victims_named.clone().map(Preemption::Preempted);
        let reason = TreeReason::Scheduled { tree: key, placed, running: scheduled, victims: victims_named };
        plan.composites.push(CompositeResult {
            composite: root,
            outcome: GroupOutcome::Scheduled { placed, scheduled },
            invalid: false,
            reason: Arc::new(reason),
            preemption,
        });
        plan.preempted.extend(victims.into_iter().map(|v| (v, GroupNode::Composite(root))));
        plan.groups.append(&mut out.leaves);
        plan.placements.append(&mut out.placed);
        plan.unschedulable.append(&mut out.failed);
    }

    /// The whole tree fails: every pending pod and every PodGroup with pending pods carries
    /// `tree_reason`.
    fn fail_tree(
        &self,
        root: CompositeId,
        plan: &mut Plan,
        outcome: GroupOutcome,
        invalid: bool,
        tree_reason: TreeReason,
    ) {
        let num_nodes = self.cluster.node_order.len();
        let tree_reason = Arc::new(tree_reason);
        let reason = Arc::new(GroupReason::Tree(tree_reason.clone()));
        for g in self.cluster.leaves(root) {
            let m = self.members(g);
            if m.pending.is_empty() {
                continue;
            }
            let outcome = match outcome {
                GroupOutcome::Waiting { .. } => GroupOutcome::Waiting { exist: m.exist },
                GroupOutcome::SchedulerError => GroupOutcome::SchedulerError,
                _ => GroupOutcome::Unschedulable { placed: 0, scheduled: m.scheduled, failed: m.pending.len() },
            };
            let result = GroupResult { group: g, outcome, reason: reason.clone(), preemption: None };
            plan.unschedulable.append(&mut result.member_errors(&m.pending, num_nodes));
            plan.groups.push(result);
        }
        plan.composites.push(CompositeResult {
            composite: root,
            outcome,
            invalid,
            reason: tree_reason,
            preemption: None,
        });
    }

    /// True when any group of the tree, or a pending pod, has `preemptionPolicy: Never`.
    fn tree_never_preempts(&self, root: CompositeId, leaves: &[GroupId], pending: &[PodId]) -> bool {
        let c = &*self.cluster;
        let mut stack = vec![root];
        while let Some(k) = stack.pop() {
            let spec = &c.composites[k].composite.spec;
            if c.never_preempts(spec.preemption_policy.as_deref(), spec.priority_class_name.as_deref()) {
                return true;
            }
            stack.extend(c.composites[k].children.iter().filter_map(|n| match n {
                GroupNode::Composite(x) => Some(*x),
                GroupNode::Group(_) => None,
            }));
        }
        leaves.iter().any(|g| self.never_preempts(*g, pending))
    }

    /// Child groups of `composite` that have their pods: a gang PodGroup with at least minCount
    /// pods, a basic one with a pod, a CompositePodGroup with enough such children.
    fn ready_children(&self, composite: CompositeId) -> usize {
        let c = &*self.cluster;
        c.composites[composite]
            .children
            .iter()
            .filter(|child| match **child {
                GroupNode::Group(g) => {
                    let m = self.members(g);
                    m.exist >= if c.groups[g].gang { c.groups[g].min_count } else { 1 }
                }
                GroupNode::Composite(k) => self.ready_children(k) >= c.composites[k].min_group_count,
            })
            .count()
    }

    /// Places the subtree under `ci` inside `within`, in the best domain of its topology key when
    /// it has one. On failure everything it reserved is rolled back and its pending pods carry
    /// the reason.
    fn place_composite(
        &mut self,
        ci: CompositeId,
        within: Option<&[bool]>,
        out: &mut TreePlacement,
    ) -> Result<(), TreeReason> {
        let info = &self.cluster.composites[ci];
        let topology = info.topology_key.clone();
        let key = info.key.clone();
        let mark = out.mark();
        let result = match topology {
            None => self.run_children(ci, within, out).map_err(|m| TreeReason::In { tree: key, inner: Box::new(m) }),
            Some(tkey) => self.place_composite_in_domain(ci, &tkey, within, out),
        };
        if let Err(reason) = &result {
            self.roll_back_to(out, mark);
            self.fail_subtree(ci, reason, out);
        }
        result
    }

    /// The placement algorithm for a CompositePodGroup with a topology key: each domain is tried
    /// and rolled back, feasible ones scored as PodGroup domains are, and the winner kept.
    fn place_composite_in_domain(
        &mut self,
        ci: CompositeId,
        tkey: &str,
        within: Option<&[bool]>,
        out: &mut TreePlacement,
    ) -> Result<(), TreeReason> {
        let c = &*self.cluster;
        let key = c.composites[ci].key.clone();
        let members: Vec<PodId> = c.leaves(ci).iter().flat_map(|g| c.groups[*g].members.iter().copied()).collect();
        let running = members.iter().filter(|m| c.pod(**m).state.on_node().is_some()).count();
        let domains =
            self.domains(tkey, within, &members).map_err(|error| TreeReason::Domains { tree: key.clone(), error })?;
        let winner = if domains.len() == 1 {
            0
        } else {
            let mut feasible: Vec<super::group::Feasible> = Vec::new();
            let mut tried: Vec<(String, TreeReason)> = Vec::new();
            for (di, (value, nodes)) in domains.iter().enumerate() {
                let mask = self.mask(nodes);
                let mut trial = TreePlacement::default();
                match self.run_children(ci, Some(&mask), &mut trial) {
                    Ok(()) => feasible.push((di, self.most_allocated(nodes), running + trial.placed.len(), 0)),
                    Err(m) if tried.len() < 5 => tried.push((value.clone(), m)),
                    Err(_) => {}
                }
                self.roll_back_to(&mut trial, (0, 0, 0, 0));
            }
            if feasible.is_empty() {
                let (tkey_owned, total) = (tkey.to_string(), domains.len());
                return Err(TreeReason::NoDomain { tree: key.clone(), key: tkey_owned, tried, total });
            }
            best_domain(&feasible, &self.config.placement_weights)
        };
        let mask = self.mask(&domains[winner].1);
        let value = domains[winner].0.clone();
        self.run_children(ci, Some(&mask), out).map_err(|m| TreeReason::InDomain {
            tree: key,
            key: tkey.to_string(),
            value,
            inner: Box::new(m),
        })
    }

    /// The children of `ci`, one after another inside `within`; enough of them must be
    /// scheduled (placed now, or already running). The error says how many were and why the
    /// others were not.
    fn run_children(
        &mut self,
        ci: CompositeId,
        within: Option<&[bool]>,
        out: &mut TreePlacement,
    ) -> Result<(), TreeReason> {
        let info = &self.cluster.composites[ci];
        let (min, gang, children) = (info.min_group_count, info.gang, info.children.clone());
        let mut ok = 0;
        let mut failed: Vec<TreeReason> = Vec::new();
        let mut tried = 0;
        for (i, child) in children.iter().enumerate() {
            tried += 1;
            let r = match *child {
                GroupNode::Group(g) => self.place_leaf(g, within, out),
                GroupNode::Composite(k) => self.place_composite(k, within, out),
            };
            match r {
                Ok(()) => ok += 1,
                Err(m) => failed.push(m),
            }
            // PlacementFeasible: stop once minGroupCount is out of reach.
            if ok + children.len() - i - 1 < min {
                break;
            }
        }
        if ok >= min {
            return Ok(());
        }
        // The counts add up to the children: those that can be scheduled, those that cannot, and
        // those never tried once minGroupCount was out of reach.
        let (total, untried) = (children.len(), children.len() - tried);
        Err(TreeReason::Children { ok, total, untried, min: gang.then_some(min), failed })
    }

    /// One PodGroup of a tree, inside `within`. It counts as scheduled when placed now or when
    /// minCount of its pods already run.
    fn place_leaf(&mut self, g: GroupId, within: Option<&[bool]>, out: &mut TreePlacement) -> Result<(), TreeReason> {
        let Members { members, pending, exist, scheduled } = self.members(g);
        let info = &self.cluster.groups[g];
        let (min, gang, key) = (info.min_count, info.gang, info.key.clone());
        let num_nodes = self.cluster.node_order.len();
        if gang && exist < min {
            let waits = TreeReason::LeafWaits { group: key, exist, min };
            let reason = GroupReason::Tree(Arc::new(waits.clone()));
            let result = GroupResult::new(g, GroupOutcome::Waiting { exist }, reason);
            out.failed.push_shared(&pending, FitError::group(num_nodes, result.reason.clone()));
            out.leaves.push(result);
            return Err(waits);
        }
        if pending.is_empty() {
            return if scheduled >= min {
                Ok(())
            } else {
                Err(TreeReason::LeafNonePending { group: key, running: scheduled, min })
            };
        }
        let topology_key = info.topology_key.clone();
        let device_topology = info.device_topology.clone().and_then(Result::ok);
        let attempt = GroupAttempt {
            members: &members,
            pending: &pending,
            topology: super::device_domains::Topology {
                label: topology_key.as_deref(),
                device: device_topology.as_ref(),
            },
            scheduled,
            min,
            gang,
            within,
        };
        match self.place_group(&attempt) {
            Ok((placed, failed, undo)) => {
                let outcome = GroupOutcome::Scheduled { placed: placed.len(), scheduled };
                let reason =
                    GroupReason::Scheduled { group: key, placed: placed.len(), running: scheduled, min, victims: None };
                out.leaves.push(GroupResult::new(g, outcome, reason));
                out.placed.extend(placed);
                out.failed.extend(failed);
                out.undo.extend(undo);
                Ok(())
            }
            Err(failure) => {
                let (result, mut failed) = self.group_failure(g, &pending, failure, scheduled);
                let reason = TreeReason::Leaf(result.reason.clone());
                out.leaves.push(result);
                out.failed.append(&mut failed);
                if scheduled >= min { Ok(()) } else { Err(reason) }
            }
        }
    }

    /// Every pending pod of the subtree under `ci` fails with `why`.
    fn fail_subtree(&self, ci: CompositeId, why: &TreeReason, out: &mut TreePlacement) {
        let num_nodes = self.cluster.node_order.len();
        let reason = Arc::new(GroupReason::Tree(Arc::new(why.clone())));
        for g in self.cluster.leaves(ci) {
            let m = self.members(g);
            if m.pending.is_empty() {
                continue;
            }
            let outcome = GroupOutcome::Unschedulable { placed: 0, scheduled: m.scheduled, failed: m.pending.len() };
            let result = GroupResult { group: g, outcome, reason: reason.clone(), preemption: None };
            out.failed.append(&mut result.member_errors(&m.pending, num_nodes));
            out.leaves.push(result);
        }
    }

    /// Undoes what `out` recorded after `mark`, Reserves last first.
    fn roll_back_to(&mut self, out: &mut TreePlacement, mark: Mark) {
        let undo: Vec<Reserved> = out.undo.drain(mark.2..).collect();
        for r in undo.into_iter().rev() {
            self.unreserve(r);
        }
        out.placed.truncate(mark.0);
        out.failed.truncate(mark.1);
        out.leaves.truncate(mark.3);
    }
}
