//! A necessary condition for a gang's cycle [beyond upstream; an optimization that changes no
//! decision]: an upper bound on how many of its pending members can be placed, from each node's
//! free cpu, memory, ephemeral storage and pod slots and its count of unallocated devices.
//!
//! Why: a gang waiting for room is tried again at every release, member by member through Filter,
//! Score and Reserve until minCount is out of reach, then rolled back; a world that runs for
//! days spends most of its time there. When the bound shows minCount out of reach, and shows too
//! that fewer nodes than `numFeasibleNodesToFind` could take a member, or that Filter looks for
//! as many as there are (so every member's Filter would visit every node and leave the next start index where it was, and every Reserve would be
//! undone), the full attempt is known to fail and to leave the state as it found it: the cycle
//! fails without trying a member, with a reason of its own.
//!
//! The bound only counts what a member surely takes: requests NodeResourcesFit compares, and
//! devices a member's unshared, unallocated claims ask for by exact count. A node whose devices
//! are not all its own (shared pools), or may serve several claims (`allowMultipleAllocations`),
//! counts as unlimited; a request for all devices, a prioritized list or admin access counts as
//! no device; a pod with extended resources served through DRA, or a cluster with several
//! profiles, gets no bound. Other Filter plugins only remove nodes, so ignoring them keeps the
//! bound an upper one.

use super::*;
use crate::cluster::{ClaimId, NodeInfo, ResourceId};

/// Free devices of one node, as last counted: the node's generation, its DRA generation and the
/// shared-pool generation then, and the count (`None`: not limited by a count).
pub(super) type DeviceRoom = Option<(u64, u64, u64, Option<u32>)>;

/// The bound counted over every node for one need and kept up to date from the node journal
/// ([`crate::node_journal`]): a count after a few nodes changed costs those nodes, not every node.
pub(super) struct RoomCount {
    requests: Vec<(ResourceId, i64)>,
    devices: u32,
    /// Per node slot: how many members the node could take ([`Scheduler::copies`]; 0 for a
    /// node the store removed).
    copies: Vec<usize>,
    room: usize,
    nodes: usize,
    /// The node journal's position and the shared-pool DRA generation the counts are as of.
    at: u64,
    shared: u64,
    /// When it was last read ([`Scheduler::counted_room`]'s tick): the least recent goes first.
    used: u64,
    /// This count's own number (the tick it was counted at, never 0): a [`RoomHint`] that names
    /// it names its need.
    id: u64,
}

impl RoomCount {
    fn empty() -> RoomCount {
        RoomCount {
            requests: Vec::new(),
            devices: 0,
            copies: Vec::new(),
            room: 0,
            nodes: 0,
            at: 0,
            shared: 0,
            used: 0,
            id: 0,
        }
    }
}

/// Where the count for a need was last found among the kept ones (its place and number), so that
/// a need read again and again (a waiting gang's) is not looked for among them each time.
pub(super) type RoomHint = Option<(usize, u64)>;

/// At most this many needs' counts are kept (the least recently read goes first).
const MAX_ROOM_COUNTS: usize = 16;

/// What every pending member surely needs: per resource, the least any member requests (a
/// resource some member does not request is left out), and the least count of devices.
#[derive(Clone, Default)]
pub(super) struct Need {
    requests: Vec<(ResourceId, i64)>,
    devices: u32,
    /// No claim of a pending member has another user: nothing but the members' own changes
    /// changes the need.
    pub(super) exclusive: bool,
}

/// A gang cycle the bound failed: at most `room` members fit, fewer than the `wanted` ones,
/// each needing at least `need`.
pub(super) struct OutOfReach {
    pub(super) room: usize,
    pub(super) need: Need,
    pub(super) wanted: usize,
}

/// `n` met with one more member's needs: per resource the least of both (a resource the member
/// does not request leaves the need), and the fewer devices.
fn meet(mut n: Need, requests: &[(ResourceId, i64)], devices: u32) -> Need {
    n.devices = n.devices.min(devices);
    // Members of one gang mostly request the same: nothing to lower.
    if n.requests.as_slice() != requests {
        n.requests.retain_mut(|(id, v)| match requests.iter().find(|(r, _)| r == id) {
            Some((_, w)) => {
                *v = (*v).min(*w);
                true
            }
            None => false,
        });
    }
    n
}

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// `Some` when the gang cycle over `pending` (on `node_filter`'s nodes) is known to fail and
    /// to change nothing: at most `room` members fit, fewer than minCount needs with the
    /// `scheduled` ones (or none), and fewer nodes than Filter looks for have room for one.
    /// `None` when the members must be tried.
    pub(super) fn gang_out_of_reach(&mut self, pending: &[PodId], scheduled: usize, min: usize) -> Option<OutOfReach> {
        if !self.bound_applies() {
            return None;
        }
        let need = self.need(pending)?;
        let wanted = min.saturating_sub(scheduled).max(1);
        let room = self.room_short(&need, wanted, &mut None)?;
        Some(OutOfReach { room, need, wanted })
    }

    /// Whether the bound is on and reads as Filter does: one profile.
    pub(super) fn bound_applies(&self) -> bool {
        self.gang_bound && !self.profiles.several()
    }

    /// `Some(room)` when at most `room` members needing `need` fit the nodes (`node_filter`'s),
    /// fewer than `wanted`, and fewer nodes than Filter looks for (or all of them) could take
    /// one. Over every node, the count kept per need ([`RoomCount`], found by `hint` when it
    /// still names it, and `hint` then names it); in a domain, counted.
    pub(super) fn room_short(&mut self, need: &Need, wanted: usize, hint: &mut RoomHint) -> Option<usize> {
        let num_nodes = self.cluster.node_order.len();
        let (room, nodes, complete) = match self.node_filter {
            None => {
                let (room, nodes) = self.counted_room(need, hint);
                (room, nodes, true)
            }
            Some(_) => self.count_room(need, wanted),
        };
        if room >= wanted {
            return None;
        }
        debug_assert!(complete);
        // Filter stops at its `to_find`-th feasible node: before the last node only when it finds
        // that many among fewer nodes than it has.
        let to_find = self.num_feasible_nodes_to_find(num_nodes);
        (nodes < to_find || to_find >= num_nodes).then_some(room)
    }

    /// How many members needing `need` the nodes (`node_filter`'s) could take, on how many
    /// nodes, and whether every node was counted: the count stops once it reaches `wanted`.
    fn count_room(&mut self, need: &Need, wanted: usize) -> (usize, usize, bool) {
        let (mut room, mut nodes) = (0usize, 0usize);
        for i in 0..self.cluster.node_order.len() {
            let n = self.cluster.node_order[i];
            if self.node_filter.as_ref().is_some_and(|f| !f[n.0 as usize]) {
                continue;
            }
            let copies = self.copies(n, need);
            if copies > 0 {
                room = room.saturating_add(copies);
                nodes += 1;
                if room >= wanted {
                    return (room, nodes, false);
                }
            }
        }
        (room, nodes, true)
    }

    /// How many members needing `need` every node could take, and on how many nodes: the count
    /// kept for the need, brought up to date on the nodes the node journal lists since, or
    /// counted afresh.
    fn counted_room(&mut self, need: &Need, hint: &mut RoomHint) -> (usize, usize) {
        let (now, shared) = (self.cluster.node_journal.now(), self.dra_shared_generation);
        self.room_reads += 1;
        let named = |&(i, id): &(usize, u64)| self.room_counts.get(i).is_some_and(|r| r.id == id);
        let kept = match hint.filter(named) {
            Some((i, _)) => Some(i),
            None => self.room_counts.iter().position(|r| r.devices == need.devices && r.requests == need.requests),
        };
        debug_assert!(kept.is_none_or(|i| {
            let r = &self.room_counts[i];
            r.devices == need.devices && r.requests == need.requests
        }));
        let i = match kept {
            // Nothing changed since: the count stands as it is.
            Some(i) if self.room_counts[i].shared == shared && self.room_counts[i].at == now => i,
            Some(i) if self.room_counts[i].shared == shared => {
                let mut count = std::mem::replace(&mut self.room_counts[i], RoomCount::empty());
                match self.cluster.node_journal.since(count.at).map(<[NodeId]>::to_vec) {
                    Some(mut changed) => {
                        changed.sort_unstable();
                        changed.dedup();
                        for n in changed {
                            self.recount(&mut count, n, need);
                        }
                    }
                    None => count = self.count_every_node(need),
                }
                self.room_counts[i] = count;
                i
            }
            Some(i) => {
                self.room_counts[i] = self.count_every_node(need);
                i
            }
            None => {
                let count = self.count_every_node(need);
                if self.room_counts.len() < MAX_ROOM_COUNTS {
                    self.room_counts.push(count);
                    self.room_counts.len() - 1
                } else {
                    let oldest = (0..self.room_counts.len()).min_by_key(|&i| self.room_counts[i].used).unwrap_or(0);
                    self.room_counts[oldest] = count;
                    oldest
                }
            }
        };
        let count = &mut self.room_counts[i];
        (count.at, count.used) = (now, self.room_reads);
        *hint = Some((i, count.id));
        let counted = (count.room, count.nodes);
        debug_assert_eq!(
            self.count_room(need, usize::MAX),
            (counted.0, counted.1, true),
            "the count kept up to date from the node journal is the count over every node"
        );
        counted
    }

    /// [`RoomCount`] for `need` over every node now.
    fn count_every_node(&mut self, need: &Need) -> RoomCount {
        let mut count = RoomCount {
            requests: need.requests.clone(),
            devices: need.devices,
            copies: vec![0; self.cluster.nodes.len()],
            shared: self.dra_shared_generation,
            id: self.room_reads,
            ..RoomCount::empty()
        };
        for i in 0..self.cluster.node_order.len() {
            let n = self.cluster.node_order[i];
            self.recount(&mut count, n, need);
        }
        count
    }

    /// Node `n`'s share of `count` counted again.
    fn recount(&mut self, count: &mut RoomCount, n: NodeId, need: &Need) {
        let i = n.0 as usize;
        if count.copies.len() <= i {
            count.copies.resize(self.cluster.nodes.len().max(i + 1), 0);
        }
        let now = if self.cluster.node(n).detail.removed { 0 } else { self.copies(n, need) };
        let was = std::mem::replace(&mut count.copies[i], now);
        count.room = count.room - was + now;
        count.nodes = count.nodes - usize::from(was > 0) + usize::from(now > 0);
    }

    /// What every pending member surely needs; `None` when the bound does not apply.
    pub(super) fn need(&self, pending: &[PodId]) -> Option<Need> {
        let c = &*self.cluster;
        // Most gangs share no claim between members: one pass counts their devices, and only a
        // gang where some claim has several users is counted again without its shared claims.
        let mut shared_any = false;
        let mut need: Option<Need> = None;
        for &p in pending {
            let pod = c.pod(p);
            if !pod.dra_extended.is_empty() {
                return None;
            }
            let devices = self.devices_needed(pod, None, &mut shared_any);
            need = Some(match need {
                None => Need { requests: pod.requests.to_vec(), devices, exclusive: true },
                Some(n) => meet(n, &pod.requests, devices),
            });
        }
        if !shared_any {
            return need;
        }
        let shared = self.shared_claims(pending);
        let devices = pending.iter().map(|&p| self.devices_needed(c.pod(p), Some(&shared), &mut shared_any)).min();
        need.map(|n| Need { devices: devices.unwrap_or(0), exclusive: false, ..n })
    }

    /// The claims more than one of the `pending` members refers to, sorted (one pass over their
    /// claims: a gang of 64 is not 64 × 64 comparisons).
    fn shared_claims(&self, pending: &[PodId]) -> Vec<ClaimId> {
        let c = &*self.cluster;
        let claims = |p: PodId| c.pod(p).claims.iter().filter_map(|r| r.as_ref().ok());
        let mut refs: Vec<(ClaimId, u32)> = Vec::new();
        for (i, &p) in pending.iter().enumerate() {
            refs.extend(claims(p).map(|&id| (id, i as u32)));
        }
        refs.sort_unstable();
        refs.dedup();
        let mut shared: Vec<ClaimId> = refs.windows(2).filter(|w| w[0].0 == w[1].0).map(|w| w[0].0).collect();
        shared.dedup();
        shared
    }

    /// Devices `pod` surely takes: the exact counts its claims ask for, over claims that are not
    /// allocated and that no other pending member shares (`shared`, sorted). Without `shared`,
    /// every claim counts and `several_users` is set when one has more than one user (a claim
    /// only one live pod names, as a claim from a template, is not shared).
    fn devices_needed(
        &self,
        pod: &crate::cluster::PodInfo,
        shared: Option<&[ClaimId]>,
        several_users: &mut bool,
    ) -> u32 {
        if self.dra.is_none() {
            return 0;
        }
        let c = &*self.cluster;
        let mut total = 0u32;
        for &id in pod.claims.iter().filter_map(|r| r.as_ref().ok()) {
            let info = &c.claims[id];
            match shared {
                Some(shared) if shared.binary_search(&id).is_ok() => continue,
                Some(_) => {}
                None => *several_users |= info.users > 1,
            }
            if !info.allocated() {
                total = total.saturating_add(info.exact_devices);
            }
        }
        total
    }

    /// How many members needing `need` node `n` could take at most.
    pub(super) fn copies(&mut self, n: NodeId, need: &Need) -> usize {
        let node = self.cluster.node(n);
        let mut k = (node.allowed_pods - node.num_pods).max(0);
        for &(id, want) in &need.requests {
            if want > 0 {
                k = k.min((node.allocatable(id) - node.requested(id)).max(0) / want);
            }
        }
        if k > 0
            && need.devices > 0
            && let Some(free) = self.free_devices(n)
        {
            k = k.min(i64::from(free / need.devices));
        }
        usize::try_from(k).unwrap_or(0)
    }

    /// The unallocated devices the allocator can give a claim on node `n` (`None`: not limited
    /// by a count), counted again only when the node's devices may have changed.
    fn free_devices(&mut self, n: NodeId) -> Option<u32> {
        let i = n.0 as usize;
        let key = (
            self.cluster.node(n).generation,
            self.dra_node_generation.get(i).copied().unwrap_or(0),
            self.dra_shared_generation,
        );
        if self.device_room.len() <= i {
            self.device_room.resize(self.cluster.nodes.len().max(i + 1), None);
        }
        if let Some((a, b, s, free)) = self.device_room[i]
            && (a, b, s) == key
        {
            return free;
        }
        let free = self.count_free_devices(self.cluster.node(n));
        self.device_room[i] = Some((key.0, key.1, key.2, free));
        free
    }

    /// [`Scheduler::free_devices`] counted: `None` when a device the node sees is not its own or
    /// may serve several claims.
    fn count_free_devices(&self, node: &NodeInfo) -> Option<u32> {
        let (ctx, state) = self.dra.as_ref()?;
        let cell = ctx.index.gather(Some(&node.detail.node), ctx.features);
        let gathered = cell.get();
        let held: Vec<_> = gathered.pools.iter().map(|p| state.pool(p.driver, p.name)).collect();
        let mut free = 0u32;
        for cand in &gathered.cands {
            let spec = &cand.slice_ref.spec;
            if spec.node_name.as_deref() != Some(node.name()) || cand.device.allow_multiple_allocations == Some(true) {
                return None;
            }
            if !held[cand.pool].in_use(&cand.device.name) {
                free += 1;
            }
        }
        Some(free)
    }
}
