//! The four ONNX modules of the video contract, loaded and recognised by their tensor names.
//!
//! Names follow the most used four-module export (Aimol-l/SAM2Export and its descendants, such
//! as pagarcia/sam2-onnx-cpp): `image_encoder`, `memory_attention`, `image_decoder`,
//! `memory_encoder`. The project's own exports (sam2-export-video) add optional inputs
//! and outputs that make tracking follow SAM2's video predictor exactly; a module without them is
//! run as its lineage runs it (docs/video.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ort::memory::{Allocator, MemoryInfo};
use ort::session::Session;
use ort::value::DynValue;

pub use super::paths::VideoModelPaths;
use crate::device::EffectiveDevice;
use crate::error::{Error, Result};
use crate::precision::Variant;
use crate::session::{self, SessionOptions};
use crate::weights::{self, ModelWeights};

/// Which network a set of four modules runs, told by the shape of a memory frame (memory
/// attention's `memory_1`, the memory encoder's `maskmem_features`): the tracker assembles the
/// memories and follows that network's video predictor (docs/video.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoFamily {
    /// SAM2 and SAM2.1: a memory frame is 64 channels on a 64 × 64 map (`[m, 64, 64, 64]`).
    Sam2,
    /// EdgeTAM: a memory frame is a few hundred tokens of 64 channels (`[m, 512, 64]`, the
    /// perceiver's latents), and its predictor's rules E2 and E3 (docs/video.md#edgetam).
    EdgeTam,
}

impl VideoFamily {
    pub fn name(self) -> &'static str {
        match self {
            VideoFamily::Sam2 => "SAM2",
            VideoFamily::EdgeTam => "EdgeTAM",
        }
    }

    /// The family a module's declared shapes tell: memory attention by its `memory_1`, the
    /// memory encoder by its `maskmem_features` (rank 3, tokens × channels: EdgeTAM; rank 4,
    /// channels × map: SAM2). `None` for the image encoder and the decoder, which the two share.
    fn of_shapes(
        inputs: &HashMap<String, Vec<i64>>,
        outputs: &HashMap<String, Vec<i64>>,
    ) -> Option<VideoFamily> {
        let memory = inputs
            .get(MEMORIES)
            .or_else(|| outputs.get(MASKMEM_FEATURES))?;
        match memory.len() {
            3 => Some(VideoFamily::EdgeTam),
            4 => Some(VideoFamily::Sam2),
            _ => None,
        }
    }
}

/// Tensor names of the contract.
pub(crate) mod names {
    pub const IMAGE: &str = "image";
    pub const PIX_FEAT: &str = "pix_feat";
    pub const HIGH_RES_0: &str = "high_res_feat0";
    pub const HIGH_RES_1: &str = "high_res_feat1";
    pub const VISION_FEATS: &str = "vision_feats";
    pub const VISION_POS: &str = "vision_pos_embed";

    pub const CURRENT_FEAT: &str = "current_vision_feat";
    pub const CURRENT_POS: &str = "current_vision_pos_embed";
    pub const POINTERS: &str = "memory_0";
    pub const MEMORIES: &str = "memory_1";
    pub const MEMORY_POS: &str = "memory_pos_embed";
    pub const POINTER_TPOS: &str = "obj_ptr_tpos";
    pub const IMAGE_EMBED: &str = "image_embed";

    pub const POINT_COORDS: &str = "point_coords";
    pub const POINT_LABELS: &str = "point_labels";
    pub const DEC_HIGH_RES_0: &str = "high_res_feats_0";
    pub const DEC_HIGH_RES_1: &str = "high_res_feats_1";
    pub const MASK_INPUT: &str = "mask_input";
    pub const HAS_MASK_INPUT: &str = "has_mask_input";
    pub const MULTIMASK: &str = "multimask_output";
    pub const OBJ_PTR: &str = "obj_ptr";
    pub const MASK_FOR_MEM: &str = "mask_for_mem";
    pub const PRED_MASK: &str = "pred_mask";
    pub const OBJECT_SCORE: &str = "object_score_logits";

    pub const FROM_POINTS: &str = "is_mask_from_pts";
    pub const MASKMEM_FEATURES: &str = "maskmem_features";
    pub const MASKMEM_POS: &str = "maskmem_pos_enc";
    pub const TEMPORAL_CODE: &str = "temporal_code";
}

use names::*;

/// The custom metadata key tools/models/gen_track_models.py marks its generated modules with.
const GENERATED_MARKER: &str = "sam2.synthetic";

/// One loaded module.
pub(crate) struct Module {
    session: Mutex<Session>,
    path: PathBuf,
    role: &'static str,
    inputs: Vec<String>,
    outputs: Vec<String>,
    /// Declared shapes of the tensors among the inputs and outputs (−1: a free dimension).
    input_shapes: HashMap<String, Vec<i64>>,
    output_shapes: HashMap<String, Vec<i64>>,
    /// The generated test models' marker (`sam2.synthetic`), when the module has one.
    marker: Option<String>,
    /// The shared weights, kept alive while the session uses them (and what loading made of them:
    /// the attention fused, the precision).
    weights: Arc<ModelWeights>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("path", &self.path).finish()
    }
}

impl Module {
    fn load(
        path: &Path,
        role: &'static str,
        options: &SessionOptions,
        inputs: &[&str],
        outputs: &[&str],
    ) -> Result<(Module, EffectiveDevice)> {
        let weights = weights::get(
            path,
            options.weights,
            weights::Plan::new(options.optimization, &options.device, options.rewrites),
        )?;
        let (session, device) =
            session::build(&weights, path, options, role, session::Idle::Sleep)?;
        let have_in: Vec<String> = session.inputs().iter().map(|o| o.name().into()).collect();
        let have_out: Vec<String> = session.outputs().iter().map(|o| o.name().into()).collect();
        let missing: Vec<&str> = inputs
            .iter()
            .filter(|n| !have_in.iter().any(|h| h == *n))
            .chain(outputs.iter().filter(|n| !have_out.iter().any(|h| h == *n)))
            .copied()
            .collect();
        if !missing.is_empty() {
            return Err(Error::model(
                path,
                format!(
                    "not a SAM2 video {role} (the four-module contract, docs/video.md): it lacks \
                     {missing:?}; found inputs {have_in:?} and outputs {have_out:?}"
                ),
            ));
        }
        let input_shapes = declared_shapes(session.inputs());
        let output_shapes = declared_shapes(session.outputs());
        let marker = session.metadata()?.custom(GENERATED_MARKER);
        Ok((
            Module {
                session: Mutex::new(session),
                path: path.to_path_buf(),
                role,
                inputs: have_in,
                outputs: have_out,
                input_shapes,
                output_shapes,
                marker,
                weights,
            },
            device,
        ))
    }

    /// Which attention subgraphs of the module were fused when it was loaded.
    pub(crate) fn attention_fusion(&self) -> &crate::rewrite::RewriteReport {
        &self.weights.attention
    }

    /// The precision the module runs in: as exported, or a variant's.
    pub(crate) fn variant(&self) -> &Variant {
        &self.weights.variant
    }

    pub(crate) fn has_input(&self, name: &str) -> bool {
        self.inputs.iter().any(|n| n == name)
    }

    pub(crate) fn has_output(&self, name: &str) -> bool {
        self.outputs.iter().any(|n| n == name)
    }

    /// Runs the module with `inputs` bound in place and each output bound to its memory.
    pub(crate) fn run(
        &self,
        inputs: &[(&str, &DynValue)],
        outputs: &[(&str, &MemoryInfo<'static>)],
    ) -> Result<HashMap<String, DynValue>> {
        let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        let mut binding = session.create_binding()?;
        for (name, value) in inputs {
            binding.bind_input(*name, *value)?;
        }
        for (name, memory) in outputs {
            binding.bind_output_to_device(*name, memory)?;
        }
        let mut produced = session.run_binding(&binding)?;
        let mut out = HashMap::with_capacity(outputs.len());
        for (name, _) in outputs {
            let value = produced.remove(*name).ok_or_else(|| {
                Error::OnnxRuntime(format!("{} produced no `{name}`", self.path.display()))
            })?;
            out.insert(name.to_string(), value);
        }
        Ok(out)
    }

    /// An allocator of the session for `memory` (to hold tensors assembled on the device).
    pub(crate) fn allocator(&self, memory: &MemoryInfo<'static>) -> Result<Allocator> {
        let session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Allocator::new(&session, memory.clone())?)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// The declared shapes of a session's inputs or outputs that are tensors (−1: a free dimension).
fn declared_shapes(outlets: &[ort::value::Outlet]) -> HashMap<String, Vec<i64>> {
    outlets
        .iter()
        .filter_map(|o| {
            crate::export::tensor_info(std::slice::from_ref(o), o.name())
                .map(|(_, shape)| (o.name().to_string(), shape))
        })
        .collect()
}

/// A tensor one module hands another: the module, its output, the module, its input, how many
/// trailing dimensions must agree (all when `None`), and what the tensor is.
type Link<'a> = (
    &'a Module,
    &'static str,
    &'a Module,
    &'static str,
    Option<usize>,
    &'static str,
);

/// The four modules, and which of the optional tensors they have.
#[derive(Debug)]
pub(crate) struct Modules {
    pub encoder: Module,
    pub attention: Module,
    pub decoder: Module,
    pub memory_encoder: Module,
    pub device: EffectiveDevice,
    /// The network, told by memory attention's `memory_1`.
    pub family: VideoFamily,
}

/// The four roles, each with the inputs and outputs that recognise it.
const ROLES: [(&str, &[&str], &[&str]); 4] = [
    (
        "image encoder",
        &[IMAGE],
        &[PIX_FEAT, HIGH_RES_0, HIGH_RES_1, VISION_FEATS, VISION_POS],
    ),
    (
        "memory attention",
        &[CURRENT_FEAT, CURRENT_POS, POINTERS, MEMORIES, MEMORY_POS],
        &[IMAGE_EMBED],
    ),
    (
        "image decoder",
        &[
            POINT_COORDS,
            POINT_LABELS,
            IMAGE_EMBED,
            DEC_HIGH_RES_0,
            DEC_HIGH_RES_1,
        ],
        &[OBJ_PTR, MASK_FOR_MEM, PRED_MASK],
    ),
    (
        "memory encoder",
        &[MASK_FOR_MEM, PIX_FEAT],
        &[MASKMEM_FEATURES, MASKMEM_POS, TEMPORAL_CODE],
    ),
];

/// What [`describe_video_module`] tells of one module file.
#[derive(Debug, Clone)]
pub struct VideoModuleInfo {
    /// `image encoder`, `memory attention`, `image decoder` or `memory encoder`.
    pub role: &'static str,
    /// The network, when the module's shapes tell (memory attention and the memory encoder:
    /// [`VideoFamily`]; the image encoder and the decoder are the same contract for both).
    pub family: Option<VideoFamily>,
    /// Which of its attention subgraphs the library fuses when it loads it.
    pub attention: crate::rewrite::RewriteReport,
    /// The precision it runs in: as exported, or a variant's (`sam2-variant`).
    pub variant: Variant,
}

/// Which of the four video modules the file at `path` is (by its tensor names), as loaded with
/// `options`.
pub fn describe_video_module(path: &Path, options: &SessionOptions) -> Result<VideoModuleInfo> {
    let weights = weights::get(
        path,
        options.weights,
        weights::Plan::new(options.optimization, &options.device, options.rewrites),
    )?;
    let (session, _) = session::build(
        &weights,
        path,
        options,
        "video module",
        session::Idle::Sleep,
    )?;
    let inputs: Vec<&str> = session.inputs().iter().map(|o| o.name()).collect();
    let outputs: Vec<&str> = session.outputs().iter().map(|o| o.name()).collect();
    let family = VideoFamily::of_shapes(
        &declared_shapes(session.inputs()),
        &declared_shapes(session.outputs()),
    );
    ROLES
        .iter()
        .find(|(_, i, o)| {
            i.iter().all(|n| inputs.contains(n)) && o.iter().all(|n| outputs.contains(n))
        })
        .map(|(role, _, _)| VideoModuleInfo {
            role,
            family,
            attention: weights.attention.clone(),
            variant: weights.variant.clone(),
        })
        .ok_or_else(|| {
            Error::model(
                path,
                format!(
                    "not one of the four video modules: inputs {inputs:?}, outputs {outputs:?}"
                ),
            )
        })
}

impl Modules {
    /// Which attention subgraphs of each module were fused, by role.
    pub(crate) fn attention_fusion(&self) -> Vec<(&'static str, crate::rewrite::RewriteReport)> {
        self.each()
            .iter()
            .map(|m| (m.role, m.attention_fusion().clone()))
            .collect()
    }

    /// The tracker's precision: see [`crate::Tracker::variant`].
    pub(crate) fn variant(&self) -> &Variant {
        self.each()
            .into_iter()
            .map(Module::variant)
            .find(|v| v.precision != crate::precision::Precision::Fp32)
            .unwrap_or_else(|| self.encoder.variant())
    }

    /// The precision of each module, by role.
    pub(crate) fn variants(&self) -> Vec<(&'static str, Variant)> {
        self.each()
            .iter()
            .map(|m| (m.role, m.variant().clone()))
            .collect()
    }

    fn each(&self) -> [&Module; 4] {
        [
            &self.encoder,
            &self.attention,
            &self.decoder,
            &self.memory_encoder,
        ]
    }

    pub(crate) fn load(paths: &VideoModelPaths, options: &SessionOptions) -> Result<Modules> {
        let (encoder, device) = Module::load(
            &paths.image_encoder,
            "image encoder",
            options,
            &[IMAGE],
            &[PIX_FEAT, HIGH_RES_0, HIGH_RES_1, VISION_FEATS, VISION_POS],
        )?;
        // The device was resolved (and a fallback reported) by the first module; the others
        // must land on the same one, or memory would cross devices on every frame.
        let (attention, d1) = Module::load(
            &paths.memory_attention,
            "memory attention",
            options,
            &[CURRENT_FEAT, CURRENT_POS, POINTERS, MEMORIES, MEMORY_POS],
            &[IMAGE_EMBED],
        )?;
        let (decoder, d2) = Module::load(
            &paths.image_decoder,
            "image decoder",
            options,
            &[
                POINT_COORDS,
                POINT_LABELS,
                IMAGE_EMBED,
                DEC_HIGH_RES_0,
                DEC_HIGH_RES_1,
            ],
            &[OBJ_PTR, MASK_FOR_MEM, PRED_MASK],
        )?;
        let (memory_encoder, d3) = Module::load(
            &paths.memory_encoder,
            "memory encoder",
            options,
            &[MASK_FOR_MEM, PIX_FEAT],
            &[MASKMEM_FEATURES, MASKMEM_POS, TEMPORAL_CODE],
        )?;
        for (module, d) in [(&attention, d1), (&decoder, d2), (&memory_encoder, d3)] {
            if d.primary != device.primary || d.device_id != device.device_id {
                return Err(Error::EnvironmentConfiguration(format!(
                    "{} runs on {} but the image encoder on {}: the four modules must share a device",
                    module.path().display(),
                    d.provider_names(),
                    device.provider_names()
                )));
            }
        }
        let family = VideoFamily::of_shapes(&attention.input_shapes, &attention.output_shapes)
            .unwrap_or(VideoFamily::Sam2);
        let modules = Modules {
            encoder,
            attention,
            decoder,
            memory_encoder,
            device,
            family,
        };
        modules.check_one_export()?;
        Ok(modules)
    }

    /// Refuses modules of different exports (`Error::ModelMismatch`): every tensor one module
    /// hands another must have the same declared dimensions on both sides (free dimensions
    /// agree with anything), and the generated test models' marker must be on all four or on
    /// none. Then refuses, as `Error::Model`, memories and pointers of another size than the
    /// tracker assembles (64 channels of 64 × 64, 256 values).
    fn check_one_export(&self) -> Result<()> {
        let (enc, attn, dec, mem) = (
            &self.encoder,
            &self.attention,
            &self.decoder,
            &self.memory_encoder,
        );
        let links: [Link<'_>; 12] = [
            (
                enc,
                VISION_FEATS,
                attn,
                CURRENT_FEAT,
                None,
                "the frame's features",
            ),
            (
                enc,
                VISION_POS,
                attn,
                CURRENT_POS,
                None,
                "their position encoding",
            ),
            (
                enc,
                VISION_FEATS,
                dec,
                IMAGE_EMBED,
                None,
                "the frame's features",
            ),
            (
                attn,
                IMAGE_EMBED,
                dec,
                IMAGE_EMBED,
                None,
                "the features with memory",
            ),
            (
                enc,
                HIGH_RES_0,
                dec,
                DEC_HIGH_RES_0,
                None,
                "high-resolution features",
            ),
            (
                enc,
                HIGH_RES_1,
                dec,
                DEC_HIGH_RES_1,
                None,
                "high-resolution features",
            ),
            (enc, PIX_FEAT, mem, PIX_FEAT, None, "the pixel features"),
            (
                dec,
                MASK_FOR_MEM,
                mem,
                MASK_FOR_MEM,
                None,
                "the mask to remember",
            ),
            (
                dec,
                OBJECT_SCORE,
                mem,
                OBJECT_SCORE,
                None,
                "the object score",
            ),
            (
                dec,
                OBJ_PTR,
                attn,
                POINTERS,
                Some(1),
                "an object pointer: the hidden dimension",
            ),
            (
                mem,
                MASKMEM_FEATURES,
                attn,
                MEMORIES,
                Some(3),
                "a frame's memory: channels × map",
            ),
            (
                mem,
                MASKMEM_POS,
                attn,
                MEMORY_POS,
                Some(1),
                "memory positions: the channels",
            ),
        ];
        for (from, output, to, input, trailing, what) in links {
            let (Some(a), Some(b)) = (from.output_shapes.get(output), to.input_shapes.get(input))
            else {
                continue;
            };
            let n = trailing.unwrap_or(a.len().max(b.len()));
            let agree = a.len() >= n
                && b.len() >= n
                && (trailing.is_some() || a.len() == b.len())
                && a[a.len() - n..]
                    .iter()
                    .zip(&b[b.len() - n..])
                    .all(|(&x, &y)| x < 0 || y < 0 || x == y);
            if !agree {
                return Err(Error::ModelMismatch(format!(
                    "{} and {} are not modules of one export: the {}'s `{output}` is {a:?} but \
                     the {}'s `{input}` takes {b:?} ({what}; -1 is a free dimension); use the \
                     four modules of one export",
                    from.path.display(),
                    to.path.display(),
                    from.role,
                    to.role,
                )));
            }
        }
        let all = [enc, attn, dec, mem];
        if all.iter().any(|m| m.marker != enc.marker) {
            let list: Vec<String> = all
                .iter()
                .map(|m| {
                    format!(
                        "{} {}: {}",
                        m.role,
                        m.path.display(),
                        m.marker
                            .as_ref()
                            .map_or("no marker".to_string(), |v| format!("{v:?}"))
                    )
                })
                .collect();
            return Err(Error::ModelMismatch(format!(
                "the modules are not of one export: the generated test models' marker \
                 (metadata `{GENERATED_MARKER}`) is on some and not on others ({}); use the four \
                 modules of one export",
                list.join("; ")
            )));
        }
        // What the tracker assembles itself (`Tracker::attend`): SAM2's memory frames are 64
        // channels on the 64 × 64 map, EdgeTAM's tokens of 64 channels.
        let memories: (&[i64], &str) = match self.family {
            VideoFamily::Sam2 => (&[64, 64, 64], "memories of 64 channels on a 64 × 64 map"),
            VideoFamily::EdgeTam => (&[64], "memory tokens of 64 channels"),
        };
        for (input, want, what) in [
            (MEMORIES, memories.0, memories.1),
            (MEMORY_POS, &[64][..], "memory positions of 64 channels"),
            (POINTERS, &[256][..], "object pointers of 256 values"),
        ] {
            let Some(shape) = attn.input_shapes.get(input) else {
                continue;
            };
            let fits = shape.len() > want.len()
                && shape[shape.len() - want.len()..]
                    .iter()
                    .zip(want)
                    .all(|(&d, &w)| d < 0 || d == w);
            if !fits {
                return Err(Error::model(
                    &attn.path,
                    format!(
                        "`{input}` is declared {shape:?}; the tracker gives memory attention \
                         {what} ({}'s layout, docs/video.md)",
                        self.family.name()
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "modules_tests.rs"]
mod tests;
