//! The steps of tracking one frame: the frame's features, memory attention over the object's
//! memories and pointers, the decoder, and the memory encoder.

use std::collections::BTreeSet;
use std::sync::Arc;

use ort::value::{DynValue, Tensor};

use crate::error::{Error, Result};
use crate::image::ImageView;
use crate::{postprocess, preprocess};

use super::modules::names::*;
use super::modules::VideoFamily;
use super::reuse::{self, PositionKey};
use super::state::{Features, ObjectState, Output, State};
use super::tensors::{expect_floats, float_shape, host_floats};
use super::{
    bank, TrackedObject, Tracker, LOW_RES, MEM_DIM, MODEL_SIDE, NO_OBJECT_LOGIT, POINTER_DIM,
};

impl Tracker {
    /// The frame's features: the last encoded frame's when it is the same index and the same
    /// picture (the same pixels, size and format: [`crate::pixel_hash`]), else a new encode.
    pub(super) fn features(
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
        // The frame is resized and normalised into the last frame's input buffer.
        let mut reused = self.reuse();
        let side = MODEL_SIDE as i64;
        let input = reuse::host_buffer(&mut reused.image, &[1, 3, side, side])?;
        preprocess::preprocess_video_frame_into(
            image,
            MODEL_SIDE,
            input.try_extract_tensor_mut::<f32>()?.1,
        );
        let mem = &self.device_memory;
        let mut out = self.modules.encoder.run(
            &[(IMAGE, &*input)],
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
    pub(super) fn attend(
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
        let mut reused = self.reuse();
        let reused = &mut *reused;
        // Position encodings: each memory frame's, plus its temporal code; zeros for the pointer
        // tokens (the graph adds their temporal encoding from `obj_ptr_tpos`; EdgeTAM gives
        // pointers none). They depend on the memories' temporal rows and the number of pointers
        // only, so they are composed once for each arrangement (at steady state every frame has
        // the same).
        let key = PositionKey {
            rows: selection.memories.iter().map(|m| m.tpos_row).collect(),
            pointers: n,
        };
        let pos = reused.positions.get_or_make(key, || {
            let mut pos = crate::error::try_zeroed::<f32>(
                (m * tokens + 4 * n) * MEM_DIM,
                "memory positions",
            )?;
            for (k, mref) in selection.memories.iter().enumerate() {
                let code = &temporal[mref.tpos_row * MEM_DIM..(mref.tpos_row + 1) * MEM_DIM];
                let block = &mut pos[k * tokens * MEM_DIM..(k + 1) * tokens * MEM_DIM];
                for (row, src) in block.chunks_mut(MEM_DIM).zip(memory_pos.chunks(MEM_DIM)) {
                    for ((d, s), c) in row.iter_mut().zip(src).zip(code) {
                        *d = s + c;
                    }
                }
            }
            Ok(Tensor::from_array(([m * tokens + 4 * n, 1, MEM_DIM], pos))?.into_dyn())
        })?;
        let memory_shape = match self.modules.family {
            VideoFamily::Sam2 => [m as i64, MEM_DIM as i64, 64, 64].to_vec(),
            VideoFamily::EdgeTam => [m as i64, tokens as i64, MEM_DIM as i64].to_vec(),
        };
        let memory_1 = self.concat(&memories, &memory_shape, &mut reused.memories)?;
        let memory_0 = self.concat(
            &pointers,
            &[n as i64, POINTER_DIM as i64],
            &mut reused.pointers,
        )?;
        let offsets: Vec<f32> = selection
            .pointers
            .iter()
            .map(|p| p.offset as f32 / selection.offset_scale)
            .collect();
        let offsets = Tensor::from_array(([n], offsets))?.into_dyn();
        let mut inputs: Vec<(&str, &DynValue)> = vec![
            (CURRENT_FEAT, &features.vision_feats),
            (CURRENT_POS, &features.vision_pos),
            (POINTERS, memory_0),
            (MEMORIES, memory_1),
            (MEMORY_POS, pos),
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
    pub(super) fn decode(
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
        let constants = &self.constants;
        let previous_mask = previous
            .map(|p| Tensor::from_array(([1usize, 1, LOW_RES, LOW_RES], p.to_vec())))
            .transpose()?
            .map(Tensor::into_dyn);
        if decoder.has_input(MASK_INPUT) && decoder.has_input(HAS_MASK_INPUT) {
            inputs.push((
                MASK_INPUT,
                previous_mask.as_ref().unwrap_or(&constants.no_mask),
            ));
            inputs.push((HAS_MASK_INPUT, constants.flag(previous.is_some())));
        }
        if decoder.has_input(MULTIMASK) {
            inputs.push((MULTIMASK, constants.flag(bank::use_multimask(real_points))));
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
    pub(super) fn encode_memory(
        &self,
        state: &mut State,
        mask_for_mem: &DynValue,
        features: &Features,
        score: f32,
        from_points: bool,
    ) -> Result<DynValue> {
        let module = &self.modules.memory_encoder;
        let score_value = Tensor::from_array(([1usize, 1], vec![score]))?.into_dyn();
        let from_points = self.constants.flag(from_points);
        let mut inputs: Vec<(&str, &DynValue)> =
            vec![(MASK_FOR_MEM, mask_for_mem), (PIX_FEAT, &features.pix_feat)];
        if module.has_input(OBJECT_SCORE) {
            inputs.push((OBJECT_SCORE, &score_value));
        }
        if module.has_input(FROM_POINTS) {
            inputs.push((FROM_POINTS, from_points));
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
        if self.modules.family == VideoFamily::Sam2 {
            expect_floats(
                &memory,
                module.path(),
                MASKMEM_FEATURES,
                MEM_DIM * 64 * 64,
                "[1, 64, 64, 64]",
            )?;
        }
        let mut read = None;
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
            read = Some((pos, code));
        }
        if self.modules.family == VideoFamily::EdgeTam {
            // A frame's tokens are the rows of its position encoding (512 for EdgeTAM).
            let rows = read
                .as_ref()
                .map(|(pos, _)| pos.len())
                .or(state.memory_pos.as_ref().map(Vec::len))
                .expect("read with the first memory")
                / MEM_DIM;
            expect_floats(
                &memory,
                module.path(),
                MASKMEM_FEATURES,
                rows * MEM_DIM,
                &format!("[1, {rows}, {MEM_DIM}] (a token per row of `{MASKMEM_POS}`)"),
            )?;
        }
        if let Some((pos, code)) = read {
            state.memory_pos = Some(pos);
            state.temporal_code = Some(code);
            // Encodings composed from earlier ones (none: they are read once) would be stale.
            self.reuse().positions.clear();
        }
        Ok(memory)
    }

    /// EdgeTAM's consolidation of a prompted frame (E2): an object's memory there encoded again
    /// from its low-res logits, upsampled to the model frame (bilinear, half-pixel, as the
    /// predictor upsamples them) and binarised as a mask from clicks (`is_mask_from_pts`: the
    /// graph keeps the sign, so the logits go in as they are).
    pub(super) fn encode_memory_from_logits(
        &self,
        state: &mut State,
        low_res: &[f32],
        features: &Features,
        score: f32,
    ) -> Result<DynValue> {
        let mask = postprocess::resample(low_res, LOW_RES, LOW_RES, MODEL_SIDE, MODEL_SIDE);
        let mask = Tensor::from_array(([1usize, 1, MODEL_SIDE, MODEL_SIDE], mask))?.into_dyn();
        self.encode_memory(state, &mask, features, score, true)
    }

    /// An object's result on a frame: its mask upsampled to the frame's size.
    pub(super) fn result(
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
}
