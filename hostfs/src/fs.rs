//! The host file system over the simulated device: namespace, extent allocator and the host's
//! metadata cache, with every metadata block really living on flash.
//!
//! Creating a file or directory writes its inode-table block and its parent's directory block
//! through the device, so those pages are mapped on flash; a lookup whose blocks are not in the
//! host's metadata cache reads them back through the device, one level after another (each
//! level needs the previous one). That is why a cold `fiemap` costs hundreds of microseconds
//! and a warm one only the host's CPU time (LightFS Table V).
//!
//! Files are written whole and synchronously here (`import`): the page cache with delayed,
//! out-of-order writeback that LightFS §II-D's consistency problem needs is the next layer.

use crate::alloc::{BlockRun, ExtentAllocator};
use crate::namespace::{Ino, InodeKind, MetaLayout, Namespace, NewKind, NsError, Resolution};
use crate::perms::{Access, Cred, Perms};
use csd_device::{Device, DeviceError, HostCosts, IoPath, Lpn, VirtualTime};
use std::collections::BTreeSet;

/// The superblock's block.
const SUPERBLOCK: u64 = 0;
/// ext4 allocates one inode per 16 KiB of capacity by default.
const BYTES_PER_INODE: u64 = 16 << 10;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error(transparent)]
    Namespace(#[from] NsError),
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    #[error("permission denied: {access} access to '{path}'")]
    PermissionDenied { path: String, access: &'static str },
    #[error("'{0}' is a directory")]
    IsADirectory(String),
    #[error("the device ({0} blocks) is too small for a file system")]
    TooSmall(u64),
}

/// What a lookup cost: metadata blocks read from flash, cache hits, and time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LookupCost {
    pub metadata_reads: u32,
    pub cache_hits: u32,
    pub ns: u64,
}

pub struct HostFs {
    device: Device,
    ns: Namespace,
    alloc: ExtentAllocator,
    /// Metadata blocks in the host's cache (inode-table and directory blocks).
    cached: BTreeSet<u64>,
    costs: HostCosts,
    clock: VirtualTime,
}

impl HostFs {
    /// Formats `device` (one file-system block per flash page) with an empty root directory.
    pub fn format(device: Device, root: Perms) -> Result<HostFs, FsError> {
        let block_bytes = device.page_size();
        let blocks = device.logical_pages();
        let inode_count =
            (blocks * block_bytes / BYTES_PER_INODE).clamp(64, u64::from(u32::MAX / 2)) as u32;
        let layout = MetaLayout {
            block_bytes,
            inode_bytes: 256,
            inode_table_first_block: 1,
            inode_count,
        };
        let data_start = layout.inode_table_first_block + layout.inode_table_blocks();
        if data_start + 16 > blocks {
            return Err(FsError::TooSmall(blocks));
        }
        let mut alloc = ExtentAllocator::new(data_start, blocks - data_start);
        let ns = Namespace::new(layout, root, &mut alloc)?;
        let costs = device.profile().host.clone();
        let mut fs = HostFs {
            device,
            ns,
            alloc,
            cached: BTreeSet::new(),
            costs,
            clock: VirtualTime::ZERO,
        };
        let root_blocks = fs.dir_blocks(Ino::ROOT);
        fs.write_meta(
            [SUPERBLOCK, layout.inode_block(Ino::ROOT)]
                .into_iter()
                .chain(root_blocks),
        )?;
        Ok(fs)
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }

    pub fn clock(&self) -> VirtualTime {
        self.clock
    }

    /// Empties the host's metadata cache (`echo 2 > /proc/sys/vm/drop_caches`).
    pub fn drop_caches(&mut self) {
        self.cached.clear();
    }

    fn dir_blocks(&self, ino: Ino) -> Vec<u64> {
        match &self.ns.inode(ino).map(|i| &i.kind) {
            Some(InodeKind::Dir { blocks, .. }) => {
                blocks.iter().flat_map(|r| r.first..r.end()).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Writes metadata blocks through the device (and keeps them cached, as a write would).
    fn write_meta(&mut self, blocks: impl IntoIterator<Item = u64>) -> Result<(), FsError> {
        let at = self.clock;
        let mut done = at;
        for b in blocks.into_iter().collect::<BTreeSet<_>>() {
            done = done.max(self.device.write(IoPath::Host, at, Lpn(b), 1, None)?.done);
            self.cached.insert(b);
        }
        self.clock = done;
        Ok(())
    }

    fn create(
        &mut self,
        path: &str,
        kind: NewKind,
        perms: Perms,
        who: Cred,
    ) -> Result<Ino, FsError> {
        let ino = self.ns.create(path, kind, perms, who, &mut self.alloc)?;
        let parent = self.ns.inode(ino).expect("just created").parent;
        let layout = *self.ns.layout();
        let mut blocks = vec![layout.inode_block(ino), layout.inode_block(parent)];
        blocks.extend(self.dir_blocks(parent));
        blocks.extend(self.dir_blocks(ino));
        self.write_meta(blocks)?;
        Ok(ino)
    }

    pub fn mkdir(&mut self, path: &str, perms: Perms, who: Cred) -> Result<Ino, FsError> {
        self.create(path, NewKind::Dir, perms, who)
    }

    /// Creates `path` with `data`, allocates its blocks (contiguous where the free space
    /// allows) and writes it through the device; the file is durable on return.
    pub fn import(
        &mut self,
        path: &str,
        data: &[u8],
        perms: Perms,
        who: Cred,
    ) -> Result<Ino, FsError> {
        let ino = self.create(path, NewKind::File, perms, who)?;
        let bs = self.ns.layout().block_bytes;
        let runs = self
            .alloc
            .allocate((data.len() as u64).div_ceil(bs), None)
            .map_err(NsError::from)?;
        let keep = self.device.ftl().keeps_payloads();
        let ranges = byte_ranges(&runs, bs, data.len() as u64);
        let c =
            self.device
                .write_ranges(IoPath::Host, self.clock, &ranges, keep.then_some(data))?;
        self.clock = c.done;
        self.ns.set_file_layout(ino, data.len() as u64, runs)?;
        self.write_meta([self.ns.layout().inode_block(ino)])?;
        Ok(ino)
    }

    /// Resolves `path`, reading every metadata block the host does not have cached through
    /// the device, one after another, and charging the host's per-component CPU time.
    pub fn lookup(&mut self, path: &str, who: Cred) -> Result<(Resolution, LookupCost), FsError> {
        let r = self.ns.resolve(path, who)?;
        let start = self.clock;
        let mut t =
            start.after(self.costs.path_component_ns * (r.ino_list.len() as u64 - 1).max(1));
        let mut cost = LookupCost::default();
        for m in &r.reads {
            if self.cached.contains(&m.block()) {
                cost.cache_hits += 1;
            } else {
                t = self
                    .device
                    .read(IoPath::Host, t, Lpn(m.block()), 1, None)?
                    .done;
                self.cached.insert(m.block());
                cost.metadata_reads += 1;
            }
        }
        cost.ns = t.since(start);
        self.clock = t;
        Ok((r, cost))
    }

    /// `filefrag`: the extents of a file the caller may read, and what finding them cost.
    pub fn fiemap(
        &mut self,
        path: &str,
        who: Cred,
    ) -> Result<(Vec<BlockRun>, LookupCost), FsError> {
        let (_, extents, cost) = self.file_extents(path, who)?;
        Ok((extents, cost))
    }

    /// Looks up a readable file: its size, extents, and the cost of `fiemap` (lookup + CPU).
    fn file_extents(
        &mut self,
        path: &str,
        who: Cred,
    ) -> Result<(u64, Vec<BlockRun>, LookupCost), FsError> {
        let (r, mut cost) = self.lookup(path, who)?;
        let inode = self.ns.inode(r.ino).expect("resolved");
        let InodeKind::File {
            size_bytes,
            extents,
        } = &inode.kind
        else {
            return Err(FsError::IsADirectory(path.to_string()));
        };
        if !inode.perms.allows(who, Access::Read) {
            return Err(FsError::PermissionDenied {
                path: path.to_string(),
                access: Access::Read.name(),
            });
        }
        let found = (*size_bytes, extents.clone());
        self.clock = self.clock.after(self.costs.fiemap_ns);
        cost.ns += self.costs.fiemap_ns;
        Ok((found.0, found.1, cost))
    }

    /// Reads a whole file back through the device (data mode keeps the bytes).
    pub fn read_file(&mut self, path: &str, who: Cred) -> Result<Vec<u8>, FsError> {
        let (size_bytes, extents, _) = self.file_extents(path, who)?;
        let bs = self.ns.layout().block_bytes;
        let mut out = vec![0u8; size_bytes as usize];
        let ranges = byte_ranges(&extents, bs, out.len() as u64);
        let keep = self.device.ftl().keeps_payloads();
        let c = self.device.read_ranges(
            IoPath::Host,
            self.clock,
            &ranges,
            keep.then_some(&mut out[..]),
        )?;
        self.clock = c.done;
        Ok(out)
    }
}

/// The device byte ranges holding the first `len` bytes of a file laid out in `runs`.
fn byte_ranges(runs: &[BlockRun], block_bytes: u64, len: u64) -> Vec<(u64, u64)> {
    let mut left = len;
    let mut out = Vec::with_capacity(runs.len());
    for r in runs {
        let n = (r.blocks * block_bytes).min(left);
        if n == 0 {
            break;
        }
        out.push((r.first * block_bytes, n));
        left -= n;
    }
    out
}
