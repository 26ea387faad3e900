//! The C ABI of sam2 (`include/sam2.h`): every `extern "C"` function and C type of the library,
//! over the safe core (the `sam2` crate). One file per handle type, plus the plumbing the exports
//! share (`status`, `handle`, `args`, `strings`). The conventions every export follows are in
//! `docs/c-api.md`. cbindgen reads this crate, and only this crate, to write the header; the C
//! library (libsam2.so, libsam2.a, sam2.dll) is capi/libsam2, which links it.
//!
//! The raw pointers a host passes are turned into Rust values here (NULL-checked references,
//! slices, out-params, handles checked against the registry); the core below takes no raw
//! pointer from a host. (It has raw pointers of its own, to ONNX Runtime's C API, the operating
//! system and tensor memory.)

#![allow(non_camel_case_types)]
// The exports take raw pointers from C by design; each dereference is NULL-checked and
// documented in the header, and marking them `unsafe` would mean nothing to a C caller.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod args;
mod c_enum;
mod handle;
mod status;
mod strings;

pub mod cache;
pub mod concept;
pub mod device;
pub mod embedding;
pub mod encoder;
pub mod everything;
pub mod mask_formats;
pub mod masks;
pub mod model_pair;
pub mod precision;
pub mod predictor;
pub mod runtime;
/// cbindgen:ignore
#[cfg(feature = "test-support")]
pub mod test_support;
pub mod tracker;

pub(crate) use args::{
    arg_out, arg_slice, flag, impl_options, init_options, intra_threads, option_names,
    read_options, OptionsStruct,
};
pub(crate) use handle::{free_handle, handle_ref, opt_handle_ref, publish, Handle};
pub use status::sam2_status;
pub(crate) use status::{fail, last_error};
pub(crate) use status::{guard, guard_value};
pub(crate) use strings::{arg_str, copy_out_str};
