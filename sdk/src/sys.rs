//! The raw `csd_v1` imports and thin safe shims over them. On targets other than wasm32 the
//! imports are stubs that panic: tasks only run inside csd (this keeps the crate buildable
//! natively, for docs and `cargo test --workspace`).

macro_rules! abi {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?;)*) => {
        #[cfg(target_arch = "wasm32")]
        mod imports {
            #[link(wasm_import_module = "csd_v1")]
            extern "C" {
                $(pub fn $name($($arg: $ty),*) $(-> $ret)?;)*
            }
        }

        #[cfg(not(target_arch = "wasm32"))]
        mod imports {
            $(
                pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                    $(let _ = $arg;)*
                    panic!(concat!("csd_v1.", stringify!($name), ": csd tasks run only inside csd, compiled for wasm32"))
                }
            )*
        }
    };
}

abi! {
    fn args_len() -> i32;
    fn args_read(ptr: *mut u8, len: i32) -> i32;
    fn file_count() -> i32;
    fn file_size(handle: i32) -> i64;
    fn file_read(handle: i32, offset: i64, ptr: *mut u8, len: i32) -> i32;
    fn file_write(handle: i32, offset: i64, ptr: *const u8, len: i32) -> i32;
    fn file_append(handle: i32, ptr: *const u8, len: i32) -> i32;
    fn file_read_submit(handle: i32, offset: i64, ptr: *mut u8, len: i32) -> i64;
    fn file_write_submit(handle: i32, offset: i64, ptr: *const u8, len: i32) -> i64;
    fn io_wait(token: i64);
    fn io_wait_all();
    fn ret_write(ptr: *const u8, len: i32);
    fn log(ptr: *const u8, len: i32);
    fn panic(ptr: *const u8, len: i32);
    fn fail(ptr: *const u8, len: i32);
    fn accel_grep(handle: i32, pat: *const u8, pat_len: i32, out: *mut u64, out_cap: i32) -> i64;
    fn accel_stats(handle: i32, width_bits: i32) -> i64;
}

// SAFETY (every use): the runtime checks every pointer/length pair against the task's memory
// and traps the task on a bad one; the slices passed here are valid for their lengths.
macro_rules! host {
    ($call:ident($($arg:expr),*)) => { unsafe { imports::$call($($arg),*) } };
}

/// Host calls take i32 lengths: big buffers are passed in pieces of at most this.
const MAX_CALL_BYTES: usize = 1 << 30;

pub fn args_len() -> i32 {
    host!(args_len())
}

pub fn args_read(buf: &mut [u8]) -> usize {
    host!(args_read(
        buf.as_mut_ptr(),
        buf.len().min(MAX_CALL_BYTES) as i32
    )) as usize
}

pub fn file_count() -> i32 {
    host!(file_count())
}

pub fn file_size(handle: i32) -> i64 {
    host!(file_size(handle))
}

pub fn file_read(handle: i32, offset: u64, buf: &mut [u8]) -> usize {
    read_into(handle, offset, buf.as_mut_ptr(), buf.len())
}

/// [`file_read`] into memory not yet initialised: the host writes the bytes it returns, so
/// a buffer need not be zeroed first (in Wasm that is guest code, a fuel per byte).
pub fn file_read_uninit(handle: i32, offset: u64, buf: &mut [core::mem::MaybeUninit<u8>]) -> usize {
    read_into(handle, offset, buf.as_mut_ptr().cast(), buf.len())
}

/// Reads up to `len` bytes at `offset` into `ptr`, a call per `MAX_CALL_BYTES`; returns how
/// many the host wrote, all from `ptr` on.
fn read_into(handle: i32, offset: u64, ptr: *mut u8, len: usize) -> usize {
    let mut done = 0usize;
    while done < len {
        let piece = (len - done).min(MAX_CALL_BYTES);
        let n = host!(file_read(
            handle,
            (offset + done as u64) as i64,
            ptr.wrapping_add(done),
            piece as i32
        )) as usize;
        done += n.min(piece);
        if n < piece {
            break;
        }
    }
    done
}

pub fn file_write(handle: i32, offset: u64, data: &[u8]) {
    for (i, piece) in data.chunks(MAX_CALL_BYTES).enumerate() {
        let at = offset + (i * MAX_CALL_BYTES) as u64;
        host!(file_write(
            handle,
            at as i64,
            piece.as_ptr(),
            piece.len() as i32
        ));
    }
}

pub fn file_append(handle: i32, data: &[u8]) {
    for piece in data.chunks(MAX_CALL_BYTES) {
        host!(file_append(handle, piece.as_ptr(), piece.len() as i32));
    }
}

/// Submits a read of at most `MAX_CALL_BYTES` of `buf`; returns the request's token.
pub fn file_read_submit(handle: i32, offset: u64, buf: &mut [u8]) -> i64 {
    let len = buf.len().min(MAX_CALL_BYTES);
    host!(file_read_submit(
        handle,
        offset as i64,
        buf.as_mut_ptr(),
        len as i32
    ))
}

/// [`file_read_submit`] into memory not yet initialised: the host writes the bytes the
/// request moves before it returns, so a buffer need not be zeroed first.
pub fn file_read_submit_uninit(
    handle: i32,
    offset: u64,
    buf: &mut [core::mem::MaybeUninit<u8>],
) -> i64 {
    let len = buf.len().min(MAX_CALL_BYTES);
    host!(file_read_submit(
        handle,
        offset as i64,
        buf.as_mut_ptr().cast(),
        len as i32
    ))
}

/// Submits a write of at most `MAX_CALL_BYTES` of `data` at `offset` (`None`: at the end).
pub fn file_write_submit(handle: i32, offset: Option<u64>, data: &[u8]) -> i64 {
    let len = data.len().min(MAX_CALL_BYTES);
    let at = offset.map_or(-1, |o| o as i64);
    host!(file_write_submit(handle, at, data.as_ptr(), len as i32))
}

pub fn io_wait(token: i64) {
    host!(io_wait(token))
}

pub fn io_wait_all() {
    host!(io_wait_all())
}

pub const MAX_SUBMIT_BYTES: usize = MAX_CALL_BYTES;

pub fn ret_write(data: &[u8]) {
    for piece in data.chunks(MAX_CALL_BYTES) {
        host!(ret_write(piece.as_ptr(), piece.len() as i32));
    }
}

pub fn log(message: &str) {
    host!(log(
        message.as_ptr(),
        message.len().min(MAX_CALL_BYTES) as i32
    ));
}

pub fn panic(message: &str) {
    host!(panic(
        message.as_ptr(),
        message.len().min(MAX_CALL_BYTES) as i32
    ));
}

pub fn fail(message: &str) {
    host!(fail(
        message.as_ptr(),
        message.len().min(MAX_CALL_BYTES) as i32
    ));
}

pub fn accel_grep(handle: i32, pattern: &[u8], out: &mut [u64]) -> u64 {
    host!(accel_grep(
        handle,
        pattern.as_ptr(),
        pattern.len().min(MAX_CALL_BYTES) as i32,
        out.as_mut_ptr(),
        out.len().min(MAX_CALL_BYTES / 8) as i32
    )) as u64
}

pub fn accel_stats(handle: i32, width_bits: i32) -> u64 {
    host!(accel_stats(handle, width_bits)) as u64
}
