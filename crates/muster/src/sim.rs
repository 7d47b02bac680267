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
    /// Run the same trace again under another scheduler configuration and put the runs side by
    /// side in one report (repeatable): `least-allocated`, `most-allocated`, or a
    /// KubeSchedulerConfiguration file. With one, it is compared with the configuration the
    /// other flags give.
    #[arg(long, value_name = "CONFIG")]
    compare: Vec<String>,
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
    let text = std::fs::read_to_string(&args.trace)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.trace.display()))?;
    let trace = match Trace::parse(&args.trace.display().to_string(), &text) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut runs = Vec::new();
    // The flags' configuration runs alone, or beside one --compare; several --compare run alone.
    let mut configs = Vec::new();
    if args.compare.len() <= 1 {
        configs.push((base_label(&args), base_config(&args)?));
    }
    for c in &args.compare {
        configs.push((c.clone(), compared_config(c)?));
    }
    for (label, (config, names)) in configs {
        match simulate(&args, &trace, config, &names)? {
            Ok(report) => runs.push((label, report)),
            Err(code) => return Ok(code),
        }
    }
    let title = format!("muster sim: {}", args.trace.display());
    let rendered = match (&runs[..], args.output) {
        ([(_, report)], SimFormat::Json) => report.json(),
        ([(_, report)], SimFormat::Text) => report.text(),
        ([(_, report)], SimFormat::Html) => muster_sim::html::render(report, &title),
        (_, SimFormat::Json) => muster_sim::compare::json(&runs),
        (_, SimFormat::Text) => muster_sim::compare::text(&runs),
        (_, SimFormat::Html) => muster_sim::html::render_comparison(&runs, &title),
    };
    match &args.out {
        Some(path) => {
            std::fs::write(path, rendered).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?
        }
        None => print!("{rendered}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The configuration `--config` and `--scoring` give, with the scheduler names of its profiles.
fn base_config(args: &SimArgs) -> anyhow::Result<(SchedulerConfig, Vec<String>)> {
    crate::config::from_flags(args.config.as_deref(), args.scoring)
}

/// The name of the flags' configuration in a comparison.
fn base_label(args: &SimArgs) -> String {
    match (&args.config, args.scoring) {
        (Some(path), _) => path.display().to_string(),
        (None, Some(crate::Scoring::MostAllocated)) => "most-allocated".into(),
        (None, _) => "least-allocated".into(),
    }
}

/// One `--compare` value: a scoring strategy's name or a configuration file.
fn compared_config(value: &str) -> anyhow::Result<(SchedulerConfig, Vec<String>)> {
    let mut config = SchedulerConfig::default();
    match value {
        "least-allocated" => config.scoring_strategy = muster_sched::ScoringStrategy::LeastAllocated,
        "most-allocated" => config.scoring_strategy = muster_sched::ScoringStrategy::MostAllocated,
        path => {
            let path = std::path::Path::new(path);
            if !path.exists() {
                anyhow::bail!("--compare {value}: neither least-allocated, most-allocated nor a configuration file");
            }
            return crate::config::from_flags(Some(path), None);
        }
    }
    Ok((config, Vec::new()))
}

/// One run of the trace over the cluster under `config`: the report, or the exit code of input
/// the run refused.
fn simulate(
    args: &SimArgs,
    trace: &Trace,
    config: SchedulerConfig,
    names: &[String],
) -> anyhow::Result<Result<muster_sim::report::Report, ExitCode>> {
    let names = if names.is_empty() { SchedulerNames::default() } else { SchedulerNames(names.to_vec()) };
    let loaded = muster_manifest::load_paths(&args.paths)
        .and_then(|m| memory::World::from_manifests_with(m, &names, memory::Options::default()));
    let mut world = match loaded {
        Ok(w) => w,
        Err(diags) => return Ok(Err(crate::refuse(&diags, "; nothing was simulated"))),
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
        inventory: muster_sim::fragmentation::Inventory::from_slices(&world.slices),
    };
    let report =
        Sim::new(engine, trace.clone(), options).run().map_err(|e| anyhow::anyhow!("simulation failed: {e}"))?;
    Ok(Ok(report))
}
