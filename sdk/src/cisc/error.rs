//! Why a CISC op was refused, before any of it ran.

use std::fmt;

/// A CISC op the UserLib or the device refuses. Each names the command (0-based) at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CiscError {
    TooManyCommands {
        commands: usize,
        max: usize,
    },
    Empty,
    PageOverflow {
        bytes: usize,
        page: usize,
    },
    SlotOutOfRange {
        command: usize,
        slot: u8,
    },
    SlotUnset {
        command: usize,
        slot: u8,
    },
    HandleOutOfRange {
        command: usize,
        handle: u8,
    },
    HandleUnopened {
        command: usize,
        handle: u8,
    },
    TooManyInputs {
        inputs: usize,
        max: usize,
    },
    InputTooLarge {
        slot: u8,
        bytes: usize,
        max: usize,
    },
    DuplicateInput {
        slot: u8,
    },
    UnknownStage {
        command: usize,
        name: String,
    },
    StageArity {
        command: usize,
        stage: String,
        inputs: usize,
    },
    NameTooLong {
        command: usize,
        bytes: usize,
    },
    Malformed(String),
}

impl fmt::Display for CiscError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CiscError::*;
        match self {
            TooManyCommands { commands, max } => write!(
                f,
                "a CISC op holds at most {max} commands (one DMA-able page); this one has {commands}"
            ),
            Empty => write!(f, "a CISC op needs at least one command"),
            PageOverflow { bytes, page } => write!(
                f,
                "the encoded CISC op takes {bytes} bytes, more than its {page}-byte page"
            ),
            SlotOutOfRange { command, slot } => write!(
                f,
                "command {command}: slot {slot} does not exist (slots are 0..{})",
                super::MAX_SLOTS
            ),
            SlotUnset { command, slot } => write!(
                f,
                "command {command} reads slot {slot} before any input or earlier command wrote it"
            ),
            HandleOutOfRange { command, handle } => write!(
                f,
                "command {command}: handle {handle} does not exist (handles are 0..{})",
                super::MAX_HANDLES
            ),
            HandleUnopened { command, handle } => write!(
                f,
                "command {command} uses handle {handle} before an open command in this op opened it"
            ),
            TooManyInputs { inputs, max } => {
                write!(f, "a CISC op takes at most {max} host buffers; this one has {inputs}")
            }
            InputTooLarge { slot, bytes, max } => write!(
                f,
                "the host buffer for slot {slot} is {bytes} bytes; a slot holds at most {max}"
            ),
            DuplicateInput { slot } => write!(f, "two host buffers fill slot {slot}"),
            UnknownStage { command, name } => write!(
                f,
                "command {command}: unknown stage '{name}' (built in: crc32, compress, decompress, \
                 search, sort, xor, multiply; or task:export)"
            ),
            StageArity {
                command,
                stage,
                inputs,
            } => write!(
                f,
                "command {command}: stage {stage} does not take {inputs} input slot(s)"
            ),
            NameTooLong { command, bytes } => write!(
                f,
                "command {command}: a path or stage name of {bytes} bytes does not fit the page"
            ),
            Malformed(why) => write!(f, "malformed CISC op page: {why}"),
        }
    }
}

impl std::error::Error for CiscError {}
