//! The bare device: block traces (`bread`, `bwrite`) straight onto the flash model, with no
//! file system in front.

use super::interface::{block_io, Applied, OpError, SetupError, System, Totals};
use crate::format::{Event, Op};
use csd_device::{DataMode, Device, Profile, VirtualTime};

pub struct DeviceSystem {
    device: Device,
    /// When the operation in progress began, and when the last one ended.
    started: VirtualTime,
    clock: VirtualTime,
}

impl DeviceSystem {
    /// A fresh device of `profile`, idle, its counters at zero.
    pub fn new(profile: &Profile) -> Result<DeviceSystem, SetupError> {
        Ok(DeviceSystem {
            device: Device::new(profile, DataMode::TimingOnly)?,
            started: VirtualTime::ZERO,
            clock: VirtualTime::ZERO,
        })
    }
}

impl System for DeviceSystem {
    fn name(&self) -> String {
        "device".to_string()
    }

    fn op_started(&self) -> VirtualTime {
        self.started
    }

    fn begin(&mut self, start: VirtualTime) -> Result<(), String> {
        assert!(
            start >= self.started,
            "operations begin in time order: {start:?} after {:?}",
            self.started
        );
        self.started = start;
        self.clock = start;
        Ok(())
    }

    fn apply(&mut self, ev: &Event, start: VirtualTime) -> Result<Applied, OpError> {
        let (write, off, len) = match ev.op {
            Op::Bread { off, len } => (false, off, len),
            Op::Bwrite { off, len } => (true, off, len),
            ref other => {
                return Ok(Applied::Skipped(format!(
                    "{} (the bare device has no file system)",
                    other.name()
                )))
            }
        };
        self.clock = block_io(&mut self.device, write, start, off, len)?;
        Ok(Applied::Done)
    }

    fn clock(&self) -> VirtualTime {
        self.clock
    }

    fn totals(&self) -> Totals {
        Totals {
            ndp: None,
            isc: None,
            fusion: None,
            device: self.device.counters(),
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.device.check_invariants().map_err(|e| e.to_string())
    }
}
