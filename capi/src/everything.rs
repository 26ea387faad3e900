//! `sam2_everything`: segment everything (SAM2's automatic mask generator) and its result.

use super::embedding::sam2_embedding;
use super::encoder::{image_arg, sam2_encoder};
use super::predictor::sam2_predictor;
use super::sam2_status;
use super::{arg_out, arg_slice, guard, handle_ref, impl_options, read_options, Handle};
use sam2::everything::{
    segment_everything_embedding_with_progress, segment_everything_with_progress, Everything,
    EverythingMask, EverythingOptions,
};
use sam2::Error;
use std::ffi::c_void;

/// Options of `sam2_segment_everything`: SAM2's `SAM2AutomaticMaskGenerator` parameters, with its
/// defaults. Initialise with `sam2_everything_options_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_everything_options {
    /// `sizeof(sam2_everything_options)`.
    pub struct_size: u32,
    /// Points along each side of the grid of clicks (default 32: 1024 clicks); 0 when `points`
    /// gives the clicks instead.
    pub points_per_side: u32,
    /// NULL, or `point_count` clicks `{x, y}` (2 floats each) normalised to [0, 1] across the
    /// image (and across each crop, on every crop layer), instead of the grid. Read during the
    /// call only.
    pub points: *const f32,
    pub point_count: usize,
    /// Clicks run through the decoder in one call, 1 to 256 (default 64).
    pub points_per_batch: u32,
    /// Keep a mask only when its predicted IoU is above this (default 0.8; 0 keeps all).
    pub pred_iou_thresh: f32,
    /// Keep a mask only when its stability score is at least this (default 0.95; 0 keeps all).
    pub stability_score_thresh: f32,
    /// Shift of the threshold for the stability score (default 1.0).
    pub stability_score_offset: f32,
    /// The logit above which a pixel belongs to a mask (default 0.0).
    pub mask_threshold: f32,
    /// Box IoU above which the mask of lower predicted IoU is dropped (default 0.7).
    pub box_nms_thresh: f32,
    /// Layers of crops beyond the whole image, 0 to 4 (default 0); layer i has 2^i × 2^i crops,
    /// each encoded.
    pub crop_n_layers: u32,
    /// Box IoU above which a mask of a larger crop is dropped, across crops (default 0.7).
    pub crop_nms_thresh: f32,
    /// Overlap of the first layer's crops, as a fraction of the short side (default 512/1500).
    pub crop_overlap_ratio: f32,
    /// Points per side of crop layer i are `points_per_side / factor^i` (default 1).
    pub crop_n_points_downscale_factor: u32,
    /// Fill holes and remove specks of at most this many low-res (256²) pixels (default 0: off).
    pub min_mask_region_area: u32,
    /// 1 (default): every candidate of each click; 0: only its best one.
    pub multimask: u32,
    /// The work budget: most clicks run through the decoder, every crop together (default
    /// 1048576). A request over it is refused before anything runs with
    /// `SAM2_ERR_INVALID_ARGUMENT` naming `max_clicks` and the request's figure. Added in the
    /// second version of this struct (older callers get the default).
    pub max_clicks: u64,
    /// The memory budget in bytes (default 4 GiB): what one batch needs at once (the decoder's
    /// outputs, a crop-sized mask per worker thread) is checked before anything runs, and that
    /// plus the candidate masks held is checked after each batch; over it the call returns
    /// `SAM2_ERR_INVALID_ARGUMENT` naming `max_memory_bytes` and the figure. Second version.
    pub max_memory_bytes: u64,
    /// NULL, or called on the calling thread before each crop is encoded and after each batch
    /// of clicks with the clicks done and the clicks in all; returning non-zero cancels the call,
    /// which then returns `SAM2_ERR_CANCELLED` (nothing is written to `*out`). To cancel from
    /// another thread, have it set a flag this callback returns. Second version.
    pub progress: sam2_progress_fn,
    /// Passed back unchanged to `progress`.
    pub progress_user: *mut c_void,
}

/// A progress callback: `done` of `total` units of work (clicks, for segment everything) are
/// finished; return 0 to go on, non-zero to cancel. Runs on the thread that made the call; it
/// may read its own state and set flags, but must not free what the call is using.
pub type sam2_progress_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, done: u64, total: u64) -> i32>;

// Earlier published versions of `sam2_everything_options`: the first, without the budgets and the
// progress callback (it ends where `max_clicks` begins).
impl_options!(
    sam2_everything_options,
    earlier_sizes: [std::mem::offset_of!(sam2_everything_options, max_clicks)]
);

impl Default for sam2_everything_options {
    fn default() -> Self {
        let d = EverythingOptions::default();
        sam2_everything_options {
            struct_size: std::mem::size_of::<Self>() as u32,
            points_per_side: d.points_per_side,
            points: std::ptr::null(),
            point_count: 0,
            points_per_batch: d.points_per_batch as u32,
            pred_iou_thresh: d.pred_iou_thresh,
            stability_score_thresh: d.stability_score_thresh,
            stability_score_offset: d.stability_score_offset,
            mask_threshold: d.mask_threshold,
            box_nms_thresh: d.box_nms_thresh,
            crop_n_layers: d.crop_n_layers,
            crop_nms_thresh: d.crop_nms_thresh,
            crop_overlap_ratio: d.crop_overlap_ratio,
            crop_n_points_downscale_factor: d.crop_n_points_downscale_factor,
            min_mask_region_area: d.min_mask_region_area,
            multimask: d.multimask as u32,
            max_clicks: d.max_clicks,
            max_memory_bytes: d.max_memory_bytes,
            progress: None,
            progress_user: std::ptr::null_mut(),
        }
    }
}

/// The host's progress callback, as the core takes one.
struct HostProgress {
    callback: unsafe extern "C" fn(*mut c_void, u64, u64) -> i32,
    user: *mut c_void,
}

// SAFETY: the core calls the progress callback on the calling thread only (documented on
// `sam2_progress_fn`); `Sync` is what the core's signature asks of it.
unsafe impl Sync for HostProgress {}

impl HostProgress {
    fn go_on(&self, done: u64, total: u64) -> bool {
        // SAFETY: the host's function, called with the pointer it gave, as documented.
        unsafe { (self.callback)(self.user, done, total) == 0 }
    }
}

/// Fills `options` with the defaults and sets its `struct_size`; pass
/// `sizeof(sam2_everything_options)` (see `sam2_encoder_options_init`).
#[no_mangle]
pub extern "C" fn sam2_everything_options_init(
    options: *mut sam2_everything_options,
    struct_size: usize,
) -> sam2_status {
    super::init_options(options, struct_size)
}

/// The options as the core takes them (the core validates the values), and the progress callback.
fn convert_options(
    ptr: *const sam2_everything_options,
) -> Result<(EverythingOptions, Option<HostProgress>), Error> {
    let o = read_options(ptr, "options")?;
    let progress = o.progress.map(|callback| HostProgress {
        callback,
        user: o.progress_user,
    });
    if o.point_count > sam2::limits::MAX_GRID_POINTS {
        return Err(Error::invalid(
            "options.point_count",
            format!(
                "must be at most {}, got {}",
                sam2::limits::MAX_GRID_POINTS,
                o.point_count
            ),
        ));
    }
    let point_grids = if o.points.is_null() && o.point_count == 0 {
        None
    } else {
        if o.points.is_null() {
            return Err(Error::NullArgument("options.points"));
        }
        if o.point_count == 0 {
            return Err(Error::invalid(
                "options.point_count",
                "must be at least 1 when points are given",
            ));
        }
        let raw = arg_slice(o.points, o.point_count * 2, "options.points")?;
        let points: Vec<[f64; 2]> = raw
            .chunks_exact(2)
            .map(|p| [p[0] as f64, p[1] as f64])
            .collect();
        Some(vec![
            points;
            o.crop_n_layers.min(sam2::limits::MAX_CROP_LAYERS)
                as usize
                + 1
        ])
    };
    let options = EverythingOptions {
        points_per_side: o.points_per_side,
        point_grids,
        points_per_batch: o.points_per_batch as usize,
        pred_iou_thresh: o.pred_iou_thresh,
        stability_score_thresh: o.stability_score_thresh,
        stability_score_offset: o.stability_score_offset,
        mask_threshold: o.mask_threshold,
        box_nms_thresh: o.box_nms_thresh,
        crop_n_layers: o.crop_n_layers,
        crop_nms_thresh: o.crop_nms_thresh,
        crop_overlap_ratio: o.crop_overlap_ratio,
        crop_n_points_downscale_factor: o.crop_n_points_downscale_factor,
        min_mask_region_area: o.min_mask_region_area,
        multimask: super::flag(o.multimask, "options.multimask")?,
        max_clicks: o.max_clicks,
        max_memory_bytes: o.max_memory_bytes,
    };
    Ok((options, progress))
}

/// The masks segment everything found in one image. Opaque and immutable; release with
/// `sam2_everything_free`. Masks are held run-length encoded; pointers it hands out stay valid
/// until then. Thread-safe: several threads may read it at once.
pub struct sam2_everything {
    _opaque: [u8; 0],
}
impl Handle for sam2_everything {
    type Inner = Everything;
}

/// Segments everything in an image: encodes it (and each crop, with `crop_n_layers` > 0) with
/// `encoder`, clicks a grid of points through `predictor`, and keeps the masks SAM2's automatic
/// mask generator keeps (see `sam2_everything_options`).
///
/// The pixel arguments are those of `sam2_encode`. `options`: NULL for SAM2's defaults. On success
/// `*out` receives a new result. Errors: `SAM2_ERR_INVALID_ARGUMENT` (an option out of range, or a
/// request over its work or memory budget, naming it), `SAM2_ERR_CANCELLED` (the progress callback
/// asked to stop), `SAM2_ERR_OUT_OF_MEMORY` (a buffer the image's size calls for could not be had;
/// nothing is written), `SAM2_ERR_MODEL_MISMATCH` (a predictor for another encoder), and those of
/// `sam2_encode` and `sam2_predict`. Thread-safe.
///
/// The caller owns `*out` and frees it with `sam2_everything_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_segment_everything(
    encoder: *const sam2_encoder,
    predictor: *const sam2_predictor,
    pixels: *const u8,
    pixels_len: usize,
    width: u32,
    height: u32,
    stride: usize,
    pixel_format: u32,
    options: *const sam2_everything_options,
    out: *mut *mut sam2_everything,
) -> sam2_status {
    guard(|| {
        let encoder = handle_ref(encoder, "encoder")?;
        let predictor = handle_ref(predictor, "predictor")?;
        if pixels.is_null() {
            return Err(Error::NullArgument("pixels"));
        }
        let out = arg_out(out, "out")?;
        let image = image_arg(pixels, pixels_len, width, height, stride, pixel_format)?;
        let (options, progress) = convert_options(options)?;
        let go_on = |done, total| progress.as_ref().map_or(true, |p| p.go_on(done, total));
        let result =
            segment_everything_with_progress(&image, encoder, predictor, &options, Some(&go_on))?;
        out.set(super::publish::<sam2_everything>(result));
        Ok(())
    })
}

/// Segments everything in an image already encoded (`crop_n_layers` must be 0: crops need
/// encodes of their own). Otherwise as `sam2_segment_everything`.
///
/// The caller owns `*out` and frees it with `sam2_everything_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_segment_everything_embedding(
    predictor: *const sam2_predictor,
    embedding: *const sam2_embedding,
    options: *const sam2_everything_options,
    out: *mut *mut sam2_everything,
) -> sam2_status {
    guard(|| {
        let predictor = handle_ref(predictor, "predictor")?;
        let embedding = handle_ref(embedding, "embedding")?;
        let out = arg_out(out, "out")?;
        let (options, progress) = convert_options(options)?;
        let go_on = |done, total| progress.as_ref().map_or(true, |p| p.go_on(done, total));
        let result = segment_everything_embedding_with_progress(
            &embedding.inner,
            predictor,
            &options,
            Some(&go_on),
        )?;
        out.set(super::publish::<sam2_everything>(result));
        Ok(())
    })
}

/// Releases a result. Pointers obtained from it become invalid. NULL is a no-op. Do not free it
/// twice, nor while it is in use.
#[no_mangle]
pub extern "C" fn sam2_everything_free(everything: *mut sam2_everything) {
    super::free_handle(everything, "everything");
}

/// Writes the number of masks found and the image size (every mask's size).
#[no_mangle]
pub extern "C" fn sam2_everything_count(
    everything: *const sam2_everything,
    out_count: *mut usize,
    out_width: *mut u32,
    out_height: *mut u32,
) -> sam2_status {
    guard(|| {
        let e = handle_ref(everything, "everything")?;
        let c = arg_out(out_count, "out_count")?;
        let w = arg_out(out_width, "out_width")?;
        let h = arg_out(out_height, "out_height")?;
        c.set(e.masks.len());
        w.set(e.width as u32);
        h.set(e.height as u32);
        Ok(())
    })
}

fn mask_at<'a>(
    everything: *const sam2_everything,
    index: usize,
) -> Result<&'a EverythingMask, Error> {
    let e = handle_ref(everything, "everything")?;
    e.masks.get(index).ok_or_else(|| {
        Error::invalid(
            "index",
            format!("is {index}, but the result holds {} masks", e.masks.len()),
        )
    })
}

/// What is known of one mask, beside its pixels.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sam2_everything_info {
    /// Inclusive `{x_min, y_min, x_max, y_max}` in image pixels (zeros for an empty mask).
    pub r#box: [u32; 4],
    /// Pixels in the mask.
    pub area: u64,
    /// The decoder's prediction of the mask's IoU.
    pub predicted_iou: f32,
    /// IoU of the mask thresholded at `mask_threshold ± stability_score_offset`.
    pub stability_score: f32,
    /// The click that made the mask, `{x, y}` in image pixels.
    pub point: [f32; 2],
    /// The crop it was found in, `{x0, y0, x1, y1}` (x1, y1 exclusive); the whole image without
    /// crop layers.
    pub crop_box: [u32; 4],
}

/// Writes what is known of mask `index` (0 ≤ index < count) into `*out_info`. Masks come in
/// SAM2's order: best predicted IoU first (within a crop).
#[no_mangle]
pub extern "C" fn sam2_everything_mask_info(
    everything: *const sam2_everything,
    index: usize,
    out_info: *mut sam2_everything_info,
) -> sam2_status {
    guard(|| {
        let m = mask_at(everything, index)?;
        let out = arg_out(out_info, "out_info")?;
        out.set(sam2_everything_info {
            r#box: m.bbox,
            area: m.area,
            predicted_iou: m.predicted_iou,
            stability_score: m.stability_score,
            point: m.point,
            crop_box: m.crop_box,
        });
        Ok(())
    })
}

/// Decodes mask `index` into the caller's `buf`: `width × height` bytes, row-major, 1 =
/// foreground, 0 = background. A `buf_len` below that gives `SAM2_ERR_BUFFER_TOO_SMALL` and
/// writes nothing.
#[no_mangle]
pub extern "C" fn sam2_everything_mask(
    everything: *const sam2_everything,
    index: usize,
    buf: *mut u8,
    buf_len: usize,
) -> sam2_status {
    guard(|| {
        let m = mask_at(everything, index)?;
        if buf.is_null() {
            return Err(Error::NullArgument("buf"));
        }
        let needed = m.rle.width * m.rle.height;
        if buf_len < needed {
            return Err(Error::BufferTooSmall {
                needed,
                given: buf_len,
            });
        }
        // SAFETY: non-NULL; the caller promises `buf_len` ≥ `needed` writable bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(buf, needed) };
        m.rle.decode_into(out)
    })
}

/// Gives mask `index` as COCO run lengths: `*out_count` counts, alternately of 0s and 1s (the first
/// of 0s, possibly empty), in column-major order (down the first column, then the next), as COCO's
/// uncompressed RLE.
///
/// `*out_counts` is owned by the result and valid until `sam2_everything_free`; do not free it.
/// Out-parameters are untouched on failure.
#[no_mangle]
pub extern "C" fn sam2_everything_rle(
    everything: *const sam2_everything,
    index: usize,
    out_counts: *mut *const u32,
    out_count: *mut usize,
) -> sam2_status {
    guard(|| {
        let m = mask_at(everything, index)?;
        let c = arg_out(out_counts, "out_counts")?;
        let n = arg_out(out_count, "out_count")?;
        c.set(m.rle.counts.as_ptr());
        n.set(m.rle.counts.len());
        Ok(())
    })
}
