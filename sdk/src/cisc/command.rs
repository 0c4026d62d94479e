//! What a CISC op is made of, and the rules every op obeys.

use super::error::CiscError;

/// Commands in one op: FusionFS packs 32 to fit a DMA-able page.
pub const MAX_COMMANDS: usize = 32;
/// The DMA-able page an op is encoded in.
pub const OP_PAGE_BYTES: usize = 4096;
/// Data slots an op can use.
pub const MAX_SLOTS: u8 = 16;
/// Files an op can open for itself.
pub const MAX_HANDLES: u8 = 8;
/// Host buffers an op can carry.
pub const MAX_INPUTS: usize = 8;
/// The largest value one slot holds (a host buffer, a read, a stage's output).
pub const MAX_SLOT_BYTES: usize = 1 << 20;

/// A numbered data slot in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Slot(pub u8);

/// The file a command works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileRef {
    /// A descriptor the tenant opened earlier (a RISC-style open).
    Fd(u32),
    /// A handle an `Open` command of this op opened.
    Handle(u8),
}

/// A data-processing stage. Each runs as WebAssembly in the device's sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// CRC-32 (IEEE) of one slot: 4 bytes, little endian.
    Crc32,
    /// LZ4 block compression of one slot (with its length in front).
    Compress,
    /// The inverse of `Compress`.
    Decompress,
    /// Occurrences of slot b (the needle) in slot a: a u64, little endian.
    Search,
    /// Sorts slot a as little-endian u32s.
    Sort,
    /// Slot a XOR slot b (b repeated over a).
    Xor,
    /// Slot a times slot b as little-endian u32s, wrapping (b repeated over a).
    Multiply,
    /// An exported function of a Wasm task: `task:export`.
    User { task: String, export: String },
}

impl Stage {
    /// The stage's name as commands spell it.
    pub fn name(&self) -> String {
        match self {
            Stage::User { task, export } => format!("{task}:{export}"),
            built_in => built_in.built_in_name().unwrap_or_default().into(),
        }
    }

    /// A built-in stage's name (its export in the built-in stage module).
    pub fn built_in_name(&self) -> Option<&'static str> {
        Some(match self {
            Stage::Crc32 => "crc32",
            Stage::Compress => "compress",
            Stage::Decompress => "decompress",
            Stage::Search => "search",
            Stage::Sort => "sort",
            Stage::Xor => "xor",
            Stage::Multiply => "multiply",
            Stage::User { .. } => return None,
        })
    }

    /// Parses a stage name: a built-in, or `task:export`.
    pub fn parse(name: &str) -> Option<Stage> {
        Some(match name {
            "crc32" => Stage::Crc32,
            "compress" => Stage::Compress,
            "decompress" => Stage::Decompress,
            "search" => Stage::Search,
            "sort" => Stage::Sort,
            "xor" => Stage::Xor,
            "multiply" => Stage::Multiply,
            other => {
                let (task, export) = other.split_once(':')?;
                if task.is_empty() || export.is_empty() {
                    return None;
                }
                Stage::User {
                    task: task.into(),
                    export: export.into(),
                }
            }
        })
    }

    /// How many input slots the stage takes (user stages take one or two).
    pub fn takes(&self, inputs: usize) -> bool {
        match self {
            Stage::Crc32 | Stage::Compress | Stage::Decompress | Stage::Sort => inputs == 1,
            Stage::Search | Stage::Xor | Stage::Multiply => inputs == 2,
            Stage::User { .. } => (1..=2).contains(&inputs),
        }
    }
}

/// One command of a CISC op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Opens (and with `create`, creates) `path` as handle `into`.
    Open {
        path: String,
        create: bool,
        into: u8,
    },
    /// Reads `len` bytes at the file's position into a slot, and advances it.
    Read { file: FileRef, len: u32, into: Slot },
    /// Reads `len` bytes at `offset` into a slot.
    Pread {
        file: FileRef,
        offset: u64,
        len: u32,
        into: Slot,
    },
    /// Writes a slot at the file's position, and advances it.
    Write { file: FileRef, from: Slot },
    /// Writes a slot at `offset`.
    Pwrite {
        file: FileRef,
        offset: u64,
        from: Slot,
    },
    /// Writes a slot at the end of the file.
    Append { file: FileRef, from: Slot },
    /// Makes the file's data and metadata durable.
    Fsync { file: FileRef },
    /// Closes a handle or descriptor.
    Close { file: FileRef },
    /// Removes `path`.
    Unlink { path: String },
    /// Sets the file's size to `len` (cutting it, or growing it with zeros).
    Truncate { file: FileRef, len: u64 },
    /// Renames `from` to `to`, replacing a file already at `to`.
    Rename { from: String, to: String },
    /// Gives the file at `from` a second name, `to`, which must not exist (a hard link).
    Link { from: String, to: String },
    /// Makes `path`, which must not exist, a symbolic link holding `target` as given
    /// (relative or absolute; StorageFS does not follow links).
    Symlink { target: String, path: String },
    /// Runs a stage over one or two slots into a slot.
    Process {
        stage: Stage,
        inputs: Vec<Slot>,
        into: Slot,
    },
    /// Returns a slot to the host (DMA back to the caller's buffer).
    Return { from: Slot },
}

impl Command {
    /// The slots the command reads.
    pub fn reads(&self) -> &[Slot] {
        match self {
            Command::Write { from, .. }
            | Command::Pwrite { from, .. }
            | Command::Append { from, .. }
            | Command::Return { from } => std::slice::from_ref(from),
            Command::Process { inputs, .. } => inputs,
            _ => &[],
        }
    }

    /// The slot the command writes.
    pub fn writes(&self) -> Option<Slot> {
        match self {
            Command::Read { into, .. }
            | Command::Pread { into, .. }
            | Command::Process { into, .. } => Some(*into),
            _ => None,
        }
    }

    /// The file the command works on.
    pub fn file(&self) -> Option<FileRef> {
        match self {
            Command::Read { file, .. }
            | Command::Pread { file, .. }
            | Command::Write { file, .. }
            | Command::Pwrite { file, .. }
            | Command::Append { file, .. }
            | Command::Fsync { file }
            | Command::Close { file }
            | Command::Truncate { file, .. } => Some(*file),
            _ => None,
        }
    }

    /// Whether the command changes what is stored (and so is logged by MicroTx).
    pub fn mutates(&self) -> bool {
        matches!(
            self,
            Command::Open { create: true, .. }
                | Command::Write { .. }
                | Command::Pwrite { .. }
                | Command::Append { .. }
                | Command::Unlink { .. }
                | Command::Truncate { .. }
                | Command::Rename { .. }
                | Command::Link { .. }
                | Command::Symlink { .. }
        )
    }
}

/// The crash-consistency grain the device applies to an op (FusionFS §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TxGrain {
    /// All or nothing: the whole op, its data processing included, commits or vanishes.
    #[default]
    Macro,
    /// Each command commits; an operational log lets recovery finish a partial op.
    Micro,
}

/// A CISC op: its commands, the host buffers that fill its first slots, and its grain.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CiscOp {
    pub commands: Vec<Command>,
    pub inputs: Vec<(Slot, Vec<u8>)>,
    pub grain: TxGrain,
}

impl CiscOp {
    /// Checks the op's shape: count, slots and handles in range, every slot written before
    /// it is read, every handle opened before it is used, stages given inputs they take,
    /// and the encoding fits its page.
    pub fn validate(&self) -> Result<(), CiscError> {
        if self.commands.is_empty() {
            return Err(CiscError::Empty);
        }
        if self.commands.len() > MAX_COMMANDS {
            return Err(CiscError::TooManyCommands {
                commands: self.commands.len(),
                max: MAX_COMMANDS,
            });
        }
        let mut written = self.check_inputs()?;
        let mut opened = [false; MAX_HANDLES as usize];
        for (i, c) in self.commands.iter().enumerate() {
            for &s in c.reads() {
                check_slot(i, s)?;
                if !written[s.0 as usize] {
                    return Err(CiscError::SlotUnset {
                        command: i,
                        slot: s.0,
                    });
                }
            }
            if let Some(FileRef::Handle(h)) = c.file() {
                check_handle(i, h)?;
                if !opened[h as usize] {
                    return Err(CiscError::HandleUnopened {
                        command: i,
                        handle: h,
                    });
                }
            }
            match c {
                Command::Open { into, .. } => {
                    check_handle(i, *into)?;
                    opened[*into as usize] = true;
                }
                Command::Process { stage, inputs, .. } if !stage.takes(inputs.len()) => {
                    return Err(CiscError::StageArity {
                        command: i,
                        stage: stage.name(),
                        inputs: inputs.len(),
                    });
                }
                _ => {}
            }
            if let Some(s) = c.writes() {
                check_slot(i, s)?;
                written[s.0 as usize] = true;
            }
        }
        let bytes = self.encoded_len();
        if bytes > OP_PAGE_BYTES {
            return Err(CiscError::PageOverflow {
                bytes,
                page: OP_PAGE_BYTES,
            });
        }
        Ok(())
    }

    /// Which slots the host buffers fill.
    fn check_inputs(&self) -> Result<[bool; MAX_SLOTS as usize], CiscError> {
        if self.inputs.len() > MAX_INPUTS {
            return Err(CiscError::TooManyInputs {
                inputs: self.inputs.len(),
                max: MAX_INPUTS,
            });
        }
        let mut written = [false; MAX_SLOTS as usize];
        for (slot, data) in &self.inputs {
            check_slot(0, *slot)?;
            if data.len() > MAX_SLOT_BYTES {
                return Err(CiscError::InputTooLarge {
                    slot: slot.0,
                    bytes: data.len(),
                    max: MAX_SLOT_BYTES,
                });
            }
            if std::mem::replace(&mut written[slot.0 as usize], true) {
                return Err(CiscError::DuplicateInput { slot: slot.0 });
            }
        }
        Ok(written)
    }

    /// Bytes of host data the op carries to the device.
    pub fn input_bytes(&self) -> u64 {
        self.inputs.iter().map(|(_, d)| d.len() as u64).sum()
    }
}

fn check_slot(command: usize, slot: Slot) -> Result<(), CiscError> {
    if slot.0 >= MAX_SLOTS {
        return Err(CiscError::SlotOutOfRange {
            command,
            slot: slot.0,
        });
    }
    Ok(())
}

fn check_handle(command: usize, handle: u8) -> Result<(), CiscError> {
    if handle >= MAX_HANDLES {
        return Err(CiscError::HandleOutOfRange { command, handle });
    }
    Ok(())
}
