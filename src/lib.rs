//! Segment Anything 2 through ONNX Runtime: encode an image once, prompt it many times.
//!
//! The safe core lives in this crate's modules; the C ABI (the product) is under [`ffi`].

pub mod cache;
pub mod device;
pub mod embedding;
pub mod embedding_file;
pub mod encoder;
pub mod error;
pub mod export;
pub mod fingerprint;
pub mod image;
pub mod log;
pub mod onnx_split;
mod platform;
pub mod postprocess;
pub mod predictor;
pub mod preprocess;
pub mod runtime;
pub mod session;
pub mod weights;

pub use cache::{CacheOptions, CacheStats, EmbeddingCache, Job, JobState, Priority, Source};
pub use device::{DeviceOptions, EffectiveDevice, MismatchPolicy, Provider, ProviderRequest};
pub use embedding::{Embedding, Location};
pub use encoder::{Encoder, EncoderOptions, OutputTarget};
pub use error::{Error, Result};
pub use export::{DecoderExport, EncoderFamily};
pub use fingerprint::Fingerprint;
pub use image::{ImageView, PixelFormat};
pub use predictor::{Point, PredictOptions, Prediction, Predictor, PredictorOptions, Prompt};

/// Version of this library.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub mod ffi;

/// Test hooks (device stand-ins, fuzzing properties): only in builds with the `test-support`
/// feature, which the test builds turn on; never in the shipped library.
#[cfg(feature = "test-support")]
pub mod test_support;
