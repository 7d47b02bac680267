//! Gang cycles that would fail on the gang bound exactly as the last one did [beyond upstream;
//! an optimization that changes no decision, only with the bound, which the simulator turns on].
//!
//! Why: a gang that waits for room is woken at every release of resources or devices anywhere
//! (upstream's hints, `isSchedulableAfterPodEvent`, `isSchedulableAfterClaimChange`), and in a
//! world that runs for days nearly every such cycle fails on the bound with the room the last one
//! found. Each still read every member's state, claims and requests, sorted the pending ones and
//! reported a verdict for each. Here the last failed cycle's reading is kept ([`BoundWait`]): its
//! need, how many members it wanted, its priority and preemption policy, its pending members'
//! claims, the room it found, what its members wait for. When the gang is popped again and the
//! reading still holds, one count of the room ([`Scheduler::room_short`], kept per need while
//! nothing changes) decides: the same room means the same verdict, reason and all, so the cycle
//! fails at once — popped and requeued as before, its backoff and attempts as before — and the
//! plan only counts it ([`RepeatedFailures`]).
//!
//! The reading holds until the store reports a change it depends on: any change of a member
//! pod (pending or running, added, updated or deleted), of its PodGroup (which moves its entry),
//! of one of its pending members' claims, a pod with a lower priority coming to a node (preemption
//! could then start), a node added or deleted (the verdict counts the nodes), or a change of a
//! kind it does not follow (PriorityClass, Workload, CompositePodGroup...), which forgets every
//! reading. A preemption in a batch forgets the readings of its victims' gangs, of gangs whose
//! pending members share a claim with a victim or a pod it placed, and of gangs that could now
//! preempt a pod it placed (`Scheduler::forget_after_preemption`); the others' room is counted
//! again at their next use, as always. A forgotten assumption forgets them all. A debug build
//! checks each repeat against a full cycle's reading.

use super::gang_bound::{Need, OutOfReach, RoomHint};
use super::*;
use crate::cluster::{ClaimId, PodInfo};

/// What a gang's last cycle, failed on the bound, read and reported.
pub(super) struct BoundWait {
    /// Taken out while the room is counted for it (the count borrows the scheduler).
    need: Need,
    /// Where the count for `need` was last found.
    counted: RoomHint,
    wanted: usize,
    /// The room it found: a cycle that finds the same reports the same.
    room: usize,
    priority: i32,
    /// Its `preemptionPolicy` is Never: no victim could help it.
    never: bool,
    /// The pending members' claims, sorted.
    claims: Vec<ClaimId>,
    /// Its pending members in the cycle's order, the running ones, and the nodes the verdict
    /// counted.
    pending: Vec<PodId>,
    running: usize,
    num_nodes: usize,
    /// What its members wait for (set once the cycle's verdicts are in).
    wake: Wake,
    checked: Checked,
}

/// The kept readings, by gang, with the gangs each pending member's claim is read by: a change
/// of claims finds the readings it forgets without a look at the others.
#[derive(Default)]
pub(super) struct BoundWaits {
    /// By group slot, with the reading's place in `live`: read at every repeat, found without
    /// hashing (group slots are dense and reused, so the table is as long as the most PodGroups
    /// the store held at once).
    waits: Vec<Option<(u32, BoundWait)>>,
    /// The groups with a reading, in no order: what is looked through for readings to forget.
    live: Vec<GroupId>,
    /// Read and written at every full cycle that keeps a reading, so hashed.
    by_claim: Fast<ClaimId, Vec<GroupId>>,
    /// Readings kept so far: a cycle that kept none leaves its gang's last one to be forgotten.
    insertions: u64,
}

type Fast<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<muster_cel::IdHasher>>;

impl BoundWaits {
    fn get(&self, g: &GroupId) -> Option<&BoundWait> {
        self.waits.get(g.0 as usize)?.as_ref().map(|(_, w)| w)
    }

    fn get_mut(&mut self, g: &GroupId) -> Option<&mut BoundWait> {
        self.waits.get_mut(g.0 as usize)?.as_mut().map(|(_, w)| w)
    }

    fn insert(&mut self, g: GroupId, wait: BoundWait) {
        self.insertions += 1;
        // A gang read again with the same pending claims (most are): its claims' lists stay.
        if let Some(kept) = self.get_mut(&g)
            && kept.claims == wait.claims
        {
            *kept = wait;
            return;
        }
        self.remove(&g);
        for c in &wait.claims {
            self.by_claim.entry(*c).or_default().push(g);
        }
        let i = g.0 as usize;
        if self.waits.len() <= i {
            self.waits.resize_with(i + 1, || None);
        }
        self.waits[i] = Some((self.live.len() as u32, wait));
        self.live.push(g);
    }

    /// How many readings were kept so far.
    pub(super) fn insertions(&self) -> u64 {
        self.insertions
    }

    pub(super) fn remove(&mut self, g: &GroupId) {
        let Some((at, wait)) = self.waits.get_mut(g.0 as usize).and_then(Option::take) else { return };
        self.live.swap_remove(at as usize);
        if let Some(moved) = self.live.get(at as usize)
            && let Some((place, _)) = self.waits[moved.0 as usize].as_mut()
        {
            *place = at;
        }
        for c in &wait.claims {
            if let Some(groups) = self.by_claim.get_mut(c) {
                groups.retain(|x| x != g);
                if groups.is_empty() {
                    self.by_claim.remove(c);
                }
            }
        }
    }

    pub(super) fn clear(&mut self) {
        self.waits.clear();
        self.live.clear();
        self.by_claim.clear();
    }

    fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Forgets the readings of the gangs whose pending members have `claim`.
    fn forget_claim(&mut self, claim: ClaimId) {
        for g in self.by_claim.get(&claim).cloned().unwrap_or_default() {
            self.remove(&g);
        }
    }

    /// Forgets the readings for which `forget` says so.
    fn forget_where(&mut self, forget: impl Fn(&BoundWait) -> bool) {
        let gone: Vec<GroupId> = self.live.iter().copied().filter(|g| self.get(g).is_some_and(&forget)).collect();
        for g in gone {
            self.remove(&g);
        }
    }
}

impl std::ops::Index<&GroupId> for BoundWaits {
    type Output = BoundWait;

    fn index(&self, g: &GroupId) -> &BoundWait {
        self.get(g).expect("a kept reading for the group")
    }
}

/// Gang cycles that failed on the bound as their last one did ([`bound_wait`]): the plan holds
/// no new result for them; each group's last result stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepeatedFailures {
    /// The groups, in queue order (once per cycle).
    pub groups: Vec<GroupId>,
    /// Their pending pods, each an unschedulable verdict.
    pub pods: u64,
}

/// A change as the kept readings follow it.
#[derive(Clone, Copy, Debug, Default)]
pub struct BoundEvent<'a> {
    /// The groups of the pods it changed (before and after).
    pub groups: [Option<GroupId>; 2],
    /// A pod that came to a node or changed on one, with its priority.
    pub on_node: Option<i32>,
    /// Claims whose object changed (with the object they had, as the store reports them).
    pub claims: &'a [(ClaimId, Option<Box<k8s_openapi::api::resource::v1::ResourceClaim>>)],
}

impl<'a> BoundEvent<'a> {
    /// A change applied: `before` is the group of the pod it names as the store had it, `pod`
    /// that pod's slot then (a pod updated in place without an event keeps it).
    pub fn of(
        cluster: &Cluster,
        before: Option<GroupId>,
        pod: Option<PodId>,
        applied: &'a crate::store::Applied,
    ) -> BoundEvent<'a> {
        let now: Option<&PodInfo> = match &applied.subject {
            crate::store::Subject::Pod { before: crate::store::PodBefore::Deleted(gone), .. } => Some(&**gone),
            crate::store::Subject::Pod { id, .. } => Some(cluster.pod(*id)),
            _ => pod.map(|p| cluster.pod(p)).filter(|p| p.state != PodState::Deleted),
        };
        let deleted =
            matches!(&applied.subject, crate::store::Subject::Pod { before: crate::store::PodBefore::Deleted(_), .. });
        let after = now.and_then(|p| p.group.as_ref()?.as_ref().ok().copied());
        let on_node = now.filter(|p| !deleted && p.state.on_node().is_some()).map(|p| p.priority);
        BoundEvent { groups: [before, after], on_node, claims: &applied.claims }
    }
}

/// Whether the kept readings can follow `change` (else it forgets them all): changes of nodes,
/// pods, claims, PodGroups and disruption budgets — those that keep preemption's count of the
/// lowest bound priority, and a node added or changed (the room is counted afresh at each use).
pub fn follows(change: &crate::store::Change) -> bool {
    super::preemption::keeps_floor(change) || matches!(change, crate::store::Change::UpsertNode(_))
}

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// After gang `g`'s cycle failed on the bound and preemption could not start: keeps what the
    /// cycle read. Only for a PodGroup with an entry of its own whose members share no claim.
    pub(super) fn wait_on_bound(
        &mut self,
        g: GroupId,
        failure: &group::GroupFailure,
        why_not: &WouldNotHelp,
        pending: &[PodId],
        running: usize,
    ) {
        let group::GroupFailure::Bound(OutOfReach { need, wanted, room }) = failure else { return };
        let never = match why_not {
            WouldNotHelp::Never => true,
            WouldNotHelp::NoLowerPriority { .. } => false,
            WouldNotHelp::NoPendingMember | WouldNotHelp::DoesNotFit { .. } => return,
        };
        let c = &*self.cluster;
        let Some(first) = pending.first() else { return };
        if !need.exclusive || c.entry_of_group(g) != QueueEntry::Group(g) {
            return;
        }
        let mut claims: Vec<ClaimId> =
            pending.iter().flat_map(|p| c.pod(*p).claims.iter().filter_map(|r| r.as_ref().ok().copied())).collect();
        claims.sort_unstable();
        claims.dedup();
        let wait = BoundWait {
            need: need.clone(),
            counted: None,
            wanted: *wanted,
            room: *room,
            priority: c.pod(*first).priority,
            never,
            claims,
            pending: pending.to_vec(),
            running,
            num_nodes: c.node_order.len(),
            wake: Wake::ANY,
            checked: Checked::default(),
        };
        self.bound_waits.insert(g, wait);
    }

    /// What the members of `g` wait for, once its cycle's verdicts are in.
    pub(super) fn bound_wait_wakes(&mut self, g: GroupId, wake: Wake, checked: Checked) {
        if let Some(w) = self.bound_waits.get_mut(&g) {
            (w.wake, w.checked) = (wake, checked);
        }
    }

    /// The room gang `g`'s cycle would find short on the bound now, when its kept reading holds.
    fn room_again(&mut self, g: GroupId) -> Option<usize> {
        let num_nodes = self.cluster.node_order.len();
        let w = self.bound_waits.get_mut(&g)?;
        if w.num_nodes != num_nodes {
            return None;
        }
        let (need, mut hint, wanted) = (std::mem::take(&mut w.need), w.counted, w.wanted);
        let room = self.room_short(&need, wanted, &mut hint);
        let w = self.bound_waits.get_mut(&g).expect("read just above");
        (w.need, w.counted) = (need, hint);
        let room = room?;
        debug_assert!(self.would_repeat(g, room), "a gang's kept reading no longer holds");
        Some(room)
    }

    /// When gang `g`'s cycle would fail on the bound exactly as its last one did, reason and
    /// all: what its members wait for, as then, and how many are pending.
    pub(super) fn repeats_bound_failure(&mut self, g: GroupId) -> Option<(Wake, Checked, usize)> {
        let room = self.room_again(g)?;
        let w = &self.bound_waits[&g];
        (room == w.room).then_some((w.wake, w.checked, w.pending.len()))
    }

    /// Gang `g`'s cycle from its kept reading, when it holds and the bound is still short (with
    /// another room than last time): the failure reported as the full cycle reports it.
    pub(super) fn report_bound_again(&mut self, g: GroupId, plan: &mut Plan) -> Option<Attempted> {
        let room = self.room_again(g)?;
        let w = self.bound_waits.get_mut(&g).expect("read just above");
        w.room = room;
        let w = &self.bound_waits[&g];
        let (mut result, mut failed) = self.bound_failure(g, &w.pending, room, w.running);
        result.preemption = Some(Preemption::WouldNotHelp(match w.never {
            true => WouldNotHelp::Never,
            false => WouldNotHelp::NoLowerPriority { priority: w.priority },
        }));
        plan.unschedulable.append(&mut failed);
        plan.groups.push(result);
        Some(Attempted { pending: true, wake: w.wake, checked: w.checked, freed: false })
    }

    /// Forgets what `entry`'s last cycle read (the store moved it).
    pub fn forget_bound_wait(&mut self, entry: QueueEntry) {
        if let QueueEntry::Group(g) = entry {
            self.bound_waits.remove(&g);
        }
    }

    /// Whether some gang's reading is kept.
    pub(super) fn keeps_bound_waits(&self) -> bool {
        !self.bound_waits.is_empty()
    }

    /// Forgets every kept reading.
    pub fn forget_bound_waits(&mut self) {
        self.bound_waits.clear();
    }

    /// After a preemption in the batch, forgets the readings it may have changed: those of the
    /// victims' gangs (fewer members run), of gangs whose pending members share a claim with a
    /// victim or a placed pod (deallocated, or allocated), and of gangs that could preempt the
    /// pods it placed (a lower priority now on a node). Every other reading still holds: the
    /// preemption left its members, their claims and its "no victim" as they were, and its room
    /// is counted again at each use (debug builds check each repeat against a full reading).
    pub(super) fn forget_after_preemption(&mut self, victims: &[PodId], placed: &[PodId]) {
        if self.bound_waits.is_empty() {
            return;
        }
        let c = &*self.cluster;
        for &p in victims.iter().chain(placed) {
            let pod = c.pod(p);
            if let Some(Ok(g)) = &pod.group {
                self.bound_waits.remove(g);
            }
            for &claim in pod.claims.iter().flatten() {
                self.bound_waits.forget_claim(claim);
            }
        }
        if let Some(lowest) = placed.iter().map(|p| c.pod(*p).priority).min() {
            self.bound_waits.forget_where(|w| !w.never && lowest < w.priority);
        }
    }

    /// Forgets the readings `event` may have changed.
    pub(super) fn bound_event(&mut self, event: BoundEvent<'_>) {
        if self.bound_waits.is_empty() {
            return;
        }
        for g in event.groups.into_iter().flatten() {
            self.bound_waits.remove(&g);
        }
        for (c, _) in event.claims {
            self.bound_waits.forget_claim(*c);
        }
        // A lower-priority pod on a node: preemption may start now.
        if let Some(p) = event.on_node {
            self.bound_waits.forget_where(|w| !w.never && p < w.priority);
        }
    }

    /// Whether a full cycle of gang `g` would now read what its kept reading says and find
    /// `room` (the paired check of a cycle from the reading): the same pending members in the
    /// same order and running ones, the bound short by `room`, preemption unable to start.
    fn would_repeat(&mut self, g: GroupId, room: usize) -> bool {
        let group::Members { members, pending, exist, scheduled } = self.members(g);
        let min = self.cluster.groups[g].min_count;
        let w = &self.bound_waits[&g];
        if exist < min || pending != w.pending || scheduled != w.running {
            return false;
        }
        if self.gang_out_of_reach(&pending, scheduled, min).map(|o| o.room) != Some(room) {
            return false;
        }
        let never = self.never_preempts(g, &pending);
        let w = &self.bound_waits[&g];
        if never != w.never || self.cluster.pod(pending[0]).priority != w.priority {
            return false;
        }
        let c = &*self.cluster;
        never
            || c.pods.iter().enumerate().all(|(i, p)| {
                !matches!(p.state, PodState::Bound(_)) || p.priority >= w.priority || members.contains(&PodId(i as u32))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(priority: i32, claims: &[u32]) -> BoundWait {
        BoundWait {
            need: Need::default(),
            counted: None,
            wanted: 2,
            room: 1,
            priority,
            never: false,
            claims: claims.iter().map(|c| ClaimId(*c)).collect(),
            pending: Vec::new(),
            running: 0,
            num_nodes: 1,
            wake: Wake::ANY,
            checked: Checked::default(),
        }
    }

    /// The readings kept, by group slot and by claim, against a plain model, after each of a
    /// fixed run of insertions and removals (a removal moves the last of the live list).
    #[test]
    fn readings_are_found_by_group_and_by_claim_as_they_come_and_go() {
        let mut waits = BoundWaits::default();
        let mut model: std::collections::BTreeMap<u32, i32> = Default::default();
        let check = |waits: &BoundWaits, model: &std::collections::BTreeMap<u32, i32>| {
            let mut live: Vec<u32> = waits.live.iter().map(|g| g.0).collect();
            live.sort_unstable();
            assert_eq!(live, model.keys().copied().collect::<Vec<_>>());
            for (&g, &p) in model {
                assert_eq!(waits.get(&GroupId(g)).map(|w| w.priority), Some(p), "group {g}");
            }
            assert_eq!(waits.is_empty(), model.is_empty());
        };
        for (g, p) in [(3, 10), (0, 20), (7, 30), (5, 40)] {
            waits.insert(GroupId(g), wait(p, &[g]));
            model.insert(g, p);
            check(&waits, &model);
        }
        waits.remove(&GroupId(0));
        model.remove(&0);
        check(&waits, &model);
        waits.forget_claim(ClaimId(7));
        model.remove(&7);
        check(&waits, &model);
        waits.forget_where(|w| w.priority > 15);
        model.retain(|_, p| *p <= 15);
        check(&waits, &model);
        waits.insert(GroupId(9), wait(50, &[3]));
        model.insert(9, 50);
        waits.forget_claim(ClaimId(3));
        model.clear();
        check(&waits, &model);
        assert_eq!(waits.insertions(), 5);
    }
}
