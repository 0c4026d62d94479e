//! # csd-hostfs: the host side of csdlab (to come)
//!
//! Namespace (directories, inodes, permissions), an ext4-like extent allocator over the
//! device's logical space, a page cache with delayed out-of-order writeback, `fiemap`; LightFS-Host
//! (`.ndpmeta`), and the offload designs `frag-s`, `frag-m`, `fsr`, `lightfs`. Talks to the
//! flash only through `csd_device::Device`.
