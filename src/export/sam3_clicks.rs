//! SAM 3's SAM 2-style head for clicks and boxes (`sam2-export-sam3 --interactive`):
//! samexporter's decoder contract at SAM 3's sizes. Prompts are scaled to the 1008² frame, the
//! mask input and the low-res logits are 288², and the embedding inputs are the click features a
//! SAM 3 image encoder writes beside its three levels (`SAM3_CLICK_TENSORS`), so that one encode
//! serves the concepts and the clicks.

use super::{samexporter, DecoderExport, Description, EncoderFamily};

pub(super) const DESCRIPTION: Description = Description {
    export: DecoderExport::Sam3Clicks,
    name: "SAM 3 clicks",
    family: EncoderFamily::Sam3,
    input_side: super::SAM3_INPUT_SIDE,
    low_res_side: super::SAM3_CLICK_SHAPES[1][3] as usize,
    ..samexporter::DESCRIPTION
};
