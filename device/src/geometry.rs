//! NAND geometry: channels × dies × planes × blocks × pages, and over-provisioning.
//!
//! The geometry is pure arithmetic over a validated [`Geometry`]; it owns no state. Physical pages
//! are numbered die-major (see [`Ppn`]) so a die's blocks are one contiguous range.

use crate::addr::{BlockId, ChannelId, DieId, Lpn, PageAddr, Ppn};
use serde::{Deserialize, Serialize};

/// Shape of the flash array. Loaded from a profile's `[geometry]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Geometry {
    pub channels: u32,
    /// Dies (ways / LUNs) per channel.
    pub dies_per_channel: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_size_bytes: u32,
    /// Fraction of physical capacity hidden from the host, e.g. `0.07` for 7 %.
    pub over_provisioning: f64,
}

/// The most dies a geometry may have (channels × dies per channel).
pub const MAX_DIES: u32 = 1024;

impl Geometry {
    pub fn dies(&self) -> u32 {
        self.channels * self.dies_per_channel
    }

    pub fn blocks_per_die(&self) -> u32 {
        self.planes_per_die * self.blocks_per_plane
    }

    pub fn blocks(&self) -> u32 {
        self.dies() * self.blocks_per_die()
    }

    pub fn pages_per_die(&self) -> u64 {
        u64::from(self.blocks_per_die()) * u64::from(self.pages_per_block)
    }

    pub fn physical_pages(&self) -> u64 {
        u64::from(self.dies()) * self.pages_per_die()
    }

    pub fn physical_bytes(&self) -> u64 {
        self.physical_pages() * u64::from(self.page_size_bytes)
    }

    /// Host-visible pages: physical capacity less over-provisioning.
    pub fn logical_pages(&self) -> u64 {
        (self.physical_pages() as f64 * (1.0 - self.over_provisioning)).floor() as u64
    }

    pub fn logical_bytes(&self) -> u64 {
        self.logical_pages() * u64::from(self.page_size_bytes)
    }

    pub fn die_of_block(&self, block: BlockId) -> DieId {
        DieId(block.0 / self.blocks_per_die())
    }

    pub fn channel_of_die(&self, die: DieId) -> ChannelId {
        ChannelId(die.0 / self.dies_per_channel)
    }

    pub fn block_of(&self, ppn: Ppn) -> BlockId {
        BlockId(ppn.0 / self.pages_per_block)
    }

    pub fn page_in_block(&self, ppn: Ppn) -> u32 {
        ppn.0 % self.pages_per_block
    }

    pub fn die_of(&self, ppn: Ppn) -> DieId {
        self.die_of_block(self.block_of(ppn))
    }

    pub fn first_ppn(&self, block: BlockId) -> Ppn {
        Ppn(block.0 * self.pages_per_block)
    }

    /// The blocks of one die, as a contiguous range of block ids.
    pub fn blocks_of_die(&self, die: DieId) -> std::ops::Range<u32> {
        let first = die.0 * self.blocks_per_die();
        first..first + self.blocks_per_die()
    }

    /// Decodes a physical page number into channel/die/plane/block/page.
    pub fn decode(&self, ppn: Ppn) -> PageAddr {
        let block = self.block_of(ppn);
        let die = self.die_of_block(block);
        let block_in_die = block.0 % self.blocks_per_die();
        PageAddr {
            channel: self.channel_of_die(die).0,
            die: die.0 % self.dies_per_channel,
            // Blocks alternate between planes so consecutive blocks can be multi-plane pairs.
            plane: block_in_die % self.planes_per_die,
            block: block_in_die / self.planes_per_die,
            page: self.page_in_block(ppn),
        }
    }

    pub fn contains_lpn(&self, lpn: Lpn) -> bool {
        lpn.0 < self.logical_pages()
    }

    /// Checks the geometry on its own; returns the offending field and why.
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        let positive = [
            ("channels", self.channels),
            ("dies_per_channel", self.dies_per_channel),
            ("planes_per_die", self.planes_per_die),
            ("blocks_per_plane", self.blocks_per_plane),
            ("pages_per_block", self.pages_per_block),
            ("page_size_bytes", self.page_size_bytes),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err((field, "must be at least 1".into()));
            }
        }
        if !self.page_size_bytes.is_power_of_two() || self.page_size_bytes < 512 {
            return Err((
                "page_size_bytes",
                format!("{} is not a power of two ≥ 512", self.page_size_bytes),
            ));
        }
        if !(self.over_provisioning > 0.0 && self.over_provisioning < 0.5) {
            return Err((
                "over_provisioning",
                format!(
                    "{} must be a fraction in (0, 0.5), e.g. 0.07 for 7 %",
                    self.over_provisioning
                ),
            ));
        }
        // The counts below are u32 products: check them before anything multiplies them.
        // Each die has its own clock and GC bookkeeping (a list head per valid-page count), so
        // dies are bounded too: far above the few hundred of the largest SSDs.
        let dies = self
            .channels
            .checked_mul(self.dies_per_channel)
            .filter(|&d| d <= MAX_DIES)
            .ok_or((
                "dies_per_channel",
                format!(
                    "{} channels × {} dies per channel is over the model's {MAX_DIES} dies",
                    self.channels, self.dies_per_channel
                ),
            ))?;
        let blocks_per_die = self
            .planes_per_die
            .checked_mul(self.blocks_per_plane)
            .ok_or((
                "blocks_per_plane",
                "planes × blocks per plane overflows".into(),
            ))?;
        if self.pages_per_block > u32::from(u16::MAX) {
            return Err(("pages_per_block", "must be at most 65535".into()));
        }
        // Physical page numbers are stored as u32 in the mapping tables (compactness is what
        // lets a 1 TiB device fit in a few MiB of host memory); refuse geometries beyond that.
        let pages = u64::from(dies) * u64::from(blocks_per_die) * u64::from(self.pages_per_block);
        if pages >= u64::from(u32::MAX) {
            return Err((
                "blocks_per_plane",
                format!(
                    "{} dies × {} planes × {} blocks per plane × {} pages per block = {pages} \
                     physical pages, over the model's 2^32-1; use larger pages or fewer blocks",
                    dies, self.planes_per_die, self.blocks_per_plane, self.pages_per_block
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry {
            channels: 2,
            dies_per_channel: 2,
            planes_per_die: 2,
            blocks_per_plane: 4,
            pages_per_block: 8,
            page_size_bytes: 4096,
            over_provisioning: 0.25,
        }
    }

    #[test]
    fn an_oversized_geometry_names_the_field_and_the_product() {
        let mut g = geo();
        g.pages_per_block = u32::MAX;
        assert_eq!(g.check().unwrap_err().0, "pages_per_block");
        let mut g = geo();
        g.blocks_per_plane = 1 << 30;
        let (field, why) = g.check().unwrap_err();
        assert_eq!(field, "blocks_per_plane");
        assert!(
            why.contains("4 dies × 2 planes × 1073741824 blocks per plane × 8 pages per block"),
            "{why}"
        );
    }

    #[test]
    fn counts_and_decoding_agree() {
        let g = geo();
        assert_eq!(g.dies(), 4);
        assert_eq!(g.blocks(), 32);
        assert_eq!(g.physical_pages(), 256);
        assert_eq!(g.logical_pages(), 192);
        // Last page of the last block of die 3 (channel 1, die 1 on that channel).
        let a = g.decode(Ppn(255));
        assert_eq!(
            (a.channel, a.die, a.plane, a.block, a.page),
            (1, 1, 1, 3, 7)
        );
        assert_eq!(g.die_of(Ppn(64)), DieId(1));
        assert_eq!(g.channel_of_die(DieId(2)), ChannelId(1));
        assert_eq!(g.blocks_of_die(DieId(1)), 8..16);
    }

    #[test]
    fn rejects_zero_and_bad_op() {
        let mut g = geo();
        g.pages_per_block = 0;
        assert_eq!(g.check().unwrap_err().0, "pages_per_block");
        let mut g = geo();
        g.over_provisioning = 0.0;
        assert_eq!(g.check().unwrap_err().0, "over_provisioning");
        let mut g = geo();
        g.page_size_bytes = 3000;
        assert_eq!(g.check().unwrap_err().0, "page_size_bytes");
        // Products that overflow u32 are refused before anything multiplies them.
        let mut g = geo();
        (g.channels, g.dies_per_channel) = (1 << 16, 1 << 16);
        assert_eq!(g.check().unwrap_err().0, "dies_per_channel");
        let mut g = geo();
        (g.planes_per_die, g.blocks_per_plane) = (1 << 16, 1 << 16);
        assert_eq!(g.check().unwrap_err().0, "blocks_per_plane");
        let mut g = geo();
        (g.channels, g.dies_per_channel) = (64, MAX_DIES / 64 + 1);
        assert!(g.check().unwrap_err().1.contains("1024 dies"));
    }
}
