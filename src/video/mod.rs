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
//!
//! Files: this one holds the options, the results and [`Tracker`]'s calls; `state.rs` what it
//! remembers (features, outputs and memories by frame, which are kept); `steps.rs` the steps of a
//! frame (features, memory attention, decoder, memory encoder); `tensors.rs` the tensors between
//! modules; `bank.rs` which memories a frame attends to; `modules.rs` the four ONNX modules;
//! `reuse.rs` what a frame's inputs reuse from the frames before (buffers, composed position
//! encodings, constant inputs).

mod bank;
mod modules;
mod paths;
mod reuse;
mod state;
mod steps;
mod tensors;

use std::sync::Mutex;

use ort::memory::MemoryInfo;

use crate::device::{self, EffectiveDevice};
use crate::error::{Error, Result};
use crate::image::ImageView;
use crate::onnx::data_type::tensor_byte_len as value_bytes;
use crate::predictor::{prompt_points, validate_prompts, Prompt};
use crate::session::SessionOptions;

use modules::Modules;
pub use modules::{describe_video_module, VideoFamily, VideoModelPaths, VideoModuleInfo};
use reuse::{Constants, Reused};
use state::{ObjectState, State};
use tensors::*;

/// Side of the model frame and of the low-res logits (SAM2's, for every size of model).
const MODEL_SIDE: usize = 1024;
const LOW_RES: usize = 256;
/// What SAM2 clamps previous logits to before feeding them back as a mask prompt.
const PREV_LOGIT_CLAMP: f32 = 32.0;
/// SAM2's `NO_OBJ_SCORE`: the logit of every pixel of an object judged absent.
const NO_OBJECT_LOGIT: f32 = -1024.0;
/// Channels of a memory token (SAM2's `mem_dim`).
const MEM_DIM: usize = 64;
/// Values of an object pointer (SAM2's `hidden_dim`).
const POINTER_DIM: usize = 256;

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

/// Most objects one tracker follows. Each keeps its own memories (tens of MB with a real SAM2
/// export) and costs a decode and a memory encode per frame: 200 objects on three 320×240 frames of
/// the generated model took 25 s and 1.1 GB. A prompt for one more object is
/// `Error::InvalidArgument` naming `object_id`; track more with a second tracker.
///
/// cbindgen:ignore
pub const MAX_TRACKED_OBJECTS: usize = 64;

/// Fewest tracked frames an object may keep the memory of ([`TrackerOptions::memory_frames`]).
///
/// cbindgen:ignore
pub const MIN_MEMORY_FRAMES: usize = 6;
/// Most tracked frames an object may keep the memory of.
///
/// cbindgen:ignore
pub const MAX_MEMORY_FRAMES: usize = 1024;

impl TrackerOptions {
    /// Refuses settings no tracker can honour, naming the field: a clip of no frames, a memory
    /// outside [`MIN_MEMORY_FRAMES`]..=[`MAX_MEMORY_FRAMES`], and what [`SessionOptions::validate`]
    /// refuses.
    pub fn validate(&self) -> Result<()> {
        if self.num_frames == Some(0) {
            return Err(Error::invalid(
                "num_frames",
                "a clip has at least one frame",
            ));
        }
        if !(MIN_MEMORY_FRAMES..=MAX_MEMORY_FRAMES).contains(&self.memory_frames) {
            return Err(Error::invalid(
                "memory_frames",
                format!(
                    "must be {MIN_MEMORY_FRAMES} to {MAX_MEMORY_FRAMES} (a frame attends to the six \
                     before it), got {}",
                    self.memory_frames
                ),
            ));
        }
        self.session.validate()
    }
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

/// Tracks objects through the frames of a clip. Calls are serialised on the tracker.
pub struct Tracker {
    options: TrackerOptions,
    /// Where module outputs kept between runs live: the execution device's memory.
    device_memory: MemoryInfo<'static>,
    host_memory: MemoryInfo<'static>,
    state: Mutex<State>,
    /// Inputs that are the same on every run.
    constants: Constants,
    /// Buffers and tensors kept between frames; locked only while `state` is.
    reused: Mutex<Reused>,
    /// Declared last, so dropped after the tensors above: device memory is released while the
    /// session that allocated it is open (see the encoder's `Running`).
    modules: Modules,
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
        options.validate()?;
        let modules = Modules::load(paths, &options.session)?;
        let device_memory = modules.device.output_memory()?;
        Ok(Tracker {
            modules,
            options: options.clone(),
            device_memory,
            host_memory: device::host_memory()?,
            state: Mutex::new(State::default()),
            constants: Constants::new()?,
            reused: Mutex::new(Reused::default()),
        })
    }

    /// Which attention subgraphs of each module were fused when it was loaded, by role.
    pub fn attention_fusion(&self) -> Vec<(&'static str, crate::rewrite::RewriteReport)> {
        self.modules.attention_fusion()
    }

    /// The precision the tracker runs in: the image encoder's when it is a variant, else the
    /// first other module's that is one, else float32 as exported. An int8 variant
    /// (`sam2-variant`) has its image encoder's weights int8 where it has MatMuls
    /// (SAM2's Hiera; EdgeTAM's RepViT has none and stays float32), the feed-forward layers of
    /// its memory attention and memory encoder int8, and its memory attention's scores int8 when
    /// loaded on the CPU ([`crate::models::RewriteReport`]). Each module's is in
    /// [`Tracker::variants`].
    pub fn variant(&self) -> &crate::precision::Variant {
        self.modules.variant()
    }

    /// The precision of each module, by role.
    pub fn variants(&self) -> Vec<(&'static str, crate::precision::Variant)> {
        self.modules.variants()
    }

    /// Which network the modules run (SAM2's or EdgeTAM's memories and rules).
    pub fn family(&self) -> VideoFamily {
        self.modules.family
    }

    /// What the modules effectively run on.
    pub fn device(&self) -> &EffectiveDevice {
        &self.modules.device
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
    /// frames kept for later, the last frame's features, and the inputs it reuses between
    /// frames: the encoder's input, the assembled memories, their composed position encodings),
    /// in the sessions' memory and on the host; the modules' own memory (weights, arenas) is not
    /// included.
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
        total += self.reuse().bytes();
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

    /// The reused buffers; taken only with the state's lock held (never the other way round).
    fn reuse(&self) -> std::sync::MutexGuard<'_, Reused> {
        self.reused.lock().unwrap_or_else(|p| p.into_inner())
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
        if !state.objects.contains_key(&object_id) && state.objects.len() >= MAX_TRACKED_OBJECTS {
            return Err(Error::invalid(
                "object_id",
                format!(
                    "{object_id} would be object {} of this tracker, which follows at most \
                     {MAX_TRACKED_OBJECTS}: track more with a second tracker",
                    state.objects.len() + 1
                ),
            ));
        }
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
        // EdgeTAM (E2): the other objects' outputs on this frame will be filed with the prompt,
        // their memory encoded again from their masks; encoded now, while the frame's features
        // are at hand (their masks do not change before the next track).
        let mut reencoded = Vec::new();
        if self.modules.family == VideoFamily::EdgeTam {
            for (&id, other) in &state.objects {
                if id == object_id
                    || other.prompted.contains_key(&t)
                    || other.reencoded.contains_key(&t)
                {
                    continue;
                }
                let Some(previous) = other.conditioning.get(&t).or_else(|| other.tracked.get(&t))
                else {
                    continue;
                };
                reencoded.push((id, previous.low_res.clone(), previous.score));
            }
        }
        let mut memories = Vec::with_capacity(reencoded.len());
        for (id, low_res, score) in reencoded {
            let memory = self.encode_memory_from_logits(&mut state, &low_res, &features, score)?;
            memories.push((id, memory));
        }
        for (id, memory) in memories {
            let other = state.objects.get_mut(&id).expect("listed");
            other.reencoded.insert(t, memory);
        }
        let object = state.objects.entry(object_id).or_default();
        object.reencoded.remove(&t);
        object.prompted.insert(t, (conditioning, output));
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
            // A conditioning frame returns its output; so does, for EdgeTAM, a frame prompted as
            // a tracked one (E3: never tracked again).
            let done = object.conditioning.get(&t).or_else(|| {
                object
                    .kept
                    .contains(&t)
                    .then(|| object.tracked.get(&t))
                    .flatten()
            });
            if let Some(done) = done {
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

    /// Starts another clip of `num_frames` frames (as [`TrackerOptions::num_frames`]) with the
    /// modules already loaded: every object, prompt and memory is forgotten, as by
    /// [`reset`](Self::reset), so the clip is tracked as a new tracker would track it. A clip of
    /// no frames is refused, the tracker left as it was.
    pub fn start_clip(&mut self, num_frames: Option<u32>) -> Result<()> {
        let options = TrackerOptions {
            num_frames,
            ..self.options.clone()
        };
        options.validate()?;
        self.options = options;
        self.reset();
        Ok(())
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
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Tracker>();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clip_has_frames() {
        let options = |num_frames: Option<u32>| TrackerOptions {
            num_frames,
            ..Default::default()
        };
        for ok in [None, Some(1), Some(u32::MAX)] {
            assert!(options(ok).validate().is_ok(), "{ok:?}");
        }
        let e = options(Some(0)).validate().unwrap_err().to_string();
        assert!(e.contains("`num_frames`"), "{e}");
    }

    #[test]
    fn memory_frames_are_bounded() {
        let options = |memory_frames: usize| TrackerOptions {
            memory_frames,
            ..Default::default()
        };
        for ok in [MIN_MEMORY_FRAMES, MAX_MEMORY_FRAMES] {
            assert!(options(ok).validate().is_ok(), "{ok}");
        }
        for bad in [0, MIN_MEMORY_FRAMES - 1, MAX_MEMORY_FRAMES + 1, usize::MAX] {
            let e = options(bad).validate().unwrap_err().to_string();
            assert!(
                e.contains("`memory_frames`") && e.contains(&format!("got {bad}")),
                "{e}"
            );
        }
    }

    #[test]
    fn the_session_part_is_checked() {
        let mut options = TrackerOptions::default();
        options.session.intra_threads = Some(0);
        let e = options.validate().unwrap_err().to_string();
        assert!(e.contains("`intra_threads`"), "{e}");
    }
}
