//! The process's own memory, as the benchmarks report it (Linux's /proc/self/status).

use anyhow::Context;

/// A `kB` field of /proc/self/status, in bytes.
pub fn proc_status_bytes(field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")
        .context("reading /proc/self/status (the memory benchmark needs Linux)")?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .with_context(|| format!("no {field} in /proc/self/status"))?;
    let kb: u64 = line[field.len() + 1..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .with_context(|| format!("parsing {line:?}"))?;
    Ok(kb * 1024)
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
/// Single runs gain nothing and a held heap fragments (the default replay's peak grew
/// 30 → 53 MiB), so other commands keep glibc's default.
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
