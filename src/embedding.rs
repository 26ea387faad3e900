//! An image embedding: the encoder's three tensors, where they live, and what made them.

use std::sync::Arc;

use ort::memory::MemoryInfo;
use ort::value::{DynTensor, DynTensorValueType, DynValue, TensorElementType};

use crate::contract::EncoderFamily;
use crate::error::{Error, Result};
use crate::fingerprint::Fingerprint;

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

/// One of the three embedding tensors.
#[derive(Debug)]
pub struct EmbeddingTensor {
    pub(crate) value: DynTensor,
    pub(crate) shape: Vec<i64>,
    pub(crate) dtype: TensorElementType,
    pub(crate) location: Location,
    /// Keeps alive memory the value borrows (test-support device stand-ins only).
    pub(crate) _backing: Option<Arc<Embedding>>,
}

impl EmbeddingTensor {
    pub(crate) fn from_value(value: DynValue) -> Result<Self> {
        let value: DynTensor = value.downcast::<DynTensorValueType>().map_err(|e| {
            Error::OnnxRuntime(format!("encoder produced a non-tensor output: {e}"))
        })?;
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
        Ok(EmbeddingTensor {
            value,
            shape,
            dtype,
            location,
            _backing: None,
        })
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

pub(crate) fn element_size(dtype: TensorElementType) -> usize {
    match dtype {
        TensorElementType::Float16 | TensorElementType::Bfloat16 => 2,
        TensorElementType::Float64 | TensorElementType::Int64 | TensorElementType::Uint64 => 8,
        TensorElementType::Int8 | TensorElementType::Uint8 | TensorElementType::Bool => 1,
        TensorElementType::Int16 | TensorElementType::Uint16 => 2,
        _ => 4,
    }
}

/// An image embedding. Immutable once made; share it between threads behind an `Arc`.
#[derive(Debug)]
pub struct Embedding {
    pub(crate) tensors: [EmbeddingTensor; 3],
    pub(crate) image_width: u32,
    pub(crate) image_height: u32,
    pub(crate) fingerprint: Fingerprint,
    pub(crate) family: EncoderFamily,
}

impl Embedding {
    /// The three tensors in canonical order: high-res level 0, high-res level 1, image embedding.
    pub fn tensors(&self) -> &[EmbeddingTensor; 3] {
        &self.tensors
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

    /// True when every tensor is in host-readable memory, so the embedding can be saved.
    pub fn is_serializable(&self) -> bool {
        self.tensors.iter().all(|t| t.location.cpu_accessible)
    }

    /// The allocator that makes the embedding non-serializable, or the one that holds it.
    pub fn allocator_name(&self) -> &str {
        self.tensors
            .iter()
            .find(|t| !t.location.cpu_accessible)
            .unwrap_or(&self.tensors[0])
            .location
            .allocator
            .as_str()
    }

    /// Device id of the memory that holds the embedding (of the first device tensor, if any).
    pub fn device_id(&self) -> i32 {
        self.tensors
            .iter()
            .find(|t| !t.location.cpu_accessible)
            .unwrap_or(&self.tensors[0])
            .location
            .device_id
    }
}
