//! libsam2, the C library: the exports of `sam2_capi` (declared in `include/sam2.h`) linked into a
//! `cdylib` and a `staticlib` named `sam2`. Nothing is defined here: a `#[no_mangle] extern "C"`
//! function of a linked rlib is exported by the cdylib as its own, and this `use` links it.

pub use sam2_capi::*;
