//! `csd repro`: the papers' headline figures, re-measured.
//!
//! Each paper has a module that runs the experiments behind its figures (scaled down where
//! the full run would take too long, and saying so) and states, per figure, the paper's
//! value, ours and how the two are judged ([`csd_traces::repro`]). A value the model was
//! given as input is shown as `input` and never passes: a reproduction has to come out of the
//! model, not be typed into it.

mod fusionfs;
mod ispfs;
mod lightfs;
mod sift;
mod txisc;

use anyhow::bail;
use csd_traces::repro::{judge_value, Check, Experiment, Line, Report, Verdict};
use csd_traces::store::NewRun;

#[derive(clap::Args, Debug)]
pub struct ReproArgs {
    /// Which paper's figures: lightfs, txisc, sift, ispfs, fusionfs or all.
    #[arg(value_enum, default_value = "all")]
    pub paper: PaperArg,
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the README's table (Markdown).
    #[arg(long)]
    pub markdown: bool,
    /// Print the profile parameters behind one figure (its id, e.g. lightfs.fig3b.pao.frag-m,
    /// or a prefix such as lightfs.fig3b) instead of running anything else.
    #[arg(long, value_name = "FIGURE")]
    pub explain: Option<String>,
    /// Run only the figures whose id starts with this (e.g. txisc.fig3, sift.s54).
    #[arg(long, value_name = "ID")]
    pub only: Option<String>,
    /// Change one profile value for this run: PROFILE:TABLE.FIELD=VALUE (repeatable), e.g.
    /// --set cosmos-plus:host.fiemap_ns=100000. What-if analysis: which figures move.
    #[arg(long = "set", value_name = "PROFILE:FIELD=VALUE")]
    pub set: Vec<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

/// What every paper module runs with.
pub struct Ctx {
    pub seed: u64,
    only: Option<String>,
    overrides: Vec<(String, String, serde_json::Value)>,
}

impl Ctx {
    fn new(args: &ReproArgs) -> anyhow::Result<Ctx> {
        let mut overrides = Vec::new();
        for s in &args.set {
            let parsed = s.split_once(':').and_then(|(p, rest)| {
                let (field, value) = rest.split_once('=')?;
                Some((p.to_string(), field.to_string(), value.to_string()))
            });
            let Some((profile, field, value)) = parsed else {
                bail!("--set '{s}': expected PROFILE:TABLE.FIELD=VALUE");
            };
            // A number, boolean or quoted string as JSON; anything else as a bare string.
            let value = serde_json::from_str(&value).unwrap_or(serde_json::Value::String(value));
            overrides.push((profile, field, value));
        }
        let ctx = Ctx {
            seed: args.seed,
            only: args.only.clone(),
            overrides,
        };
        // Every override must name a real field of a real profile, before anything runs.
        for (profile, ..) in &ctx.overrides {
            ctx.profile(profile)?;
        }
        Ok(ctx)
    }

    /// Whether figures with ids under `prefix` are wanted.
    pub fn wants(&self, prefix: &str) -> bool {
        self.only
            .as_deref()
            .is_none_or(|o| prefix.starts_with(o) || o.starts_with(prefix))
    }

    /// A built-in profile with this run's `--set` changes applied.
    pub fn profile(&self, name: &str) -> anyhow::Result<csd_device::Profile> {
        let profile = csd_device::Profile::load(name)?;
        let mut value = serde_json::to_value(&profile)?;
        let mut changed = false;
        for (p, field, v) in self.overrides.iter().filter(|o| o.0 == name) {
            let mut at = &mut value;
            for key in field.split('.') {
                at = at.get_mut(key).ok_or_else(|| {
                    anyhow::anyhow!("--set {p}:{field}: profile '{p}' has no field `{field}`")
                })?;
            }
            *at = v.clone();
            changed = true;
        }
        if !changed {
            return Ok(profile);
        }
        let profile: csd_device::Profile = serde_json::from_value(value)
            .map_err(|e| anyhow::anyhow!("--set on profile '{name}': {e}"))?;
        profile.validate().map_err(|(field, reason)| {
            anyhow::anyhow!("--set on profile '{name}': field `{field}` {reason}")
        })?;
        Ok(profile)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PaperArg {
    Lightfs,
    Txisc,
    Sift,
    Ispfs,
    Fusionfs,
    All,
}

impl PaperArg {
    /// How long its experiments take, roughly (seconds on the development machine): the
    /// longest start first, so one core is not left with SIFT at the end.
    fn weight(self) -> u32 {
        match self {
            PaperArg::Sift => 7,
            PaperArg::Ispfs => 4,
            PaperArg::Lightfs => 2,
            _ => 1,
        }
    }

    fn papers(self) -> Vec<PaperArg> {
        use PaperArg::*;
        match self {
            All => vec![Lightfs, Txisc, Sift, Ispfs, Fusionfs],
            p => vec![p],
        }
    }
}

/// What the model lacks that some figures need: the cause of their ✗, in one line. `ids`
/// are figure-id prefixes; a ✗ line takes the first entry with a prefix of its id. Every ✗
/// must have one (the README lists them, and a test checks none is missing), and a line that
/// passes shows none.
pub struct Lack {
    pub ids: &'static [&'static str],
    pub why: &'static str,
}

/// What a ✗ line shows when no [`Lack`] names it: a gap the README test catches.
const NO_CAUSE: &str = "(no cause given: add one to the paper's LACKS)";

/// Lines and experiments as a paper module produces them.
pub struct Sheet {
    paper: &'static str,
    lacks: &'static [Lack],
    /// `--only`: lines outside it are dropped.
    only: Option<String>,
    pub lines: Vec<Line>,
    pub experiments: Vec<(Experiment, Option<NewRun>)>,
}

/// A line under construction: what is measured and where its value comes from.
pub struct Fig<'a> {
    pub id: &'a str,
    pub figure: &'a str,
    pub what: &'a str,
    pub unit: &'a str,
    pub experiment: Option<usize>,
    pub params: &'a [&'a str],
}

impl<'a> Fig<'a> {
    pub fn new(
        id: &'a str,
        figure: &'a str,
        what: &'a str,
        unit: &'a str,
        experiment: Option<usize>,
        params: &'a [&'a str],
    ) -> Fig<'a> {
        Fig {
            id,
            figure,
            what,
            unit,
            experiment,
            params,
        }
    }
}

impl Sheet {
    fn new(paper: &'static str, lacks: &'static [Lack], ctx: &Ctx) -> Sheet {
        Sheet {
            paper,
            lacks,
            only: ctx.only.clone(),
            lines: Vec::new(),
            experiments: Vec::new(),
        }
    }

    /// Records an experiment; its run (if any) is saved with the repro run.
    pub fn experiment(
        &mut self,
        name: &str,
        profile: &str,
        scale: Option<String>,
        run: Option<NewRun>,
    ) -> usize {
        self.experiments.push((
            Experiment {
                paper: self.paper.to_string(),
                name: name.to_string(),
                profile: profile.to_string(),
                scale,
                run: None,
            },
            run,
        ));
        self.experiments.len() - 1
    }

    fn push(
        &mut self,
        f: Fig<'_>,
        check: Check,
        paper: (Option<f64>, String),
        ours: (Option<f64>, String),
        verdict: Verdict,
    ) {
        if self.only.as_deref().is_some_and(|o| !f.id.starts_with(o)) {
            return;
        }
        let ratio = match (paper.0, ours.0) {
            (Some(p), Some(o)) if p != 0.0 => Some(o / p),
            _ => None,
        };
        let lacks = (verdict == Verdict::Fail).then(|| {
            let named = self
                .lacks
                .iter()
                .find(|l| l.ids.iter().any(|p| f.id.starts_with(p)));
            named.map_or(NO_CAUSE, |l| l.why).to_string()
        });
        self.lines.push(Line {
            id: f.id.to_string(),
            paper: self.paper.to_string(),
            figure: f.figure.to_string(),
            what: f.what.to_string(),
            unit: f.unit.to_string(),
            paper_value: paper.0,
            paper_text: paper.1,
            ours_value: ours.0,
            ours_text: ours.1,
            ratio,
            check,
            verdict,
            experiment: f.experiment,
            params: f.params.iter().map(|p| p.to_string()).collect(),
            lacks,
        });
    }

    /// A value judged within ±15 % of the paper's.
    pub fn value(&mut self, f: Fig<'_>, paper: f64, ours: f64) {
        let verdict = judge_value(&Check::Value, paper, ours);
        self.push(
            f,
            Check::Value,
            (Some(paper), num(paper)),
            (Some(ours), num(ours)),
            verdict,
        );
    }

    /// A value the paper gives as a range.
    pub fn range(&mut self, f: Fig<'_>, lo: f64, hi: f64, ours: f64) {
        let check = Check::Range { lo, hi };
        let verdict = judge_value(&check, lo, ours);
        let text = format!("{}–{}", num(lo), num(hi));
        self.push(f, check, (None, text), (Some(ours), num(ours)), verdict);
    }

    /// A value that is an input of the model: shown, never a pass.
    pub fn input(&mut self, f: Fig<'_>, paper: f64, ours: f64) {
        self.push(
            f,
            Check::Input,
            (Some(paper), num(paper)),
            (Some(ours), num(ours)),
            Verdict::Input,
        );
    }

    /// A trend: passes when ours states the paper's sign or ranking.
    pub fn trend(&mut self, f: Fig<'_>, paper: &str, ours: &str) {
        let verdict = if paper == ours {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        self.push(
            f,
            Check::Trend,
            (None, paper.to_string()),
            (None, ours.to_string()),
            verdict,
        );
    }
}

/// A number as the tables print it: three significant digits, no exponent.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    let digits = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else if a >= 0.01 {
        3
    } else {
        4
    };
    format!("{v:.digits$}")
}

/// The ranking of named values, largest first: `frag-m > fsr > frag-s`.
pub fn ranking(values: &[(&str, f64)]) -> String {
    let mut v: Vec<(&str, f64)> = values.to_vec();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v.iter().map(|x| x.0).collect::<Vec<_>>().join(" > ")
}

/// `f(0)`, …, `f(n - 1)`, in that order, on up to one thread per core. A paper's
/// simulations share nothing (each builds its own device, in virtual time), so they need not
/// wait for each other: `csd repro sift` on two cores took 7.1 s one after another, 3.7 s
/// side by side. Beside the other papers on two cores this saves nothing; on more cores it
/// shortens `csd repro all` towards its longest simulation instead of its longest paper.
/// At most a thread per core, so no more simulations hold their memory at once than run.
pub fn side_by_side<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let done: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let workers = n.min(std::thread::available_parallelism().map_or(1, |c| c.get()));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                *done[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    done.into_iter()
        .map(|d| {
            d.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every index ran")
        })
        .collect()
}

fn sheet_for(paper: PaperArg, ctx: &Ctx) -> anyhow::Result<Sheet> {
    match paper {
        PaperArg::Lightfs => lightfs::run(ctx),
        PaperArg::Txisc => txisc::run(ctx),
        PaperArg::Sift => sift::run(ctx),
        PaperArg::Ispfs => ispfs::run(ctx),
        PaperArg::Fusionfs => fusionfs::run(ctx),
        PaperArg::All => unreachable!("expanded by PaperArg::papers"),
    }
}

/// Each paper's sheet, in the order given. The papers' experiments share nothing (each
/// builds its own devices and tasks, in virtual time), so they run side by side, one per
/// core, the longest first: `csd repro all` took 13.8 s one after another on two cores,
/// of which SIFT's 6.5 s.
fn sheets(
    papers: &[PaperArg],
    ctx: &Ctx,
    bar: &indicatif::ProgressBar,
) -> anyhow::Result<Vec<Sheet>> {
    let mut order: Vec<usize> = (0..papers.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(papers[i].weight()));
    let ran = side_by_side(order.len(), |k| {
        let sheet = sheet_for(papers[order[k]], ctx);
        bar.inc(1);
        sheet
    });
    let mut sheets: Vec<Option<anyhow::Result<Sheet>>> = papers.iter().map(|_| None).collect();
    for (k, sheet) in ran.into_iter().enumerate() {
        sheets[order[k]] = Some(sheet);
    }
    sheets
        .into_iter()
        .map(|s| s.expect("every paper ran"))
        .collect()
}

pub fn run(args: &ReproArgs) -> anyhow::Result<()> {
    let ctx = Ctx::new(args)?;
    if let Some(figure) = &args.explain {
        return explain(args, &ctx, figure);
    }
    args.store.check()?;
    let papers: Vec<PaperArg> = args
        .paper
        .papers()
        .into_iter()
        .filter(|p| ctx.wants(&format!("{p:?}").to_lowercase()))
        .collect();
    let bar = indicatif::ProgressBar::new(papers.len() as u64);
    let sheets = sheets(&papers, &ctx, &bar)?;
    bar.finish_and_clear();
    let mut report = Report {
        papers: sheets.iter().map(|s| s.paper.to_string()).collect(),
        seed: args.seed,
        lines: Vec::new(),
        experiments: Vec::new(),
    };
    let mut runs = Vec::new();
    for sheet in sheets {
        let base = report.experiments.len();
        report.lines.extend(sheet.lines.into_iter().map(|mut l| {
            l.experiment = l.experiment.map(|e| e + base);
            l
        }));
        for (e, run) in sheet.experiments {
            runs.push(run);
            report.experiments.push(e);
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if args.markdown {
        print!("{}", markdown(&report));
    } else {
        print_table(&report);
    }
    // Each experiment's own run first, so the repro run can link to them.
    for (i, run) in runs.into_iter().enumerate() {
        if let Some(run) = run {
            report.experiments[i].run = args.store.save_for_id(run)?;
        }
    }
    args.store.save_and_say(NewRun {
        spec: None,
        trace: None,
        profile: "various".into(),
        designs: report.papers.clone(),
        seed: args.seed,
        report: csd_traces::report::Report::Repro(report),
        sweep: None,
    })
}

fn print_table(r: &Report) {
    println!(
        "{:<9} {:<12} {:<58} {:>14} {:>14} {:>7}  verdict",
        "paper", "figure", "what", "paper", "ours", "ratio"
    );
    for l in &r.lines {
        let [paper, figure, what, theirs, ours, ratio, mark] = cells(l);
        println!("{paper:<9} {figure:<12} {what:<58} {theirs:>14} {ours:>14} {ratio:>7}  {mark}");
    }
    let (pass, judged) = r.score();
    let inputs = r
        .lines
        .iter()
        .filter(|l| l.verdict == Verdict::Input)
        .count();
    println!(
        "\n{pass} of {judged} judged lines ✓ ({:.0} %); {inputs} inputs; values pass within ±15 %, trends by sign and ranking",
        100.0 * pass as f64 / judged.max(1) as f64
    );
    for (ids, why) in causes(r) {
        println!("✗ {}: {why}", ids.join(", "));
    }
    for e in r.experiments.iter().filter(|e| e.scale.is_some()) {
        println!(
            "scaled: {} {} — {}",
            e.paper,
            e.name,
            e.scale.as_deref().unwrap_or_default()
        );
    }
}

/// A value as printed: with its unit, unless it is a trend or absent.
fn with_unit(l: &Line, text: &str) -> String {
    if l.unit.is_empty() || text == "-" || l.check == Check::Trend {
        text.to_string()
    } else {
        format!("{text} {}", l.unit)
    }
}

/// A line's columns as both tables print them: paper, figure, what, the paper's value,
/// ours, the ratio and the verdict.
fn cells(l: &Line) -> [String; 7] {
    [
        l.paper.clone(),
        l.figure.clone(),
        l.what.clone(),
        with_unit(l, &l.paper_text),
        with_unit(l, &l.ours_text),
        l.ratio.map_or("-".into(), |x| format!("{x:.2}")),
        l.verdict.mark().to_string(),
    ]
}

/// The README's table.
pub fn markdown(r: &Report) -> String {
    let mut out = String::from(
        "| paper | figure | what | paper | ours | ratio | |\n|---|---|---|---|---|---|---|\n",
    );
    for l in &r.lines {
        out.push_str(&format!("| {} |\n", cells(l).join(" | ")));
    }
    let (pass, judged) = r.score();
    out.push_str(&format!(
        "\n{pass} of {judged} judged lines ✓; inputs and unmodelled figures are not judged.\n"
    ));
    let causes = causes(r);
    if !causes.is_empty() {
        out.push_str(
            "\nWhat each ✗ lacks (`csd repro --explain ID` gives a figure's parameters):\n\n",
        );
        for (ids, why) in causes {
            let ids: Vec<String> = ids.iter().map(|id| format!("`{id}`")).collect();
            out.push_str(&format!("- {}: {why}\n", ids.join(", ")));
        }
    }
    out
}

/// The causes of the ✗ lines, each once, with the ids of the lines it explains, in the order
/// the lines come.
fn causes(r: &Report) -> Vec<(Vec<&str>, &str)> {
    let mut out: Vec<(Vec<&str>, &str)> = Vec::new();
    for l in &r.lines {
        let Some(why) = l.lacks.as_deref() else {
            continue;
        };
        match out.iter_mut().find(|c| c.1 == why) {
            Some(c) => c.0.push(&l.id),
            None => out.push((vec![&l.id], why)),
        }
    }
    out
}

/// `--explain FIGURE`: the parameters behind the figure, with their values and sources,
/// from the profiles of the experiments it came from. Runs only the experiments behind it.
fn explain(args: &ReproArgs, ctx: &Ctx, figure: &str) -> anyhow::Result<()> {
    let mut found = false;
    let ctx = Ctx {
        seed: ctx.seed,
        only: Some(figure.to_string()),
        overrides: ctx.overrides.clone(),
    };
    for p in args.paper.papers() {
        if !ctx.wants(&format!("{p:?}").to_lowercase()) {
            continue;
        }
        let sheet = sheet_for(p, &ctx)?;
        for l in sheet.lines.iter().filter(|l| l.id.starts_with(figure)) {
            found = true;
            let exp = l.experiment.map(|e| &sheet.experiments[e].0);
            println!(
                "{} — {} {}: {} (paper {}, ours {}, {})",
                l.id,
                l.paper,
                l.figure,
                l.what,
                l.paper_text,
                l.ours_text,
                l.verdict.mark()
            );
            if let Some(why) = &l.lacks {
                println!("  what the model lacks: {why}");
            }
            if let Some(e) = exp {
                println!(
                    "  experiment: {} on {}{}",
                    e.name,
                    e.profile,
                    e.scale
                        .as_ref()
                        .map(|s| format!(" ({s})"))
                        .unwrap_or_default()
                );
                let profile = ctx.profile(&e.profile)?;
                let table = toml_table(&profile)?;
                for param in &l.params {
                    let value = lookup(&table, param).unwrap_or_else(|| "(unset)".into());
                    let source = profile
                        .assumptions
                        .get(param.as_str())
                        .map(String::as_str)
                        .unwrap_or(&profile.source);
                    println!("  {param} = {value}\n      source: {source}");
                }
            }
        }
    }
    if !found {
        bail!("no figure id starts with '{figure}' (run `csd repro --json` to see every id)");
    }
    Ok(())
}

fn toml_table(profile: &csd_device::Profile) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::to_value(profile)?)
}

fn lookup(v: &serde_json::Value, dotted: &str) -> Option<String> {
    let mut at = v;
    for key in dotted.split('.') {
        at = at.get(key)?;
    }
    Some(at.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LACKS: &[Lack] = &[
        Lack {
            ids: &["p.a."],
            why: "the a-figures' cause",
        },
        Lack {
            ids: &["p."],
            why: "the others' cause",
        },
    ];

    fn sheet() -> Sheet {
        let ctx = Ctx {
            seed: 1,
            only: None,
            overrides: Vec::new(),
        };
        Sheet::new("P", LACKS, &ctx)
    }

    /// A ✗ takes the first cause one of whose prefixes its id starts with; a pass or an input
    /// shows none, and a ✗ that no cause names says so (the README test looks for it).
    #[test]
    fn a_failed_line_shows_the_first_cause_that_names_it() {
        let mut s = sheet();
        s.value(Fig::new("p.a.one", "F", "w", "", None, &[]), 10.0, 20.0);
        s.value(Fig::new("p.b.two", "F", "w", "", None, &[]), 10.0, 30.0);
        s.value(Fig::new("p.a.ok", "F", "w", "", None, &[]), 10.0, 10.5);
        s.input(Fig::new("p.a.in", "F", "w", "", None, &[]), 10.0, 50.0);
        s.trend(
            Fig::new("q.trend", "F", "w", "", None, &[]),
            "a > b",
            "b > a",
        );
        let lacks: Vec<Option<&str>> = s.lines.iter().map(|l| l.lacks.as_deref()).collect();
        assert_eq!(
            lacks,
            [
                Some("the a-figures' cause"),
                Some("the others' cause"),
                None,
                None,
                Some(NO_CAUSE)
            ]
        );
        let report = Report {
            papers: vec!["P".into()],
            seed: 1,
            lines: s.lines,
            experiments: Vec::new(),
        };
        let md = markdown(&report);
        assert!(md.contains("- `p.a.one`: the a-figures' cause\n"), "{md}");
        assert!(md.contains(&format!("- `q.trend`: {NO_CAUSE}\n")), "{md}");
    }
}
