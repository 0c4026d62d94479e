//! `csd profiles`: the built-in device profiles and their key figures.

use crate::units::{fmt_bytes, fmt_rate, thousands};
use anyhow::Context;
use csd_device::Profile;
use serde::Serialize;

#[derive(Serialize)]
struct ProfileRow {
    name: String,
    /// `built-in`, or `stored` (kept in the run store with `csd profiles add`).
    origin: &'static str,
    summary: String,
    source: String,
    channels: u32,
    dies: u32,
    page_size_bytes: u32,
    pages_per_block: u32,
    physical_bytes: u64,
    logical_bytes: u64,
    over_provisioning: f64,
    page_read_ns: u64,
    page_program_ns: u64,
    block_erase_ns: u64,
    link: String,
    pcie_bytes_per_sec: u64,
    /// Where writes are acknowledged before their programs: a power-loss-protected write
    /// cache, the firmware's data buffer, or neither.
    write_buffer: WriteBuffer,
    assumptions: usize,
}

/// How a profile buffers writes ([`ProfileRow::write_buffer`]).
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum WriteBuffer {
    /// Every write waits for its program.
    None,
    /// `[write_cache]`: acknowledged once held; programs start at once.
    WriteCache { bytes: u64 },
    /// `[data_buffer]`: per-die LRU pages, programmed when evicted; reads hit it too.
    DataBuffer { bytes: u64, entries_per_die: u32 },
}

impl WriteBuffer {
    fn of(p: &Profile) -> WriteBuffer {
        match (&p.write_cache, &p.data_buffer) {
            (Some(c), _) => WriteBuffer::WriteCache { bytes: c.bytes },
            (None, Some(b)) => WriteBuffer::DataBuffer {
                bytes: b.bytes(&p.geometry),
                entries_per_die: b.entries_per_die,
            },
            (None, None) => WriteBuffer::None,
        }
    }

    fn label(&self) -> String {
        match self {
            WriteBuffer::None => "-".into(),
            WriteBuffer::WriteCache { bytes } => format!("{} PLP", fmt_bytes(*bytes)),
            WriteBuffer::DataBuffer { bytes, .. } => format!("{} LRU", fmt_bytes(*bytes)),
        }
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum ProfilesCmd {
    /// Keep a profile file in the run store, so the dashboard's replay form and `csd replay
    /// --profile NAME` can name it (requests never read files on the server's host).
    Add {
        /// The profile's TOML file; it is stored under its `name`.
        file: std::path::PathBuf,
        #[command(flatten)]
        store: super::runs::StorePath,
    },
    /// Print a profile's TOML, comments and sources included: a built-in one, or one kept in
    /// the run store. Example: csd profiles show cosmos-plus > mine.toml
    Show {
        name: String,
        #[command(flatten)]
        store: super::runs::StorePath,
    },
}

/// The profiles kept in the run store: none when there is no store yet (listing never
/// makes one).
fn stored_profiles(store: &super::runs::StorePath) -> anyhow::Result<Vec<Profile>> {
    if !store.path().exists() {
        return Ok(Vec::new());
    }
    let s = super::runs::open(&store.args())?;
    let mut stored = Vec::new();
    for name in s.profile_names()? {
        let text = s.profile_text(&name)?;
        let p = Profile::from_toml(&text, &format!("stored profile '{name}'"))
            .with_context(|| format!("in {}", s.path().display()))?;
        stored.push(p);
    }
    Ok(stored)
}

/// `csd profiles show`: the text a profile was written as.
pub fn show(name: &str, store: &super::runs::StorePath) -> anyhow::Result<()> {
    if let Some((_, text)) = csd_device::profile::BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
    {
        print!("{text}");
        return Ok(());
    }
    let stored = if store.path().exists() {
        super::runs::open(&store.args())?.profile_text(name).ok()
    } else {
        None
    };
    match stored {
        // Its text as kept, even if this csd no longer reads it.
        Some(text) => print!("{text}"),
        // The same refusal as a replay naming an unknown profile.
        None => drop(named(name, |_| None)?),
    }
    Ok(())
}

pub fn add(file: &std::path::Path, store: &super::runs::StorePath) -> anyhow::Result<()> {
    let profile = Profile::from_file(file)?;
    if Profile::builtin_named(&profile.name).is_some() {
        anyhow::bail!(
            "{}: '{}' is a built-in profile's name; give yours another `name`",
            file.display(),
            profile.name
        );
    }
    let text = std::fs::read_to_string(file)?;
    let s = super::runs::open(&store.args())?;
    s.add_profile(&profile.name, &text)?;
    println!("profile {} stored in {}", profile.name, s.path().display());
    Ok(())
}

/// A profile by name, never a file: built in, or kept in the run store (`stored` looks the
/// name up there). What a dashboard request may name.
pub fn named(name: &str, stored: impl FnOnce(&str) -> Option<String>) -> anyhow::Result<Profile> {
    if let Some(p) = Profile::builtin_named(name) {
        return Ok(p);
    }
    match stored(name) {
        Some(text) => Ok(Profile::from_toml(&text, &format!("stored profile '{name}'"))?),
        None => anyhow::bail!(
            "unknown profile '{}': not built in ({}) and not kept in the run store (csd profiles add FILE keeps one)",
            csd_traces::reader::quote(name),
            Profile::builtin()
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

pub fn run(json: bool, store: &super::runs::StorePath) -> anyhow::Result<()> {
    let stored = stored_profiles(store)?;
    let origins = std::iter::repeat("built-in").zip(Profile::builtin());
    let rows: Vec<ProfileRow> = origins
        .chain(std::iter::repeat("stored").zip(stored))
        .map(|(origin, p)| {
            let g = &p.geometry;
            ProfileRow {
                channels: g.channels,
                dies: g.dies(),
                page_size_bytes: g.page_size_bytes,
                pages_per_block: g.pages_per_block,
                physical_bytes: g.physical_bytes(),
                logical_bytes: g.logical_bytes(),
                over_provisioning: g.over_provisioning,
                page_read_ns: p.timing.page_read_ns,
                page_program_ns: p.timing.page_program_ns,
                block_erase_ns: p.timing.block_erase_ns,
                link: p.host_interface.link.clone(),
                pcie_bytes_per_sec: p.host_interface.pcie_bytes_per_sec,
                write_buffer: WriteBuffer::of(&p),
                assumptions: p.assumptions.len(),
                origin,
                name: p.name,
                summary: p.summary,
                source: p.source,
            }
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:<18} {:>10} {:>6} {:>8} {:>7} {:>9} {:>9} {:>9} {:>11}  host link",
        "profile", "capacity", "dies", "page", "OP", "read", "program", "erase", "buffer"
    );
    for r in &rows {
        println!(
            "{:<18} {:>10} {:>6} {:>8} {:>6.1}% {:>7}µs {:>7}µs {:>7}µs {:>11}  {} ({})",
            r.name,
            fmt_bytes(r.logical_bytes),
            format!("{}x{}", r.channels, r.dies / r.channels),
            fmt_bytes(u64::from(r.page_size_bytes)),
            r.over_provisioning * 100.0,
            fmt_us(r.page_read_ns),
            fmt_us(r.page_program_ns),
            fmt_us(r.block_erase_ns),
            r.write_buffer.label(),
            r.link,
            fmt_rate(r.pcie_bytes_per_sec as f64),
        );
    }
    println!(
        "(buffer: where writes are acknowledged before their programs; PLP a power-loss-protected \
         write cache, LRU the firmware's data buffer, which reads hit too)"
    );
    println!();
    for r in &rows {
        let stored = if r.origin == "stored" {
            " [stored]"
        } else {
            ""
        };
        println!(
            "{:<18} {}{stored} — {}; {} values assumed",
            r.name,
            r.summary,
            r.source,
            thousands(r.assumptions as u64),
        );
    }
    println!(
        "(each value, its source or the reason it is assumed: csd profiles show NAME; your own: \
         csd profiles show NAME > mine.toml, edit it, csd profiles add mine.toml)"
    );
    Ok(())
}

/// Microseconds without a trailing `.0` for whole values, so `80µs` and `0.3µs` both read well.
fn fmt_us(ns: u64) -> String {
    if ns.is_multiple_of(1000) {
        (ns / 1000).to_string()
    } else {
        format!("{:.1}", ns as f64 / 1e3)
    }
}
