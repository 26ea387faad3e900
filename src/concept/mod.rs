//! SAM 3, "Segment Anything with Concepts": a phrase or exemplar boxes → every instance of the
//! concept in the image, with a presence score. The family's own parts beside SAM 2's: the text
//! tokenizer its phrases go through ([`Tokenizer`]), the concept model that loads its three
//! graphs ([`ConceptModel`]), and the segmentation of concepts on an embedding
//! ([`ConceptModel::segment`]).

mod clean;
mod model;
mod positions;
mod segment;
pub mod tokenizer;

pub use model::{
    ConceptModel, ConceptModelOptions, ConceptPaths, DECODER_FILE, IMAGE_ENCODER_FILE,
    LANGUAGE_ENCODER_FILE, MAX_EXEMPLARS, VOCABULARY_FILE,
};
pub use segment::{
    validate_concepts, Concept, ConceptSummary, Exemplar, Instance, Nms, SegmentOptions,
    Segmentation, MASK_SIDE, MAX_CONCEPTS, MAX_PHRASE_BYTES, VISUAL_PHRASE,
};
pub use tokenizer::{Tokenizer, Tokens};

/// Placeholder until the torchvision-exact resize lands: nearest neighbour to `[3, size, size]`.
pub(crate) fn resize_tmp(image: &crate::image::ImageView<'_>, size: usize) -> Vec<u8> {
    let mut out = vec![0u8; 3 * size * size];
    let plane = size * size;
    for y in 0..size {
        let sy = y * image.height / size;
        for x in 0..size {
            let sx = x * image.width / size;
            let o = sy * image.stride + sx * image.format.channels();
            for (c, off) in image.format.rgb_offsets().iter().enumerate() {
                out[c * plane + y * size + x] = image.data[o + off];
            }
        }
    }
    out
}
