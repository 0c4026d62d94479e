//! Converters from other trace formats into csd traces. Each takes the foreign trace as text
//! and yields events in order; a malformed input line is an error naming its line, never a
//! panic (the importers are property-tested with random bytes).

pub mod block;
pub mod strace;

use crate::format::Event;

/// A foreign trace line that could not be converted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{format} line {line}: {problem}")]
pub struct ImportError {
    pub format: &'static str,
    pub line: u64,
    pub problem: String,
}

/// The formats `csd trace import --from` understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Strace,
    FioIolog3,
    Msr,
    Disksim,
}

impl Source {
    pub const ALL: [Source; 4] = [
        Source::Strace,
        Source::FioIolog3,
        Source::Msr,
        Source::Disksim,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Source::Strace => "strace",
            Source::FioIolog3 => "fio-iolog3",
            Source::Msr => "msr",
            Source::Disksim => "disksim",
        }
    }
}

impl std::str::FromStr for Source {
    type Err = String;
    fn from_str(s: &str) -> Result<Source, String> {
        Source::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!("unknown trace format '{s}' (expected strace, fio-iolog3, msr or disksim)")
            })
    }
}

/// What an import produced besides events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportStats {
    pub lines: u64,
    pub events: u64,
    /// Lines that were valid but carry nothing to replay (other syscalls, signals, pipes…).
    pub ignored: u64,
}

/// Converts `input` (the whole foreign trace) and hands each event to `sink`.
pub fn convert(
    source: Source,
    input: &str,
    mut sink: impl FnMut(Event) -> std::io::Result<()>,
) -> Result<ImportStats, ConvertError> {
    let mut stats = ImportStats::default();
    let mut push = |ev: Option<Event>, stats: &mut ImportStats| -> Result<(), ConvertError> {
        stats.lines += 1;
        match ev {
            Some(ev) => {
                stats.events += 1;
                sink(ev).map_err(ConvertError::Io)
            }
            None => {
                stats.ignored += 1;
                Ok(())
            }
        }
    };
    match source {
        Source::Strace => {
            let mut conv = strace::StraceConverter::default();
            for (i, line) in input.lines().enumerate() {
                let ev = conv.line(i as u64 + 1, line)?;
                push(ev, &mut stats)?;
            }
        }
        Source::FioIolog3 | Source::Msr | Source::Disksim => {
            let mut conv = block::BlockConverter::new(source);
            for (i, line) in input.lines().enumerate() {
                let ev = conv.line(i as u64 + 1, line)?;
                push(ev, &mut stats)?;
            }
        }
    }
    Ok(stats)
}

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Import(#[from] ImportError),
    #[error("writing the trace: {0}")]
    Io(std::io::Error),
}
