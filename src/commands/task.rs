//! `csd run`, `csd tasks`, `csd task build`: in-storage tasks from the command line.

use crate::units::{fmt_bytes, thousands, us};
use anyhow::{bail, Context as _};
use csd::builtin::BUILTIN_TASKS;
use csd_device::{DataMode, Profile};
use csd_runtime::{Csd, EngineConfig, ExecMode, FileMode, IscContext, TaskEngine, TaskLimits};
use csd_traces::report::{Report, TaskRun};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// A built-in task name (see `csd tasks`) or a path to a .wasm (or .wat) module.
    pub task: String,
    /// A host file or directory to import into the device (directories recursively); may
    /// be given more than once. Symbolic links are not followed (they are counted and named
    /// as skipped) unless `--follow-links`.
    #[arg(long)]
    pub import: Vec<PathBuf>,
    /// Follow symbolic links met while importing a directory.
    #[arg(long)]
    pub follow_links: bool,
    /// Where the imported files go on the device.
    #[arg(long, default_value = "/data")]
    pub path: String,
    /// Register one more device file, as PATH:MODE with MODE r, w or rw (e.g. /out/bits:w).
    #[arg(long = "file", value_name = "PATH:MODE")]
    pub files: Vec<String>,
    /// Arguments handed to the task (tasks in tasks/ take JSON).
    #[arg(long, default_value = "")]
    pub args: String,
    /// Hand the task this file's bytes as its arguments instead (for tasks that take binary
    /// arguments, such as knn-bin's query of 128 little-endian f32; at most 16 MiB).
    #[arg(long, value_name = "PATH", conflicts_with = "args")]
    pub args_file: Option<PathBuf>,
    /// Device profile; the default is the LightFS testbed with its calibrated CPU and Grep-ACC.
    #[arg(long, short, default_value = "cosmos-plus")]
    pub profile: String,
    /// Compute budget in fuel (about one unit per Wasm instruction).
    #[arg(long, default_value_t = TaskLimits::default().fuel)]
    pub fuel: u64,
    /// Linear-memory cap for the task [default: the profile's device DRAM].
    #[arg(long, value_parser = crate::units::parse_size)]
    pub memory: Option<u64>,
    /// Real seconds the task may run before it is stopped: a backstop behind the fuel budget.
    #[arg(long, default_value_t = TaskLimits::default().wall_clock_ms / 1000)]
    pub wall_clock_s: u64,
    /// Copy the files the task could write back to this host directory afterwards.
    #[arg(long)]
    pub export: Option<PathBuf>,
    /// How the task reaches its files: tx (a TxISC transaction: all its writes or none),
    /// file (FileISC: writes land at once) or block (BlockISC: offsets are raw device bytes).
    #[arg(long, default_value = "tx")]
    pub exec: ExecMode,
    /// Run the same task code on the host CPU instead, its I/O over NVMe and PCIe (the
    /// host-only baseline; needs a profile that characterises its host CPU, such as
    /// daisyplus-femu).
    #[arg(long, conflicts_with = "exec")]
    pub on_host: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

#[derive(clap::Subcommand, Debug)]
pub enum TaskCmd {
    /// Build a task crate to WebAssembly (cargo build --release --target wasm32-unknown-unknown).
    Build {
        /// The task crate's directory (holding its Cargo.toml).
        dir: PathBuf,
    },
    /// Keep a task module in the run store under NAME, so `csd run NAME`, `csd ndp --app
    /// NAME`, a trace's `ndp`/`isc` ops and the dashboard can name it.
    ///
    /// The module is kept by content: adding another under the same name moves the name,
    /// and runs that used the old module still find it by its id.
    Add {
        name: String,
        /// The module (.wasm, or .wat text).
        file: PathBuf,
        #[arg(long, value_name = "PATH")]
        store: Option<PathBuf>,
    },
}

pub fn task_cmd(cmd: &TaskCmd) -> anyhow::Result<()> {
    match cmd {
        TaskCmd::Build { dir } => build(dir),
        TaskCmd::Add { name, file, store } => add(name, file, store.clone()),
    }
}

/// `csd task add`: checks that the module loads as a task, then stores it.
fn add(name: &str, file: &Path, store: Option<PathBuf>) -> anyhow::Result<()> {
    let valid_name = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !csd::tasks::is_path(name);
    if !valid_name {
        bail!(
            "'{name}' cannot name a task: use up to 64 letters, digits, '-', '_' or '.', not \
             ending in .wasm or .wat"
        );
    }
    if csd::builtin::task(name).is_some() {
        bail!("'{name}' is a built-in task's name; choose another");
    }
    let wasm = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    engine()?
        .load(name, &wasm)
        .with_context(|| format!("{} is not a task module csd can run", file.display()))?;
    let args = super::runs::StoreArgs {
        store,
        no_store: false,
    };
    let kept = super::runs::open(&args)?.add_task(name, &wasm)?;
    println!(
        "kept task '{}' ({}, {}) in {}",
        kept.name,
        fmt_bytes(kept.bytes),
        kept.id,
        args.path().display()
    );
    Ok(())
}

/// This thread's task engine, made on first use and kept for the thread's life.
///
/// Why kept: an engine reserves its pool of instance slots, starts its epoch thread and
/// reads each module's compiled artifact from the disk cache, milliseconds a sweep's worker
/// paid again for every point. Why per thread and not per process: each engine's pool has
/// [`EngineConfig::pool_slots`] slots, so threads running experiments side by side (`csd
/// repro`) never wait for, or run out of, one another's slots. Results do not depend on
/// which engine runs a task: fuel, and so virtual time, is a property of the module.
pub fn engine() -> anyhow::Result<Arc<TaskEngine>> {
    thread_local! {
        static ENGINE: std::cell::OnceCell<Arc<TaskEngine>> = const { std::cell::OnceCell::new() };
    }
    ENGINE.with(|cell| {
        if let Some(e) = cell.get() {
            return Ok(e.clone());
        }
        let e = Arc::new(TaskEngine::new(EngineConfig::default())?);
        Ok(cell.get_or_init(|| e).clone())
    })
}

// Long: the steps of `csd run` in order (resolve, import, register, run, export, print, save),
// each short.
pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    let profile = Profile::load(&args.profile)?;
    if args.on_host && profile.host.cpu_ns_per_fuel.is_none() {
        let able: Vec<String> = Profile::builtin()
            .into_iter()
            .filter(|p| p.host.cpu_ns_per_fuel.is_some())
            .map(|p| p.name)
            .collect();
        bail!(
            "--on-host needs a profile that characterises its host CPU (host.cpu_ns_per_fuel), \
             and '{}' does not (its paper gives no host CPU cost to calibrate one from); built-in \
             profiles that do: {}",
            profile.name,
            able.join(", ")
        );
    }
    args.store.check()?;
    let max_memory = EngineConfig::default().max_memory_bytes;
    if let Some(m) = args.memory.filter(|&m| m > max_memory) {
        bail!(
            "--memory {}: over the largest task memory csd supports ({}; a task's memory is 32-bit Wasm)",
            fmt_bytes(m),
            fmt_bytes(max_memory)
        );
    }
    let stored = super::runs::stored_tasks(&args.store);
    let resolved = csd::tasks::resolve(&args.task, &stored, csd::tasks::Paths::Allowed)?;
    let name = resolved.name.clone();
    let engine = engine()?;
    let task = engine
        .load(&name, &resolved.wasm)
        .with_context(|| format!("loading task '{}'", args.task))?;
    let mut csd = Csd::new(&profile, DataMode::Payloads, engine)?;
    let mut ctx = IscContext::new();
    let mut registered = Vec::new();
    let mut imported = std::collections::BTreeMap::new();
    for dir in &args.import {
        let before = registered.len();
        for (host, device) in import_plan(dir, &args.path, args.follow_links)? {
            if let Some(first) = imported.insert(device.clone(), host.clone()) {
                bail!(
                    "--import: {} and {} both land at {device}; import them under different --path",
                    first.display(),
                    host.display()
                );
            }
            let data =
                std::fs::read(&host).with_context(|| format!("reading {}", host.display()))?;
            csd.import(&device, &data)
                .with_context(|| format!("importing {} as {device}", host.display()))?;
            ctx = ctx.file(device.clone(), FileMode::Read);
            registered.push((device, FileMode::Read));
        }
        if registered.len() == before {
            bail!("{} holds no files to import", dir.display());
        }
    }
    for spec in &args.files {
        let (path, mode) = spec
            .rsplit_once(':')
            .with_context(|| format!("--file {spec}: expected PATH:MODE, e.g. /out/result:w"))?;
        let mode: FileMode = mode
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--file {spec}: {e}"))?;
        ctx = ctx.file(path, mode);
        registered.push((path.to_string(), mode));
    }
    let task_args = match &args.args_file {
        Some(path) => read_args_file(path)?,
        None => args.args.clone().into_bytes(),
    };
    ctx = ctx.args(task_args).limits(TaskLimits {
        fuel: args.fuel,
        memory_bytes: args.memory,
        wall_clock_ms: args.wall_clock_s.saturating_mul(1000),
        ..TaskLimits::default()
    });
    ctx = if args.on_host {
        ctx.on_host()
    } else {
        ctx.exec(args.exec)
    };
    let report = csd
        .run(&task, &ctx)
        .with_context(|| format!("running task '{}' on profile '{}'", name, profile.name))?;
    if let Some(dir) = &args.export {
        for (path, _) in registered.iter().filter(|(_, m)| m.writable()) {
            let host = dir.join(path.trim_start_matches('/'));
            if let Some(parent) = host.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let file = std::fs::File::create(&host)
                .with_context(|| format!("creating {}", host.display()))?;
            csd.export_to(path, &file)
                .with_context(|| format!("exporting {path} to {}", host.display()))?;
        }
    }
    let result = report
        .ret_json()
        .unwrap_or_else(|_| shown_result(&report.ret));
    let out = TaskRun {
        profile: profile.name.clone(),
        files: registered.iter().map(|f| f.0.clone()).collect(),
        result: result.clone(),
        latency_ns: report.latency_ns(),
        report: report.clone(),
    };
    let stored = csd_traces::store::NewRun {
        spec: None,
        trace: None,
        profile: profile.name.clone(),
        designs: vec![name.clone()],
        seed: 0,
        report: Report::Task(out.clone()),
        sweep: None,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return args.store.save_and_say(stored);
    }
    let read_bytes: u64 = registered
        .iter()
        .filter_map(|(p, _)| csd.volume().layout(p).ok())
        .map(|l| l.size_bytes)
        .sum();
    let placement = if args.on_host {
        "host-only".to_string()
    } else {
        match report.exec {
            ExecMode::Tx => "a transaction, committed".to_string(),
            other => format!("{} mode", other.name()),
        }
    };
    println!(
        "csd run {}: profile {}, {} file(s), {}, as {placement}",
        name,
        profile.name,
        registered.len(),
        fmt_bytes(read_bytes)
    );
    // The task sees its files as handles, in this order: results listed per file (grep's
    // `files`, checksum's) follow it.
    const NAMED: usize = 8;
    let mut names: Vec<String> = registered
        .iter()
        .take(NAMED)
        .enumerate()
        .map(|(i, (p, _))| format!("{i} {p}"))
        .collect();
    if registered.len() > NAMED {
        names.push(format!(
            "… and {} more (--json lists all)",
            registered.len() - NAMED
        ));
    }
    println!("  files    {}", names.join(" · "));
    println!();
    let compact = serde_json::to_string(&result)?;
    let shown = if compact.len() <= 90 {
        compact
    } else {
        serde_json::to_string_pretty(&result)?.replace('\n', "\n           ")
    };
    println!("  result   {shown}");
    for line in &report.logs {
        println!("  log      {line}");
    }
    println!();
    let b = &report.breakdown;
    println!("  latency  {} µs", us(report.latency_ns()));
    println!(
        "  stages   read_file {}  compute {}  write {}  dma {}  others {}  (µs)",
        us(b.read_file_ns),
        us(b.compute_ns),
        us(b.write_ns),
        us(b.dma_ns),
        us(b.others_ns)
    );
    let (cpu, ns_per_fuel) = match profile.host.cpu_ns_per_fuel {
        Some(host) if args.on_host => ("the host CPU".to_string(), host),
        _ => (
            profile.device_cpu.model.clone(),
            profile.device_cpu.ns_per_fuel,
        ),
    };
    println!(
        "  compute  {} fuel on {cpu} ({ns_per_fuel} ns/fuel)",
        thousands(report.fuel),
    );
    args.store.save_and_say(stored)
}

/// `(host file, device path)` pairs for importing `src` under `device_dir`, sorted by path so
/// imports (and so device layouts and timings) are deterministic.
fn import_plan(
    src: &Path,
    device_dir: &str,
    follow_links: bool,
) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let base = device_dir.trim_end_matches('/');
    let meta = std::fs::metadata(src).with_context(|| format!("--import {}", src.display()))?;
    if meta.is_file() {
        let name = src
            .file_name()
            .context("--import: file has no name")?
            .to_string_lossy();
        return Ok(vec![(src.to_path_buf(), format!("{base}/{name}"))]);
    }
    use std::os::unix::fs::MetadataExt;
    let mut plan = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    // Directories already walked, by (device, inode): a symlink back up the tree is a cycle
    // that would otherwise never end.
    let mut walked = std::collections::HashSet::new();
    let mut links = Vec::new();
    while let Some(dir) = stack.pop() {
        let meta = std::fs::metadata(&dir).with_context(|| format!("reading {}", dir.display()))?;
        if !walked.insert((meta.dev(), meta.ino())) {
            tracing::warn!(dir = %dir.display(), "--import: skipping a directory already imported (a symlink cycle?)");
            continue;
        }
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let entry = entry?;
            let path = entry.path();
            // A link can lead anywhere (`/etc`, `/`): taken only when asked.
            if entry.file_type()?.is_symlink() && !follow_links {
                links.push(path);
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if path.is_file() {
                let rel = path.strip_prefix(src).expect("below the import root");
                let rel = rel
                    .to_string_lossy()
                    .replace(std::path::MAIN_SEPARATOR, "/");
                plan.push((path, format!("{base}/{rel}")));
            }
        }
    }
    if !links.is_empty() {
        links.sort();
        let shown: Vec<String> = links
            .iter()
            .take(5)
            .map(|l| l.display().to_string())
            .collect();
        eprintln!(
            "csd: --import skipped {} symbolic link(s) ({}{}); --follow-links follows them",
            links.len(),
            shown.join(", "),
            if links.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        );
    }
    plan.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(plan)
}

pub fn list(json: bool, store: &super::runs::StorePath) -> anyhow::Result<()> {
    let stored = super::runs::open(&store.args())?.tasks()?;
    if json {
        let rows: Vec<_> = BUILTIN_TASKS
            .iter()
            .map(|t| {
                serde_json::json!({ "name": t.name, "origin": "built-in",
                    "description": t.description, "args": t.args, "wasm_bytes": t.wasm.len() })
            })
            .chain(stored.iter().map(|t| {
                serde_json::json!({ "name": t.name, "origin": "stored", "id": t.id,
                    "wasm_bytes": t.bytes })
            }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!("built in:");
    for t in BUILTIN_TASKS {
        println!(
            "  {:<18} {:>10}  {}",
            t.name,
            fmt_bytes(t.wasm.len() as u64),
            t.description
        );
        if !t.args.is_empty() {
            println!("  {:<29}  args: {}", "", t.args);
        }
    }
    println!("(a task's args go to csd run --args as JSON; tasks without a line take none)");
    if stored.is_empty() {
        println!(
            "kept in {}: none yet (csd task add NAME FILE)",
            store.path().display()
        );
    } else {
        println!("kept in {}:", store.path().display());
        for t in &stored {
            println!("  {:<18} {:>10}  {}", t.name, fmt_bytes(t.bytes), t.id);
        }
    }
    Ok(())
}

fn build(dir: &Path) -> anyhow::Result<()> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.exists() {
        bail!(
            "{} has no Cargo.toml: give the directory of a task crate",
            dir.display()
        );
    }
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-unknown-unknown",
            "--message-format=json-render-diagnostics",
            "--manifest-path",
        ])
        .arg(&manifest)
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            crate::task_rustflags::TASK_RUSTFLAGS,
        )
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo (is Rust installed?)")?;
    if !output.status.success() {
        let target_missing = Command::new("rustc")
            .args([
                "--print",
                "target-libdir",
                "--target",
                "wasm32-unknown-unknown",
            ])
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .is_none_or(|d| !Path::new(d.trim()).exists());
        if target_missing {
            bail!("the wasm32-unknown-unknown target is not installed: run `rustup target add wasm32-unknown-unknown`");
        }
        bail!(
            "building {} failed (see cargo's errors above)",
            dir.display()
        );
    }
    let mut built = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact" {
            for f in msg["filenames"].as_array().into_iter().flatten() {
                if let Some(f) = f.as_str().filter(|f| f.ends_with(".wasm")) {
                    built.push(f.to_string());
                }
            }
        }
    }
    if built.is_empty() {
        bail!("cargo built no .wasm: is the crate a cdylib (`[lib] crate-type = [\"cdylib\"]`)?");
    }
    for f in built {
        println!("{f}");
    }
    Ok(())
}

/// The most bytes `--args-file` hands a task: arguments are copied into the task's memory,
/// so a file of any size must not be.
const MAX_ARGS_FILE_BYTES: u64 = 16 << 20;

fn read_args_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    match csd::tasks::read_at_most(path, MAX_ARGS_FILE_BYTES)
        .with_context(|| format!("reading the task's arguments from {}", path.display()))?
    {
        Some(bytes) => Ok(bytes),
        None => bail!(
            "{} is larger than {} (--args-file hands its bytes to the task's memory)",
            path.display(),
            fmt_bytes(MAX_ARGS_FILE_BYTES)
        ),
    }
}

/// The bytes most of a binary result shows as hex.
const SHOWN_BINARY_BYTES: usize = 4096;

/// A result that is not JSON: its text, or, when it is not text either (a binary result
/// such as knn-bin's), its length and its bytes in hex (the first 4 KiB of a longer one).
fn shown_result(ret: &[u8]) -> serde_json::Value {
    if let Ok(text) = std::str::from_utf8(ret) {
        return serde_json::Value::String(text.to_string());
    }
    let shown = &ret[..ret.len().min(SHOWN_BINARY_BYTES)];
    let mut hex = String::with_capacity(2 * shown.len() + 3);
    for b in shown {
        let _ = write!(hex, "{b:02x}");
    }
    serde_json::json!({
        "binary_bytes": ret.len(),
        "hex": if shown.len() < ret.len() { format!("{hex}…") } else { hex },
    })
}

#[cfg(test)]
mod tests {
    use super::engine;
    use std::sync::Arc;

    #[test]
    fn a_thread_keeps_its_engine_and_threads_do_not_share_one() {
        let first = engine().unwrap();
        assert!(
            Arc::ptr_eq(&first, &engine().unwrap()),
            "made again on one thread"
        );
        let other = std::thread::spawn(|| engine().map(|e| Arc::as_ptr(&e) as usize))
            .join()
            .unwrap()
            .unwrap();
        assert_ne!(other, Arc::as_ptr(&first) as usize, "shared across threads");
    }
}
