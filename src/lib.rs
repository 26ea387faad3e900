//! Segment Anything 2 through ONNX Runtime: encode an image once, prompt it many times.
//!
//! The product is the C ABI under [`ffi`] (declared in `include/sam2.h`). The safe Rust core
//! behind it is reached through the items re-exported here and four namespaces:
//! [`runtime`] (loading ONNX Runtime), [`embedding_file`] (saving and loading embeddings),
//! [`files`] (reading only regular files, writing files atomically) and [`log`] (the library's
//! log sink). Everything else is internal.

mod attention;
mod cache;
mod device;
mod device_copy;
mod embedding;
pub mod embedding_file;
mod encoder;
mod error;
mod everything;
mod export;
pub mod ffi;
pub mod files;
mod fingerprint;
mod image;
pub mod log;
mod mask_formats;
mod model_pair;
mod onnx_split;
mod ort_raw;
mod panics;
mod platform;
mod polygon;
mod postprocess;
mod predictor;
mod preprocess;
mod rle;
pub mod runtime;
mod session;
mod video;
mod weights;

/// Test hooks (device stand-ins, fuzzing properties, internals the benchmarks drive): only in
/// builds with the `test-support` feature, which the test builds turn on; never in the shipped
/// library.
#[cfg(feature = "test-support")]
pub mod test_support;

pub use attention::AttentionFusion;
pub use cache::{
    pixel_hash, CacheOptions, CacheStats, EmbeddingCache, Job, JobState, Priority, Source,
};
pub use device::{
    ArenaStrategy, DeviceOptions, EffectiveDevice, MismatchPolicy, Provider, ProviderRequest,
};
pub use device_copy::{copy_stats, CopyStats};
pub use embedding::{live_bytes as live_embedding_bytes, Embedding, EmbeddingTensor, Location};
pub use encoder::{Encoder, EncoderOptions, OutputTarget};
pub use error::{Error, Result};
pub use everything::{
    crop_boxes, point_grid, segment_everything, segment_everything_embedding,
    segment_everything_embedding_with_progress, segment_everything_with_progress, Everything,
    EverythingCost, EverythingMask, EverythingOptions, Progress, DEFAULT_MAX_CLICKS,
    DEFAULT_MAX_MEMORY_BYTES,
};
pub use export::{DecoderExport, DecoderSpec, EncoderFamily, EncoderSpec, InputType};
pub use fingerprint::Fingerprint;
pub use image::{ImageView, PixelFormat};
pub use model_pair::{find_model_pair, ModelNaming, ModelPair};
pub use polygon::{polygons as mask_polygons, rasterize as rasterize_polygons, Polygon};
pub use predictor::{Point, PredictOptions, Prediction, Predictor, PredictorOptions, Prompt};
pub use rle::Rle;
pub use session::SessionOptions;
pub use video::{
    describe_video_module, Direction, TrackedFrame, TrackedObject, Tracker, TrackerOptions,
    VideoModelPaths,
};
pub use weights::{shared_models, Optimization, WeightSharing};

/// Version of this library.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
