//! `csd sweep`'s worker processes: with more than one job, each worker is a `csd sweep-worker`
//! child that runs the points its parent sends, one at a time, with the same code as an
//! in-process worker ([`super::rerun::reproduce`]).
//!
//! Why processes and not threads: a point allocates and frees tens of MiB (payload pages,
//! read buffers, task memories), and two threads of one process fault those pages in, unmap
//! them and `mprotect` wasmtime's slots under one address space's locks and TLB. Measured on
//! a 2-core VM, 16 NDP points took 1.41–1.61× less time on two threads than on one, and
//! 1.70–1.74× less on two processes (medians of eight alternating runs; README, "Sweeps").
//!
//! The protocol is JSON lines: the parent writes a [`Job`] to the child's stdin and reads
//! a [`Done`] from its stdout, then sends the next. The sweep's task modules and traces go
//! once into a directory the parent names, so a job carries paths, not bytes. A report
//! crosses as the JSON the run store keeps and is read back as a stored run is, so a point
//! run in a worker is stored byte for byte as one run in-process.

use super::rerun::{reproduce, Modules};
use anyhow::Context;
use csd_traces::report::{Report, ReportKind};
use csd_traces::spec::SystemSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    /// The directory the parent wrote the sweep's modules and traces to.
    #[arg(long)]
    pub dir: PathBuf,
}

/// One point to run.
#[derive(Serialize, Deserialize)]
pub struct Job {
    pub label: String,
    pub system: SystemSpec,
    /// The trace's bytes, in the parent's directory.
    pub trace: Option<PathBuf>,
}

/// A point's outcome: its report as stored, or why it failed.
#[derive(Serialize, Deserialize)]
pub struct Done {
    pub result: Result<(ReportKind, u32, serde_json::Value), String>,
}

/// Where the parent keeps what every job may need.
const MODULES: &str = "modules.json";

/// Writes the sweep's task modules into `dir` for the workers.
pub fn share_modules(dir: &Path, modules: &Modules) -> anyhow::Result<()> {
    let mut index = BTreeMap::new();
    for (n, (name, (id, bytes))) in modules.iter().enumerate() {
        let file = format!("module-{n}.wasm");
        std::fs::write(dir.join(&file), bytes)?;
        index.insert(name.clone(), (id.clone(), file));
    }
    std::fs::write(dir.join(MODULES), serde_json::to_vec(&index)?)?;
    Ok(())
}

fn load_modules(dir: &Path) -> anyhow::Result<Modules> {
    let index: BTreeMap<String, (String, String)> =
        serde_json::from_slice(&std::fs::read(dir.join(MODULES))?)?;
    index
        .into_iter()
        .map(|(name, (id, file))| Ok((name, (id, std::fs::read(dir.join(file))?))))
        .collect()
}

/// `csd sweep-worker`: answers jobs until its stdin closes.
///
/// The sweep starts its workers before it has planned the grid, so the modules are read
/// when the first job comes, not at start: by then the parent has written them.
pub fn run(args: &WorkerArgs) -> anyhow::Result<()> {
    let mut loaded = None;
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let job: Job = serde_json::from_str(&line?).context("reading a job from csd sweep")?;
        let modules = match loaded {
            Some(ref m) => m,
            None => loaded.insert(load_modules(&args.dir).with_context(|| {
                format!(
                    "reading the sweep's task modules in {} (csd sweep starts its workers \
                     itself)",
                    args.dir.display()
                )
            })?),
        };
        let result = job
            .trace
            .as_deref()
            .map(std::fs::read)
            .transpose()
            .map_err(anyhow::Error::from)
            .and_then(|bytes| reproduce(&job.label, &job.system, bytes, modules))
            .map(|r| (r.kind(), r.version(), r.to_json()))
            .map_err(|e| format!("{e:#}"));
        let mut line = serde_json::to_vec(&Done { result })?;
        line.push(b'\n');
        out.write_all(&line)?;
        out.flush()?;
    }
    Ok(())
}

/// A running worker process.
pub struct Worker {
    child: Child,
    to: Option<ChildStdin>,
    from: BufReader<ChildStdout>,
}

impl Worker {
    pub fn spawn(dir: &Path) -> anyhow::Result<Worker> {
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .arg("sweep-worker")
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let (to, from) = (child.stdin.take(), child.stdout.take());
        let from = BufReader::new(from.ok_or_else(|| anyhow::anyhow!("no pipe from a worker"))?);
        Ok(Worker { child, to, from })
    }

    /// Stops a worker that will get no job, without waiting for it to finish starting.
    pub fn dismiss(mut self) {
        let _ = self.child.kill();
    }

    /// Runs one job; an error here means the worker itself failed (it is then not used
    /// again), a point that fails comes back as `Err` inside `Ok`.
    pub fn run(&mut self, job: &Job) -> anyhow::Result<anyhow::Result<Report>> {
        let to = self
            .to
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("the worker's input is closed"))?;
        // One write per job: the pipe is unbuffered, and serde writes token by token (a
        // job carries its whole profile: `strace` counted some 640 writes a job).
        let mut line = serde_json::to_vec(job)?;
        line.push(b'\n');
        to.write_all(&line)?;
        let mut line = String::new();
        if self.from.read_line(&mut line)? == 0 {
            let status = self.child.wait()?;
            anyhow::bail!("the worker process ended ({status}) while running the point");
        }
        let done: Done = serde_json::from_str(&line)?;
        Ok(match done.result {
            Ok((kind, version, json)) => Ok(Report::from_json(kind, version, json)),
            Err(e) => Err(anyhow::anyhow!(e)),
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing its input ends the worker's loop.
        drop(self.to.take());
        let _ = self.child.wait();
    }
}
