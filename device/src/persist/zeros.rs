//! CRC-32 of a block kept without its trailing zeros, without hashing the zeros back in.
//!
//! The persistence path keeps blocks trimmed (a 4 KiB block of a version number and zeros is
//! 3 bytes), but its checksums cover whole blocks. Appending n zero bytes changes a CRC-32 by
//! a fixed map: crc(a ‖ 0ⁿ) = x⁸ⁿ·crc(a) ⊕ crc(0ⁿ), modulo the CRC polynomial (zlib's
//! `crc32_combine`). So a block's padding costs one 32-step multiply, where hashing its
//! zeros was a quarter of `csd repro sift`.

use crc32fast::Hasher;

/// Tails shorter than this are hashed: the multiply would not be cheaper.
const MIN_TAIL: u64 = 256;
/// Tail lengths remembered; past these, tails are hashed (a path's blocks trim to a few
/// lengths, so this bounds memory without costing the common case).
const MAX_KNOWN: usize = 64;

/// Remembers, per tail length n, x⁸ⁿ and crc(0ⁿ).
#[derive(Clone, Debug, Default)]
pub struct ZeroTails {
    known: Vec<(u64, u32, u32)>,
}

impl ZeroTails {
    /// Feeds `data` to `crc`, then the zeros that pad it to `block_bytes` (none if it is
    /// that long already).
    pub fn hash_padded(&mut self, crc: &mut Hasher, data: &[u8], block_bytes: u64) {
        crc.update(data);
        let tail = block_bytes.saturating_sub(data.len() as u64);
        if tail < MIN_TAIL {
            return hash_zeros(crc, tail);
        }
        let Some((shift, zeros)) = self.factors(tail) else {
            return hash_zeros(crc, tail);
        };
        let head = crc.clone().finalize();
        *crc = Hasher::new_with_initial(multiply(shift, head) ^ zeros);
    }

    fn factors(&mut self, tail: u64) -> Option<(u32, u32)> {
        if let Some(&(_, shift, zeros)) = self.known.iter().find(|k| k.0 == tail) {
            return Some((shift, zeros));
        }
        if self.known.len() >= MAX_KNOWN {
            return None;
        }
        // x⁸ⁿ is 1 (reflected: the top bit) with n zero bytes appended, by combining with
        // an empty-valued hash of that length.
        let mut one = Hasher::new_with_initial(1 << 31);
        one.combine(&Hasher::new_with_initial_len(0, tail));
        let shift = one.finalize();
        let mut z = Hasher::new();
        hash_zeros(&mut z, tail);
        let zeros = z.finalize();
        self.known.push((tail, shift, zeros));
        Some((shift, zeros))
    }
}

fn hash_zeros(crc: &mut Hasher, mut n: u64) {
    static ZEROS: [u8; 4096] = [0; 4096];
    while n > 0 {
        let k = n.min(ZEROS.len() as u64) as usize;
        crc.update(&ZEROS[..k]);
        n -= k as u64;
    }
}

/// a(x)·b(x) modulo the (reflected) CRC-32 polynomial, as zlib's `multmodp`.
fn multiply(a: u32, mut b: u32) -> u32 {
    const POLY: u32 = 0xedb8_8320;
    let mut p = 0u32;
    for i in 0..32 {
        p ^= b & ((a >> (31 - i)) & 1).wrapping_neg();
        b = (b >> 1) ^ ((b & 1).wrapping_neg() & POLY);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;

    #[test]
    fn padding_by_multiply_equals_hashing_the_zeros() {
        let mut rng = SimRng::new(5);
        let mut tails = ZeroTails::default();
        for case in 0..300 {
            let block = [512u64, 4096, 16384][case % 3];
            let blocks = 1 + rng.below(3);
            let (mut fast, mut plain) = (Hasher::new(), Hasher::new());
            for _ in 0..blocks {
                let len = rng.below(block + 1);
                let mut data: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                tails.hash_padded(&mut fast, &data, block);
                data.resize(block as usize, 0);
                plain.update(&data);
            }
            assert_eq!(fast.finalize(), plain.finalize(), "case {case}");
        }
        assert_eq!(tails.known.len(), MAX_KNOWN, "the table stops growing");
    }
}
