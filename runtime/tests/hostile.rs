//! Hostile tasks: each must stop with its own clear error, and a healthy task right after it
//! must still succeed on intact data — the device keeps serving.

use csd_device::{DataMode, Profile};
use csd_runtime::{
    Allocation, Csd, EngineConfig, FileMode, IscContext, Task, TaskEngine, TaskError, TaskLimits,
};
use std::sync::{Arc, OnceLock};

fn engine() -> Arc<TaskEngine> {
    static ENGINE: OnceLock<Arc<TaskEngine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| new_engine(Allocation::Pooling))
        .clone()
}

/// The engine a process gets where the pool's address space is refused (`ulimit -v`).
fn on_demand_engine() -> Arc<TaskEngine> {
    static ENGINE: OnceLock<Arc<TaskEngine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| new_engine(Allocation::OnDemand))
        .clone()
}

fn new_engine(allocation: Allocation) -> Arc<TaskEngine> {
    let e = TaskEngine::new(EngineConfig {
        cache_dir: None,
        allocation,
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!(e.config().allocation, allocation);
    Arc::new(e)
}

const INPUT: &[u8] = b"the quick brown fox jumps over the lazy dog\n";

/// Reads file 0 whole and returns its bytes.
const COPY: &str = r#"(module
  (import "csd_v1" "file_size" (func $size (param i32) (result i64)))
  (import "csd_v1" "file_read" (func $read (param i32 i64 i32 i32) (result i32)))
  (import "csd_v1" "ret_write" (func $ret (param i32 i32)))
  (memory (export "memory") 2)
  (func (export "run") (result i32)
    (local $n i32)
    (local.set $n (call $read (i32.const 0) (i64.const 0) (i32.const 1024)
                              (i32.wrap_i64 (call $size (i32.const 0)))))
    (call $ret (i32.const 1024) (local.get $n))
    (i32.const 0)))"#;

fn setup() -> (Csd, Task) {
    setup_on(engine())
}

fn setup_on(engine: Arc<TaskEngine>) -> (Csd, Task) {
    let profile = Profile::load("daisyplus-femu").unwrap();
    let mut csd = Csd::new(&profile, DataMode::Payloads, engine.clone()).unwrap();
    csd.import("/data/in.txt", INPUT).unwrap();
    let copy = engine.load("copy", COPY.as_bytes()).unwrap();
    (csd, copy)
}

fn read_ctx() -> IscContext {
    IscContext::new().file("/data/in.txt", FileMode::Read)
}

fn still_serving(csd: &mut Csd, copy: &Task) {
    let r = csd
        .run(copy, &read_ctx())
        .expect("a healthy task succeeds after a hostile one");
    assert_eq!(r.ret, INPUT);
    assert_eq!(csd.export("/data/in.txt").unwrap(), INPUT);
}

/// Runs `wat` (or raw bytes) as a task and returns its error, then checks the device serves.
/// It runs under both allocators, which must stop it with the same error: the on-demand one
/// keeps the pool's limits through the store's limiter.
fn hostile(module: &[u8], ctx: IscContext) -> TaskError {
    let [pooled, on_demand] = [engine(), on_demand_engine()].map(|engine| {
        let (mut csd, copy) = setup_on(engine.clone());
        let err = match engine.load("hostile", module) {
            Err(e) => e,
            Ok(task) => csd
                .run(&task, &ctx)
                .expect_err("the hostile task must fail"),
        };
        still_serving(&mut csd, &copy);
        err
    });
    assert_eq!(
        pooled.to_string(),
        on_demand.to_string(),
        "the pool and the on-demand allocator stop it alike"
    );
    pooled
}

fn module(body: &str) -> Vec<u8> {
    format!(
        r#"(module
  (import "csd_v1" "file_size" (func $size (param i32) (result i64)))
  (import "csd_v1" "file_write" (func $write (param i32 i64 i32 i32) (result i32)))
  (import "csd_v1" "ret_write" (func $ret (param i32 i32)))
  (import "csd_v1" "panic" (func $panic (param i32 i32)))
  (import "csd_v1" "fail" (func $fail (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "index out of bounds: the len is 3 but the index is 7")
  (data (i32.const 100) "pattern must not be empty")
  {body})"#
    )
    .into_bytes()
}

#[test]
fn healthy_task_reads_its_file_and_accounts_time() {
    let (mut csd, copy) = setup();
    let r = csd.run(&copy, &read_ctx()).unwrap();
    assert_eq!(r.ret, INPUT);
    let b = r.breakdown;
    assert_eq!(b.total_ns(), r.latency_ns(), "stages add up");
    assert!(b.read_file_ns >= 80_000, "one 80 µs page read: {b:?}");
    assert!(b.compute_ns > 0 && b.dma_ns > 0 && b.others_ns > 0, "{b:?}");
    assert_eq!(b.write_ns, 0);
    assert!(r.fuel > 0);
    // Identical invocations: identical fuel, breakdown and result.
    let again = csd.run(&copy, &read_ctx()).unwrap();
    assert_eq!((again.fuel, again.breakdown, again.ret), (r.fuel, b, r.ret));
    assert!(
        again.started >= r.finished,
        "invocations follow each other in virtual time"
    );
}

#[test]
fn infinite_loop_exhausts_its_budget() {
    let ctx = read_ctx().limits(TaskLimits {
        fuel: 5_000_000,
        ..TaskLimits::default()
    });
    let e = hostile(
        &module(r#"(func (export "run") (result i32) (loop $l (br $l)) (i32.const 0))"#),
        ctx,
    );
    assert!(
        matches!(
            e,
            TaskError::FuelExhausted {
                budget: 5_000_000,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("compute budget of 5000000 fuel"),
        "{e}"
    );
}

#[test]
fn memory_bomb_hits_the_cap() {
    let ctx = read_ctx().limits(TaskLimits {
        memory_bytes: Some(8 << 20),
        ..TaskLimits::default()
    });
    let bomb = r#"(func (export "run") (result i32)
        (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
        unreachable)"#;
    let e = hostile(&module(bomb), ctx);
    assert!(
        matches!(e, TaskError::MemoryLimit { cap, .. } if cap == 8 << 20),
        "{e}"
    );
    assert!(
        e.to_string().contains("over its cap of 8388608 bytes"),
        "{e}"
    );
}

#[test]
fn out_of_bounds_pointer_in_a_host_call() {
    let e = hostile(
        &module(
            r#"(func (export "run") (result i32) (call $ret (i32.const 65000) (i32.const 1000)) (i32.const 0))"#,
        ),
        read_ctx(),
    );
    assert!(
        matches!(
            e,
            TaskError::BadPointer {
                call: "ret_write",
                ptr: 65000,
                len: 1000,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("outside the task's 65536-byte memory"),
        "{e}"
    );
}

#[test]
fn negative_length_is_a_bad_pointer_too() {
    let e = hostile(
        &module(
            r#"(func (export "run") (result i32) (call $ret (i32.const 0) (i32.const -1)) (i32.const 0))"#,
        ),
        read_ctx(),
    );
    assert!(matches!(e, TaskError::BadPointer { .. }), "{e}");
}

#[test]
fn unregistered_file_handle() {
    let e = hostile(
        &module(
            r#"(func (export "run") (result i32) (drop (call $size (i32.const 7))) (i32.const 0))"#,
        ),
        read_ctx(),
    );
    assert!(
        matches!(
            e,
            TaskError::BadHandle {
                handle: 7,
                registered: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("file handle 7 is not registered"),
        "{e}"
    );
}

#[test]
fn write_to_a_read_only_file() {
    let e = hostile(
        &module(
            r#"(func (export "run") (result i32)
            (drop (call $write (i32.const 0) (i64.const 0) (i32.const 16) (i32.const 10))) (i32.const 0))"#,
        ),
        read_ctx(),
    );
    assert!(
        matches!(
            e,
            TaskError::ModeDenied {
                refused: "writing",
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("'/data/in.txt' (handle 0) is registered read-only"),
        "{e}"
    );
}

#[test]
fn deep_recursion_overflows_the_stack() {
    let e = hostile(
        &module(
            r#"(func $r (param i32) (result i32) (call $r (i32.add (local.get 0) (i32.const 1))))
                   (func (export "run") (result i32) (call $r (i32.const 0)))"#,
        ),
        read_ctx(),
    );
    assert!(matches!(e, TaskError::StackOverflow), "{e}");
}

#[test]
fn a_file_that_is_not_wasm() {
    let e = hostile(
        b"\x7fELF\x02\x01\x01 this is a shared object, not a module",
        read_ctx(),
    );
    assert!(matches!(e, TaskError::InvalidModule(_)), "{e}");
    assert!(
        e.to_string().starts_with("not a valid WebAssembly module"),
        "{e}"
    );
}

#[test]
fn a_module_missing_run_or_memory() {
    let e = hostile(br#"(module (memory (export "memory") 1))"#, read_ctx());
    assert!(
        e.to_string()
            .contains("does not export a function `run: () -> i32`"),
        "{e}"
    );
    let e = hostile(
        br#"(module (func (export "run") (result i32) (i32.const 0)))"#,
        read_ctx(),
    );
    assert!(
        e.to_string()
            .contains("does not export a linear memory named `memory`"),
        "{e}"
    );
    let e = hostile(br#"(module (memory (export "memory") 1) (func (export "run") (param i32) (result i32) (i32.const 0)))"#, read_ctx());
    assert!(matches!(e, TaskError::MissingExport { .. }), "{e}");
}

#[test]
fn a_module_importing_an_unknown_function() {
    let e = hostile(
        br#"(module (import "csd_v1" "format_disk" (func)) (memory (export "memory") 1)
                    (func (export "run") (result i32) (i32.const 0)))"#,
        read_ctx(),
    );
    assert!(
        matches!(&e, TaskError::UnknownImport { name, .. } if name == "format_disk"),
        "{e}"
    );
    assert!(e.to_string().contains("`csd_v1.format_disk`"), "{e}");
    let e = hostile(
        br#"(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
                    (memory (export "memory") 1) (func (export "run") (result i32) (i32.const 0)))"#,
        read_ctx(),
    );
    assert!(
        e.to_string().contains("wasi_snapshot_preview1.fd_write"),
        "{e}"
    );
}

#[test]
fn a_panic_message_reaches_the_error() {
    let e = hostile(
        &module(
            r#"(func (export "run") (result i32) (call $panic (i32.const 16) (i32.const 52)) (i32.const 0))"#,
        ),
        read_ctx(),
    );
    assert_eq!(
        e.to_string(),
        "task panicked: index out of bounds: the len is 3 but the index is 7"
    );
}

#[test]
fn a_failing_task_reports_its_code_and_message() {
    let e = hostile(
        &module(
            r#"(func (export "run") (result i32) (call $fail (i32.const 100) (i32.const 25)) (i32.const 3))"#,
        ),
        read_ctx(),
    );
    assert_eq!(
        e.to_string(),
        "task failed (run returned 3): pattern must not be empty"
    );
}

#[test]
fn unknown_and_malformed_paths_are_refused_before_running() {
    let (mut csd, copy) = setup();
    let e = csd
        .run(&copy, &IscContext::new().file("/nope", FileMode::Read))
        .unwrap_err();
    assert_eq!(e.to_string(), "no such file '/nope' on the device");
    let e = csd
        .run(
            &copy,
            &IscContext::new().file("relative/path", FileMode::Write),
        )
        .unwrap_err();
    assert!(e.to_string().contains("not a valid device path"), "{e}");
    still_serving(&mut csd, &copy);
}

#[test]
fn compiled_modules_are_cached_on_disk_and_bad_cache_files_ignored() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("cache");
    let config = EngineConfig {
        cache_dir: Some(dir.clone()),
        ..EngineConfig::default()
    };
    let first = TaskEngine::new(config.clone()).unwrap();
    first.load("copy", COPY.as_bytes()).unwrap();
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "one artifact written");
    // A fresh engine (a new process, in effect) loads from the cache and runs.
    let second = Arc::new(TaskEngine::new(config.clone()).unwrap());
    let task = second.load("copy", COPY.as_bytes()).unwrap();
    let profile = Profile::load("daisyplus-femu").unwrap();
    let mut csd = Csd::new(&profile, DataMode::Payloads, second).unwrap();
    csd.import("/data/in.txt", INPUT).unwrap();
    assert_eq!(csd.run(&task, &read_ctx()).unwrap().ret, INPUT);
    // A file csd did not write is never deserialized: the module is recompiled instead.
    std::fs::write(&files[0], b"not an artifact csd wrote").unwrap();
    let third = TaskEngine::new(config).unwrap();
    third.load("copy", COPY.as_bytes()).unwrap();
    assert!(
        std::fs::read(&files[0]).unwrap().starts_with(b"CSDCWASM"),
        "rewritten"
    );
}

#[test]
fn host_calls_from_the_start_function_are_served_or_refused_not_crashing() {
    // A `start` function runs during instantiation, before `run`: its host calls must work
    // like any other (here: a panic with a message) and never crash the host.
    let e = hostile(
        &module(
            r#"(func $boot (call $panic (i32.const 16) (i32.const 5)))
                   (start $boot)
                   (func (export "run") (result i32) (i32.const 0))"#,
        ),
        read_ctx(),
    );
    assert_eq!(e.to_string(), "task panicked: index");
}

#[test]
fn a_gigantic_log_message_is_cut_not_copied_whole() {
    let (mut csd, copy) = setup();
    let task = engine()
        .load(
            "logger",
            br#"(module (import "csd_v1" "log" (func $log (param i32 i32)))
                (memory (export "memory") 256)
                (func (export "run") (result i32) (call $log (i32.const 0) (i32.const 16777216)) (i32.const 0)))"#,
        )
        .unwrap();
    let r = csd.run(&task, &IscContext::new()).unwrap();
    assert_eq!(r.logs.len(), 1);
    assert_eq!(r.logs[0].len(), 4096, "cut to the 4 KiB line limit");
    still_serving(&mut csd, &copy);
}

/// The on-demand allocator (what a process under `ulimit -v` falls back to) also refuses a
/// module with a second memory, as the pool's one-memory slots do, and a healthy task burns
/// the same fuel on it as in the pool (every hostile case above runs under both).
#[test]
fn the_on_demand_allocator_holds_tasks_to_the_pools_limits() {
    let on_demand = on_demand_engine();
    let (mut csd, copy) = setup_on(on_demand.clone());
    let two = r#"(module (memory (export "memory") 1) (memory 1)
        (func (export "run") (result i32) (i32.const 0)))"#;
    for engine in [engine(), on_demand] {
        let (mut csd, _) = setup_on(engine.clone());
        if let Ok(task) = engine.load("two-memories", two.as_bytes()) {
            csd.run(&task, &read_ctx())
                .expect_err("a second memory is refused");
        }
    }
    let here = csd.run(&copy, &read_ctx()).unwrap();
    assert_eq!(here.ret, INPUT);
    let (mut pooled, pooled_copy) = setup();
    let there = pooled.run(&pooled_copy, &read_ctx()).unwrap();
    assert_eq!(here.fuel, there.fuel);
    assert_eq!(csd.export("/data/in.txt").unwrap(), INPUT);
}
