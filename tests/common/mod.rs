//! What the `csd` binary's test files share.

use std::path::PathBuf;

thread_local! {
    /// The running test's scratch directory. libtest runs each test on a thread of its own,
    /// so each test gets its own directory, removed when the test ends: repeated `cargo
    /// test` runs leave nothing behind, and no test sees another's store.
    static SCRATCH: tempfile::TempDir = tempfile::Builder::new()
        .prefix("csd-test-")
        .tempdir()
        .expect("creating a test's scratch directory");
}

/// The running test's scratch directory (see [`SCRATCH`]).
pub fn scratch_dir() -> PathBuf {
    SCRATCH.with(|d| d.path().to_path_buf())
}
