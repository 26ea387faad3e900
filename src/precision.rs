//! Precision variants: an export's encoder as exported (float32), or a variant of it with int8
//! weights (for CPUs) or float16 arithmetic (for GPUs), as `sam2-variant` makes
//! them.
//!
//! A variant says what it is in the model's metadata (`metadata_props`): `sam2.precision`
//! (`int8` or `fp16`), `sam2.precision.source` (the original's file name and SHA-256) and
//! `sam2.precision.tool`. A model without that key is read from its graph: quantisation operators
//! make it int8, float16 weights make it fp16 (a variant made by another tool), anything else is
//! float32. A variant runs exactly as the original does (same tensors in and out); it is another
//! model all the same: its embeddings carry its own fingerprint and precision, and a predictor
//! expecting the original's refuses them.

use std::fmt;

use crate::text::printable;

use crate::onnx::split::element_size;
use crate::onnx::wire::{Fields, Value};
use crate::onnx::DataType;

/// The arithmetic an encoder runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// As exported: float32 weights and arithmetic.
    #[default]
    Fp32,
    /// int8 weights (per channel), activations quantised per run: a CPU variant.
    Int8,
    /// float16 weights and arithmetic, inputs and outputs float32: a GPU variant.
    Fp16,
}

impl Precision {
    /// Values of the C ABI (`SAM2_PRECISION_*`).
    pub const ALL: [Precision; 3] = [Precision::Fp32, Precision::Int8, Precision::Fp16];

    /// The name in model metadata, embedding files and messages: `fp32`, `int8`, `fp16`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Int8 => "int8",
            Precision::Fp16 => "fp16",
        }
    }

    /// The precision of a name (as [`Precision::name`] writes it).
    pub fn parse(name: &str) -> Option<Self> {
        Precision::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a model file says, or shows, about its precision.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Variant {
    pub precision: Precision,
    /// `sam2.precision.source`: the original's file name and SHA-256, when the model says.
    pub source: Option<String>,
    /// `sam2.precision.tool`: what made the variant, when the model says.
    pub tool: Option<String>,
    /// The precision is read from the graph (no `sam2.precision` in its metadata).
    pub inferred: bool,
    /// A `sam2.precision` the graph contradicts (an int8 graph labelled fp32, say): the graph
    /// decides `precision`, and this keeps what the label claimed, to report it.
    pub contradicted: Option<Precision>,
    /// `sam2.attention_scores = int8`: the model asks for its attention scores in int8
    /// (`make_variant.py int8 --attention-scores int8` marks a video export's memory attention so).
    /// The library honours it on the CPU where the CPU multiplies int8 without saturating
    /// ([`crate::models::RewriteReport`] says whether it did).
    pub int8_scores: bool,
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(label) = self.contradicted {
            return write!(
                f,
                "{} (read from the graph; its metadata says {label}, which the graph contradicts)",
                self.precision
            );
        }
        match (self.precision, self.inferred) {
            (Precision::Fp32, _) => f.write_str("fp32 (as exported)"),
            (p, true) => write!(f, "{p} (read from the graph; the model does not say)"),
            (p, false) => {
                write!(f, "{p} variant")?;
                // Metadata: whatever the file says, escaped and cut ([`crate::text`]).
                if let Some(source) = &self.source {
                    write!(f, " of {}", printable(source))?;
                }
                if self.int8_scores {
                    write!(f, "; attention scores int8")?;
                }
                if let Some(tool) = &self.tool {
                    write!(f, "; made by {}", printable(tool))?;
                }
                Ok(())
            }
        }
    }
}

/// Operators that only a quantised graph has.
const QUANTISED_OPS: [&str; 9] = [
    "MatMulInteger",
    "ConvInteger",
    "DynamicQuantizeLinear",
    "DynamicQuantizeMatMul",
    "MatMulIntegerToFloat",
    "QLinearMatMul",
    "QLinearConv",
    "QuantizeLinear",
    "MatMulNBits",
];

// ONNX's protobuf field numbers (onnx.proto3).
const MODEL_GRAPH: u32 = 7;
const MODEL_METADATA_PROPS: u32 = 14;
const ENTRY_KEY: u32 = 1;
const ENTRY_VALUE: u32 = 2;
const GRAPH_NODE: u32 = 1;
const GRAPH_INITIALIZER: u32 = 5;
const NODE_OP_TYPE: u32 = 4;
const TENSOR_DIMS: u32 = 1;
const TENSOR_DATA_TYPE: u32 = 2;
const FLOAT: u64 = DataType::Float as u64;
const FLOAT16: u64 = DataType::Float16 as u64;

fn text(model: &[u8], value: Value) -> Option<&str> {
    match value {
        Value::Bytes(start, end) => std::str::from_utf8(&model[start..end]).ok(),
        _ => None,
    }
}

fn bytes(value: Value) -> Option<(usize, usize)> {
    match value {
        Value::Bytes(start, end) => Some((start, end)),
        _ => None,
    }
}

/// Reads a model's precision from its graph, and its description from its metadata. A
/// `sam2.precision` the graph contradicts is kept as [`Variant::contradicted`], never believed; one
/// the library does not know is an error (the model claims something it cannot honour); a model
/// that cannot be parsed is float32 here (loading it reports what is wrong).
pub(crate) fn detect(model: &[u8]) -> Result<Variant, String> {
    let mut declared: Option<String> = None;
    let mut source = None;
    let mut tool = None;
    let mut scores: Option<String> = None;
    let mut graph = None;
    let mut fields = Fields::new(model, 0, model.len(), "model");
    while let Ok(Some(field)) = fields.next_field() {
        match field.number {
            MODEL_GRAPH => graph = bytes(field.value),
            MODEL_METADATA_PROPS => {
                let Some((start, end)) = bytes(field.value) else {
                    continue;
                };
                let (mut key, mut value) = (None, None);
                let mut entry = Fields::new(model, start, end, "metadata entry");
                while let Ok(Some(f)) = entry.next_field() {
                    match f.number {
                        ENTRY_KEY => key = text(model, f.value),
                        ENTRY_VALUE => value = text(model, f.value),
                        _ => {}
                    }
                }
                let value = value.unwrap_or("").to_string();
                match key {
                    Some("sam2.precision") => declared = Some(value),
                    Some("sam2.precision.source") => source = Some(value),
                    Some("sam2.precision.tool") => tool = Some(value),
                    Some("sam2.attention_scores") => scores = Some(value),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    let int8_scores = match scores.as_deref() {
        None => false,
        Some("int8") => true,
        Some(other) => {
            return Err(format!(
                "its metadata declares sam2.attention_scores = `{}`, which this library does \
                 not know (it reads int8)",
                printable(other)
            ))
        }
    };
    let weights = graph.map_or(GraphWeights::default(), |(start, end)| {
        from_graph(model, start, end)
    });
    let shown = weights.precision();
    if let Some(name) = declared {
        let label = Precision::parse(&name).ok_or_else(|| {
            format!(
                "its metadata declares sam2.precision = `{}`, which this library does not \
                 know (it reads {})",
                printable(&name),
                Precision::ALL.map(|p| p.name()).join(", ")
            )
        })?;
        // The graph decides: a label is believed where the graph bears it out (int8 on a float32
        // graph that asks for int8 attention scores, which the library computes at load, too).
        let agrees = label == shown
            || match label {
                Precision::Int8 => weights.quantised || int8_scores,
                Precision::Fp16 => !weights.quantised && weights.f16_bytes > 0,
                Precision::Fp32 => false,
            };
        return Ok(Variant {
            precision: if agrees { label } else { shown },
            source,
            tool,
            inferred: false,
            contradicted: (!agrees).then_some(label),
            int8_scores,
        });
    }
    Ok(Variant {
        precision: shown,
        source: None,
        tool: None,
        inferred: shown != Precision::Fp32,
        contradicted: None,
        int8_scores,
    })
}

/// What a graph shows of its precision.
#[derive(Debug, Default)]
struct GraphWeights {
    /// A quantisation operator is present.
    quantised: bool,
    f32_bytes: u64,
    f16_bytes: u64,
}

impl GraphWeights {
    /// int8 when a quantisation operator is present; fp16 when float16 weights outweigh float32
    /// ones (an fp16 variant may keep a small float32 LayerNorm; one with a large float32 table
    /// and little else is fp16 only when it says so).
    fn precision(&self) -> Precision {
        if self.quantised {
            Precision::Int8
        } else if self.f16_bytes > self.f32_bytes {
            Precision::Fp16
        } else {
            Precision::Fp32
        }
    }
}

fn from_graph(model: &[u8], start: usize, end: usize) -> GraphWeights {
    let (mut f32_bytes, mut f16_bytes) = (0u64, 0u64);
    let mut fields = Fields::new(model, start, end, "graph");
    while let Ok(Some(field)) = fields.next_field() {
        let Some((s, e)) = bytes(field.value) else {
            continue;
        };
        match field.number {
            GRAPH_NODE => {
                let mut node = Fields::new(model, s, e, "node");
                while let Ok(Some(f)) = node.next_field() {
                    if f.number == NODE_OP_TYPE
                        && text(model, f.value).is_some_and(|op| QUANTISED_OPS.contains(&op))
                    {
                        return GraphWeights {
                            quantised: true,
                            ..GraphWeights::default()
                        };
                    }
                }
            }
            GRAPH_INITIALIZER => {
                let (mut elements, mut data_type) = (1u64, 0u64);
                let mut tensor = Fields::new(model, s, e, "initializer");
                while let Ok(Some(f)) = tensor.next_field() {
                    match (f.number, f.value) {
                        (TENSOR_DIMS, Value::Varint(d)) => elements = elements.saturating_mul(d),
                        (TENSOR_DATA_TYPE, Value::Varint(t)) => data_type = t,
                        _ => {}
                    }
                }
                let size = element_size(data_type as i32).unwrap_or(0) as u64;
                match data_type {
                    FLOAT => f32_bytes = f32_bytes.saturating_add(elements.saturating_mul(size)),
                    FLOAT16 => f16_bytes = f16_bytes.saturating_add(elements.saturating_mul(size)),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    GraphWeights {
        quantised: false,
        f32_bytes,
        f16_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::wire::{put_len_field, put_varint_field};

    fn entry(key: &str, value: &str) -> Vec<u8> {
        let mut e = Vec::new();
        put_len_field(&mut e, ENTRY_KEY, key.as_bytes());
        put_len_field(&mut e, ENTRY_VALUE, value.as_bytes());
        e
    }

    fn node(op: &str) -> Vec<u8> {
        let mut n = Vec::new();
        put_len_field(&mut n, NODE_OP_TYPE, op.as_bytes());
        n
    }

    fn initializer(dims: &[u64], data_type: u64) -> Vec<u8> {
        let mut t = Vec::new();
        for d in dims {
            put_varint_field(&mut t, TENSOR_DIMS, *d);
        }
        put_varint_field(&mut t, TENSOR_DATA_TYPE, data_type);
        t
    }

    fn model(metadata: &[(&str, &str)], nodes: &[&str], inits: &[(&[u64], u64)]) -> Vec<u8> {
        let mut graph = Vec::new();
        for op in nodes {
            put_len_field(&mut graph, GRAPH_NODE, &node(op));
        }
        for (dims, t) in inits {
            put_len_field(&mut graph, GRAPH_INITIALIZER, &initializer(dims, *t));
        }
        let mut m = Vec::new();
        put_varint_field(&mut m, 1, 8); // ir_version
        put_len_field(&mut m, MODEL_GRAPH, &graph);
        for (k, v) in metadata {
            put_len_field(&mut m, MODEL_METADATA_PROPS, &entry(k, v));
        }
        m
    }

    #[test]
    fn metadata_names_the_variant_and_its_source() {
        let m = model(
            &[
                ("sam2.precision", "int8"),
                ("sam2.precision.source", "a.onnx sha256:00"),
                ("sam2.precision.tool", "quantize_dynamic"),
            ],
            &["DynamicQuantizeLinear", "MatMulInteger"],
            &[(&[4, 4], FLOAT)],
        );
        let v = detect(&m).unwrap();
        assert_eq!(v.precision, Precision::Int8);
        assert!(!v.inferred);
        assert_eq!(v.source.as_deref(), Some("a.onnx sha256:00"));
        assert_eq!(
            v.to_string(),
            "int8 variant of a.onnx sha256:00; made by quantize_dynamic"
        );
    }

    #[test]
    fn metadata_may_ask_for_int8_attention_scores() {
        let m = model(
            &[
                ("sam2.precision", "int8"),
                ("sam2.precision.source", "m.onnx sha256:00"),
                ("sam2.attention_scores", "int8"),
            ],
            &["MatMul"],
            &[],
        );
        let v = detect(&m).unwrap();
        assert!(v.int8_scores);
        assert_eq!(
            v.to_string(),
            "int8 variant of m.onnx sha256:00; attention scores int8"
        );
        assert!(
            !detect(&model(&[("sam2.precision", "int8")], &[], &[]))
                .unwrap()
                .int8_scores
        );
        let e = detect(&model(&[("sam2.attention_scores", "int4")], &[], &[])).unwrap_err();
        assert!(e.contains("`int4`"), "{e}");
    }

    #[test]
    fn a_label_the_graph_contradicts_is_reported_not_believed() {
        // An int8 graph labelled fp32, a float32 graph labelled int8 or fp16, a float16 one
        // labelled fp32: the graph's precision, and the label kept to say it was wrong.
        let quantised: &[&str] = &["DynamicQuantizeLinear", "MatMulInteger"];
        let half: &[(&[u64], u64)] = &[(&[256, 256], FLOAT16)];
        let float: &[(&[u64], u64)] = &[(&[256, 256], FLOAT)];
        let table: &[(&[u64], u64)] = &[(&[16, 16], FLOAT16), (&[4096, 2], FLOAT)];
        for (label, nodes, inits, graph) in [
            ("fp32", quantised, float, Precision::Int8),
            ("int8", &["MatMul"][..], float, Precision::Fp32),
            ("fp16", &["MatMul"][..], float, Precision::Fp32),
            ("fp32", &["MatMul"][..], half, Precision::Fp16),
        ] {
            let v = detect(&model(&[("sam2.precision", label)], nodes, inits)).unwrap();
            let said = Precision::parse(label).unwrap();
            assert_eq!(
                (v.precision, v.contradicted),
                (graph, Some(said)),
                "{label}"
            );
            assert_eq!(
                v.to_string(),
                format!(
                    "{graph} (read from the graph; its metadata says {label}, which the graph \
                     contradicts)"
                )
            );
        }
        // Labels the graph bears out, and int8 on a float32 graph that asks for int8 scores.
        for (label, nodes, inits, meta) in [
            ("int8", quantised, float, None),
            ("fp16", &["MatMul"][..], half, None),
            ("fp32", &["MatMul"][..], float, None),
            (
                "int8",
                &["MatMul"][..],
                float,
                Some(("sam2.attention_scores", "int8")),
            ),
            // float16 weights beside a larger float32 table (a position encoding)
            ("fp16", &["Conv"][..], table, None),
        ] {
            let mut metadata = vec![("sam2.precision", label)];
            metadata.extend(meta);
            let v = detect(&model(&metadata, nodes, inits)).unwrap();
            assert_eq!(v.precision.name(), label);
            assert_eq!(v.contradicted, None);
        }
    }

    #[test]
    fn metadata_is_shown_escaped_and_cut() {
        let forged = format!(
            "a.onnx\u{1b}[2J\u{7}\nprecision: fp32{}",
            "z".repeat(100_000)
        );
        let m = model(
            &[
                ("sam2.precision", "int8"),
                ("sam2.precision.source", &forged),
                ("sam2.precision.tool", "q\r\u{1b}]0;title\u{7}"),
            ],
            &["DynamicQuantizeLinear", "MatMulInteger"],
            &[],
        );
        let shown = detect(&m).unwrap().to_string();
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert!(shown.starts_with("int8 variant of a.onnx\\u{1b}[2J\\u{7}\\u{a}precision: fp32zz"));
        assert!(shown.contains("more characters); made by q\\u{d}\\u{1b}]0;title\\u{7}"));
        assert!(shown.len() < 500, "{} bytes", shown.len());
        let e = detect(&model(&[("sam2.precision", &forged)], &[], &[])).unwrap_err();
        assert!(!e.chars().any(char::is_control) && e.len() < 500, "{e:?}");
    }

    #[test]
    fn an_unknown_declared_precision_is_refused() {
        let m = model(&[("sam2.precision", "bf16")], &[], &[]);
        let e = detect(&m).unwrap_err();
        assert!(
            e.contains("`bf16`") && e.contains("fp32, int8, fp16"),
            "{e}"
        );
    }

    #[test]
    fn the_graph_tells_when_the_metadata_does_not() {
        let plain = model(
            &[("other", "x")],
            &["Conv", "MatMul"],
            &[(&[64, 64], FLOAT)],
        );
        assert_eq!(detect(&plain).unwrap(), Variant::default());
        let quantised = model(&[], &["DynamicQuantizeLinear", "MatMulInteger"], &[]);
        let v = detect(&quantised).unwrap();
        assert_eq!((v.precision, v.inferred), (Precision::Int8, true));
        // fp16 when float16 weights outweigh float32 ones (a float32 LayerNorm may stay).
        let half = model(&[], &["MatMul"], &[(&[256, 256], FLOAT16), (&[256], FLOAT)]);
        assert_eq!(detect(&half).unwrap().precision, Precision::Fp16);
        let mostly_float = model(&[], &["Cast"], &[(&[16], FLOAT16), (&[256, 256], FLOAT)]);
        assert_eq!(detect(&mostly_float).unwrap().precision, Precision::Fp32);
    }

    #[test]
    fn garbage_is_float32_not_a_panic() {
        for bytes in [&b""[..], b"\xff\xff\xff", b"\x0a\x05ab"] {
            assert_eq!(detect(bytes).unwrap().precision, Precision::Fp32);
        }
    }

    #[test]
    fn names_round_trip() {
        for p in Precision::ALL {
            assert_eq!(Precision::parse(p.name()), Some(p));
        }
        assert_eq!(Precision::parse("FP32"), None);
    }
}
