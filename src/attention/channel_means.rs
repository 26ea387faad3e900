//! Channel means as 1×1 convolutions, the other rewrite the library makes when it loads a model
//! for the CPU.
//!
//! SAM2's channels-first layer norm (`LayerNorm2d`: the memory encoder's mask downsampler and
//! fuser, the decoder's upscaling and mask input) is exported as two
//! `ReduceMean(x, axes = [1], keepdims = 1)` over an NCHW tensor. ONNX Runtime's CPU kernel
//! shares such a reduction among its threads by the outer dimension, the batch: for a batch of
//! one it runs on one thread at about 1 GB/s (on 2 AMD EPYC cores, 1.5 ms over 64 × 128 × 128),
//! where the same mean as a 1×1 convolution by a `[1, C, 1, 1]` weight of `1 / C` (a matrix
//! product MLAS runs on every thread) takes a third of that. The rest of the norm stays as
//! exported. EdgeTAM's memory encoder went from 110 to 89 ms a frame.
//!
//! Only a batch known to be 1 at load time is rewritten: with more, the reduction is shared out
//! and the convolution lost (a batch of 8 over 64 × 128 × 128: 17.0 ms against 9.3), so the
//! image decoders, whose batch is the number of prompts (64 in segment everything), keep their
//! means; the video modules' batch is one. Below 16 channels the reduction is as fast or faster
//! (4 × 512 × 512: 1.5 ms against 3.1).
//!
//! The sum is the same up to float rounding (in the measured exports the outputs were the same
//! bits but for the memory encoder's 256-channel norms, whose largest difference was 1e-3 of the
//! largest output). Recognised structurally: a `ReduceMean` keeping its dimensions over axis 1
//! (or −3) of a float32 tensor that ONNX Runtime's inference says is `[1, C, H, W]` with at least
//! [`MIN_CHANNELS`] channels known at load time. Done on the CPU only, where it was measured.

use std::collections::HashMap;

use super::graph::{Attr, Graph, NewNode, NewTensor, TensorValues, INT64};
use super::{Dim, Elem, TensorType};

/// Fewest channels a mean is rewritten for. Measured on 2 AMD EPYC cores (ONNX Runtime 1.31,
/// the whole norm, medians of 30): 16 channels over 64², 128² and 256² gained (0.22 → 0.14,
/// 0.50 → 0.38, 1.87 → 1.66 ms), 8 and 4 channels lost or tied.
pub(super) const MIN_CHANNELS: i64 = 16;

/// A `ReduceMean` over the channel axis, found before the types are known.
#[derive(Debug, Clone)]
pub(super) struct ChannelMean {
    /// Its index in the graph.
    pub node: usize,
    input: String,
    output: String,
}

/// Every `ReduceMean` keeping its dimensions over axis 1 or −3 alone, by attribute (before opset
/// 18) or by a constant second input.
pub(super) fn find(g: &Graph) -> Vec<ChannelMean> {
    g.nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            if !n.is("ReduceMean") || n.outputs.len() != 1 || n.inputs.first()?.is_empty() {
                return None;
            }
            match n.attr("keepdims") {
                None | Some(Attr::Int(1)) => {}
                _ => return None,
            }
            let axes: Vec<i64> = match (n.attr("axes"), n.inputs.get(1)) {
                (Some(Attr::Ints(a)), None) => a.clone(),
                (None, Some(t)) => {
                    let c = g.constants.get(t)?;
                    if c.data_type != INT64 {
                        return None;
                    }
                    c.values.iter().map(|&v| v as i64).collect()
                }
                _ => return None,
            };
            matches!(axes.as_slice(), [1] | [-3]).then(|| ChannelMean {
                node: i,
                input: n.inputs[0].clone(),
                output: n.outputs[0].clone(),
            })
        })
        .collect()
}

impl ChannelMean {
    /// The tensor whose inferred type decides.
    pub(super) fn wanted(&self) -> &str {
        &self.input
    }

    /// The convolution that replaces this mean, and its weight; `None` where the inferred type
    /// is not a float32 NCHW tensor of batch 1 and at least [`MIN_CHANNELS`] known channels.
    pub(super) fn rewrite(
        &self,
        g: &mut Graph,
        types: &HashMap<String, TensorType>,
    ) -> Option<(NewNode, NewTensor)> {
        let ty = types.get(&self.input)?;
        let channels = match ty.dims.as_slice() {
            [Dim::Static(1), Dim::Static(c), _, _]
                if ty.elem == Elem::Float32 && *c >= MIN_CHANNELS =>
            {
                *c
            }
            _ => return None,
        };
        let weight = NewTensor {
            name: g.fresh("sam2_channel_mean_weight"),
            dims: vec![1, channels, 1, 1],
            values: TensorValues::Float(vec![1.0 / channels as f32; channels as usize]),
        };
        let conv = NewNode {
            name: g.fresh("sam2_channel_mean_node"),
            op_type: "Conv",
            domain: "",
            inputs: vec![self.input.clone(), weight.name.clone()],
            outputs: vec![self.output.clone()],
            attrs: vec![("kernel_shape", Attr::Ints(vec![1, 1]))],
        };
        Some((conv, weight))
    }
}
