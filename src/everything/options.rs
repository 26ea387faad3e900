//! The generator's options: SAM2's parameters and defaults, their checks, and the work and memory
//! a request will take, checked before anything runs.

use crate::error::{Error, Result};
use crate::predictor::{Predictor, MAX_OBJECTS};

use super::grid::{crop_boxes, point_grid};

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
pub const DEFAULT_MAX_CLICKS: u64 = 1 << 20;

/// Default [`EverythingOptions::max_memory_bytes`]: 4 GiB, what one predict may return.
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
pub const MAX_CROP_LAYERS: u32 = 4;

/// Largest number of points per side, and of points in one caller grid.
pub(crate) const MAX_POINTS_PER_SIDE: u32 = 1024;

pub const MAX_GRID_POINTS: usize = (MAX_POINTS_PER_SIDE * MAX_POINTS_PER_SIDE) as usize;

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

    pub(super) fn layer_points_per_side(&self, n: u32, layer: u32) -> u32 {
        let scale = (self.crop_n_points_downscale_factor as f64).powi(layer as i32);
        (n as f64 / scale) as u32
    }

    /// The normalised points of crop layer `layer`.
    pub(super) fn grid(&self, layer: u32) -> Vec<[f64; 2]> {
        match &self.point_grids {
            Some(grids) => grids[layer as usize].clone(),
            None => point_grid(self.layer_points_per_side(self.points_per_side, layer) as usize),
        }
    }
}

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
pub(super) fn human(bytes: u64) -> String {
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
    pub(super) fn layer_points(&self, layer: u32) -> u64 {
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
    pub(super) fn batch_bytes(
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
        // The decoders of every export give three candidates a click, and some their masks at
        // the image size besides the low-res logits.
        let model_candidates = 3u64;
        let per_pixel = predictor.export().full_size_bytes_per_pixel();
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
