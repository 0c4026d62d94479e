//! One wasmtime [`Engine`] per process, with modules compiled once and cached.
//!
//! Compilation is the expensive step (milliseconds to seconds); instantiation from an
//! [`InstancePre`] with the pooling allocator costs microseconds. So every module is compiled
//! once per process (memory cache keyed by its SHA-256) and once per machine: compiled
//! artifacts go to an on-disk cache keyed by the module hash and the engine's compatibility
//! hash (wasmtime version and settings). `Module::deserialize` is unsafe on untrusted bytes,
//! so it is only ever called on files this cache wrote, after checking the header csd wrote
//! into them names the same module hash.

use crate::abi::{self, TaskState};
use crate::error::TaskError;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use wasmtime::{
    Config, Enabled, Engine, ExternType, InstanceAllocationStrategy, InstancePre, Linker, Module,
    ModuleExport, PoolingAllocationConfig, ValType,
};

/// Engine-wide settings. Per-invocation limits are in [`crate::TaskLimits`].
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Largest linear memory any task may have (the per-invocation cap is at most this).
    pub max_memory_bytes: u64,
    /// Native stack available to Wasm frames: deep recursion traps past it.
    pub max_wasm_stack_bytes: usize,
    /// Instances that can exist at once (pool slots).
    pub pool_slots: u32,
    /// Where compiled modules are kept; `None` keeps them in memory only.
    pub cache_dir: Option<PathBuf>,
    /// How instances get their memory. [`Allocation::Pooling`] falls back to
    /// [`Allocation::OnDemand`] where its reservation is refused; [`TaskEngine::config`] says
    /// which one the engine runs.
    pub allocation: Allocation,
}

/// How a task's instance, memory and table are allocated. Either way a task computes the
/// same results and burns the same fuel: fuel counts Wasm operators, not machine code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// Slots reserved up front, each with its memory's whole 4 GiB address range and guard
    /// pages, so instantiation costs microseconds and bounds checks vanish. The reservation is
    /// tens of GiB of address space, which a process under `ulimit -v` (or Slurm's
    /// `VSizeFactor`) may not have.
    Pooling,
    /// Each instance maps its memory when it starts, reserving little beyond what it uses,
    /// with explicit bounds checks: slower, but within a few hundred MiB of address space.
    OnDemand,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_memory_bytes: 4 << 30,
            max_wasm_stack_bytes: 512 << 10,
            pool_slots: 16,
            cache_dir: default_cache_dir(),
            allocation: Allocation::Pooling,
        }
    }
}

/// `$XDG_CACHE_HOME/csdlab/modules` or `~/.cache/csdlab/modules`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("csdlab").join("modules"))
}

/// A validated, compiled, linked task module, ready to instantiate. Cheap to clone.
#[derive(Clone)]
pub struct Task {
    name: Arc<str>,
    hash: [u8; 32],
    pub(crate) pre: InstancePre<TaskState>,
    /// Where `memory` and `run` sit among the module's exports, resolved once at load: an
    /// invocation fetches them by index instead of looking their names up.
    pub(crate) exports: TaskExports,
}

/// A task module's ABI exports (checked by `check_interface`).
#[derive(Clone, Copy)]
pub(crate) struct TaskExports {
    pub memory: ModuleExport,
    pub run: ModuleExport,
}

impl Task {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// SHA-256 of the module bytes, hex-encoded.
    pub fn hash_hex(&self) -> String {
        hex(&self.hash)
    }
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task").field("name", &self.name).finish()
    }
}

/// Compiles, caches and links task modules. One per process is enough; share it with `Arc`
/// (`csd` keeps one per thread, so threads running side by side never wait for pool slots).
pub struct TaskEngine {
    engine: Engine,
    linker: Linker<TaskState>,
    config: EngineConfig,
    /// Hex of the engine's compatibility hash: part of every disk-cache key.
    compat: String,
    loaded: Mutex<HashMap<[u8; 32], Task>>,
}

const ARTIFACT_MAGIC: &[u8; 8] = b"CSDCWASM";

/// What [`Allocation::OnDemand`] reserves for a memory when it starts and each time it grows
/// past that: a task's memory is mostly a few MiB.
const ON_DEMAND_RESERVATION_BYTES: u64 = 64 << 20;
/// Its guard region (accesses are bounds-checked, so it only catches the engine's own bugs).
const ON_DEMAND_GUARD_BYTES: u64 = 64 << 10;

/// Bytes of a freed pool slot's memory whose dirty pages are reset in place. Tasks that read
/// a whole file (grep, knn) dirty as much memory as the file: zeroing 64 MiB in place costs
/// less than handing it back and faulting it in again at the next invocation (`csd bench
/// tasks`, 64 MiB: grep 56 → 23 ms, knn 51 → 22 ms, at 4 MiB against 64). Peak memory does
/// not change, since a slot keeps no more than its task used.
const KEEP_RESIDENT_BYTES: usize = 64 << 20;
/// The same for its table. A Rust task's table holds a few dozen function references, less
/// than a page: at one page wasmtime zeroes it with a memset instead of a second
/// `PAGEMAP_SCAN` per invocation.
const TABLE_KEEP_RESIDENT_BYTES: usize = 4 << 10;

impl TaskEngine {
    pub fn new(mut config: EngineConfig) -> Result<TaskEngine, TaskError> {
        let engine = match Engine::new(&wasmtime_config(&config, config.allocation)) {
            Ok(engine) => engine,
            Err(e) if config.allocation == Allocation::Pooling => {
                // Said once a process, though `csd` makes an engine per thread.
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    tracing::warn!(
                        "the pooling allocator could not reserve its slots ({e:#}); tasks get \
                         their memory on demand instead, slower to start but within a smaller \
                         address space"
                    )
                });
                config.allocation = Allocation::OnDemand;
                Engine::new(&wasmtime_config(&config, Allocation::OnDemand))
                    .map_err(|e| TaskError::Engine(format!("{e:#}")))?
            }
            Err(e) => return Err(TaskError::Engine(format!("{e:#}"))),
        };
        let mut hasher = StableHasher::default();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let compat = format!("{:016x}", hasher.finish());
        let linker = abi::linker(&engine).map_err(|e| TaskError::Engine(format!("{e:#}")))?;
        start_epoch_ticker(&engine)?;
        Ok(TaskEngine {
            engine,
            linker,
            config,
            compat,
            loaded: Mutex::new(HashMap::new()),
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Validates and compiles a module (Wasm binary or text), or returns the cached one.
    pub fn load(&self, name: &str, wasm: &[u8]) -> Result<Task, TaskError> {
        let hash: [u8; 32] = Sha256::digest(wasm).into();
        if let Some(task) = self.loaded.lock().expect("cache lock").get(&hash) {
            return Ok(task.clone());
        }
        let module = self.compile_cached(&hash, wasm)?;
        let exports = check_interface(&module)?;
        let pre = self
            .linker
            .instantiate_pre(&module)
            .map_err(|e| TaskError::InvalidModule(format!("{e:#}")))?;
        let task = Task {
            name: name.into(),
            hash,
            pre,
            exports,
        };
        self.loaded
            .lock()
            .expect("cache lock")
            .insert(hash, task.clone());
        Ok(task)
    }

    fn artifact_path(&self, hash: &[u8; 32]) -> Option<PathBuf> {
        let dir = self.config.cache_dir.as_ref()?;
        Some(dir.join(format!("{}-{}.cwasm", hex(hash), self.compat)))
    }

    fn compile_cached(&self, hash: &[u8; 32], wasm: &[u8]) -> Result<Module, TaskError> {
        let path = self.artifact_path(hash);
        if let Some(module) = path.as_deref().and_then(|p| self.read_artifact(p, hash)) {
            tracing::debug!(hash = %hex(hash), "module loaded from the disk cache");
            return Ok(module);
        }
        // Binary modules start with the magic; anything else must be WebAssembly text. Bytes
        // that are neither get that said, not a text parser's complaint about UTF-8.
        if !wasm.starts_with(b"\0asm") && std::str::from_utf8(wasm).is_err() {
            return Err(TaskError::InvalidModule(
                "neither a WebAssembly binary (it does not start with \\0asm) nor WebAssembly text"
                    .into(),
            ));
        }
        let module = Module::new(&self.engine, wasm)
            .map_err(|e| TaskError::InvalidModule(format!("{e:#}")))?;
        if let Some(path) = path {
            if let Err(e) = write_artifact(&path, hash, &module) {
                // A cache that cannot be written costs speed, not correctness.
                tracing::warn!(path = %path.display(), "could not write the module cache: {e}");
            }
        }
        Ok(module)
    }

    fn read_artifact(&self, path: &Path, hash: &[u8; 32]) -> Option<Module> {
        let bytes = std::fs::read(path).ok()?;
        let header = ARTIFACT_MAGIC.len() + hash.len();
        if bytes.len() <= header
            || &bytes[..ARTIFACT_MAGIC.len()] != ARTIFACT_MAGIC
            || &bytes[ARTIFACT_MAGIC.len()..header] != hash
        {
            tracing::warn!(path = %path.display(), "ignoring a module cache file csd did not write");
            return None;
        }
        // SAFETY: the file carries the header csd writes in `write_artifact` for this exact
        // module hash, in csd's private cache directory, under a name that includes the
        // engine's compatibility hash; wasmtime additionally checks its own version header.
        unsafe { Module::deserialize(&self.engine, &bytes[header..]) }.ok()
    }
}

/// `CSD_PERFMAP=1`: wasmtime names each compiled task function in `/tmp/perf-PID.map`, so
/// `perf record` and `perf report` show a task's own functions by name instead of bare
/// addresses (it changes nothing a task computes or any modelled time).
fn profiler() -> wasmtime::ProfilingStrategy {
    match std::env::var_os("CSD_PERFMAP") {
        Some(v) if !v.is_empty() && v != "0" => wasmtime::ProfilingStrategy::PerfMap,
        _ => wasmtime::ProfilingStrategy::None,
    }
}

/// How often the engine's epoch advances: the wall-clock limit's granularity.
pub const EPOCH_TICK: std::time::Duration = std::time::Duration::from_millis(10);

/// The wasmtime settings of an engine with `allocation`.
fn wasmtime_config(config: &EngineConfig, allocation: Allocation) -> Config {
    let mut c = Config::new();
    c.consume_fuel(true)
        // The wall-clock backstop (`TaskLimits::wall_clock_ms`): fuel bounds a task's
        // work in virtual time, epochs bound it in real time whatever a host call costs.
        .epoch_interruption(true)
        .wasm_simd(true)
        // Wasm leaves NaN bit patterns up to the machine; canonical NaNs keep task results
        // byte-identical everywhere (determinism is a csdlab invariant).
        .cranelift_nan_canonicalization(true)
        .max_wasm_stack(config.max_wasm_stack_bytes)
        .profiler(profiler());
    match allocation {
        Allocation::Pooling => {
            let mut pool = PoolingAllocationConfig::default();
            pool.total_core_instances(config.pool_slots)
                .total_memories(config.pool_slots)
                .total_tables(config.pool_slots)
                .max_memories_per_module(1)
                .max_tables_per_module(1)
                .table_elements(100_000)
                .max_memory_size(config.max_memory_bytes as usize)
                // A freed slot's dirty pages are found with Linux's PAGEMAP_SCAN and reset in
                // place, not handed back to the kernel: the next task touches the same stack,
                // data and heap pages, and resetting a few pages costs less than the madvise
                // and the page faults (copy-on-write of the data image included) that would
                // follow. Where the ioctl is missing (Linux before 6.7, other systems) `Auto`
                // falls back to releasing the pages, as before.
                .pagemap_scan(Enabled::Auto)
                .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
                .table_keep_resident(TABLE_KEEP_RESIDENT_BYTES);
            c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        // The limits the pool enforced come from the store's limiter (`abi::MemoryCap`).
        Allocation::OnDemand => {
            c.allocation_strategy(InstanceAllocationStrategy::OnDemand)
                .memory_reservation(ON_DEMAND_RESERVATION_BYTES)
                .memory_reservation_for_growth(ON_DEMAND_RESERVATION_BYTES)
                .memory_guard_size(ON_DEMAND_GUARD_BYTES);
        }
    }
    c
}

/// Advances `engine`'s epoch every [`EPOCH_TICK`] on a thread of its own, which ends once the
/// engine is dropped (it holds only a weak reference).
fn start_epoch_ticker(engine: &Engine) -> Result<(), TaskError> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("csd-epoch".into())
        .spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            match weak.upgrade() {
                Some(engine) => engine.increment_epoch(),
                None => return,
            }
        })
        .map(drop)
        .map_err(|e| TaskError::Engine(format!("cannot start the epoch thread: {e}")))
}

fn write_artifact(path: &Path, hash: &[u8; 32], module: &Module) -> Result<(), String> {
    let dir = path.parent().ok_or("cache path has no parent")?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let body = module.serialize().map_err(|e| format!("{e:#}"))?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut bytes = Vec::with_capacity(body.len() + 40);
    bytes.extend_from_slice(ARTIFACT_MAGIC);
    bytes.extend_from_slice(hash);
    bytes.extend_from_slice(&body);
    std::fs::write(&tmp, &bytes).map_err(|e| e.to_string())?;
    // Rename is atomic: readers never see a half-written artifact.
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())
}

/// Checks the module's exports and imports against the `csd_v1` ABI, so a wrong module gets
/// a message about the ABI rather than a linker error.
fn check_interface(module: &Module) -> Result<TaskExports, TaskError> {
    match module.get_export("memory") {
        Some(ExternType::Memory(_)) => {}
        _ => {
            return Err(TaskError::MissingExport {
                what: "a linear memory named `memory`",
            })
        }
    }
    match module.get_export("run") {
        Some(ExternType::Func(f))
            if f.params().len() == 0
                && f.results().len() == 1
                && matches!(f.results().next(), Some(ValType::I32)) => {}
        _ => {
            return Err(TaskError::MissingExport {
                what: "a function `run: () -> i32`",
            })
        }
    }
    for import in module.imports() {
        if import.module() != abi::MODULE || !abi::FUNCTIONS.contains(&import.name()) {
            return Err(TaskError::UnknownImport {
                module: import.module().to_string(),
                name: import.name().to_string(),
                known: abi::FUNCTIONS.join(", "),
            });
        }
    }
    // Both were found above by the same names.
    let export = |name| {
        module
            .get_export_index(name)
            .ok_or(TaskError::MissingExport {
                what: "the exports `memory` and `run`",
            })
    };
    Ok(TaskExports {
        memory: export("memory")?,
        run: export("run")?,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// FNV-1a: a hasher whose output does not change between Rust releases (unlike
/// `DefaultHasher`), so cache file names stay valid across toolchain updates.
#[derive(Default)]
struct StableHasher(u64);

impl Hasher for StableHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        if self.0 == 0 {
            self.0 = 0xcbf2_9ce4_8422_2325;
        }
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
