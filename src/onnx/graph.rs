//! The part of an ONNX model the attention rewriter reads and writes: the main graph's nodes,
//! small constants, inputs and outputs, and the opset imports. Everything else of the model is
//! copied through byte for byte; nodes that are not rewritten keep their original bytes.
//!
//! Built on the wire-format walker of [`super::wire`] (no protobuf dependency); malformed
//! input is an `Err`, never a panic.

use std::collections::{HashMap, HashSet};

use super::wire::{put_len_field, put_varint_field, read_varint, Field, Fields, Value};
use super::DataType;

/// `onnx.TensorProto.DataType` values the rewriter uses.
pub(crate) const FLOAT: i32 = DataType::Float as i32;
pub(crate) const FLOAT16: i32 = DataType::Float16 as i32;
pub(crate) const INT64: i32 = DataType::Int64 as i32;
pub(crate) const INT8: i32 = DataType::Int8 as i32;

/// One attribute of a node, as far as the rewriter needs to know it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Attr {
    Int(i64),
    Float(f32),
    Ints(Vec<i64>),
    Tensor(Constant),
    /// A subgraph (or several): the names its nodes read, which may be this graph's tensors.
    Graphs(Vec<String>),
    Other,
}

/// A small numeric tensor known at load time (an initializer or a `Constant` node's value).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Constant {
    pub data_type: i32,
    pub dims: Vec<i64>,
    /// The elements, converted to f64 (float, double and integer types only).
    pub values: Vec<f64>,
}

impl Constant {
    /// The value of a tensor whose elements are all the same number and whose every dimension is
    /// 1 (a scalar as exporters write one, `[]`, `[1]` or `[1, 1, 1, 1]`): broadcasting it never
    /// changes a shape.
    pub(crate) fn scalar(&self) -> Option<f64> {
        if self.dims.iter().any(|&d| d != 1) || self.values.len() != 1 {
            return None;
        }
        Some(self.values[0])
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub op_type: String,
    pub domain: String,
    pub attrs: Vec<(String, Attr)>,
}

impl Node {
    pub(crate) fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    /// Whether this is an operator of the default ONNX domain.
    pub(crate) fn is(&self, op_type: &str) -> bool {
        self.op_type == op_type && (self.domain.is_empty() || self.domain == "ai.onnx")
    }
}

/// The main graph of a model, parsed.
#[derive(Debug)]
pub(crate) struct Graph {
    pub nodes: Vec<Node>,
    /// Initializers small enough to read, by name (large ones are only named in `names`).
    pub constants: HashMap<String, Constant>,
    /// Every initializer, large ones included: its element type and dimensions.
    pub initializers: HashMap<String, (i32, Vec<i64>)>,
    pub inputs: HashSet<String>,
    pub outputs: HashSet<String>,
    /// Every tensor name the graph uses (to make new names that collide with none).
    pub names: HashSet<String>,
    /// Version of the default-domain opset the model imports.
    pub opset: i64,
    /// Whether the model imports the `com.microsoft` domain already.
    pub imports_ms: bool,
    /// Whether some initializer keeps its data in an external file.
    pub external_data: bool,
    /// Byte range of the graph's value in the model.
    graph_range: (usize, usize),
}

/// Largest initializer (elements) parsed into a [`Constant`]: scale factors and shapes.
const MAX_CONSTANT_ELEMENTS: usize = 64;

fn string(model: &[u8], s: usize, e: usize, what: &str) -> Result<String, String> {
    std::str::from_utf8(&model[s..e])
        .map(str::to_string)
        .map_err(|_| format!("{what} at byte {s} is not valid UTF-8"))
}

fn fixed32(model: &[u8], f: &Field) -> f32 {
    let b: [u8; 4] = model[f.end - 4..f.end].try_into().expect("four bytes");
    f32::from_le_bytes(b)
}

/// Varints of a packed field or one unpacked element.
fn ints(model: &[u8], f: &Field, out: &mut Vec<i64>, what: &str) -> Result<(), String> {
    match f.value {
        Value::Varint(v) => out.push(v as i64),
        Value::Bytes(s, e) => {
            let mut pos = s;
            while pos < e {
                let (v, next) = read_varint(model, pos, e, what)?;
                out.push(v as i64);
                pos = next;
            }
        }
        _ => return Err(format!("{what}: unexpected wire type at byte {}", f.start)),
    }
    Ok(())
}

/// A parsed TensorProto: its name, element type and dimensions, its value when it is small
/// ([`MAX_CONSTANT_ELEMENTS`]) and of a type the rewriter reads, and whether its data is in an
/// external file.
struct Parsed {
    name: String,
    data_type: i32,
    dims: Vec<i64>,
    constant: Option<Constant>,
    external: bool,
}

/// Parses a TensorProto.
fn tensor(model: &[u8], s: usize, e: usize) -> Result<Parsed, String> {
    let mut name = String::new();
    let mut dims = Vec::new();
    let mut data_type = 0;
    let mut raw: Option<(usize, usize)> = None;
    let mut floats = Vec::new();
    let mut int_values = Vec::new();
    let mut doubles = Vec::new();
    let mut external = false;
    let mut fields = Fields::new(model, s, e, "TensorProto");
    while let Some(f) = fields.next_field()? {
        match (f.number, f.value) {
            (1, _) => ints(model, &f, &mut dims, "TensorProto.dims")?,
            (2, Value::Varint(v)) => data_type = v as i32,
            (4, Value::Bytes(a, b)) => {
                floats.extend(
                    model[a..b]
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().expect("four bytes")) as f64),
                );
            }
            (4, Value::Fixed32) => floats.push(fixed32(model, &f) as f64),
            (5 | 7, _) => {
                let mut v = Vec::new();
                ints(model, &f, &mut v, "TensorProto data")?;
                int_values.extend(v.into_iter().map(|x| x as f64));
            }
            (10, Value::Bytes(a, b)) => {
                doubles.extend(
                    model[a..b]
                        .chunks_exact(8)
                        .map(|c| f64::from_le_bytes(c.try_into().expect("eight bytes"))),
                );
            }
            (8, Value::Bytes(a, b)) => name = string(model, a, b, "TensorProto.name")?,
            (9, Value::Bytes(a, b)) => raw = Some((a, b)),
            (13, _) => external = true,
            (14, Value::Varint(1)) => external = true,
            _ => {}
        }
    }
    let count: Option<usize> = dims.iter().try_fold(1usize, |n, &d| {
        usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
    });
    let constant = match count {
        Some(n) if n <= MAX_CONSTANT_ELEMENTS && !external => {
            let values: Option<Vec<f64>> = match (raw, data_type) {
                (Some((a, b)), FLOAT) => Some(
                    model[a..b]
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().expect("4")) as f64)
                        .collect(),
                ),
                (Some((a, b)), FLOAT16) => Some(
                    model[a..b]
                        .chunks_exact(2)
                        .map(|c| half::f16::from_le_bytes(c.try_into().expect("2")).to_f64())
                        .collect(),
                ),
                (Some((a, b)), 11) => Some(
                    model[a..b]
                        .chunks_exact(8)
                        .map(|c| f64::from_le_bytes(c.try_into().expect("8")))
                        .collect(),
                ),
                (Some((a, b)), INT64) => Some(
                    model[a..b]
                        .chunks_exact(8)
                        .map(|c| i64::from_le_bytes(c.try_into().expect("8")) as f64)
                        .collect(),
                ),
                (Some((a, b)), 6) => Some(
                    model[a..b]
                        .chunks_exact(4)
                        .map(|c| i32::from_le_bytes(c.try_into().expect("4")) as f64)
                        .collect(),
                ),
                (Some(_), _) => None,
                (None, FLOAT) => Some(floats),
                (None, 11) => Some(doubles),
                (None, 6 | INT64) => Some(int_values),
                // float16 elements are stored as their bits in int32_data.
                (None, FLOAT16) => Some(
                    int_values
                        .iter()
                        .map(|&bits| half::f16::from_bits(bits as u16).to_f64())
                        .collect(),
                ),
                (None, _) => None,
            };
            values.filter(|v| v.len() == n).map(|values| Constant {
                data_type,
                dims: dims.clone(),
                values,
            })
        }
        _ => None,
    };
    Ok(Parsed {
        name,
        data_type,
        dims,
        constant,
        external,
    })
}

/// The names the nodes of a GraphProto read, recursively (a subgraph reads outer tensors by name).
fn subgraph_reads(model: &[u8], s: usize, e: usize, out: &mut Vec<String>) -> Result<(), String> {
    let mut fields = Fields::new(model, s, e, "GraphProto");
    while let Some(f) = fields.next_field()? {
        if let (1, Value::Bytes(a, b)) = (f.number, f.value) {
            let node = node(model, a, b)?;
            out.extend(node.inputs);
            for (_, attr) in node.attrs {
                if let Attr::Graphs(names) = attr {
                    out.extend(names);
                }
            }
        }
    }
    Ok(())
}

fn attribute(model: &[u8], s: usize, e: usize) -> Result<(String, Attr), String> {
    let mut name = String::new();
    let mut kind = 0;
    let mut int = None;
    let mut float = None;
    let mut list = Vec::new();
    let mut tensor_value = None;
    let mut graphs = Vec::new();
    let mut has_graph = false;
    let mut fields = Fields::new(model, s, e, "AttributeProto");
    while let Some(f) = fields.next_field()? {
        match (f.number, f.value) {
            (1, Value::Bytes(a, b)) => name = string(model, a, b, "AttributeProto.name")?,
            (20, Value::Varint(v)) => kind = v,
            (2, Value::Fixed32) => float = Some(fixed32(model, &f)),
            (3, Value::Varint(v)) => int = Some(v as i64),
            (8, _) => ints(model, &f, &mut list, "AttributeProto.ints")?,
            (5, Value::Bytes(a, b)) => tensor_value = tensor(model, a, b)?.constant,
            (6 | 11, Value::Bytes(a, b)) => {
                has_graph = true;
                subgraph_reads(model, a, b, &mut graphs)?;
            }
            _ => {}
        }
    }
    let attr = if has_graph {
        Attr::Graphs(graphs)
    } else {
        match kind {
            1 => float.map(Attr::Float).unwrap_or(Attr::Other),
            2 => int.map(Attr::Int).unwrap_or(Attr::Other),
            4 => tensor_value.map(Attr::Tensor).unwrap_or(Attr::Other),
            7 => Attr::Ints(list),
            _ => Attr::Other,
        }
    };
    Ok((name, attr))
}

fn node(model: &[u8], s: usize, e: usize) -> Result<Node, String> {
    let mut n = Node {
        inputs: Vec::new(),
        outputs: Vec::new(),
        op_type: String::new(),
        domain: String::new(),
        attrs: Vec::new(),
    };
    let mut fields = Fields::new(model, s, e, "NodeProto");
    while let Some(f) = fields.next_field()? {
        match (f.number, f.value) {
            (1, Value::Bytes(a, b)) => n.inputs.push(string(model, a, b, "NodeProto.input")?),
            (2, Value::Bytes(a, b)) => n.outputs.push(string(model, a, b, "NodeProto.output")?),
            (4, Value::Bytes(a, b)) => n.op_type = string(model, a, b, "NodeProto.op_type")?,
            (7, Value::Bytes(a, b)) => n.domain = string(model, a, b, "NodeProto.domain")?,
            (5, Value::Bytes(a, b)) => n.attrs.push(attribute(model, a, b)?),
            _ => {}
        }
    }
    Ok(n)
}

fn value_info_name(model: &[u8], s: usize, e: usize) -> Result<String, String> {
    let mut fields = Fields::new(model, s, e, "ValueInfoProto");
    while let Some(f) = fields.next_field()? {
        if let (1, Value::Bytes(a, b)) = (f.number, f.value) {
            return string(model, a, b, "ValueInfoProto.name");
        }
    }
    Ok(String::new())
}

impl Graph {
    pub(crate) fn parse(model: &[u8]) -> Result<Graph, String> {
        let mut graph_range = None;
        let mut opset = 0;
        let mut imports_ms = false;
        let mut fields = Fields::new(model, 0, model.len(), "ModelProto");
        while let Some(f) = fields.next_field()? {
            match (f.number, f.value) {
                (7, Value::Bytes(s, e)) => graph_range = Some((s, e)),
                (8, Value::Bytes(s, e)) => {
                    let mut domain = String::new();
                    let mut version = 0;
                    let mut op = Fields::new(model, s, e, "OperatorSetIdProto");
                    while let Some(f) = op.next_field()? {
                        match (f.number, f.value) {
                            (1, Value::Bytes(a, b)) => domain = string(model, a, b, "domain")?,
                            (2, Value::Varint(v)) => version = v as i64,
                            _ => {}
                        }
                    }
                    match domain.as_str() {
                        "" | "ai.onnx" => opset = version,
                        "com.microsoft" => imports_ms = true,
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        let (gs, ge) = graph_range.ok_or("ModelProto has no graph")?;
        let mut g = Graph {
            nodes: Vec::new(),
            constants: HashMap::new(),
            initializers: HashMap::new(),
            inputs: HashSet::new(),
            outputs: HashSet::new(),
            names: HashSet::new(),
            opset,
            imports_ms,
            external_data: false,
            graph_range: (gs, ge),
        };
        let mut fields = Fields::new(model, gs, ge, "GraphProto");
        while let Some(f) = fields.next_field()? {
            match (f.number, f.value) {
                (1, Value::Bytes(s, e)) => {
                    let n = node(model, s, e)?;
                    g.names.extend(n.inputs.iter().cloned());
                    g.names.extend(n.outputs.iter().cloned());
                    g.nodes.push(n);
                }
                (5, Value::Bytes(s, e)) => {
                    let t = tensor(model, s, e)?;
                    g.external_data |= t.external;
                    if let Some(c) = t.constant {
                        g.constants.insert(t.name.clone(), c);
                    }
                    g.initializers.insert(t.name.clone(), (t.data_type, t.dims));
                    g.names.insert(t.name);
                }
                (11, Value::Bytes(s, e)) => {
                    let name = value_info_name(model, s, e)?;
                    g.names.insert(name.clone());
                    g.inputs.insert(name);
                }
                (12, Value::Bytes(s, e)) => {
                    let name = value_info_name(model, s, e)?;
                    g.names.insert(name.clone());
                    g.outputs.insert(name);
                }
                _ => {}
            }
        }
        // An initializer that is also a graph input is a default the caller may override: not a
        // constant.
        let inputs = &g.inputs;
        g.constants.retain(|name, _| !inputs.contains(name));
        g.initializers.retain(|name, _| !inputs.contains(name));
        // `Constant` nodes' values.
        for n in &g.nodes {
            if n.is("Constant") && n.outputs.len() == 1 {
                let value = match n.attrs.as_slice() {
                    [(name, Attr::Tensor(t))] if name == "value" => Some(t.clone()),
                    [(name, Attr::Float(v))] if name == "value_float" => Some(Constant {
                        data_type: FLOAT,
                        dims: Vec::new(),
                        values: vec![*v as f64],
                    }),
                    _ => None,
                };
                if let Some(c) = value {
                    g.constants.insert(n.outputs[0].clone(), c);
                }
            }
        }
        Ok(g)
    }

    /// How many times each tensor is read: by nodes (subgraphs included) and as a graph output.
    pub(crate) fn readers(&self) -> HashMap<&str, usize> {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for n in &self.nodes {
            for i in n.inputs.iter().filter(|i| !i.is_empty()) {
                *count.entry(i.as_str()).or_default() += 1;
            }
            for (_, a) in &n.attrs {
                if let Attr::Graphs(names) = a {
                    for i in names {
                        *count.entry(i.as_str()).or_default() += 1;
                    }
                }
            }
        }
        for o in &self.outputs {
            *count.entry(o.as_str()).or_default() += 1;
        }
        count
    }

    /// The model with the nodes at `removed` left out, `added[i]` written where node `i` was (or
    /// would have been), `initializers` appended to the graph, and the `com.microsoft` opset
    /// imported.
    pub(crate) fn write(
        &self,
        model: &[u8],
        removed: &HashSet<usize>,
        added: &HashMap<usize, Vec<NewNode>>,
        initializers: &[NewTensor],
    ) -> Result<Vec<u8>, String> {
        let (gs, ge) = self.graph_range;
        let mut graph = Vec::with_capacity(ge - gs + 1024);
        let mut next_node = 0;
        // Tensors the new nodes compute under their exported names: what the export declared of
        // them (`value_info`) described the old computation, and where the new one's shapes are
        // known only when the model runs ONNX Runtime would take a wrong declaration as the truth.
        let recomputed: HashSet<&str> = added
            .values()
            .flatten()
            .flat_map(|n| n.outputs.iter().map(String::as_str))
            .collect();
        let mut fields = Fields::new(model, gs, ge, "GraphProto");
        while let Some(f) = fields.next_field()? {
            if f.number == 13 {
                if let Value::Bytes(s, e) = f.value {
                    if recomputed.contains(value_info_name(model, s, e)?.as_str()) {
                        continue;
                    }
                }
                graph.extend_from_slice(&model[f.start..f.end]);
            } else if f.number == 1 {
                let i = next_node;
                next_node += 1;
                if let Some(new) = added.get(&i) {
                    for n in new {
                        put_len_field(&mut graph, 1, &n.encode());
                    }
                }
                if !removed.contains(&i) {
                    graph.extend_from_slice(&model[f.start..f.end]);
                }
            } else {
                graph.extend_from_slice(&model[f.start..f.end]);
            }
        }
        for t in initializers {
            put_len_field(&mut graph, 5, &t.encode());
        }
        let mut out = with_graph(model, &graph)?;
        if !self.imports_ms {
            let mut op = Vec::new();
            put_len_field(&mut op, 1, b"com.microsoft");
            put_varint_field(&mut op, 2, 1);
            put_len_field(&mut out, 8, &op);
        }
        Ok(out)
    }

    /// The model with extra graph outputs (no declared type: ONNX Runtime infers it), to learn
    /// the inferred types and shapes of inner tensors.
    pub(crate) fn with_outputs(&self, model: &[u8], names: &[&str]) -> Result<Vec<u8>, String> {
        let (gs, ge) = self.graph_range;
        let mut graph = model[gs..ge].to_vec();
        for name in names.iter().filter(|n| !self.outputs.contains(**n)) {
            let mut info = Vec::new();
            put_len_field(&mut info, 1, name.as_bytes());
            put_len_field(&mut graph, 12, &info);
        }
        with_graph(model, &graph)
    }

    /// The integers an operator is given either as an attribute (older opsets: `axes`, `split`)
    /// or as a constant int64 input (newer ones), whichever it has; `None` for both, neither, or
    /// an input not known at load time. An empty input name is no input.
    pub(crate) fn ints(&self, attr: Option<&Attr>, input: Option<&String>) -> Option<Vec<i64>> {
        match (attr, input.filter(|t| !t.is_empty())) {
            (Some(Attr::Ints(a)), None) => Some(a.clone()),
            (None, Some(t)) => {
                let c = self.constants.get(t)?;
                (c.data_type == INT64).then(|| c.values.iter().map(|&v| v as i64).collect())
            }
            _ => None,
        }
    }

    /// The dimensions of a float32 initializer of these dimensions (any size where `None`).
    pub(crate) fn float_initializer(&self, name: &str, dims: &[Option<i64>]) -> Option<Vec<i64>> {
        match self.initializers.get(name)? {
            (FLOAT, d)
                if d.len() == dims.len()
                    && d.iter().zip(dims).all(|(a, b)| b.map_or(true, |b| b == *a)) =>
            {
                Some(d.clone())
            }
            _ => None,
        }
    }

    /// A name no tensor of the graph has, starting with `stem`; remembered as taken.
    pub(crate) fn fresh(&mut self, stem: &str) -> String {
        let mut k = 0usize;
        loop {
            let name = format!("{stem}_{k}");
            if self.names.insert(name.clone()) {
                return name;
            }
            k += 1;
        }
    }
}

/// `model` with its graph (ModelProto field 7) replaced by `graph`, every other field as it was.
fn with_graph(model: &[u8], graph: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(model.len() + graph.len() + 64);
    let mut fields = Fields::new(model, 0, model.len(), "ModelProto");
    while let Some(f) = fields.next_field()? {
        if f.number == 7 {
            put_len_field(&mut out, 7, graph);
        } else {
            out.extend_from_slice(&model[f.start..f.end]);
        }
    }
    Ok(out)
}

/// A node the rewriter writes.
#[derive(Debug, Clone)]
pub(crate) struct NewNode {
    pub name: String,
    pub op_type: &'static str,
    pub domain: &'static str,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Vec<(&'static str, Attr)>,
}

impl NewNode {
    /// A node of the default domain without attributes and with one output, named afresh from
    /// `stem`.
    pub(crate) fn plain(
        g: &mut Graph,
        stem: &str,
        op_type: &'static str,
        inputs: Vec<String>,
        output: String,
    ) -> NewNode {
        NewNode {
            name: g.fresh(stem),
            op_type,
            domain: "",
            inputs,
            outputs: vec![output],
            attrs: Vec::new(),
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for i in &self.inputs {
            put_len_field(&mut out, 1, i.as_bytes());
        }
        for o in &self.outputs {
            put_len_field(&mut out, 2, o.as_bytes());
        }
        put_len_field(&mut out, 3, self.name.as_bytes());
        put_len_field(&mut out, 4, self.op_type.as_bytes());
        for (name, attr) in &self.attrs {
            let mut a = Vec::new();
            put_len_field(&mut a, 1, name.as_bytes());
            match attr {
                Attr::Int(v) => {
                    put_varint_field(&mut a, 20, 2);
                    put_varint_field(&mut a, 3, *v as u64);
                }
                Attr::Float(v) => {
                    put_varint_field(&mut a, 20, 1);
                    a.push((2 << 3) | 5);
                    a.extend_from_slice(&v.to_le_bytes());
                }
                Attr::Ints(vs) => {
                    put_varint_field(&mut a, 20, 7);
                    for v in vs {
                        put_varint_field(&mut a, 8, *v as u64);
                    }
                }
                Attr::Tensor(_) | Attr::Graphs(_) | Attr::Other => {
                    unreachable!("the rewriter writes int, float and ints attributes only")
                }
            }
            put_len_field(&mut out, 5, &a);
        }
        if !self.domain.is_empty() {
            put_len_field(&mut out, 7, self.domain.as_bytes());
        }
        out
    }
}

/// An initializer the rewriter adds: a shape, bounds or axes, a float constant of the int8
/// attention core, or a channel mean's weight.
#[derive(Debug, Clone)]
pub(crate) struct NewTensor {
    pub name: String,
    /// Its dimensions, whose product is the number of values.
    pub dims: Vec<i64>,
    pub values: TensorValues,
}

/// The elements of a [`NewTensor`].
#[derive(Debug, Clone)]
pub(crate) enum TensorValues {
    Int64(Vec<i64>),
    Float(Vec<f32>),
}

impl NewTensor {
    /// A tensor of one dimension holding `values`, its name made afresh from `stem`.
    pub(crate) fn vector(g: &mut Graph, stem: &str, values: TensorValues) -> NewTensor {
        let len = match &values {
            TensorValues::Int64(v) => v.len(),
            TensorValues::Float(v) => v.len(),
        };
        NewTensor {
            name: g.fresh(stem),
            dims: vec![len as i64],
            values,
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let (data_type, raw): (i32, Vec<u8>) = match &self.values {
            TensorValues::Int64(v) => (INT64, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            TensorValues::Float(v) => (FLOAT, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        };
        let mut out = Vec::new();
        for &d in &self.dims {
            put_varint_field(&mut out, 1, d as u64);
        }
        put_varint_field(&mut out, 2, data_type as u64);
        put_len_field(&mut out, 8, self.name.as_bytes());
        put_len_field(&mut out, 9, &raw);
        out
    }
}
