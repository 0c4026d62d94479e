//! Parsing and printing sizes and durations the way storage people write them.

/// Parses `16k`, `4g`, `4GiB`, `1t`, `512` (binary multiples; a trailing `b`/`ib` is allowed).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("ib")
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(&t);
    let (digits, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        Some('t') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 4096, 16k, 64m, 4g, 1t)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// [`parse_size`] for an input held in memory: 1 byte to 1 GiB.
pub fn parse_size_in_memory(s: &str) -> Result<u64, String> {
    match parse_size(s)? {
        0 => Err(format!("'{s}': the size must be at least 1 byte")),
        n if n > 1 << 30 => Err(format!(
            "'{s}' is more than the 1 GiB this input may hold (it is held in memory)"
        )),
        n => Ok(n),
    }
}

/// `16 KiB`, `4.00 GiB`: exact for whole multiples, two decimals otherwise.
pub fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    while unit + 1 < UNITS.len() && n >= 1u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    let scale = 1u64 << (10 * unit);
    if n.is_multiple_of(scale) {
        format!("{} {}", n / scale, UNITS[unit])
    } else {
        format!("{:.2} {}", n as f64 / scale as f64, UNITS[unit])
    }
}

/// A rate in binary units per second.
pub fn fmt_rate(bytes_per_sec: f64) -> String {
    let gib = bytes_per_sec / (1u64 << 30) as f64;
    if gib >= 1.0 {
        format!("{gib:.2} GiB/s")
    } else {
        format!("{:.1} MiB/s", bytes_per_sec / (1u64 << 20) as f64)
    }
}

/// Nanoseconds as microseconds with one decimal.
pub fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// Nanoseconds in the largest unit that keeps the number at or above 1 (ns, µs, ms, s).
pub fn fmt_duration(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// 1234567 → "1,234,567".
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_trip() {
        assert_eq!(parse_size("16k"), Ok(16384));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("1t"), Ok(1 << 40));
        assert_eq!(parse_size(" 512 "), Ok(512));
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999t").is_err());
        assert_eq!(fmt_bytes(16384), "16 KiB");
        assert_eq!(fmt_bytes(1536), "1.50 KiB");
        assert_eq!(fmt_bytes(4 << 30), "4 GiB");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(fmt_duration(81_000), "81.0 µs");
        assert_eq!(fmt_duration(999), "999 ns");
        assert_eq!(fmt_duration(7_146_400), "7.15 ms");
        assert_eq!(fmt_duration(1_500_000_000), "1.500 s");
    }
}
