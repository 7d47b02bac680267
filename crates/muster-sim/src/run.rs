//! A whole simulation over DRA inputs that change: the engine borrows its ResourceSlices and
//! DeviceClasses, so at each instant the trace's device events are due, the simulation is paused,
//! the events are carried out on [`DeviceInputs`], and an engine over the new scheduling view
//! takes over the paused cluster and queue (as `muster run` does when its watches report new
//! DRA objects). Between device events, one engine runs every step.

use muster_controllers::eviction::DeviceKey;
use muster_sched::queue::SchedulingQueue;
use muster_sched::{Cluster, DraContext, Engine, SchedulerConfig};

use crate::devices::DeviceInputs;
use crate::report::Report;
use crate::trace::{EventKind, Millis, Trace};
use crate::world::{DeviceUpdate, Options, Sim, SimError, Stopwatch, World};

/// Runs `trace` over `cluster` and `inputs` under `config` to the end (or `options.until`).
pub fn run(
    cluster: Cluster,
    config: &SchedulerConfig,
    inputs: DeviceInputs,
    trace: Trace,
    options: Options,
    stopwatch: Option<&dyn Stopwatch>,
) -> Result<Report, SimError> {
    run_observing(cluster, config, inputs, trace, options, stopwatch, &mut |_| Ok(()))
}

/// What looks at the simulation after each step (a test's checks).
pub type Observer<'o> = dyn FnMut(&Sim<'_, '_>) -> Result<(), SimError> + 'o;

/// [`run`], with `observe` called after every step; its error stops the run.
pub fn run_observing(
    cluster: Cluster,
    config: &SchedulerConfig,
    mut inputs: DeviceInputs,
    trace: Trace,
    options: Options,
    stopwatch: Option<&dyn Stopwatch>,
    observe: &mut Observer<'_>,
) -> Result<Report, SimError> {
    let mut next = Next::Start(Box::new((cluster, trace, options)));
    loop {
        match epoch(&inputs, next, config, stopwatch, observe)? {
            Ended::Report(report) => return Ok(*report),
            Ended::Due(paused, at, kinds) => {
                let mut failed = Vec::new();
                for kind in &kinds {
                    failed.extend(inputs.apply(kind, at)?);
                }
                next = Next::Resume(paused, at, failed);
            }
        }
    }
}

/// One engine's share of the run: until the end, or until device events are due.
fn epoch<'s>(
    inputs: &DeviceInputs,
    next: Next<'s>,
    config: &SchedulerConfig,
    stopwatch: Option<&'s dyn Stopwatch>,
    observe: &mut Observer<'_>,
) -> Result<Ended<'s>, SimError> {
    let (slices, taints) = inputs.view();
    let ctx = DraContext {
        index: muster_alloc::SliceIndex::new(&slices),
        classes: &inputs.classes,
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let mut sim = match next {
        Next::Start(start) => {
            let (cluster, trace, options) = *start;
            let sim = Sim::new(Engine::new(cluster, config.clone(), Some(&ctx)).with_gang_bound(), trace, options)
                .with_device_taints(&taints);
            match stopwatch {
                Some(s) => sim.with_stopwatch(s),
                None => sim,
            }
        }
        Next::Resume(paused, at, failed) => {
            let Paused { world, cluster, queue } = *paused;
            let engine = Engine::from_parts(cluster, queue, config.clone(), Some(&ctx), at).with_gang_bound();
            Sim::resume(world, engine, DeviceUpdate { at, taints, failed })
        }
    };
    loop {
        if let Some((at, kinds)) = sim.devices_due() {
            let (world, cluster, queue) = sim.pause();
            return Ok(Ended::Due(Box::new(Paused { world, cluster, queue }), at, kinds));
        }
        if !sim.step()? {
            return Ok(Ended::Report(Box::new(sim.report())));
        }
        observe(&sim)?;
    }
}

/// How an engine's share of the run ended.
enum Ended<'s> {
    Report(Box<Report>),
    /// Device events are due at `at`: the paused world, cluster and queue.
    Due(Box<Paused<'s>>, Millis, Vec<EventKind>),
}

/// A simulation taken apart ([`Sim::pause`]).
struct Paused<'s> {
    world: World<'s>,
    cluster: Cluster,
    queue: SchedulingQueue,
}

/// How the next engine takes over.
enum Next<'s> {
    Start(Box<(Cluster, Trace, Options)>),
    /// The paused world, cluster and queue; when the device events are due, and the devices whose
    /// holders fail.
    Resume(Box<Paused<'s>>, Millis, Vec<DeviceKey>),
}
