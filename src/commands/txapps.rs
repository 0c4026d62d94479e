//! `csd txapps`: TxISC §V-C's application case studies (Fig. 4–5).

use anyhow::bail;
use csd::txapps::{measure, scaled_sizes, App, Placement};
use csd_device::Profile;
use csd_traces::report::{Report, Sizes, TxappsRun};
use csd_traces::spec::{SystemKind, SystemSpec};
use csd_traces::store::NewRun;

#[derive(clap::Args, Debug)]
pub struct TxappsArgs {
    /// Device profile (TxISC's testbed is daisyplus-femu; it characterises the host CPU).
    #[arg(long, default_value = "daisyplus-femu")]
    pub profile: String,
    /// Applications to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bitmap-decompress,bfs,compact",
        value_parser = clap::builder::TypedValueParser::try_map(
            clap::builder::PossibleValuesParser::new(App::ALL.map(App::task)),
            |s| s.parse::<App>(),
        ),
    )]
    pub app: Vec<App>,
    /// Input size relative to the paper's (16 MiB → 256 MiB bitmap, a LiveJournal-sized
    /// graph, 4 × 8 MiB runs).
    #[arg(long, default_value_t = 1.0 / 16.0)]
    pub scale: f64,
    /// The paper's sizes (same as --scale 1).
    #[arg(long, conflicts_with = "scale")]
    pub full: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

/// Runs each application under every placement: what `csd txapps` runs, `csd repro` too,
/// and `csd runs rerun` repeats.
pub fn measure_apps(
    profile: &Profile,
    sizes: Sizes,
    apps: &[App],
    seed: u64,
) -> anyhow::Result<TxappsRun> {
    let engine = super::task::engine()?;
    let mut runs = Vec::new();
    for &app in apps {
        runs.extend(measure(app, &sizes, profile, &engine, seed)?);
    }
    Ok(TxappsRun {
        profile: profile.name.clone(),
        sizes,
        seed,
        runs,
    })
}

pub fn run(args: &TxappsArgs) -> anyhow::Result<()> {
    let scale = if args.full { 1.0 } else { args.scale };
    if !(scale > 0.0 && scale <= 4.0) {
        bail!("--scale must be in (0, 4], got {scale}");
    }
    let profile = Profile::load(&args.profile)?;
    args.store.check()?;
    let sizes = scaled_sizes(scale);
    let report = measure_apps(&profile, sizes, &args.app, args.seed)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_tables(&report, scale);
    }
    let system = SystemKind::Txapps {
        sizes,
        apps: args.app.clone(),
    };
    args.store.save_and_say(NewRun {
        trace: None,
        profile: profile.name.clone(),
        designs: vec!["tx".into(), "file".into(), "host-only".into()],
        seed: args.seed,
        report: Report::Txapps(report),
        spec: Some(SystemSpec::new(profile, args.seed, system)),
        sweep: None,
    })
}

fn print_tables(report: &TxappsRun, scale: f64) {
    println!(
        "TxISC application case studies on {} (scale {scale}), Fig. 4–5",
        report.profile
    );
    println!(
        "\n{:<18} {:<10} {:>12} {:>10} {:>8} {:>9} {:>14}",
        "app", "placement", "time", "MB/s", "I/O", "compute", "vs host-only"
    );
    for runs in report.runs.chunks(3) {
        let host = runs
            .iter()
            .find(|r| r.placement == Placement::HostOnly)
            .map_or(1, |r| r.latency_ns);
        for r in runs {
            println!(
                "{:<18} {:<10} {:>12} {:>10.1} {:>7.0}% {:>8.0}% {:>13.2}×",
                r.app.task(),
                r.placement.name(),
                crate::units::fmt_duration(r.latency_ns),
                r.mb_per_s,
                r.io_share * 100.0,
                (1.0 - r.io_share) * 100.0,
                host as f64 / r.latency_ns.max(1) as f64,
            );
        }
        let (tx, file) = (&runs[0], &runs[1]);
        println!(
            "{:<18} tx keeps {:.1}% of FileISC's throughput",
            "",
            file.latency_ns as f64 / tx.latency_ns.max(1) as f64 * 100.0
        );
    }
}
