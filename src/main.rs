//! `csd`: the one entry point of csdlab.

mod commands;
mod scratch;
mod task_rustflags;
mod units;

use clap::{Parser, Subcommand};
use commands::{
    bench, crashcheck, device, fusion, ispfs, memory, ndp, persist, profiles, replay, repro, runs,
    serve, sweep, sweep_worker, task, trace, txapps, txbench,
};
use std::process::ExitCode;

/// csdlab: try an in-storage computing idea before you own a programmable SSD.
///
/// csd simulates a computational SSD in virtual time (NAND geometry and timing, page-level
/// FTL with GC, a device CPU running WebAssembly tasks) so the same command and seed always
/// print the same numbers.
///
/// Run without a command, csd runs its main job: `csd replay grep-src.trace --offload
/// grep-src.plan.toml --design all,host`, which replays a recorded grep over a source tree
/// with its scans offloaded under every design, compares them with the host alone, and
/// saves the run.
/// Logs go to stderr, filtered by RUST_LOG (e.g. RUST_LOG=csd_device=debug).
#[derive(Parser, Debug)]
#[command(name = "csd", version, about, long_about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the device profiles (built in, then those kept in the run store) with their key
    /// figures; `show` prints one's TOML, `add` keeps your own.
    ///
    /// To make your own: csd profiles show cosmos-plus > mine.toml, edit its `name` and
    /// values, then csd profiles add mine.toml (or name the file with --profile).
    Profiles {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: runs::StorePath,
        #[command(subcommand)]
        cmd: Option<profiles::ProfilesCmd>,
    },
    /// Drive the device model directly.
    #[command(subcommand)]
    Device(DeviceCmd),
    /// Run an in-storage task (Wasm) on files imported into the simulated device.
    ///
    /// Example: csd run grep --import ./logs --path /logs --args '{"pattern":"ERROR"}'
    ///
    /// With CSD_PERFMAP=1, `perf record` and `perf report` name the task's own functions.
    Run(task::RunArgs),
    /// Compare frag-s, frag-m, FSR and LightFS offloading one NDP operation (LightFS §IV).
    ///
    /// Prints per design the mean per-file latency, its breakdown, PAO and LightFS's speedup.
    ///
    /// Example: csd ndp --profile cosmos-plus --app stats64 --files 100 --size 16k --cold
    Ndp(ndp::NdpArgs),
    /// Replay a trace through the host file system, the device and each offload design.
    ///
    /// Without a trace, replays the bundled sample (unpacking a source tarball).
    /// Example: csd replay build.trace --profile cosmos-plus --design frag-s,lightfs --json
    Replay(replay::ReplayArgs),
    /// The dashboard: stored runs, latency breakdowns with PAO, comparisons, live replays.
    ///
    /// Serves on loopback by default; open the printed address in a browser.
    /// Example: csd serve --addr 127.0.0.1:7878
    Serve(serve::ServeArgs),
    /// The run store: list, show, compare, rerun, export, import and delete saved runs.
    #[command(subcommand)]
    Runs(runs::RunsCmd),
    /// Record, convert and check file-system and block traces.
    #[command(subcommand)]
    Trace(trace::TraceCmd),
    /// Run a grid of replays or NDP requests (traces or tasks × profiles × designs × seeds),
    /// one worker per core, each point saved as a run tagged with the sweep.
    ///
    /// Running the same spec again runs only the points not yet stored, so a sweep that was
    /// cut off resumes. `--shard I/N` runs a slice of the grid for a cluster's job array;
    /// `csd runs export`/`import` merge the slices. The dashboard draws a sweep at
    /// /sweeps/NAME.
    /// Example: csd sweep examples/sweep.toml --jobs 2
    Sweep(sweep::SweepArgs),
    /// A `csd sweep` worker process: runs the points its parent sends on stdin.
    #[command(hide = true)]
    SweepWorker(sweep_worker::WorkerArgs),
    /// List the tasks a run can name: the built-in examples and those kept in the run store.
    Tasks {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: runs::StorePath,
    },
    /// Build your own task crates, and keep their modules in the run store by name.
    #[command(subcommand)]
    Task(task::TaskCmd),
    /// TxISC's transaction overhead: in-storage random file I/O under tx, file and block modes.
    ///
    /// Sweeps write ratio and queue depth with flash timing on, then again with flash timing
    /// off (the firmware's own work and the backing store's copies), both in virtual time;
    /// last, times the simulator itself on this machine at QD 1 (--no-cpu skips it). The run is
    /// saved in the run store.
    /// Example: csd txbench --writes 0,50,100 --qd 1,32
    Txbench(txbench::TxbenchArgs),
    /// TxISC's application case studies: bitmap decompression, BFS and LSM compaction as
    /// transactions, as FileISC tasks and host-only.
    ///
    /// Example: csd txapps --app compact --scale 0.25
    Txapps(txapps::TxappsArgs),
    /// SIFT's split persistence path: the online pressure benchmark and manual-checkpoint
    /// backlogs, under vanilla, offload and coalesce.
    #[command(subcommand)]
    Persist(persist::PersistCmd),
    /// Crash-check TxISC's transactions and SIFT's persistence path.
    ///
    /// Seeded workloads are crashed at every durable write (in order, or reordered and torn
    /// between fences), recovered, and compared with an oracle. Exits 1 if any crash state
    /// recovers wrongly.
    ///
    /// Example: csd crashcheck sift --seed 7 --ops 300 --model reorder-torn
    Crashcheck(crashcheck::CrashcheckArgs),
    /// Re-measure the papers' headline figures and compare each with the paper.
    ///
    /// Runs the experiments behind LightFS's, TxISC's, SIFT's, ISPFS's and FusionFS's figures
    /// (scaled down where it says so) and prints, per figure, the paper's value, ours, the
    /// ratio and ✓ (within ±15 %, or the paper's trend), ✗ or `input` (the paper's value is an
    /// input of the model). The run is saved with a run per experiment.
    ///
    /// Example: csd repro lightfs --json; csd repro --explain lightfs.fig3b
    Repro(repro::ReproArgs),
    /// FusionFS's comparison: five file-system designs on one Optane medium, throughput per
    /// thread count.
    ///
    /// kernel-dax (ext4-DAX), nova, user-direct (SplitFS), firmware (CrossFS: one device
    /// request per call) and fusion (one CISC op per sequence, processing on the device), with
    /// fast (2.7 GHz) and slow (1.2 GHz) device cores. Costs come from the profile and from
    /// running the ops on StorageFS with the Wasm stages.
    ///
    /// Example: csd fusion --workload read-modify-write --threads 1,4,16
    Fusion(fusion::FusionArgs),
    /// ISPFS's evaluation on its PCM board: the ISP engine through a directory's command file
    /// against software on the host.
    ///
    /// Example: csd ispfs query --sizes 0.1m,1m,10m,100m
    Ispfs(ispfs::IspfsArgs),
    /// Measure the speed and memory of the model itself.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
}

#[derive(Subcommand, Debug)]
enum DeviceCmd {
    /// Run a fio-like synthetic workload: IOPS, bandwidth, latency percentiles, WAF, GC.
    ///
    /// Latencies are kept in HDR histograms with 3 significant digits, so memory does not
    /// grow with the run: count, mean, min and max are exact, and each percentile is at most
    /// 0.1 % above the exact nearest-rank value. `--latency-log FILE` writes every request's
    /// latency as well, as fio's latency log does.
    ///
    /// Example: csd device run --profile daisyplus-femu --rw randwrite --bs 16k --qd 32 --size 4g
    Run(device::RunArgs),
}

/// Commands that build and drop one device after another, or a StorageFS log after another,
/// keep freed memory for the next (`memory::keep_freed_memory` says why, and why the others
/// do not).
fn churns_memory(command: &Option<Command>) -> bool {
    matches!(
        command,
        Some(
            Command::Ndp(_)
                | Command::Sweep(_)
                | Command::SweepWorker(_)
                | Command::Txbench(_)
                | Command::Repro(_)
                | Command::Bench(bench::BenchCmd::Cisc(_))
        )
    )
}

fn main() -> ExitCode {
    // Like any Unix filter, stop quietly when the reader goes away (`csd replay | head`)
    // instead of panicking on a broken pipe.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colours only for a terminal: piped or redirected logs stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    if churns_memory(&cli.command) {
        memory::keep_freed_memory();
    }
    let result = match &cli.command {
        None => {
            eprintln!(
                "csd: running the default job (`csd replay {} --offload {} --design all,host`: \
                 a recorded grep over a source tree, its scans offloaded under each design and \
                 kept on the host); see `csd --help`",
                replay::MAIN_TRACE,
                replay::MAIN_PLAN
            );
            replay::run(&default_replay_args())
        }
        Some(Command::Profiles {
            cmd: None,
            json,
            store,
        }) => profiles::run(*json, store),
        Some(Command::Profiles {
            cmd: Some(profiles::ProfilesCmd::Add { file, store }),
            ..
        }) => profiles::add(file, store),
        Some(Command::Profiles {
            cmd: Some(profiles::ProfilesCmd::Show { name, store }),
            ..
        }) => profiles::show(name, store),
        Some(Command::Device(DeviceCmd::Run(args))) => device::run(args),
        Some(Command::Run(args)) => task::run(args),
        Some(Command::Ndp(args)) => ndp::run(args),
        Some(Command::Trace(cmd)) => trace::run(cmd),
        Some(Command::Replay(args)) => match args.serve {
            Some(addr) => serve::replay_and_serve(args, addr),
            None => replay::run(args),
        },
        Some(Command::Serve(args)) => serve::run(args),
        Some(Command::Runs(cmd)) => runs::run(cmd),
        Some(Command::Sweep(args)) => sweep::run(args),
        Some(Command::SweepWorker(args)) => sweep_worker::run(args),
        Some(Command::Tasks { json, store }) => task::list(*json, store),
        Some(Command::Task(cmd)) => task::task_cmd(cmd),
        Some(Command::Bench(cmd)) => bench::run(cmd),
        Some(Command::Crashcheck(args)) => crashcheck::run(args),
        Some(Command::Txbench(args)) => txbench::run(args),
        Some(Command::Fusion(args)) => fusion::run(args),
        Some(Command::Ispfs(args)) => ispfs::run(args),
        Some(Command::Repro(args)) => repro::run(args),
        Some(Command::Txapps(args)) => txapps::run(args),
        Some(Command::Persist(cmd)) => persist::run_cmd(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The main job: `csd replay` of the bundled program with its offload plan, every other
/// option at its default.
fn default_replay_args() -> replay::ReplayArgs {
    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: replay::ReplayArgs,
    }
    let mut args = Wrapper::parse_from(["csd"]).args;
    args.trace = Some(replay::MAIN_TRACE.into());
    args.offload = Some(replay::MAIN_PLAN.into());
    // The offload designs and the host-only baseline they are measured against.
    args.design = "all,host".into();
    args
}
