//! The engine every world drives: the store ([`Cluster::apply`]), the scheduling queue and the
//! cycle, fed one change at a time. A live scheduler applies what its watches report; a
//! simulator applies its trace's arrivals and completions; both ask for decisions with the
//! world's time. `plan` is the same engine with every object applied at once.
//!
//! A placed pod is assumed (its node's resources and its devices counted at once, as
//! kube-scheduler's assume cache does) until the world reports it bound (a pod update with
//! `spec.nodeName`), which confirms it. The engine reads no clock: `now` comes with each call.

use crate::cluster::{Cluster, ModelError, PodId};
use crate::cycle::device_changes::{BorrowedDevices, DeviceChange};
use crate::cycle::{Plan, QueueEntry, Scheduler, SchedulerConfig};
use crate::plugins::dynamic_resources::DraContext;
use crate::queue::{Millis, SchedulingQueue, Wake};
use crate::store::Change;

/// The scheduler over a changing cluster.
pub struct Engine<'d> {
    scheduler: Scheduler<'d, Box<Cluster>>,
    queue: SchedulingQueue,
}

impl<'d> Engine<'d> {
    /// An engine over `cluster`, with every pending entry queued. With `dra`, pods' claims are
    /// served by the DynamicResources plugin over those slices and classes.
    pub fn new(cluster: Cluster, config: SchedulerConfig, dra: Option<&'d DraContext>) -> Self {
        let scheduler = match dra {
            Some(ctx) => Scheduler::with_dra(Box::new(cluster), config, ctx),
            None => Scheduler::new(Box::new(cluster), config),
        };
        Engine::over(scheduler)
    }

    /// An engine over `cluster` whose DRA inputs are its own: they change one slice or class at
    /// a time ([`Engine::apply_devices`]), as a living cluster's do.
    pub fn with_own_dra(cluster: Cluster, config: SchedulerConfig, dra: DraContext) -> Self {
        Engine::over(Scheduler::with_own_dra(Box::new(cluster), config, dra))
    }

    fn over(scheduler: Scheduler<'d, Box<Cluster>>) -> Self {
        let mut queue = SchedulingQueue::with_backoff(scheduler.config().backoff);
        queue.add_all(scheduler.queued());
        Engine { scheduler, queue }
    }

    /// Applies one change of the DRA inputs at `now` (an engine [`Engine::with_own_dra`]): the
    /// slice index takes it, verdicts that read the changed devices are forgotten, and entries
    /// waiting for devices are woken when the change can help them. Its cost is that of the
    /// slice's pool, never of the cluster.
    pub fn apply_devices(&mut self, change: DeviceChange, now: Millis) -> Result<(), BorrowedDevices> {
        let wakes = change.wakes();
        self.scheduler.apply_device_change(change)?;
        if wakes {
            self.queue.on_event(Wake::DEVICES_CHANGED, now);
        }
        Ok(())
    }

    /// The DRA inputs the engine reads, if any.
    pub fn dra(&self) -> Option<&DraContext> {
        self.scheduler.dra()
    }

    /// Turns the reuse of allocator verdicts off (every Filter call allocates): for tests that
    /// check the reuse never changes a decision over a run of changes.
    pub fn without_dra_memo(mut self) -> Self {
        self.scheduler = self.scheduler.without_dra_memo();
        self
    }

    /// Every pod gets a cycle of its own (see [`Scheduler::without_verdict_reuse`]).
    pub fn without_verdict_reuse(mut self) -> Self {
        self.scheduler = self.scheduler.without_verdict_reuse();
        self
    }

    /// Gang cycles that the nodes' free resources and devices show hopeless fail without trying
    /// members, with a reason that says so ([`Scheduler::with_gang_bound`]): for worlds that run
    /// long and retry waiting gangs at every release. The same decisions as without it.
    pub fn with_gang_bound(mut self) -> Self {
        self.scheduler = self.scheduler.with_gang_bound();
        self
    }

    /// Pods given an equivalent pod's verdict without a cycle of their own, so far.
    pub fn reused_verdicts(&self) -> u64 {
        self.scheduler.reused_verdicts
    }

    /// Nodes where classic preemption reused what an equivalent pod found there, the node
    /// unchanged since, so far.
    pub fn preemption_findings_reused(&self) -> u64 {
        self.scheduler.preemption_findings_reused
    }

    /// The DynamicResources Filter's allocator verdicts computed, and those read back at a
    /// free node's generation after another replaced them, so far ([`crate::dra_memo`]).
    pub fn dra_memo_counts(&self) -> crate::dra_memo::MemoCounts {
        self.scheduler.dra_memo_counts()
    }

    /// Nodes taken as rejected from a waiting pod's last verdict, without a Filter, so far
    /// ([`Scheduler::kept_rejections`]).
    pub fn kept_rejections(&self) -> u64 {
        self.scheduler.kept_rejections
    }

    /// Kept verdicts that stood after a look at only the nodes whose generations the node
    /// journal listed as moved, so far ([`Scheduler::journal_verdicts`]).
    pub fn journal_verdicts(&self) -> u64 {
        self.scheduler.journal_verdicts
    }

    pub fn cluster(&self) -> &Cluster {
        self.scheduler.cluster()
    }

    pub fn queue(&self) -> &SchedulingQueue {
        &self.queue
    }

    /// Applies one change at `now`: the store takes it, new pending pods join the queue, pods
    /// no longer pending leave it, and entries waiting for what the change was are woken.
    pub fn apply(&mut self, change: Change, now: Millis) -> Result<(), ModelError> {
        let nodes_changed = matches!(change, Change::UpsertNode(_) | Change::DeleteNode(_));
        // Pods assumed onto a node that goes away will never be bound there: forgotten first,
        // so that their devices come back too.
        if let Change::DeleteNode(name) = &change
            && let Some(node) = self.scheduler.cluster().node_id(name)
        {
            let assumed: Vec<PodId> = self.scheduler.cluster().node(node).detail.pods.clone();
            for pod in assumed {
                if matches!(self.scheduler.cluster().pod(pod).state, crate::cluster::PodState::Assumed(_)) {
                    self.forget(pod, now);
                }
            }
        }
        let applied = self.scheduler.apply_change(change)?;
        if nodes_changed {
            self.scheduler.sync_nodes();
        }
        for (index, old) in &applied.claims {
            self.scheduler.claim_replaced(*index, old.as_deref());
        }
        for entry in applied.dequeue {
            if let QueueEntry::Pod(pod) = entry {
                self.scheduler.pod_changed(pod);
            }
            self.scheduler.forget_bound_wait(entry);
            self.queue.remove(entry);
        }
        for entry in applied.queue {
            if let QueueEntry::Pod(pod) = entry {
                self.scheduler.pod_changed(pod);
            }
            self.scheduler.forget_bound_wait(entry);
            if let Some(order) = self.scheduler.order_of(entry) {
                self.queue.activate(entry, order, now);
            }
        }
        if applied.wake != Wake::NONE {
            let (cluster, config) = (self.scheduler.cluster(), self.scheduler.config());
            let seen = crate::cycle::hints::Seen::of(cluster, applied.wake, &applied.subject);
            self.queue.on_event_checked(applied.wake, now, |entry, checked| {
                let QueueEntry::Pod(pod) = entry else { return true };
                seen.queues(cluster, pod, checked, |p| {
                    let name = p.pod.spec().and_then(|s| s.scheduler_name.as_deref());
                    &config.profile_for(name).pod_topology_spread
                })
            });
        }
        Ok(())
    }

    /// The world could not bind `pod` (assumed by an earlier cycle): it and, for a gang, the
    /// group's other assumed members give back their nodes and devices and return to the queue
    /// in backoff; entries waiting for room are woken. Returns the pods forgotten.
    pub fn forget(&mut self, pod: PodId, now: Millis) -> Vec<PodId> {
        let pods = self.scheduler.forget(pod);
        let entries: std::collections::BTreeSet<QueueEntry> =
            pods.iter().map(|p| self.scheduler.cluster().entry_of(*p)).collect();
        for entry in entries {
            if let Some(order) = self.scheduler.order_of(entry) {
                self.queue.add_after_binding_failure(entry, order, now);
            }
        }
        if !pods.is_empty() {
            self.scheduler.forget_bound_waits();
            self.queue.on_event(Wake::ASSIGNED_POD_DELETED.union(Wake::CLAIM_CHANGED), now);
        }
        pods
    }

    /// Runs every entry ready at `now` through its cycle; returns what they decided.
    pub fn schedule(&mut self, now: Millis) -> Plan {
        let mut plan = Plan::default();
        self.scheduler.schedule_ready(&mut self.queue, now, &mut plan);
        plan
    }

    /// [`Engine::schedule`], calling `observe` with each entry as its cycle is about to start (a
    /// world that times cycles reads its clock there; the engine reads none).
    pub fn schedule_observing(&mut self, now: Millis, observe: &mut dyn FnMut(QueueEntry, &Cluster)) -> Plan {
        let mut plan = Plan::default();
        self.scheduler.schedule_ready_observing(&mut self.queue, now, &mut plan, observe);
        plan
    }

    /// Runs the queue from `now` until nothing is left to try: every ready entry, then the clock
    /// jumps to the next backoff's end (no world acts in between). What `plan` does.
    pub fn run_until_idle(&mut self, mut now: Millis) -> Plan {
        let mut plan = Plan::default();
        loop {
            self.scheduler.schedule_ready(&mut self.queue, now, &mut plan);
            match self.queue.next_backoff_expiry() {
                Some(t) => now = t,
                None => return plan,
            }
        }
    }

    /// What the world must do about `plan` (decisions of [`Engine::schedule`]), in order.
    pub fn effects(&self, plan: &Plan) -> Vec<crate::effects::Effect> {
        crate::effects::effects(self.cluster(), plan)
    }

    /// When an entry in backoff becomes ready, if any: the world's next reason to call
    /// [`Engine::schedule`] besides a change.
    pub fn next_wakeup(&self) -> Option<Millis> {
        self.queue.next_backoff_expiry()
    }

    /// Moves entries that waited five minutes in the unschedulable pool back to the queue
    /// (kube-scheduler does it every 30 s).
    pub fn flush_unschedulable(&mut self, now: Millis) {
        self.queue.flush_unschedulable(now);
    }

    /// Gives the cluster back.
    pub fn into_cluster(self) -> Cluster {
        *self.scheduler.into_cluster()
    }
}
