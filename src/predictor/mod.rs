//! The prompt decoder: an [`Embedding`] and clicks → masks, run on every click.
//!
//! This file holds the options, the result and [`Predictor`] itself (loading, the checks of an
//! embedding, the calls); `prompts.rs` the prompts and their tensors; `pool.rs` which of the
//! pool's sessions serves a predict; `batch.rs` how a predict's prompts are grouped and run.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};

use ort::memory::MemoryInfo;
use ort::session::Session;

use crate::device::{self, EffectiveDevice};
use crate::embedding::Embedding;
use crate::error::{Error, Result};
use crate::export::{self, DecoderExport, DecoderSpec};
use crate::fingerprint::Fingerprint;
use crate::session::{self, SessionOptions};
use crate::weights::{self, ModelWeights};

mod batch;
mod pool;
mod prompts;
pub(crate) use prompts::prompt_points_in;

pub use prompts::{
    check_batch_size, check_prompt_sizes, prompt_points, validate_prompts, Point, Prompt,
};
pub use prompts::{MAX_OBJECTS, MAX_POINTS};

/// Options of one prediction.
#[derive(Debug, Clone, Copy, Default)]
pub struct PredictOptions {
    /// Return every candidate mask instead of the best one.
    pub multimask: bool,
}

/// Options of a predictor.
#[derive(Debug, Clone, Default)]
pub struct PredictorOptions {
    /// Fingerprint of the encoder whose embeddings this predictor accepts; `None` checks only
    /// the embedding's layout.
    pub encoder_fingerprint: Option<Fingerprint>,
    pub session: SessionOptions,
    /// Sessions in the pool (concurrent predicts); `None` = one per core, at most 8. The first
    /// uses every core and serves a lone predict; the others one thread each (unless
    /// `session.intra_threads` is set), built when predicts first run at once.
    pub pool_size: Option<usize>,
    /// Accept an embedding held on another device by copying it to the host for each predict.
    /// Off by default: such an embedding is refused with a clear error instead.
    pub allow_embedding_copy: bool,
}

impl PredictorOptions {
    /// Refuses settings no predictor can honour, naming the field: a pool of 0 or more than
    /// [`MAX_POOL`] sessions, and what [`SessionOptions::validate`] refuses.
    pub fn validate(&self) -> Result<()> {
        if let Some(n) = self.pool_size {
            if n == 0 || n > MAX_POOL {
                return Err(Error::invalid(
                    "pool_size",
                    format!("must be 1 to {MAX_POOL} (unset: one per core), got {n}"),
                ));
            }
        }
        self.session.validate()
    }
}

/// The result of one prediction: `objects × candidates` masks at the original image size.
#[derive(Debug, Clone)]
pub struct Prediction {
    pub width: usize,
    pub height: usize,
    pub objects: usize,
    pub candidates: usize,
    /// `objects × candidates × height × width` bytes, 1 = foreground.
    pub masks: Vec<u8>,
    /// IoU prediction per mask.
    pub scores: Vec<f32>,
    /// Inclusive `[x_min, y_min, x_max, y_max]` per mask (zeros for an empty mask).
    pub boxes: Vec<[u32; 4]>,
    pub areas: Vec<u64>,
    /// `objects × candidates × low_res_size²` logits, to feed back as `mask_input`.
    pub low_res: Vec<f32>,
    pub low_res_size: usize,
    /// Index of each returned mask among the model's candidates.
    pub candidate_index: Vec<u32>,
}

impl Prediction {
    /// Mask `k` (object-major) as a `height × width` slice.
    pub fn mask(&self, k: usize) -> &[u8] {
        let n = self.width * self.height;
        &self.masks[k * n..(k + 1) * n]
    }

    /// Low-res logits of mask `k`.
    pub fn low_res_logits(&self, k: usize) -> &[f32] {
        let n = self.low_res_size * self.low_res_size;
        &self.low_res[k * n..(k + 1) * n]
    }
}

/// A loaded decoder.
#[derive(Debug)]
pub struct Predictor {
    /// A pool of sessions on the same shared weights: running a session needs exclusive access,
    /// so concurrent predicts use different sessions. The first is built with the predictor;
    /// the others when a predict first needs one (`pool.rs`), so a predictor that never serves
    /// two predicts at once holds one session.
    sessions: Vec<Mutex<Option<Session>>>,
    /// Options of the sessions built on demand.
    pool_options: SessionOptions,
    /// Set when building a session on demand failed: the pool stops growing and predicts wait
    /// for the sessions it has.
    pool_full: AtomicBool,
    /// `sessions[0]` runs on every core and serves predicts that run alone; the others run one
    /// thread each and serve predicts that run at once.
    lone_session: bool,
    /// Predicts running now.
    in_flight: AtomicUsize,
    next: AtomicUsize,
    weights: Arc<ModelWeights>,
    spec: DecoderSpec,
    path: PathBuf,
    expected: Option<Fingerprint>,
    host_memory: MemoryInfo<'static>,
    /// Shapes the decoder declares for the three embedding inputs (−1 = dynamic).
    feature_shapes: [Vec<i64>; 3],
    device: EffectiveDevice,
    allow_embedding_copy: bool,
}

/// Largest predictor pool.
pub const MAX_POOL: usize = 64;

impl Predictor {
    /// A predictor of `encoder`'s embeddings: the decoder at `path`, checked to be of the
    /// encoder's export family, accepting only that encoder's embeddings, and, when `options`
    /// names no provider, running where the encoder's embeddings live ([`Encoder::device`] with
    /// [`OutputTarget::Device`], the host with [`OutputTarget::Host`] or a CPU encoder), so that
    /// it reads them in place with no copy per click. Providers in `options` are used as given
    /// (another device then needs `allow_embedding_copy`, or the embedding is refused with a
    /// message saying where each is); a fingerprint in `options` must be the encoder's.
    ///
    /// [`Encoder::device`]: crate::Encoder::device
    /// [`OutputTarget::Device`]: crate::OutputTarget::Device
    /// [`OutputTarget::Host`]: crate::OutputTarget::Host
    pub fn for_encoder(
        path: impl AsRef<Path>,
        encoder: &crate::Encoder,
        options: &PredictorOptions,
    ) -> Result<Self> {
        let fingerprint = encoder.fingerprint();
        if let Some(given) = options.encoder_fingerprint {
            if given != fingerprint {
                return Err(Error::invalid(
                    "encoder_fingerprint",
                    format!("{given} contradicts the encoder given ({fingerprint})"),
                ));
            }
        }
        let mut options = options.clone();
        options.encoder_fingerprint = Some(fingerprint);
        if options.session.device.providers.is_empty() {
            options.session.device.providers = encoder.embedding_provider().into_iter().collect();
        }
        let predictor = Predictor::new(path, &options)?;
        predictor.check_encoder(encoder)?;
        Ok(predictor)
    }

    pub fn new(path: impl AsRef<Path>, options: &PredictorOptions) -> Result<Self> {
        options.validate()?;
        let path = path.as_ref();
        let weights = weights::get(
            path,
            options.session.weights,
            weights::Plan::new(
                options.session.optimization,
                &options.session.device,
                options.session.rewrites,
            ),
        )?;
        let cores = crate::preprocess::worker_threads();
        let pool_size = options.pool_size.unwrap_or(cores).clamp(1, MAX_POOL);
        // Threads: unless the caller sets a number, a predict that runs alone gets a session on
        // every core (ONNX Runtime's default: a lone click as fast as ONNX Runtime can make it),
        // and predicts that run at once get one thread each (`pool_size` of them), so that they
        // share the cores instead of oversubscribing them (an idle multi-threaded session's
        // workers spin and take the cores the others need: measured, two threads on such a pool
        // predicted 0.7x the rate of two one-thread sessions).
        let split = pool_size > 1 && cores > 1 && options.session.intra_threads.is_none();
        let mut others = options.session.clone();
        if split {
            others.intra_threads = Some(1);
        }
        let (session, device) = session::build(
            &weights,
            path,
            &options.session,
            "predictor",
            session::Idle::Spin,
        )?;
        let spec = export::detect_decoder(&session, path)?;
        let names = spec.embedding_inputs();
        let input_shape =
            |name: &str| export::tensor_info(session.inputs(), name).map(|(_, shape)| shape);
        let feature_shapes = names.map(|name| input_shape(name).unwrap_or_default());
        // The model is recognised; the rest of the pool shares its weights and is built when
        // first needed. The device was resolved (and any fallback reported) by the first session.
        let mut pool_options = others;
        if device.fell_back {
            pool_options.device = crate::device::DeviceOptions::default();
        }
        let mut sessions = vec![Mutex::new(Some(session))];
        sessions.extend((0..pool_size - usize::from(!split)).map(|_| Mutex::new(None)));
        Ok(Predictor {
            sessions,
            pool_options,
            pool_full: AtomicBool::new(false),
            lone_session: split,
            in_flight: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            weights,
            device,
            allow_embedding_copy: options.allow_embedding_copy,
            spec,
            path: path.to_path_buf(),
            expected: options.encoder_fingerprint,
            host_memory: device::host_memory()?,
            feature_shapes,
        })
    }

    /// Fingerprint of the encoder whose embeddings this predictor accepts, if it was told.
    pub fn expected_fingerprint(&self) -> Option<Fingerprint> {
        self.expected
    }

    /// Places a host embedding on this predictor's execution device (one copy, made now, so
    /// predicts read it in place). A CPU predictor's device is the host: the embedding is
    /// returned as it is.
    pub fn place_on_device(&self, embedding: Embedding) -> Result<Embedding> {
        match self.device.primary.allocation_device() {
            Some(device) => embedding.copy_to(device, self.device.device_id),
            None => Ok(embedding),
        }
    }

    /// Statistics of the CPU allocator the predictor's sessions use: the arena shared by every
    /// session of the process (see `runtime`), or the session's own. `TotalAllocated` is what
    /// the arena holds from the system.
    pub fn arena_stats(&self) -> Vec<(String, String)> {
        let session = self.session();
        let Ok(info) = MemoryInfo::new(
            ort::memory::AllocationDevice::CPU,
            0,
            ort::memory::AllocatorType::Arena,
            ort::memory::MemoryType::Default,
        ) else {
            return Vec::new();
        };
        match ort::memory::Allocator::new(&session, info) {
            Ok(allocator) => crate::ort_raw::allocator_stats(&allocator),
            Err(_) => Vec::new(),
        }
    }

    /// Number of predicts the pool runs at once (its one-thread sessions; the session on every
    /// core that serves a lone predict is not counted).
    pub fn pool_size(&self) -> usize {
        self.sessions.len() - usize::from(self.lone_session)
    }

    /// Which attention subgraphs were fused when the model was loaded.
    pub fn attention_fusion(&self) -> &crate::rewrite::RewriteReport {
        &self.weights.attention
    }

    /// Bytes of weights this model holds outside ONNX Runtime's sessions (shared or copied).
    pub fn weight_bytes(&self) -> usize {
        self.weights.weight_bytes
    }

    /// Address of the first shared weight's data: equal for every session sharing one copy.
    pub fn weights_address(&self) -> Option<usize> {
        weights::weights_address(&self.weights)
    }

    /// What the predictor's session effectively runs on.
    pub fn device(&self) -> &EffectiveDevice {
        &self.device
    }

    pub fn spec(&self) -> &DecoderSpec {
        &self.spec
    }

    /// The export the decoder comes from.
    pub fn export(&self) -> DecoderExport {
        self.spec.export
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Refuses an encoder whose embeddings this decoder cannot take (another export family),
    /// so a mismatched pair fails when it is put together rather than at the first predict.
    pub fn check_encoder(&self, encoder: &crate::Encoder) -> Result<()> {
        let made = encoder.spec().family;
        if self.spec.export == DecoderExport::Sam3Clicks
            && made == self.spec.family
            && !encoder.spec().click_features
        {
            return Err(Error::ModelMismatch(format!(
                "encoder {} is SAM 3's without the click features ({}) decoder {} reads; export \
                 the image encoder with its click head (sam2-export-sam3 --interactive)",
                encoder.path().display(),
                self.spec.embedding_inputs().join(", "),
                self.path.display()
            )));
        }
        if made != self.spec.family {
            return Err(Error::ModelMismatch(format!(
                "encoder {} is a {} export, but decoder {} ({} export) takes embeddings of {} \
                 encoders ({}); pair it with the encoder of the same export",
                encoder.path().display(),
                made.name(),
                self.path.display(),
                self.spec.export.name(),
                self.spec.family.name(),
                self.spec.family.tensor_names().join(", ")
            )));
        }
        Ok(())
    }

    /// Refuses an embedding this decoder cannot use, before ONNX Runtime sees it.
    pub fn check_embedding(&self, embedding: &Embedding) -> Result<()> {
        if let Some(expected) = self.expected {
            if embedding.fingerprint() != expected {
                return Err(Error::ModelMismatch(format!(
                    "the embedding was made by encoder {} ({}), but this predictor expects encoder {expected}",
                    embedding.fingerprint(),
                    embedding.precision()
                )));
            }
        }
        if embedding.family() != self.spec.family {
            return Err(Error::ModelMismatch(format!(
                "the embedding comes from an encoder of the {} family, but this decoder ({} export) takes embeddings of the {} family",
                embedding.family().name(),
                self.spec.export.name(),
                self.spec.family.name()
            )));
        }
        for (want, name) in self.feature_shapes.iter().zip(self.spec.embedding_inputs()) {
            let Some(tensor) = embedding.tensor(name) else {
                return Err(Error::ModelMismatch(format!(
                    "the embedding has no `{name}` tensor: a SAM 3 embedding serves clicks only \
                     when its image encoder was exported with the click head (sam2-export-sam3 \
                     --interactive)"
                )));
            };
            let fits = want.len() == tensor.shape().len()
                && want
                    .iter()
                    .zip(tensor.shape())
                    .all(|(&w, &g)| w < 0 || w == g);
            if !fits {
                return Err(Error::ModelMismatch(format!(
                    "embedding tensor `{name}` has shape {:?}, the decoder takes {want:?}",
                    tensor.shape()
                )));
            }
        }
        Ok(())
    }

    /// Whether the predictor's session can read the embedding where it lies: host memory always
    /// (ONNX Runtime copies it to a GPU session's device), device memory only on this session's
    /// own device. Anything else is refused before ONNX Runtime sees it, unless copies are allowed.
    fn needs_host_copy(&self, embedding: &Embedding) -> Result<bool> {
        for name in self.spec.embedding_inputs() {
            let Some(tensor) = embedding.tensor(name) else {
                continue;
            };
            let loc = tensor.location();
            if loc.cpu_accessible {
                continue;
            }
            let same_device = loc.allocator == self.device.allocator_name()
                && loc.device_id == self.device.device_id;
            if same_device {
                continue;
            }
            if self.allow_embedding_copy {
                return Ok(true);
            }
            return Err(Error::invalid(
                "embedding",
                format!(
                    "its tensor `{name}` lives in `{}` memory (device {}), but this predictor runs on {} \
                     (`{}` memory); copy it with sam2_embedding_to_host, create the predictor on that device, \
                     or allow embedding copies in the predictor options",
                    loc.allocator,
                    loc.device_id,
                    self.device.primary.ort_name(),
                    self.device.allocator_name()
                ),
            ));
        }
        Ok(false)
    }

    /// Runs the decoder for a batch of independent prompts (one object each) on one embedding.
    pub fn predict(
        &self,
        embedding: &Embedding,
        prompts: &[Prompt],
        options: PredictOptions,
    ) -> Result<Prediction> {
        self.predict_with(embedding, prompts, options, true)
    }

    /// `predict` without the full-size masks (`masks`, `boxes` and `areas` stay empty): scores
    /// and low-res logits only, for callers that make their own masks from the logits (segment
    /// everything, which must not hold hundreds of full-size masks at once).
    pub(crate) fn predict_low_res(
        &self,
        embedding: &Embedding,
        prompts: &[Prompt],
        options: PredictOptions,
    ) -> Result<Prediction> {
        self.predict_with(embedding, prompts, options, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_size_is_bounded() {
        let options = |n: Option<usize>| PredictorOptions {
            pool_size: n,
            ..Default::default()
        };
        for ok in [None, Some(1), Some(MAX_POOL)] {
            assert!(options(ok).validate().is_ok(), "{ok:?}");
        }
        for bad in [0, MAX_POOL + 1, u32::MAX as usize] {
            let e = options(Some(bad)).validate().unwrap_err().to_string();
            assert!(
                e.contains("`pool_size`") && e.contains(&format!("got {bad}")),
                "{e}"
            );
        }
    }

    #[test]
    fn the_session_part_is_checked() {
        let mut options = PredictorOptions::default();
        options.session.intra_threads = Some(crate::session::MAX_INTRA_THREADS + 1);
        let e = options.validate().unwrap_err().to_string();
        assert!(e.contains("`intra_threads`"), "{e}");
        // The constructor refuses it before it reads the model.
        let e = Predictor::new("/nonexistent/decoder.onnx", &options).unwrap_err();
        assert!(e.to_string().contains("`intra_threads`"), "{e}");
    }
}
