//! An image embedding: the encoder's three tensors, where they live, and what made them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ort::memory::MemoryInfo;
use ort::value::{DynTensor, DynTensorValueType, DynValue, TensorElementType};

use ort::memory::AllocationDevice;
#[cfg(feature = "test-support")]
use ort::value::ValueRefMut;

use crate::error::{Error, Result};
use crate::export::EncoderFamily;
use crate::fingerprint::Fingerprint;
use crate::precision::Precision;

/// Where a tensor's memory is, as ONNX Runtime's memory info describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Allocator name: "Cpu", "Cuda", "CudaPinned", "DML", …
    pub allocator: String,
    pub device_id: i32,
    /// True when the host may read the memory directly (what serialisation needs).
    pub cpu_accessible: bool,
}

impl Location {
    pub(crate) fn of(info: &MemoryInfo<'_>) -> Self {
        Location {
            allocator: info.allocation_device().as_str().to_string(),
            device_id: info.device_id(),
            cpu_accessible: info.is_cpu_accessible(),
        }
    }
}

/// A tensor value: owned (made by ONNX Runtime or loaded), or, in test builds only, a
/// device-labelled view of a host embedding's memory (see `test_support::simulate_device`).
#[derive(Debug)]
pub(crate) enum TensorValue {
    Owned(DynTensor),
    #[cfg(feature = "test-support")]
    Simulated {
        view: ValueRefMut<'static, DynTensorValueType>,
        /// The host embedding whose memory `view` borrows, kept alive with it.
        _host: Arc<Embedding>,
    },
}

impl TensorValue {
    /// True for a test-support stand-in of device memory (never in a release build).
    fn is_simulated(&self) -> bool {
        match self {
            TensorValue::Owned(_) => false,
            #[cfg(feature = "test-support")]
            TensorValue::Simulated { .. } => true,
        }
    }
}

impl std::ops::Deref for TensorValue {
    type Target = DynTensor;
    fn deref(&self) -> &DynTensor {
        match self {
            TensorValue::Owned(v) => v,
            #[cfg(feature = "test-support")]
            TensorValue::Simulated { view, .. } => view,
        }
    }
}

/// One of the three embedding tensors.
#[derive(Debug)]
pub struct EmbeddingTensor {
    pub(crate) value: TensorValue,
    pub(crate) shape: Vec<i64>,
    pub(crate) dtype: TensorElementType,
    pub(crate) location: Location,
    /// Bytes this tensor owns, counted in [`live_bytes`] while it lives (0 for views).
    owned_bytes: usize,
    /// What must outlive the tensor's memory, dropped after it: for device memory, the session
    /// that allocated it (see the encoder's `Running`).
    producer: Option<Arc<dyn std::fmt::Debug + Send + Sync>>,
}

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Bytes held by the embedding tensors alive in this process (host or device memory; views of
/// another embedding's memory are not counted). A diagnostic: it shows, for instance, that an
/// embedding cache stays within its budget.
pub fn live_bytes() -> usize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

impl Drop for EmbeddingTensor {
    fn drop(&mut self) {
        LIVE_BYTES.fetch_sub(self.owned_bytes, Ordering::Relaxed);
    }
}

impl EmbeddingTensor {
    pub(crate) fn from_value(value: DynValue) -> Result<Self> {
        let value: DynTensor = value.downcast::<DynTensorValueType>().map_err(|e| {
            Error::OnnxRuntime(format!("encoder produced a non-tensor output: {e}"))
        })?;
        Self::from_tensor(TensorValue::Owned(value))
    }

    pub(crate) fn from_tensor(value: TensorValue) -> Result<Self> {
        let location = Location::of(value.memory_info());
        let (dtype, shape) = match value.dtype() {
            ort::value::ValueType::Tensor { ty, shape, .. } => {
                (*ty, shape.iter().copied().collect::<Vec<i64>>())
            }
            other => {
                return Err(Error::OnnxRuntime(format!(
                    "encoder produced a non-tensor output ({other:?})"
                )))
            }
        };
        let owned = matches!(value, TensorValue::Owned(_));
        let mut tensor = EmbeddingTensor {
            value,
            shape,
            dtype,
            location,
            owned_bytes: 0,
            producer: None,
        };
        if owned {
            tensor.owned_bytes = tensor.byte_len();
            LIVE_BYTES.fetch_add(tensor.owned_bytes, Ordering::Relaxed);
        }
        Ok(tensor)
    }

    /// The tensor, holding `producer` until it is dropped itself.
    pub(crate) fn kept_with(mut self, producer: Arc<dyn std::fmt::Debug + Send + Sync>) -> Self {
        self.producer = Some(producer);
        self
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    pub fn dtype(&self) -> TensorElementType {
        self.dtype
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Size of the data in bytes.
    pub fn byte_len(&self) -> usize {
        let elems: i64 = self.shape.iter().product();
        elems as usize * element_size(self.dtype)
    }

    /// The tensor's bytes, only when the host can read them; device memory is refused without
    /// touching its pointer.
    pub fn host_bytes(&self) -> Result<&[u8]> {
        if !self.location.cpu_accessible {
            return Err(Error::EmbeddingNotSerializable {
                allocator: self.location.allocator.clone(),
            });
        }
        let ptr = self.value.data_ptr() as *const u8;
        // SAFETY: the memory is CPU-accessible (checked above), owned by `value`, which lives as
        // long as `self`, and holds exactly `byte_len()` bytes for this dense tensor.
        Ok(unsafe { std::slice::from_raw_parts(ptr, self.byte_len()) })
    }
}

use crate::onnx::data_type::ort_element_size as element_size;

/// An image embedding. Immutable once made; share it between threads behind an `Arc`.
#[derive(Debug)]
pub struct Embedding {
    /// The family's three tensors, then, for SAM 3 with its click head, the click features
    /// ([`crate::export::embedding_layout`]).
    pub(crate) tensors: Vec<EmbeddingTensor>,
    pub(crate) image_width: u32,
    pub(crate) image_height: u32,
    pub(crate) fingerprint: Fingerprint,
    pub(crate) family: EncoderFamily,
    /// The precision of the encoder that made it (an int8 variant's embedding is another model's).
    pub(crate) precision: Precision,
}

impl Embedding {
    /// The tensors in canonical order: for SAM2, high-res level 0, high-res level 1, image
    /// embedding; for SAM 3, its three feature levels, then its click features when its encoder
    /// writes them.
    pub fn tensors(&self) -> &[EmbeddingTensor] {
        &self.tensors
    }

    /// The names of [`Embedding::tensors`], in order.
    pub fn tensor_names(&self) -> Vec<&'static str> {
        crate::export::embedding_layout(self.family, self.has_click_features())
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    /// The tensor of that name, if the embedding has it.
    pub fn tensor(&self, name: &str) -> Option<&EmbeddingTensor> {
        self.tensor_names()
            .iter()
            .position(|n| *n == name)
            .map(|i| &self.tensors[i])
    }

    /// Whether a SAM 3 embedding also holds the features of SAM 3's click head (its encoder was
    /// exported with them), so that one encode serves concepts and clicks.
    pub fn has_click_features(&self) -> bool {
        self.family == EncoderFamily::Sam3 && self.tensors.len() == 6
    }

    /// Size of the original image, in pixels.
    pub fn image_size(&self) -> (u32, u32) {
        (self.image_width, self.image_height)
    }

    /// Identity of the encoder model that made this embedding.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    pub fn family(&self) -> EncoderFamily {
        self.family
    }

    /// The precision of the encoder that made it.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// True when every tensor is in host-readable memory, so the embedding can be saved.
    pub fn is_serializable(&self) -> bool {
        self.tensors.iter().all(|t| t.location.cpu_accessible)
    }

    /// The allocator that makes the embedding non-serializable, or the one that holds it.
    pub fn allocator_name(&self) -> &str {
        self.holder().allocator.as_str()
    }

    /// Device id of the memory that holds the embedding (of the first device tensor, if any).
    pub fn device_id(&self) -> i32 {
        self.holder().device_id
    }

    /// Where the embedding is said to live: its first device tensor's memory, or the first tensor's.
    fn holder(&self) -> &Location {
        &self
            .tensors
            .iter()
            .find(|t| !t.location.cpu_accessible)
            .unwrap_or(&self.tensors[0])
            .location
    }
}

impl Embedding {
    /// True for a test-support stand-in of a device embedding (always false in a release build):
    /// its bytes are the host's, so it is never run, copied or saved.
    pub(crate) fn is_simulated(&self) -> bool {
        self.tensors.iter().any(|t| t.value.is_simulated())
    }

    /// An embedding whose tensors are all in host memory: this one (shared, no copy) when it
    /// already is, otherwise a device→host copy made by ONNX Runtime through the device's
    /// execution provider. Fails with `EnvironmentConfiguration` when that provider is missing.
    pub fn to_host(self: &Arc<Self>) -> Result<Arc<Embedding>> {
        if self.is_serializable() && !self.is_simulated() {
            return Ok(Arc::clone(self));
        }
        self.copy_to_host().map(Arc::new)
    }

    /// A new host embedding with a copy of every tensor (device tensors through ONNX Runtime).
    pub fn copy_to_host(&self) -> Result<Embedding> {
        if self.is_simulated() {
            return Err(Error::EnvironmentConfiguration(format!(
                "this embedding only simulates `{}` memory (test support); its bytes are not on a device \
                 and cannot be copied from one",
                self.allocator_name()
            )));
        }
        self.map_tensors(|t| {
            crate::device_copy::copy(&t.value, AllocationDevice::CPU, 0).map_err(|e| {
                Error::EnvironmentConfiguration(format!(
                    "copying the embedding from `{}` device {} to the host failed; the execution provider \
                     for that device must be available in this ONNX Runtime build: {e}",
                    t.location.allocator, t.location.device_id
                ))
            })
        })
    }

    /// A copy of this host embedding on a device ("Cuda", "DML"), made by ONNX Runtime through that
    /// device's execution provider.
    pub fn copy_to(&self, device: AllocationDevice<'static>, device_id: i32) -> Result<Embedding> {
        if self.is_simulated() {
            return Err(Error::invalid(
                "embedding",
                "a simulated device embedding cannot be copied",
            ));
        }
        self.map_tensors(|t| {
            crate::device_copy::copy(&t.value, device.clone(), device_id).map_err(|e| {
                Error::EnvironmentConfiguration(format!(
                    "placing the embedding on `{}` device {device_id} failed: {e}",
                    device.as_str()
                ))
            })
        })
    }

    /// A new embedding with the same metadata whose tensors are `copy` of each of these.
    fn map_tensors(
        &self,
        copy: impl Fn(&EmbeddingTensor) -> Result<DynTensor>,
    ) -> Result<Embedding> {
        let mut tensors = Vec::with_capacity(self.tensors.len());
        for t in self.tensors.iter() {
            tensors.push(EmbeddingTensor::from_value(copy(t)?.into_dyn())?);
        }
        Ok(Embedding {
            tensors,
            image_width: self.image_width,
            image_height: self.image_height,
            fingerprint: self.fingerprint,
            family: self.family,
            precision: self.precision,
        })
    }
}
