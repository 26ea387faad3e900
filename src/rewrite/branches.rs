//! Parallel depthwise convolutions of one input merged into one, a rewrite the library makes when
//! it loads a model for the CPU.
//!
//! RepViT's token mixer (EdgeTAM's image encoder, 23 of them in RepViT-M1) is trained as three
//! branches of one input that are summed: a 3×3 depthwise convolution, a 1×1 depthwise
//! convolution and the input itself. PyTorch exports it as written, unless the model was
//! reparameterised first (which EdgeTAM's export does not do):
//!
//! ```text
//!   a = Conv(x, W₃ [C, 1, 3, 3], b₃, group C, pads 1)
//!   b = Conv(x, W₁ [C, 1, 1, 1], b₁, group C)
//!   y = Add(Add(a, b), x)
//! ```
//!
//! ONNX Runtime then reads and writes the whole feature map four more times than one convolution
//! would. Each branch is linear in `x` and centred on the same pixel, so the sum is one depthwise
//! convolution by the sum of the kernels, the smaller ones padded with zeros to the largest and
//! the input counted as a 1 at the centre:
//!
//! ```text
//!   y = Conv(x, W₃ + Pad(W₁, 1) + Pad(1, 1), b₃ + b₁, group C, pads 1)
//! ```
//!
//! The new weight and bias are computed in the graph from the exported initializers by `Pad` and
//! `Add` nodes, which ONNX Runtime's constant folding computes once when the library optimises
//! the model. EdgeTAM's image encoder went from 249 to 226 ms on 2 AMD EPYC cores (the module
//! alone, in ONNX Runtime's Python API, with the weights merged beforehand); its outputs
//! differed from the export's by at most 7.5e-8. The arithmetic is the same up to float
//! rounding.
//!
//! Recognised structurally: a tree of two-input `Add`s, each inner one read by the next alone,
//! whose leaves are the input `x` (any number of times) and at least one `Conv` of `x` read by the
//! tree alone, each a depthwise convolution of one output channel per input channel (a float32
//! weight `[C, 1, k, k]` with `k` odd, `group` = C, an optional float32 bias `[C]`), stride and
//! dilation 1, and padded by `(k − 1) / 2` on every side so that its output has the shape of its
//! input (any other attribute, `auto_pad` included, leaves it as exported). Opset 11 or later
//! (`Pad` takes its pads as an input). Done on the CPU only, where it was measured.

use std::collections::HashSet;

use super::graph::{Attr, Graph, NewNode, NewTensor, TensorValues};
use super::{Edit, Finder, Pass, Rewrite, RewriteReport};

/// Most `Add`s in one tree: RepViT's has 2; a long chain is not this pattern.
const MAX_ADDS: usize = 8;

/// A depthwise convolution that keeps its input's shape.
#[derive(Debug, Clone)]
struct Depthwise {
    x: String,
    weight: String,
    bias: Option<String>,
    channels: i64,
    kernel: i64,
}

/// A sum of depthwise convolutions of one input and of the input itself.
#[derive(Debug, Clone)]
pub(super) struct Branches {
    /// The nodes it replaces: the convolutions and the `Add`s.
    pub nodes: Vec<usize>,
    /// Where the new nodes go: the last `Add`, which writes the sum.
    pub anchor: usize,
    convs: Vec<Depthwise>,
    /// How many times the sum adds the input itself.
    identities: usize,
    output: String,
}

/// `Conv` node `i` when it is such a convolution.
fn depthwise(g: &Graph, i: usize) -> Option<Depthwise> {
    let n = &g.nodes[i];
    if !n.is("Conv") || !(2..=3).contains(&n.inputs.len()) || n.inputs[0].is_empty() {
        return None;
    }
    let dims = g.float_initializer(&n.inputs[1], &[None, Some(1), None, None])?;
    let (channels, kernel) = (dims[0], dims[2]);
    if dims[3] != kernel || kernel % 2 == 0 || channels < 1 {
        return None;
    }
    let bias = match n.inputs.get(2).filter(|b| !b.is_empty()) {
        Some(b) => {
            g.float_initializer(b, &[Some(channels)])?;
            Some(b.clone())
        }
        None => None,
    };
    let pad = (kernel - 1) / 2;
    for (name, a) in &n.attrs {
        let ok = match (name.as_str(), a) {
            ("kernel_shape", Attr::Ints(v)) => v[..] == [kernel, kernel],
            ("pads", Attr::Ints(v)) => v[..] == [pad; 4],
            ("strides" | "dilations", Attr::Ints(v)) => v[..] == [1, 1],
            ("group", Attr::Int(group)) => *group == channels,
            _ => false,
        };
        if !ok {
            return None;
        }
    }
    // Without `pads` a kernel wider than 1 shrinks the output; without `group` it is 1.
    if (pad > 0 && n.attr("pads").is_none()) || (channels > 1 && n.attr("group").is_none()) {
        return None;
    }
    Some(Depthwise {
        x: n.inputs[0].clone(),
        weight: n.inputs[1].clone(),
        bias,
        channels,
        kernel,
    })
}

/// Every sum of depthwise convolutions of one input and of the input itself, the largest first
/// (a tree's inner sums are not found again on their own).
pub(super) fn find(f: &Finder) -> Vec<Branches> {
    let g = f.g;
    if g.opset < 11 {
        return Vec::new();
    }
    let mut claimed = HashSet::new();
    let mut found = Vec::new();
    for a in (0..g.nodes.len()).rev() {
        if claimed.contains(&a) {
            continue;
        }
        if let Some(b) = at_add(f, a, &claimed) {
            claimed.extend(b.nodes.iter().copied());
            found.push(b);
        }
    }
    found
}

/// A two-input `Add`.
fn add2(g: &Graph, i: usize) -> bool {
    let n = &g.nodes[i];
    n.is("Add") && n.inputs.len() == 2 && n.outputs.len() == 1
}

fn at_add(f: &Finder, top: usize, claimed: &HashSet<usize>) -> Option<Branches> {
    let g = f.g;
    if !add2(g, top) {
        return None;
    }
    // The tree's leaves, each with the node producing it for the tree alone (if one does): what
    // no inner `Add` read by the tree alone produces.
    let mut adds = vec![top];
    let mut leaves = Vec::new();
    let mut pending: Vec<&str> = g.nodes[top].inputs.iter().map(String::as_str).collect();
    while let Some(t) = pending.pop() {
        match f.sole_producer(t) {
            Some(p) if add2(g, p) && !claimed.contains(&p) => {
                adds.push(p);
                if adds.len() > MAX_ADDS {
                    return None;
                }
                pending.extend(g.nodes[p].inputs.iter().map(String::as_str));
            }
            producer => leaves.push((t, producer)),
        }
    }
    let mut nodes = adds;
    let mut convs: Vec<Depthwise> = Vec::new();
    let mut others = Vec::new();
    for (t, producer) in leaves {
        let conv = producer
            .filter(|c| !claimed.contains(c))
            .and_then(|c| Some((c, depthwise(g, c)?)));
        match conv {
            Some((c, d)) => {
                nodes.push(c);
                convs.push(d);
            }
            None => others.push(t),
        }
    }
    let first = convs.first()?;
    if convs
        .iter()
        .any(|d| d.x != first.x || d.channels != first.channels)
        || others.iter().any(|t| *t != first.x)
    {
        return None;
    }
    Some(Branches {
        nodes,
        anchor: top,
        identities: others.len(),
        convs,
        output: g.nodes[top].outputs[0].clone(),
    })
}

impl Branches {
    /// The nodes that compute the merged weight and bias from the exported ones and the merged
    /// convolution, and their constants.
    pub(super) fn rewrite(&self, g: &mut Graph) -> Option<(Vec<NewNode>, Vec<NewTensor>)> {
        let first = self.convs.first()?;
        let channels = first.channels;
        let kernel = self.convs.iter().map(|d| d.kernel).max().unwrap_or(1);
        let pad = (kernel - 1) / 2;
        let stem = "sam2_branches_node";
        let mut nodes = Vec::new();
        let mut tensors = Vec::new();
        let mut weights = Vec::new();
        for d in &self.convs {
            if d.kernel == kernel {
                weights.push(d.weight.clone());
                continue;
            }
            let p = (kernel - d.kernel) / 2;
            let pads = NewTensor::vector(
                g,
                "sam2_branches_pads",
                TensorValues::Int64(vec![0, 0, p, p, 0, 0, p, p]),
            );
            let padded = g.fresh("sam2_branches_padded");
            nodes.push(NewNode::plain(
                g,
                stem,
                "Pad",
                vec![d.weight.clone(), pads.name.clone()],
                padded.clone(),
            ));
            tensors.push(pads);
            weights.push(padded);
        }
        if self.identities > 0 {
            // The input, `identities` times: that many at the centre of each channel's kernel.
            let area = (kernel * kernel) as usize;
            let mut values = vec![0.0f32; channels as usize * area];
            for c in 0..channels as usize {
                values[c * area + area / 2] = self.identities as f32;
            }
            let identity = NewTensor {
                name: g.fresh("sam2_branches_identity"),
                dims: vec![channels, 1, kernel, kernel],
                values: TensorValues::Float(values),
            };
            weights.push(identity.name.clone());
            tensors.push(identity);
        }
        let sum = |g: &mut Graph, nodes: &mut Vec<NewNode>, terms: Vec<String>| {
            terms.into_iter().reduce(|acc, t| {
                let out = g.fresh("sam2_branches_sum");
                nodes.push(NewNode::plain(g, stem, "Add", vec![acc, t], out.clone()));
                out
            })
        };
        let weight = sum(g, &mut nodes, weights)?;
        let biases = self.convs.iter().filter_map(|d| d.bias.clone()).collect();
        let mut inputs = vec![first.x.clone(), weight];
        inputs.extend(sum(g, &mut nodes, biases));
        nodes.push(NewNode {
            name: g.fresh(stem),
            op_type: "Conv",
            domain: "",
            inputs,
            outputs: vec![self.output.clone()],
            attrs: vec![
                ("kernel_shape", Attr::Ints(vec![kernel, kernel])),
                ("pads", Attr::Ints(vec![pad; 4])),
                ("strides", Attr::Ints(vec![1, 1])),
                ("dilations", Attr::Ints(vec![1, 1])),
                ("group", Attr::Int(channels)),
            ],
        });
        Some((nodes, tensors))
    }
}

/// The depthwise branches' rewrite as the driver runs it ([`super::Pass`]); it needs no
/// inferred type.
#[derive(Default)]
pub(super) struct BranchesPass {
    found: Vec<Branches>,
}

impl Pass for BranchesPass {
    fn rewrite(&self) -> Rewrite {
        Rewrite::DepthwiseBranches
    }

    fn find(&mut self, finder: &Finder, _: &mut RewriteReport) {
        self.found = find(finder);
    }

    fn found(&self) -> bool {
        !self.found.is_empty()
    }

    fn wanted(&self) -> Vec<&str> {
        Vec::new()
    }

    fn apply(&mut self, edit: &mut Edit, report: &mut RewriteReport) {
        for b in &self.found {
            if edit.taken(&b.nodes) {
                report.left_as_exported(Rewrite::DepthwiseBranches, "taken by an earlier rewrite");
                continue;
            }
            match b.rewrite(edit.g) {
                Some((nodes, constants)) => {
                    edit.replace(&b.nodes, b.anchor, nodes, constants);
                    report.done(
                        Rewrite::DepthwiseBranches,
                        format!("{} depthwise convolutions", b.convs.len()),
                    );
                }
                None => report.left_as_exported(Rewrite::DepthwiseBranches, "no branch to merge"),
            }
        }
    }
}
