//! Small ONNX models built in memory, for the rewriter's tests and the differential corpus
//! ([`super::corpus`]): nodes, float and int64 initializers, typed inputs, and a runner that feeds
//! them deterministic data through ONNX Runtime with its own optimisations off.

use std::borrow::Cow;

use super::graph::{self, Attr, NewNode, NewTensor, TensorValues};
use crate::onnx_split::{put_len_field, put_varint_field};

/// A dimension of a graph input: a size, or a named free one.
#[derive(Debug, Clone, Copy)]
pub(crate) enum D {
    N(i64),
    S(&'static str),
}

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
    let mut t = Vec::new();
    for &d in dims {
        put_varint_field(&mut t, 1, d as u64);
    }
    put_varint_field(&mut t, 2, graph::FLOAT as u64);
    put_len_field(&mut t, 8, name.as_bytes());
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    put_len_field(&mut t, 9, &raw);
    t
}

pub(crate) fn value_info(name: &str, dims: Option<&[D]>) -> Vec<u8> {
    let mut info = Vec::new();
    put_len_field(&mut info, 1, name.as_bytes());
    if let Some(dims) = dims {
        let mut shape = Vec::new();
        for d in dims {
            let mut dim = Vec::new();
            match d {
                D::N(v) => put_varint_field(&mut dim, 1, *v as u64),
                D::S(s) => put_len_field(&mut dim, 2, s.as_bytes()),
            }
            put_len_field(&mut shape, 1, &dim);
        }
        let mut tensor = Vec::new();
        put_varint_field(&mut tensor, 1, graph::FLOAT as u64);
        put_len_field(&mut tensor, 2, &shape);
        let mut ty = Vec::new();
        put_len_field(&mut ty, 1, &tensor);
        put_len_field(&mut info, 2, &ty);
    }
    info
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
    let mut g = Vec::new();
    for n in nodes {
        put_len_field(&mut g, 1, &n.encode());
    }
    put_len_field(&mut g, 2, b"test");
    for f in floats {
        put_len_field(&mut g, 5, f);
    }
    for (name, values) in shapes {
        let t = NewTensor {
            name: name.to_string(),
            dims: vec![values.len() as i64],
            values: TensorValues::Int64(values.to_vec()),
        };
        put_len_field(&mut g, 5, &t.encode());
    }
    for (name, dims) in inputs {
        put_len_field(&mut g, 11, &value_info(name, Some(dims)));
    }
    for name in outputs {
        put_len_field(&mut g, 12, &value_info(name, None));
    }
    for (name, dims) in value_infos {
        put_len_field(&mut g, 13, &value_info(name, Some(dims)));
    }
    let mut m = Vec::new();
    put_varint_field(&mut m, 1, 8);
    let mut op = Vec::new();
    put_len_field(&mut op, 1, b"");
    put_varint_field(&mut op, 2, opset);
    put_len_field(&mut m, 8, &op);
    put_len_field(&mut m, 7, &g);
    m
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
