//! Runs a trace's `isc` ops with the task runtime: the replay lends its device and the op's
//! files; the task (a built-in, a stored task or a module file, resolved before the replay)
//! runs on them as one TxISC transaction (`Csd::lend`), and the
//! device, the files' layouts and the unused reservation go back.

use crate::tasks::TaskLibrary;
use anyhow::Context;
use csd_device::{Device, Extent, Profile, VirtualTime};
use csd_runtime::{Csd, FileLayout, IscContext, Storage, Task, TaskEngine, Volume};
use csd_traces::isc::{IscOutcome, IscRunner, LentFile};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The task runtime as a trace replay's `isc` runner.
pub struct TaskRunner {
    engine: Arc<TaskEngine>,
    profile: Profile,
    library: Arc<TaskLibrary>,
    /// Tasks loaded so far, by the reference the trace names them with.
    tasks: BTreeMap<String, Task>,
}

impl TaskRunner {
    pub fn new(
        engine: Arc<TaskEngine>,
        profile: &Profile,
        library: Arc<TaskLibrary>,
    ) -> TaskRunner {
        TaskRunner {
            engine,
            profile: profile.clone(),
            library,
            tasks: BTreeMap::new(),
        }
    }

    fn task(&mut self, reference: &str) -> anyhow::Result<Task> {
        if let Some(t) = self.tasks.get(reference) {
            return Ok(t.clone());
        }
        let resolved = self.library.get(reference).map_err(anyhow::Error::msg)?;
        let task = self
            .engine
            .load(&resolved.name, &resolved.wasm)
            .with_context(|| format!("loading task '{reference}'"))?;
        self.tasks.insert(reference.to_string(), task.clone());
        Ok(task)
    }

    fn context(files: &[LentFile], args: &str) -> anyhow::Result<IscContext> {
        let mut ctx = IscContext::new().args(args.as_bytes().to_vec());
        for f in files {
            ctx = ctx.file(f.path.clone(), f.mode);
        }
        Ok(ctx)
    }
}

impl IscRunner for TaskRunner {
    fn run(
        &mut self,
        device: Device,
        at: VirtualTime,
        task: &str,
        args: &str,
        files: Vec<LentFile>,
        pool: Vec<Extent>,
    ) -> (Device, IscOutcome) {
        let layouts = files.iter().map(|f| {
            let layout = FileLayout {
                id: f.id,
                extents: f.extents.clone(),
                size_bytes: f.size_bytes,
            };
            (f.path.clone(), layout)
        });
        let volume = Volume::lent(device.page_size(), layouts, pool);
        let mut csd = Csd::lend(
            &self.profile,
            Storage { device, volume },
            self.engine.clone(),
            at,
        );
        let ran = self.task(task).and_then(|t| {
            let ctx = Self::context(&files, args)?;
            csd.run(&t, &ctx)
                .with_context(|| format!("task '{task}'"))
                .map(|_| ())
        });
        let done = csd.clock();
        let Storage { device, volume } = csd.into_storage();
        let after = files
            .iter()
            .map(|f| match volume.layout(&f.path) {
                Ok(l) => (l.size_bytes, l.extents.clone()),
                Err(_) => (f.size_bytes, f.extents.clone()),
            })
            .collect();
        let outcome = IscOutcome {
            done,
            error: ran.err().map(|e| format!("{e:#}")),
            files: after,
            pool_left: volume.free_extents(),
        };
        (device, outcome)
    }
}
