//! CISC-op stages on wasmtime: the [`StageRunner`] StorageFS calls for every `Process`
//! command.
//!
//! A stage module exports `memory`, `stage_alloc`, `stage_free` and its stage functions
//! (`csd_stage_v1`, see `csd_sdk::stage`). Built-in stages are one module compiled with csd;
//! a user stage is `task:export`, an export of a module added with [`WasmStages::add_module`].
//! A module may import `csd_v1` (an SDK task does), but a stage has no files: any import it
//! calls traps.
//!
//! One instance per module is kept and reused, since a CISC op's stage works on a slot of a
//! few KiB and instantiating would cost more than the work. A call that traps, runs out of
//! fuel or returns an out-of-bounds output discards the instance; the next call gets a fresh
//! one. Fuel bounds a stage's work, the store's limits its memory.

use csd_device::storagefs::{StageRun, StageRunner};
use csd_sdk::cisc::Stage;
use std::collections::BTreeMap;
use wasmtime::{
    Config, Engine, Instance, Linker, Memory, Module, Store, StoreLimits, StoreLimitsBuilder,
    TypedFunc,
};

/// Fuel one stage call may burn (≈ 0.1 s of a 2.7 GHz device core).
pub const STAGE_FUEL: u64 = 1_000_000_000;
/// Linear memory one stage module may grow to.
pub const STAGE_MEMORY_BYTES: usize = 64 << 20;

/// The module name built-in stages come from.
const BUILTIN: &str = "builtin";

type StageFn = TypedFunc<(i32, i32, i32, i32), i64>;

struct Live {
    store: Store<StoreLimits>,
    instance: Instance,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    free: TypedFunc<(i32, i32), ()>,
    exports: BTreeMap<String, StageFn>,
}

/// Runs stages in wasmtime, costed by fuel.
pub struct WasmStages {
    engine: Engine,
    modules: BTreeMap<String, Module>,
    live: BTreeMap<String, Live>,
    fuel: u64,
}

impl WasmStages {
    /// A runner whose built-in stages are `builtin` (csd's `stages` module).
    pub fn new(builtin: &[u8]) -> anyhow::Result<WasmStages> {
        let mut c = Config::new();
        c.consume_fuel(true)
            .wasm_simd(true)
            .cranelift_nan_canonicalization(true);
        let engine = Engine::new(&c)?;
        let mut runner = WasmStages {
            engine,
            modules: BTreeMap::new(),
            live: BTreeMap::new(),
            fuel: STAGE_FUEL,
        };
        runner.add_module(BUILTIN, builtin)?;
        Ok(runner)
    }

    /// Sets the fuel budget of each stage call.
    pub fn with_fuel(mut self, fuel: u64) -> WasmStages {
        self.fuel = fuel;
        self
    }

    /// Adds a module whose exports are stages `name:export`.
    pub fn add_module(&mut self, name: &str, wasm: &[u8]) -> anyhow::Result<()> {
        let module = Module::new(&self.engine, wasm)
            .map_err(|e| anyhow::anyhow!("compiling stage module '{name}': {e:#}"))?;
        for needed in ["memory", "stage_alloc", "stage_free"] {
            anyhow::ensure!(
                module.get_export(needed).is_some(),
                "stage module '{name}' does not export `{needed}` (csd_stage_v1: build it with \
                 csd_sdk and use csd_sdk::stage)"
            );
        }
        self.live.remove(name);
        self.modules.insert(name.to_string(), module);
        Ok(())
    }

    fn instantiate(&self, name: &str) -> Result<Live, String> {
        let module = self.modules.get(name).ok_or_else(|| {
            format!("no stage module named '{name}' (add it with `csd task add` first)")
        })?;
        let limits = StoreLimitsBuilder::new()
            .memory_size(STAGE_MEMORY_BYTES)
            .instances(1)
            .build();
        let mut store = Store::new(&self.engine, limits);
        store.limiter(|l| l);
        store.set_fuel(self.fuel).map_err(|e| e.to_string())?;
        let mut linker: Linker<StoreLimits> = Linker::new(&self.engine);
        linker
            .define_unknown_imports_as_traps(module)
            .map_err(|e| e.to_string())?;
        let instance = linker
            .instantiate(&mut store, module)
            .map_err(|e| format!("instantiating stage module '{name}': {e:#}"))?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or("the stage module exports no memory")?;
        let alloc = instance
            .get_typed_func(&mut store, "stage_alloc")
            .map_err(|e| format!("stage_alloc: {e}"))?;
        let free = instance
            .get_typed_func(&mut store, "stage_free")
            .map_err(|e| format!("stage_free: {e}"))?;
        Ok(Live {
            store,
            instance,
            memory,
            alloc,
            free,
            exports: BTreeMap::new(),
        })
    }
}

/// The module and export a stage names.
fn locate(stage: &Stage) -> (&str, &str) {
    match stage {
        Stage::User { task, export } => (task, export),
        built_in => (BUILTIN, built_in.built_in_name().unwrap_or_default()),
    }
}

impl Live {
    fn call(&mut self, export: &str, a: &[u8], b: &[u8], max: usize) -> Result<Vec<u8>, String> {
        if !self.exports.contains_key(export) {
            let f: StageFn = self
                .instance
                .get_typed_func(&mut self.store, export)
                .map_err(|_| {
                    format!("no stage export `{export}: fn(i32, i32, i32, i32) -> i64`")
                })?;
            self.exports.insert(export.to_string(), f);
        }
        let a_ptr = self.copy_in(a)?;
        let b_ptr = self.copy_in(b)?;
        let trap = |e: wasmtime::Error| format!("{e:#}");
        // Called by reference: cloning a typed function clones its registered types.
        let packed = self.exports[export]
            .call(
                &mut self.store,
                (a_ptr, a.len() as i32, b_ptr, b.len() as i32),
            )
            .map_err(trap)?;
        if packed < 0 {
            return Err(format!("the stage returned error code {packed}"));
        }
        let (ptr, len) = ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize);
        if len > max {
            return Err(format!("its output of {len} bytes is over a slot's {max}"));
        }
        let out = self
            .memory
            .data(&self.store)
            .get(ptr..ptr.saturating_add(len))
            .ok_or_else(|| format!("its output ({len} bytes at {ptr}) is outside its memory"))?
            .to_vec();
        for (p, n) in [(a_ptr, a.len()), (b_ptr, b.len()), (ptr as i32, len)] {
            if n > 0 {
                self.free
                    .call(&mut self.store, (p, n as i32))
                    .map_err(trap)?;
            }
        }
        Ok(out)
    }

    fn copy_in(&mut self, bytes: &[u8]) -> Result<i32, String> {
        // An empty slot needs no memory (and no call into the module).
        if bytes.is_empty() {
            return Ok(0);
        }
        let n = i32::try_from(bytes.len()).map_err(|_| "a slot over 2 GiB".to_string())?;
        let ptr = self
            .alloc
            .call(&mut self.store, n)
            .map_err(|e| format!("{e:#}"))?;
        self.memory
            .write(&mut self.store, ptr as u32 as usize, bytes)
            .map_err(|_| "stage_alloc returned memory outside the module's".to_string())?;
        Ok(ptr)
    }
}

impl StageRunner for WasmStages {
    fn run(&mut self, stage: &Stage, a: &[u8], b: &[u8], max: usize) -> Result<StageRun, String> {
        let (module, export) = locate(stage);
        if !self.live.contains_key(module) {
            let live = self.instantiate(module)?;
            self.live.insert(module.to_string(), live);
        }
        let live = self.live.get_mut(module).expect("inserted above");
        let result = live
            .store
            .set_fuel(self.fuel)
            .map_err(|e| e.to_string())
            .and_then(|()| live.call(export, a, b, max))
            .and_then(|out| Ok((out, live.store.get_fuel().map_err(|e| e.to_string())?)));
        match result {
            Ok((output, left)) => Ok(StageRun {
                output,
                fuel: self.fuel - left,
            }),
            Err(e) => {
                // A trap may have left the instance half-way through its allocator.
                self.live.remove(module);
                Err(e)
            }
        }
    }
}
