//! What a tracker remembers: each frame's features, each object's outputs and memories by
//! frame, and which of them are kept.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ort::value::DynValue;

use crate::error::{Error, Result};

use super::modules::VideoFamily;
use super::{bank, Tracker, MEM_DIM};

/// The encoder's outputs for one frame.
pub(super) struct Features {
    pub(super) frame: u32,
    /// [`crate::pixel_hash`] of the picture (its size and format included).
    pub(super) pixels: u128,
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) pix_feat: DynValue,
    pub(super) high_res_0: DynValue,
    pub(super) high_res_1: DynValue,
    pub(super) vision_feats: DynValue,
    pub(super) vision_pos: DynValue,
}

/// One object's output on one frame, and its memory.
pub(super) struct Output {
    pub(super) low_res: Vec<f32>,
    pub(super) score: f32,
    pub(super) pointer: DynValue,
    /// `maskmem_features` (1 MiB for SAM2); `None` once a tracked frame is too far to be
    /// attended to (pointers reach further than memories).
    pub(super) memory: Option<DynValue>,
}

#[derive(Default)]
pub(super) struct ObjectState {
    pub(super) conditioning: BTreeMap<i64, Output>,
    pub(super) tracked: BTreeMap<i64, Output>,
    /// Prompted frames since the last track (SAM2's temporary outputs), their memory encoded
    /// with the prompt, and whether each becomes a conditioning frame.
    pub(super) prompted: BTreeMap<i64, (bool, Output)>,
    /// Frames tracked so far, and in which direction (SAM2's `frames_tracked_per_obj`).
    pub(super) directions: BTreeMap<i64, bool>,
    /// EdgeTAM (rule E2): the memories of this object's earlier outputs on frames another object
    /// was prompted on since the last track, encoded again from their masks (binarised); filed
    /// with the prompts.
    pub(super) reencoded: BTreeMap<i64, DynValue>,
    /// EdgeTAM (rule E3): tracked frames that were prompted (a correction kept as a
    /// non-conditioning frame, for every object): returned as they are, never tracked again.
    pub(super) kept: BTreeSet<i64>,
}

#[derive(Default)]
pub(super) struct State {
    /// The last frame encoded: prompts for several objects on one picture encode it once.
    pub(super) frame: Option<Arc<Features>>,
    pub(super) objects: BTreeMap<u32, ObjectState>,
    /// `maskmem_pos_enc` ([4096 × 64]): a sine encoding of the memory map's positions, the same
    /// for every frame, read once.
    pub(super) memory_pos: Option<Vec<f32>>,
    /// `temporal_code` ([num_maskmem × 64]), read once.
    pub(super) temporal_code: Option<Vec<f32>>,
}

impl Tracker {
    /// SAM2's `num_maskmem`: the rows of the temporal code.
    pub(super) fn num_maskmem(&self, state: &State) -> Result<usize> {
        let code = state
            .temporal_code
            .as_ref()
            .ok_or_else(|| Error::invalid("tracker", "no memory has been encoded yet"))?;
        Ok(code.len() / MEM_DIM)
    }

    /// Files the outputs prompted since the last track (SAM2's `propagate_in_video_preflight`;
    /// their memory was encoded with the prompt): a frame that becomes a conditioning one leaves
    /// the tracked ones. Nothing here can fail, so a track that fails later loses no prompt.
    ///
    /// EdgeTAM's predictor (SAM2's first one) consolidates a prompted frame over every object
    /// (E2): the other objects' outputs there take the memory encoded again from their masks
    /// (`ObjectState::reencoded`) and are filed as the prompt's are, a conditioning frame or a
    /// tracked one; and a prompted frame filed among the tracked ones is never tracked again (E3).
    pub(super) fn file_prompted_frames(&self, state: &mut State) {
        if self.modules.family == VideoFamily::EdgeTam {
            let mut conditioning = BTreeSet::new();
            let mut other = BTreeSet::new();
            for object in state.objects.values() {
                for (&t, (cond, _)) in &object.prompted {
                    if *cond {
                        conditioning.insert(t);
                    } else {
                        other.insert(t);
                    }
                }
            }
            for object in state.objects.values_mut() {
                for (t, memory) in std::mem::take(&mut object.reencoded) {
                    if object.prompted.contains_key(&t) {
                        continue;
                    }
                    if conditioning.contains(&t) {
                        if let Some(mut output) = object.tracked.remove(&t) {
                            output.memory = Some(memory);
                            object.conditioning.insert(t, output);
                        } else if let Some(output) = object.conditioning.get_mut(&t) {
                            output.memory = Some(memory);
                        }
                    } else if other.contains(&t) && !object.conditioning.contains_key(&t) {
                        // (a conditioning frame prompted again as a tracked one keeps its
                        // output, as the predictor keeps the conditioning one)
                        if let Some(output) = object.tracked.get_mut(&t) {
                            output.memory = Some(memory);
                            object.kept.insert(t);
                        }
                    }
                }
                for (&t, (cond, _)) in &object.prompted {
                    if !*cond {
                        object.kept.insert(t);
                    }
                }
            }
        }
        for object in state.objects.values_mut() {
            for (t, (conditioning, output)) in std::mem::take(&mut object.prompted) {
                if conditioning {
                    object.tracked.remove(&t);
                    object.conditioning.insert(t, output);
                } else {
                    object.tracked.insert(t, output);
                }
            }
        }
    }

    /// Drops tracked outputs no later frame near `t` will attend to: the memories of all but the
    /// `memory_frames` frames nearest `t` (`t` included), pointers beyond the pointers' reach.
    pub(super) fn forget_far_frames(&self, object: &mut ObjectState, t: i64) {
        let keep_memory = self.options.memory_frames as i64;
        let keep_pointer = keep_memory.max(bank::MAX_POINTERS as i64);
        object.tracked.retain(|&k, o| {
            if (k - t).abs() >= keep_memory {
                o.memory = None;
            }
            (k - t).abs() <= keep_pointer
        });
        let tracked = &object.tracked;
        object.kept.retain(|k| tracked.contains_key(k));
        object
            .directions
            .retain(|&k, _| (k - t).abs() <= keep_pointer || object.conditioning.contains_key(&k));
    }
}
