//! # csd-hostfs: the host side of csdlab
//!
//! A host file system over the device's logical space, modelled closely enough that finding
//! a file's layout costs what it costs on a real system, and the four ways LightFS compares of
//! offloading near-data processing onto the device.
//!
//! [`namespace`]: directories, inodes and level-by-level path resolution that reports the
//! metadata blocks a lookup reads; [`alloc`]: the ext4-like extent allocator; [`perms`]: the
//! POSIX access check; [`pagecache`]: dirty pages and their seeded, out-of-order writeback;
//! [`fs`]: `HostFs`, all of them over the device (cold and warm lookups, `fiemap`, file I/O
//! through the page cache); [`journal`]: jbd2's ordered-mode metadata journal;
//! [`ndpmeta`]: LightFS's per-directory index file format; [`ndp`]: the offload designs frag-s, frag-m, FSR and LightFS; [`fusion`]: FusionFS's comparison;
//! [`ispfs`]: ISPFS, its command file and its word-query evaluation. Talks to the flash only through
//! `csd_device::Device`.

pub mod alloc;
pub mod fs;
pub mod fusion;
pub mod ispfs;
pub mod journal;
pub mod namespace;
pub mod ndp;
pub mod ndpmeta;
pub mod pagecache;
pub mod perms;
