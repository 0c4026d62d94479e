//! Converters from other trace formats into csd traces. Each takes the foreign trace as text
//! and yields events in order; a malformed input line is an error naming its line, never a
//! panic (the importers are property-tested with random bytes).

pub mod block;
mod descriptions;
mod mappings;
pub mod strace;

use crate::format::Event;
use std::io::{BufRead, Read};

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
pub enum ImportFormat {
    Strace,
    FioIolog3,
    Msr,
    Disksim,
}

impl ImportFormat {
    pub const ALL: [ImportFormat; 4] = [
        ImportFormat::Strace,
        ImportFormat::FioIolog3,
        ImportFormat::Msr,
        ImportFormat::Disksim,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ImportFormat::Strace => "strace",
            ImportFormat::FioIolog3 => "fio-iolog3",
            ImportFormat::Msr => "msr",
            ImportFormat::Disksim => "disksim",
        }
    }
}

impl std::fmt::Display for ImportFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ImportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<ImportFormat, String> {
        ImportFormat::ALL
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
    /// Calls that could not be converted, by reason (a negative offset, a length past
    /// 2⁶³ − 1): counted, never dropped silently.
    pub skipped: std::collections::BTreeMap<String, u64>,
    /// `mapped_write` events and the bytes they name: stores through shared mappings,
    /// each page of a released or synced range taken as stored (an upper bound).
    pub mapped_writes: u64,
    pub mapped_bytes: u64,
}

/// Converts `input` line by line (constant memory) and hands each event to `sink`.
pub fn convert(
    source: ImportFormat,
    mut input: impl std::io::BufRead,
    mut sink: impl FnMut(Event) -> std::io::Result<()>,
) -> Result<ImportStats, ConvertError> {
    let mut stats = ImportStats::default();
    let mut strace = strace::StraceConverter::default();
    let mut block = block::BlockConverter::new(source);
    let mut raw = Vec::new();
    let quoted = |mut e: ImportError| {
        e.problem = crate::reader::quote(&e.problem);
        ConvertError::Import(e)
    };
    loop {
        raw.clear();
        // Bounded: a "line" of gigabytes without a newline is refused, not held.
        let n = input
            .by_ref()
            .take(crate::reader::MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut raw)
            .map_err(ConvertError::Io)?;
        if n == 0 {
            break;
        }
        stats.lines += 1;
        if raw.len() > crate::reader::MAX_LINE_BYTES && raw.last() != Some(&b'\n') {
            return Err(quoted(ImportError {
                format: source.name(),
                line: stats.lines,
                problem: format!(
                    "the line is longer than {} bytes (is this a {source} trace?)",
                    crate::reader::MAX_LINE_BYTES
                ),
            }));
        }
        let text = String::from_utf8_lossy(&raw);
        let text = text.trim_end_matches(['\n', '\r']);
        let evs = match source {
            ImportFormat::Strace => strace.line(stats.lines, text).map_err(quoted)?,
            _ => [block.line(stats.lines, text).map_err(quoted)?, None],
        };
        let mut any = false;
        for ev in evs.into_iter().flatten().chain(strace.take_implied()) {
            any = true;
            stats.events += 1;
            if let crate::format::Op::MappedWrite { len, .. } = ev.op {
                stats.mapped_writes += 1;
                stats.mapped_bytes = stats.mapped_bytes.saturating_add(len);
            }
            sink(ev).map_err(ConvertError::Io)?;
        }
        if !any {
            stats.ignored += 1;
        }
    }
    block.finish(stats.lines).map_err(quoted)?;
    for (why, n) in strace.take_skipped() {
        stats.ignored = stats.ignored.saturating_sub(n);
        stats.skipped.insert(why, n);
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
