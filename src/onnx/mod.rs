//! The library's one ONNX layer, in the order each builds on the one before:
//!
//! * [`wire`]: Protocol Buffers' wire format, walked and written by hand (no protobuf
//!   dependency), defensively: malformed input is an `Err`, never a panic;
//! * [`data_type`]: ONNX's element types, their numbers and sizes, once (a leaf, also serving the
//!   sizes of ONNX Runtime's tensors);
//! * [`model`]: a small builder of models in memory (the device copies' helper graphs, the tests'
//!   and the rewrites' differential corpus);
//! * [`split`]: a model's large weights moved out of its proto, for one copy shared by every
//!   session ([`crate::weights`]);
//! * [`graph`]: the main graph's nodes, constants, inputs and outputs as the load-time rewrites
//!   read and write them ([`crate::rewrite`]).

pub(crate) mod data_type;
pub(crate) mod graph;
pub(crate) mod model;
pub(crate) mod split;
pub(crate) mod wire;

pub(crate) use data_type::DataType;
