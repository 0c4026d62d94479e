//! FusionFS's data-processing operations as CISC-op stages. Each is an exported function of
//! the `csd_stage_v1` ABI (see `csd_sdk::stage`), run by the device in its Wasm sandbox and
//! costed by the fuel it burns.

use csd_sdk::stage::run;

/// The most a decompressed slot may hold (a slot's limit).
const MAX_OUT: usize = 1 << 20;

#[no_mangle]
pub extern "C" fn crc32(a: i32, al: i32, b: i32, bl: i32) -> i64 {
    run(a, al, b, bl, |a, _| {
        Ok(csd_kernels::crc32_slice_by_8(a).to_le_bytes().to_vec())
    })
}

#[no_mangle]
pub extern "C" fn compress(a: i32, al: i32, b: i32, bl: i32) -> i64 {
    run(a, al, b, bl, |a, _| Ok(lz4_flex::compress_prepend_size(a)))
}

#[no_mangle]
pub extern "C" fn decompress(a: i32, al: i32, b: i32, bl: i32) -> i64 {
    run(a, al, b, bl, |a, _| {
        let size = a
            .get(..4)
            .map(|s| u32::from_le_bytes(s.try_into().unwrap()) as usize)
            .ok_or_else(|| csd_sdk::Error::msg("no length prefix"))?;
        if size > MAX_OUT {
            return Err(csd_sdk::Error::msg("decompressed size over a slot"));
        }
        Ok(lz4_flex::decompress_size_prepended(a)?)
    })
}

#[no_mangle]
pub extern "C" fn search(a: i32, al: i32, b: i32, bl: i32) -> i64 {
    run(a, al, b, bl, |hay, needle| {
        let n = if needle.is_empty() || needle.len() > hay.len() {
            0
        } else {
            hay.windows(needle.len()).filter(|w| *w == needle).count() as u64
        };
        Ok(n.to_le_bytes().to_vec())
    })
}

fn words(a: &[u8]) -> impl Iterator<Item = u32> + '_ {
    a.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
}

#[no_mangle]
pub extern "C" fn sort(a: i32, al: i32, b: i32, bl: i32) -> i64 {
    run(a, al, b, bl, |a, _| {
        let mut v: Vec<u32> = words(a).collect();
        v.sort_unstable();
        let mut out: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        out.extend_from_slice(&a[a.len() / 4 * 4..]);
        Ok(out)
    })
}

#[no_mangle]
pub extern "C" fn xor(a: i32, al: i32, b: i32, bl: i32) -> i64 {
    run(a, al, b, bl, |a, b| {
        let mut out = a.to_vec();
        if b.is_empty() {
            return Ok(out);
        }
        // Whole repetitions of b a word at a time (the common case: b as long as a).
        for chunk in out.chunks_mut(b.len()) {
            let n = chunk.len();
            let mut words = chunk.chunks_exact_mut(8);
            let mut mask = b[..n].chunks_exact(8);
            for (w, m) in (&mut words).zip(&mut mask) {
                let v = u64::from_le_bytes((&*w).try_into().unwrap())
                    ^ u64::from_le_bytes(m.try_into().unwrap());
                w.copy_from_slice(&v.to_le_bytes());
            }
            for (x, y) in words.into_remainder().iter_mut().zip(mask.remainder()) {
                *x ^= y;
            }
        }
        Ok(out)
    })
}

#[no_mangle]
pub extern "C" fn multiply(a: i32, al: i32, b: i32, bl: i32) -> i64 {
    run(a, al, b, bl, |a, b| {
        let m: Vec<u32> = words(b).collect();
        if m.is_empty() {
            return Err(csd_sdk::Error::msg(
                "multiply needs at least one u32 in slot b",
            ));
        }
        let mut out: Vec<u8> = words(a)
            .zip(m.iter().cycle())
            .flat_map(|(x, y)| x.wrapping_mul(*y).to_le_bytes())
            .collect();
        out.extend_from_slice(&a[a.len() / 4 * 4..]);
        Ok(out)
    })
}
