//! Argument helpers of the exports: out-params, arrays, growable options structs (`struct_size`)
//! and the small scalar fields the options share.

use super::status::{guard, sam2_status};
use sam2::Error;

/// A NULL-checked out-param, written through its raw pointer: no `&mut` is formed, so a host
/// that passes one pointer for two out-params (or an out-param that overlaps an input) gets the
/// last write, not undefined behaviour.
pub(crate) struct Out<'a, T> {
    ptr: *mut T,
    _lifetime: std::marker::PhantomData<&'a mut T>,
}

impl<T> Out<'_, T> {
    /// Writes the value (the old contents are not dropped: out-params hold plain C data).
    pub(crate) fn set(self, value: T) {
        // SAFETY: non-NULL; the caller promises it is valid for writes of a `T`.
        unsafe { self.ptr.write_unaligned(value) }
    }
}

/// NULL-checked out-param.
pub(crate) fn arg_out<'a, T>(ptr: *mut T, name: &'static str) -> Result<Out<'a, T>, Error> {
    if ptr.is_null() {
        return Err(Error::NullArgument(name));
    }
    Ok(Out {
        ptr,
        _lifetime: std::marker::PhantomData,
    })
}

/// A `(pointer, length)` array argument; NULL is accepted when the length is 0.
pub(crate) fn arg_slice<'a, T>(
    ptr: *const T,
    len: usize,
    name: &'static str,
) -> Result<&'a [T], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::NullArgument(name));
    }
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(Error::invalid(name, "length is impossibly large"));
    }
    // SAFETY: the caller promises `len` readable elements at `ptr`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A growable options struct: `#[repr(C)]`, its first field `uint32_t struct_size`, its defaults
/// from `Default`. Implement it with [`impl_options!`], which checks the layout at compile time.
pub(crate) trait OptionsStruct: Copy + Default {
    /// The sizes of the earlier published versions of the struct (older callers pass them).
    const EARLIER_SIZES: &'static [usize];
}

/// Implements [`OptionsStruct`]: `impl_options!(sam2_thing_options, earlier_sizes: [12]);`.
macro_rules! impl_options {
    ($ty:ident, earlier_sizes: [$($size:expr),* $(,)?]) => {
        impl $crate::OptionsStruct for $ty {
            const EARLIER_SIZES: &'static [usize] = &[$($size),*];
        }
        // `struct_size` is read and written at offset 0 whatever the version, and an earlier
        // version is a prefix of this one.
        const _: () = {
            assert!(std::mem::offset_of!($ty, struct_size) == 0);
            $(assert!($size < std::mem::size_of::<$ty>());)*
        };
        const _: fn(&$ty) -> u32 = |options| options.struct_size;
    };
}
pub(crate) use impl_options;

/// Reads a growable options struct: NULL gives the defaults; the size of an earlier version of
/// the struct (an older caller) reads the prefix it knows over the defaults. Only the sizes of
/// published versions are accepted.
pub(crate) fn read_options<T: OptionsStruct>(
    ptr: *const T,
    name: &'static str,
) -> Result<T, Error> {
    let defaults = T::default();
    let versions = T::EARLIER_SIZES;
    if ptr.is_null() {
        return Ok(defaults);
    }
    // SAFETY: every options struct starts with a `uint32_t struct_size`.
    let size = unsafe { *(ptr as *const u32) } as usize;
    let full = std::mem::size_of::<T>();
    if size != full && !versions.contains(&size) {
        return Err(Error::invalid(
            name,
            format!(
                "struct_size is {size}; expected {full} (set it with the _init function), or the size of an earlier version ({versions:?})"
            ),
        ));
    }
    let mut out = defaults;
    // SAFETY: `size` bytes are readable at `ptr` (the caller's struct), and fit in `out`.
    unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, &mut out as *mut T as *mut u8, size) };
    Ok(out)
}

/// The whole body of every `sam2_*_options_init` export: writes the defaults of a growable
/// options struct into a caller struct of `struct_size` bytes (its `sizeof`, which may be an
/// earlier version's), and sets its `struct_size`.
pub(crate) fn init_options<T: OptionsStruct>(ptr: *mut T, struct_size: usize) -> sam2_status {
    guard(|| {
        if ptr.is_null() {
            return Err(Error::NullArgument("options"));
        }
        let full = std::mem::size_of::<T>();
        if struct_size != full && !T::EARLIER_SIZES.contains(&struct_size) {
            return Err(Error::invalid(
                "struct_size",
                format!("is {struct_size}; pass sizeof the options struct ({full} in this version of the header)"),
            ));
        }
        let mut value = T::default();
        // SAFETY: every options struct starts with a `uint32_t struct_size`.
        unsafe { *(&mut value as *mut T as *mut u32) = struct_size as u32 };
        // SAFETY: the caller promises `struct_size` writable bytes at `ptr`; `value` holds at least that many.
        unsafe {
            std::ptr::copy_nonoverlapping(
                &value as *const T as *const u8,
                ptr as *mut u8,
                struct_size,
            )
        };
        Ok(())
    })
}

/// The `intra_threads` field of the options structs: 0 = automatic (the core checks the range).
pub(crate) fn intra_threads(value: u32) -> Option<usize> {
    (value > 0).then_some(value as usize)
}

/// The core's options validate themselves and name a fault by the Rust field; a C host (and
/// .NET's `ArgumentException.ParamName`) is told the field of its options struct instead.
pub(crate) fn option_names(e: Error) -> Error {
    let Error::InvalidArgument { name, reason } = e else {
        return e;
    };
    let name = match name {
        "intra_threads" => "options.intra_threads",
        "providers" => "options.provider_count",
        "providers.device_id" => "options.providers.device_id",
        "pool_size" => "options.pool_size",
        "queue_limit" => "options.queue_limit",
        "memory_frames" => "options.memory_frames",
        "num_frames" => "options.num_frames",
        "encoder_fingerprint" => "options.encoder_fingerprint",
        other => other,
    };
    Error::InvalidArgument { name, reason }
}

/// A 0/1 field of an options struct.
pub(crate) fn flag(value: u32, name: &'static str) -> Result<bool, Error> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(Error::invalid(name, format!("must be 0 or 1, got {other}"))),
    }
}
