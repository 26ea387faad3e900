//! Fused attention: the attention subgraphs of an export rewritten into ONNX Runtime's
//! `com.microsoft.MultiHeadAttention`, once, when the library loads a model.
//!
//! Exporters write scaled dot-product attention as separate operators,
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
//! One rewrite goes past the core: values that are a narrower tensor's projection by the model's
//! weights are projected after the kernel instead ([`values`]). For the CPU the same pass makes
//! three more, each measured there: channel means as matrix products ([`channel_means`]),
//! joint query-key-value projections split by their weights ([`qkv_split`]), and parallel
//! depthwise convolutions of one input merged into one ([`branches`]).
//!
//! Recognised structurally, never by node names, and verified before anything changes: every
//! intermediate tensor is read by the next operator alone (an extra reader of the scores keeps the
//! pattern as exported), the scales are constant scalars, the softmax is over the last axis, and
//! the types and shapes that ONNX Runtime infers for `q`, `k` and `v` (a probe session of the
//! model, with those tensors as extra outputs and basic optimisations) agree: all float32 or all
//! float16 (an fp16 variant's graph, whose scale is computed in float32 and cast), equal rank and
//! batch dimensions, equal and static head sizes. Anything else is left exactly as exported and
//! counted, with its reason, in the [`AttentionFusion`] report that `sam2 info` prints.

mod branches;
#[cfg(any(test, feature = "test-support"))]
pub(crate) mod build;
mod channel_means;
#[cfg(any(test, feature = "test-support"))]
pub(crate) mod corpus;
mod eval;
mod graph;
mod qkv_split;
mod switches;
#[cfg(test)]
mod tests;
mod values;

use std::collections::{HashMap, HashSet};
use std::fmt;

use graph::{Attr, Graph, NewNode, NewTensor, TensorValues};
pub use switches::{Rewrite, Rewrites};
use values::{Projected, Projection};

/// What the library did to a model's attention when it loaded it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttentionFusion {
    /// Subgraphs rewritten into fused attention: (kind, count). A kind is the shape of the
    /// attention, `[batch dims] S queries × L keys, head dim H`.
    pub fused: Vec<(String, usize)>,
    /// Attention-like subgraphs (a softmax of a MatMul) left as exported: (reason, count).
    pub left: Vec<(String, usize)>,
    /// Why nothing was tried at all (optimisation off, a provider without the fused kernel,
    /// weights in external files), if so.
    pub not_tried: Option<String>,
    /// A remark on how the cores were fused (int8 scores asked for and not used, and why).
    pub note: Option<String>,
    /// Means over the channels of an NCHW tensor (the two of each channels-first layer norm)
    /// computed as matrix products, on the CPU (`src/attention/channel_means.rs`).
    pub channel_means: usize,
    /// Joint query, key and value projections split by their weights instead of their output,
    /// on the CPU (`src/attention/qkv_split.rs`).
    pub qkv_splits: usize,
    /// Of those, the keys' products left without their bias (an attention core's softmax
    /// cancels it).
    pub keys_unbiased: usize,
    /// Of those, the values' bias moved into the bias of the core's output projection.
    pub values_biases_moved: usize,
    /// Sums of parallel depthwise convolutions of one input and of the input itself (RepViT's
    /// token mixers, in EdgeTAM's image encoder) merged into one convolution each, on the CPU
    /// (`src/attention/branches.rs`).
    pub branches_merged: usize,
    /// The rewrites switched off for this model ([`crate::SessionOptions::rewrites`]).
    pub off: Vec<Rewrite>,
}

impl AttentionFusion {
    /// Number of subgraphs fused.
    pub fn fused_count(&self) -> usize {
        self.fused.iter().map(|(_, n)| n).sum()
    }

    /// How many times each rewrite that is on ran, in the order they run (0: found nothing to
    /// rewrite); the rewrites switched off are in [`AttentionFusion::off`].
    pub fn counts(&self) -> Vec<(Rewrite, usize)> {
        let values_after = self
            .fused
            .iter()
            .filter(|(kind, _)| kind.contains("values projected after"))
            .map(|(_, n)| n)
            .sum();
        let int8 = self
            .fused
            .iter()
            .filter(|(kind, _)| kind.contains("int8 scores"))
            .map(|(_, n)| n)
            .sum();
        Rewrite::ALL
            .into_iter()
            .filter(|r| !self.off.contains(r))
            .map(|r| {
                let n = match r {
                    Rewrite::Attention => self.fused_count(),
                    Rewrite::ValuesAfterAttention => values_after,
                    Rewrite::Int8Scores => int8,
                    Rewrite::ChannelMeans => self.channel_means,
                    Rewrite::QkvSplit => self.qkv_splits,
                    Rewrite::DepthwiseBranches => self.branches_merged,
                };
                (r, n)
            })
            .collect()
    }

    pub(crate) fn not_tried(why: impl Into<String>) -> Self {
        AttentionFusion {
            not_tried: Some(why.into()),
            ..AttentionFusion::default()
        }
    }
}

impl fmt::Display for AttentionFusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let off = if self.off.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = self.off.iter().map(|r| r.name()).collect();
            format!("; switched off: {}", names.join(", "))
        };
        if let Some(why) = &self.not_tried {
            return write!(f, "as exported ({why}){off}");
        }
        // The CPU's other rewrites, after what was fused.
        let mut others = match self.channel_means {
            0 => String::new(),
            1 => "; 1 channel mean as a matrix product".to_string(),
            n => format!("; {n} channel means as matrix products"),
        };
        match self.qkv_splits {
            0 => {}
            1 => others.push_str("; 1 query-key-value projection split by its weights"),
            n => others.push_str(&format!(
                "; {n} query-key-value projections split by their weights"
            )),
        }
        if self.keys_unbiased > 0 || self.values_biases_moved > 0 {
            others.push_str(&format!(
                " ({} without the keys' bias, {} with the values' bias in the output projection)",
                self.keys_unbiased, self.values_biases_moved
            ));
        }
        match self.branches_merged {
            0 => {}
            1 => others.push_str("; 1 sum of depthwise convolution branches merged into one"),
            n => others.push_str(&format!(
                "; {n} sums of depthwise convolution branches merged into one each"
            )),
        }
        others.push_str(&off);
        if self.fused.is_empty() && self.left.is_empty() {
            return write!(f, "no attention found{others}");
        }
        let list = |items: &[(String, usize)]| {
            items
                .iter()
                .map(|(what, n)| format!("{n} × {what}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        write!(f, "{} fused", self.fused_count())?;
        if !self.fused.is_empty() {
            write!(f, " ({})", list(&self.fused))?;
        }
        if !self.left.is_empty() {
            let n: usize = self.left.iter().map(|(_, n)| n).sum();
            write!(f, ", {n} left as exported ({})", list(&self.left))?;
        }
        if let Some(note) = &self.note {
            write!(f, "; {note}")?;
        }
        write!(f, "{others}")
    }
}

/// The inferred type of a tensor: its element type, and its dimensions (a static size, or the
/// symbol of a dynamic one; an empty symbol is an unnamed dynamic size).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TensorType {
    pub elem: Elem,
    pub dims: Vec<Dim>,
}

/// Element types, as far as the rewrite cares: the fused op takes float32 and float16 (an fp16
/// variant's graph, `tools/models/make_variant.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem {
    Float32,
    Float16,
    Other,
}

impl TensorType {
    /// Float32 or float16: what the fused op takes.
    pub(crate) fn is_float(&self) -> bool {
        matches!(self.elem, Elem::Float32 | Elem::Float16)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Dim {
    Static(i64),
    Symbol(String),
}

impl Dim {
    fn value(&self) -> Option<i64> {
        match self {
            Dim::Static(v) => Some(*v),
            Dim::Symbol(_) => None,
        }
    }

    /// Whether two dimensions are known to be equal.
    fn same(&self, other: &Dim) -> bool {
        match (self, other) {
            (Dim::Static(a), Dim::Static(b)) => a == b,
            (Dim::Symbol(a), Dim::Symbol(b)) => !a.is_empty() && a == b,
            _ => false,
        }
    }

    /// Whether two dimensions cannot be equal.
    fn differs(&self, other: &Dim) -> bool {
        matches!((self, other), (Dim::Static(a), Dim::Static(b)) if a != b)
    }
}

impl fmt::Display for Dim {
    /// A size, a symbol the model names, or `?`. ONNX's shape inference names the sizes it cannot
    /// tell `unk__N` (ONNX Runtime's quantisation tool writes those into a variant's graph): they
    /// name nothing a user knows, and would keep apart cores the report counts together, so they
    /// print as `?` too. Whether two dimensions are equal still reads the symbol.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(v) => write!(f, "{v}"),
            Dim::Symbol(s) if s.is_empty() || generated_symbol(s) => write!(f, "?"),
            Dim::Symbol(s) => write!(f, "{s}"),
        }
    }
}

/// Whether a dimension's symbol is one ONNX's shape inference made up (`unk__` and digits).
fn generated_symbol(s: &str) -> bool {
    s.strip_prefix("unk__")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Where the keys come from: `Transpose(src, perm)` is the transposed key the scores use, or a
/// tensor that is the transposed key itself.
#[derive(Debug, Clone)]
enum Keys {
    Transposed { src: String, perm: Vec<i64> },
    Plain(String),
}

/// An attention core found in the graph, not yet verified against the inferred shapes.
#[derive(Debug, Clone)]
struct Candidate {
    q: String,
    /// The transposed keys as the scores MatMul reads them, before its scales: `[b…, H, L]`.
    kt: String,
    keys: Keys,
    v: String,
    scale: f64,
    /// Rank of the largest scale constant (a `[1,1,1,1]` constant broadcasts a rank-3 tensor
    /// to rank 4).
    scale_rank: usize,
    /// Scale factors computed in the graph from shapes (torch's exporter writes
    /// `sqrt(1 / sqrt(Shape(q)[-1]))` on each side): (tensor, whether it divides), evaluated once
    /// the shapes are known.
    factors: Vec<(String, bool)>,
    /// The tensors whose shapes those factors read.
    shape_reads: Vec<String>,
    softmax_axis: i64,
    out: String,
    removed: Vec<usize>,
    /// Index of the final MatMul: the new nodes are written there.
    anchor: usize,
    /// The projection that computes the values, when it may move after the kernel.
    projection: Option<Projection>,
}

/// The reason a softmax of a MatMul is not taken as attention, or the candidate.
type Found = Result<Candidate, String>;

struct Finder<'g> {
    g: &'g Graph,
    producer: HashMap<&'g str, usize>,
    readers: HashMap<&'g str, usize>,
    /// For each tensor read exactly once, the node that reads it.
    reader: HashMap<&'g str, usize>,
}

impl<'g> Finder<'g> {
    fn new(g: &'g Graph) -> Self {
        let mut producer = HashMap::new();
        let mut reader = HashMap::new();
        for (i, n) in g.nodes.iter().enumerate() {
            for o in &n.outputs {
                producer.insert(o.as_str(), i);
            }
            for input in &n.inputs {
                reader.insert(input.as_str(), i);
            }
        }
        let readers = g.readers();
        reader.retain(|name, _| readers.get(name) == Some(&1));
        Finder {
            g,
            producer,
            readers,
            reader,
        }
    }

    /// The node producing `t` when `t` is read once (by the pattern) and is not a graph output.
    fn sole_producer(&self, t: &str) -> Option<usize> {
        if self.readers.get(t) != Some(&1) || self.g.outputs.contains(t) {
            return None;
        }
        let i = *self.producer.get(t)?;
        (self.g.nodes[i].outputs.len() == 1).then_some(i)
    }

    /// The node reading `t` when `t` is read once and is not a graph output, and that node has
    /// one output.
    fn sole_reader(&self, t: &str) -> Option<usize> {
        let &i = self.reader.get(t)?;
        (!self.g.outputs.contains(t) && self.g.nodes[i].outputs.len() == 1).then_some(i)
    }

    /// Whether `t` is computed from constants and tensor shapes alone, by operators [`eval`]
    /// knows; `reads` gets the tensors whose shapes it reads.
    fn computable(&self, t: &str, depth: usize, reads: &mut Vec<String>) -> bool {
        if self.g.constants.contains_key(t) {
            return true;
        }
        if depth > 16 || self.g.inputs.contains(t) {
            return false;
        }
        let Some(&i) = self.producer.get(t) else {
            return false;
        };
        let n = &self.g.nodes[i];
        if n.is("Shape") && n.inputs.len() == 1 {
            reads.push(n.inputs[0].clone());
            return true;
        }
        const OPS: [&str; 13] = [
            "Slice",
            "Gather",
            "Cast",
            "Sqrt",
            "Reciprocal",
            "Div",
            "Mul",
            "Add",
            "Sub",
            "Neg",
            "Unsqueeze",
            "Squeeze",
            "Identity",
        ];
        OPS.iter().any(|op| n.is(op))
            && n.outputs.len() == 1
            && n.inputs
                .iter()
                .all(|x| !x.is_empty() && self.computable(x, depth + 1, reads))
    }

    /// The value of a constant scalar tensor, and its rank.
    fn scalar(&self, t: &str) -> Option<(f64, usize)> {
        let c = self.g.constants.get(t)?;
        if ![graph::FLOAT, graph::FLOAT16, 11].contains(&c.data_type) {
            return None;
        }
        c.scalar().map(|v| (v, c.dims.len()))
    }

    /// Follows `t` up through Mul (either side) and Div (by the constant) by constant scalars,
    /// when each step's result is read by the pattern alone. Returns the tensor before them.
    fn unscale(&self, mut t: &'g str, c: &mut Candidate) -> &'g str {
        for _ in 0..3 {
            let Some(i) = self.sole_producer(t) else {
                break;
            };
            let n = &self.g.nodes[i];
            if n.inputs.len() != 2 {
                break;
            }
            let (a, b) = (n.inputs[0].as_str(), n.inputs[1].as_str());
            let step = if n.is("Mul") {
                match (self.scalar(a), self.scalar(b)) {
                    (_, Some((v, r))) => Some((b, v, r, a)),
                    (Some((v, r)), None) => Some((a, v, r, b)),
                    _ => None,
                }
            } else if n.is("Div") {
                self.scalar(b)
                    .filter(|(v, _)| *v != 0.0)
                    .map(|(v, r)| (b, 1.0 / v, r, a))
            } else {
                None
            };
            if let Some((_, factor, rank, rest)) = step {
                c.scale *= factor;
                c.scale_rank = c.scale_rank.max(rank);
                c.removed.push(i);
                t = rest;
                continue;
            }
            // A factor computed from shapes: evaluated after the probe.
            let mut reads = Vec::new();
            let computed = if n.is("Mul") {
                if self.computable(b, 0, &mut reads) {
                    Some((b, false, a))
                } else if self.computable(a, 0, &mut reads) {
                    Some((a, false, b))
                } else {
                    None
                }
            } else if n.is("Div") && self.computable(b, 0, &mut reads) {
                Some((b, true, a))
            } else {
                None
            };
            let Some((factor, divides, rest)) = computed else {
                break;
            };
            c.factors.push((factor.to_string(), divides));
            c.shape_reads.extend(reads);
            c.removed.push(i);
            t = rest;
        }
        t
    }

    /// The attention core around the softmax at node `s`, or why the softmax of a MatMul there is
    /// not one. `None`: not a softmax of a MatMul at all (not attention).
    fn at_softmax(&self, s: usize) -> Option<Found> {
        let sm = &self.g.nodes[s];
        if !sm.is("Softmax") || sm.inputs.len() != 1 || sm.outputs.len() != 1 {
            return None;
        }
        let mut c = Candidate {
            q: String::new(),
            kt: String::new(),
            keys: Keys::Plain(String::new()),
            v: String::new(),
            scale: 1.0,
            scale_rank: 0,
            factors: Vec::new(),
            shape_reads: Vec::new(),
            softmax_axis: match sm.attr("axis") {
                Some(Attr::Int(a)) => *a,
                _ if self.g.opset >= 13 => -1,
                _ => 1,
            },
            out: String::new(),
            removed: vec![s],
            anchor: 0,
            projection: None,
        };
        // Scores: a MatMul, then constant scales.
        let scores = self.unscale(sm.inputs[0].as_str(), &mut c);
        let mm = match self.producer.get(scores) {
            Some(&i) if self.g.nodes[i].is("MatMul") => i,
            _ => return None,
        };
        if self.sole_producer(scores) != Some(mm) {
            return Some(Err("the scores have another reader".into()));
        }
        c.removed.push(mm);
        let qk = &self.g.nodes[mm];
        if qk.inputs.len() != 2 {
            return Some(Err("a MatMul without two inputs".into()));
        }
        c.q = self.unscale(qk.inputs[0].as_str(), &mut c).to_string();
        let kt = self.unscale(qk.inputs[1].as_str(), &mut c);
        c.kt = kt.to_string();
        c.keys = match self.producer.get(kt).map(|&i| (i, &self.g.nodes[i])) {
            Some((i, n)) if n.is("Transpose") && n.inputs.len() == 1 => {
                let Some(Attr::Ints(perm)) = n.attr("perm") else {
                    return Some(Err("a Transpose of the keys without perm".into()));
                };
                if self.sole_producer(kt) == Some(i) {
                    c.removed.push(i);
                }
                Keys::Transposed {
                    src: n.inputs[0].clone(),
                    perm: perm.clone(),
                }
            }
            _ => Keys::Plain(kt.to_string()),
        };
        // Probabilities: read by one MatMul, as its first input.
        let p = sm.outputs[0].as_str();
        let Some(&f) = self.reader.get(p) else {
            return Some(Err("the probabilities have another reader".into()));
        };
        let pv = &self.g.nodes[f];
        if !pv.is("MatMul") || pv.inputs.len() != 2 || pv.inputs[0] != p || pv.outputs.len() != 1 {
            return Some(Err("the probabilities are not multiplied by values".into()));
        }
        if self.g.outputs.contains(p) {
            return Some(Err("the probabilities are a graph output".into()));
        }
        c.v = pv.inputs[1].clone();
        c.projection = self.projection(&c.v);
        c.out = pv.outputs[0].clone();
        c.removed.push(f);
        c.anchor = f;
        if !c.scale.is_finite() || c.scale == 0.0 {
            return Some(Err(format!("scale {} is not usable", c.scale)));
        }
        Some(Ok(c))
    }
}

/// A candidate checked against the inferred types: what the rewrite needs to know.
struct Verified {
    /// The element type of queries, keys and values.
    elem: Elem,
    /// The graph's default opset (the int8 kernel's operators need 13).
    opset: i64,
    /// The scale known at load time (the kernel's `scale`).
    scale: f64,
    /// Scale factors known only at run time (tensor, whether it divides), applied to the queries.
    in_graph: Vec<(String, bool)>,
    rank: usize,
    batch: Vec<Dim>,
    batch_equal: bool,
    s: Dim,
    l: Dim,
    h: Option<i64>,
    hv: Option<i64>,
    /// The values' projection, moved after the kernel.
    projected: Option<Projected>,
}

fn verify(
    g: &Graph,
    c: &Candidate,
    types: &HashMap<String, TensorType>,
) -> Result<Verified, String> {
    let mut scale_rank = c.scale_rank;
    let get = |name: &str, what: &str| {
        types
            .get(name)
            .cloned()
            .ok_or_else(|| format!("no inferred type for the {what}"))
    };
    let (q, kt, mut v) = (
        get(&c.q, "queries")?,
        get(&c.kt, "keys")?,
        get(&c.v, "values")?,
    );
    if !(q.is_float() && kt.elem == q.elem && v.elem == q.elem) {
        return Err("not float32 or float16 throughout".into());
    }
    let r = q.dims.len();
    if r < 3 || kt.dims.len() != r || v.dims.len() != r {
        return Err(format!(
            "ranks {}, {}, {} (3 or more, all equal, are fused)",
            q.dims.len(),
            kt.dims.len(),
            v.dims.len()
        ));
    }
    let mut scale = c.scale;
    let mut in_graph = Vec::new();
    for (factor, divides) in &c.factors {
        match eval::Evaluator::new(g, types).numbers(factor) {
            Some(value) => {
                if !(value.data.len() == 1 && value.dims.iter().all(|&d| d == 1)) {
                    return Err("a scale computed in the graph that is not a scalar".into());
                }
                scale = if *divides {
                    scale / value.data[0]
                } else {
                    scale * value.data[0]
                };
                scale_rank = scale_rank.max(value.dims.len());
            }
            None => {
                // Its value depends on shapes known only at run time: the factor stays in the
                // graph, applied to the queries, if it is one element (its inferred shape says).
                let ty = types
                    .get(factor)
                    .ok_or("no inferred type for a scale computed in the graph")?;
                if !(ty.elem == q.elem && ty.dims.iter().all(|d| d.value() == Some(1))) {
                    return Err("a scale computed in the graph not known to be a scalar".into());
                }
                scale_rank = scale_rank.max(ty.dims.len());
                in_graph.push((factor.clone(), *divides));
            }
        }
    }
    if !scale.is_finite() || scale == 0.0 {
        return Err(format!("scale {scale} is not usable"));
    }
    if scale_rank > r {
        return Err("a scale constant of higher rank than the scores".into());
    }
    if !(c.softmax_axis == -1 || c.softmax_axis == r as i64 - 1) {
        return Err(format!("softmax over axis {} of {r}", c.softmax_axis));
    }
    // The values' projection, when it can follow the kernel; the values' dimensions as followed
    // along the views from it are at least as well known as inferred.
    let projected = match c.projection.as_ref().and_then(|p| values::fit(g, p, types)) {
        Some((p, dims)) if dims.len() == r => {
            for (d, followed) in v.dims.iter_mut().zip(dims) {
                let unnamed = matches!(d, Dim::Symbol(s) if s.is_empty());
                if d.value().is_none() && (followed.value().is_some() || unnamed) {
                    *d = followed;
                }
            }
            Some(p)
        }
        _ => None,
    };
    let batch = q.dims[..r - 2].to_vec();
    // Batch dimensions known to be equal, or else broadcast to a common shape as MatMul does.
    let batch_equal = (0..r - 2).all(|d| q.dims[d].same(&kt.dims[d]) && q.dims[d].same(&v.dims[d]));
    let h = q.dims[r - 1].value().filter(|&h| h > 0);
    let hv = v.dims[r - 1].value().filter(|&h| h > 0);
    if q.dims[r - 1].differs(&kt.dims[r - 2]) {
        return Err("keys and queries of different head sizes".into());
    }
    if (h.is_none() || hv.is_none() || !batch_equal) && g.opset < 15 {
        return Err("shapes known only at run time, before opset 15".into());
    }
    if kt.dims[r - 1].differs(&v.dims[r - 2]) {
        return Err("keys and values of different lengths".into());
    }
    if let Keys::Transposed { perm, .. } = &c.keys {
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        if perm.len() != r || sorted != (0..r as i64).collect::<Vec<_>>() {
            return Err("a key Transpose whose perm does not fit".into());
        }
    }
    Ok(Verified {
        elem: q.elem,
        opset: g.opset,
        scale,
        in_graph,
        rank: r,
        batch,
        batch_equal,
        s: q.dims[r - 2].clone(),
        l: kt.dims[r - 1].clone(),
        h,
        hv,
        projected,
    })
}

impl Verified {
    fn kind(&self, scores: Scores) -> String {
        let batch: Vec<String> = self.batch.iter().map(ToString::to_string).collect();
        let h = self.h.map_or("?".to_string(), |h| h.to_string());
        let values = match &self.projected {
            Some(p) => format!(", values projected after ({} → {})", p.din, p.dout),
            None => String::new(),
        };
        let int8 = if self.int8(scores) {
            ", int8 scores"
        } else {
            ""
        };
        format!(
            "[{}] {} queries × {} keys, head dim {h}{values}{int8}",
            batch.join("×"),
            self.s,
            self.l,
        )
    }

    /// Whether this core gets the int8 kernel: asked for, float32 (a float16 graph is a GPU
    /// variant's, whose kernel stays the float one), and a head dimension not known to be below
    /// [`INT8_MIN_HEAD_DIM`] (memory attention's later layers have theirs known only at run
    /// time: 256).
    fn int8(&self, scores: Scores) -> bool {
        matches!(scores, Scores::Int8 { .. })
            && self.elem == Elem::Float32
            && self.opset >= 13
            && self.h.map_or(true, |h| h >= INT8_MIN_HEAD_DIM)
    }

    /// The batch's size, when every shape the rewrite writes is known at load time.
    fn static_batch(&self) -> Option<i64> {
        if !self.batch_equal || self.h.is_none() || self.hv.is_none() {
            return None;
        }
        self.batch
            .iter()
            .try_fold(1i64, |n, d| d.value().and_then(|v| n.checked_mul(v)))
    }
}

/// Writes the nodes that replace one verified candidate.
struct Emitter<'a> {
    g: &'a mut Graph,
    scores: Scores,
    nodes: Vec<NewNode>,
    tensors: &'a mut Vec<NewTensor>,
}

impl Emitter<'_> {
    fn node(
        &mut self,
        op_type: &'static str,
        domain: &'static str,
        inputs: Vec<String>,
        output: Option<String>,
        attrs: Vec<(&'static str, Attr)>,
    ) -> Result<String, String> {
        let out = match output {
            Some(o) => o,
            None => self.g.fresh(&format!("sam2_fused_attention_{op_type}")),
        };
        let name = self
            .g
            .fresh(&format!("sam2_fused_attention_{op_type}_node"));
        self.nodes.push(NewNode {
            name,
            op_type,
            domain,
            inputs,
            outputs: vec![out.clone()],
            attrs,
        });
        Ok(out)
    }

    /// A new initializer of one dimension, its name starting with `stem`.
    fn initializer(&mut self, stem: &str, values: TensorValues) -> String {
        let t = NewTensor::vector(self.g, stem, values);
        let name = t.name.clone();
        self.tensors.push(t);
        name
    }

    /// An int64 constant of one dimension (a shape, axes, bounds).
    fn shape(&mut self, values: Vec<i64>) -> String {
        self.initializer("sam2_fused_attention_shape", TensorValues::Int64(values))
    }

    /// `x` `[b…, T, width]` as `[∏b, T, width]`, with shapes known at load time.
    fn flat3(&mut self, x: String, width: i64, batch: i64) -> Result<String, String> {
        let shape = self.shape(vec![batch, -1, width]);
        self.node("Reshape", "", vec![x, shape], None, Vec::new())
    }

    /// `Shape(x)[start..end]`.
    fn shape_of(
        &mut self,
        x: &str,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<String, String> {
        let mut attrs = Vec::new();
        if let Some(s) = start {
            attrs.push(("start", Attr::Int(s)));
        }
        if let Some(e) = end {
            attrs.push(("end", Attr::Int(e)));
        }
        self.node("Shape", "", vec![x.to_string()], None, attrs)
    }

    fn concat(&mut self, parts: Vec<String>) -> Result<String, String> {
        self.node("Concat", "", parts, None, vec![("axis", Attr::Int(0))])
    }

    /// `x` `[b…, T, width]` as `[∏b, T, width]`, with shapes known only at run time.
    fn flat3_dynamic(&mut self, x: String) -> Result<String, String> {
        let minus_one = self.shape(vec![-1]);
        let tail = self.shape_of(&x, Some(-2), None)?;
        let shape = self.concat(vec![minus_one, tail])?;
        self.node("Reshape", "", vec![x, shape], None, Vec::new())
    }

    /// A float32 constant of one dimension.
    fn floats(&mut self, values: Vec<f32>) -> String {
        self.initializer("sam2_fused_attention_constant", TensorValues::Float(values))
    }

    /// The attention of `q` `[B, S, H]`, `k` `[B, L, H]` and `val` `[B, L, W]` with int8 scores,
    /// from ONNX Runtime's own quantisation operators:
    ///
    /// ```text
    ///   q₈, s_q, z_q = DynamicQuantizeLinear(q)        one scale for all queries (uint8)
    ///   s_k[l]       = max |k[·, l, ·]| / 127           one scale per key (int8, symmetric)
    ///   k₈           = Cast(Round(k / s_k), int8)
    ///   scores       = MatMulIntegerToFloat(q₈, k₈ᵀ, s_q, s_k · scale, z_q)
    ///   out          = MatMul(Softmax(scores), val)
    /// ```
    ///
    /// The score matrix is held a block of queries at a time: blocks of at most 2²⁴ scores
    /// (64 MB, [`INT8_BLOCK_SCORES`]), so memory attention's 4096 × 28,736 holds 59 MB where the
    /// graph as exported held 470 MB (memory attention's later layers, whose lengths are known
    /// only at run time, in [`INT8_DYNAMIC_BLOCKS`] blocks). The values and the softmax stay
    /// float32. A key's scale is its own (over the batch, which `MatMulIntegerToFloat`'s
    /// per-column scale allows), so one large key does not cost the others their precision.
    fn int8_core(
        &mut self,
        inputs: Vec<String>,
        v: &Verified,
        out: Option<String>,
    ) -> Result<String, String> {
        let Scores::Int8 { block_scores } = self.scores else {
            return Err("the int8 kernel was not asked for".into());
        };
        let block_scores = block_scores.max(1);
        let [q, k, val]: [String; 3] = inputs
            .try_into()
            .map_err(|_| "the int8 kernel takes three inputs".to_string())?;
        let q8 = self.g.fresh("sam2_fused_attention_q8");
        let qs = self.g.fresh("sam2_fused_attention_q_scale");
        let qz = self.g.fresh("sam2_fused_attention_q_zero");
        let name = self
            .g
            .fresh("sam2_fused_attention_DynamicQuantizeLinear_node");
        self.nodes.push(NewNode {
            name,
            op_type: "DynamicQuantizeLinear",
            domain: "",
            inputs: vec![q],
            outputs: vec![q8.clone(), qs.clone(), qz.clone()],
            attrs: Vec::new(),
        });
        let abs = self.node("Abs", "", vec![k.clone()], None, Vec::new())?;
        let largest = if self.g.opset >= 18 {
            let axes = self.shape(vec![0, 2]);
            self.node(
                "ReduceMax",
                "",
                vec![abs, axes],
                None,
                vec![("keepdims", Attr::Int(1))],
            )?
        } else {
            self.node(
                "ReduceMax",
                "",
                vec![abs],
                None,
                vec![("axes", Attr::Ints(vec![0, 2])), ("keepdims", Attr::Int(1))],
            )?
        };
        // A key of zeros gets a tiny scale rather than a division by zero.
        let tiny = self.floats(vec![f32::MIN_POSITIVE]);
        let largest = self.node("Max", "", vec![largest, tiny], None, Vec::new())?;
        let per_step = self.floats(vec![1.0 / 127.0]);
        let ks = self.node("Mul", "", vec![largest, per_step], None, Vec::new())?;
        let steps = self.node("Div", "", vec![k, ks.clone()], None, Vec::new())?;
        let steps = self.node("Round", "", vec![steps], None, Vec::new())?;
        let k8 = self.node(
            "Cast",
            "",
            vec![steps],
            None,
            vec![("to", Attr::Int(i64::from(graph::INT8)))],
        )?;
        let k8t = self.node(
            "Transpose",
            "",
            vec![k8],
            None,
            vec![("perm", Attr::Ints(vec![0, 2, 1]))],
        )?;
        let flat = self.shape(vec![-1]);
        let ks = self.node("Reshape", "", vec![ks, flat], None, Vec::new())?;
        let scale = self.floats(vec![v.scale as f32]);
        let bs = self.node("Mul", "", vec![ks, scale], None, Vec::new())?;
        // Blocks of queries: their bounds when the shapes are known at load time; otherwise
        // `INT8_DYNAMIC_BLOCKS` blocks of ⌈S / n⌉ queries each, computed when the model runs
        // (Slice clamps the last ones).
        let batch = v
            .batch
            .iter()
            .try_fold(1i64, |n, d| d.value().and_then(|x| n.checked_mul(x)));
        let ranges: Vec<Block> = match (batch, v.s.value(), v.l.value()) {
            (Some(b), Some(s), Some(l)) if b > 0 && s > 0 && l > 0 => {
                let scores = b.saturating_mul(s).saturating_mul(l);
                let blocks = (scores + block_scores - 1) / block_scores;
                let rows = (s + blocks - 1) / blocks.max(1);
                if blocks <= 1 {
                    vec![Block::All]
                } else {
                    (0..s)
                        .step_by(rows as usize)
                        .map(|a| Block::Static(a, (a + rows).min(s)))
                        .collect()
                }
            }
            _ => (0..INT8_DYNAMIC_BLOCKS).map(Block::Dynamic).collect(),
        };
        let rows = if ranges.iter().any(|b| matches!(b, Block::Dynamic(_))) {
            // ⌈S / n⌉ = (S + n − 1) / n, as a one-element tensor.
            let s = self.shape_of(&q8, Some(1), Some(2))?;
            let bias = self.shape(vec![INT8_DYNAMIC_BLOCKS - 1]);
            let n = self.shape(vec![INT8_DYNAMIC_BLOCKS]);
            let s = self.node("Add", "", vec![s, bias], None, Vec::new())?;
            Some(self.node("Div", "", vec![s, n], None, Vec::new())?)
        } else {
            None
        };
        let single = ranges.len() == 1;
        let mut parts = Vec::with_capacity(ranges.len());
        for range in ranges {
            let (starts, ends) = match (range, &rows) {
                (Block::All, _) => (None, None),
                (Block::Static(a, b), _) => (Some(self.shape(vec![a])), Some(self.shape(vec![b]))),
                (Block::Dynamic(i), Some(rows)) => {
                    let (i0, i1) = (self.shape(vec![i]), self.shape(vec![i + 1]));
                    let a = self.node("Mul", "", vec![rows.clone(), i0], None, Vec::new())?;
                    let b = self.node("Mul", "", vec![rows.clone(), i1], None, Vec::new())?;
                    (Some(a), Some(b))
                }
                (Block::Dynamic(_), None) => unreachable!("dynamic blocks have their size"),
            };
            let rows = match (starts, ends) {
                (Some(starts), Some(ends)) => {
                    let axes = self.shape(vec![1]);
                    self.node(
                        "Slice",
                        "",
                        vec![q8.clone(), starts, ends, axes],
                        None,
                        Vec::new(),
                    )?
                }
                _ => q8.clone(),
            };
            let scores = self.node(
                "MatMulIntegerToFloat",
                "com.microsoft",
                vec![rows, k8t.clone(), qs.clone(), bs.clone(), qz.clone()],
                None,
                Vec::new(),
            )?;
            let p = self.node(
                "Softmax",
                "",
                vec![scores],
                None,
                vec![("axis", Attr::Int(2))],
            )?;
            let part_out = if single { out.clone() } else { None };
            parts.push(self.node("MatMul", "", vec![p, val.clone()], part_out, Vec::new())?);
        }
        if single {
            return Ok(parts.remove(0));
        }
        self.node("Concat", "", parts, out, vec![("axis", Attr::Int(1))])
    }

    /// The fused attention of a verified candidate, its result named `c.out`.
    fn attention(&mut self, c: &Candidate, v: &Verified) -> Result<(), String> {
        let r = v.rank;
        let mut q = c.q.clone();
        for (factor, divides) in &v.in_graph {
            let op = if *divides { "Div" } else { "Mul" };
            q = self.node(op, "", vec![q, factor.clone()], None, Vec::new())?;
        }
        // The keys as [b…, L, H]: the transpose the scores used, with its last two axes swapped
        // back (nothing at all when that is the identity).
        let (src, mut perm) = match &c.keys {
            Keys::Transposed { src, perm } => (src.clone(), perm.clone()),
            Keys::Plain(kt) => (kt.clone(), (0..r as i64).collect()),
        };
        perm.swap(r - 2, r - 1);
        let mut k = if perm.iter().enumerate().all(|(i, &p)| p == i as i64) {
            src
        } else {
            self.node(
                "Transpose",
                "",
                vec![src],
                None,
                vec![("perm", Attr::Ints(perm))],
            )?
        };
        let projected = v.projected.as_ref();
        // The values, or the projection's inputs viewed as `[batch…, L, din]`.
        let view_x = |e: &mut Self, batch: &[i64]| match projected {
            Some(p) => {
                let shape = e.shape([batch, &[-1, p.din]].concat());
                e.node("Reshape", "", vec![p.x.clone(), shape], None, Vec::new())
            }
            None => Ok(c.v.clone()),
        };
        let attrs = vec![
            ("num_heads", Attr::Int(1)),
            ("scale", Attr::Float(v.scale as f32)),
        ];
        // The inputs of the kernel, and the shape its result `[∏b, S, width]` goes back to.
        let (inputs, back) = if let Some(batch) = v.static_batch() {
            let (h, hv) = (v.h.unwrap_or(0), v.hv.unwrap_or(0));
            let val = view_x(self, &[batch])?;
            if r == 3 {
                (vec![q, k, val], None)
            } else {
                let val = match projected {
                    Some(_) => val,
                    None => self.flat3(val, hv, batch)?,
                };
                let inputs = vec![self.flat3(q, h, batch)?, self.flat3(k, h, batch)?, val];
                let mut dims: Vec<i64> = v.batch.iter().filter_map(Dim::value).collect();
                dims.extend([-1, hv]);
                (inputs, Some(self.shape(dims)))
            }
        } else {
            // Shapes known at run time only. Batch dimensions not known to be equal are
            // broadcast to their common shape first, as MatMul broadcasts them (the ranks are
            // equal, so the common shape is the elementwise maximum of shapes that broadcast at
            // all).
            let mut val = view_x(self, projected.map_or(&[], |p| &p.batch))?;
            let batch = if v.batch_equal {
                self.shape_of(&q, None, Some(-2))?
            } else {
                let qb = self.shape_of(&q, None, Some(-2))?;
                let kb = self.shape_of(&k, None, Some(-2))?;
                let vb = self.shape_of(&val, None, Some(-2))?;
                let common = self.node("Max", "", vec![qb, kb, vb], None, Vec::new())?;
                for x in [&mut q, &mut k, &mut val] {
                    let tail = self.shape_of(x, Some(-2), None)?;
                    let target = self.concat(vec![common.clone(), tail])?;
                    *x = self.node("Expand", "", vec![x.clone(), target], None, Vec::new())?;
                }
                common
            };
            if r == 3 {
                (vec![q, k, val], None)
            } else {
                let queries = self.shape_of(&q, Some(-2), Some(-1))?;
                let width = match projected {
                    Some(p) => self.shape(vec![p.dout]),
                    None => self.shape_of(&val, Some(-1), None)?,
                };
                let inputs = vec![
                    self.flat3_dynamic(q)?,
                    self.flat3_dynamic(k)?,
                    self.flat3_dynamic(val)?,
                ];
                (inputs, Some(self.concat(vec![batch, queries, width])?))
            }
        };
        // After the kernel: the values' projection when it moved there, then the values' batch
        // dimensions back; the last step writes the result.
        let mut after: Vec<(&'static str, String)> = Vec::new();
        if let Some(p) = projected {
            after.push(("MatMul", p.w.clone()));
            if let Some(b) = &p.bias {
                after.push(("Add", b.clone()));
            }
        }
        if let Some(shape) = back {
            after.push(("Reshape", shape));
        }
        let last = after.len();
        let out = (last == 0).then(|| c.out.clone());
        let mut o = if v.int8(self.scores) {
            self.int8_core(inputs, v, out)?
        } else {
            self.node("MultiHeadAttention", "com.microsoft", inputs, out, attrs)?
        };
        for (i, (op, operand)) in after.into_iter().enumerate() {
            let out = (i + 1 == last).then(|| c.out.clone());
            o = self.node(op, "", vec![o, operand], out, Vec::new())?;
        }
        Ok(())
    }
}

/// How the rewritten cores compute their scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Scores {
    /// In float, by ONNX Runtime's flash-attention kernel (`MultiHeadAttention`): the
    /// arithmetic as exported, up to rounding.
    #[default]
    Float,
    /// Queries and keys quantised to 8 bits when the model runs, their product taken in integers
    /// ([`Emitter::int8_core`]): for an int8 variant on the CPU, whose int8 matrix kernels run
    /// about three times the float32 rate. Float32 cores only. The scores are held a block of
    /// queries at a time, at most `block_scores` of them.
    Int8 { block_scores: i64 },
}

impl Scores {
    /// Int8 scores in blocks of [`INT8_BLOCK_SCORES`].
    pub(crate) const INT8: Scores = Scores::Int8 {
        block_scores: INT8_BLOCK_SCORES,
    };
}

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

/// Fewest scores per head (queries × keys, when both are known at load time) for which the
/// fused kernel is used. Below, the score matrix is small enough to stay in cache and the batched
/// MatMuls ONNX Runtime runs as exported are as fast (Hiera's windowed attention: 1024 windows of
/// 64 × 64 measured 1.09× slower fused, on a heavily loaded 2-core machine); memory attention's
/// 4096 × 28,736 and Hiera's global 4096 × 4096 are well above.
pub(crate) const MIN_SCORES: i64 = 1 << 20;

/// Whether this CPU's int8 matrix kernels sum exactly: with VNNI on x86-64 (AVX512-VNNI or
/// AVX-VNNI) and the dot-product instructions on AArch64. Without VNNI, ONNX Runtime's AVX2 and
/// AVX-512 kernels multiply uint8 by int8 into saturating 16-bit pair sums (`VPMADDUBSW`), which
/// full-range keys and queries can overflow; the int8 variant of the encoder has 7-bit weights for
/// that reason, and 7-bit keys moved EdgeTAM's tracked logits by more than dropping a memory
/// frame does (3.6e-2 against 2.7e-2 mean). `Err` says why not.
pub fn int8_scores_available() -> Result<(), &'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__cpuid_count, __get_cpuid_max};
        // CPUID leaf 7: AVX512-VNNI is ECX bit 11 of sub-leaf 0, AVX-VNNI EAX bit 4 of sub-leaf
        // 1 (read directly: their names in `is_x86_feature_detected!` are newer than our MSRV);
        // the AVX-512 and AVX2 checks say the OS keeps those registers.
        // SAFETY: CPUID exists on every x86-64 CPU, and leaf 7 and its sub-leaf 1 are read only
        // where the CPU says it has them. (These functions are safe from Rust 1.87 on, unsafe in
        // our MSRV's.)
        #[allow(unused_unsafe)]
        let (avx512_vnni, avx_vnni) = unsafe {
            if __get_cpuid_max(0).0 < 7 {
                (false, false)
            } else {
                let leaf0 = __cpuid_count(7, 0);
                let avx_vnni = leaf0.eax >= 1 && __cpuid_count(7, 1).eax & (1 << 4) != 0;
                (leaf0.ecx & (1 << 11) != 0, avx_vnni)
            }
        };
        if (avx512_vnni && std::arch::is_x86_feature_detected!("avx512f"))
            || (avx_vnni && std::arch::is_x86_feature_detected!("avx2"))
        {
            return Ok(());
        }
        Err("this CPU has no VNNI, and ONNX Runtime's int8 kernels without it can saturate")
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("dotprod") {
            return Ok(());
        }
        Err("this CPU has no int8 dot-product instructions")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Err("int8 scores are used on x86-64 and AArch64 only")
    }
}

/// Most scores the int8 kernel holds at once ([`Emitter::int8_core`]): 64 MB of float32.
const INT8_BLOCK_SCORES: i64 = 1 << 24;

/// Smallest head dimension given the int8 kernel: the integer product gains with the length of
/// its dot products. One core of 4096 × 4096 scores on 2 AMD EPYC cores with AVX-512 VNNI
/// (ONNX Runtime's Python API, medians of 3): head dim 96, 35 ms int8 against 36 ms fused float;
/// 128, 42–45 against 46; 256, 74 against 98; 4096 × 28,736 at 256, 241 against 433.
const INT8_MIN_HEAD_DIM: i64 = 192;

/// Blocks of queries the int8 kernel takes when the number of queries or keys is known only when
/// the model runs (memory attention's keys: the memories so far).
const INT8_DYNAMIC_BLOCKS: i64 = 8;

/// A block of queries of the int8 kernel.
#[derive(Debug, Clone, Copy)]
enum Block {
    All,
    /// Rows `a..b`.
    Static(i64, i64),
    /// The `i`-th of [`INT8_DYNAMIC_BLOCKS`], its bounds computed at run time.
    Dynamic(i64),
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
