//! Batching: a predict's prompts grouped by shape, each group run through the decoder in one
//! call, and the results assembled in the prompts' order.

use ort::value::Tensor;

use super::{prompt_points_in, validate_prompts, PredictOptions, Prediction, Predictor, Prompt};
use crate::embedding::Embedding;
use crate::error::{Error, Result};
use crate::export::{Batch, Decoded};
use crate::postprocess;

/// Largest result of one predict: `objects × candidates × width × height` mask bytes (multimask
/// counted as 3 candidates). A larger request is refused before anything runs; predict fewer
/// prompts per call instead.
pub(crate) const MAX_RESULT_BYTES: usize = 4 << 30;

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
    pub(super) fn predict_with(
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
        let (n, coords, labels) =
            prompt_points_in(&batch, (img_w as u32, img_h as u32), self.spec.input_size);
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

        let mut session = self.session();
        let mut binding = session.create_binding()?;
        for name in self.spec.embedding_inputs() {
            // Session outputs are bound in place (no copy): the embedding is read where it lies.
            let tensor = embedding.tensor(name).ok_or_else(|| {
                Error::ModelMismatch(format!("the embedding has no `{name}` tensor"))
            })?;
            binding.bind_input(name, &tensor.value)?;
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
