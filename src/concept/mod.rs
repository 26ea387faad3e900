//! SAM 3, "Segment Anything with Concepts": a phrase or exemplar boxes → every instance of the
//! concept in the image, with a presence score. This module holds what the family needs beside
//! SAM 2's: so far, the text tokenizer its phrases go through.

mod clean;
pub mod tokenizer;

pub use tokenizer::{Tokenizer, Tokens};
