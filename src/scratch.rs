//! Scratch directories in `$TMPDIR` that outlive a killed process only until the next one.
//!
//! A `tempfile::TempDir` is removed when it is dropped, but a process stopped by a signal
//! (Ctrl-C, the OOM killer) drops nothing, so what it wrote there stays for good: a sweep's
//! copies of its modules and traces, a benchmark's run stores. A [`Scratch`] holds a lock on
//! a file inside its directory for as long as it lives, and making one first removes every
//! directory of the same kind whose lock can be taken: its owner is gone, since the lock
//! went with its process. A lock rather than a process id, so that processes in other PID
//! namespaces sharing the directory count too.

use anyhow::Context;
use std::fs::File;
use std::path::Path;

/// The file whose lock a scratch directory's owner holds.
const LOCK: &str = "owner.lock";

/// A temporary directory, locked while this value lives.
pub struct Scratch {
    dir: tempfile::TempDir,
    /// Dropped after `dir` (fields drop in order): the directory is gone before the lock is.
    _lock: File,
}

impl Scratch {
    /// A fresh directory named `{prefix}…` in the temporary directory, after removing the
    /// ones with that prefix no live process holds.
    pub fn new(prefix: &str) -> anyhow::Result<Scratch> {
        remove_stale(&std::env::temp_dir(), prefix);
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .context("creating a scratch directory")?;
        // Locked before it takes its name, so no other process ever finds it unlocked.
        let unnamed = dir.path().join(format!("{LOCK}.new"));
        let lock = File::create(&unnamed)
            .and_then(|f| f.lock().map(|()| f))
            .and_then(|f| std::fs::rename(&unnamed, dir.path().join(LOCK)).map(|()| f))
            .context("locking a scratch directory")?;
        Ok(Scratch { dir, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the directories in `tmp` named `{prefix}…` whose lock can be taken. One whose
/// lock is held, or that has no lock file yet (its owner is just making it), is kept, and
/// what cannot be removed (another user's) is left alone.
fn remove_stale(tmp: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let Ok(lock) = File::open(entry.path().join(LOCK)) else {
            continue;
        };
        if lock.try_lock().is_ok() {
            tracing::debug!(dir = %entry.path().display(), "removing a stopped process's scratch directory");
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
