//! Small ONNX models built in memory: typed inputs and outputs, nodes with integer attributes,
//! float initializers, a graph and a model of an opset. What the library builds itself (the device
//! copies' identity and concatenation graphs) and what its tests and the rewrites' differential
//! corpus build use this one builder.

use super::wire::{put_len_field, put_varint_field};
use super::DataType;

/// A dimension of a declared tensor: a size, or a named free one (the library's own graphs take
/// any shape; the tests' declare theirs).
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(any(test, feature = "test-support")), allow(dead_code))]
pub(crate) enum Dim {
    N(i64),
    S(&'static str),
}

/// A graph input, output or intermediate tensor (`ValueInfoProto`): its name and, when `ty` is
/// given, its element type and shape (`None`: any shape).
pub(crate) fn value_info(name: &str, ty: Option<(DataType, Option<&[Dim]>)>) -> Vec<u8> {
    let mut info = Vec::new();
    put_len_field(&mut info, 1, name.as_bytes());
    if let Some((elem, dims)) = ty {
        let mut tensor = Vec::new();
        put_varint_field(&mut tensor, 1, elem.code());
        if let Some(dims) = dims {
            let mut shape = Vec::new();
            for d in dims {
                let mut dim = Vec::new();
                match d {
                    Dim::N(v) => put_varint_field(&mut dim, 1, *v as u64),
                    Dim::S(s) => put_len_field(&mut dim, 2, s.as_bytes()),
                }
                put_len_field(&mut shape, 1, &dim);
            }
            put_len_field(&mut tensor, 2, &shape);
        }
        let mut type_proto = Vec::new();
        put_len_field(&mut type_proto, 1, &tensor);
        put_len_field(&mut info, 2, &type_proto);
    }
    info
}

/// A node (`NodeProto`): its inputs, outputs, operator and encoded attributes.
pub(crate) fn node(inputs: &[&str], outputs: &[&str], op: &str, attributes: &[Vec<u8>]) -> Vec<u8> {
    let mut node = Vec::new();
    for i in inputs {
        put_len_field(&mut node, 1, i.as_bytes());
    }
    for o in outputs {
        put_len_field(&mut node, 2, o.as_bytes());
    }
    put_len_field(&mut node, 4, op.as_bytes());
    for a in attributes {
        put_len_field(&mut node, 5, a);
    }
    node
}

/// An integer attribute (`AttributeProto` of type INT).
pub(crate) fn int_attribute(name: &str, value: i64) -> Vec<u8> {
    let mut a = Vec::new();
    put_len_field(&mut a, 1, name.as_bytes());
    put_varint_field(&mut a, 3, value as u64);
    put_varint_field(&mut a, 20, 2);
    a
}

/// A float32 initializer (`TensorProto` with raw data).
#[cfg_attr(not(any(test, feature = "test-support")), allow(dead_code))]
pub(crate) fn float_initializer(name: &str, dims: &[i64], values: &[f32]) -> Vec<u8> {
    let mut t = Vec::new();
    for &d in dims {
        put_varint_field(&mut t, 1, d as u64);
    }
    put_varint_field(&mut t, 2, DataType::Float.code());
    put_len_field(&mut t, 8, name.as_bytes());
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    put_len_field(&mut t, 9, &raw);
    t
}

/// A graph (`GraphProto`) named `name`: its encoded nodes, initializers, inputs, outputs and
/// intermediate tensors' declarations, in that order of fields.
pub(crate) struct GraphParts<'a> {
    pub name: &'a str,
    pub nodes: Vec<Vec<u8>>,
    pub initializers: Vec<Vec<u8>>,
    pub inputs: Vec<Vec<u8>>,
    pub outputs: Vec<Vec<u8>>,
    pub value_infos: Vec<Vec<u8>>,
}

impl GraphParts<'_> {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut g = Vec::new();
        for n in &self.nodes {
            put_len_field(&mut g, 1, n);
        }
        put_len_field(&mut g, 2, self.name.as_bytes());
        for t in &self.initializers {
            put_len_field(&mut g, 5, t);
        }
        for i in &self.inputs {
            put_len_field(&mut g, 11, i);
        }
        for o in &self.outputs {
            put_len_field(&mut g, 12, o);
        }
        for v in &self.value_infos {
            put_len_field(&mut g, 13, v);
        }
        g
    }
}

/// A model (`ModelProto`, IR version 8) of the default domain's `opset` around an encoded graph.
pub(crate) fn model(opset: u64, graph: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    put_varint_field(&mut m, 1, 8);
    let mut op = Vec::new();
    put_len_field(&mut op, 1, b"");
    put_varint_field(&mut op, 2, opset);
    put_len_field(&mut m, 8, &op);
    put_len_field(&mut m, 7, graph);
    m
}
