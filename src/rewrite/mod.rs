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
//! [`crate::onnx_split`]), what ONNX Runtime infers of its tensors ([`probe`], [`types`]), values
//! computed from shapes ([`eval`]), the report ([`report`]) and the driver ([`fuse_with`]).
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
mod graph;
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

use attention::*;
pub(crate) use emit::Scores;
use emit::*;
use graph::{Attr, Graph, NewNode, NewTensor, TensorValues};
pub(crate) use probe::ort_probe;
pub use report::AttentionFusion;
pub use switches::{Rewrite, Rewrites};
pub(crate) use types::{Dim, Elem, TensorType};
use values::{Projected, Projection};

/// Rewrites `model`'s attention cores into `MultiHeadAttention` and, where `cpu`, its channel
/// means into matrix products ([`channel_means`]), its split joint projections into three
/// ([`qkv_split`]) and its sums of depthwise convolution branches into one ([`branches`]).
/// `probe` gets a copy of the model with extra outputs and returns the types ONNX Runtime infers
/// for its outputs. Returns the rewritten model (`None` when nothing changed) and the report.
pub(crate) fn fuse_with(
    model: &[u8],
    min_scores: i64,
    scores: Scores,
    cpu: bool,
    on: Rewrites,
    probe: impl FnOnce(&[u8]) -> Result<HashMap<String, TensorType>, String>,
) -> Result<(Option<Vec<u8>>, AttentionFusion), String> {
    let off = on.complement().list();
    let mut g = Graph::parse(model)?;
    if g.external_data {
        let mut report = AttentionFusion::not_tried("weights in external files");
        report.off = off;
        return Ok((None, report));
    }
    let scores = if on.contains(Rewrite::Int8Scores) {
        scores
    } else {
        Scores::Float
    };
    let mut report = Tally {
        off,
        ..Tally::default()
    };
    let (candidates, mut splits, branches) = {
        let finder = Finder::new(&g);
        let mut candidates: Vec<Candidate> = (0..g.nodes.len())
            .filter_map(|s| finder.at_softmax(s))
            .filter_map(|found| found.map_err(|why| report.left(why)).ok())
            .collect();
        if !on.contains(Rewrite::ValuesAfterAttention) {
            for c in &mut candidates {
                c.projection = None;
            }
        }
        let splits = if cpu && on.contains(Rewrite::QkvSplit) {
            qkv_split::find(&finder)
        } else {
            Vec::new()
        };
        let branches = if cpu && on.contains(Rewrite::DepthwiseBranches) {
            branches::find(&finder)
        } else {
            Vec::new()
        };
        (candidates, splits, branches)
    };
    let means = if cpu && on.contains(Rewrite::ChannelMeans) {
        channel_means::find(&g)
    } else {
        Vec::new()
    };
    if candidates.is_empty() && means.is_empty() && splits.is_empty() && branches.is_empty() {
        return Ok((None, report.finish()));
    }
    let mut wanted: Vec<&str> = Vec::new();
    for c in &candidates {
        wanted.extend([c.q.as_str(), c.kt.as_str(), c.v.as_str()]);
        wanted.extend(c.shape_reads.iter().map(String::as_str));
        wanted.extend(c.factors.iter().map(|(f, _)| f.as_str()));
        if let Some(p) = &c.projection {
            wanted.extend(p.wanted());
        }
    }
    wanted.extend(means.iter().map(|m| m.wanted()));
    wanted.extend(splits.iter().flat_map(|s| s.wanted()));
    // The branches' rewrite needs no inferred type: no probe session when it is all there is.
    let types = if wanted.is_empty() {
        HashMap::new()
    } else {
        probe(&g.with_outputs(model, &wanted)?)?
    };

    let mut removed = HashSet::new();
    let mut added: HashMap<usize, Vec<NewNode>> = HashMap::new();
    let mut tensors = Vec::new();
    // The cores whose structure and types were verified, fused or not (small ones stay as
    // exported, correctly): the only ones whose arithmetic lets a split drop the keys' bias or
    // move the values'. A candidate that failed verification (a per-key factor on its scores, a
    // softmax over another axis) keeps both biases where they were.
    let mut verified = Vec::new();
    for c in &candidates {
        let v = match verify(&g, c, &types) {
            Ok(v) => v,
            Err(why) => {
                report.left(why);
                continue;
            }
        };
        verified.push(c.clone());
        if !on.contains(Rewrite::Attention) {
            report.left("attention switched off".into());
            continue;
        }
        if let (Some(s), Some(l)) = (v.s.value(), v.l.value()) {
            if s.saturating_mul(l) < min_scores {
                report.left(format!("{s} × {l} scores per head (small)"));
                continue;
            }
        }
        let mut e = Emitter {
            g: &mut g,
            scores,
            nodes: Vec::new(),
            tensors: &mut tensors,
        };
        let result = e.attention(c, &v);
        let nodes = std::mem::take(&mut e.nodes);
        match result {
            Ok(()) => {
                removed.extend(c.removed.iter().copied());
                added.entry(c.anchor).or_default().extend(nodes);
                report.fused(v.kind(scores));
            }
            Err(why) => report.left(why),
        }
    }
    for m in &means {
        if let Some((nodes, constants)) = m.rewrite(&mut g, &types) {
            removed.insert(m.node);
            added.entry(m.node).or_default().extend(nodes);
            tensors.extend(constants);
            report.channel_means += 1;
        }
    }
    {
        // The rewrites above add names to the graph, never nodes: the structure is the same.
        let finder = Finder::new(&g);
        for s in &mut splits {
            s.meet(&finder, &verified);
        }
    }
    for s in &splits {
        if s.nodes.iter().any(|n| removed.contains(n)) {
            continue;
        }
        if let Some(r) = s.rewrite(&mut g, &types, &removed) {
            removed.extend(s.nodes.iter().copied());
            added.entry(s.anchor).or_default().extend(r.nodes);
            for (i, node) in r.replaced {
                removed.insert(i);
                added.entry(i).or_default().push(node);
            }
            tensors.extend(r.tensors);
            report.qkv_splits += 1;
            report.keys_unbiased += usize::from(r.keys_unbiased);
            report.values_biases_moved += usize::from(r.values_bias_moved);
        }
    }
    for b in &branches {
        if b.nodes.iter().any(|n| removed.contains(n)) {
            continue;
        }
        if let Some((nodes, constants)) = b.rewrite(&mut g) {
            removed.extend(b.nodes.iter().copied());
            added.entry(b.anchor).or_default().extend(nodes);
            tensors.extend(constants);
            report.branches_merged += 1;
        }
    }
    if removed.is_empty() {
        return Ok((None, report.finish()));
    }
    remove_dead(&g, &mut removed, added.values().flatten());
    let rewritten = g.write(model, &removed, &added, &tensors)?;
    Ok((Some(rewritten), report.finish()))
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

/// Counts per kind and per reason, in the order first seen.
#[derive(Default)]
struct Tally {
    fused: Vec<(String, usize)>,
    left: Vec<(String, usize)>,
    channel_means: usize,
    qkv_splits: usize,
    keys_unbiased: usize,
    values_biases_moved: usize,
    branches_merged: usize,
    off: Vec<Rewrite>,
}

impl Tally {
    fn bump(list: &mut Vec<(String, usize)>, what: String) {
        match list.iter_mut().find(|(w, _)| *w == what) {
            Some((_, n)) => *n += 1,
            None => list.push((what, 1)),
        }
    }

    fn fused(&mut self, kind: String) {
        Self::bump(&mut self.fused, kind);
    }

    fn left(&mut self, why: String) {
        Self::bump(&mut self.left, why);
    }

    fn finish(self) -> AttentionFusion {
        AttentionFusion {
            fused: self.fused,
            left: self.left,
            not_tried: None,
            note: None,
            channel_means: self.channel_means,
            qkv_splits: self.qkv_splits,
            keys_unbiased: self.keys_unbiased,
            values_biases_moved: self.values_biases_moved,
            branches_merged: self.branches_merged,
            off: self.off,
        }
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
) -> Result<(Option<Vec<u8>>, AttentionFusion), String> {
    fuse_with(model, MIN_SCORES, scores, cpu, on, ort_probe)
}
