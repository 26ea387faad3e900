//! ibaiGorordo's ONNX-SAM2 decoders: samexporter's inputs plus the original image size, and
//! logits upsampled to that size inside the graph (no low-res ones).

use ort::session::SessionOutputs;

use super::{samexporter, Batch, Decoded, DecoderExport, Description, EncoderFamily};
use crate::error::Result;
use crate::postprocess;

pub(super) const DESCRIPTION: Description = Description {
    export: DecoderExport::OnnxSam2,
    name: "ONNX-SAM2",
    family: EncoderFamily::SamExporter,
    inputs: samexporter::DESCRIPTION.inputs,
    outputs: samexporter::DESCRIPTION.outputs,
    marker: Some("orig_im_size"),
    orig_size: Some("orig_im_size"),
    full_size_bytes_per_pixel: 4,
    decode,
    ..samexporter::DESCRIPTION
};

/// `masks` holds float logits `[objects, candidates, height, width]` at the image size: the
/// mask is their sign, and the low-res logits a refinement needs are resampled from them.
pub(super) fn decode(
    outputs: &SessionOutputs<'_>,
    batch: &Batch,
    out: &mut Decoded<'_>,
) -> Result<()> {
    let (shape, logits) = outputs[DESCRIPTION.masks].try_extract_tensor::<f32>()?;
    let (w, h) = (batch.image_width, batch.image_height);
    batch.expect(shape, (h, w), DESCRIPTION.masks)?;
    let plane = batch.plane();
    let lr = batch.low_res;
    for &(row, k, slot) in &batch.picks {
        let src = &logits[(row * batch.candidates + k) * plane..][..plane];
        if let Some(mask) = out.mask(slot, plane) {
            for (d, &v) in mask.iter_mut().zip(src) {
                *d = (v > 0.0) as u8;
            }
        }
        let derived = postprocess::resample(src, w, h, lr, lr);
        out.logits(slot, lr).copy_from_slice(&derived);
    }
    Ok(())
}
