//! The run store: every replay and benchmark result, and stored traces, in an embedded sled
//! database.
//!
//! A run is written with one `insert` of its whole record, then flushed: sled makes a single
//! insert atomic, and a run is only inserted once it has finished, so an interrupted or failed
//! run leaves nothing behind. sled holds an exclusive file lock while a store is open; a second
//! process gets [`StoreError::Busy`] from [`RunStore::open`].
//!
//! Contention is therefore part of the design, not an accident. Every csd process (the CLI and
//! the dashboard alike) opens the store for one request or one save and closes it right
//! after, and waits for a busy store with [`RunStore::open_waiting`]. A finished run that still
//! cannot be saved is never lost: [`spool`] writes it to a file beside the store, and the next
//! process that opens the store imports it.

use crate::report::{Report, ReportKind};
use crate::spec::SystemSpec;
pub use crate::spec::TraceRef;
use crate::sweep::{SweepRecord, SweepTag};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the run store at {path} is in use by another csd process (sled holds it locked); wait for that one to finish or use --store for another store")]
    Busy { path: PathBuf },
    #[error("cannot open the run store at {path}: {reason}")]
    Open { path: PathBuf, reason: String },
    #[error("run store: {0}")]
    Db(#[from] sled::Error),
    #[error("no run '{0}' in the store (see `csd runs list`)")]
    NoRun(String),
    #[error("no trace '{0}' in the store (see `csd trace add`)")]
    NoTrace(String),
    #[error("no task '{0}' in the store (see `csd task add`)")]
    NoTask(String),
    #[error("no sweep '{0}' in the store (see `csd sweep`)")]
    NoSweep(String),
    #[error("no profile '{0}' in the store (see `csd profiles add`)")]
    NoProfile(String),
    #[error("'{0}' is not a run id (runs are numbered: r1, r2, …)")]
    BadId(String),
    #[error("stored record {id} is unreadable: {reason}")]
    Corrupt { id: String, reason: String },
}

/// One stored result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "Record", from = "Record")]
pub struct StoredRun {
    /// `r1`, `r2`, … in the order runs were stored.
    pub id: String,
    /// The trace's content id (`sha256:` + hex) and name, for replays.
    pub trace: Option<TraceRef>,
    pub profile: String,
    pub designs: Vec<String>,
    pub seed: u64,
    pub csd_version: String,
    /// Wall-clock time the run was stored (seconds since the Unix epoch): bookkeeping only,
    /// never part of a result.
    pub stored_at: u64,
    /// The report, as `--json` printed it.
    pub report: Report,
    /// The system that produced it, for `csd runs rerun` (runs of older csd versions, and
    /// kinds not yet described by a spec, have none).
    pub spec: Option<SystemSpec>,
    /// The sweep point this run is (`csd sweep`).
    pub sweep: Option<SweepTag>,
}

impl StoredRun {
    pub fn kind(&self) -> ReportKind {
        self.report.kind()
    }
}

/// A run before it has an id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "Record", from = "Record")]
pub struct NewRun {
    pub trace: Option<TraceRef>,
    pub profile: String,
    pub designs: Vec<String>,
    pub seed: u64,
    pub report: Report,
    pub spec: Option<SystemSpec>,
    pub sweep: Option<SweepTag>,
}

impl NewRun {
    pub fn kind(&self) -> ReportKind {
        self.report.kind()
    }
}

/// A run as the store (and the spool) keeps it: the report as JSON beside its kind and
/// layout version, so a report of another layout still loads (as [`Report::Unreadable`]).
#[derive(Serialize, Deserialize)]
struct Record {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    id: String,
    kind: ReportKind,
    trace: Option<TraceRef>,
    profile: String,
    designs: Vec<String>,
    seed: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    csd_version: String,
    #[serde(default)]
    stored_at: u64,
    report: Value,
    /// 0: stored before layouts carried versions.
    #[serde(default)]
    report_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec: Option<SystemSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sweep: Option<SweepTag>,
}

impl From<StoredRun> for Record {
    fn from(r: StoredRun) -> Record {
        Record {
            id: r.id,
            kind: r.report.kind(),
            trace: r.trace,
            profile: r.profile,
            designs: r.designs,
            seed: r.seed,
            csd_version: r.csd_version,
            stored_at: r.stored_at,
            report_version: r.report.version(),
            report: r.report.to_json(),
            spec: r.spec,
            sweep: r.sweep,
        }
    }
}

impl From<Record> for StoredRun {
    fn from(r: Record) -> StoredRun {
        StoredRun {
            id: r.id,
            trace: r.trace,
            profile: r.profile,
            designs: r.designs,
            seed: r.seed,
            csd_version: r.csd_version,
            stored_at: r.stored_at,
            report: Report::from_json(r.kind, r.report_version, r.report),
            spec: r.spec,
            sweep: r.sweep,
        }
    }
}

impl From<NewRun> for Record {
    fn from(r: NewRun) -> Record {
        StoredRun {
            id: String::new(),
            trace: r.trace,
            profile: r.profile,
            designs: r.designs,
            seed: r.seed,
            csd_version: String::new(),
            stored_at: 0,
            report: r.report,
            spec: r.spec,
            sweep: r.sweep,
        }
        .into()
    }
}

impl From<Record> for NewRun {
    fn from(r: Record) -> NewRun {
        let s = StoredRun::from(r);
        NewRun {
            trace: s.trace,
            profile: s.profile,
            designs: s.designs,
            seed: s.seed,
            report: s.report,
            spec: s.spec,
            sweep: s.sweep,
        }
    }
}

/// A task module kept in the store (`csd task add`): its name, its content id (`sha256:` +
/// hex of the module's bytes) and size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredTask {
    pub name: String,
    pub id: String,
    pub bytes: u64,
}

/// A stored trace's description.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredTrace {
    pub id: String,
    pub name: String,
    pub bytes: u64,
}

pub struct RunStore {
    db: sled::Db,
    runs: sled::Tree,
    traces: sled::Tree,
    trace_meta: sled::Tree,
    /// Device profiles by name, as TOML text (`csd profiles add`).
    profiles: sled::Tree,
    /// Task modules by content id, and their names (`csd task add`): a name points at the
    /// latest module added under it; older modules stay, for the runs that used them.
    tasks: sled::Tree,
    task_names: sled::Tree,
    /// `next_run`: the number the next run gets (ids are never reused, even after `rm`).
    meta: sled::Tree,
    /// Sweeps by id (their [`SweepRecord`]s), and their points: `sweep \0 key` → the run's
    /// key, written in the transaction that stores the run, so a point is stored once.
    sweeps: sled::Tree,
    points: sled::Tree,
    path: PathBuf,
}

/// The default store: `$XDG_DATA_HOME/csdlab/runs`, else `~/.local/share/csdlab/runs`.
pub fn default_store_path() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("csdlab").join("runs")
}

/// The content id of a trace: `sha256:` and the first 8 bytes of its SHA-256, in hex.
pub fn trace_id(bytes: &[u8]) -> String {
    trace_id_of(bytes).expect("reading a slice cannot fail")
}

/// [`trace_id`] of a stream, read in constant memory.
pub fn trace_id_of(mut r: impl std::io::Read) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let hex: String = h
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(format!("sha256:{hex}"))
}

/// What [`RunStore::insert`] did.
#[derive(Debug)]
pub enum Saved {
    New(Box<StoredRun>),
    /// The run is a sweep point the store already holds, as this run.
    Existing(String),
}

/// `sweep \0 key`: a point's place in the points tree (a sweep's points share a prefix).
fn point_index(sweep: &str, key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(sweep.len() + 1 + key.len());
    k.extend_from_slice(sweep.as_bytes());
    k.push(0);
    k.extend_from_slice(key.as_bytes());
    k
}

fn run_key(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

fn parse_id(id: &str) -> Result<u64, StoreError> {
    id.strip_prefix('r')
        .and_then(|n| n.parse::<u64>().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| StoreError::BadId(id.to_string()))
}

/// Every description kept in `metas` (traces' or tasks'), decoded.
fn descriptions<T: serde::de::DeserializeOwned>(metas: &sled::Tree) -> Result<Vec<T>, StoreError> {
    metas
        .iter()
        .map(|kv| {
            let (k, v) = kv?;
            serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt {
                id: String::from_utf8_lossy(&k).into_owned(),
                reason: e.to_string(),
            })
        })
        .collect()
}

/// Where runs that could not be saved wait for the next process to open the store.
pub fn spool_dir(store: &Path) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push(".spool");
    store.with_file_name(name)
}

/// Writes `run` to the store's spool (atomically: a temporary file, then a rename) and returns
/// the file. The next [`RunStore::open`] of the store imports it.
pub fn spool(store: &Path, run: &NewRun) -> std::io::Result<PathBuf> {
    let dir = spool_dir(store);
    std::fs::create_dir_all(&dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!("run-{nanos:024}-{}.json", std::process::id());
    let file = dir.join(&name);
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(
        &tmp,
        serde_json::to_vec(run).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&tmp, &file)?;
    Ok(file)
}

impl RunStore {
    /// [`RunStore::open`], waiting up to `patience` for a store another process holds. Tries
    /// back off from 5 ms to 100 ms, with a per-process phase so two waiting processes do not
    /// keep colliding. `on_busy` is called once, when the first try finds the store busy.
    pub fn open_waiting(
        path: &Path,
        patience: std::time::Duration,
        mut on_busy: impl FnMut(),
    ) -> Result<RunStore, StoreError> {
        let start = std::time::Instant::now();
        let mut delay_ms = 5 + u64::from(std::process::id() % 7);
        let mut told = false;
        loop {
            match RunStore::open(path) {
                Err(StoreError::Busy { .. }) if start.elapsed() < patience => {
                    if !told {
                        on_busy();
                        told = true;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(delay_ms));
                    delay_ms = (delay_ms * 2).min(100);
                }
                other => return other,
            }
        }
    }

    /// Opens the store (creating it if needed) and imports any spooled runs.
    pub fn open(path: &Path) -> Result<RunStore, StoreError> {
        let store = RunStore::open_only(path)?;
        store.import_spool();
        Ok(store)
    }

    /// Saves the runs waiting in the spool, oldest first, removing each file once saved. A
    /// file that does not parse is left where it is, with a warning: it is someone's result.
    fn import_spool(&self) {
        let Ok(entries) = std::fs::read_dir(spool_dir(&self.path)) else {
            return;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for file in files {
            let run = std::fs::read(&file)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<NewRun>(&b).map_err(|e| e.to_string()));
            match run {
                Ok(run) => match self.save(run) {
                    Ok(saved) => {
                        let _ = std::fs::remove_file(&file);
                        eprintln!(
                            "csd: stored the spooled run {} as {}",
                            file.display(),
                            saved.id
                        );
                    }
                    Err(e) => eprintln!(
                        "csd: could not store the spooled run {}: {e}",
                        file.display()
                    ),
                },
                Err(e) => eprintln!(
                    "csd: leaving the spooled run {} alone: it does not parse ({e})",
                    file.display()
                ),
            }
        }
    }

    fn open_only(path: &Path) -> Result<RunStore, StoreError> {
        std::fs::create_dir_all(path).map_err(|e| StoreError::Open {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let db = sled::Config::new()
            .path(path)
            .open()
            .map_err(|e| match &e {
                sled::Error::Io(io) if io.to_string().contains("could not acquire lock") => {
                    StoreError::Busy {
                        path: path.to_path_buf(),
                    }
                }
                _ => StoreError::Open {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                },
            })?;
        Ok(RunStore {
            runs: db.open_tree("runs")?,
            traces: db.open_tree("traces")?,
            trace_meta: db.open_tree("trace_meta")?,
            profiles: db.open_tree("profiles")?,
            tasks: db.open_tree("tasks")?,
            task_names: db.open_tree("task_names")?,
            meta: db.open_tree("meta")?,
            sweeps: db.open_tree("sweeps")?,
            points: db.open_tree("points")?,
            db,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores a finished run atomically and returns it with its id. A sweep point that is
    /// already stored is not stored again: the stored run is returned.
    pub fn save(&self, run: NewRun) -> Result<StoredRun, StoreError> {
        match self.insert(run)? {
            Saved::New(run) => Ok(*run),
            Saved::Existing(id) => self.get(&id),
        }
    }

    /// Stores a finished run atomically, unless it is a sweep point already stored.
    pub fn insert(&self, run: NewRun) -> Result<Saved, StoreError> {
        self.insert_dated(run, None)
    }

    /// [`RunStore::insert`], keeping the time a run was first stored (an imported run's).
    pub(crate) fn insert_dated(
        &self,
        run: NewRun,
        stored_at: Option<u64>,
    ) -> Result<Saved, StoreError> {
        use sled::transaction::{ConflictableTransactionError, TransactionError};
        use sled::Transactional;
        let point = run.sweep.as_ref().map(|t| point_index(&t.sweep, &t.key));
        let mut stored = StoredRun {
            id: String::new(),
            trace: run.trace,
            profile: run.profile,
            designs: run.designs,
            seed: run.seed,
            csd_version: env!("CARGO_PKG_VERSION").to_string(),
            stored_at: stored_at.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            }),
            report: run.report,
            spec: run.spec,
            sweep: run.sweep,
        };
        // The run, the counter and the sweep point change together or not at all.
        let outcome = (&self.runs, &self.meta, &self.points)
            .transaction(|(runs, meta, points)| {
                if let Some(point) = &point {
                    if let Some(k) = points.get(point)? {
                        let n = u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0; 8]));
                        return Ok(Err(format!("r{n}")));
                    }
                }
                let n = meta
                    .get("next_run")?
                    .and_then(|v| v.as_ref().try_into().ok().map(u64::from_be_bytes))
                    .unwrap_or(1);
                let mut record = stored.clone();
                record.id = format!("r{n}");
                let bytes = serde_json::to_vec(&record).expect("a run serialises");
                runs.insert(&run_key(n), bytes)?;
                meta.insert("next_run", &(n + 1).to_be_bytes())?;
                if let Some(point) = &point {
                    points.insert(point.as_slice(), &run_key(n))?;
                }
                Ok::<_, ConflictableTransactionError<()>>(Ok(record.id))
            })
            .map_err(|e| match e {
                TransactionError::Storage(e) => StoreError::Db(e),
                TransactionError::Abort(()) => unreachable!("the transaction never aborts"),
            })?;
        let id = match outcome {
            Ok(id) => id,
            Err(existing) => return Ok(Saved::Existing(existing)),
        };
        self.db.flush()?;
        stored.id = id;
        Ok(Saved::New(Box::new(stored)))
    }

    /// Keeps (or replaces) a sweep's description.
    pub fn put_sweep(&self, record: &SweepRecord) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(record).expect("a sweep record serialises");
        self.sweeps.insert(record.spec.name.as_bytes(), bytes)?;
        self.db.flush()?;
        Ok(())
    }

    /// Every sweep, by id.
    pub fn sweeps(&self) -> Result<Vec<SweepRecord>, StoreError> {
        descriptions(&self.sweeps)
    }

    pub fn sweep(&self, id: &str) -> Result<SweepRecord, StoreError> {
        let v = self
            .sweeps
            .get(id.as_bytes())?
            .ok_or_else(|| StoreError::NoSweep(id.to_string()))?;
        serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt {
            id: format!("sweep {id}"),
            reason: e.to_string(),
        })
    }

    /// The stored points of sweep `id`: key → run id.
    pub fn points(
        &self,
        id: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, StoreError> {
        let prefix = point_index(id, "");
        self.points
            .scan_prefix(&prefix)
            .map(|kv| {
                let (k, v) = kv?;
                let key = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
                let n = u64::from_be_bytes(v.as_ref().try_into().unwrap_or([0; 8]));
                Ok((key, format!("r{n}")))
            })
            .collect()
    }

    /// The runs of sweep `id`, oldest first.
    pub fn sweep_runs(&self, id: &str) -> Result<Vec<StoredRun>, StoreError> {
        let mut ids: Vec<u64> = self
            .points(id)?
            .values()
            .filter_map(|r| parse_id(r).ok())
            .collect();
        ids.sort_unstable();
        ids.into_iter()
            .map(|n| self.get(&format!("r{n}")))
            .collect()
    }

    /// Every run's record as stored, for export and for finding duplicates on import.
    pub(crate) fn raw_runs(&self) -> impl Iterator<Item = Result<Vec<u8>, StoreError>> + '_ {
        self.runs.iter().values().map(|v| Ok(v?.to_vec()))
    }

    fn decode(id: &str, bytes: &[u8]) -> Result<StoredRun, StoreError> {
        serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
            id: id.to_string(),
            reason: e.to_string(),
        })
    }

    /// Every run, oldest first.
    pub fn list(&self) -> Result<Vec<StoredRun>, StoreError> {
        self.runs
            .iter()
            .map(|kv| {
                let (k, v) = kv?;
                let n = u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0; 8]));
                Self::decode(&format!("r{n}"), &v)
            })
            .collect()
    }

    pub fn get(&self, id: &str) -> Result<StoredRun, StoreError> {
        let n = parse_id(id)?;
        let v = self
            .runs
            .get(run_key(n))?
            .ok_or_else(|| StoreError::NoRun(id.to_string()))?;
        Self::decode(id, &v)
    }

    pub fn remove(&self, id: &str) -> Result<(), StoreError> {
        let n = parse_id(id)?;
        let old = self
            .runs
            .remove(run_key(n))?
            .ok_or_else(|| StoreError::NoRun(id.to_string()))?;
        // A removed point is a point to run again.
        if let Ok(Record { sweep: Some(t), .. }) = serde_json::from_slice::<Record>(&old) {
            self.points.remove(point_index(&t.sweep, &t.key))?;
        }
        self.db.flush()?;
        Ok(())
    }

    /// Stores a trace's bytes under its content id (storing the same trace twice is a no-op).
    pub fn add_trace(&self, name: &str, bytes: &[u8]) -> Result<StoredTrace, StoreError> {
        let meta = StoredTrace {
            id: trace_id(bytes),
            name: name.to_string(),
            bytes: bytes.len() as u64,
        };
        self.keep(
            &self.traces,
            &self.trace_meta,
            meta.id.as_bytes(),
            bytes,
            &meta,
        )?;
        Ok(meta)
    }

    pub fn traces(&self) -> Result<Vec<StoredTrace>, StoreError> {
        descriptions(&self.trace_meta)
    }

    /// Keeps content-addressed `bytes` in `blobs` and `meta` under `key` in `metas`: bytes
    /// first, description second, so a description always has its bytes.
    fn keep(
        &self,
        blobs: &sled::Tree,
        metas: &sled::Tree,
        key: &[u8],
        bytes: &[u8],
        meta: &impl Serialize,
    ) -> Result<(), StoreError> {
        blobs.insert(trace_id(bytes).as_bytes(), bytes)?;
        metas.insert(key, serde_json::to_vec(meta).expect("serialises"))?;
        self.db.flush()?;
        Ok(())
    }

    /// Keeps a task module under `name` (replacing what the name pointed at). The caller has
    /// checked that it is a valid task module and that `name` is not a built-in task's.
    pub fn add_task(&self, name: &str, bytes: &[u8]) -> Result<StoredTask, StoreError> {
        let task = StoredTask {
            name: name.to_string(),
            id: trace_id(bytes),
            bytes: bytes.len() as u64,
        };
        self.keep(&self.tasks, &self.task_names, name.as_bytes(), bytes, &task)?;
        Ok(task)
    }

    /// Keeps a task module by its content id only (an imported run's module: the names
    /// this store gives its tasks stay as they are).
    pub fn add_task_module(&self, bytes: &[u8]) -> Result<(), StoreError> {
        self.tasks.insert(trace_id(bytes).as_bytes(), bytes)?;
        self.db.flush()?;
        Ok(())
    }

    /// The stored tasks, by name.
    pub fn tasks(&self) -> Result<Vec<StoredTask>, StoreError> {
        descriptions(&self.task_names)
    }

    /// A stored task's module, by name or by content id (a module a name no longer points
    /// at is still found by its id).
    pub fn task(&self, key: &str) -> Result<(StoredTask, Vec<u8>), StoreError> {
        let missing = || StoreError::NoTask(key.to_string());
        let meta = match self
            .tasks()?
            .into_iter()
            .find(|t| t.name == key || t.id == key)
        {
            Some(t) => t,
            None if key.starts_with("sha256:") => {
                let bytes = self.tasks.get(key.as_bytes())?.ok_or_else(missing)?;
                let meta = StoredTask {
                    name: key.to_string(),
                    id: key.to_string(),
                    bytes: bytes.len() as u64,
                };
                return Ok((meta, bytes.to_vec()));
            }
            None => return Err(missing()),
        };
        let bytes = self.tasks.get(meta.id.as_bytes())?.ok_or_else(missing)?;
        Ok((meta, bytes.to_vec()))
    }

    /// Stores a device profile's TOML text under `name` (replacing one of that name). The
    /// caller has checked that it parses.
    pub fn add_profile(&self, name: &str, toml: &str) -> Result<(), StoreError> {
        self.profiles.insert(name.as_bytes(), toml.as_bytes())?;
        self.db.flush()?;
        Ok(())
    }

    /// A stored profile's TOML text.
    pub fn profile_text(&self, name: &str) -> Result<String, StoreError> {
        let v = self
            .profiles
            .get(name.as_bytes())?
            .ok_or_else(|| StoreError::NoProfile(name.to_string()))?;
        String::from_utf8(v.to_vec()).map_err(|e| StoreError::Corrupt {
            id: format!("profile {name}"),
            reason: e.to_string(),
        })
    }

    /// The names of the stored profiles, in order.
    pub fn profile_names(&self) -> Result<Vec<String>, StoreError> {
        self.profiles
            .iter()
            .keys()
            .map(|k| Ok(String::from_utf8_lossy(&k?).into_owned()))
            .collect()
    }

    /// A stored trace's bytes, by id or by name.
    pub fn trace(&self, key: &str) -> Result<(StoredTrace, Vec<u8>), StoreError> {
        let meta = self
            .traces()?
            .into_iter()
            .find(|t| {
                // By id, by name, or by name without its `.trace` suffix.
                t.id == key || t.name == key || t.name.strip_suffix(".trace") == Some(key)
            })
            .ok_or_else(|| StoreError::NoTrace(key.to_string()))?;
        let bytes = self
            .traces
            .get(meta.id.as_bytes())?
            .ok_or_else(|| StoreError::NoTrace(key.to_string()))?;
        Ok((meta, bytes.to_vec()))
    }
}
