//! The task ABI, `csd_v1`: the host functions a task imports and how they are checked.
//!
//! Version lives in the import module name (`csd_v1`), not in a custom section: a future
//! `csd_v2` can be linked beside it, and a module built for an unknown version fails with a
//! clear "imports `csd_v2.x`" error. Every pointer/length pair is checked against the task's
//! memory, every file handle against the invocation's registrations and their modes; a bad
//! one stops the task with a [`TaskError`], never the host. The full reference is
//! `sdk/README.md`.
//!
//! Time: between host calls the task computes; each host call first converts the fuel burnt
//! since the previous one into device-CPU time (`compute`), then charges its own I/O on the
//! device's internal path (`read_file`, `write`). A submitted request (`file_read_submit`,
//! `file_write_submit`) is charged only for the part of it the task waits for, so a task's
//! virtual clock is still the sum of its stages while its requests overlap its compute.

use crate::error::TaskError;
use crate::limits::TaskLimits;
use crate::volume::Storage;
use csd_device::invocation::Breakdown;
use csd_device::txn::ExecMode;
use csd_device::FileMode;
use csd_device::{
    Accelerator, Accelerators, DeviceCpu, Extent, FileId, IoPath, TaskId, TxError, VirtualTime,
};
use std::collections::BTreeMap;
use wasmtime::{Caller, Engine, Linker, Memory, ResourceLimiter};

/// The import module name of this ABI version.
pub const MODULE: &str = "csd_v1";

/// Every function `csd_v1` provides.
pub const FUNCTIONS: &[&str] = &[
    "args_len",
    "args_read",
    "file_count",
    "file_size",
    "file_read",
    "file_write",
    "file_append",
    "file_read_submit",
    "file_write_submit",
    "io_wait",
    "io_wait_all",
    "ret_write",
    "log",
    "panic",
    "fail",
    "accel_grep",
    "accel_stats",
];

/// Caps on what a task can make the host hold for it.
const MAX_LOG_LINES: usize = 1000;
const MAX_LOG_LINE_BYTES: usize = 4096;

/// What a host call takes from the task's fuel budget: a fixed cost per call (a transition
/// into the firmware, checks included) and one unit per byte it moves. Fuel bounds what a
/// task computes; this makes it bound the work its host calls cause too, so a loop of calls
/// ends as quickly as a loop of instructions. Host-call fuel is not device-CPU time: the
/// breakdown's `compute` counts only the fuel the task's own code burnt.
pub const HOST_CALL_FUEL: u64 = 10_000;
/// Bytes a host call may move per unit of fuel.
pub const HOST_BYTES_PER_FUEL: u64 = 1;
/// An accelerator streams its input through host memory in chunks of this size, so its
/// host-side footprint does not follow the file's size.
const ACCEL_CHUNK: usize = 1 << 20;
/// Requests a task may keep in flight (`file_read_submit`, `file_write_submit`): the
/// firmware's queue depth for in-storage I/O. A submit past it first waits for the
/// request that completes earliest, as a full submission queue would make it.
pub const MAX_INFLIGHT: usize = 64;

/// A submitted request the task has not waited for yet: when the device completes it and
/// which stage of the breakdown a wait for it is charged to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Inflight {
    pub done: VirtualTime,
    pub write: bool,
}

pub(crate) struct OpenFile {
    pub path: String,
    pub mode: FileMode,
    pub id: FileId,
}

/// Where a task's registered files live during an invocation.
pub(crate) enum Backing {
    /// On the device: reads and writes go through the flash model on the internal path.
    Device(Box<Storage>),
    /// Already read into device DRAM by an NDP dispatcher, which charged the flash reads
    /// itself; the task reads them at memory speed and may not write them.
    Staged(BTreeMap<String, Vec<u8>>),
}

/// Per-invocation state the host functions work on.
pub(crate) struct TaskState {
    pub backing: Backing,
    pub exec: ExecMode,
    /// The transaction this invocation runs as (`ExecMode::Tx` on the device).
    pub tx: Option<TaskId>,
    /// `Internal` in the device; `Host` when the task's code runs on the host CPU instead.
    pub io_path: IoPath,
    pub files: Vec<OpenFile>,
    pub args: Vec<u8>,
    pub ret: Vec<u8>,
    pub logs: Vec<String>,
    pub limits: TaskLimits,
    pub limiter: MemoryCap,
    pub memory: Option<Memory>,
    pub cpu: DeviceCpu,
    pub accelerators: Accelerators,
    pub clock: VirtualTime,
    /// Fuel already turned into compute time.
    pub fuel_charged: u64,
    /// Fuel host calls took (not compute time: see [`HOST_CALL_FUEL`]).
    pub host_fuel: u64,
    pub breakdown: Breakdown,
    pub failure: Option<String>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Requests in flight by token; at most [`MAX_INFLIGHT`].
    pub inflight: BTreeMap<u64, Inflight>,
    pub next_token: u64,
    /// Host-side cost of one read/write call when the task runs on the host (a syscall, the
    /// page-cache copy and its per-page work); `None` in the device.
    pub host_io: Option<HostIo>,
}

/// What a host-only run pays on the host CPU for each file I/O call, on top of the device
/// request: the system call and the copy between the page cache and the user buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostIo {
    pub syscall_ns: u64,
    pub copy_bytes_per_sec: u64,
    pub page_cache_page_ns: u64,
}

impl HostIo {
    pub fn cost_ns(&self, bytes: u64) -> u64 {
        let pages = csd_device::cost::host_pages(0, bytes);
        self.syscall_ns
            .saturating_add(csd_device::transfer_ns(bytes, self.copy_bytes_per_sec))
            .saturating_add(pages.saturating_mul(self.page_cache_page_ns))
    }
}

/// Enforces the per-invocation linear-memory cap and remembers a refused growth, so the trap
/// that follows (Rust aborts when allocation fails) is reported as what it is.
pub(crate) struct MemoryCap {
    pub cap_bytes: u64,
    pub refused: Option<u64>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.cap_bytes {
            self.refused = Some(desired as u64);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }

    // One instance with one memory and one table, as the pooling allocator's slots hold: the
    // on-demand allocator (`Allocation::OnDemand`) enforces only what the limiter says.
    fn instances(&self) -> usize {
        1
    }

    fn memories(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        1
    }
}

type Ctx<'a> = Caller<'a, TaskState>;

fn staged<'a>(files: &'a BTreeMap<String, Vec<u8>>, path: &str) -> Result<&'a [u8], TaskError> {
    files
        .get(path)
        .map(Vec::as_slice)
        .ok_or_else(|| crate::volume::VolumeError::NoSuchFile(path.to_string()).into())
}

/// A file's extents as the device's transaction layer takes them.
pub(crate) fn device_extents(layout: &crate::volume::FileLayout) -> Vec<Extent> {
    layout
        .extents
        .iter()
        .map(|e| Extent {
            first: e.first,
            pages: e.pages,
        })
        .collect()
}

/// A device error inside a transaction is a device error; anything else (a conflict) is the
/// transaction's.
pub(crate) fn tx_error(e: TxError) -> TaskError {
    match e {
        TxError::Device(d) => TaskError::Device(d),
        e => TaskError::Tx(e),
    }
}

fn fail(e: TaskError) -> wasmtime::Error {
    wasmtime::Error::new(e)
}

impl TaskState {
    fn file(&self, call: &'static str, handle: i32) -> Result<&OpenFile, TaskError> {
        usize::try_from(handle)
            .ok()
            .and_then(|h| self.files.get(h))
            .ok_or(TaskError::BadHandle {
                call,
                handle,
                registered: self.files.len(),
            })
    }

    fn readable(&self, call: &'static str, handle: i32) -> Result<&OpenFile, TaskError> {
        let f = self.file(call, handle)?;
        if !f.mode.readable() {
            return Err(TaskError::ModeDenied {
                call,
                handle,
                path: f.path.clone(),
                mode: f.mode.describe(),
                refused: "reading",
            });
        }
        Ok(f)
    }

    fn writable(&self, call: &'static str, handle: i32) -> Result<&OpenFile, TaskError> {
        let f = self.file(call, handle)?;
        if !f.mode.writable() {
            return Err(TaskError::ModeDenied {
                call,
                handle,
                path: f.path.clone(),
                mode: f.mode.describe(),
                refused: "writing",
            });
        }
        Ok(f)
    }

    /// Reads `dst.len()` bytes of `path` at `offset` through the device as one request (its
    /// extents' pages are read in parallel) and waits for it.
    fn read_file(&mut self, path: &str, offset: u64, dst: &mut [u8]) -> Result<(), TaskError> {
        let token = self.submit_read(path, offset, dst)?;
        self.wait(token)
    }

    /// Submits a read of `dst.len()` bytes of `path` at `offset` without waiting for it: the
    /// bytes are in `dst` at once (the model has no use for late data), the virtual time it
    /// takes is paid when the task waits for the returned token. A transaction reads its own
    /// snapshot; a BlockISC task reads raw device bytes at `offset`.
    fn submit_read(&mut self, path: &str, offset: u64, dst: &mut [u8]) -> Result<u64, TaskError> {
        self.queue_slot();
        let len = dst.len() as u64;
        let start = self.host_call(len);
        let done = if let Backing::Staged(files) = &self.backing {
            let data = staged(files, path)?;
            let from = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(data.len());
            let n = dst.len().min(data.len() - from);
            dst[..n].copy_from_slice(&data[from..from + n]);
            dst[n..].fill(0);
            start
        } else {
            self.book_read(path, offset, len, Some(dst), start)?
        };
        self.bytes_read += len;
        Ok(self.track(done, false))
    }

    /// On the host, a read or write call costs the calling thread a system call and a copy
    /// between the page cache and its buffer (`others`); in the device, nothing. Returns
    /// when the device request can start.
    fn host_call(&mut self, bytes: u64) -> VirtualTime {
        if let Some(h) = self.host_io {
            let cost = h.cost_ns(bytes);
            self.breakdown.others_ns += cost;
            self.clock = self.clock.after(cost);
        }
        self.clock
    }

    /// When a new request can start: now, unless the queue is full; then the submitter
    /// first waits for the request that completes earliest.
    fn queue_slot(&mut self) {
        while self.inflight.len() >= MAX_INFLIGHT {
            let earliest = self
                .inflight
                .iter()
                .min_by_key(|(_, r)| r.done)
                .map(|(&t, _)| t);
            match earliest.and_then(|t| self.inflight.remove(&t)) {
                Some(r) => self.settle(r),
                None => break,
            }
        }
    }

    fn track(&mut self, done: VirtualTime, write: bool) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        self.inflight.insert(token, Inflight { done, write });
        token
    }

    /// Waits for request `token`: the clock moves to its completion if that is later, and
    /// the stall is charged to `read_file` or `write`.
    pub(crate) fn wait(&mut self, token: u64) -> Result<(), TaskError> {
        let r = self
            .inflight
            .remove(&token)
            .ok_or_else(|| TaskError::BadArgument {
                call: "io_wait",
                reason: format!("no request {token} in flight ({} are)", self.inflight.len()),
            })?;
        self.settle(r);
        Ok(())
    }

    /// Charges the wait for a request taken out of the queue: the clock moves to its
    /// completion if that is later, the stall going to `read_file` or `write`.
    fn settle(&mut self, r: Inflight) {
        let stall = r.done.since(self.clock.min(r.done));
        if r.write {
            self.breakdown.write_ns += stall;
        } else {
            self.breakdown.read_file_ns += stall;
        }
        self.clock = self.clock.max(r.done);
    }

    /// Waits for every request in flight, earliest first (the task ends, or asks to).
    pub(crate) fn wait_all(&mut self) {
        let mut order: Vec<Inflight> = std::mem::take(&mut self.inflight).into_values().collect();
        order.sort_unstable_by_key(|r| r.done);
        for r in order {
            self.settle(r);
        }
    }

    /// Books a read of `len` bytes of `path` at `offset` on the device as one request (its
    /// extents' pages are read in parallel) starting at `start`, fills `dst` if given, and
    /// returns when it completes. The task's clock does not move.
    fn book_read(
        &mut self,
        path: &str,
        offset: u64,
        len: u64,
        dst: Option<&mut [u8]>,
        start: VirtualTime,
    ) -> Result<VirtualTime, TaskError> {
        let Backing::Device(storage) = &mut self.backing else {
            unreachable!("staged files are read from memory");
        };
        let keep = storage.device.ftl().keeps_payloads();
        let mut dst = dst;
        let out = if keep { dst.as_deref_mut() } else { None };
        let c = match (self.exec, self.tx) {
            (ExecMode::Block, _) => {
                storage
                    .device
                    .read_ranges(self.io_path, start, &[(offset, len)], out)?
            }
            (_, Some(task)) => {
                let id = storage.volume.layout(path)?.id;
                storage
                    .device
                    .tx_read(task, FileId(id), start, offset, len, out)
                    .map_err(tx_error)?
            }
            (_, None) => {
                let layout = storage.volume.layout(path)?;
                let ranges = storage.volume.map(layout, offset, len);
                storage
                    .device
                    .read_ranges(self.io_path, start, &ranges, out)?
            }
        };
        if !keep {
            if let Some(d) = dst {
                d.fill(0);
            }
        }
        Ok(c.done)
    }

    /// Reads all of `path` for an accelerator: the flash reads are booked as one request, as
    /// [`TaskState::read_file`] would, then the bytes are handed to `each` in chunks of
    /// `ACCEL_CHUNK` with their file offset, so the host never holds the whole file.
    fn stream_file(
        &mut self,
        path: &str,
        mut each: impl FnMut(u64, &[u8]),
    ) -> Result<(), TaskError> {
        let size = self.file_size(path)?;
        if let Backing::Staged(files) = &self.backing {
            let data = staged(files, path)?;
            for (i, chunk) in data.chunks(ACCEL_CHUNK).enumerate() {
                each((i * ACCEL_CHUNK) as u64, chunk);
            }
            self.bytes_read += size;
            return Ok(());
        }
        let start = self.clock;
        let done = self.book_read(path, 0, size, None, start)?;
        self.breakdown.read_file_ns += done.since(start);
        self.clock = done;
        self.bytes_read += size;
        let Backing::Device(storage) = &self.backing else {
            unreachable!("staged files returned above");
        };
        let keep = storage.device.ftl().keeps_payloads();
        let mut buf = vec![0u8; (ACCEL_CHUNK as u64).min(size) as usize];
        let mut offset = 0u64;
        while offset < size {
            let n = (size - offset).min(ACCEL_CHUNK as u64) as usize;
            let chunk = &mut buf[..n];
            if keep {
                match (self.exec, self.tx) {
                    (ExecMode::Block, _) => {
                        storage.device.peek_ranges(&[(offset, n as u64)], chunk)?
                    }
                    (_, Some(task)) => {
                        let id = storage.volume.layout(path)?.id;
                        storage
                            .device
                            .tx_peek(task, FileId(id), offset, chunk)
                            .map_err(tx_error)?
                    }
                    (_, None) => {
                        let layout = storage.volume.layout(path)?;
                        let ranges = storage.volume.map(layout, offset, n as u64);
                        storage.device.peek_ranges(&ranges, chunk)?
                    }
                }
            }
            each(offset, chunk);
            offset += n as u64;
        }
        Ok(())
    }

    /// Writes `src` to `path` at `offset` and waits for the flash programs.
    fn write_file(&mut self, path: &str, offset: u64, src: &[u8]) -> Result<(), TaskError> {
        let token = self.submit_write(path, offset, src)?;
        self.wait(token)
    }

    /// Submits a write of `src` to `path` at `offset` without waiting for its programs: the
    /// file holds the bytes at once, the task pays for the flash when it waits (at the
    /// latest when it ends, before its transaction commits).
    fn submit_write(&mut self, path: &str, offset: u64, src: &[u8]) -> Result<u64, TaskError> {
        self.queue_slot();
        let len = src.len() as u64;
        let start = self.host_call(len);
        let Backing::Device(storage) = &mut self.backing else {
            return Err(TaskError::BadArgument {
                call: "file_write",
                reason: format!("'{path}' was staged for an NDP request and is read-only"),
            });
        };
        let keep = storage.device.ftl().keeps_payloads();
        let data = if keep { Some(src) } else { None };
        let c = if self.exec == ExecMode::Block {
            storage
                .device
                .write_ranges(self.io_path, start, &[(offset, len)], data)?
        } else {
            let pages_before = storage.volume.layout(path)?.allocated_pages();
            let end = offset.checked_add(len).ok_or(TaskError::BadArgument {
                call: "file_write",
                reason: format!("offset {offset} + {len} bytes overflows"),
            })?;
            storage.volume.ensure_size(path, end)?;
            let layout = storage.volume.layout(path)?;
            match self.tx {
                Some(task) => {
                    let id = FileId(layout.id);
                    if layout.allocated_pages() > pages_before {
                        // The file grew: the snapshot covers the new pages too.
                        let extents = device_extents(layout);
                        storage
                            .device
                            .tx_register(task, id, &extents)
                            .map_err(tx_error)?;
                    }
                    storage
                        .device
                        .tx_write(task, id, start, offset, len, data)
                        .map_err(tx_error)?
                }
                None => {
                    let ranges = storage.volume.map(layout, offset, len);
                    storage
                        .device
                        .write_ranges(self.io_path, start, &ranges, data)?
                }
            }
        };
        self.bytes_written += len;
        Ok(self.track(c.done, true))
    }

    fn file_size(&self, path: &str) -> Result<u64, TaskError> {
        match &self.backing {
            Backing::Device(storage) if self.exec == ExecMode::Block => {
                Ok(storage.device.capacity_bytes())
            }
            Backing::Device(storage) => Ok(storage.volume.layout(path)?.size_bytes),
            Backing::Staged(files) => Ok(staged(files, path)?.len() as u64),
        }
    }

    fn accelerate(&mut self, accel: &Accelerator, bytes: u64) {
        let ns = accel.cost_ns(bytes);
        self.breakdown.compute_ns += ns;
        self.clock = self.clock.after(ns);
    }
}

impl TaskState {
    /// Turns the fuel burnt since the last charge into device-CPU time. `remaining` is the
    /// store's fuel now; rounding is applied to the running total, so charging in many small
    /// steps costs the same as charging once.
    pub(crate) fn charge_fuel(&mut self, remaining: u64) {
        let used = self
            .limits
            .fuel
            .saturating_sub(remaining)
            .saturating_sub(self.host_fuel);
        let delta = self.cpu.compute_ns(used) - self.cpu.compute_ns(self.fuel_charged);
        self.fuel_charged = used;
        self.breakdown.compute_ns += delta;
        self.clock = self.clock.after(delta);
    }
}

/// Charges the compute before a host call does its own work.
fn charge_compute(c: &mut Ctx<'_>) -> wasmtime::Result<()> {
    let remaining = c.get_fuel()?;
    c.data_mut().charge_fuel(remaining);
    Ok(())
}

/// Takes a host call's cost for moving `bytes` from the task's fuel, before the call does
/// its work: a call the budget cannot pay for stops the task with `FuelExhausted`, having
/// done nothing.
fn charge_host(c: &mut Ctx<'_>, call: &'static str, bytes: u64) -> wasmtime::Result<()> {
    let cost = HOST_CALL_FUEL.saturating_add(bytes / HOST_BYTES_PER_FUEL);
    let remaining = c.get_fuel()?;
    let Some(left) = remaining.checked_sub(cost) else {
        return Err(fail(TaskError::HostCallBudget {
            call,
            bytes,
            cost,
            left: remaining,
            budget: c.data().limits.fuel,
        }));
    };
    c.set_fuel(left)?;
    c.data_mut().host_fuel += cost;
    Ok(())
}

/// Checks a guest `(ptr, len)` against memory of `mem_len` bytes.
fn guest_range(
    call: &'static str,
    ptr: i32,
    len: i32,
    mem_len: usize,
) -> Result<std::ops::Range<usize>, TaskError> {
    let (p, l) = (ptr as u32, len as u32);
    let end = u64::from(p) + u64::from(l);
    if len < 0 || end > mem_len as u64 {
        return Err(TaskError::BadPointer {
            call,
            ptr: p,
            len: l,
            memory_bytes: mem_len as u64,
        });
    }
    Ok(p as usize..end as usize)
}

fn offset_arg(call: &'static str, off: i64) -> Result<u64, TaskError> {
    u64::try_from(off).map_err(|_| TaskError::BadArgument {
        call,
        reason: format!("negative file offset {off}"),
    })
}

/// The task's memory. Looked up from the instance when the call comes from the module's
/// `start` function, which runs before the runtime has recorded it.
fn memory(c: &mut Ctx<'_>) -> wasmtime::Result<Memory> {
    if let Some(m) = c.data().memory {
        return Ok(m);
    }
    c.get_export("memory")
        .and_then(|e| e.into_memory())
        .ok_or_else(|| {
            fail(TaskError::MissingExport {
                what: "a linear memory named `memory`",
            })
        })
}

/// A UTF-8 (lossy) string from guest memory, cut to `MAX_LOG_LINE_BYTES` before copying.
fn guest_string(
    c: &mut Ctx<'_>,
    call: &'static str,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<String> {
    let mem = memory(c)?;
    let data = mem.data(&*c);
    let r = guest_range(call, ptr, len, data.len()).map_err(fail)?;
    let cut = r.start..r.end.min(r.start + MAX_LOG_LINE_BYTES);
    let mut s = String::from_utf8_lossy(&data[cut]).into_owned();
    s.truncate(s.floor_char_boundary(MAX_LOG_LINE_BYTES));
    Ok(s)
}

/// The `csd_v1` ABI: every host function a task may import, in groups.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<TaskState>> {
    let mut l = Linker::new(engine);
    link_inputs(&mut l)?;
    link_blocking_io(&mut l)?;
    link_queued_io(&mut l)?;
    link_outputs(&mut l)?;
    link_grep_accelerator(&mut l)?;
    link_stats_accelerator(&mut l)?;
    Ok(l)
}

/// The task's arguments and the files registered for it.
fn link_inputs(l: &mut Linker<TaskState>) -> wasmtime::Result<()> {
    l.func_wrap(
        MODULE,
        "args_len",
        |mut c: Ctx<'_>| -> wasmtime::Result<i32> {
            charge_host(&mut c, "args_len", 0)?;
            Ok(c.data().args.len() as i32)
        },
    )?;
    l.func_wrap(
        MODULE,
        "args_read",
        |mut c: Ctx<'_>, ptr: i32, len: i32| -> wasmtime::Result<i32> {
            let moved = (len.max(0) as u64).min(c.data().args.len() as u64);
            charge_host(&mut c, "args_read", moved)?;
            let mem = memory(&mut c)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let r = guest_range("args_read", ptr, len, data.len()).map_err(fail)?;
            let n = r.len().min(s.args.len());
            data[r.start..r.start + n].copy_from_slice(&s.args[..n]);
            Ok(n as i32)
        },
    )?;
    l.func_wrap(
        MODULE,
        "file_count",
        |mut c: Ctx<'_>| -> wasmtime::Result<i32> {
            charge_host(&mut c, "file_count", 0)?;
            Ok(c.data().files.len() as i32)
        },
    )?;
    l.func_wrap(
        MODULE,
        "file_size",
        |mut c: Ctx<'_>, h: i32| -> wasmtime::Result<i64> {
            charge_host(&mut c, "file_size", 0)?;
            let s = c.data();
            let path = &s.file("file_size", h).map_err(fail)?.path;
            Ok(s.file_size(path).map_err(fail)? as i64)
        },
    )?;
    Ok(())
}

/// Reads and writes that return when the device has served them.
fn link_blocking_io(l: &mut Linker<TaskState>) -> wasmtime::Result<()> {
    l.func_wrap(
        MODULE,
        "file_read",
        |mut c: Ctx<'_>, h: i32, off: i64, ptr: i32, len: i32| -> wasmtime::Result<i32> {
            charge_compute(&mut c)?;
            let mem = memory(&mut c)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let r = guest_range("file_read", ptr, len, data.len()).map_err(fail)?;
            let off = offset_arg("file_read", off).map_err(fail)?;
            let path = s.readable("file_read", h).map_err(fail)?.path.clone();
            let size = s.file_size(&path).map_err(fail)?;
            let n = (r.len() as u64).min(size.saturating_sub(off)) as usize;
            charge_host(&mut c, "file_read", n as u64)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            s.read_file(&path, off, &mut data[r.start..r.start + n])
                .map_err(fail)?;
            Ok(n as i32)
        },
    )?;
    l.func_wrap(
        MODULE,
        "file_write",
        |mut c: Ctx<'_>, h: i32, off: i64, ptr: i32, len: i32| -> wasmtime::Result<i32> {
            charge_compute(&mut c)?;
            let mem = memory(&mut c)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let r = guest_range("file_write", ptr, len, data.len()).map_err(fail)?;
            let off = offset_arg("file_write", off).map_err(fail)?;
            let path = s.writable("file_write", h).map_err(fail)?.path.clone();
            charge_host(&mut c, "file_write", r.len() as u64)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            s.write_file(&path, off, &data[r.clone()]).map_err(fail)?;
            Ok(r.len() as i32)
        },
    )?;
    l.func_wrap(
        MODULE,
        "file_append",
        |mut c: Ctx<'_>, h: i32, ptr: i32, len: i32| -> wasmtime::Result<i32> {
            charge_compute(&mut c)?;
            let mem = memory(&mut c)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let r = guest_range("file_append", ptr, len, data.len()).map_err(fail)?;
            let path = s.writable("file_append", h).map_err(fail)?.path.clone();
            charge_host(&mut c, "file_append", r.len() as u64)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let end = s.file_size(&path).map_err(fail)?;
            s.write_file(&path, end, &data[r.clone()]).map_err(fail)?;
            Ok(r.len() as i32)
        },
    )?;
    Ok(())
}

/// Requests kept in flight: submit now, pay the wait later (up to [`MAX_INFLIGHT`]).
fn link_queued_io(l: &mut Linker<TaskState>) -> wasmtime::Result<()> {
    l.func_wrap(
        MODULE,
        "file_read_submit",
        |mut c: Ctx<'_>, h: i32, off: i64, ptr: i32, len: i32| -> wasmtime::Result<i64> {
            charge_compute(&mut c)?;
            let mem = memory(&mut c)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let r = guest_range("file_read_submit", ptr, len, data.len()).map_err(fail)?;
            let off = offset_arg("file_read_submit", off).map_err(fail)?;
            let path = s
                .readable("file_read_submit", h)
                .map_err(fail)?
                .path
                .clone();
            let size = s.file_size(&path).map_err(fail)?;
            let n = (r.len() as u64).min(size.saturating_sub(off)) as usize;
            charge_host(&mut c, "file_read_submit", n as u64)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let token = s
                .submit_read(&path, off, &mut data[r.start..r.start + n])
                .map_err(fail)?;
            // The guest learns how many bytes it got from the size it asked for and the file's.
            Ok(token as i64)
        },
    )?;
    l.func_wrap(
        MODULE,
        "file_write_submit",
        |mut c: Ctx<'_>, h: i32, off: i64, ptr: i32, len: i32| -> wasmtime::Result<i64> {
            charge_compute(&mut c)?;
            let mem = memory(&mut c)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let r = guest_range("file_write_submit", ptr, len, data.len()).map_err(fail)?;
            // Negative: append at the file's end.
            let path = s
                .writable("file_write_submit", h)
                .map_err(fail)?
                .path
                .clone();
            let off = if off < 0 {
                s.file_size(&path).map_err(fail)?
            } else {
                off as u64
            };
            charge_host(&mut c, "file_write_submit", r.len() as u64)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let token = s.submit_write(&path, off, &data[r]).map_err(fail)?;
            Ok(token as i64)
        },
    )?;
    l.func_wrap(
        MODULE,
        "io_wait",
        |mut c: Ctx<'_>, token: i64| -> wasmtime::Result<()> {
            charge_compute(&mut c)?;
            charge_host(&mut c, "io_wait", 0)?;
            let token = u64::try_from(token).map_err(|_| {
                fail(TaskError::BadArgument {
                    call: "io_wait",
                    reason: format!("negative request token {token}"),
                })
            })?;
            c.data_mut().wait(token).map_err(fail)
        },
    )?;
    l.func_wrap(
        MODULE,
        "io_wait_all",
        |mut c: Ctx<'_>| -> wasmtime::Result<()> {
            charge_compute(&mut c)?;
            charge_host(&mut c, "io_wait_all", 0)?;
            c.data_mut().wait_all();
            Ok(())
        },
    )?;
    Ok(())
}

/// What the task hands back: its result, its log lines, and how it failed.
fn link_outputs(l: &mut Linker<TaskState>) -> wasmtime::Result<()> {
    l.func_wrap(
        MODULE,
        "ret_write",
        |mut c: Ctx<'_>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            charge_host(&mut c, "ret_write", len.max(0) as u64)?;
            let mem = memory(&mut c)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let r = guest_range("ret_write", ptr, len, data.len()).map_err(fail)?;
            if (s.ret.len() + r.len()) as u64 > s.limits.max_return_bytes {
                return Err(fail(TaskError::ReturnTooLarge {
                    cap: s.limits.max_return_bytes,
                }));
            }
            s.ret.extend_from_slice(&data[r]);
            Ok(())
        },
    )?;
    l.func_wrap(
        MODULE,
        "log",
        |mut c: Ctx<'_>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            let kept = c.data().logs.len() < MAX_LOG_LINES;
            charge_host(&mut c, "log", if kept { len.max(0) as u64 } else { 0 })?;
            if !kept {
                // Past the cap a line is dropped unread: the host copies nothing.
                return Ok(());
            }
            let line = guest_string(&mut c, "log", ptr, len)?;
            // The SDK's `warn!`, `error!` and `debug!` tag their lines; plain `log!` is info.
            if line.starts_with("[error] ") {
                tracing::error!(target: "csd_task", "{line}");
            } else if line.starts_with("[warn] ") {
                tracing::warn!(target: "csd_task", "{line}");
            } else if line.starts_with("[debug] ") {
                tracing::debug!(target: "csd_task", "{line}");
            } else {
                tracing::info!(target: "csd_task", "{line}");
            }
            c.data_mut().logs.push(line);
            Ok(())
        },
    )?;
    l.func_wrap(
        MODULE,
        "panic",
        |mut c: Ctx<'_>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            charge_host(&mut c, "panic", 0)?;
            let msg = guest_string(&mut c, "panic", ptr, len)?;
            Err(fail(TaskError::Panicked(msg)))
        },
    )?;
    l.func_wrap(
        MODULE,
        "fail",
        |mut c: Ctx<'_>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            charge_host(&mut c, "fail", 0)?;
            let msg = guest_string(&mut c, "fail", ptr, len)?;
            c.data_mut().failure = Some(msg);
            Ok(())
        },
    )?;
    Ok(())
}

/// The grep accelerator, fed from the device's own reads (LightFS's Grep-ACC).
fn link_grep_accelerator(l: &mut Linker<TaskState>) -> wasmtime::Result<()> {
    l.func_wrap(
        MODULE,
        "accel_grep",
        |mut c: Ctx<'_>,
         h: i32,
         pat_ptr: i32,
         pat_len: i32,
         out_ptr: i32,
         out_cap: i32|
         -> wasmtime::Result<i64> {
            charge_compute(&mut c)?;
            let mem = memory(&mut c)?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let pat = guest_range("accel_grep", pat_ptr, pat_len, data.len()).map_err(fail)?;
            let out_bytes = out_cap.checked_mul(8).unwrap_or(-1);
            let out = guest_range("accel_grep", out_ptr, out_bytes, data.len()).map_err(fail)?;
            let accel = s
                .accelerators
                .grep
                .clone()
                .ok_or(fail(TaskError::NoAccelerator("grep")))?;
            if pat.is_empty() {
                return Err(fail(TaskError::BadArgument {
                    call: "accel_grep",
                    reason: "empty pattern".into(),
                }));
            }
            let path = s.readable("accel_grep", h).map_err(fail)?.path.clone();
            let size = s.file_size(&path).map_err(fail)?;
            charge_host(&mut c, "accel_grep", size.saturating_add(pat.len() as u64))?;
            let (data, s) = mem.data_and_store_mut(&mut c);
            let pattern = data[pat].to_vec();
            let finder = memchr::memmem::Finder::new(&pattern);
            let slots = out.len() / 8;
            let mut count = 0i64;
            // A match may straddle two chunks: the last `pattern.len() - 1` bytes of one are
            // searched again with the next (too short to hold a whole match on their own).
            let mut window: Vec<u8> = Vec::new();
            let mut window_at = 0u64;
            s.stream_file(&path, |offset, chunk| {
                let keep = window.len().min(pattern.len() - 1);
                window.drain(..window.len() - keep);
                window_at = offset - keep as u64;
                window.extend_from_slice(chunk);
                for at in finder.find_iter(&window) {
                    if let Ok(i) = usize::try_from(count) {
                        if i < slots {
                            let o = out.start + i * 8;
                            data[o..o + 8].copy_from_slice(&(window_at + at as u64).to_le_bytes());
                        }
                    }
                    count += 1;
                }
            })
            .map_err(fail)?;
            s.accelerate(&accel, size);
            Ok(count)
        },
    )?;
    Ok(())
}

/// The statistics accelerator: the sum of a file's words, fed from the device's own reads.
fn link_stats_accelerator(l: &mut Linker<TaskState>) -> wasmtime::Result<()> {
    l.func_wrap(
        MODULE,
        "accel_stats",
        |mut c: Ctx<'_>, h: i32, width_bits: i32| -> wasmtime::Result<i64> {
            charge_compute(&mut c)?;
            let s = c.data_mut();
            let accel = s
                .accelerators
                .stats
                .clone()
                .ok_or(fail(TaskError::NoAccelerator("stats")))?;
            let width = match width_bits {
                32 => 4,
                64 => 8,
                w => {
                    return Err(fail(TaskError::BadArgument {
                        call: "accel_stats",
                        reason: format!("width {w} is not 32 or 64"),
                    }))
                }
            };
            let path = s.readable("accel_stats", h).map_err(fail)?.path.clone();
            let size = s.file_size(&path).map_err(fail)?;
            charge_host(&mut c, "accel_stats", size)?;
            let s = c.data_mut();
            let mut sum = 0u64;
            // Chunks are a multiple of 8 bytes, so words never straddle two; a trailing
            // partial word is ignored, as the hardware does.
            s.stream_file(&path, |_, chunk| {
                sum = chunk.chunks_exact(width).fold(sum, |a, w| {
                    let mut word = [0u8; 8];
                    word[..width].copy_from_slice(w);
                    a.wrapping_add(u64::from_le_bytes(word))
                });
            })
            .map_err(fail)?;
            s.accelerate(&accel, size);
            Ok(sum as i64)
        },
    )?;
    Ok(())
}
