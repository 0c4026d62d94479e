//! Task references: one way to name a task everywhere (`csd run`, `csd ndp --app`, a trace's
//! `ndp` and `isc` ops, `csd replay`, the dashboard's replay form).
//!
//! A reference is a path to a `.wasm` or `.wat` module (it contains a `/` or ends in one of
//! those), else a built-in task's name (`grep`), else the name of a task kept in the run
//! store (`csd task add`). Each resolved task carries the content id of its module
//! (`sha256:` + hex), so a stored run can say which module it ran and a rerun can tell when
//! that module changed.

use anyhow::{bail, Context as _};
use csd_traces::spec::TaskRef;
use csd_traces::store::trace_id;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a task's module came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    Builtin,
    File(PathBuf),
    Stored,
}

/// A task reference resolved to its module.
#[derive(Clone, Debug)]
pub struct ResolvedTask {
    /// The name it runs and reports under: the built-in's or stored task's name, or the
    /// module file's stem.
    pub name: String,
    pub origin: Origin,
    pub wasm: Arc<[u8]>,
    /// `sha256:` + hex of `wasm`.
    pub id: String,
}

impl ResolvedTask {
    /// How a stored run names it.
    pub fn task_ref(&self, reference: &str) -> TaskRef {
        TaskRef {
            reference: reference.to_string(),
            id: self.id.clone(),
        }
    }
}

/// Whether `reference` names a module file rather than a task by name.
pub fn is_path(reference: &str) -> bool {
    reference.contains('/') || reference.ends_with(".wasm") || reference.ends_with(".wat")
}

/// Looks a task name up in the run store: its content id and module, if it is kept there.
pub type StoredLookup<'a> = dyn Fn(&str) -> Option<(String, Vec<u8>)> + 'a;

/// The largest task module csd reads from a file (the built-in ones are under 1 MiB).
pub const MAX_MODULE_BYTES: u64 = 64 << 20;

/// Where a reference may lead: the command line may name module files; a request to the
/// dashboard may not (it never names a file on the server's host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paths {
    Allowed,
    Refused,
}

/// Reads a module file: a regular file of at most [`MAX_MODULE_BYTES`].
fn read_module(path: &Path) -> anyhow::Result<Vec<u8>> {
    if !std::fs::metadata(path)?.is_file() {
        bail!("not a regular file");
    }
    match read_at_most(path, MAX_MODULE_BYTES)? {
        Some(wasm) => Ok(wasm),
        None => bail!("over the {MAX_MODULE_BYTES}-byte limit of a task module"),
    }
}

/// Reads the file at `path` whole if it holds at most `max` bytes, else `None`. The read
/// stops one byte past `max`, so a file that is larger, or grows while read, or never ends
/// (a device, a pipe) costs no more memory than the bound.
pub fn read_at_most(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let hint = file.metadata().map_or(0, |m| m.len()).min(max);
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

/// Resolves one task reference. `stored` looks names up in the run store (none with
/// `--no-store`).
pub fn resolve(
    reference: &str,
    stored: &StoredLookup<'_>,
    paths: Paths,
) -> anyhow::Result<ResolvedTask> {
    if is_path(reference) {
        if paths == Paths::Refused {
            bail!(
                "task '{reference}' is a path, and a request names tasks by name only (a \
                 built-in task, or one kept with csd task add)"
            );
        }
        let path = Path::new(reference);
        let wasm = read_module(path).with_context(|| format!("reading task module {reference}"))?;
        let name = path
            .file_stem()
            .map_or(reference.into(), |s| s.to_string_lossy().into_owned());
        return Ok(ResolvedTask {
            name,
            origin: Origin::File(path.to_path_buf()),
            id: trace_id(&wasm),
            wasm: wasm.into(),
        });
    }
    if let Some(wasm) = crate::builtin::task(reference) {
        return Ok(ResolvedTask {
            name: reference.to_string(),
            origin: Origin::Builtin,
            id: trace_id(wasm),
            wasm: wasm.into(),
        });
    }
    if let Some((id, wasm)) = stored(reference) {
        return Ok(ResolvedTask {
            name: reference.to_string(),
            origin: Origin::Stored,
            id,
            wasm: wasm.into(),
        });
    }
    bail!(
        "unknown task '{reference}': not a built-in task ({}), not kept in the run store (csd \
         task add NAME FILE keeps one), and not a path to a .wasm or .wat module",
        builtin_names()
    )
}

/// The built-in tasks' names, for messages.
pub fn builtin_names() -> String {
    crate::builtin::BUILTIN_TASKS
        .iter()
        .map(|t| t.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a command resolves task references: where it may look.
#[derive(Clone, Copy)]
pub struct Resolver<'a> {
    /// The run store's tasks (none with `--no-store`).
    pub stored: &'a StoredLookup<'a>,
    pub paths: Paths,
}

impl Resolver<'_> {
    pub fn resolve(&self, reference: &str) -> anyhow::Result<ResolvedTask> {
        resolve(reference, self.stored, self.paths)
    }

    /// Every reference resolved up front (see [`TaskLibrary`]).
    pub fn library<'r>(&self, references: impl IntoIterator<Item = &'r str>) -> TaskLibrary {
        TaskLibrary::resolve(references, self.stored, self.paths)
    }
}

/// The tasks a run may name, resolved up front: a replay resolves every task its trace names
/// before it starts, so a replay never opens the store midway.
#[derive(Clone, Debug, Default)]
pub struct TaskLibrary {
    tasks: BTreeMap<String, Result<ResolvedTask, String>>,
}

impl TaskLibrary {
    /// Resolves each of `references`; one that does not resolve is kept with its error,
    /// which is what an op naming it reports.
    pub fn resolve<'r>(
        references: impl IntoIterator<Item = &'r str>,
        stored: &StoredLookup<'_>,
        paths: Paths,
    ) -> TaskLibrary {
        let tasks = references
            .into_iter()
            .map(|r| {
                let t = resolve(r, stored, paths).map_err(|e| format!("{e:#}"));
                (r.to_string(), t)
            })
            .collect();
        TaskLibrary { tasks }
    }

    /// The task `reference` names: resolved, or why not.
    pub fn get(&self, reference: &str) -> Result<&ResolvedTask, String> {
        match self.tasks.get(reference) {
            Some(Ok(t)) => Ok(t),
            Some(Err(e)) => Err(e.clone()),
            None => Err(format!(
                "task '{reference}' was not resolved before the run (a trace may name at most \
                 {} distinct tasks)",
                csd_traces::prescan::MAX_TASKS
            )),
        }
    }

    /// The resolved tasks that are not built in: what a stored run records, so a rerun can
    /// tell when one changed.
    pub fn user_tasks(&self) -> Vec<TaskRef> {
        self.tasks
            .iter()
            .filter_map(|(r, t)| match t {
                Ok(t) if t.origin != Origin::Builtin => Some(t.task_ref(r)),
                _ => None,
            })
            .collect()
    }
}
