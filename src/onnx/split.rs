//! Rewrites an ONNX model so that its large weights can be served to every session from one
//! copy.
//!
//! [`split_with_location`] walks the protobuf wire format by hand (no protobuf dependency) and
//! produces:
//!
//! * a rewritten `ModelProto` in which every large initializer of the main graph has had its
//!   `raw_data` removed and replaced by an external-data reference
//!   (`data_location = EXTERNAL`, `external_data = {location, offset, length}`),
//! * the list of moved [`Initializer`]s, each with the byte range of its data in the input bytes.
//!
//! How the library uses it (`weights.rs`): a model is optimised once per process; the optimised
//! model is split with a location naming an empty file (`platform::EMPTY_FILE`, `/dev/null` on
//! Unix), which ONNX Runtime checks exists and never reads, because every session is handed each
//! moved initializer with `AddInitializer` (ort: `SessionBuilder::with_initializer`), which it
//! uses in place. The sessions run the graph as it is (no optimisation of their own), so nothing
//! reads through the references. [`split`] names the placeholder [`INPLACE_LOCATION`]; the library
//! calls it only to check a file's wire format when ONNX Runtime has refused to load it.
//!
//! Note also that ONNX Runtime's weight prepacking (on by default for `MatMul`/`Conv` on CPU)
//! makes a per-session packed copy of such weights unless the sessions share a prepacked-weights
//! container (ort: `PrepackedWeights`) or prepacking is disabled (`session.disable_prepacking`).
//!
//! Everything else is preserved byte for byte: every other field of a moved `TensorProto` (name,
//! dims, data_type, doc_string, metadata, unknown fields), every other field of the `GraphProto`
//! (nodes, inputs, outputs, ...; subgraphs of `If`/`Loop` nodes are inside the nodes and are not
//! touched), and every other field of the `ModelProto`. Only the length prefixes of the rewritten
//! `GraphProto` and `TensorProto`s are re-encoded. A graph in which nothing moves is copied
//! verbatim (including its original, possibly non-minimal, length prefix), so splitting an already
//! split model returns identical bytes and no initializers.
//!
//! The walker is defensive: every length and varint is checked against the buffer, nothing is
//! allocated from an unchecked length, and malformed input yields `Err` with a message naming the
//! message type, field and byte offset. It never panics.

use std::collections::HashSet;

use super::data_type::DataType;
use super::wire::{put_len_field, put_tag, put_varint, read_varint, wire_error, Fields, Value};

/// The `location` [`split`] writes into every rewritten initializer's external data: a name of
/// no file (the library's sessions take the initializers with `AddInitializer` instead).
pub(crate) const INPLACE_LOCATION: &str = "sam2-inplace.bin";

/// One initializer moved out of the model proto.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initializer {
    /// The initializer's (tensor's) name in the main graph.
    pub name: String,
    /// `onnx.TensorProto.DataType` (1 = FLOAT, 7 = INT64, 10 = FLOAT16, ...).
    pub data_type: i32,
    /// The tensor's shape (every dimension is `>= 0`; empty for a scalar).
    pub dims: Vec<i64>,
    /// Byte offset of the tensor's raw data in the ORIGINAL model bytes. Not aligned in general:
    /// protobuf places `raw_data` at arbitrary byte offsets.
    pub offset: usize,
    /// Length of the raw data in bytes (`== product(dims) * element_size(data_type)`).
    pub len: usize,
}

/// Result of [`split`].
#[derive(Debug, Clone)]
pub struct Split {
    /// The rewritten `ModelProto`.
    pub model: Vec<u8>,
    /// The moved initializers, in the order they appear in the main graph.
    pub initializers: Vec<Initializer>,
}

/// Size in bytes of one element of an `onnx.TensorProto.DataType` number, or `None` for types
/// whose elements are not a whole number of bytes, strings, UNDEFINED and unknown numbers.
pub fn element_size(data_type: i32) -> Option<usize> {
    DataType::from_code(data_type.into()).and_then(DataType::size)
}

/// Moves every initializer of the main graph whose data is in `raw_data` and is at least
/// `min_bytes` long out of the proto.
///
/// An initializer is moved only if all of these hold; otherwise it is left inline, untouched:
/// * it is a `GraphProto.initializer` (field 5) of the main graph (`ModelProto.graph`, field 7);
///   initializers of subgraphs, functions, training info and sparse initializers stay inline;
/// * it has `raw_data` (field 9) and no typed data field (`float_data`, `int32_data`,
///   `string_data`, `int64_data`, `double_data`, `uint64_data`), no `segment`, no `external_data`
///   entries and `data_location` is not EXTERNAL;
/// * its `raw_data` is at least `max(min_bytes, 1)` bytes long (empty tensors never move);
/// * [`element_size`] knows its data type (sub-byte and string types stay inline).
///
/// For an initializer that qualifies, these are errors (rather than reasons to skip it, since the
/// caller would otherwise build a wrongly sized tensor): a missing, empty or non-UTF-8 name, a
/// negative dimension, a shape whose byte size overflows, `raw_data` whose length differs from
/// `product(dims) * element_size(data_type)`, and two moved initializers with the same name.
///
/// # Errors
///
/// Besides the cases above: a model without a `graph` field, and any malformed protobuf on the
/// walked path (bad varint, a length past the end of its enclosing message, an invalid wire type
/// or field number, a wrong wire type for an interpreted field, an unterminated group). Nested
/// messages that are copied through without being interpreted (nodes, value infos, ...) are only
/// checked to lie within their parent; ONNX Runtime parses them later.
pub fn split(model: &[u8], min_bytes: usize) -> Result<Split, String> {
    split_with_location(model, min_bytes, INPLACE_LOCATION)
}

/// [`split`], with the external-data entries naming `location` instead of [`INPLACE_LOCATION`]
/// (the library names the model file itself, so the references are true and the file exists,
/// which ONNX Runtime 1.31 checks even for initializers supplied in place).
pub fn split_with_location(
    model: &[u8],
    min_bytes: usize,
    location: &str,
) -> Result<Split, String> {
    let min_bytes = min_bytes.max(1);
    let mut out = Vec::new();
    let mut initializers = Vec::new();
    let mut names = HashSet::new();
    let mut graphs = 0usize;
    let mut fields = Fields::new(model, 0, model.len(), "ModelProto");
    while let Some(f) = fields.next_field()? {
        match (f.number, f.value) {
            (7, Value::Bytes(start, end)) => {
                graphs += 1;
                let mut graph = Vec::new();
                let changed = split_graph(
                    model,
                    start,
                    end,
                    min_bytes,
                    location,
                    &mut graph,
                    &mut initializers,
                    &mut names,
                )?;
                if changed {
                    put_len_field(&mut out, 7, &graph);
                } else {
                    out.extend_from_slice(&model[f.start..f.end]);
                }
            }
            (7, _) => return Err(wire_error("ModelProto", &f, "graph", 2)),
            _ => out.extend_from_slice(&model[f.start..f.end]),
        }
    }
    if graphs == 0 {
        return Err("ModelProto has no graph (field 7); not an ONNX model".to_string());
    }
    Ok(Split {
        model: out,
        initializers,
    })
}

/// The names of the main graph's outputs (`GraphProto.output`, field 12; each a `ValueInfoProto`
/// whose name is field 1).
pub(crate) fn graph_output_names(model: &[u8]) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut fields = Fields::new(model, 0, model.len(), "ModelProto");
    while let Some(f) = fields.next_field()? {
        let (7, Value::Bytes(start, end)) = (f.number, f.value) else {
            continue;
        };
        let mut graph = Fields::new(model, start, end, "GraphProto");
        while let Some(g) = graph.next_field()? {
            let (12, Value::Bytes(vs, ve)) = (g.number, g.value) else {
                continue;
            };
            let mut info = Fields::new(model, vs, ve, "ValueInfoProto");
            while let Some(i) = info.next_field()? {
                if let (1, Value::Bytes(ns, ne)) = (i.number, i.value) {
                    let name = std::str::from_utf8(&model[ns..ne])
                        .map_err(|_| format!("graph output name at byte {ns} is not UTF-8"))?;
                    names.push(name.to_string());
                }
            }
        }
    }
    Ok(names)
}

/// Rewrites the GraphProto in `model[start..end]` into `out`; returns whether anything moved.
#[allow(clippy::too_many_arguments)]
fn split_graph(
    model: &[u8],
    start: usize,
    end: usize,
    min_bytes: usize,
    location: &str,
    out: &mut Vec<u8>,
    initializers: &mut Vec<Initializer>,
    names: &mut HashSet<String>,
) -> Result<bool, String> {
    let mut changed = false;
    let mut fields = Fields::new(model, start, end, "GraphProto");
    while let Some(f) = fields.next_field()? {
        match (f.number, f.value) {
            (5, Value::Bytes(ts, te)) => {
                let info = TensorInfo::parse(model, ts, te)?;
                match info.to_move(model, ts, min_bytes)? {
                    Some(init) => {
                        if !names.insert(init.name.clone()) {
                            return Err(format!(
                                "GraphProto: two initializers named {:?} (TensorProto at byte {ts})",
                                init.name
                            ));
                        }
                        let tensor = rewrite_tensor(model, ts, te, &init, location)?;
                        put_len_field(out, 5, &tensor);
                        initializers.push(init);
                        changed = true;
                    }
                    None => out.extend_from_slice(&model[f.start..f.end]),
                }
            }
            (5, _) => return Err(wire_error("GraphProto", &f, "initializer", 2)),
            _ => out.extend_from_slice(&model[f.start..f.end]),
        }
    }
    Ok(changed)
}

/// What [`split`] needs to know about one `TensorProto`.
#[derive(Default)]
struct TensorInfo {
    dims: Vec<i64>,
    data_type: i32,
    /// Byte range of the last `name` field's value.
    name: Option<(usize, usize)>,
    /// Byte range of the last `raw_data` field's value (protobuf: the last one wins).
    raw: Option<(usize, usize)>,
    typed_data: bool,
    segment: bool,
    external_entries: usize,
    data_location: i32,
}

impl TensorInfo {
    fn parse(model: &[u8], start: usize, end: usize) -> Result<TensorInfo, String> {
        const CTX: &str = "TensorProto";
        let mut t = TensorInfo::default();
        let mut fields = Fields::new(model, start, end, CTX);
        while let Some(f) = fields.next_field()? {
            match (f.number, f.value) {
                (1, Value::Varint(v)) => t.dims.push(v as i64),
                (1, Value::Bytes(s, e)) => {
                    // Packed dims: a run of varints filling the field exactly.
                    let mut pos = s;
                    while pos < e {
                        let (v, next) = read_varint(model, pos, e, "TensorProto.dims (packed)")?;
                        t.dims.push(v as i64);
                        pos = next;
                    }
                }
                (1, _) => return Err(wire_error(CTX, &f, "dims", 0)),
                // int32 / enum fields: protobuf truncates the 64-bit varint to 32 bits.
                (2, Value::Varint(v)) => t.data_type = v as i32,
                (2, _) => return Err(wire_error(CTX, &f, "data_type", 0)),
                (3, _) => t.segment = true,
                (4 | 5 | 6 | 7 | 10 | 11, _) => t.typed_data = true,
                (8, Value::Bytes(s, e)) => t.name = Some((s, e)),
                (8, _) => return Err(wire_error(CTX, &f, "name", 2)),
                (9, Value::Bytes(s, e)) => t.raw = Some((s, e)),
                (9, _) => return Err(wire_error(CTX, &f, "raw_data", 2)),
                (13, _) => t.external_entries += 1,
                (14, Value::Varint(v)) => t.data_location = v as i32,
                (14, _) => return Err(wire_error(CTX, &f, "data_location", 0)),
                _ => {}
            }
        }
        Ok(t)
    }

    /// The initializer to move, if this tensor qualifies (see [`split`]).
    fn to_move(
        &self,
        model: &[u8],
        tensor_start: usize,
        min_bytes: usize,
    ) -> Result<Option<Initializer>, String> {
        let Some((raw_start, raw_end)) = self.raw else {
            return Ok(None);
        };
        let len = raw_end - raw_start;
        if self.typed_data
            || self.segment
            || self.external_entries > 0
            || self.data_location == 1
            || len < min_bytes
        {
            return Ok(None);
        }
        let Some(elem) = element_size(self.data_type) else {
            return Ok(None);
        };
        let at = format!("TensorProto at byte {tensor_start}");
        let name = match self.name {
            Some((s, e)) if e > s => std::str::from_utf8(&model[s..e])
                .map_err(|_| format!("{at}: initializer name is not valid UTF-8"))?,
            _ => return Err(format!("{at}: initializer with raw_data has no name")),
        };
        let mut expected = elem;
        for &d in &self.dims {
            let d = usize::try_from(d)
                .map_err(|_| format!("{at}: initializer {name:?} has negative dimension {d}"))?;
            expected = expected.checked_mul(d).ok_or_else(|| {
                format!("{at}: initializer {name:?} shape {:?} overflows", self.dims)
            })?;
        }
        if expected != len {
            return Err(format!(
                "{at}: initializer {name:?} has {len} bytes of raw_data, but shape {:?} of \
                 data type {} needs {expected}",
                self.dims, self.data_type
            ));
        }
        Ok(Some(Initializer {
            name: name.to_string(),
            data_type: self.data_type,
            dims: self.dims.clone(),
            offset: raw_start,
            len,
        }))
    }
}

/// Re-encodes the TensorProto in `model[start..end]` without `raw_data` and `data_location`,
/// followed by the external-data reference for `init`.
fn rewrite_tensor(
    model: &[u8],
    start: usize,
    end: usize,
    init: &Initializer,
    location: &str,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity((end - start - init.len).saturating_add(64));
    let mut fields = Fields::new(model, start, end, "TensorProto");
    while let Some(f) = fields.next_field()? {
        match f.number {
            9 | 14 => {}
            _ => out.extend_from_slice(&model[f.start..f.end]),
        }
    }
    let offset = init.offset.to_string();
    let length = init.len.to_string();
    for (key, value) in [
        ("location", location),
        ("offset", &offset),
        ("length", &length),
    ] {
        let mut entry = Vec::with_capacity(key.len() + value.len() + 4);
        put_len_field(&mut entry, 1, key.as_bytes());
        put_len_field(&mut entry, 2, value.as_bytes());
        put_len_field(&mut out, 13, &entry);
    }
    put_tag(&mut out, 14, 0);
    put_varint(&mut out, 1); // DataLocation.EXTERNAL
    Ok(out)
}

#[cfg(test)]
#[path = "split_tests.rs"]
mod tests;
