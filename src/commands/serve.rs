//! `csd serve`: the dashboard over the run store; and `csd replay --serve`.

use super::replay::{open_named, options, replay_all, ReplayArgs, SAMPLES, SAMPLE_PLANS};
use anyhow::Context;
use csd::tasks::{Paths, Resolver};
use csd_traces::replay::Pace;
use csd_traces::replay::ReplayTarget;
use csd_web::{AppState, JobProgress, Launcher, ReplayRequest, StoreHandle};
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The run store to show (default: $XDG_DATA_HOME/csdlab/runs, else ~/.local/share/csdlab/runs).
    #[arg(long, value_name = "PATH")]
    pub store: Option<std::path::PathBuf>,
    /// Address to listen on. Loopback by default: the dashboard has no authentication.
    /// Port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub addr: SocketAddr,
}

/// Runs the dashboard's replays with the same engine as `csd replay`.
struct CliLauncher;

impl Launcher for CliLauncher {
    fn samples(&self) -> Vec<String> {
        SAMPLES.iter().map(|(n, _)| n.to_string()).collect()
    }

    fn designs(&self) -> Vec<String> {
        ReplayTarget::ALL.iter().map(|d| d.to_string()).collect()
    }

    fn default_designs(&self) -> Vec<String> {
        let host = ReplayTarget::Host(csd_hostfs::ndp::DesignKind::HostOnly);
        ReplayTarget::HOSTS
            .iter()
            .chain([&host])
            .map(|d| d.to_string())
            .collect()
    }

    fn plans(&self) -> Vec<String> {
        SAMPLE_PLANS.iter().map(|(n, _)| n.to_string()).collect()
    }

    fn replay(
        &self,
        req: &ReplayRequest,
        store: &StoreHandle,
        progress: &mut dyn FnMut(JobProgress),
    ) -> Result<String, String> {
        let mut run = || -> anyhow::Result<String> {
            // A built-in profile or one kept in the store: a request never names a file on
            // the server's host.
            let profile = super::profiles::named(&req.profile, |name| {
                store.with(|s| s.profile_text(name)).ok()
            })?;
            let kinds = super::replay::targets(&req.designs.join(","))?;
            let pace: Pace = req.mode.parse().map_err(anyhow::Error::msg)?;
            let opts = options(pace, req.seed, req.lenient);
            let (mut open, trace) = open_named(&req.trace, |key| {
                store
                    .with(|s| s.trace(key))
                    .ok()
                    .map(|(meta, b)| (meta.name, b))
            })?;
            // A bundled plan by name only, as with profiles; the folded trace is kept with
            // the run, so `csd runs rerun` finds it.
            let (mut open, trace) = match &req.offload {
                Some(plan) => {
                    let (open, folded, _, bytes) =
                        super::offload::fold_opened_bundled(&mut open, &trace, plan)?;
                    store.with(|s| s.add_trace(&folded.name, &bytes))?;
                    (open, folded)
                }
                None => (open, trace),
            };
            let n = kinds.len();
            // Tasks by name only: built-in, or kept in the store.
            let stored = |name: &str| {
                store
                    .with(|s| s.task(name))
                    .ok()
                    .map(|(meta, wasm)| (meta.id, wasm))
            };
            let resolver = Resolver {
                stored: &stored,
                paths: Paths::Refused,
            };
            let (_, new_run) = replay_all(
                &mut open,
                &trace,
                &profile,
                &kinds,
                &opts,
                &resolver,
                |i, kind, p| {
                    progress(JobProgress {
                        design: kind.to_string(),
                        design_index: i,
                        designs: n,
                        events: p.events,
                        of: p.of,
                    })
                },
            )?;
            Ok(store.with(|s| s.save(new_run))?.id)
        };
        run().map_err(|e| format!("{e:#}"))
    }
}

fn state(store: std::path::PathBuf) -> Arc<AppState> {
    Arc::new(AppState {
        store: StoreHandle::new(store),
        jobs: Default::default(),
        launcher: Arc::new(CliLauncher),
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the server's runtime")
}

async fn listen(addr: SocketAddr) -> anyhow::Result<(tokio::net::TcpListener, SocketAddr)> {
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "serving beyond loopback: anyone who can reach this address can read the store and start replays");
    }
    csd_web::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let path = args
        .store
        .clone()
        .unwrap_or_else(csd_traces::store::default_store_path);
    // A store that cannot be opened is an error now, not on the first page load.
    match csd_traces::store::RunStore::open(&path) {
        Ok(_) | Err(csd_traces::store::StoreError::Busy { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let state = state(path.clone());
    runtime()?.block_on(async {
        let (listener, local) = listen(args.addr).await?;
        // The first stdout line names the address (tests read it when the port was 0).
        println!(
            "csd: dashboard at http://{local}/ (store {}); Ctrl-C stops it",
            path.display()
        );
        csd_web::serve(listener, state).await?;
        Ok(())
    })
}

/// `csd replay --serve`: the replay runs as a dashboard job, watched in the browser.
pub fn replay_and_serve(args: &ReplayArgs, addr: SocketAddr) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.store.no_store,
        "--serve shows the replay from the run store: it cannot be combined with --no-store"
    );
    let path = args.store.path();
    let state = state(path.clone());
    // A trace file is stored first, so the dashboard can name it (and replay it again); a
    // trace with an offload plan is folded here (the plan may be a file) and stored folded.
    let trace = match (&args.offload, &args.trace) {
        (Some(plan), trace) => {
            let (mut open, trace_ref) = super::replay::open_trace(trace.as_deref(), |key| {
                state
                    .store
                    .with(|s| s.trace(key))
                    .ok()
                    .map(|(m, b)| (m.name, b))
            })?;
            let (_, folded, report, bytes) =
                super::offload::fold_opened(&mut open, &trace_ref, plan)?;
            super::offload::say(&report);
            state.store.with(|s| s.add_trace(&folded.name, &bytes))?.id
        }
        (None, Some(p)) if p.is_file() => {
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            let name = p.display().to_string();
            state.store.with(|s| s.add_trace(&name, &bytes))?.id
        }
        (None, Some(p)) => p.display().to_string(),
        (None, None) => super::replay::SAMPLE_NAME.to_string(),
    };
    let profile = args.profile_name()?;
    super::profiles::named(&profile, |name| {
        state.store.with(|s| s.profile_text(name)).ok()
    })
    .context("csd replay --serve replays through the dashboard, which takes profiles by name")?;
    let req = ReplayRequest {
        trace,
        profile,
        designs: vec![args.design.clone()],
        seed: args.seed,
        mode: args.mode.to_string(),
        offload: None,
        lenient: args.lenient,
    };
    runtime()?.block_on(async {
        let (listener, local) = listen(addr).await?;
        let job = csd_web::jobs::Jobs::start(state.clone(), req)?;
        println!(
            "csd: replaying; follow it at http://{local}/replays/{job} (Ctrl-C stops the server)"
        );
        let watch = state.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                match watch.jobs.get(&job) {
                    Some(j) if j.state == csd_web::jobs::JobState::Done => {
                        let run = j.run.unwrap_or_default();
                        println!("csd: saved as run {run}: http://{local}/runs/{run}");
                        break;
                    }
                    Some(j) if j.state == csd_web::jobs::JobState::Failed => {
                        eprintln!("csd: the replay failed: {}", j.error.unwrap_or_default());
                        break;
                    }
                    _ => {}
                }
            }
        });
        csd_web::serve(listener, state).await?;
        Ok(())
    })
}
