//! The run store as the server uses it: opened for each request and closed after.
//!
//! sled locks a store for as long as it is open. Keeping it open for the server's lifetime
//! would make every `csd replay` in another terminal fail to save while the dashboard runs;
//! opening per request costs a few milliseconds and lets both work (each side retries a busy
//! store briefly).

use csd_traces::store::{RunStore, StoreError};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

pub struct StoreHandle {
    path: PathBuf,
    /// One opener at a time within this process (sled's lock is per process).
    lock: Mutex<()>,
}

impl StoreHandle {
    pub fn new(path: PathBuf) -> StoreHandle {
        StoreHandle {
            path,
            lock: Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the store, runs `f`, closes it. A store another process holds is retried for
    /// up to five seconds. Blocking: call from a blocking task.
    pub fn with<T>(
        &self,
        f: impl FnOnce(&RunStore) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let store = RunStore::open_waiting(&self.path, Duration::from_secs(5), || {})?;
        f(&store)
    }
}
