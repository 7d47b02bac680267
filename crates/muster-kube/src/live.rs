//! The loop: the one task that owns the engine. It waits until every watch has listed its kind,
//! applies that first snapshot in a fixed order of kinds, then takes each message as it comes
//! (a watch event, a finished job), asks the engine for decisions whenever something changed or a
//! backoff ended, and hands the effects to the writers. DeviceClasses, ResourceSlices and
//! DeviceTaintRules are the allocator's inputs: the loop keeps them ([`crate::devices`]) and gives
//! the engine the slices and classes that changed before its next decisions.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::bail;
use muster_sched::queue::Millis;
use muster_sched::{Change, Cluster, DraContext, Engine, GroupOutcome, Plan, QueueEntry};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::Instant;

use crate::assume::{Apply, ClaimAssume};
use crate::devices::DraInputs;
use crate::jobs::{self, Job};
use crate::observed::{self, Kind, Object, key_of};
use crate::series::{EventWrite, Series};
use crate::writes::{Done, Writer};
use crate::{Msg, Options};

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Milliseconds from the loop's start until every watch had listed its kind.
    pub synced_ms: Option<u64>,
    /// Milliseconds from the loop's start until the first pod was bound.
    pub first_bound_ms: Option<u64>,
    pub bound: usize,
    pub binding_failures: usize,
    pub unschedulable_attempts: usize,
    pub victims: usize,
}

/// The loop's channels.
struct Io {
    rx: mpsc::Receiver<Msg>,
    leading: watch::Receiver<bool>,
}

pub struct Loop {
    options: Options,
    io: Option<Io>,
    tx: mpsc::Sender<Msg>,
    writer: Arc<Writer>,
    permits: Arc<Semaphore>,
    ready: Arc<AtomicBool>,
    start: Instant,
    synced: HashSet<Kind>,
    dra: DraInputs,
    assume: ClaimAssume,
    /// Jobs sent and not finished.
    in_flight: usize,
    /// Objects the store refused, each warned about once.
    refused: HashSet<String>,
    /// The `FailedScheduling` events sent lately, aggregated into series.
    failed_events: Series,
    summary: Summary,
}

impl Loop {
    pub fn new(
        options: Options,
        rx: mpsc::Receiver<Msg>,
        tx: mpsc::Sender<Msg>,
        writer: Arc<Writer>,
        leading: watch::Receiver<bool>,
        ready: Arc<AtomicBool>,
    ) -> Loop {
        Loop {
            permits: Arc::new(Semaphore::new(options.max_in_flight.max(1))),
            options,
            io: Some(Io { rx, leading }),
            tx,
            writer,
            ready,
            start: Instant::now(),
            synced: HashSet::new(),
            dra: DraInputs::default(),
            assume: ClaimAssume::default(),
            in_flight: 0,
            refused: HashSet::new(),
            failed_events: Series::default(),
            summary: Summary::default(),
        }
    }

    /// The engine's time: milliseconds since the loop started.
    fn now(&self) -> Millis {
        self.start.elapsed().as_millis() as Millis
    }

    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> anyhow::Result<Summary> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut io = self.io.take().expect("run once");
        let Some(first) = self.first_listing(&mut io, shutdown.as_mut()).await? else {
            return Ok(self.summary);
        };
        self.ready.store(true, Ordering::Relaxed);
        self.summary.synced_ms = Some(self.now());
        tracing::info!(objects = first.len(), "every watch listed; scheduling");
        let mut cluster =
            Cluster::build(Vec::new(), Vec::<muster_sched::StoredPod>::new(), &[], &self.options.scheduler_names)
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        // The storage kinds are watched: the volume plugins run even while none exists (a pod
        // naming a missing PersistentVolumeClaim waits for it, as upstream).
        cluster.volumes.enabled = true;
        let slices = self.dra.view(self.options.health_propagation);
        let classes: Vec<_> = self.dra.classes.values().cloned().collect();
        cluster.map_extended_resources(&classes);
        let ctx = DraContext {
            index: muster_alloc::SliceIndex::new(slices),
            classes,
            env: muster_cel::Env::default(),
            features: muster_alloc::Features::kubernetes_1_37(),
        };
        let mut engine = Engine::with_own_dra(cluster, self.options.config.clone(), ctx);
        for msg in first {
            self.handle(msg, &mut engine);
        }
        self.serve(&mut engine, &mut io, shutdown.as_mut()).await?;
        self.finish_in_flight(&mut io).await;
        Ok(self.summary)
    }

    /// Waits until every kind is listed; returns the objects (allocator inputs kept aside) in the
    /// order they are to be applied, or `None` on shutdown.
    async fn first_listing(
        &mut self,
        io: &mut Io,
        mut shutdown: Pin<&mut impl Future<Output = ()>>,
    ) -> anyhow::Result<Option<Vec<Msg>>> {
        let mut buffered = Vec::new();
        while self.synced.len() < Kind::ALL.len() {
            tokio::select! {
                msg = io.rx.recv() => match msg {
                    Some(Msg::Synced(kind)) => drop(self.synced.insert(kind)),
                    Some(Msg::Apply(o)) if o.kind().is_dra_input() => self.dra.upsert(o),
                    Some(Msg::Delete(kind, key)) if kind.is_dra_input() => self.dra.delete(kind, &key),
                    Some(msg) => buffered.push(msg),
                    None => bail!("every watch stopped"),
                },
                _ = shutdown.as_mut() => return Ok(None),
            }
        }
        buffered.sort_by_key(|m| match m {
            Msg::Apply(o) => o.kind(),
            Msg::Delete(k, _) => *k,
            _ => Kind::Pod,
        });
        Ok(Some(buffered))
    }

    /// Serves until shutdown (or, with `exit_when_idle`, until nothing is left to do).
    async fn serve(
        &mut self,
        engine: &mut Engine<'_>,
        io: &mut Io,
        mut shutdown: Pin<&mut impl Future<Output = ()>>,
    ) -> anyhow::Result<()> {
        let mut flush = tokio::time::interval(Duration::from_secs(30));
        flush.tick().await;
        loop {
            if self.dra.changed() {
                self.devices_changed(engine);
            }
            let leading = *io.leading.borrow();
            if leading {
                self.schedule(engine);
            }
            let (active, backoff, unschedulable) = engine.queue().counts();
            self.writer.metrics.queue(active, backoff, unschedulable);
            let idle = self.in_flight == 0 && self.assume.busy() == 0 && active + backoff == 0 && io.rx.is_empty();
            if self.options.exit_when_idle && leading && idle {
                return Ok(());
            }
            let wake = engine.next_wakeup().map(|t| self.start + Duration::from_millis(t));
            tokio::select! {
                msg = io.rx.recv() => {
                    let Some(msg) = msg else { bail!("every watch stopped") };
                    self.handle(msg, engine);
                    // What else has come, up to a bound, before the next decisions.
                    for _ in 0..4096 {
                        match io.rx.try_recv() {
                            Ok(msg) => self.handle(msg, engine),
                            Err(_) => break,
                        }
                    }
                }
                _ = sleep_until(wake) => {}
                _ = flush.tick() => {
                    let now = self.now();
                    engine.flush_unschedulable(now);
                    let refresh = self.failed_events.tick(now);
                    let jobs = refresh.into_iter().map(|r| Job::EventSeries { namespace: r.namespace, name: r.name, count: r.count });
                    self.dispatch(jobs.collect());
                }
                changed = io.leading.changed() => {
                    if changed.is_err() || (leading && !*io.leading.borrow()) {
                        bail!("lost the leader lease");
                    }
                    tracing::info!(identity = %self.options.identity, "leading");
                }
                _ = shutdown.as_mut() => return Ok(()),
            }
        }
    }

    fn handle(&mut self, msg: Msg, engine: &mut Engine<'_>) {
        match msg {
            Msg::Apply(o) if o.kind().is_dra_input() => self.dra.upsert(o),
            Msg::Apply(Object::ResourceClaim(c)) => {
                if let Some(a) = self.assume.observed(c) {
                    self.apply_claim(a, engine);
                }
            }
            Msg::Apply(o) => {
                if let Some(change) = o.upsert() {
                    self.apply(change, engine);
                }
            }
            Msg::Delete(kind, key) if kind.is_dra_input() => self.dra.delete(kind, &key),
            Msg::Delete(Kind::ResourceClaim, key) => {
                if let Some(a) = self.assume.deleted(key) {
                    self.apply_claim(a, engine);
                }
            }
            Msg::Delete(kind, key) => {
                if let Some(change) = observed::delete(kind, key) {
                    self.apply(change, engine);
                }
            }
            Msg::Synced(kind) => drop(self.synced.insert(kind)),
            Msg::Done(done) => {
                self.in_flight -= 1;
                self.done(done, engine);
            }
        }
    }

    /// Gives the engine the slices and classes that changed.
    fn devices_changed(&mut self, engine: &mut Engine<'_>) {
        let now = self.now();
        let index = &engine.dra().expect("an engine over DRA inputs").index;
        for change in self.dra.take_changes(self.options.health_propagation, index) {
            if let Err(e) = engine.apply_devices(change, now) {
                tracing::error!(error = %e, "device change not taken");
            }
        }
    }

    fn apply_claim(&mut self, a: Apply, engine: &mut Engine<'_>) {
        let change = match a {
            Apply::Upsert(c) => Change::UpsertClaim(c),
            Apply::Delete(key) => Change::DeleteClaim(key),
        };
        self.apply(change, engine);
    }

    fn apply(&mut self, change: Change, engine: &mut Engine<'_>) {
        if let Err(e) = engine.apply(change, self.now()) {
            let what = format!("{} {}", e.kind, e.object);
            if self.refused.insert(what) {
                tracing::warn!(error = %e, "object not taken");
            }
        }
    }

    /// Decisions for every ready entry, sent to the writers.
    fn schedule(&mut self, engine: &mut Engine<'_>) {
        let started = std::time::Instant::now();
        let mut cycles: Vec<(QueueEntry, std::time::Instant)> = Vec::new();
        let plan = engine.schedule_observing(self.now(), &mut |e, _| cycles.push((e, std::time::Instant::now())));
        if is_empty(&plan) {
            return;
        }
        let m = &self.writer.metrics;
        m.batch_seconds.observe(started.elapsed().as_secs_f64());
        let c = engine.cluster();
        observe_cycles(m, c, &cycles, &plan);
        for (p, _) in &plan.placements {
            m.attempt("scheduled", profile_of(c, *p), 1);
        }
        for g in plan.groups.iter().filter(|g| g.outcome == GroupOutcome::SchedulerError) {
            m.attempt("error", group_profile(c, g.group), 1);
        }
        for (p, _) in &plan.unschedulable {
            m.attempt("unschedulable", profile_of(c, p), 1);
        }
        let victims = plan.preempted.len() + plan.pod_preemptions.iter().map(|p| p.victims.len()).sum::<usize>();
        if victims > 0 {
            m.preemption_attempts.inc();
            m.preemption_victims.observe(victims as f64);
        }
        self.summary.unschedulable_attempts += plan.unschedulable.len();
        self.summary.victims += victims;
        let effects = engine.effects(&plan);
        let jobs = jobs::translate(engine.cluster(), effects);
        let jobs = self.with_event_series(jobs);
        self.dispatch(jobs);
    }

    /// Decides each `FailedScheduling` event: a new event, the second of a series, or only
    /// counted ([`Series`]); drops the jobs left with nothing to do.
    fn with_event_series(&mut self, jobs: Vec<Job>) -> Vec<Job> {
        let now = self.now();
        let wall = crate::writes::now().as_nanosecond();
        jobs.into_iter()
            .filter_map(|mut job| {
                if let Job::Unschedulable { pod, patch, event, .. } = &mut job {
                    let name = format!("{}.{wall:x}", pod.name);
                    *event = self.failed_events.observe(&pod.uid, "FailedScheduling", &pod.namespace, name, now);
                    if *event == EventWrite::Nothing && !*patch {
                        return None;
                    }
                }
                Some(job)
            })
            .collect()
    }

    /// Sends jobs to the writers: victims first (all of them), then the rest concurrently.
    fn dispatch(&mut self, jobs: Vec<Job>) {
        let (evictions, rest): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| matches!(j, Job::Evict { .. }));
        for job in &rest {
            if let Job::Bind(unit) = job {
                for c in &unit.claims {
                    self.assume.begin(&c.key());
                }
            }
        }
        self.in_flight += evictions.len() + rest.len();
        let (writer, tx, permits) = (self.writer.clone(), self.tx.clone(), self.permits.clone());
        tokio::spawn(async move {
            let run = |job: Job| {
                let (writer, tx, permits) = (writer.clone(), tx.clone(), permits.clone());
                async move {
                    let _permit = permits.acquire_owned().await;
                    let done = writer.run(job).await;
                    let _ = tx.send(Msg::Done(done)).await;
                }
            };
            futures::future::join_all(evictions.into_iter().map(run)).await;
            for job in rest {
                tokio::spawn(run(job));
            }
        });
    }

    /// What a finished job means for the engine: pods not bound are forgotten (their group's
    /// other assumed pods with them) and go back to the queue; claims written are applied as the
    /// API server returned them, and a claim written for a pod that was not bound gives its
    /// reservation back (Unreserve).
    fn done(&mut self, done: Done, engine: &mut Engine<'_>) {
        let Done::Bind { claims, pods } = done else { return };
        let mut unbound = Vec::new();
        for (pod, result) in pods {
            match result {
                Ok(()) => {
                    self.summary.first_bound_ms.get_or_insert(self.now());
                    self.summary.bound += 1;
                    self.writer.metrics.bound.inc();
                }
                Err(e) => {
                    tracing::warn!(pod = %pod.key(), error = %e, "binding cycle failed; the pod goes back to the queue");
                    self.summary.binding_failures += 1;
                    self.writer.metrics.binding_failures.inc();
                    let id = engine.cluster().pod_id(&pod.key());
                    let same = id.filter(|id| engine.cluster().pod(*id).pod.meta().uid.as_deref() == Some(&pod.uid));
                    if let Some(id) = same {
                        engine.forget(id, self.now());
                    }
                    unbound.push(pod.uid);
                }
            }
        }
        for (key, written) in claims {
            // The unbound pods this write reserved the claim for (a shared claim: maybe several).
            let to_unreserve = written.as_ref().map(|c| {
                let reserved = c.status.as_ref().and_then(|s| s.reserved_for.as_deref()).unwrap_or_default();
                let uids: Vec<String> =
                    unbound.iter().filter(|u| reserved.iter().any(|r| &r.uid == *u)).cloned().collect();
                (c.clone(), uids)
            });
            for a in self.assume.ended(&key, written) {
                self.apply_claim(a, engine);
            }
            if let Some((claim, uids)) = to_unreserve.filter(|(_, uids)| !uids.is_empty()) {
                self.unreserve(claim, uids);
            }
        }
    }

    fn unreserve(&mut self, claim: k8s_openapi::api::resource::v1::ResourceClaim, uids: Vec<String>) {
        self.in_flight += 1;
        let (writer, tx) = (self.writer.clone(), self.tx.clone());
        tokio::spawn(async move {
            if let Err(e) = writer.unreserve(&claim, &uids).await {
                tracing::warn!(claim = %key_of(&claim.metadata), error = %e, "Unreserve failed");
            }
            let _ = tx.send(Msg::Done(Done::Other)).await;
        });
    }

    /// On the way out: the writes in flight finish (or fail) before the process ends, so that a
    /// binding cycle is never cut between its claim write and its binding by muster itself.
    async fn finish_in_flight(&mut self, io: &mut Io) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.in_flight > 0 {
            match tokio::time::timeout_at(deadline, io.rx.recv()).await {
                Ok(Some(Msg::Done(done))) => {
                    self.in_flight -= 1;
                    if let Done::Bind { pods, .. } = done {
                        self.summary.bound += pods.iter().filter(|(_, r)| r.is_ok()).count();
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
}

fn is_empty(plan: &Plan) -> bool {
    plan.placements.is_empty()
        && plan.unschedulable.is_empty()
        && plan.groups.is_empty()
        && plan.composites.is_empty()
        && plan.preempted.is_empty()
        && plan.pod_preemptions.is_empty()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Each cycle's duration (from its start to the next one's, the last to now) by its result, as
/// `scheduler_scheduling_attempt_duration_seconds` counts it.
fn observe_cycles(
    m: &crate::metrics::Metrics,
    c: &muster_sched::Cluster,
    cycles: &[(QueueEntry, std::time::Instant)],
    plan: &Plan,
) {
    let placed: HashSet<_> = plan.placements.iter().map(|(p, _)| *p).collect();
    // Each group's and tree's last result in the batch, looked up once per cycle.
    let groups: HashMap<_, _> = plan.groups.iter().map(|r| (r.group, &r.outcome)).collect();
    let trees: HashMap<_, _> = plan.composites.iter().map(|r| (r.composite, &r.outcome)).collect();
    let end = std::time::Instant::now();
    for (i, (entry, at)) in cycles.iter().enumerate() {
        let until = cycles.get(i + 1).map_or(end, |(_, t)| *t);
        let outcome = match entry {
            QueueEntry::Pod(p) => Some(if placed.contains(p) { "scheduled" } else { "unschedulable" }),
            QueueEntry::Group(g) => groups.get(g).map(|o| outcome_result(o)),
            QueueEntry::Composite(c) => trees.get(c).map(|o| outcome_result(o)),
        };
        let profile = match entry {
            QueueEntry::Pod(p) => profile_of(c, *p),
            QueueEntry::Group(g) => group_profile(c, *g),
            QueueEntry::Composite(t) => c.leaves(*t).first().map_or(DEFAULT_PROFILE, |g| group_profile(c, *g)),
        };
        let seconds = until.duration_since(*at).as_secs_f64();
        m.attempt_duration(outcome.unwrap_or("unschedulable"), profile, seconds);
    }
}

/// The `profile` label of kube-scheduler's metrics: the pod's `spec.schedulerName`.
const DEFAULT_PROFILE: &str = "default-scheduler";

fn profile_of(c: &muster_sched::Cluster, pod: muster_sched::PodId) -> &str {
    let spec = c.pod(pod).pod.spec();
    spec.and_then(|s| s.scheduler_name.as_deref()).unwrap_or(DEFAULT_PROFILE)
}

/// A group's profile: its first member's.
fn group_profile(c: &muster_sched::Cluster, g: muster_sched::GroupId) -> &str {
    c.groups[g].members.first().map_or(DEFAULT_PROFILE, |p| profile_of(c, *p))
}

fn outcome_result(o: &GroupOutcome) -> &'static str {
    match o {
        GroupOutcome::Scheduled { .. } => "scheduled",
        GroupOutcome::SchedulerError => "error",
        GroupOutcome::Waiting { .. } | GroupOutcome::Unschedulable { .. } => "unschedulable",
    }
}
