//! Video tracking with SAM2's memory: objects prompted on some frames are followed through the
//! others by the four modules of the video contract (docs/video.md).
//!
//! A [`Tracker`] mirrors SAM2's video predictor object by object: a prompt on a frame never
//! tracked makes it an initial conditioning frame (decoded from the frame's own features); a
//! prompt on a tracked frame is a correction (decoded with the memory and the frame's previous
//! logits, and by default kept as a conditioning frame); tracking a frame runs memory attention
//! over the object's conditioning frames, the six frames before it in the direction of travel
//! and up to sixteen object pointers ([`bank`]), decodes, and encodes the result into a new
//! memory. Memories and pointers stay in the memory the sessions run on (device memory on a GPU
//! session); only each frame's mask logits and presence score come to the host.

mod bank;
mod modules;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use ort::memory::MemoryInfo;
use ort::value::{DynValue, Tensor, TensorElementType, ValueType};

use crate::device::{self, EffectiveDevice};
use crate::error::{Error, Result};
use crate::image::ImageView;
use crate::predictor::{prompt_points, validate_prompts, Prompt};
use crate::session::SessionOptions;
use crate::{postprocess, preprocess};

use modules::names::*;
use modules::Modules;
pub use modules::{describe_video_module, VideoModelPaths};

/// Side of the model frame and of the low-res logits (SAM2's, for every size of model).
const MODEL_SIDE: usize = 1024;
const LOW_RES: usize = 256;
/// What SAM2 clamps previous logits to before feeding them back as a mask prompt.
const PREV_LOGIT_CLAMP: f32 = 32.0;
/// SAM2's `NO_OBJ_SCORE`: the logit of every pixel of an object judged absent.
const NO_OBJECT_LOGIT: f32 = -1024.0;

/// Options of a tracker.
#[derive(Debug, Clone)]
pub struct TrackerOptions {
    pub session: SessionOptions,
    /// A prompt on a frame already tracked (a correction) makes it a conditioning frame, so the
    /// frames after it remember the correction (SAM2's `add_all_frames_to_correct_as_cond`).
    /// Without it the correction changes that frame only. Default: true.
    pub corrections_as_conditioning: bool,
    /// Number of frames of the clip, when known (SAM2's `num_frames`: it bounds how far object
    /// pointers reach); `None` for a stream.
    pub num_frames: Option<u32>,
    /// Tracked frames whose memory each object keeps besides its conditioning frames: at least
    /// the six a frame attends to; more lets a host go back over recent frames. Default 16.
    pub memory_frames: usize,
}

impl Default for TrackerOptions {
    fn default() -> Self {
        TrackerOptions {
            session: SessionOptions::default(),
            corrections_as_conditioning: true,
            num_frames: None,
            memory_frames: 16,
        }
    }
}

/// Direction of travel through the clip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    #[default]
    Forward,
    Backward,
}

/// One object's result on one frame.
#[derive(Debug, Clone)]
pub struct TrackedObject {
    pub object_id: u32,
    /// SAM2's object score: the object is present on the frame when it is above 0.
    pub score: f32,
    pub present: bool,
    /// Binary mask at the frame's size, row-major (1 = object); all 0 when absent.
    pub mask: Vec<u8>,
    /// The decoder's low-res logits (256 × 256).
    pub low_res: Vec<f32>,
}

/// Every object's result on one frame.
#[derive(Debug, Clone)]
pub struct TrackedFrame {
    pub frame: u32,
    pub width: usize,
    pub height: usize,
    pub objects: Vec<TrackedObject>,
}

/// The encoder's outputs for one frame.
struct Features {
    frame: u32,
    /// [`crate::pixel_hash`] of the picture (its size and format included).
    pixels: u128,
    width: usize,
    height: usize,
    pix_feat: DynValue,
    high_res_0: DynValue,
    high_res_1: DynValue,
    vision_feats: DynValue,
    vision_pos: DynValue,
}

/// One object's output on one frame, and its memory.
struct Output {
    low_res: Vec<f32>,
    score: f32,
    pointer: DynValue,
    /// `maskmem_features` (1 MiB for SAM2); `None` once a tracked frame is too far to be
    /// attended to (pointers reach further than memories).
    memory: Option<DynValue>,
}

#[derive(Default)]
struct ObjectState {
    conditioning: BTreeMap<i64, Output>,
    tracked: BTreeMap<i64, Output>,
    /// Prompted frames since the last track (SAM2's temporary outputs), their memory encoded
    /// with the prompt, and whether each becomes a conditioning frame.
    prompted: BTreeMap<i64, (bool, Output)>,
    /// Frames tracked so far, and in which direction (SAM2's `frames_tracked_per_obj`).
    directions: BTreeMap<i64, bool>,
}

#[derive(Default)]
struct State {
    /// The last frame encoded: prompts for several objects on one picture encode it once.
    frame: Option<Arc<Features>>,
    objects: BTreeMap<u32, ObjectState>,
    /// `maskmem_pos_enc` ([4096 × 64]): a sine encoding of the memory map's positions, the same
    /// for every frame, read once.
    memory_pos: Option<Vec<f32>>,
    /// `temporal_code` ([num_maskmem × 64]), read once.
    temporal_code: Option<Vec<f32>>,
}

/// Tracks objects through the frames of a clip. Calls are serialised on the tracker.
pub struct Tracker {
    modules: Modules,
    options: TrackerOptions,
    /// Where module outputs kept between runs live: the execution device's memory.
    device_memory: MemoryInfo<'static>,
    host_memory: MemoryInfo<'static>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("modules", &self.modules)
            .field("options", &self.options)
            .finish()
    }
}

impl Tracker {
    /// Loads the four modules.
    pub fn new(paths: &VideoModelPaths, options: &TrackerOptions) -> Result<Tracker> {
        if options.num_frames == Some(0) {
            return Err(Error::invalid(
                "num_frames",
                "a clip has at least one frame",
            ));
        }
        if options.memory_frames < 6 || options.memory_frames > 1024 {
            return Err(Error::invalid(
                "memory_frames",
                format!(
                    "must be 6 to 1024 (a frame attends to the six before it), got {}",
                    options.memory_frames
                ),
            ));
        }
        let modules = Modules::load(paths, &options.session)?;
        let device_memory = modules.device.output_memory()?;
        Ok(Tracker {
            modules,
            options: options.clone(),
            device_memory,
            host_memory: device::host_memory()?,
            state: Mutex::new(State::default()),
        })
    }

    /// What the modules effectively run on.
    pub fn device(&self) -> &EffectiveDevice {
        &self.modules.device
    }

    /// Which attention subgraphs of each module were fused when it was loaded, by role.
    pub fn attention_fusion(&self) -> Vec<(&'static str, crate::AttentionFusion)> {
        self.modules.attention_fusion()
    }

    /// Objects being tracked, in increasing id order.
    pub fn objects(&self) -> Vec<u32> {
        self.lock().objects.keys().copied().collect()
    }

    /// Frame memories held (prompted, conditioning and tracked frames), summed over objects.
    /// A frame that held a memory and is prompted again (a correction) holds the new one beside
    /// the old one until the next track, and counts twice until then.
    pub fn memory_frames(&self) -> usize {
        self.lock()
            .objects
            .values()
            .map(|o| {
                o.prompted.len()
                    + o.conditioning.len()
                    + o.tracked.values().filter(|t| t.memory.is_some()).count()
            })
            .sum()
    }

    /// Bytes of the tensors the tracker holds (memories, pointers, logits, the features of
    /// frames kept for later, the last frame's features), in the sessions' memory and on the
    /// host; the modules' own memory (weights, arenas) is not included.
    pub fn memory_bytes(&self) -> usize {
        let state = self.lock();
        let mut total = state.frame.as_ref().map_or(0, |f| {
            [
                &f.pix_feat,
                &f.high_res_0,
                &f.high_res_1,
                &f.vision_feats,
                &f.vision_pos,
            ]
            .into_iter()
            .map(value_bytes)
            .sum()
        });
        let floats = |v: &Option<Vec<f32>>| v.as_ref().map_or(0, |v| v.len() * 4);
        total += floats(&state.memory_pos) + floats(&state.temporal_code);
        for object in state.objects.values() {
            let outputs = object
                .conditioning
                .values()
                .chain(object.tracked.values())
                .chain(object.prompted.values().map(|(_, o)| o));
            for o in outputs {
                total += o.low_res.len() * 4
                    + value_bytes(&o.pointer)
                    + o.memory.as_ref().map_or(0, value_bytes);
            }
        }
        total
    }

    /// The object pointer SAM2 keeps for `object_id` on frame `frame` (256 values), copied to the
    /// host; `None` when the tracker holds none (never tracked or prompted there, or forgotten).
    /// For inspection: tracking never reads pointers back.
    pub fn object_pointer(&self, object_id: u32, frame: u32) -> Result<Option<Vec<f32>>> {
        let state = self.lock();
        let Some(object) = state.objects.get(&object_id) else {
            return Ok(None);
        };
        let t = frame as i64;
        let output = object
            .prompted
            .get(&t)
            .map(|(_, o)| o)
            .or_else(|| object.conditioning.get(&t))
            .or_else(|| object.tracked.get(&t));
        output.map(|o| to_host(&o.pointer)).transpose()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Prompts object `object_id` on frame `frame` (points and/or a box, in the frame's
    /// pixels; they replace earlier prompts of the object on that frame) and returns its mask
    /// there. A new id starts a new object.
    pub fn add_prompt(
        &self,
        frame: u32,
        image: &ImageView<'_>,
        object_id: u32,
        prompt: &Prompt,
    ) -> Result<TrackedObject> {
        self.check_frame(frame)?;
        if prompt.mask_input.is_some() {
            return Err(Error::invalid(
                "prompt",
                "a tracker takes points and boxes; mask prompts are not supported",
            ));
        }
        validate_prompts(
            std::slice::from_ref(prompt),
            (image.width as u32, image.height as u32),
            LOW_RES,
        )?;
        let mut state = self.lock();
        let features = self.features(&mut state, frame, image)?;
        let t = frame as i64;
        // The object is created only once its prompt has been decoded: a failed call leaves
        // nothing behind.
        let empty = ObjectState::default();
        let object = state.objects.get(&object_id).unwrap_or(&empty);
        let initial = !object.directions.contains_key(&t);
        let reverse = object.directions.get(&t).copied().unwrap_or(false);
        let conditioning = initial || self.options.corrections_as_conditioning;
        // Previous logits of the object on this frame, fed back with the new clicks.
        let previous = object
            .prompted
            .get(&t)
            .map(|(_, o)| &o.low_res)
            .or_else(|| object.conditioning.get(&t).map(|o| &o.low_res))
            .or_else(|| object.tracked.get(&t).map(|o| &o.low_res))
            .map(|l| {
                l.iter()
                    .map(|v| v.clamp(-PREV_LOGIT_CLAMP, PREV_LOGIT_CLAMP))
                    .collect::<Vec<f32>>()
            });
        let (n, coords, labels) =
            prompt_points(&[prompt], (image.width as u32, image.height as u32));
        let embed = if initial {
            None
        } else {
            Some(self.attend(&state, object, &features, t, reverse)?)
        };
        let (mut output, mask_for_mem) = self.decode(
            &features,
            embed.as_ref(),
            (n, coords, labels),
            previous.as_deref(),
        )?;
        // The frame's memory is encoded now, from the mask as SAM2 encodes a prompted frame's
        // when propagation starts, so only it (not the frame's features) is kept.
        output.memory =
            Some(self.encode_memory(&mut state, &mask_for_mem, &features, output.score, true)?);
        let result = self.result(object_id, &output, &features)?;
        state
            .objects
            .entry(object_id)
            .or_default()
            .prompted
            .insert(t, (conditioning, output));
        Ok(result)
    }

    /// Tracks every object onto frame `frame`, travelling in `direction`, and returns their
    /// masks. A frame an object was prompted on returns its prompted result.
    pub fn track(
        &self,
        frame: u32,
        image: &ImageView<'_>,
        direction: Direction,
    ) -> Result<TrackedFrame> {
        self.check_frame(frame)?;
        let mut state = self.lock();
        if state.objects.is_empty() {
            return Err(Error::invalid(
                "tracker",
                "no object to track: prompt one first (add_prompt)",
            ));
        }
        self.file_prompted_frames(&mut state);
        let features = self.features(&mut state, frame, image)?;
        let t = frame as i64;
        let reverse = direction == Direction::Backward;
        let ids: Vec<u32> = state.objects.keys().copied().collect();
        let mut objects = Vec::with_capacity(ids.len());
        for id in ids {
            let object = &state.objects[&id];
            if let Some(done) = object.conditioning.get(&t) {
                objects.push(self.result(id, done, &features)?);
                let object = state.objects.get_mut(&id).expect("listed");
                object.directions.insert(t, reverse);
                continue;
            }
            let embed = self.attend(&state, object, &features, t, reverse)?;
            let padding = (1, vec![0.0, 0.0], vec![-1.0]);
            let (mut output, mask_for_mem) = self.decode(&features, Some(&embed), padding, None)?;
            let memory =
                self.encode_memory(&mut state, &mask_for_mem, &features, output.score, false)?;
            output.memory = Some(memory);
            objects.push(self.result(id, &output, &features)?);
            let object = state.objects.get_mut(&id).expect("listed");
            object.tracked.insert(t, output);
            object.directions.insert(t, reverse);
            self.forget_far_frames(object, t);
        }
        Ok(TrackedFrame {
            frame,
            width: features.width,
            height: features.height,
            objects,
        })
    }

    /// Stops tracking an object; false when there was none with that id.
    pub fn remove_object(&self, object_id: u32) -> bool {
        self.lock().objects.remove(&object_id).is_some()
    }

    /// Forgets every object, prompt and memory (the modules stay loaded).
    pub fn reset(&self) {
        let mut state = self.lock();
        state.objects.clear();
        state.frame = None;
    }

    fn check_frame(&self, frame: u32) -> Result<()> {
        match self.options.num_frames {
            Some(n) if frame >= n => Err(Error::invalid(
                "frame",
                format!("frame {frame} is outside the clip of {n} frames"),
            )),
            _ => Ok(()),
        }
    }

    /// The frame's features: the last encoded frame's when it is the same index and the same
    /// picture (the same pixels, size and format: [`crate::pixel_hash`]), else a new encode.
    fn features(
        &self,
        state: &mut State,
        frame: u32,
        image: &ImageView<'_>,
    ) -> Result<Arc<Features>> {
        let pixels = crate::pixel_hash(image);
        if let Some(f) = &state.frame {
            if f.frame == frame && f.pixels == pixels {
                return Ok(f.clone());
            }
        }
        // The previous frame's features are no longer needed: let them go before the encode.
        state.frame = None;
        let input = preprocess::preprocess(image, MODEL_SIDE);
        let input = Tensor::from_array(([1usize, 3, MODEL_SIDE, MODEL_SIDE], input))?.into_dyn();
        let mem = &self.device_memory;
        let mut out = self.modules.encoder.run(
            &[(IMAGE, &input)],
            &[
                (PIX_FEAT, mem),
                (HIGH_RES_0, mem),
                (HIGH_RES_1, mem),
                (VISION_FEATS, mem),
                (VISION_POS, mem),
            ],
        )?;
        let encoder = &self.modules.encoder;
        let mut take = |name: &str| -> Result<DynValue> {
            let value = out.remove(name).expect("bound above");
            float_shape(&value, encoder.path(), name)?;
            Ok(value)
        };
        let features = Arc::new(Features {
            frame,
            pixels,
            width: image.width,
            height: image.height,
            pix_feat: take(PIX_FEAT)?,
            high_res_0: take(HIGH_RES_0)?,
            high_res_1: take(HIGH_RES_1)?,
            vision_feats: take(VISION_FEATS)?,
            vision_pos: take(VISION_POS)?,
        });
        state.frame = Some(features.clone());
        Ok(features)
    }

    /// Memory attention: the frame's features conditioned on the object's memories.
    fn attend(
        &self,
        state: &State,
        object: &ObjectState,
        features: &Features,
        t: i64,
        reverse: bool,
    ) -> Result<DynValue> {
        let conditioning: BTreeSet<i64> = object.conditioning.keys().copied().collect();
        if conditioning.is_empty() {
            return Err(Error::invalid(
                "tracker",
                "the object has no conditioning frame yet: prompt it, then track",
            ));
        }
        let with_memory: BTreeSet<i64> = object
            .tracked
            .iter()
            .filter(|(_, o)| o.memory.is_some())
            .map(|(&k, _)| k)
            .collect();
        let with_pointer: BTreeSet<i64> = object.tracked.keys().copied().collect();
        let selection = bank::select(
            t,
            reverse,
            self.num_maskmem(state)?,
            self.options.num_frames.map(i64::from),
            &conditioning,
            &with_memory,
            &with_pointer,
        );
        let lookup = |frame: i64, cond: bool| -> &Output {
            if cond {
                &object.conditioning[&frame]
            } else {
                &object.tracked[&frame]
            }
        };
        let memories: Vec<&DynValue> = selection
            .memories
            .iter()
            .map(|m| {
                lookup(m.frame, m.conditioning)
                    .memory
                    .as_ref()
                    .expect("selected with memory")
            })
            .collect();
        let pointers: Vec<&DynValue> = selection
            .pointers
            .iter()
            .map(|p| &lookup(p.frame, p.conditioning).pointer)
            .collect();
        let memory_pos = state
            .memory_pos
            .as_ref()
            .expect("read with the first memory");
        let temporal = state
            .temporal_code
            .as_ref()
            .expect("read with the first memory");
        let (m, n) = (memories.len(), pointers.len());
        let tokens = memory_pos.len() / MEM_DIM;
        // Position encodings: each memory frame's, plus its temporal code; zeros for the pointer
        // tokens (the graph adds their temporal encoding from `obj_ptr_tpos`).
        let mut pos =
            crate::error::try_zeroed::<f32>((m * tokens + 4 * n) * MEM_DIM, "memory positions")?;
        for (k, mref) in selection.memories.iter().enumerate() {
            let code = &temporal[mref.tpos_row * MEM_DIM..(mref.tpos_row + 1) * MEM_DIM];
            let block = &mut pos[k * tokens * MEM_DIM..(k + 1) * tokens * MEM_DIM];
            for (row, src) in block.chunks_mut(MEM_DIM).zip(memory_pos.chunks(MEM_DIM)) {
                for ((d, s), c) in row.iter_mut().zip(src).zip(code) {
                    *d = s + c;
                }
            }
        }
        let pos = Tensor::from_array(([m * tokens + 4 * n, 1, MEM_DIM], pos))?.into_dyn();
        let memory_1 = self.concat(&memories, &[m as i64, MEM_DIM as i64, 64, 64])?;
        let memory_0 = self.concat(&pointers, &[n as i64, POINTER_DIM as i64])?;
        let offsets: Vec<f32> = selection
            .pointers
            .iter()
            .map(|p| p.offset as f32 / selection.offset_scale)
            .collect();
        let offsets = Tensor::from_array(([n], offsets))?.into_dyn();
        let mut inputs: Vec<(&str, &DynValue)> = vec![
            (CURRENT_FEAT, &features.vision_feats),
            (CURRENT_POS, &features.vision_pos),
            (POINTERS, &memory_0),
            (MEMORIES, &memory_1),
            (MEMORY_POS, &pos),
        ];
        if self.modules.attention.has_input(POINTER_TPOS) {
            inputs.push((POINTER_TPOS, &offsets));
        }
        let attention = &self.modules.attention;
        let mut out = attention.run(&inputs, &[(IMAGE_EMBED, &self.device_memory)])?;
        let embed = out.remove(IMAGE_EMBED).expect("bound above");
        float_shape(&embed, attention.path(), IMAGE_EMBED)?;
        Ok(embed)
    }

    /// The decoder on `embed` (the frame's own features on an initial conditioning frame): the
    /// output, and the mask for the memory encoder.
    fn decode(
        &self,
        features: &Arc<Features>,
        embed: Option<&DynValue>,
        (n, coords, labels): (usize, Vec<f32>, Vec<f32>),
        previous: Option<&[f32]>,
    ) -> Result<(Output, DynValue)> {
        let decoder = &self.modules.decoder;
        let coords = Tensor::from_array(([1, n, 2], coords))?.into_dyn();
        let real_points = labels.iter().filter(|&&l| l >= 0.0).count();
        let labels = Tensor::from_array(([1, n], labels))?.into_dyn();
        let embed = embed.unwrap_or(&features.vision_feats);
        let mut inputs: Vec<(&str, &DynValue)> = vec![
            (POINT_COORDS, &coords),
            (POINT_LABELS, &labels),
            (IMAGE_EMBED, embed),
            (DEC_HIGH_RES_0, &features.high_res_0),
            (DEC_HIGH_RES_1, &features.high_res_1),
        ];
        let mask_input = Tensor::from_array((
            [1usize, 1, LOW_RES, LOW_RES],
            previous.map_or_else(|| vec![0.0; LOW_RES * LOW_RES], <[f32]>::to_vec),
        ))?
        .into_dyn();
        let has_mask =
            Tensor::from_array(([1usize], vec![previous.map_or(0.0f32, |_| 1.0)]))?.into_dyn();
        if decoder.has_input(MASK_INPUT) && decoder.has_input(HAS_MASK_INPUT) {
            inputs.push((MASK_INPUT, &mask_input));
            inputs.push((HAS_MASK_INPUT, &has_mask));
        }
        let multimask = Tensor::from_array((
            [1usize],
            vec![f32::from(u8::from(bank::use_multimask(real_points)))],
        ))?
        .into_dyn();
        if decoder.has_input(MULTIMASK) {
            inputs.push((MULTIMASK, &multimask));
        }
        let mut outputs = vec![
            (OBJ_PTR, &self.device_memory),
            (MASK_FOR_MEM, &self.device_memory),
            (PRED_MASK, &self.host_memory),
        ];
        let has_score = decoder.has_output(OBJECT_SCORE);
        if has_score {
            outputs.push((OBJECT_SCORE, &self.host_memory));
        }
        let mut out = decoder.run(&inputs, &outputs)?;
        let path = decoder.path();
        let low_res = host_floats(
            &out[PRED_MASK],
            path,
            PRED_MASK,
            LOW_RES * LOW_RES,
            "[1, 1, 256, 256]",
        )?;
        let pointer = out.remove(OBJ_PTR).expect("bound above");
        expect_floats(&pointer, path, OBJ_PTR, POINTER_DIM, "[1, 256]")?;
        let mask_for_mem = out.remove(MASK_FOR_MEM).expect("bound above");
        float_shape(&mask_for_mem, path, MASK_FOR_MEM)?;
        let score = if has_score {
            host_floats(&out[OBJECT_SCORE], path, OBJECT_SCORE, 1, "[1, 1]")?[0]
        } else if low_res.iter().all(|&v| v <= NO_OBJECT_LOGIT) {
            // The lineage's exports do not return the score; SAM2 marks an absent object by
            // setting every logit to NO_OBJ_SCORE.
            -1.0
        } else {
            1.0
        };
        Ok((
            Output {
                low_res,
                score,
                pointer,
                memory: None,
            },
            mask_for_mem,
        ))
    }

    /// The memory encoder on a decoded mask; reads the position encoding and temporal code the
    /// first time.
    fn encode_memory(
        &self,
        state: &mut State,
        mask_for_mem: &DynValue,
        features: &Features,
        score: f32,
        from_points: bool,
    ) -> Result<DynValue> {
        let module = &self.modules.memory_encoder;
        let score_value = Tensor::from_array(([1usize, 1], vec![score]))?.into_dyn();
        let from_points =
            Tensor::from_array(([1usize], vec![f32::from(u8::from(from_points))]))?.into_dyn();
        let mut inputs: Vec<(&str, &DynValue)> =
            vec![(MASK_FOR_MEM, mask_for_mem), (PIX_FEAT, &features.pix_feat)];
        if module.has_input(OBJECT_SCORE) {
            inputs.push((OBJECT_SCORE, &score_value));
        }
        if module.has_input(FROM_POINTS) {
            inputs.push((FROM_POINTS, &from_points));
        }
        let first = state.memory_pos.is_none();
        let pos_memory = if first {
            &self.host_memory
        } else {
            &self.device_memory
        };
        let mut out = module.run(
            &inputs,
            &[
                (MASKMEM_FEATURES, &self.device_memory),
                (MASKMEM_POS, pos_memory),
                (TEMPORAL_CODE, pos_memory),
            ],
        )?;
        let memory = out.remove(MASKMEM_FEATURES).expect("bound above");
        expect_floats(
            &memory,
            module.path(),
            MASKMEM_FEATURES,
            MEM_DIM * 64 * 64,
            "[1, 64, 64, 64]",
        )?;
        if first {
            let pos = host_floats(&out[MASKMEM_POS], module.path(), MASKMEM_POS, 0, "")?;
            let code = host_floats(&out[TEMPORAL_CODE], module.path(), TEMPORAL_CODE, 0, "")?;
            if pos.is_empty()
                || pos.len() % MEM_DIM != 0
                || code.is_empty()
                || code.len() % MEM_DIM != 0
            {
                return Err(Error::model(
                    module.path(),
                    format!(
                        "maskmem_pos_enc and temporal_code must be made of {MEM_DIM}-value rows; got \
                         {} and {} values",
                        pos.len(),
                        code.len()
                    ),
                ));
            }
            state.memory_pos = Some(pos);
            state.temporal_code = Some(code);
        }
        Ok(memory)
    }

    /// SAM2's `num_maskmem`: the rows of the temporal code.
    fn num_maskmem(&self, state: &State) -> Result<usize> {
        let code = state
            .temporal_code
            .as_ref()
            .ok_or_else(|| Error::invalid("tracker", "no memory has been encoded yet"))?;
        Ok(code.len() / MEM_DIM)
    }

    /// Files the outputs prompted since the last track (SAM2's `propagate_in_video_preflight`;
    /// their memory was encoded with the prompt): a frame that becomes a conditioning one leaves
    /// the tracked ones. Nothing here can fail, so a track that fails later loses no prompt.
    fn file_prompted_frames(&self, state: &mut State) {
        for object in state.objects.values_mut() {
            for (t, (conditioning, output)) in std::mem::take(&mut object.prompted) {
                if conditioning {
                    object.tracked.remove(&t);
                    object.conditioning.insert(t, output);
                } else {
                    object.tracked.insert(t, output);
                }
            }
        }
    }

    /// Drops tracked outputs no later frame near `t` will attend to: the memories of all but the
    /// `memory_frames` frames nearest `t` (`t` included), pointers beyond the pointers' reach.
    fn forget_far_frames(&self, object: &mut ObjectState, t: i64) {
        let keep_memory = self.options.memory_frames as i64;
        let keep_pointer = keep_memory.max(bank::MAX_POINTERS as i64);
        object.tracked.retain(|&k, o| {
            if (k - t).abs() >= keep_memory {
                o.memory = None;
            }
            (k - t).abs() <= keep_pointer
        });
        object
            .directions
            .retain(|&k, _| (k - t).abs() <= keep_pointer || object.conditioning.contains_key(&k));
    }

    /// An object's result on a frame: its mask upsampled to the frame's size.
    fn result(
        &self,
        object_id: u32,
        output: &Output,
        features: &Features,
    ) -> Result<TrackedObject> {
        let (w, h) = (features.width, features.height);
        let mut mask = crate::error::try_zeroed::<u8>(w * h, "the mask")?;
        postprocess::upsample_threshold(&output.low_res, LOW_RES, LOW_RES, w, h, &mut mask);
        Ok(TrackedObject {
            object_id,
            score: output.score,
            present: output.score > 0.0,
            mask,
            low_res: output.low_res.clone(),
        })
    }

    /// Concatenates tensors along their first axis into one of `shape`, in the memory the
    /// modules run on: plain copies for host memory, device-to-device copies otherwise.
    fn concat(&self, parts: &[&DynValue], shape: &[i64]) -> Result<DynValue> {
        let mut on_host = true;
        for p in parts {
            on_host &= p
                .view()
                .downcast::<ort::value::DynTensorValueType>()?
                .memory_info()
                .is_cpu_accessible();
        }
        if on_host {
            let mut data = Vec::new();
            for p in parts {
                data.extend_from_slice(p.try_extract_tensor::<f32>()?.1);
            }
            let expected: i64 = shape.iter().product();
            if data.len() as i64 != expected {
                return Err(Error::OnnxRuntime(format!(
                    "memory tensors hold {} values, expected {expected} for {shape:?}",
                    data.len()
                )));
            }
            return Ok(Tensor::from_array((shape.to_vec(), data))?.into_dyn());
        }
        self.concat_on_device(parts, shape)
    }

    fn concat_on_device(&self, parts: &[&DynValue], shape: &[i64]) -> Result<DynValue> {
        let info = self.device_memory.clone();
        let allocator = self.modules.attention.allocator(&info)?;
        let mut out = Tensor::<f32>::new(&allocator, shape.to_vec())?;
        let base = out.data_ptr_mut() as *mut u8;
        let mut offset = 0usize;
        for p in parts {
            let part_shape = p.shape().clone();
            let bytes = part_shape.num_elements() * std::mem::size_of::<f32>();
            // SAFETY: `out` holds the product of `shape` floats, the parts' sizes sum to it
            // (checked below before any copy past the end), and `view` lives shorter than `out`.
            if offset + bytes > shape.iter().product::<i64>() as usize * 4 {
                return Err(Error::OnnxRuntime(format!(
                    "memory tensors exceed {shape:?}"
                )));
            }
            let view = unsafe {
                ort::value::TensorRefMut::<f32>::from_raw(
                    info.clone(),
                    base.add(offset).cast(),
                    part_shape,
                )?
            };
            p.view()
                .downcast::<ort::value::TensorValueType<f32>>()?
                .copy_into(view)?;
            offset += bytes;
        }
        // Every part was checked at its module's output, so they fill `out` exactly; a shortfall
        // would leave uninitialised memory in it.
        if offset != shape.iter().product::<i64>() as usize * 4 {
            return Err(Error::OnnxRuntime(format!(
                "memory tensors hold {offset} bytes, expected {shape:?}"
            )));
        }
        Ok(out.into_dyn())
    }
}

/// Bytes of a float tensor's values (0 for a value that is not a tensor: never kept).
fn value_bytes(value: &DynValue) -> usize {
    match value.dtype() {
        ValueType::Tensor { shape, .. } => shape.num_elements() * std::mem::size_of::<f32>(),
        _ => 0,
    }
}

/// The shape of a module's output, which must be a float tensor (`Error::Model` naming it).
fn float_shape(value: &DynValue, module: &Path, name: &str) -> Result<Vec<i64>> {
    match value.dtype() {
        ValueType::Tensor {
            ty: TensorElementType::Float32,
            shape,
            ..
        } => Ok(shape.iter().copied().collect()),
        other => Err(Error::model(
            module,
            format!("output `{name}` is {other}, expected a float32 tensor (docs/video.md)"),
        )),
    }
}

/// Checks that a module's output holds `count` floats (`Error::Model` naming it and `shape`,
/// the contract's).
fn expect_floats(
    value: &DynValue,
    module: &Path,
    name: &str,
    count: usize,
    shape: &str,
) -> Result<()> {
    let got = float_shape(value, module, name)?;
    if got.iter().product::<i64>() != count as i64 {
        return Err(Error::model(
            module,
            format!("output `{name}` has shape {got:?}, expected {shape} (docs/video.md)"),
        ));
    }
    Ok(())
}

/// A host output's values, checked to be `count` floats (any non-zero number when `count` is 0).
fn host_floats(
    value: &DynValue,
    module: &Path,
    name: &str,
    count: usize,
    shape: &str,
) -> Result<Vec<f32>> {
    if count > 0 {
        expect_floats(value, module, name, count, shape)?;
    }
    let values = value.try_extract_tensor::<f32>()?.1.to_vec();
    if values.is_empty() {
        return Err(Error::model(
            module,
            format!("output `{name}` is empty (docs/video.md)"),
        ));
    }
    Ok(values)
}

/// A tensor's values on the host (copied from the device when they live there).
fn to_host(value: &DynValue) -> Result<Vec<f32>> {
    let tensor = value
        .view()
        .downcast::<ort::value::TensorValueType<f32>>()?;
    if tensor.memory_info().is_cpu_accessible() {
        return Ok(tensor.try_extract_tensor::<f32>()?.1.to_vec());
    }
    let dynamic = value.view().downcast::<ort::value::DynTensorValueType>()?;
    let host = crate::device_copy::copy(&dynamic, ort::memory::AllocationDevice::CPU, 0)?;
    Ok(host.try_extract_tensor::<f32>()?.1.to_vec())
}

/// Channels of a memory token (SAM2's `mem_dim`).
const MEM_DIM: usize = 64;
/// Values of an object pointer (SAM2's `hidden_dim`).
const POINTER_DIM: usize = 256;

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Tracker>();
}
