//! `muster run`: the live scheduler (muster-kube) with the command line's options, a tokio
//! runtime, logs, and SIGINT/SIGTERM as a graceful shutdown.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;
use muster_sched::SchedulerNames;

#[derive(clap::Args)]
pub struct RunArgs {
    /// A kubeconfig file. Default: in a pod, its service account; else KUBECONFIG or
    /// ~/.kube/config.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// A KubeSchedulerConfiguration file, as `muster plan --config` reads it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Serve pods whose spec.schedulerName is NAME (repeatable). Default: the config's profiles',
    /// else muster, so that muster runs beside kube-scheduler as a second scheduler.
    #[arg(long = "scheduler-name", value_name = "NAME")]
    scheduler_names: Vec<String>,
    /// How NodeResourcesFit scores nodes (as `muster plan --scoring`). Overrides --config.
    #[arg(long, value_enum)]
    scoring: Option<crate::Scoring>,
    /// Exit 0 once nothing pending could be scheduled and no write is in flight (tests, batches).
    #[arg(long)]
    exit_when_idle: bool,
    /// Elect a leader with a coordination.k8s.io Lease; only the leader writes.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// The Lease's namespace. Default: POD_NAMESPACE, else default.
    #[arg(long, value_name = "NS")]
    lease_namespace: Option<String>,
    /// The Lease's name.
    #[arg(long, value_name = "NAME", default_value = "muster")]
    lease_name: String,
    /// Serve /metrics, /healthz and /readyz on this address (plain HTTP).
    #[arg(long, value_name = "ADDR")]
    http_listen: Option<SocketAddr>,
    /// API calls per second at most (client-side); 0: no limit. kube-scheduler's default.
    #[arg(long, value_name = "QPS", default_value_t = 50.0)]
    kube_api_qps: f64,
    /// API calls allowed in a burst above the rate.
    #[arg(long, value_name = "N", default_value_t = 100)]
    kube_api_burst: u32,
    /// Binding cycles in flight at most.
    #[arg(long, value_name = "N", default_value_t = 256)]
    max_in_flight: usize,
    /// Do not copy a full device's NoSchedule/NoExecute taints to its partitions.
    #[arg(long)]
    no_health_propagation: bool,
    /// Beyond upstream, as `muster plan --reprieve-search`: workload-aware preemption searches
    /// for another placement before evicting a victim its first placement needs.
    #[arg(long)]
    reprieve_search: bool,
    /// Feature gates, as kube-scheduler's flag takes them (`Name=true|false`, comma-separated).
    /// muster models SchedulerPopFromBackoffQ (beta, on by default since 1.33: when nothing
    /// else is ready, pods still backing off are tried); any other gate is refused.
    #[arg(long, value_name = "GATES", value_parser = crate::feature_gates::FeatureGates::parse, default_value = "")]
    feature_gates: crate::feature_gates::FeatureGates,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    init_logs(args.log_format);
    let (mut config, mut names) = crate::config::from_flags(args.config.as_deref(), args.scoring)?;
    config.reprieve_search = args.reprieve_search;
    args.feature_gates.apply(&mut config);
    if !args.scheduler_names.is_empty() {
        names = args.scheduler_names.clone();
    }
    if names.is_empty() {
        names = vec!["muster".into()];
    }
    let options = muster_kube::Options {
        kubeconfig: args.kubeconfig,
        config,
        scheduler_names: SchedulerNames(names),
        exit_when_idle: args.exit_when_idle,
        leader_elect: args.leader_elect,
        lease_namespace: args
            .lease_namespace
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .unwrap_or_else(|| "default".into()),
        lease_name: args.lease_name,
        identity: identity(),
        http_listen: args.http_listen,
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
        max_in_flight: args.max_in_flight,
        health_propagation: !args.no_health_propagation,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let summary = runtime.block_on(muster_kube::run(options, shutdown_signal()))?;
    tracing::info!(
        bound = summary.bound,
        binding_failures = summary.binding_failures,
        unschedulable_attempts = summary.unschedulable_attempts,
        victims = summary.victims,
        "stopped"
    );
    Ok(ExitCode::SUCCESS)
}

/// The lease holder's name: the pod's name in a cluster, else host and process.
fn identity() -> String {
    if let Ok(name) = std::env::var("POD_NAME") {
        return name;
    }
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    format!("{}_{}", if host.is_empty() { "muster" } else { &host }, std::process::id())
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MUSTER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let color = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(color).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => return ctrl_c.await.unwrap_or(()),
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
