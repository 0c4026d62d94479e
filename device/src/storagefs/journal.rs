//! Persisting an op's effects at its grain, and recovering from any prefix of what was
//! persisted.
//!
//! Every change to durable state is one [`FsStep`], in the order the device issues it
//! (the medium is persistent memory behind a power-loss-protected path, so a crash keeps a
//! prefix). The two grains of FusionFS §1:
//!
//! - **MacroTx** — `Journal` (every redo record of the op, data-processing outputs
//!   included), `Commit`, the records applied in place, `Checkpoint`. Recovery redoes a
//!   committed, unchecked op and ignores an uncommitted one: the op is all or nothing.
//! - **MicroTx** — `OpLog` (the resolved op and its host buffers), then per command its
//!   in-place records and `Done` with the slot it produced, then `OpEnd`. Recovery *finishes*
//!   a logged op: slots come back from the `Done` records and the remaining commands are
//!   performed again, stages re-run on the device's CPU (roll forward).
//!
//! [`OrderFault`] deliberately breaks an ordering rule, so tests can show the crash checker
//! catches it.

use super::error::FsError;
use super::exec::{perform, CmdEffect, Executed, Resolved};
use super::medium::{Bytes, Medium, Redo};
use super::stage::StageRunner;
use csd_sdk::cisc::{Slot, TxGrain, MAX_SLOTS};
use serde::Serialize;
use std::collections::BTreeMap;

/// A transaction id: one per persisted op.
pub type TxId = u64;

/// One change to durable state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum FsStep {
    /// A record written in place.
    Apply(Redo),
    /// MacroTx: the op's redo records, in the journal area.
    Journal { tx: TxId, records: Vec<Redo> },
    /// MacroTx: the commit record (the commit point).
    Commit { tx: TxId },
    /// MacroTx: the records are in place; the journal space is free.
    Checkpoint { tx: TxId },
    /// MicroTx: the operational log (the commit point of "this op will finish").
    OpLog {
        tx: TxId,
        commands: Vec<Resolved>,
        inputs: Vec<(Slot, Bytes)>,
    },
    /// MicroTx: command `index` is durable, and produced this slot value.
    Done {
        tx: TxId,
        index: usize,
        slot: Option<(Slot, Bytes)>,
    },
    /// MicroTx: the whole op is in place; its log is free.
    OpEnd { tx: TxId },
}

impl FsStep {
    /// Whether the step writes the medium in place (else it writes the log area).
    pub fn in_place(&self) -> bool {
        matches!(self, FsStep::Apply(_))
    }

    /// Bytes the step writes to the medium.
    pub fn bytes(&self) -> u64 {
        const RECORD: u64 = 64;
        match self {
            FsStep::Apply(r) => r.bytes(),
            FsStep::Journal { records, .. } => {
                RECORD + records.iter().map(|r| r.bytes() + RECORD).sum::<u64>()
            }
            FsStep::OpLog {
                commands, inputs, ..
            } => {
                RECORD * (1 + commands.len() as u64)
                    + inputs.iter().map(|(_, d)| d.len() as u64).sum::<u64>()
            }
            FsStep::Done { slot, .. } => RECORD + slot.as_ref().map_or(0, |(_, v)| v.len() as u64),
            FsStep::Commit { .. } | FsStep::Checkpoint { .. } | FsStep::OpEnd { .. } => RECORD,
        }
    }
}

/// An ordering rule broken on purpose (tests of the crash checker only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderFault {
    /// MicroTx marks a command done before its data is in place.
    DoneBeforeData,
    /// MacroTx applies records in place before the commit record.
    ApplyBeforeCommit,
}

/// The steps that persist an executed op.
pub fn persist_steps(
    tx: TxId,
    grain: TxGrain,
    ex: &Executed,
    fault: Option<OrderFault>,
) -> Vec<FsStep> {
    let mut steps = Vec::new();
    match grain {
        TxGrain::Macro => {
            let records = || ex.effects.iter().flat_map(|e| e.redo.iter().cloned());
            let applies = || records().map(FsStep::Apply);
            steps.reserve(ex.effects.len() + 3);
            steps.push(FsStep::Journal {
                tx,
                records: records().collect(),
            });
            if fault == Some(OrderFault::ApplyBeforeCommit) {
                steps.extend(applies());
                steps.push(FsStep::Commit { tx });
            } else {
                steps.push(FsStep::Commit { tx });
                steps.extend(applies());
            }
            steps.push(FsStep::Checkpoint { tx });
        }
        TxGrain::Micro => {
            steps.push(FsStep::OpLog {
                tx,
                commands: ex.resolved.clone(),
                inputs: ex.inputs.clone(),
            });
            for (index, e) in ex.effects.iter().enumerate() {
                let done = FsStep::Done {
                    tx,
                    index,
                    slot: e.slot.clone(),
                };
                let applies = e.redo.iter().cloned().map(FsStep::Apply);
                if fault == Some(OrderFault::DoneBeforeData) {
                    steps.push(done);
                    steps.extend(applies);
                } else {
                    steps.extend(applies);
                    steps.push(done);
                }
            }
            steps.push(FsStep::OpEnd { tx });
        }
    }
    steps
}

/// What the durable log area holds of unfinished transactions after a crash.
#[derive(Clone, Debug, Default)]
pub struct LogArea {
    journaled: BTreeMap<TxId, (Vec<Redo>, bool)>,
    oplogs: BTreeMap<TxId, OpLogEntry>,
}

#[derive(Clone, Debug, Default)]
struct OpLogEntry {
    commands: Vec<Resolved>,
    inputs: Vec<(Slot, Bytes)>,
    done: BTreeMap<usize, Option<(Slot, Bytes)>>,
}

/// The medium and the log area as a crash left them.
#[derive(Clone, Debug, Default)]
pub struct DurableImage {
    pub medium: Medium,
    pub log: LogArea,
}

impl DurableImage {
    /// Adds one persisted step.
    pub fn persist(&mut self, step: &FsStep) -> Result<(), FsError> {
        match step {
            FsStep::Apply(r) => self.medium.apply(r)?,
            FsStep::Journal { tx, records } => {
                self.log.journaled.insert(*tx, (records.clone(), false));
            }
            FsStep::Commit { tx } => {
                if let Some(j) = self.log.journaled.get_mut(tx) {
                    j.1 = true;
                }
            }
            FsStep::Checkpoint { tx } => {
                self.log.journaled.remove(tx);
            }
            FsStep::OpLog {
                tx,
                commands,
                inputs,
            } => {
                self.log.oplogs.insert(
                    *tx,
                    OpLogEntry {
                        commands: commands.clone(),
                        inputs: inputs.clone(),
                        done: BTreeMap::new(),
                    },
                );
            }
            FsStep::Done { tx, index, slot } => {
                if let Some(o) = self.log.oplogs.get_mut(tx) {
                    o.done.insert(*index, slot.clone());
                }
            }
            FsStep::OpEnd { tx } => {
                self.log.oplogs.remove(tx);
            }
        }
        Ok(())
    }
}

/// What recovery did, and what it cost the device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// MacroTx ops redone from the journal / discarded uncommitted.
    pub redone: u64,
    pub discarded: u64,
    /// MicroTx ops finished by rolling forward, and the commands performed again.
    pub rolled_forward: u64,
    pub commands_rerun: u64,
    /// Log records read, bytes written back, fuel burned re-running stages.
    pub records: u64,
    pub bytes_written: u64,
    pub fuel: u64,
}

/// Recovers an image in place: redo committed MacroTx ops, then finish every logged MicroTx
/// op with the device's own compute. Transactions are recovered in id order.
pub fn recover(
    image: &mut DurableImage,
    runner: &mut dyn StageRunner,
) -> Result<Recovery, FsError> {
    let mut rec = Recovery::default();
    let journaled = std::mem::take(&mut image.log.journaled);
    for (_, (records, committed)) in journaled {
        rec.records += records.len() as u64 + 1;
        if !committed {
            rec.discarded += 1;
            continue;
        }
        for r in &records {
            image.medium.apply(r)?;
            rec.bytes_written += r.bytes();
        }
        rec.redone += 1;
    }
    let oplogs = std::mem::take(&mut image.log.oplogs);
    for (_, op) in oplogs {
        rec.records += 1 + op.done.len() as u64;
        let mut slots: Vec<Option<Bytes>> = vec![None; MAX_SLOTS as usize];
        for (s, d) in &op.inputs {
            slots[s.0 as usize] = Some(d.clone());
        }
        for (index, cmd) in op.commands.iter().enumerate() {
            if let Some(slot) = op.done.get(&index) {
                if let Some((s, v)) = slot {
                    slots[s.0 as usize] = Some(v.clone());
                }
                continue;
            }
            let e: CmdEffect = perform(cmd, &mut image.medium, &mut slots, runner, index)?;
            rec.commands_rerun += 1;
            rec.fuel += e.fuel;
            rec.bytes_written += e.redo.iter().map(Redo::bytes).sum::<u64>();
        }
        rec.rolled_forward += 1;
    }
    // No descriptor survives a crash: a file unlinked while open, or whose free the crash
    // cut off, goes now.
    image.medium.free_orphans();
    Ok(rec)
}
