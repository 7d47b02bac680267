//! The Kubernetes world of `muster run`: a live scheduler against an API server.
//!
//! **Owns:** the watches of every kind the engine reads ([`informers`]), feeding the engine one
//! change at a time; the assume cache that keeps the engine's decisions from being undone by stale
//! watch events ([`assume`]); the writes that carry the engine's effects out as kube-scheduler
//! 1.37 does ([`jobs`], [`writes`]), concurrently, rate-limited ([`limiter`]), and what comes of
//! them back into the engine (a failed binding cycle is forgotten: Unreserve); leader election on
//! a coordination.k8s.io Lease; `/metrics`, `/healthz`, `/readyz` ([`http`], [`metrics`]).
//!
//! **Never:** decides anything itself (every decision is the engine's, so `run` and `plan` agree
//! on the same objects); creates claims from templates or pods from workloads (that is
//! kube-controller-manager's job in a real cluster); writes while it is not the leader.
//!
//! The loop ([`live`]) owns the engine on one task and is the only place that touches it; watches
//! and writes run on other tasks and talk to it through one bounded channel of [`Msg`]s.
//!
//! A preemptor waits as kube-scheduler's does: its victims are marked and deleted, it is nominated
//! to its node (`status.nominatedNodeName`), and its binding cycle goes on once the victims are
//! gone (read again until not found; the engine has already given their room to it). PreBind
//! waits as kube-scheduler's does too: for the claims VolumeBinding bound or asked to provision
//! ([`volume_binding`]) and for devices' binding conditions ([`binding_conditions`]). Workloads
//! are watched (v1beta1) for the device topology their PodGroups inherit; PodGroup claims (KEP
//! 5729) are resolved through the PodGroup's `status.resourceClaimStatuses`, which the cluster's
//! resourceclaim controller writes.

pub mod assume;
pub mod binding_conditions;
pub mod devices;
pub mod http;
pub mod informers;
pub mod jobs;
pub mod limiter;
pub mod live;
pub mod metrics;
pub mod observed;
pub mod series;
pub mod snapshot;
pub mod volume_binding;
pub mod writes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context as _;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use muster_sched::{SchedulerConfig, SchedulerNames};
use tokio::sync::{mpsc, watch};

pub use live::Summary;

/// One message to the loop.
#[derive(Debug)]
pub enum Msg {
    /// An object added or changed.
    Apply(observed::Object),
    /// An object deleted, by kind and key.
    Delete(observed::Kind, String),
    /// A watch has listed its kind (again).
    Synced(observed::Kind),
    /// A job finished.
    Done(writes::Done),
}

/// How `muster run` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// A kubeconfig file; none: the in-cluster config or `KUBECONFIG`/`~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    pub config: SchedulerConfig,
    /// The `schedulerName`s served.
    pub scheduler_names: SchedulerNames,
    /// Exit once nothing pending could be scheduled and no write is in flight.
    pub exit_when_idle: bool,
    /// Take part in leader election; without, this replica writes at once.
    pub leader_elect: bool,
    pub lease_namespace: String,
    pub lease_name: String,
    /// This replica's identity (the lease holder; events' `reportingInstance`).
    pub identity: String,
    pub http_listen: Option<SocketAddr>,
    /// Client-side rate limit; 0: none.
    pub qps: f64,
    pub burst: u32,
    /// Binding jobs in flight at most.
    pub max_in_flight: usize,
    /// Copy full devices' taints to their partitions (as `plan`).
    pub health_propagation: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            kubeconfig: None,
            config: SchedulerConfig::default(),
            scheduler_names: SchedulerNames(vec!["muster".into()]),
            exit_when_idle: false,
            leader_elect: true,
            lease_namespace: "muster-system".into(),
            lease_name: "muster".into(),
            identity: "muster".into(),
            http_listen: None,
            qps: 50.0,
            burst: 100,
            max_in_flight: 256,
            health_propagation: true,
        }
    }
}

/// A client from the options' kubeconfig, or inferred.
pub async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
}

/// Runs the scheduler until `shutdown` resolves (or, with `exit_when_idle`, until it is idle).
pub async fn run(options: Options, shutdown: impl Future<Output = ()>) -> anyhow::Result<Summary> {
    let client = client(options.kubeconfig.as_deref()).await?;
    let metrics = Arc::new(metrics::Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    if let Some(addr) = options.http_listen {
        let bound = http::serve(addr, http::Health { metrics: metrics.clone(), ready: ready.clone() }).await?;
        tracing::info!(%bound, "serving /metrics, /healthz, /readyz");
    }
    let (tx, rx) = mpsc::channel(8192);
    let watches = informers::spawn_all(&client, &tx);
    let (leading, leadership) = leadership(&client, &options).await?;
    let writer = Arc::new(writes::Writer {
        client: client.clone(),
        limiter: limiter::Limiter::new(options.qps, options.burst),
        metrics: metrics.clone(),
        identity: options.identity.clone(),
        volume_bind_timeout: std::time::Duration::from_secs(options.config.volume_bind_timeout_seconds),
        dra_binding_timeout: std::time::Duration::from_millis(options.config.dra_binding_timeout_ms),
    });
    let lp = live::Loop::new(options, rx, tx, writer, leading, ready);
    let summary = lp.run(shutdown).await;
    leadership.release().await;
    for w in watches {
        w.abort();
    }
    summary
}

/// What keeps leadership reported: a fixed answer, or the lease manager's task.
enum Leadership {
    Always(#[allow(dead_code)] watch::Sender<bool>),
    Lease(tokio::task::JoinHandle<()>),
}

impl Leadership {
    /// Gives the lease back (the loop, which held the receiver, has ended).
    async fn release(self) {
        if let Leadership::Lease(task) = self {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(3), task).await;
        }
    }
}

/// Whether this replica leads, as it changes: always, without leader election.
async fn leadership(client: &Client, options: &Options) -> anyhow::Result<(watch::Receiver<bool>, Leadership)> {
    if !options.leader_elect {
        let (tx, rx) = watch::channel(true);
        return Ok((rx, Leadership::Always(tx)));
    }
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &options.lease_name)
        .with_namespace(&options.lease_namespace)
        .with_identity(&options.identity)
        .with_duration(15)
        .with_grace(5)
        .build()
        .await
        .context("leader election")?;
    let (rx, handle) = manager.watch().await;
    let task = tokio::spawn(async move {
        match handle.await {
            Ok(Ok(m)) => {
                let _ = m.release().await;
            }
            Ok(Err(e)) => tracing::error!(error = %e, "leader election stopped"),
            Err(e) => tracing::error!(error = %e, "leader election task failed"),
        }
    });
    Ok((rx, Leadership::Lease(task)))
}
