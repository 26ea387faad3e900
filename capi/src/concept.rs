//! `sam2_concept_model`: SAM 3, a phrase or exemplar boxes → every instance, and its result
//! (`sam2_concept_result`).

use std::ffi::c_char;

use super::device::{sam2_provider, session_options};
use super::device::{SAM2_ON_MISMATCH_FALLBACK, SAM2_OPTIMIZATION_ALL, SAM2_WEIGHTS_SHARED};
use super::embedding::sam2_embedding;
use super::encoder::{encode_into, sam2_encoder, OutputTargetCodes, SAM2_OUTPUT_DEVICE};
use super::{
    arg_out, arg_slice, arg_str, flag, guard, handle_ref, impl_options, read_options, sam2_status,
    Handle,
};
use sam2::concept::{
    Concept, ConceptModel, ConceptModelOptions, Exemplar, Nms, SegmentOptions, Segmentation,
};
use sam2::Error;

/// A SAM 3 concept model: its image encoder, language encoder and decoder, on shared weights.
/// Opaque; create with `sam2_concept_model_new`, release with `sam2_concept_model_free`.
/// Thread-safe: encodes and segmentations may be called from several threads at once (each
/// graph's runs take turns).
pub struct sam2_concept_model {
    _opaque: [u8; 0],
}
impl Handle for sam2_concept_model {
    type Inner = ConceptModel;
}

/// Options of `sam2_concept_model_new`. Initialise with `sam2_concept_model_options_init`. The
/// session fields mean what they mean in `sam2_encoder_options`, for all three graphs.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_concept_model_options {
    /// `sizeof(sam2_concept_model_options)`.
    pub struct_size: u32,
    /// `SAM2_OUTPUT_DEVICE` (default) or `SAM2_OUTPUT_HOST`: where embeddings are written.
    pub output_target: u32,
    /// Intra-op threads of each session; 0 lets ONNX Runtime choose.
    pub intra_threads: u32,
    /// Execution providers wanted, in order of preference; NULL with 0 means the CPU.
    pub providers: *const sam2_provider,
    pub provider_count: usize,
    /// `SAM2_ON_MISMATCH_FALLBACK` (default) or `SAM2_ON_MISMATCH_FAIL`.
    pub on_device_mismatch: u32,
    /// `SAM2_WEIGHTS_SHARED` (default) or `SAM2_WEIGHTS_COPY`.
    pub weight_sharing: u32,
    /// `SAM2_OPTIMIZATION_ALL` (default), `SAM2_OPTIMIZATION_BASIC` or `SAM2_OPTIMIZATION_NONE`.
    pub graph_optimization: u32,
    /// Load-time rewrites turned off (`SAM2_REWRITE_*` bits; 0: none turned off).
    pub disabled_rewrites: u64,
    /// NUL-terminated UTF-8 path of CLIP's vocabulary (`bpe_simple_vocab_16e6.txt.gz`); NULL:
    /// the file of that name beside the graphs. Read during `sam2_concept_model_new` only.
    pub vocabulary_path: *const c_char,
}

impl_options!(sam2_concept_model_options, earlier_sizes: []);

impl Default for sam2_concept_model_options {
    fn default() -> Self {
        sam2_concept_model_options {
            struct_size: std::mem::size_of::<Self>() as u32,
            output_target: SAM2_OUTPUT_DEVICE,
            intra_threads: 0,
            providers: std::ptr::null(),
            provider_count: 0,
            on_device_mismatch: SAM2_ON_MISMATCH_FALLBACK,
            weight_sharing: SAM2_WEIGHTS_SHARED,
            graph_optimization: SAM2_OPTIMIZATION_ALL,
            disabled_rewrites: 0,
            vocabulary_path: std::ptr::null(),
        }
    }
}

/// Fills `options` with the defaults and sets its `struct_size`; pass
/// `sizeof(sam2_concept_model_options)` (see `sam2_encoder_options_init`).
#[no_mangle]
pub extern "C" fn sam2_concept_model_options_init(
    options: *mut sam2_concept_model_options,
    struct_size: usize,
) -> sam2_status {
    super::init_options(options, struct_size)
}

fn model_options(o: &sam2_concept_model_options) -> Result<ConceptModelOptions, Error> {
    let mut out = ConceptModelOptions {
        output_target: OutputTargetCodes::parse(o.output_target, "options.output_target")?,
        ..Default::default()
    };
    out.session = session_options(
        o.intra_threads,
        o.providers,
        o.provider_count,
        o.on_device_mismatch,
        o.weight_sharing,
        o.graph_optimization,
        o.disabled_rewrites,
    )?;
    if !o.vocabulary_path.is_null() {
        out.vocabulary = Some(arg_str(o.vocabulary_path, "options.vocabulary_path")?.into());
    }
    Ok(out)
}

/// Loads a SAM 3 export: `path` is its folder (`sam3_image_encoder.onnx`,
/// `sam3_language_encoder.onnx`, `sam3_decoder.onnx`, and CLIP's vocabulary unless the options
/// name it), or one of its graphs (the others beside it, with the same prefix).
///
/// `options`: NULL for the defaults. Errors: `SAM2_ERR_MODEL` (a graph missing, unreadable or not
/// SAM 3's, naming it; a missing or foreign vocabulary), `SAM2_ERR_IO`,
/// `SAM2_ERR_RUNTIME_NOT_FOUND`, `SAM2_ERR_INVALID_ARGUMENT`,
/// `SAM2_ERR_ENVIRONMENT_CONFIGURATION` (as `sam2_encoder_new`).
///
/// The caller owns `*out` and frees it with `sam2_concept_model_free`. Out-parameters are
/// untouched on failure.
#[no_mangle]
pub extern "C" fn sam2_concept_model_new(
    path: *const c_char,
    options: *const sam2_concept_model_options,
    out: *mut *mut sam2_concept_model,
) -> sam2_status {
    guard(|| {
        let path = arg_str(path, "path")?;
        let out = arg_out(out, "out")?;
        let options = read_options(options, "options")?;
        let options = model_options(&options)?;
        let model = ConceptModel::new(path, &options).map_err(super::option_names)?;
        out.set(super::publish::<sam2_concept_model>(model));
        Ok(())
    })
}

/// Releases a concept model. Embeddings it made stay valid. NULL is a no-op. Do not free it
/// twice, nor while it is in use.
#[no_mangle]
pub extern "C" fn sam2_concept_model_free(model: *mut sam2_concept_model) {
    super::free_handle(model, "concept model");
}

/// Encodes an image with the model's image encoder (the pixel arguments are those of
/// `sam2_encode`). The embedding (SAM 3's three feature levels, 111 MB in float32) stays where
/// the options put it; `sam2_embedding_save` writes a host one and refuses a device one with
/// `SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE`. Errors: those of `sam2_encode`. Thread-safe.
///
/// The caller owns `*out` and frees it with `sam2_embedding_free`. Out-parameters are untouched
/// on failure.
#[no_mangle]
pub extern "C" fn sam2_concept_encode(
    model: *const sam2_concept_model,
    pixels: *const u8,
    pixels_len: usize,
    width: u32,
    height: u32,
    stride: usize,
    pixel_format: u32,
    out: *mut *mut sam2_embedding,
) -> sam2_status {
    guard(|| {
        let model = handle_ref(model, "model")?;
        encode_into(
            model.encoder(),
            pixels,
            pixels_len,
            width,
            height,
            stride,
            pixel_format,
            out,
        )
    })
}

/// Gives a handle on the model's image encoder, shared with the model (no copy): for
/// `sam2_predictor_new` with SAM 3's click decoder (`sam3_interactive_decoder.onnx`, exported
/// with `sam2-export-sam3 --interactive`), so that clicks and boxes are segmented on the same
/// embeddings as the concepts, and for `sam2_encode`. Errors: `SAM2_ERR_NULL_ARGUMENT`,
/// `SAM2_ERR_INVALID_ARGUMENT` (not a live concept model).
///
/// The caller owns `*out` and frees it with `sam2_encoder_free`. Out-parameters are untouched on
/// failure. Freeing either leaves the other valid.
#[no_mangle]
pub extern "C" fn sam2_concept_model_encoder(
    model: *const sam2_concept_model,
    out: *mut *mut sam2_encoder,
) -> sam2_status {
    guard(|| {
        let model = handle_ref(model, "model")?;
        let out = arg_out(out, "out")?;
        out.set(super::publish::<sam2_encoder>(model.shared_encoder()));
        Ok(())
    })
}

/// Writes the most exemplar boxes one concept may hold (the decoder's box slots: 8).
#[no_mangle]
pub extern "C" fn sam2_concept_model_max_exemplars(
    model: *const sam2_concept_model,
    out: *mut usize,
) -> sam2_status {
    guard(|| {
        let model = handle_ref(model, "model")?;
        arg_out(out, "out")?.set(model.max_exemplars());
        Ok(())
    })
}

/// An exemplar box: `{x1, y1, x2, y2}` in image pixels (inside the image, x1 < x2, y1 < y2),
/// and 1 when it shows the concept, 0 when it shows something that is not it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_exemplar {
    pub r#box: [f32; 4],
    pub positive: u32,
}

/// One concept to find: a phrase, exemplar boxes, or both.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_concept {
    /// NUL-terminated UTF-8 ("yellow school bus"), at most 16 KiB; NULL (or only white space)
    /// with boxes alone. A phrase over 30 tokens is cut as SAM 3's tokenizer cuts it and
    /// reported (`sam2_concept_summary.truncated`).
    pub phrase: *const c_char,
    /// NULL, or `exemplar_count` boxes (at most `sam2_concept_model_max_exemplars`).
    pub exemplars: *const sam2_exemplar,
    pub exemplar_count: usize,
}

/// Suppression: none (default, as SAM 3's own processor).
pub const SAM2_NMS_NONE: u32 = 0;
/// Suppression: an instance whose box overlaps a better one's by more than `nms_iou` goes.
pub const SAM2_NMS_BOXES: u32 = 1;
/// Suppression: an instance whose mask overlaps a better one's by more than `nms_iou` goes.
pub const SAM2_NMS_MASKS: u32 = 2;

/// Options of `sam2_concept_segment`. Initialise with `sam2_concept_segment_options_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_concept_segment_options {
    /// `sizeof(sam2_concept_segment_options)`.
    pub struct_size: u32,
    /// Instances scoring above it are kept, in [0, 1] (default 0.5, SAM 3's).
    pub score_threshold: f32,
    /// `SAM2_NMS_NONE` (default), `SAM2_NMS_BOXES` or `SAM2_NMS_MASKS`, per concept.
    pub nms: u32,
    /// The overlap (intersection over union) above which suppression drops, in (0, 1] (default
    /// 0.7).
    pub nms_iou: f32,
    /// Most instances kept per concept, the best first (default 200: all the queries).
    pub max_instances: u32,
    /// 1 (default): masks are made; 0: boxes and scores only.
    pub masks: u32,
}

impl_options!(sam2_concept_segment_options, earlier_sizes: []);

impl Default for sam2_concept_segment_options {
    fn default() -> Self {
        let d = SegmentOptions::default();
        sam2_concept_segment_options {
            struct_size: std::mem::size_of::<Self>() as u32,
            score_threshold: d.score_threshold,
            nms: SAM2_NMS_NONE,
            nms_iou: 0.7,
            max_instances: d.max_instances as u32,
            masks: d.masks as u32,
        }
    }
}

/// Fills `options` with the defaults and sets its `struct_size`; pass
/// `sizeof(sam2_concept_segment_options)` (see `sam2_encoder_options_init`).
#[no_mangle]
pub extern "C" fn sam2_concept_segment_options_init(
    options: *mut sam2_concept_segment_options,
    struct_size: usize,
) -> sam2_status {
    super::init_options(options, struct_size)
}

fn segment_options(o: &sam2_concept_segment_options) -> Result<SegmentOptions, Error> {
    let nms = match o.nms {
        SAM2_NMS_NONE => Nms::None,
        SAM2_NMS_BOXES => Nms::Boxes(o.nms_iou),
        SAM2_NMS_MASKS => Nms::Masks(o.nms_iou),
        other => {
            return Err(Error::invalid(
                "options.nms",
                format!("must be SAM2_NMS_NONE, SAM2_NMS_BOXES or SAM2_NMS_MASKS, got {other}"),
            ))
        }
    };
    Ok(SegmentOptions {
        score_threshold: o.score_threshold,
        nms,
        max_instances: o.max_instances as usize,
        masks: flag(o.masks, "options.masks")?,
    })
}

fn concepts_arg(concepts: *const sam2_concept, count: usize) -> Result<Vec<Concept>, Error> {
    if concepts.is_null() {
        return Err(Error::NullArgument("concepts"));
    }
    if count > sam2::concept::MAX_CONCEPTS {
        return Err(Error::invalid(
            "concept_count",
            format!(
                "is {count}; at most {} concepts in one call",
                sam2::concept::MAX_CONCEPTS
            ),
        ));
    }
    let given = arg_slice(concepts, count, "concepts")?;
    given
        .iter()
        .map(|c| {
            let text = if c.phrase.is_null() {
                None
            } else {
                Some(arg_str(c.phrase, "concepts[].phrase")?.to_string())
            };
            if c.exemplar_count > sam2::concept::MAX_EXEMPLARS {
                return Err(Error::invalid(
                    "concepts[].exemplar_count",
                    format!(
                        "is {}; a decoder takes at most {} exemplar boxes",
                        c.exemplar_count,
                        sam2::concept::MAX_EXEMPLARS
                    ),
                ));
            }
            if c.exemplars.is_null() && c.exemplar_count > 0 {
                return Err(Error::NullArgument("concepts[].exemplars"));
            }
            let exemplars = arg_slice(c.exemplars, c.exemplar_count, "concepts[].exemplars")?
                .iter()
                .map(|e| {
                    Ok(Exemplar {
                        rect: e.r#box,
                        positive: flag(e.positive, "concepts[].exemplars[].positive")?,
                    })
                })
                .collect::<Result<Vec<_>, Error>>()?;
            Ok(Concept { text, exemplars })
        })
        .collect()
}

/// The instances of one `sam2_concept_segment`. Opaque and immutable; release with
/// `sam2_concept_result_free`. Thread-safe: several threads may read it at once.
pub struct sam2_concept_result {
    _opaque: [u8; 0],
}
impl Handle for sam2_concept_result {
    type Inner = Segmentation;
}

/// Finds every instance of each concept in an image encoded by this model
/// (`sam2_concept_encode`, or `sam2_embedding_load` of its file): one decoder run per concept,
/// phrases through the language encoder once per model and remembered. Several concepts in one
/// call are told apart by each instance's `concept` index.
///
/// `concepts`: `concept_count` (1 to 256) concepts, read during the call only. `options`: NULL
/// for the defaults. Errors: `SAM2_ERR_INVALID_ARGUMENT` (no concept, a concept with neither a
/// phrase nor a box, a phrase that is not UTF-8 or over 16 KiB, a box that is not finite, empty,
/// inverted or outside the image, more boxes than the decoder takes, an option out of range:
/// each naming the concept and box), `SAM2_ERR_MODEL_MISMATCH` (an embedding of a SAM2 encoder,
/// or of another SAM 3 export), `SAM2_ERR_OUT_OF_MEMORY`, `SAM2_ERR_ONNXRUNTIME`. Thread-safe.
///
/// The caller owns `*out` and frees it with `sam2_concept_result_free`. Out-parameters are
/// untouched on failure.
#[no_mangle]
pub extern "C" fn sam2_concept_segment(
    model: *const sam2_concept_model,
    embedding: *const sam2_embedding,
    concepts: *const sam2_concept,
    concept_count: usize,
    options: *const sam2_concept_segment_options,
    out: *mut *mut sam2_concept_result,
) -> sam2_status {
    guard(|| {
        let model = handle_ref(model, "model")?;
        let embedding = handle_ref(embedding, "embedding")?;
        let out = arg_out(out, "out")?;
        let concepts = concepts_arg(concepts, concept_count)?;
        let options = read_options(options, "options")?;
        let options = segment_options(&options)?;
        let result = model.segment(&embedding.inner, &concepts, &options)?;
        out.set(super::publish::<sam2_concept_result>(result));
        Ok(())
    })
}

/// Releases a result. NULL is a no-op. Do not free it twice, nor while it is in use.
#[no_mangle]
pub extern "C" fn sam2_concept_result_free(result: *mut sam2_concept_result) {
    super::free_handle(result, "concept result");
}

/// Writes the number of instances found (all concepts together), the number of concepts, and
/// the image size (every mask's).
#[no_mangle]
pub extern "C" fn sam2_concept_result_count(
    result: *const sam2_concept_result,
    out_instances: *mut usize,
    out_concepts: *mut usize,
    out_width: *mut u32,
    out_height: *mut u32,
) -> sam2_status {
    guard(|| {
        let r = handle_ref(result, "result")?;
        let i = arg_out(out_instances, "out_instances")?;
        let c = arg_out(out_concepts, "out_concepts")?;
        let w = arg_out(out_width, "out_width")?;
        let h = arg_out(out_height, "out_height")?;
        i.set(r.instances.len());
        c.set(r.concepts.len());
        w.set(r.width);
        h.set(r.height);
        Ok(())
    })
}

/// What one concept gave beside its instances.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sam2_concept_summary {
    /// The probability that the concept is in the image at all (SAM 3's presence head).
    pub presence: f32,
    /// 1 when the phrase was longer than the text encoder takes (30 tokens) and was cut.
    pub truncated: u32,
    /// Its instances in the result.
    pub instances: usize,
}

/// Writes what concept `index` (0 ≤ index < concept count, in the order given) gave.
#[no_mangle]
pub extern "C" fn sam2_concept_result_summary(
    result: *const sam2_concept_result,
    index: usize,
    out_summary: *mut sam2_concept_summary,
) -> sam2_status {
    guard(|| {
        let r = handle_ref(result, "result")?;
        let c = r.concepts.get(index).ok_or_else(|| {
            Error::invalid(
                "index",
                format!(
                    "is {index}, but the result holds {} concepts",
                    r.concepts.len()
                ),
            )
        })?;
        arg_out(out_summary, "out_summary")?.set(sam2_concept_summary {
            presence: c.presence,
            truncated: c.truncated as u32,
            instances: c.instances,
        });
        Ok(())
    })
}

/// One instance, beside its mask.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sam2_instance_info {
    /// The concept (its index in the call) that found it.
    pub concept: usize,
    /// SAM 3's score: the query's probability times the presence probability.
    pub score: f32,
    /// The detector's box `{x1, y1, x2, y2}` in image pixels (not clipped to the image).
    pub r#box: [f32; 4],
    /// Pixels in the mask (0 when masks were not asked for).
    pub area: u64,
    /// Which of the decoder's queries it is.
    pub query: u32,
}

fn instance_at(
    result: *const sam2_concept_result,
    index: usize,
) -> Result<&'static sam2::concept::Instance, Error> {
    let r = handle_ref(result, "result")?;
    r.instances.get(index).ok_or_else(|| {
        Error::invalid(
            "index",
            format!(
                "is {index}, but the result holds {} instances",
                r.instances.len()
            ),
        )
    })
}

/// Writes what is known of instance `index` (0 ≤ index < instance count). Instances come
/// concept by concept in the order given, the best first within each.
#[no_mangle]
pub extern "C" fn sam2_concept_result_instance(
    result: *const sam2_concept_result,
    index: usize,
    out_info: *mut sam2_instance_info,
) -> sam2_status {
    guard(|| {
        let i = instance_at(result, index)?;
        arg_out(out_info, "out_info")?.set(sam2_instance_info {
            concept: i.concept,
            score: i.score,
            r#box: i.bbox,
            area: i.area,
            query: i.query as u32,
        });
        Ok(())
    })
}

/// Copies instance `index`'s mask into the caller's `buf`: `width × height` bytes, row-major, 1
/// inside. A `buf_len` below that gives `SAM2_ERR_BUFFER_TOO_SMALL` and writes nothing; a result
/// made without masks gives `SAM2_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn sam2_concept_result_mask(
    result: *const sam2_concept_result,
    index: usize,
    buf: *mut u8,
    buf_len: usize,
) -> sam2_status {
    guard(|| {
        let i = instance_at(result, index)?;
        if buf.is_null() {
            return Err(Error::NullArgument("buf"));
        }
        if i.mask.is_empty() {
            return Err(Error::invalid(
                "index",
                "the result was made without masks (options.masks = 0)",
            ));
        }
        let needed = i.mask.len();
        if buf_len < needed {
            return Err(Error::BufferTooSmall {
                needed,
                given: buf_len,
            });
        }
        // SAFETY: non-NULL; the caller promises `buf_len` ≥ `needed` writable bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(buf, needed) };
        out.copy_from_slice(&i.mask);
        Ok(())
    })
}
