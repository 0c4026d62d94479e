//! The names the transaction layer gives things: tasks, files, execution modes.

use serde::Serialize;

/// A task in the global task table. `TaskId::HOST` marks the host's delta mappings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TaskId(pub u32);

impl TaskId {
    pub const HOST: TaskId = TaskId(0);
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == TaskId::HOST {
            write!(f, "the host")
        } else {
            write!(f, "task {}", self.0)
        }
    }
}

/// A file as the host names it to the device (the inode number, for TxISC's kernel daemon).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct FileId(pub u64);

impl std::fmt::Display for FileId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "file {}", self.0)
    }
}

/// How an invocation reaches its files (TxISC §V-A's three architectures).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecMode {
    /// TxISC: the invocation is a transaction over snapshots of its files; it commits
    /// atomically when `run` returns 0 and is rolled back otherwise.
    #[default]
    Tx,
    /// FileISC: the same file API, writes go straight to the L2P (a failed task leaves its
    /// partial writes behind).
    File,
    /// BlockISC: offsets are raw device byte addresses (LBA × page size) for every handle;
    /// the host passes the LBAs a task needs in its arguments.
    Block,
}

impl ExecMode {
    pub const ALL: [ExecMode; 3] = [ExecMode::Tx, ExecMode::File, ExecMode::Block];

    pub fn name(self) -> &'static str {
        match self {
            ExecMode::Tx => "tx",
            ExecMode::File => "file",
            ExecMode::Block => "block",
        }
    }
}

impl std::str::FromStr for ExecMode {
    type Err = String;
    fn from_str(s: &str) -> Result<ExecMode, String> {
        ExecMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown execution mode '{s}' (expected tx, file or block)"))
    }
}
