//! Segmenting concepts on an embedding: each concept (a phrase, exemplar boxes, or both) runs
//! the decoder once, and its 200 queries become instances as Meta's `Sam3Processor` makes them:
//! a query's score is `sigmoid(logit) · sigmoid(presence)`, kept above the threshold; its box
//! (centre and size, normalised) becomes corners in image pixels; its 288² mask logits are
//! upsampled bilinearly (half-pixel centres) to the image and thresholded at 0. Then, beyond
//! Meta's processor, optional non-maximum suppression and a cap, per concept.

use ort::value::Tensor;

use super::model::{names, ConceptModel};
use crate::embedding::Embedding;
use crate::error::{try_zeroed, Error, Result};
use crate::postprocess::{box_and_area, try_upsample_threshold};

/// The phrase a concept given by boxes alone is run with, as Meta's processor does.
pub const VISUAL_PHRASE: &str = "visual";
/// Most concepts one call may segment.
pub const MAX_CONCEPTS: usize = 256;
/// Longest phrase accepted, in bytes (a phrase is cut to 30 tokens anyway).
pub const MAX_PHRASE_BYTES: usize = 16 * 1024;
/// Side of the decoder's mask logits.
pub const MASK_SIDE: usize = 288;

/// An exemplar box: corners in image pixels, and whether it shows the concept (positive) or
/// something that is not it (negative).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exemplar {
    /// `[x1, y1, x2, y2]`, inside the image, `x1 < x2` and `y1 < y2`.
    pub rect: [f32; 4],
    pub positive: bool,
}

/// What to find: a phrase, exemplar boxes, or both.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Concept {
    /// The phrase ("yellow school bus"); `None` (or only white space) with boxes alone.
    pub text: Option<String>,
    pub exemplars: Vec<Exemplar>,
}

impl Concept {
    pub fn text(phrase: impl Into<String>) -> Self {
        Concept {
            text: Some(phrase.into()),
            exemplars: Vec::new(),
        }
    }
}

/// Suppression of overlapping instances of one concept, the higher score kept.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Nms {
    /// None: every query above the threshold (Meta's processor).
    #[default]
    None,
    /// Boxes overlapping a kept one by more than this intersection over union go.
    Boxes(f32),
    /// Masks overlapping a kept one by more than this intersection over union go.
    Masks(f32),
}

/// Options of [`ConceptModel::segment`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SegmentOptions {
    /// Instances scoring above it are kept (Meta's default, 0.5).
    pub score_threshold: f32,
    pub nms: Nms,
    /// Most instances kept per concept, the best first (200, the queries: no cap).
    pub max_instances: usize,
    /// Whether masks are made (false: boxes and scores only, cheaper on large images).
    pub masks: bool,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        SegmentOptions {
            score_threshold: 0.5,
            nms: Nms::None,
            max_instances: 200,
            masks: true,
        }
    }
}

impl SegmentOptions {
    /// Refuses settings with no meaning, naming the field.
    pub fn validate(&self) -> Result<()> {
        let t = self.score_threshold;
        if !(0.0..=1.0).contains(&t) {
            return Err(Error::invalid(
                "score_threshold",
                format!("must be within [0, 1], got {t}"),
            ));
        }
        if let Nms::Boxes(iou) | Nms::Masks(iou) = self.nms {
            if !(iou > 0.0 && iou <= 1.0) {
                return Err(Error::invalid(
                    "nms_iou",
                    format!("must be within (0, 1], got {iou}"),
                ));
            }
            if matches!(self.nms, Nms::Masks(_)) && !self.masks {
                return Err(Error::invalid(
                    "nms",
                    "suppression by masks needs the masks: turn masks on or suppress by boxes",
                ));
            }
        }
        if self.max_instances == 0 {
            return Err(Error::invalid("max_instances", "must be at least 1"));
        }
        Ok(())
    }
}

/// One instance found.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Which concept of the call found it (its index).
    pub concept: usize,
    /// Which of the decoder's queries it is.
    pub query: usize,
    /// SAM 3's score: the query's probability times the presence probability.
    pub score: f32,
    /// The box the detector gave, `[x1, y1, x2, y2]` in image pixels (not clipped).
    pub bbox: [f32; 4],
    /// `width × height` bytes, 1 inside; empty when masks were not asked for.
    pub mask: Vec<u8>,
    /// Pixels of the mask (0 without masks).
    pub area: u64,
}

/// What one concept gave beside its instances.
#[derive(Debug, Clone, PartialEq)]
pub struct ConceptSummary {
    /// The probability that the concept is in the image at all (the presence head's).
    pub presence: f32,
    /// Whether the phrase was longer than the text encoder takes, and was cut to 30 tokens.
    pub truncated: bool,
    /// The phrase the decoder ran with ([`VISUAL_PHRASE`] for boxes alone).
    pub phrase: String,
    /// Instances of this concept in [`Segmentation::instances`].
    pub instances: usize,
}

/// The result of one call: every concept's instances, the best first within each concept,
/// concepts in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Segmentation {
    pub width: u32,
    pub height: u32,
    pub concepts: Vec<ConceptSummary>,
    pub instances: Vec<Instance>,
}

/// Checks concepts against the image (`width × height`) and the decoder's box slots. Pure.
pub fn validate_concepts(concepts: &[Concept], image: (u32, u32), slots: usize) -> Result<()> {
    if concepts.is_empty() {
        return Err(Error::invalid(
            "concepts",
            "is empty: give at least one phrase or exemplar box",
        ));
    }
    if concepts.len() > MAX_CONCEPTS {
        return Err(Error::invalid(
            "concepts",
            format!(
                "{} concepts in one call; at most {MAX_CONCEPTS} (split the list)",
                concepts.len()
            ),
        ));
    }
    let (w, h) = (image.0 as f32, image.1 as f32);
    for (i, c) in concepts.iter().enumerate() {
        let at = |what: String| format!("concept {i}: {what}");
        if let Some(text) = &c.text {
            if text.len() > MAX_PHRASE_BYTES {
                return Err(Error::invalid(
                    "phrase",
                    at(format!(
                        "{} bytes; at most {MAX_PHRASE_BYTES} (the text encoder reads 30 tokens)",
                        text.len()
                    )),
                ));
            }
            if text.contains('\0') {
                return Err(Error::invalid(
                    "phrase",
                    at("contains a NUL character".into()),
                ));
            }
        }
        let has_text = c.text.as_deref().is_some_and(|t| !t.trim().is_empty());
        if !has_text && c.exemplars.is_empty() {
            return Err(Error::invalid(
                "concept",
                at("has neither a phrase nor an exemplar box".into()),
            ));
        }
        if c.exemplars.len() > slots {
            return Err(Error::invalid(
                "exemplars",
                at(format!(
                    "{} exemplar boxes; the decoder takes at most {slots}",
                    c.exemplars.len()
                )),
            ));
        }
        for (j, e) in c.exemplars.iter().enumerate() {
            let [x1, y1, x2, y2] = e.rect;
            let at = |what: String| format!("concept {i}, box {j}: {what}");
            if !e.rect.iter().all(|v| v.is_finite()) {
                return Err(Error::invalid(
                    "exemplars",
                    at(format!(
                        "coordinates must be finite, got [{x1}, {y1}, {x2}, {y2}]"
                    )),
                ));
            }
            if x2 <= x1 || y2 <= y1 {
                return Err(Error::invalid(
                    "exemplars",
                    at(format!(
                        "[{x1}, {y1}, {x2}, {y2}] is empty or inverted (x2 <= x1 or y2 <= y1)"
                    )),
                ));
            }
            if x1 < 0.0 || y1 < 0.0 || x2 > w || y2 > h {
                return Err(Error::invalid(
                    "exemplars",
                    at(format!(
                        "[{x1}, {y1}, {x2}, {y2}] reaches outside the {w}×{h} image"
                    )),
                ));
            }
        }
    }
    Ok(())
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Intersection over union of two `[x1, y1, x2, y2]` boxes.
fn box_iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = iw * ih;
    let area = |r: &[f32; 4]| (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0);
    let union = area(a) + area(b) - inter;
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

fn mask_iou(a: &Instance, b: &Instance) -> f32 {
    let inter = a
        .mask
        .iter()
        .zip(&b.mask)
        .filter(|(x, y)| **x != 0 && **y != 0)
        .count() as f32;
    let union = a.area as f32 + b.area as f32 - inter;
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

impl ConceptModel {
    /// Segments every concept on an embedding this model made ([`ConceptModel::encode`], or a
    /// file of it): each concept's instances, best first, and its presence score. The embedding
    /// is read where it lies.
    pub fn segment(
        &self,
        embedding: &Embedding,
        concepts: &[Concept],
        options: &SegmentOptions,
    ) -> Result<Segmentation> {
        options.validate()?;
        self.check_embedding(embedding)?;
        // Device memory is read in place by a decoder on that device only; anything else is
        // refused here, before ONNX Runtime sees it (host memory is read by any session).
        let decoder = &self.decoder.device;
        for (tensor, name) in embedding.tensors().iter().zip(embedding.tensor_names()) {
            let loc = tensor.location();
            if !loc.cpu_accessible
                && (loc.allocator != decoder.allocator_name() || loc.device_id != decoder.device_id)
            {
                return Err(Error::invalid(
                    "embedding",
                    format!(
                        "its tensor `{name}` lives in `{}` memory (device {}), but this concept \
                         model's decoder runs on {} (`{}` memory); copy it to the host \
                         (sam2_embedding_to_host) or open the model on that device",
                        loc.allocator,
                        loc.device_id,
                        decoder.primary.ort_name(),
                        decoder.allocator_name()
                    ),
                ));
            }
        }
        let (width, height) = embedding.image_size();
        validate_concepts(concepts, (width, height), self.box_slots)?;
        let mut out = Segmentation {
            width,
            height,
            concepts: Vec::with_capacity(concepts.len()),
            instances: Vec::new(),
        };
        for (i, concept) in concepts.iter().enumerate() {
            let (summary, instances) = self.segment_one(embedding, i, concept, options)?;
            out.concepts.push(summary);
            out.instances.extend(instances);
        }
        Ok(out)
    }

    fn segment_one(
        &self,
        embedding: &Embedding,
        index: usize,
        concept: &Concept,
        options: &SegmentOptions,
    ) -> Result<(ConceptSummary, Vec<Instance>)> {
        let (width, height) = embedding.image_size();
        let phrase = match concept.text.as_deref() {
            Some(t) if !t.trim().is_empty() => t,
            _ => VISUAL_PHRASE,
        };
        let text = self.text(phrase)?;
        // Boxes as Meta's processor takes them: centre and size, normalised to the image.
        let slots = self.box_slots;
        let mut coords = vec![0f32; slots * 4];
        let mut labels = vec![1i64; slots];
        let mut empty = vec![true; slots];
        let (w, h) = (width as f32, height as f32);
        for (j, e) in concept.exemplars.iter().enumerate() {
            let [x1, y1, x2, y2] = e.rect;
            coords[j * 4..j * 4 + 4].copy_from_slice(&[
                (x1 + x2) / 2.0 / w,
                (y1 + y2) / 2.0 / h,
                (x2 - x1) / w,
                (y2 - y1) / h,
            ]);
            labels[j] = e.positive as i64;
            empty[j] = false;
        }
        let coords = Tensor::from_array(([slots, 1, 4], coords))?.into_dyn();
        let labels = Tensor::from_array(([slots, 1], labels))?.into_dyn();
        let empty = Tensor::from_array(([1, slots], empty))?.into_dyn();
        let features = crate::export::EncoderFamily::Sam3.tensor_names();
        let [t0, t1, t2] = [0, 1, 2].map(|i| &embedding.tensors()[i]);
        let [p0, p1, p2] = &self.positions.levels;
        use names::*;
        let inputs = [
            (POSITIONS[0], p0),
            (POSITIONS[1], p1),
            (POSITIONS[2], p2),
            (LANGUAGE_MASK, &text.mask),
            (LANGUAGE_FEATURES, &text.features),
            (BOX_COORDS, &coords),
            (BOX_LABELS, &labels),
            (BOX_MASKS, &empty),
        ];
        let tensors = [
            (features[0], &*t0.value),
            (features[1], &*t1.value),
            (features[2], &*t2.value),
        ];
        let outputs = self.decoder.run(
            &inputs,
            &tensors,
            &[PRED_BOXES, PRED_LOGITS, PRED_MASKS, PRESENCE],
            &self.host,
        )?;
        let (bshape, boxes) = outputs[PRED_BOXES].try_extract_tensor::<f32>()?;
        let (_, logits) = outputs[PRED_LOGITS].try_extract_tensor::<f32>()?;
        let (mshape, masks) = outputs[PRED_MASKS].try_extract_tensor::<f32>()?;
        let (_, presence) = outputs[PRESENCE].try_extract_tensor::<f32>()?;
        let queries = logits.len();
        let side = MASK_SIDE;
        let shapes_fit = bshape.len() == 3
            && bshape[1] as usize == queries
            && boxes.len() == queries * 4
            && mshape.len() == 4
            && mshape[1] as usize == queries
            && masks.len() == queries * side * side
            && presence.len() == 1;
        if !shapes_fit {
            return Err(Error::OnnxRuntime(format!(
                "the decoder gave boxes {bshape:?}, {queries} logits, masks {mshape:?} and {} presence logits; expected [1, Q, 4], Q, [1, Q, {side}, {side}] and 1",
                presence.len()
            )));
        }
        let presence = sigmoid(presence[0]);
        let mut kept: Vec<(usize, f32)> = logits
            .iter()
            .enumerate()
            .map(|(q, &l)| (q, sigmoid(l) * presence))
            .filter(|&(_, s)| s > options.score_threshold)
            .collect();
        // Best first; ties (rare) in query order.
        kept.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let plane = width as usize * height as usize;
        let mut instances: Vec<Instance> = Vec::new();
        for (query, score) in kept {
            if instances.len() >= options.max_instances {
                break;
            }
            let b = &boxes[query * 4..query * 4 + 4];
            let bbox = [
                (b[0] - 0.5 * b[2]) * w,
                (b[1] - 0.5 * b[3]) * h,
                (b[0] + 0.5 * b[2]) * w,
                (b[1] + 0.5 * b[3]) * h,
            ];
            if let Nms::Boxes(limit) = options.nms {
                if instances.iter().any(|k| box_iou(&k.bbox, &bbox) > limit) {
                    continue;
                }
            }
            let (mask, area) = if options.masks {
                let mut mask = try_zeroed::<u8>(plane, "an instance's mask")?;
                try_upsample_threshold(
                    &masks[query * side * side..(query + 1) * side * side],
                    side,
                    side,
                    width as usize,
                    height as usize,
                    &mut mask,
                )?;
                let (_, area) = box_and_area(&mask, width as usize);
                (mask, area)
            } else {
                (Vec::new(), 0)
            };
            let instance = Instance {
                concept: index,
                query,
                score,
                bbox,
                mask,
                area,
            };
            if let Nms::Masks(limit) = options.nms {
                if instances.iter().any(|k| mask_iou(k, &instance) > limit) {
                    continue;
                }
            }
            instances.push(instance);
        }
        let summary = ConceptSummary {
            presence,
            truncated: text.tokens.truncated(),
            phrase: phrase.to_string(),
            instances: instances.len(),
        };
        Ok((summary, instances))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed(rect: [f32; 4]) -> Concept {
        Concept {
            text: None,
            exemplars: vec![Exemplar {
                rect,
                positive: true,
            }],
        }
    }

    #[test]
    fn bad_concepts_are_refused_naming_what() {
        let check = |c: &[Concept]| {
            validate_concepts(c, (100, 50), 8)
                .map_err(|e| e.to_string())
                .err()
                .unwrap_or_default()
        };
        assert!(check(&[]).contains("at least one"));
        assert!(check(&vec![Concept::text("cat"); MAX_CONCEPTS + 1]).contains("at most 256"));
        assert!(check(&[Concept::text("  ")]).contains("neither a phrase"));
        assert!(check(&[Concept::text("a\0b")]).contains("NUL"));
        assert!(check(&[Concept::text("x".repeat(MAX_PHRASE_BYTES + 1))]).contains("bytes"));
        assert!(check(&[boxed([f32::NAN, 0.0, 1.0, 1.0])]).contains("finite"));
        assert!(check(&[boxed([10.0, 10.0, 5.0, 20.0])]).contains("inverted"));
        assert!(check(&[boxed([10.0, 10.0, 10.0, 20.0])]).contains("empty"));
        assert!(check(&[boxed([10.0, 10.0, 101.0, 20.0])]).contains("outside"));
        let many = Concept {
            text: Some("cat".into()),
            exemplars: vec![
                Exemplar {
                    rect: [0.0, 0.0, 1.0, 1.0],
                    positive: true
                };
                9
            ],
        };
        assert!(check(&[many]).contains("at most 8"));
        // Fine: a phrase, boxes alone, a long phrase (cut later, and reported).
        assert_eq!(
            check(&[Concept::text("cat"), boxed([0.0, 0.0, 100.0, 50.0])]),
            ""
        );
        assert_eq!(check(&[Concept::text("cat ".repeat(2000))]), "");
    }

    #[test]
    fn options_are_checked() {
        let bad = |o: SegmentOptions| o.validate().unwrap_err().to_string();
        let base = SegmentOptions::default();
        assert!(bad(SegmentOptions {
            score_threshold: f32::NAN,
            ..base
        })
        .contains("score_threshold"));
        assert!(bad(SegmentOptions {
            nms: Nms::Boxes(0.0),
            ..base
        })
        .contains("nms_iou"));
        assert!(bad(SegmentOptions {
            nms: Nms::Masks(0.5),
            masks: false,
            ..base
        })
        .contains("needs the masks"));
        assert!(bad(SegmentOptions {
            max_instances: 0,
            ..base
        })
        .contains("max_instances"));
    }

    #[test]
    fn box_overlap() {
        assert_eq!(
            box_iou(&[0.0, 0.0, 2.0, 2.0], &[1.0, 0.0, 3.0, 2.0]),
            2.0 / 6.0
        );
        assert_eq!(box_iou(&[0.0, 0.0, 1.0, 1.0], &[2.0, 2.0, 3.0, 3.0]), 0.0);
    }
}
