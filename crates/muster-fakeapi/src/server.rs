//! The state one running fake shares between its HTTP handlers and its [`crate::Running`]
//! handle, and the axum server around it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::extract::DefaultBodyLimit;

use crate::faults::{FaultState, Log, Request};
use crate::store::Store;

/// The largest request body accepted (the real server's limit is 3 MiB for most objects).
pub const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// The most requests the log keeps; past it, the older half is dropped.
pub const LOG_LIMIT: usize = 100_000;

pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) log: Log,
    pub(crate) faults: Mutex<FaultState>,
    /// Bumped to end every open watch.
    pub(crate) closed: tokio::sync::watch::Sender<u64>,
    /// Whether the kube-controller-manager stand-in runs after writes.
    pub(crate) controllers: bool,
    /// `host:port`, for discovery's `serverAddressByClientCIDRs`.
    pub(crate) addr: Mutex<String>,
    /// Whether every request is also printed on stderr.
    pub(crate) echo: bool,
}

impl Shared {
    pub(crate) fn new(store: Store, controllers: bool, echo: bool) -> Shared {
        Shared {
            store: Mutex::new(store),
            log: Mutex::new(Vec::new()),
            faults: Mutex::new(FaultState::default()),
            closed: tokio::sync::watch::Sender::new(0),
            controllers,
            addr: Mutex::new(String::new()),
            echo,
        }
    }

    /// The store, locked (a handler that panicked while holding it left it usable).
    pub(crate) fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn close_watches(&self) {
        self.closed.send_modify(|n| *n += 1);
    }

    pub(crate) fn log(&self, r: Request) {
        if self.echo {
            eprintln!("muster-fakeapi: {r}");
        }
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if log.len() >= LOG_LIMIT {
            log.drain(..LOG_LIMIT / 2);
        }
        log.push(r);
    }

    pub(crate) fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The status a fault says `r` fails with, if any.
    pub(crate) fn injected(&self, r: &Request) -> Option<u16> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner).take(r)
    }

    pub(crate) fn write_delay(&self) -> Option<std::time::Duration> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner).delay()
    }
}

/// Every path goes to one handler, which parses it the way the API server does (and reads at
/// most [`BODY_LIMIT`] bytes of a body itself, to answer a `Status`).
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(crate::http::handle).layer(DefaultBodyLimit::disable()).with_state(shared)
}
