//! `csd ndp`'s report: LightFS §IV's microbenchmark, one offload request per design and
//! (files, size) point.

use csd_hostfs::ndp::{DesignKind, Footprint, NdpSummary};
use serde::{Deserialize, Serialize};

/// The whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NdpRun {
    pub profile: String,
    /// The application's task.
    pub app: String,
    /// Every metadata cache dropped before the measured request (else warm: after a first,
    /// unmeasured one).
    pub cold: bool,
    pub points: Vec<NdpPoint>,
}

/// One file count and size under every design.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NdpPoint {
    pub files: usize,
    pub size_bytes: u64,
    pub designs: Vec<NdpDesign>,
    /// LightFS's speedup over each other design (their mean latency over LightFS's).
    pub speedup_of_lightfs: Vec<(DesignKind, f64)>,
}

/// One design's figures for the request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NdpDesign {
    pub design: DesignKind,
    #[serde(flatten)]
    pub summary: NdpSummary,
    /// LightFS's metadata caches after the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footprint: Option<Footprint>,
}

impl NdpPoint {
    /// The point, with LightFS's speedups computed from the designs' mean latencies.
    pub fn new(files: usize, size_bytes: u64, designs: Vec<NdpDesign>) -> NdpPoint {
        let light = designs
            .iter()
            .find(|r| r.design == DesignKind::LightFs)
            .map(|r| r.summary.mean_latency_ns);
        let speedup_of_lightfs = match light {
            Some(l) if l > 0.0 => designs
                .iter()
                .filter(|r| r.design != DesignKind::LightFs)
                .map(|r| (r.design, r.summary.mean_latency_ns / l))
                .collect(),
            _ => Vec::new(),
        };
        NdpPoint {
            files,
            size_bytes,
            designs,
            speedup_of_lightfs,
        }
    }

    /// The design's result, if it ran.
    pub fn design(&self, kind: DesignKind) -> Option<&NdpDesign> {
        self.designs.iter().find(|d| d.design == kind)
    }
}
