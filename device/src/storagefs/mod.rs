//! StorageFS: FusionFS's firmware file system, inside the device.
//!
//! Tenants submit CISC ops ([`csd_sdk::cisc`]) or RISC-style calls to per-inode queues; the
//! firmware checks every command against the tenant's [`Credentials`], runs data-processing
//! stages in the Wasm sandbox through a [`StageRunner`], and persists the op at its grain
//! (MacroTx or MicroTx, see [`journal`]). Scheduling device-CPU time across tenants and
//! inode queues is [`sched`]'s; [`crash`] enumerates every crash point of a workload and
//! checks recovery against an oracle.
//!
//! The namespace and data live on the medium ([`Medium`]) — StorageFS does not borrow hostfs:
//! the device crate sits below hostfs, and the firmware's structures are flat (one directory
//! map, inodes holding their bytes, [`data::FileData`]) where hostfs's are ext4's. What it costs is counted per op
//! ([`OpCost`]) and charged to the device's cores by whoever drives it (`csd fusion`).

pub mod crash;
pub mod data;
mod error;
pub mod exec;
pub mod journal;
pub mod medium;
pub mod sched;
mod stage;

pub use error::FsError;
pub use exec::OpenFile;
pub use journal::{recover, DurableImage, FsStep, OrderFault, Recovery, TxId};
pub use medium::{Credentials, Ino, Inode, Medium, Redo, MAX_FILE_BYTES};
pub use stage::{StageRun, StageRunner};

use csd_sdk::cisc::{CiscOp, Command};
use serde::Serialize;
use std::collections::BTreeMap;

/// Descriptors one tenant may hold open.
pub const MAX_OPEN_PER_TENANT: usize = 1024;

/// What an op cost the device: counted here, turned into time by the caller's profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpCost {
    pub commands: u64,
    /// Namespace, descriptor and permission entries examined.
    pub entries: u64,
    /// Fuel the op's stages burned.
    pub fuel: u64,
    pub read_bytes: u64,
    /// Bytes of journal or op-log records (the log area: device RAM in FusionFS).
    pub log_bytes: u64,
    /// Bytes written in place on the medium.
    pub data_bytes: u64,
}

/// A submitted op's outcome.
#[derive(Debug)]
pub struct Submitted {
    pub tx: TxId,
    /// The slots the op's `Return` commands sent back, in order.
    pub returned: Vec<Vec<u8>>,
    /// The durable steps it took, in order.
    pub steps: Vec<FsStep>,
    /// What its reads took from the medium: `(inode, offset, bytes)`.
    pub reads: Vec<(Ino, u64, u64)>,
    pub cost: OpCost,
}

/// The firmware file system.
#[derive(Debug, Default)]
pub struct StorageFs {
    medium: Medium,
    fds: BTreeMap<(u32, u32), OpenFile>,
    next_tx: TxId,
    fault: Option<OrderFault>,
}

impl StorageFs {
    pub fn new() -> StorageFs {
        StorageFs::default()
    }

    /// The durable state: what a clean shutdown leaves.
    pub fn medium(&self) -> &Medium {
        &self.medium
    }

    /// A file's bytes, copied out (tests and small files: a sparse file is made whole).
    pub fn contents(&self, path: &str) -> Option<Vec<u8>> {
        let ino = self.medium.lookup(path)?;
        self.medium.inodes.get(&ino).map(|i| i.data.to_vec())
    }

    /// A file's size.
    pub fn size(&self, path: &str) -> Option<u64> {
        let ino = self.medium.lookup(path)?;
        self.medium.inodes.get(&ino).map(|i| i.data.len())
    }

    /// Breaks an ordering rule on purpose (crash-checker tests).
    pub fn inject_fault(&mut self, fault: Option<OrderFault>) {
        self.fault = fault;
    }

    /// A RISC-style open: resolves (and with `create`, creates, journaled) `path` and
    /// returns a descriptor of `who`.
    pub fn open(
        &mut self,
        who: Credentials,
        path: &str,
        create: bool,
        runner: &mut dyn StageRunner,
    ) -> Result<u32, FsError> {
        self.open_costed(who, path, create, false, runner)
            .map(|(fd, _)| fd)
    }

    /// [`StorageFs::open`], cutting the file to nothing with `truncate` (`O_TRUNC`), and
    /// with what the open cost the device.
    pub fn open_costed(
        &mut self,
        who: Credentials,
        path: &str,
        create: bool,
        truncate: bool,
        runner: &mut dyn StageRunner,
    ) -> Result<(u32, Submitted), FsError> {
        let open_fds = self.fds.range((who.uid, 0)..=(who.uid, u32::MAX)).count();
        if open_fds >= MAX_OPEN_PER_TENANT {
            return Err(FsError::Limit {
                command: 0,
                what: format!("uid {} holds {MAX_OPEN_PER_TENANT} descriptors", who.uid),
            });
        }
        let mut commands = vec![Command::Open {
            path: path.into(),
            create,
            into: 0,
        }];
        if truncate {
            commands.push(Command::Truncate {
                file: csd_sdk::cisc::FileRef::Handle(0),
                len: 0,
            });
        }
        let op = CiscOp {
            commands,
            ..CiscOp::default()
        };
        let done = self.submit(who, &op, runner)?;
        let ino = self.medium.lookup(path).ok_or(FsError::NotFound {
            command: 0,
            path: path.into(),
        })?;
        let fd = (0..=u32::MAX)
            .find(|fd| !self.fds.contains_key(&(who.uid, *fd)))
            .unwrap_or(u32::MAX);
        self.fds
            .insert((who.uid, fd), OpenFile { ino, position: 0 });
        Ok((fd, done))
    }

    /// Closes a descriptor. The last one of a file unlinked while open frees it: that
    /// inode is returned.
    pub fn close(&mut self, who: Credentials, fd: u32) -> Result<Option<Ino>, FsError> {
        let open = self
            .fds
            .remove(&(who.uid, fd))
            .ok_or(FsError::BadDescriptor { command: 0, fd })?;
        Ok(self.reap(open.ino).map(|_| open.ino))
    }

    /// Frees `ino` if no name reaches it and no descriptor holds it (an unlink of a file no
    /// one has open, or an orphan's last close), returning the step that did. The free is
    /// written after the op's commit: a crash before it leaves an orphan, which recovery
    /// frees.
    fn reap(&mut self, ino: Ino) -> Option<FsStep> {
        let orphan = self.medium.inodes.get(&ino).is_some_and(|i| i.links == 0);
        if !orphan || self.fds.values().any(|o| o.ino == ino) {
            return None;
        }
        let redo = Redo::Free { ino };
        self.medium.apply(&redo).ok()?;
        Some(FsStep::Apply(redo))
    }

    /// Runs one CISC op for `who`: validated, permission-checked command by command,
    /// executed, and persisted at the op's grain. A refused or failed op changes nothing.
    pub fn submit(
        &mut self,
        who: Credentials,
        op: &CiscOp,
        runner: &mut dyn StageRunner,
    ) -> Result<Submitted, FsError> {
        let ex = exec::execute(op, who, &self.medium, &self.fds, runner)?;
        self.next_tx += 1;
        let tx = self.next_tx;
        let mut steps = journal::persist_steps(tx, op.grain, &ex, self.fault);
        // The op executed over a view of this very medium, and its records were checked
        // there, so applying them cannot fail short of a bug in StorageFS itself.
        for s in &steps {
            if let FsStep::Apply(r) = s {
                self.medium
                    .apply(r)
                    .map_err(|e| FsError::Corrupt(e.to_string()))?;
            }
        }
        for (fd, position) in &ex.positions {
            if let Some(o) = self.fds.get_mut(&(who.uid, *fd)) {
                o.position = *position;
            }
        }
        let mut unnamed: Vec<Ino> = ex
            .resolved
            .iter()
            .filter_map(|r| match r {
                exec::Resolved::Unlink { ino, .. } => Some(*ino),
                exec::Resolved::Rename {
                    replaced: Some(old),
                    ..
                } => Some(*old),
                _ => None,
            })
            .collect();
        for fd in &ex.closed {
            unnamed.extend(self.fds.remove(&(who.uid, *fd)).map(|o| o.ino));
        }
        for ino in unnamed {
            steps.extend(self.reap(ino));
        }
        let cost = OpCost {
            commands: op.commands.len() as u64,
            entries: ex.effects.iter().map(|e| e.entries).sum(),
            fuel: ex.effects.iter().map(|e| e.fuel).sum(),
            read_bytes: ex.effects.iter().map(|e| e.read_bytes).sum(),
            log_bytes: steps
                .iter()
                .filter(|s| !s.in_place())
                .map(FsStep::bytes)
                .sum(),
            data_bytes: steps
                .iter()
                .filter(|s| s.in_place())
                .map(FsStep::bytes)
                .sum(),
        };
        let reads = ex
            .resolved
            .iter()
            .zip(&ex.effects)
            .filter_map(|(r, e)| match r {
                exec::Resolved::Read { ino, offset, .. } => Some((*ino, *offset, e.read_bytes)),
                _ => None,
            })
            .collect();
        Ok(Submitted {
            tx,
            returned: ex.returned,
            steps,
            reads,
            cost,
        })
    }
}
