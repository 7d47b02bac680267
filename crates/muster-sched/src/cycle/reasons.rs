//! Why a PodGroup's (or a CompositePodGroup tree's) cycle ended as it did, as data. The cycle
//! builds no sentence: it records a [`GroupReason`] or a [`TreeReason`] (shared by the group's
//! result and each pending member's [`FitError`] through one `Arc`), and the edge — effects'
//! messages, `plan`, `why`, `run`'s condition patches — renders it with `Display`, in the
//! wording muster has always given (upstream has no message for most of these: its gang plugin
//! says only that the group was not placed).

use std::fmt;
use std::sync::Arc;

use crate::cluster::TreeError;
use crate::framework::FitError;

/// Why a PodGroup's cycle placed it, or did not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupReason {
    /// Placed: `placed` members by this plan, `running` already, of `min` (minCount; 1 for the
    /// basic policy); the victims workload-aware preemption made room with, if any.
    Scheduled { group: String, placed: usize, running: usize, min: usize, victims: Option<Arc<Victims>> },
    /// The parent CompositePodGroup named in the chain is missing (a
    /// [`TreeError::MissingParent`]); the group waits for it.
    ParentMissing(TreeError),
    /// A bad parent chain.
    InvalidTree { group: String, error: TreeError },
    /// Members whose priority is not the group's (alpha restriction).
    Priority(PriorityMismatch),
    /// A gang below minCount waits for its pods (GangScheduling's PreEnqueue).
    WaitsForPods { group: String, exist: usize, min: usize, timeout_seconds: u64 },
    /// The device topology the group's annotations ask for is malformed.
    DeviceTopology { group: String, error: String },
    /// No topology domain can hold the group.
    NoDomain { group: String, error: DomainError },
    /// The gang bound failed the cycle without trying a member: at most `room` of `pending` fit.
    /// (The name inline when short: a waiting gang's reason is made again at many events.)
    Bound { group: crate::short_name::ShortName, room: usize, pending: usize, running: usize, min: usize },
    /// A gang's members were tried and fewer than minCount fit; everything was rolled back.
    /// `first`: the first member that did not fit, and why.
    NotTogether {
        group: String,
        placed: usize,
        failed: usize,
        pending: usize,
        running: usize,
        min: usize,
        first: Option<(String, Box<FitError>)>,
    },
    /// The basic policy: no member fitted; the first one's reason (empty without one).
    NoneFits(Option<Box<FitError>>),
    /// The group's CompositePodGroup tree (or the subtree it is in) failed.
    Tree(Arc<TreeReason>),
}

/// Why a CompositePodGroup tree's cycle ended as it did; the failures of a subtree nest (a tree's
/// children, the domain it was tried in, a leaf PodGroup's own reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeReason {
    /// Placed: `placed` pods by this plan, `running` already; the victims of preemption.
    Scheduled { tree: String, placed: usize, running: usize, victims: Option<Arc<Victims>> },
    /// A bad layout (the condition's reason `Invalid`).
    Invalid { tree: String, error: InvalidTree },
    /// Pods whose priority is not the root's.
    Priority(PriorityMismatch),
    /// Groups whose priority is not the root's (`odd`: `podgroup <key> has <priority>`, or the
    /// group's priorityClassName error).
    GroupPriorities { tree: String, priority: i32, odd: Vec<String> },
    /// Fewer than minGroupCount child groups have their pods.
    WaitsForChildren { tree: String, ready: usize, min: usize },
    /// The placement held, but no pending pod was placed.
    NothingPlaced { tree: String, running: usize },
    /// A subtree's children: `ok` of `total` scheduled, `untried` never tried once
    /// minGroupCount was out of reach (`min`: `None` for the basic policy), and why the others
    /// were not.
    Children { ok: usize, total: usize, untried: usize, min: Option<usize>, failed: Vec<TreeReason> },
    /// The failure of CompositePodGroup `tree`'s children.
    In { tree: String, inner: Box<TreeReason> },
    /// The failure of `tree`'s children in the domain chosen for it.
    InDomain { tree: String, key: String, value: String, inner: Box<TreeReason> },
    /// No domain of `key` holds `tree`: the first few tried (value, why), of `total`.
    NoDomain { tree: String, key: String, tried: Vec<(String, TreeReason)>, total: usize },
    /// `tree`'s domains could not be formed.
    Domains { tree: String, error: DomainError },
    /// A leaf gang below minCount waits for its pods.
    LeafWaits { group: String, exist: usize, min: usize },
    /// A leaf with no pending pod and fewer than minCount running.
    LeafNonePending { group: String, running: usize, min: usize },
    /// A leaf PodGroup's own cycle failed.
    Leaf(Arc<GroupReason>),
}

/// A tree's bad layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvalidTree {
    /// Its PodGroups belong to several Workloads.
    SeveralWorkloads(Vec<String>),
    /// A cycle or a chain too deep.
    Layout(TreeError),
}

/// The victims of a workload-aware preemption, and the PodDisruptionBudgets it could not honour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Victims {
    pub pods: Vec<String>,
    pub budgets: Vec<String>,
}

/// What workload-aware preemption did for a cycle, or why it could not help.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Preemption {
    /// The victims, shared with the cycle's reason ([`GroupReason::Scheduled`]).
    Preempted(Arc<Victims>),
    WouldNotHelp(WouldNotHelp),
}

/// Why workload-aware preemption could not make room for a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WouldNotHelp {
    /// The group (or a pending pod) has `preemptionPolicy: Never`.
    Never,
    /// The group has no pending member.
    NoPendingMember,
    /// No running pod has a priority lower than the group's.
    NoLowerPriority { priority: i32 },
    /// With all `removed` lower-priority running pods gone, the group still does not fit.
    DoesNotFit { removed: usize },
}

impl fmt::Display for WouldNotHelp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WouldNotHelp::Never => f.write_str("the group's preemptionPolicy is Never"),
            WouldNotHelp::NoPendingMember => f.write_str("no pending member"),
            WouldNotHelp::NoLowerPriority { priority } => {
                write!(f, "no running pod has a priority lower than {priority}")
            }
            WouldNotHelp::DoesNotFit { removed } => {
                write!(f, "even with all {removed} lower-priority running pods removed, the group does not fit")
            }
        }
    }
}

/// Members (or groups of a tree) whose priority is not the group's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorityMismatch {
    /// `podgroup <key>` or `compositepodgroup <key>`.
    pub what: String,
    /// The group's priorityClassName does not resolve (the error), or the group's priority and
    /// each odd member (`<key> has <priority>`).
    pub problem: Result<(i32, Vec<String>), crate::cluster::PriorityClassNotFound>,
}

/// Why no topology domain can hold a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DomainError {
    /// Every domain was tried: `tried` are the first few as (value, placed, pending), of `total`;
    /// `min` is the gang's minCount (`None`: the basic policy, at least one pod).
    NoneHolds { key: String, min: Option<usize>, running: usize, tried: Vec<(String, usize, usize)>, total: usize },
    /// A member runs on a node without the label.
    RunningUnlabeled { key: String },
    /// Members run in several domains.
    RunningInSeveral { key: String, values: Vec<String> },
    /// No node (inside the parent's placement) has the label.
    NoLabel { key: String, within: bool },
    /// No device publishes the attribute.
    NoDeviceAttribute { attr: String },
    /// No node (inside the parent's placement) sees a device with the attribute.
    NoDeviceWith { attr: String, within: bool },
    /// No device domain (inside the parent's placement) holds the members already running.
    PinnedOut { attr: String, within: bool },
    /// A running member's devices span several domains of the attribute, or lack it.
    MemberInSeveral { member: String, attr: String },
}

impl fmt::Display for GroupReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupReason::Scheduled { group, placed, running, min, victims } => {
                write!(f, "podgroup {group}: {placed} placed, {running} already running, minCount {min}")?;
                victims.as_ref().map_or(Ok(()), |v| v.fmt_suffix(f))
            }
            GroupReason::ParentMissing(missing) => {
                write!(f, "podgroup {missing}; it is not attempted until the parent exists")
            }
            GroupReason::InvalidTree { group, error } => write!(f, "podgroup {group}: {error}"),
            GroupReason::DeviceTopology { group, error } => write!(f, "podgroup {group}: {error}"),
            GroupReason::Priority(p) => p.fmt(f),
            GroupReason::WaitsForPods { group, exist, min, timeout_seconds } => write!(
                f,
                "podgroup {group} waits for its pods: {exist} of minCount {min} exist; the gang is not attempted until all \
                 are created (muster marks the group PodGroupInitiallyScheduled=False, reason {}, after waiting {timeout_seconds}s)",
                super::GANG_WAIT_TIMEOUT_REASON
            ),
            GroupReason::NoDomain { group, error } => write!(f, "podgroup {group}: {error}"),
            GroupReason::Bound { group, room, pending, running, min } => write!(
                f,
                "podgroup {group} cannot be placed together: at most {room} of its {pending} pending pods fit the nodes' \
                 free resources and devices, {running} already running, minCount {min}; nothing was placed (no member \
                 was tried)"
            ),
            GroupReason::NotTogether { group, placed, failed, pending, running, min, first } => {
                write!(f, "podgroup {group} cannot be placed together: ")?;
                write_tried(f, *placed, *failed, *pending)?;
                write!(f, ", {running} already running, minCount {min}; nothing was placed")?;
                match first {
                    Some((pod, e)) => write!(f, " (first failure: {pod}: {})", e.message()),
                    None => Ok(()),
                }
            }
            GroupReason::NoneFits(first) => f.write_str(&first.as_ref().map(|e| e.message()).unwrap_or_default()),
            GroupReason::Tree(tree) => tree.fmt(f),
        }
    }
}

impl fmt::Display for TreeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeReason::Scheduled { tree, placed, running, victims } => {
                write!(f, "compositepodgroup {tree}: {placed} placed, {running} already running")?;
                victims.as_ref().map_or(Ok(()), |v| v.fmt_suffix(f))
            }
            TreeReason::Invalid { tree, error } => {
                write!(f, "compositepodgroup {tree} is invalid: ")?;
                match error {
                    InvalidTree::SeveralWorkloads(names) => {
                        write!(f, "its groups belong to several Workloads ({})", names.join(", "))
                    }
                    InvalidTree::Layout(e) => e.fmt(f),
                }
            }
            TreeReason::Priority(p) => p.fmt(f),
            TreeReason::GroupPriorities { tree, priority, odd } => write!(
                f,
                "compositepodgroup {tree} has priority {priority}, but {}; every group of a tree must have the root's \
                 priority",
                odd.join(", ")
            ),
            TreeReason::WaitsForChildren { tree, ready, min } => write!(
                f,
                "compositepodgroup {tree} waits for its child groups: {ready} of minGroupCount {min} have their pods; \
                 the tree is not attempted until enough do"
            ),
            TreeReason::NothingPlaced { tree, running } => {
                write!(f, "compositepodgroup {tree}: no pending pod could be placed ({running} already running)")
            }
            TreeReason::Children { ok, total, untried, min, failed } => {
                write!(f, "{ok} of {total} child groups can be scheduled, {} cannot", failed.len())?;
                if *untried > 0 {
                    write!(f, ", {untried} not tried")?;
                }
                match min {
                    Some(min) => write!(f, " (minGroupCount {min}): ")?,
                    None => f.write_str(" (at least one): ")?,
                }
                for (i, r) in failed.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    r.fmt(f)?;
                }
                Ok(())
            }
            TreeReason::In { tree, inner } => write!(f, "compositepodgroup {tree}: {inner}"),
            TreeReason::InDomain { tree, key, value, inner } => {
                write!(f, "compositepodgroup {tree} in {key} domain {value}: {inner}")
            }
            TreeReason::NoDomain { tree, key, tried, total } => {
                write!(f, "compositepodgroup {tree}: no {key} domain holds the tree: ")?;
                for (i, (value, why)) in tried.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "; " };
                    write!(f, "{sep}{value}: {why}")?;
                }
                f.write_str(&super::more(*total, tried.len()))
            }
            TreeReason::Domains { tree, error } => write!(f, "compositepodgroup {tree}: {error}"),
            TreeReason::LeafWaits { group, exist, min } => {
                write!(f, "podgroup {group} waits for its pods: {exist} of minCount {min} exist")
            }
            TreeReason::LeafNonePending { group, running, min } => {
                write!(f, "podgroup {group}: {running} of minCount {min} running, none pending")
            }
            TreeReason::Leaf(reason) => reason.fmt(f),
        }
    }
}

/// How a failed gang cycle's pending pods went, so that the counts add up to `pending`: those
/// that fit, those that did not, and those never tried (the cycle stops once minCount is out of
/// reach).
fn write_tried(f: &mut fmt::Formatter<'_>, placed: usize, failed: usize, pending: usize) -> fmt::Result {
    write!(f, "{placed} of its {pending} pending pods fit, {failed} do not")?;
    let untried = pending.saturating_sub(placed + failed);
    if untried > 0 {
        write!(f, ", {untried} not tried (minCount was out of reach)")?;
    }
    Ok(())
}

impl Victims {
    /// What a group's message says after its placement: `; preempted 2 lower-priority pods: a,
    /// b` and the budgets it went against.
    fn fmt_suffix(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.pods.len() == 1 { "" } else { "s" };
        write!(f, "; preempted {} lower-priority pod{s}: {}", self.pods.len(), self.pods.join(", "))?;
        if !self.budgets.is_empty() {
            write!(f, " ({}: no other choice left room)", self.budgets_text())?;
        }
        Ok(())
    }

    fn budgets_text(&self) -> String {
        let s = if self.budgets.len() == 1 { "" } else { "s" };
        format!("against PodDisruptionBudget{s} {}", self.budgets.join(", "))
    }
}

impl fmt::Display for Preemption {
    /// The short summary `why` shows: `preempted 2 pod(s)[, against PodDisruptionBudget x]`, or
    /// `would not help: <why>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Preemption::Preempted(v) => {
                write!(f, "preempted {} pod(s)", v.pods.len())?;
                if !v.budgets.is_empty() {
                    write!(f, ", {}", v.budgets_text())?;
                }
                Ok(())
            }
            Preemption::WouldNotHelp(why) => write!(f, "would not help: {why}"),
        }
    }
}

impl fmt::Display for PriorityMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = &self.what;
        match &self.problem {
            Err(e) => write!(f, "{what}: spec.priorityClassName: {e}"),
            Ok((priority, odd)) => write!(
                f,
                "{what} has priority {priority}, but {}; every member must have the group's priority (set the same \
                 priorityClassName on the group and its pods)",
                odd.join(", ")
            ),
        }
    }
}

impl fmt::Display for DomainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inside = |within: &bool| if *within { " inside the parent's placement" } else { "" };
        match self {
            DomainError::NoneHolds { key, min, running, tried, total } => {
                match min {
                    Some(min) => {
                        write!(f, "no {key} domain holds the group (minCount {min}, {running} already running): ")?
                    }
                    None => {
                        write!(f, "no {key} domain holds the group (at least one pod, {running} already running): ")?
                    }
                }
                for (i, (value, placed, pending)) in tried.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "; " };
                    write!(f, "{sep}{value}: {placed} of {pending} fit")?;
                }
                f.write_str(&super::more(*total, tried.len()))
            }
            DomainError::RunningUnlabeled { key } => {
                write!(f, "members already running on nodes without the topology label {key}")
            }
            DomainError::RunningInSeveral { key, values } => {
                write!(f, "members already running in several {key} domains ({})", values.join(", "))
            }
            DomainError::NoLabel { key, within } => write!(f, "no node{} has the topology label {key}", inside(within)),
            DomainError::NoDeviceAttribute { attr } => write!(f, "no device publishes the attribute {attr}"),
            DomainError::NoDeviceWith { attr, within } => {
                write!(f, "no node{} sees a device with {attr}", inside(within))
            }
            DomainError::PinnedOut { attr, within } => {
                write!(f, "no {attr} domain{} holds the members already running", inside(within))
            }
            DomainError::MemberInSeveral { member, attr } => {
                write!(f, "member {member} already runs with devices in several {attr} domains, or without {attr}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_add_up_to_the_pending_pods() {
        let reason = |placed, failed, pending| GroupReason::NotTogether {
            group: "ml/g".into(),
            placed,
            failed,
            pending,
            running: 0,
            min: 4,
            first: None,
        };
        assert_eq!(
            reason(3, 1, 4).to_string(),
            "podgroup ml/g cannot be placed together: 3 of its 4 pending pods fit, 1 do not, 0 already running, \
             minCount 4; nothing was placed"
        );
        assert_eq!(
            reason(0, 1, 2).to_string(),
            "podgroup ml/g cannot be placed together: 0 of its 2 pending pods fit, 1 do not, 1 not tried (minCount \
             was out of reach), 0 already running, minCount 4; nothing was placed"
        );
    }

    #[test]
    fn tree_reasons_nest_as_the_tree_does() {
        let leaf = TreeReason::LeafNonePending { group: "ml/a".into(), running: 1, min: 2 };
        let children = TreeReason::Children { ok: 0, total: 2, untried: 1, min: Some(2), failed: vec![leaf] };
        let in_domain = TreeReason::InDomain {
            tree: "ml/t".into(),
            key: "rack".into(),
            value: "r1".into(),
            inner: Box::new(children),
        };
        assert_eq!(
            in_domain.to_string(),
            "compositepodgroup ml/t in rack domain r1: 0 of 2 child groups can be scheduled, 1 cannot, 1 not tried \
             (minGroupCount 2): podgroup ml/a: 1 of minCount 2 running, none pending"
        );
        let odd = vec!["podgroup ml/a has 5".to_string()];
        assert_eq!(
            TreeReason::GroupPriorities { tree: "ml/t".into(), priority: 10, odd }.to_string(),
            "compositepodgroup ml/t has priority 10, but podgroup ml/a has 5; every group of a tree must have the \
             root's priority"
        );
        assert_eq!(
            TreeReason::NothingPlaced { tree: "ml/t".into(), running: 3 }.to_string(),
            "compositepodgroup ml/t: no pending pod could be placed (3 already running)"
        );
        let basic = TreeReason::Children { ok: 0, total: 1, untried: 0, min: None, failed: Vec::new() };
        assert_eq!(basic.to_string(), "0 of 1 child groups can be scheduled, 0 cannot (at least one): ");
    }

    #[test]
    fn victims_and_budgets_are_worded_once_for_the_message_and_the_summary() {
        let v = Arc::new(Victims { pods: vec!["ml/a".into()], budgets: vec!["ml/pdb".into()] });
        let scheduled =
            GroupReason::Scheduled { group: "ml/g".into(), placed: 2, running: 0, min: 2, victims: Some(v.clone()) };
        assert_eq!(
            scheduled.to_string(),
            "podgroup ml/g: 2 placed, 0 already running, minCount 2; preempted 1 lower-priority pod: ml/a (against \
             PodDisruptionBudget ml/pdb: no other choice left room)"
        );
        assert_eq!(Preemption::Preempted(v).to_string(), "preempted 1 pod(s), against PodDisruptionBudget ml/pdb");
    }
}
