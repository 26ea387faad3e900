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
