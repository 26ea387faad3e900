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
//! Two of the three biases then need not be added where they are exported, when the parts meet
//! an attention core as Hiera's do (`k` transposed to `[B, heads, d, L]` for the scores, `v` to
//! `[B, heads, L, d]`, the softmax over the keys, the result transposed back, its heads merged
//! and projected by a matrix and a bias):
//!
//! - **the keys' bias goes.** It adds `q · b_k` to every score of a query's row, the same for
//!   every key, and a softmax does not change when a row is shifted;
//! - **the values' bias moves into the output projection's.** Each row of probabilities sums to
//!   one, so the result gains exactly `b_v`, which the projection turns into `b_v · W_o`: the
//!   new bias is `b_o + b_v · W_o`, constants that ONNX Runtime folds once at load.
//!
//! The products of the keys and values are then plain `MatMul`s, which ONNX Runtime runs without
//! first broadcasting a bias into the output and reading it back (its `Gemm` does): 7–28 ms of a
//! 1.8 s SAM2.1 tiny encode on 2 cores. The arithmetic is the same up to float rounding.
//!
//! Recognised structurally, and verified against ONNX Runtime's inferred types: `y` float32,
//! rank 5, `[_, _, 3, heads, d]` with the last three known at load time and `3 · heads · d` the
//! weight's width, the projection before it of rank 3 or more; every intermediate tensor read by
//! the next operator alone; each of the three parts read by one `Squeeze` of that axis alone;
//! opset 10 or later. Done on the CPU only, where it was measured.

use std::collections::{HashMap, HashSet};

use super::graph::{Attr, Graph, NewNode, NewTensor, TensorValues};
use super::{Candidate, Dim, Edit, Elem, Finder, Keys, Pass, RewriteReport, TensorType};

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
    /// The keys meet an attention core that makes their bias irrelevant.
    keys_unbiased: bool,
    /// The values meet an attention core whose output projection can take their bias.
    values_bias: Option<OutputProjection>,
}

/// The projection of an attention core's merged heads, `Add(MatMul(merged, weight), bias)`.
#[derive(Debug, Clone)]
struct OutputProjection {
    /// The Add, which is rewritten with the new bias.
    add: usize,
    weight: String,
    bias: String,
}

/// What a split's rewrite writes: new nodes at its anchor, constants, and existing nodes
/// replaced where they are (index, replacement).
pub(super) struct Rewrite {
    pub nodes: Vec<NewNode>,
    pub tensors: Vec<NewTensor>,
    pub replaced: Vec<(usize, NewNode)>,
    pub keys_unbiased: bool,
    pub values_bias_moved: bool,
}

/// A Transpose with this permutation and one input.
fn transpose(g: &Graph, i: usize, perm: &[i64]) -> bool {
    let n = &g.nodes[i];
    n.is("Transpose")
        && n.inputs.len() == 1
        && n.outputs.len() == 1
        && matches!(n.attr("perm"), Some(Attr::Ints(p)) if p == perm)
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
        let q = f.sole_reader(out)?;
        let squeeze = &g.nodes[q];
        if !squeeze.is("Squeeze") {
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
        keys_unbiased: false,
        values_bias: None,
    })
}

impl QkvSplit {
    /// Notes where the keys and values meet one of the attention `cores` as described in the
    /// module's documentation, so that the rewrite can leave out their biases.
    pub(super) fn meet(&mut self, f: &Finder, cores: &[Candidate]) {
        let [_, keys, values] = &self.parts;
        // Each part read once, by the core's transpose, and no graph output.
        let once = |t: &str| f.sole_reader(t).is_some();
        for c in cores.iter().filter(|c| c.softmax_axis == -1) {
            if let Keys::Transposed { src, perm } = &c.keys {
                // `[B, L, heads, d]` to `[B, heads, d, L]`, read by the scores alone.
                if src == keys
                    && perm == &[0, 2, 3, 1]
                    && once(keys)
                    && f.sole_producer(&c.kt).is_some()
                {
                    self.keys_unbiased = true;
                }
            }
            if c.projection.is_none() && once(values) {
                if let Some(p) = output_projection(f, c, values) {
                    self.values_bias = Some(p);
                }
            }
        }
    }

    /// The tensors whose inferred types decide.
    pub(super) fn wanted(&self) -> [&str; 2] {
        [self.y.as_str(), self.sum.as_str()]
    }

    /// The nodes that replace the split, and their constants; `None` where the weights or the
    /// inferred type do not fit. The values' bias moves only where no other rewrite took the
    /// output projection's Add (`removed`).
    pub(super) fn rewrite(
        &self,
        g: &mut Graph,
        types: &HashMap<String, TensorType>,
        removed: &HashSet<usize>,
    ) -> Option<Rewrite> {
        let width = g.float_initializer(&self.weight, &[None, None])?[1];
        g.float_initializer(&self.bias, &[Some(width)])?;
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
        // The output projection takes the values' bias when its weight has a row per channel of
        // the values and no other rewrite took its Add.
        let moved = self.values_bias.as_ref().filter(|p| {
            !removed.contains(&p.add)
                && g.float_initializer(&p.weight, &[Some(part), None])
                    .is_some()
        });
        let mut replaced = Vec::new();
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
            nodes.push(node(g, "MatMul", vec![self.x.clone(), w], product.clone()));
            let projected = match (i, &moved) {
                (1, _) if self.keys_unbiased => product,
                (2, Some(p)) => {
                    // b_o + b_v · W_o, folded by ONNX Runtime at load.
                    let [through, bias] = ["sam2_qkv_split_through", "sam2_qkv_split_out_bias"]
                        .map(|stem| g.fresh(stem));
                    nodes.push(slice(g, &self.bias, &axis0, &b));
                    nodes.push(node(
                        g,
                        "MatMul",
                        vec![b, p.weight.clone()],
                        through.clone(),
                    ));
                    nodes.push(node(g, "Add", vec![p.bias.clone(), through], bias.clone()));
                    let exported = &g.nodes[p.add];
                    let inputs = exported
                        .inputs
                        .iter()
                        .map(|t| {
                            if *t == p.bias {
                                bias.clone()
                            } else {
                                t.clone()
                            }
                        })
                        .collect();
                    let output = exported.outputs[0].clone();
                    replaced.push((p.add, node(g, "Add", inputs, output)));
                    product
                }
                _ => {
                    nodes.push(slice(g, &self.bias, &axis0, &b));
                    nodes.push(node(g, "Add", vec![product, b], sum.clone()));
                    sum
                }
            };
            nodes.push(node(
                g,
                "Reshape",
                vec![projected, shape.clone()],
                out.clone(),
            ));
        }
        Some(Rewrite {
            nodes,
            tensors,
            keys_unbiased: self.keys_unbiased,
            values_bias_moved: !replaced.is_empty(),
            replaced,
        })
    }
}

/// The projection after core `c` when its values are `values` transposed to `[B, heads, L, d]`
/// and its result `[B, heads, S, d]` is transposed back, its heads merged by a Reshape and
/// projected by `Add(MatMul(merged, W), b)`, each tensor read by the next operator alone.
fn output_projection(f: &Finder, c: &Candidate, values: &str) -> Option<OutputProjection> {
    let g = f.g;
    let head_order = [0, 2, 1, 3];
    let t = f.sole_producer(&c.v)?;
    if !transpose(g, t, &head_order) || g.nodes[t].inputs[0] != values {
        return None;
    }
    let back = f.sole_reader(&c.out)?;
    if !transpose(g, back, &head_order) {
        return None;
    }
    let r = f.sole_reader(&g.nodes[back].outputs[0])?;
    let reshape = &g.nodes[r];
    if !reshape.is("Reshape")
        || reshape.inputs.first() != Some(&g.nodes[back].outputs[0])
        || matches!(reshape.attr("allowzero"), Some(Attr::Int(1)))
    {
        return None;
    }
    let m = f.sole_reader(&reshape.outputs[0])?;
    let matmul = &g.nodes[m];
    if !matmul.is("MatMul") || matmul.inputs.len() != 2 || matmul.inputs[0] != reshape.outputs[0] {
        return None;
    }
    let weight = &matmul.inputs[1];
    let out = g.float_initializer(weight, &[None, None])?[1];
    let a = f.sole_reader(&matmul.outputs[0])?;
    let add = &g.nodes[a];
    if !add.is("Add") || add.inputs.len() != 2 || !add.attrs.is_empty() {
        return None;
    }
    let bias = add.inputs.iter().find(|t| **t != matmul.outputs[0])?;
    g.float_initializer(bias, &[Some(out)])?;
    Some(OutputProjection {
        add: a,
        weight: weight.clone(),
        bias: bias.clone(),
    })
}

/// In a split's kind in the report: its keys' product left without their bias.
pub(super) const KEYS_UNBIASED: &str = "keys without their bias";
/// In a split's kind in the report: its values' bias moved into the output projection's.
pub(super) const VALUES_BIAS_MOVED: &str = "values' bias in the output projection";

/// The split projections' rewrite as the driver runs it ([`super::Pass`]): after attention's,
/// whose verified cores decide which biases may go.
#[derive(Default)]
pub(super) struct QkvSplitPass {
    splits: Vec<QkvSplit>,
}

impl Pass for QkvSplitPass {
    fn rewrite(&self) -> super::Rewrite {
        super::Rewrite::QkvSplit
    }

    fn find(&mut self, finder: &Finder, _: &mut RewriteReport) {
        self.splits = find(finder);
    }

    fn found(&self) -> bool {
        !self.splits.is_empty()
    }

    fn wanted(&self) -> Vec<&str> {
        self.splits.iter().flat_map(QkvSplit::wanted).collect()
    }

    fn apply(&mut self, edit: &mut Edit, report: &mut RewriteReport) {
        let this = super::Rewrite::QkvSplit;
        {
            // The rewrites before add names to the graph, never nodes: the structure is the same.
            let finder = Finder::new(edit.g);
            for s in &mut self.splits {
                s.meet(&finder, &edit.verified);
            }
        }
        for s in &self.splits {
            if edit.taken(&s.nodes) {
                report.left_as_exported(this, "taken by an earlier rewrite");
                continue;
            }
            let Some(r) = s.rewrite(edit.g, edit.types, &edit.removed) else {
                report.left_as_exported(
                    this,
                    "its weights or the inferred type of its projection do not fit",
                );
                continue;
            };
            edit.replace(&s.nodes, s.anchor, r.nodes, r.tensors);
            for (i, node) in r.replaced {
                edit.replace(&[i], i, vec![node], Vec::new());
            }
            let kind = match (r.keys_unbiased, r.values_bias_moved) {
                (true, true) => format!("{KEYS_UNBIASED}, {VALUES_BIAS_MOVED}"),
                (true, false) => KEYS_UNBIASED.to_string(),
                (false, true) => VALUES_BIAS_MOVED.to_string(),
                (false, false) => "biases where they were".to_string(),
            };
            report.done(this, kind);
        }
    }
}
