//! Channel means as matrix products, the other rewrite the library makes when it loads a model
//! for the CPU.
//!
//! SAM2's channels-first layer norm (`LayerNorm2d`: the memory encoder's mask downsampler and
//! fuser, the decoder's upscaling and mask input) is exported as two
//! `ReduceMean(x, axes = [1], keepdims = 1)` over an NCHW tensor. ONNX Runtime's CPU kernel
//! shares such a reduction among its threads by the outer dimension, the batch: for a batch of
//! one it runs on one thread at about 1 GB/s (on 2 AMD EPYC cores, 1.5 ms over 64 × 128 × 128).
//! The same mean is a matrix product of a `[1, C]` row of `1 / C` by the input seen as
//! `[N, C, H·W]`:
//!
//! ```text
//!   Reshape(MatMul(w [1, C], Reshape(x, [0, C, −1])), [0, 1, H, W])
//! ```
//!
//! MLAS computes a one-row product without packing its right side (a matrix-vector kernel) and
//! shares it among its threads along the columns and the batch, so it is fast for any batch:
//! 0.05 ms for that mean over a batch of one, 5.9 ms over a batch of 64 against the reduction's
//! 8.4. The rest of the norm stays as exported. EdgeTAM's memory encoder went from 110 to 89 ms
//! a frame, the SAM2.1 image decoder for a click from 55.2 to 52.4 ms (the module alone, in
//! ONNX Runtime's Python API).
//!
//! (The first form of this rewrite was a 1×1 convolution by a `[1, C, 1, 1]` weight: as fast for
//! a batch of one, but 17.0 ms against the reduction's 9.3 for a batch of 8, so it was kept to
//! batches known to be 1 and the image decoders, whose batch is the number of prompts, kept
//! their means.)
//!
//! The sum is the same up to float rounding (in the measured exports the outputs differed by at
//! most 1e-3 of the largest output, in the memory encoder's 256-channel norms). Recognised
//! structurally: a `ReduceMean` keeping its dimensions over axis 1 (or −3) of a float32 tensor
//! that ONNX Runtime's inference says is `[N, C, H, W]` with at least [`MIN_CHANNELS`] channels
//! and H or W known at load time (N may be known at run time only). Done on the CPU only, where
//! it was measured.

use std::collections::HashMap;

use super::graph::{Attr, Graph, NewNode, NewTensor, TensorValues};
use super::{Dim, Edit, Elem, Finder, Pass, Rewrite, RewriteReport, TensorType};

/// Fewest channels a mean is rewritten for. Below 16 the reduction is about as fast (4 channels
/// over 512² with a batch of 8: 1.1 ms as exported, 1.4 as a product), and the norms that small
/// in SAM2's decoders are a small part of them.
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
            let axes = g.ints(n.attr("axes"), n.inputs.get(1))?;
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

    /// The nodes that replace this mean, and their constants; `None` where the inferred type is
    /// not a float32 NCHW tensor of at least [`MIN_CHANNELS`] known channels and a known height
    /// or width.
    pub(super) fn rewrite(
        &self,
        g: &mut Graph,
        types: &HashMap<String, TensorType>,
    ) -> Option<(Vec<NewNode>, Vec<NewTensor>)> {
        let ty = types.get(&self.input)?;
        let (channels, height, width) = match ty.dims.as_slice() {
            [_, Dim::Static(c), h, w] if ty.elem == Elem::Float32 && *c >= MIN_CHANNELS => {
                (*c, h.value(), w.value())
            }
            _ => return None,
        };
        // `0` copies the batch from the input, `−1` infers the one unknown spatial size; with
        // both known no `−1` is left to infer in the flat shape (which a batch of 0 could not).
        let (spatial, positions) = match (height, width) {
            (Some(h), Some(w)) => ([h, w], h * w),
            (Some(h), None) => ([h, -1], -1),
            (None, Some(w)) => ([-1, w], -1),
            (None, None) => return None,
        };
        let weight = NewTensor {
            name: g.fresh("sam2_channel_mean_weight"),
            dims: vec![1, channels],
            values: TensorValues::Float(vec![1.0 / channels as f32; channels as usize]),
        };
        let flat = NewTensor::vector(
            g,
            "sam2_channel_mean_flat",
            TensorValues::Int64(vec![0, channels, positions]),
        );
        let back = NewTensor::vector(
            g,
            "sam2_channel_mean_shape",
            TensorValues::Int64(vec![0, 1, spatial[0], spatial[1]]),
        );
        let rows = g.fresh("sam2_channel_mean_rows");
        let mean = g.fresh("sam2_channel_mean_flat_mean");
        let stem = "sam2_channel_mean_node";
        let nodes = vec![
            NewNode::plain(
                g,
                stem,
                "Reshape",
                vec![self.input.clone(), flat.name.clone()],
                rows.clone(),
            ),
            NewNode::plain(
                g,
                stem,
                "MatMul",
                vec![weight.name.clone(), rows],
                mean.clone(),
            ),
            NewNode::plain(
                g,
                stem,
                "Reshape",
                vec![mean, back.name.clone()],
                self.output.clone(),
            ),
        ];
        Some((nodes, vec![weight, flat, back]))
    }
}

/// The channel means' rewrite as the driver runs it ([`super::Pass`]).
#[derive(Default)]
pub(super) struct ChannelMeansPass {
    means: Vec<ChannelMean>,
}

impl Pass for ChannelMeansPass {
    fn rewrite(&self) -> Rewrite {
        Rewrite::ChannelMeans
    }

    fn find(&mut self, finder: &Finder, _: &mut RewriteReport) {
        self.means = find(finder.g);
    }

    fn found(&self) -> bool {
        !self.means.is_empty()
    }

    fn wanted(&self) -> Vec<&str> {
        self.means.iter().map(ChannelMean::wanted).collect()
    }

    fn apply(&mut self, edit: &mut Edit, report: &mut RewriteReport) {
        for m in &self.means {
            if edit.taken(&[m.node]) {
                report.left_as_exported(Rewrite::ChannelMeans, "taken by an earlier rewrite");
                continue;
            }
            match m.rewrite(edit.g, edit.types) {
                Some((nodes, constants)) => {
                    edit.replace(&[m.node], m.node, nodes, constants);
                    report.done(Rewrite::ChannelMeans, "mean over the channels");
                }
                None => report.left_as_exported(
                    Rewrite::ChannelMeans,
                    format!(
                        "not a float32 NCHW tensor of {MIN_CHANNELS} or more known channels \
                         with a known height or width"
                    ),
                ),
            }
        }
    }
}
