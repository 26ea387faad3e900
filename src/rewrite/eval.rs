//! Small tensors computed at load time from constants and shapes: the scale factors exporters
//! compute from a shape (`sqrt(1 / sqrt(Shape(q)[-1]))`) and the targets of the reshapes between
//! a projection and the attention (`Concat(Shape(y)[0], 1, …)`). One evaluator serves both: an
//! element is a number, or a dynamic size known only by its symbol (`Shape(y)[1]` of a tensor
//! whose length is named), which arithmetic keeps only where the result is that same size.

use std::collections::HashMap;

use super::graph::{Attr, Graph};
use super::{Dim, TensorType};

/// An element of a computed tensor.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    Num(f64),
    /// A dynamic size (an empty symbol: one inference left unnamed, equal to no other).
    Sym(String),
}

/// A computed tensor: its dimensions, its elements, and whether its type is an integer one
/// (ONNX's integer `Div` truncates).
#[derive(Debug, Clone)]
struct Val {
    dims: Vec<i64>,
    data: Vec<Item>,
    integer: bool,
}

/// A tensor's value when every element is a number.
#[derive(Debug, Clone)]
pub(super) struct Numbers {
    pub dims: Vec<i64>,
    pub data: Vec<f64>,
}

/// Evaluates tensors of a graph from its constants and the shapes ONNX Runtime inferred.
pub(super) struct Evaluator<'a> {
    g: &'a Graph,
    types: &'a HashMap<String, TensorType>,
    /// A tensor whose dimensions are better known than inferred (followed by the caller).
    known: Option<(&'a str, &'a [Dim])>,
}

/// Deepest chain of operators followed from a tensor back to constants and shapes.
const MAX_DEPTH: usize = 16;

impl<'a> Evaluator<'a> {
    pub(super) fn new(g: &'a Graph, types: &'a HashMap<String, TensorType>) -> Self {
        Evaluator {
            g,
            types,
            known: None,
        }
    }

    /// The same, taking `dims` as tensor `name`'s dimensions.
    pub(super) fn knowing(mut self, name: &'a str, dims: &'a [Dim]) -> Self {
        self.known = Some((name, dims));
        self
    }

    /// `t`'s value when every element is a number known at load time.
    pub(super) fn numbers(&self, t: &str) -> Option<Numbers> {
        let v = self.eval(t, 0)?;
        let data = v
            .data
            .iter()
            .map(|x| match x {
                Item::Num(n) => Some(*n),
                Item::Sym(_) => None,
            })
            .collect::<Option<Vec<f64>>>()?;
        Some(Numbers { dims: v.dims, data })
    }

    /// `t` as a one-dimensional shape: static sizes and named dynamic ones.
    pub(super) fn shape(&self, t: &str) -> Option<Vec<Dim>> {
        let v = self.eval(t, 0)?;
        if v.dims.len() > 1 {
            return None;
        }
        v.data
            .into_iter()
            .map(|x| match x {
                Item::Num(n) => (n.fract() == 0.0).then_some(Dim::Static(n as i64)),
                Item::Sym(s) => Some(Dim::Symbol(s)),
            })
            .collect()
    }

    fn dims_of(&self, t: &str) -> Option<&[Dim]> {
        match self.known {
            Some((name, dims)) if name == t => Some(dims),
            _ => self.types.get(t).map(|ty| ty.dims.as_slice()),
        }
    }

    fn eval(&self, t: &str, depth: usize) -> Option<Val> {
        if let Some(c) = self.g.constants.get(t) {
            return Some(Val {
                dims: c.dims.clone(),
                data: c.values.iter().map(|&v| Item::Num(v)).collect(),
                integer: is_integer(c.data_type),
            });
        }
        if depth > MAX_DEPTH {
            return None;
        }
        let n = self
            .g
            .nodes
            .iter()
            .find(|n| n.outputs.iter().any(|o| o == t))?;
        if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            return None;
        }
        let int_attr = |name: &str| match n.attr(name) {
            Some(Attr::Int(v)) => Some(*v),
            _ => None,
        };
        let arg = |i: usize| -> Option<Val> { self.eval(n.inputs.get(i)?, depth + 1) };
        let vector = |data: Vec<Item>, integer: bool| Val {
            dims: vec![data.len() as i64],
            data,
            integer,
        };
        // Python-style bounds of `[start, end)` over `len` elements.
        let clamp = |v: i64, len: i64| if v < 0 { (v + len).max(0) } else { v.min(len) };
        let numeric = |f: fn(f64) -> f64| -> Option<Val> {
            let mut v = arg(0)?;
            for x in &mut v.data {
                match x {
                    Item::Num(n) => *n = f(*n),
                    Item::Sym(_) => return None,
                }
            }
            Some(v)
        };
        let op = n.op_type.as_str();
        match op {
            "Shape" => {
                let dims = self.dims_of(n.inputs.first()?)?;
                let len = dims.len() as i64;
                let start = clamp(int_attr("start").unwrap_or(0), len) as usize;
                let end = clamp(int_attr("end").unwrap_or(len), len) as usize;
                let items = dims
                    .get(start..end.max(start))?
                    .iter()
                    .map(|d| match d {
                        Dim::Static(v) => Item::Num(*v as f64),
                        Dim::Symbol(s) => Item::Sym(s.clone()),
                    })
                    .collect();
                Some(vector(items, true))
            }
            "Slice" => {
                let data = arg(0)?;
                if data.dims.len() != 1 {
                    return None;
                }
                let (starts, ends) = (
                    self.numbers(n.inputs.get(1)?)?,
                    self.numbers(n.inputs.get(2)?)?,
                );
                if starts.data.len() != 1 || ends.data.len() != 1 {
                    return None;
                }
                let optional = |i: usize, want: f64| match n.inputs.get(i) {
                    Some(name) if !name.is_empty() => {
                        self.numbers(name).is_some_and(|v| v.data == [want])
                    }
                    _ => true,
                };
                if !(optional(3, 0.0) && optional(4, 1.0)) {
                    return None;
                }
                let len = data.data.len() as i64;
                let start = clamp(starts.data[0] as i64, len) as usize;
                let end = clamp(ends.data[0].min(i64::MAX as f64) as i64, len) as usize;
                Some(vector(
                    data.data.get(start..end.max(start))?.to_vec(),
                    data.integer,
                ))
            }
            "Gather" => {
                let (data, index) = (arg(0)?, self.numbers(n.inputs.get(1)?)?);
                if data.dims.len() != 1 || int_attr("axis").unwrap_or(0) != 0 {
                    return None;
                }
                let len = data.data.len() as i64;
                let picked = index
                    .data
                    .iter()
                    .map(|&i| {
                        let i = i as i64;
                        let i = if i < 0 { i + len } else { i };
                        data.data.get(usize::try_from(i).ok()?).cloned()
                    })
                    .collect::<Option<Vec<Item>>>()?;
                Some(Val {
                    dims: index.dims,
                    data: picked,
                    integer: data.integer,
                })
            }
            "Concat" => {
                let mut out = Vec::new();
                let mut integer = true;
                for i in 0..n.inputs.len() {
                    let part = arg(i)?;
                    if part.dims.len() > 1 {
                        return None;
                    }
                    integer &= part.integer;
                    out.extend(part.data);
                }
                Some(vector(out, integer))
            }
            "Cast" => {
                let mut v = arg(0)?;
                let to = int_attr("to")? as i32;
                use crate::onnx::DataType as T;
                let round: fn(f64) -> f64 = match T::from_code(to.into())? {
                    T::Float => |x| x as f32 as f64,
                    T::Float16 => |x| half::f16::from_f64(x).to_f64(),
                    T::Double => |x| x,
                    T::Int32 | T::Int64 => f64::trunc,
                    _ => return None,
                };
                for x in &mut v.data {
                    if let Item::Num(n) = x {
                        *n = round(*n);
                    }
                }
                v.integer = is_integer(to);
                Some(v)
            }
            "Sqrt" => numeric(f64::sqrt),
            "Reciprocal" => numeric(|x| 1.0 / x),
            "Neg" => numeric(|x| -x),
            "Identity" => arg(0),
            "Mul" | "Div" | "Add" | "Sub" => {
                let (a, b) = (arg(0)?, arg(1)?);
                let (la, lb) = (a.data.len(), b.data.len());
                if !(la == lb || la == 1 || lb == 1) {
                    return None;
                }
                let dims = if la > lb || (la == lb && a.dims.len() >= b.dims.len()) {
                    a.dims.clone()
                } else {
                    b.dims.clone()
                };
                let integer = a.integer && b.integer;
                fn pick(v: &Val, i: usize) -> Option<&Item> {
                    v.data.get(if v.data.len() == 1 { 0 } else { i })
                }
                let data = (0..la.max(lb))
                    .map(|i| binary(op, pick(&a, i)?, pick(&b, i)?, integer))
                    .collect::<Option<Vec<Item>>>()?;
                Some(Val {
                    dims,
                    data,
                    integer,
                })
            }
            "Unsqueeze" | "Squeeze" => {
                // One element only: the rank changes, the value does not.
                let v = arg(0)?;
                if v.data.len() != 1 {
                    return None;
                }
                let axes = n
                    .inputs
                    .get(1)
                    .filter(|a| !a.is_empty())
                    .and_then(|a| self.numbers(a))
                    .map_or(0, |a| a.data.len()) as i64;
                let rank = v.dims.len() as i64
                    + if op == "Unsqueeze" {
                        axes.max(1)
                    } else {
                        -(v.dims.len() as i64)
                    };
                Some(Val {
                    dims: vec![1; rank.max(0) as usize],
                    ..v
                })
            }
            _ => None,
        }
    }
}

/// Whether `data_type` (a `TensorProto.DataType` number) is one of ONNX's integer types.
fn is_integer(data_type: i32) -> bool {
    crate::onnx::DataType::from_code(data_type.into()).is_some_and(|t| t.is_integer())
}

/// One element of `op` (Mul, Div, Add, Sub). A symbol survives a multiplication or division by
/// one; anything else of a symbol is unknown.
fn binary(op: &str, x: &Item, y: &Item, integer: bool) -> Option<Item> {
    match (x, y) {
        (Item::Num(a), Item::Num(b)) => {
            let (a, b) = (*a, *b);
            Some(Item::Num(match op {
                "Mul" => a * b,
                "Add" => a + b,
                "Sub" => a - b,
                "Div" if integer => {
                    if b == 0.0 {
                        return None;
                    }
                    (a / b).trunc()
                }
                _ => a / b,
            }))
        }
        (Item::Sym(_), Item::Num(b)) if *b == 1.0 && matches!(op, "Mul" | "Div") => Some(x.clone()),
        (Item::Num(a), Item::Sym(_)) if *a == 1.0 && op == "Mul" => Some(y.clone()),
        _ => None,
    }
}
