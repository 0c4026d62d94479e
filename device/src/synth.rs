//! A fio-like synthetic workload driver: closed-loop, `queue_depth` requests in flight.
//!
//! The time core is a plain event queue keyed by `(virtual completion time, sequence number)`:
//! the earliest completion is retired and its slot immediately issues the next request at that
//! instant. Ties break on the sequence number, so runs are deterministic.

use crate::addr::VirtualTime;
use crate::device::{Completion, Device, DeviceCounters, IoPath};
use crate::error::DeviceError;
use crate::rng::SimRng;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::str::FromStr;

/// Access pattern, named as in fio's `--rw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RwPattern {
    Read,
    Write,
    RandRead,
    RandWrite,
    RandRw,
}

impl RwPattern {
    pub const ALL: [RwPattern; 5] = [
        RwPattern::Read,
        RwPattern::Write,
        RwPattern::RandRead,
        RwPattern::RandWrite,
        RwPattern::RandRw,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RwPattern::Read => "read",
            RwPattern::Write => "write",
            RwPattern::RandRead => "randread",
            RwPattern::RandWrite => "randwrite",
            RwPattern::RandRw => "randrw",
        }
    }

    fn random(self) -> bool {
        matches!(
            self,
            RwPattern::RandRead | RwPattern::RandWrite | RwPattern::RandRw
        )
    }

    /// Patterns that read need data in place first.
    pub fn reads(self) -> bool {
        matches!(
            self,
            RwPattern::Read | RwPattern::RandRead | RwPattern::RandRw
        )
    }
}

impl fmt::Display for RwPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RwPattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RwPattern::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown pattern '{s}' (expected read, write, randread, randwrite or randrw)"
                )
            })
    }
}

/// One synthetic job, like one fio job section.
#[derive(Clone, Debug, Serialize)]
pub struct SynthJob {
    pub rw: RwPattern,
    pub block_size_bytes: u64,
    pub queue_depth: u32,
    /// The byte range the job addresses, from offset 0 (fio `--size`).
    pub region_bytes: u64,
    /// Total bytes to transfer (fio `--io_size`).
    pub io_bytes: u64,
    /// Share of reads in `randrw`, in percent.
    pub read_percent: u32,
    pub seed: u64,
    /// Write the whole region once before measuring (untimed), so reads hit data and
    /// overwrites trigger GC.
    pub prefill: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("invalid job: {0}")]
    InvalidJob(String),
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// Latency distribution of one class of requests.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_ns: u64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// The nearest-rank `p` quantile (0 < p ≤ 1) of sorted, non-empty `samples`.
pub fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    let n = sorted.len();
    sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1]
}

/// Significant digits the latency histograms keep: every percentile a report gives is within
/// 0.1 % of the exact one, whatever the run's length.
pub const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

/// Requests the driver draws ahead of the one it issues, to hint the device (see
/// [`Device::prefetch`]).
const LOOKAHEAD: usize = 16;

/// Latencies of one class of requests in constant memory: an HDR histogram (percentiles to
/// [`LATENCY_SIGNIFICANT_DIGITS`]) beside the exact count, sum, minimum and maximum.
#[derive(Clone, Debug)]
pub struct LatencyRecorder {
    histogram: hdrhistogram::Histogram<u64>,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder {
            histogram: hdrhistogram::Histogram::new(LATENCY_SIGNIFICANT_DIGITS)
                .expect("3 significant digits is a valid precision"),
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl LatencyRecorder {
    pub fn record(&mut self, ns: u64) {
        // The histogram grows to any value; should growing fail, the value saturates.
        if self.histogram.record(ns).is_err() {
            self.histogram.saturating_record(ns);
        }
        self.sum += u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The summary, or `None` when nothing was recorded. Percentiles are the histogram's
    /// nearest-rank values, each the highest latency its bucket stands for (so within 0.1 %
    /// above the exact one), clamped to the exact maximum.
    pub fn summary(&self) -> Option<LatencySummary> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let h = &self.histogram;
        // Nearest rank over the buckets, as `nearest_rank` over exact samples.
        let rank = |p: f64| {
            let target = ((p * n as f64).ceil() as u64).clamp(1, n);
            let mut seen = 0;
            for v in h.iter_recorded() {
                seen += v.count_since_last_iteration();
                if seen >= target {
                    let top = h.highest_equivalent(v.value_iterated_to());
                    return top.min(self.max).max(self.min);
                }
            }
            self.max
        };
        Some(LatencySummary {
            count: n,
            mean_ns: (self.sum / u128::from(n)) as u64,
            min_ns: self.min,
            p50_ns: rank(0.50),
            p99_ns: rank(0.99),
            p999_ns: rank(0.999),
            max_ns: self.max,
        })
    }

    /// Adds another recorder's latencies.
    pub fn merge(&mut self, other: &LatencyRecorder) {
        self.histogram
            .add(&other.histogram)
            .expect("auto-resizing histograms of one precision add");
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
}

/// One request as a latency log records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencySample {
    /// The request's issue order.
    pub seq: u64,
    pub read: bool,
    pub submitted_ns: u64,
    pub latency_ns: u64,
}

impl LatencySummary {
    /// Nearest-rank percentiles over exact samples (sorted in place).
    pub fn from_samples(samples: &mut [u64]) -> Option<LatencySummary> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let n = samples.len();
        let rank = |p: f64| nearest_rank(samples, p);
        let sum: u128 = samples.iter().map(|&s| u128::from(s)).sum();
        Some(LatencySummary {
            count: n as u64,
            mean_ns: (sum / n as u128) as u64,
            min_ns: samples[0],
            p50_ns: rank(0.50),
            p99_ns: rank(0.99),
            p999_ns: rank(0.999),
            max_ns: samples[n - 1],
        })
    }
}

/// Mean time per request in each stage.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct StageMeans {
    pub nvme_ns: u64,
    pub dma_ns: u64,
    pub flash_ns: u64,
}

/// What a job measured. Every number comes from virtual time.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct SynthReport {
    pub profile: String,
    pub rw: RwPattern,
    pub block_size_bytes: u64,
    pub queue_depth: u32,
    pub region_bytes: u64,
    pub seed: u64,
    pub prefilled_pages: u64,
    pub ops: u64,
    pub bytes: u64,
    pub duration_ns: u64,
    pub iops: f64,
    pub bandwidth_bytes_per_sec: f64,
    pub latency: LatencySummary,
    pub read_latency: Option<LatencySummary>,
    pub write_latency: Option<LatencySummary>,
    pub stage_means: StageMeans,
    pub counters: DeviceCounters,
}

/// The smallest logical block an NVMe namespace is formatted with: requests are whole
/// multiples of it.
pub const SECTOR_BYTES: u64 = 512;

impl SynthJob {
    fn validate(&self, dev: &Device) -> Result<(), SynthError> {
        let bad = |m: String| Err(SynthError::InvalidJob(m));
        // An NVMe command moves whole logical blocks, 512 B the smallest format (fio's
        // --direct=1 refuses others too): a 3-byte "request" is no command a device sees.
        if self.block_size_bytes == 0 || !self.block_size_bytes.is_multiple_of(SECTOR_BYTES) {
            return bad(format!(
                "block size ({} bytes) must be a whole number of {SECTOR_BYTES}-byte logical \
                 blocks, as an NVMe command's is",
                self.block_size_bytes
            ));
        }
        if self.queue_depth == 0 {
            return bad("queue depth must be at least 1".into());
        }
        if self.region_bytes < self.block_size_bytes {
            return bad(format!(
                "size ({} bytes) is smaller than one block ({} bytes)",
                self.region_bytes, self.block_size_bytes
            ));
        }
        if self.region_bytes > dev.capacity_bytes() {
            return bad(format!(
                "size ({} bytes) exceeds the device's logical capacity ({} bytes); \
                 writing beyond it would need the over-provisioned space",
                self.region_bytes,
                dev.capacity_bytes()
            ));
        }
        if self.read_percent > 100 {
            return bad(format!(
                "read percentage {} is above 100",
                self.read_percent
            ));
        }
        if self.io_bytes == 0 {
            return bad("io size must be greater than 0".into());
        }
        Ok(())
    }

    /// Runs the job on `dev`. `progress(done, total)` is called now and then.
    pub fn run(
        &self,
        dev: &mut Device,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<SynthReport, SynthError> {
        self.run_logged(dev, progress, &mut |_| {})
    }

    /// Runs the job on `dev`, handing every request to `log` as it is issued (latencies are
    /// kept in histograms either way, so memory does not grow with the run).
    // Long: the closed loop's submit/complete/refill cycle is the driver's hot path, kept in
    // one place.
    pub fn run_logged(
        &self,
        dev: &mut Device,
        progress: &mut dyn FnMut(u64, u64),
        log: &mut dyn FnMut(LatencySample),
    ) -> Result<SynthReport, SynthError> {
        self.validate(dev)?;
        let mut prefilled_pages = 0;
        if self.prefill {
            prefilled_pages = prefill(dev, self.region_bytes)?;
            dev.reset_measurements();
        }
        let bs = self.block_size_bytes;
        let slots_in_region = self.region_bytes / bs;
        let total_ops = self.io_bytes.div_ceil(bs);
        let mut rng = SimRng::new(self.seed);
        let mut reads = LatencyRecorder::default();
        let mut writes = LatencyRecorder::default();
        let (mut nvme, mut dma, mut flash) = (0u128, 0u128, 0u128);
        let mut issued = 0u64;
        let mut end = VirtualTime::ZERO;
        // Min-heap of in-flight requests: (completion time, issue sequence number).
        let mut in_flight: BinaryHeap<Reverse<(VirtualTime, u64)>> = BinaryHeap::new();
        // The next requests, drawn LOOKAHEAD ahead in the order they are issued (so the draws
        // and every result are as without it): each hints the device as it enters the queue,
        // and again halfway, as firmware sees its submission queue.
        let mut draw = |seq: u64| -> (u64, bool) {
            let slot = if self.rw.random() {
                rng.below(slots_in_region)
            } else {
                seq % slots_in_region
            };
            let is_read = match self.rw {
                RwPattern::Read | RwPattern::RandRead => true,
                RwPattern::Write | RwPattern::RandWrite => false,
                RwPattern::RandRw => rng.below(100) < u64::from(self.read_percent),
            };
            (slot, is_read)
        };
        let page = dev.page_size();
        let mut queue: VecDeque<(u64, bool)> = (0..LOOKAHEAD as u64).map(&mut draw).collect();
        let mut issue = |at: VirtualTime,
                         seq: u64,
                         dev: &mut Device|
         -> Result<(VirtualTime, bool, Completion), SynthError> {
            let (slot, is_read) = queue.pop_front().expect("the queue is never empty");
            let next = draw(seq + LOOKAHEAD as u64);
            dev.prefetch(crate::Lpn(next.0 * bs / page));
            queue.push_back(next);
            dev.prefetch_mapping(crate::Lpn(queue[LOOKAHEAD / 2].0 * bs / page));
            let offset = slot * bs;
            let c = if is_read {
                dev.read_at(IoPath::Host, at, offset, bs, None)?
            } else {
                dev.write_at(IoPath::Host, at, offset, bs, None)?
            };
            Ok((c.done, is_read, c))
        };
        let mut retire = |c: &Completion, is_read: bool, seq: u64| {
            let lat = c.latency_ns();
            if is_read {
                reads.record(lat)
            } else {
                writes.record(lat)
            }
            log(LatencySample {
                seq,
                read: is_read,
                submitted_ns: c.submitted.ns(),
                latency_ns: lat,
            });
            nvme += u128::from(c.nvme_ns);
            dma += u128::from(c.dma_ns);
            flash += u128::from(c.flash_ns);
        };
        while issued < total_ops.min(u64::from(self.queue_depth)) {
            let (done, is_read, c) = issue(VirtualTime::ZERO, issued, dev)?;
            retire(&c, is_read, issued);
            in_flight.push(Reverse((done, issued)));
            issued += 1;
        }
        let mut retired = 0u64;
        while let Some(Reverse((done, _))) = in_flight.pop() {
            retired += 1;
            end = end.max(done);
            if retired.is_multiple_of(8192) {
                progress(retired, total_ops);
            }
            if issued < total_ops {
                let (next_done, is_read, c) = issue(done, issued, dev)?;
                retire(&c, is_read, issued);
                in_flight.push(Reverse((next_done, issued)));
                issued += 1;
            }
        }
        progress(total_ops, total_ops);
        let ops = total_ops;
        let duration_ns = end.ns().max(1);
        let mut all = reads.clone();
        all.merge(&writes);
        let latency = all.summary().expect("at least one op");
        let per_op = |x: u128| (x / u128::from(ops)) as u64;
        Ok(SynthReport {
            profile: dev.profile().name.clone(),
            rw: self.rw,
            block_size_bytes: bs,
            queue_depth: self.queue_depth,
            region_bytes: self.region_bytes,
            seed: self.seed,
            prefilled_pages,
            ops,
            bytes: ops * bs,
            duration_ns,
            iops: ops as f64 * 1e9 / duration_ns as f64,
            bandwidth_bytes_per_sec: (ops * bs) as f64 * 1e9 / duration_ns as f64,
            latency,
            read_latency: reads.summary(),
            write_latency: writes.summary(),
            stage_means: StageMeans {
                nvme_ns: per_op(nvme),
                dma_ns: per_op(dma),
                flash_ns: per_op(flash),
            },
            counters: dev.counters(),
        })
    }
}

/// Writes every page of `0..region_bytes` once, sequentially, through the internal path.
/// Returns the number of pages written.
pub fn prefill(dev: &mut Device, region_bytes: u64) -> Result<u64, DeviceError> {
    let pages = region_bytes.div_ceil(dev.page_size());
    for p in 0..pages {
        dev.write(IoPath::Internal, VirtualTime::ZERO, crate::Lpn(p), 1, None)?;
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The histogram's percentiles stay within its stated error of the exact ones; the
        /// count, mean, minimum and maximum are exact.
        #[test]
        fn histogram_percentiles_are_within_a_tenth_of_a_percent(
            samples in proptest::collection::vec(
                prop_oneof![1u64..2_000, 1_000u64..10_000_000, 1u64..u64::MAX / 4],
                1..2000,
            ),
        ) {
            let mut r = LatencyRecorder::default();
            samples.iter().for_each(|&s| r.record(s));
            let mut exact_samples = samples.clone();
            let exact = LatencySummary::from_samples(&mut exact_samples).unwrap();
            let h = r.summary().unwrap();
            prop_assert_eq!(h.count, exact.count);
            prop_assert_eq!(h.mean_ns, exact.mean_ns);
            prop_assert_eq!((h.min_ns, h.max_ns), (exact.min_ns, exact.max_ns));
            for (got, want) in [
                (h.p50_ns, exact.p50_ns),
                (h.p99_ns, exact.p99_ns),
                (h.p999_ns, exact.p999_ns),
            ] {
                prop_assert!(got >= want, "{} below the exact {}", got, want);
                prop_assert!(
                    (got - want) as f64 <= want as f64 * 1e-3,
                    "{} more than 0.1 % above {}", got, want
                );
            }
        }
    }

    #[test]
    fn merged_recorders_are_one_recorder() {
        let (mut a, mut b, mut both) = (
            LatencyRecorder::default(),
            LatencyRecorder::default(),
            LatencyRecorder::default(),
        );
        for i in 1..1000u64 {
            let v = i * i * 37;
            if i % 3 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
            both.record(v);
        }
        a.merge(&b);
        assert_eq!(a.summary(), both.summary());
        assert_eq!(LatencyRecorder::default().summary(), None);
    }
}
