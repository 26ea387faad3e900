//! The four ONNX modules of the video contract, loaded and recognised by their tensor names.
//!
//! Names follow the most used four-module export (Aimol-l/SAM2Export and its descendants, such
//! as pagarcia/sam2-onnx-cpp): `image_encoder`, `memory_attention`, `image_decoder`,
//! `memory_encoder`. The project's own exports (tools/export_video.py) add optional inputs and
//! outputs that make tracking follow SAM2's video predictor exactly; a module without them is
//! run as its lineage runs it (docs/video.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ort::memory::{Allocator, MemoryInfo};
use ort::session::Session;
use ort::value::DynValue;

use crate::device::EffectiveDevice;
use crate::error::{Error, Result};
use crate::session::{self, SessionOptions};
use crate::weights::{self, ModelWeights};

/// Where the four modules of a video model are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoModelPaths {
    pub image_encoder: PathBuf,
    pub memory_attention: PathBuf,
    pub image_decoder: PathBuf,
    pub memory_encoder: PathBuf,
}

impl VideoModelPaths {
    /// The four files in `dir` under the contract's names, each after `prefix` (empty for an
    /// export's own names; the generated test models use `track_`).
    pub fn in_dir(dir: impl AsRef<Path>, prefix: &str) -> Self {
        let dir = dir.as_ref();
        let file = |name: &str| dir.join(format!("{prefix}{name}.onnx"));
        VideoModelPaths {
            image_encoder: file("image_encoder"),
            memory_attention: file("memory_attention"),
            image_decoder: file("image_decoder"),
            memory_encoder: file("memory_encoder"),
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

/// One loaded module.
pub(crate) struct Module {
    session: Mutex<Session>,
    path: PathBuf,
    inputs: Vec<String>,
    outputs: Vec<String>,
    /// Keeps the shared weights alive while the session uses them.
    _weights: Arc<ModelWeights>,
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
            weights::Plan::new(options.optimization, &options.device),
        )?;
        let (session, device) = session::build(&weights, path, options, role)?;
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
        Ok((
            Module {
                session: Mutex::new(session),
                path: path.to_path_buf(),
                inputs: have_in,
                outputs: have_out,
                _weights: weights,
            },
            device,
        ))
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

/// The four modules, and which of the optional tensors they have.
#[derive(Debug)]
pub(crate) struct Modules {
    pub encoder: Module,
    pub attention: Module,
    pub decoder: Module,
    pub memory_encoder: Module,
    pub device: EffectiveDevice,
}

impl Modules {
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
        Ok(Modules {
            encoder,
            attention,
            decoder,
            memory_encoder,
            device,
        })
    }
}
