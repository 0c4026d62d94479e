//! Device profiles: TOML files, shipped in `device/profiles/` and selectable by name.
//!
//! A profile is data, never code: geometry, timing, host-interface costs and FTL policy of one
//! real (or emulated) computational SSD from the papers. Values a paper does not give are listed
//! under `[assumptions]` with their source, and every such key must name a real field, so a
//! reader can always tell measured from assumed. Profiles are validated on load; a bad one is an
//! error naming the field and its line, never a panic deep inside the model.

use crate::buffer::{DataBuffer, MAX_ENTRIES_PER_DIE};
use crate::cost::{Accelerators, DeviceCpu, FusionCosts, HostCosts};
use crate::geometry::Geometry;
use crate::persist::PersistCosts;
use crate::timing::{FlashTiming, HostInterface, WriteCache};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// FTL policy knobs, from a profile's `[ftl]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FtlPolicy {
    /// Foreground GC starts on a die when its free blocks fall below this many.
    pub gc_low_watermark_blocks: u32,
    /// ...and reclaims victims until the die has at least this many free blocks again.
    pub gc_high_watermark_blocks: u32,
}

/// A complete, validated device profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub summary: String,
    /// Where the numbers come from (paper, table, section).
    pub source: String,
    pub geometry: Geometry,
    pub timing: FlashTiming,
    pub host_interface: HostInterface,
    pub ftl: FtlPolicy,
    pub device_cpu: DeviceCpu,
    #[serde(default)]
    pub accelerators: Accelerators,
    pub host: HostCosts,
    /// A capacitor-backed write buffer, for devices that have one (absent: every write waits
    /// for its flash programs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_cache: Option<WriteCache>,
    /// The firmware's DRAM data buffer that host reads and writes go through (Cosmos+'s
    /// GreedyFTL), for devices that have one: [`crate::buffer`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_buffer: Option<DataBuffer>,
    /// CPU costs of SIFT's persistence path, for devices that model it (`csd persist`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persist: Option<PersistCosts>,
    /// Host file-system and device-core costs of FusionFS's comparison (`csd fusion`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusion: Option<FusionCosts>,
    /// The PCM board and ISP engine of ISPFS (`csd ispfs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isp: Option<crate::isp::IspCosts>,
    /// `"table.field" = "why this value, and where it comes from"`.
    #[serde(default)]
    pub assumptions: BTreeMap<String, String>,
}

/// Why a profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "unknown profile '{name}' (built-in profiles: {known}; or give a path to a .toml file)"
    )]
    Unknown { name: String, known: String },
    #[error("reading profile {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("profile {origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("profile {origin}{}: field `{field}`: {reason}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Invalid {
        origin: String,
        field: String,
        line: Option<usize>,
        reason: String,
    },
}

/// The most one firmware step (`device_cpu.*_ns`, and `persist`'s per-call, per-request
/// and per-record costs) may cost.
const MAX_FIRMWARE_STEP_NS: u64 = 1_000_000_000;

/// Refuses, by `table.field`, any per-step cost over a second: callers multiply these by
/// step counts, and the bound keeps every product far from overflowing u64.
pub(crate) fn at_most_a_second(
    table: &str,
    step: &str,
    fields: &[(&str, u64)],
) -> Result<(), (String, String)> {
    match fields.iter().find(|(_, ns)| *ns > MAX_FIRMWARE_STEP_NS) {
        Some((field, ns)) => Err((
            format!("{table}.{field}"),
            format!("{ns} ns is more than a second for {step}"),
        )),
        None => Ok(()),
    }
}

/// The profiles compiled into every `csd` binary: `(name, TOML source)`.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "daisyplus-femu",
        include_str!("../profiles/daisyplus-femu.toml"),
    ),
    ("cosmos-plus", include_str!("../profiles/cosmos-plus.toml")),
    (
        "bluefield2-pm1735",
        include_str!("../profiles/bluefield2-pm1735.toml"),
    ),
    ("optane-csd", include_str!("../profiles/optane-csd.toml")),
    ("pcm-zynq", include_str!("../profiles/pcm-zynq.toml")),
];

/// The profile every `csd` command and the dashboard use when none is named: LightFS's
/// Cosmos+ OpenSSD testbed, which the main job runs on.
pub const DEFAULT_PROFILE: &str = "cosmos-plus";

/// The largest profile file read (the built-in ones are a few KiB).
const MAX_PROFILE_BYTES: u64 = 1 << 20;

impl Profile {
    /// Loads a built-in profile by name, or a profile file if `name_or_path` ends in `.toml`
    /// or contains a path separator.
    pub fn load(name_or_path: &str) -> Result<Profile, ProfileError> {
        if let Some((_, src)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Profile::from_toml(src, &format!("'{name_or_path}'"));
        }
        if name_or_path.ends_with(".toml") || name_or_path.contains(std::path::MAIN_SEPARATOR) {
            return Profile::from_file(Path::new(name_or_path));
        }
        Err(ProfileError::Unknown {
            name: name_or_path.to_string(),
            known: BUILTIN
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    pub fn from_file(path: &Path) -> Result<Profile, ProfileError> {
        use std::io::Read;
        let io = |source| ProfileError::Io {
            path: path.to_path_buf(),
            source,
        };
        // A regular file of bounded size: not a FIFO that never ends, not /dev/zero.
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_file() {
            return Err(io(std::io::Error::other("not a regular file")));
        }
        let mut src = String::new();
        std::fs::File::open(path)
            .map_err(io)?
            .take(MAX_PROFILE_BYTES + 1)
            .read_to_string(&mut src)
            .map_err(io)?;
        if src.len() as u64 > MAX_PROFILE_BYTES {
            return Err(io(std::io::Error::other(format!(
                "over {MAX_PROFILE_BYTES} bytes: not a profile"
            ))));
        }
        Profile::from_toml(&src, &path.display().to_string())
    }

    /// Parses and validates a profile. `origin` names it in error messages.
    pub fn from_toml(src: &str, origin: &str) -> Result<Profile, ProfileError> {
        let profile: Profile = toml::from_str(src).map_err(|e| ProfileError::Parse {
            origin: origin.to_string(),
            message: describe_toml_error(src, &e),
        })?;
        profile.validate().map_err(|(field, reason)| {
            let line = locate_field(src, &field);
            ProfileError::Invalid {
                origin: origin.to_string(),
                field,
                line,
                reason,
            }
        })?;
        Ok(profile)
    }

    /// The built-in profile called `name`, and never a file: for requests from elsewhere
    /// (the dashboard), which must not make the server read its own file system.
    pub fn builtin_named(name: &str) -> Option<Profile> {
        let (_, src) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        Profile::from_toml(src, &format!("'{name}'")).ok()
    }

    /// All built-in profiles, in a stable order.
    pub fn builtin() -> Vec<Profile> {
        BUILTIN
            .iter()
            .map(|(name, src)| {
                Profile::from_toml(src, name).expect("built-in profiles are validated by tests")
            })
            .collect()
    }

    /// This profile without a `[data_buffer]`: every write waits for its program. Its
    /// assumptions go with it (an assumption must name a field the profile has).
    pub fn without_data_buffer(mut self) -> Profile {
        self.data_buffer = None;
        self.assumptions
            .retain(|k, _| !k.starts_with("data_buffer."));
        self
    }

    /// Checks cross-field consistency. Returns `(dotted field, reason)` on failure; also used
    /// by code that edits a profile in memory (tests, sweeps) before building a device.
    // Long: one check per field, each with its own reason.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let g = &self.geometry;
        g.check().map_err(|(f, r)| (format!("geometry.{f}"), r))?;
        let t = &self.timing;
        for (field, value) in [
            ("page_read_ns", t.page_read_ns),
            ("page_program_ns", t.page_program_ns),
            ("channel_bytes_per_sec", t.channel_bytes_per_sec),
        ] {
            if value == 0 {
                return Err((format!("timing.{field}"), "must be greater than 0".into()));
            }
        }
        let unit = t.program_unit_bytes;
        if unit > 0
            && (unit > u64::from(g.page_size_bytes) || u64::from(g.page_size_bytes) % unit != 0)
        {
            return Err((
                "timing.program_unit_bytes".into(),
                format!(
                    "{unit} must divide the page ({} bytes); 0 for NAND, which programs whole pages",
                    g.page_size_bytes
                ),
            ));
        }
        if unit > 0 && t.block_erase_ns > 0 {
            return Err((
                "timing.program_unit_bytes".into(),
                "a medium that erases blocks cannot program bytes in place; leave it 0".into(),
            ));
        }
        if self.write_cache.as_ref().is_some_and(|c| c.bytes == 0) {
            return Err((
                "write_cache.bytes".into(),
                "must be greater than 0 (leave the table out for no write cache)".into(),
            ));
        }
        if let Some(b) = &self.data_buffer {
            if !(1..=MAX_ENTRIES_PER_DIE).contains(&b.entries_per_die) {
                return Err((
                    "data_buffer.entries_per_die".into(),
                    format!("must be between 1 and {MAX_ENTRIES_PER_DIE}"),
                ));
            }
            if self.write_cache.is_some() {
                return Err((
                    "data_buffer".into(),
                    "a profile has a write cache or a data buffer, not both: they are two \
                     firmwares' ways of buffering writes"
                        .into(),
                ));
            }
        }
        if let Some(p) = &self.persist {
            p.check()?;
        }
        if let Some(f) = &self.fusion {
            for (field, ghz) in [
                ("fast_clock_ghz", f.fast_clock_ghz),
                ("slow_clock_ghz", f.slow_clock_ghz),
            ] {
                if !(ghz > 0.0 && ghz < 100.0) {
                    return Err((
                        format!("fusion.{field}"),
                        "must be between 0 and 100 GHz".into(),
                    ));
                }
            }
        }
        if let Some(isp) = &self.isp {
            isp.check()?;
        }
        if self.host.copy_bytes_per_sec == 0 {
            return Err((
                "host.copy_bytes_per_sec".into(),
                "must be greater than 0".into(),
            ));
        }
        if self.host_interface.pcie_bytes_per_sec == 0 {
            return Err((
                "host_interface.pcie_bytes_per_sec".into(),
                "must be greater than 0".into(),
            ));
        }
        let f = &self.ftl;
        if f.gc_low_watermark_blocks < 2 {
            return Err((
                "ftl.gc_low_watermark_blocks".into(),
                "must be at least 2: one free block is GC's reserve to migrate into, so GC must \
                 start before the host reaches it"
                    .into(),
            ));
        }
        if f.gc_high_watermark_blocks < f.gc_low_watermark_blocks {
            return Err((
                "ftl.gc_high_watermark_blocks".into(),
                format!(
                    "{} is below gc_low_watermark_blocks ({})",
                    f.gc_high_watermark_blocks, f.gc_low_watermark_blocks
                ),
            ));
        }
        // Every die needs room for its open block plus the GC reserve on top of its share of
        // logical data, or GC can deadlock with every block fully valid.
        let reserve_pages = u64::from(g.dies())
            * u64::from(f.gc_high_watermark_blocks + 2)
            * u64::from(g.pages_per_block);
        let spare_pages = g.physical_pages() - g.logical_pages();
        if spare_pages < reserve_pages {
            return Err((
                "geometry.over_provisioning".into(),
                format!(
                    "{} leaves {spare_pages} spare pages, fewer than the {reserve_pages} GC needs \
                     (dies × (gc_high_watermark_blocks + 2) × pages_per_block)",
                    g.over_provisioning
                ),
            ));
        }
        if f.gc_high_watermark_blocks + 2 >= g.blocks_per_die() {
            return Err((
                "ftl.gc_high_watermark_blocks".into(),
                format!("must be well below blocks per die ({})", g.blocks_per_die()),
            ));
        }
        let cpu = &self.device_cpu;
        if !(cpu.ns_per_fuel > 0.0 && cpu.ns_per_fuel.is_finite()) {
            return Err((
                "device_cpu.ns_per_fuel".into(),
                "must be a positive number".into(),
            ));
        }
        if cpu.cores == 0 {
            return Err(("device_cpu.cores".into(), "must be at least 1".into()));
        }
        if cpu.dram_bytes < 1 << 20 {
            return Err((
                "device_cpu.dram_bytes".into(),
                "must be at least 1 MiB".into(),
            ));
        }
        // Each is one firmware step, multiplied by how many steps a request takes: a second
        // is no step's cost, and the bound keeps the products far from overflowing.
        at_most_a_second(
            "device_cpu",
            "one firmware step",
            &[
                ("metadata_entry_ns", cpu.metadata_entry_ns),
                ("cached_entry_ns", cpu.cached_entry_ns()),
                ("delta_record_ns", cpu.delta_record_ns),
                ("request_ns", cpu.request_ns),
            ],
        )?;
        for (name, acc) in [
            ("grep", &self.accelerators.grep),
            ("stats", &self.accelerators.stats),
        ] {
            if acc.as_ref().is_some_and(|a| a.unit_bytes == 0) {
                return Err((
                    format!("accelerators.{name}.unit_bytes"),
                    "must be greater than 0".into(),
                ));
            }
        }
        // The profile's own serialized form is the list of its fields: no hand-kept copy
        // that drifts when a field is added.
        let fields =
            toml::Value::try_from(self).map_err(|e| ("profile".to_string(), e.to_string()))?;
        for key in self.assumptions.keys() {
            let names_field = key.split_once('.').is_some_and(|(table, field)| {
                table != "assumptions" && fields.get(table).and_then(|t| t.get(field)).is_some()
            });
            if !names_field {
                return Err((
                    format!("assumptions.{key}"),
                    "names no profile field (write it as \"table.field\")".into(),
                ));
            }
        }
        Ok(())
    }
}

/// Renders a TOML error as "line N: message" (the crate's own rendering spans several lines
/// with ASCII art, which reads badly inside one error message).
fn describe_toml_error(src: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim_end();
    match e.span() {
        Some(span) => {
            let line = src[..span.start.min(src.len())].matches('\n').count() + 1;
            match field_at(src, line) {
                Some(field) => format!("line {line} ({field}): {message}"),
                None => format!("line {line}: {message}"),
            }
        }
        None => message.to_string(),
    }
}

/// The `table.key` that the 1-based `line` of `src` assigns, if it assigns one.
fn field_at(src: &str, line: usize) -> Option<String> {
    let mut table = "";
    for l in src.lines().take(line.saturating_sub(1)) {
        let l = l.trim();
        if let Some(h) = l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = h.trim();
        }
    }
    let (key, _) = src.lines().nth(line.checked_sub(1)?)?.split_once('=')?;
    let key = key.trim().trim_matches('"');
    if key.is_empty() || key.starts_with('#') {
        return None;
    }
    Some(if table.is_empty() {
        key.to_string()
    } else {
        format!("{table}.{key}")
    })
}

/// Finds the 1-based line that assigns `table.field` in `src`, if any.
fn locate_field(src: &str, dotted: &str) -> Option<usize> {
    let (table, field) = dotted.split_once('.')?;
    let mut current = "";
    for (i, line) in src.lines().enumerate() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = header.trim();
            continue;
        }
        let key = line
            .split('=')
            .next()
            .unwrap_or("")
            .trim()
            .trim_matches('"');
        if current == table && key == field && line.contains('=') {
            return Some(i + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_profile_loads() {
        for (name, src) in BUILTIN {
            let p = Profile::from_toml(src, name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&p.name, name, "file name and `name` field agree");
            assert!(!p.assumptions.is_empty(), "{name}: assumptions are listed");
        }
    }

    #[test]
    fn a_bad_value_is_named_by_line_and_field() {
        let src = BUILTIN[0]
            .1
            .replacen("channels = ", "channels = \"eight\" #", 1);
        let e = Profile::from_toml(&src, "edited").unwrap_err().to_string();
        assert!(e.contains("(geometry.channels)"), "{e}");
        assert!(e.contains("line "), "{e}");
    }

    #[test]
    fn daisyplus_is_exactly_txisc_table_one() {
        let p = Profile::load("daisyplus-femu").unwrap();
        let g = &p.geometry;
        assert_eq!(
            (
                g.page_size_bytes,
                g.pages_per_block,
                g.blocks_per_die(),
                g.dies_per_channel,
                g.channels
            ),
            (16 * 1024, 512, 547, 2, 8)
        );
        assert_eq!(
            (
                p.timing.page_read_ns,
                p.timing.page_program_ns,
                p.timing.block_erase_ns
            ),
            (80_000, 400_000, 4_000_000)
        );
        assert_eq!(g.over_provisioning, 0.07);
    }

    #[test]
    fn unknown_profile_names_the_known_ones() {
        let e = Profile::load("no-such-ssd").unwrap_err().to_string();
        assert!(e.contains("unknown profile 'no-such-ssd'"), "{e}");
        assert!(e.contains("daisyplus-femu"), "{e}");
    }

    #[test]
    fn malformed_field_names_field_and_line() {
        let src = BUILTIN[0]
            .1
            .replace("pages_per_block = 512", "pages_per_block = \"many\"");
        let e = Profile::from_toml(&src, "t").unwrap_err().to_string();
        let line = src.lines().position(|l| l.contains("\"many\"")).unwrap() + 1;
        assert!(e.contains(&format!("line {line}")), "{e}");
        assert!(
            e.contains("pages_per_block") || e.contains("invalid type"),
            "{e}"
        );
    }

    #[test]
    fn a_firmware_step_over_a_second_is_refused() {
        let src = BUILTIN[0].1.replace(
            "delta_record_ns = 100",
            "delta_record_ns = 18446744073709551615",
        );
        let e = Profile::from_toml(&src, "t").unwrap_err().to_string();
        assert!(e.contains("device_cpu.delta_record_ns"), "{e}");
        assert!(e.contains("more than a second"), "{e}");
    }

    #[test]
    fn a_persist_cost_over_a_second_is_refused() {
        let (_, src) = BUILTIN
            .iter()
            .find(|(name, _)| *name == "bluefield2-pm1735")
            .unwrap();
        let src = src.replacen(
            "device_record_ns = ",
            "device_record_ns = 9223372036854775807 #",
            1,
        );
        let e = Profile::from_toml(&src, "t").unwrap_err().to_string();
        assert!(e.contains("persist.device_record_ns"), "{e}");
        assert!(e.contains("more than a second"), "{e}");
    }

    #[test]
    fn invalid_value_names_field_and_line() {
        let src = BUILTIN[0].1.replace("channels = 8", "channels = 0");
        let e = Profile::from_toml(&src, "t").unwrap_err().to_string();
        let line = src
            .lines()
            .position(|l| l.starts_with("channels = 0"))
            .unwrap()
            + 1;
        assert!(e.contains("geometry.channels"), "{e}");
        assert!(e.contains(&format!("line {line}")), "{e}");
    }

    #[test]
    fn unknown_field_and_bad_assumption_are_rejected() {
        let src = BUILTIN[0].1.replace("[timing]", "[timing]\nwarp_speed = 9");
        let e = Profile::from_toml(&src, "t").unwrap_err().to_string();
        assert!(e.contains("warp_speed"), "{e}");
        let src = format!("{}\n\"timing.warp\" = \"x\"\n", BUILTIN[0].1);
        let e = Profile::from_toml(&src, "t").unwrap_err().to_string();
        assert!(e.contains("assumptions.timing.warp"), "{e}");
        // daisyplus-femu has no accelerators: an assumption about one names nothing.
        let src = format!("{}\n\"accelerators.grep\" = \"x\"\n", BUILTIN[0].1);
        let e = Profile::from_toml(&src, "t").unwrap_err().to_string();
        assert!(e.contains("assumptions.accelerators.grep"), "{e}");
    }

    #[test]
    fn too_little_over_provisioning_is_rejected() {
        let src = BUILTIN[0]
            .1
            .replace("over_provisioning = 0.07", "over_provisioning = 0.0001");
        let e = Profile::from_toml(&src, "t").unwrap_err().to_string();
        assert!(e.contains("geometry.over_provisioning"), "{e}");
    }
}
