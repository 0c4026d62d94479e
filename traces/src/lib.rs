//! # csd-traces: record, import and replay file-system traces (to come)
//!
//! The JSON Lines trace format, the strace-based recorder and importers, the replay engine
//! driving hostfs + device + runtime in virtual time, reports, and the sled run store.
