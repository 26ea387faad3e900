//! Tensors between the modules: concatenation (on the host or the device), checks of a module's
//! outputs, and copies to the host.

use std::path::Path;

use ort::value::{DynValue, Tensor, TensorElementType, ValueType};

use crate::error::{Error, Result};

use super::Tracker;

impl Tracker {
    /// Concatenates tensors along their first axis into one of `shape`, in the memory the
    /// modules run on (plain copies for host memory, device-to-device copies otherwise), written
    /// into `kept` when it is a tensor of that shape there (the last frame's), else into a new
    /// one left in `kept`.
    pub(super) fn concat<'a>(
        &self,
        parts: &[&DynValue],
        shape: &[i64],
        kept: &'a mut Option<DynValue>,
    ) -> Result<&'a DynValue> {
        let mut on_host = true;
        for p in parts {
            on_host &= is_on_host(p)?;
        }
        if !on_host {
            return self.concat_on_device(parts, shape, kept);
        }
        let mut total = 0;
        for p in parts {
            total += p.try_extract_tensor::<f32>()?.1.len();
        }
        let expected: i64 = shape.iter().product();
        if total as i64 != expected {
            return Err(Error::OnnxRuntime(format!(
                "memory tensors hold {total} values, expected {expected} for {shape:?}"
            )));
        }
        let out = super::reuse::host_buffer(kept, shape)?;
        let data = out.try_extract_tensor_mut::<f32>()?.1;
        let mut at = 0;
        for p in parts {
            let part = p.try_extract_tensor::<f32>()?.1;
            data[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        Ok(out)
    }

    pub(super) fn concat_on_device<'a>(
        &self,
        parts: &[&DynValue],
        shape: &[i64],
        kept: &'a mut Option<DynValue>,
    ) -> Result<&'a DynValue> {
        let info = self.device_memory.clone();
        if crate::device_copy::is_webgpu(&info.allocation_device()) {
            // A WebGPU buffer cannot be written at an offset: a Concat session on the device
            // (into a new buffer each time: the session allocates its output).
            let out = crate::device_copy::concat_webgpu(parts, shape, info.device_id())?;
            let got = out
                .view()
                .downcast::<ort::value::DynTensorValueType>()?
                .shape()
                .clone();
            if got.iter().ne(shape.iter()) {
                return Err(Error::OnnxRuntime(format!(
                    "memory tensors concatenated to {got:?}, expected {shape:?}"
                )));
            }
            return Ok(kept.insert(out));
        }
        let reusable = match kept.take() {
            Some(v) if v.shape().iter().eq(shape.iter()) && !is_on_host(&v)? => {
                Some(v.downcast::<ort::value::TensorValueType<f32>>()?)
            }
            _ => None,
        };
        let mut out = match reusable {
            Some(t) => t,
            None => {
                let allocator = self.modules.attention.allocator(&info)?;
                Tensor::<f32>::new(&allocator, shape.to_vec())?
            }
        };
        let base = out.data_ptr_mut() as *mut u8;
        let mut offset = 0usize;
        for p in parts {
            let part_shape = p.shape().clone();
            let bytes = part_shape.num_elements() * std::mem::size_of::<f32>();
            // SAFETY: `out` holds the product of `shape` floats, the parts' sizes sum to it
            // (checked below before any copy past the end), and `view` lives shorter than `out`.
            if offset + bytes > shape.iter().product::<i64>() as usize * 4 {
                return Err(Error::OnnxRuntime(format!(
                    "memory tensors exceed {shape:?}"
                )));
            }
            let view = unsafe {
                ort::value::TensorRefMut::<f32>::from_raw(
                    info.clone(),
                    base.add(offset).cast(),
                    part_shape,
                )?
            };
            p.view()
                .downcast::<ort::value::TensorValueType<f32>>()?
                .copy_into(view)?;
            offset += bytes;
        }
        // Every part was checked at its module's output, so they fill `out` exactly; a shortfall
        // would leave uninitialised memory in it (it is not kept then).
        if offset != shape.iter().product::<i64>() as usize * 4 {
            return Err(Error::OnnxRuntime(format!(
                "memory tensors hold {offset} bytes, expected {shape:?}"
            )));
        }
        Ok(kept.insert(out.into_dyn()))
    }
}

/// Whether a tensor's values are in memory the host can read.
fn is_on_host(value: &DynValue) -> Result<bool> {
    Ok(value
        .view()
        .downcast::<ort::value::DynTensorValueType>()?
        .memory_info()
        .is_cpu_accessible())
}

/// The shape of a module's output, which must be a float tensor (`Error::Model` naming it).
pub(super) fn float_shape(value: &DynValue, module: &Path, name: &str) -> Result<Vec<i64>> {
    match value.dtype() {
        ValueType::Tensor {
            ty: TensorElementType::Float32,
            shape,
            ..
        } => Ok(shape.iter().copied().collect()),
        other => Err(Error::model(
            module,
            format!("output `{name}` is {other}, expected a float32 tensor (docs/video.md)"),
        )),
    }
}

/// Checks that a module's output holds `count` floats (`Error::Model` naming it and `shape`,
/// the contract's).
pub(super) fn expect_floats(
    value: &DynValue,
    module: &Path,
    name: &str,
    count: usize,
    shape: &str,
) -> Result<()> {
    let got = float_shape(value, module, name)?;
    if got.iter().product::<i64>() != count as i64 {
        return Err(Error::model(
            module,
            format!("output `{name}` has shape {got:?}, expected {shape} (docs/video.md)"),
        ));
    }
    Ok(())
}

/// A host output's values, checked to be `count` floats (any non-zero number when `count` is 0).
pub(super) fn host_floats(
    value: &DynValue,
    module: &Path,
    name: &str,
    count: usize,
    shape: &str,
) -> Result<Vec<f32>> {
    if count > 0 {
        expect_floats(value, module, name, count, shape)?;
    }
    let values = value.try_extract_tensor::<f32>()?.1.to_vec();
    if values.is_empty() {
        return Err(Error::model(
            module,
            format!("output `{name}` is empty (docs/video.md)"),
        ));
    }
    Ok(values)
}

/// A tensor's values on the host (copied from the device when they live there).
pub(super) fn to_host(value: &DynValue) -> Result<Vec<f32>> {
    let tensor = value
        .view()
        .downcast::<ort::value::TensorValueType<f32>>()?;
    if tensor.memory_info().is_cpu_accessible() {
        return Ok(tensor.try_extract_tensor::<f32>()?.1.to_vec());
    }
    let dynamic = value.view().downcast::<ort::value::DynTensorValueType>()?;
    let host = crate::device_copy::copy(&dynamic, ort::memory::AllocationDevice::CPU, 0)?;
    Ok(host.try_extract_tensor::<f32>()?.1.to_vec())
}
