//! Small ONNX models built in memory, for the rewriter's tests and the differential corpus
//! ([`super::corpus`]): nodes, float and int64 initializers, typed inputs, and a runner that feeds
//! them deterministic data through ONNX Runtime with its own optimisations off.

use std::borrow::Cow;

use super::graph::{Attr, NewNode, NewTensor, TensorValues};
/// A dimension of a graph input: a size, or a named free one.
pub(crate) use crate::onnx::model::Dim as D;
use crate::onnx::model::{self, GraphParts};
use crate::onnx::DataType;

pub(crate) fn node(
    op: &'static str,
    inputs: &[&str],
    output: &str,
    attrs: Vec<(&'static str, Attr)>,
) -> NewNode {
    NewNode {
        name: format!("n_{output}"),
        op_type: op,
        domain: "",
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        outputs: vec![output.to_string()],
        attrs,
    }
}

pub(crate) fn perm(p: &[i64]) -> Vec<(&'static str, Attr)> {
    vec![("perm", Attr::Ints(p.to_vec()))]
}

pub(crate) fn float_init(name: &str, dims: &[i64], values: &[f32]) -> Vec<u8> {
    model::float_initializer(name, dims, values)
}

/// A float32 tensor's declaration, of these dimensions (`None`: its type left to inference).
pub(crate) fn value_info(name: &str, dims: Option<&[D]>) -> Vec<u8> {
    model::value_info(name, dims.map(|d| (DataType::Float, Some(d))))
}

/// A joint query-key-value projection as PyTorch exports Hiera's: `x` projected by `w` and `b`,
/// reshaped by `shape` to `[B, L, 3, heads, d]` and split along axis 2 into `q`, `k` and `v`, each
/// squeezed by `axes`.
pub(crate) fn joint_projection() -> Vec<NewNode> {
    let mut nodes = vec![
        node("MatMul", &["x", "w"], "m", vec![]),
        node("Add", &["b", "m"], "a", vec![]),
        node("Reshape", &["a", "shape"], "y", vec![]),
        NewNode {
            name: "n_split".into(),
            op_type: "Split",
            domain: "",
            inputs: vec!["y".into()],
            outputs: vec!["p0".into(), "p1".into(), "p2".into()],
            attrs: vec![("axis", Attr::Int(2))],
        },
    ];
    for (p, out) in [("p0", "q"), ("p1", "k"), ("p2", "v")] {
        nodes.push(node("Squeeze", &[p, "axes"], out, vec![]));
    }
    nodes
}

/// A model of opset 17: `inputs` (float32), `outputs` (types left to inference).
#[cfg(test)]
pub(crate) fn model(
    nodes: &[NewNode],
    floats: &[Vec<u8>],
    shapes: &[(&str, &[i64])],
    inputs: &[(&str, &[D])],
    outputs: &[&str],
) -> Vec<u8> {
    model_of_opset(17, nodes, floats, shapes, inputs, outputs)
}

/// [`model`] of another opset.
#[cfg(test)]
pub(crate) fn model_of_opset(
    opset: u64,
    nodes: &[NewNode],
    floats: &[Vec<u8>],
    shapes: &[(&str, &[i64])],
    inputs: &[(&str, &[D])],
    outputs: &[&str],
) -> Vec<u8> {
    model_with_value_info(opset, nodes, floats, shapes, inputs, outputs, &[])
}

/// [`model_of_opset`] with `value_info` entries (float32 tensors of these shapes) for
/// intermediate tensors.
pub(crate) fn model_with_value_info(
    opset: u64,
    nodes: &[NewNode],
    floats: &[Vec<u8>],
    shapes: &[(&str, &[i64])],
    inputs: &[(&str, &[D])],
    outputs: &[&str],
    value_infos: &[(&str, &[D])],
) -> Vec<u8> {
    let mut initializers = floats.to_vec();
    for (name, values) in shapes {
        let t = NewTensor {
            name: name.to_string(),
            dims: vec![values.len() as i64],
            values: TensorValues::Int64(values.to_vec()),
        };
        initializers.push(t.encode());
    }
    let graph = GraphParts {
        name: "test",
        nodes: nodes.iter().map(NewNode::encode).collect(),
        initializers,
        inputs: inputs
            .iter()
            .map(|(name, dims)| value_info(name, Some(dims)))
            .collect(),
        outputs: outputs.iter().map(|name| value_info(name, None)).collect(),
        value_infos: value_infos
            .iter()
            .map(|(name, dims)| value_info(name, Some(dims)))
            .collect(),
    };
    model::model(opset, &graph.encode())
}

/// Deterministic inputs in [-1, 1).
pub(crate) fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Runs `model` on `feeds` (name, shape) and returns output `out`.
#[cfg(test)]
pub(crate) fn run(model: &[u8], feeds: &[(&str, Vec<i64>)], out: &str) -> Vec<f32> {
    try_run(model, feeds, &[out])
        .expect("the model loads and runs")
        .remove(0)
}

/// Runs `model` on `feeds` (name, shape; deterministic data in [-1, 1)) with ONNX Runtime's own
/// graph optimisations off, and returns the float32 outputs `outs`; an error where ONNX Runtime
/// refuses to load or run it.
pub(crate) fn try_run(
    model: &[u8],
    feeds: &[(&str, Vec<i64>)],
    outs: &[&str],
) -> Result<Vec<Vec<f32>>, String> {
    use ort::session::builder::GraphOptimizationLevel;
    let env = crate::runtime::environment().map_err(|e| e.to_string())?;
    let load = || -> ort::Result<ort::session::Session> {
        ort::session::Session::builder(env)?
            .with_optimization_level(GraphOptimizationLevel::Disable)?
            .with_log_level(ort::logging::LogLevel::Fatal)?
            .commit_from_memory(model)
    };
    let mut session = load().map_err(|e| format!("does not load: {e}"))?;
    let mut inputs: Vec<(Cow<str>, ort::session::SessionInputValue)> = Vec::new();
    for (i, (name, shape)) in feeds.iter().enumerate() {
        let n = shape.iter().product::<i64>() as usize;
        let t = ort::value::Tensor::from_array((shape.clone(), data(n, i as u64 + 7)))
            .map_err(|e| e.to_string())?;
        inputs.push((Cow::Owned(name.to_string()), t.into_dyn().into()));
    }
    let outputs = session
        .run(inputs)
        .map_err(|e| format!("does not run: {e}"))?;
    outs.iter()
        .map(|out| {
            outputs[*out]
                .try_extract_tensor::<f32>()
                .map(|(_, v)| v.to_vec())
                .map_err(|e| format!("output `{out}`: {e}"))
        })
        .collect()
}
