//! Block traces: fio iolog v3, MSR Cambridge CSV and DiskSim ASCII. They carry device byte
//! offsets, so they become `bread`/`bwrite` events that replay straight onto the device.

use super::{ImportError, ImportFormat};
use crate::format::{Event, Op};
use std::collections::BTreeMap;

/// DiskSim and many block traces count 512-byte sectors.
const SECTOR: u64 = 512;

pub struct BlockConverter {
    source: ImportFormat,
    /// The first timestamp (events are relative to it), in the source's unit.
    origin: Option<u64>,
    header_seen: bool,
    /// Device numbers / file names become pids, so each stream keeps its own order.
    streams: BTreeMap<String, u32>,
}

impl BlockConverter {
    pub fn new(source: ImportFormat) -> BlockConverter {
        BlockConverter {
            source,
            origin: None,
            header_seen: false,
            streams: BTreeMap::new(),
        }
    }

    fn err(&self, line: u64, problem: impl Into<String>) -> ImportError {
        ImportError {
            format: self.source.name(),
            line,
            problem: problem.into(),
        }
    }

    fn stream(&mut self, name: &str) -> u32 {
        let next = self.streams.len() as u32 + 1;
        *self.streams.entry(name.to_string()).or_insert(next)
    }

    /// Relative time in ns from a timestamp in `unit_ns` units.
    fn time(&mut self, line: u64, ts: u64, unit_ns: u64) -> Result<u64, ImportError> {
        let origin = *self.origin.get_or_insert(ts);
        ts.checked_sub(origin)
            .and_then(|d| d.checked_mul(unit_ns))
            .ok_or_else(|| self.err(line, format!("timestamp {ts} runs backwards or overflows")))
    }

    pub fn line(&mut self, line: u64, text: &str) -> Result<Option<Event>, ImportError> {
        let text = text.trim();
        if text.is_empty() || text.starts_with('#') {
            return Ok(None);
        }
        match self.source {
            ImportFormat::FioIolog3 => self.fio(line, text),
            ImportFormat::Msr => self.msr(line, text),
            ImportFormat::Disksim => self.disksim(line, text),
            ImportFormat::Strace => {
                Err(self.err(line, "strace text goes through the strace converter"))
            }
        }
    }

    /// Checks the end of the input: a fio log must at least have had its header.
    pub fn finish(&self, lines: u64) -> Result<(), ImportError> {
        if self.source == ImportFormat::FioIolog3 && !self.header_seen {
            return Err(self.err(
                lines.max(1),
                "no 'fio version 3 iolog' header: the input is empty or holds only comments",
            ));
        }
        Ok(())
    }

    fn number(&self, line: u64, what: &str, s: &str) -> Result<u64, ImportError> {
        s.trim()
            .parse::<u64>()
            .map_err(|_| self.err(line, format!("{what} '{s}' is not a non-negative integer")))
    }

    fn event(pid: u32, t: u64, write: bool, off: u64, len: u64, dur: Option<u64>) -> Event {
        Event {
            t,
            pid,
            fds_of: None,
            op: if write {
                Op::Bwrite { off, len }
            } else {
                Op::Bread { off, len }
            },
            ret: Some(len as i64),
            dur,
            extra: BTreeMap::new(),
        }
    }

    /// `fio version 3 iolog`, then `timestamp_us filename action [offset length]`.
    fn fio(&mut self, line: u64, text: &str) -> Result<Option<Event>, ImportError> {
        if !self.header_seen {
            if text != "fio version 3 iolog" {
                return Err(self.err(
                    line,
                    format!("expected the header 'fio version 3 iolog', got '{text}'"),
                ));
            }
            self.header_seen = true;
            return Ok(None);
        }
        let parts: Vec<&str> = text.split_whitespace().collect();
        if parts.len() < 3 {
            return Err(self.err(line, "expected 'timestamp filename action [offset length]'"));
        }
        let ts = self.number(line, "timestamp", parts[0])?;
        let t = self.time(line, ts, 1_000)?;
        let pid = self.stream(parts[1]);
        match parts[2] {
            "read" | "write" => {
                if parts.len() != 5 {
                    return Err(
                        self.err(line, format!("{} needs an offset and a length", parts[2]))
                    );
                }
                let off = self.number(line, "offset", parts[3])?;
                let len = self.number(line, "length", parts[4])?;
                Ok(Some(Self::event(
                    pid,
                    t,
                    parts[2] == "write",
                    off,
                    len,
                    None,
                )))
            }
            "add" | "open" | "close" | "sync" | "datasync" | "trim" | "wait" => Ok(None),
            other => Err(self.err(line, format!("unknown action '{other}'"))),
        }
    }

    /// `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, times in 100 ns ticks.
    fn msr(&mut self, line: u64, text: &str) -> Result<Option<Event>, ImportError> {
        let f: Vec<&str> = text.split(',').collect();
        if f.len() != 7 {
            return Err(self.err(
                line,
                format!("expected 7 comma-separated fields, got {}", f.len()),
            ));
        }
        if f[0].eq_ignore_ascii_case("timestamp") {
            return Ok(None);
        }
        let ts = self.number(line, "Timestamp", f[0])?;
        let t = self.time(line, ts, 100)?;
        let pid = self.stream(&format!("{}:{}", f[1].trim(), f[2].trim()));
        let write = match f[3].trim() {
            t if t.eq_ignore_ascii_case("write") => true,
            t if t.eq_ignore_ascii_case("read") => false,
            other => {
                return Err(self.err(line, format!("Type '{other}' is neither Read nor Write")))
            }
        };
        let off = self.number(line, "Offset", f[4])?;
        let len = self.number(line, "Size", f[5])?;
        let dur = self.number(line, "ResponseTime", f[6])?.checked_mul(100);
        Ok(Some(Self::event(pid, t, write, off, len, dur)))
    }

    /// `time_ms device lba size_sectors flags` (flags bit 0: read).
    fn disksim(&mut self, line: u64, text: &str) -> Result<Option<Event>, ImportError> {
        let f: Vec<&str> = text.split_whitespace().collect();
        if f.len() != 5 {
            return Err(self.err(
                line,
                format!(
                    "expected 'time device lba size flags', got {} fields",
                    f.len()
                ),
            ));
        }
        let ms: f64 = f[0]
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0 && *v < 1e15)
            .ok_or_else(|| {
                self.err(
                    line,
                    format!("time '{}' is not a non-negative number of ms", f[0]),
                )
            })?;
        let t = self.time(line, (ms * 1_000_000.0).round() as u64, 1)?;
        let pid = self.stream(f[1]);
        let lba = self.number(line, "lba", f[2])?;
        let sectors = self.number(line, "size", f[3])?;
        let flags = self.number(line, "flags", f[4])?;
        let (off, len) = lba
            .checked_mul(SECTOR)
            .zip(sectors.checked_mul(SECTOR))
            .ok_or_else(|| self.err(line, "lba or size overflows"))?;
        Ok(Some(Self::event(pid, t, flags & 1 == 0, off, len, None)))
    }
}
