//! Rewrites an ONNX model so that its large weights can be shared between sessions.
//!
//! ONNX Runtime's `AddInitializer` (ort: `SessionBuilder::with_initializer`) lets a session use a
//! caller-owned tensor buffer in place, but the model proto handed to the session still has to be
//! parsed; if it carries the weights inline (`raw_data`), every session parses its own copy of them.
//! [`split`] walks the protobuf wire format by hand (no protobuf dependency) and produces:
//!
//! * a rewritten `ModelProto` in which every large initializer of the main graph has had its
//!   `raw_data` removed and replaced by an external-data reference
//!   (`data_location = EXTERNAL`, `external_data = {location: "sam2-inplace.bin", offset, length}`),
//! * the list of moved [`Initializer`]s, each with the byte range of its data in the **original**
//!   model bytes, from which the caller serves every one of them in place with `AddInitializer`.
//!
//! The location [`INPLACE_LOCATION`] (`"sam2-inplace.bin"`) names a file that never exists on
//! disk. The `offset`/`length` written next to it are the offset and length of the tensor's bytes
//! in the ORIGINAL model bytes, so the reference is truthful once the original bytes are
//! registered under that name. How ONNX Runtime (checked with 1.31.1) treats such a model:
//!
//! * Creating a session from the rewritten bytes with only `AddInitializer` FAILS: for a model
//!   loaded from bytes, ONNX Runtime validates at load time that every external-data file exists
//!   (relative to the working directory), before it looks at `AddInitializer` values.
//! * ONNX Runtime's graph optimizers (fusions, layout transforms) READ the data of some moved
//!   initializers through the external-data reference even though they are supplied with
//!   `AddInitializer` (an empty file of that name makes session creation fail; an all-zero buffer
//!   gives wrong outputs).
//!
//! So every session must also register the original model bytes as the in-memory file
//! [`INPLACE_LOCATION`] (`AddExternalInitializersFromFilesInMemory`, ort:
//! `SessionBuilder::with_external_initializer_file_in_memory(INPLACE_LOCATION, Arc<[u8]>)`), in
//! addition to `AddInitializer` for every moved initializer. Then ONNX Runtime never touches the
//! file system for it, uses the `AddInitializer` buffers in place, and reads the registered
//! bytes only for what its optimizers derive (fused or re-laid-out weights, which are per-session
//! anyway). Registering the in-memory file alone, without `AddInitializer`, copies every weight
//! into every session. Alternatively, [`split_with_location`] names the original model file
//! itself (the offsets are into it), which exists on disk; for a model created from bytes, ONNX
//! Runtime then resolves it against `session.model_external_initializers_file_folder_path`
//! (or the working directory) and opens that file for what its optimizers derive.
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

/// The `location` written into every rewritten initializer's external data. It names a file that
/// never exists on disk; register the original model bytes under this name as an in-memory
/// external-data file in every session (see the module documentation).
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
enum Value {
    Varint(u64),
    Fixed64,
    Bytes(usize, usize),
    Group,
    Fixed32,
}

/// One field: its number, value, and the byte range `start..end` of the whole field
/// (tag included) in the model.
#[derive(Clone, Copy, Debug)]
struct Field {
    number: u32,
    wire: u8,
    value: Value,
    start: usize,
    end: usize,
}

/// Iterator over the fields of the message in `data[pos..end]`.
struct Fields<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
    ctx: &'static str,
}

/// Maximum nesting of (deprecated) protobuf groups we are willing to skip.
const MAX_GROUP_DEPTH: usize = 64;

impl<'a> Fields<'a> {
    fn new(data: &'a [u8], pos: usize, end: usize, ctx: &'static str) -> Self {
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

    fn next_field(&mut self) -> Result<Option<Field>, String> {
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
fn read_varint(data: &[u8], pos: usize, end: usize, ctx: &str) -> Result<(u64, usize), String> {
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

fn put_len_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(out, number, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    // ---- encoding helpers -------------------------------------------------------------------

    fn varint(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, v);
        out
    }

    fn vfield(number: u32, v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_tag(&mut out, number, 0);
        put_varint(&mut out, v);
        out
    }

    fn lfield(number: u32, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_len_field(&mut out, number, bytes);
        out
    }

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    fn entry(key: &str, value: &str) -> Vec<u8> {
        cat(&[&lfield(1, key.as_bytes()), &lfield(2, value.as_bytes())])
    }

    /// A raw-data tensor; `packed` selects packed or unpacked dims.
    fn raw_tensor(name: &str, dt: i32, dims: &[i64], data: &[u8], packed: bool) -> Vec<u8> {
        let mut t = Vec::new();
        if packed {
            let body: Vec<u8> = dims.iter().flat_map(|&d| varint(d as u64)).collect();
            t.extend(lfield(1, &body));
        } else {
            for &d in dims {
                t.extend(vfield(1, d as u64));
            }
        }
        t.extend(vfield(2, dt as u64));
        t.extend(lfield(8, name.as_bytes()));
        t.extend(lfield(9, data));
        t
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// Named pieces of the hand-built model, to check what was preserved.
    struct Built {
        model: Vec<u8>,
        big_w: Vec<u8>,
        big_b: Vec<u8>,
        big_i64: Vec<u8>,
    }

    /// A ModelProto exercising most of the cases. The graph is the LAST top-level field, so every
    /// proper prefix of the model lacks a complete graph.
    fn build_model() -> Built {
        let big_w = pattern(4 * 8 * 9 * 10, 1); // FLOAT [8, 9, 10] = 2880 bytes, unpacked dims
        let big_b = pattern(2 * 3000, 2); // FLOAT16 [3000] = 6000 bytes, packed dims
        let big_i64 = pattern(8 * 300, 3); // INT64 [300] = 2400 bytes
        let mut w = raw_tensor("w", 1, &[8, 9, 10], &big_w, false);
        // Extra fields that must survive: doc_string, metadata_props, unknown fixed32 / fixed64 /
        // varint fields, and a zero data_location.
        w.extend(lfield(12, b"weight doc"));
        w.extend(vfield(14, 0));
        w.extend(lfield(16, &entry("k", "v")));
        w.extend(cat(&[&varint(99 << 3 | 5), &[0, 1, 0, 1]]));
        w.extend(cat(&[&varint(100 << 3 | 1), &[7; 8]]));
        w.extend(vfield(1000, 12345));
        let b = raw_tensor("b", 10, &[3000], &big_b, true);
        // int64 tensor with the name first and raw_data before dims.
        let i64t = cat(&[
            &lfield(8, b"idx"),
            &lfield(9, &big_i64),
            &vfield(2, 7),
            &vfield(1, 300),
        ]);
        let small = raw_tensor("small", 1, &[2], &pattern(8, 4), true);
        let typed = cat(&[
            &vfield(1, 3),
            &vfield(2, 1),
            &lfield(4, &pattern(12, 5)),
            &lfield(8, b"typed"),
        ]);
        let int4 = raw_tensor("int4", 22, &[4000], &pattern(2000, 6), true);
        let already_external = cat(&[
            &vfield(1, 1000),
            &vfield(2, 1),
            &lfield(8, b"ext"),
            &lfield(13, &entry("location", "weights.bin")),
            &vfield(14, 1),
        ]);
        // A node with an If-style subgraph attribute holding a big initializer: left alone.
        let sub_init = raw_tensor("sub_w", 1, &[1000], &pattern(4000, 7), true);
        let subgraph = cat(&[&lfield(5, &sub_init), &lfield(2, b"then")]);
        let attr = cat(&[
            &lfield(1, b"then_branch"),
            &lfield(6, &subgraph),
            &vfield(20, 5),
        ]);
        let node = cat(&[&lfield(4, b"If"), &lfield(5, &attr), &lfield(3, b"n0")]);
        let input = lfield(1, b"x");
        let graph = cat(&[
            &lfield(1, &node),
            &lfield(2, b"main"),
            &lfield(5, &w),
            &lfield(5, &small),
            &lfield(5, &b),
            &lfield(5, &typed),
            &lfield(5, &i64t),
            &lfield(5, &int4),
            &lfield(5, &already_external),
            &lfield(11, &input),
            &lfield(12, &input),
        ]);
        // A non-minimal (padded) length prefix for the opset_import field.
        let opset = cat(&[&lfield(1, b""), &vfield(2, 17)]);
        let mut padded_opset = vec![8 << 3 | 2];
        padded_opset.extend([opset.len() as u8 | 0x80, 0x00]);
        padded_opset.extend(&opset);
        // An unknown group field 30 containing a nested group 31 and a varint.
        let group = cat(&[
            &varint(30 << 3 | 3),
            &vfield(1, 5),
            &varint(31 << 3 | 3),
            &varint(31 << 3 | 4),
            &varint(30 << 3 | 4),
        ]);
        let model = cat(&[
            &vfield(1, 8),
            &padded_opset,
            &lfield(2, b"handmade"),
            &group,
            &lfield(14, &entry("author", "test")),
            &lfield(7, &graph),
        ]);
        Built {
            model,
            big_w,
            big_b,
            big_i64,
        }
    }

    // ---- an independent reader used to check results -----------------------------------------

    #[derive(Debug, Default, Clone, PartialEq)]
    struct Parsed {
        name: String,
        dims: Vec<i64>,
        data_type: i32,
        raw: Option<(usize, usize)>,
        location: i32,
        external: Vec<(String, String)>,
    }

    /// All top-level fields of a message as (number, bytes of the whole field).
    fn fields_of(data: &[u8], start: usize, end: usize) -> Vec<(u32, Value, Vec<u8>)> {
        let mut out = Vec::new();
        let mut it = Fields::new(data, start, end, "test");
        while let Some(f) = it.next_field().unwrap() {
            out.push((f.number, f.value, data[f.start..f.end].to_vec()));
        }
        out
    }

    fn graph_range(model: &[u8]) -> (usize, usize) {
        let mut it = Fields::new(model, 0, model.len(), "test");
        while let Some(f) = it.next_field().unwrap() {
            if let (7, Value::Bytes(s, e)) = (f.number, f.value) {
                return (s, e);
            }
        }
        panic!("no graph");
    }

    fn parse_initializers(model: &[u8]) -> Vec<Parsed> {
        let (gs, ge) = graph_range(model);
        let mut out = Vec::new();
        for (number, value, _) in fields_of(model, gs, ge) {
            let (5, Value::Bytes(ts, te)) = (number, value) else {
                continue;
            };
            let mut p = Parsed::default();
            for (n, v, _) in fields_of(model, ts, te) {
                match (n, v) {
                    (1, Value::Varint(d)) => p.dims.push(d as i64),
                    (1, Value::Bytes(s, e)) => {
                        let mut pos = s;
                        while pos < e {
                            let (d, next) = read_varint(model, pos, e, "test").unwrap();
                            p.dims.push(d as i64);
                            pos = next;
                        }
                    }
                    (2, Value::Varint(d)) => p.data_type = d as i32,
                    (8, Value::Bytes(s, e)) => {
                        p.name = String::from_utf8(model[s..e].to_vec()).unwrap()
                    }
                    (9, Value::Bytes(s, e)) => p.raw = Some((s, e)),
                    (14, Value::Varint(d)) => p.location = d as i32,
                    (13, Value::Bytes(s, e)) => {
                        let mut kv = (String::new(), String::new());
                        for (k, v, _) in fields_of(model, s, e) {
                            let Value::Bytes(a, b) = v else { panic!() };
                            let text = String::from_utf8(model[a..b].to_vec()).unwrap();
                            if k == 1 {
                                kv.0 = text;
                            } else {
                                kv.1 = text;
                            }
                        }
                        p.external.push(kv);
                    }
                    _ => {}
                }
            }
            out.push(p);
        }
        out
    }

    /// Fields of `bytes` except those numbered in `skip`, as raw bytes.
    fn other_fields(data: &[u8], start: usize, end: usize, skip: &[u32]) -> Vec<Vec<u8>> {
        fields_of(data, start, end)
            .into_iter()
            .filter(|(n, _, _)| !skip.contains(n))
            .map(|(_, _, b)| b)
            .collect()
    }

    /// Checks the invariants of a split of `original` that should hold for any model.
    fn check_split(original: &[u8], s: &Split, min_bytes: usize) {
        let before = parse_initializers(original);
        let after = parse_initializers(&s.model);
        assert_eq!(before.len(), after.len());
        // Top-level fields other than the graph, and graph fields other than initializers,
        // are preserved byte for byte.
        assert_eq!(
            other_fields(original, 0, original.len(), &[7]),
            other_fields(&s.model, 0, s.model.len(), &[7])
        );
        let (gs, ge) = graph_range(original);
        let (rs, re) = graph_range(&s.model);
        assert_eq!(
            other_fields(original, gs, ge, &[5]),
            other_fields(&s.model, rs, re, &[5])
        );
        let mut moved = s.initializers.iter();
        for (b, a) in before.iter().zip(&after) {
            assert_eq!(
                (&b.name, &b.dims, b.data_type),
                (&a.name, &a.dims, a.data_type)
            );
            if a.location == 1 && b.location != 1 {
                let init = moved.next().expect("more moved tensors than initializers");
                let (rs, re) = b.raw.unwrap();
                assert_eq!(init.name, b.name);
                assert_eq!(init.dims, b.dims);
                assert_eq!(init.data_type, b.data_type);
                assert_eq!((init.offset, init.offset + init.len), (rs, re));
                assert!(init.len >= min_bytes);
                assert_eq!(a.raw, None);
                let (offset, length) = (init.offset.to_string(), init.len.to_string());
                assert_eq!(
                    a.external,
                    vec![
                        ("location".to_string(), INPLACE_LOCATION.to_string()),
                        ("offset".to_string(), offset),
                        ("length".to_string(), length),
                    ]
                );
            } else {
                assert_eq!(a.location, b.location);
                assert_eq!(a.external, b.external);
            }
        }
        assert!(
            moved.next().is_none(),
            "moved initializers not found in the model"
        );
        // Idempotence: nothing left to move, bytes unchanged.
        let again = split(&s.model, min_bytes).unwrap();
        assert!(again.initializers.is_empty());
        assert_eq!(again.model, s.model);
    }

    // ---- tests ------------------------------------------------------------------------------

    #[test]
    fn element_sizes() {
        assert_eq!(element_size(1), Some(4));
        assert_eq!(element_size(7), Some(8));
        assert_eq!(element_size(10), Some(2));
        assert_eq!(element_size(16), Some(2));
        assert_eq!(element_size(15), Some(16));
        assert_eq!(element_size(9), Some(1));
        for no in [0, 8, 21, 22, 23, 25, 26, 27, 28, 29, -1, i32::MAX] {
            assert_eq!(element_size(no), None, "{no}");
        }
    }

    #[test]
    fn splits_hand_built_model() {
        let built = build_model();
        let model = &built.model;
        let s = split(model, 1024).unwrap();
        let names: Vec<&str> = s.initializers.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["w", "b", "idx"]);
        let w = &s.initializers[0];
        assert_eq!((w.data_type, w.dims.as_slice()), (1, &[8i64, 9, 10][..]));
        assert_eq!(&model[w.offset..w.offset + w.len], &built.big_w[..]);
        let b = &s.initializers[1];
        assert_eq!((b.data_type, b.dims.as_slice()), (10, &[3000i64][..]));
        assert_eq!(&model[b.offset..b.offset + b.len], &built.big_b[..]);
        let i = &s.initializers[2];
        assert_eq!((i.data_type, i.dims.as_slice()), (7, &[300i64][..]));
        assert_eq!(&model[i.offset..i.offset + i.len], &built.big_i64[..]);
        // The rewritten model no longer carries the weights.
        assert!(s.model.len() < model.len() - 2880 - 6000 - 2400 + 400);
        check_split(model, &s, 1024);

        // The moved tensor keeps its other fields verbatim, in order.
        let (gs, ge) = graph_range(&s.model);
        let first = fields_of(&s.model, gs, ge)
            .into_iter()
            .find(|(n, _, _)| *n == 5)
            .unwrap();
        let Value::Bytes(ts, te) = first.1 else {
            panic!()
        };
        let numbers: Vec<u32> = fields_of(&s.model, ts, te).iter().map(|f| f.0).collect();
        assert_eq!(
            numbers,
            [1, 1, 1, 2, 8, 12, 16, 99, 100, 1000, 13, 13, 13, 14]
        );

        // The subgraph's initializer is still inside the node, unchanged.
        let sub = pattern(4000, 7);
        assert!(s.model.windows(sub.len()).any(|w| w == sub.as_slice()));
        // The int4 tensor and the small tensor stay inline.
        let after = parse_initializers(&s.model);
        let inline: Vec<&str> = after
            .iter()
            .filter(|p| p.raw.is_some())
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(inline, ["small", "int4"]);
    }

    #[test]
    fn custom_location() {
        let model = build_model().model;
        let a = split(&model, 1024).unwrap();
        let b = split_with_location(&model, 1024, "model.onnx").unwrap();
        assert_eq!(a.initializers, b.initializers);
        let moved: Vec<Parsed> = parse_initializers(&b.model)
            .into_iter()
            .filter(|p| p.location == 1 && p.name != "ext")
            .collect();
        assert_eq!(moved.len(), 3);
        for p in moved {
            assert_eq!(p.external[0], ("location".into(), "model.onnx".into()));
        }
        assert!(split(&b.model, 1024).unwrap().initializers.is_empty());
    }

    #[test]
    fn min_bytes_thresholds() {
        let model = build_model().model;
        let names = |min| -> Vec<String> {
            let s = split(&model, min).unwrap();
            check_split(&model, &s, min.max(1));
            s.initializers.into_iter().map(|i| i.name).collect()
        };
        assert_eq!(names(0), ["w", "small", "b", "idx"]);
        assert_eq!(names(8), ["w", "small", "b", "idx"]);
        assert_eq!(names(9), ["w", "b", "idx"]);
        assert_eq!(names(2400), ["w", "b", "idx"]);
        assert_eq!(names(2401), ["w", "b"]);
        assert_eq!(names(2881), ["b"]);
        assert_eq!(names(6000), ["b"]);
        assert!(names(6001).is_empty());
        assert!(names(usize::MAX).is_empty());
        // Nothing moved: identical bytes.
        assert_eq!(split(&model, usize::MAX).unwrap().model, model);
    }

    #[test]
    fn graph_length_prefix_shrinks() {
        // A graph whose length needs 3 varint bytes before and 1 after.
        let t = raw_tensor("t", 1, &[5000], &pattern(20000, 9), true);
        let graph = lfield(5, &t);
        let model = cat(&[&vfield(1, 8), &lfield(7, &graph), &vfield(5, 1)]);
        assert_eq!(model[2 + 1..2 + 4], varint(graph.len() as u64)[..]);
        let s = split(&model, 1).unwrap();
        assert_eq!(s.initializers.len(), 1);
        assert!(s.model.len() < 100);
        assert_eq!(s.model[..2], vfield(1, 8)[..]);
        assert_eq!(s.model[s.model.len() - 2..], vfield(5, 1)[..]);
        check_split(&model, &s, 1);
    }

    #[test]
    fn repeated_graph_and_raw_data_fields() {
        // Two graph fields (protobuf merges them) and a tensor with two raw_data fields (the
        // last one wins, and both must go).
        let first = pattern(400, 1);
        let last = pattern(40, 2);
        let t = cat(&[
            &vfield(1, 10),
            &vfield(2, 1),
            &lfield(9, &first),
            &lfield(8, b"t"),
            &lfield(9, &last),
        ]);
        let u = raw_tensor("u", 1, &[10], &pattern(40, 3), true);
        let model = cat(&[&lfield(7, &lfield(5, &t)), &lfield(7, &lfield(5, &u))]);
        let s = split(&model, 1).unwrap();
        assert_eq!(s.initializers.len(), 2);
        assert_eq!(
            &model[s.initializers[0].offset..][..s.initializers[0].len],
            &last[..]
        );
        assert_eq!(s.initializers[1].name, "u");
        assert!(!s.model.windows(40).any(|w| w == &first[..40]));
        let again = split(&s.model, 1).unwrap();
        assert!(again.initializers.is_empty());
        assert_eq!(again.model, s.model);
    }

    #[test]
    fn semantic_errors() {
        let graph_of = |t: &[u8]| lfield(7, &lfield(5, t));
        // Size mismatch.
        let bad = raw_tensor("w", 1, &[3, 3], &pattern(35, 0), true);
        let e = split(&graph_of(&bad), 1).unwrap_err();
        assert!(e.contains("\"w\"") && e.contains("35 bytes"), "{e}");
        // ... but a mismatched tensor below the threshold is left alone.
        assert_eq!(split(&graph_of(&bad), 36).unwrap().initializers.len(), 0);
        // Negative dimension.
        let neg = raw_tensor("n", 1, &[-1], &pattern(4, 0), false);
        assert!(split(&graph_of(&neg), 1).unwrap_err().contains("negative"));
        // Overflowing shape.
        let huge = raw_tensor("h", 1, &[1 << 62, 1 << 62], &pattern(4, 0), true);
        assert!(split(&graph_of(&huge), 1).unwrap_err().contains("overflow"));
        // No name, invalid UTF-8 name.
        let unnamed = cat(&[&vfield(1, 1), &vfield(2, 1), &lfield(9, &[0; 4])]);
        assert!(split(&graph_of(&unnamed), 1)
            .unwrap_err()
            .contains("no name"));
        let latin = cat(&[&lfield(8, &[0xff, 0xfe]), &vfield(2, 2), &lfield(9, &[0])]);
        assert!(split(&graph_of(&latin), 1).unwrap_err().contains("UTF-8"));
        // Duplicate names.
        let t = raw_tensor("d", 2, &[4], &[1, 2, 3, 4], true);
        let dup = lfield(7, &cat(&[&lfield(5, &t), &lfield(5, &t)]));
        assert!(split(&dup, 1).unwrap_err().contains("two initializers"));
        // No graph.
        assert!(split(&[], 1).unwrap_err().contains("no graph"));
        assert!(split(&vfield(1, 8), 1).unwrap_err().contains("no graph"));
        // Wrong wire types for interpreted fields.
        assert!(split(&vfield(7, 1), 1).unwrap_err().contains("wire type"));
        assert!(split(&lfield(7, &vfield(5, 1)), 1)
            .unwrap_err()
            .contains("wire type"));
        let wrong = cat(&[&lfield(8, b"x"), &vfield(9, 1)]);
        assert!(split(&graph_of(&wrong), 1)
            .unwrap_err()
            .contains("raw_data"));
    }

    #[test]
    fn malformed_wire_format() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("unterminated varint", vec![0x08, 0x80, 0x80]),
            ("11-byte varint", cat(&[&[0x08], &[0xff; 10], &[0x01]])),
            ("varint overflow", cat(&[&[0x08], &[0xff; 9], &[0x02]])),
            ("field number 0", vec![0x00, 0x01]),
            ("tag too large", cat(&[&[0xff; 5], &[0x7f]])),
            ("wire type 6", vec![0x0e, 0x00]),
            ("wire type 7", vec![0x0f]),
            ("length past end", vec![0x3a, 0x05, 0, 0]),
            ("huge length", cat(&[&[0x3a], &[0xff; 9], &[0x01]])),
            ("fixed64 truncated", vec![0x09, 1, 2, 3]),
            ("fixed32 truncated", vec![0x0d, 1, 2]),
            ("stray end group", vec![0x0c]),
            ("unterminated group", vec![0x0b, 0x08, 0x01]),
            ("mismatched group", vec![0x0b, 0x14]),
            ("deep groups", vec![0x0b; 100]),
            (
                "inner length past graph",
                cat(&[&[0x3a, 0x03], &[0x2a, 0x05, 0x00]]),
            ),
            (
                "packed dims varint past tensor",
                lfield(7, &lfield(5, &cat(&[&[0x0a, 0x02, 0x80, 0x80]]))),
            ),
        ];
        for (what, bytes) in cases {
            let e = split(&bytes, 1).expect_err(what);
            assert!(!e.is_empty(), "{what}");
        }
    }

    #[test]
    fn every_truncation_fails_cleanly() {
        let model = build_model().model;
        for len in 0..model.len() {
            // The graph is the last field, so every proper prefix lacks a complete graph.
            assert!(split(&model[..len], 1).is_err(), "prefix of {len} bytes");
        }
        assert!(split(&model, 1).is_ok());
    }

    #[test]
    fn corrupted_bytes_never_panic() {
        let model = build_model().model;
        let s = split(&model, 1).unwrap().model;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for base in [&model, &s] {
            for _ in 0..4000 {
                let mut m = base.clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() % m.len() as u64) as usize;
                    m[at] = next() as u8;
                }
                if let Ok(r) = split(&m, 1) {
                    for i in &r.initializers {
                        assert!(i.offset + i.len <= m.len());
                    }
                    let again = split(&r.model, 1).unwrap();
                    assert!(again.initializers.is_empty());
                }
            }
        }
    }

    fn check_file(path: &Path, min_bytes: usize) {
        if !path.exists() {
            eprintln!("skipping {}: not present", path.display());
            return;
        }
        let model = std::fs::read(path).unwrap();
        let s = split(&model, min_bytes).unwrap();
        check_split(&model, &s, min_bytes);
        let moved: usize = s.initializers.iter().map(|i| i.len).sum();
        assert!(!s.initializers.is_empty());
        // Each moved tensor gains ~50 bytes of external-data reference.
        assert!(s.model.len() + moved <= model.len() + 80 * s.initializers.len());
        for i in &s.initializers {
            let elems: i64 = i.dims.iter().product();
            assert_eq!(elems as usize * element_size(i.data_type).unwrap(), i.len);
        }
    }

    #[test]
    fn generated_models_if_present() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
        check_file(&dir.join("tiny_a_decoder.onnx"), 1024);
        check_file(&dir.join("tiny_a_decoder.onnx"), 1);
        check_file(&dir.join("bench_a_encoder.onnx"), 1024);
    }
}
