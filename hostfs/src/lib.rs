//! # csd-hostfs: the host side of csdlab
//!
//! Will hold the namespace (directories, inodes, permissions), an ext4-like extent allocator
//! over the device's logical space, a page cache with delayed out-of-order writeback, `fiemap`;
//! LightFS-Host and the offload designs `frag-s`, `frag-m`, `fsr`, `lightfs`. Talks to the
//! flash only through `csd_device::Device`.
//!
//! Today: [`ndpmeta`], LightFS's per-directory index file format; [`alloc`], the extent
//! allocator; [`namespace`], directories, inodes and level-by-level path resolution that
//! reports the metadata blocks a lookup reads; [`perms`], the POSIX access check; [`fs`],
//! `HostFs`, all of them over the device with a host metadata cache (cold and warm lookups,
//! `fiemap`).

pub mod alloc;
pub mod fs;
pub mod namespace;
pub mod ndp;
pub mod ndpmeta;
pub mod pagecache;
pub mod perms;
