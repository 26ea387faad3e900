//! `sam2_tracker`: video tracking with SAM2's memory, and its per-frame result.

use std::ffi::c_char;

use super::c_enum::c_enum;
use super::device::{
    sam2_provider, session_options, SAM2_ON_MISMATCH_FALLBACK, SAM2_OPTIMIZATION_ALL,
    SAM2_WEIGHTS_SHARED,
};
use super::encoder::image_arg;
use super::precision::PrecisionCodes;
use super::predictor::{convert_prompt, sam2_prompt};
use super::{
    arg_out, arg_str, flag, guard, handle_ref, impl_options, read_options, sam2_status, Handle,
};
use sam2::masks::box_and_area;
use sam2::video::{Direction, TrackedFrame, Tracker, TrackerOptions, VideoModelPaths};
use sam2::Error;

/// Tracking direction: frames after the prompted ones (default).
pub const SAM2_TRACK_FORWARD: u32 = 0;
/// Tracking direction: frames before the prompted ones.
pub const SAM2_TRACK_BACKWARD: u32 = 1;

c_enum! {
    /// `SAM2_TRACK_*` ↔ [`Direction`].
    pub(crate) DirectionCodes: u32 => Direction {
        SAM2_TRACK_FORWARD => Direction::Forward,
        SAM2_TRACK_BACKWARD => Direction::Backward,
    }
}

/// Options of `sam2_tracker_new`. Initialise with `sam2_tracker_options_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_tracker_options {
    /// `sizeof(sam2_tracker_options)`.
    pub struct_size: u32,
    /// Intra-op threads of each module's session; 0 lets ONNX Runtime choose.
    pub intra_threads: u32,
    /// Execution providers wanted, as in `sam2_encoder_options` (read during the call only).
    pub providers: *const sam2_provider,
    pub provider_count: usize,
    /// `SAM2_ON_MISMATCH_FALLBACK` (default) or `SAM2_ON_MISMATCH_FAIL`.
    pub on_device_mismatch: u32,
    /// `SAM2_WEIGHTS_SHARED` (default) or `SAM2_WEIGHTS_COPY`.
    pub weight_sharing: u32,
    /// `SAM2_OPTIMIZATION_ALL` (default), `SAM2_OPTIMIZATION_BASIC` or `SAM2_OPTIMIZATION_NONE`.
    pub graph_optimization: u32,
    /// 1 (default): a prompt on a frame already tracked (a correction) becomes a conditioning
    /// frame, remembered by the frames after it; 0: it changes that frame's result only.
    pub corrections_as_conditioning: u32,
    /// Frames in the clip when known (bounds how far object pointers reach, as SAM2 does);
    /// 0 for a stream of unknown length (default).
    pub num_frames: u32,
    /// Tracked frames whose memory each object keeps besides its prompted frames, 6 to 1024
    /// (default 16): the bound on the memory bank (about 1 MiB a frame and object for SAM2).
    pub memory_frames: u32,
    /// Load-time rewrites turned off: a sum of `SAM2_REWRITE_*` bits (0, the default: every
    /// rewrite the model allows; `SAM2_REWRITE_ALL`: the graph as exported). For ruling one out
    /// when it is suspected; sessions with different sets hold different weights.
    pub disabled_rewrites: u64,
}

// Earlier versions of `sam2_tracker_options`: up to `memory_frames`, 48 bytes.
impl_options!(sam2_tracker_options, earlier_sizes: [48]);

impl Default for sam2_tracker_options {
    fn default() -> Self {
        let d = TrackerOptions::default();
        sam2_tracker_options {
            struct_size: std::mem::size_of::<Self>() as u32,
            intra_threads: 0,
            providers: std::ptr::null(),
            provider_count: 0,
            on_device_mismatch: SAM2_ON_MISMATCH_FALLBACK,
            weight_sharing: SAM2_WEIGHTS_SHARED,
            graph_optimization: SAM2_OPTIMIZATION_ALL,
            corrections_as_conditioning: d.corrections_as_conditioning as u32,
            num_frames: d.num_frames.unwrap_or(0),
            memory_frames: d.memory_frames as u32,
            disabled_rewrites: 0,
        }
    }
}

/// Fills `options` with the defaults and sets its `struct_size`; pass
/// `sizeof(sam2_tracker_options)` (see `sam2_encoder_options_init`).
#[no_mangle]
pub extern "C" fn sam2_tracker_options_init(
    options: *mut sam2_tracker_options,
    struct_size: usize,
) -> sam2_status {
    super::init_options(options, struct_size)
}

/// The core names a few faults by its own parameter names; a C host (and .NET's
/// `ArgumentException.ParamName`) is told the name of the C argument or field instead.
fn with_c_names(e: Error) -> Error {
    match super::option_names(e) {
        Error::InvalidArgument {
            name: "frame",
            reason,
        } => Error::InvalidArgument {
            name: "frame_index",
            reason,
        },
        e => e,
    }
}

fn tracker_options(o: &sam2_tracker_options) -> Result<TrackerOptions, Error> {
    let mut out = TrackerOptions {
        corrections_as_conditioning: flag(
            o.corrections_as_conditioning,
            "options.corrections_as_conditioning",
        )?,
        num_frames: (o.num_frames != 0).then_some(o.num_frames),
        memory_frames: o.memory_frames as usize,
        ..Default::default()
    };
    out.session = session_options(
        o.intra_threads,
        o.providers,
        o.provider_count,
        o.on_device_mismatch,
        o.weight_sharing,
        o.graph_optimization,
        o.disabled_rewrites,
    )?;
    Ok(out)
}

/// A video tracker: the four modules of a SAM2 video export and the objects it follows with
/// their memory. Opaque; create with `sam2_tracker_new`, release with `sam2_tracker_free`.
/// Thread-safe: calls on one tracker are serialised.
pub struct sam2_tracker {
    _opaque: [u8; 0],
}
impl Handle for sam2_tracker {
    type Inner = Tracker;
}

/// One frame's result: a mask and a presence score per object. Opaque and immutable; release
/// with `sam2_track_result_free`. Pointers it hands out stay valid until then. Thread-safe:
/// several threads may read it at once.
pub struct sam2_track_result {
    _opaque: [u8; 0],
}
impl Handle for sam2_track_result {
    type Inner = TrackedFrame;
}

/// Loads the four modules of a SAM2 video export (docs/video.md: `image_encoder`,
/// `memory_attention`, `image_decoder`, `memory_encoder`, recognised by their tensor names).
///
/// Each path is NUL-terminated UTF-8. `options`: NULL for the defaults. On success `*out` receives
/// a new tracker. Errors: those of `sam2_encoder_new` (`SAM2_ERR_MODEL` names the module and the
/// tensors it lacks), `SAM2_ERR_MODEL_MISMATCH` for modules of different exports (naming both
/// modules and the tensor whose dimensions differ), and `SAM2_ERR_ENVIRONMENT_CONFIGURATION` when
/// the modules would run on different devices.
///
/// The caller owns `*out` and frees it with `sam2_tracker_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_tracker_new(
    image_encoder_path: *const c_char,
    memory_attention_path: *const c_char,
    image_decoder_path: *const c_char,
    memory_encoder_path: *const c_char,
    options: *const sam2_tracker_options,
    out: *mut *mut sam2_tracker,
) -> sam2_status {
    guard(|| {
        let paths = VideoModelPaths {
            image_encoder: arg_str(image_encoder_path, "image_encoder_path")?.into(),
            memory_attention: arg_str(memory_attention_path, "memory_attention_path")?.into(),
            image_decoder: arg_str(image_decoder_path, "image_decoder_path")?.into(),
            memory_encoder: arg_str(memory_encoder_path, "memory_encoder_path")?.into(),
        };
        let out = arg_out(out, "out")?;
        let options = tracker_options(&read_options(options, "options")?)?;
        let tracker = Tracker::new(&paths, &options).map_err(with_c_names)?;
        out.set(super::publish::<sam2_tracker>(tracker));
        Ok(())
    })
}

/// Releases a tracker and every memory it holds. Results it returned stay valid. NULL is a no-op.
/// Do not free it twice, nor while it is in use.
#[no_mangle]
pub extern "C" fn sam2_tracker_free(tracker: *mut sam2_tracker) {
    super::free_handle(tracker, "tracker");
}

/// Prompts object `object_id` on frame `frame_index` with clicks and/or a box (`prompt`, in
/// the frame's pixels; `mask_input` must be NULL) and writes the object's mask on that frame
/// to `*out` (a result holding that one object). The pixel arguments are those of
/// `sam2_encode`. A new id starts a new object; prompts on a frame replace that object's
/// earlier prompts there. A prompt on a frame already tracked is a correction. The frame's
/// memory is encoded with the prompt (about 1 MiB for SAM2, counted by
/// `sam2_tracker_memory_frames`). A picture is encoded once for several prompts on it: the
/// same frame index with other pixels is encoded afresh. A tracker follows at most 64 objects:
/// a new id past them is `SAM2_ERR_INVALID_ARGUMENT` naming `object_id` (remove one, or use a
/// second tracker). Errors: `SAM2_ERR_INVALID_ARGUMENT`
/// (a prompt outside the frame, a frame outside `num_frames`), `SAM2_ERR_MODEL` (a module's
/// output of the wrong shape, named), and those of `sam2_encode`.
///
/// The caller owns `*out` and frees it with `sam2_track_result_free`. Out-parameters are untouched
/// on failure.
#[no_mangle]
pub extern "C" fn sam2_tracker_add_prompt(
    tracker: *const sam2_tracker,
    frame_index: u32,
    pixels: *const u8,
    pixels_len: usize,
    width: u32,
    height: u32,
    stride: usize,
    pixel_format: u32,
    object_id: u32,
    prompt: *const sam2_prompt,
    out: *mut *mut sam2_track_result,
) -> sam2_status {
    guard(|| {
        let tracker = handle_ref(tracker, "tracker")?;
        if pixels.is_null() {
            return Err(Error::NullArgument("pixels"));
        }
        if prompt.is_null() {
            return Err(Error::NullArgument("prompt"));
        }
        let out = arg_out(out, "out")?;
        let image = image_arg(pixels, pixels_len, width, height, stride, pixel_format)?;
        // SAFETY: non-NULL (checked above); the caller promises a readable sam2_prompt.
        let prompt = unsafe { &*prompt };
        // Refused before the array is read: a tracker never takes a mask prompt, whatever its
        // length. (A NULL one with a length is SAM2_ERR_NULL_ARGUMENT, as everywhere.)
        if !prompt.mask_input.is_null() {
            return Err(Error::invalid(
                "prompt.mask_input",
                "must be NULL: a tracker takes clicks and boxes, not mask prompts",
            ));
        }
        let prompt = convert_prompt(prompt, 256)?;
        let object = tracker
            .add_prompt(frame_index, &image, object_id, &prompt)
            .map_err(with_c_names)?;
        out.set(super::publish::<sam2_track_result>(TrackedFrame {
            frame: frame_index,
            width: image.width,
            height: image.height,
            objects: vec![object],
        }));
        Ok(())
    })
}

/// Tracks every object onto frame `frame_index` (`direction`: `SAM2_TRACK_FORWARD` or
/// `SAM2_TRACK_BACKWARD`) and writes their masks to `*out`, objects in increasing id order.
/// A frame an object was prompted on gives its prompted mask. Frames are usually tracked one
/// after the other from a prompted frame. Errors: `SAM2_ERR_INVALID_ARGUMENT` (no object yet,
/// a frame outside `num_frames`), and those of `sam2_encode`.
///
/// The caller owns `*out` and frees it with `sam2_track_result_free`. Out-parameters are untouched
/// on failure.
#[no_mangle]
pub extern "C" fn sam2_tracker_track(
    tracker: *const sam2_tracker,
    frame_index: u32,
    pixels: *const u8,
    pixels_len: usize,
    width: u32,
    height: u32,
    stride: usize,
    pixel_format: u32,
    direction: u32,
    out: *mut *mut sam2_track_result,
) -> sam2_status {
    guard(|| {
        let tracker = handle_ref(tracker, "tracker")?;
        if pixels.is_null() {
            return Err(Error::NullArgument("pixels"));
        }
        let out = arg_out(out, "out")?;
        let image = image_arg(pixels, pixels_len, width, height, stride, pixel_format)?;
        let direction = DirectionCodes::parse(direction, "direction")?;
        let frame = tracker
            .track(frame_index, &image, direction)
            .map_err(with_c_names)?;
        out.set(super::publish::<sam2_track_result>(frame));
        Ok(())
    })
}

/// Stops tracking object `object_id` and frees its memory. `*out_removed` (may be NULL)
/// receives 1 when the object existed, 0 otherwise.
#[no_mangle]
pub extern "C" fn sam2_tracker_remove_object(
    tracker: *const sam2_tracker,
    object_id: u32,
    out_removed: *mut i32,
) -> sam2_status {
    guard(|| {
        let tracker = handle_ref(tracker, "tracker")?;
        let removed = tracker.remove_object(object_id);
        if !out_removed.is_null() {
            arg_out(out_removed, "out_removed")?.set(i32::from(removed));
        }
        Ok(())
    })
}

/// Forgets every object, prompt and memory; the models stay loaded.
#[no_mangle]
pub extern "C" fn sam2_tracker_reset(tracker: *const sam2_tracker) -> sam2_status {
    guard(|| {
        handle_ref(tracker, "tracker")?.reset();
        Ok(())
    })
}

/// Writes how many frame memories the tracker holds, summed over objects: prompted frames
/// (from the prompt on; a frame that held a memory and is prompted again holds both, and counts
/// twice, until the next track)
/// and the tracked frames kept, at most `memory_frames` of those per object. Thread-safe.
#[no_mangle]
pub extern "C" fn sam2_tracker_memory_frames(
    tracker: *const sam2_tracker,
    out_frames: *mut usize,
) -> sam2_status {
    guard(|| {
        let tracker = handle_ref(tracker, "tracker")?;
        arg_out(out_frames, "out_frames")?.set(tracker.memory_frames());
        Ok(())
    })
}

/// Writes the bytes of the tensors the tracker holds: frame memories, object pointers and
/// logits, the last frame's features (kept for prompts on that same picture), and the buffers
/// it reuses from frame to frame (the frame's input tensor, the stacked memories and their
/// position encodings), in the
/// sessions' memory (device memory on a GPU) and on the host. The modules' own memory (weights,
/// ONNX Runtime's arenas) is not included. Thread-safe; `*out_bytes` is written only on success.
#[no_mangle]
pub extern "C" fn sam2_tracker_memory_bytes(
    tracker: *const sam2_tracker,
    out_bytes: *mut u64,
) -> sam2_status {
    guard(|| {
        let tracker = handle_ref(tracker, "tracker")?;
        arg_out(out_bytes, "out_bytes")?.set(tracker.memory_bytes() as u64);
        Ok(())
    })
}

/// Writes what the tracker's modules effectively run on (see `sam2_encoder_device`).
#[no_mangle]
pub extern "C" fn sam2_tracker_device(
    tracker: *const sam2_tracker,
    out_provider: *mut u32,
    out_device_id: *mut i32,
    out_fell_back: *mut i32,
) -> sam2_status {
    guard(|| {
        let t = handle_ref(tracker, "tracker")?;
        super::device::write_device(t.device(), out_provider, out_device_id, out_fell_back)
    })
}

/// Writes the precision the tracker runs in (`SAM2_PRECISION_*`): as exported, or a precision
/// variant's (`sam2-variant` on a video export: its image encoder converted where it
/// has MatMul weights and, for int8, memory attention marked for int8 attention scores; see
/// `sam2_encoder_precision`). The image encoder's when it is a variant, else memory attention's
/// (EdgeTAM's int8 variant). Out-parameters are untouched on failure.
#[no_mangle]
pub extern "C" fn sam2_tracker_precision(
    tracker: *const sam2_tracker,
    out_precision: *mut u32,
) -> sam2_status {
    guard(|| {
        let t = handle_ref(tracker, "tracker")?;
        let out = arg_out(out_precision, "out_precision")?;
        out.set(PrecisionCodes::code(t.variant().precision));
        Ok(())
    })
}

/// Releases a result. NULL is a no-op. Do not free it twice, nor while it is in use.
#[no_mangle]
pub extern "C" fn sam2_track_result_free(result: *mut sam2_track_result) {
    super::free_handle(result, "result");
}

/// Writes the frame index, the number of objects and the frame size (every mask's size).
#[no_mangle]
pub extern "C" fn sam2_track_result_count(
    result: *const sam2_track_result,
    out_frame_index: *mut u32,
    out_count: *mut usize,
    out_width: *mut u32,
    out_height: *mut u32,
) -> sam2_status {
    guard(|| {
        let r = handle_ref(result, "result")?;
        let f = arg_out(out_frame_index, "out_frame_index")?;
        let c = arg_out(out_count, "out_count")?;
        let w = arg_out(out_width, "out_width")?;
        let h = arg_out(out_height, "out_height")?;
        f.set(r.frame);
        c.set(r.objects.len());
        w.set(r.width as u32);
        h.set(r.height as u32);
        Ok(())
    })
}

/// What is known of one object on the frame.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sam2_tracked_object {
    pub object_id: u32,
    /// 1 when the object is on the frame (its score is above 0), 0 when it is judged absent
    /// (occluded, out of view): its mask is then empty.
    pub present: i32,
    /// SAM2's object score logit.
    pub score: f32,
    /// Pixels in the mask.
    pub area: u64,
    /// Inclusive `{x_min, y_min, x_max, y_max}` of the mask (zeros when empty).
    pub r#box: [u32; 4],
}

fn object_at<'a>(
    result: *const sam2_track_result,
    index: usize,
) -> Result<(&'a TrackedFrame, usize), Error> {
    let r = handle_ref(result, "result")?;
    if index >= r.objects.len() {
        return Err(Error::invalid(
            "index",
            format!(
                "is {index}, but the result holds {} objects",
                r.objects.len()
            ),
        ));
    }
    Ok((r, index))
}

/// Writes what is known of object `index` (0 ≤ index < count).
#[no_mangle]
pub extern "C" fn sam2_track_result_object(
    result: *const sam2_track_result,
    index: usize,
    out_object: *mut sam2_tracked_object,
) -> sam2_status {
    guard(|| {
        let (r, i) = object_at(result, index)?;
        let out = arg_out(out_object, "out_object")?;
        let o = &r.objects[i];
        let (bbox, area) = box_and_area(&o.mask, r.width);
        out.set(sam2_tracked_object {
            object_id: o.object_id,
            present: i32::from(o.present),
            score: o.score,
            area,
            r#box: bbox,
        });
        Ok(())
    })
}

/// Gives object `index`'s mask: `width × height` bytes, row-major, 1 = object, 0 = background.
///
/// `*out_mask` is owned by the result and valid until `sam2_track_result_free`; do not free it.
/// Out-parameters are untouched on failure.
#[no_mangle]
pub extern "C" fn sam2_track_result_mask(
    result: *const sam2_track_result,
    index: usize,
    out_mask: *mut *const u8,
    out_len: *mut usize,
) -> sam2_status {
    guard(|| {
        let (r, i) = object_at(result, index)?;
        let m = arg_out(out_mask, "out_mask")?;
        let n = arg_out(out_len, "out_len")?;
        m.set(r.objects[i].mask.as_ptr());
        n.set(r.objects[i].mask.len());
        Ok(())
    })
}

/// Gives object `index`'s low-res logits (256 × 256 floats, row-major), SAM2's `pred_masks`.
///
/// `*out_logits` is owned by the result and valid until `sam2_track_result_free`; do not free it.
/// Out-parameters are untouched on failure.
#[no_mangle]
pub extern "C" fn sam2_track_result_low_res(
    result: *const sam2_track_result,
    index: usize,
    out_logits: *mut *const f32,
    out_len: *mut usize,
) -> sam2_status {
    guard(|| {
        let (r, i) = object_at(result, index)?;
        let l = arg_out(out_logits, "out_logits")?;
        let n = arg_out(out_len, "out_len")?;
        l.set(r.objects[i].low_res.as_ptr());
        n.set(r.objects[i].low_res.len());
        Ok(())
    })
}
