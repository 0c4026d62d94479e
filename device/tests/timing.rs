//! Timing acceptance: die parallelism, die serialization, and QD-1 write latency on the
//! `daisyplus-femu` profile (TxISC Table I).

use csd_device::synth::{prefill, RwPattern, SynthJob};
use csd_device::timing::transfer_ns;
use csd_device::{DataMode, Device, IoPath, Lpn, Profile, VirtualTime};

fn femu() -> (Profile, Device) {
    let p = Profile::load("daisyplus-femu").unwrap();
    let d = Device::new(&p, DataMode::TimingOnly).unwrap();
    (p, d)
}

#[test]
fn reads_spread_over_all_dies_take_rounds_of_t_read() {
    let (p, mut dev) = femu();
    let dies = u64::from(p.geometry.dies());
    let n = 64u64;
    let ps = dev.page_size();
    prefill(&mut dev, n * ps).unwrap();
    dev.reset_measurements();
    let t_read = p.timing.page_read_ns;
    let xfer = transfer_ns(dev.page_size(), p.timing.channel_bytes_per_sec);
    // Consecutive LPNs were striped over every die; issue all N reads at once.
    let makespan = (0..n)
        .map(|i| {
            dev.read(IoPath::Internal, VirtualTime::ZERO, Lpn(i), 1, None)
                .unwrap()
                .done
                .ns()
        })
        .max()
        .unwrap();
    let rounds = n.div_ceil(dies);
    let per_channel = u64::from(p.geometry.dies_per_channel);
    // Cache read: a die's senses follow each other, its last page still crosses the channel.
    assert!(makespan >= rounds * t_read + xfer, "{makespan}");
    // Dies sharing a channel may wait for each other's transfers, nothing more.
    assert!(
        makespan <= rounds * (t_read + per_channel * xfer),
        "{makespan}"
    );
    assert!(
        makespan < n * t_read / 8,
        "parallel, not serial: {makespan}"
    );
}

#[test]
fn reads_on_one_die_serialize() {
    let (p, mut dev) = femu();
    let dies = u64::from(p.geometry.dies());
    let n = 12u64;
    let ps = dev.page_size();
    prefill(&mut dev, n * dies * ps).unwrap();
    dev.reset_measurements();
    let geo = p.geometry.clone();
    let on_die_zero: Vec<Lpn> = (0..n * dies)
        .map(Lpn)
        .filter(|&l| geo.die_of(dev.ftl().lookup(l).unwrap().unwrap()).0 == 0)
        .collect();
    assert_eq!(on_die_zero.len() as u64, n);
    let makespan = on_die_zero
        .iter()
        .map(|&l| {
            dev.read(IoPath::Internal, VirtualTime::ZERO, l, 1, None)
                .unwrap()
                .done
                .ns()
        })
        .max()
        .unwrap();
    let xfer = transfer_ns(dev.page_size(), p.timing.channel_bytes_per_sec);
    // Cache read: the die senses page k+1 while page k crosses the channel, so only the
    // last transfer is not hidden behind a sense.
    assert_eq!(makespan, n * p.timing.page_read_ns + xfer);
}

#[test]
fn qd1_random_write_latency_is_program_time_plus_overheads() {
    let (p, mut dev) = femu();
    let job = SynthJob {
        rw: RwPattern::RandWrite,
        block_size_bytes: 16 * 1024,
        queue_depth: 1,
        region_bytes: 256 << 20,
        io_bytes: 64 << 20,
        read_percent: 0,
        seed: 1,
        prefill: false,
    };
    let r = job.run(&mut dev, &mut |_, _| {}).unwrap();
    let h = &p.host_interface;
    let expected = h.nvme_command_ns
        + transfer_ns(16 * 1024, h.pcie_bytes_per_sec)
        + h.pcie_command_ns
        + transfer_ns(16 * 1024, p.timing.channel_bytes_per_sec)
        + p.timing.page_program_ns;
    assert_eq!(r.latency.min_ns, expected);
    assert_eq!(r.latency.max_ns, expected, "no GC, no queueing at QD 1");
    assert_eq!(r.counters.ftl.gc_victims, 0);
    // 400 µs of program dominates: about 2.3 K IOPS at QD 1.
    assert!((r.iops - 1e9 / expected as f64).abs() < 1.0, "{}", r.iops);
}

#[test]
fn queue_depth_buys_parallelism_until_the_dies_saturate() {
    let run = |qd| {
        let (_, mut dev) = femu();
        SynthJob {
            rw: RwPattern::RandRead,
            block_size_bytes: 16 * 1024,
            queue_depth: qd,
            region_bytes: 64 << 20,
            io_bytes: 32 << 20,
            read_percent: 100,
            seed: 9,
            prefill: true,
        }
        .run(&mut dev, &mut |_, _| {})
        .unwrap()
        .iops
    };
    let (q1, q8, q64) = (run(1), run(8), run(64));
    assert!(q8 > 4.0 * q1, "qd8 {q8} vs qd1 {q1}");
    assert!(q64 > q8, "qd64 {q64} vs qd8 {q8}");
    // 16 dies at ~100 µs per read cannot exceed ~160 K IOPS.
    assert!(q64 < 16.0 * 1e9 / 80_000.0, "{q64}");
}

#[test]
fn gc_under_sustained_random_overwrite_amplifies_writes() {
    let mut p = Profile::load("daisyplus-femu").unwrap();
    p.geometry.blocks_per_plane = 128; // small device (1 GiB), so GC starts quickly
    let mut dev = Device::new(&p, DataMode::TimingOnly).unwrap();
    let region = dev.capacity_bytes() / 16 * 15;
    let r = SynthJob {
        rw: RwPattern::RandWrite,
        block_size_bytes: 16 * 1024,
        queue_depth: 16,
        region_bytes: region,
        io_bytes: region * 2,
        read_percent: 0,
        seed: 5,
        prefill: true,
    }
    .run(&mut dev, &mut |_, _| {})
    .unwrap();
    assert!(r.counters.ftl.gc_victims > 100, "{:?}", r.counters.ftl);
    assert!(r.counters.waf > 1.5, "waf {}", r.counters.waf);
    // Foreground GC shows up in the tail, not in the median.
    assert!(r.latency.p99_ns > 2 * r.latency.p50_ns, "{:?}", r.latency);
    dev.check_invariants().unwrap();
}

#[test]
fn a_write_does_not_queue_behind_a_read_dma_booked_in_the_future() {
    let (p, mut dev) = femu();
    let dies = u64::from(p.geometry.dies());
    let ps = dev.page_size();
    prefill(&mut dev, 2 * dies * ps).unwrap();
    dev.reset_measurements();
    let nominal =
        transfer_ns(ps, p.host_interface.pcie_bytes_per_sec) + p.host_interface.pcie_command_ns;
    // Two reads on one die (LPN 0 and LPN `dies` share a die): the second one's flash
    // completes ~200 µs out, and it books the link there.
    let a = dev
        .read(IoPath::Host, VirtualTime::ZERO, Lpn(0), 1, None)
        .unwrap();
    let b = dev
        .read(IoPath::Host, VirtualTime::ZERO, Lpn(dies), 1, None)
        .unwrap();
    assert!(b.done.ns() > 2 * p.timing.page_read_ns);
    // A write submitted at 1 µs finds the link idle and must not wait for those bookings.
    let w = dev
        .write(IoPath::Host, VirtualTime(1_000), Lpn(5 * dies), 1, None)
        .unwrap();
    assert_eq!(w.dma_ns, nominal);
    assert_eq!(a.dma_ns, nominal);
    assert_eq!(b.dma_ns, nominal);
}

/// A power-loss-protected write buffer acknowledges a write when it holds it; once full,
/// writes wait for earlier programs, so sustained writes run at flash speed.
#[test]
fn a_write_buffer_acknowledges_early_and_throttles_when_full() {
    let mut p = Profile::load("daisyplus-femu").unwrap();
    let ps = u64::from(p.geometry.page_size_bytes);
    let cap_pages = 4;
    p.write_cache = Some(csd_device::timing::WriteCache {
        bytes: cap_pages * ps,
        accept_ns: 5_000,
    });
    p.validate().unwrap();
    let plain = Profile::load("daisyplus-femu").unwrap();
    let qd1 = |profile: &Profile, n: u64| {
        let mut dev = Device::new(profile, DataMode::TimingOnly).unwrap();
        let mut t = VirtualTime::ZERO;
        let mut first = None;
        for i in 0..n {
            let c = dev.write(IoPath::Host, t, Lpn(i), 1, None).unwrap();
            assert_eq!(c.nvme_ns + c.dma_ns + c.flash_ns, c.latency_ns());
            first.get_or_insert(c.latency_ns());
            t = c.done;
        }
        (first.unwrap(), t.ns())
    };
    let (cached_first, cached_total) = qd1(&p, 64);
    let (plain_first, plain_total) = qd1(&plain, 64);
    let program = p.timing.page_program_ns;
    assert!(
        cached_first < 20_000,
        "acknowledged from the buffer: {cached_first} ns"
    );
    assert!(
        plain_first >= program,
        "without a buffer a write waits for its program"
    );
    assert!(
        cached_total < plain_total,
        "{cached_total} vs {plain_total}"
    );
    // The buffer holds 4 pages: the other 60 programs must have finished by the end, spread
    // over the dies, before the last write could be accepted.
    let dies = u64::from(p.geometry.dies());
    let floor = (64 - cap_pages - dies).div_ceil(dies) * program;
    assert!(
        cached_total >= floor,
        "{cached_total} < {floor}: the buffer overflowed"
    );
    // A zero-byte buffer is a bad profile, not a silent no-op.
    p.write_cache.as_mut().unwrap().bytes = 0;
    assert!(p.validate().unwrap_err().0.contains("write_cache.bytes"));
}

#[test]
fn a_partial_page_on_pcm_programs_only_the_units_it_touches() {
    let p = Profile::load("pcm-zynq").unwrap();
    let unit = p.timing.program_unit_bytes;
    let ps = u64::from(p.geometry.page_size_bytes);
    assert!(unit > 0 && unit < ps);
    let mut dev = Device::new(&p, DataMode::Payloads).unwrap();
    let base: Vec<u8> = (0..ps).map(|i| (i % 251) as u8 + 1).collect();
    dev.write_at(IoPath::Internal, VirtualTime::ZERO, 0, ps, Some(&base))
        .unwrap();
    let t = dev.idle_at();
    dev.reset_measurements();
    // 100 bytes starting 2 bytes into a unit touch the units around both ends.
    let off = 8 * unit + 2;
    let units = (off + 100).div_ceil(unit) - off / unit;
    assert!(units * unit > 100);
    let patch = vec![0xEE; 100];
    let c = dev
        .write_at(IoPath::Internal, t, off, 100, Some(&patch))
        .unwrap();
    let io = dev.counters().io;
    assert_eq!(
        (
            io.partial_stores,
            io.read_modify_writes,
            io.flash_page_reads
        ),
        (1, 0, 0)
    );
    let program = (p.timing.page_program_ns * units * unit).div_ceil(ps);
    let move_ns = transfer_ns(units * unit, p.timing.channel_bytes_per_sec);
    assert_eq!(c.flash_ns, program + move_ns, "{c:?}");
    assert!(c.flash_ns * 10 < p.timing.page_program_ns, "{c:?}");
    // The page's other bytes stayed where they were.
    let mut expect = base.clone();
    expect[off as usize..off as usize + 100].copy_from_slice(&patch);
    let mut back = vec![0u8; ps as usize];
    dev.read_at(IoPath::Internal, c.done, 0, ps, Some(&mut back))
        .unwrap();
    assert_eq!(back, expect);
    // A whole page is still one program of the page.
    let c = dev
        .write_at(IoPath::Internal, c.done, 0, ps, Some(&base))
        .unwrap();
    assert!(c.flash_ns >= p.timing.page_program_ns, "{c:?}");
}

#[test]
fn a_program_unit_that_does_not_divide_the_page_is_refused() {
    let mut p = Profile::load("pcm-zynq").unwrap();
    p.timing.program_unit_bytes = 96;
    let (field, why) = p.validate().unwrap_err();
    assert_eq!(field, "timing.program_unit_bytes");
    assert!(why.contains("must divide"), "{why}");
    let mut p = Profile::load("cosmos-plus").unwrap();
    p.timing.program_unit_bytes = 512;
    assert_eq!(p.validate().unwrap_err().0, "timing.program_unit_bytes");
}

#[test]
fn greedy_ftls_data_buffer_acknowledges_writes_serves_hits_and_programs_on_eviction() {
    // A 2-entry buffer per die on cosmos-plus's geometry: pages that share a die's part are
    // those equal modulo the die count.
    let mut p = Profile::load("cosmos-plus").unwrap();
    p.data_buffer = Some(csd_device::buffer::DataBuffer { entries_per_die: 2 });
    p.validate().unwrap();
    let dies = u64::from(p.geometry.dies());
    let ps = u64::from(p.geometry.page_size_bytes);
    let program = p.timing.page_program_ns;
    let mut dev = Device::new(&p, DataMode::Payloads).unwrap();
    let page = |b: u8| vec![b; ps as usize];

    // Two writes into die 0's part: each acknowledged once in DRAM, nothing programmed.
    let mut t = VirtualTime::ZERO;
    for (i, lpn) in [0, dies].into_iter().enumerate() {
        let c = dev
            .write(IoPath::Host, t, Lpn(lpn), 1, Some(&page(i as u8 + 1)))
            .unwrap();
        assert!(c.latency_ns() < program / 10, "{c:?}");
        t = c.done;
    }
    assert_eq!(dev.counters().io.flash_page_programs, 0);
    assert_eq!(dev.buffered_dirty_pages(), 2);
    // A read of a buffered page is a hit: no flash read, and it returns the page.
    let mut out = page(0);
    let c = dev
        .read(IoPath::Host, t, Lpn(0), 1, Some(&mut out))
        .unwrap();
    assert_eq!(out, page(1));
    assert_eq!(c.flash_ns, 0, "{c:?}");
    assert_eq!(dev.counters().io.flash_page_reads, 0);
    assert_eq!(dev.counters().io.data_buffer_hits, 1);
    // The firmware's own read goes to the flash.
    dev.read(IoPath::Internal, c.done, Lpn(dies), 1, None)
        .unwrap();
    assert_eq!(dev.counters().io.flash_page_reads, 1);
    // A third page of die 0's part evicts the least recently used (lpn `dies`, dirty): the
    // write waits for its program.
    let c = dev
        .write(IoPath::Host, c.done, Lpn(2 * dies), 1, Some(&page(3)))
        .unwrap();
    assert!(c.latency_ns() >= program, "{c:?}");
    assert_eq!(dev.counters().io.flash_page_programs, 1);
    // A partial write of a buffered page merges in DRAM: nothing read.
    let c = dev
        .write_at(
            IoPath::Host,
            c.done,
            2 * dies * ps + 10,
            100,
            Some(&[9; 100]),
        )
        .unwrap();
    assert_eq!(dev.counters().io.read_modify_writes, 0, "{c:?}");
    let mut out = page(0);
    dev.read(IoPath::Host, c.done, Lpn(2 * dies), 1, Some(&mut out))
        .unwrap();
    assert_eq!(&out[..10], &[3; 10]);
    assert_eq!(&out[10..110], &[9; 100]);
    // A cold start finds it empty: the read misses and reads the flash.
    dev.settle_data_buffer();
    assert_eq!(dev.buffered_dirty_pages(), 0);
    let reads = dev.counters().io.flash_page_reads;
    let mut out = page(0);
    dev.read(IoPath::Host, dev.idle_at(), Lpn(0), 1, Some(&mut out))
        .unwrap();
    assert_eq!(out, page(1));
    assert_eq!(dev.counters().io.flash_page_reads, reads + 1);
    dev.check_invariants().unwrap();

    // A profile may not buffer writes twice, nor hold no entries.
    p.data_buffer = Some(csd_device::buffer::DataBuffer { entries_per_die: 0 });
    assert!(p.validate().unwrap_err().0.contains("entries_per_die"));
    p.data_buffer = Some(csd_device::buffer::DataBuffer {
        entries_per_die: 16,
    });
    p.write_cache = Some(csd_device::timing::WriteCache {
        bytes: 1 << 20,
        accept_ns: 0,
    });
    assert!(p.validate().unwrap_err().0.contains("data_buffer"));
}
