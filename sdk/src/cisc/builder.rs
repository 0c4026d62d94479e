//! Building a custom CISC op: slots and handles are handed out in order, so an op reads
//! like the sequence of calls it replaces.

use super::command::{CiscOp, Command, FileRef, Slot, Stage, TxGrain};
use super::error::CiscError;

/// Builds a [`CiscOp`]; [`CiscBuilder::build`] validates it.
///
/// ```
/// use csd_sdk::cisc::{CiscBuilder, FileRef, Stage};
/// let mut b = CiscBuilder::new();
/// let data = b.input(b"record".to_vec());
/// b.append(FileRef::Fd(3), data);
/// let crc = b.process(Stage::Crc32, &[data]);
/// b.append(FileRef::Fd(3), crc);
/// let op = b.build().unwrap();
/// assert_eq!(op.commands.len(), 3);
/// ```
#[derive(Debug, Default)]
pub struct CiscBuilder {
    op: CiscOp,
    next_slot: u16,
    next_handle: u16,
}

impl CiscBuilder {
    pub fn new() -> CiscBuilder {
        CiscBuilder::default()
    }

    /// Commits or recovers the op with this grain (default: MacroTx).
    pub fn grain(&mut self, grain: TxGrain) -> &mut Self {
        self.op.grain = grain;
        self
    }

    fn slot(&mut self) -> Slot {
        let s = Slot(self.next_slot.min(u16::from(u8::MAX)) as u8);
        self.next_slot += 1;
        s
    }

    fn push(&mut self, c: Command) -> &mut Self {
        self.op.commands.push(c);
        self
    }

    /// A host buffer, DMA'd with the op into a fresh slot.
    pub fn input(&mut self, data: Vec<u8>) -> Slot {
        let s = self.slot();
        self.op.inputs.push((s, data));
        s
    }

    /// Opens `path` (creating it if asked) and returns its handle.
    pub fn open(&mut self, path: &str, create: bool) -> FileRef {
        let h = self.next_handle.min(u16::from(u8::MAX)) as u8;
        self.next_handle += 1;
        self.push(Command::Open {
            path: path.into(),
            create,
            into: h,
        });
        FileRef::Handle(h)
    }

    pub fn read(&mut self, file: FileRef, len: u32) -> Slot {
        let into = self.slot();
        self.push(Command::Read { file, len, into });
        into
    }

    pub fn pread(&mut self, file: FileRef, offset: u64, len: u32) -> Slot {
        let into = self.slot();
        self.push(Command::Pread {
            file,
            offset,
            len,
            into,
        });
        into
    }

    pub fn write(&mut self, file: FileRef, from: Slot) -> &mut Self {
        self.push(Command::Write { file, from })
    }

    pub fn pwrite(&mut self, file: FileRef, offset: u64, from: Slot) -> &mut Self {
        self.push(Command::Pwrite { file, offset, from })
    }

    pub fn append(&mut self, file: FileRef, from: Slot) -> &mut Self {
        self.push(Command::Append { file, from })
    }

    pub fn fsync(&mut self, file: FileRef) -> &mut Self {
        self.push(Command::Fsync { file })
    }

    pub fn close(&mut self, file: FileRef) -> &mut Self {
        self.push(Command::Close { file })
    }

    pub fn unlink(&mut self, path: &str) -> &mut Self {
        self.push(Command::Unlink { path: path.into() })
    }

    pub fn truncate(&mut self, file: FileRef, len: u64) -> &mut Self {
        self.push(Command::Truncate { file, len })
    }

    pub fn rename(&mut self, from: &str, to: &str) -> &mut Self {
        self.push(Command::Rename {
            from: from.into(),
            to: to.into(),
        })
    }

    /// A second name, `to`, for the file at `from`.
    pub fn link(&mut self, from: &str, to: &str) -> &mut Self {
        self.push(Command::Link {
            from: from.into(),
            to: to.into(),
        })
    }

    /// A symbolic link at `path` holding `target`.
    pub fn symlink(&mut self, target: &str, path: &str) -> &mut Self {
        self.push(Command::Symlink {
            target: target.into(),
            path: path.into(),
        })
    }

    /// Runs `stage` over `inputs` into a fresh slot.
    pub fn process(&mut self, stage: Stage, inputs: &[Slot]) -> Slot {
        let into = self.slot();
        self.push(Command::Process {
            stage,
            inputs: inputs.to_vec(),
            into,
        });
        into
    }

    /// Returns a slot to the host when the op completes.
    pub fn ret(&mut self, from: Slot) -> &mut Self {
        self.push(Command::Return { from })
    }

    /// The op's encoded size so far: what must fit its page ([`super::OP_PAGE_BYTES`]).
    pub fn encoded_len(&self) -> usize {
        self.op.encoded_len()
    }

    /// The op, validated (a copy: the builder can go on).
    pub fn build(&self) -> Result<CiscOp, CiscError> {
        self.op.validate()?;
        Ok(self.op.clone())
    }

    /// The op, validated, without copying its host buffers.
    pub fn finish(self) -> Result<CiscOp, CiscError> {
        self.op.validate()?;
        Ok(self.op)
    }
}
