//! Values projected after the kernel.
//!
//! Attention's values are often a projection `y = x · W + b` of the keys' source, split into
//! heads by reshapes and transposes. Each row of the probabilities `P` sums to one, so
//! `P · (x W + b) = (P · x) W + b`: the kernel can attend over `x` and the projection follow it,
//! on the `S` rows of the result instead of the `L` rows of the values. Where `x` is narrower
//! than `y`, that is fewer multiplications: SAM2's and EdgeTAM's memory attention project their
//! 64-wide memories to 256, so each of the 4096 queries meets 64 columns per key instead of 256
//! (28,736 keys in SAM2.1's steady state). The arithmetic is the same up to float rounding.
//!
//! It holds head by head only when each head's values are a whole projection: the values' head
//! size is the projection's width (one head), and between `y` and the values nothing but
//! reshapes and transposes that move axes of size one, so the values are `y`'s rows in their
//! order, whatever their batch dimensions. ONNX Runtime's inference often loses the shapes after
//! a reshape to a computed shape (`Reshape(y, Concat(Shape(y)[0], …))`), so the dimensions along
//! that chain are followed here from `y`'s, symbols included.

use std::collections::HashMap;

use super::eval::Evaluator;
use super::graph::{self, Attr, Graph};
use super::{Dim, Finder, TensorType};

/// Values computed by a projection of weights of the model, behind reshapes and transposes only
/// (what the shapes must be is checked by [`fit`]).
#[derive(Debug, Clone)]
pub(super) struct Projection {
    x: String,
    /// The projection's result, before the reshapes.
    y: String,
    w: String,
    bias: Option<String>,
    din: i64,
    dout: i64,
    /// The nodes from `y` to the values, in order.
    chain: Vec<usize>,
}

impl Projection {
    /// The tensors whose inferred types [`fit`] reads.
    pub(super) fn wanted(&self) -> [&str; 2] {
        [self.x.as_str(), self.y.as_str()]
    }
}

/// A projection that follows the kernel: the kernel attends over `x` viewed as
/// `[batch…, L, din]`, and `· w + bias` is applied to its result.
#[derive(Debug, Clone)]
pub(super) struct Projected {
    pub x: String,
    pub w: String,
    pub bias: Option<String>,
    pub din: i64,
    pub dout: i64,
    /// The values' batch dimensions.
    pub batch: Vec<i64>,
}

impl<'g> Finder<'g> {
    /// `t` as a float weight of the model (an initializer, possibly behind Identity nodes): its
    /// dimensions.
    fn weight(&self, t: &str) -> Option<&'g [i64]> {
        let mut t = t;
        for _ in 0..4 {
            if let Some((ty, dims)) = self.g.initializers.get(t) {
                return matches!(*ty, graph::FLOAT | graph::FLOAT16).then_some(dims.as_slice());
            }
            let n = &self.g.nodes[*self.producer.get(t)?];
            if !(n.is("Identity") && n.inputs.len() == 1) {
                return None;
            }
            t = n.inputs[0].as_str();
        }
        None
    }

    /// The projection computing the values `v`, if they are `x · W [+ b]` behind reshapes and
    /// transposes only.
    pub(super) fn projection(&self, v: &str) -> Option<Projection> {
        let mut t = v;
        let mut chain = Vec::new();
        let mut node = loop {
            let i = *self.producer.get(t)?;
            let n = &self.g.nodes[i];
            if n.outputs.len() != 1 || n.inputs.is_empty() || n.inputs[0].is_empty() {
                return None;
            }
            const VIEWS: [&str; 6] = [
                "Reshape",
                "Transpose",
                "Unsqueeze",
                "Squeeze",
                "Flatten",
                "Identity",
            ];
            if !VIEWS.iter().any(|op| n.is(op)) {
                break n;
            }
            chain.push(i);
            if chain.len() > 8 {
                return None;
            }
            t = n.inputs[0].as_str();
        };
        chain.reverse();
        let y = t.to_string();
        let mut bias = None;
        if node.is("Add") && node.inputs.len() == 2 {
            let (a, b) = (node.inputs[0].as_str(), node.inputs[1].as_str());
            let (product, b, dims) = match (self.weight(a), self.weight(b)) {
                (None, Some(dims)) => (a, b, dims),
                (Some(dims), None) => (b, a, dims),
                _ => return None,
            };
            bias = Some((b.to_string(), dims));
            node = &self.g.nodes[*self.producer.get(product)?];
        }
        if !(node.is("MatMul") && node.inputs.len() == 2) {
            return None;
        }
        let (x, w) = (node.inputs[0].as_str(), node.inputs[1].as_str());
        let [din, dout] = *self.weight(w)? else {
            return None;
        };
        if self.weight(x).is_some() {
            return None;
        }
        if let Some((_, dims)) = bias {
            // A vector of the output's width, leading ones allowed: the same for every row.
            let (last, lead) = dims.split_last()?;
            if *last != dout || lead.iter().any(|&d| d != 1) {
                return None;
            }
        }
        Some(Projection {
            x: x.to_string(),
            y,
            w: w.to_string(),
            bias: bias.map(|(b, _)| b),
            din,
            dout,
            chain,
        })
    }
}

/// Whether the projection can follow the kernel, and then the values' dimensions as followed from
/// `y`'s along the chain. Needs: an input narrower than the output (or nothing is saved), one float
/// type throughout, `x` and `y` with the same leading dimensions (a matrix weight keeps them), every
/// view on the chain understood and every transpose moving axes of size one only, the values as
/// wide as the projection (one head), and their batch dimensions known.
pub(super) fn fit(
    g: &Graph,
    p: &Projection,
    types: &HashMap<String, TensorType>,
) -> Option<(Projected, Vec<Dim>)> {
    if p.din >= p.dout {
        return None;
    }
    let (x, y) = (types.get(&p.x)?, types.get(&p.y)?);
    let n = y.dims.len();
    if !(y.is_float() && x.elem == y.elem) || n < 2 || x.dims.len() != n {
        return None;
    }
    if x.dims[n - 1].value() != Some(p.din) || y.dims[n - 1].value() != Some(p.dout) {
        return None;
    }
    // `y`'s dynamic dimensions that inference left unnamed get names of their own here, so that
    // a reshape to `Shape(y)[i]` is known to keep one; they are unnamed again at the end.
    const UNNAMED: &str = "\u{0}y";
    let named: Vec<Dim> = y
        .dims
        .iter()
        .enumerate()
        .map(|(i, d)| match d {
            Dim::Symbol(s) if s.is_empty() => Dim::Symbol(format!("{UNNAMED}{i}")),
            d => d.clone(),
        })
        .collect();
    let y_named = (p.y.as_str(), named.as_slice());
    let mut dims = named.clone();
    for &i in &p.chain {
        dims = view(g, &g.nodes[i], dims, types, y_named)?;
    }
    for d in &mut dims {
        if matches!(d, Dim::Symbol(s) if s.starts_with(UNNAMED)) {
            *d = Dim::Symbol(String::new());
        }
    }

    let r = dims.len();
    if r < 2 || dims[r - 1].value() != Some(p.dout) {
        return None;
    }
    let batch = dims[..r - 2]
        .iter()
        .map(Dim::value)
        .collect::<Option<Vec<i64>>>()?;
    let projected = Projected {
        x: p.x.clone(),
        w: p.w.clone(),
        bias: p.bias.clone(),
        din: p.din,
        dout: p.dout,
        batch,
    };
    Some((projected, dims))
}

/// The dimensions of a view's output from those of its input, or `None` when not known or when
/// it is a transpose that moves axes of other sizes than one (which reorders the elements).
fn view(
    g: &Graph,
    n: &graph::Node,
    dims: Vec<Dim>,
    types: &HashMap<String, TensorType>,
    y: (&str, &[Dim]),
) -> Option<Vec<Dim>> {
    let rank = dims.len() as i64;
    let axis = |a: i64, rank: i64| {
        let a = if a < 0 { a + rank } else { a };
        (0..rank).contains(&a).then_some(a as usize)
    };
    let listed = |attr: &str| -> Option<Vec<i64>> {
        match n.attr(attr) {
            Some(Attr::Ints(v)) => Some(v.clone()),
            _ => {
                let t = n.inputs.get(1).filter(|t| !t.is_empty())?;
                let c = g.constants.get(t)?;
                Some(c.values.iter().map(|&v| v as i64).collect())
            }
        }
    };
    if n.is("Identity") {
        return Some(dims);
    }
    if n.is("Transpose") {
        let perm: Vec<i64> = match n.attr("perm") {
            Some(Attr::Ints(p)) => p.clone(),
            _ => (0..rank).rev().collect(),
        };
        if perm.len() != dims.len() {
            return None;
        }
        let perm = perm
            .iter()
            .map(|&a| axis(a, rank))
            .collect::<Option<Vec<usize>>>()?;
        let moved: Vec<usize> = perm
            .iter()
            .copied()
            .filter(|&a| dims[a].value() != Some(1))
            .collect();
        if moved.windows(2).any(|w| w[0] > w[1]) {
            return None;
        }
        return Some(perm.iter().map(|&a| dims[a].clone()).collect());
    }
    if n.is("Unsqueeze") {
        let axes = listed("axes")?;
        let out_rank = rank + axes.len() as i64;
        let mut axes = axes
            .iter()
            .map(|&a| axis(a, out_rank))
            .collect::<Option<Vec<usize>>>()?;
        axes.sort_unstable();
        let mut out = dims;
        for a in axes {
            if a > out.len() {
                return None;
            }
            out.insert(a, Dim::Static(1));
        }
        return Some(out);
    }
    if n.is("Squeeze") {
        let axes = match listed("axes") {
            Some(a) => a
                .iter()
                .map(|&a| axis(a, rank))
                .collect::<Option<Vec<usize>>>()?,
            None if dims.iter().all(|d| d.value().is_some()) => (0..dims.len())
                .filter(|&a| dims[a].value() == Some(1))
                .collect(),
            None => return None,
        };
        if axes.iter().any(|&a| dims[a].value() != Some(1)) {
            return None;
        }
        return Some(
            dims.into_iter()
                .enumerate()
                .filter(|(a, _)| !axes.contains(a))
                .map(|(_, d)| d)
                .collect(),
        );
    }
    if n.is("Flatten") {
        let a = match n.attr("axis") {
            Some(Attr::Int(a)) => *a,
            _ => 1,
        };
        let a = if a < 0 { a + rank } else { a };
        if !(0..=rank).contains(&a) {
            return None;
        }
        let (head, tail) = dims.split_at(a as usize);
        return Some(vec![product(head)?, product(tail)?]);
    }
    if n.is("Reshape") {
        if matches!(n.attr("allowzero"), Some(Attr::Int(1))) {
            return None;
        }
        let target = Evaluator::new(g, types)
            .knowing(y.0, y.1)
            .shape(n.inputs.get(1)?)?;
        let mut out: Vec<Option<Dim>> = Vec::with_capacity(target.len());
        for (i, d) in target.iter().enumerate() {
            out.push(match d {
                Dim::Static(0) => Some(dims.get(i)?.clone()),
                Dim::Static(-1) => None,
                Dim::Static(v) if *v > 0 => Some(d.clone()),
                Dim::Symbol(s) if !s.is_empty() => Some(d.clone()),
                _ => return None,
            });
        }
        let inferred = out.iter().filter(|d| d.is_none()).count();
        if inferred > 1 {
            return None;
        }
        if inferred == 1 {
            let known: Vec<Dim> = out.iter().flatten().cloned().collect();
            let missing = quotient(&dims, &known)?;
            for d in out.iter_mut() {
                if d.is_none() {
                    *d = Some(missing.clone());
                }
            }
        }
        return out.into_iter().collect();
    }
    None
}

/// The product of dimensions: static, or one named symbol times ones.
fn product(dims: &[Dim]) -> Option<Dim> {
    let mut symbol = None;
    let mut v = 1i64;
    for d in dims {
        match d {
            Dim::Static(s) => v = v.checked_mul(*s)?,
            Dim::Symbol(s) if !s.is_empty() && symbol.is_none() => symbol = Some(d.clone()),
            _ => return None,
        }
    }
    match symbol {
        Some(s) if v == 1 => Some(s),
        Some(_) => None,
        None => Some(Dim::Static(v)),
    }
}

/// The dimension `m` with `∏all = m · ∏known`, when the named symbols cancel out but at most
/// one of `all`'s, and the static parts divide.
fn quotient(all: &[Dim], known: &[Dim]) -> Option<Dim> {
    let mut symbols: Vec<&str> = Vec::new();
    let mut num = 1i64;
    for d in all {
        match d {
            Dim::Static(v) => num = num.checked_mul(*v)?,
            Dim::Symbol(s) if !s.is_empty() => symbols.push(s),
            _ => return None,
        }
    }
    let mut den = 1i64;
    for d in known {
        match d {
            Dim::Static(v) => den = den.checked_mul(*v)?,
            Dim::Symbol(s) => {
                let at = symbols.iter().position(|x| x == s)?;
                symbols.swap_remove(at);
            }
        }
    }
    if den == 0 || num % den != 0 {
        return None;
    }
    match symbols.as_slice() {
        [] => Some(Dim::Static(num / den)),
        [s] if num == den => Some(Dim::Symbol(s.to_string())),
        _ => None,
    }
}
