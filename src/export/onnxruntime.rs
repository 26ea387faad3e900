//! ONNX Runtime's SAM2 tools (`onnxruntime.transformers.models.sam2`): their own embedding
//! names, int32 labels, the original image size in, boolean masks at that size and low-res
//! logits out.

use ort::session::SessionOutputs;

use super::{Batch, Decoded, DecoderExport, Description, EncoderFamily};
use crate::error::Result;

pub(super) const DESCRIPTION: Description = Description {
    export: DecoderExport::OnnxRuntime,
    name: "ONNX Runtime",
    family: EncoderFamily::OnnxRuntime,
    inputs: &[
        "image_embeddings",
        "image_features_0",
        "image_features_1",
        "point_coords",
        "point_labels",
        "input_masks",
        "has_input_masks",
        "original_image_size",
    ],
    outputs: &["masks", "iou_predictions", "low_res_masks"],
    marker: None,
    point_coords: "point_coords",
    point_labels: "point_labels",
    labels_int32: true,
    mask_input: "input_masks",
    has_mask_input: "has_input_masks",
    orig_size: Some("original_image_size"),
    masks: "masks",
    iou: "iou_predictions",
    low_res: Some("low_res_masks"),
    full_size_bytes_per_pixel: 1,
    decode,
    input_side: super::INPUT_SIDE,
    low_res_side: super::LOW_RES_SIDE,
};

/// `masks` is boolean `[objects, candidates, height, width]`; `low_res_masks` the float logits.
pub(super) fn decode(
    outputs: &SessionOutputs<'_>,
    batch: &Batch,
    out: &mut Decoded<'_>,
) -> Result<()> {
    let (shape, bits) = outputs[DESCRIPTION.masks].try_extract_tensor::<bool>()?;
    batch.expect(
        shape,
        (batch.image_height, batch.image_width),
        DESCRIPTION.masks,
    )?;
    let low_name = "low_res_masks";
    // The declared dims of `low_res_masks` are wrong in ONNX Runtime's own export (they say
    // the original size); the run-time shape is what counts.
    let (lshape, logits) = outputs[low_name].try_extract_tensor::<f32>()?;
    let lr = batch.low_res;
    batch.expect(lshape, (lr, lr), low_name)?;
    let plane = batch.plane();
    for &(row, k, slot) in &batch.picks {
        let src = &bits[(row * batch.candidates + k) * plane..][..plane];
        if let Some(mask) = out.mask(slot, plane) {
            for (d, &v) in mask.iter_mut().zip(src) {
                *d = v as u8;
            }
        }
        let src = &logits[(row * batch.candidates + k) * lr * lr..][..lr * lr];
        out.logits(slot, lr).copy_from_slice(src);
    }
    Ok(())
}
