//! `muster why TARGET PATH...`: why a pod or a PodGroup goes where the plan puts it, or nowhere.
//!
//! The plan is the one `muster plan` makes (same flags). The verdict comes from that plan; the
//! explanation is worked out on the snapshot as it stood when the target's attempt ran: the queue
//! is replayed up to (not including) the target's entry, and for a member of a PodGroup the
//! members its group's cycle tried before it are reserved too. Every node then gets its first
//! failing Filter, in upstream's order, and nodes that pass the node Filters get DynamicResources'
//! verdict with the device accounting of every claim (`muster_alloc::explain`).

use std::fmt::Write as _;
use std::process::ExitCode;

use muster_alloc::explain::{ClaimExplanation, ConstraintExplanation, DeviceStatus, RequestExplanation, Wanted};
use muster_controllers::eviction::{DeviceKey, taint_text};
use muster_sched::explain::{NodeVerdict, PodExplanation, explain_pod_configured};
use muster_sched::{
    Cluster, CompositeId, DraContext, FitError, GroupId, GroupNode, GroupOutcome, NodeId, Plan, PodId, PodState,
    QueueEntry, Scheduler, SchedulerConfig, SchedulerNames,
};
use serde_json::{Value, json};

use crate::memory::{self, World};
use crate::{DevicesFormat, WhyArgs};

/// What classic preemption (DefaultPreemption) did for a pod outside PodGroups.
fn pod_preemption(plan: &Plan, c: &Cluster, pod: PodId) -> String {
    match plan.pod_preemptions.iter().find(|r| r.pod == pod) {
        Some(r) => {
            let names: Vec<&str> = r.victims.iter().map(|v| c.pod(*v).key.as_str()).collect();
            let against = if r.against_budgets.is_empty() {
                String::new()
            } else {
                format!(", against PodDisruptionBudget {}", r.against_budgets.join(", "))
            };
            format!("preempted {} lower-priority pod(s): {}{against}", names.len(), names.join(", "))
        }
        None if plan.placements.iter().any(|(p, _)| *p == pod) => "not needed".to_string(),
        None if {
            let s = c.pod(pod).pod.spec();
            c.never_preempts(
                s.and_then(|s| s.preemption_policy.as_deref()),
                s.and_then(|s| s.priority_class_name.as_deref()),
            )
        } =>
        {
            "not attempted: the pod's preemptionPolicy is Never".to_string()
        }
        None => "would not help: no node where evicting lower-priority pods makes room (nodes whose \
                 rejection preemption cannot resolve — taints, affinity, DynamicResources — are not candidates)"
            .to_string(),
    }
}

/// What workload-aware preemption did for a group's cycle.
fn group_preemption(plan: &Plan, g: GroupId) -> String {
    match plan.groups.iter().find(|r| r.group == g).and_then(|r| r.preemption.as_ref()) {
        Some(p) => p.to_string(),
        None => "not needed".to_string(),
    }
}

enum Target {
    Pod(String),
    Group(String),
    Composite(String),
}

fn parse_target(t: &str) -> Option<Target> {
    let mut parts = t.splitn(3, '/');
    let (kind, a, b) = (parts.next()?, parts.next()?, parts.next());
    let key = match b {
        Some(name) if !a.is_empty() && !name.is_empty() && !name.contains('/') => format!("{a}/{name}"),
        None if !a.is_empty() => format!("default/{a}"),
        _ => return None,
    };
    match kind {
        "pod" | "pods" | "po" => Some(Target::Pod(key)),
        "podgroup" | "podgroups" => Some(Target::Group(key)),
        "compositepodgroup" | "compositepodgroups" => Some(Target::Composite(key)),
        _ => None,
    }
}

/// Edit distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Up to five names closest to `key`.
fn near<'a>(key: &str, names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = names.map(|n| (distance(key, n), n)).collect();
    scored.sort();
    scored.into_iter().take(5).map(|(_, n)| n).collect()
}

pub fn run(args: WhyArgs) -> anyhow::Result<ExitCode> {
    let Some(target) = parse_target(&args.target) else {
        eprintln!(
            "error: bad target {:?}: expected pod/NAMESPACE/NAME, podgroup/NAMESPACE/NAME or compositepodgroup/NAMESPACE/NAME",
            args.target
        );
        return Ok(ExitCode::from(2));
    };
    let (mut config, mut names) = crate::config::from_flags(args.config.as_deref(), args.scoring)?;
    config.reprieve_search = args.reprieve_search;
    if let Some(p) = args.percentage_of_nodes_to_score {
        config.percentage_of_nodes_to_score = p;
    }
    if !args.scheduler_names.is_empty() {
        names = args.scheduler_names.clone();
    }
    let names = if names.is_empty() { SchedulerNames::default() } else { SchedulerNames(names) };
    let options = memory::Options { health_propagation: !args.no_health_propagation };
    let loaded = crate::source::load(&args.paths, args.kubeconfig.as_deref())
        .and_then(|m| World::from_manifests_with(m, &names, options));
    let world = match loaded {
        Ok(w) => w,
        Err(diags) => return Ok(crate::refuse(&diags, "")),
    };
    let c = &world.cluster;
    let found = match &target {
        Target::Pod(key) => c.pods.iter().position(|p| p.key == *key).map(|i| Found::Pod(PodId(i as u32))),
        Target::Group(key) => c.groups.iter().position(|g| g.key == *key).map(|i| Found::Group(GroupId(i as u32))),
        Target::Composite(key) => {
            c.composites.iter().position(|g| g.key == *key).map(|i| Found::Composite(CompositeId(i as u32)))
        }
    };
    let Some(found) = found else {
        let (kind, key, candidates): (&str, &str, Vec<&str>) = match &target {
            Target::Pod(k) => ("pod", k, near(k, c.pods.iter().map(|p| p.key.as_str()))),
            Target::Group(k) => ("podgroup", k, near(k, c.groups.iter().map(|g| g.key.as_str()))),
            Target::Composite(k) => ("compositepodgroup", k, near(k, c.composites.iter().map(|g| g.key.as_str()))),
        };
        eprintln!("error: {kind} {key} is not in the input");
        if candidates.is_empty() {
            eprintln!("  the input has no {kind}s");
        } else {
            eprintln!(
                "  near names: {}",
                candidates.iter().map(|n| format!("{kind}/{n}")).collect::<Vec<_>>().join(", ")
            );
        }
        return Ok(ExitCode::from(2));
    };
    let why = Why { world: &world, config, budget: muster_cel::Budget::new(crate::devices::command_budget()) };
    let mut report = match found {
        Found::Pod(p) => why.pod(p),
        Found::Group(g) => why.group(g),
        Found::Composite(t) => why.composite(t),
    };
    if let Found::Pod(p) = found {
        note_created(&mut report, &world, &c.pod(p).key);
    }
    match args.output {
        DevicesFormat::Table => print!("{}", report.text),
        DevicesFormat::Json => println!("{}", serde_json::to_string_pretty(&report.json)?),
    }
    Ok(ExitCode::SUCCESS)
}

enum Found {
    Pod(PodId),
    Group(GroupId),
    Composite(CompositeId),
}

struct Report {
    text: String,
    json: Value,
}

/// For a pod the workload controllers created (it is not in the input), a line under the verdict
/// naming its workload and controller, and `createdBy` in the JSON.
fn note_created(report: &mut Report, world: &World, key: &str) {
    let Some(c) = world.created.iter().find(|c| {
        let r = c.object.reference();
        r.kind == "Pod" && format!("{}/{}", r.namespace, r.name) == key
    }) else {
        return;
    };
    let by = if c.by == c.root { c.by.to_string() } else { format!("{} ({})", c.root, c.by) };
    let line = format!("  created by {by} for this plan (not in the input)\n");
    let at = report.text.find('\n').map_or(report.text.len(), |i| i + 1);
    report.text.insert_str(at, &line);
    report.json["createdBy"] = json!({"by": c.by.to_string(), "workload": c.root.to_string()});
}

struct Why<'w> {
    world: &'w World,
    config: SchedulerConfig,
    /// The command's total CEL cost for judging devices.
    budget: muster_cel::Budget,
}

/// A pod's verdict in a plan.
enum Verdict<'p> {
    Placed(NodeId),
    Unschedulable(&'p FitError),
    /// Not in the plan: the pod was not pending (its state says why).
    NotPending,
}

fn verdict(plan: &Plan, pod: PodId) -> Verdict<'_> {
    if let Some((_, n)) = plan.placements.iter().find(|(p, _)| *p == pod) {
        return Verdict::Placed(*n);
    }
    match plan.unschedulable.of(pod) {
        Some(e) => Verdict::Unschedulable(e),
        None => Verdict::NotPending,
    }
}

fn state_text(c: &Cluster, state: &PodState) -> String {
    match state {
        PodState::Bound(n) => format!("already bound to node {}", c.node(*n).name()),
        PodState::BoundElsewhere(n) => format!("already bound to node {n}, which is not in the input"),
        PodState::Pending => "pending".into(),
        PodState::OtherScheduler(s) => format!("schedulerName {s:?} is not served by this scheduler"),
        PodState::Gated(g) => format!("waiting for scheduling gates: {}", g.join(", ")),
        PodState::Terminated => "terminated (Succeeded or Failed)".into(),
        PodState::Preempted(n) => format!("preempted from node {} by this plan", c.node(*n).name()),
        PodState::Assumed(n) => format!("placed on node {} by this plan", c.node(*n).name()),
        PodState::Deleted => "deleted".into(),
    }
}

/// What `why` says of preemption after an attempt a Filter error aborted.
const NO_PREEMPTION_AFTER_ERROR: &str =
    "not attempted: kube-scheduler runs PostFilter only when no node fits, not after an error";

/// A gang member its failed cycle never tried.
const NOT_TRIED: &str = "not tried: the group's cycle stopped once minCount was out of reach";

/// The pending members (in the cycle's `order`) a failed gang cycle never tried: those after the
/// ones that fit or failed, as its outcome counts them.
fn untried_members<'o>(result: Option<&muster_sched::GroupResult>, order: &'o [PodId]) -> &'o [PodId] {
    match result.map(|r| &r.outcome) {
        Some(GroupOutcome::Unschedulable { placed, failed, .. }) => order.get(placed + failed..).unwrap_or(&[]),
        _ => &[],
    }
}

fn group_outcome_text(o: &GroupOutcome, gang: bool) -> &'static str {
    match o {
        GroupOutcome::Scheduled { .. } => "scheduled",
        GroupOutcome::Waiting { .. } => "waiting for its pods",
        GroupOutcome::Unschedulable { .. } if gang => "cannot be placed together",
        GroupOutcome::Unschedulable { .. } => "unschedulable",
        GroupOutcome::SchedulerError => "scheduler error",
    }
}

impl Why<'_> {
    /// The DRA inputs, as `muster plan` builds them (a scheduler borrows them as long as the
    /// cluster it schedules, so each run gets its own).
    fn dra(&self) -> DraContext {
        DraContext {
            index: muster_alloc::SliceIndex::new(self.world.slices.clone()),
            classes: self.world.device_classes.clone(),
            env: muster_cel::Env::default(),
            features: muster_alloc::Features::kubernetes_1_37(),
        }
    }

    fn plan(&self) -> (Cluster, Plan) {
        let mut c = self.world.cluster.clone();
        let plan = {
            let dra = self.dra();
            Scheduler::with_dra(&mut c, self.config.clone(), &dra).plan()
        };
        (c, plan)
    }

    /// The snapshot as `entry`'s last attempt in the plan saw it, observed while the plan ran
    /// (retries included). With `group` (the target's group and the members its cycle tries
    /// first), those members are then tried in the group's cycle order and kept where they fit
    /// (the plan of that step is returned).
    fn before(&self, entry: QueueEntry, group: Option<(GroupId, &[PodId])>) -> (Cluster, Plan) {
        let mut c = self.world.cluster.clone();
        let mut seen: Option<Cluster> = None;
        {
            let dra = self.dra();
            Scheduler::with_dra(&mut c, self.config.clone(), &dra).plan_observing(|e, snapshot| {
                if e == entry {
                    seen = Some(snapshot.clone());
                }
            });
        }
        // Every pending entry is attempted; one that is not (nothing pending) is seen as the
        // input has it.
        let mut c = seen.unwrap_or_else(|| self.world.cluster.clone());
        let mut step = Plan::default();
        let Some((g, keep)) = group.filter(|(_, keep)| !keep.is_empty()) else { return (c, step) };
        // The cycle for the members before the target only: the same attempts in the same
        // order, each kept where it fits (no minCount to reach). A member of a CompositePodGroup
        // tree: its own PodGroup's members are replayed alone (the tree's domain is not applied).
        for m in c.groups[g].members.clone() {
            if c.pod(m).state == PodState::Pending && !keep.contains(&m) {
                c.pods[m.0 as usize].state = PodState::Terminated;
            }
        }
        c.groups[g].gang = false;
        c.groups[g].min_count = 0;
        {
            let dra = self.dra();
            Scheduler::with_dra(&mut c, self.config.clone(), &dra).schedule_group(g, &mut step);
        }
        (c, step)
    }

    fn node_name(&self, n: NodeId) -> &str {
        self.world.cluster.node(n).name()
    }

    fn pod_key(&self, p: PodId) -> &str {
        &self.world.cluster.pod(p).key
    }

    /// The devices a placed pod got (driver, pool, device), from the planned cluster.
    fn devices(c: &Cluster, pod: PodId) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for i in c.pod(pod).claims.iter().flatten() {
            let results = c.claims[*i]
                .claim
                .status
                .as_ref()
                .and_then(|s| s.allocation.as_ref())
                .and_then(|a| a.devices.as_ref())
                .and_then(|d| d.results.as_ref());
            for r in results.into_iter().flatten() {
                out.push((r.driver.clone(), r.pool.clone(), r.device.clone()));
            }
        }
        out
    }

    /// The snapshot the pod's attempt saw, and the group members reserved before it.
    fn explain_at_attempt(&self, pod: PodId) -> (PodExplanation, Vec<PodId>) {
        let c = &self.world.cluster;
        // The configuration of the pod's profile, as its attempt had it.
        let name = c.pod(pod).pod.spec().and_then(|s| s.scheduler_name.as_deref());
        let config = self.config.profile_for(name);
        match c.pod(pod).group {
            Some(Ok(g)) => {
                let order = c.pending_members(g);
                let at = order.iter().position(|m| *m == pod).unwrap_or(0);
                let priorities: std::collections::BTreeSet<i32> = order.iter().map(|m| c.pod(*m).priority).collect();
                // Members of different priorities are never tried: explain before the group.
                let earlier: &[PodId] = if priorities.len() > 1 { &[] } else { &order[..at] };
                let (snap, step) = self.before(c.entry_of_group(g), Some((g, earlier)));
                let reserved = step.placements.iter().map(|(p, _)| *p).collect();
                (explain_pod_configured(&snap, pod, Some(&self.dra()), Some(&self.budget), config), reserved)
            }
            _ => {
                let (snap, _) = self.before(QueueEntry::Pod(pod), None);
                (explain_pod_configured(&snap, pod, Some(&self.dra()), Some(&self.budget), config), Vec::new())
            }
        }
    }

    fn pod(&self, pod: PodId) -> Report {
        let c = &self.world.cluster;
        let info = c.pod(pod);
        let key = info.key.clone();
        let mut text = String::new();
        let mut j = json!({"target": format!("pod/{key}"), "pod": key});
        if info.state != PodState::Pending {
            let why = state_text(c, &info.state);
            let _ = writeln!(text, "pod {key}: not scheduled by this run: {why}");
            j["verdict"] = json!({"status": "not-pending", "reason": why});
            j["nodes"] = json!([]);
            return Report { text, json: j };
        }
        let (planned, plan) = self.plan();
        let preemption = match &info.group {
            Some(Ok(g)) => group_preemption(&plan, *g),
            _ => pod_preemption(&plan, c, pod),
        };
        j["preemption"] = json!(preemption);
        let (explanation, reserved) = self.explain_at_attempt(pod);
        match verdict(&plan, pod) {
            Verdict::Placed(n) => {
                let devices = Self::devices(&planned, pod);
                let others: Vec<&str> = explanation.feasible().filter(|f| *f != n).map(|f| self.node_name(f)).collect();
                let _ = writeln!(text, "pod {key}: placed on node {}", self.node_name(n));
                if plan.pod_preemptions.iter().any(|r| r.pod == pod) {
                    let _ = writeln!(text, "  preemption: {preemption}");
                }
                let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
                for (driver, pool, device) in &devices {
                    let k = format!("{driver}/{pool}");
                    match groups.iter_mut().find(|(g, _)| *g == k) {
                        Some((_, d)) => d.push(device),
                        None => groups.push((k, vec![device])),
                    }
                }
                for (pool, d) in &groups {
                    let _ = writeln!(text, "  devices: {pool}: {}", d.join(" "));
                }
                let devices: Vec<Value> =
                    devices.iter().map(|(d, p, n)| json!({"driver": d, "pool": p, "device": n})).collect();
                let _ = writeln!(
                    text,
                    "  {} other feasible node{}{}",
                    others.len(),
                    if others.len() == 1 { "" } else { "s" },
                    if others.is_empty() { String::new() } else { format!(": {}", names(&others)) }
                );
                j["verdict"] = json!({"status": "placed", "node": self.node_name(n), "devices": devices,
                    "otherFeasibleNodes": others});
            }
            Verdict::Unschedulable(e) if e.error.is_some() && info.group.is_none() => {
                let node = e.error.as_ref().map_or("", |f| self.node_name(f.node));
                let _ = writeln!(text, "pod {key}: scheduler error");
                let _ = writeln!(text, "  {}", e.message());
                let _ = writeln!(
                    text,
                    "  the attempt stopped at node {node}: a Filter error aborts kube-scheduler's cycle whatever \
                     the other nodes say (PodScheduled=False, reason SchedulerError; no preemption; retried after backoff)"
                );
                j["verdict"] = json!({"status": "scheduler-error", "message": e.message(), "node": node,
                    "reason": e.reason()});
                j["preemption"] = json!(NO_PREEMPTION_AFTER_ERROR);
            }
            Verdict::Unschedulable(e) => {
                let _ = writeln!(text, "pod {key}: unschedulable");
                let _ = writeln!(text, "  {}", e.message());
                let _ = writeln!(text, "  preemption: {preemption}");
                j["verdict"] = json!({"status": "unschedulable", "message": e.message()});
            }
            Verdict::NotPending => {
                let _ = writeln!(text, "pod {key}: not in the plan");
                j["verdict"] = json!({"status": "not-in-plan"});
            }
        }
        if !self.config.profiles.is_empty() {
            // Several profiles: say whose plugins and weights the verdict is under.
            let name = info.pod.spec().and_then(|s| s.scheduler_name.as_deref()).unwrap_or("default-scheduler");
            let _ = writeln!(text, "  profile: {name} (the pod's spec.schedulerName)");
            j["profile"] = json!(name);
        }
        if let Some(Ok(g)) = info.group {
            let group = &c.groups[g];
            let result = plan.groups.iter().find(|r| r.group == g);
            let outcome = result.map_or("not attempted", |r| group_outcome_text(&r.outcome, group.gang));
            let _ = writeln!(text, "  podgroup {}: {outcome}", group.key);
            let list: Vec<&str> = reserved.iter().map(|p| self.pod_key(*p)).collect();
            let after = if list.is_empty() { String::new() } else { format!(" after reserving {}", list.join(", ")) };
            if untried_members(result, &c.pending_members(g)).contains(&pod) {
                let _ = writeln!(text, "  {NOT_TRIED}; the nodes as an attempt{after} would see them:");
            } else if !list.is_empty() {
                let _ = writeln!(text, "  explained as the group's cycle tried it,{after}");
            }
            if matches!(result.map(|r| &r.outcome), Some(GroupOutcome::Waiting { .. } | GroupOutcome::SchedulerError)) {
                let _ = writeln!(text, "  the group's cycle did not try it; the nodes as an attempt would see them:");
            }
            j["group"] = json!({"podgroup": group.key, "outcome": outcome,
                "message": result.map(|r| r.message()),
                "reservedBefore": reserved.iter().map(|p| self.pod_key(*p)).collect::<Vec<_>>()});
        }
        self.nodes(&explanation, &mut text, &mut j);
        Report { text, json: j }
    }

    /// A CompositePodGroup: its tree's verdict (the tree is scheduled from its root), then each
    /// child group's outcome in the cycle.
    fn composite(&self, t: CompositeId) -> Report {
        let c = &self.world.cluster;
        let info = &c.composites[t];
        let mut text = String::new();
        let (_, plan) = self.plan();
        let policy = if info.gang { format!("gang, minGroupCount {}", info.min_group_count) } else { "basic".into() };
        let topology = info.topology_key.as_ref().map(|k| format!(", topology {k}")).unwrap_or_default();
        let _ = write!(text, "compositepodgroup {} ({policy}{topology})", info.key);
        let mut j = json!({"target": format!("compositepodgroup/{}", info.key), "compositepodgroup": info.key,
            "policy": policy});
        let root = c.root(GroupNode::Composite(t));
        match &root {
            Err(e) => {
                let _ = writeln!(text, ": not scheduled: {e}");
                j["verdict"] = json!({"status": "invalid", "message": e.to_string()});
            }
            Ok(r) => {
                if *r != GroupNode::Composite(t) {
                    let _ = write!(text, ", part of the tree of compositepodgroup {}", c.node_key(*r));
                    j["root"] = json!(c.node_key(*r));
                }
                let result = match r {
                    GroupNode::Composite(r) => plan.composites.iter().find(|x| x.composite == *r),
                    GroupNode::Group(_) => None,
                };
                match result {
                    None => {
                        let _ = writeln!(text, ": nothing to schedule: no member is pending");
                        j["verdict"] = json!({"status": "nothing-pending"});
                    }
                    Some(x) => {
                        let outcome = if x.invalid { "invalid" } else { group_outcome_text(&x.outcome, info.gang) };
                        let _ = writeln!(text, ": {outcome}");
                        let _ = writeln!(text, "  {}", x.message());
                        if let Some(p) = &x.preemption {
                            let _ = writeln!(text, "  preemption: {p}");
                        }
                        j["verdict"] = json!({"status": outcome, "message": x.message()});
                        j["preemption"] = json!(x.preemption.as_ref().map(ToString::to_string));
                    }
                }
            }
        }
        let mut children = Vec::new();
        for child in &info.children {
            let (kind, key) = (child.kind(), c.node_key(*child));
            let (outcome, message) = match child {
                GroupNode::Group(g) => match plan.groups.iter().find(|r| r.group == *g) {
                    Some(r) => (group_outcome_text(&r.outcome, c.groups[*g].gang).to_string(), r.message()),
                    None => ("nothing pending".to_string(), String::new()),
                },
                GroupNode::Composite(_) => ("see its own report".to_string(), String::new()),
            };
            let _ = writeln!(
                text,
                "  child {kind} {key}: {outcome}{}",
                if message.is_empty() { String::new() } else { format!(" — {message}") }
            );
            children.push(json!({"kind": kind, "name": key, "outcome": outcome, "message": message}));
        }
        j["children"] = json!(children);
        Report { text, json: j }
    }

    fn group(&self, g: GroupId) -> Report {
        let c = &self.world.cluster;
        let group = &c.groups[g];
        let mut text = String::new();
        let (_, plan) = self.plan();
        let result = plan.groups.iter().find(|r| r.group == g);
        let policy = if group.gang { format!("gang, minCount {}", group.min_count) } else { "basic".to_string() };
        let preemption = group_preemption(&plan, g);
        let mut j = json!({"target": format!("podgroup/{}", group.key), "podgroup": group.key, "policy": policy,
            "preemption": preemption});
        let order = c.pending_members(g);
        match result {
            None => {
                let _ = writeln!(text, "podgroup {} ({policy}): nothing to schedule: no member is pending", group.key);
                j["verdict"] = json!({"status": "nothing-pending"});
            }
            Some(r) => {
                let outcome = group_outcome_text(&r.outcome, group.gang);
                let _ = writeln!(text, "podgroup {} ({policy}): {outcome}", group.key);
                let _ = writeln!(text, "  {}", r.message());
                if !matches!(r.outcome, GroupOutcome::Scheduled { .. }) || r.preemption.is_some() {
                    let _ = writeln!(text, "  preemption: {preemption}");
                }
                j["verdict"] = json!({"status": outcome, "message": r.message()});
            }
        }
        // Beyond upstream: each topology domain as the group's cycle tried it.
        let topology_key = self.domains(g, &plan, &mut text, &mut j);
        // What each member did in the group's cycle, kept or not: the cycle replayed with every
        // member kept where it fits.
        let attempted = matches!(result.map(|r| &r.outcome), Some(GroupOutcome::Unschedulable { .. }));
        let trial = attempted.then(|| self.before(c.entry_of_group(g), Some((g, &order))).1);
        let untried = untried_members(result, &order);
        let mut members = Vec::new();
        for m in &group.members {
            let info = c.pod(*m);
            let (status, detail) = match (verdict(&plan, *m), &trial) {
                (Verdict::Placed(n), _) => ("placed", format!("placed on node {}", self.node_name(n))),
                (Verdict::Unschedulable(_), Some(_)) if untried.contains(m) => ("not-tried", NOT_TRIED.to_string()),
                (Verdict::Unschedulable(_), Some(t)) => match verdict(t, *m) {
                    Verdict::Placed(n) => (
                        "rolled-back",
                        format!("fits (node {} in the group's cycle), rolled back with the group", self.node_name(n)),
                    ),
                    Verdict::Unschedulable(e) => ("unschedulable", format!("does not fit: {}", e.message())),
                    Verdict::NotPending => ("not-attempted", "not attempted".to_string()),
                },
                (Verdict::Unschedulable(e), None) if result.is_some_and(|r| r.message() == e.message()) => {
                    ("unschedulable", "unschedulable with its group".to_string())
                }
                (Verdict::Unschedulable(e), None) => ("unschedulable", format!("unschedulable: {}", e.message())),
                (Verdict::NotPending, _) => ("not-pending", state_text(c, &info.state)),
            };
            let _ = writeln!(text, "  member {}: {detail}", info.key);
            members.push(json!({"pod": info.key, "status": status, "detail": detail}));
        }
        j["members"] = json!(members);
        // The member whose failure decided the group, as the cycle saw it.
        let first_failed = trial
            .as_ref()
            .and_then(|t| order.iter().copied().find(|m| matches!(verdict(t, *m), Verdict::Unschedulable(_))));
        match first_failed {
            Some(m) => {
                let (explanation, reserved) = self.explain_at_attempt(m);
                let list: Vec<&str> = reserved.iter().map(|p| self.pod_key(*p)).collect();
                let after =
                    if list.is_empty() { String::new() } else { format!(", after reserving {}", list.join(", ")) };
                let _ = writeln!(text, "first member that does not fit: {}{after}", self.pod_key(m));
                j["explained"] = json!({"pod": self.pod_key(m), "reservedBefore": list});
                let mut explanation = explanation;
                if let Some((key, in_domains)) = &topology_key {
                    // Nodes without the label (or in no device domain) are never eligible for a
                    // constrained group.
                    let before = explanation.nodes.len();
                    match in_domains {
                        Some(nodes) => explanation.nodes.retain(|n| nodes.contains(&n.node)),
                        None => explanation.nodes.retain(|n| c.node(n.node).detail.labels.contains_key(key)),
                    }
                    if explanation.nodes.len() < before && in_domains.is_some() {
                        let _ = writeln!(
                            text,
                            "({} node(s) in no {key} domain are not eligible and not listed)",
                            before - explanation.nodes.len()
                        );
                    } else if explanation.nodes.len() < before {
                        let _ = writeln!(
                            text,
                            "({} node(s) without the label {key} are not eligible and not listed)",
                            before - explanation.nodes.len()
                        );
                    }
                }
                self.nodes(&explanation, &mut text, &mut j);
            }
            None => {
                j["explained"] = Value::Null;
                j["nodes"] = json!([]);
            }
        }
        Report { text, json: j }
    }

    /// The domains of a topology-constrained PodGroup, each tried from the snapshot its cycle
    /// started from and rolled back: how many members fit, the first that did not and why, and
    /// which domain the plan chose. Returns the topology key (`None`: no constraint) and, with a
    /// device attribute, the nodes of its domains.
    fn domains(
        &self,
        g: GroupId,
        plan: &Plan,
        text: &mut String,
        j: &mut Value,
    ) -> Option<(String, Option<std::collections::HashSet<NodeId>>)> {
        let c = &self.world.cluster;
        let (mut snap, _) = self.before(c.entry_of_group(g), None);
        let dra = self.dra();
        let trials = Scheduler::with_dra(&mut snap, self.config.clone(), &dra).domain_trials(g);
        let trials = match trials {
            Ok(t) if t.is_empty() => return None,
            Ok(t) => t,
            Err(reason) => {
                let _ = writeln!(text, "  domains: none: {reason}");
                j["domains"] = json!({"error": reason});
                return None;
            }
        };
        let key = trials[0].key.clone();
        let by_device = trials[0].devices.is_some();
        let members = &c.groups[g].members;
        let pending = members.iter().filter(|m| c.pod(**m).state == PodState::Pending).count();
        let placed: std::collections::HashSet<NodeId> =
            plan.placements.iter().filter(|(p, _)| members.contains(p)).map(|(_, n)| *n).collect();
        let _ = writeln!(text, "  domains of {key} (each tried from the cycle's snapshot, then rolled back):");
        let mut out = Vec::new();
        for t in &trials {
            let chosen = !placed.is_empty() && t.nodes.iter().any(|n| placed.contains(n));
            let tried = t.placed.len() + t.failed.len();
            let stopped = if tried < pending {
                format!(" (stopped after {tried}: minCount out of reach)")
            } else {
                String::new()
            };
            let devices = t
                .devices
                .map(|(total, free)| format!(", {total} devices, {} in use", total - free))
                .unwrap_or_default();
            let mut line = format!(
                "    {} ({} node{}{devices}): {} of {pending} fit{stopped}{}",
                t.value,
                t.nodes.len(),
                if t.nodes.len() == 1 { "" } else { "s" },
                t.placed.len(),
                if t.feasible { ", feasible" } else { "" }
            );
            if chosen {
                line.push_str(" — chosen");
            }
            if let Some((p, e)) = t.failed.first() {
                line.push_str(&format!(" — first failure {}: {}", self.pod_key(*p), e.message()));
            }
            let _ = writeln!(text, "{line}");
            out.push(json!({
                "value": t.value,
                "nodes": t.nodes.iter().map(|n| self.node_name(*n)).collect::<Vec<_>>(),
                "fit": t.placed.len(),
                "tried": tried,
                "feasible": t.feasible,
                "chosen": chosen,
                "firstFailure": t.failed.first().map(|(p, e)| json!({"pod": self.pod_key(*p), "reason": e.message()})),
            }));
            if let (Some((total, free)), Some(last)) = (t.devices, out.last_mut()) {
                last["devices"] = json!({"total": total, "inUse": total - free});
            }
        }
        j["domains"] = json!({"key": key, "domains": out});
        let in_domains = by_device.then(|| trials.iter().flat_map(|t| t.nodes.iter().copied()).collect());
        Some((key, in_domains))
    }

    /// Per-node lines and JSON.
    fn nodes(&self, e: &PodExplanation, text: &mut String, j: &mut Value) {
        if let Some(p) = &e.pre_filter {
            let _ = writeln!(text, "PreFilter: {p}");
            j["preFilter"] = json!(p.to_string());
            j["nodes"] = json!([]);
            return;
        }
        j["preFilter"] = Value::Null;
        let width = e.nodes.iter().map(|n| crate::text::cell_width(self.node_name(n.node))).max().unwrap_or(0);
        let mut out = Vec::new();
        for n in &e.nodes {
            let name = self.node_name(n.node);
            let (lines, node_json) = self.node(&n.verdict);
            text.push_str("node ");
            crate::text::push_cell(text, name, width);
            text.push_str("  ");
            match lines.as_slice() {
                [one] => {
                    let _ = writeln!(text, "{one}");
                }
                [head, rest @ ..] => {
                    let _ = writeln!(text, "{head}");
                    for l in rest {
                        let _ = writeln!(text, "    {l}");
                    }
                }
                [] => {}
            }
            let mut node_json = node_json;
            node_json["node"] = json!(name);
            out.push(node_json);
        }
        j["nodes"] = json!(out);
    }

    /// A node's lines (the first goes after the node's name) and its JSON.
    fn node(&self, v: &NodeVerdict) -> (Vec<String>, Value) {
        match v {
            NodeVerdict::Feasible => (vec!["feasible".into()], json!({"status": "feasible"})),
            NodeVerdict::Filter(r) => {
                let reason = r.reasons.join("; ");
                (
                    vec![format!("{}: {reason}", r.plugin)],
                    json!({"status": "rejected", "plugin": r.plugin, "reason": reason}),
                )
            }
            NodeVerdict::InterPod { rejection: r, detail } | NodeVerdict::Volume { rejection: r, detail } => {
                let reason = r.reasons.join("; ");
                let mut lines = vec![format!("{}: {reason}", r.plugin)];
                lines.extend(detail.iter().cloned());
                let mut j = json!({"status": "rejected", "plugin": r.plugin, "reason": reason});
                if let Some(d) = detail {
                    j["detail"] = json!(d);
                }
                (lines, j)
            }
            NodeVerdict::Dra { rejection, claims } => {
                let reason = rejection.reasons.join("; ");
                let mut lines: Vec<String> = claims.iter().flat_map(|c| self.claim_lines(c)).collect();
                if !claims.is_empty() && !claims.iter().any(ClaimExplanation::has_cause) {
                    lines.push(
                        "each request finds enough devices on its own, but not all together (devices shared \
                         between requests or claims, counters drawn together, constraints across requests)"
                            .into(),
                    );
                }
                let head = format!("{}: {reason}", rejection.plugin);
                let lines = match lines.len() {
                    0 => vec![head],
                    1 => vec![format!("{}: {}", rejection.plugin, lines[0])],
                    _ => std::iter::once(head).chain(lines).collect(),
                };
                let claims_json: Vec<Value> = claims.iter().map(|c| self.claim_json(c)).collect();
                (
                    lines,
                    json!({"status": "rejected", "plugin": rejection.plugin, "reason": reason, "claims": claims_json}),
                )
            }
            NodeVerdict::DraError { message, claims } => {
                let claims_json: Vec<Value> = claims.iter().map(|c| self.claim_json(c)).collect();
                let head = format!("DynamicResources: {message}");
                let rest = claims.iter().flat_map(|c| self.claim_lines(c)).filter(|l| l != message);
                (
                    std::iter::once(head).chain(rest).collect(),
                    json!({"status": "error", "plugin": "DynamicResources", "reason": message, "claims": claims_json}),
                )
            }
        }
    }

    fn taint_source(&self, d: &muster_alloc::DeviceId, t: &k8s_openapi::api::resource::v1::DeviceTaint) -> String {
        let key = DeviceKey::new(&d.driver, &d.pool, &d.device);
        let found = self
            .world
            .taints
            .of(&key)
            .into_iter()
            .find(|s| s.taint.key == t.key && s.taint.value == t.value && s.taint.effect == t.effect);
        match found {
            Some(s) => format!("{}: {}, {}", d.device, taint_text(t), s.source),
            None => format!("{}: {}", d.device, taint_text(t)),
        }
    }

    fn claim_lines(&self, c: &ClaimExplanation) -> Vec<String> {
        let mut lines = Vec::new();
        for p in &c.pools {
            lines.push(format!("claim {}: pool {}/{} {}", c.claim, p.driver, p.pool, p.problem));
        }
        if let Some(e) = &c.error {
            lines.push(e.clone());
        }
        for r in &c.requests {
            lines.push(self.request_line(&c.claim, r));
        }
        for k in c.constraints.iter().filter(|k| !k.met) {
            lines.push(constraint_line(&c.claim, k));
        }
        lines
    }

    fn request_line(&self, claim: &str, r: &RequestExplanation) -> String {
        if let Some(e) = &r.error {
            return e.clone();
        }
        let wants = match r.wanted {
            Wanted::Exact(n) => format!("wants {n} device{}", if n == 1 { "" } else { "s" }),
            Wanted::All => "wants all matching devices".into(),
        };
        let of = |f: &dyn Fn(&DeviceStatus) -> bool| -> Vec<&str> {
            r.devices.iter().filter(|d| f(&d.status)).map(|d| d.device.device.as_str()).collect()
        };
        let what = format!("class {}{}", r.class, if r.has_selectors { " + selectors" } else { "" });
        let matching = of(&DeviceStatus::matches);
        let mut parts = Vec::new();
        parts.push(if matching.len() == r.devices.len() {
            format!("{} match {what}{}", matching.len(), paren(&names(&matching)))
        } else {
            format!("{} of {} match {what}{}", matching.len(), r.devices.len(), paren(&names(&matching)))
        });
        let unjudged = of(&|s| *s == DeviceStatus::NotEvaluated);
        if !unjudged.is_empty() {
            parts.push(format!(
                "{} not evaluated: this command's CEL cost budget ({}) is spent",
                unjudged.len(),
                self.budget.total()
            ));
        }
        // The message itself is on the node's line (the allocator stops on the first one).
        let errors = of(&|s| matches!(s, DeviceStatus::SelectorError(_)));
        if !errors.is_empty() {
            parts.push(format!(
                "{} selector error{} ({})",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                names(&errors)
            ));
        }
        let allocated = of(&|s| *s == DeviceStatus::Allocated);
        if !allocated.is_empty() {
            parts.push(format!("{} already allocated ({})", allocated.len(), names(&allocated)));
        }
        let tainted: Vec<String> = r
            .devices
            .iter()
            .filter_map(|d| match &d.status {
                DeviceStatus::Tainted(t) => Some(self.taint_source(&d.device, t)),
                _ => None,
            })
            .collect();
        if !tainted.is_empty() {
            let shown = if tainted.len() > 3 {
                format!("{}; … {} more", tainted[..2].join("; "), tainted.len() - 2)
            } else {
                tainted.join("; ")
            };
            parts.push(format!("{} tainted and not tolerated ({shown})", tainted.len()));
        }
        // Short of counters, grouped by counter set.
        let mut sets: Vec<(&str, Vec<&str>)> = Vec::new();
        for d in &r.devices {
            if let DeviceStatus::Counters { counter_set, .. } = &d.status {
                match sets.iter_mut().find(|(s, _)| s == counter_set) {
                    Some((_, v)) => v.push(&d.device.device),
                    None => sets.push((counter_set, vec![&d.device.device])),
                }
            }
        }
        if !sets.is_empty() {
            let n: usize = sets.iter().map(|(_, v)| v.len()).sum();
            let detail: Vec<String> = sets.iter().map(|(s, v)| format!("{}: counter set {s}", names(v))).collect();
            parts.push(format!("{n} short of counters ({})", detail.join("; ")));
        }
        let capacity: Vec<String> = r
            .devices
            .iter()
            .filter_map(|d| match &d.status {
                DeviceStatus::Capacity { capacity, reason } => {
                    Some(format!("{}: {capacity} {reason}", d.device.device))
                }
                _ => None,
            })
            .collect();
        if !capacity.is_empty() {
            parts.push(format!("{} short of capacity ({})", capacity.len(), capacity.join("; ")));
        }
        parts.push(format!("{} available", r.available()));
        let short = r.short();
        let tail = if short > 0 { format!(" \u{2014} {short} short") } else { String::new() };
        format!("claim {claim} request {} {wants}: {}{tail}", r.request, parts.join(", "))
    }

    fn claim_json(&self, c: &ClaimExplanation) -> Value {
        let requests: Vec<Value> = c
            .requests
            .iter()
            .map(|r| {
                let devices: Vec<Value> = r
                    .devices
                    .iter()
                    .map(|d| {
                        let detail = match &d.status {
                            DeviceStatus::SelectorError(m) => json!(m),
                            DeviceStatus::FeatureOff(m) => json!(m),
                            DeviceStatus::Tainted(t) => json!(self.taint_source(&d.device, t)),
                            DeviceStatus::Counters { counter_set, counter, needs, left } => {
                                json!({"counterSet": counter_set, "counter": counter, "needs": needs, "left": left})
                            }
                            DeviceStatus::Capacity { capacity, reason } => {
                                json!({"capacity": capacity, "reason": reason})
                            }
                            _ => Value::Null,
                        };
                        json!({"driver": d.device.driver, "pool": d.device.pool, "device": d.device.device,
                            "status": d.status.code(), "detail": detail})
                    })
                    .collect();
                let count = |code: &str| r.devices.iter().filter(|d| d.status.code() == code).count();
                json!({
                    "request": r.request,
                    "class": r.class,
                    "wants": match r.wanted { Wanted::Exact(n) => json!(n), Wanted::All => json!("All") },
                    "error": r.error,
                    "matching": r.matching(),
                    "allocated": count("allocated"),
                    "tainted": count("tainted"),
                    "counters": count("counters"),
                    "capacity": count("capacity"),
                    "available": r.available(),
                    "short": r.short(),
                    "devices": devices,
                })
            })
            .collect();
        let constraints: Vec<Value> = c
            .constraints
            .iter()
            .map(|k| {
                json!({"kind": k.kind, "attribute": k.attribute, "requests": k.requests, "met": k.met,
                    "needed": k.needed,
                    "values": k.values.iter().map(|(v, d)| json!({"value": v, "devices": d})).collect::<Vec<_>>()})
            })
            .collect();
        let pools: Vec<Value> =
            c.pools.iter().map(|p| json!({"driver": p.driver, "pool": p.pool, "problem": p.problem})).collect();
        json!({"claim": c.claim, "error": c.error, "pools": pools, "requests": requests, "constraints": constraints})
    }
}

fn constraint_line(claim: &str, k: &ConstraintExplanation) -> String {
    let scope = if k.requests.is_empty() { String::new() } else { format!(" (requests {})", k.requests.join(", ")) };
    let values: Vec<String> = k
        .values
        .iter()
        .map(|(v, d)| {
            let d: Vec<&str> = d.iter().map(String::as_str).collect();
            match v {
                Some(v) => format!("{v} ({})", names(&d)),
                None => format!("without it ({})", names(&d)),
            }
        })
        .collect();
    let need = if k.kind == "matchAttribute" {
        format!("needs {} devices with one value", k.needed)
    } else {
        format!("needs {} distinct values", k.needed)
    };
    let have = if values.is_empty() {
        "no device is available".to_string()
    } else {
        format!("available: {}", values.join(", "))
    };
    format!("claim {claim} constraint {} {}{scope} cannot be met: {need}; {have}", k.kind, k.attribute)
}

/// Device or node names, short: all of them up to three, else `first…last`.
fn names(list: &[&str]) -> String {
    match list {
        [first, .., last] if list.len() > 3 => format!("{first}\u{2026}{last}"),
        _ => list.join(", "),
    }
}

fn paren(s: &str) -> String {
    if s.is_empty() { String::new() } else { format!(" ({s})") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert!(matches!(parse_target("pod/ml/a"), Some(Target::Pod(k)) if k == "ml/a"));
        assert!(matches!(parse_target("pod/a"), Some(Target::Pod(k)) if k == "default/a"));
        assert!(matches!(parse_target("podgroup/ml/g"), Some(Target::Group(k)) if k == "ml/g"));
        assert!(parse_target("deployment/ml/a").is_none());
        assert!(parse_target("pod/ml/a/b").is_none());
        assert!(parse_target("pod").is_none());
    }

    #[test]
    fn short_names() {
        assert_eq!(names(&["a", "b"]), "a, b");
        assert_eq!(names(&["gpu-0", "gpu-1", "gpu-2", "gpu-3"]), "gpu-0\u{2026}gpu-3");
        assert_eq!(distance("ml/trainer-3", "ml/trainer-4"), 1);
    }
}
