//! Replays started from the dashboard (or by `csd replay --serve`), and their progress.
//!
//! The replay itself needs the Wasm task runtime, which lives above this crate; the CLI hands
//! the server a [`Launcher`] that runs one. A job runs on a blocking thread and reports
//! progress into its slot in [`Jobs`], which the page polls.
//!
//! Jobs queue: at most one runs per core (`Jobs::running_cap`), at most [`MAX_QUEUED`] wait,
//! and a request past that is refused (the API answers 429). The table keeps every queued
//! and running job and the last [`KEEP_FINISHED`] finished ones. A replay that fails or
//! panics marks its job failed with the reason; the server goes on.

use crate::store::StoreHandle;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// What the replay form sends.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// A stored trace (id or name) or a bundled sample's name.
    pub trace: String,
    pub profile: String,
    /// Design names, or `["all"]`.
    pub designs: Vec<String>,
    #[serde(default = "one")]
    pub seed: u64,
    /// `afap` or `timed`.
    #[serde(default = "afap")]
    pub mode: String,
    /// A bundled offload plan's name: the trace's scans are folded into `ndp` requests
    /// first, as `csd replay --offload` does. Never a file on the server's host.
    #[serde(default)]
    pub offload: Option<String>,
    /// Skip and count unknown ops instead of failing (`csd replay --lenient`).
    #[serde(default)]
    pub lenient: bool,
}

fn one() -> u64 {
    1
}

fn afap() -> String {
    "afap".into()
}

/// Where a running replay is.
#[derive(Clone, Debug, Default, Serialize)]
pub struct JobProgress {
    /// The design being replayed, and how many designs come before it / in all.
    pub design: String,
    pub design_index: usize,
    pub designs: usize,
    pub events: u64,
    pub of: u64,
}

/// Runs replays for the server.
pub trait Launcher: Send + Sync + 'static {
    /// Bundled sample traces a replay can name.
    fn samples(&self) -> Vec<String>;
    /// The designs a replay can name.
    fn designs(&self) -> Vec<String>;
    /// The designs the replay form ticks to begin with (`csd replay --design all,host`).
    fn default_designs(&self) -> Vec<String>;
    /// Bundled offload plans a replay can name.
    fn plans(&self) -> Vec<String>;
    /// Runs `req` to the end on this thread, reporting progress, and saves the run in
    /// `store`; returns its id. The error is for the user to read.
    fn replay(
        &self,
        req: &ReplayRequest,
        store: &StoreHandle,
        progress: &mut dyn FnMut(JobProgress),
    ) -> Result<String, String>;
}

/// Jobs that may wait for a free core.
pub const MAX_QUEUED: usize = 16;
/// Finished jobs the table remembers (their results are stored runs either way).
pub const KEEP_FINISHED: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Queued,
    Running,
    Done,
    Failed,
}

#[derive(Clone, Debug, Serialize)]
pub struct Job {
    pub id: String,
    pub request: ReplayRequest,
    pub state: JobState,
    pub progress: JobProgress,
    /// The stored run, once done.
    pub run: Option<String>,
    pub error: Option<String>,
}

/// Why a job was not started.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JobsError {
    #[error("{queued} replays are already waiting for a core (at most {MAX_QUEUED} may wait); try again once one has finished")]
    QueueFull { queued: usize },
}

/// Jobs of this server process (not persisted: a finished job's result is its stored run).
pub struct Jobs {
    inner: Mutex<BTreeMap<u64, Job>>,
    /// One permit per job allowed to run at once; waiting jobs queue on it in order.
    cores: Arc<tokio::sync::Semaphore>,
    running_cap: usize,
}

impl Default for Jobs {
    /// One running job per core.
    fn default() -> Jobs {
        Jobs::with_cap(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

impl Jobs {
    /// A table that runs at most `running_cap` (at least 1) jobs at once.
    pub fn with_cap(running_cap: usize) -> Jobs {
        let running_cap = running_cap.max(1);
        Jobs {
            inner: Mutex::new(BTreeMap::new()),
            cores: Arc::new(tokio::sync::Semaphore::new(running_cap)),
            running_cap,
        }
    }

    pub fn running_cap(&self) -> usize {
        self.running_cap
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Job>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, id: &str) -> Option<Job> {
        let n: u64 = id.strip_prefix('j')?.parse().ok()?;
        self.lock().get(&n).cloned()
    }

    pub fn list(&self) -> Vec<Job> {
        self.lock().values().cloned().collect()
    }

    fn set(&self, n: u64, f: impl FnOnce(&mut Job)) {
        if let Some(j) = self.lock().get_mut(&n) {
            f(j);
        }
    }

    /// Forgets the oldest finished jobs beyond [`KEEP_FINISHED`].
    fn prune(&self) {
        let mut jobs = self.lock();
        let finished: Vec<u64> = jobs
            .iter()
            .filter(|(_, j)| matches!(j.state, JobState::Done | JobState::Failed))
            .map(|(&n, _)| n)
            .collect();
        for n in finished
            .iter()
            .take(finished.len().saturating_sub(KEEP_FINISHED))
        {
            jobs.remove(n);
        }
    }

    /// Queues `req` with `state`'s launcher and returns the job's id at once; the job runs
    /// on a blocking thread when a core is free. Refused when [`MAX_QUEUED`] jobs wait.
    pub fn start(
        state: Arc<crate::state::AppState>,
        req: ReplayRequest,
    ) -> Result<String, JobsError> {
        let n = {
            let mut jobs = state.jobs.lock();
            let queued = jobs
                .values()
                .filter(|j| j.state == JobState::Queued)
                .count();
            if queued >= MAX_QUEUED {
                return Err(JobsError::QueueFull { queued });
            }
            let n = jobs.keys().next_back().map_or(1, |k| k + 1);
            jobs.insert(
                n,
                Job {
                    id: format!("j{n}"),
                    request: req.clone(),
                    state: JobState::Queued,
                    progress: JobProgress::default(),
                    run: None,
                    error: None,
                },
            );
            n
        };
        let cores = state.jobs.cores.clone();
        tokio::spawn(async move {
            // The semaphore is never closed, so acquiring only waits.
            let permit = cores.acquire_owned().await.ok();
            state.jobs.set(n, |j| j.state = JobState::Running);
            let worker = state.clone();
            let outcome = tokio::task::spawn_blocking(move || {
                let _permit = permit;
                let jobs = &worker.jobs;
                let mut report = |p: JobProgress| jobs.set(n, |j| j.progress = p);
                worker.launcher.replay(&req, &worker.store, &mut report)
            })
            .await
            .unwrap_or_else(|e| Err(panic_message(e)));
            match outcome {
                Ok(run) => state.jobs.set(n, |j| {
                    j.state = JobState::Done;
                    j.run = Some(run);
                }),
                Err(e) => {
                    tracing::warn!(job = n, error = %e, "replay failed");
                    state.jobs.set(n, |j| {
                        j.state = JobState::Failed;
                        j.error = Some(e);
                    });
                }
            }
            state.jobs.prune();
        });
        Ok(format!("j{n}"))
    }
}

/// What a replay thread that panicked (or was cancelled) leaves for its job's error.
fn panic_message(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return format!("the replay was cancelled: {e}");
    }
    let panic = e.into_panic();
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    format!("the replay crashed (a bug in csd, please report it): {what}")
}
