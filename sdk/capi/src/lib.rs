//! The CISC-op builder for C programs: `include/csd_cisc.h` declares these functions.
//!
//! Each wraps [`csd_sdk::cisc::CiscBuilder`], so a C program builds the same ops, and
//! encodes the same pages, as a Rust one. Nothing here panics on what a caller passes: null
//! pointers, strings that are not UTF-8 and ops that do not validate are negative returns
//! with the reason kept for `csd_cisc_error`.

use csd_sdk::cisc::{CiscBuilder, CiscOp, FileRef, Slot, Stage, TxGrain, OP_PAGE_BYTES};
use std::ffi::{c_char, c_int, c_long, CStr, CString};

/// The builder a C program holds, with the last failure's reason and the op it last encoded.
pub struct CsdCisc {
    builder: CiscBuilder,
    error: CString,
    encoded: Option<CiscOp>,
}

/// A file as C passes it: `kind` 1 is a descriptor, 2 a handle of the op.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CsdFile {
    pub kind: u32,
    pub id: u32,
}

const FAILED: c_int = -1;

impl CsdCisc {
    fn fail(&mut self, why: impl Into<Vec<u8>>) -> c_int {
        self.error = CString::new(why).unwrap_or_default();
        FAILED
    }
}

fn file(f: CsdFile) -> Option<FileRef> {
    match f.kind {
        1 => Some(FileRef::Fd(f.id)),
        2 => u8::try_from(f.id).ok().map(FileRef::Handle),
        _ => None,
    }
}

fn slot(s: c_int) -> Option<Slot> {
    u8::try_from(s).ok().map(Slot)
}

/// # Safety
/// `op` is null or a pointer `csd_cisc_new` returned and `csd_cisc_free` did not take.
unsafe fn builder<'a>(op: *mut CsdCisc) -> Option<&'a mut CsdCisc> {
    // SAFETY: the caller passes null or a live builder.
    unsafe { op.as_mut() }
}

/// # Safety
/// `s` is null or a NUL-terminated string.
unsafe fn text<'a>(s: *const c_char) -> Option<&'a str> {
    if s.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated, as the caller promises.
    unsafe { CStr::from_ptr(s) }.to_str().ok()
}

/// Runs `f` on the builder behind `op` with the file and slot checked.
macro_rules! with_op {
    ($op:expr, |$b:ident| $body:expr) => {{
        // SAFETY: the header's contract: null or a live builder.
        match unsafe { builder($op) } {
            None => FAILED,
            Some($b) => $body,
        }
    }};
}

#[no_mangle]
pub extern "C" fn csd_cisc_new() -> *mut CsdCisc {
    Box::into_raw(Box::new(CsdCisc {
        builder: CiscBuilder::new(),
        error: CString::default(),
        encoded: None,
    }))
}

/// # Safety
/// `op` is null or a builder from `csd_cisc_new`, freed once.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_free(op: *mut CsdCisc) {
    if !op.is_null() {
        // SAFETY: it came from Box::into_raw in csd_cisc_new and is freed once.
        drop(unsafe { Box::from_raw(op) });
    }
}

/// # Safety
/// As for every function here: `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_grain(op: *mut CsdCisc, micro: c_int) -> c_int {
    with_op!(op, |c| {
        c.builder.grain(if micro != 0 {
            TxGrain::Micro
        } else {
            TxGrain::Macro
        });
        0
    })
}

/// # Safety
/// `data` points at `len` readable bytes (or is null with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_input(op: *mut CsdCisc, data: *const u8, len: usize) -> c_int {
    with_op!(op, |c| {
        let bytes = if len == 0 {
            Vec::new()
        } else if data.is_null() {
            return c.fail("csd_cisc_input: data is null");
        } else {
            // SAFETY: the caller promises `len` readable bytes at `data`.
            unsafe { std::slice::from_raw_parts(data, len) }.to_vec()
        };
        c_int::from(c.builder.input(bytes).0)
    })
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_read(op: *mut CsdCisc, f: CsdFile, len: u32) -> c_int {
    with_op!(op, |c| match file(f) {
        Some(f) => c_int::from(c.builder.read(f, len).0),
        None => c.fail(format!("csd_cisc_read: no file of kind {}", f.kind)),
    })
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_pread(
    op: *mut CsdCisc,
    f: CsdFile,
    offset: u64,
    len: u32,
) -> c_int {
    with_op!(op, |c| match file(f) {
        Some(f) => c_int::from(c.builder.pread(f, offset, len).0),
        None => c.fail(format!("csd_cisc_pread: no file of kind {}", f.kind)),
    })
}

/// # Safety
/// `stage` is a NUL-terminated string; `inputs` points at `n_inputs` ints.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_process(
    op: *mut CsdCisc,
    stage: *const c_char,
    inputs: *const c_int,
    n_inputs: usize,
) -> c_int {
    with_op!(op, |c| {
        // SAFETY: the caller passes a NUL-terminated string.
        let Some(name) = (unsafe { text(stage) }) else {
            return c.fail("csd_cisc_process: the stage is null or not UTF-8");
        };
        let Some(stage) = Stage::parse(name) else {
            return c.fail(format!("csd_cisc_process: unknown stage '{name}'"));
        };
        if n_inputs > 2 || (n_inputs > 0 && inputs.is_null()) {
            return c.fail(format!(
                "csd_cisc_process: a stage takes 1 or 2 input slots, not {n_inputs}"
            ));
        }
        let given = if n_inputs == 0 {
            &[][..]
        } else {
            // SAFETY: non-null, `n_inputs` (at most 2) ints, as the caller promises.
            unsafe { std::slice::from_raw_parts(inputs, n_inputs) }
        };
        let Some(slots) = given.iter().map(|&s| slot(s)).collect::<Option<Vec<_>>>() else {
            return c.fail(format!("csd_cisc_process: bad input slot in {given:?}"));
        };
        c_int::from(c.builder.process(stage, &slots).0)
    })
}

/// # Safety
/// `path` is a NUL-terminated string; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_open(
    op: *mut CsdCisc,
    path: *const c_char,
    create: c_int,
    out: *mut CsdFile,
) -> c_int {
    with_op!(op, |c| {
        // SAFETY: the caller passes a NUL-terminated string.
        let Some(path) = (unsafe { text(path) }) else {
            return c.fail("csd_cisc_open: the path is null or not UTF-8");
        };
        let FileRef::Handle(h) = c.builder.open(path, create != 0) else {
            unreachable!("an open returns a handle")
        };
        // SAFETY: null or writable, as the caller promises.
        if let Some(out) = unsafe { out.as_mut() } {
            *out = CsdFile {
                kind: 2,
                id: u32::from(h),
            };
        }
        c_int::from(h)
    })
}

/// A data command on a file from a slot: write, pwrite (with `offset`) or append.
fn data_command(c: &mut CsdCisc, f: CsdFile, s: c_int, what: &str, at: Option<u64>) -> c_int {
    let (Some(f), Some(s)) = (file(f), slot(s)) else {
        return c.fail(format!(
            "csd_cisc_{what}: bad file (kind {}) or slot {s}",
            f.kind
        ));
    };
    match (what, at) {
        ("append", _) => c.builder.append(f, s),
        (_, Some(o)) => c.builder.pwrite(f, o, s),
        _ => c.builder.write(f, s),
    };
    0
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_write(op: *mut CsdCisc, f: CsdFile, s: c_int) -> c_int {
    with_op!(op, |c| data_command(c, f, s, "write", None))
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_pwrite(
    op: *mut CsdCisc,
    f: CsdFile,
    offset: u64,
    s: c_int,
) -> c_int {
    with_op!(op, |c| data_command(c, f, s, "pwrite", Some(offset)))
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_append(op: *mut CsdCisc, f: CsdFile, s: c_int) -> c_int {
    with_op!(op, |c| data_command(c, f, s, "append", None))
}

/// A command on a file alone: fsync, close or truncate.
fn file_command(c: &mut CsdCisc, f: CsdFile, what: &str, len: u64) -> c_int {
    let Some(file) = file(f) else {
        return c.fail(format!("csd_cisc_{what}: no file of kind {}", f.kind));
    };
    match what {
        "fsync" => c.builder.fsync(file),
        "close" => c.builder.close(file),
        _ => c.builder.truncate(file, len),
    };
    0
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_fsync(op: *mut CsdCisc, f: CsdFile) -> c_int {
    with_op!(op, |c| file_command(c, f, "fsync", 0))
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_close(op: *mut CsdCisc, f: CsdFile) -> c_int {
    with_op!(op, |c| file_command(c, f, "close", 0))
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_truncate(op: *mut CsdCisc, f: CsdFile, len: u64) -> c_int {
    with_op!(op, |c| file_command(c, f, "truncate", len))
}

/// # Safety
/// `path` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_unlink(op: *mut CsdCisc, path: *const c_char) -> c_int {
    with_op!(op, |c| {
        // SAFETY: the caller passes a NUL-terminated string.
        match unsafe { text(path) } {
            Some(p) => {
                c.builder.unlink(p);
                0
            }
            None => c.fail("csd_cisc_unlink: the path is null or not UTF-8"),
        }
    })
}

/// # Safety
/// `from` and `to` are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_rename(
    op: *mut CsdCisc,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        two_paths(op, from, to, "csd_cisc_rename", |b, f, t| {
            b.rename(f, t);
        })
    }
}

/// # Safety
/// `from` and `to` are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_link(
    op: *mut CsdCisc,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        two_paths(op, from, to, "csd_cisc_link", |b, f, t| {
            b.link(f, t);
        })
    }
}

/// # Safety
/// `target` and `path` are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_symlink(
    op: *mut CsdCisc,
    target: *const c_char,
    path: *const c_char,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        two_paths(op, target, path, "csd_cisc_symlink", |b, t, p| {
            b.symlink(t, p);
        })
    }
}

/// A command naming two paths, added by `add`.
///
/// # Safety
/// `op` is null or a live builder; `from` and `to` are NUL-terminated strings.
unsafe fn two_paths(
    op: *mut CsdCisc,
    from: *const c_char,
    to: *const c_char,
    call: &str,
    add: impl FnOnce(&mut CiscBuilder, &str, &str),
) -> c_int {
    with_op!(op, |c| {
        // SAFETY: the caller passes NUL-terminated strings.
        match unsafe { (text(from), text(to)) } {
            (Some(f), Some(t)) => {
                add(&mut c.builder, f, t);
                0
            }
            _ => c.fail(format!("{call}: a path is null or not UTF-8")),
        }
    })
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_return(op: *mut CsdCisc, s: c_int) -> c_int {
    with_op!(op, |c| match slot(s) {
        Some(s) => {
            c.builder.ret(s);
            0
        }
        None => c.fail(format!("csd_cisc_return: bad slot {s}")),
    })
}

/// # Safety
/// `page` points at `CSD_CISC_PAGE_BYTES` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_encode(op: *mut CsdCisc, page: *mut u8) -> c_long {
    c_long::from(with_op!(op, |c| {
        if page.is_null() {
            return c.fail("csd_cisc_encode: the page is null").into();
        }
        match c.builder.build().and_then(|o| o.encode().map(|p| (o, p))) {
            Ok((o, p)) => {
                // SAFETY: the caller promises a page of OP_PAGE_BYTES writable bytes.
                unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), page, OP_PAGE_BYTES) };
                c.encoded = Some(o);
                c.error = CString::default();
                OP_PAGE_BYTES as c_int
            }
            Err(e) => c.fail(format!("csd_cisc_encode: {e}")),
        }
    }))
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_input_count(op: *const CsdCisc) -> usize {
    // SAFETY: null or a live builder.
    unsafe { op.as_ref() }
        .and_then(|c| c.encoded.as_ref())
        .map_or(0, |o| o.inputs.len())
}

/// # Safety
/// `op` is null or a live builder; `len` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_input_data(
    op: *const CsdCisc,
    i: usize,
    len: *mut usize,
) -> *const u8 {
    // SAFETY: null or a live builder.
    let data = unsafe { op.as_ref() }
        .and_then(|c| c.encoded.as_ref())
        .and_then(|o| o.inputs.get(i))
        .map(|(_, d)| d.as_slice());
    // SAFETY: null or writable, as the caller promises.
    if let Some(l) = unsafe { len.as_mut() } {
        *l = data.map_or(0, <[u8]>::len);
    }
    data.map_or(std::ptr::null(), <[u8]>::as_ptr)
}

/// # Safety
/// `op` is null or a live builder.
#[no_mangle]
pub unsafe extern "C" fn csd_cisc_error(op: *const CsdCisc) -> *const c_char {
    // SAFETY: null or a live builder.
    match unsafe { op.as_ref() } {
        Some(c) => c.error.as_ptr(),
        None => c"csd_cisc: the builder is null".as_ptr(),
    }
}
