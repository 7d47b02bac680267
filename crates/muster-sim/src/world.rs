//! The world around the engine: a heap of timed events over virtual time, the objects each event
//! creates or deletes, and what the sim does about the engine's decisions (binds what was placed,
//! deletes what was evicted, restarts the jobs that lost pods).
//!
//! One step at time `t`: every event due at `t` is applied (in the order it was pushed), then the
//! engine schedules at `t` and the world carries out the effects, again while a round placed or
//! evicted something (a deleted victim or a bound pod may let another entry in at once). The next
//! step is at the earlier of the heap's next event and the end of the engine's next backoff.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use muster_controllers::resourceclaim::{Release, release};
use muster_sched::effects::Message;
use muster_sched::stored_pod::StoredPod;
use muster_sched::{Change, Cluster, Effect, Engine};
use serde_json::json;

use muster_controllers::eviction::{DeviceKey, DeviceTaints};

use crate::fragmentation::{Free, Inventory, common_shape};
use crate::report::{JobOutcome, Report, Sample};
use crate::trace::{EventKind, Job, Millis, Trace};
use crate::usage::{MILLI, SharedCapacity, allocation_milli, result_milli, whole};

/// The world's maps by name, read at every act: hashed with foldhash (randomly seeded, as the
/// standard library's SipHash is, and several times faster on short keys); none is iterated.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type Set<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

mod device_events;

/// `t` without its fraction of a second, as the API server keeps a timestamp.
fn whole_seconds(t: &Time) -> Time {
    let seconds = t.0.as_second();
    Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap_or(t.0))
}

/// Counts `pods` failed attempts that share one verdict under what failed them: their group's
/// verdict, PreFilter, a plugin's error, or each Filter plugin that rejected nodes (once per
/// attempt).
fn count_failure(by: &mut std::collections::BTreeMap<&'static str, u64>, e: &muster_sched::FitError, pods: u64) {
    let mut count = |what: &'static str| *by.entry(what).or_default() += pods;
    if e.group.is_some() {
        count("PodGroup");
    } else if e.pre_filter.is_some() {
        count("PreFilter");
    } else if let Some(err) = &e.error {
        count(err.plugin);
    } else {
        // Each plugin once (no allocation: this runs for every failed attempt).
        for (i, r) in e.rejections().iter().enumerate() {
            if !e.rejections()[..i].iter().any(|earlier| earlier.plugin == r.plugin) {
                count(r.plugin);
            }
        }
    }
}

fn allocated(
    claim: &ResourceClaim,
) -> impl Iterator<Item = &k8s_openapi::api::resource::v1::DeviceRequestAllocationResult> {
    let devices = claim.status.iter().flat_map(|s| s.allocation.iter()).flat_map(|a| a.devices.iter());
    devices.flat_map(|d| d.results.iter().flatten())
}
mod endpoints;
mod hpa;

/// The wall-clock instant virtual time 0 stands for in the objects the sim creates (their
/// `creationTimestamp`): 2026-01-01T00:00:00Z. Only the queue's FIFO order reads it.
pub const EPOCH_MS: i64 = 1_767_225_600_000;

/// How a simulation runs.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Stop at this virtual time (events after it do not happen); without it, the simulation runs
    /// until nothing is left to happen.
    pub until: Option<Millis>,
    /// Recorded in the report; draws the cold start of each replica of an endpoint whose cold
    /// start is a range ([`crate::trace::Endpoint::cold_start_for`]). The same seed, the same run.
    pub seed: u64,
    /// How many devices the cluster's ResourceSlices publish: the denominator of the utilization.
    pub devices: u64,
    /// Keep a sample of allocated devices and pending pods at every step (for plots).
    pub samples: bool,
    /// The DeviceClass of jobs that ask for GPUs without naming one (the binary passes the
    /// cluster's only DeviceClass, when it has exactly one).
    pub default_class: Option<String>,
    /// The devices of each node, for the fragmentation figures (empty: none counted).
    pub inventory: Inventory,
    /// The capacities of the devices that allow multiple allocations
    /// ([`crate::usage::shared_capacity`]): a
    /// share of such a device counts as the part of it the share consumed.
    pub shared_capacity: SharedCapacity,
}

/// Something that can read elapsed time, handed in by a caller that wants to know where the
/// simulation spends its time (a bench). Its readings go to [`Timing`] only, never into a decision.
pub trait Stopwatch {
    /// Nanoseconds since some fixed instant.
    fn nanos(&self) -> u64;
}

/// Where the time went, when a [`Stopwatch`] was given.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    /// In `Engine::apply`, `Engine::schedule` and `Engine::effects`.
    pub engine_ns: u64,
    /// Everything, the engine included.
    pub total_ns: u64,
    /// Calls to `Engine::schedule`, pods placed, and pods found unschedulable (counted whether
    /// or not a stopwatch was given).
    pub schedule_calls: u64,
    pub placed: u64,
    pub unschedulable: u64,
    /// PodGroup cycles run (a gang's attempt, placed or not).
    pub group_attempts: u64,
    /// Of `group_attempts`, those that repeated the gang's last failure on the bound from its
    /// kept reading.
    pub group_repeats: u64,
}

/// A failure of the simulation itself (the engine refused a change the sim made).
#[derive(Clone, Debug, PartialEq)]
pub struct SimError(pub String);

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SimError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The job's pods (and group, and claims) are created: its first arrival, or a restart.
    Arrive { job: u32 },
    /// One pod of the job's attempt finished (stale when the attempt was restarted since).
    Finish { job: u32, pod: u32, attempt: u32 },
    /// The trace's cluster event number `i` (a node's; device events are not in the heap).
    Cluster(u32),
    /// NoExecute device taints whose tolerations run out now evict their pods.
    TaintEvictions,
    /// Every HorizontalPodAutoscaler syncs.
    HpaSync,
    /// An endpoint's metric changes.
    Load { endpoint: u32 },
    /// An endpoint's replica is done with its cold start.
    Ready { endpoint: u32, index: u32 },
}

/// A job as the world tracks it.
#[derive(Clone, Debug, Default)]
struct JobState {
    arrived: bool,
    attempt: u32,
    /// When each pod of the current attempt was bound, and the devices it got (in [`MILLI`]).
    started: Vec<Option<(Millis, u64)>>,
    finished: u32,
    /// When the current attempt's pods were all running; the first such time is `start`.
    start: Option<Millis>,
    end: Option<Millis>,
    restarts: u32,
    /// The last reason a pod of the job was found unschedulable (shared with its gang).
    reason: Option<Message>,
    /// The last resolve (its number) that gave the job an act about its reason.
    acted: u64,
    nodes: Vec<String>,
}

/// What the world does about one effect, resolved to names before anything changes (ids of the
/// engine's store can move under deletes).
enum Act {
    Evict {
        key: String,
        preempted: bool,
    },
    WriteClaim(Box<ResourceClaim>),
    /// The pod (`namespace/name`), copied from the engine's store and bound to the node.
    Bind {
        key: String,
        pod: Box<StoredPod>,
        node: String,
    },
    /// Pod `index` of job `job` did not fit (found by the engine's pod id when the effect came).
    Unschedulable {
        job: u32,
        index: u32,
        message: Message,
    },
}

/// A simulation in progress: the engine, and the world around it.
pub struct Sim<'d, 's> {
    engine: Engine<'d>,
    w: World<'s>,
}

/// Everything of a simulation but the engine.
pub struct World<'s> {
    trace: Trace,
    options: Options,
    jobs: Vec<JobState>,
    heap: BinaryHeap<Reverse<(Millis, u64, Event)>>,
    seq: u64,
    /// Sim pods by key: (job, pod index).
    pods: Map<String, (u32, u32)>,
    /// The same by the engine's id of the pod (a slot the store reuses once the pod is deleted:
    /// cleared by [`Sim::delete_pod`], the only way the world deletes a pod). Every unschedulable
    /// verdict finds its job here, without hashing the key.
    by_id: Vec<Option<(u32, u32)>>,
    /// Pods deleted while the current plan's acts are carried out ([`Sim::stale`]).
    deleted: Set<String>,
    /// The same for the sim's pods, by (job, pod index): an unschedulable verdict's act is
    /// checked without building its pod's key.
    deleted_pods: Set<(u32, u32)>,
    /// Claims whose allocation the world has written, with their devices (in [`MILLI`]) and
    /// their whole devices per node of the inventory.
    allocated_claims: Map<String, (u64, Vec<(u32, u64)>)>,
    /// Free devices per node; free and stranded devices integrated over time, and the peak.
    free: Free,
    free_ms: u128,
    stranded_ms: u128,
    out_of_service_ms: u128,
    /// Failed pod attempts by what failed them.
    unschedulable_by: std::collections::BTreeMap<&'static str, u64>,
    rack_gang_ms: u128,
    peak_stranded: u64,
    /// Devices allocated now (in [`MILLI`]), and their time integral.
    allocated: u64,
    allocated_ms: u128,
    pending_pods: u64,
    now: Millis,
    last_flush: Millis,
    preemptions: u64,
    evictions: u64,
    lost_device_ms: u128,
    events: u64,
    steps: u64,
    /// Resolves so far: each numbers the acts about reasons it gives.
    resolves: u64,
    samples: Vec<Sample>,
    /// The trace's classes, sorted; each job's index into them; devices held per class (in
    /// [`MILLI`]).
    class_names: Vec<String>,
    class_of: Vec<u32>,
    class_allocated: Vec<u64>,
    stopwatch: Option<&'s dyn Stopwatch>,
    timing: Timing,
    /// The trace's device events (indices into its events, by time) and the first not yet due.
    device_events: Vec<u32>,
    device_cursor: usize,
    /// What the caller did about the device events due next ([`Sim::devices_changed`]).
    update: Option<DeviceUpdate>,
    /// Every device's taints, as of the last device event.
    taints: Option<DeviceTaints>,
    /// The inventory's devices tainted `NoSchedule` or `NoExecute`: out of service unless held.
    blocked: Set<DeviceKey>,
    /// Pods that failed with a GPU they held.
    failures: u64,
    /// The trace's inference endpoints; their replicas by key (endpoint, replica index); the
    /// last HPA sync.
    endpoints: Vec<endpoints::EndpointState>,
    replica_of: Map<String, (u32, u32)>,
    hpa_end: Millis,
}

/// The device events due now, carried out on the DRA inputs: the taints as they are now, and the
/// devices whose holders fail ([`crate::devices::DeviceInputs::apply`]).
pub struct DeviceUpdate {
    /// When the events are due: the next step's time.
    pub at: Millis,
    pub taints: DeviceTaints,
    pub failed: Vec<DeviceKey>,
}

impl<'d, 's> Sim<'d, 's> {
    /// A simulation of `trace` over the engine's cluster (pods already in it stay as they are;
    /// pending ones are scheduled with the jobs).
    pub fn new(engine: Engine<'d>, trace: Trace, options: Options) -> Sim<'d, 's> {
        let mut allocated_claims = Map::default();
        let mut free = Free::new(&options.inventory, common_shape(&trace.jobs));
        for c in &engine.cluster().claims {
            let n = allocation_milli(&options.shared_capacity, &c.claim);
            if n > 0 {
                let on = options.inventory.claim_nodes(&c.claim);
                free.change(&on, true);
                allocated_claims.insert(c.key(), (n, on));
            }
        }
        let allocated = allocated_claims.values().map(|(n, _)| n).sum();
        let jobs = vec![JobState::default(); trace.jobs.len()];
        // The jobs' classes and the endpoints': the plot of devices per class shows both.
        let classes = trace.jobs.iter().map(|j| j.class.clone()).chain(trace.endpoints.iter().map(|e| e.class.clone()));
        let class_names: Vec<String> = classes.collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        let class_of =
            trace.jobs.iter().map(|j| class_names.binary_search(&j.class).expect("listed above") as u32).collect();
        let class_allocated = vec![0; class_names.len()];
        let w = World {
            trace,
            options,
            jobs,
            heap: BinaryHeap::new(),
            seq: 0,
            pods: Map::default(),
            by_id: Vec::new(),
            deleted: Default::default(),
            deleted_pods: Default::default(),
            allocated_claims,
            free,
            free_ms: 0,
            stranded_ms: 0,
            out_of_service_ms: 0,
            unschedulable_by: Default::default(),
            rack_gang_ms: 0,
            peak_stranded: 0,
            allocated,
            allocated_ms: 0,
            pending_pods: 0,
            now: 0,
            last_flush: 0,
            preemptions: 0,
            evictions: 0,
            lost_device_ms: 0,
            events: 0,
            steps: 0,
            resolves: 0,
            samples: Vec::new(),
            class_names,
            class_of,
            class_allocated,
            stopwatch: None,
            timing: Timing::default(),
            device_events: Vec::new(),
            device_cursor: 0,
            update: None,
            taints: None,
            blocked: Default::default(),
            failures: 0,
            endpoints: Vec::new(),
            replica_of: Map::default(),
            hpa_end: 0,
        };
        let mut sim = Sim { engine, w };
        for j in 0..sim.w.trace.jobs.len() {
            let at = sim.w.trace.jobs[j].arrival;
            sim.push(at, Event::Arrive { job: j as u32 });
        }
        for i in 0..sim.w.trace.events.len() {
            let at = sim.w.trace.events[i].at;
            if sim.w.trace.events[i].kind.changes_devices() {
                sim.w.device_events.push(i as u32);
            } else {
                sim.push(at, Event::Cluster(i as u32));
            }
        }
        let events = &sim.w.trace.events;
        sim.w.device_events.sort_by_key(|i| (events[*i as usize].at, *i));
        sim.push_endpoint_events();
        sim
    }

    /// Counts the devices the taints of the DRA inputs at the start put out of service (the
    /// fragmentation figures leave them out of the free devices).
    pub fn with_device_taints(mut self, taints: &DeviceTaints) -> Self {
        self.count_out_of_service(taints);
        self
    }

    /// Times the engine against the whole with `stopwatch` ([`Sim::timing`]).
    pub fn with_stopwatch(mut self, stopwatch: &'s dyn Stopwatch) -> Self {
        self.w.stopwatch = Some(stopwatch);
        self
    }

    pub fn timing(&self) -> Timing {
        self.w.timing
    }

    pub fn engine(&self) -> &Engine<'d> {
        &self.engine
    }

    fn push(&mut self, at: Millis, event: Event) {
        self.w.seq += 1;
        self.w.heap.push(Reverse((at, self.w.seq, event)));
    }

    fn nanos(&self) -> u64 {
        self.w.stopwatch.map_or(0, |s| s.nanos())
    }

    fn apply(&mut self, change: Change) -> Result<(), SimError> {
        let t0 = self.nanos();
        let r = self.engine.apply(change, self.w.now).map_err(|e| SimError(format!("at {} ms: {e}", self.w.now)));
        self.w.timing.engine_ns += self.nanos() - t0;
        r
    }

    /// The next step's time, if anything is left to happen (and it is not past `until`).
    fn next_time(&self) -> Option<Millis> {
        let heap = self.w.heap.peek().map(|Reverse((at, _, _))| *at);
        let event = match (heap, self.next_device_event()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let wake = self.engine.next_wakeup().map(|w| w.max(self.w.now + 1));
        let next = match (event, wake) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        match self.w.options.until {
            Some(u) if next > u => None,
            _ => Some(next),
        }
    }

    /// Runs one step (the next time anything happens); false when nothing is left. Device events
    /// due at that time must have been carried out first ([`Sim::devices_due`], [`Sim::devices_changed`]):
    /// [`crate::run`] does.
    pub fn step(&mut self) -> Result<bool, SimError> {
        let next = match &self.w.update {
            Some(update) => Some(update.at),
            None => self.next_time(),
        };
        let Some(t) = next else { return Ok(false) };
        if self.w.update.is_none() && self.next_device_event() == Some(t) {
            return Err(SimError(format!(
                "at {t} ms: device events are due; a trace with device events runs through muster_sim::run"
            )));
        }
        let t0 = self.nanos();
        self.advance(t);
        self.w.steps += 1;
        if let Some(update) = self.w.update.take() {
            while self.next_device_event() == Some(t) {
                self.w.device_cursor += 1;
                self.w.events += 1;
            }
            self.on_devices(update)?;
        }
        while let Some(Reverse((at, _, event))) = self.w.heap.peek().copied() {
            if at != t {
                break;
            }
            self.w.heap.pop();
            self.w.events += 1;
            self.handle(event)?;
        }
        if t >= self.w.last_flush + 30_000 {
            self.engine.flush_unschedulable(t);
            self.w.last_flush = t;
        }
        // Rounds of scheduling at t while a round changed the cluster (bounded: each round either
        // binds or evicts something).
        for _ in 0..1_000 {
            let e0 = self.nanos();
            let plan = self.engine.schedule(t);
            let effects = self.engine.effects(&plan);
            self.w.timing.engine_ns += self.nanos() - e0;
            let acts = self.resolve(&effects);
            let changed = plan.placements.len() + plan.preempted.len() + plan.pod_preemptions.len();
            self.w.timing.schedule_calls += 1;
            self.w.timing.placed += plan.placements.len() as u64;
            self.w.timing.unschedulable += plan.unschedulable.len() as u64;
            // A failed gang's members share their verdict: they count at once.
            for (pods, e) in plan.unschedulable.runs() {
                count_failure(&mut self.w.unschedulable_by, e, pods.len() as u64);
            }
            self.w.timing.group_attempts += plan.groups.len() as u64;
            // Gang cycles that repeated their last verdict on the bound: counted as if listed.
            let repeated = &plan.repeated;
            self.w.timing.unschedulable += repeated.pods;
            self.w.timing.group_attempts += repeated.groups.len() as u64;
            self.w.timing.group_repeats += repeated.groups.len() as u64;
            if repeated.pods > 0 {
                *self.w.unschedulable_by.entry("PodGroup").or_default() += repeated.pods;
            }
            self.w.deleted.clear();
            self.w.deleted_pods.clear();
            for act in acts {
                if !self.stale(&act) {
                    self.carry_out(act)?;
                }
            }
            if changed == 0 {
                break;
            }
        }
        self.w.peak_stranded = self.w.peak_stranded.max(self.w.free.stranded());
        if self.w.options.samples {
            self.w.samples.push(Sample {
                at: t,
                allocated: whole(self.w.allocated),
                pending_pods: self.w.pending_pods,
                per_class: self.w.class_allocated.iter().copied().map(whole).collect(),
                free: self.w.free.free(),
                stranded: self.w.free.stranded(),
                largest: self.w.free.largest(),
                rack_gang: self.w.free.largest_rack_gang(),
                preemptions: self.w.preemptions,
                evictions: self.w.evictions,
                failures: self.w.failures,
                lost_device_ms: self.w.lost_device_ms,
                serving: self.serving(),
            });
        }
        self.w.timing.total_ns += self.nanos() - t0;
        Ok(true)
    }

    /// Runs until nothing is left to happen (or `until`), and reports.
    pub fn run(mut self) -> Result<Report, SimError> {
        while self.step()? {}
        Ok(self.report())
    }

    /// Moves virtual time to `t`, counting the devices held (and free, and stranded) meanwhile.
    fn advance(&mut self, t: Millis) {
        debug_assert!(t >= self.w.now);
        let dt = u128::from(t - self.w.now);
        self.w.allocated_ms += u128::from(self.w.allocated) * dt;
        self.w.free_ms += u128::from(self.w.free.free()) * dt;
        self.w.stranded_ms += u128::from(self.w.free.stranded()) * dt;
        self.w.out_of_service_ms += u128::from(self.w.free.out_of_service()) * dt;
        self.w.rack_gang_ms += u128::from(self.w.free.largest_rack_gang()) * dt;
        self.w.now = t;
    }

    fn handle(&mut self, event: Event) -> Result<(), SimError> {
        match event {
            Event::Arrive { job } => self.arrive(job as usize),
            Event::Finish { job, pod, attempt } => self.finish_pod(job as usize, pod as usize, attempt),
            Event::Cluster(i) => {
                let kind = self.w.trace.events[i as usize].kind.clone();
                match kind {
                    EventKind::DrainNode(node) => self.drain(&node),
                    EventKind::ReturnNode(node) => self.cordon(&node, false),
                    _ => Err(SimError("a device event was queued as a node's".into())),
                }
            }
            Event::TaintEvictions => self.taint_evictions(),
            Event::HpaSync => self.hpa_sync(),
            Event::Load { endpoint } => {
                self.check_cold(endpoint as usize);
                Ok(())
            }
            Event::Ready { endpoint, index } => {
                self.replica_ready(endpoint, index);
                Ok(())
            }
        }
    }

    /// Pod `i` of the job: `<job>-<i>`.
    fn pod_name(&self, job: usize, i: usize) -> String {
        indexed(&self.w.trace.jobs[job].name, i)
    }

    fn key(&self, job: usize, name: &str) -> String {
        muster_api::key::namespaced(&self.w.trace.jobs[job].namespace, name)
    }

    /// Creates the job's objects: its PodGroup (a gang), then per pod its claim and the pod.
    fn arrive(&mut self, job: usize) -> Result<(), SimError> {
        let spec = self.w.trace.jobs[job].clone();
        let state = &mut self.w.jobs[job];
        state.arrived = true;
        state.started = vec![None; spec.pods as usize];
        state.finished = 0;
        let attempt = state.attempt;
        let created = Time(
            k8s_openapi::jiff::Timestamp::from_millisecond(EPOCH_MS + self.w.now as i64)
                .map_err(|e| SimError(format!("time out of range: {e}")))?,
        );
        if spec.gang {
            // The group carries its pods' priority (the scheduler requires them to agree).
            let mut group = json!({
                "metadata": {"name": spec.name, "namespace": spec.namespace, "creationTimestamp": created},
                "spec": {"schedulingPolicy": {"gang": {"minCount": spec.pods}}}
            });
            if let Some(p) = spec.priority {
                group["spec"]["priority"] = json!(p);
            }
            if let Some(pc) = &spec.priority_class_name {
                group["spec"]["priorityClassName"] = json!(pc);
            }
            let group: PodGroup =
                serde_json::from_value(group).map_err(|e| SimError(format!("job {}: {e}", spec.name)))?;
            self.apply(Change::UpsertPodGroup(Box::new(group)))?;
        }
        for i in 0..spec.pods as usize {
            let name = self.pod_name(job, i);
            let uid = format!("sim-{}-{name}-{attempt}", spec.namespace);
            let (claim, pod) = self.pod_objects(&spec, &name, &uid, &created, "muster.dev/sim-job")?;
            if let Some(claim) = claim {
                self.apply(Change::UpsertClaim(Box::new(claim)))?;
            }
            let key = self.key(job, &name);
            self.w.pending_pods += 1;
            self.apply(Change::UpsertPod(Box::new(pod)))?;
            let at = (job as u32, i as u32);
            if let Some(id) = self.engine.cluster().pod_id(&key) {
                let slot = id.0 as usize;
                if self.w.by_id.len() <= slot {
                    self.w.by_id.resize(slot + 1, None);
                }
                self.w.by_id[slot] = Some(at);
            }
            self.w.pods.insert(key, at);
        }
        Ok(())
    }

    /// A pod of `spec` named `name` (labelled `label: <spec's name>` and with the class), and its
    /// claim when it asks for GPUs.
    pub(super) fn pod_objects(
        &self,
        spec: &Job,
        name: &str,
        uid: &str,
        created: &Time,
        label: &str,
    ) -> Result<(Option<ResourceClaim>, Pod), SimError> {
        use k8s_openapi::api::core::v1 as core;
        use k8s_openapi::api::resource::v1 as resource;
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
        let requests: std::collections::BTreeMap<String, Quantity> = [("cpu", &spec.cpu), ("memory", &spec.memory)]
            .into_iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| (k.to_string(), Quantity(v.clone()))))
            .collect();
        let mut container = core::Container {
            name: "main".into(),
            resources: Some(core::ResourceRequirements { requests: Some(requests), ..Default::default() }),
            ..Default::default()
        };
        let labels = [(label.to_string(), spec.name.clone()), ("muster.dev/sim-class".into(), spec.class.clone())];
        let meta = ObjectMeta {
            name: Some(name.into()),
            namespace: Some(spec.namespace.clone()),
            uid: Some(uid.into()),
            // The API server keeps whole seconds.
            creation_timestamp: Some(whole_seconds(created)),
            labels: Some(labels.into_iter().collect()),
            ..Default::default()
        };
        let mut pod_spec = core::PodSpec {
            priority: spec.priority,
            priority_class_name: spec.priority_class_name.clone(),
            scheduling_group: spec.gang.then(|| core::PodSchedulingGroup { pod_group_name: Some(spec.name.clone()) }),
            ..Default::default()
        };
        let mut made = None;
        if spec.gpus_per_pod > 0 {
            let class = match &spec.device_class {
                Some(c) => c.clone(),
                None => self.default_class()?,
            };
            let selectors = spec.device_selector.as_ref().map(|cel| {
                vec![resource::DeviceSelector { cel: Some(resource::CELDeviceSelector { expression: cel.clone() }) }]
            });
            let capacity = (!spec.capacity_requests.is_empty()).then(|| resource::CapacityRequirements {
                requests: Some(spec.capacity_requests.iter().map(|(k, v)| (k.clone(), Quantity(v.clone()))).collect()),
            });
            let exactly = resource::ExactDeviceRequest {
                device_class_name: class,
                allocation_mode: Some("ExactCount".into()),
                count: Some(i64::from(spec.gpus_per_pod)),
                selectors,
                capacity,
                ..Default::default()
            };
            let claim_name = format!("{name}-gpus");
            let owner = OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: name.into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            };
            made = Some(ResourceClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name.clone()),
                    namespace: Some(spec.namespace.clone()),
                    owner_references: Some(vec![owner]),
                    ..Default::default()
                },
                spec: Some(resource::ResourceClaimSpec {
                    devices: Some(resource::DeviceClaim {
                        requests: Some(vec![resource::DeviceRequest {
                            name: "gpus".into(),
                            exactly: Some(exactly),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                }),
                status: None,
            });
            let claim = core::ResourceClaim { name: "gpus".into(), ..Default::default() };
            container.resources.get_or_insert_with(Default::default).claims = Some(vec![claim]);
            pod_spec.resource_claims = Some(vec![core::PodResourceClaim {
                name: "gpus".into(),
                resource_claim_name: Some(claim_name),
                ..Default::default()
            }]);
        }
        pod_spec.containers = vec![container];
        let pod = Pod { metadata: meta, spec: Some(pod_spec), status: None };
        Ok((made, pod))
    }

    /// The DeviceClass a job without `deviceClass` asks for: [`Options::default_class`].
    fn default_class(&self) -> Result<String, SimError> {
        self.w.options.default_class.clone().ok_or_else(|| {
            SimError(
                "a job asks for GPUs without deviceClass, and the cluster has no single DeviceClass to default to"
                    .into(),
            )
        })
    }

    /// One pod of the job's attempt finished: it is deleted, its claim released.
    fn finish_pod(&mut self, job: usize, i: usize, attempt: u32) -> Result<(), SimError> {
        if self.w.jobs[job].attempt != attempt {
            return Ok(()); // the attempt was restarted: this pod is gone already
        }
        let name = self.pod_name(job, i);
        let key = self.key(job, &name);
        self.delete_pod(&key)?;
        self.w.pods.remove(&key);
        if let Some((_, devices)) = self.w.jobs[job].started[i] {
            self.w.class_allocated[self.w.class_of[job] as usize] -= devices;
        }
        let state = &mut self.w.jobs[job];
        state.finished += 1;
        if state.finished == self.w.trace.jobs[job].pods {
            state.end = Some(self.w.now);
            if self.w.trace.jobs[job].gang {
                let key = self.key(job, &self.w.trace.jobs[job].name);
                self.apply(Change::DeletePodGroup(key))?;
            }
        }
        Ok(())
    }

    /// Deletes a pod, then does what the claim controller does about its claims.
    fn delete_pod(&mut self, key: &str) -> Result<(), SimError> {
        self.w.deleted.insert(key.to_string());
        let Some(id) = self.engine.cluster().pod_id(key) else { return Ok(()) };
        if let Some(slot) = self.w.by_id.get_mut(id.0 as usize)
            && let Some(at) = slot.take()
        {
            self.w.deleted_pods.insert(at);
        }
        // A claim's slot outlives the pod: it is vacant only once the claim is deleted too.
        let claims: Vec<muster_sched::ClaimId> =
            self.engine.cluster().pod(id).claims.iter().flatten().copied().collect();
        self.apply(Change::DeletePod(key.to_string()))?;
        for claim in claims {
            let c = self.engine.cluster();
            let info = &c.claims[claim];
            let claim_key = info.key();
            let ns = info.claim.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let lookup = |name: &str| c.pod_id(&muster_api::key::namespaced(&ns, name)).map(|p| &c.pod(p).pod);
            let out = self.out_of_service_in(&info.claim);
            match release(&info.claim, lookup) {
                Some(Release::Delete(k)) => {
                    self.release_devices(&k, &out);
                    self.apply(Change::DeleteClaim(k))?;
                }
                Some(Release::Update(claim)) => {
                    if claim.status.as_ref().is_none_or(|s| s.allocation.is_none()) {
                        self.release_devices(&claim_key, &out);
                    }
                    self.apply(Change::UpsertClaim(claim))?;
                }
                None => {}
            }
        }
        Ok(())
    }

    /// A claim's devices are free again; `out` of them (per node) are out of service.
    fn release_devices(&mut self, claim_key: &str, out: &[(u32, u64)]) {
        if let Some((n, on)) = self.w.allocated_claims.remove(claim_key) {
            self.w.allocated -= n;
            self.w.free.change(&on, false);
            self.w.free.change_out_of_service(out, false);
        }
    }

    fn cordon(&mut self, node: &str, unschedulable: bool) -> Result<(), SimError> {
        let c = self.engine.cluster();
        let Some(id) = c.node_id(node) else {
            return Err(SimError(format!("the trace names node {node:?}, which the cluster does not have")));
        };
        let mut object = c.node(id).detail.node.clone();
        object.spec.get_or_insert_with(Default::default).unschedulable = Some(unschedulable);
        self.apply(Change::UpsertNode(Box::new(object)))
    }

    /// Cordons the node and evicts every pod on it.
    fn drain(&mut self, node: &str) -> Result<(), SimError> {
        self.cordon(node, true)?;
        let c = self.engine.cluster();
        let id = c.node_id(node).expect("cordoned above");
        let mut keys: Vec<String> = c.node(id).detail.pods.iter().map(|p| c.pod(*p).key.clone()).collect();
        keys.sort();
        for key in keys {
            self.evict(&key, false)?;
        }
        Ok(())
    }

    /// A running pod is evicted (preempted, or drained): a sim pod's job restarts; another pod is
    /// deleted.
    fn evict(&mut self, key: &str, preempted: bool) -> Result<(), SimError> {
        if self.engine.cluster().pod_id(key).is_none() {
            return Ok(()); // gone with its job already
        }
        if preempted {
            self.w.preemptions += 1;
        } else {
            self.w.evictions += 1;
        }
        self.lose(key)
    }

    /// A running pod is gone (evicted, preempted, failed): its job restarts, an endpoint's
    /// replica is replaced, another pod is deleted.
    fn lose(&mut self, key: &str) -> Result<(), SimError> {
        match self.w.pods.get(key).copied() {
            Some((job, _)) => self.restart(job as usize),
            None => self.replace_replica(key),
        }
    }

    /// Deletes the job's pods (and group), counts the device time they lose, and creates them
    /// again now.
    fn restart(&mut self, job: usize) -> Result<(), SimError> {
        let spec = self.w.trace.jobs[job].clone();
        for i in 0..spec.pods as usize {
            let name = self.pod_name(job, i);
            let key = self.key(job, &name);
            if self.w.pods.remove(&key).is_none() {
                continue; // finished
            }
            match self.w.jobs[job].started[i] {
                Some((since, devices)) => {
                    self.w.lost_device_ms += u128::from(devices) * u128::from(self.w.now - since);
                    self.w.class_allocated[self.w.class_of[job] as usize] -= devices;
                }
                None => self.w.pending_pods -= 1,
            }
            self.delete_pod(&key)?;
        }
        if spec.gang {
            let key = self.key(job, &spec.name);
            self.apply(Change::DeletePodGroup(key))?;
        }
        let state = &mut self.w.jobs[job];
        state.attempt += 1;
        state.restarts += 1;
        state.nodes.clear();
        let now = self.w.now;
        self.push(now, Event::Arrive { job: job as u32 });
        Ok(())
    }

    /// The effects as acts on names and objects.
    fn resolve(&mut self, effects: &[Effect]) -> Vec<Act> {
        let c: &Cluster = self.engine.cluster();
        let mut acts = Vec::with_capacity(effects.len());
        self.w.resolves += 1;
        let resolve = self.w.resolves;
        for e in effects {
            match e {
                Effect::Evict { pod, .. } => acts.push(Act::Evict { key: c.pod(*pod).key.clone(), preempted: true }),
                Effect::WriteClaimStatus { claim } | Effect::CreateExtendedClaim { claim, .. } => {
                    acts.push(Act::WriteClaim(c.claims[*claim].claim.clone()))
                }
                Effect::Bind { pod, node } => {
                    // A bind may clear the job's reason: a later act of this resolve about it
                    // is carried out whatever the reason is now.
                    if let Some((job, _)) = self.w.by_id.get(pod.0 as usize).copied().flatten() {
                        self.w.jobs[job as usize].acted = resolve;
                    }
                    let info = c.pod(*pod);
                    let mut bound = Box::new(info.pod.clone());
                    let name = c.node(*node).name().to_string();
                    bound.set_node_name(Some(name.clone()));
                    bound.ensure_status().phase = Some("Running".into());
                    acts.push(Act::Bind { key: info.key.clone(), pod: bound, node: name });
                }
                Effect::PodsUnschedulable { pods, message, .. } => {
                    // A job keeps one reason: a gang's members that share it make one act.
                    let mut last = None;
                    for pod in pods.iter() {
                        let at = self.w.by_id.get(pod.0 as usize).copied().flatten();
                        debug_assert_eq!(at, self.w.pods.get(c.pod(*pod).key.as_str()).copied());
                        if let Some((job, index)) = at
                            && last != Some(job)
                        {
                            last = Some(job);
                            // The reason the job has already, not changed by an earlier act of
                            // this resolve: nothing to do (most waiting pods are given the very
                            // verdict they had).
                            let state = &mut self.w.jobs[job as usize];
                            let first = std::mem::replace(&mut state.acted, resolve) != resolve;
                            if first && state.reason.as_ref().is_some_and(|r| r.is_copy_of(message)) {
                                continue;
                            }
                            acts.push(Act::Unschedulable { job, index, message: message.clone() })
                        }
                    }
                }
                Effect::GroupCondition { .. } | Effect::Event { .. } | Effect::BindVolumes { .. } => {}
            }
        }
        acts
    }

    /// Whether an act is about pods an earlier act of the same plan deleted (a preemption that
    /// restarts a job deletes its pods placed in that plan too): their binding and their claims'
    /// allocations are not carried out.
    fn stale(&self, act: &Act) -> bool {
        match act {
            Act::Bind { key, .. } => self.w.deleted.contains(key),
            Act::Unschedulable { job, index, .. } => {
                let gone = self.w.deleted_pods.contains(&(*job, *index));
                debug_assert_eq!(
                    gone,
                    self.w.deleted.contains(&self.key(*job as usize, &self.pod_name(*job as usize, *index as usize)))
                );
                gone
            }
            Act::WriteClaim(claim) => {
                let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
                let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.as_deref()).unwrap_or_default();
                !reserved.is_empty()
                    && reserved.iter().all(|r| {
                        r.resource == "pods" && self.w.deleted.contains(&muster_api::key::namespaced(ns, &r.name))
                    })
            }
            Act::Evict { .. } => false,
        }
    }

    fn carry_out(&mut self, act: Act) -> Result<(), SimError> {
        match act {
            Act::Evict { key, preempted } => self.evict(&key, preempted),
            Act::WriteClaim(claim) => {
                let key = muster_sched::object_key(&claim.metadata);
                let n = allocation_milli(&self.w.options.shared_capacity, &claim);
                if n > 0 && !self.w.allocated_claims.contains_key(&key) {
                    let on = self.w.options.inventory.claim_nodes(&claim);
                    self.w.free.change(&on, true);
                    let out = self.out_of_service_in(&claim);
                    self.w.free.change_out_of_service(&out, true);
                    self.w.allocated_claims.insert(key, (n, on));
                    self.w.allocated += n;
                }
                self.apply(Change::UpsertClaim(claim))
            }
            Act::Bind { key, pod, node } => {
                let devices = self.pod_devices(&key);
                self.apply(Change::UpsertStoredPod(pod))?;
                if self.replica_bound(&key, devices) {
                    return Ok(());
                }
                let Some((job, i)) = self.w.pods.get(&key).copied() else { return Ok(()) };
                let (job, i) = (job as usize, i as usize);
                self.w.pending_pods -= 1;
                self.w.class_allocated[self.w.class_of[job] as usize] += devices;
                let now = self.w.now;
                let state = &mut self.w.jobs[job];
                state.started[i] = Some((now, devices));
                if state.started.iter().all(Option::is_some) {
                    if state.start.is_none() {
                        state.start = Some(now);
                    }
                    state.reason = None;
                }
                if state.nodes.len() < state.started.len() {
                    state.nodes.push(node);
                }
                let attempt = state.attempt;
                let at = now + self.w.trace.jobs[job].duration;
                self.push(at, Event::Finish { job: job as u32, pod: i as u32, attempt });
                Ok(())
            }
            Act::Unschedulable { job, message, .. } => {
                self.w.jobs[job as usize].reason = Some(message);
                Ok(())
            }
        }
    }

    /// The devices allocated to the pod's claims (in [`MILLI`]), as the engine's store holds them.
    fn pod_devices(&self, key: &str) -> u64 {
        let c = self.engine.cluster();
        let Some(id) = c.pod_id(key) else { return 0 };
        let shared = &self.w.options.shared_capacity;
        c.pod(id).claims.iter().flatten().map(|claim| allocation_milli(shared, &c.claims[*claim].claim)).sum()
    }

    /// The report, at the time the simulation stopped (or at `until`).
    pub fn report(mut self) -> Report {
        if let Some(u) = self.w.options.until
            && u > self.w.now
        {
            self.advance(u);
        }
        let span = self.w.now;
        let outcomes: Vec<JobOutcome> = self
            .w
            .trace
            .jobs
            .iter()
            .zip(&self.w.jobs)
            .map(|(spec, s)| {
                let state = if s.end.is_some() {
                    "finished"
                } else if s.started.iter().any(Option::is_some) {
                    "running"
                } else {
                    "pending"
                };
                let reason = match state {
                    "pending" if !s.arrived => Some("arrives after the end of the simulation".to_string()),
                    "pending" => Some(s.reason.as_ref().map_or("not attempted yet".to_string(), Message::to_string)),
                    _ => None,
                };
                let mut nodes = s.nodes.clone();
                nodes.sort();
                JobOutcome {
                    name: spec.name.clone(),
                    namespace: spec.namespace.clone(),
                    class: spec.class.clone(),
                    arrival: spec.arrival,
                    start: s.start,
                    end: s.end,
                    state,
                    reason,
                    restarts: s.restarts,
                    nodes,
                    gang: spec.gang,
                }
            })
            .collect();
        Report::build(crate::report::Totals {
            jobs: outcomes,
            span,
            seed: self.w.options.seed,
            devices: self.w.options.devices,
            allocated_ms: self.w.allocated_ms / u128::from(MILLI),
            preemptions: self.w.preemptions,
            evictions: self.w.evictions,
            failures: self.w.failures,
            lost_device_ms: self.w.lost_device_ms / u128::from(MILLI),
            events: self.w.events,
            steps: self.w.steps,
            samples: std::mem::take(&mut self.w.samples),
            class_names: std::mem::take(&mut self.w.class_names),
            shape: self.w.free.shape(),
            free_ms: self.w.free_ms,
            stranded_ms: self.w.stranded_ms,
            out_of_service_ms: self.w.out_of_service_ms,
            out_of_service_now: self.w.free.out_of_service(),
            peak_stranded: self.w.peak_stranded,
            free_now: self.w.free.free(),
            stranded_now: self.w.free.stranded(),
            racks: self.w.options.inventory.racks.len(),
            rack_gang_ms: self.w.rack_gang_ms,
            rack_gang_now: self.w.free.largest_rack_gang(),
            inventory_devices: self.w.options.inventory.nodes.iter().map(|(_, d)| d).sum(),
            unschedulable_by: std::mem::take(&mut self.w.unschedulable_by),
            endpoints: self.endpoint_outcomes(),
        })
    }

    /// Whether the engine's store has a device allocated to two claims of pods that hold
    /// resources, or a gang partly running (a check for tests; it reads every pod).
    pub fn check(&self) -> Result<(), String> {
        let c = self.engine.cluster();
        let mut owners: HashMap<(String, String, String), String> = HashMap::new();
        let mut shares: HashMap<(String, String, String), u64> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        for p in c.pods.iter().filter(|p| p.state.on_node().is_some()) {
            for claim in p.claims.iter().flatten() {
                if !seen.insert(*claim) {
                    continue; // shared by pods: one allocation
                }
                let claim = &c.claims[*claim].claim;
                let name = claim.metadata.name.clone().unwrap_or_default();
                for r in allocated(claim) {
                    let device = (r.driver.clone(), r.pool.clone(), r.device.clone());
                    if r.share_id.is_some() {
                        let total = shares.entry(device).or_default();
                        *total += result_milli(&self.w.options.shared_capacity, r);
                        if *total > MILLI {
                            return Err(format!("device {}/{} is shared beyond its capacity", r.pool, r.device));
                        }
                        continue;
                    }
                    if let Some(other) = owners.insert(device, name.clone()) {
                        return Err(format!(
                            "device {}/{} is allocated to claims {other} and {name}",
                            r.pool, r.device
                        ));
                    }
                }
            }
        }
        self.check_taints()?;
        c.claim_users_agree()?;
        self.w.free.check()?;
        let inventory: u64 = self.w.options.inventory.nodes.iter().map(|(_, d)| d).sum();
        // Shares of a device count once per claim in the free counts: exact only without them.
        let exact = self.w.options.shared_capacity.is_empty();
        let (free, out) = (self.w.free.free(), self.w.free.out_of_service());
        if exact && inventory == self.w.options.devices && free + out + self.w.allocated / MILLI != inventory {
            let allocated = self.w.allocated / MILLI;
            return Err(format!("{free} devices free, {out} out of service and {allocated} allocated of {inventory}"));
        }
        let by_class: u64 = self.w.class_allocated.iter().sum();
        if by_class > self.w.allocated {
            return Err(format!("{by_class} devices counted for the classes, {} allocated", self.w.allocated));
        }
        for (j, s) in self.w.jobs.iter().enumerate() {
            let spec = &self.w.trace.jobs[j];
            if !spec.gang || s.end.is_some() {
                continue;
            }
            let running = s.started.iter().filter(|x| x.is_some()).count();
            if running != 0 && running != s.started.len() {
                return Err(format!("gang {} has {running} of {} pods running", spec.name, s.started.len()));
            }
        }
        Ok(())
    }

    pub fn now(&self) -> Millis {
        self.w.now
    }

    /// Events handled so far (arrivals, finishes, cluster events, HPA syncs...).
    pub fn events(&self) -> u64 {
        self.w.events
    }
}

/// `<name>-<i>`, written without the formatting machinery (a name is made for each pod of
/// each job at each event that concerns it).
fn indexed(name: &str, i: usize) -> String {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = i;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut out = String::with_capacity(name.len() + 1 + digits.len() - at);
    out.push_str(name);
    out.push('-');
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pod_name_is_its_job_a_dash_and_its_index() {
        for i in [0, 7, 10, 99, 12_345, usize::MAX] {
            assert_eq!(super::indexed("train", i), format!("train-{i}"));
        }
    }
}
