//! The scheduling queue, as kube-scheduler's `PriorityQueue` keeps it: an active queue in
//! PrioritySort order, a backoff queue (1 s doubling to 10 s per entry; with
//! `SchedulerPopFromBackoffQ`, beta and on since 1.33, its entries are tried at once whenever the
//! active queue is empty), an error backoff queue (entries whose attempt ended in an error wait
//! their backoff out), a pool of unschedulable entries that wait for a cluster event that could
//! help them (queueing hints). Pods held back by
//! scheduling gates never enter it (the store keeps them gated and queues them when the gates are
//! gone); a gang below `minCount` is attempted, reported waiting and waits in the unschedulable
//! pool for its pods (upstream's PreEnqueue keeps it out; the outcome is the same).
//!
//! Time is an input (`now`, in milliseconds of the world's clock); the queue never reads a clock.
//! Entries are [`QueueEntry`] values: a pod, a PodGroup or a CompositePodGroup tree, each scheduled
//! as one entity. The queue owns no cluster state: callers say how an entry sorts when they add it
//! ([`OrderKey`]), what an attempt's failure waits for ([`Wake`]), and which events happened
//! ([`SchedulingQueue::on_event`]). For the events whose object a plugin's hint looks at
//! ([`Checked`]), the caller answers for each waiting entry ([`SchedulingQueue::on_event_checked`]).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::cluster::PodState;
use crate::cycle::QueueEntry;

mod backoff;
mod infos;
mod ranks;
use backoff::BackoffQueue;
use infos::Infos;
use ranks::{Rank, Ranks, Renumbering};

/// A point on the world's clock, in milliseconds.
pub type Millis = u64;

/// kube-scheduler's default `podInitialBackoffSeconds` (1 s) and `podMaxBackoffSeconds` (10 s).
pub const INITIAL_BACKOFF: Millis = 1_000;
pub const MAX_BACKOFF: Millis = 10_000;

/// The backoff queue's ordering window with `SchedulerPopFromBackoffQ`: expiries are truncated
/// to whole seconds, entries of one window sorted as the active queue sorts them, and a window
/// is done when the clock reaches the next (`backoffQOrderingWindowDuration`).
pub const BACKOFF_WINDOW: Millis = 1_000;

/// How long a failed entry waits before its next attempt: `initial` after the first failure,
/// doubling with each, at most `max` (`podInitialBackoffSeconds`, `podMaxBackoffSeconds`; a
/// `max` of 0 turns backoff off), and whether an entry still backing off is tried when nothing
/// else is ready (the `SchedulerPopFromBackoffQ` feature gate, beta and on by default since 1.33).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Millis,
    pub max: Millis,
    pub pop_from_backoff_q: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { initial: INITIAL_BACKOFF, max: MAX_BACKOFF, pop_from_backoff_q: true }
    }
}

impl Backoff {
    /// The key an entry that failed at `failed_at` after `attempts` attempts sorts by in the
    /// backoff queues: the end of its backoff, truncated to its window with
    /// `SchedulerPopFromBackoffQ` (`getBackoffTime`, `alignToWindow`).
    fn key(self, attempts: u32, failed_at: Millis) -> Millis {
        let mut backoff = self.initial.min(self.max);
        for _ in 1..attempts {
            backoff = backoff.saturating_mul(2).min(self.max);
            if backoff == self.max {
                break;
            }
        }
        self.align(failed_at.saturating_add(backoff))
    }

    fn align(self, t: Millis) -> Millis {
        if self.pop_from_backoff_q { t - t % BACKOFF_WINDOW } else { t }
    }

    /// Whether an entry whose backoff key is `key` still backs off at `now`
    /// (`isEntityBackingoff`): with windows, until the window after its key begins.
    fn backing_off(self, attempts: u32, key: Millis, now: Millis) -> bool {
        if attempts == 0 || self.max == 0 {
            return false;
        }
        if self.pop_from_backoff_q { key >= self.align(now) } else { key > now }
    }

    /// When an entry whose backoff key is `key` is done backing off.
    fn ready_at(self, key: Millis) -> Millis {
        if self.pop_from_backoff_q && self.max != 0 { key + BACKOFF_WINDOW } else { key }
    }
}
/// `DefaultPodMaxInUnschedulablePodsDuration`: an unschedulable entry is retried after 5 minutes
/// even when no event asked for it.
pub const MAX_IN_UNSCHEDULABLE: Millis = 300_000;

/// How an entry sorts in the active queue (PrioritySort): higher priority first, then older
/// (`creationTimestamp`; none sorts first), then `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OrderKey {
    pub priority: Reverse<i32>,
    pub created: Option<Time>,
    /// Inline when short: compared when the key is ranked (`queue/ranks.rs`), copied without an
    /// allocation.
    pub key: crate::short_name::ShortName,
}

/// The kinds of cluster events that can make an unschedulable entry schedulable: each attempt's
/// failure says which of them it waits for (kube-scheduler's queueing hints, per plugin), and
/// each event wakes the entries waiting for it. A set of bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Wake(u16);

impl Wake {
    pub const NONE: Wake = Wake(0);
    /// A node was added.
    pub const NODE_ADDED: Wake = Wake(1);
    /// A node's allocatable, labels, taints or `unschedulable` changed.
    pub const NODE_CHANGED: Wake = Wake(1 << 1);
    /// A pod on a node was deleted, terminated or preempted: its resources are free.
    pub const ASSIGNED_POD_DELETED: Wake = Wake(1 << 2);
    /// A pod was added or changed (a member for a waiting PodGroup, a claim's consumer).
    pub const POD_CHANGED: Wake = Wake(1 << 3);
    /// A ResourceClaim was deallocated or deleted: its devices are free. (A claim that appears
    /// or changes otherwise wakes only the pods that name it, not every pod DRA rejected:
    /// upstream's `isSchedulableAfterClaimChange`.)
    pub const CLAIM_CHANGED: Wake = Wake(1 << 4);
    /// A ResourceSlice, DeviceClass or DeviceTaintRule was added, changed or removed.
    pub const DEVICES_CHANGED: Wake = Wake(1 << 5);
    /// A PodGroup, CompositePodGroup, Workload, PriorityClass or ResourceClaimTemplate appeared
    /// or changed (objects an entry waits to see).
    pub const WORKLOAD_CHANGED: Wake = Wake(1 << 6);
    /// A PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode or CSIDriver was added,
    /// changed or deleted.
    pub const STORAGE_CHANGED: Wake = Wake(1 << 7);
    /// A pod came to a node: bound by another scheduler, added bound, or this scheduler's
    /// binding confirmed (kube-scheduler's `AssignedPodAdd`, sent when the informer sees the
    /// bound pod, not at Reserve).
    pub const ASSIGNED_POD_ADDED: Wake = Wake(1 << 8);
    /// A pod on a node had its labels changed (`Pod/UpdatePodLabel` of an assigned pod).
    pub const ASSIGNED_POD_LABELS_CHANGED: Wake = Wake(1 << 9);
    /// A node was deleted (its pods stop counting in any topology domain).
    pub const NODE_DELETED: Wake = Wake(1 << 10);
    /// A node's labels changed (`Node/UpdateNodeLabel`); sent with [`Wake::NODE_CHANGED`].
    pub const NODE_LABELS_CHANGED: Wake = Wake(1 << 11);
    /// A node's taints changed (`Node/UpdateNodeTaint`); sent with [`Wake::NODE_CHANGED`].
    pub const NODE_TAINTS_CHANGED: Wake = Wake(1 << 12);
    /// Any event: for failures whose cause the queue cannot narrow down.
    pub const ANY: Wake = Wake(u16::MAX);
    /// How many bits a set has room for.
    const BITS: usize = 16;

    pub const fn union(self, other: Wake) -> Wake {
        Wake(self.0 | other.0)
    }

    /// The events of `self` that are not in `other`.
    pub const fn without(self, other: Wake) -> Wake {
        Wake(self.0 & !other.0)
    }

    /// The events in both.
    pub const fn intersection(self, other: Wake) -> Wake {
        Wake(self.0 & other.0)
    }

    pub fn intersects(self, other: Wake) -> bool {
        self.0 & other.0 != 0
    }

    /// The events that could help a node that `plugin`'s Filter rejected (the plugins'
    /// `EventsToRegister`): adding a node helps every plugin.
    pub fn for_plugin(plugin: &str) -> Wake {
        let node = Wake::NODE_ADDED.union(Wake::NODE_CHANGED);
        match plugin {
            "NodeUnschedulable" | "TaintToleration" | "NodeAffinity" => node,
            "NodeResourcesFit" | "NodePorts" => node.union(Wake::ASSIGNED_POD_DELETED),
            "DynamicResources" => node.union(Wake::CLAIM_CHANGED).union(Wake::DEVICES_CHANGED),
            // Upstream's EventsToRegister: claims, volumes, classes and CSINodes for each; a pod
            // leaving frees a disk or an attachment.
            "VolumeBinding" | "VolumeZone" => node.union(Wake::STORAGE_CHANGED),
            "VolumeRestrictions" | "NodeVolumeLimits" => {
                node.union(Wake::STORAGE_CHANGED).union(Wake::ASSIGNED_POD_DELETED)
            }
            // Upstream: Pod Add|UpdatePodLabel|Delete (assigned pods; the pending pod's own
            // update requeues it in the store) and Node Add|Delete|UpdateNodeLabel|UpdateNodeTaint.
            "PodTopologySpread" => Wake::ASSIGNED_POD.union(Wake::NODE_TOPOLOGY).union(Wake::NODE_TAINTS_CHANGED),
            // Upstream: Pod Add|UpdatePodLabel|Delete and Node Add|UpdateNodeLabel. Node Delete
            // too, broader than upstream: the store stops counting a deleted node's pods at once,
            // where upstream counts them until they are deleted (an assigned pod's Delete).
            "InterPodAffinity" => Wake::ASSIGNED_POD.union(Wake::NODE_TOPOLOGY),
            _ => Wake::ANY,
        }
    }

    /// A pod on a node added, relabeled or gone: what changes the pods PodTopologySpread and
    /// InterPodAffinity count.
    const ASSIGNED_POD: Wake =
        Wake(Wake::ASSIGNED_POD_ADDED.0 | Wake::ASSIGNED_POD_LABELS_CHANGED.0 | Wake::ASSIGNED_POD_DELETED.0);

    /// A node added, deleted or relabeled: what changes the topology domains.
    const NODE_TOPOLOGY: Wake = Wake(Wake::NODE_ADDED.0 | Wake::NODE_DELETED.0 | Wake::NODE_LABELS_CHANGED.0);

    /// The events a node's update was: [`Wake::NODE_CHANGED`], with the label and taint
    /// changes it made.
    pub fn node_updated(labels_changed: bool, taints_changed: bool) -> Wake {
        let mut wake = Wake::NODE_CHANGED;
        if labels_changed {
            wake = wake.union(Wake::NODE_LABELS_CHANGED);
        }
        if taints_changed {
            wake = wake.union(Wake::NODE_TAINTS_CHANGED);
        }
        wake
    }

    /// The events a pod's change was for pods that wait on where others run: it left a node,
    /// came to one (a binding confirming this scheduler's assumption included), or had its
    /// labels changed on one. `old` is its state before (`Deleted` for a new pod).
    pub fn pod_updated(old: &PodState, new: &PodState, relabeled: bool) -> Wake {
        let (was_on, is_on) = (old.on_node(), new.on_node());
        let confirmed = matches!((old, new), (PodState::Assumed(_), PodState::Bound(_)));
        let mut wake = Wake::NONE;
        if was_on.is_some() && was_on != is_on {
            wake = wake.union(Wake::ASSIGNED_POD_DELETED);
        }
        if is_on.is_some() && (was_on != is_on || confirmed) {
            wake = wake.union(Wake::ASSIGNED_POD_ADDED);
        }
        if was_on.is_some() && was_on == is_on && relabeled {
            wake = wake.union(Wake::ASSIGNED_POD_LABELS_CHANGED);
        }
        wake
    }

    /// The bits set, by position.
    fn bits(self) -> impl Iterator<Item = usize> {
        (0..Wake::BITS).filter(move |b| self.0 & (1 << b) != 0)
    }
}

/// The events of an entry's [`Wake`] set that only PodTopologySpread or InterPodAffinity wait
/// for, whose hints look at the event's object (the pod that came, went or was relabeled; the
/// node added, changed or deleted): for those the entry is woken only when the hint of a plugin
/// that rejected it says the object may help. Any other event it waits for wakes it outright.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Checked {
    pub events: Wake,
    /// PodTopologySpread rejected the entry.
    pub spread: bool,
    /// InterPodAffinity rejected the entry.
    pub affinity: bool,
    /// Entries of one group (not 0) that wait only for checked events are judged alike by the
    /// hints — the caller vouches for it ([`SchedulingQueue::group_peer`]) — so an event asks the
    /// hint once for all of them.
    pub group: u64,
}

/// A group of unschedulable entries judged alike: what they wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    wake: Wake,
    checked: Checked,
}

impl GroupKey {
    /// The group an entry waiting for `wake` joins: only one that waits for checked events alone.
    fn of(wake: Wake, checked: Checked) -> Option<GroupKey> {
        (checked.group != 0 && wake.without(checked.events) == Wake::NONE).then_some(GroupKey { wake, checked })
    }
}

/// An entry in the unschedulable pool.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    since: Millis,
    wake: Wake,
    checked: Checked,
}

/// Where an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Active,
    Backoff,
    Unschedulable,
    /// Popped and not yet reported back.
    InFlight,
    /// In the error backoff queue: its attempt ended in an error (its binding failed), not a
    /// verdict; it is tried when its backoff is over, never earlier.
    ErrorBackoff,
}

#[derive(Clone, Debug)]
struct Info {
    /// The rank of the entry's order key ([`Ranks`]): what the queues hold and compare.
    rank: Rank,
    place: Place,
    /// Attempts so far (the backoff doubles with each).
    attempts: u32,
    /// When the last attempt failed.
    failed_at: Millis,
    /// What the entry waits for, in the unschedulable pool.
    wake: Wake,
    /// Which of those events its hints check.
    checked: Checked,
    /// The move-request cycle when the entry was popped.
    popped_at_cycle: u64,
    /// The entry's index in `SchedulingQueue::unschedulable` while it is there.
    slot: u32,
}

impl Info {
    /// Whether a backoff queue's item (`key`, `rank`) in `place` is this entry's, not a stale
    /// one left by a removal.
    fn is_held(&self, place: Place, key: Millis, rank: Rank, limits: Backoff) -> bool {
        self.place == place && limits.key(self.attempts, self.failed_at) == key && self.rank == rank
    }

    /// An entry that waits for nothing yet.
    fn new(rank: Rank, place: Place, attempts: u32, failed_at: Millis) -> Info {
        Info {
            rank,
            place,
            attempts,
            failed_at,
            wake: Wake::NONE,
            checked: Checked::default(),
            popped_at_cycle: 0,
            slot: 0,
        }
    }
}

/// The scheduling queue.
#[derive(Clone, Debug, Default)]
pub struct SchedulingQueue {
    info: Infos<Info>,
    /// The order keys the entries hold, as numbers: the queues below hold ranks.
    ranks: Ranks,
    active: BinaryHeap<Reverse<(Rank, QueueEntry)>>,
    /// Entries added together ([`SchedulingQueue::add_all`]), sorted, the first last: popped
    /// alongside the heap without a heap operation each.
    sorted: Vec<(Rank, QueueEntry)>,
    /// By backoff key ([`Backoff::key`]), then queue order.
    backoff: BackoffQueue,
    /// Entries whose attempt ended in an error, as `backoff`.
    error_backoff: BackoffQueue,
    /// The unschedulable pool outside groups: each entry with the time it joined and what it
    /// waits for (a copy of its info's, so that an event's scan reads no other map), in no
    /// particular order (an entry's index is its info's `slot`: joining and leaving take no
    /// search). What an event wakes is requeued into the queues' own orders, so the pool's order
    /// decides nothing.
    unschedulable: Vec<(QueueEntry, Waiting)>,
    /// The rest of the unschedulable pool: entries in groups ([`Checked::group`]), with the time
    /// each joined.
    grouped: BTreeMap<GroupKey, BTreeMap<QueueEntry, Millis>>,
    /// How many entries in the unschedulable pool wait for each [`Wake`] bit: an event no entry
    /// waits for (a binding confirmed, a node's heartbeat) wakes nothing without a scan.
    waiting: [u32; Wake::BITS],
    /// Counts pops; an event records the count (`moveRequestCycle`): an entry whose attempt was
    /// in flight during an event goes to backoff rather than waiting for another event.
    cycle: u64,
    move_request_cycle: u64,
    limits: Backoff,
}

impl SchedulingQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// A queue whose failed entries back off as `backoff` says.
    pub fn with_backoff(backoff: Backoff) -> Self {
        SchedulingQueue { limits: backoff, ..Self::default() }
    }

    /// Adds a new entry to the active queue; an entry already known is left where it is.
    pub fn add(&mut self, entry: QueueEntry, order: OrderKey) {
        if self.info.contains_key(&entry) {
            return;
        }
        let rank = self.hold(&order);
        self.active.push(Reverse((rank, entry)));
        self.info.insert(entry, Info::new(rank, Place::Active, 0, 0));
    }

    /// Adds many new entries to the active queue at once (a snapshot's pending entries).
    pub fn add_all(&mut self, entries: Vec<(OrderKey, QueueEntry)>) {
        let mut entries: Vec<(OrderKey, QueueEntry)> =
            entries.into_iter().filter(|(_, e)| !self.info.contains_key(e)).collect();
        // An entry listed twice is added once, with its first order (a stable sort).
        entries.sort_by_key(|(_, e)| *e);
        entries.dedup_by_key(|(_, e)| *e);
        let orders: Vec<&OrderKey> = entries.iter().map(|(order, _)| order).collect();
        let (ranks, map) = self.ranks.hold_all(&orders);
        self.renumber(&map);
        let mut batch = Vec::with_capacity(entries.len());
        for ((_, entry), rank) in entries.into_iter().zip(ranks) {
            self.info.insert(entry, Info::new(rank, Place::Active, 0, 0));
            batch.push((rank, entry));
        }
        batch.sort_unstable_by(|a, b| b.cmp(a));
        if self.sorted.is_empty() {
            self.sorted = batch;
        } else {
            self.active.extend(batch.into_iter().map(Reverse));
        }
    }

    /// An entry whose binding failed after its cycle succeeded (it had left the queue): it comes
    /// back in backoff, as kube-scheduler's `handleBindingCycleError` sends it. An entry still
    /// waiting in the queue for other pods is moved on as an event would.
    pub fn add_after_binding_failure(&mut self, entry: QueueEntry, order: OrderKey, now: Millis) {
        if self.info.contains_key(&entry) {
            self.requeue(entry, now);
            return;
        }
        let rank = self.hold(&order);
        let info = Info::new(rank, Place::ErrorBackoff, 1, now);
        self.error_backoff.insert(self.key(&info), rank, entry);
        self.info.insert(entry, info);
    }

    /// Removes an entry wherever it is (deleted, or scheduled by other means).
    pub fn remove(&mut self, entry: QueueEntry) {
        let Some(info) = self.info.remove(&entry) else { return };
        self.ranks.release(info.rank);
        match info.place {
            Place::Backoff => self.backoff.forget(self.key(&info)),
            Place::ErrorBackoff => self.error_backoff.forget(self.key(&info)),
            Place::Unschedulable => {
                self.leave_pool(entry, info.slot, info.wake, info.checked);
                self.count_waiting(info.wake, false);
            }
            // Popped lazily: `pop` skips entries it no longer knows.
            Place::Active | Place::InFlight => {}
        }
    }

    /// The next entry to schedule at `now`: entries whose backoff has expired join the active
    /// queue first; when it is empty, with `SchedulerPopFromBackoffQ`, the backoff queue's first
    /// entry is tried before its backoff is over (never an entry of the error backoff queue).
    /// The entry is in flight until [`SchedulingQueue::done`] or [`SchedulingQueue::failed`].
    pub fn pop(&mut self, now: Millis) -> Option<QueueEntry> {
        self.pop_since(now).map(|(entry, _)| entry)
    }

    /// How many entries were popped so far: an entry popped later than [`SchedulingQueue::pops`]
    /// said is popped at a higher count.
    pub fn pops(&self) -> u64 {
        self.cycle
    }

    /// [`SchedulingQueue::pop`], with the count of pops at the entry's pop before this one (0
    /// for its first): whether it was tried already since some point ([`SchedulingQueue::pops`]).
    pub fn pop_since(&mut self, now: Millis) -> Option<(QueueEntry, u64)> {
        self.flush_backoff(now);
        loop {
            let from_sorted = match (self.sorted.last(), self.active.peek()) {
                (None, None) => return self.pop_backoff(),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(s), Some(Reverse(h))) => s <= h,
            };
            let (rank, entry) = if from_sorted {
                self.sorted.pop().expect("checked above")
            } else {
                self.active.pop().expect("checked above").0
            };
            let Some(info) = self.info.get_mut(&entry) else { continue };
            if info.place != Place::Active || info.rank != rank {
                continue; // a stale heap item: the entry was removed, or moved and re-added
            }
            let before = info.popped_at_cycle;
            Self::take_off(&mut self.cycle, info);
            return Some((entry, before));
        }
    }

    /// The backoff queue's first entry, in flight, when `SchedulerPopFromBackoffQ` is on
    /// (`popBackoff`).
    fn pop_backoff(&mut self) -> Option<(QueueEntry, u64)> {
        if !self.limits.pop_from_backoff_q {
            return None;
        }
        let (info_map, limits, cycle) = (&mut self.info, self.limits, &mut self.cycle);
        let mut before = 0;
        // The first live item's entry is taken off as it is found.
        let live = |key, rank, entry| match info_map.get_mut(&entry) {
            Some(info) if info.is_held(Place::Backoff, key, rank, limits) => {
                before = info.popped_at_cycle;
                Self::take_off(cycle, info);
                true
            }
            _ => false,
        };
        let (_, _, entry) = self.backoff.pop_first(live)?;
        Some((entry, before))
    }

    /// A popped entry's attempt begins: it is in flight, one attempt more, in a new cycle.
    fn take_off(cycle: &mut u64, info: &mut Info) {
        *cycle += 1;
        info.place = Place::InFlight;
        info.attempts += 1;
        info.popped_at_cycle = *cycle;
    }

    /// The entry's attempt succeeded: it leaves the queue.
    pub fn done(&mut self, entry: QueueEntry) {
        debug_assert!(self.info.get(&entry).is_none_or(|i| i.place == Place::InFlight), "done on a queued entry");
        if let Some(info) = self.info.remove(&entry) {
            self.ranks.release(info.rank);
        }
    }

    /// The entry's attempt failed at `now`, waiting for `wake`: it goes to the unschedulable pool,
    /// or to backoff when an event came while it was in flight (the event may already have
    /// helped it). A failure the engine cannot tie to plugins waits for [`Wake::ANY`].
    pub fn failed(&mut self, entry: QueueEntry, wake: Wake, now: Millis) {
        self.failed_checked(entry, wake, Checked::default(), now);
    }

    /// [`SchedulingQueue::failed`], with the events of `wake` whose object the entry's hints
    /// check.
    pub fn failed_checked(&mut self, entry: QueueEntry, wake: Wake, checked: Checked, now: Millis) {
        let move_request_cycle = self.move_request_cycle;
        let Some(info) = self.info.get_mut(&entry) else { return };
        debug_assert_eq!(info.place, Place::InFlight, "failed on an entry that was not popped");
        info.failed_at = now;
        info.wake = wake;
        info.checked = checked;
        if move_request_cycle >= info.popped_at_cycle {
            info.place = Place::Backoff;
            self.backoff.insert(self.limits.key(info.attempts, info.failed_at), info.rank, entry);
        } else {
            info.place = Place::Unschedulable;
            match GroupKey::of(wake, checked) {
                Some(key) => drop(self.grouped.entry(key).or_default().insert(entry, now)),
                None => {
                    info.slot = self.unschedulable.len() as u32;
                    self.unschedulable.push((entry, Waiting { since: now, wake, checked }));
                }
            }
            self.count_waiting(wake, true);
        }
    }

    /// An entry of the group that one waiting for `wake` with `checked` would join, if any: the
    /// caller checks that the two are alike before vouching with the same [`Checked::group`].
    pub fn group_peer(&self, wake: Wake, checked: Checked) -> Option<QueueEntry> {
        let key = GroupKey::of(wake, checked)?;
        self.grouped.get(&key).and_then(|m| m.keys().next().copied())
    }

    /// Takes an unschedulable entry out of the pool's maps.
    fn leave_pool(&mut self, entry: QueueEntry, slot: u32, wake: Wake, checked: Checked) {
        let Some(key) = GroupKey::of(wake, checked) else {
            let (left, _) = self.unschedulable.swap_remove(slot as usize);
            debug_assert_eq!(left, entry, "an unschedulable entry's slot is its place in the pool");
            if let Some((moved, _)) = self.unschedulable.get(slot as usize)
                && let Some(info) = self.info.get_mut(moved)
            {
                info.slot = slot;
            }
            return;
        };
        if let Some(members) = self.grouped.get_mut(&key) {
            members.remove(&entry);
            if members.is_empty() {
                self.grouped.remove(&key);
            }
        }
    }

    /// A cluster event of kind `event` happened at `now`: every unschedulable entry
    /// waiting for it moves to the active queue (or to backoff, while its backoff lasts).
    pub fn on_event(&mut self, event: Wake, now: Millis) {
        self.on_event_checked(event, now, |_, _| true);
    }

    /// [`SchedulingQueue::on_event`] for an event with an object: an entry that waits for it only
    /// through [`Checked`] events is woken when `hint` says the object may help it.
    pub fn on_event_checked(&mut self, event: Wake, now: Millis, mut hint: impl FnMut(QueueEntry, Checked) -> bool) {
        self.move_request_cycle = self.cycle;
        if !event.bits().any(|b| self.waiting[b] > 0) {
            return;
        }
        let mut woken: Vec<QueueEntry> = self
            .unschedulable
            .iter()
            .filter(|(e, w)| {
                let hit = w.wake.intersection(event);
                hit != Wake::NONE && (hit.without(w.checked.events) != Wake::NONE || hint(*e, w.checked))
            })
            .map(|(e, _)| *e)
            .collect();
        // A group waits for checked events only: one answer of the hint for all its entries.
        for (key, members) in &self.grouped {
            let first = members.keys().next().copied();
            if key.wake.intersects(event) && first.is_some_and(|e| hint(e, key.checked)) {
                woken.extend(members.keys().copied());
            }
        }
        for entry in woken {
            self.requeue(entry, now);
        }
    }

    /// Moves one waiting entry back to the queue (an event that concerns it alone, such as the
    /// arrival of a claim it names); a new entry is added.
    pub fn activate(&mut self, entry: QueueEntry, order: OrderKey, now: Millis) {
        if self.info.contains_key(&entry) {
            self.requeue(entry, now);
        } else {
            self.add(entry, order);
        }
    }

    /// Moves unschedulable entries that have waited [`MAX_IN_UNSCHEDULABLE`] or longer back to
    /// the queue (`flushUnschedulablePodsLeftover`).
    pub fn flush_unschedulable(&mut self, now: Millis) {
        let due = |since: Millis| now.saturating_sub(since) >= MAX_IN_UNSCHEDULABLE;
        let mut old: Vec<QueueEntry> =
            self.unschedulable.iter().filter(|(_, w)| due(w.since)).map(|(e, _)| *e).collect();
        for members in self.grouped.values() {
            old.extend(members.iter().filter(|(_, since)| due(**since)).map(|(e, _)| *e));
        }
        for entry in old {
            self.requeue(entry, now);
        }
    }

    /// When the next entry in backoff becomes ready, if any.
    pub fn next_backoff_expiry(&self) -> Option<Millis> {
        [&self.backoff, &self.error_backoff]
            .into_iter()
            .filter_map(BackoffQueue::first_key)
            .map(|t| self.limits.ready_at(t))
            .min()
    }

    /// Nothing to schedule now or after a backoff: the rest waits for events.
    pub fn is_idle(&self) -> bool {
        self.backoff.is_empty()
            && self.error_backoff.is_empty()
            && !self.info.values().any(|i| i.place == Place::Active)
    }

    /// How many attempts an entry has had.
    pub fn attempts(&self, entry: QueueEntry) -> u32 {
        self.info.get(&entry).map_or(0, |i| i.attempts)
    }

    /// Counts per place: (active, backoff, unschedulable) — `scheduler_pending_pods`.
    pub fn counts(&self) -> (usize, usize, usize) {
        let active = self.info.values().filter(|i| i.place == Place::Active).count();
        let grouped: usize = self.grouped.values().map(BTreeMap::len).sum();
        (active, self.backoff.len() + self.error_backoff.len(), self.unschedulable.len() + grouped)
    }

    fn requeue(&mut self, entry: QueueEntry, now: Millis) {
        let Some(info) = self.info.get_mut(&entry) else { return };
        if info.place != Place::Unschedulable {
            return;
        }
        let (slot, wake, checked) = (info.slot, info.wake, info.checked);
        self.leave_pool(entry, slot, wake, checked);
        let limits = self.limits;
        let Some(info) = self.info.get_mut(&entry) else { return };
        let key = limits.key(info.attempts, info.failed_at);
        if limits.backing_off(info.attempts, key, now) {
            info.place = Place::Backoff;
            self.backoff.insert(key, info.rank, entry);
        } else {
            info.place = Place::Active;
            self.active.push(Reverse((info.rank, entry)));
        }
        self.count_waiting(wake, false);
    }

    /// Counts an entry that joins (`joins`) or leaves the unschedulable pool waiting for `wake`.
    fn count_waiting(&mut self, wake: Wake, joins: bool) {
        for b in wake.bits() {
            let n = &mut self.waiting[b];
            *n = if joins { *n + 1 } else { n.saturating_sub(1) };
        }
    }

    /// Moves the entries of both backoff queues whose backoff is over to the active queue
    /// (`popAllBackoffCompleted`).
    fn flush_backoff(&mut self, now: Millis) {
        let limits = self.limits;
        for (queue, place) in [(&mut self.backoff, Place::Backoff), (&mut self.error_backoff, Place::ErrorBackoff)] {
            while let Some((key, items)) = queue.take_first_if(|key| limits.ready_at(key) <= now) {
                for Reverse((rank, entry)) in items {
                    let Some(info) = self.info.get_mut(&entry) else { continue };
                    if info.is_held(place, key, rank, limits) {
                        info.place = Place::Active;
                        self.active.push(Reverse((rank, entry)));
                    }
                }
            }
        }
    }

    /// The rank of `order` for an entry that comes with it; the queue's entries and items follow
    /// when every key is ranked anew.
    fn hold(&mut self, order: &OrderKey) -> Rank {
        let (rank, renumbered) = self.ranks.hold(order);
        if let Some(map) = renumbered {
            self.renumber(&map);
        }
        rank
    }

    /// Moves every entry and item to its order's new rank (a stale item whose rank no key held
    /// goes).
    fn renumber(&mut self, map: &Renumbering) {
        for info in self.info.values_mut() {
            info.rank = map.of(info.rank).expect("an entry's key is held");
        }
        let moved = |(rank, entry): (Rank, QueueEntry)| Some((map.of(rank)?, entry));
        let active = std::mem::take(&mut self.active).into_iter().filter_map(|Reverse(item)| moved(item));
        self.active = active.map(Reverse).collect();
        self.sorted = std::mem::take(&mut self.sorted).into_iter().filter_map(moved).collect();
        self.backoff.renumber(map);
        self.error_backoff.renumber(map);
    }

    /// An entry's key in the backoff queues.
    fn key(&self, info: &Info) -> Millis {
        self.limits.key(info.attempts, info.failed_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::PodId;

    fn key(priority: i32, name: &str) -> OrderKey {
        OrderKey { priority: Reverse(priority), created: None, key: name.into() }
    }

    fn pod(i: u32) -> QueueEntry {
        QueueEntry::Pod(PodId(i))
    }

    #[test]
    fn entries_keep_their_order_when_every_key_is_ranked_anew() {
        // Each key sorts before all the keys added before it: the room before the first one
        // halves each time and runs out, again and again (every key is ranked anew), while
        // entries wait in the active queue, in backoff and in the pool.
        let mut q = SchedulingQueue::new();
        let name = |i: u32| format!("p{:03}", 500 - i);
        let mut failed = Vec::new();
        for i in 0..300 {
            q.add(pod(i), key(0, &name(i)));
            if i % 3 == 0 {
                let popped = q.pop(0).expect("one was just added");
                assert_eq!(popped, pod(i), "the newest key sorts first");
                let wake = if i % 2 == 0 { Wake::ASSIGNED_POD_DELETED } else { Wake::NODE_ADDED };
                q.failed(popped, wake, 0);
                failed.push(i);
            }
            if i == 150 {
                q.on_event(Wake::ASSIGNED_POD_DELETED, 0);
            }
        }
        q.on_event(Wake::NODE_ADDED.union(Wake::ASSIGNED_POD_DELETED), 0);
        // The entries never tried come first (active queue), in name order; then the failed ones
        // (in backoff, tried at once as nothing else is), in name order.
        let mut want: Vec<u32> = (0..300).filter(|i| !failed.contains(i)).collect();
        want.sort_by_key(|i| name(*i));
        failed.sort_by_key(|i| name(*i));
        want.extend(failed);
        let got: Vec<QueueEntry> = std::iter::from_fn(|| q.pop(0)).collect();
        assert_eq!(got, want.into_iter().map(pod).collect::<Vec<_>>());
    }

    #[test]
    fn a_pop_says_when_the_entry_was_popped_before() {
        let mut q = SchedulingQueue::new();
        q.add(pod(0), key(0, "a"));
        q.add(pod(1), key(0, "b"));
        assert_eq!(q.pops(), 0);
        assert_eq!(q.pop_since(0), Some((pod(0), 0)), "never popped before");
        q.failed(pod(0), Wake::ASSIGNED_POD_DELETED, 0);
        let began = q.pops();
        assert_eq!(began, 1);
        assert_eq!(q.pop_since(0), Some((pod(1), 0)));
        q.failed(pod(1), Wake::ASSIGNED_POD_DELETED, 0);
        q.on_event(Wake::ASSIGNED_POD_DELETED, 0);
        // Both come back (from backoff, as nothing else is ready): each was popped at its count.
        assert_eq!(q.pop_since(0), Some((pod(0), 1)), "popped before `began`");
        assert_eq!(q.pop_since(0), Some((pod(1), 2)), "popped after `began`");
        assert_eq!(q.pops(), 4);
    }

    #[test]
    fn pops_in_priority_then_name_order() {
        let mut q = SchedulingQueue::new();
        q.add(pod(0), key(0, "b"));
        q.add(pod(1), key(10, "z"));
        q.add(pod(2), key(0, "a"));
        assert_eq!([q.pop(0), q.pop(0), q.pop(0), q.pop(0)], [Some(pod(1)), Some(pod(2)), Some(pod(0)), None]);
    }

    /// A queue as kube-scheduler's with `--feature-gates=SchedulerPopFromBackoffQ=false`.
    fn without_pop_from_backoff_q() -> SchedulingQueue {
        SchedulingQueue::with_backoff(Backoff { pop_from_backoff_q: false, ..Backoff::default() })
    }

    #[test]
    fn a_failed_entry_waits_for_its_event_then_backs_off() {
        let mut q = without_pop_from_backoff_q();
        q.add(pod(0), key(0, "a"));
        assert_eq!(q.pop(0), Some(pod(0)));
        q.failed(pod(0), Wake::ASSIGNED_POD_DELETED, 0);
        assert!(q.is_idle());
        q.on_event(Wake::DEVICES_CHANGED, 100);
        assert!(q.is_idle(), "an event it does not wait for leaves it alone");
        q.on_event(Wake::ASSIGNED_POD_DELETED, 100);
        assert_eq!(q.pop(100), None, "still in its 1 s backoff");
        assert_eq!(q.next_backoff_expiry(), Some(1_000));
        assert_eq!(q.pop(1_000), Some(pod(0)));
        assert_eq!(q.attempts(pod(0)), 2);
    }

    /// `SchedulerPopFromBackoffQ` (on by default): an entry woken during its backoff is tried as
    /// soon as nothing in the active queue is ready, before entries that are.
    #[test]
    fn a_woken_entry_is_tried_at_once_when_nothing_else_is_ready() {
        let mut q = SchedulingQueue::new();
        q.add(pod(0), key(0, "a"));
        assert_eq!(q.pop(0), Some(pod(0)));
        q.failed(pod(0), Wake::ASSIGNED_POD_DELETED, 0);
        q.on_event(Wake::ASSIGNED_POD_DELETED, 100);
        assert_eq!(q.counts(), (0, 1, 0), "in backoff");
        q.add(pod(1), key(0, "b"));
        assert_eq!(q.pop(100), Some(pod(1)), "the active queue first");
        assert_eq!(q.pop(100), Some(pod(0)), "then the backoff queue, its backoff not over");
        assert_eq!(q.pop(100), None);
    }

    /// With `SchedulerPopFromBackoffQ`, backoff ends on whole seconds and, within one, entries
    /// sort as the active queue sorts them: the higher priority first, though its backoff ends
    /// later in the second.
    #[test]
    fn backoff_windows_are_whole_seconds_sorted_by_priority() {
        let mut q = SchedulingQueue::new();
        q.add(pod(0), key(0, "low"));
        q.add(pod(1), key(10, "high"));
        assert_eq!(q.pop(0), Some(pod(1)));
        q.failed(pod(1), Wake::NODE_ADDED, 300); // backoff to 1,300 ms: the window of 1 s
        assert_eq!(q.pop(0), Some(pod(0)));
        q.failed(pod(0), Wake::NODE_ADDED, 0); // to 1,000 ms: the same window
        q.on_event(Wake::NODE_ADDED, 500);
        assert_eq!(q.next_backoff_expiry(), Some(2_000), "the window of 1 s is over at 2 s");
        assert_eq!(q.pop(1_999), Some(pod(1)), "the backoff queue's first: the higher priority");
        q.failed(pod(1), Wake::NODE_ADDED, 1_999);
        q.flush_backoff(2_000);
        assert_eq!(q.counts(), (1, 0, 1), "at 2 s, the other one's backoff is over");
    }

    /// An entry whose binding failed (an error, not a verdict) waits its backoff out, even with
    /// nothing else to do.
    #[test]
    fn an_entry_whose_binding_failed_waits_out_its_backoff() {
        let mut q = SchedulingQueue::new();
        q.add_after_binding_failure(pod(0), key(0, "a"), 0);
        assert_eq!(q.pop(0), None);
        assert_eq!(q.next_backoff_expiry(), Some(2_000), "1 s, then the end of its window");
        assert_eq!(q.pop(1_999), None);
        assert_eq!(q.pop(2_000), Some(pod(0)));
        let mut off = without_pop_from_backoff_q();
        off.add_after_binding_failure(pod(0), key(0, "a"), 0);
        assert_eq!(off.next_backoff_expiry(), Some(1_000), "without windows");
    }

    #[test]
    fn a_group_of_checked_entries_asks_the_hint_once() {
        let mut q = SchedulingQueue::new();
        let wake = Wake::ASSIGNED_POD_ADDED.union(Wake::ASSIGNED_POD_DELETED);
        let checked = Checked { events: wake, affinity: true, group: 7, ..Checked::default() };
        for i in 0..3 {
            q.add(pod(i), key(0, &format!("p{i}")));
        }
        for _ in 0..3 {
            let e = q.pop(0).unwrap();
            // The first two join group 7; the third also waits for a node: not grouped.
            let w = if e == pod(2) { wake.union(Wake::NODE_ADDED) } else { wake };
            assert_eq!(q.group_peer(w, checked), (e == pod(1)).then_some(pod(0)));
            q.failed_checked(e, w, checked, 0);
        }
        assert_eq!(q.counts().2, 3);
        let mut asked = Vec::new();
        q.on_event_checked(Wake::ASSIGNED_POD_ADDED, 2_000, |e, _| {
            asked.push(e);
            false
        });
        assert_eq!(asked, vec![pod(2), pod(0)], "the ungrouped entry, then the group's first");
        assert_eq!(q.counts().2, 3, "the hint said no");
        q.on_event_checked(Wake::ASSIGNED_POD_DELETED, 2_000, |e, _| e == pod(0));
        assert_eq!(q.counts(), (2, 0, 1), "the group woken whole; the other entry still waits");
        q.remove(pod(2));
        assert_eq!(q.counts(), (2, 0, 0));
    }

    #[test]
    fn backoff_doubles_up_to_ten_seconds() {
        let mut q = without_pop_from_backoff_q();
        q.add(pod(0), key(0, "a"));
        let mut now = 0;
        let mut waits = Vec::new();
        for _ in 0..6 {
            assert_eq!(q.pop(now), Some(pod(0)));
            q.failed(pod(0), Wake::ANY, now);
            q.on_event(Wake::NODE_ADDED, now);
            let next = q.next_backoff_expiry().unwrap();
            waits.push(next - now);
            now = next;
        }
        assert_eq!(waits, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
    }

    #[test]
    fn an_event_during_the_attempt_sends_the_entry_to_backoff() {
        let mut q = without_pop_from_backoff_q();
        q.add(pod(0), key(0, "a"));
        assert_eq!(q.pop(0), Some(pod(0)));
        q.on_event(Wake::ASSIGNED_POD_DELETED, 0);
        q.failed(pod(0), Wake::NODE_ADDED, 0);
        assert_eq!(q.next_backoff_expiry(), Some(1_000));
    }

    #[test]
    fn unschedulable_entries_are_flushed_after_five_minutes() {
        let mut q = SchedulingQueue::new();
        q.add(pod(0), key(0, "a"));
        q.pop(0);
        q.failed(pod(0), Wake::NODE_ADDED, 0);
        q.flush_unschedulable(MAX_IN_UNSCHEDULABLE - 1);
        assert!(q.is_idle());
        q.flush_unschedulable(MAX_IN_UNSCHEDULABLE);
        assert_eq!(q.pop(MAX_IN_UNSCHEDULABLE), Some(pod(0)));
    }

    /// The kinds of events that exist, one bit each.
    const EVENTS: [Wake; 13] = [
        Wake::NODE_ADDED,
        Wake::NODE_CHANGED,
        Wake::ASSIGNED_POD_DELETED,
        Wake::POD_CHANGED,
        Wake::CLAIM_CHANGED,
        Wake::DEVICES_CHANGED,
        Wake::WORKLOAD_CHANGED,
        Wake::STORAGE_CHANGED,
        Wake::ASSIGNED_POD_ADDED,
        Wake::ASSIGNED_POD_LABELS_CHANGED,
        Wake::NODE_DELETED,
        Wake::NODE_LABELS_CHANGED,
        Wake::NODE_TAINTS_CHANGED,
    ];

    fn woken_by(plugin: &str) -> Vec<Wake> {
        EVENTS.into_iter().filter(|e| Wake::for_plugin(plugin).intersects(*e)).collect()
    }

    #[test]
    fn pod_topology_spread_waits_for_assigned_pods_and_node_topology() {
        assert_eq!(
            woken_by("PodTopologySpread"),
            [
                Wake::NODE_ADDED,
                Wake::ASSIGNED_POD_DELETED,
                Wake::ASSIGNED_POD_ADDED,
                Wake::ASSIGNED_POD_LABELS_CHANGED,
                Wake::NODE_DELETED,
                Wake::NODE_LABELS_CHANGED,
                Wake::NODE_TAINTS_CHANGED,
            ]
        );
    }

    #[test]
    fn inter_pod_affinity_waits_for_assigned_pods_and_node_labels() {
        assert_eq!(
            woken_by("InterPodAffinity"),
            [
                Wake::NODE_ADDED,
                Wake::ASSIGNED_POD_DELETED,
                Wake::ASSIGNED_POD_ADDED,
                Wake::ASSIGNED_POD_LABELS_CHANGED,
                Wake::NODE_DELETED,
                Wake::NODE_LABELS_CHANGED,
            ]
        );
    }

    #[test]
    fn other_plugins_ignore_the_new_pod_and_node_events() {
        let new = [
            Wake::ASSIGNED_POD_ADDED,
            Wake::ASSIGNED_POD_LABELS_CHANGED,
            Wake::NODE_DELETED,
            Wake::NODE_LABELS_CHANGED,
            Wake::NODE_TAINTS_CHANGED,
        ];
        for plugin in ["NodeResourcesFit", "TaintToleration", "NodeAffinity", "DynamicResources", "VolumeBinding"] {
            assert!(new.iter().all(|e| !Wake::for_plugin(plugin).intersects(*e)), "{plugin}");
        }
        assert!(new.iter().all(|e| Wake::for_plugin("SomethingElse").intersects(*e)), "any event");
    }

    #[test]
    fn a_node_update_says_whether_labels_or_taints_changed() {
        assert_eq!(Wake::node_updated(false, false), Wake::NODE_CHANGED);
        assert_eq!(Wake::node_updated(true, false), Wake::NODE_CHANGED.union(Wake::NODE_LABELS_CHANGED));
        assert_eq!(Wake::node_updated(false, true), Wake::NODE_CHANGED.union(Wake::NODE_TAINTS_CHANGED));
    }

    #[test]
    fn a_pod_update_is_an_assigned_pod_event_only_when_it_is_on_a_node() {
        use crate::cluster::NodeId;
        let (n0, n1) = (NodeId(0), NodeId(1));
        let up = Wake::pod_updated;
        assert_eq!(up(&PodState::Deleted, &PodState::Bound(n0), false), Wake::ASSIGNED_POD_ADDED);
        assert_eq!(up(&PodState::Pending, &PodState::Bound(n0), true), Wake::ASSIGNED_POD_ADDED);
        assert_eq!(up(&PodState::Assumed(n0), &PodState::Bound(n0), false), Wake::ASSIGNED_POD_ADDED, "confirmed");
        assert_eq!(up(&PodState::Bound(n0), &PodState::Bound(n0), true), Wake::ASSIGNED_POD_LABELS_CHANGED);
        assert_eq!(up(&PodState::Bound(n0), &PodState::Bound(n0), false), Wake::NONE);
        assert_eq!(up(&PodState::Bound(n0), &PodState::Terminated, true), Wake::ASSIGNED_POD_DELETED);
        assert_eq!(
            up(&PodState::Bound(n0), &PodState::Bound(n1), false),
            Wake::ASSIGNED_POD_DELETED.union(Wake::ASSIGNED_POD_ADDED)
        );
        assert_eq!(up(&PodState::Pending, &PodState::Pending, true), Wake::NONE, "its own update requeues it");
        assert_eq!(up(&PodState::Deleted, &PodState::BoundElsewhere("gone".into()), false), Wake::NONE);
    }

    #[test]
    fn the_waiting_counts_follow_entries_in_and_out_of_the_pool() {
        let mut q = SchedulingQueue::new();
        for i in 0..3 {
            q.add(pod(i), key(0, &format!("p{i}")));
        }
        let waits = [Wake::NODE_ADDED, Wake::NODE_ADDED.union(Wake::NODE_DELETED), Wake::CLAIM_CHANGED];
        for (i, wake) in waits.into_iter().enumerate() {
            assert_eq!(q.pop(0), Some(pod(i as u32)));
            q.failed(pod(i as u32), wake, 0);
        }
        let count = |q: &SchedulingQueue, w: Wake| w.bits().map(|b| q.waiting[b]).sum::<u32>();
        assert_eq!((count(&q, Wake::NODE_ADDED), count(&q, Wake::NODE_DELETED)), (2, 1));
        q.on_event(Wake::NODE_DELETED, 10);
        assert_eq!((count(&q, Wake::NODE_ADDED), count(&q, Wake::NODE_DELETED)), (1, 0));
        q.remove(pod(2));
        q.flush_unschedulable(MAX_IN_UNSCHEDULABLE);
        assert_eq!(count(&q, Wake::ANY), 0);
        assert_eq!(q.counts(), (1, 1, 0), "p0 flushed past its backoff, p1 woken into it");
    }

    #[test]
    fn removed_entries_are_never_popped_and_leave_no_count() {
        let mut q = SchedulingQueue::new();
        q.add(pod(0), key(0, "a"));
        q.add(pod(1), key(0, "p"));
        q.remove(pod(1));
        assert_eq!(q.pop(0), Some(pod(0)));
        q.failed(pod(0), Wake::POD_CHANGED, 0);
        assert_eq!(q.counts(), (0, 0, 1));
        q.remove(pod(0));
        assert_eq!((q.pop(10_000), q.counts()), (None, (0, 0, 0)));
    }
}
