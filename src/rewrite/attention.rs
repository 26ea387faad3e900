//! The attention rewrite, finding and verifying: a softmax of scaled query-key products times
//! values, recognised by structure ([`Finder::at_softmax`]) and checked against the types ONNX
//! Runtime infers ([`verify`]) before anything changes. [`super::emit`] writes what replaces it.

use super::*;

/// Where the keys come from: `Transpose(src, perm)` is the transposed key the scores use, or a
/// tensor that is the transposed key itself.
#[derive(Debug, Clone)]
pub(super) enum Keys {
    Transposed { src: String, perm: Vec<i64> },
    Plain(String),
}

/// An attention core found in the graph, not yet verified against the inferred shapes.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    pub(super) q: String,
    /// The transposed keys as the scores MatMul reads them, before its scales: `[b…, H, L]`.
    pub(super) kt: String,
    pub(super) keys: Keys,
    pub(super) v: String,
    pub(super) scale: f64,
    /// Rank of the largest scale constant (a `[1,1,1,1]` constant broadcasts a rank-3 tensor
    /// to rank 4).
    pub(super) scale_rank: usize,
    /// Scale factors computed in the graph from shapes (torch's exporter writes
    /// `sqrt(1 / sqrt(Shape(q)[-1]))` on each side): (tensor, whether it divides), evaluated once
    /// the shapes are known.
    pub(super) factors: Vec<(String, bool)>,
    /// The tensors whose shapes those factors read.
    pub(super) shape_reads: Vec<String>,
    pub(super) softmax_axis: i64,
    pub(super) out: String,
    pub(super) removed: Vec<usize>,
    /// Index of the final MatMul: the new nodes are written there.
    pub(super) anchor: usize,
    /// The projection that computes the values, when it may move after the kernel.
    pub(super) projection: Option<Projection>,
}

/// The reason a softmax of a MatMul is not taken as attention, or the candidate.
pub(super) type Found = Result<Candidate, String>;

pub(super) struct Finder<'g> {
    pub(super) g: &'g Graph,
    pub(super) producer: HashMap<&'g str, usize>,
    pub(super) readers: HashMap<&'g str, usize>,
    /// For each tensor read exactly once, the node that reads it.
    pub(super) reader: HashMap<&'g str, usize>,
}

impl<'g> Finder<'g> {
    pub(super) fn new(g: &'g Graph) -> Self {
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
    pub(super) fn sole_producer(&self, t: &str) -> Option<usize> {
        if self.readers.get(t) != Some(&1) || self.g.outputs.contains(t) {
            return None;
        }
        let i = *self.producer.get(t)?;
        (self.g.nodes[i].outputs.len() == 1).then_some(i)
    }

    /// The node reading `t` when `t` is read once and is not a graph output, and that node has
    /// one output.
    pub(super) fn sole_reader(&self, t: &str) -> Option<usize> {
        let &i = self.reader.get(t)?;
        (!self.g.outputs.contains(t) && self.g.nodes[i].outputs.len() == 1).then_some(i)
    }

    /// Whether `t` is computed from constants and tensor shapes alone, by operators [`eval`]
    /// knows; `reads` gets the tensors whose shapes it reads.
    pub(super) fn computable(&self, t: &str, depth: usize, reads: &mut Vec<String>) -> bool {
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
        pub(super) const OPS: [&str; 13] = [
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
    pub(super) fn scalar(&self, t: &str) -> Option<(f64, usize)> {
        let c = self.g.constants.get(t)?;
        if ![graph::FLOAT, graph::FLOAT16, 11].contains(&c.data_type) {
            return None;
        }
        c.scalar().map(|v| (v, c.dims.len()))
    }

    /// Follows `t` up through Mul (either side) and Div (by the constant) by constant scalars,
    /// when each step's result is read by the pattern alone. Returns the tensor before them.
    pub(super) fn unscale(&self, mut t: &'g str, c: &mut Candidate) -> &'g str {
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
    pub(super) fn at_softmax(&self, s: usize) -> Option<Found> {
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
pub(super) struct Verified {
    /// The element type of queries, keys and values.
    pub(super) elem: Elem,
    /// The graph's default opset (the int8 kernel's operators need 13).
    pub(super) opset: i64,
    /// The scale known at load time (the kernel's `scale`).
    pub(super) scale: f64,
    /// Scale factors known only at run time (tensor, whether it divides), applied to the queries.
    pub(super) in_graph: Vec<(String, bool)>,
    pub(super) rank: usize,
    pub(super) batch: Vec<Dim>,
    pub(super) batch_equal: bool,
    pub(super) s: Dim,
    pub(super) l: Dim,
    pub(super) h: Option<i64>,
    pub(super) hv: Option<i64>,
    /// The values' projection, moved after the kernel.
    pub(super) projected: Option<Projected>,
}

pub(super) fn verify(
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
    pub(super) fn kind(&self, scores: Scores) -> String {
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
    pub(super) fn int8(&self, scores: Scores) -> bool {
        matches!(scores, Scores::Int8 { .. })
            && self.elem == Elem::Float32
            && self.opset >= 13
            && self.h.map_or(true, |h| h >= INT8_MIN_HEAD_DIM)
    }

    /// The batch's size, when every shape the rewrite writes is known at load time.
    pub(super) fn static_batch(&self) -> Option<i64> {
        if !self.batch_equal || self.h.is_none() || self.hv.is_none() {
            return None;
        }
        self.batch
            .iter()
            .try_fold(1i64, |n, d| d.value().and_then(|v| n.checked_mul(v)))
    }
}

/// The attention rewrite as the driver runs it ([`super::Pass`]): finds the cores, verifies
/// each (the verified ones are kept for the split projections, fused or not), and fuses those
/// that are on and large enough; the values projected after the kernel and the int8 scores are
/// parts of a fused core, counted in their own entries.
pub(super) struct AttentionPass {
    min_scores: i64,
    scores: Scores,
    on: Rewrites,
    candidates: Vec<Candidate>,
}

impl AttentionPass {
    pub(super) fn new(min_scores: i64, scores: Scores, on: Rewrites) -> Self {
        AttentionPass {
            min_scores,
            scores,
            on,
            candidates: Vec::new(),
        }
    }
}

impl Pass for AttentionPass {
    fn rewrite(&self) -> Rewrite {
        Rewrite::Attention
    }

    fn find(&mut self, finder: &Finder, report: &mut RewriteReport) {
        let values_after = self.on.contains(Rewrite::ValuesAfterAttention);
        for s in 0..finder.g.nodes.len() {
            match finder.at_softmax(s) {
                None => {}
                Some(Err(why)) => report.left_as_exported(Rewrite::Attention, why),
                Some(Ok(mut c)) => {
                    if !values_after {
                        c.projection = None;
                    }
                    self.candidates.push(c);
                }
            }
        }
    }

    fn found(&self) -> bool {
        !self.candidates.is_empty()
    }

    fn wanted(&self) -> Vec<&str> {
        let mut wanted = Vec::new();
        for c in &self.candidates {
            wanted.extend([c.q.as_str(), c.kt.as_str(), c.v.as_str()]);
            wanted.extend(c.shape_reads.iter().map(String::as_str));
            wanted.extend(c.factors.iter().map(|(f, _)| f.as_str()));
            if let Some(p) = &c.projection {
                wanted.extend(p.wanted());
            }
        }
        wanted
    }

    fn apply(&mut self, edit: &mut Edit, report: &mut RewriteReport) {
        for c in &self.candidates {
            let v = match verify(edit.g, c, edit.types) {
                Ok(v) => v,
                Err(why) => {
                    report.left_as_exported(Rewrite::Attention, why);
                    continue;
                }
            };
            // A candidate that failed verification (a per-key factor on its scores, a softmax
            // over another axis) is not here: its projections keep both biases.
            edit.verified.push(c.clone());
            if !self.on.contains(Rewrite::Attention) {
                report.left_as_exported(Rewrite::Attention, "attention switched off");
                continue;
            }
            if let (Some(s), Some(l)) = (v.s.value(), v.l.value()) {
                if s.saturating_mul(l) < self.min_scores {
                    report.left_as_exported(
                        Rewrite::Attention,
                        format!("{s} × {l} scores per head (small)"),
                    );
                    continue;
                }
            }
            let mut e = Emitter {
                g: &mut *edit.g,
                scores: self.scores,
                nodes: Vec::new(),
                tensors: &mut edit.tensors,
            };
            let result = e.attention(c, &v);
            let nodes = std::mem::take(&mut e.nodes);
            match result {
                Ok(()) => {
                    edit.removed.extend(c.removed.iter().copied());
                    edit.added.entry(c.anchor).or_default().extend(nodes);
                    let kind = v.kind(self.scores);
                    if v.projected.is_some() {
                        report.done(Rewrite::ValuesAfterAttention, kind.clone());
                    }
                    if v.int8(self.scores) {
                        report.done(Rewrite::Int8Scores, kind.clone());
                    }
                    report.done(Rewrite::Attention, kind);
                }
                Err(why) => report.left_as_exported(Rewrite::Attention, why),
            }
        }
    }
}
