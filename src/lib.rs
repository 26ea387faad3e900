//! Segment Anything 2 through ONNX Runtime: encode an image once, prompt it many times.
//!
//! This is the safe Rust core. The product, the C ABI declared in `include/sam2.h`, is a crate of
//! its own over it (`sam2-capi`, in capi/, built as libsam2 by capi/libsam2); it uses only what
//! this crate makes public.
//!
//! The pipeline's types are at the root ([`Encoder`], [`Predictor`], [`Embedding`], [`ImageView`],
//! [`Prompt`], [`Prediction`], [`Error`], …); everything else is in a namespace: [`device`]
//! (execution providers, sessions, weight sharing), [`embedding`] (where an embedding's tensors
//! live), [`embedding_file`] (saving and loading embeddings), [`cache`] (an embedding cache with
//! background encodes), [`everything`] (segment everything), [`video`] (tracking objects through
//! a video), [`masks`] (run lengths, polygons), [`models`] (the exports recognised, model pairs),
//! [`runtime`] (loading ONNX Runtime), [`files`] (regular-file reads, atomic writes), [`log`] (the
//! log sink), [`limits`] (the largest requests) and [`panics`] (containing panics at a boundary).
//! Every other module is internal.

pub mod cache;
pub mod concept;
pub mod device;
mod device_copy;
pub mod embedding;
pub mod embedding_file;
mod encoder;
mod error;
pub mod everything;
mod export;
mod files;
mod fingerprint;
mod image;
pub mod log;
mod mask_formats;
mod model_pair;
mod onnx;
mod ort_raw;
mod panics;
mod platform;
mod polygon;
mod postprocess;
mod precision;
mod predictor;
mod preprocess;
mod resample;
mod rewrite;
mod rle;
pub mod runtime;
mod session;
mod text;
pub mod video;
mod weights;

/// Test hooks (device stand-ins, fuzzing properties, internals the benchmarks drive): only in
/// builds with the `test-support` feature, which the test builds turn on; never in the shipped
/// library.
#[cfg(feature = "test-support")]
pub mod test_support;

// The pipeline: open an encoder and a predictor, encode an image, prompt it.
pub use embedding::Embedding;
pub use encoder::{Encoder, EncoderOptions, OutputTarget};
pub use error::{Error, Result};
pub use fingerprint::Fingerprint;
pub use image::{ImageView, PixelFormat};
pub use predictor::{Point, PredictOptions, Prediction, Predictor, PredictorOptions, Prompt};

// Used across the core by this name.
pub(crate) use cache::pixel_hash;

/// Masks in other forms: COCO run lengths, polygons, a mask's box and area.
pub mod masks {
    pub use crate::polygon::{polygons, rasterize, Polygon};
    pub use crate::postprocess::box_and_area;
    pub use crate::rle::Rle;
}

/// Models: the SAM2 exports the library recognises, and encoder/decoder pairs found by file name.
pub mod models {
    pub use crate::export::{DecoderExport, DecoderSpec, EncoderFamily, EncoderSpec};
    pub use crate::model_pair::{find_model_pair, ModelNaming, ModelPair};
    pub use crate::precision::{Precision, Variant};
    pub use crate::rewrite::{
        int8_scores_available, Rewrite, RewriteOutcome, RewriteReport, Rewrites,
    };
}

/// The largest requests the core accepts; a larger one is `Error::InvalidArgument` naming the
/// limit. (The C ABI checks its arguments against them before converting them.)
pub mod limits {
    pub use crate::everything::{MAX_CROP_LAYERS, MAX_GRID_POINTS};
    pub use crate::predictor::{
        check_batch_size, check_prompt_sizes, MAX_OBJECTS, MAX_POINTS, MAX_POOL,
    };
    pub use crate::video::MAX_TRACKED_OBJECTS;
}

/// Not part of the API: the plumbing this workspace's C ABI and command share with the core (the
/// panic guard of the C boundary, regular-file reads, all-or-nothing writes of several files).
/// Hidden from the documentation and free to change in any release; a host uses the types above.
#[doc(hidden)]
pub mod __private {
    pub mod files {
        pub use crate::files::{open_regular, StagedFiles};
    }
    pub mod panics {
        pub use crate::panics::{catch, describe, install_hook};
    }
}

/// Version of this library.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
