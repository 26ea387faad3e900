//! The attention rewrite, writing: a verified core replaced by ONNX Runtime's
//! `MultiHeadAttention` (or, for int8 scores, by an integer product in blocks of queries).

use super::*;

/// Writes the nodes that replace one verified candidate.
pub(super) struct Emitter<'a> {
    pub(super) g: &'a mut Graph,
    pub(super) scores: Scores,
    pub(super) nodes: Vec<NewNode>,
    pub(super) tensors: &'a mut Vec<NewTensor>,
}

impl Emitter<'_> {
    pub(super) fn node(
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
    pub(super) fn initializer(&mut self, stem: &str, values: TensorValues) -> String {
        let t = NewTensor::vector(self.g, stem, values);
        let name = t.name.clone();
        self.tensors.push(t);
        name
    }

    /// An int64 constant of one dimension (a shape, axes, bounds).
    pub(super) fn shape(&mut self, values: Vec<i64>) -> String {
        self.initializer("sam2_fused_attention_shape", TensorValues::Int64(values))
    }

    /// `x` `[b…, T, width]` as `[∏b, T, width]`, with shapes known at load time.
    pub(super) fn flat3(&mut self, x: String, width: i64, batch: i64) -> Result<String, String> {
        let shape = self.shape(vec![batch, -1, width]);
        self.node("Reshape", "", vec![x, shape], None, Vec::new())
    }

    /// `Shape(x)[start..end]`.
    pub(super) fn shape_of(
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

    pub(super) fn concat(&mut self, parts: Vec<String>) -> Result<String, String> {
        self.node("Concat", "", parts, None, vec![("axis", Attr::Int(0))])
    }

    /// `x` `[b…, T, width]` as `[∏b, T, width]`, with shapes known only at run time.
    pub(super) fn flat3_dynamic(&mut self, x: String) -> Result<String, String> {
        let minus_one = self.shape(vec![-1]);
        let tail = self.shape_of(&x, Some(-2), None)?;
        let shape = self.concat(vec![minus_one, tail])?;
        self.node("Reshape", "", vec![x, shape], None, Vec::new())
    }

    /// A float32 constant of one dimension.
    pub(super) fn floats(&mut self, values: Vec<f32>) -> String {
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
    pub(super) fn int8_core(
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
    pub(super) fn attention(&mut self, c: &Candidate, v: &Verified) -> Result<(), String> {
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

/// Most scores the int8 kernel holds at once ([`Emitter::int8_core`]): 64 MB of float32.
pub(super) const INT8_BLOCK_SCORES: i64 = 1 << 24;

/// Smallest head dimension given the int8 kernel: the integer product gains with the length of
/// its dot products. One core of 4096 × 4096 scores on 2 AMD EPYC cores with AVX-512 VNNI
/// (ONNX Runtime's Python API, medians of 3): head dim 96, 35 ms int8 against 36 ms fused float;
/// 128, 42–45 against 46; 256, 74 against 98; 4096 × 28,736 at 256, 241 against 433.
pub(super) const INT8_MIN_HEAD_DIM: i64 = 192;

/// Blocks of queries the int8 kernel takes when the number of queries or keys is known only when
/// the model runs (memory attention's keys: the memories so far).
pub(super) const INT8_DYNAMIC_BLOCKS: i64 = 8;

/// A block of queries of the int8 kernel.
#[derive(Debug, Clone, Copy)]
pub(super) enum Block {
    All,
    /// Rows `a..b`.
    Static(i64, i64),
    /// The `i`-th of [`INT8_DYNAMIC_BLOCKS`], its bounds computed at run time.
    Dynamic(i64),
}
