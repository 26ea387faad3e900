//! `sam2_predictor`: prompts on an embedding → masks.

use std::ffi::c_char;

use super::c_enum::c_enum;
use super::device::{
    sam2_provider, session_options, SAM2_ON_MISMATCH_FALLBACK, SAM2_OPTIMIZATION_ALL,
    SAM2_WEIGHTS_SHARED,
};
use super::embedding::sam2_embedding;
use super::encoder::sam2_encoder;
use super::masks::sam2_masks;
use super::{
    arg_out, arg_slice, arg_str, guard, handle_ref, impl_options, opt_handle_ref, read_options,
    sam2_status, Handle,
};
use sam2::Error;
use sam2::Fingerprint;
use sam2::{Point, PredictOptions, Predictor, PredictorOptions, Prompt};

/// Point label: include what is under the point.
pub const SAM2_POINT_POSITIVE: i32 = 1;
/// Point label: exclude what is under the point.
pub const SAM2_POINT_NEGATIVE: i32 = 0;

c_enum! {
    /// `SAM2_POINT_*` ↔ whether the point is positive.
    pub(crate) PointLabelCodes: i32 => bool {
        SAM2_POINT_POSITIVE => true,
        SAM2_POINT_NEGATIVE => false,
    }
}

/// A prompt decoder. Opaque; create with `sam2_predictor_new`, release with `sam2_predictor_free`.
/// Thread-safe: `sam2_predict` may be called from several threads at once.
pub struct sam2_predictor {
    _opaque: [u8; 0],
}
impl Handle for sam2_predictor {
    type Inner = Predictor;
}

/// Options of `sam2_predictor_new`. Initialise with `sam2_predictor_options_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_predictor_options {
    /// `sizeof(sam2_predictor_options)`.
    pub struct_size: u32,
    /// Intra-op threads of each session; 0 (default): the first session of the pool uses every
    /// core (ONNX Runtime's choice), the others one thread each.
    pub intra_threads: u32,
    /// NULL, or the fingerprint ("sam2fp1-…") of the encoder whose embeddings are accepted
    /// (from `sam2_encoder_fingerprint`). Read during `sam2_predictor_new` only.
    pub encoder_fingerprint: *const c_char,
    /// Execution providers wanted, in order of preference (read during `sam2_predictor_new`
    /// only); NULL with `provider_count` 0 means the CPU.
    pub providers: *const sam2_provider,
    pub provider_count: usize,
    /// `SAM2_ON_MISMATCH_FALLBACK` (default) or `SAM2_ON_MISMATCH_FAIL`.
    pub on_device_mismatch: u32,
    /// 0 (default): an embedding held on another device than the predictor's is refused with
    /// `SAM2_ERR_INVALID_ARGUMENT`. 1: it is copied to the host for each predict.
    pub allow_embedding_copy: u32,
    /// Sessions in the predictor's pool, i.e. predicts that run at once; 0 = one per core (at
    /// most 8). The sessions share the weights. A predict takes the first session when it is
    /// free, so a lone click runs on every core; concurrent ones take the others (one thread
    /// each, unless `intra_threads` says otherwise), each built when predicts first run at once
    /// (`sam2_predictor_new` builds the first only).
    pub pool_size: u32,
    /// `SAM2_WEIGHTS_SHARED` (default) or `SAM2_WEIGHTS_COPY`.
    pub weight_sharing: u32,
    /// `SAM2_OPTIMIZATION_ALL` (default), `SAM2_OPTIMIZATION_BASIC` or `SAM2_OPTIMIZATION_NONE`.
    pub graph_optimization: u32,
    /// Load-time rewrites turned off: a sum of `SAM2_REWRITE_*` bits (0, the default: every
    /// rewrite the model allows; `SAM2_REWRITE_ALL`: the graph as exported). For ruling one out
    /// when it is suspected; sessions with different sets hold different weights.
    pub disabled_rewrites: u64,
}

// Earlier versions of `sam2_predictor_options`: the first layout, 16 bytes; then up to
// `graph_optimization`, 56 bytes.
impl_options!(sam2_predictor_options, earlier_sizes: [16, 56]);

impl Default for sam2_predictor_options {
    fn default() -> Self {
        sam2_predictor_options {
            struct_size: std::mem::size_of::<Self>() as u32,
            intra_threads: 0,
            encoder_fingerprint: std::ptr::null(),
            providers: std::ptr::null(),
            provider_count: 0,
            on_device_mismatch: SAM2_ON_MISMATCH_FALLBACK,
            allow_embedding_copy: 0,
            pool_size: 0,
            weight_sharing: SAM2_WEIGHTS_SHARED,
            graph_optimization: SAM2_OPTIMIZATION_ALL,
            disabled_rewrites: 0,
        }
    }
}

/// A click, in original image pixels.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_point {
    pub x: f32,
    pub y: f32,
    /// `SAM2_POINT_POSITIVE` or `SAM2_POINT_NEGATIVE`.
    pub label: i32,
}

/// The prompt for one object. Its layout is fixed; arrays are read during `sam2_predict` only.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_prompt {
    /// `point_count` points (NULL when 0).
    pub points: *const sam2_point,
    pub point_count: usize,
    /// Non-zero when `box` holds a box `{x1, y1, x2, y2}` in original image pixels.
    pub has_box: i32,
    pub r#box: [f32; 4],
    /// NULL, or low-res logits of an earlier prediction (`sam2_masks_low_res`) to refine.
    pub mask_input: *const f32,
    /// Number of floats at `mask_input` (side², 65536 for SAM2).
    pub mask_input_len: usize,
}

/// Options of `sam2_predict`. Initialise with `sam2_predict_options_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sam2_predict_options {
    /// `sizeof(sam2_predict_options)`.
    pub struct_size: u32,
    /// 0: the best mask per object (by predicted IoU); 1: every candidate mask.
    pub multimask: u32,
}

// Earlier published versions of `sam2_predict_options`: none yet.
impl_options!(sam2_predict_options, earlier_sizes: []);

impl Default for sam2_predict_options {
    fn default() -> Self {
        sam2_predict_options {
            struct_size: std::mem::size_of::<Self>() as u32,
            multimask: 0,
        }
    }
}

/// Fills `options` with the defaults and sets its `struct_size`; pass
/// `sizeof(sam2_predictor_options)` (see `sam2_encoder_options_init`).
#[no_mangle]
pub extern "C" fn sam2_predictor_options_init(
    options: *mut sam2_predictor_options,
    struct_size: usize,
) -> sam2_status {
    super::init_options(options, struct_size)
}

/// Fills `options` with the defaults and sets its `struct_size`; pass
/// `sizeof(sam2_predict_options)` (see `sam2_encoder_options_init`).
#[no_mangle]
pub extern "C" fn sam2_predict_options_init(
    options: *mut sam2_predict_options,
    struct_size: usize,
) -> sam2_status {
    super::init_options(options, struct_size)
}

/// Loads a prompt decoder.
///
/// `encoder`: NULL, or the encoder whose embeddings this predictor will accept (its fingerprint is
/// recorded; the encoder may be freed afterwards). With no providers in `options` (NULL options
/// too), the predictor then runs where that encoder's embeddings live: on its GPU when it leaves
/// them there (`SAM2_OUTPUT_DEVICE`), reading them in place, on the CPU otherwise; providers given
/// are used as given. Alternatively give `options->encoder_fingerprint`. With neither, embeddings
/// are checked for layout only, and the predictor runs on the providers given (the CPU by
/// default).
/// `decoder_path`: NUL-terminated UTF-8 path. `options`: NULL for the defaults. On success `*out`
/// receives a new predictor. Errors: `SAM2_ERR_MODEL`, `SAM2_ERR_MODEL_MISMATCH` (an encoder of
/// another export family than the decoder's), `SAM2_ERR_IO`, `SAM2_ERR_INVALID_ARGUMENT`,
/// `SAM2_ERR_RUNTIME_NOT_FOUND`, `SAM2_ERR_ENVIRONMENT_CONFIGURATION` (a GPU provider that is not
/// available, with `SAM2_ON_MISMATCH_FAIL`).
///
/// The caller owns `*out` and frees it with `sam2_predictor_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_predictor_new(
    encoder: *const sam2_encoder,
    decoder_path: *const c_char,
    options: *const sam2_predictor_options,
    out: *mut *mut sam2_predictor,
) -> sam2_status {
    guard(|| {
        let path = arg_str(decoder_path, "decoder_path")?;
        let out = arg_out(out, "out")?;
        let raw = read_options(options, "options")?;
        let mut opts = PredictorOptions {
            session: session_options(
                raw.intra_threads,
                raw.providers,
                raw.provider_count,
                raw.on_device_mismatch,
                raw.weight_sharing,
                raw.graph_optimization,
                raw.disabled_rewrites,
            )?,
            ..Default::default()
        };
        opts.pool_size = (raw.pool_size > 0).then_some(raw.pool_size as usize);
        opts.allow_embedding_copy =
            super::flag(raw.allow_embedding_copy, "options.allow_embedding_copy")?;
        if !raw.encoder_fingerprint.is_null() {
            let text = arg_str(raw.encoder_fingerprint, "options.encoder_fingerprint")?;
            let fp = Fingerprint::parse(text).ok_or_else(|| {
                Error::invalid(
                    "options.encoder_fingerprint",
                    format!("`{text}` is not a fingerprint (expected sam2fp1- and 16 hex digits)"),
                )
            })?;
            opts.encoder_fingerprint = Some(fp);
        }
        let predictor = match opt_handle_ref(encoder, "encoder")? {
            // The encoder's fingerprint and family, and, with no providers given, its device.
            Some(encoder) => Predictor::for_encoder(path, encoder, &opts),
            None => Predictor::new(path, &opts),
        }
        .map_err(super::option_names)?;
        out.set(super::publish::<sam2_predictor>(predictor));
        Ok(())
    })
}

/// Releases a predictor. A pointer that is not a live predictor (already freed, another handle
/// type) is detected where possible and ignored with a warning through the log callback: best
/// effort, not a licence. NULL is a no-op. Do not free it twice, nor while it is in use.
#[no_mangle]
pub extern "C" fn sam2_predictor_free(predictor: *mut sam2_predictor) {
    super::free_handle(predictor, "predictor");
}

/// Reads one C prompt. Counts and lengths are checked against what the model takes before any
/// array is read, so a wrong count cannot make the library read past the caller's arrays.
pub(crate) fn convert_prompt(p: &sam2_prompt, low_res_size: usize) -> Result<Prompt, Error> {
    // The core's rule and message (.NET reads the name back as ArgumentException.ParamName).
    let mask_input_len = (!p.mask_input.is_null()).then_some(p.mask_input_len);
    sam2::limits::check_prompt_sizes(p.point_count, mask_input_len, low_res_size)?;
    let points = arg_slice(p.points, p.point_count, "prompt.points")?;
    let points = points
        .iter()
        .map(|pt| {
            let positive = PointLabelCodes::parse(pt.label, "prompt.points.label")?;
            Ok(Point {
                x: pt.x,
                y: pt.y,
                positive,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let bbox = match p.has_box {
        0 => None,
        _ => Some(p.r#box),
    };
    let mask_input = if p.mask_input.is_null() {
        if p.mask_input_len != 0 {
            return Err(Error::NullArgument("prompt.mask_input"));
        }
        None
    } else {
        Some(arg_slice(p.mask_input, p.mask_input_len, "prompt.mask_input")?.to_vec())
    };
    Ok(Prompt {
        points,
        bbox,
        mask_input,
    })
}

/// Predicts masks for `prompt_count` independent prompts (one object each) on one embedding.
///
/// `prompts`: an array of `prompt_count` (≥ 1) prompts, read during the call only. `options`: NULL
/// for the defaults (best mask per object). On success `*out` receives a new result, holding
/// `prompt_count × candidates` masks at the original image size. The embedding is read in place,
/// never copied. Errors: `SAM2_ERR_INVALID_ARGUMENT` (a point outside the image, NaN, an empty
/// prompt, a box with x2 < x1, an embedding in device memory this predictor cannot read, a result
/// over 4 GiB of masks — `prompt_count × candidates × width × height` bytes, multimask counted as 3
/// — …, naming the argument), `SAM2_ERR_MODEL_MISMATCH` (an embedding made by another model),
/// `SAM2_ERR_ENVIRONMENT_CONFIGURATION` (a device embedding that could not be copied, with
/// `allow_embedding_copy`), `SAM2_ERR_OUT_OF_MEMORY` (the result's memory could not be had; the
/// process goes on). Thread-safe: several threads may predict at once on one predictor and one
/// embedding.
///
/// The caller owns `*out` and frees it with `sam2_masks_free`. Out-parameters are untouched on
/// failure.
#[no_mangle]
pub extern "C" fn sam2_predict(
    predictor: *const sam2_predictor,
    embedding: *const sam2_embedding,
    prompts: *const sam2_prompt,
    prompt_count: usize,
    options: *const sam2_predict_options,
    out: *mut *mut sam2_masks,
) -> sam2_status {
    guard(|| {
        let predictor = handle_ref(predictor, "predictor")?;
        let embedding = handle_ref(embedding, "embedding")?;
        if prompts.is_null() {
            return Err(Error::NullArgument("prompts"));
        }
        let out = arg_out(out, "out")?;
        sam2::limits::check_batch_size(prompt_count, "prompt_count")?;
        let raw = arg_slice(prompts, prompt_count, "prompts")?;
        let opts = read_options(options, "options")?;
        let multimask = super::flag(opts.multimask, "options.multimask")?;
        let low_res = predictor.spec().low_res_size;
        let prompts = raw
            .iter()
            .map(|p| convert_prompt(p, low_res))
            .collect::<Result<Vec<_>, Error>>()?;
        let prediction =
            predictor.predict(&embedding.inner, &prompts, PredictOptions { multimask })?;
        out.set(super::publish::<super::masks::sam2_masks>(prediction));
        Ok(())
    })
}

/// Writes what the predictor effectively runs on; see `sam2_encoder_device`.
#[no_mangle]
pub extern "C" fn sam2_predictor_device(
    predictor: *const sam2_predictor,
    out_provider: *mut u32,
    out_device_id: *mut i32,
    out_fell_back: *mut i32,
) -> sam2_status {
    guard(|| {
        let p = handle_ref(predictor, "predictor")?;
        super::device::write_device(p.device(), out_provider, out_device_id, out_fell_back)
    })
}

/// Copies the predictor session's execution providers (comma-separated) into `buf`; see
/// `sam2_encoder_providers`.
#[no_mangle]
pub extern "C" fn sam2_predictor_providers(
    predictor: *const sam2_predictor,
    buf: *mut c_char,
    buf_len: usize,
    needed: *mut usize,
) -> sam2_status {
    guard(|| {
        let p = handle_ref(predictor, "predictor")?;
        super::device::write_providers(p.device(), buf, buf_len, needed)
    })
}
