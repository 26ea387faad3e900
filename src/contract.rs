//! Recognising a SAM2 export by its input and output names, and adapting to it.
//!
//! | contract | made by | encoder outputs | decoder extras | decoder outputs |
//! |---|---|---|---|---|
//! | A | samexporter, X-AnyLabeling | `high_res_feats_0/1`, `image_embed` | `mask_input`, `has_mask_input` | low-res `masks`, `iou_predictions` |
//! | B | ibaiGorordo's export | as A | as A + `orig_im_size` | upsampled `masks`, `iou_predictions` |
//! | C | ONNX Runtime's SAM2 tools | `image_features_0/1`, `image_embeddings` | int32 labels, `input_masks`, `has_input_masks`, `original_image_size` | bool `masks`, `iou_predictions`, `low_res_masks` |

use std::path::Path;

use ort::session::Session;
use ort::value::{TensorElementType, ValueType};

use crate::error::{Error, Result};

/// The export contract of a decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    A,
    B,
    C,
}

impl Contract {
    pub fn name(self) -> &'static str {
        match self {
            Contract::A => "A",
            Contract::B => "B",
            Contract::C => "C",
        }
    }
}

/// Which naming an encoder uses; A and B share their encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderFamily {
    /// samexporter / ibaiGorordo naming (contracts A and B).
    SamExporter,
    /// ONNX Runtime's own naming (contract C).
    OnnxRuntime,
}

impl EncoderFamily {
    pub fn name(self) -> &'static str {
        match self {
            EncoderFamily::SamExporter => "samexporter",
            EncoderFamily::OnnxRuntime => "onnxruntime",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "samexporter" => Some(EncoderFamily::SamExporter),
            "onnxruntime" => Some(EncoderFamily::OnnxRuntime),
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
        }
    }
}

/// Canonical shapes of the three embedding tensors (batch 1).
pub const EMBEDDING_SHAPES: [[i64; 4]; 3] =
    [[1, 32, 256, 256], [1, 64, 128, 128], [1, 256, 64, 64]];

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
}

/// What the library needs to drive an encoder.
#[derive(Debug, Clone)]
pub struct EncoderSpec {
    pub family: EncoderFamily,
    pub input_name: String,
    pub input_type: InputType,
    /// Side of the square input ([`INPUT_SIDE`]).
    pub input_size: usize,
}

/// What the library needs to drive a decoder.
#[derive(Debug, Clone)]
pub struct DecoderSpec {
    pub contract: Contract,
    pub family: EncoderFamily,
    pub point_coords: &'static str,
    pub point_labels: &'static str,
    /// Labels are int32 (contract C) rather than float32.
    pub labels_int32: bool,
    pub mask_input: &'static str,
    pub has_mask_input: &'static str,
    pub orig_size: Option<&'static str>,
    pub masks: &'static str,
    pub iou: &'static str,
    pub low_res: Option<&'static str>,
    /// Side of the low-resolution mask grid ([`LOW_RES_SIDE`]).
    pub low_res_size: usize,
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
    let family = [EncoderFamily::SamExporter, EncoderFamily::OnnxRuntime]
        .into_iter()
        .find(|f| has_all(&outputs, &f.tensor_names()))
        .ok_or_else(|| {
            Error::model(
                path,
                format!(
                    "not a recognised SAM2 encoder: expected outputs {:?} (samexporter/ibaiGorordo) or {:?} \
                     (ONNX Runtime export), found outputs {outputs:?} and inputs {inputs:?}",
                    EncoderFamily::SamExporter.tensor_names(),
                    EncoderFamily::OnnxRuntime.tensor_names()
                ),
            )
        })?;
    if session.inputs().len() != 1 {
        return Err(Error::model(
            path,
            format!("a SAM2 encoder has one input (the image); found {inputs:?}"),
        ));
    }
    let input_name = inputs[0].clone();
    let (ty, shape) = tensor_info(session.inputs(), &input_name).ok_or_else(|| {
        Error::model(
            path,
            format!("encoder input `{input_name}` is not a tensor"),
        )
    })?;
    let input_type = match ty {
        TensorElementType::Float32 => InputType::F32,
        TensorElementType::Float16 => InputType::F16,
        other => {
            return Err(Error::model(
                path,
                format!("encoder input `{input_name}` must be float32 or float16, found {other}"),
            ))
        }
    };
    if shape.len() != 4 || (shape[0] > 1) || (shape[1] != 3 && shape[1] != -1) {
        return Err(Error::model(
            path,
            format!("encoder input `{input_name}` must be [1,3,S,S], found {shape:?}"),
        ));
    }
    // Any other size would be preprocessed to a buffer of its size (a hostile file declaring
    // 65536² asks for 48 GiB) while the prompts are scaled to the 1024 frame anyway.
    let side = INPUT_SIDE as i64;
    let input_size = match (shape[2], shape[3]) {
        (h, w) if (h == side || h == -1) && (w == side || w == -1) => INPUT_SIDE,
        (h, w) => {
            return Err(Error::model(
                path,
                format!(
                    "encoder input `{input_name}` must be [1,3,{side},{side}] (SAM2 encodes \
                     {side}×{side} images), found {h}×{w}"
                ),
            ))
        }
    };
    for (name, want) in family.tensor_names().iter().zip(EMBEDDING_SHAPES.iter()) {
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
    })
}

/// Recognises a decoder session.
pub fn detect_decoder(session: &Session, path: &Path) -> Result<DecoderSpec> {
    let inputs = names(session.inputs());
    let outputs = names(session.outputs());
    let a_inputs = [
        "image_embed",
        "high_res_feats_0",
        "high_res_feats_1",
        "point_coords",
        "point_labels",
        "mask_input",
        "has_mask_input",
    ];
    let c_inputs = [
        "image_embeddings",
        "image_features_0",
        "image_features_1",
        "point_coords",
        "point_labels",
        "input_masks",
        "has_input_masks",
        "original_image_size",
    ];
    let spec = if has_all(&inputs, &c_inputs)
        && has_all(&outputs, &["masks", "iou_predictions", "low_res_masks"])
    {
        DecoderSpec {
            contract: Contract::C,
            family: EncoderFamily::OnnxRuntime,
            point_coords: "point_coords",
            point_labels: "point_labels",
            labels_int32: true,
            mask_input: "input_masks",
            has_mask_input: "has_input_masks",
            orig_size: Some("original_image_size"),
            masks: "masks",
            iou: "iou_predictions",
            low_res: Some("low_res_masks"),
            low_res_size: LOW_RES_SIDE,
        }
    } else if has_all(&inputs, &a_inputs) && has_all(&outputs, &["masks", "iou_predictions"]) {
        let contract = if inputs.iter().any(|n| n == "orig_im_size") {
            Contract::B
        } else {
            Contract::A
        };
        DecoderSpec {
            contract,
            family: EncoderFamily::SamExporter,
            point_coords: "point_coords",
            point_labels: "point_labels",
            labels_int32: false,
            mask_input: "mask_input",
            has_mask_input: "has_mask_input",
            orig_size: (contract == Contract::B).then_some("orig_im_size"),
            masks: "masks",
            iou: "iou_predictions",
            low_res: None,
            low_res_size: LOW_RES_SIDE,
        }
    } else {
        return Err(Error::model(
            path,
            format!(
                "not a recognised SAM2 decoder: expected inputs {a_inputs:?} (+ `orig_im_size` for contract B) \
                 with outputs [\"masks\", \"iou_predictions\"], or inputs {c_inputs:?} with outputs \
                 [\"masks\", \"iou_predictions\", \"low_res_masks\"]; found inputs {inputs:?} and outputs {outputs:?}"
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
    expect(spec.point_coords, TensorElementType::Float32)?;
    expect(
        spec.point_labels,
        if spec.labels_int32 {
            TensorElementType::Int32
        } else {
            TensorElementType::Float32
        },
    )?;
    expect(spec.mask_input, TensorElementType::Float32)?;
    expect(spec.has_mask_input, TensorElementType::Float32)?;
    if let Some(name) = spec.orig_size {
        expect(name, TensorElementType::Int32)?;
    }
    // The mask input is fed as [L,1,256,256]: a declared size is checked, never used to size a
    // buffer (a hostile file declaring 1048576² made a predict abort allocating 4 TiB).
    if let Some((_, shape)) = tensor_info(session.inputs(), spec.mask_input) {
        let side = LOW_RES_SIDE as i64;
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
                    spec.mask_input
                ),
            ));
        }
    }
    Ok(spec)
}
