//! Why StorageFS refused or rolled back a command.

use csd_sdk::cisc::CiscError;

/// A CISC op or RISC call StorageFS refused. A refused op changed nothing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FsError {
    #[error(transparent)]
    Invalid(#[from] CiscError),
    #[error("command {command}: uid {uid} may not {need} {path}")]
    Permission {
        command: usize,
        uid: u32,
        need: &'static str,
        path: String,
    },
    #[error("command {command}: no such file: {path}")]
    NotFound { command: usize, path: String },
    #[error("command {command}: {path} is a symbolic link, which StorageFS does not follow")]
    Symlink { command: usize, path: String },
    #[error("command {command}: {path} exists")]
    Exists { command: usize, path: String },
    #[error("command {command}: descriptor {fd} is not open for this tenant")]
    BadDescriptor { command: usize, fd: u32 },
    #[error(
        "inode {ino}: a file may not grow past {} bytes",
        super::medium::MAX_FILE_BYTES
    )]
    TooLarge { ino: u64 },
    #[error("command {command}: {what}")]
    Limit { command: usize, what: String },
    #[error("command {command}: stage {stage} failed: {why}")]
    Stage {
        command: usize,
        stage: String,
        why: String,
    },
    #[error("bad path {0:?}: absolute, at most 1024 bytes, no empty, '.' or '..' components")]
    BadPath(String),
    #[error("the medium is inconsistent: {0}")]
    Corrupt(String),
}

impl FsError {
    /// The same error, placed at command `k` of its op.
    pub(crate) fn at(self, k: usize) -> FsError {
        match self {
            FsError::TooLarge { ino } => FsError::Limit {
                command: k,
                what: format!(
                    "inode {ino} would grow past {} bytes",
                    super::medium::MAX_FILE_BYTES
                ),
            },
            e => e,
        }
    }
}
