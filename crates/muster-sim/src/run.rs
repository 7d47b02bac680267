//! A whole simulation over DRA inputs that change: at each instant the trace's device events are
//! due, they are carried out on [`DeviceInputs`], and the engine takes the slices whose scheduling
//! view changed, one at a time ([`muster_sched::Engine::apply_devices`]), as `muster run` does
//! when its watches report changed DRA objects. One engine runs every step.

use muster_alloc::SliceIndex;
use muster_sched::{Cluster, DraContext, Engine, SchedulerConfig, slice_changes};

use crate::devices::DeviceInputs;
use crate::report::Report;
use crate::trace::Trace;
use crate::world::{DeviceUpdate, Options, Sim, SimError, Stopwatch};

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
    let (slices, taints) = inputs.view();
    let ctx = DraContext {
        index: SliceIndex::new(slices),
        classes: inputs.classes.clone(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let engine = Engine::with_own_dra(cluster, config.clone(), ctx).with_gang_bound();
    let mut sim = Sim::new(engine, trace, options).with_device_taints(&taints);
    if let Some(s) = stopwatch {
        sim = sim.with_stopwatch(s);
    }
    loop {
        if let Some((at, kinds)) = sim.devices_due() {
            let mut failed = Vec::new();
            for kind in &kinds {
                failed.extend(inputs.apply(kind, at)?);
            }
            let view = inputs.changed_view();
            let index = &sim.engine().dra().expect("an engine over DRA inputs").index;
            let changes = slice_changes(index, view.slices, view.whole);
            sim.devices_changed(changes, DeviceUpdate { at, taints: view.taints, failed })?;
            continue;
        }
        if !sim.step()? {
            return Ok(sim.report());
        }
        observe(&sim)?;
    }
}
