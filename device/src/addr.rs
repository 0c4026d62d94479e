//! Typed addresses and virtual time.
//!
//! Every address space in the model gets its own newtype so that a logical page can never be
//! handed to an API that wants a physical one (the classic FTL bug). Tables store the raw `u32`
//! inside to stay compact; the newtypes exist at every API boundary.

use serde::Serialize;
use std::fmt;

/// A point in virtual time, in nanoseconds since the device was created.
///
/// Wall-clock time never enters the model: every latency is a difference of two `VirtualTime`s.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
pub struct VirtualTime(pub u64);

impl VirtualTime {
    pub const ZERO: VirtualTime = VirtualTime(0);

    pub fn ns(self) -> u64 {
        self.0
    }

    /// `self + duration_ns`, saturating (a simulation cannot run 584 years).
    pub fn after(self, duration_ns: u64) -> VirtualTime {
        VirtualTime(self.0.saturating_add(duration_ns))
    }

    /// Nanoseconds from `earlier` to `self` (0 if `earlier` is later).
    pub fn since(self, earlier: VirtualTime) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for VirtualTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

/// Logical page number: the host-visible address space, in flash-page units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Lpn(pub u64);

/// A run of consecutive logical pages: where part of a file lives. A host file system's
/// block run, a volume's extent and a TxISC snapshot's extent are all this one type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Extent {
    pub first: Lpn,
    pub pages: u64,
}

impl Extent {
    pub fn new(first: u64, pages: u64) -> Extent {
        Extent {
            first: Lpn(first),
            pages,
        }
    }

    /// The page after the run's last (saturating: an extent never wraps the address space).
    pub fn end(&self) -> u64 {
        self.first.0.saturating_add(self.pages)
    }
}

/// Physical page number: a flat index over every page of every block of every die.
///
/// Layout (most significant first): die, block-in-die, page-in-block. Keeping a die's pages
/// contiguous makes `die_of` a division and lets per-die structures be simple slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Ppn(pub u32);

/// A flat block index over all dies (die-major, like [`Ppn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct BlockId(pub u32);

/// A die (LUN / way): the unit of flash-operation parallelism. Dies are numbered
/// channel-major: die `d` sits on channel `d / dies_per_channel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct DieId(pub u32);

/// A channel: the bus shared by the dies attached to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ChannelId(pub u32);

/// A fully decoded physical page address, for reports and debugging.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PageAddr {
    pub channel: u32,
    pub die: u32,
    pub plane: u32,
    pub block: u32,
    pub page: u32,
}

impl fmt::Display for Lpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lpn {}", self.0)
    }
}

impl fmt::Display for Ppn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ppn {}", self.0)
    }
}

impl fmt::Display for BlockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block {}", self.0)
    }
}

impl fmt::Display for PageAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ch{}/die{}/pl{}/blk{}/pg{}",
            self.channel, self.die, self.plane, self.block, self.page
        )
    }
}
