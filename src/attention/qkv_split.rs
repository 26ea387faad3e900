//! Joint projections of queries, keys and values split by their weights instead of their output,
//! a rewrite the library makes when it loads a model for the CPU.
//!
//! Hiera's attention blocks (the image encoders of SAM2 and SAM2.1, every export family) project
//! queries, keys and values with one matrix and split the result, as PyTorch exports
//! `qkv(x).reshape(B, L, 3, heads, -1).unbind(2)`:
//!
//! ```text
//!   y = Reshape(Add(MatMul(x, W [C, 3D]), b [3D]), [B, L, 3, heads, d])     (3 · heads · d = 3D)
//!   q, k, v = Squeeze(Split(y, axis 2), axis 2)                              [B, L, heads, d]
//! ```
//!
//! ONNX Runtime's `Split` over an inner axis copies the tensor a row of `d` floats at a time on
//! one thread: 80 ms of the 2.1 s encode for the first block alone (1024 windows × 64 tokens × 3
//! × 96 floats, 75 MB), about 60 ms a run over the 12 blocks on 2 AMD EPYC cores. Each part is
//! a projection by a third of the weights:
//!
//! ```text
//!   part i = Reshape(Add(MatMul(x, W[:, iD:(i+1)D]), b[iD:(i+1)D]), [B, L, heads, d])
//! ```
//!
//! the same products, summed in the same order where MLAS blocks the sum the same way (in the
//! measured encoders the embeddings were the same bits). The weights are sliced by `Slice` nodes
//! on the initializers, which ONNX Runtime's constant folding computes once when the library
//! optimises the model; the target shape is the exported one's first two entries, then `heads`
//! and `d`.
//!
//! Recognised structurally, and verified against ONNX Runtime's inferred types: `y` float32,
//! rank 5, `[_, _, 3, heads, d]` with the last three known at load time and `3 · heads · d` the
//! weight's width, the projection before it of rank 3 or more; every intermediate tensor read by
//! the next operator alone; each of the three parts read by one `Squeeze` of that axis alone;
//! opset 10 or later. Done on the CPU only, where it was measured.

use std::collections::HashMap;

use super::graph::{Attr, Graph, NewNode, NewTensor, TensorValues};
use super::{Dim, Elem, Finder, TensorType};

/// A joint projection split into queries, keys and values, found before the types are known.
#[derive(Debug, Clone)]
pub(super) struct QkvSplit {
    /// The nodes it replaces: the MatMul, the Add, the Reshape, the Split and the 3 Squeezes.
    pub nodes: Vec<usize>,
    /// Where the new nodes go: the Split's index.
    pub anchor: usize,
    x: String,
    weight: String,
    bias: String,
    /// The exported rank-5 shape the Reshape reads.
    shape: String,
    /// The reshaped projection, whose inferred type decides.
    y: String,
    /// The projection before the reshape: it must have a rank of 3 or more, so that the
    /// exported shape's first two entries mean the same for a third of it.
    sum: String,
    /// The three parts as the Squeezes write them.
    parts: [String; 3],
}

/// Every `Split` of a reshaped joint projection into three along axis 2, each part squeezed.
pub(super) fn find(finder: &Finder) -> Vec<QkvSplit> {
    (0..finder.g.nodes.len())
        .filter_map(|s| at_split(finder, s))
        .collect()
}

fn at_split(f: &Finder, s: usize) -> Option<QkvSplit> {
    let g = f.g;
    let split = &g.nodes[s];
    // The new `Slice` nodes take their bounds as inputs, as from opset 10 on.
    if g.opset < 10 || !split.is("Split") || split.outputs.len() != 3 {
        return None;
    }
    let axis = match split.attr("axis") {
        Some(Attr::Int(a)) => *a,
        _ => return None,
    };
    if axis != 2 && axis != -3 {
        return None;
    }
    // Equal parts of one: no sizes (opset 18's `num_outputs`, or none before), or sizes of 1.
    if let Some(sizes) = g.ints(split.attr("split"), split.inputs.get(1)) {
        if sizes != [1, 1, 1] {
            return None;
        }
    }
    let mut nodes = Vec::new();
    let mut parts = Vec::new();
    for out in &split.outputs {
        let &q = f.reader.get(out.as_str())?;
        let squeeze = &g.nodes[q];
        if g.outputs.contains(out) || !squeeze.is("Squeeze") || squeeze.outputs.len() != 1 {
            return None;
        }
        let axes = g.ints(squeeze.attr("axes"), squeeze.inputs.get(1))?;
        if !matches!(axes.as_slice(), [2] | [-3]) {
            return None;
        }
        nodes.push(q);
        parts.push(squeeze.outputs[0].clone());
    }
    let y = split.inputs.first().filter(|t| !t.is_empty())?;
    let r = f.sole_producer(y)?;
    let reshape = &g.nodes[r];
    if !reshape.is("Reshape") || reshape.inputs.len() != 2 {
        return None;
    }
    if let Some(Attr::Int(1)) = reshape.attr("allowzero") {
        return None;
    }
    let a = f.sole_producer(&reshape.inputs[0])?;
    let add = &g.nodes[a];
    if !add.is("Add") || add.inputs.len() != 2 {
        return None;
    }
    let (m, bias) = add.inputs.iter().enumerate().find_map(|(k, t)| {
        let other = &add.inputs[1 - k];
        let m = f.sole_producer(t)?;
        (g.nodes[m].is("MatMul") && g.initializers.contains_key(other)).then_some((m, other))
    })?;
    let matmul = &g.nodes[m];
    let weight = matmul.inputs.get(1)?;
    if matmul.inputs.len() != 2 || !g.initializers.contains_key(weight) {
        return None;
    }
    nodes.extend([m, a, r, s]);
    Some(QkvSplit {
        nodes,
        anchor: s,
        x: matmul.inputs[0].clone(),
        weight: weight.clone(),
        bias: bias.clone(),
        shape: reshape.inputs[1].clone(),
        y: y.clone(),
        sum: add.outputs[0].clone(),
        parts: parts.try_into().ok()?,
    })
}

impl QkvSplit {
    /// The tensors whose inferred types decide.
    pub(super) fn wanted(&self) -> [&str; 2] {
        [self.y.as_str(), self.sum.as_str()]
    }

    /// The nodes that replace the split, and their constants; `None` where the weights or the
    /// inferred type do not fit.
    pub(super) fn rewrite(
        &self,
        g: &mut Graph,
        types: &HashMap<String, TensorType>,
    ) -> Option<(Vec<NewNode>, Vec<NewTensor>)> {
        let width = match g.initializers.get(&self.weight)? {
            (super::graph::FLOAT, dims) if dims.len() == 2 => dims[1],
            _ => return None,
        };
        match g.initializers.get(&self.bias)? {
            (super::graph::FLOAT, dims) if dims.as_slice() == [width] => {}
            _ => return None,
        }
        let ty = types.get(&self.y)?;
        let (heads, d) = match ty.dims.as_slice() {
            [_, _, Dim::Static(3), Dim::Static(heads), Dim::Static(d)]
                if ty.elem == Elem::Float32 && 3 * heads * d == width =>
            {
                (*heads, *d)
            }
            _ => return None,
        };
        if types.get(&self.sum)?.dims.len() < 3 {
            return None;
        }
        let part = width / 3;
        let mut tensors = Vec::new();
        let mut constant = |g: &mut Graph, stem: &str, values: Vec<i64>| {
            let t = NewTensor::vector(g, stem, TensorValues::Int64(values));
            let name = t.name.clone();
            tensors.push(t);
            name
        };
        let node = |g: &mut Graph, op_type, inputs, output| {
            NewNode::plain(g, "sam2_qkv_split_node", op_type, inputs, output)
        };
        let mut nodes = Vec::new();
        // The exported shape's first two entries ([B, L], which may be `0` or `−1`), then the
        // verified [heads, d].
        let (zero, two) = (
            constant(g, "sam2_qkv_split_at", vec![0]),
            constant(g, "sam2_qkv_split_at", vec![2]),
        );
        let tail = constant(g, "sam2_qkv_split_heads", vec![heads, d]);
        let (head, shape) = (
            g.fresh("sam2_qkv_split_lead"),
            g.fresh("sam2_qkv_split_shape"),
        );
        nodes.push(node(
            g,
            "Slice",
            vec![self.shape.clone(), zero, two],
            head.clone(),
        ));
        let mut concat = node(g, "Concat", vec![head, tail], shape.clone());
        concat.attrs.push(("axis", Attr::Int(0)));
        nodes.push(concat);
        let (axis0, axis1) = (
            constant(g, "sam2_qkv_split_axis", vec![0]),
            constant(g, "sam2_qkv_split_axis", vec![1]),
        );
        for (i, out) in self.parts.iter().enumerate() {
            let i = i as i64;
            let start = constant(g, "sam2_qkv_split_start", vec![i * part]);
            let end = constant(g, "sam2_qkv_split_end", vec![(i + 1) * part]);
            let names = [
                "sam2_qkv_split_weight",
                "sam2_qkv_split_bias",
                "sam2_qkv_split_product",
                "sam2_qkv_split_sum",
            ]
            .map(|stem| g.fresh(stem));
            let [w, b, product, sum] = names;
            let slice = |g: &mut Graph, src: &str, axis: &str, out: &str| {
                node(
                    g,
                    "Slice",
                    vec![src.into(), start.clone(), end.clone(), axis.into()],
                    out.into(),
                )
            };
            nodes.push(slice(g, &self.weight, &axis1, &w));
            nodes.push(slice(g, &self.bias, &axis0, &b));
            nodes.push(node(g, "MatMul", vec![self.x.clone(), w], product.clone()));
            nodes.push(node(g, "Add", vec![product, b], sum.clone()));
            nodes.push(node(g, "Reshape", vec![sum, shape.clone()], out.clone()));
        }
        Some((nodes, tensors))
    }
}
