//! Replays started from the dashboard (or by `csd replay --serve`), and their progress.
//!
//! The replay itself needs the Wasm task runtime, which lives above this crate; the CLI hands
//! the server a [`Launcher`] that runs one. A job runs on a blocking thread and reports
//! progress into its slot in [`Jobs`], which the page polls.

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
    /// Runs `req` to the end on this thread, reporting progress, and saves the run in
    /// `store`; returns its id. The error is for the user to read.
    fn replay(
        &self,
        req: &ReplayRequest,
        store: &StoreHandle,
        progress: &mut dyn FnMut(JobProgress),
    ) -> Result<String, String>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
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

/// Jobs of this server process (not persisted: a finished job's result is its stored run).
#[derive(Default)]
pub struct Jobs {
    inner: Mutex<BTreeMap<u64, Job>>,
}

impl Jobs {
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

    /// Starts `req` on a blocking thread with `state`'s launcher; returns the job's id at once.
    pub fn start(state: Arc<crate::AppState>, req: ReplayRequest) -> String {
        let n = {
            let mut jobs = state.jobs.lock();
            let n = jobs.keys().next_back().map_or(1, |k| k + 1);
            jobs.insert(
                n,
                Job {
                    id: format!("j{n}"),
                    request: req.clone(),
                    state: JobState::Running,
                    progress: JobProgress::default(),
                    run: None,
                    error: None,
                },
            );
            n
        };
        tokio::task::spawn_blocking(move || {
            let jobs = &state.jobs;
            let mut report = |p: JobProgress| {
                if let Some(j) = jobs.lock().get_mut(&n) {
                    j.progress = p;
                }
            };
            let outcome = state.launcher.replay(&req, &state.store, &mut report);
            if let Some(j) = jobs.lock().get_mut(&n) {
                match outcome {
                    Ok(run) => {
                        j.state = JobState::Done;
                        j.run = Some(run);
                    }
                    Err(e) => {
                        tracing::warn!(job = n, error = %e, "replay failed");
                        j.state = JobState::Failed;
                        j.error = Some(e);
                    }
                }
            }
        });
        format!("j{n}")
    }
}
