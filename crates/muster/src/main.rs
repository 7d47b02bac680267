//! muster: a Kubernetes 1.37 scheduler for GPU and AI workloads.
//!
//! The binary owns the command line and the worlds' edges: it reads manifests, runs the engine,
//! and prints. It makes no scheduling decision of its own.

mod bench;
mod check;
mod config;
mod conformance;
mod convert;
mod devices;
mod effects;
mod feature_gates;
#[cfg(test)]
mod fuzz;
mod memory;
mod output;
mod progress;
mod run;
mod sim;
mod source;
mod text;
mod validation;
mod why;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use muster_sched::{SchedulerConfig, SchedulerNames, ScoringStrategy};

/// mimalloc: the plan cycle allocates and frees many small objects (claim statuses at Reserve,
/// allocator scratch); glibc malloc's consolidation showed up at 10-15 % of `bench plan-dra`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "muster", version, about = "A Kubernetes 1.37 scheduler for GPU and AI workloads", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Schedule the pending pods of a cluster read from manifests, in memory, and show the plan.
    ///
    /// PATHs are files, directories (read recursively for *.yaml, *.yml and *.json) or `-` for
    /// standard input: multi-document YAML, JSON, or `kind: List` dumps as `kubectl get -o yaml`
    /// writes them. Exits 0 when the plan ran (even if pods stay pending), 2 on bad input.
    Plan(PlanArgs),
    /// List the devices of the manifests' ResourceSlices and which of them a DeviceClass and/or a
    /// CEL selector selects, or why evaluating it fails. Exits 0 when it ran, 2 on bad input or a
    /// selector that does not compile. Selectors are evaluated within a total CEL cost of
    /// 100,000,000 for the command (MUSTER_CEL_BUDGET overrides it); devices left when it is spent
    /// are listed as not evaluated.
    Devices(DevicesArgs),
    /// Explain where a pod or a PodGroup goes in the plan `muster plan` makes, or why it goes
    /// nowhere: the verdict, then every node's first failing Filter (for DRA, each request's
    /// device accounting), on the snapshot as it stood when the target's attempt ran. TARGET is
    /// pod/NAMESPACE/NAME or podgroup/NAMESPACE/NAME. Exits 0 when it ran, 2 on bad input or an
    /// unknown target.
    Why(WhyArgs),
    /// Validate manifests without scheduling: the strict schema, the outdated forms of older or
    /// simplified write-ups (each with its Kubernetes 1.37 form), references between objects, CEL
    /// selectors (compiled, and the attributes they read checked against the input's
    /// ResourceSlices), and every rule the 1.37 API server applies on create to the fields muster
    /// reads (names, labels, enums, list limits, required fields), with its field path and
    /// message, exactly as `plan` judges them. Exits 0 without errors (warnings allowed), 1 with errors, 2 when the input
    /// cannot be read.
    Check(CheckArgs),
    /// Rewrite manifests that hold the outdated forms `muster check` names into Kubernetes 1.37
    /// objects (to standard output, or in place with -w); objects already valid are kept byte for
    /// byte, their selectors never rewritten. Changes made on an assumption carry a `# muster
    /// convert:` comment. Objects that cannot be converted faithfully (classic DRA:
    /// resource.k8s.io/v1alpha2, resourceClassName, parametersRef) are kept as written; they, and
    /// every object `muster check` still finds an error in, are named on standard error with why.
    /// Exits 0 when the output checks clean, 1 when an object is named, 2 when the input cannot
    /// be read.
    Convert(ConvertArgs),
    /// Run conformance data: `muster conformance allocator DIR` runs every AllocationCase file in
    /// DIR through the allocator, prints `PASS name` or `FAIL name: what differs` per case and
    /// `N passed, M failed`; exits 1 if any failed.
    Conformance {
        #[command(subcommand)]
        suite: ConformanceSuite,
    },
    /// Run as a live scheduler against a Kubernetes API server: watch, schedule with the same
    /// engine as `plan`, and write as kube-scheduler 1.37 does (claims' status, bindings,
    /// PodScheduled conditions, events). Serves pods whose schedulerName is muster, beside
    /// kube-scheduler. Runs until SIGINT/SIGTERM (or, with --exit-when-idle, until idle).
    Run(run::RunArgs),
    /// Measure muster on generated clusters in scheduler_perf's shapes.
    Bench {
        #[command(subcommand)]
        bench: BenchCommand,
    },
    /// Simulate a workload trace (muster's format or an Alibaba openb pod list) over virtual time
    /// on a cluster read from manifests or an openb node list, with the scheduler `plan` runs:
    /// jobs arrive, run for their duration and finish; nodes drain and return. Reports waits, GPU
    /// utilization, preemptions and evictions. Exits 0 when it ran, 2 on bad input.
    Sim(sim::SimArgs),
}

#[derive(clap::Args)]
struct PlanArgs {
    /// Manifest files or directories; `-` reads standard input. With --kubeconfig, objects added
    /// to the cluster's ("what if I submit this job?").
    #[arg(required_unless_present = "kubeconfig", value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Read the cluster's current state through this kubeconfig (without a value: the current
    /// context of KUBECONFIG or ~/.kube/config) and plan in memory; nothing is written.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "",
          value_parser = clap::builder::StringValueParser::new())]
    kubeconfig: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// Schedule pods whose spec.schedulerName is NAME (repeatable). Default: default-scheduler and
    /// muster; pods for other schedulers are listed and left alone.
    #[arg(long = "scheduler-name", value_name = "NAME")]
    scheduler_names: Vec<String>,
    /// How NodeResourcesFit scores nodes: least-allocated spreads (kube-scheduler's default),
    /// most-allocated bin-packs (keeps whole GPU nodes free for large jobs). Overrides --config.
    #[arg(long, value_enum)]
    scoring: Option<Scoring>,
    /// A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file: percentageOfNodesToScore,
    /// profiles (one per schedulerName), score plugin weights, plugin args.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Stop Filter after this percentage of nodes were found feasible (0 = kube-scheduler's
    /// adaptive default, 100 = consider every node). Overrides --config.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(0..=100))]
    percentage_of_nodes_to_score: Option<u32>,
    /// How long a gang (PodGroup with minCount) may wait for all its pods to exist before muster
    /// marks it PodGroupInitiallyScheduled=False, reason GangWaitTimeout. Kubernetes has no such
    /// field (the article's `scheduleTimeoutSeconds` does not exist); `plan` reports it. The wait
    /// is measured from the PodGroup's creationTimestamp to --now; `-o yaml` writes the condition
    /// only when both are known.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    gang_wait_timeout: u64,
    /// The time of the plan, in RFC 3339 (e.g. 2026-01-01T00:00:00Z). A plan reads no clock: with
    /// -o yaml this is the lastTransitionTime of every PodGroup and CompositePodGroup condition the
    /// plan writes (PodGroupInitiallyScheduled, CompositePodGroupInitiallyScheduled,
    /// DisruptionTarget), the allocationTimestamp of claims whose devices have binding conditions,
    /// and the end of a gang's wait for --gang-wait-timeout. Without it those are left out and a
    /// comment line before each object names them.
    #[arg(long, value_name = "RFC3339", value_parser = parse_now)]
    now: Option<Time>,
    /// Do not copy NoSchedule/NoExecute taints of a full device (one that consumes all of a
    /// counter set, such as a whole GPU) to the devices that share its counters (its MIG
    /// partitions). Without this flag a sick GPU's partitions are not handed out either.
    #[arg(long)]
    no_health_propagation: bool,
    /// Beyond upstream: when workload-aware preemption puts a victim back and the placement it
    /// found no longer fits, search for another placement before evicting the victim.
    /// kube-scheduler 1.37 keeps its first placement and evicts every victim in its way.
    #[arg(long)]
    reprieve_search: bool,
}

#[derive(clap::Args)]
struct WhyArgs {
    /// pod/NAMESPACE/NAME or podgroup/NAMESPACE/NAME.
    #[arg(value_name = "TARGET")]
    target: String,
    /// Manifest files or directories; `-` reads standard input.
    #[arg(required_unless_present = "kubeconfig", value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// As for `muster plan`: the cluster's current state, read once.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "",
          value_parser = clap::builder::StringValueParser::new())]
    kubeconfig: Option<String>,
    /// Output format: text for people, json for scripts.
    #[arg(short, long, value_enum, default_value_t = DevicesFormat::Table)]
    output: DevicesFormat,
    /// As for `muster plan`.
    #[arg(long = "scheduler-name", value_name = "NAME")]
    scheduler_names: Vec<String>,
    /// As for `muster plan`.
    #[arg(long, value_enum)]
    scoring: Option<Scoring>,
    /// As for `muster plan`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// As for `muster plan`.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(0..=100))]
    percentage_of_nodes_to_score: Option<u32>,
    /// As for `muster plan`.
    #[arg(long)]
    no_health_propagation: bool,
    /// As for `muster plan`.
    #[arg(long)]
    reprieve_search: bool,
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Manifest files or directories; `-` reads standard input.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Output format: text grouped by file, or a JSON list of findings
    /// {file, line, column, severity, object, field, message, fix}.
    #[arg(short, long, value_enum, default_value_t = CheckFormat::Text)]
    output: CheckFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum CheckFormat {
    Text,
    Json,
}

#[derive(clap::Args)]
struct ConvertArgs {
    /// A manifest file or a directory; `-` reads standard input.
    #[arg(value_name = "PATH")]
    path: PathBuf,
    /// Write the converted files in place instead of to standard output.
    #[arg(short = 'w', long = "write")]
    write: bool,
}

#[derive(Subcommand)]
enum ConformanceSuite {
    /// Upstream's structured-allocator test table (tests/conformance/allocator).
    Allocator { dir: PathBuf },
}

#[derive(clap::Args)]
struct DevicesArgs {
    /// Manifest files or directories; `-` reads standard input.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Evaluate this DeviceClass's selectors (the class must be in the input).
    #[arg(long, value_name = "NAME")]
    class: Option<String>,
    /// Evaluate this CEL expression too, as a request's selector (after the class's).
    #[arg(long, value_name = "EXPR")]
    selector: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = DevicesFormat::Table)]
    output: DevicesFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum DevicesFormat {
    Table,
    Json,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// scheduler_perf's SchedulingBasic: N nodes (4 cpu, 32Gi, 110 pods), M pending pods (100m,
    /// 500Mi). Times the plan cycle.
    Plan {
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        #[arg(long, default_value_t = 50000)]
        pods: usize,
        /// Distinct pod request shapes (1 = scheduler_perf's identical pods).
        #[arg(long, default_value_t = 1)]
        shapes: usize,
        #[arg(long, default_value_t = 5)]
        iterations: usize,
        #[arg(long, value_enum, default_value_t = Scoring::LeastAllocated)]
        scoring: Scoring,
        /// Scheduling profiles the pods alternate between (pod i goes to profile i mod N): the
        /// first is --scoring, the others score the other way, each under its own schedulerName.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
        profiles: u16,
    },
    /// scheduler_perf's inter-pod shapes (TopologySpreading, SchedulingPodAntiAffinity,
    /// SchedulingPreferredPodAffinity): NODES SchedulingBasic nodes in 3 zones, INIT_PODS bound,
    /// PODS pending with the shape's spread or affinity. Times the plan cycle.
    InterPod {
        #[arg(long, value_enum)]
        shape: InterPodShape,
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        #[arg(long, default_value_t = 5000)]
        init_pods: usize,
        #[arg(long, default_value_t = 10000)]
        pods: usize,
        #[arg(long, default_value_t = 5)]
        iterations: usize,
    },
    /// A living cluster through the engine: NODES SchedulingBasic nodes with RUNNING pods bound,
    /// then EVENTS changes (a running pod finishes, a pod arrives, a node is cordoned or returns),
    /// each applied alone and followed by scheduling until nothing is ready; placed pods are
    /// confirmed bound. Prints `N events/s` and the median cost of one pod add or delete.
    Churn {
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        #[arg(long, default_value_t = 50000)]
        running: usize,
        #[arg(long, default_value_t = 20000)]
        events: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Pods that never fit (required pod affinity to pods that never come), waiting
        /// meanwhile: what the queueing hints wake them for.
        #[arg(long, default_value_t = 0)]
        waiting: usize,
    },
    /// `muster sim` at scale: NODES x 8 H100 (the gpu bench's cluster), JOBS jobs (the gpu bench's
    /// mix, with durations) arriving over DAYS simulated days. Prints wall time, events/s and the
    /// share of time in the engine.
    Sim {
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        #[arg(long, default_value_t = 100_000)]
        jobs: usize,
        #[arg(long, default_value_t = 7)]
        days: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, value_enum, default_value_t = Scoring::LeastAllocated)]
        scoring: Scoring,
        /// Stop after this many seconds of wall time and report how far the simulation got.
        #[arg(long, value_name = "SECONDS")]
        wall_limit: Option<f64>,
        /// Give every pod a cycle of its own, even right after an equivalent pod was found
        /// unschedulable (the A/B of that reuse).
        #[arg(long)]
        without_verdict_reuse: bool,
        /// Beyond upstream: when a victim put back breaks the placement preemption found, search
        /// for another placement with it back before evicting it.
        #[arg(long)]
        reprieve_search: bool,
        /// As for `muster run`.
        #[arg(long, value_name = "GATES", value_parser = crate::feature_gates::FeatureGates::parse, default_value = "")]
        feature_gates: crate::feature_gates::FeatureGates,
    },
    /// Compile and evaluate the H100 selector of issue 3 over generated GPU device views.
    Cel {
        #[arg(long, default_value_t = 100_000)]
        devices: usize,
        #[arg(long, default_value_t = 5)]
        iterations: usize,
    },
    /// Time allocation calls on upstream's allocator test table.
    AllocConformance {
        #[arg(default_value = "tests/conformance/allocator")]
        dir: PathBuf,
        #[arg(long, default_value_t = 201)]
        reps: usize,
    },
    /// Renders one plan of CLAIMS pods with one device claim each as the table, JSON and YAML,
    /// each timed (every output is linear in what it shows).
    Output {
        #[arg(long, default_value_t = 40_000)]
        claims: usize,
    },
    /// scheduler_perf's SchedulingWithResourceClaimTemplate: pods with one one-device claim each.
    PlanDra {
        #[arg(long, default_value_t = 500)]
        nodes: usize,
        #[arg(long, default_value_t = 10)]
        devices: usize,
        #[arg(long, default_value_t = 5000)]
        pods: usize,
    },
    /// scheduler_perf's gangscheduling shape: SchedulingBasic nodes, GANGS PodGroups (gang
    /// minCount = PODS_PER_GANG) of SchedulingBasic pods. Times the plan and each group attempt.
    Gang {
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        #[arg(long, default_value_t = 3000)]
        gangs: usize,
        #[arg(long, default_value_t = 3)]
        pods_per_gang: usize,
        #[arg(long, default_value_t = 5)]
        iterations: usize,
    },
    /// A GPU cluster: NODES x 8 H100 in racks of 18, JOBS single pods (1-8 GPUs) and gangs (4-64
    /// pods) mixed by a seeded PRNG, claims from templates. Times the plan cycle.
    Gpu {
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        #[arg(long, default_value_t = 2000)]
        jobs: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 5)]
        iterations: usize,
        #[arg(long, value_enum, default_value_t = Scoring::LeastAllocated)]
        scoring: Scoring,
    },
    /// Time the allocator at scale: NODES x DEVICES one-device claims, one after another.
    AllocScale {
        #[arg(long, default_value_t = 500)]
        nodes: usize,
        #[arg(long, default_value_t = 10)]
        devices: usize,
        #[arg(long, default_value_t = 5000)]
        claims: usize,
    },
    /// Write the SchedulingBasic cluster as a YAML dump (to time loading with `bench load`).
    Write {
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        #[arg(long, default_value_t = 50000)]
        pods: usize,
        file: PathBuf,
    },
    /// Time reading manifests and building the cluster snapshot; report peak memory.
    Load {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Yaml,
    /// What the live scheduler would send to the API server, in order (evictions, claim
    /// statuses, bindings, PodScheduled=False, events).
    Effects,
}

#[derive(Clone, Copy, ValueEnum)]
enum InterPodShape {
    TopologySpreading,
    PodAntiAffinity,
    PreferredPodAffinity,
}

#[derive(Clone, Copy, ValueEnum)]
enum Scoring {
    LeastAllocated,
    MostAllocated,
}

impl From<Scoring> for ScoringStrategy {
    fn from(s: Scoring) -> Self {
        match s {
            Scoring::LeastAllocated => ScoringStrategy::LeastAllocated,
            Scoring::MostAllocated => ScoringStrategy::MostAllocated,
        }
    }
}

fn main() -> ExitCode {
    let cli = parse();
    // Not for `run`: a daemon's sockets must never kill it (it keeps SIGPIPE ignored).
    if !matches!(cli.command, Command::Run(_)) {
        quiet_on_closed_pipe();
    }
    choose_memory_policy(&cli.command);
    let result = match cli.command {
        Command::Plan(args) => plan(args),
        Command::Devices(args) => run_devices(args),
        Command::Why(args) => why::run(args),
        Command::Check(args) => check::run(&args.paths, matches!(args.output, CheckFormat::Json)),
        Command::Convert(args) => convert::run(&args.path, args.write),
        Command::Conformance { suite: ConformanceSuite::Allocator { dir } } => {
            conformance::run_dir(&dir).map(|(report, _, failed)| {
                print!("{report}");
                if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
            })
        }
        Command::Run(args) => run::run(args),
        Command::Bench { bench } => run_bench(bench),
        Command::Sim(args) => sim::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `muster plan ... | head`: when the reader goes away, end quietly as other command-line tools
/// do (the default action of SIGPIPE), instead of panicking on the failed write (Rust ignores
/// SIGPIPE by default). Called before any thread starts.
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default at start-up, before any thread runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// How the allocator keeps memory, by what the command does (BENCHMARKS.md: "Transparent huge
/// pages" and "mimalloc's purging off in `sim`"): a simulation keeps the memory it frees; a
/// command that runs once and ends (`plan`, `why`, `check`, most benches) takes no transparent
/// huge pages, whose first faults cost it seconds on some machines (`bench plan`: 0.6-4.1 s a
/// process with them, 0.6-0.8 s without) for a steady state it never reaches; `run` keeps the
/// default, as a daemon whose steady state is faster with huge pages. Each bench as its command.
fn choose_memory_policy(command: &Command) {
    match command {
        Command::Sim(_) | Command::Bench { bench: BenchCommand::Sim { .. } } => keep_freed_memory(),
        Command::Run(_) | Command::Bench { bench: BenchCommand::Churn { .. } } => {}
        _ => no_huge_pages(),
    }
}

/// Transparent huge pages off for this process (`PR_SET_THP_DISABLE`, what mimalloc's own
/// `allow_thp=0` does at start): later faults get 4 KiB pages even where mimalloc asked for
/// huge ones. A kernel without the call leaves things as they were.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: a prctl that only sets a flag of this process's memory map; the result is ignored
    // (an older kernel refuses it, and nothing else changes).
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// A simulation frees and allocates the same memory over and over for hours of simulated time;
/// mimalloc gives memory unused for 10 ms back to the OS (its `purge_delay`), and with
/// transparent huge pages the kernel then faults it in again as freshly zeroed 2 MiB pages
/// (`perf`: up to 15 % of `bench sim`). Here freed memory stays with the process: the peak RSS
/// is what it keeps (BENCHMARKS.md: "mimalloc's purging off in `sim`").
fn keep_freed_memory() {
    // `mi_option_purge_delay` in the mimalloc `libmimalloc-sys` builds (v3's and v2's
    // `mimalloc.h`: the 16th option, after the deprecated `eager_commit_delay`).
    const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;
    unsafe extern "C" {
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    // SAFETY: mimalloc's documented option setter, called from the main thread; -1 is its
    // documented "never purge".
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

/// The command line. As `kubectl muster ...` (the binary installed as `kubectl-muster`), `plan`
/// and `why` without manifests read the current kubectl context's cluster (`--kubeconfig`).
fn parse() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let plugin = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n.to_string_lossy().starts_with("kubectl-muster"));
    match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if plugin && e.kind() == clap::error::ErrorKind::MissingRequiredArgument => {
            let mut with = args;
            with.push("--kubeconfig".into());
            Cli::try_parse_from(with).unwrap_or_else(|e| e.exit())
        }
        Err(e) => e.exit(),
    }
}

fn plan(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let (mut config, mut names) = crate::config::from_flags(args.config.as_deref(), args.scoring)?;
    if let Some(p) = args.percentage_of_nodes_to_score {
        config.percentage_of_nodes_to_score = p;
    }
    config.gang_wait_timeout_seconds = args.gang_wait_timeout;
    config.reprieve_search = args.reprieve_search;
    if !args.scheduler_names.is_empty() {
        names = args.scheduler_names.clone();
    }
    let names = if names.is_empty() { SchedulerNames::default() } else { SchedulerNames(names) };
    let options = memory::Options { health_propagation: !args.no_health_propagation };
    let loaded = match args.kubeconfig.as_deref() {
        None => memory::World::load(&args.paths, &names, options),
        Some(k) => {
            source::load(&args.paths, Some(k)).and_then(|m| memory::World::from_manifests_with(m, &names, options))
        }
    };
    let mut world = match loaded {
        Ok(w) => w,
        Err(diags) => return Ok(refuse(&diags, "; nothing was scheduled")),
    };
    let dra = muster_sched::DraContext {
        index: muster_alloc::SliceIndex::new(std::mem::take(&mut world.slices)),
        classes: world.device_classes.clone(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    // The engine, fed every object at once: the queue runs until nothing is left to try.
    let cluster = std::mem::take(&mut world.cluster);
    let mut engine = muster_sched::Engine::new(cluster, config, Some(&dra));
    let plan = engine.run_until_idle(0);
    world.cluster = engine.into_cluster();
    world.slices = dra.index.into_slices();
    match args.output {
        Format::Table => print!("{}", output::table(&world, &plan)),
        Format::Effects => print!("{}", effects::render(&world.cluster, &plan)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&output::json(&world, &plan))?),
        Format::Yaml => {
            let groups = muster_controllers::podgroup::GroupStatusOptions {
                now: args.now.clone(),
                gang_wait_timeout_seconds: args.gang_wait_timeout,
            };
            print!("{}", output::yaml(&world, &plan, &groups)?)
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--now`: an RFC 3339 time with its UTC offset (written back in UTC, to the second, as the API
/// server writes times).
fn parse_now(s: &str) -> Result<Time, String> {
    s.parse::<k8s_openapi::jiff::Timestamp>()
        .map(Time)
        .map_err(|e| format!("expected an RFC 3339 time with a UTC offset, such as 2026-01-01T00:00:00Z ({e})"))
}

/// Bad input: every diagnostic, then "N error(s) in the input" with `then` (such as "; nothing
/// was scheduled") after it; exit code 2.
pub(crate) fn refuse(diags: &[muster_manifest::Diagnostic], then: &str) -> ExitCode {
    for d in diags {
        eprintln!("error: {d}");
    }
    eprintln!("{} error{} in the input{then}", diags.len(), if diags.len() == 1 { "" } else { "s" });
    ExitCode::from(2)
}

/// ResourceSlices the API server refuses (`validate::resource_slice`, as `check` and `plan`
/// judge them): `devices` lists no device of a slice that could not exist.
fn refused_slices(manifests: &muster_manifest::Manifests) -> Vec<muster_manifest::Diagnostic> {
    let mut out = Vec::new();
    for l in &manifests.objects {
        let muster_manifest::Object::ResourceSlice(slice) = &l.object else { continue };
        let name = slice.metadata.name.clone().unwrap_or_default();
        let mut errors = validation::object(&l.object);
        errors.extend(muster_sched::validate::resource_slice(slice));
        for (field, message) in errors {
            out.push(muster_manifest::Diagnostic {
                file: l.origin.file.clone(),
                pos: Some(l.origin.pos),
                object: Some(format!("ResourceSlice {name}")),
                field: Some(field),
                message,
            });
        }
    }
    out
}

fn run_devices(args: DevicesArgs) -> anyhow::Result<ExitCode> {
    let manifests = match muster_manifest::load_paths(&args.paths) {
        Ok(m) => m,
        Err(diags) => return Ok(refuse(&diags, "")),
    };
    let refused = refused_slices(&manifests);
    if !refused.is_empty() {
        return Ok(refuse(&refused, ""));
    }
    let rows = devices::evaluate(&manifests, args.class.as_deref(), args.selector.as_deref())?;
    match args.output {
        DevicesFormat::Table => print!("{}", devices::table(&rows, args.class.is_some() || args.selector.is_some())),
        DevicesFormat::Json => println!("{}", serde_json::to_string_pretty(&devices::json(&rows))?),
    }
    Ok(ExitCode::SUCCESS)
}

fn run_bench(cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::Plan { nodes, pods, shapes, iterations, scoring, profiles } => {
            let config = SchedulerConfig { scoring_strategy: scoring.into(), ..Default::default() };
            let config = bench::alternating_profiles(config, profiles.into());
            print!("{}", bench::plan(nodes, pods, shapes, iterations, &config)?);
        }
        BenchCommand::InterPod { shape, nodes, init_pods, pods, iterations } => {
            let shape = match shape {
                InterPodShape::TopologySpreading => bench::Shape::TopologySpreading,
                InterPodShape::PodAntiAffinity => bench::Shape::PodAntiAffinity,
                InterPodShape::PreferredPodAffinity => bench::Shape::PreferredPodAffinity,
            };
            print!("{}", bench::inter_pod(shape, nodes, init_pods, pods, iterations, &SchedulerConfig::default())?)
        }
        BenchCommand::Churn { nodes, running, events, seed, waiting } => {
            print!("{}", bench::churn(nodes, running, events, seed, waiting)?)
        }
        BenchCommand::Sim {
            nodes,
            jobs,
            days,
            seed,
            scoring,
            wall_limit,
            without_verdict_reuse,
            reprieve_search,
            feature_gates,
        } => {
            let mut config =
                SchedulerConfig { scoring_strategy: scoring.into(), reprieve_search, ..Default::default() };
            feature_gates.apply(&mut config);
            print!("{}", bench::sim(nodes, jobs, days, seed, &config, wall_limit, !without_verdict_reuse)?)
        }
        BenchCommand::Cel { devices, iterations } => print!("{}", bench::cel(devices, iterations)?),
        BenchCommand::AllocConformance { dir, reps } => print!("{}", bench::alloc_conformance(&dir, reps)?),
        BenchCommand::Output { claims } => print!("{}", bench::output(claims)?),
        BenchCommand::PlanDra { nodes, devices, pods } => print!("{}", bench::plan_dra(nodes, devices, pods)?),
        BenchCommand::Gang { nodes, gangs, pods_per_gang, iterations } => {
            print!("{}", bench::gang(nodes, gangs, pods_per_gang, iterations)?)
        }
        BenchCommand::Gpu { nodes, jobs, seed, iterations, scoring } => {
            let config = SchedulerConfig { scoring_strategy: scoring.into(), ..Default::default() };
            print!("{}", bench::gpu(nodes, jobs, seed, iterations, &config)?)
        }
        BenchCommand::AllocScale { nodes, devices, claims } => {
            print!("{}", bench::alloc_scale(nodes, devices, claims)?)
        }
        BenchCommand::Write { nodes, pods, file } => {
            bench::write_yaml(&file, nodes, pods)?;
            let size = std::fs::metadata(&file)?.len();
            println!(
                "wrote {} ({:.1} MiB): {nodes} nodes, {pods} pods",
                file.display(),
                size as f64 / (1 << 20) as f64
            );
        }
        BenchCommand::Load { paths } => print!("{}", bench::load(&paths)?),
    }
    Ok(ExitCode::SUCCESS)
}
