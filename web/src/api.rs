//! Routes: the JSON API under `/api`, the embedded assets under `/assets`, and the page
//! routes, which all return the one HTML page (the script draws the page the path names).

use crate::assets;
use crate::jobs::{Jobs, ReplayRequest};
use crate::state::AppState;
use crate::view::{headlines, Headline, RunView};
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use csd_traces::report::{diff, ReportKind};
use csd_traces::store::{StoreError, StoredRun, TraceRef};
use serde::Serialize;
use std::sync::Arc;

/// Requests carry at most a replay form; anything larger is refused with 413.
const BODY_LIMIT: usize = 16 * 1024;

/// An error as the API returns it: a status and `{"error": "…"}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let status = match e {
            StoreError::NoRun(_)
            | StoreError::NoTrace(_)
            | StoreError::NoProfile(_)
            | StoreError::NoSweep(_) => StatusCode::NOT_FOUND,
            StoreError::BadId(_) => StatusCode::BAD_REQUEST,
            StoreError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

/// Runs `f` on the store from a blocking thread (sled does file I/O).
async fn with_store<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&csd_traces::store::RunStore) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || state.store.with(f))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(ApiError::from)
}

pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/runs", get(list_runs))
        .route("/runs/{id}", get(get_run))
        .route("/runs/{a}/diff/{b}", get(diff_runs))
        .route("/sweeps", get(list_sweeps))
        .route("/sweeps/{id}", get(get_sweep))
        .route("/profiles", get(profiles))
        .route("/traces", get(traces))
        .route("/replays", get(list_replays).post(start_replay))
        .route("/replays/{id}", get(get_replay))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such API route") });
    Router::new()
        .nest("/api", api)
        .route("/", get(page))
        .route("/runs/{id}", get(page))
        .route("/compare/{a}/{b}", get(page))
        .route("/replay", get(page))
        .route("/sweeps/{id}", get(page))
        .route("/replays/{id}", get(page))
        .route("/assets/{name}", get(asset))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found") })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

async fn page() -> Response {
    let a = &assets::INDEX;
    ([(header::CONTENT_TYPE, a.content_type)], a.body).into_response()
}

async fn asset(Path(name): Path<String>) -> Response {
    match assets::get(&name) {
        Some(a) => (
            [
                (header::CONTENT_TYPE, a.content_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            a.body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

/// A row of the runs table.
#[derive(Serialize)]
pub struct RunSummary {
    pub id: String,
    pub kind: ReportKind,
    pub trace: Option<TraceRef>,
    pub profile: String,
    pub designs: Vec<String>,
    pub seed: u64,
    pub csd_version: String,
    pub stored_at: u64,
    pub headline: Vec<Headline>,
    /// The sweep this run is a point of, and the point's parameters.
    pub sweep: Option<csd_traces::sweep::SweepTag>,
}

impl RunSummary {
    fn of(r: &StoredRun) -> RunSummary {
        RunSummary {
            id: r.id.clone(),
            kind: r.kind(),
            trace: r.trace.clone(),
            profile: r.profile.clone(),
            designs: r.designs.clone(),
            seed: r.seed,
            csd_version: r.csd_version.clone(),
            stored_at: r.stored_at,
            headline: headlines(r),
            sweep: r.sweep.clone(),
        }
    }
}

#[derive(Serialize)]
struct RunList {
    store: String,
    runs: Vec<RunSummary>,
}

async fn list_runs(State(state): State<Arc<AppState>>) -> ApiResult<RunList> {
    let runs = with_store(&state, |s| s.list()).await?;
    Ok(Json(RunList {
        store: state.store.path().display().to_string(),
        runs: runs.iter().map(RunSummary::of).collect(),
    }))
}

#[derive(Serialize)]
struct RunDetail {
    run: StoredRun,
    view: RunView,
}

async fn get_run(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<RunDetail> {
    let run = with_store(&state, move |s| s.get(&id)).await?;
    Ok(Json(RunDetail {
        view: RunView::of(&run),
        run,
    }))
}

#[derive(Serialize)]
struct RunDiff {
    a: RunSummary,
    b: RunSummary,
    designs: Vec<csd_traces::report::DesignDelta>,
}

async fn diff_runs(
    State(state): State<Arc<AppState>>,
    Path((a, b)): Path<(String, String)>,
) -> ApiResult<RunDiff> {
    let (ra, rb) = with_store(&state, move |s| Ok((s.get(&a)?, s.get(&b)?))).await?;
    // A run stored in a layout this csd cannot read is refused by name, not shown as
    // "nothing in common".
    let designs = diff(&ra.report, &rb.report)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    Ok(Json(RunDiff {
        a: RunSummary::of(&ra),
        b: RunSummary::of(&rb),
        designs,
    }))
}

async fn list_sweeps(
    State(state): State<Arc<AppState>>,
) -> ApiResult<Vec<crate::sweep::SweepSummary>> {
    let sweeps = with_store(&state, |s| {
        s.sweeps()?
            .into_iter()
            .map(|r| {
                let stored = s.points(&r.spec.name)?.len();
                Ok(crate::sweep::SweepSummary::of(&r, stored))
            })
            .collect()
    })
    .await?;
    Ok(Json(sweeps))
}

/// `?axis=…&metric=…` choose the table's axis and metric (by default the sweep's own).
#[derive(serde::Deserialize)]
struct TableQuery {
    axis: Option<String>,
    metric: Option<String>,
}

#[derive(Serialize)]
struct SweepPage {
    #[serde(flatten)]
    view: crate::sweep::SweepView,
    table: crate::sweep::SweepTable,
}

async fn get_sweep(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<TableQuery>,
) -> ApiResult<SweepPage> {
    let (record, runs) =
        with_store(&state, move |s| Ok((s.sweep(&id)?, s.sweep_runs(&id)?))).await?;
    let view = crate::sweep::SweepView::of(&record, &runs);
    let axis = match q.axis {
        Some(a) => a
            .parse()
            .map_err(|e: String| ApiError::new(StatusCode::BAD_REQUEST, e))?,
        None => view.axis,
    };
    let metric = q.metric.unwrap_or_else(|| view.metric.clone());
    if !view.metrics.contains(&metric) && !view.runs.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("no metric '{metric}' in this sweep's runs"),
        ));
    }
    let table = view.table(axis, &metric);
    Ok(Json(SweepPage { view, table }))
}

async fn profiles() -> ApiResult<Vec<csd_device::Profile>> {
    Ok(Json(csd_device::Profile::builtin()))
}

#[derive(Serialize)]
struct TraceChoices {
    /// Traces stored with `csd trace add`.
    stored: Vec<csd_traces::store::StoredTrace>,
    /// Samples compiled into csd.
    samples: Vec<String>,
    designs: Vec<String>,
    /// Those the form ticks to begin with.
    default_designs: Vec<String>,
    /// Built-in profiles, then those kept in the store (`csd profiles add`).
    profiles: Vec<String>,
    /// Bundled offload plans.
    plans: Vec<String>,
}

async fn traces(State(state): State<Arc<AppState>>) -> ApiResult<TraceChoices> {
    let (stored, stored_profiles) =
        with_store(&state, |s| Ok((s.traces()?, s.profile_names()?))).await?;
    // The default first: the replay form preselects it, as the CLI does.
    let mut profiles: Vec<String> = csd_device::Profile::builtin()
        .into_iter()
        .map(|p| p.name)
        .collect();
    profiles.sort_by_key(|p| p != csd_device::profile::DEFAULT_PROFILE);
    profiles.extend(stored_profiles);
    Ok(Json(TraceChoices {
        stored,
        samples: state.launcher.samples(),
        designs: state.launcher.designs(),
        default_designs: state.launcher.default_designs(),
        profiles,
        plans: state.launcher.plans(),
    }))
}

async fn list_replays(State(state): State<Arc<AppState>>) -> ApiResult<Vec<crate::jobs::Job>> {
    Ok(Json(state.jobs.list()))
}

async fn start_replay(
    State(state): State<Arc<AppState>>,
    body: Result<Json<ReplayRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let Json(req) = body.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
    if req.trace.is_empty() || req.designs.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "a replay needs a trace and at least one design",
        ));
    }
    let id = Jobs::start(state, req)
        .map_err(|e| ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.to_string()))?;
    Ok((StatusCode::ACCEPTED, Json(serde_json::json!({ "job": id }))))
}

async fn get_replay(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<crate::jobs::Job> {
    state
        .jobs
        .get(&id)
        .map(Json)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no replay job '{id}'")))
}
