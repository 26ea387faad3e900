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

/// Size in bytes of one element of an `onnx.TensorProto.DataType`, or `None` for types whose
/// elements are not a whole number of bytes (INT4, UINT4, FLOAT4E2M1, INT2, UINT2, FLOAT6*),
/// STRING, UNDEFINED and unknown values.
pub fn element_size(data_type: i32) -> Option<usize> {
    match data_type {
        // UINT8, INT8, BOOL, FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, FLOAT8E8M0
        2 | 3 | 9 | 17 | 18 | 19 | 20 | 24 => Some(1),
        // UINT16, INT16, FLOAT16, BFLOAT16
        4 | 5 | 10 | 16 => Some(2),
        // FLOAT, INT32, UINT32
        1 | 6 | 12 => Some(4),
        // INT64, DOUBLE, UINT64, COMPLEX64
        7 | 11 | 13 | 14 => Some(8),
        // COMPLEX128
        15 => Some(16),
        // UNDEFINED 0, STRING 8, UINT4 21, INT4 22, FLOAT4E2M1 23, UINT2 25, INT2 26,
        // FLOAT6E2M3 27, FLOAT6E3M2 28, and anything unknown.
        _ => None,
    }
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

// ---------------------------------------------------------------------------------------------
// Wire format
// ---------------------------------------------------------------------------------------------

/// Decoded value of one field. Length-delimited values are byte ranges into the model.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value {
    Varint(u64),
    Fixed64,
    Bytes(usize, usize),
    Group,
    Fixed32,
}

/// One field: its number, value, and the byte range `start..end` of the whole field
/// (tag included) in the model.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field {
    pub(crate) number: u32,
    wire: u8,
    pub(crate) value: Value,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// Iterator over the fields of the message in `data[pos..end]`.
pub(crate) struct Fields<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
    ctx: &'static str,
}

/// Maximum nesting of (deprecated) protobuf groups we are willing to skip.
const MAX_GROUP_DEPTH: usize = 64;

impl<'a> Fields<'a> {
    pub(crate) fn new(data: &'a [u8], pos: usize, end: usize, ctx: &'static str) -> Self {
        debug_assert!(pos <= end && end <= data.len());
        Fields {
            data,
            pos,
            end,
            ctx,
        }
    }

    /// Reads one tag; returns (field number, wire type, position after the tag).
    fn read_tag(&self, pos: usize) -> Result<(u32, u8, usize), String> {
        let (tag, next) = read_varint(self.data, pos, self.end, self.ctx)?;
        let tag = u32::try_from(tag)
            .map_err(|_| format!("{}: tag {tag} at byte {pos} is out of range", self.ctx))?;
        let number = tag >> 3;
        if number == 0 {
            return Err(format!(
                "{}: invalid field number 0 at byte {pos}",
                self.ctx
            ));
        }
        Ok((number, (tag & 7) as u8, next))
    }

    /// Skips a fixed-size or length-delimited value starting at `pos`; returns the value and
    /// the position after it. Groups are handled by the caller.
    fn read_value(&self, number: u32, wire: u8, pos: usize) -> Result<(Value, usize), String> {
        let ctx = self.ctx;
        match wire {
            0 => {
                let (v, next) = read_varint(self.data, pos, self.end, ctx)?;
                Ok((Value::Varint(v), next))
            }
            1 => Ok((Value::Fixed64, self.take(number, pos, 8)?)),
            2 => {
                let (len, start) = read_varint(self.data, pos, self.end, ctx)?;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                let end = self.take(number, start, len)?;
                Ok((Value::Bytes(start, end), end))
            }
            5 => Ok((Value::Fixed32, self.take(number, pos, 4)?)),
            _ => Err(format!(
                "{ctx}: field {number} at byte {pos} has invalid wire type {wire}"
            )),
        }
    }

    /// Checks that `len` bytes starting at `pos` lie within the message; returns `pos + len`.
    fn take(&self, number: u32, pos: usize, len: usize) -> Result<usize, String> {
        match pos.checked_add(len) {
            Some(end) if end <= self.end => Ok(end),
            _ => Err(format!(
                "{}: field {number} at byte {pos} needs {len} bytes, but only {} remain \
                 (truncated or corrupt model)",
                self.ctx,
                self.end - pos.min(self.end)
            )),
        }
    }

    pub(crate) fn next_field(&mut self) -> Result<Option<Field>, String> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let start = self.pos;
        let (number, wire, pos) = self.read_tag(start)?;
        let (value, end) = match wire {
            3 => (Value::Group, self.skip_group(number, pos)?),
            4 => {
                return Err(format!(
                    "{}: unexpected end-group tag for field {number} at byte {start}",
                    self.ctx
                ))
            }
            _ => self.read_value(number, wire, pos)?,
        };
        self.pos = end;
        Ok(Some(Field {
            number,
            wire,
            value,
            start,
            end,
        }))
    }

    /// Skips the body of a group started for field `number`, up to and including its end tag.
    fn skip_group(&self, number: u32, mut pos: usize) -> Result<usize, String> {
        let mut stack = [0u32; MAX_GROUP_DEPTH];
        let mut depth = 1;
        stack[0] = number;
        while depth > 0 {
            if pos >= self.end {
                return Err(format!(
                    "{}: group for field {} is not terminated (truncated or corrupt model)",
                    self.ctx,
                    stack[depth - 1]
                ));
            }
            let (n, wire, next) = self.read_tag(pos)?;
            pos = match wire {
                3 => {
                    if depth == MAX_GROUP_DEPTH {
                        return Err(format!(
                            "{}: groups nested too deeply at byte {pos}",
                            self.ctx
                        ));
                    }
                    stack[depth] = n;
                    depth += 1;
                    next
                }
                4 => {
                    if stack[depth - 1] != n {
                        return Err(format!(
                            "{}: end-group tag for field {n} at byte {pos} closes group {}",
                            self.ctx,
                            stack[depth - 1]
                        ));
                    }
                    depth -= 1;
                    next
                }
                _ => self.read_value(n, wire, next)?.1,
            };
        }
        Ok(pos)
    }
}

fn wire_error(ctx: &str, f: &Field, what: &str, expected: u8) -> String {
    format!(
        "{ctx}: field {} ({what}) at byte {} has wire type {}, expected {expected}",
        f.number, f.start, f.wire
    )
}

/// Reads a varint at `data[pos..end]`; returns the value and the position after it.
pub(crate) fn read_varint(
    data: &[u8],
    pos: usize,
    end: usize,
    ctx: &str,
) -> Result<(u64, usize), String> {
    let mut value = 0u64;
    for i in 0..10 {
        let p = pos + i;
        if p >= end {
            return Err(format!(
                "{ctx}: varint at byte {pos} runs past the end of its message \
                 (truncated or corrupt model)"
            ));
        }
        let b = data[p];
        if i == 9 && b > 1 {
            return Err(format!("{ctx}: varint at byte {pos} overflows 64 bits"));
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, p + 1));
        }
    }
    Err(format!(
        "{ctx}: varint at byte {pos} is longer than 10 bytes"
    ))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_tag(out: &mut Vec<u8>, number: u32, wire: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire));
}

pub(crate) fn put_varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
    put_tag(out, number, 0);
    put_varint(out, value);
}

pub(crate) fn put_len_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(out, number, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests;
