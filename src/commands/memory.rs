//! The process's own memory, as the benchmarks report it (Linux's /proc/self/status).

use anyhow::Context;

/// A `kB` field of /proc/self/status, in bytes.
pub fn proc_status_bytes(field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")
        .context("reading /proc/self/status (the memory benchmark needs Linux)")?;
    kb_field(&status, field).with_context(|| format!("no {field} in kB in /proc/self/status"))
}

/// For commands that build and drop one simulated device after another (a sweep's points,
/// `csd repro`'s experiments, `csd txbench`'s grid, `csd ndp`'s designs), each allocating
/// tens of MiB: keeps freed memory in the heap for the next device. By default glibc hands
/// large blocks back to the kernel when they are freed, so the next device faults every page
/// in again, zeroed by the kernel, and each unmap flushes the TLBs of the cores running the
/// process's threads. Measured with farm-bench on a 2-core VM: a 16-point NDP sweep 21 %
/// faster on one worker and 19 % on two (half the system time), `csd repro lightfs` 10 %
/// faster, peak RSS within 5 %; `csd txbench` 2.1× faster (4.04 → 1.92 s, medians of five
/// paired runs) for a peak of 193 MiB instead of 105; `csd ndp` over 200 files of 256 KiB
/// and four designs 24 % faster (0.426 → 0.314 s, six paired runs), its peak 4 MiB lower.
/// `csd bench cisc` rotates and unlinks a 4 MiB StorageFS log every 1024 ops, and glibc gave
/// each back to the kernel, so the next faulted it in: keeping it, the bench ran 1.55×
/// faster (append-CRC-write 6.2 → 4.0 µs an op, three paired runs). `csd fusion`'s default
/// run gained nothing (0.99× the wall time, eight paired runs against a build keeping the
/// default) for a peak 5 MiB higher, so it keeps the default. Single runs gain nothing and
/// a held heap fragments (the default replay's peak grew 30 → 53 MiB), so other commands
/// keep glibc's default.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes glibc's allocator, from the main thread before the command
    // starts any other thread.
    unsafe {
        // Blocks under 256 MiB come from the heap, and the heap is not trimmed below 1 GiB.
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

/// Bytes this process may still allocate, as far as Linux tells: the smaller of what its
/// address-space limit (`ulimit -v`, `RLIMIT_AS`) leaves and the machine's available memory
/// (`MemAvailable`). `None` where neither is known.
pub fn allocatable_bytes() -> Option<u64> {
    let by_limit = address_space_limit().map(|limit| {
        let used = proc_status_bytes("VmSize").unwrap_or(0);
        limit.saturating_sub(used)
    });
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| kb_field(&m, "MemAvailable"));
    match (by_limit, available) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The process's `RLIMIT_AS`, if it has one.
fn address_space_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given and nothing else.
        let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
        (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
    }
    #[cfg(not(unix))]
    None
}

/// A `Field: N kB` line of a /proc file (`/proc/meminfo`, `/proc/self/status`), in bytes.
pub fn kb_field(text: &str, field: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    let kb: u64 = line[field.len() + 1..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// What the process may still allocate, read once ([`allocatable_bytes`]) for several
/// decisions about one piece of work.
pub struct Room(Option<u64>);

impl Room {
    pub fn now() -> Room {
        Room(allocatable_bytes())
    }

    /// Whether `needed` more bytes fit (yes where that is not known).
    pub fn fits(&self, needed: u64) -> bool {
        self.0.is_none_or(|room| needed <= room)
    }

    /// Refuses work that needs about `needed` bytes of memory when the process may not
    /// have them, before anything is allocated: a failed allocation aborts the process,
    /// where this names the problem. `what` says what needs them.
    pub fn ensure(&self, needed: u64, what: impl FnOnce() -> String) -> anyhow::Result<()> {
        match self.0 {
            Some(room) if needed > room => anyhow::bail!(
                "{} needs about {} of memory, and this process may allocate {} more (its \
                 address-space limit, `ulimit -v`, or the machine's available memory)",
                what(),
                crate::units::fmt_bytes(needed),
                crate::units::fmt_bytes(room)
            ),
            _ => Ok(()),
        }
    }
}
