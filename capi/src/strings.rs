//! Strings across the boundary: NUL-terminated UTF-8 in, `(buf, buf_len, needed)` out.

use std::ffi::{c_char, CStr};

use sam2::Error;

/// NUL-terminated UTF-8 string argument.
pub(crate) fn arg_str<'a>(ptr: *const c_char, name: &'static str) -> Result<&'a str, Error> {
    if ptr.is_null() {
        return Err(Error::NullArgument(name));
    }
    // SAFETY: the caller promises a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str()
        .map_err(|_| Error::invalid(name, "is not valid UTF-8"))
}

/// Copies a string into a caller buffer `(buf, buf_len)` with its NUL, reporting the size needed.
pub(crate) fn copy_out_str(
    text: &str,
    buf: *mut c_char,
    buf_len: usize,
    needed: *mut usize,
) -> Result<(), Error> {
    let bytes = text.as_bytes();
    let need = bytes.len() + 1;
    if !needed.is_null() {
        // SAFETY: checked non-NULL; the caller promises it is writable.
        unsafe { *needed = need };
    }
    if buf.is_null() || buf_len < need {
        return Err(Error::BufferTooSmall {
            needed: need,
            given: if buf.is_null() { 0 } else { buf_len },
        });
    }
    // SAFETY: `buf` has room for `need` bytes (checked above).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    Ok(())
}
