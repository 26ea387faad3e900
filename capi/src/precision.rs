//! The precision a model runs in (`SAM2_PRECISION_*`), as the encoder, its embeddings and the
//! tracker report it: one place, so that none of them imports another for it.

use super::c_enum::c_enum;
use sam2::models::Precision;

/// Precision: the encoder as exported, float32 weights and arithmetic.
pub const SAM2_PRECISION_FP32: u32 = 0;
/// Precision: an int8 variant (int8 weights per channel, activations quantised per run), for CPUs.
pub const SAM2_PRECISION_INT8: u32 = 1;
/// Precision: a float16 variant (inputs and outputs float32), for GPUs.
pub const SAM2_PRECISION_FP16: u32 = 2;

c_enum! {
    /// `SAM2_PRECISION_*` ↔ [`Precision`].
    pub(crate) PrecisionCodes: u32 => Precision {
        SAM2_PRECISION_FP32 => Precision::Fp32,
        SAM2_PRECISION_INT8 => Precision::Int8,
        SAM2_PRECISION_FP16 => Precision::Fp16,
    }
}
