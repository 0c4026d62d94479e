//! How a task or an `isc` op may use a file it names (TxISC §III-A: a task registers its
//! input and output files). One type from the trace format to the runtime's checks.

use serde::{Deserialize, Serialize};

/// How a registered file may be used. Written `r`, `w` or `rw` in traces and on the
/// command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum FileMode {
    Read,
    Write,
    ReadWrite,
}

impl FileMode {
    pub fn readable(self) -> bool {
        matches!(self, FileMode::Read | FileMode::ReadWrite)
    }

    pub fn writable(self) -> bool {
        matches!(self, FileMode::Write | FileMode::ReadWrite)
    }

    /// The short form: `r`, `w` or `rw`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileMode::Read => "r",
            FileMode::Write => "w",
            FileMode::ReadWrite => "rw",
        }
    }

    /// The words an error message uses.
    pub fn describe(self) -> &'static str {
        match self {
            FileMode::Read => "read-only",
            FileMode::Write => "write-only",
            FileMode::ReadWrite => "read-write",
        }
    }
}

impl std::fmt::Display for FileMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for FileMode {
    type Err = String;
    fn from_str(s: &str) -> Result<FileMode, String> {
        match s {
            "r" => Ok(FileMode::Read),
            "w" => Ok(FileMode::Write),
            "rw" => Ok(FileMode::ReadWrite),
            _ => Err(format!("unknown file mode '{s}' (expected r, w or rw)")),
        }
    }
}

impl TryFrom<String> for FileMode {
    type Error = String;
    fn try_from(s: String) -> Result<FileMode, String> {
        s.parse()
    }
}

impl From<FileMode> for String {
    fn from(m: FileMode) -> String {
        m.as_str().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::FileMode;

    #[test]
    fn short_forms_round_trip_and_others_are_refused() {
        for m in [FileMode::Read, FileMode::Write, FileMode::ReadWrite] {
            assert_eq!(m.as_str().parse::<FileMode>(), Ok(m));
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(serde_json::from_str::<FileMode>(&json).unwrap(), m);
        }
        assert!("wr".parse::<FileMode>().unwrap_err().contains("'wr'"));
        assert!(serde_json::from_str::<FileMode>("\"x\"").is_err());
    }
}
