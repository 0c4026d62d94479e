//! Running a task: registration of files (TxISC Listing 1's shape), limits, and the latency
//! breakdown of one invocation.

use crate::abi::{device_extents, tx_error, Backing, HostIo, MemoryCap, OpenFile, TaskState};
use crate::engine::{Task, TaskEngine};
use crate::error::TaskError;
pub use crate::limits::{ConflictPolicy, TaskLimits};
pub use crate::volume::Storage;
use crate::volume::Volume;
pub use csd_device::invocation::{Breakdown, TaskReport};
pub use csd_device::txn::ExecMode;
use csd_device::{
    Accelerators, DataMode, Device, DeviceCpu, FileId, FileMode, IoPath, LinkDirection, Lpn,
    Profile, TxError, VirtualTime,
};
use std::sync::Arc;
use wasmtime::{Extern, Store, Trap};

/// Largest file [`Csd::export`] copies into memory.
pub const EXPORT_IN_MEMORY_MAX: u64 = 1 << 30;
/// Bytes [`Csd::export_to`] reads per step.
const EXPORT_CHUNK: u64 = 1 << 20;

/// An offload request being put together: files with their modes, arguments, limits.
///
/// ```no_run
/// # use csd_runtime::{IscContext, FileMode};
/// let ctx = IscContext::new()
///     .file("/logs/app.log", FileMode::Read)
///     .file("/out/matches", FileMode::Write)
///     .args(br#"{"pattern":"ERROR"}"#.to_vec());
/// ```
#[derive(Clone, Debug, Default)]
pub struct IscContext {
    files: Vec<(String, FileMode)>,
    args: Vec<u8>,
    limits: TaskLimits,
    exec: ExecMode,
    on_conflict: ConflictPolicy,
    on_host: bool,
}

impl IscContext {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a file; the task sees it as handle `n` for the `n`-th registration.
    pub fn file(mut self, path: impl Into<String>, mode: FileMode) -> Self {
        self.files.push((path.into(), mode));
        self
    }

    pub fn args(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.args = bytes.into();
        self
    }

    pub fn limits(mut self, limits: TaskLimits) -> Self {
        self.limits = limits;
        self
    }

    /// TxISC (the default), FileISC or BlockISC.
    pub fn exec(mut self, exec: ExecMode) -> Self {
        self.exec = exec;
        self
    }

    pub fn on_conflict(mut self, policy: ConflictPolicy) -> Self {
        self.on_conflict = policy;
        self
    }

    /// The host-only baseline: the same task code runs on the host CPU (the profile's
    /// `host.cpu_ns_per_fuel`) and its file I/O crosses NVMe and PCIe; no offload command,
    /// no transaction.
    pub fn on_host(mut self) -> Self {
        self.on_host = true;
        self.exec = ExecMode::File;
        self
    }
}

/// A computational storage drive: the simulated device, its files, and a task engine.
pub struct Csd {
    /// The device and its files. While a task runs, its wasmtime store owns them (a store's
    /// data must be 'static, so it cannot borrow them); `run` moves them in and back out
    /// with `replace_with`, so no placeholder ever stands in their place. Boxed, so that
    /// move is a pointer's, not the whole device model's (it was a tenth of an empty
    /// task's invocation).
    storage: Box<Storage>,
    engine: Arc<TaskEngine>,
    profile: Profile,
    clock: VirtualTime,
}

impl Csd {
    pub fn new(
        profile: &Profile,
        mode: DataMode,
        engine: Arc<TaskEngine>,
    ) -> Result<Csd, TaskError> {
        let device = Device::new(profile, mode)?;
        let volume = Volume::new(device.page_size(), device.logical_pages());
        Ok(Csd {
            storage: Box::new(Storage { device, volume }),
            engine,
            profile: profile.clone(),
            clock: VirtualTime::ZERO,
        })
    }

    /// A drive over storage another component owns — a device and the files it lends — at
    /// virtual time `clock`. `into_storage` hands both back.
    pub fn lend(
        profile: &Profile,
        storage: Storage,
        engine: Arc<TaskEngine>,
        clock: VirtualTime,
    ) -> Csd {
        Csd {
            storage: Box::new(storage),
            engine,
            profile: profile.clone(),
            clock,
        }
    }

    /// The device and files back, after the last run.
    pub fn into_storage(self) -> Storage {
        *self.storage
    }

    fn storage(&mut self) -> &mut Storage {
        &mut self.storage
    }

    pub fn device(&self) -> &Device {
        &self.storage.device
    }

    pub fn volume(&self) -> &Volume {
        &self.storage.volume
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    pub fn engine(&self) -> &Arc<TaskEngine> {
        &self.engine
    }

    /// The virtual time after the last operation.
    pub fn clock(&self) -> VirtualTime {
        self.clock
    }

    /// Writes a host file into the device at `path` (creating or overwriting it), through the
    /// host path: NVMe commands and PCIe DMA.
    pub fn import(&mut self, path: &str, data: &[u8]) -> Result<(), TaskError> {
        let at = self.clock;
        let st = self.storage();
        st.volume.create(path)?;
        st.volume.ensure_size(path, data.len() as u64)?;
        let ranges = st.volume.map(st.volume.layout(path)?, 0, data.len() as u64);
        let c = st
            .device
            .write_ranges(IoPath::Host, at, &ranges, Some(data))?;
        // Imported data stands for data written long before the run: on the flash, not in
        // the firmware's data buffer, where a host-only run would read it from DRAM and an
        // in-storage one (whose reads bypass the buffer) would not.
        st.device.settle_data_buffer();
        self.clock = c.done;
        Ok(())
    }

    /// Reads a whole device file back to the host. For files of any size, prefer
    /// [`Csd::export_to`], which streams and keeps holes as holes.
    pub fn export(&mut self, path: &str) -> Result<Vec<u8>, TaskError> {
        let size = self.volume().layout(path)?.size_bytes;
        if size > EXPORT_IN_MEMORY_MAX {
            return Err(TaskError::BadArgument {
                call: "export",
                reason: format!(
                    "'{path}' holds {size} bytes, over the {EXPORT_IN_MEMORY_MAX}-byte limit of an in-memory export; stream it with export_to"
                ),
            });
        }
        let mut out = vec![0u8; size as usize];
        self.read_at(path, 0, &mut out)?;
        Ok(out)
    }

    /// Writes a device file to `out` (a host file), streaming in bounded chunks. Ranges no
    /// write ever reached (unmapped pages: a task wrote far past the end) are skipped, so the
    /// host file is sparse there and they cost neither time nor disk. Returns the file size.
    pub fn export_to(&mut self, path: &str, out: &std::fs::File) -> Result<u64, TaskError> {
        use std::os::unix::fs::FileExt;
        let layout = self.volume().layout(path)?.clone();
        let size = layout.size_bytes;
        let io = |e: std::io::Error| TaskError::BadArgument {
            call: "export",
            reason: format!("writing '{path}' to the host: {e}"),
        };
        out.set_len(size).map_err(io)?;
        let ps = self.device().page_size();
        let chunk_pages = (EXPORT_CHUNK / ps).max(1);
        let mut buf = vec![0u8; (chunk_pages * ps) as usize];
        let mut file_pos = 0u64;
        for e in &layout.extents {
            let mut done = 0;
            while done < e.pages && file_pos < size {
                let pages = chunk_pages.min(e.pages - done);
                let first = Lpn(e.first.0 + done);
                if self.device().ftl().l2p().any_mapped(first, pages) {
                    let n = (pages * ps).min(size - file_pos) as usize;
                    self.read_at(path, file_pos, &mut buf[..n])?;
                    out.write_all_at(&buf[..n], file_pos).map_err(io)?;
                }
                done += pages;
                file_pos += pages * ps;
            }
        }
        Ok(size)
    }

    /// Reads up to `buf.len()` bytes of a device file at `offset` to the host; returns how
    /// many were read (short at the end of the file).
    pub fn read_at(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> Result<usize, TaskError> {
        let at = self.clock;
        let st = self.storage();
        let layout = st.volume.layout(path)?;
        let n = (buf.len() as u64).min(layout.size_bytes.saturating_sub(offset));
        let ranges = st.volume.map(layout, offset, n);
        let c = st
            .device
            .read_ranges(IoPath::Host, at, &ranges, Some(&mut buf[..n as usize]))?;
        self.clock = c.done;
        Ok(n as usize)
    }

    /// Runs `task` as one offload request: NVMe command, arguments over PCIe, the task on the
    /// device CPU with its file I/O on the internal path, results back over PCIe.
    ///
    /// A task that fails, traps or exceeds a limit returns an error; the device and every
    /// file stay usable. In `ExecMode::Tx` (the default) nothing it wrote is visible, and
    /// files it created or grew are put back; a transaction that loses a conflict is retried
    /// as `ctx`'s [`ConflictPolicy`] says.
    pub fn run(&mut self, task: &Task, ctx: &IscContext) -> Result<TaskReport, TaskError> {
        let attempts = match ctx.on_conflict {
            ConflictPolicy::Abort => 1,
            ConflictPolicy::Retry { attempts } => attempts.max(1),
        };
        let mut attempt = 1;
        loop {
            match self.run_once(task, ctx) {
                Err(TaskError::Tx(TxError::Conflict { .. })) if attempt < attempts => {
                    attempt += 1;
                }
                Ok(mut report) => {
                    report.attempts = attempt;
                    return Ok(report);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn run_once(&mut self, task: &Task, ctx: &IscContext) -> Result<TaskReport, TaskError> {
        let Csd {
            storage,
            engine,
            profile,
            clock,
        } = self;
        let on = Drive { engine, profile };
        // A panic inside (a bug, never a task's doing: traps and limits are errors) aborts
        // the process rather than leave the drive without its storage.
        replace_with::replace_with_or_abort_and_return(storage, |storage| {
            on.run_on(storage, clock, task, ctx)
        })
    }
}

/// Log lines of a failed task shown with its error.
const FAILED_LOG_LINES: usize = 20;

/// What an invocation runs on besides its storage: the engine and the profile.
struct Drive<'a> {
    engine: &'a TaskEngine,
    profile: &'a Profile,
}

impl Drive<'_> {
    /// One attempt of `task` on `storage`, from `clock` (moved to its end); the storage
    /// always comes back, with a failed transaction's changes rolled back.
    // Long: the invocation's steps in order (register, place, run, end the transaction,
    // return the result), each short, with the storage threaded through.
    fn run_on(
        &self,
        mut storage: Box<Storage>,
        clock: &mut VirtualTime,
        task: &Task,
        ctx: &IscContext,
    ) -> (Result<TaskReport, TaskError>, Box<Storage>) {
        let before = snapshot_sizes(&storage.volume, &ctx.files);
        let opened = register(&mut storage, &ctx.files, ctx.exec);
        let (files, tx) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                rollback_volume(&mut storage.volume, &before);
                return (Err(e), storage);
            }
        };
        let started = *clock;
        let mut breakdown = Breakdown::default();
        let (processor, io_path, start_at) =
            match self.placement(&mut storage, ctx, started, &mut breakdown) {
                Ok(p) => p,
                Err(e) => return (Err(e), storage),
            };
        let state = TaskState::new(
            Access {
                backing: Backing::Device(storage),
                exec: ctx.exec,
                tx,
                io_path,
                files,
            },
            processor,
            ctx,
            start_at,
            breakdown,
        );
        let (result, mut state) = invoke(task, state);
        let mut storage =
            match std::mem::replace(&mut state.backing, Backing::Staged(Default::default())) {
                Backing::Device(storage) => storage,
                Backing::Staged(_) => unreachable!("a device-backed invocation keeps its backing"),
            };
        let result = end_transaction(&mut storage, tx, result, &mut state);
        if result.is_err() && tx.is_some() {
            rollback_volume(&mut storage.volume, &before);
        }
        let ret_out = if ctx.on_host {
            csd_device::Completion {
                submitted: state.clock,
                done: state.clock,
                nvme_ns: 0,
                dma_ns: 0,
                flash_ns: 0,
            }
        } else {
            storage
                .device
                .host_transfer(LinkDirection::ToHost, state.clock, state.ret.len() as u64)
        };
        state.breakdown.dma_ns += ret_out.dma_ns;
        *clock = ret_out.done;
        if let Err(e) = result {
            // A failed task's own lines are what explains it: shown at warn level, so
            // without RUST_LOG (the last few of them; a report keeps them all on success).
            let skip = state.logs.len().saturating_sub(FAILED_LOG_LINES);
            for line in &state.logs[skip..] {
                tracing::warn!(target: "csd_task", task = task.name(), "before it failed: {line}");
            }
            return (Err(e), storage);
        }
        debug_assert_eq!(state.breakdown.total_ns(), ret_out.done.since(started));
        let report = TaskReport {
            task: task.name().to_string(),
            ret: state.ret,
            fuel: state.fuel_charged,
            breakdown: state.breakdown,
            started,
            finished: ret_out.done,
            logs: state.logs,
            bytes_read: state.bytes_read,
            bytes_written: state.bytes_written,
            exec: ctx.exec,
            attempts: 1,
        };
        (Ok(report), storage)
    }

    /// Where an invocation runs and when its code starts: on the host CPU at once (if the
    /// profile characterises it), or in the device after the NVMe command and the arguments'
    /// DMA, which are charged to `breakdown`.
    fn placement(
        &self,
        storage: &mut Storage,
        ctx: &IscContext,
        started: VirtualTime,
        breakdown: &mut Breakdown,
    ) -> Result<(Processor, IoPath, VirtualTime), TaskError> {
        let cap_bytes = ctx
            .limits
            .memory_bytes
            .unwrap_or(self.profile.device_cpu.dram_bytes)
            .min(self.engine.config().max_memory_bytes);
        let accelerators = self.profile.accelerators.clone();
        if ctx.on_host {
            let Some(ns_per_fuel) = self.profile.host.cpu_ns_per_fuel else {
                return Err(TaskError::BadArgument {
                    call: "on_host",
                    reason: format!(
                        "profile '{}' does not characterise its host CPU (host.cpu_ns_per_fuel)",
                        self.profile.name
                    ),
                });
            };
            let h = &self.profile.host;
            let processor = Processor {
                cpu: DeviceCpu {
                    model: "host CPU".into(),
                    ns_per_fuel,
                    ..self.profile.device_cpu.clone()
                },
                accelerators,
                cap_bytes,
                host_io: Some(HostIo {
                    syscall_ns: h.syscall_ns,
                    copy_bytes_per_sec: h.copy_bytes_per_sec,
                    page_cache_page_ns: h.page_cache_page_ns,
                }),
            };
            return Ok((processor, IoPath::Host, started));
        }
        let commanded = started.after(self.profile.host_interface.nvme_command_ns);
        breakdown.others_ns = commanded.since(started);
        let args_in =
            storage
                .device
                .host_transfer(LinkDirection::ToDevice, commanded, ctx.args.len() as u64);
        breakdown.dma_ns = args_in.dma_ns;
        let processor = Processor {
            cpu: self.profile.device_cpu.clone(),
            accelerators,
            cap_bytes,
            host_io: None,
        };
        Ok((processor, IoPath::Internal, args_in.done))
    }
}

/// Ends an invocation's transaction, if it ran as one: commit on success, roll back on any
/// failure. What the firmware spends on it is charged to `others`, and the task's clock
/// moves to its end.
fn end_transaction(
    storage: &mut Storage,
    tx: Option<csd_device::TaskId>,
    result: Result<(), TaskError>,
    state: &mut TaskState,
) -> Result<(), TaskError> {
    match (tx, result) {
        (Some(id), Ok(())) => match storage.device.tx_commit(id, state.clock) {
            Ok(c) => {
                state.breakdown.others_ns += c.latency_ns();
                state.clock = c.done;
                Ok(())
            }
            Err(e) => Err(tx_error(e)),
        },
        (Some(id), Err(e)) => match storage.device.tx_abort(id, state.clock) {
            Ok(c) => {
                state.breakdown.others_ns += c.latency_ns();
                state.clock = c.done;
                Err(e)
            }
            // Reported with the task's own failure; the storage goes back either way.
            Err(abort) => Err(TaskError::Tx(TxError::AbortFailed {
                task: id,
                cause: e.to_string(),
                abort: Box::new(abort),
            })),
        },
        (None, result) => result,
    }
}

/// Each registered file's size before the invocation (`None`: it did not exist).
fn snapshot_sizes(volume: &Volume, files: &[(String, FileMode)]) -> Vec<(String, Option<u64>)> {
    files
        .iter()
        .map(|(path, _)| (path.clone(), volume.layout(path).ok().map(|l| l.size_bytes)))
        .collect()
}

/// Puts back the sizes a rolled-back transaction changed and forgets files it created.
fn rollback_volume(volume: &mut Volume, before: &[(String, Option<u64>)]) {
    for (path, size) in before {
        // Errors here mean the file was never created: nothing to undo.
        let _ = match size {
            Some(size) => volume.set_size(path, *size),
            None => volume.remove(path).map(|_| ()),
        };
    }
}

impl TaskEngine {
    /// Runs `task` on the device CPU of `cpu` over `inputs` that an NDP dispatcher has already
    /// read into device memory (it charged those flash reads itself). The task sees input `n`
    /// as handle `n`, read-only. The report's breakdown holds only `compute`: device-CPU time
    /// for the fuel burnt plus accelerator time, from a start of zero.
    pub fn run_staged(
        &self,
        task: &Task,
        inputs: Vec<(String, Vec<u8>)>,
        ctx: &IscContext,
        cpu: &DeviceCpu,
        accelerators: &Accelerators,
    ) -> Result<TaskReport, TaskError> {
        let files = inputs
            .iter()
            .enumerate()
            .map(|(i, (path, _))| OpenFile {
                path: path.clone(),
                mode: FileMode::Read,
                id: FileId(i as u64),
            })
            .collect();
        let cap_bytes = ctx
            .limits
            .memory_bytes
            .unwrap_or(cpu.dram_bytes)
            .min(self.config().max_memory_bytes);
        let (result, state) = invoke(
            task,
            TaskState::new(
                Access {
                    backing: Backing::Staged(inputs.into_iter().collect()),
                    exec: ExecMode::File,
                    tx: None,
                    io_path: IoPath::Internal,
                    files,
                },
                Processor {
                    cpu: cpu.clone(),
                    accelerators: accelerators.clone(),
                    cap_bytes,
                    host_io: None,
                },
                ctx,
                VirtualTime::ZERO,
                Breakdown::default(),
            ),
        );
        result?;
        Ok(TaskReport {
            task: task.name().to_string(),
            ret: state.ret,
            fuel: state.fuel_charged,
            breakdown: state.breakdown,
            started: VirtualTime::ZERO,
            finished: state.clock,
            logs: state.logs,
            bytes_read: state.bytes_read,
            bytes_written: state.bytes_written,
            exec: ExecMode::File,
            attempts: 1,
        })
    }
}

impl TaskState {
    fn new(
        access: Access,
        processor: Processor,
        ctx: &IscContext,
        clock: VirtualTime,
        breakdown: Breakdown,
    ) -> TaskState {
        TaskState {
            backing: access.backing,
            exec: access.exec,
            tx: access.tx,
            io_path: access.io_path,
            files: access.files,
            args: ctx.args.clone(),
            ret: Vec::new(),
            logs: Vec::new(),
            limits: ctx.limits.clone(),
            limiter: MemoryCap {
                cap_bytes: processor.cap_bytes,
                refused: None,
            },
            memory: None,
            cpu: processor.cpu,
            accelerators: processor.accelerators,
            clock,
            fuel_charged: 0,
            host_fuel: 0,
            breakdown,
            failure: None,
            bytes_read: 0,
            bytes_written: 0,
            inflight: Default::default(),
            next_token: 0,
            host_io: processor.host_io,
        }
    }
}

/// What a task's calls reach: its files' bytes, how its writes commit, and the path its
/// I/O takes.
struct Access {
    backing: Backing,
    exec: ExecMode,
    /// The transaction the invocation runs as (`ExecMode::Tx` on the device).
    tx: Option<csd_device::TaskId>,
    io_path: IoPath,
    files: Vec<OpenFile>,
}

/// The processor a task runs on: its cost model and accelerators, the memory it may grow
/// to, and, on the host, what each I/O call costs it.
struct Processor {
    cpu: DeviceCpu,
    accelerators: Accelerators,
    cap_bytes: u64,
    host_io: Option<HostIo>,
}

/// Instantiates and runs `task` over `state`, then charges its fuel. Returns the outcome
/// together with the state, whose backing the caller takes back whatever happened.
fn invoke(task: &Task, state: TaskState) -> (Result<(), TaskError>, TaskState) {
    let fuel = state.limits.fuel;
    let ticks = state
        .limits
        .wall_clock_ms
        .div_ceil(crate::engine::EPOCH_TICK.as_millis() as u64)
        .max(1);
    let mut store = Store::new(task.pre.module().engine(), state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(ticks);
    store.epoch_deadline_trap();
    let outcome = execute(&mut store, task, fuel);
    let remaining = store.get_fuel().unwrap_or(0);
    store.data_mut().charge_fuel(remaining);
    let mut state = store.into_data();
    // A task's submitted requests complete before it does (and before its commit).
    state.wait_all();
    let result = match outcome.map_err(|e| classify(e, &state)) {
        Ok(0) => Ok(()),
        Ok(code) => Err(TaskError::Failed {
            code,
            message: state.failure.take(),
        }),
        Err(e) => Err(e),
    };
    (result, state)
}

/// Opens the invocation's files (creating writable ones) and, in `ExecMode::Tx`, starts its
/// transaction with a snapshot of each.
fn register(
    storage: &mut Storage,
    files: &[(String, FileMode)],
    exec: ExecMode,
) -> Result<(Vec<OpenFile>, Option<csd_device::TaskId>), TaskError> {
    let volume = &mut storage.volume;
    let opened = files
        .iter()
        .map(|(path, mode)| {
            Volume::check_path(path)?;
            if mode.writable() {
                volume.create(path)?;
            }
            Ok(OpenFile {
                path: path.clone(),
                mode: *mode,
                id: FileId(volume.layout(path)?.id),
            })
        })
        .collect::<Result<Vec<_>, TaskError>>()?;
    if exec != ExecMode::Tx {
        return Ok((opened, None));
    }
    let task = storage.device.tx_begin();
    for f in &opened {
        let extents = device_extents(storage.volume.layout(&f.path)?);
        if let Err(e) = storage.device.tx_register(task, f.id, &extents) {
            storage
                .device
                .tx_abort(task, VirtualTime::ZERO)
                .map_err(tx_error)?;
            return Err(tx_error(e));
        }
    }
    Ok((opened, Some(task)))
}

fn execute(store: &mut Store<TaskState>, task: &Task, fuel: u64) -> wasmtime::Result<i32> {
    store.set_fuel(fuel)?;
    let instance = task.pre.instantiate(&mut *store)?;
    // `check_interface` found both when the module was loaded.
    let missing = |what| wasmtime::Error::new(TaskError::MissingExport { what });
    let memory = instance
        .get_module_export(&mut *store, &task.exports.memory)
        .and_then(Extern::into_memory)
        .ok_or_else(|| missing("memory"))?;
    store.data_mut().memory = Some(memory);
    let run = instance
        .get_module_export(&mut *store, &task.exports.run)
        .and_then(Extern::into_func)
        .ok_or_else(|| missing("run"))?
        .typed::<(), i32>(&*store)?;
    run.call(&mut *store, ())
}

/// Maps a wasmtime error to what happened, in the task author's terms.
/// Why a budget ran out, as far as the host can tell: a task that moved much data through
/// host calls (which cost fuel per byte; a BlockISC task sees the whole device) needs a
/// bigger budget, one that did not is likely looping.
fn fuel_hint(state: &TaskState) -> String {
    let moved = state.bytes_read.saturating_add(state.bytes_written);
    if moved.saturating_mul(2) >= state.limits.fuel {
        format!(
            "it had moved {moved} bytes through host calls, which cost fuel per byte; give it \
             a bigger budget (--fuel) or less data"
        )
    } else {
        "an endless loop?".to_string()
    }
}

fn classify(e: wasmtime::Error, state: &TaskState) -> TaskError {
    let e = match e.downcast::<TaskError>() {
        Ok(task_error) => return task_error,
        Err(e) => e,
    };
    if let Some(wanted) = state.limiter.refused {
        return TaskError::MemoryLimit {
            wanted,
            cap: state.limiter.cap_bytes,
        };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => TaskError::FuelExhausted {
            budget: state.limits.fuel,
            approx_ms: state.cpu.compute_ns(state.limits.fuel) / 1_000_000,
            hint: fuel_hint(state),
        },
        Some(Trap::StackOverflow) => TaskError::StackOverflow,
        Some(Trap::Interrupt) => TaskError::WallClock {
            limit_ms: state.limits.wall_clock_ms,
        },
        // Rust lays a task's stack out first in linear memory, growing down: overflowing it
        // leaves the memory at its bottom, so the trap says out of bounds, not stack overflow.
        Some(Trap::MemoryOutOfBounds) => TaskError::Trap(format!(
            "{} (also how a task's stack overflow ends: deep recursion or a large local \
             array, past the 64 KiB stack `csd task build` gives)",
            Trap::MemoryOutOfBounds
        )),
        Some(trap) => TaskError::Trap(trap.to_string()),
        None => TaskError::Trap(format!("{e:#}")),
    }
}
