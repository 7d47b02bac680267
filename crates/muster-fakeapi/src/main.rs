//! `muster-fakeapi`: the fake Kubernetes API server as a process, for `muster run`, kubectl and
//! curl. Preloads the manifests given, prints its URL on stderr, writes a kubeconfig, and serves
//! until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use muster_fakeapi::FakeApi;

/// A fake Kubernetes 1.37 API server (a test double: no auth, no kubelet, in memory).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Address to serve plain HTTP on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Write a kubeconfig pointing at the server to FILE.
    #[arg(long, value_name = "FILE")]
    write_kubeconfig: Option<PathBuf>,
    /// Do not run the kube-controller-manager stand-in (workload expansion, claim controller).
    #[arg(long)]
    no_controllers: bool,
    /// Print every request on stderr (`verb resource[/sub] namespace/name -> code`).
    #[arg(long)]
    log_requests: bool,
    /// Manifests to preload: files or directories of YAML/JSON (`-` for standard input).
    paths: Vec<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("muster-fakeapi: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let objects = if args.paths.is_empty() {
        Vec::new()
    } else if args.no_controllers {
        let manifests = muster_manifest::load_paths(&args.paths)
            .map_err(|ds| ds.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))?;
        manifests.objects.iter().map(|l| l.object.to_json()).collect()
    } else {
        muster_fakeapi::manifests::load(&args.paths)?
    };
    let count = objects.len();
    let fake = FakeApi::new().controllers(!args.no_controllers).echo_requests(args.log_requests).with_objects(objects);
    let running = fake.start(args.listen).await.map_err(|e| e.to_string())?;
    eprintln!("muster-fakeapi: serving {} ({count} objects preloaded)", running.url());
    if let Some(path) = &args.write_kubeconfig {
        running.write_kubeconfig(path).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("muster-fakeapi: kubeconfig written to {}", path.display());
    }
    wait_for_signal().await;
    running.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
