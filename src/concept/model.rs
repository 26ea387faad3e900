//! The concept model: SAM 3's three graphs loaded together, each on shared weights. The image
//! encoder is an [`Encoder`] of the SAM 3 family, so its embeddings are the library's embeddings
//! (on the device or in host memory, saved and loaded with the embedding files' guarantees);
//! phrases go through the tokenizer and the language encoder once and are remembered; the
//! decoder turns an embedding, a phrase and exemplar boxes into instances ([`super::segment`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ort::memory::MemoryInfo;
use ort::session::Session;
use ort::value::{DynTensor, DynValue, Tensor, TensorElementType};

use super::tokenizer::{Tokenizer, Tokens, CONTEXT_LENGTH};
use crate::device::EffectiveDevice;
use crate::embedding::Embedding;
use crate::encoder::{Encoder, EncoderOptions, OutputTarget};
use crate::error::{Error, Result};
use crate::export::{self, EncoderFamily};
use crate::image::ImageView;
use crate::session::{self, SessionOptions};
use crate::weights::{self, ModelWeights};

/// File names of the three graphs (samexporter 0.5.0's, which `sam2-export-sam3` writes too)
/// and of CLIP's vocabulary beside them.
pub const IMAGE_ENCODER_FILE: &str = "sam3_image_encoder.onnx";
pub const LANGUAGE_ENCODER_FILE: &str = "sam3_language_encoder.onnx";
pub const DECODER_FILE: &str = "sam3_decoder.onnx";
pub const VOCABULARY_FILE: &str = "bpe_simple_vocab_16e6.txt.gz";

/// Phrases whose text features a model remembers (32 KB each); all are forgotten
/// when full.
const TEXT_CACHE_ENTRIES: usize = 1024;

/// Where a SAM 3 export's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConceptPaths {
    pub image_encoder: PathBuf,
    pub language_encoder: PathBuf,
    pub decoder: PathBuf,
    /// CLIP's vocabulary: the one the options name, else [`VOCABULARY_FILE`] beside the graphs.
    pub vocabulary: PathBuf,
}

impl ConceptPaths {
    /// The export at `path`: its folder, or any one of its three graphs (the others are looked
    /// for beside it, with the same prefix: `x/sam3_decoder.onnx` → `x/sam3_image_encoder.onnx`).
    pub fn find(path: impl AsRef<Path>, vocabulary: Option<&Path>) -> Result<Self> {
        let path = path.as_ref();
        let (dir, prefix) = if path.is_dir() {
            (path.to_path_buf(), String::new())
        } else {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| Error::model(path, "not a SAM 3 export (no file name)"))?;
            let prefix = [IMAGE_ENCODER_FILE, LANGUAGE_ENCODER_FILE, DECODER_FILE]
                .iter()
                .find_map(|f| name.strip_suffix(f))
                .ok_or_else(|| {
                    Error::model(
                        path,
                        format!(
                            "not a SAM 3 export: give its folder or one of {IMAGE_ENCODER_FILE}, \
                             {LANGUAGE_ENCODER_FILE}, {DECODER_FILE}"
                        ),
                    )
                })?;
            (
                path.parent().unwrap_or(Path::new(".")).to_path_buf(),
                prefix.to_string(),
            )
        };
        let file = |name: &str| dir.join(format!("{prefix}{name}"));
        let paths = ConceptPaths {
            image_encoder: file(IMAGE_ENCODER_FILE),
            language_encoder: file(LANGUAGE_ENCODER_FILE),
            decoder: file(DECODER_FILE),
            vocabulary: vocabulary.map_or_else(|| dir.join(VOCABULARY_FILE), Path::to_path_buf),
        };
        for (p, what) in [
            (&paths.image_encoder, "image encoder"),
            (&paths.language_encoder, "language encoder"),
            (&paths.decoder, "decoder"),
        ] {
            if !p.is_file() {
                return Err(Error::model(
                    p,
                    format!("SAM 3's {what} is missing (an export is {IMAGE_ENCODER_FILE}, {LANGUAGE_ENCODER_FILE} and {DECODER_FILE} in one folder)"),
                ));
            }
        }
        if !paths.vocabulary.is_file() {
            return Err(Error::model(
                &paths.vocabulary,
                format!(
                    "CLIP's vocabulary is missing: put {VOCABULARY_FILE} beside the graphs, or \
                     name it in the options (exports carry it; sam2-export-sam3 copies it)"
                ),
            ));
        }
        Ok(paths)
    }
}

/// Options of a concept model.
#[derive(Debug, Clone, Default)]
pub struct ConceptModelOptions {
    /// Where embeddings are written: on the execution device (default) or in host memory.
    pub output_target: OutputTarget,
    /// The three sessions' settings (providers, threads, shared weights, rewrites).
    pub session: SessionOptions,
    /// CLIP's vocabulary, when it is not [`VOCABULARY_FILE`] beside the graphs.
    pub vocabulary: Option<PathBuf>,
}

/// One of the two graphs besides the encoder: its session and the shared weights it reads.
#[derive(Debug)]
pub(crate) struct Graph {
    pub(crate) session: Mutex<Session>,
    weights: Arc<ModelWeights>,
    pub(crate) path: PathBuf,
    pub(crate) device: EffectiveDevice,
    pub(crate) inputs: HashMap<String, (TensorElementType, Vec<i64>)>,
}

impl Graph {
    fn load(
        path: &Path,
        role: &str,
        options: &SessionOptions,
        inputs: &[(&str, TensorElementType)],
        outputs: &[(&str, TensorElementType)],
    ) -> Result<Graph> {
        let weights = weights::get(
            path,
            options.weights,
            weights::Plan::new(options.optimization, &options.device, options.rewrites),
        )?;
        let (session, device) = session::build(&weights, path, options, role, session::Idle::Spin)?;
        let table =
            |outlets: &[ort::value::Outlet]| -> HashMap<String, (TensorElementType, Vec<i64>)> {
                outlets
                    .iter()
                    .filter_map(|o| {
                        export::tensor_info(std::slice::from_ref(o), o.name())
                            .map(|info| (o.name().to_string(), info))
                    })
                    .collect()
            };
        let (have_in, have_out) = (table(session.inputs()), table(session.outputs()));
        let mut wrong = Vec::new();
        for (want, have, side) in [(inputs, &have_in, "input"), (outputs, &have_out, "output")] {
            for (name, ty) in want {
                match have.get(*name) {
                    Some((got, _)) if got == ty => {}
                    Some((got, _)) => wrong.push(format!("{side} `{name}` is {got}, not {ty}")),
                    None => wrong.push(format!("no {side} `{name}`")),
                }
            }
        }
        if !wrong.is_empty() {
            let mut found: Vec<&String> = have_in.keys().chain(have_out.keys()).collect();
            found.sort();
            return Err(Error::model(
                path,
                format!("not SAM 3's {role}: {} (found {found:?})", wrong.join("; ")),
            ));
        }
        Ok(Graph {
            session: Mutex::new(session),
            weights,
            path: path.to_path_buf(),
            device,
            inputs: have_in,
        })
    }

    /// Runs the graph with `inputs` and `tensors` bound in place (read where they lie) and every
    /// named output bound to host memory.
    pub(crate) fn run(
        &self,
        inputs: &[(&str, &DynValue)],
        tensors: &[(&str, &DynTensor)],
        outputs: &[&str],
        host: &MemoryInfo<'static>,
    ) -> Result<HashMap<String, DynValue>> {
        let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        let mut binding = session.create_binding()?;
        for (name, value) in inputs {
            binding.bind_input(*name, *value)?;
        }
        for (name, value) in tensors {
            binding.bind_input(*name, *value)?;
        }
        for name in outputs {
            binding.bind_output_to_device(*name, host)?;
        }
        let mut produced = session.run_binding(&binding)?;
        let mut out = HashMap::with_capacity(outputs.len());
        for name in outputs {
            let value = produced.remove(*name).ok_or_else(|| {
                Error::OnnxRuntime(format!("{} produced no `{name}`", self.path.display()))
            })?;
            out.insert(name.to_string(), value);
        }
        Ok(out)
    }
}

/// A phrase as the decoder takes it: the language encoder's padding mask and features.
#[derive(Debug)]
pub(crate) struct Text {
    pub(crate) mask: DynValue,
    pub(crate) features: DynValue,
    pub(crate) tokens: Tokens,
}

/// SAM 3 for images: a phrase or exemplar boxes → every instance of the concept.
pub struct ConceptModel {
    /// Shared with the hosts that open a predictor of SAM 3's clicks on it.
    pub(crate) encoder: Arc<Encoder>,
    pub(crate) language: Graph,
    pub(crate) decoder: Graph,
    tokenizer: Tokenizer,
    texts: Mutex<HashMap<String, Arc<Text>>>,
    /// Exemplar box slots of the decoder (8 in the exports known).
    pub(crate) box_slots: usize,
    pub(crate) host: MemoryInfo<'static>,
    pub(crate) positions: Arc<super::positions::Positions>,
    paths: ConceptPaths,
}

impl std::fmt::Debug for ConceptModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConceptModel")
            .field("paths", &self.paths)
            .finish()
    }
}

/// Names of the decoder's tensors.
pub(crate) mod names {
    pub const POSITIONS: [&str; 3] = ["vision_pos_enc_0", "vision_pos_enc_1", "vision_pos_enc_2"];
    pub const LANGUAGE_MASK: &str = "language_mask";
    pub const LANGUAGE_FEATURES: &str = "language_features";
    pub const BOX_COORDS: &str = "box_coords";
    pub const BOX_LABELS: &str = "box_labels";
    pub const BOX_MASKS: &str = "box_masks";
    pub const PRED_BOXES: &str = "pred_boxes";
    pub const PRED_LOGITS: &str = "pred_logits";
    pub const PRED_MASKS: &str = "pred_masks";
    pub const PRESENCE: &str = "presence_logit_dec";
    pub const TOKENS: &str = "tokens";
    pub const TEXT_MASK: &str = "text_attention_mask";
    pub const TEXT_MEMORY: &str = "text_memory";
}

/// Most exemplar box slots a decoder may declare (a free dimension is taken as this many).
pub const MAX_EXEMPLARS: usize = 64;

impl ConceptModel {
    /// Loads the export at `path` (its folder, or one of its graphs: [`ConceptPaths::find`]).
    pub fn new(path: impl AsRef<Path>, options: &ConceptModelOptions) -> Result<Self> {
        options.session.validate()?;
        let paths = ConceptPaths::find(path, options.vocabulary.as_deref())?;
        let tokenizer = Tokenizer::from_file(&paths.vocabulary)?;
        let encoder = Arc::new(Encoder::new(
            &paths.image_encoder,
            &EncoderOptions {
                output_target: options.output_target,
                session: options.session.clone(),
            },
        )?);
        if encoder.spec().family != EncoderFamily::Sam3 {
            return Err(Error::model(
                &paths.image_encoder,
                format!(
                    "a SAM2 image encoder ({} naming), not SAM 3's: a concept model needs SAM 3's three graphs",
                    encoder.spec().family.name()
                ),
            ));
        }
        use names::*;
        use TensorElementType::{Bool, Float32, Int64};
        let language = Graph::load(
            &paths.language_encoder,
            "language encoder",
            &options.session,
            &[(TOKENS, Int64)],
            &[(TEXT_MASK, Bool), (TEXT_MEMORY, Float32)],
        )?;
        let check_shape = |graph: &Graph, name: &str, want: &[i64]| -> Result<()> {
            let got = &graph.inputs.get(name).map(|i| &i.1);
            let fits = got.is_some_and(|g| {
                g.len() == want.len()
                    && g.iter()
                        .zip(want)
                        .all(|(&g, &w)| g == w || g == -1 || w == -1)
            });
            if fits {
                Ok(())
            } else {
                Err(Error::model(
                    &graph.path,
                    format!("input `{name}` must be {want:?}, found {got:?}"),
                ))
            }
        };
        check_shape(&language, TOKENS, &[1, CONTEXT_LENGTH as i64])?;
        let features = EncoderFamily::Sam3.tensor_names();
        let mut decoder_inputs: Vec<(&str, TensorElementType)> = POSITIONS
            .iter()
            .chain(features.iter())
            .map(|n| (*n, Float32))
            .collect();
        decoder_inputs.extend([
            (LANGUAGE_MASK, Bool),
            (LANGUAGE_FEATURES, Float32),
            (BOX_COORDS, Float32),
            (BOX_LABELS, Int64),
            (BOX_MASKS, Bool),
        ]);
        let decoder = Graph::load(
            &paths.decoder,
            "decoder",
            &options.session,
            &decoder_inputs,
            &[
                (PRED_BOXES, Float32),
                (PRED_LOGITS, Float32),
                (PRED_MASKS, Float32),
                (PRESENCE, Float32),
            ],
        )?;
        let shapes = crate::export::SAM3_EMBEDDING_SHAPES;
        for (i, name) in features.iter().enumerate() {
            check_shape(&decoder, name, &shapes[i])?;
            check_shape(&decoder, POSITIONS[i], &shapes[i])?;
        }
        check_shape(&decoder, LANGUAGE_MASK, &[1, CONTEXT_LENGTH as i64])?;
        check_shape(&decoder, LANGUAGE_FEATURES, &[CONTEXT_LENGTH as i64, 1, -1])?;
        check_shape(&decoder, BOX_COORDS, &[-1, 1, 4])?;
        let declared = decoder.inputs[BOX_COORDS].1[0];
        let box_slots = if declared < 0 {
            MAX_EXEMPLARS
        } else if declared == 0 || declared as usize > MAX_EXEMPLARS {
            return Err(Error::model(
                &paths.decoder,
                format!(
                    "`{BOX_COORDS}` declares {declared} box slots (1 to {MAX_EXEMPLARS} taken)"
                ),
            ));
        } else {
            declared as usize
        };
        check_shape(&decoder, BOX_LABELS, &[box_slots as i64, 1])?;
        check_shape(&decoder, BOX_MASKS, &[1, box_slots as i64])?;
        Ok(ConceptModel {
            encoder,
            language,
            decoder,
            tokenizer,
            texts: Mutex::new(HashMap::new()),
            box_slots,
            host: crate::device::host_memory()?,
            positions: super::positions::shared()?,
            paths,
        })
    }

    /// Encodes an image into SAM 3's features: an [`Embedding`] of the `sam3` family, where the
    /// options put it (the device by default).
    pub fn encode(&self, image: &ImageView<'_>) -> Result<Embedding> {
        self.encoder.encode(image)
    }

    /// The image encoder (its device, fingerprint, variant, weights).
    pub fn encoder(&self) -> &Encoder {
        &self.encoder
    }

    /// The image encoder, shared (no copy): what a predictor of SAM 3's clicks is made for
    /// ([`crate::Predictor::for_encoder`] with `sam3_interactive_decoder.onnx`), so that one
    /// encode serves concepts and clicks.
    pub fn shared_encoder(&self) -> Arc<Encoder> {
        Arc::clone(&self.encoder)
    }

    pub fn paths(&self) -> &ConceptPaths {
        &self.paths
    }

    /// Exemplar boxes one concept may hold (the decoder's box slots).
    pub fn max_exemplars(&self) -> usize {
        self.box_slots
    }

    /// What the decoder's session runs on.
    pub fn decoder_device(&self) -> &EffectiveDevice {
        &self.decoder.device
    }

    /// Bytes of weights the three graphs hold outside ONNX Runtime's sessions.
    pub fn weight_bytes(&self) -> usize {
        self.encoder.weight_bytes()
            + self.language.weights.weight_bytes
            + self.decoder.weights.weight_bytes
    }

    /// The phrase's tokens, as the text encoder takes them (cut to 32, [`Tokens::truncated`]).
    pub fn tokens(&self, phrase: &str) -> Tokens {
        self.tokenizer.tokens(phrase)
    }

    /// The phrase through the language encoder, once: later calls return what the first made.
    pub(crate) fn text(&self, phrase: &str) -> Result<Arc<Text>> {
        if let Some(hit) = self
            .texts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(phrase)
        {
            return Ok(Arc::clone(hit));
        }
        let tokens = self.tokenizer.tokens(phrase);
        let ids = Tensor::from_array(([1usize, CONTEXT_LENGTH], tokens.ids.to_vec()))?.into_dyn();
        use names::*;
        let mut out = self.language.run(
            &[(TOKENS, &ids)],
            &[],
            &[TEXT_MASK, TEXT_MEMORY],
            &self.host,
        )?;
        let mask = out.remove(TEXT_MASK).expect("bound");
        let features = out.remove(TEXT_MEMORY).expect("bound");
        let shape = features.shape().to_vec();
        let want_width = self.decoder.inputs[LANGUAGE_FEATURES].1[2];
        if shape.len() != 3
            || shape[0] != CONTEXT_LENGTH as i64
            || shape[1] != 1
            || (want_width > 0 && shape[2] != want_width)
        {
            return Err(Error::ModelMismatch(format!(
                "the language encoder gave `{TEXT_MEMORY}` of shape {shape:?}; the decoder takes [{CONTEXT_LENGTH}, 1, {want_width}]"
            )));
        }
        let text = Arc::new(Text {
            mask,
            features,
            tokens,
        });
        let mut texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
        if texts.len() >= TEXT_CACHE_ENTRIES {
            texts.clear();
        }
        texts.insert(phrase.to_string(), Arc::clone(&text));
        Ok(text)
    }

    /// Phrases whose text features are remembered now.
    pub fn cached_phrases(&self) -> usize {
        self.texts.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Refuses an embedding this model did not make: another family, or another image encoder.
    pub fn check_embedding(&self, embedding: &Embedding) -> Result<()> {
        if embedding.family() != EncoderFamily::Sam3 {
            return Err(Error::ModelMismatch(format!(
                "the embedding comes from a SAM2 image encoder ({} family); a concept model takes SAM 3's (`sam3` family)",
                embedding.family().name()
            )));
        }
        let mine = self.encoder.fingerprint();
        if embedding.fingerprint() != mine {
            return Err(Error::ModelMismatch(format!(
                "the embedding was made by encoder {} ({}), but this concept model's image encoder is {mine}",
                embedding.fingerprint(),
                embedding.precision()
            )));
        }
        Ok(())
    }
}
