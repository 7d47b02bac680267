//! `muster sim`: the cluster read from manifests exactly as `plan` reads it, a trace read from a
//! file, and [`muster_sim`] running the trace over virtual time with the same engine. This module
//! owns the edges only: reading, the engine's inputs, writing the report.

use std::path::PathBuf;
use std::process::ExitCode;

use muster_sched::{SchedulerConfig, SchedulerNames};
use muster_sim::{Options, Sim, Trace};

use crate::{Scoring, memory};

#[derive(clap::Args)]
pub struct SimArgs {
    /// Cluster manifests (nodes, ResourceSlices, DeviceClasses, PriorityClasses, running pods);
    /// `-` reads standard input. As for `muster plan`.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// The workload trace (muster's format: apiVersion muster.dev/v1alpha1, kind Trace).
    #[arg(long, value_name = "FILE")]
    trace: PathBuf,
    /// Output format: text, json (a stable summary, classes and one line per job) or html (one
    /// self-contained page: allocation and pending pods over time, wait CDF per class, worst
    /// waits).
    #[arg(short, long, value_enum, default_value_t = SimFormat::Text)]
    output: SimFormat,
    /// Write the report to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Recorded in the report; the trace format has no random field yet.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop the simulation at this virtual time (e.g. 7d, 12h); default: when nothing is left to
    /// happen.
    #[arg(long, value_name = "DURATION", value_parser = parse_until)]
    until: Option<u64>,
    /// As for `muster plan`.
    #[arg(long, value_enum)]
    scoring: Option<Scoring>,
    /// As for `muster plan`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum SimFormat {
    Text,
    Json,
    Html,
}

fn parse_until(s: &str) -> Result<u64, String> {
    muster_sim::trace::parse_duration(s)
}

pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    let mut config = SchedulerConfig::default();
    let mut names = Vec::new();
    if let Some(path) = &args.config {
        names = crate::config::load(path, &mut config)?;
    }
    if let Some(s) = args.scoring {
        config.scoring_strategy = s.into();
    }
    let names = if names.is_empty() { SchedulerNames::default() } else { SchedulerNames(names) };
    let text = std::fs::read_to_string(&args.trace)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.trace.display()))?;
    let trace = match Trace::parse(&args.trace.display().to_string(), &text) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let loaded = muster_manifest::load_paths(&args.paths)
        .and_then(|m| memory::World::from_manifests_with(m, &names, memory::Options::default()));
    let mut world = match loaded {
        Ok(w) => w,
        Err(diags) => return Ok(crate::refuse(&diags, "; nothing was simulated")),
    };
    let dra = muster_sched::DraContext {
        index: muster_alloc::SliceIndex::new(&world.slices),
        classes: &world.device_classes,
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let devices = world.slices.iter().map(|s| s.spec.devices.as_ref().map_or(0, Vec::len) as u64).sum();
    let default_class = match world.device_classes.as_slice() {
        [only] => only.metadata.name.clone(),
        _ => None,
    };
    let cluster = std::mem::take(&mut world.cluster);
    let engine = muster_sched::Engine::new(cluster, config, Some(&dra));
    let options = Options {
        until: args.until,
        seed: args.seed,
        devices,
        samples: matches!(args.output, SimFormat::Html),
        default_class,
    };
    let report = Sim::new(engine, trace, options).run().map_err(|e| anyhow::anyhow!("simulation failed: {e}"))?;
    let rendered = match args.output {
        SimFormat::Json => report.json(),
        SimFormat::Text => report.text(),
        SimFormat::Html => muster_sim::html::render(&report, &format!("muster sim: {}", args.trace.display())),
    };
    match &args.out {
        Some(path) => {
            std::fs::write(path, rendered).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?
        }
        None => print!("{rendered}"),
    }
    Ok(ExitCode::SUCCESS)
}
