//! The machine a `csd bench` figure was measured on. Wall-time figures mean little without
//! it: the same code's FTL with timing ran at about 6 M writes/s on one 2-vCPU EPYC VM and
//! at 3 M on another, so every bench report names its machine, in the table and in `--json`.

use crate::units::fmt_bytes;
use serde::Serialize;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Machine {
    /// The CPU's model name, as the OS gives it (`/proc/cpuinfo` on Linux).
    pub cpu: String,
    /// Logical CPUs this process may run on.
    pub logical_cpus: usize,
    /// The operating system and its kernel release.
    pub os: String,
    /// Physical memory, where the OS says.
    pub memory_bytes: Option<u64>,
}

impl Machine {
    /// The machine this process runs on. Whatever cannot be read is "unknown", never an
    /// error: a benchmark still runs where /proc is missing.
    pub fn this() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let release = read("/proc/sys/kernel/osrelease").map(|r| r.trim().to_string());
        Machine {
            cpu: read("/proc/cpuinfo")
                .and_then(|c| cpu_model(&c))
                .unwrap_or_else(|| format!("unknown {} CPU", std::env::consts::ARCH)),
            logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: match release {
                Some(r) => format!("{} {r}", std::env::consts::OS),
                None => std::env::consts::OS.to_string(),
            },
            memory_bytes: read("/proc/meminfo").and_then(|m| mem_total(&m)),
        }
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, {} logical CPU{}, {}",
            self.cpu,
            self.logical_cpus,
            if self.logical_cpus == 1 { "" } else { "s" },
            self.os
        )?;
        if let Some(m) = self.memory_bytes {
            write!(f, ", {} memory", fmt_bytes(m))?;
        }
        Ok(())
    }
}

/// A report with the machine it was measured on, first: `{"machine": …, <the report's
/// fields>}`.
#[derive(Serialize)]
pub struct OnMachine<'a, T: Serialize> {
    pub machine: Machine,
    #[serde(flatten)]
    pub report: &'a T,
}

/// Prints `report` as pretty JSON with this machine in it (see [`OnMachine`]).
pub fn print_json<T: Serialize>(report: &T) -> anyhow::Result<()> {
    let on = OnMachine {
        machine: Machine::this(),
        report,
    };
    println!("{}", serde_json::to_string_pretty(&on)?);
    Ok(())
}

/// Prints a list of rows as [`print_json`] does, under `key`: `{"machine": …, key: [rows]}`.
pub fn print_json_rows<T: Serialize>(key: &'static str, rows: &[T]) -> anyhow::Result<()> {
    print_json(&Rows { key, rows })
}

/// `{key: [rows]}`, each row in its own field order (a `serde_json::Value` would sort them).
struct Rows<'a, T> {
    key: &'static str,
    rows: &'a [T],
}

impl<T: Serialize> Serialize for Rows<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry(self.key, self.rows)?;
        m.end()
    }
}

/// The first `model name` in `/proc/cpuinfo` (x86; ARM kernels name the core in other
/// fields, so `Hardware` and `CPU part` are the fallbacks).
fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Hardware", "Processor", "CPU part"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
            })
        })
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    super::memory::kb_field(meminfo, "MemTotal")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_is_the_first_model_name_and_arm_falls_back() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n\
                   processor\t: 1\nmodel name\t: AMD EPYC\n";
        assert_eq!(cpu_model(x86).as_deref(), Some("AMD EPYC"));
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd03\n";
        assert_eq!(cpu_model(arm).as_deref(), Some("0xd03"));
        assert_eq!(cpu_model("processor : 0\nmodel name :  \n"), None);
    }

    #[test]
    fn memory_is_mem_total_in_bytes() {
        let m = "MemTotal:       24576000 kB\nMemFree:        100 kB\n";
        assert_eq!(mem_total(m), Some(24_576_000 * 1024));
        assert_eq!(mem_total("MemTotal: lots kB\n"), None);
        assert_eq!(mem_total("MemTotal: 99999999999999999 kB\n"), None);
    }

    #[test]
    fn the_report_follows_its_machine() {
        #[derive(Serialize)]
        struct R {
            x: u32,
        }
        let m = Machine {
            cpu: "c".into(),
            logical_cpus: 2,
            os: "linux 6".into(),
            memory_bytes: None,
        };
        let s = serde_json::to_string(&OnMachine {
            machine: m.clone(),
            report: &R { x: 1 },
        })
        .unwrap();
        assert_eq!(
            s,
            r#"{"machine":{"cpu":"c","logical_cpus":2,"os":"linux 6","memory_bytes":null},"x":1}"#
        );
        assert_eq!(m.to_string(), "c, 2 logical CPUs, linux 6");
    }
}
