//! The image encoder: host pixels → an [`Embedding`], run once per image.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ort::memory::MemoryInfo;
use ort::session::{RunOptions, Session};
use ort::value::{DynValue, Tensor, TensorElementType};

use crate::device::{self, EffectiveDevice};
use crate::embedding::{Embedding, EmbeddingTensor, Location};
use crate::error::{Error, Result};
use crate::export::{self, EncoderSpec, InputType};
use crate::fingerprint::Fingerprint;
use crate::image::ImageView;
use crate::precision::Variant;
use crate::preprocess;
use crate::session::{self, SessionOptions};
use crate::weights::{self, weights_address, ModelWeights};

/// Where the encoder's outputs are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputTarget {
    /// On the execution device (VRAM on a GPU session; host memory on a CPU session).
    #[default]
    Device,
    /// In host memory, so the embedding can be saved; ONNX Runtime copies it to the device when a
    /// predictor runs.
    Host,
}

/// Options of an encoder.
#[derive(Debug, Clone, Default)]
pub struct EncoderOptions {
    pub output_target: OutputTarget,
    pub session: SessionOptions,
}

impl EncoderOptions {
    /// Refuses settings no encoder can honour, naming the field ([`SessionOptions::validate`]).
    pub fn validate(&self) -> Result<()> {
        self.session.validate()
    }
}

/// A loaded encoder. `encode` may be called from several threads; runs are serialised on the session.
#[derive(Debug)]
pub struct Encoder {
    running: Arc<Running>,
    spec: EncoderSpec,
    fingerprint: Fingerprint,
    path: PathBuf,
    output_memory: MemoryInfo<'static>,
    output_target: OutputTarget,
    device: EffectiveDevice,
}

/// The encoder's session and the shared weights it reads in place (dropped in that order; the
/// weights' registry entry lives as long as they do). Embeddings left in device memory hold it
/// too, so that their memory is released while the session that allocated it is open: an
/// embedding may outlive its encoder, and on WebGPU (ONNX Runtime 1.30) releasing one after its
/// encoder had closed and another session had opened on the device crashed the process
/// (`sam2 segment --device webgpu` did, after writing its masks).
#[derive(Debug)]
struct Running {
    session: Mutex<Session>,
    weights: Arc<ModelWeights>,
}

impl Encoder {
    /// Loads an encoder model and recognises its contract.
    pub fn new(path: impl AsRef<Path>, options: &EncoderOptions) -> Result<Self> {
        options.validate()?;
        let path = path.as_ref();
        let weights = weights::get(
            path,
            options.session.weights,
            weights::Plan::new(
                options.session.optimization,
                &options.session.device,
                options.session.rewrites,
            ),
        )?;
        let fingerprint = weights.fingerprint;
        let (session, device) = session::build(
            &weights,
            path,
            &options.session,
            "encoder",
            session::Idle::Spin,
        )?;
        let spec = export::detect_encoder(&session, path)?;
        // Device target: the execution device's memory (the host for a CPU session, and after a
        // fallback, so nothing binds device tensors to a CPU session). Host target: the host.
        let output_memory = match options.output_target {
            OutputTarget::Device => device.output_memory()?,
            OutputTarget::Host => device::host_memory()?,
        };
        Ok(Encoder {
            running: Arc::new(Running {
                session: Mutex::new(session),
                weights,
            }),
            spec,
            fingerprint,
            path: path.to_path_buf(),
            output_memory,
            output_target: options.output_target,
            device,
        })
    }

    /// Which attention subgraphs were fused when the model was loaded.
    pub fn attention_fusion(&self) -> &crate::rewrite::RewriteReport {
        &self.running.weights.attention
    }

    /// The precision the encoder runs in: as exported, or a variant
    /// (`sam2-variant`).
    pub fn variant(&self) -> &Variant {
        &self.running.weights.variant
    }

    /// Bytes of weights this model holds outside ONNX Runtime's sessions (shared or copied).
    pub fn weight_bytes(&self) -> usize {
        self.running.weights.weight_bytes
    }

    /// Address of the first shared weight's data: equal for every encoder sharing one copy.
    pub fn weights_address(&self) -> Option<usize> {
        weights_address(&self.running.weights)
    }

    /// What the encoder's session effectively runs on.
    pub fn device(&self) -> &EffectiveDevice {
        &self.device
    }

    /// The provider that reads this encoder's embeddings in place: its own device when it leaves
    /// them there ([`OutputTarget::Device`] on a GPU), `None` (the CPU) otherwise. What a
    /// predictor made for this encoder runs on by default ([`crate::Predictor::for_encoder`]).
    pub fn embedding_provider(&self) -> Option<crate::device::ProviderRequest> {
        (self.output_target == OutputTarget::Device && self.device.primary.is_gpu()).then(|| {
            crate::device::ProviderRequest {
                provider: self.device.primary,
                device_id: self.device.device_id,
                ..crate::device::ProviderRequest::cpu()
            }
        })
    }

    pub fn spec(&self) -> &EncoderSpec {
        &self.spec
    }

    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn output_target(&self) -> OutputTarget {
        self.output_target
    }

    /// The memory the encoder writes embeddings to.
    pub fn output_location(&self) -> Location {
        Location::of(&self.output_memory)
    }

    /// Builds the encoder's input tensor from host pixels. Touches no session: the tensor is
    /// plain host memory, so preparing a request never waits for an encode in flight.
    pub fn prepare_input(&self, image: &ImageView<'_>) -> Result<DynValue> {
        let size = self.spec.input_size;
        if self.spec.input_type == InputType::U8 {
            let data = preprocess::resize_u8_chw(image, size);
            return Ok(Tensor::from_array(([3usize, size, size], data))?.into_dyn());
        }
        let shape = [1usize, 3, size, size];
        let data = preprocess::preprocess(image, size);
        Ok(match self.spec.input_type {
            InputType::F32 => Tensor::from_array((shape, data))?.into_dyn(),
            InputType::F16 => {
                let half: Vec<half::f16> = data
                    .iter()
                    .map(|v| half::f16::from_bits(preprocess::f32_to_f16_bits(*v)))
                    .collect();
                Tensor::from_array((shape, half))?.into_dyn()
            }
            InputType::U8 => unreachable!("handled above"),
        })
    }

    /// Test support: holds the session as an encode in flight does, until the guard is dropped.
    #[cfg(feature = "test-support")]
    pub fn hold_session_for_test(&self) -> impl Drop + '_ {
        self.running
            .session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Encodes one image.
    pub fn encode(&self, image: &ImageView<'_>) -> Result<Embedding> {
        let input = self.prepare_input(image)?;
        self.encode_prepared(&input, image.width as u32, image.height as u32)
    }

    /// Runs the encoder on an already prepared input tensor (what a benchmark of ONNX Runtime alone feeds).
    pub fn encode_prepared(&self, input: &DynValue, width: u32, height: u32) -> Result<Embedding> {
        self.encode_prepared_with(input, width, height, None)
    }

    /// Runs the encoder with run options, whose termination flag another thread may set to stop
    /// the run between two nodes (how background encodes are cancelled); a terminated run fails
    /// with [`Error::OnnxRuntime`].
    pub fn encode_prepared_with(
        &self,
        input: &DynValue,
        width: u32,
        height: u32,
        run_options: Option<&RunOptions>,
    ) -> Result<Embedding> {
        let layout = self.spec.layout();
        let mut session = self
            .running
            .session
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // A fresh binding per run: outputs bound to a device are reused by later runs of the same
        // binding, and an embedding must never be overwritten by the next image.
        let mut binding = session.create_binding()?;
        binding.bind_input(self.spec.input_name.as_str(), input)?;
        for (name, shape) in layout.iter() {
            if self.output_memory.is_cpu_accessible() {
                // Host embeddings live in memory of their own, not in ONNX Runtime's arena: an
                // embedding outlives the run by minutes, and arena chunks pinned that long
                // fragment the regions every later run allocates from (the soak saw the arena
                // add a 64 MiB region after warm-up).
                // ONNX Runtime's default CPU allocator: plain memory, outside the arena.
                let allocator = ort::memory::Allocator::default();
                let value = match export::tensor_info(session.outputs(), name) {
                    Some((TensorElementType::Float16, _)) => {
                        Tensor::<half::f16>::new(&allocator, *shape)?.into_dyn()
                    }
                    _ => Tensor::<f32>::new(&allocator, *shape)?.into_dyn(),
                };
                binding.bind_output(*name, value)?;
            } else {
                binding.bind_output_to_device(*name, &self.output_memory)?;
            }
        }
        let mut outputs = match run_options {
            Some(options) => session.run_binding_with_options(&binding, options)?,
            None => session.run_binding(&binding)?,
        };
        let mut take = |name: &str| -> Result<EmbeddingTensor> {
            let value = outputs
                .remove(name)
                .ok_or_else(|| Error::OnnxRuntime(format!("encoder produced no `{name}`")))?;
            let tensor = EmbeddingTensor::from_value(value)?;
            Ok(if tensor.location().cpu_accessible {
                tensor
            } else {
                tensor
                    .kept_with(Arc::clone(&self.running) as Arc<dyn std::fmt::Debug + Send + Sync>)
            })
        };
        let tensors = layout
            .iter()
            .map(|(name, _)| take(name))
            .collect::<Result<Vec<_>>>()?;
        drop(outputs);
        drop(binding);
        drop(session);
        Ok(Embedding {
            tensors,
            image_width: width,
            image_height: height,
            fingerprint: self.fingerprint,
            precision: self.running.weights.variant.precision,
            family: self.spec.family,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_part_is_checked() {
        let mut options = EncoderOptions::default();
        assert!(options.validate().is_ok());
        options.session.intra_threads = Some(0);
        let e = options.validate().unwrap_err().to_string();
        assert!(e.contains("`intra_threads`"), "{e}");
        // The constructor refuses it before it reads the model.
        let e = Encoder::new("/nonexistent/encoder.onnx", &options).unwrap_err();
        assert!(e.to_string().contains("`intra_threads`"), "{e}");
    }
}
