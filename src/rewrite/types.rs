//! The types ONNX Runtime infers for the tensors a rewrite reads ([`super::probe`]).

use super::*;

/// The inferred type of a tensor: its element type, and its dimensions (a static size, or the
/// symbol of a dynamic one; an empty symbol is an unnamed dynamic size).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TensorType {
    pub elem: Elem,
    pub dims: Vec<Dim>,
}

/// Element types, as far as the rewrite cares: the fused op takes float32 and float16 (an fp16
/// variant's graph, `sam2-variant`).
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
    pub(super) fn value(&self) -> Option<i64> {
        match self {
            Dim::Static(v) => Some(*v),
            Dim::Symbol(_) => None,
        }
    }

    /// Whether two dimensions are known to be equal.
    pub(super) fn same(&self, other: &Dim) -> bool {
        match (self, other) {
            (Dim::Static(a), Dim::Static(b)) => a == b,
            (Dim::Symbol(a), Dim::Symbol(b)) => !a.is_empty() && a == b,
            _ => false,
        }
    }

    /// Whether two dimensions cannot be equal.
    pub(super) fn differs(&self, other: &Dim) -> bool {
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
pub(super) fn generated_symbol(s: &str) -> bool {
    s.strip_prefix("unk__")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}
