//! # csd-web: the dashboard
//!
//! `csd serve` starts this axum server: a JSON API over the run store and a small dashboard
//! (plain JavaScript drawing SVG) whose assets are compiled into the binary, so it works
//! offline and serves nothing from the file system.
//!
//! - [`api`]: the routes and their errors.
//! - [`view`]: what a stored report looks like to a chart (breakdown bars with PAO, latency
//!   percentiles, fsync tails, device counters), computed here so the front end stays small.
//! - [`sweep`]: a sweep's points with their parameters and numbers, for its chart.
//! - [`jobs`]: replays started from the dashboard, run by a [`Launcher`] the CLI provides
//!   (the replay engine's Wasm tasks live above this crate).
//! - [`assets`]: the embedded front end.
//! - [`store`]: the run store, opened per request so `csd replay` in another terminal can
//!   save while the dashboard runs.

pub mod api;
pub mod assets;
pub mod jobs;
pub mod state;
pub mod store;
pub mod sweep;
pub mod view;

pub use api::router;
pub use jobs::{JobProgress, Launcher, ReplayRequest};
pub use state::AppState;
pub use store::StoreHandle;

use std::net::SocketAddr;
use std::sync::Arc;

/// Serves the dashboard on `listener` until the process is interrupted (Ctrl-C).
pub async fn serve(listener: tokio::net::TcpListener, state: Arc<AppState>) -> std::io::Result<()> {
    let app = router(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}

/// Binds `addr`; port 0 picks a free port (the returned address says which).
pub async fn bind(addr: SocketAddr) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}
