//! Which memories a frame attends to: SAM2's selection rules, as pure functions of frame indices.
//!
//! SAM2's video predictor (`_prepare_memory_conditioned_features`) conditions a frame that is not
//! an initial conditioning frame on:
//! - every conditioning frame of the object (frames that received prompts), at temporal
//!   position 0;
//! - the `num_maskmem − 1` frames just before it in the direction of travel (after it when
//!   tracking backwards), frame `t ∓ r` at temporal position `num_maskmem − r`;
//! - object pointers: those of the conditioning frames in the past (in the direction of travel,
//!   the frame itself included) with signed offsets `(t − c)·sign`, then those of the tracked
//!   frames `t ∓ d` for `d = 1 .. max_pointers − 1` (stopping at the clip's ends) with offset `d`.
//!
//! Memory stride 1 (SAM2's `memory_temporal_stride_for_eval`) and every conditioning frame in
//! attention (`max_cond_frames_in_attn = −1`), as in SAM2's released configurations.

use std::collections::BTreeSet;

/// Most object pointers a frame attends to (SAM2's `max_obj_ptrs_in_encoder`).
pub(crate) const MAX_POINTERS: usize = 16;

/// A memory frame a frame attends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoryRef {
    pub frame: i64,
    /// True for a conditioning frame (looked up among them), false for a tracked one.
    pub conditioning: bool,
    /// Row of the temporal code added to its position encoding: `num_maskmem − t_pos − 1`.
    pub tpos_row: usize,
}

/// An object pointer a frame attends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PointerRef {
    pub frame: i64,
    pub conditioning: bool,
    /// Signed temporal offset, as SAM2 feeds its sine encoding (before normalisation).
    pub offset: i64,
}

/// What frame `frame` attends to, given the object's conditioning frames and the frames whose
/// tracked outputs (memory features, pointers) are available.
pub(crate) struct Selection {
    pub memories: Vec<MemoryRef>,
    pub pointers: Vec<PointerRef>,
    /// The divisor of the pointer offsets: `max_pointers − 1`.
    pub offset_scale: f32,
}

/// SAM2's selection for frame `frame`.
///
/// `tracked_memory` holds the non-conditioning frames whose memory features are kept,
/// `tracked_pointer` those whose object pointer is kept (a superset). `num_frames` is the clip's
/// length when known (a streaming host passes `None`: pointers are then taken up to
/// `MAX_POINTERS` back without an end).
pub(crate) fn select(
    frame: i64,
    reverse: bool,
    num_maskmem: usize,
    num_frames: Option<i64>,
    conditioning: &BTreeSet<i64>,
    tracked_memory: &BTreeSet<i64>,
    tracked_pointer: &BTreeSet<i64>,
) -> Selection {
    let mut memories: Vec<MemoryRef> = conditioning
        .iter()
        .map(|&c| MemoryRef {
            frame: c,
            conditioning: true,
            tpos_row: num_maskmem - 1,
        })
        .collect();
    for t_pos in 1..num_maskmem {
        let r = (num_maskmem - t_pos) as i64;
        let prev = if reverse { frame + r } else { frame - r };
        // All conditioning frames are selected, so a previous frame is looked up among the
        // tracked ones only (SAM2 looks among the unselected conditioning frames next: none).
        if tracked_memory.contains(&prev) {
            memories.push(MemoryRef {
                frame: prev,
                conditioning: false,
                tpos_row: num_maskmem - t_pos - 1,
            });
        }
    }
    let max_pointers = num_frames.map_or(MAX_POINTERS as i64, |n| n.min(MAX_POINTERS as i64));
    let sign = if reverse { -1 } else { 1 };
    let mut pointers: Vec<PointerRef> = conditioning
        .iter()
        .filter(|&&c| if reverse { c >= frame } else { c <= frame })
        .map(|&c| PointerRef {
            frame: c,
            conditioning: true,
            offset: (frame - c) * sign,
        })
        .collect();
    for d in 1..max_pointers.max(1) {
        let t = if reverse { frame + d } else { frame - d };
        if t < 0 || num_frames.is_some_and(|n| t >= n) {
            break;
        }
        if tracked_pointer.contains(&t) {
            pointers.push(PointerRef {
                frame: t,
                conditioning: false,
                offset: d,
            });
        }
    }
    Selection {
        memories,
        pointers,
        // SAM2 divides by `max_pointers − 1`; a one-frame clip has no pointer but its own.
        offset_scale: (max_pointers - 1).max(1) as f32,
    }
}

/// SAM2's `_use_multimask`: several candidate masks (the best one kept) when the decoder gets at
/// most one point (box corners count as two); a tracking frame has none.
pub(crate) fn use_multimask(points: usize) -> bool {
    points <= 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[i64]) -> BTreeSet<i64> {
        v.iter().copied().collect()
    }

    #[test]
    fn a_frame_attends_to_the_conditioning_frames_and_the_six_before_it() {
        let tracked = set(&(1..20).collect::<Vec<_>>());
        let s = select(10, false, 7, Some(30), &set(&[0]), &tracked, &tracked);
        let frames: Vec<(i64, usize)> = s.memories.iter().map(|m| (m.frame, m.tpos_row)).collect();
        // Conditioning frame at row 6, then t−6 (row 5) … t−1 (row 0), SAM2's order.
        assert_eq!(
            frames,
            vec![(0, 6), (4, 5), (5, 4), (6, 3), (7, 2), (8, 1), (9, 0)]
        );
        let ptrs: Vec<(i64, i64)> = s.pointers.iter().map(|p| (p.frame, p.offset)).collect();
        assert_eq!(
            ptrs,
            vec![
                (0, 10),
                (9, 1),
                (8, 2),
                (7, 3),
                (6, 4),
                (5, 5),
                (4, 6),
                (3, 7),
                (2, 8),
                (1, 9)
            ]
        );
        assert_eq!(s.offset_scale, 15.0);
    }

    #[test]
    fn pointers_stop_fifteen_frames_back_and_at_the_clip_start() {
        let tracked = set(&(0..40).collect::<Vec<_>>());
        let s = select(30, false, 7, None, &set(&[0]), &tracked, &tracked);
        let tracked_ptrs: Vec<i64> = s
            .pointers
            .iter()
            .filter(|p| !p.conditioning)
            .map(|p| p.frame)
            .collect();
        assert_eq!(tracked_ptrs, (15..30).rev().collect::<Vec<_>>());
        let s = select(2, false, 7, Some(30), &set(&[0]), &tracked, &tracked);
        assert_eq!(s.pointers.len(), 1 + 2);
    }

    #[test]
    fn backwards_the_memories_come_from_later_frames_and_offsets_keep_their_sign() {
        // Conditioning frames are never among the tracked ones (SAM2 drops a tracked output when
        // its frame becomes a conditioning one).
        let tracked = set(&(0..30).filter(|&t| t != 3 && t != 15).collect::<Vec<_>>());
        let s = select(10, true, 7, Some(30), &set(&[15, 3]), &tracked, &tracked);
        let frames: Vec<i64> = s.memories.iter().map(|m| m.frame).collect();
        assert_eq!(frames, vec![3, 15, 16, 14, 13, 12, 11]);
        // Only the conditioning frame ahead (in the direction of travel) gives a pointer: 15,
        // with offset (10 − 15)·(−1) = 5.
        assert_eq!(s.pointers[0].frame, 15);
        assert_eq!(s.pointers[0].offset, 5);
        assert!(s.pointers.iter().all(|p| p.frame >= 10));
    }

    #[test]
    fn a_box_is_two_points_and_gets_one_mask() {
        assert!(use_multimask(0));
        assert!(use_multimask(1));
        assert!(!use_multimask(2));
    }
}
