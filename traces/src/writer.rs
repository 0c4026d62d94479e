//! Streaming trace writing.

use crate::format::{Event, Header};
use std::io::Write;

/// Writes a header, then events, one line each.
pub struct TraceWriter<W: Write> {
    out: W,
    events: u64,
}

impl<W: Write> TraceWriter<W> {
    pub fn new(mut out: W, header: &Header) -> std::io::Result<TraceWriter<W>> {
        writeln!(out, "{}", header.to_line())?;
        Ok(TraceWriter { out, events: 0 })
    }

    pub fn write(&mut self, ev: &Event) -> std::io::Result<()> {
        self.events += 1;
        writeln!(self.out, "{}", ev.to_line())
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
