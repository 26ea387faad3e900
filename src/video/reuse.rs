//! What one frame's inputs reuse from the frames before, so the work a frame repeats is only
//! what changed: the encoder's input buffer (overwritten with each frame's pixels), the
//! memories' and pointers' buffers (overwritten when their shape repeats), the memories'
//! position encodings (composed once for each arrangement of temporal positions: at steady state
//! every frame has the same one), and the constant inputs of the decoder and the memory encoder.
//!
//! None of it changes a result: a reused buffer is rewritten whole before each run, and a
//! composed position encoding depends only on its key and on `maskmem_pos_enc` and
//! `temporal_code`, which are read once (the cache is emptied if they ever are read again).

use ort::value::{DynValue, Tensor};

use crate::error::Result;

use super::LOW_RES;
use crate::onnx::data_type::tensor_byte_len as value_bytes;

/// Most arrangements of memory positions kept composed (7.3 MiB each for SAM2 at steady state).
/// One object at steady state needs one; objects with different numbers of conditioning frames
/// attend with different arrangements (beyond two, some are composed again on each frame, as
/// without the cache).
const POSITIONS_KEPT: usize = 2;

/// The temporal row of each memory a frame attends to (in order) and its number of pointers:
/// all a composed position encoding depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PositionKey {
    pub(super) rows: Vec<usize>,
    pub(super) pointers: usize,
}

/// Buffers and tensors kept between frames (behind the tracker's lock, as its state).
#[derive(Default)]
pub(super) struct Reused {
    /// The encoder's input, `[1, 3, 1024, 1024]`.
    pub(super) image: Option<DynValue>,
    /// Memory attention's `memory_1` and `memory_0` as last assembled.
    pub(super) memories: Option<DynValue>,
    pub(super) pointers: Option<DynValue>,
    /// Composed `memory_pos_embed`s.
    pub(super) positions: Recent<PositionKey, DynValue>,
}

impl Reused {
    /// Bytes of the tensors kept.
    pub(super) fn bytes(&self) -> usize {
        [&self.image, &self.memories, &self.pointers]
            .into_iter()
            .flatten()
            .chain(self.positions.values())
            .map(value_bytes)
            .sum()
    }
}

/// The values of the last [`POSITIONS_KEPT`] keys asked for, the most recently used last.
pub(super) struct Recent<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for Recent<K, V> {
    fn default() -> Self {
        Recent {
            entries: Vec::new(),
        }
    }
}

impl<K: PartialEq, V> Recent<K, V> {
    /// The value for `key`, made by `make` when it is not kept (the least recently used one then
    /// makes room).
    pub(super) fn get_or_make(&mut self, key: K, make: impl FnOnce() -> Result<V>) -> Result<&V> {
        match self.entries.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                let entry = self.entries.remove(i);
                self.entries.push(entry);
            }
            None => {
                let value = make()?;
                if self.entries.len() >= POSITIONS_KEPT {
                    self.entries.remove(0);
                }
                self.entries.push((key, value));
            }
        }
        Ok(&self.entries.last().expect("just pushed").1)
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
    }

    fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }
}

/// A host tensor of `shape` whose values the caller overwrites whole: `kept` when it has that
/// shape and lives on the host, else a new one (zeros).
pub(super) fn host_buffer<'a>(
    kept: &'a mut Option<DynValue>,
    shape: &[i64],
) -> Result<&'a mut DynValue> {
    let fits = kept.as_ref().is_some_and(|v| {
        v.shape().iter().eq(shape.iter())
            && v.view()
                .downcast::<ort::value::DynTensorValueType>()
                .is_ok_and(|t| t.memory_info().is_cpu_accessible())
    });
    if !fits {
        *kept = None;
        let len = shape.iter().product::<i64>() as usize;
        let zeros = crate::error::try_zeroed::<f32>(len, "a reused input buffer")?;
        *kept = Some(Tensor::from_array((shape.to_vec(), zeros))?.into_dyn());
    }
    Ok(kept.as_mut().expect("set above"))
}

/// Inputs that are the same on every run: the decoder's empty mask prompt and the flags.
pub(super) struct Constants {
    /// `mask_input` with no previous mask: zeros, `[1, 1, 256, 256]`.
    pub(super) no_mask: DynValue,
    /// `[1]` tensors holding 0 and 1 (`has_mask_input`, `multimask_output`, `is_mask_from_pts`).
    pub(super) flag: [DynValue; 2],
}

impl Constants {
    pub(super) fn new() -> Result<Constants> {
        let flag = |v: f32| -> Result<DynValue> {
            Ok(Tensor::from_array(([1usize], vec![v]))?.into_dyn())
        };
        Ok(Constants {
            no_mask: Tensor::from_array((
                [1usize, 1, LOW_RES, LOW_RES],
                vec![0.0f32; LOW_RES * LOW_RES],
            ))?
            .into_dyn(),
            flag: [flag(0.0)?, flag(1.0)?],
        })
    }

    /// The `[1]` flag tensor for `on`.
    pub(super) fn flag(&self, on: bool) -> &DynValue {
        &self.flag[usize::from(on)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_made_once_per_key_and_the_least_recent_makes_room() {
        let mut recent = Recent::<usize, usize>::default();
        let mut made = 0;
        for round in 0..3 {
            for k in 0..POSITIONS_KEPT {
                let v = recent
                    .get_or_make(k, || {
                        made += 1;
                        Ok(k * 10)
                    })
                    .unwrap();
                assert_eq!(*v, k * 10, "round {round}");
            }
        }
        assert_eq!(made, POSITIONS_KEPT);
        // Key 0 used again: key 1 is now the least recent and leaves for a new key.
        recent.get_or_make(0, || unreachable!()).unwrap();
        recent.get_or_make(99, || Ok(990)).unwrap();
        assert_eq!(*recent.get_or_make(0, || unreachable!()).unwrap(), 0);
        let mut again = false;
        recent
            .get_or_make(1, || {
                again = true;
                Ok(10)
            })
            .unwrap();
        assert!(again, "key 1 should have made room");
        recent.clear();
        assert_eq!(*recent.get_or_make(0, || Ok(7)).unwrap(), 7);
    }
}
