//! The bare device: block traces (`bread`, `bwrite`) straight onto the flash model, with no
//! file system in front.

use super::interface::{block_io, Applied, OpClock, OpError, SetupError, System, Totals};
use crate::format::{Event, Op};
use csd_device::{DataMode, Device, Profile, VirtualTime};

pub struct DeviceSystem {
    device: Device,
    clock: OpClock,
}

impl DeviceSystem {
    /// A fresh device of `profile`, idle, its counters at zero.
    pub fn new(profile: &Profile) -> Result<DeviceSystem, SetupError> {
        Ok(DeviceSystem {
            device: Device::new(profile, DataMode::TimingOnly)?,
            clock: OpClock::default(),
        })
    }
}

impl System for DeviceSystem {
    fn name(&self) -> String {
        "device".to_string()
    }

    fn op_started(&self) -> VirtualTime {
        self.clock.started
    }

    fn begin(&mut self, start: VirtualTime) -> Result<(), String> {
        self.clock.begin(start);
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
        self.clock.ended = block_io(&mut self.device, write, start, off, len)?;
        Ok(Applied::Done)
    }

    fn clock(&self) -> VirtualTime {
        self.clock.ended
    }

    fn totals(&self) -> Totals {
        Totals {
            ndp: None,
            isc: None,
            fusion: None,
            isp: None,
            journal: None,
            device: self.device.counters(),
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.device.check_invariants().map_err(|e| e.to_string())
    }
}
