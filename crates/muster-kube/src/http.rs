//! The operations endpoint: `/metrics` (Prometheus text), `/healthz` (the process answers),
//! `/readyz` (every watch has listed its kind once).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Metrics;

#[derive(Clone)]
pub struct Health {
    pub metrics: Arc<Metrics>,
    pub ready: Arc<AtomicBool>,
}

/// Serves the endpoint on `addr`; returns the address bound (for port 0).
pub async fn serve(addr: SocketAddr, health: Health) -> std::io::Result<SocketAddr> {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(health);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the metrics endpoint stopped");
        }
    });
    Ok(bound)
}

async fn metrics(State(h): State<Health>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], h.metrics.encode())
}

async fn ready(State(h): State<Health>) -> impl IntoResponse {
    if h.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "watches not synced yet")
    }
}
