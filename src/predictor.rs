//! The prompt decoder: an [`Embedding`] and clicks → masks, run on every click.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ort::memory::MemoryInfo;
use ort::session::Session;
use ort::value::Tensor;

use crate::device::{self, EffectiveDevice};
use crate::embedding::Embedding;
use crate::error::{Error, Result};
use crate::export::{self, Batch, Decoded, DecoderExport, DecoderSpec};
use crate::fingerprint::Fingerprint;
use crate::postprocess;
use crate::session::{self, SessionOptions};
use crate::weights::{self, ModelWeights};

/// A click. Coordinates are in original image pixels (x right, y down).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f32,
    pub y: f32,
    /// true: include what is under the point; false: exclude it.
    pub positive: bool,
}

/// The prompt for one object.
#[derive(Debug, Clone, Default)]
pub struct Prompt {
    pub points: Vec<Point>,
    /// `[x1, y1, x2, y2]` in original image pixels.
    pub bbox: Option<[f32; 4]>,
    /// Low-res logits of an earlier prediction (`low_res_size²` values), for refinement.
    pub mask_input: Option<Vec<f32>>,
}

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
    /// `session.intra_threads` is set).
    pub pool_size: Option<usize>,
    /// Accept an embedding held on another device by copying it to the host for each predict.
    /// Off by default: such an embedding is refused with a clear error instead.
    pub allow_embedding_copy: bool,
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
    /// so concurrent predicts use different sessions.
    sessions: Vec<Mutex<Session>>,
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

/// Largest number of objects in one call and points per object: far beyond any UI, and a bound
/// that keeps the prompt tensors small.
pub(crate) const MAX_OBJECTS: usize = 256;
pub(crate) const MAX_POINTS: usize = 1024;
/// Largest result of one predict: `objects × candidates × width × height` mask bytes (multimask
/// counted as 3 candidates). A larger request is refused before anything runs; predict fewer
/// prompts per call instead.
pub(crate) const MAX_RESULT_BYTES: usize = 4 << 30;
/// Largest predictor pool.
pub(crate) const MAX_POOL: usize = 64;

impl Predictor {
    pub fn new(path: impl AsRef<Path>, options: &PredictorOptions) -> Result<Self> {
        let path = path.as_ref();
        let weights = weights::get(
            path,
            options.session.weights,
            weights::Plan::new(options.session.optimization, &options.session.device),
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
        let (session, device) = session::build(&weights, path, &options.session, "predictor")?;
        let spec = export::detect_decoder(&session, path)?;
        let names = spec.family.tensor_names();
        let input_shape =
            |name: &str| export::tensor_info(session.inputs(), name).map(|(_, shape)| shape);
        let feature_shapes = names.map(|name| input_shape(name).unwrap_or_default());
        // The model is recognised; the rest of the pool shares its weights.
        let mut sessions = vec![Mutex::new(session)];
        for _ in 0..pool_size - usize::from(!split) {
            // The device was resolved (and any fallback reported) by the first session.
            let mut quiet = others.clone();
            if device.fell_back {
                quiet.device = crate::device::DeviceOptions::default();
            }
            sessions.push(Mutex::new(
                session::build(&weights, path, &quiet, "predictor")?.0,
            ));
        }
        Ok(Predictor {
            sessions,
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

    /// A session for one predict: the one on every core when no other predict runs, else a free
    /// one-thread session (any free one when all of those are busy), else, all busy, the next
    /// one in turn. The caller holds the returned guard for the whole run.
    fn session(&self) -> PoolGuard<'_> {
        let running = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let counted = InFlight(&self.in_flight);
        // Alone: from the session on every core; beside others: from the one-thread sessions,
        // that one last.
        let first = usize::from(self.lone_session && running > 0);
        for i in (first..self.sessions.len()).chain(0..first) {
            if let Ok(guard) = self.sessions[i].try_lock() {
                return PoolGuard {
                    session: guard,
                    _counted: counted,
                };
            }
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.sessions.len();
        PoolGuard {
            session: self.sessions[start % n]
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
            _counted: counted,
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
    pub fn attention_fusion(&self) -> &crate::AttentionFusion {
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
                    "the embedding was made by encoder {}, but this predictor expects encoder {expected}",
                    embedding.fingerprint()
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
        for ((tensor, want), name) in embedding
            .tensors()
            .iter()
            .zip(self.feature_shapes.iter())
            .zip(self.spec.family.tensor_names())
        {
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
        for (tensor, name) in embedding
            .tensors()
            .iter()
            .zip(self.spec.family.tensor_names())
        {
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

    fn predict_with(
        &self,
        embedding: &Embedding,
        prompts: &[Prompt],
        options: PredictOptions,
        with_masks: bool,
    ) -> Result<Prediction> {
        self.check_embedding(embedding)?;
        validate_prompts(prompts, embedding.image_size(), self.spec.low_res_size)?;
        let (w, h) = embedding.image_size();
        let candidates = if options.multimask { 3 } else { 1 };
        let result = (w as usize)
            .saturating_mul(with_masks as usize)
            .saturating_mul(h as usize)
            .saturating_mul(prompts.len())
            .saturating_mul(candidates);
        if result > MAX_RESULT_BYTES {
            return Err(Error::invalid(
                "prompts",
                format!(
                    "{} prompt{} × {candidates} mask{} of {w}×{h} would take {:.1} GiB, more than \
                     the {} GiB one predict may return; predict fewer prompts per call",
                    prompts.len(),
                    if prompts.len() == 1 { "" } else { "s" },
                    if candidates == 1 { "" } else { "s" },
                    result as f64 / (1u64 << 30) as f64,
                    MAX_RESULT_BYTES >> 30
                ),
            ));
        }
        let copied;
        let embedding = if self.needs_host_copy(embedding)? {
            copied = embedding.copy_to_host()?;
            &copied
        } else {
            embedding
        };
        if embedding.is_simulated() {
            return Err(Error::invalid(
                "embedding",
                format!(
                    "it only simulates `{}` memory (test support) and is never run",
                    embedding.allocator_name()
                ),
            ));
        }
        let (img_w, img_h) = embedding.image_size();
        let (img_w, img_h) = (img_w as usize, img_h as usize);
        let objects = prompts.len();
        let lr = self.spec.low_res_size;
        let plane = img_w * img_h;

        // Prompts run in batches of the same shape, so that a batch gives exactly what single
        // calls give:
        // - the same number of points: a shorter prompt would be padded with "not a point"
        //   tokens, which the decoder's attention sees (SAM2 itself pads that way, and its
        //   batched masks differ from single ones: IoU 0.84 on a real export);
        // - all with or all without a mask input: real SAM2 decoders multiply `has_mask_input`
        //   against a [L, 256, 64, 64] tensor, where a flag of length L lines up with the last
        //   axis, so only a flag of length 1 broadcasts.
        let mut batches: Vec<((bool, usize), Vec<usize>)> = Vec::new();
        for (l, p) in prompts.iter().enumerate() {
            let key = (
                p.mask_input.is_some(),
                p.points.len() + 2 * p.bbox.is_some() as usize,
            );
            match batches.iter_mut().find(|(k, _)| *k == key) {
                Some((_, members)) => members.push(l),
                None => batches.push((key, vec![l])),
            }
        }
        let mut out: Option<Outputs> = None;
        for ((has_mask, _), members) in &batches {
            let flag = if *has_mask { 1.0 } else { 0.0 };
            self.run_batch(
                embedding,
                prompts,
                members,
                flag,
                Wanted {
                    options,
                    masks: with_masks,
                },
                &mut out,
            )?;
        }
        let Outputs {
            candidates,
            masks,
            scores,
            low_res,
            candidate_index,
            ..
        } = out.ok_or_else(|| Error::invalid("prompts", "at least one prompt is needed"))?;

        let (boxes, areas) = masks
            .chunks(plane)
            .map(|m| postprocess::box_and_area(m, img_w))
            .unzip();
        Ok(Prediction {
            width: img_w,
            height: img_h,
            objects,
            candidates,
            masks,
            scores,
            boxes,
            areas,
            low_res,
            low_res_size: lr,
            candidate_index,
        })
    }
}

/// Counts a predict as running until dropped.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A session of the pool, held for one predict.
struct PoolGuard<'a> {
    session: std::sync::MutexGuard<'a, Session>,
    _counted: InFlight<'a>,
}

impl std::ops::Deref for PoolGuard<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

impl std::ops::DerefMut for PoolGuard<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}

/// What a batch run returns: the candidates the options ask for, with or without full-size masks.
#[derive(Clone, Copy)]
struct Wanted {
    options: PredictOptions,
    masks: bool,
}

/// The assembled results of a predict, filled batch by batch in the prompts' order.
struct Outputs {
    /// Candidates the model returns per prompt.
    model_candidates: usize,
    /// Masks returned per prompt (all candidates, or the best one).
    candidates: usize,
    masks: Vec<u8>,
    scores: Vec<f32>,
    low_res: Vec<f32>,
    candidate_index: Vec<u32>,
}

impl Predictor {
    /// Runs the decoder once for the prompts at `indices` (all of one shape: see `predict`) and
    /// writes each one's results at its place in `out` (allocated by the first batch).
    fn run_batch(
        &self,
        embedding: &Embedding,
        prompts: &[Prompt],
        indices: &[usize],
        has_mask: f32,
        wanted: Wanted,
        out: &mut Option<Outputs>,
    ) -> Result<()> {
        let Wanted {
            options,
            masks: with_masks,
        } = wanted;
        let (img_w, img_h) = embedding.image_size();
        let (img_w, img_h) = (img_w as usize, img_h as usize);
        let plane = img_w * img_h;
        let lr = self.spec.low_res_size;
        let batch: Vec<&Prompt> = indices.iter().map(|&l| &prompts[l]).collect();
        let objects = batch.len();
        let (n, coords, labels) = prompt_points(&batch, (img_w as u32, img_h as u32));
        let mut mask_input = vec![0.0f32; objects * lr * lr];
        for (l, p) in batch.iter().enumerate() {
            if let Some(m) = &p.mask_input {
                mask_input[l * lr * lr..(l + 1) * lr * lr].copy_from_slice(m);
            }
        }

        let io = self.spec.names();
        let coords = Tensor::from_array(([objects, n, 2], coords))?;
        let labels_value = if io.labels_int32 {
            Tensor::from_array((
                [objects, n],
                labels.iter().map(|&v| v as i32).collect::<Vec<i32>>(),
            ))?
            .into_dyn()
        } else {
            Tensor::from_array(([objects, n], labels))?.into_dyn()
        };
        let mask_input = Tensor::from_array(([objects, 1, lr, lr], mask_input))?;
        let has_mask = Tensor::from_array(([1usize], vec![has_mask]))?;
        let orig_size = Tensor::from_array(([2usize], vec![img_h as i32, img_w as i32]))?;

        let names = self.spec.family.tensor_names();
        let mut session = self.session();
        let mut binding = session.create_binding()?;
        for (name, tensor) in names.iter().zip(embedding.tensors()) {
            // Session outputs are bound in place (no copy): the embedding is read where it lies.
            binding.bind_input(*name, &tensor.value)?;
        }
        binding.bind_input(io.point_coords, &coords)?;
        binding.bind_input(io.point_labels, &labels_value)?;
        binding.bind_input(io.mask_input, &mask_input)?;
        binding.bind_input(io.has_mask_input, &has_mask)?;
        if let Some(name) = io.orig_size {
            binding.bind_input(name, &orig_size)?;
        }
        binding.bind_output_to_device(io.masks, &self.host_memory)?;
        binding.bind_output_to_device(io.iou, &self.host_memory)?;
        if let Some(name) = io.low_res {
            binding.bind_output_to_device(name, &self.host_memory)?;
        }
        let outputs = session.run_binding(&binding)?;

        let (iou_shape, iou) = outputs[io.iou].try_extract_tensor::<f32>()?;
        let model_candidates = *iou_shape.last().unwrap_or(&0) as usize;
        if iou_shape.len() != 2 || iou_shape[0] as usize != objects || model_candidates == 0 {
            return Err(Error::OnnxRuntime(format!(
                "decoder returned iou_predictions of shape {iou_shape:?}, expected [{objects}, M]"
            )));
        }
        if out.is_none() {
            let candidates = if options.multimask {
                model_candidates
            } else {
                1
            };
            let total = prompts.len() * candidates;
            // Within MAX_RESULT_BYTES (checked before running), and still refused cleanly when the
            // memory is not there: an abort would take the host process down.
            *out = Some(Outputs {
                model_candidates,
                candidates,
                masks: crate::error::try_zeroed(
                    total * plane * with_masks as usize,
                    "the masks of the prediction",
                )?,
                scores: crate::error::try_zeroed(total, "the scores of the prediction")?,
                low_res: crate::error::try_zeroed(total * lr * lr, "the low-res logits")?,
                candidate_index: crate::error::try_zeroed(total, "the candidate indices")?,
            });
        }
        let out = out.as_mut().expect("allocated above");
        if out.model_candidates != model_candidates {
            return Err(Error::OnnxRuntime(format!(
                "decoder returned {model_candidates} candidates for one batch and {} for another",
                out.model_candidates
            )));
        }
        // Which candidates of each prompt of the batch are returned, and where they go.
        let mut picks: Vec<(usize, usize, usize)> = Vec::new(); // (row in batch, candidate, slot)
        for (l, &object) in indices.iter().enumerate() {
            let row = &iou[l * model_candidates..(l + 1) * model_candidates];
            let chosen: Vec<usize> = if options.multimask {
                (0..model_candidates).collect()
            } else {
                let best = row
                    .iter()
                    .enumerate()
                    .fold(
                        (0, f32::NEG_INFINITY),
                        |acc, (i, &v)| if v > acc.1 { (i, v) } else { acc },
                    )
                    .0;
                vec![best]
            };
            for (j, &k) in chosen.iter().enumerate() {
                let slot = object * out.candidates + j;
                out.scores[slot] = row[k];
                out.candidate_index[slot] = k as u32;
                picks.push((l, k, slot));
            }
        }

        let batch = Batch {
            objects,
            candidates: model_candidates,
            low_res: lr,
            image_width: img_w,
            image_height: img_h,
            picks,
        };
        let mut decoded = Decoded {
            masks: &mut out.masks,
            low_res: &mut out.low_res,
        };
        self.spec.export.decode(&outputs, &batch, &mut decoded)?;
        Ok(())
    }
}

/// Checks prompts against the image they are for (`image_size`, in pixels) and the model's
/// low-res mask side: counts, finite coordinates inside the image, boxes, mask inputs. Pure, so
/// it is fuzzed without a model (`fuzz/`).
pub fn validate_prompts(
    prompts: &[Prompt],
    image_size: (u32, u32),
    low_res_size: usize,
) -> Result<()> {
    if prompts.is_empty() {
        return Err(Error::invalid("prompts", "at least one prompt is needed"));
    }
    if prompts.len() > MAX_OBJECTS {
        return Err(Error::invalid(
            "prompts",
            format!(
                "at most {MAX_OBJECTS} objects per call, got {}",
                prompts.len()
            ),
        ));
    }
    let (w, h) = image_size;
    let (w, h) = (w as f32, h as f32);
    let mask_len = low_res_size * low_res_size;
    for (i, prompt) in prompts.iter().enumerate() {
        // Reasons name the prompt (and point) by index, for hosts that send a batch.
        let at = |what: String| format!("prompt {i}: {what}");
        if prompt.points.is_empty() && prompt.bbox.is_none() {
            return Err(Error::invalid(
                "prompt",
                at("is empty: give at least one point or a box".into()),
            ));
        }
        if prompt.points.len() > MAX_POINTS {
            return Err(Error::invalid(
                "points",
                format!(
                    "at most {MAX_POINTS} points per object, got {}",
                    prompt.points.len()
                ),
            ));
        }
        for (j, p) in prompt.points.iter().enumerate() {
            if !p.x.is_finite() || !p.y.is_finite() {
                return Err(Error::invalid(
                    "points",
                    at(format!(
                        "point {j}: coordinates must be finite, got ({}, {})",
                        p.x, p.y
                    )),
                ));
            }
            if p.x < 0.0 || p.y < 0.0 || p.x > w || p.y > h {
                return Err(Error::invalid(
                    "points",
                    at(format!(
                        "point {j}: ({}, {}) lies outside the {w}×{h} image",
                        p.x, p.y
                    )),
                ));
            }
        }
        if let Some([x1, y1, x2, y2]) = prompt.bbox {
            if ![x1, y1, x2, y2].iter().all(|v| v.is_finite()) {
                return Err(Error::invalid(
                    "box",
                    at(format!(
                        "coordinates must be finite, got [{x1}, {y1}, {x2}, {y2}]"
                    )),
                ));
            }
            if x2 < x1 || y2 < y1 {
                return Err(Error::invalid(
                    "box",
                    at(format!("[{x1}, {y1}, {x2}, {y2}] has x2 < x1 or y2 < y1")),
                ));
            }
            if x1 < 0.0 || y1 < 0.0 || x2 > w || y2 > h {
                return Err(Error::invalid(
                    "box",
                    at(format!(
                        "[{x1}, {y1}, {x2}, {y2}] reaches outside the {w}×{h} image"
                    )),
                ));
            }
        }
        if let Some(mask) = &prompt.mask_input {
            if mask.len() != mask_len {
                return Err(Error::invalid(
                    "mask_input",
                    format!(
                        "must hold {mask_len} values ({0}×{0}), got {1}",
                        low_res_size,
                        mask.len()
                    ),
                ));
            }
            if mask.iter().any(|v| !v.is_finite()) {
                return Err(Error::invalid(
                    "mask_input",
                    "contains NaN or infinite values",
                ));
            }
        }
    }
    Ok(())
}

/// The point tensors of a batch of (validated) prompts: `(n, coords [objects × n × 2],
/// labels [objects × n])`. The box first, as two points labelled 2 and 3 (where SAM2 and its
/// exporters put it), then the clicks (1 positive, 0 negative); coordinates in the 1024 frame.
/// No padding point is appended: SAM2 exports add it inside the graph. Shorter rows of a batch
/// are padded with label −1. Pure, so it is fuzzed with `validate_prompts`.
pub fn prompt_points(prompts: &[&Prompt], image_size: (u32, u32)) -> (usize, Vec<f32>, Vec<f32>) {
    let size = 1024.0f32;
    let (fw, fh) = (image_size.0 as f32, image_size.1 as f32);
    let per_object: Vec<Vec<(f32, f32, f32)>> = prompts
        .iter()
        .map(|p| {
            let mut v: Vec<(f32, f32, f32)> = Vec::with_capacity(p.points.len() + 2);
            if let Some([x1, y1, x2, y2]) = p.bbox {
                v.push((x1 / fw * size, y1 / fh * size, 2.0));
                v.push((x2 / fw * size, y2 / fh * size, 3.0));
            }
            v.extend(p.points.iter().map(|pt| {
                (
                    pt.x / fw * size,
                    pt.y / fh * size,
                    if pt.positive { 1.0 } else { 0.0 },
                )
            }));
            v
        })
        .collect();
    let objects = prompts.len();
    let n = per_object.iter().map(Vec::len).max().unwrap_or(1);
    let mut coords = vec![0.0f32; objects * n * 2];
    let mut labels = vec![-1.0f32; objects * n];
    for (l, pts) in per_object.iter().enumerate() {
        for (i, &(x, y, label)) in pts.iter().enumerate() {
            coords[(l * n + i) * 2] = x;
            coords[(l * n + i) * 2 + 1] = y;
            labels[l * n + i] = label;
        }
    }
    (n, coords, labels)
}
