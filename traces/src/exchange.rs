//! Moving runs between run stores: `csd runs export` and `csd runs import`.
//!
//! An export is JSON Lines: a header, then one item per line — sweeps, the stored traces and
//! task modules the runs need to be rerun, and the runs themselves (with the id and date
//! they had). Lines keep memory bounded by the largest item, not the file.
//!
//! Importing merges: it loses nothing and duplicates nothing. A run is the same run when
//! everything but its id and date is equal (a run's identity is its content, since ids are
//! local to a store), and a sweep point already stored is not stored again. Importing one
//! file twice, or two shards' exports in either order, gives the same store.
//!
//! A file is read twice: first checked whole (a bad line is named and nothing is stored),
//! then imported.

use crate::store::{RunStore, Saved, StoreError, StoredRun};
use crate::sweep::SweepRecord;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::io::{BufRead, Write};

/// The export layout's version; a file of another is refused with a message.
pub const EXPORT_VERSION: u32 = 1;

/// No line of an export may be longer than this (a trace of the whole run store fits).
pub const MAX_LINE: u64 = 1 << 30;

#[derive(Serialize, Deserialize)]
struct Header {
    csdlab: String,
    version: u32,
    csd_version: String,
}

const MAGIC: &str = "runs";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Item {
    Sweep(SweepRecord),
    /// A trace's bytes: as text when they are UTF-8 (traces are JSON Lines), else in hex.
    Trace {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hex: Option<String>,
    },
    Task {
        id: String,
        hex: String,
    },
    Run(Box<StoredRun>),
}

#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("reading the export: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a csdlab runs export: the first line is not its header")]
    NotAnExport,
    #[error("the export has layout version {0}; this csd reads version {EXPORT_VERSION}")]
    Version(u32),
    #[error("line {line}: {reason}")]
    Line { line: u64, reason: String },
}

/// What an export or import moved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Moved {
    pub runs: usize,
    /// Runs the store already held (the same content, or the same sweep point).
    pub duplicates: usize,
    pub sweeps: usize,
    pub traces: usize,
    pub tasks: usize,
}

/// Writes `runs` (with the sweeps they belong to, and the stored traces and task modules
/// they name) to `out`.
pub fn export(
    store: &RunStore,
    runs: &[StoredRun],
    out: &mut dyn Write,
) -> Result<Moved, ExchangeError> {
    let mut moved = Moved::default();
    let mut line = |item: &dyn erased::Line| -> Result<(), ExchangeError> {
        serde_json::to_writer(&mut *out, &item.value()).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
        Ok(())
    };
    line(&Header {
        csdlab: MAGIC.into(),
        version: EXPORT_VERSION,
        csd_version: env!("CARGO_PKG_VERSION").into(),
    })?;
    let mut seen = HashSet::new();
    for run in runs {
        if let Some(tag) = &run.sweep {
            if seen.insert(format!("sweep {}", tag.sweep)) {
                if let Ok(record) = store.sweep(&tag.sweep) {
                    line(&Item::Sweep(record))?;
                    moved.sweeps += 1;
                }
            }
        }
        if let Some(trace) = &run.trace {
            if seen.insert(format!("trace {}", trace.id)) {
                // Samples are bundled with csd and files stay where they are: only the
                // store's own traces travel.
                if let Ok((meta, bytes)) = store.trace(&trace.id) {
                    let (text, hex) = match String::from_utf8(bytes) {
                        Ok(text) => (Some(text), None),
                        Err(e) => (None, Some(to_hex(e.as_bytes()))),
                    };
                    line(&Item::Trace {
                        name: meta.name,
                        text,
                        hex,
                    })?;
                    moved.traces += 1;
                }
            }
        }
        for task in run.spec.iter().flat_map(|s| &s.tasks) {
            if seen.insert(format!("task {}", task.id)) {
                if let Ok((_, wasm)) = store.task(&task.id) {
                    line(&Item::Task {
                        id: task.id.clone(),
                        hex: to_hex(&wasm),
                    })?;
                    moved.tasks += 1;
                }
            }
        }
        line(&Item::Run(Box::new(run.clone())))?;
        moved.runs += 1;
    }
    Ok(moved)
}

/// Checks a whole export (`open` gives it from its start), then merges it into `store`.
pub fn import(
    store: &RunStore,
    mut open: impl FnMut() -> std::io::Result<Box<dyn BufRead>>,
) -> Result<Moved, ExchangeError> {
    each_item(&mut *open()?, |_, _| Ok(()))?;
    let mut known: HashSet<[u8; 32]> = HashSet::new();
    for raw in store.raw_runs() {
        let v: Value = serde_json::from_slice(&raw?).map_err(|e| StoreError::Corrupt {
            id: "a stored run".into(),
            reason: e.to_string(),
        })?;
        known.insert(identity(v));
    }
    let mut moved = Moved::default();
    each_item(&mut *open()?, |item, raw| {
        match item {
            Item::Sweep(record) => {
                if store.sweep(&record.spec.name).is_err() {
                    store.put_sweep(&record)?;
                    moved.sweeps += 1;
                }
            }
            Item::Trace { name, text, hex } => {
                let bytes = match (text, hex) {
                    (Some(text), None) => text.into_bytes(),
                    (None, Some(hex)) => {
                        from_hex(&hex).ok_or(Refusal::Bad("a trace's hex does not decode"))?
                    }
                    _ => return Err(Refusal::Bad("a trace needs either text or hex")),
                };
                store.add_trace(&name, &bytes)?;
                moved.traces += 1;
            }
            Item::Task { id, hex } => {
                let wasm = from_hex(&hex).ok_or(Refusal::Bad("a task's hex does not decode"))?;
                if crate::store::trace_id(&wasm) != id {
                    return Err(Refusal::Bad("a task's bytes do not have its content id"));
                }
                store.add_task_module(&wasm)?;
                moved.tasks += 1;
            }
            Item::Run(run) => {
                let run_json = raw.get("run").cloned().unwrap_or(Value::Null);
                if !known.insert(identity(run_json)) {
                    moved.duplicates += 1;
                    return Ok(());
                }
                let stored_at = run.stored_at;
                let new = crate::store::NewRun {
                    trace: run.trace,
                    profile: run.profile,
                    designs: run.designs,
                    seed: run.seed,
                    report: run.report,
                    spec: run.spec,
                    sweep: run.sweep,
                };
                match store.insert_dated(new, Some(stored_at))? {
                    Saved::New(_) => moved.runs += 1,
                    Saved::Existing(_) => moved.duplicates += 1,
                }
            }
        }
        Ok(())
    })?;
    Ok(moved)
}

/// Calls `f` with each item of an export after checking its header. Errors name the line.
fn each_item(
    r: &mut dyn BufRead,
    mut f: impl FnMut(Item, Value) -> Result<(), Refusal>,
) -> Result<(), ExchangeError> {
    let mut buf = Vec::new();
    let mut n = 0u64;
    loop {
        buf.clear();
        let got = std::io::Read::take(&mut *r, MAX_LINE + 1).read_until(b'\n', &mut buf)?;
        if got == 0 {
            if n == 0 {
                return Err(ExchangeError::NotAnExport);
            }
            return Ok(());
        }
        n += 1;
        let bad = |reason: String| ExchangeError::Line { line: n, reason };
        if got as u64 > MAX_LINE {
            return Err(bad(format!("longer than {MAX_LINE} bytes")));
        }
        let text = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if n == 1 {
            let h: Header = serde_json::from_slice(text).map_err(|_| ExchangeError::NotAnExport)?;
            if h.csdlab != MAGIC {
                return Err(ExchangeError::NotAnExport);
            }
            if h.version != EXPORT_VERSION {
                return Err(ExchangeError::Version(h.version));
            }
            continue;
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: Value = serde_json::from_slice(text).map_err(|e| bad(e.to_string()))?;
        let item: Item = serde_json::from_value(value.clone()).map_err(|e| bad(e.to_string()))?;
        if let Item::Run(run) = &item {
            if let Some(why) = run.report.unreadable() {
                return Err(bad(format!("run {}'s report does not load: {why}", run.id)));
            }
        }
        f(item, value).map_err(|e| match e {
            Refusal::Bad(why) => bad(why.to_string()),
            Refusal::Store(e) => ExchangeError::Store(e),
        })?;
    }
}

/// Why an item was not imported.
enum Refusal {
    Bad(&'static str),
    Store(StoreError),
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Refusal {
        Refusal::Store(e)
    }
}

/// A run's identity: the SHA-256 of its record without its id and date.
fn identity(mut run: Value) -> [u8; 32] {
    if let Some(o) = run.as_object_mut() {
        o.remove("id");
        o.remove("stored_at");
    }
    let bytes = serde_json::to_vec(&run).expect("a JSON value serialises");
    Sha256::digest(&bytes).into()
}

fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Lines of different types through one writer.
mod erased {
    pub trait Line {
        fn value(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Line for T {
        fn value(&self) -> serde_json::Value {
            serde_json::to_value(self).expect("an export line serialises")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_garbage() {
        let b = vec![0u8, 1, 0xab, 0xff];
        assert_eq!(from_hex(&to_hex(&b)).unwrap(), b);
        assert!(from_hex("abc").is_none());
        assert!(from_hex("zz").is_none());
    }

    #[test]
    fn identity_ignores_id_and_date_only() {
        let a = serde_json::json!({"id": "r1", "stored_at": 5, "seed": 1});
        let b = serde_json::json!({"id": "r9", "stored_at": 7, "seed": 1});
        let c = serde_json::json!({"id": "r1", "stored_at": 5, "seed": 2});
        assert_eq!(identity(a.clone()), identity(b));
        assert_ne!(identity(a), identity(c));
    }
}
