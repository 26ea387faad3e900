//! A candidate's mask: hole and speck removal on the low-res logits, upsampling to the crop with
//! the stability counts, the crop-edge filter, run-length encoding; and the box NMS between masks.

use crate::error::{try_filled, try_push, try_reserve, try_resize, try_with_capacity, Result};
use crate::postprocess;
use crate::preprocess::Tap;
use crate::resample::resample_rows;
use crate::rle::Rle;

use super::EverythingOptions;

/// Distance (pixels) within which a box counts as touching a crop edge, as in SAM2.
pub(super) const CROP_EDGE_TOLERANCE: f32 = 20.0;

/// A candidate that passed the filters, in crop coordinates.
pub(super) struct Kept {
    pub(super) rle: Rle,
    pub(super) bbox: [u32; 4],
    pub(super) area: u64,
    pub(super) predicted_iou: f32,
    pub(super) stability_score: f32,
    pub(super) point: [f32; 2],
}

/// Per-thread buffers of the mask making.
#[derive(Default)]
pub(super) struct Scratch {
    /// The two resampled low-res rows the kernel caches, `2 × crop width`.
    pub(super) rows: Vec<f32>,
    /// The mask at the crop's size.
    pub(super) mask: Vec<u8>,
    /// The mask at the image's size (crops only).
    pub(super) full: Vec<u8>,
    /// Logits after hole filling (`min_mask_region_area`).
    pub(super) cleaned: Vec<f32>,
}

/// Resampling taps of one crop, shared by every mask made in it.
pub(super) struct Geometry {
    pub(super) crop: [u32; 4],
    pub(super) crop_w: usize,
    pub(super) crop_h: usize,
    pub(super) image_w: usize,
    pub(super) image_h: usize,
    pub(super) low_res: usize,
    pub(super) xt: Vec<Tap>,
    pub(super) yt: Vec<Tap>,
}

/// One candidate's mask, or `None` when a filter drops it: optional hole and speck removal on the
/// low-res logits, upsampling to the crop with the stability counts taken on the way, the box,
/// the crop-edge filter, and the run-length encoding at the image's size. Every buffer the sizes
/// call for is reserved fallibly: memory that cannot be had is [`Error::OutOfMemory`].
pub(super) fn make_mask(
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
    // SAM2 divides the counts as they are: an empty union gives NaN, which no threshold keeps,
    // 0 included (`NaN >= 0` is false). Such a mask is empty at every threshold: dropped.
    if low == 0 {
        return Ok(None);
    }
    let stability_score = high as f32 / low as f32;
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
pub(super) fn upsample_with_stability(
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
pub(super) fn touches_crop_edge(bbox: [u32; 4], g: &Geometry) -> bool {
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
            // Boxes of no area (a mask one pixel wide or tall, or empty: SAM2's boxes are
            // inclusive) have an IoU of 0/0, which torchvision never suppresses: on an image a
            // pixel or two across every mask was kept as often as it was predicted. The same
            // box twice is one box.
            if (union > 0.0 && inter / union > threshold) || (union == 0.0 && a == b) {
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
pub(super) fn remove_small_regions(
    logits: &mut [f32],
    side: usize,
    threshold: f32,
    max_area: usize,
) {
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
pub(super) fn for_small_components(
    set: &[bool],
    side: usize,
    max_area: usize,
    mut apply: impl FnMut(usize),
) {
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
