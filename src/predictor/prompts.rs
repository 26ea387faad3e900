//! Prompts: clicks and boxes as the host gives them, checked against the image, and the point
//! tensors the decoder takes.

use crate::error::{Error, Result};

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

/// Largest number of objects in one call and points per object: far beyond any UI, and a bound
/// that keeps the prompt tensors small.
pub const MAX_OBJECTS: usize = 256;

pub const MAX_POINTS: usize = 1024;

/// The number of prompts of one call (`name`: the argument that holds it): 1 to [`MAX_OBJECTS`].
/// Checked before a host's array of prompts is read (the C ABI), and by [`validate_prompts`].
pub fn check_batch_size(objects: usize, name: &'static str) -> Result<()> {
    if objects == 0 {
        return Err(Error::invalid(name, "at least one prompt is needed"));
    }
    if objects > MAX_OBJECTS {
        return Err(Error::invalid(
            name,
            format!("at most {MAX_OBJECTS} objects per call, got {objects}"),
        ));
    }
    Ok(())
}

/// The sizes of one prompt: at most [`MAX_POINTS`] points, and a mask input (when given) of the
/// model's low-res mask, `low_res_size`² values. Checked before a host's arrays are read by these
/// counts (the C ABI), and by [`validate_prompts`].
pub fn check_prompt_sizes(
    points: usize,
    mask_input_len: Option<usize>,
    low_res_size: usize,
) -> Result<()> {
    if points > MAX_POINTS {
        return Err(Error::invalid(
            "points",
            format!("at most {MAX_POINTS} points per object, got {points}"),
        ));
    }
    let mask_len = low_res_size * low_res_size;
    match mask_input_len {
        Some(len) if len != mask_len => Err(Error::invalid(
            "mask_input",
            format!("must hold {mask_len} values ({low_res_size}×{low_res_size}, the model's low-res mask), got {len}"),
        )),
        _ => Ok(()),
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
    check_batch_size(prompts.len(), "prompts")?;
    let (w, h) = image_size;
    let (w, h) = (w as f32, h as f32);
    for (i, prompt) in prompts.iter().enumerate() {
        // Reasons name the prompt (and point) by index, for hosts that send a batch.
        let at = |what: String| format!("prompt {i}: {what}");
        if prompt.points.is_empty() && prompt.bbox.is_none() {
            return Err(Error::invalid(
                "prompt",
                at("is empty: give at least one point or a box".into()),
            ));
        }
        check_prompt_sizes(
            prompt.points.len(),
            prompt.mask_input.as_ref().map(Vec::len),
            low_res_size,
        )?;
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
    prompt_points_in(prompts, image_size, crate::export::INPUT_SIDE)
}

/// [`prompt_points`] with coordinates in a `side × side` frame (SAM 3's is 1008).
pub(crate) fn prompt_points_in(
    prompts: &[&Prompt],
    image_size: (u32, u32),
    side: usize,
) -> (usize, Vec<f32>, Vec<f32>) {
    let size = side as f32;
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
