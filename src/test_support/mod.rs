//! Test support, compiled only with the `test-support` cargo feature (the test builds turn it on;
//! a release build of the library has none of it): stand-ins for device memory on machines
//! without a GPU, the properties the fuzz targets check, and a hook to hold an encoder busy.
//! The C side is `capi/src/test_support.rs` (in the C ABI crate), declared in its own header
//! (`tests/c/sam2_test_support.h`).

use std::sync::Arc;

use ort::memory::{AllocationDevice, AllocatorType, MemoryType};
use ort::value::{DynTensorValueType, TensorElementType, TensorRefMut};

use crate::embedding::{Embedding, EmbeddingTensor, TensorValue};
use crate::error::{Error, Result};

pub mod fuzzing;

/// Internals the benchmarks and tests drive directly: the library's own pre- and post-processing
/// (so ONNX Runtime alone is measured with the same arithmetic), and the ONNX splitter.
pub use crate::onnx::split::{split, split_with_location};
pub use crate::postprocess::{box_and_area, upsample_threshold};
pub use crate::preprocess::{
    f32_to_f16_bits, preprocess, preprocess_into, preprocess_video_frame,
    preprocess_video_frame_into,
};

/// Makes every session `predictor`'s pool would build from now on fail, as a build fails when
/// memory runs out: they are asked for on DirectML with no fallback, which no build of the
/// library on this system has. The predictor keeps the sessions it built.
pub fn fail_pool_growth(predictor: &mut crate::Predictor) {
    predictor.fail_pool_growth();
}

/// Segment everything's point grid: `n × n` cell centres in [0, 1]², rows first.
pub fn point_grid(n: usize) -> Vec<[f64; 2]> {
    crate::everything::point_grid(n)
}

/// Segment everything's crops of a `width × height` image: each box and its layer.
pub fn crop_boxes(
    width: usize,
    height: usize,
    layers: u32,
    overlap_ratio: f32,
) -> Vec<([u32; 4], u32)> {
    crate::everything::crop_boxes(width, height, layers, overlap_ratio)
}

impl Embedding {
    /// A view of a host embedding whose tensors are labelled as living in
    /// `allocator` memory ("Cuda", "DML", …) on `device_id`, standing for a device-resident
    /// embedding in residency checks on machines without a GPU. The bytes stay the host
    /// embedding's (kept alive by the view). Such an embedding is never handed to ONNX Runtime:
    /// predictors and copies refuse it, and saving it is refused like any device embedding.
    pub fn simulate_device(
        host: &Arc<Embedding>,
        allocator: &str,
        device_id: i32,
    ) -> Result<Embedding> {
        if !host.is_serializable() || host.is_simulated() {
            return Err(Error::invalid(
                "embedding",
                "a simulation must be made from a host embedding",
            ));
        }
        if host
            .tensors
            .iter()
            .any(|t| t.dtype != TensorElementType::Float32)
        {
            return Err(Error::invalid(
                "embedding",
                "simulations are made from float32 embeddings",
            ));
        }
        if allocator.is_empty()
            || allocator.len() > 64
            || !allocator
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(Error::invalid(
                "allocator_name",
                format!("`{allocator}` is not an allocator name"),
            ));
        }
        let info = ort::memory::MemoryInfo::new(
            AllocationDevice::new(allocator),
            device_id,
            AllocatorType::Device,
            MemoryType::Default,
        )?;
        let mut tensors = Vec::with_capacity(3);
        for t in host.tensors.iter() {
            let shape = ort::value::Shape::new(t.shape.iter().copied());
            let ptr = t.value.data_ptr() as *mut std::ffi::c_void;
            // SAFETY: the host tensor's memory stays alive (the view holds an Arc of its owner)
            // and is never written: a simulated embedding is only inspected, never run.
            let view: TensorRefMut<'static, f32> =
                unsafe { TensorRefMut::from_raw(info.clone(), ptr, shape)? };
            let view = view.into_dyn().downcast::<DynTensorValueType>()?;
            tensors.push(EmbeddingTensor::from_tensor(TensorValue::Simulated {
                view,
                _host: Arc::clone(host),
            })?);
        }
        Ok(Embedding {
            tensors,
            image_width: host.image_width,
            image_height: host.image_height,
            fingerprint: host.fingerprint,
            family: host.family,
            precision: host.precision,
        })
    }
}

/// A session of a model as the library builds it (its graph optimised once, attention fused,
/// weights shared), with the report of what was fused: for the benchmarks that set one module
/// against ONNX Runtime alone on the same file.
pub struct LibrarySession {
    pub session: ort::session::Session,
    pub attention: crate::rewrite::RewriteReport,
    /// The shared weights the session reads in place (declared after it, so dropped after it).
    _weights: Arc<crate::weights::ModelWeights>,
}

impl LibrarySession {
    pub fn new(path: &std::path::Path, options: &crate::session::SessionOptions) -> Result<Self> {
        let weights = crate::weights::get(
            path,
            options.weights,
            crate::weights::Plan::new(options.optimization, &options.device, options.rewrites),
        )?;
        let (session, _) = crate::session::build(
            &weights,
            path,
            options,
            "benchmark",
            crate::session::Idle::Spin,
        )?;
        Ok(LibrarySession {
            session,
            attention: weights.attention.clone(),
            _weights: weights,
        })
    }
}

/// The tracker's concatenation on WebGPU device `device_id` (`device_copy::concat_webgpu`, the
/// WebGPU provider of a WebGPU build of ONNX Runtime needed): each of `parts` is copied onto the
/// device, the parts are concatenated there into `shape`, and the result is copied back to the
/// host and returned with the memory the concatenation left it in (its allocator's name).
pub fn concat_on_webgpu(
    parts: &[Vec<f32>],
    shape: &[i64],
    device_id: i32,
) -> Result<(Vec<f32>, String)> {
    let mut on_device = Vec::with_capacity(parts.len());
    for part in parts {
        let host = ort::value::Tensor::from_array(([part.len()], part.clone()))?.upcast();
        on_device.push(
            crate::device_copy::copy(&host, AllocationDevice::WEBGPU_BUFFER, device_id)?.into_dyn(),
        );
    }
    let refs: Vec<&ort::value::DynValue> = on_device.iter().collect();
    let out = crate::device_copy::concat_webgpu(&refs, shape, device_id)?;
    let out = out.downcast::<DynTensorValueType>()?;
    let memory = out.memory_info().allocation_device().as_str().to_string();
    let back = crate::device_copy::copy(&out, AllocationDevice::CPU, 0)?;
    let (_, data) = back.try_extract_tensor::<f32>()?;
    Ok((data.to_vec(), memory))
}
