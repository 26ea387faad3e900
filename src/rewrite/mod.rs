//! The load-time graph rewrites: what the library changes in a model's graph, once, when it
//! loads it, before ONNX Runtime optimises it and the weights are shared. Each is switched by its
//! [`Rewrite`] ([`crate::SessionOptions::rewrites`]); in the order they run:
//!
//! | rewrite | file | where |
//! |---|---|---|
//! | `attention`: attention cores into `MultiHeadAttention` | [`attention`] (find, verify), [`emit`] (write) | CPU, CUDA, WebGPU |
//! | `values-after-attention`: a core's values projected after the kernel | [`values`] | with a fused core |
//! | `int8-scores`: a core's scores in int8 | [`emit`] | CPU with VNNI, where the model asks |
//! | `channel-means`: means over channels as matrix products | [`channel_means`] | CPU |
//! | `qkv-split`: joint projections split by their weights | [`qkv_split`] | CPU |
//! | `depthwise-branches`: parallel depthwise convolutions merged | [`branches`] | CPU |
//!
//! Around them: the graph as the rewrites read and write it ([`graph`], on the wire format of
//! [`crate::onnx::wire`]), what ONNX Runtime infers of its tensors ([`probe`], [`types`]), values
//! computed from shapes ([`eval`]), the report ([`report`]), and the driver ([`fuse_with`]) that
//! runs each rewrite's [`Pass`] in order.
//!
//! Every rewrite finds its pattern by structure, never by node names, verifies it against the
//! types ONNX Runtime infers, and only then writes: a rewrite mutates nothing it has not
//! verified, and one that does not fit leaves the graph exactly as exported, counted with its
//! reason in the report `sam2 info` prints. Each is held to the graph as written by the
//! differential check of [`corpus`] and the fuzz target `rewrites`.
//!
//! The attention rewrite. Exporters write scaled dot-product attention as separate operators,
//!
//! ```text
//!   scores = MatMul(q [· c₁], Transpose(k) [· c₂]) [· c₃ | / c₃]     [..., S, L]
//!   out    = MatMul(Softmax(scores, axis = -1), v)                  [..., S, Hv]
//! ```
//!
//! so ONNX Runtime computes and stores the whole score matrix: for SAM2's memory attention that
//! is 4096 × 28,736 floats (470 MB) per layer, written once and read twice. The CPU kernel of
//! `MultiHeadAttention` (float32, without mask, bias or past state) is a flash-attention kernel:
//! it walks the keys in blocks sized to the L2 cache with a running softmax, and never holds the
//! score matrix (ONNX Runtime's `contrib_ops/cpu/bert/multihead_attention.cc`).
//!
//! The rewrite keeps everything around the core as exported: the projections, the head split,
//! the rotary embedding, the head merge. Only the core is replaced: `q`, `k` and `v` (rank r ≥ 3,
//! batch dimensions `[b…]`, typically batch × heads) are reshaped to `[∏b, S, H]`, fed to
//! `MultiHeadAttention` with one head per batch entry (so no transpose is added: the kernel's
//! batch × heads loop is the same) and the scales folded into its `scale` (those known only at
//! run time, such as torch's `sqrt(1 / sqrt(Shape(q)[-1]))` after a reshape to a computed shape,
//! multiply the queries instead), and the result reshaped back to `[b…, S, Hv]`. Where shapes
//! are known only at run time the reshapes are computed from them, and batch dimensions not known
//! to be equal are broadcast first as MatMul broadcasts them. The arithmetic is the same up to
//! float rounding.
//!
//! Verified before anything changes: every intermediate tensor is read by the next operator alone
//! (an extra reader of the scores keeps the pattern as exported), the scales are constant
//! scalars, the softmax is over the last axis, and the types and shapes that ONNX Runtime infers
//! for `q`, `k` and `v` (a probe session of the model, with those tensors as extra outputs and
//! basic optimisations) agree: all float32 or all float16 (an fp16 variant's graph, whose scale is
//! computed in float32 and cast), equal rank and batch dimensions, equal and static head sizes.

mod attention;
mod branches;
#[cfg(any(test, feature = "test-support"))]
pub(crate) mod build;
mod channel_means;
#[cfg(any(test, feature = "test-support"))]
pub(crate) mod corpus;
mod emit;
mod eval;
mod probe;
mod qkv_split;
mod report;
mod switches;
#[cfg(test)]
mod tests;
mod types;
mod values;

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::onnx::graph::{self, Attr, Graph, NewNode, NewTensor, TensorValues};
use attention::*;
pub(crate) use emit::Scores;
use emit::*;
pub(crate) use probe::ort_probe;
pub use report::{RewriteOutcome, RewriteReport};
pub use switches::{Rewrite, Rewrites};
pub(crate) use types::{Dim, Elem, TensorType};
use values::{Projected, Projection};

/// One load-time rewrite as the driver runs it: it finds its pattern by structure in the graph
/// as exported, names the tensors whose types ONNX Runtime must infer to verify what it found,
/// then verifies each find against those types and writes only what passed. What it finds and
/// leaves goes into its entry of the report with the reason. Adding a rewrite is one more
/// implementation and one more entry in [`passes`].
trait Pass {
    /// Its switch, and its entry in the report.
    fn rewrite(&self) -> Rewrite;
    /// Finds the pattern; what it cannot use goes into `report` with the reason.
    fn find(&mut self, finder: &Finder, report: &mut RewriteReport);
    /// Whether it found anything to verify.
    fn found(&self) -> bool;
    /// The tensors whose inferred types decide what it found.
    fn wanted(&self) -> Vec<&str>;
    /// Verifies what it found and writes what passed into `edit`.
    fn apply(&mut self, edit: &mut Edit, report: &mut RewriteReport);
}

/// The rewrites' shared work on a graph: what the probe inferred, the nodes removed and those
/// written in their place, the new constants, and what the attention pass verified (the split
/// projections may drop a bias only for a verified core).
struct Edit<'a> {
    g: &'a mut Graph,
    types: &'a HashMap<String, TensorType>,
    removed: HashSet<usize>,
    added: HashMap<usize, Vec<NewNode>>,
    tensors: Vec<NewTensor>,
    /// The attention cores whose structure and types were verified, fused or not (small ones
    /// stay as exported, correctly).
    verified: Vec<Candidate>,
}

impl Edit<'_> {
    /// Whether another rewrite already took one of `nodes`.
    fn taken(&self, nodes: &[usize]) -> bool {
        nodes.iter().any(|n| self.removed.contains(n))
    }

    /// Replaces `nodes` by `new` written at `anchor`, with the constants `tensors`.
    fn replace(
        &mut self,
        nodes: &[usize],
        anchor: usize,
        new: Vec<NewNode>,
        tensors: Vec<NewTensor>,
    ) {
        self.removed.extend(nodes.iter().copied());
        self.added.entry(anchor).or_default().extend(new);
        self.tensors.extend(tensors);
    }
}

/// The rewrites in the order they run, for the switches `on`: attention first (the split
/// projections read what it verified), then the CPU's rewrites where `cpu`. Attention's pass is
/// there even when it is off, to verify the cores the splits meet.
fn passes(min_scores: i64, scores: Scores, cpu: bool, on: Rewrites) -> Vec<Box<dyn Pass>> {
    let mut passes: Vec<Box<dyn Pass>> = vec![Box::new(attention::AttentionPass::new(
        min_scores,
        if on.contains(Rewrite::Int8Scores) {
            scores
        } else {
            Scores::Float
        },
        on,
    ))];
    if cpu {
        let cpu_passes: [Box<dyn Pass>; 3] = [
            Box::new(channel_means::ChannelMeansPass::default()),
            Box::new(qkv_split::QkvSplitPass::default()),
            Box::new(branches::BranchesPass::default()),
        ];
        passes.extend(cpu_passes.into_iter().filter(|p| on.contains(p.rewrite())));
    }
    passes
}

/// Runs the rewrites of [`passes`] on `model`: attention cores into `MultiHeadAttention` and,
/// where `cpu`, channel means into matrix products ([`channel_means`]), split joint projections
/// into three ([`qkv_split`]) and sums of depthwise convolution branches into one ([`branches`]).
/// `probe` gets a copy of the model with extra outputs and returns the types ONNX Runtime infers
/// for its outputs. Returns the rewritten model (`None` when nothing changed) and the report.
pub(crate) fn fuse_with(
    model: &[u8],
    min_scores: i64,
    scores: Scores,
    cpu: bool,
    on: Rewrites,
    probe: impl FnOnce(&[u8]) -> Result<HashMap<String, TensorType>, String>,
) -> Result<(Option<Vec<u8>>, RewriteReport), String> {
    let mut g = Graph::parse(model)?;
    if g.external_data {
        return Ok((
            None,
            RewriteReport::not_tried("weights in external files", on),
        ));
    }
    let mut report = RewriteReport::new(on);
    let mut passes = passes(min_scores, scores, cpu, on);
    {
        let finder = Finder::new(&g);
        for p in &mut passes {
            p.find(&finder, &mut report);
        }
    }
    if !passes.iter().any(|p| p.found()) {
        return Ok((None, report));
    }
    let wanted: Vec<&str> = passes.iter().flat_map(|p| p.wanted()).collect();
    // The branches' rewrite needs no inferred type: no probe session when it is all there is.
    let types = if wanted.is_empty() {
        HashMap::new()
    } else {
        probe(&g.with_outputs(model, &wanted)?)?
    };
    let mut edit = Edit {
        g: &mut g,
        types: &types,
        removed: HashSet::new(),
        added: HashMap::new(),
        tensors: Vec::new(),
        verified: Vec::new(),
    };
    for p in &mut passes {
        p.apply(&mut edit, &mut report);
    }
    let Edit {
        mut removed,
        added,
        tensors,
        ..
    } = edit;
    if removed.is_empty() {
        return Ok((None, report));
    }
    remove_dead(&g, &mut removed, added.values().flatten());
    let rewritten = g.write(model, &removed, &added, &tensors)?;
    Ok((Some(rewritten), report))
}

/// Adds to `removed` the nodes whose outputs only removed nodes read (the scale computations of
/// the fused subgraphs; `added`: the new nodes, whose reads count), transitively. Nodes the
/// export had left unread stay.
fn remove_dead<'a>(
    g: &Graph,
    removed: &mut HashSet<usize>,
    added: impl Iterator<Item = &'a NewNode> + Clone,
) {
    let before = g.readers();
    loop {
        let mut readers: HashMap<&str, usize> = HashMap::new();
        for n in added.clone() {
            for x in &n.inputs {
                *readers.entry(x.as_str()).or_default() += 1;
            }
        }
        for (i, n) in g.nodes.iter().enumerate() {
            if removed.contains(&i) {
                continue;
            }
            for x in &n.inputs {
                *readers.entry(x.as_str()).or_default() += 1;
            }
            for (_, a) in &n.attrs {
                if let Attr::Graphs(names) = a {
                    for x in names {
                        *readers.entry(x.as_str()).or_default() += 1;
                    }
                }
            }
        }
        let dead: Vec<usize> = (0..g.nodes.len())
            .filter(|i| !removed.contains(i))
            .filter(|&i| {
                let outs = &g.nodes[i].outputs;
                outs.iter()
                    .any(|o| before.get(o.as_str()).is_some_and(|&n| n > 0))
                    && outs
                        .iter()
                        .all(|o| !g.outputs.contains(o) && !readers.contains_key(o.as_str()))
            })
            .collect();
        if dead.is_empty() {
            return;
        }
        removed.extend(dead);
    }
}

/// Fewest scores per head (queries × keys, when both are known at load time) for which the
/// fused kernel is used. Below, the score matrix is small enough to stay in cache and the batched
/// MatMuls ONNX Runtime runs as exported are as fast (Hiera's windowed attention: 1024 windows of
/// 64 × 64 measured 1.09× slower fused, on a heavily loaded 2-core machine); memory attention's
/// 4096 × 28,736 and Hiera's global 4096 × 4096 are well above.
pub(crate) const MIN_SCORES: i64 = 1 << 20;

/// Whether this CPU's int8 matrix kernels sum exactly, so that a model asking for int8 attention
/// scores gets them ([`crate::platform`] tells; `Err` says why not).
pub fn int8_scores_available() -> Result<(), &'static str> {
    crate::platform::int8_dot_products_exact()
}

/// [`fuse_with`] with ONNX Runtime's probe and [`MIN_SCORES`].
pub(crate) fn fuse(
    model: &[u8],
    scores: Scores,
    cpu: bool,
    on: Rewrites,
) -> Result<(Option<Vec<u8>>, RewriteReport), String> {
    fuse_with(model, MIN_SCORES, scores, cpu, on, ort_probe)
}
