//! The C ABI. Every `extern "C"` function and every raw pointer of the library lives under this
//! module: one file per handle type, plus the plumbing the exports share (`status`, `handle`,
//! `args`, `strings`). The conventions every export follows are in `docs/c-api.md`.

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
pub mod device;
pub mod embedding;
pub mod encoder;
pub mod everything;
pub mod mask_formats;
pub mod masks;
pub mod model_pair;
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
pub(crate) use handle::{
    free_handle, handle_ref, impl_handle, opt_handle_ref, publish, Handle, HandleTag,
};
pub use status::sam2_status;
pub(crate) use status::{guard, guard_value};
pub(crate) use strings::{arg_str, copy_out_str, fail, last_error};
