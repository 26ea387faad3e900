//! What ONNX Runtime infers of a model's inner tensors, which the rewrites verify against.

use super::*;

/// The probe: ONNX Runtime's inferred types of the model's outputs, from a session (never run)
/// with the basic, provider-independent optimisations: their constant folding turns the shapes
/// exporters compute at run time (`Reshape(x, Concat(Shape(x)[0], …))`) into constants, so that
/// inference knows the dimensions after them. Graph outputs keep their names and values through
/// every optimisation.
pub(crate) fn ort_probe(model: &[u8]) -> Result<HashMap<String, TensorType>, String> {
    use ort::session::builder::GraphOptimizationLevel;
    use ort::value::ValueType;
    let build = || -> crate::Result<ort::session::Session> {
        let env = crate::runtime::environment()?;
        Ok(ort::session::Session::builder(env)?
            .with_optimization_level(GraphOptimizationLevel::Level1)?
            .with_config_entry("session.disable_prepacking", "1")?
            .with_intra_threads(1)?
            .with_log_level(ort::logging::LogLevel::Error)?
            .commit_from_memory(model)?)
    };
    let session = build().map_err(|e| format!("the probe session failed: {e}"))?;
    let mut types = HashMap::new();
    for o in session.outputs() {
        if let ValueType::Tensor {
            ty,
            shape,
            dimension_symbols,
        } = o.dtype()
        {
            let dims = shape
                .iter()
                .enumerate()
                .map(|(i, &d)| {
                    if d >= 0 {
                        Dim::Static(d)
                    } else {
                        Dim::Symbol(dimension_symbols.get(i).cloned().unwrap_or_default())
                    }
                })
                .collect();
            types.insert(
                o.name().to_string(),
                TensorType {
                    elem: match ty {
                        ort::value::TensorElementType::Float32 => Elem::Float32,
                        ort::value::TensorElementType::Float16 => Elem::Float16,
                        _ => Elem::Other,
                    },
                    dims,
                },
            );
        }
    }
    Ok(types)
}
