//! The SAM2 exports the library runs, recognised by their input and output names. Each decoder
//! export has one module that recognises it, names the inputs it takes and turns its outputs
//! into masks; a new export (or a quirk of one) is a new module (its [`Description`]: names, output sizes,
//! decoding) and a variant of [`DecoderExport`] with its line in `describe`.
//!
//! | decoder export | made by | embedding (encoder) naming | decoder extras | decoder outputs |
//! |---|---|---|---|---|
//! | [`samexporter`] | samexporter, X-AnyLabeling | `high_res_feats_0/1`, `image_embed` | `mask_input`, `has_mask_input` | low-res `masks`, `iou_predictions` |
//! | [`onnx_sam2`] | ibaiGorordo's ONNX-SAM2 | as samexporter | as samexporter + `orig_im_size` | upsampled `masks`, `iou_predictions` |
//! | [`onnxruntime`] | ONNX Runtime's SAM2 tools | `image_features_0/1`, `image_embeddings` | int32 labels, `input_masks`, `has_input_masks`, `original_image_size` | bool `masks`, `iou_predictions`, `low_res_masks` |

use std::path::Path;

use ort::session::{Session, SessionOutputs};
use ort::value::{TensorElementType, ValueType};

use crate::error::{Error, Result};

mod onnx_sam2;
mod onnxruntime;
mod sam3_clicks;
mod samexporter;

/// The export a decoder comes from: what it takes and what it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecoderExport {
    /// samexporter (and X-AnyLabeling): low-res logits out.
    SamExporter,
    /// ibaiGorordo's ONNX-SAM2: logits upsampled to the image size, no low-res ones.
    OnnxSam2,
    /// ONNX Runtime's SAM2 tools: boolean masks at the image size and low-res logits.
    OnnxRuntime,
    /// SAM 3's SAM 2-style head for clicks (`sam2-export-sam3 --interactive`): samexporter's
    /// names at SAM 3's sizes (1008² frame, 72² embedding, 288² low-res logits), reading the
    /// click features of a SAM 3 embedding.
    Sam3Clicks,
}

impl DecoderExport {
    /// Every decoder export, in the order they are tried.
    const ALL: [DecoderExport; 4] = [
        DecoderExport::OnnxRuntime,
        DecoderExport::OnnxSam2,
        DecoderExport::SamExporter,
        DecoderExport::Sam3Clicks,
    ];

    pub fn name(self) -> &'static str {
        self.describe().name
    }

    /// What the export's module says about it.
    fn describe(self) -> &'static Description {
        match self {
            DecoderExport::SamExporter => &samexporter::DESCRIPTION,
            DecoderExport::OnnxSam2 => &onnx_sam2::DESCRIPTION,
            DecoderExport::OnnxRuntime => &onnxruntime::DESCRIPTION,
            DecoderExport::Sam3Clicks => &sam3_clicks::DESCRIPTION,
        }
    }

    /// Bytes per image pixel per candidate that the decoder returns besides its low-res logits
    /// (nothing, boolean masks, or float logits at the image size): what segment everything
    /// budgets for each batch.
    pub(crate) fn full_size_bytes_per_pixel(self) -> u64 {
        self.describe().full_size_bytes_per_pixel
    }

    /// Writes one batch's masks and low-res logits into `out` (see [`Batch`]).
    pub(crate) fn decode(
        self,
        outputs: &SessionOutputs<'_>,
        batch: &Batch,
        out: &mut Decoded<'_>,
    ) -> Result<()> {
        (self.describe().decode)(outputs, batch, out)
    }
}

/// Turns one batch of a decoder's outputs into masks and low-res logits.
type Decode = fn(&SessionOutputs<'_>, &Batch, &mut Decoded<'_>) -> Result<()>;

/// What a decoder export's module declares: the names that recognise it and that the library
/// feeds and reads.
pub(crate) struct Description {
    pub(crate) export: DecoderExport,
    /// What users call it (`sam2 info`, messages).
    pub(crate) name: &'static str,
    /// The naming of the embeddings it takes.
    pub(crate) family: EncoderFamily,
    /// Inputs that must all be there (with any others the export may have).
    pub(crate) inputs: &'static [&'static str],
    /// Outputs that must all be there.
    pub(crate) outputs: &'static [&'static str],
    /// An input whose presence tells this export from another with the same names otherwise.
    pub(crate) marker: Option<&'static str>,
    pub(crate) point_coords: &'static str,
    pub(crate) point_labels: &'static str,
    /// Labels are int32 rather than float32.
    pub(crate) labels_int32: bool,
    pub(crate) mask_input: &'static str,
    pub(crate) has_mask_input: &'static str,
    /// The original image size, int32 `[h, w]`, for exports that upsample inside the graph.
    pub(crate) orig_size: Option<&'static str>,
    pub(crate) masks: &'static str,
    pub(crate) iou: &'static str,
    pub(crate) low_res: Option<&'static str>,
    /// Bytes per image pixel per candidate of its outputs at the image size, if any.
    pub(crate) full_size_bytes_per_pixel: u64,
    /// Its outputs into masks and logits.
    pub(crate) decode: Decode,
    /// Side of the square frame prompts are scaled to, and of the low-res logits.
    pub(crate) input_side: usize,
    pub(crate) low_res_side: usize,
}

impl Description {
    fn matches(&self, inputs: &[String], outputs: &[String]) -> bool {
        has_all(inputs, self.inputs)
            && has_all(outputs, self.outputs)
            && self.marker.map_or(true, |m| inputs.iter().any(|n| n == m))
    }

    /// Whether the declared side of the mask input fits this export's low-res side (samexporter's
    /// SAM2 decoders and SAM 3's click head share their names and differ there: 256 or 288).
    fn fits_mask_input(&self, session: &Session) -> bool {
        match tensor_info(session.inputs(), self.mask_input) {
            None => true,
            Some((_, shape)) => {
                let side = self.low_res_side as i64;
                shape.len() == 4 && (shape[3] == side || shape[3] == -1)
            }
        }
    }
}

/// One decoder run's geometry: which candidates of which rows go to which result slots.
pub(crate) struct Batch {
    /// Prompts in the run (rows of the outputs).
    pub(crate) objects: usize,
    /// Candidates the model returns per prompt.
    pub(crate) candidates: usize,
    /// Side of the low-res logits.
    pub(crate) low_res: usize,
    pub(crate) image_width: usize,
    pub(crate) image_height: usize,
    /// `(row, candidate, slot)`: write that candidate of that row at result slot `slot`.
    pub(crate) picks: Vec<(usize, usize, usize)>,
}

impl Batch {
    fn plane(&self) -> usize {
        self.image_width * self.image_height
    }

    /// Checks an output's run-time shape: `[objects, candidates, side_y, side_x]`.
    fn expect(&self, shape: &[i64], side: (usize, usize), name: &str) -> Result<()> {
        let want = [self.objects, self.candidates, side.0, side.1];
        if shape.len() != want.len() || shape.iter().zip(want).any(|(&g, w)| g as usize != w) {
            return Err(Error::OnnxRuntime(format!(
                "decoder output `{name}` has shape {shape:?}, expected {want:?}"
            )));
        }
        Ok(())
    }
}

/// Where a batch's results go: the prediction's masks (`slot × plane` bytes, or none at all when
/// only the logits are wanted) and low-res logits (`slot × low_res²` values).
pub(crate) struct Decoded<'a> {
    pub(crate) masks: &'a mut [u8],
    pub(crate) low_res: &'a mut [f32],
}

impl Decoded<'_> {
    /// The mask of `slot`, or `None` when the caller asked for logits only.
    fn mask(&mut self, slot: usize, plane: usize) -> Option<&mut [u8]> {
        if self.masks.is_empty() {
            return None;
        }
        Some(&mut self.masks[slot * plane..(slot + 1) * plane])
    }

    fn logits(&mut self, slot: usize, side: usize) -> &mut [f32] {
        &mut self.low_res[slot * side * side..(slot + 1) * side * side]
    }
}

/// The naming of an encoder's outputs (the embedding tensors), shared by the decoder exports
/// that take its embeddings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderFamily {
    /// samexporter's naming (its decoders and ONNX-SAM2's).
    SamExporter,
    /// ONNX Runtime's SAM2 tools' naming.
    OnnxRuntime,
    /// SAM 3's image encoder (samexporter 0.5.0's and `sam2-export-sam3`'s naming): its three
    /// feature levels, read by the concept model (`crate::concept`).
    Sam3,
}

impl EncoderFamily {
    pub fn name(self) -> &'static str {
        match self {
            EncoderFamily::SamExporter => "samexporter",
            EncoderFamily::OnnxRuntime => "onnxruntime",
            EncoderFamily::Sam3 => "sam3",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "samexporter" => Some(EncoderFamily::SamExporter),
            "onnxruntime" => Some(EncoderFamily::OnnxRuntime),
            "sam3" => Some(EncoderFamily::Sam3),
            _ => None,
        }
    }

    /// Names of the three embedding tensors, in the library's canonical order
    /// (high-res level 0, high-res level 1, image embedding).
    pub fn tensor_names(self) -> [&'static str; 3] {
        match self {
            EncoderFamily::SamExporter => ["high_res_feats_0", "high_res_feats_1", "image_embed"],
            EncoderFamily::OnnxRuntime => {
                ["image_features_0", "image_features_1", "image_embeddings"]
            }
            EncoderFamily::Sam3 => ["backbone_fpn_0", "backbone_fpn_1", "backbone_fpn_2"],
        }
    }
}

/// Canonical shapes of the three embedding tensors of SAM2 (batch 1).
pub(crate) const EMBEDDING_SHAPES: [[i64; 4]; 3] =
    [[1, 32, 256, 256], [1, 64, 128, 128], [1, 256, 64, 64]];

/// Shapes of SAM 3's three feature levels (batch 1): 256 channels at 288², 144² and 72², 111 MB
/// in float32.
pub(crate) const SAM3_EMBEDDING_SHAPES: [[i64; 4]; 3] =
    [[1, 256, 288, 288], [1, 256, 144, 144], [1, 256, 72, 72]];

/// The click features a SAM 3 image encoder exported with its interactive head adds to an
/// embedding, after the three levels: the SAM 2-style head's inputs, in samexporter's names.
pub(crate) const SAM3_CLICK_TENSORS: [&str; 3] =
    ["image_embed", "high_res_feats_0", "high_res_feats_1"];
pub(crate) const SAM3_CLICK_SHAPES: [[i64; 4]; 3] =
    [[1, 256, 72, 72], [1, 32, 288, 288], [1, 64, 144, 144]];

/// The names and shapes of an embedding's tensors, in order: the family's three, then for SAM 3
/// with `clicks` the click features.
pub(crate) fn embedding_layout(
    family: EncoderFamily,
    clicks: bool,
) -> Vec<(&'static str, [i64; 4])> {
    let mut v: Vec<(&'static str, [i64; 4])> = family
        .tensor_names()
        .into_iter()
        .zip(family.shapes())
        .collect();
    if clicks && family == EncoderFamily::Sam3 {
        v.extend(SAM3_CLICK_TENSORS.into_iter().zip(SAM3_CLICK_SHAPES));
    }
    v
}

/// Side of SAM 3's square input image (72 patches of 14 pixels).
pub(crate) const SAM3_INPUT_SIDE: usize = 1008;

impl EncoderFamily {
    /// Shapes of the family's three embedding tensors, in [`EncoderFamily::tensor_names`]' order.
    pub fn shapes(self) -> [[i64; 4]; 3] {
        match self {
            EncoderFamily::Sam3 => SAM3_EMBEDDING_SHAPES,
            _ => EMBEDDING_SHAPES,
        }
    }

    /// Side of the square image the family's encoders take.
    pub fn input_side(self) -> usize {
        match self {
            EncoderFamily::Sam3 => SAM3_INPUT_SIDE,
            _ => INPUT_SIDE,
        }
    }
}

/// Side of the square image every SAM2 encoder takes; prompts are scaled to this frame.
pub(crate) const INPUT_SIDE: usize = 1024;
/// Side of the low-resolution mask grid every SAM2 decoder takes and gives (4× the 64×64
/// embedding).
pub(crate) const LOW_RES_SIDE: usize = 256;

/// Element type of the encoder's image input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputType {
    F32,
    F16,
    /// SAM 3's: uint8 RGB `[3, S, S]`, resized by the caller and normalised inside the graph.
    U8,
}

/// What the library needs to drive an encoder.
#[derive(Debug, Clone)]
pub struct EncoderSpec {
    pub family: EncoderFamily,
    pub input_name: String,
    pub input_type: InputType,
    /// Side of the square input ([`INPUT_SIDE`]).
    pub input_size: usize,
    /// A SAM 3 encoder that also writes the click features ([`SAM3_CLICK_TENSORS`]).
    pub click_features: bool,
}

impl EncoderSpec {
    /// The names and shapes of the embedding tensors this encoder writes.
    pub(crate) fn layout(&self) -> Vec<(&'static str, [i64; 4])> {
        embedding_layout(self.family, self.click_features)
    }
}

/// What the library needs to drive a decoder.
#[derive(Debug, Clone)]
pub struct DecoderSpec {
    pub export: DecoderExport,
    /// The naming of the embeddings it takes.
    pub family: EncoderFamily,
    /// Side of the low-resolution mask grid ([`LOW_RES_SIDE`]; 288 for SAM 3's clicks).
    pub low_res_size: usize,
    /// Side of the square frame prompts are scaled to ([`INPUT_SIDE`]; 1008 for SAM 3).
    pub input_size: usize,
}

impl DecoderSpec {
    /// The names the decoder is fed and read by.
    pub(crate) fn names(&self) -> &'static Description {
        self.export.describe()
    }

    /// The embedding tensors the decoder takes, in the order of its feature inputs: its family's
    /// three, or for SAM 3's click head the click features.
    pub fn embedding_inputs(&self) -> [&'static str; 3] {
        match self.export {
            DecoderExport::Sam3Clicks => SAM3_CLICK_TENSORS,
            _ => self.family.tensor_names(),
        }
    }
}

/// Recognises a decoder session.
pub fn detect_decoder(session: &Session, path: &Path) -> Result<DecoderSpec> {
    let inputs = names(session.inputs());
    let outputs = names(session.outputs());
    let Some(d) = DecoderExport::ALL
        .iter()
        .map(|e| e.describe())
        .find(|d| d.matches(&inputs, &outputs) && d.fits_mask_input(session))
        .or_else(|| {
            DecoderExport::ALL
                .iter()
                .map(|e| e.describe())
                .find(|d| d.matches(&inputs, &outputs))
        })
    else {
        let expected: Vec<String> = DecoderExport::ALL
            .iter()
            .rev()
            .map(|e| {
                let d = e.describe();
                format!(
                    "{}: inputs {:?} and outputs {:?}",
                    e.name(),
                    d.inputs,
                    d.outputs
                )
            })
            .collect();
        return Err(Error::model(
            path,
            format!(
                "not a recognised SAM2 decoder: expected {}; found inputs {inputs:?} and outputs {outputs:?}",
                expected.join("; or ")
            ),
        ));
    };
    // Check the dtypes the library will feed.
    let expect = |name: &str, want: TensorElementType| -> Result<()> {
        match tensor_info(session.inputs(), name) {
            Some((ty, _)) if ty == want => Ok(()),
            Some((ty, _)) => Err(Error::model(
                path,
                format!("decoder input `{name}` must be {want}, found {ty}"),
            )),
            None => Err(Error::model(
                path,
                format!("decoder input `{name}` is not a tensor"),
            )),
        }
    };
    expect(d.point_coords, TensorElementType::Float32)?;
    expect(
        d.point_labels,
        if d.labels_int32 {
            TensorElementType::Int32
        } else {
            TensorElementType::Float32
        },
    )?;
    expect(d.mask_input, TensorElementType::Float32)?;
    expect(d.has_mask_input, TensorElementType::Float32)?;
    if let Some(name) = d.orig_size {
        expect(name, TensorElementType::Int32)?;
    }
    // The mask input is fed as [L,1,256,256] (288² for SAM 3): a declared size is checked, never
    // used to size a buffer (a hostile file declaring 1048576² made a predict abort allocating
    // 4 TiB).
    if let Some((_, shape)) = tensor_info(session.inputs(), d.mask_input) {
        let side = d.low_res_side as i64;
        let fits = shape.len() == 4
            && [1, side, side]
                .iter()
                .zip(&shape[1..])
                .all(|(&want, &got)| got == want || got == -1);
        if !fits {
            return Err(Error::model(
                path,
                format!(
                    "decoder input `{}` must be [L,1,{side},{side}] (the low-resolution mask), \
                     found {shape:?}",
                    d.mask_input
                ),
            ));
        }
    }
    Ok(DecoderSpec {
        export: d.export,
        family: d.family,
        low_res_size: d.low_res_side,
        input_size: d.input_side,
    })
}

fn names(outlets: &[ort::value::Outlet]) -> Vec<String> {
    outlets.iter().map(|o| o.name().to_string()).collect()
}

pub(crate) fn tensor_info(
    outlets: &[ort::value::Outlet],
    name: &str,
) -> Option<(TensorElementType, Vec<i64>)> {
    outlets
        .iter()
        .find(|o| o.name() == name)
        .and_then(|o| match o.dtype() {
            ValueType::Tensor { ty, shape, .. } => Some((*ty, shape.iter().copied().collect())),
            _ => None,
        })
}

fn has_all(have: &[String], want: &[&str]) -> bool {
    want.iter().all(|w| have.iter().any(|h| h == w))
}

/// Recognises an encoder session.
pub fn detect_encoder(session: &Session, path: &Path) -> Result<EncoderSpec> {
    let outputs = names(session.outputs());
    let inputs = names(session.inputs());
    // SAM 3 first: with its click head it also writes samexporter's three names.
    let family = [
        EncoderFamily::Sam3,
        EncoderFamily::SamExporter,
        EncoderFamily::OnnxRuntime,
    ]
    .into_iter()
    .find(|f| has_all(&outputs, &f.tensor_names()))
    .ok_or_else(|| {
        Error::model(
            path,
            format!(
                "not a recognised SAM2 encoder or SAM 3 image encoder: expected outputs {:?} (samexporter/ibaiGorordo), {:?} \
                 (ONNX Runtime export) or {:?} (SAM 3), found outputs {outputs:?} and inputs {inputs:?}",
                EncoderFamily::SamExporter.tensor_names(),
                EncoderFamily::OnnxRuntime.tensor_names(),
                EncoderFamily::Sam3.tensor_names()
            ),
        )
    })?;
    if session.inputs().len() != 1 {
        return Err(Error::model(
            path,
            format!("an image encoder has one input (the image); found {inputs:?}"),
        ));
    }
    let input_name = inputs[0].clone();
    let (ty, shape) = tensor_info(session.inputs(), &input_name).ok_or_else(|| {
        Error::model(
            path,
            format!("encoder input `{input_name}` is not a tensor"),
        )
    })?;
    // Any other size would be preprocessed to a buffer of its size (a hostile file declaring
    // 65536² asks for 48 GiB) while the prompts are scaled to the family's frame anyway.
    let side = family.input_side() as i64;
    let (input_type, hw) = if family == EncoderFamily::Sam3 {
        if ty != TensorElementType::Uint8 || shape.len() != 3 || (shape[0] != 3 && shape[0] != -1) {
            return Err(Error::model(
                path,
                format!(
                    "SAM 3 encoder input `{input_name}` must be uint8 [3,{side},{side}] (RGB, \
                     resized by the caller), found {ty} {shape:?}"
                ),
            ));
        }
        (InputType::U8, (shape[1], shape[2]))
    } else {
        let input_type = match ty {
            TensorElementType::Float32 => InputType::F32,
            TensorElementType::Float16 => InputType::F16,
            other => {
                return Err(Error::model(
                    path,
                    format!(
                        "encoder input `{input_name}` must be float32 or float16, found {other}"
                    ),
                ))
            }
        };
        if shape.len() != 4 || (shape[0] > 1) || (shape[1] != 3 && shape[1] != -1) {
            return Err(Error::model(
                path,
                format!("encoder input `{input_name}` must be [1,3,S,S], found {shape:?}"),
            ));
        }
        (input_type, (shape[2], shape[3]))
    };
    let input_size = match hw {
        (h, w) if (h == side || h == -1) && (w == side || w == -1) => family.input_side(),
        (h, w) => {
            return Err(Error::model(
                path,
                format!(
                    "encoder input `{input_name}` must be {side}×{side} (the family's \
                     input size), found {h}×{w}"
                ),
            ))
        }
    };
    let click_features = family == EncoderFamily::Sam3 && has_all(&outputs, &SAM3_CLICK_TENSORS);
    for (name, want) in embedding_layout(family, click_features) {
        let (_, shape) = tensor_info(session.outputs(), name).ok_or_else(|| {
            Error::model(path, format!("encoder output `{name}` is not a tensor"))
        })?;
        let fits = shape.len() == 4
            && shape
                .iter()
                .zip(want.iter())
                .all(|(&got, &w)| got == w || got == -1);
        if !fits {
            return Err(Error::model(
                path,
                format!("encoder output `{name}` must have shape {want:?}, found {shape:?}"),
            ));
        }
    }
    Ok(EncoderSpec {
        family,
        input_name,
        input_type,
        input_size,
        click_features,
    })
}
