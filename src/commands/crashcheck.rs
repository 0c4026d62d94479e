//! `csd crashcheck`: crash-point enumeration of TxISC's transactions and SIFT's persistence
//! path, for the shipped protocols or one broken on purpose.

use anyhow::bail;
use csd_device::crash::{CrashModel, CrashReport};
use csd_device::persist::service::{Config, OrderFault};
use csd_device::txn::TxFault;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mechanism {
    Txisc,
    Sift,
    /// TxISC and SIFT (fusion runs on its own: its medium keeps writes in order).
    All,
    /// FusionFS's StorageFS: CISC ops under MacroTx and MicroTx, crashed at every durable
    /// step (persistent memory behind ADR keeps a prefix), recovered with the Wasm stages.
    Fusion,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Model {
    /// Writes persist in issue order (a power-loss-protected cache): every prefix.
    InOrder,
    /// Writes since the last fence persist in any subset (a volatile cache lost at power
    /// failure).
    Reorder,
    /// As reorder, and one write in flight may land torn (half old, half new).
    ReorderTorn,
}

impl Model {
    fn crash_model(self) -> CrashModel {
        match self {
            Model::InOrder => CrashModel::InOrder,
            Model::Reorder => CrashModel::Reorder { torn: false },
            Model::ReorderTorn => CrashModel::Reorder { torn: true },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// TxISC: persist the mappings before the commit timestamp.
    MappingsBeforeCommit,
    /// TxISC: record a delta mapping before its page is programmed.
    RecordBeforePage,
    /// SIFT: advance the ring tails before the checkpoint's replay is durable.
    ReclaimBeforeReplay,
    /// SIFT: acknowledge fsync without the flush after its commit block.
    AckBeforeFence,
    /// FusionFS: MicroTx marks a command done before its data is in place.
    DoneBeforeData,
    /// FusionFS: MacroTx writes in place before its commit record.
    ApplyBeforeCommit,
}

#[derive(clap::Args, Debug)]
pub struct CrashcheckArgs {
    /// Which mechanism to check.
    #[arg(value_enum, default_value = "all")]
    pub mechanism: Mechanism,
    /// The first workload seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// How many seeded workloads (seed, seed + 1, …).
    #[arg(long, default_value_t = 30)]
    pub seeds: u64,
    /// Operations per workload [default: 400 for txisc, 150 for sift, 50 for fusion].
    #[arg(long)]
    pub ops: Option<usize>,
    /// What a power failure may do to writes in flight [default: reorder-torn; fusion:
    /// in-order, the only model of its persistent-memory medium].
    #[arg(long, value_enum)]
    pub model: Option<Model>,
    /// SIFT configurations to check (comma-separated) [default: all three].
    #[arg(long, value_delimiter = ',', value_parser = parse_config)]
    pub config: Vec<Config>,
    /// Break the protocol's order on purpose, to see the checker catch it.
    #[arg(long, value_enum)]
    pub fault: Option<Fault>,
    /// Print the reports as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_config(s: &str) -> Result<Config, String> {
    match s {
        "vanilla" => Ok(Config::Vanilla),
        "offload" => Ok(Config::Offload),
        "coalesce" => Ok(Config::Coalesce),
        _ => Err(format!(
            "unknown configuration '{s}' (vanilla, offload or coalesce)"
        )),
    }
}

/// One mechanism and configuration, checked for one seed.
type SeedCheck = Box<dyn Fn(u64) -> CrashReport>;

/// Bounds on what one run may be asked to do (each crash state is a recovery).
const MAX_SEEDS: u64 = 10_000;
const MAX_OPS: usize = 100_000;

// Long: both crash checkers, seed by seed, with one progress bar and one report.
pub fn run(args: &CrashcheckArgs) -> anyhow::Result<()> {
    if args.mechanism == Mechanism::Fusion {
        return fusion(args);
    }
    if args.seeds == 0 || args.seeds > MAX_SEEDS {
        bail!("--seeds {}: give 1 to {MAX_SEEDS}", args.seeds);
    }
    if args.ops.is_some_and(|n| n == 0 || n > MAX_OPS) {
        bail!("--ops: give 1 to {MAX_OPS}");
    }
    let Some(last) = args.seed.checked_add(args.seeds) else {
        bail!("--seed {} + --seeds {} overflows", args.seed, args.seeds);
    };
    let (tx_fault, sift_fault) = match args.fault {
        None => (None, None),
        Some(Fault::MappingsBeforeCommit) => (Some(TxFault::MappingsBeforeCommit), None),
        Some(Fault::RecordBeforePage) => (Some(TxFault::RecordBeforePage), None),
        Some(Fault::ReclaimBeforeReplay) => (None, Some(OrderFault::ReclaimBeforeReplay)),
        Some(Fault::AckBeforeFence) => (None, Some(OrderFault::AckBeforeFence)),
        Some(Fault::DoneBeforeData | Fault::ApplyBeforeCommit) => {
            bail!(
                "--fault {:?} breaks FusionFS's order: check it with `csd crashcheck fusion`",
                args.fault.expect("matched")
            )
        }
    };
    let want_tx = matches!(args.mechanism, Mechanism::Txisc | Mechanism::All)
        && (args.fault.is_none() || tx_fault.is_some());
    let want_sift = matches!(args.mechanism, Mechanism::Sift | Mechanism::All)
        && (args.fault.is_none() || sift_fault.is_some());
    if !want_tx && !want_sift {
        bail!(
            "--fault {:?} breaks the other mechanism's protocol",
            args.fault.expect("a fault excluded both")
        );
    }
    let configs = if args.config.is_empty() {
        vec![Config::Vanilla, Config::Offload, Config::Coalesce]
    } else {
        args.config.clone()
    };
    let model = args.model.unwrap_or(Model::ReorderTorn).crash_model();
    let mut jobs: Vec<(String, SeedCheck)> = Vec::new();
    if want_tx {
        let ops = args.ops.unwrap_or(400);
        jobs.push((
            "txisc".into(),
            Box::new(move |s| csd_device::txn::crash::check(s..s + 1, ops, model, tx_fault)),
        ));
    }
    if want_sift {
        let ops = args.ops.unwrap_or(150);
        for config in configs {
            jobs.push((
                format!("sift {config:?}").to_lowercase(),
                Box::new(move |s| {
                    csd_device::persist::crash::check(config, s..s + 1, ops, model, sift_fault)
                }),
            ));
        }
    }
    let bar = indicatif::ProgressBar::new(args.seeds * jobs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} {bar:40} {pos}/{len} workloads")
            .expect("static template"),
    );
    let mut reports = Vec::new();
    for (name, job) in &jobs {
        bar.set_message(name.clone());
        let mut total: Option<CrashReport> = None;
        for seed in args.seed..last {
            let r = job(seed);
            bar.inc(1);
            total = Some(match total {
                None => r,
                Some(t) => merge(t, r),
            });
        }
        reports.push(total.expect("at least one seed"));
    }
    bar.finish_and_clear();
    let violations: u64 = reports.iter().map(|r| r.violations).sum();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        print(&reports);
    }
    if violations > 0 {
        bail!("{violations} crash state(s) recovered wrongly");
    }
    Ok(())
}

/// Two seeds' reports as one.
fn merge(mut a: CrashReport, b: CrashReport) -> CrashReport {
    a.seeds += b.seeds;
    a.points += b.points;
    a.violations += b.violations;
    if a.first_violation.is_none() {
        a.first_violation = b.first_violation;
    }
    for (k, v) in b.coverage {
        match a.coverage.iter_mut().find(|c| c.0 == k) {
            Some(c) => c.1 += v,
            None => a.coverage.push((k, v)),
        }
    }
    a
}

fn print(reports: &[CrashReport]) {
    if let Some(r) = reports.first() {
        println!(
            "crash check · {} seeded workload(s) each · crashes {}",
            r.seeds,
            r.model.describe()
        );
    }
    println!(
        "\n{:<8} {:<40} {:>6} {:>12} {:>11}  coverage",
        "", "configuration", "ops", "crash states", "violations"
    );
    for r in reports {
        let coverage: Vec<String> = r.coverage.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!(
            "{:<8} {:<40} {:>6} {:>12} {:>11}  {}",
            r.mechanism,
            r.config,
            r.ops_per_seed,
            r.points,
            r.violations,
            coverage.join(", ")
        );
    }
    for r in reports {
        let Some(v) = &r.first_violation else {
            continue;
        };
        println!(
            "\nfirst violation of {} {}: seed {}, after {} acknowledged operation(s)",
            r.mechanism, r.config, v.seed, v.acked
        );
        for s in &v.steps {
            println!("  {s}");
        }
        println!("  {}", v.crash);
        println!("  → {}", v.problem);
    }
}

/// `csd crashcheck fusion`: StorageFS's crash checker, with recovery times on optane-csd.
fn fusion(args: &CrashcheckArgs) -> anyhow::Result<()> {
    use csd_device::storagefs::crash::{enumerate, CrashPlan, GrainSummary, RecoveryCosts};
    use csd_device::storagefs::OrderFault as FsFault;
    let fault = match args.fault {
        None => None,
        Some(Fault::DoneBeforeData) => Some(FsFault::DoneBeforeData),
        Some(Fault::ApplyBeforeCommit) => Some(FsFault::ApplyBeforeCommit),
        Some(f) => bail!("--fault {f:?} breaks another mechanism's protocol, not FusionFS's"),
    };
    if args.seeds == 0 || args.seeds > MAX_SEEDS {
        bail!("--seeds {}: give 1 to {MAX_SEEDS}", args.seeds);
    }
    let ops = args.ops.unwrap_or(50);
    if ops == 0 || ops > MAX_OPS {
        bail!("--ops: give 1 to {MAX_OPS}");
    }
    if args.model.is_some_and(|m| m != Model::InOrder) {
        bail!("FusionFS's medium keeps writes in order (ADR): only --model in-order applies");
    }
    let profile = csd_device::Profile::load("optane-csd")?;
    let mut runner = csd_runtime::WasmStages::new(csd::builtin::STAGES)?;
    let plan = CrashPlan {
        seed: args.seed,
        runs: u32::try_from(args.seeds)?,
        ops: u32::try_from(ops)?,
        fault,
    };
    let report = enumerate(&plan, &RecoveryCosts::of(&profile), &mut runner)
        .map_err(|e| anyhow::anyhow!("the workload itself failed: {e}"))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "crash check · fusion · {} run(s) of {ops} CISC ops · crashes after every durable step (in order)",
            args.seeds
        );
        println!(
            "\n{:<8} {:>12} {:>11} {:>11} {:>10} {:>9} {:>14} {:>12}",
            "grain",
            "crash states",
            "violations",
            "recoveries",
            "redone",
            "finished",
            "mean recovery",
            "max recovery"
        );
        let row = |name: &str, g: &GrainSummary| {
            println!(
                "{:<8} {:>12} {:>11} {:>11} {:>10} {:>9} {:>11.2} µs {:>9.2} µs",
                name,
                g.points,
                g.violations,
                g.recoveries,
                g.recovery.redone,
                g.recovery.rolled_forward,
                g.mean_recovery_ns() / 1e3,
                g.max_recovery_ns as f64 / 1e3
            );
        };
        row("MacroTx", &report.macro_tx);
        row("MicroTx", &report.micro_tx);
        println!(
            "(MacroTx redoes committed ops from its journal; MicroTx finishes logged ops, re-running \
             {} commands with {} fuel of device compute; times on optane-csd)",
            report.micro_tx.recovery.commands_rerun, report.micro_tx.recovery.fuel
        );
        if let Some(v) = &report.first_violation {
            println!("\nfirst violation: {v}");
        }
    }
    if report.violations() > 0 {
        bail!("{} crash state(s) recovered wrongly", report.violations());
    }
    Ok(())
}
