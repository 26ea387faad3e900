//! samexporter's decoders (also X-AnyLabeling's): low-res logits out, upsampled here.

use ort::session::SessionOutputs;

use super::{Batch, Decoded, DecoderExport, Description, EncoderFamily};
use crate::error::Result;
use crate::postprocess;

pub(super) const DESCRIPTION: Description = Description {
    export: DecoderExport::SamExporter,
    name: "samexporter",
    family: EncoderFamily::SamExporter,
    inputs: &[
        "image_embed",
        "high_res_feats_0",
        "high_res_feats_1",
        "point_coords",
        "point_labels",
        "mask_input",
        "has_mask_input",
    ],
    outputs: &["masks", "iou_predictions"],
    marker: None,
    point_coords: "point_coords",
    point_labels: "point_labels",
    labels_int32: false,
    mask_input: "mask_input",
    has_mask_input: "has_mask_input",
    orig_size: None,
    masks: "masks",
    iou: "iou_predictions",
    low_res: None,
    full_size_bytes_per_pixel: 0,
    decode,
    input_side: super::INPUT_SIDE,
    low_res_side: super::LOW_RES_SIDE,
};

/// `masks` holds float logits `[objects, candidates, low_res, low_res]`: they are the low-res
/// logits, and the mask is their bilinear upsampling to the image, thresholded at 0.
pub(super) fn decode(
    outputs: &SessionOutputs<'_>,
    batch: &Batch,
    out: &mut Decoded<'_>,
) -> Result<()> {
    let (shape, logits) = outputs[DESCRIPTION.masks].try_extract_tensor::<f32>()?;
    let lr = batch.low_res;
    batch.expect(shape, (lr, lr), DESCRIPTION.masks)?;
    let plane = batch.plane();
    for &(row, k, slot) in &batch.picks {
        let src = &logits[(row * batch.candidates + k) * lr * lr..][..lr * lr];
        out.logits(slot, lr).copy_from_slice(src);
        if let Some(mask) = out.mask(slot, plane) {
            postprocess::try_upsample_threshold(
                src,
                lr,
                lr,
                batch.image_width,
                batch.image_height,
                mask,
            )?;
        }
    }
    Ok(())
}
