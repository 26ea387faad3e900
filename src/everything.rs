//! Segment everything: masks for a whole image from a grid of single-click prompts, filtered and
//! de-duplicated the way SAM2's automatic mask generator does it (`SAM2AutomaticMaskGenerator`,
//! same parameters, same defaults, same order of steps).
//!
//! Per crop of the image (the whole image, then, with `crop_n_layers > 0`, overlapping crops
//! layer by layer): encode the crop once; run the grid's points through the decoder in batches
//! of `points_per_batch` single-click prompts; keep a candidate when its predicted IoU is above
//! `pred_iou_thresh` and its stability score (the IoU of the mask thresholded at
//! `mask_threshold ± stability_score_offset`) is at least `stability_score_thresh`; drop masks
//! whose box touches a crop edge that is not an image edge; then box NMS within the crop, and
//! across crops (preferring smaller crops).
//!
//! Memory: only the low-res logits of one batch and one crop-size buffer per worker thread exist
//! at a time; every kept mask is held run-length encoded ([`Rle`]) and decoded on request.

use rayon::prelude::*;

use crate::embedding::Embedding;
use crate::encoder::Encoder;
use crate::error::{
    try_filled, try_push, try_reserve, try_resize, try_with_capacity, Error, Result,
};
use crate::export::DecoderExport;
use crate::image::ImageView;
use crate::postprocess;
use crate::predictor::{Point, PredictOptions, Predictor, Prompt, MAX_OBJECTS};
use crate::preprocess::{taps, Tap};
use crate::resample::resample_rows;
use crate::rle::Rle;

/// The generator's parameters. Names, meanings and defaults are those of SAM2's
/// `SAM2AutomaticMaskGenerator`.
#[derive(Debug, Clone, PartialEq)]
pub struct EverythingOptions {
    /// Points along each side of the grid of clicks (`points_per_side²` clicks on the image);
    /// 0 when `point_grids` gives the points instead.
    pub points_per_side: u32,
    /// The caller's points instead of a regular grid: one list per crop layer (layer 0 is the
    /// whole image), each point `[x, y]` normalised to `[0, 1]` across its crop.
    pub point_grids: Option<Vec<Vec<[f64; 2]>>>,
    /// Clicks run through the decoder in one call (1..=256).
    pub points_per_batch: usize,
    /// Keep a mask only when its predicted IoU is above this (0 keeps every mask).
    pub pred_iou_thresh: f32,
    /// Keep a mask only when its stability score is at least this (0 keeps every mask).
    pub stability_score_thresh: f32,
    /// How far the threshold moves when the stability score is computed.
    pub stability_score_offset: f32,
    /// The logit above which a pixel belongs to the mask.
    pub mask_threshold: f32,
    /// Box IoU above which the mask of lower predicted IoU is dropped, within a crop.
    pub box_nms_thresh: f32,
    /// Layers of crops beyond the whole image; layer `i` has `2^i × 2^i` crops.
    pub crop_n_layers: u32,
    /// Box IoU above which a mask from a larger crop is dropped, across crops.
    pub crop_nms_thresh: f32,
    /// Overlap of neighbouring crops of the first layer, as a fraction of the image's short side
    /// (later layers overlap proportionally less).
    pub crop_overlap_ratio: f32,
    /// Points per side of layer `i` are `points_per_side / factor^i`.
    pub crop_n_points_downscale_factor: u32,
    /// Fill background holes and remove foreground specks of at most this many pixels of the
    /// low-res (256²) logits before a mask is made, as SAM2's predictor does (0: off).
    pub min_mask_region_area: u32,
    /// All the decoder's candidates per click (true), or only its best one.
    pub multimask: bool,
    /// The work budget: most clicks the request may run through the decoder, every crop of every
    /// layer together (default [`DEFAULT_MAX_CLICKS`]). A request over it is refused before
    /// anything runs, naming the figure.
    pub max_clicks: u64,
    /// The memory budget, in bytes (default [`DEFAULT_MAX_MEMORY_BYTES`]): what one batch of
    /// clicks needs at once (the decoder's outputs, and per worker thread a crop-sized mask and
    /// its resampled rows) is checked against it before anything runs, and that plus the
    /// candidate masks held (run-length encoded) is checked after every batch; over it, the call
    /// fails with `InvalidArgument` naming the figure.
    pub max_memory_bytes: u64,
}

/// Default [`EverythingOptions::max_clicks`]: 1,048,576 clicks (1024 points per side on the whole
/// image, or SAM2's default 32 × 32 grid on a thousand crops). The generated test decoders take
/// about 13 ms a click on 2 cores, SAM2's own decoders more: this is hours of work on a CPU.
///
/// cbindgen:ignore
pub const DEFAULT_MAX_CLICKS: u64 = 1 << 20;
/// Default [`EverythingOptions::max_memory_bytes`]: 4 GiB, what one predict may return.
///
/// cbindgen:ignore
pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 4 << 30;

impl Default for EverythingOptions {
    fn default() -> Self {
        EverythingOptions {
            points_per_side: 32,
            point_grids: None,
            points_per_batch: 64,
            pred_iou_thresh: 0.8,
            stability_score_thresh: 0.95,
            stability_score_offset: 1.0,
            mask_threshold: 0.0,
            box_nms_thresh: 0.7,
            crop_n_layers: 0,
            crop_nms_thresh: 0.7,
            crop_overlap_ratio: 512.0 / 1500.0,
            crop_n_points_downscale_factor: 1,
            min_mask_region_area: 0,
            multimask: true,
            max_clicks: DEFAULT_MAX_CLICKS,
            max_memory_bytes: DEFAULT_MAX_MEMORY_BYTES,
        }
    }
}

/// Largest number of crop layers (1 + 4 + 16 + 64 + 256 crops, each encoded).
pub(crate) const MAX_CROP_LAYERS: u32 = 4;
/// Largest number of points per side, and of points in one caller grid.
pub(crate) const MAX_POINTS_PER_SIDE: u32 = 1024;
pub(crate) const MAX_GRID_POINTS: usize = (MAX_POINTS_PER_SIDE * MAX_POINTS_PER_SIDE) as usize;
/// Distance (pixels) within which a box counts as touching a crop edge, as in SAM2.
const CROP_EDGE_TOLERANCE: f32 = 20.0;

/// One mask found in the image.
#[derive(Debug, Clone, PartialEq)]
pub struct EverythingMask {
    /// The mask at the image's size.
    pub rle: Rle,
    /// Inclusive `[x_min, y_min, x_max, y_max]` in image pixels (zeros for an empty mask).
    pub bbox: [u32; 4],
    /// Pixels in the mask.
    pub area: u64,
    /// The decoder's prediction of the mask's IoU.
    pub predicted_iou: f32,
    /// IoU of the mask thresholded at `mask_threshold + offset` and at `mask_threshold - offset`.
    pub stability_score: f32,
    /// The click that made it, in image pixels.
    pub point: [f32; 2],
    /// The crop it was found in: `[x0, y0, x1, y1]`, `x1`/`y1` exclusive.
    pub crop_box: [u32; 4],
}

/// The masks of one image, in SAM2's order (by predicted IoU within a crop, best first).
#[derive(Debug, Clone)]
pub struct Everything {
    pub width: usize,
    pub height: usize,
    pub masks: Vec<EverythingMask>,
}

impl EverythingOptions {
    /// Refuses options SAM2's generator would refuse (or fail on), naming the field.
    pub fn validate(&self) -> Result<()> {
        let unit = |name: &'static str, v: f32| {
            if v.is_finite() && (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(Error::invalid(name, format!("must lie in [0, 1], got {v}")))
            }
        };
        unit("pred_iou_thresh", self.pred_iou_thresh)?;
        unit("stability_score_thresh", self.stability_score_thresh)?;
        unit("box_nms_thresh", self.box_nms_thresh)?;
        unit("crop_nms_thresh", self.crop_nms_thresh)?;
        if !(self.crop_overlap_ratio.is_finite() && (0.0..1.0).contains(&self.crop_overlap_ratio)) {
            return Err(Error::invalid(
                "crop_overlap_ratio",
                format!("must lie in [0, 1), got {}", self.crop_overlap_ratio),
            ));
        }
        for (name, v) in [
            ("stability_score_offset", self.stability_score_offset),
            ("mask_threshold", self.mask_threshold),
        ] {
            if !v.is_finite() {
                return Err(Error::invalid(name, format!("must be finite, got {v}")));
            }
        }
        if self.stability_score_offset < 0.0 {
            return Err(Error::invalid(
                "stability_score_offset",
                format!("must not be negative, got {}", self.stability_score_offset),
            ));
        }
        if self.points_per_batch == 0 || self.points_per_batch > MAX_OBJECTS {
            return Err(Error::invalid(
                "points_per_batch",
                format!(
                    "must be in 1..={MAX_OBJECTS}, got {}",
                    self.points_per_batch
                ),
            ));
        }
        if self.crop_n_layers > MAX_CROP_LAYERS {
            return Err(Error::invalid(
                "crop_n_layers",
                format!(
                    "must be in 0..={MAX_CROP_LAYERS}, got {}",
                    self.crop_n_layers
                ),
            ));
        }
        if self.max_clicks == 0 {
            return Err(Error::invalid("max_clicks", "must be at least 1"));
        }
        if self.max_memory_bytes == 0 {
            return Err(Error::invalid("max_memory_bytes", "must be at least 1"));
        }
        if self.crop_n_points_downscale_factor == 0 {
            return Err(Error::invalid(
                "crop_n_points_downscale_factor",
                "must be at least 1",
            ));
        }
        match (&self.point_grids, self.points_per_side) {
            (Some(_), n) if n != 0 => Err(Error::invalid(
                "point_grids",
                "give either points_per_side or point_grids, not both (set points_per_side to 0)",
            )),
            (None, 0) => Err(Error::invalid(
                "points_per_side",
                "must be at least 1 when no point grids are given",
            )),
            (None, n) if n > MAX_POINTS_PER_SIDE => Err(Error::invalid(
                "points_per_side",
                format!("must be at most {MAX_POINTS_PER_SIDE}, got {n}"),
            )),
            (None, n) => {
                let last = self.layer_points_per_side(n, self.crop_n_layers);
                if last == 0 {
                    return Err(Error::invalid(
                        "crop_n_points_downscale_factor",
                        format!(
                            "leaves no point on crop layer {} ({n} points per side / {}^{})",
                            self.crop_n_layers,
                            self.crop_n_points_downscale_factor,
                            self.crop_n_layers
                        ),
                    ));
                }
                Ok(())
            }
            (Some(grids), _) => {
                if grids.len() != self.crop_n_layers as usize + 1 {
                    return Err(Error::invalid(
                        "point_grids",
                        format!(
                            "needs one grid per crop layer ({}), got {}",
                            self.crop_n_layers + 1,
                            grids.len()
                        ),
                    ));
                }
                for (layer, grid) in grids.iter().enumerate() {
                    if grid.is_empty() || grid.len() > MAX_GRID_POINTS {
                        return Err(Error::invalid(
                            "point_grids",
                            format!(
                                "grid {layer} must hold 1..={MAX_GRID_POINTS} points, got {}",
                                grid.len()
                            ),
                        ));
                    }
                    if let Some(p) = grid
                        .iter()
                        .find(|p| !p.iter().all(|v| v.is_finite() && (0.0..=1.0).contains(v)))
                    {
                        return Err(Error::invalid(
                            "point_grids",
                            format!(
                                "grid {layer}: point [{}, {}] is not normalised to [0, 1]",
                                p[0], p[1]
                            ),
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    fn layer_points_per_side(&self, n: u32, layer: u32) -> u32 {
        let scale = (self.crop_n_points_downscale_factor as f64).powi(layer as i32);
        (n as f64 / scale) as u32
    }

    /// The normalised points of crop layer `layer`.
    fn grid(&self, layer: u32) -> Vec<[f64; 2]> {
        match &self.point_grids {
            Some(grids) => grids[layer as usize].clone(),
            None => point_grid(self.layer_points_per_side(self.points_per_side, layer) as usize),
        }
    }
}

/// `n × n` points at the centres of an even grid over `[0, 1]²`, rows from the top, left to right
/// within a row (SAM2's `build_point_grid`, same float64 arithmetic).
pub fn point_grid(n: usize) -> Vec<[f64; 2]> {
    let offset = 1.0 / (2 * n) as f64;
    let (start, stop) = (offset, 1.0 - offset);
    // numpy's linspace: start + i·step, the last value exactly `stop`.
    let step = if n > 1 {
        (stop - start) / (n - 1) as f64
    } else {
        0.0
    };
    let side: Vec<f64> = (0..n)
        .map(|i| {
            if n > 1 && i == n - 1 {
                stop
            } else {
                start + i as f64 * step
            }
        })
        .collect();
    let mut points = Vec::with_capacity(n * n);
    for &y in &side {
        for &x in &side {
            points.push([x, y]);
        }
    }
    points
}

/// The crops of every layer, `([x0, y0, x1, y1], layer)`: the whole image, then per layer `i ≥ 1`
/// a `2^i × 2^i` set of overlapping crops, columns outer (SAM2's `generate_crop_boxes`). Every
/// crop is inside the image and holds at least one pixel: on tiny images the crops that would
/// start beyond the edge are left out, so a layer may have fewer than `2^i × 2^i`.
pub fn crop_boxes(
    width: usize,
    height: usize,
    layers: u32,
    overlap_ratio: f32,
) -> Vec<([u32; 4], u32)> {
    let mut boxes = vec![([0, 0, width as u32, height as u32], 0)];
    let short_side = width.min(height) as f64;
    let crop_len = |len: usize, n: usize, overlap: usize| -> usize {
        ((overlap * (n - 1) + len) as f64 / n as f64).ceil() as usize
    };
    for layer in 0..layers {
        let n = 1usize << (layer + 1);
        let overlap = (overlap_ratio as f64 * short_side * (2.0 / n as f64)) as usize;
        let crop_w = crop_len(width, n, overlap);
        let crop_h = crop_len(height, n, overlap);
        let x0s: Vec<usize> = (0..n).map(|i| (crop_w - overlap) * i).collect();
        let y0s: Vec<usize> = (0..n).map(|i| (crop_h - overlap) * i).collect();
        for &x0 in &x0s {
            for &y0 in &y0s {
                // On an image a few pixels across, the last crops of a layer can start at or
                // past its edge (7×5 with two layers: crops of 2×2 starting at 6): SAM2 would
                // encode an empty image there. They hold no pixel, so they are left out.
                if x0 >= width || y0 >= height {
                    continue;
                }
                boxes.push((
                    [
                        x0 as u32,
                        y0 as u32,
                        (x0 + crop_w).min(width) as u32,
                        (y0 + crop_h).min(height) as u32,
                    ],
                    layer + 1,
                ));
            }
        }
    }
    boxes
}

/// A progress callback of segment everything: called with `(clicks done, clicks in all)` before
/// each crop is encoded and after each batch of clicks; returning `false` cancels the call, which
/// then fails with [`Error::Interrupted`]. Runs on the calling thread.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) -> bool + Sync);

/// What a request costs, as checked against the budgets before anything runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EverythingCost {
    /// Crops encoded (1 without crop layers).
    pub crops: usize,
    /// Clicks run through the decoder, every crop together (against `max_clicks`).
    pub clicks: u64,
    /// Bytes one batch needs at once before any candidate is held (against `max_memory_bytes`).
    pub batch_bytes: u64,
}

/// A byte count for a message: exact, then in MiB below a GiB or in GiB above.
fn human(bytes: u64) -> String {
    if bytes < 1 << 30 {
        format!(
            "{bytes} bytes ({:.1} MiB)",
            bytes as f64 / (1u64 << 20) as f64
        )
    } else {
        format!(
            "{bytes} bytes ({:.1} GiB)",
            bytes as f64 / (1u64 << 30) as f64
        )
    }
}

impl EverythingOptions {
    /// Points of crop layer `layer`, without making them.
    fn layer_points(&self, layer: u32) -> u64 {
        match &self.point_grids {
            Some(grids) => grids[layer as usize].len() as u64,
            None => (self.layer_points_per_side(self.points_per_side, layer) as u64).pow(2),
        }
    }

    /// [`validate`](Self::validate), then the request's work and memory on an image of
    /// `width × height` decoded by `predictor`, refused when over `max_clicks` or
    /// `max_memory_bytes` (an `InvalidArgument` naming the budget, the figure and what to do).
    pub fn validate_for(
        &self,
        width: usize,
        height: usize,
        predictor: &Predictor,
    ) -> Result<EverythingCost> {
        self.validate()?;
        let crops = crop_boxes(width, height, self.crop_n_layers, self.crop_overlap_ratio);
        let clicks: u64 = crops.iter().map(|&(_, l)| self.layer_points(l)).sum();
        if clicks > self.max_clicks {
            return Err(Error::invalid(
                "max_clicks",
                format!(
                    "the request runs {clicks} clicks through the decoder ({} crop{}), over the \
                     budget of {} (max_clicks); use fewer points per side, fewer crop layers or a \
                     larger crop_n_points_downscale_factor, or raise max_clicks",
                    crops.len(),
                    if crops.len() == 1 { "" } else { "s" },
                    self.max_clicks
                ),
            ));
        }
        let batch_bytes = self.batch_bytes(width, height, &crops, predictor);
        if batch_bytes > self.max_memory_bytes {
            return Err(Error::invalid(
                "max_memory_bytes",
                format!(
                    "segmenting everything on {width}×{height} needs {} at once for one batch of \
                     {} clicks (the decoder's outputs, and a mask of the crop's size per worker \
                     thread), over the budget of {} (max_memory_bytes); lower points_per_batch, \
                     segment a smaller image, or raise max_memory_bytes",
                    human(batch_bytes),
                    self.points_per_batch,
                    human(self.max_memory_bytes)
                ),
            ));
        }
        Ok(EverythingCost {
            crops: crops.len(),
            clicks,
            batch_bytes,
        })
    }

    /// Bytes one batch of clicks needs at once: the decoder's outputs and their copy, and per
    /// worker thread a mask of the largest crop, its resampled rows and (with crops) a mask of
    /// the image.
    fn batch_bytes(
        &self,
        width: usize,
        height: usize,
        crops: &[([u32; 4], u32)],
        predictor: &Predictor,
    ) -> u64 {
        let (mut crop_w, mut crop_pixels) = (0u64, 0u64);
        for &([x0, y0, x1, y1], _) in crops {
            let (w, h) = ((x1 - x0) as u64, (y1 - y0) as u64);
            crop_w = crop_w.max(w);
            crop_pixels = crop_pixels.max(w * h);
        }
        let most_points = crops
            .iter()
            .map(|&(_, l)| self.layer_points(l))
            .max()
            .unwrap_or(0);
        let batch = (self.points_per_batch as u64).min(most_points).max(1);
        let lr = predictor.spec().low_res_size as u64;
        // The decoders of the three exports give three candidates a click; what they return
        // besides the low-res logits: nothing, boolean masks, or float logits at the image size.
        let model_candidates = 3u64;
        let per_pixel = match predictor.export() {
            DecoderExport::SamExporter => 0,
            DecoderExport::OnnxRuntime => 1,
            DecoderExport::OnnxSam2 => 4,
        };
        let kept_candidates = if self.multimask { model_candidates } else { 1 };
        let decoder = batch * model_candidates * (lr * lr * 4 + crop_pixels * per_pixel);
        let copy = batch * kept_candidates * lr * lr * 4;
        let full = if crops.len() > 1 {
            (width * height) as u64
        } else {
            0
        };
        let cleaning = if self.min_mask_region_area > 0 {
            lr * lr * 6
        } else {
            0
        };
        let per_thread = crop_pixels + 2 * crop_w * 4 + full + cleaning;
        let threads = (rayon::current_num_threads() as u64)
            .min(batch * kept_candidates)
            .max(1);
        decoder
            .saturating_add(copy)
            .saturating_add(threads.saturating_mul(per_thread))
    }
}

/// Segments everything in `image`: encodes the image (and each crop) with `encoder`, then runs
/// the generator. The one call a command line or a host needs.
pub fn segment_everything(
    image: &ImageView<'_>,
    encoder: &Encoder,
    predictor: &Predictor,
    options: &EverythingOptions,
) -> Result<Everything> {
    segment_everything_with_progress(image, encoder, predictor, options, None)
}

/// [`segment_everything`] with a progress callback that can cancel it (see [`Progress`]).
pub fn segment_everything_with_progress(
    image: &ImageView<'_>,
    encoder: &Encoder,
    predictor: &Predictor,
    options: &EverythingOptions,
    progress: Option<Progress<'_>>,
) -> Result<Everything> {
    let (w, h) = (image.width, image.height);
    let cost = options.validate_for(w, h, predictor)?;
    predictor.check_encoder(encoder)?;
    let crops = crop_boxes(w, h, options.crop_n_layers, options.crop_overlap_ratio);
    let mut run = Run::new(options, cost, progress);
    let mut found = Vec::new();
    for &(crop, layer) in &crops {
        run.tick()?;
        let view = crop_view(image, crop)?;
        let embedding = encoder.encode(&view)?;
        let masks = process_crop(&embedding, predictor, &mut run, crop, layer, (w, h))?;
        try_reserve(&mut found, masks.len(), "the masks found")?;
        run.held_before += masks.iter().map(|m| held(&m.rle)).sum::<u64>();
        found.extend(masks);
    }
    run.tick()?;
    finish(found, crops.len(), (w, h), options)
}

/// Segments everything on an image already encoded (no crops: `crop_n_layers` must be 0, since
/// crops need encodes of their own; use [`segment_everything`] for those).
pub fn segment_everything_embedding(
    embedding: &Embedding,
    predictor: &Predictor,
    options: &EverythingOptions,
) -> Result<Everything> {
    segment_everything_embedding_with_progress(embedding, predictor, options, None)
}

/// [`segment_everything_embedding`] with a progress callback that can cancel it (see
/// [`Progress`]).
pub fn segment_everything_embedding_with_progress(
    embedding: &Embedding,
    predictor: &Predictor,
    options: &EverythingOptions,
    progress: Option<Progress<'_>>,
) -> Result<Everything> {
    options.validate()?;
    if options.crop_n_layers != 0 {
        return Err(Error::invalid(
            "crop_n_layers",
            "must be 0 on an embedding (crops are encoded separately): pass the image instead",
        ));
    }
    let (w, h) = embedding.image_size();
    let (w, h) = (w as usize, h as usize);
    let cost = options.validate_for(w, h, predictor)?;
    let mut run = Run::new(options, cost, progress);
    run.tick()?;
    let crop = [0, 0, w as u32, h as u32];
    let found = process_crop(embedding, predictor, &mut run, crop, 0, (w, h))?;
    run.tick()?;
    finish(found, 1, (w, h), options)
}

/// Bytes a kept mask holds, for the memory budget.
fn held(rle: &Rle) -> u64 {
    (rle.held_bytes() + std::mem::size_of::<EverythingMask>()) as u64
}

/// One call's progress and budgets.
struct Run<'a> {
    options: &'a EverythingOptions,
    cost: EverythingCost,
    progress: Option<Progress<'a>>,
    /// Clicks run so far.
    done: u64,
    /// Bytes of the masks kept from the crops finished.
    held_before: u64,
}

impl<'a> Run<'a> {
    fn new(
        options: &'a EverythingOptions,
        cost: EverythingCost,
        progress: Option<Progress<'a>>,
    ) -> Self {
        Run {
            options,
            cost,
            progress,
            done: 0,
            held_before: 0,
        }
    }

    /// Reports progress; the callback's `false` cancels.
    fn tick(&self) -> Result<()> {
        match self.progress {
            Some(progress) if !progress(self.done, self.cost.clicks) => Err(Error::Interrupted {
                what: "segment everything",
                done: self.done,
                total: self.cost.clicks,
                unit: "clicks",
            }),
            _ => Ok(()),
        }
    }

    /// Refuses to go on when the candidates held (`held_now` bytes in this crop, and the masks of
    /// earlier crops) and one batch's needs pass the memory budget.
    fn check_memory(&self, held_now: u64, candidates: usize) -> Result<()> {
        let total = self.cost.batch_bytes + self.held_before + held_now;
        if total > self.options.max_memory_bytes {
            return Err(Error::invalid(
                "max_memory_bytes",
                format!(
                    "after {} of {} clicks segment everything holds {} ({candidates} candidate \
                     masks of this crop, {} from earlier crops, {} for a batch), over the budget \
                     of {} (max_memory_bytes); raise pred_iou_thresh or stability_score_thresh \
                     so that fewer candidates are kept, use fewer points, or raise \
                     max_memory_bytes",
                    self.done,
                    self.cost.clicks,
                    human(total),
                    human(self.held_before),
                    human(self.cost.batch_bytes),
                    human(self.options.max_memory_bytes)
                ),
            ));
        }
        Ok(())
    }
}

/// The pixels of `crop` as an image view over the same buffer (same stride).
fn crop_view<'a>(image: &ImageView<'a>, crop: [u32; 4]) -> Result<ImageView<'a>> {
    let [x0, y0, x1, y1] = crop.map(|v| v as usize);
    if (x0, y0, x1, y1) == (0, 0, image.width, image.height) {
        return Ok(*image);
    }
    let start = y0 * image.stride + x0 * image.format.channels();
    ImageView::new(
        &image.data[start..],
        x1 - x0,
        y1 - y0,
        image.stride,
        image.format,
    )
}

/// Cross-crop NMS (when there are several crops), preferring masks of smaller crops.
fn finish(
    mut found: Vec<EverythingMask>,
    crops: usize,
    (width, height): (usize, usize),
    options: &EverythingOptions,
) -> Result<Everything> {
    if crops > 1 && !found.is_empty() {
        let scores: Vec<f32> = found
            .iter()
            .map(|m| {
                let [x0, y0, x1, y1] = m.crop_box;
                1.0 / ((x1 - x0) as f32 * (y1 - y0) as f32)
            })
            .collect();
        let boxes: Vec<[u32; 4]> = found.iter().map(|m| m.bbox).collect();
        let keep = nms(&boxes, &scores, options.crop_nms_thresh)?;
        let mut slots: Vec<Option<EverythingMask>> = found.into_iter().map(Some).collect();
        found = keep
            .iter()
            .map(|&i| slots[i].take().expect("kept once"))
            .collect();
    }
    Ok(Everything {
        width,
        height,
        masks: found,
    })
}

/// A candidate that passed the filters, in crop coordinates.
struct Kept {
    rle: Rle,
    bbox: [u32; 4],
    area: u64,
    predicted_iou: f32,
    stability_score: f32,
    point: [f32; 2],
}

/// Per-thread buffers of the mask making.
#[derive(Default)]
struct Scratch {
    /// The two resampled low-res rows the kernel caches, `2 × crop width`.
    rows: Vec<f32>,
    /// The mask at the crop's size.
    mask: Vec<u8>,
    /// The mask at the image's size (crops only).
    full: Vec<u8>,
    /// Logits after hole filling (`min_mask_region_area`).
    cleaned: Vec<f32>,
}

/// Resampling taps of one crop, shared by every mask made in it.
struct Geometry {
    crop: [u32; 4],
    crop_w: usize,
    crop_h: usize,
    image_w: usize,
    image_h: usize,
    low_res: usize,
    xt: Vec<Tap>,
    yt: Vec<Tap>,
}

fn process_crop(
    embedding: &Embedding,
    predictor: &Predictor,
    run: &mut Run<'_>,
    crop: [u32; 4],
    layer: u32,
    (image_w, image_h): (usize, usize),
) -> Result<Vec<EverythingMask>> {
    let options = run.options;
    let (crop_w, crop_h) = embedding.image_size();
    let (crop_w, crop_h) = (crop_w as usize, crop_h as usize);
    let low_res = predictor.spec().low_res_size;
    let geometry = Geometry {
        crop,
        crop_w,
        crop_h,
        image_w,
        image_h,
        low_res,
        xt: taps(low_res, crop_w),
        yt: taps(low_res, crop_h),
    };
    // SAM2 scales the normalised grid by the crop's size in float64, then rounds to float32.
    let points: Vec<[f32; 2]> = options
        .grid(layer)
        .iter()
        .map(|p| [(p[0] * crop_w as f64) as f32, (p[1] * crop_h as f64) as f32])
        .collect();
    let predict = PredictOptions {
        multimask: options.multimask,
    };
    let mut kept: Vec<Kept> = Vec::new();
    let mut held_now = 0u64;
    for batch in points.chunks(options.points_per_batch) {
        let prompts: Vec<Prompt> = batch
            .iter()
            .map(|&[x, y]| Prompt {
                points: vec![Point {
                    x,
                    y,
                    positive: true,
                }],
                ..Default::default()
            })
            .collect();
        let prediction = predictor.predict_low_res(embedding, &prompts, predict)?;
        let per_point = prediction.candidates;
        // SAM2's order: the predicted-IoU filter first (no pixels touched), then the masks.
        let survivors: Vec<usize> = (0..prediction.scores.len())
            .filter(|&k| {
                options.pred_iou_thresh <= 0.0 || prediction.scores[k] > options.pred_iou_thresh
            })
            .collect();
        let made: Vec<Option<Kept>> = survivors
            .par_iter()
            .map_init(Scratch::default, |scratch, &k| {
                make_mask(
                    prediction.low_res_logits(k),
                    prediction.scores[k],
                    batch[k / per_point],
                    &geometry,
                    options,
                    scratch,
                )
            })
            .collect::<Result<_>>()?;
        drop(prediction);
        let made = made.into_iter().flatten();
        try_reserve(&mut kept, survivors.len(), "the candidate masks")?;
        for m in made {
            held_now += (m.rle.held_bytes() + std::mem::size_of::<Kept>()) as u64;
            kept.push(m);
        }
        run.done += batch.len() as u64;
        run.check_memory(held_now, kept.len())?;
        run.tick()?;
    }

    // Duplicates within the crop, the best predicted IoU first.
    let boxes: Vec<[u32; 4]> = kept.iter().map(|m| m.bbox).collect();
    let scores: Vec<f32> = kept.iter().map(|m| m.predicted_iou).collect();
    let keep = nms(&boxes, &scores, options.box_nms_thresh)?;
    let mut slots: Vec<Option<Kept>> = kept.into_iter().map(Some).collect();
    let [x0, y0, _, _] = crop;
    let mut out = try_with_capacity(keep.len(), "the masks found")?;
    out.extend(keep.iter().map(|&i| {
        let m = slots[i].take().expect("kept once");
        let [bx0, by0, bx1, by1] = m.bbox;
        EverythingMask {
            rle: m.rle,
            bbox: [bx0 + x0, by0 + y0, bx1 + x0, by1 + y0],
            area: m.area,
            predicted_iou: m.predicted_iou,
            stability_score: m.stability_score,
            point: [m.point[0] + x0 as f32, m.point[1] + y0 as f32],
            crop_box: crop,
        }
    }));
    Ok(out)
}

/// One candidate's mask, or `None` when a filter drops it: optional hole and speck removal on the
/// low-res logits, upsampling to the crop with the stability counts taken on the way, the box,
/// the crop-edge filter, and the run-length encoding at the image's size. Every buffer the sizes
/// call for is reserved fallibly: memory that cannot be had is [`Error::OutOfMemory`].
fn make_mask(
    logits: &[f32],
    predicted_iou: f32,
    point: [f32; 2],
    g: &Geometry,
    options: &EverythingOptions,
    scratch: &mut Scratch,
) -> Result<Option<Kept>> {
    let logits = if options.min_mask_region_area > 0 {
        scratch.cleaned.clear();
        try_reserve(&mut scratch.cleaned, logits.len(), "the cleaned logits")?;
        scratch.cleaned.extend_from_slice(logits);
        remove_small_regions(
            &mut scratch.cleaned,
            g.low_res,
            options.mask_threshold,
            options.min_mask_region_area as usize,
        );
        &scratch.cleaned[..]
    } else {
        logits
    };
    try_resize(
        &mut scratch.mask,
        g.crop_w * g.crop_h,
        0,
        "a candidate mask at the crop's size",
    )?;
    try_resize(
        &mut scratch.rows,
        2 * g.crop_w,
        0.0,
        "the resampled rows of a candidate mask",
    )?;
    let (high, low) = upsample_with_stability(
        logits,
        g,
        options.mask_threshold,
        options.stability_score_offset,
        &mut scratch.rows,
        &mut scratch.mask,
    );
    // SAM2 divides the counts as they are (an empty union gives NaN, which no threshold above
    // 0 keeps); here an empty union scores 0, which no such threshold keeps either.
    let stability_score = if low == 0 {
        0.0
    } else {
        high as f32 / low as f32
    };
    if options.stability_score_thresh > 0.0 && stability_score < options.stability_score_thresh {
        return Ok(None);
    }
    let (bbox, area) = postprocess::box_and_area(&scratch.mask, g.crop_w);
    if touches_crop_edge(bbox, g) {
        return Ok(None);
    }
    let rle = if (g.crop_w, g.crop_h) == (g.image_w, g.image_h) {
        Rle::try_encode(&scratch.mask, g.crop_w, g.crop_h)?
    } else {
        scratch.full.clear();
        try_resize(
            &mut scratch.full,
            g.image_w * g.image_h,
            0,
            "a candidate mask at the image's size",
        )?;
        let [x0, y0, _, _] = g.crop.map(|v| v as usize);
        for (y, row) in scratch.mask.chunks(g.crop_w).enumerate() {
            let at = (y0 + y) * g.image_w + x0;
            scratch.full[at..at + g.crop_w].copy_from_slice(row);
        }
        Rle::try_encode(&scratch.full, g.image_w, g.image_h)?
    };
    Ok(Some(Kept {
        rle,
        bbox,
        area,
        predicted_iou,
        stability_score,
        point,
    }))
}

/// Upsampling of one low-res logit map to the crop by [`crate::resample`]'s kernel (the
/// predictor's masks' arithmetic), writing `value > threshold` into `mask` and returning the
/// counts of pixels above `threshold + offset` and above `threshold - offset` (the stability
/// score's intersection and union), so that no full-size logit map is ever stored.
fn upsample_with_stability(
    logits: &[f32],
    g: &Geometry,
    threshold: f32,
    offset: f32,
    rows: &mut Vec<f32>,
    mask: &mut [u8],
) -> (u64, u64) {
    rows.resize(2 * g.crop_w, 0.0);
    let (hi_t, lo_t) = (threshold + offset, threshold - offset);
    let (mut high, mut low) = (0u64, 0u64);
    resample_rows(logits, g.low_res, &g.xt, &g.yt, rows, mask, |dst, blend| {
        let (mut h, mut l) = (0u32, 0u32);
        for (d, v) in dst.iter_mut().zip(blend.values()) {
            *d = (v > threshold) as u8;
            h += (v > hi_t) as u32;
            l += (v > lo_t) as u32;
        }
        high += h as u64;
        low += l as u64;
    });
    (high, low)
}

/// Whether a box (inclusive, crop coordinates) lies within the tolerance of a crop edge that is
/// not also an edge of the image (SAM2's `is_box_near_crop_edge`).
fn touches_crop_edge(bbox: [u32; 4], g: &Geometry) -> bool {
    let [cx0, cy0, _, _] = g.crop;
    let b = [
        (bbox[0] + cx0) as f32,
        (bbox[1] + cy0) as f32,
        (bbox[2] + cx0) as f32,
        (bbox[3] + cy0) as f32,
    ];
    let crop = g.crop.map(|v| v as f32);
    let image = [0.0, 0.0, g.image_w as f32, g.image_h as f32];
    (0..4).any(|i| {
        (b[i] - crop[i]).abs() <= CROP_EDGE_TOLERANCE
            && (b[i] - image[i]).abs() > CROP_EDGE_TOLERANCE
    })
}

/// Greedy non-maximum suppression on inclusive boxes, as torchvision's `nms` computes it (areas
/// `(x1 - x0)·(y1 - y0)`, a box dropped when its IoU with a kept one is above `threshold`, ties
/// in score kept in input order). Returns the kept indices, best score first.
pub(crate) fn nms(boxes: &[[u32; 4]], scores: &[f32], threshold: f32) -> Result<Vec<usize>> {
    let what = "the non-maximum suppression";
    let mut order: Vec<usize> = try_with_capacity(boxes.len(), what)?;
    order.extend(0..boxes.len());
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let mut fb: Vec<[f32; 4]> = try_with_capacity(boxes.len(), what)?;
    fb.extend(boxes.iter().map(|b| b.map(|v| v as f32)));
    let area = |b: &[f32; 4]| (b[2] - b[0]) * (b[3] - b[1]);
    let mut suppressed = try_filled(boxes.len(), false, what)?;
    let mut keep = Vec::new();
    for (n, &i) in order.iter().enumerate() {
        if suppressed[i] {
            continue;
        }
        try_push(&mut keep, i, what)?;
        let a = &fb[i];
        for &j in &order[n + 1..] {
            if suppressed[j] {
                continue;
            }
            let b = &fb[j];
            let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
            let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
            let inter = w * h;
            let union = area(a) + area(b) - inter;
            if union > 0.0 && inter / union > threshold {
                suppressed[j] = true;
            }
        }
    }
    Ok(keep)
}

/// SAM2's predictor clean-up with `max_hole_area = max_sprinkle_area = max_area` on one
/// `side × side` logit map: background components (8-connected, `≤ threshold`) of at most
/// `max_area` pixels become foreground (`threshold + 10`), then foreground components of at most
/// `max_area` pixels become background (`threshold - 10`).
fn remove_small_regions(logits: &mut [f32], side: usize, threshold: f32, max_area: usize) {
    let background: Vec<bool> = logits.iter().map(|&v| v <= threshold).collect();
    for_small_components(&background, side, max_area, |i| {
        logits[i] = threshold + 10.0
    });
    let foreground: Vec<bool> = logits.iter().map(|&v| v > threshold).collect();
    for_small_components(&foreground, side, max_area, |i| {
        logits[i] = threshold - 10.0
    });
}

/// Calls `apply` on every pixel of each 8-connected component of `set` with at most `max_area`
/// pixels.
fn for_small_components(set: &[bool], side: usize, max_area: usize, mut apply: impl FnMut(usize)) {
    let mut seen = vec![false; set.len()];
    let mut component = Vec::new();
    let mut stack = Vec::new();
    for start in 0..set.len() {
        if !set[start] || seen[start] {
            continue;
        }
        component.clear();
        seen[start] = true;
        stack.push(start);
        while let Some(i) = stack.pop() {
            component.push(i);
            let (x, y) = ((i % side) as isize, (i / side) as isize);
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let (nx, ny) = (x + dx, y + dy);
                    if nx < 0 || ny < 0 || nx >= side as isize || ny >= side as isize {
                        continue;
                    }
                    let j = ny as usize * side + nx as usize;
                    if set[j] && !seen[j] {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        if component.len() <= max_area {
            component.iter().for_each(|&i| apply(i));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_is_sam2s_cell_centres_rows_first() {
        let g = point_grid(4);
        assert_eq!(g.len(), 16);
        assert_eq!(g[0], [0.125, 0.125]);
        assert_eq!(g[1], [0.375, 0.125]);
        assert_eq!(g[4], [0.125, 0.375]);
        assert_eq!(g[15], [0.875, 0.875]);
        assert_eq!(point_grid(1), vec![[0.5, 0.5]]);
    }

    #[test]
    fn crop_boxes_overlap_and_cover_the_image_as_sam2s_do() {
        // SAM2's generate_crop_boxes((1080, 1920), 1, 512 / 1500): short side 1080, overlap
        // int(512/1500 · 1080) = 368, crops ceil((368 + 1920) / 2) = 1144 by ceil((368 + 1080) / 2)
        // = 724, columns outer.
        let b = crop_boxes(1920, 1080, 1, 512.0 / 1500.0);
        assert_eq!(
            b,
            vec![
                ([0, 0, 1920, 1080], 0),
                ([0, 0, 1144, 724], 1),
                ([0, 356, 1144, 1080], 1),
                ([776, 0, 1920, 724], 1),
                ([776, 356, 1920, 1080], 1),
            ]
        );
    }

    #[test]
    fn nms_keeps_the_best_of_overlapping_boxes_and_ties_in_input_order() {
        let boxes = [
            [0, 0, 10, 10],
            [1, 1, 10, 10],
            [20, 20, 30, 30],
            [0, 0, 10, 10],
        ];
        assert_eq!(nms(&boxes, &[0.5, 0.9, 0.1, 0.9], 0.7).unwrap(), vec![1, 2]);
        // Equal scores: the earlier box wins.
        assert_eq!(nms(&boxes[..1], &[1.0], 0.7).unwrap(), vec![0]);
        assert_eq!(
            nms(&[[0, 0, 10, 10], [0, 0, 10, 10]], &[1.0, 1.0], 0.7).unwrap(),
            vec![0]
        );
        // An IoU exactly at the threshold is kept (torchvision drops only above it).
        assert_eq!(
            nms(&[[0, 0, 10, 10], [0, 0, 10, 5]], &[1.0, 0.5], 0.5).unwrap(),
            vec![0, 1]
        );
    }

    #[test]
    fn small_holes_are_filled_and_small_specks_removed_eight_connected() {
        let side = 8;
        let mut logits = vec![-5.0f32; side * side];
        // A 4×4 square with a one-pixel hole, and a two-pixel diagonal speck elsewhere.
        for y in 1..5 {
            for x in 1..5 {
                logits[y * side + x] = 5.0;
            }
        }
        logits[2 * side + 2] = -5.0;
        logits[6 * side + 6] = 5.0;
        logits[7 * side + 7] = 5.0;
        remove_small_regions(&mut logits, side, 0.0, 2);
        assert_eq!(logits[2 * side + 2], 10.0, "hole filled");
        assert_eq!(logits[6 * side + 6], -10.0, "speck removed");
        assert_eq!(
            logits[7 * side + 7],
            -10.0,
            "diagonal neighbour is the same speck"
        );
        assert_eq!(logits[side + 1], 5.0, "the square stays");
    }

    #[test]
    fn the_stability_counts_and_the_mask_follow_the_thresholds() {
        // A ramp from -3.5 to 3.5 across 8 columns, upsampled 1:1: thresholds at 0 ± 1.
        let side = 8;
        let logits: Vec<f32> = (0..side * side).map(|i| (i % side) as f32 - 3.5).collect();
        let g = Geometry {
            crop: [0, 0, 8, 8],
            crop_w: 8,
            crop_h: 8,
            image_w: 8,
            image_h: 8,
            low_res: side,
            xt: taps(side, 8),
            yt: taps(side, 8),
        };
        let mut rows = Vec::new();
        let mut mask = vec![0u8; 64];
        let (high, low) = upsample_with_stability(&logits, &g, 0.0, 1.0, &mut rows, &mut mask);
        // Columns of value 1.5, 2.5, 3.5 are above 1; -0.5 and up are above -1.
        assert_eq!((high, low), (3 * 8, 5 * 8));
        assert_eq!(&mask[..8], &[0, 0, 0, 0, 1, 1, 1, 1]);
    }

    #[test]
    fn the_generators_masks_are_the_predictors_masks() {
        // Same logits, odd sizes: the pass that also counts for the stability score must
        // threshold exactly as `predict` does.
        let side = 256;
        let logits: Vec<f32> = (0..side * side)
            .map(|i| ((i * 7919 % 1013) as f32 / 101.3 - 5.0) * if i % 3 == 0 { -1.0 } else { 1.0 })
            .collect();
        let (w, h) = (801, 333);
        let g = Geometry {
            crop: [0, 0, w as u32, h as u32],
            crop_w: w,
            crop_h: h,
            image_w: w,
            image_h: h,
            low_res: side,
            xt: taps(side, w),
            yt: taps(side, h),
        };
        let (mut rows, mut ours, mut theirs) = (Vec::new(), vec![0u8; w * h], vec![0u8; w * h]);
        let (high, low) = upsample_with_stability(&logits, &g, 0.0, 1.0, &mut rows, &mut ours);
        postprocess::upsample_threshold(&logits, side, side, w, h, &mut theirs);
        assert!(ours == theirs, "masks differ");
        let area = ours.iter().map(|&v| v as u64).sum::<u64>();
        assert!(high <= area && area <= low, "{high} <= {area} <= {low}");
    }

    #[test]
    fn options_sam2_would_refuse_are_refused_by_name() {
        let bad = |o: EverythingOptions| match o.validate() {
            Err(Error::InvalidArgument { name, .. }) => name,
            other => panic!("{o:?}: {other:?}"),
        };
        let d = EverythingOptions::default();
        d.validate().unwrap();
        assert_eq!(
            bad(EverythingOptions {
                points_per_batch: 0,
                ..d.clone()
            }),
            "points_per_batch"
        );
        assert_eq!(
            bad(EverythingOptions {
                pred_iou_thresh: f32::NAN,
                ..d.clone()
            }),
            "pred_iou_thresh"
        );
        assert_eq!(
            bad(EverythingOptions {
                point_grids: Some(vec![vec![[0.5, 0.5]]]),
                ..d.clone()
            }),
            "point_grids"
        );
        assert_eq!(
            bad(EverythingOptions {
                points_per_side: 0,
                point_grids: Some(vec![vec![[1.5, 0.5]]]),
                ..d.clone()
            }),
            "point_grids"
        );
        assert_eq!(
            bad(EverythingOptions {
                points_per_side: 4,
                crop_n_layers: 2,
                crop_n_points_downscale_factor: 4,
                ..d.clone()
            }),
            "crop_n_points_downscale_factor"
        );
        assert_eq!(
            bad(EverythingOptions {
                crop_overlap_ratio: 1.0,
                ..d
            }),
            "crop_overlap_ratio"
        );
    }
}
