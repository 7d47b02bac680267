//! `muster sim`: the cluster read from manifests exactly as `plan` reads it (and/or built from an
//! openb node list), a trace read from a file (muster's format or an openb pod list), and
//! [`muster_sim`] running the trace over virtual time with the same engine. This module owns the
//! edges only: reading, the engine's inputs, writing the report.

use std::path::PathBuf;
use std::process::ExitCode;

use muster_manifest::Object;
use muster_sched::{SchedulerConfig, SchedulerNames};
use muster_sim::{Options, Trace, openb};

use crate::{Scoring, memory};

#[derive(clap::Args)]
pub struct SimArgs {
    /// Cluster manifests (nodes, ResourceSlices, DeviceClasses, PriorityClasses, running pods);
    /// `-` reads standard input. As for `muster plan`. Optional with --openb-nodes.
    #[arg(value_name = "PATH", required_unless_present = "openb_nodes")]
    paths: Vec<PathBuf>,
    /// The workload trace: muster's format (apiVersion muster.dev/v1alpha1, kind Trace), or an
    /// Alibaba cluster-trace-gpu-v2023 "openb" pod list (a CSV recognised by its header).
    #[arg(long, value_name = "FILE")]
    trace: PathBuf,
    /// Build the cluster (also) from an openb node list: a Node per row, and a ResourceSlice of
    /// shareable `gpu` devices with the model as an attribute.
    #[arg(long, value_name = "FILE")]
    openb_nodes: Option<PathBuf>,
    /// Output format: text, json (a stable summary, classes and one line per job) or html (one
    /// self-contained page: allocation and pending pods over time, wait CDF per class, worst
    /// waits).
    #[arg(short, long, value_enum, default_value_t = SimFormat::Text)]
    output: SimFormat,
    /// Write the report to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Draws the cold start of each replica of an endpoint whose cold start is a range; recorded
    /// in the report. The same seed, the same run.
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
    /// As for `muster plan`.
    #[arg(long)]
    reprieve_search: bool,
    /// As for `muster run`, for every configuration run.
    #[arg(long, value_name = "GATES", value_parser = crate::feature_gates::FeatureGates::parse, default_value = "")]
    feature_gates: crate::feature_gates::FeatureGates,
    /// Run the same trace again under another scheduler configuration and put the runs side by
    /// side in one report (repeatable): `least-allocated`, `most-allocated`, or a
    /// KubeSchedulerConfiguration file, with `+reprieve-search` after it for muster's
    /// preemption reprieve (`most-allocated+reprieve-search`). With one, it is compared with the
    /// configuration the other flags give.
    #[arg(long, value_name = "CONFIG")]
    compare: Vec<String>,
    /// The node label that names a node's rack, for the largest gang placeable in one rack
    /// (nodes without it belong to no rack; no node with it, no such figure).
    #[arg(long, value_name = "KEY", default_value = "topology.kubernetes.io/rack")]
    rack_label: String,
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

fn read(path: &std::path::Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))
}

/// The trace in either format, with notes about the input: an openb pod list's rows left out
/// (also on stderr).
fn read_trace(path: &std::path::Path) -> anyhow::Result<Result<(Trace, Vec<String>), muster_sim::TraceError>> {
    let text = read(path)?;
    let file = path.display().to_string();
    if !openb::is_pod_list(&text) {
        return Ok(Trace::parse(&file, &text).map(|t| (t, Vec::new())));
    }
    Ok(openb::parse_pods(&file, &text).map(|list| {
        let notes: Vec<String> = list.skipped.summary().into_iter().map(|s| format!("{file}: {s}")).collect();
        for note in &notes {
            eprintln!("warning: {note}");
        }
        (list.trace, notes)
    }))
}

pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    let parsed = read_trace(&args.trace).and_then(|trace| Ok((trace?, openb_cluster(&args)?)));
    let ((trace, notes), openb_nodes) = match parsed {
        Ok(t) => t,
        Err(e) => match e.downcast::<muster_sim::TraceError>() {
            Ok(e) => {
                eprintln!("error: {e}");
                return Ok(ExitCode::from(2));
            }
            Err(e) => return Err(e),
        },
    };
    // The flags' configuration runs alone, or beside one --compare; several --compare run alone.
    let mut configs = Vec::new();
    if args.compare.len() <= 1 {
        configs.push((base_label(&args), base_config(&args)?));
    }
    for c in &args.compare {
        configs.push((c.clone(), compared_config(c)?));
    }
    // Each configuration's cluster is built before any runs: input refused stops them all once.
    let mut prepared = Vec::new();
    for (label, (mut config, names)) in configs {
        args.feature_gates.apply(&mut config);
        match prepare(&args, openb_nodes.as_ref(), &names)? {
            Ok(world) => prepared.push((label, config, world)),
            Err(code) => return Ok(code),
        }
    }
    // The progress line names the configurations in a comparison only.
    let labels =
        prepared.iter().map(|(label, _, _)| if args.compare.is_empty() { String::new() } else { label.clone() });
    let board = crate::progress::Board::new(&trace, args.until, labels.collect());
    let reports = run_all(prepared, &trace, &board)?;
    board.finish();
    let runs: Vec<(String, muster_sim::report::Report)> = reports
        .into_iter()
        .map(|(label, mut report)| {
            report.notes = notes.clone();
            (label, report)
        })
        .collect();
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
    let (mut config, names) = crate::config::from_flags(args.config.as_deref(), args.scoring)?;
    config.reprieve_search = args.reprieve_search;
    Ok((config, names))
}

/// The name of the flags' configuration in a comparison.
fn base_label(args: &SimArgs) -> String {
    let label = match (&args.config, args.scoring) {
        (Some(path), _) => path.display().to_string(),
        (None, Some(crate::Scoring::MostAllocated)) => "most-allocated".into(),
        (None, _) => "least-allocated".into(),
    };
    if args.reprieve_search { format!("{label}+reprieve-search") } else { label }
}

/// One `--compare` value: a scoring strategy's name or a configuration file, and
/// `+reprieve-search` after it.
fn compared_config(value: &str) -> anyhow::Result<(SchedulerConfig, Vec<String>)> {
    if let Some(base) = value.strip_suffix("+reprieve-search") {
        let (mut config, names) = compared_config(base)?;
        config.reprieve_search = true;
        return Ok((config, names));
    }
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

/// `--openb-nodes`, read.
fn openb_cluster(args: &SimArgs) -> anyhow::Result<Option<openb::OpenbCluster>> {
    let Some(path) = &args.openb_nodes else { return Ok(None) };
    Ok(Some(openb::parse_nodes(&path.display().to_string(), &read(path)?)?))
}

/// The manifests of PATH, with the openb cluster's objects after them.
fn manifests(
    args: &SimArgs,
    openb: Option<&openb::OpenbCluster>,
) -> Result<muster_manifest::Manifests, Vec<muster_manifest::Diagnostic>> {
    let mut manifests =
        if args.paths.is_empty() { Default::default() } else { muster_manifest::load_paths(&args.paths)? };
    let (Some(cluster), Some(path)) = (openb, &args.openb_nodes) else { return Ok(manifests) };
    let file: std::sync::Arc<str> = path.display().to_string().into();
    let origin = |line: u64| muster_manifest::Origin {
        file: file.clone(),
        pos: muster_manifest::Pos { line: u32::try_from(line).unwrap_or(u32::MAX), col: 1 },
    };
    let mut add = |object, line| manifests.objects.push(muster_manifest::Loaded { object, origin: origin(line) });
    for (line, node) in &cluster.nodes {
        add(Object::Node(Box::new(node.clone())), *line);
    }
    for (line, slice) in &cluster.slices {
        add(Object::ResourceSlice(Box::new(slice.clone())), *line);
    }
    add(Object::DeviceClass(Box::new(cluster.device_class.clone())), 1);
    Ok(manifests)
}

/// A configuration's starting point: its cluster, device inputs and options.
struct Prepared {
    cluster: muster_sched::Cluster,
    inputs: muster_sim::devices::DeviceInputs,
    options: Options,
}

/// The cluster of PATH (and the openb nodes) as a run under a configuration with scheduler
/// `names` starts from, or the exit code of input it refused.
fn prepare(
    args: &SimArgs,
    openb: Option<&openb::OpenbCluster>,
    names: &[String],
) -> anyhow::Result<Result<Prepared, ExitCode>> {
    let names = if names.is_empty() { SchedulerNames::default() } else { SchedulerNames(names.to_vec()) };
    let manifests = match manifests(args, openb) {
        Ok(m) => m,
        Err(diags) => return Ok(Err(crate::refuse(&diags, "; nothing was simulated"))),
    };
    // The slices as drivers publish them: the device events change their taints.
    let published: Vec<_> = manifests
        .objects
        .iter()
        .filter_map(|o| match &o.object {
            Object::ResourceSlice(s) => Some((**s).clone()),
            _ => None,
        })
        .collect();
    let options = memory::Options::default();
    let mut world = match memory::World::from_manifests_with(manifests, &names, options) {
        Ok(w) => w,
        Err(diags) => return Ok(Err(crate::refuse(&diags, "; nothing was simulated"))),
    };
    let devices = world.slices.iter().map(|s| s.spec.devices.as_ref().map_or(0, Vec::len) as u64).sum();
    let default_class = match world.device_classes.as_slice() {
        [only] => only.metadata.name.clone(),
        _ => None,
    };
    let sim_options = Options {
        until: args.until,
        seed: args.seed,
        devices,
        samples: matches!(args.output, SimFormat::Html),
        default_class,
        inventory: muster_sim::fragmentation::Inventory::from_slices(&world.slices).with_racks(|name| {
            let c = &world.cluster;
            c.node_id(name).and_then(|id| c.node(id).detail.labels.get(&args.rack_label).cloned())
        }),
        shared_capacity: muster_sim::usage::shared_capacity(&world.slices),
    };
    let inputs = muster_sim::devices::DeviceInputs::new(
        published,
        std::mem::take(&mut world.rules),
        std::mem::take(&mut world.device_classes),
        options.health_propagation,
    );
    let cluster = std::mem::take(&mut world.cluster);
    Ok(Ok(Prepared { cluster, inputs, options: sim_options }))
}

/// Runs each configuration over the trace, as many at once as the machine has cores (each run
/// is independent and deterministic: the reports are those runs one after another would give),
/// and returns the reports in the configurations' order; the first failure in that order, if
/// any.
fn run_all(
    prepared: Vec<(String, SchedulerConfig, Prepared)>,
    trace: &Trace,
    board: &crate::progress::Board,
) -> anyhow::Result<Vec<(String, muster_sim::report::Report)>> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let runs = prepared.len();
    let jobs = std::sync::Mutex::new(prepared.into_iter().enumerate().collect::<std::collections::VecDeque<_>>());
    let done = std::sync::Mutex::new(Vec::with_capacity(runs));
    let worker = || {
        loop {
            let next = jobs.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
            let Some((i, (label, config, world))) = next else { return };
            let report = simulate(trace, config, world, board, i);
            done.lock().unwrap_or_else(|e| e.into_inner()).push((i, label, report));
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..cores.min(runs) {
            scope.spawn(worker);
        }
        worker();
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _, _)| *i);
    done.into_iter().map(|(_, label, report)| Ok((label, report?))).collect()
}

/// One run of the trace over a prepared cluster under `config`, its progress shown as run `run`
/// of the board.
fn simulate(
    trace: &Trace,
    config: SchedulerConfig,
    world: Prepared,
    board: &crate::progress::Board,
    run: usize,
) -> anyhow::Result<muster_sim::report::Report> {
    let mut observe = |sim: &muster_sim::Sim<'_, '_>| {
        board.update(run, sim.now(), sim.events());
        Ok(())
    };
    let Prepared { cluster, inputs, options } = world;
    let run = muster_sim::run_observing(cluster, &config, inputs, trace.clone(), options, None, &mut observe);
    run.map_err(|e| anyhow::anyhow!("simulation failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compared_configuration_may_ask_for_the_reprieve_search() {
        let (plain, _) = compared_config("most-allocated").unwrap();
        assert!(!plain.reprieve_search);
        let (search, _) = compared_config("most-allocated+reprieve-search").unwrap();
        assert!(search.reprieve_search);
        assert_eq!(search.scoring_strategy, muster_sched::ScoringStrategy::MostAllocated);
        assert!(compared_config("nothing+reprieve-search").is_err());
    }
}
