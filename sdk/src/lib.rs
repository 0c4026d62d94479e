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
/// serde and its derives, so a task's argument types need no dependency of their own:
/// `#[derive(csd_sdk::Deserialize)] #[serde(crate = "csd_sdk::serde")] struct Args { … }`.
pub use serde;
pub use serde::{Deserialize, Serialize};
pub use serde_json;
pub use std::ops::ControlFlow;

pub mod cisc;
mod sys;

use serde::de::DeserializeOwned;

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
        // Read into the vector's spare capacity: zeroing it first would cost the task a
        // fuel per byte of its input, work a C task reading into malloc'ed memory never does.
        let mut buf = Vec::with_capacity(size);
        let n = sys::file_read_uninit(self.handle, 0, buf.spare_capacity_mut());
        // SAFETY: the host wrote the first `n` bytes (`n` is at most the capacity).
        unsafe { buf.set_len(n) };
        Ok(buf)
    }

    /// Calls `f` on consecutive chunks of the file, reading `chunk_bytes` at a time: how to
    /// stream a file larger than memory. Reads run ahead of `f` (up to 1 MiB, at least one
    /// chunk and at most 32 in flight), so the device reads the next chunk on all its dies
    /// while the task computes on this one.
    ///
    /// Its buffers are zeroed when made, guest work of a fuel per byte of the first chunks
    /// that [`File::try_for_each_chunk`] does not do. It stays so because the `stats64`
    /// task reads through it, and that task's fuel is `cosmos-plus`'s calibration point.
    pub fn for_each_chunk(&self, chunk_bytes: usize, mut f: impl FnMut(u64, &[u8])) {
        // Not written over `try_for_each_chunk`: the example tasks' compiled code, and so
        // their fuel and every figure reproduced from them, stays as it was.
        let size = self.size();
        let chunk = chunk_bytes.clamp(1, MAX_SUBMIT_BYTES) as u64;
        let chunks = size.div_ceil(chunk);
        // Never allocate (and zero) more than the file holds: small files are the common case.
        let depth = ((READ_AHEAD_BYTES / chunk).clamp(1, MAX_QUEUE_DEPTH as u64)).min(chunks);
        let mut ring: Vec<(Vec<u8>, Option<Pending>)> = (0..depth)
            .map(|_| (vec![0u8; chunk.min(size) as usize], None))
            .collect();
        let mut next = 0u64;
        let slots = ring.len().max(1) as u64;
        for (slot, (buf, pending)) in ring.iter_mut().enumerate() {
            if (slot as u64) < chunks {
                *pending = Some(self.submit_read(slot as u64 * chunk, buf));
                next += 1;
            }
        }
        for i in 0..chunks {
            let (buf, pending) = &mut ring[(i % slots) as usize];
            let Some(p) = pending.take() else { break };
            let n = p.bytes();
            p.wait();
            if n == 0 {
                break;
            }
            f(i * chunk, &buf[..n]);
            if next < chunks {
                *pending = Some(self.submit_read(next * chunk, buf));
                next += 1;
            }
        }
    }

    /// [`File::for_each_chunk`] with a visitor that can stop early (`ControlFlow::Break`:
    /// a grep that found what it wanted) or fail (its error is returned). Reads still in
    /// flight when it stops are waited for, and nothing more is read.
    ///
    /// Unlike `for_each_chunk`, its buffers are not zeroed first: the host writes every
    /// byte a read moves, and zeroing is guest code, a fuel per byte of the first chunks.
    pub fn try_for_each_chunk(
        &self,
        chunk_bytes: usize,
        mut f: impl FnMut(u64, &[u8]) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let size = self.size();
        let chunk = chunk_bytes.clamp(1, MAX_SUBMIT_BYTES) as u64;
        let chunks = size.div_ceil(chunk);
        // Never allocate more than the file holds: small files are the common case.
        let depth = ((READ_AHEAD_BYTES / chunk).clamp(1, MAX_QUEUE_DEPTH as u64)).min(chunks);
        let mut ring: Vec<(Vec<u8>, Option<Pending>)> = (0..depth)
            .map(|_| (Vec::with_capacity(chunk.min(size) as usize), None))
            .collect();
        let mut next = 0u64;
        let slots = ring.len().max(1) as u64;
        for (slot, (buf, pending)) in ring.iter_mut().enumerate() {
            if (slot as u64) < chunks {
                *pending = Some(self.submit_read_uninit(slot as u64 * chunk, buf, chunk as usize));
                next += 1;
            }
        }
        let mut outcome = Ok(());
        for i in 0..chunks {
            let (buf, pending) = &mut ring[(i % slots) as usize];
            let Some(p) = pending.take() else { break };
            let n = p.bytes();
            p.wait();
            if n == 0 {
                break;
            }
            // SAFETY: the read wrote its `n` bytes (at most the capacity) from the start.
            unsafe { buf.set_len(n) };
            match f(i * chunk, &buf[..n]) {
                Ok(ControlFlow::Continue(())) => {}
                Ok(ControlFlow::Break(())) => break,
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
            if next < chunks {
                *pending = Some(self.submit_read_uninit(next * chunk, buf, chunk as usize));
                next += 1;
            }
        }
        // The host fills a buffer when its read is waited for: none may be dropped first.
        for (_, pending) in &mut ring {
            if let Some(p) = pending.take() {
                p.wait();
            }
        }
        outcome
    }

    /// Feeds the whole file to `feed`, in order: in one piece if it fits in `chunk_bytes`,
    /// else streamed through [`File::try_for_each_chunk`]. The way to run a streaming
    /// kernel (`GrepStream`, `KnnStream`, …) over a file: a small file is read whole because
    /// streaming would gain it no overlap and cost it a ring of buffers, guest instructions
    /// its device time would count.
    pub fn scan(&self, chunk_bytes: usize, mut feed: impl FnMut(&[u8])) -> Result<()> {
        if self.size() <= chunk_bytes as u64 {
            feed(&self.read_to_end()?);
            return Ok(());
        }
        self.try_for_each_chunk(chunk_bytes, |_, piece| {
            feed(piece);
            Ok(ControlFlow::Continue(()))
        })
    }

    /// Submits a read of `buf.len()` bytes at `offset` and returns without waiting: the
    /// device works on it (on every die its pages live on) while the task goes on. The bytes
    /// are in `buf` once [`Pending::wait`] returns; [`Pending::bytes`] says how many.
    /// Requests past the device's queue depth (64) wait for an earlier one first.
    pub fn submit_read(&self, offset: u64, buf: &mut [u8]) -> Pending {
        let len = buf.len().min(MAX_SUBMIT_BYTES) as u64;
        let bytes = len.min(self.size().saturating_sub(offset)) as usize;
        Pending {
            token: sys::file_read_submit(self.handle, offset, buf),
            bytes,
        }
    }

    /// [`File::submit_read`] of up to `len` bytes into `buf`'s spare capacity (from its
    /// start: it is cleared), whose bytes need not be zeroed first. The caller sets its
    /// length once the read is waited for.
    fn submit_read_uninit(&self, offset: u64, buf: &mut Vec<u8>, len: usize) -> Pending {
        buf.clear();
        // The capacity may exceed what was asked for; a longer read would overlap the next.
        let len = len.min(buf.capacity());
        let spare = &mut buf.spare_capacity_mut()[..len];
        let len = spare.len().min(MAX_SUBMIT_BYTES) as u64;
        let bytes = len.min(self.size().saturating_sub(offset)) as usize;
        Pending {
            token: sys::file_read_submit_uninit(self.handle, offset, spare),
            bytes,
        }
    }

    /// Submits a write of `data` at `offset` (`None`: at the file's end) and returns without
    /// waiting for the flash programs; `data` may be reused at once. The task ends only
    /// after all its writes are done (before a transaction commits).
    pub fn submit_write(&self, offset: Option<u64>, data: &[u8]) -> Pending {
        let mut token = -1;
        let mut at = offset;
        for piece in data.chunks(MAX_SUBMIT_BYTES) {
            if token >= 0 {
                sys::io_wait(token);
            }
            token = sys::file_write_submit(self.handle, at, piece);
            at = at.map(|o| o + piece.len() as u64);
        }
        Pending {
            token,
            bytes: data.len(),
        }
    }

    /// A write-behind appender: each append is submitted and the task goes on, with at most
    /// `depth` appends in flight (how TxISC's bitmap decompression streams its output).
    pub fn appender(&self, depth: usize) -> Appender {
        Appender {
            file: *self,
            depth: depth.clamp(1, MAX_QUEUE_DEPTH),
            inflight: std::collections::VecDeque::new(),
        }
    }

    /// Writes `data` at `offset` and waits for it.
    pub fn write_at(&self, offset: u64, data: &[u8]) {
        sys::file_write(self.handle, offset, data);
    }

    /// Appends `data` at the file's end and waits for it.
    pub fn append(&self, data: &[u8]) {
        sys::file_append(self.handle, data);
    }
}

/// Bytes [`File::for_each_chunk`] keeps in flight ahead of the task: two 512 KiB chunks
/// (double buffering: one chunk already spans the dies), more when chunks are smaller. The
/// buffers are fresh guest memory in every invocation, which costs real time (an 8 MiB
/// read-ahead made `csd bench tasks`' stats64 6 ms slower) for no gain in virtual time.
const READ_AHEAD_BYTES: u64 = 1 << 20;
/// The most requests the SDK keeps in flight itself (the device takes up to 64).
pub const MAX_QUEUE_DEPTH: usize = 32;
use sys::MAX_SUBMIT_BYTES;

/// A submitted request. Waiting for it charges the task the time until the device
/// completes it, if that is later than now; a task that ends waits for all of them.
#[must_use = "wait for the request, or it is waited for when the task ends"]
#[derive(Debug)]
pub struct Pending {
    token: i64,
    bytes: usize,
}

impl Pending {
    /// Bytes the request moves (a read near the end of a file moves fewer than asked).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn wait(self) {
        if self.token >= 0 {
            sys::io_wait(self.token);
        }
    }
}

/// Waits for every request in flight.
pub fn wait_all() {
    sys::io_wait_all();
}

/// Reads many ranges, keeping up to `queue_depth` of them in flight (at most
/// [`MAX_QUEUE_DEPTH`]), and returns how many bytes each got. How a task reads scattered
/// records, or a file's pages, so the device serves them in parallel across its dies.
pub fn read_many(requests: &mut [(File, u64, &mut [u8])], queue_depth: usize) -> Vec<usize> {
    let depth = queue_depth.clamp(1, MAX_QUEUE_DEPTH);
    let mut inflight: std::collections::VecDeque<Pending> = std::collections::VecDeque::new();
    let mut got = Vec::with_capacity(requests.len());
    for (file, offset, buf) in requests.iter_mut() {
        if inflight.len() == depth {
            if let Some(p) = inflight.pop_front() {
                p.wait();
            }
        }
        let p = file.submit_read(*offset, buf);
        got.push(p.bytes());
        inflight.push_back(p);
    }
    for p in inflight {
        p.wait();
    }
    got
}

/// Write-behind appends to one file; see [`File::appender`]. Dropping it (or
/// [`Appender::finish`]) waits for what is in flight.
pub struct Appender {
    file: File,
    depth: usize,
    inflight: std::collections::VecDeque<Pending>,
}

impl Appender {
    pub fn append(&mut self, data: &[u8]) {
        if self.inflight.len() == self.depth {
            if let Some(p) = self.inflight.pop_front() {
                p.wait();
            }
        }
        self.inflight.push_back(self.file.submit_write(None, data));
    }

    /// Waits for every append in flight.
    pub fn finish(mut self) {
        self.drain();
    }

    fn drain(&mut self) {
        while let Some(p) = self.inflight.pop_front() {
            p.wait();
        }
    }
}

impl Drop for Appender {
    fn drop(&mut self) {
        self.drain();
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

/// Logs a warning: the line is kept as `[warn] …` and the host logs it at warn level (shown
/// without `RUST_LOG`).
#[macro_export]
macro_rules! warn {
    ($($t:tt)*) => { $crate::__log(&format!("[warn] {}", format_args!($($t)*))) };
}

/// Logs an error: kept as `[error] …`, logged by the host at error level.
#[macro_export]
macro_rules! error {
    ($($t:tt)*) => { $crate::__log(&format!("[error] {}", format_args!($($t)*))) };
}

/// Logs a debugging line: kept as `[debug] …`, logged by the host at debug level.
#[macro_export]
macro_rules! debug {
    ($($t:tt)*) => { $crate::__log(&format!("[debug] {}", format_args!($($t)*))) };
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

/// CISC-op stages (`csd_stage_v1`): a stage is an exported function
/// `fn(a_ptr: i32, a_len: i32, b_ptr: i32, b_len: i32) -> i64` that reads one or two slots
/// and returns its output as `ptr << 32 | len` (a negative value is an error). The device
/// copies slots in through [`stage::stage_alloc`] and frees both sides with
/// [`stage::stage_free`]; [`stage::run`] does the unpacking.
///
/// ```no_run
/// #[no_mangle]
/// pub extern "C" fn double(a: i32, al: i32, b: i32, bl: i32) -> i64 {
///     csd_sdk::stage::run(a, al, b, bl, |a, _| Ok(a.iter().map(|x| x.wrapping_mul(2)).collect()))
/// }
/// ```
pub mod stage {
    /// Memory for a slot the device copies in.
    #[no_mangle]
    pub extern "C" fn stage_alloc(len: i32) -> i32 {
        let mut v = Vec::<u8>::with_capacity(len.max(0) as usize);
        let ptr = v.as_mut_ptr();
        std::mem::forget(v);
        ptr as usize as i32
    }

    /// Frees memory from [`stage_alloc`] or a stage's output.
    ///
    /// # Safety
    /// `ptr` and `len` must be what `stage_alloc` or [`run`] handed out.
    #[no_mangle]
    pub unsafe extern "C" fn stage_free(ptr: i32, len: i32) {
        if ptr != 0 {
            drop(Vec::from_raw_parts(
                ptr as usize as *mut u8,
                0,
                len.max(0) as usize,
            ));
        }
    }

    /// Runs a stage body over its input slots and packs its output for the device.
    pub fn run(
        a_ptr: i32,
        a_len: i32,
        b_ptr: i32,
        b_len: i32,
        body: impl FnOnce(&[u8], &[u8]) -> crate::Result<Vec<u8>>,
    ) -> i64 {
        let slice = |p: i32, n: i32| -> &[u8] {
            if n <= 0 {
                &[]
            } else {
                // SAFETY: the device wrote `n` bytes at `p`, which it got from `stage_alloc`.
                unsafe { std::slice::from_raw_parts(p as usize as *const u8, n as usize) }
            }
        };
        match body(slice(a_ptr, a_len), slice(b_ptr, b_len)) {
            Ok(out) => {
                // Capacity = length, so `stage_free(ptr, len)` frees exactly this.
                let mut out = out.into_boxed_slice();
                let (ptr, len) = (out.as_mut_ptr() as usize as i64, out.len() as i64);
                std::mem::forget(out);
                (ptr << 32) | len
            }
            Err(_) => -1,
        }
    }
}
