//! # csd-sdk: write in-storage tasks for csdlab
//!
//! A task is a Rust crate compiled to `wasm32-unknown-unknown` (with std, no WASI) that the
//! csd runtime runs *inside* the simulated device. It sees the files the host registered for
//! the invocation, its arguments, and returns bytes; the ABI underneath is documented in
//! `sdk/README.md`.
//!
//! ```no_run
//! use csd_sdk::{serde_json, task, Context, Result};
//!
//! #[task]
//! fn run(ctx: Context) -> Result<()> {
//!     let mut total = 0u64;
//!     for file in ctx.files() {
//!         total += file.read_to_end()?.iter().filter(|&&b| b == b'\n').count() as u64;
//!     }
//!     csd_sdk::ret_json(&serde_json::json!({ "lines": total }))
//! }
//! # fn main() {}
//! ```

pub use csd_sdk_macros::task;
pub use serde_json;

mod sys;

use serde::{de::DeserializeOwned, Serialize};

/// A task's error: a message the host reports as "task failed (run returned 1): ...".
///
/// Converts from any `std::error::Error` and from strings, so `?` works on most things.
#[derive(Debug)]
pub struct Error {
    message: String,
}

impl Error {
    pub fn msg(message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl<E: std::error::Error> From<E> for Error {
    fn from(e: E) -> Error {
        Error::msg(e.to_string())
    }
}

/// Returns early from a task with an error message: `bail!("bad pattern {p:?}")`.
#[macro_export]
macro_rules! bail {
    ($($t:tt)*) => { return Err($crate::Error::msg(format!($($t)*))) };
}

pub type Result<T> = std::result::Result<T, Error>;

/// What the task was invoked with. Handed to the `#[task]` function.
#[derive(Debug)]
pub struct Context {
    _private: (),
}

impl Context {
    /// The raw argument bytes.
    pub fn args(&self) -> Vec<u8> {
        let len = sys::args_len().max(0) as usize;
        let mut buf = vec![0u8; len];
        let n = sys::args_read(&mut buf);
        buf.truncate(n);
        buf
    }

    /// The arguments parsed as JSON into `T`; no arguments parse as `{}`.
    pub fn args_json<T: DeserializeOwned>(&self) -> Result<T> {
        let bytes = self.args();
        let bytes: &[u8] = if bytes.is_empty() { b"{}" } else { &bytes };
        serde_json::from_slice(bytes).map_err(|e| Error::msg(format!("bad arguments: {e}")))
    }

    /// Number of files registered for this invocation.
    pub fn file_count(&self) -> usize {
        sys::file_count().max(0) as usize
    }

    /// The `index`-th registered file.
    pub fn file(&self, index: usize) -> Result<File> {
        if index >= self.file_count() {
            bail!(
                "file {index} is not registered ({} registered)",
                self.file_count()
            );
        }
        Ok(File {
            handle: index as i32,
        })
    }

    /// Every registered file, in registration order.
    pub fn files(&self) -> impl Iterator<Item = File> {
        (0..self.file_count() as i32).map(|handle| File { handle })
    }
}

/// A file registered for this invocation. Reads and writes go through the device.
#[derive(Clone, Copy, Debug)]
pub struct File {
    handle: i32,
}

impl File {
    pub fn handle(&self) -> i32 {
        self.handle
    }

    pub fn size(&self) -> u64 {
        sys::file_size(self.handle) as u64
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at the end).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        sys::file_read(self.handle, offset, buf)
    }

    /// Reads the whole file.
    pub fn read_to_end(&self) -> Result<Vec<u8>> {
        let size = usize::try_from(self.size()).map_err(|_| Error::msg("file too large"))?;
        let mut buf = vec![0u8; size];
        let n = self.read_at(0, &mut buf);
        buf.truncate(n);
        Ok(buf)
    }

    /// Calls `f` on consecutive chunks of the file, reading `chunk_bytes` at a time: how to
    /// stream a file larger than memory.
    pub fn for_each_chunk(&self, chunk_bytes: usize, mut f: impl FnMut(u64, &[u8])) {
        // Never allocate (and zero) more than the file holds: small files are the common case.
        let size = usize::try_from(self.size()).unwrap_or(usize::MAX);
        let mut buf = vec![0u8; chunk_bytes.clamp(1, size.max(1))];
        let mut offset = 0u64;
        loop {
            let n = self.read_at(offset, &mut buf);
            if n == 0 {
                break;
            }
            f(offset, &buf[..n]);
            offset += n as u64;
        }
    }

    pub fn write_at(&self, offset: u64, data: &[u8]) {
        sys::file_write(self.handle, offset, data);
    }

    pub fn append(&self, data: &[u8]) {
        sys::file_append(self.handle, data);
    }
}

/// Appends bytes to the task's return value.
pub fn ret(bytes: &[u8]) {
    sys::ret_write(bytes);
}

/// Returns `value` as JSON.
pub fn ret_json<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    let bytes = serde_json::to_vec(value).map_err(|e| Error::msg(e.to_string()))?;
    ret(&bytes);
    Ok(())
}

#[doc(hidden)]
pub fn __log(message: &str) {
    sys::log(message);
}

/// Logs a line on the host (shown with `RUST_LOG=csd_task=info`, kept in the task report).
#[macro_export]
macro_rules! log {
    ($($t:tt)*) => { $crate::__log(&format!($($t)*)) };
}

/// Hardware engines of the device. Their results are computed by the host; their cost comes
/// from the device profile's accelerator model, not from fuel.
pub mod accel {
    use super::{sys, File};

    /// Counts occurrences of `pattern` in `file` with the grep engine; returns the count and
    /// the first `max_offsets` match offsets.
    pub fn grep(file: &File, pattern: &[u8], max_offsets: usize) -> (u64, Vec<u64>) {
        let mut offsets = vec![0u64; max_offsets];
        let count = sys::accel_grep(file.handle, pattern, &mut offsets);
        offsets.truncate((count as usize).min(max_offsets));
        (count, offsets)
    }

    /// Sums the file as little-endian unsigned integers of `width_bits` (32 or 64),
    /// wrapping, with the stats engine.
    pub fn stats(file: &File, width_bits: u32) -> u64 {
        sys::accel_stats(file.handle, width_bits as i32)
    }
}

#[doc(hidden)]
pub fn __run(task: fn(Context) -> Result<()>) -> i32 {
    std::panic::set_hook(Box::new(|info| {
        let message = match info.payload().downcast_ref::<&str>() {
            Some(s) => s.to_string(),
            None => info
                .payload()
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "panic".into()),
        };
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        sys::panic(&format!("{message}{location}"));
    }));
    match task(Context { _private: () }) {
        Ok(()) => 0,
        Err(e) => {
            sys::fail(&e.message);
            1
        }
    }
}
