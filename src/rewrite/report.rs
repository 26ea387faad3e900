//! The report of what the load-time rewrites did to a model: `sam2 info` prints it, and
//! `Encoder::attention_fusion` and its kind return it.

use super::*;

/// What the library did to a model's attention when it loaded it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttentionFusion {
    /// Subgraphs rewritten into fused attention: (kind, count). A kind is the shape of the
    /// attention, `[batch dims] S queries × L keys, head dim H`.
    pub fused: Vec<(String, usize)>,
    /// Attention-like subgraphs (a softmax of a MatMul) left as exported: (reason, count).
    pub left: Vec<(String, usize)>,
    /// Why nothing was tried at all (optimisation off, a provider without the fused kernel,
    /// weights in external files), if so.
    pub not_tried: Option<String>,
    /// A remark on how the cores were fused (int8 scores asked for and not used, and why).
    pub note: Option<String>,
    /// Means over the channels of an NCHW tensor (the two of each channels-first layer norm)
    /// computed as matrix products, on the CPU (`src/rewrite/channel_means.rs`).
    pub channel_means: usize,
    /// Joint query, key and value projections split by their weights instead of their output,
    /// on the CPU (`src/rewrite/qkv_split.rs`).
    pub qkv_splits: usize,
    /// Of those, the keys' products left without their bias (an attention core's softmax
    /// cancels it).
    pub keys_unbiased: usize,
    /// Of those, the values' bias moved into the bias of the core's output projection.
    pub values_biases_moved: usize,
    /// Sums of parallel depthwise convolutions of one input and of the input itself (RepViT's
    /// token mixers, in EdgeTAM's image encoder) merged into one convolution each, on the CPU
    /// (`src/rewrite/branches.rs`).
    pub branches_merged: usize,
    /// The rewrites switched off for this model ([`crate::SessionOptions::rewrites`]).
    pub off: Vec<Rewrite>,
}

impl AttentionFusion {
    /// Number of subgraphs fused.
    pub fn fused_count(&self) -> usize {
        self.fused.iter().map(|(_, n)| n).sum()
    }

    /// How many times each rewrite that is on ran, in the order they run (0: found nothing to
    /// rewrite); the rewrites switched off are in [`AttentionFusion::off`].
    pub fn counts(&self) -> Vec<(Rewrite, usize)> {
        let values_after = self
            .fused
            .iter()
            .filter(|(kind, _)| kind.contains("values projected after"))
            .map(|(_, n)| n)
            .sum();
        let int8 = self
            .fused
            .iter()
            .filter(|(kind, _)| kind.contains("int8 scores"))
            .map(|(_, n)| n)
            .sum();
        Rewrite::ALL
            .into_iter()
            .filter(|r| !self.off.contains(r))
            .map(|r| {
                let n = match r {
                    Rewrite::Attention => self.fused_count(),
                    Rewrite::ValuesAfterAttention => values_after,
                    Rewrite::Int8Scores => int8,
                    Rewrite::ChannelMeans => self.channel_means,
                    Rewrite::QkvSplit => self.qkv_splits,
                    Rewrite::DepthwiseBranches => self.branches_merged,
                };
                (r, n)
            })
            .collect()
    }

    pub(crate) fn not_tried(why: impl Into<String>) -> Self {
        AttentionFusion {
            not_tried: Some(why.into()),
            ..AttentionFusion::default()
        }
    }
}

impl fmt::Display for AttentionFusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let off = if self.off.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = self.off.iter().map(|r| r.name()).collect();
            format!("; switched off: {}", names.join(", "))
        };
        if let Some(why) = &self.not_tried {
            return write!(f, "as exported ({why}){off}");
        }
        // The CPU's other rewrites, after what was fused.
        let mut others = match self.channel_means {
            0 => String::new(),
            1 => "; 1 channel mean as a matrix product".to_string(),
            n => format!("; {n} channel means as matrix products"),
        };
        match self.qkv_splits {
            0 => {}
            1 => others.push_str("; 1 query-key-value projection split by its weights"),
            n => others.push_str(&format!(
                "; {n} query-key-value projections split by their weights"
            )),
        }
        if self.keys_unbiased > 0 || self.values_biases_moved > 0 {
            others.push_str(&format!(
                " ({} without the keys' bias, {} with the values' bias in the output projection)",
                self.keys_unbiased, self.values_biases_moved
            ));
        }
        match self.branches_merged {
            0 => {}
            1 => others.push_str("; 1 sum of depthwise convolution branches merged into one"),
            n => others.push_str(&format!(
                "; {n} sums of depthwise convolution branches merged into one each"
            )),
        }
        others.push_str(&off);
        if self.fused.is_empty() && self.left.is_empty() {
            return write!(f, "no attention found{others}");
        }
        let list = |items: &[(String, usize)]| {
            items
                .iter()
                .map(|(what, n)| format!("{n} × {what}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        write!(f, "{} fused", self.fused_count())?;
        if !self.fused.is_empty() {
            write!(f, " ({})", list(&self.fused))?;
        }
        if !self.left.is_empty() {
            let n: usize = self.left.iter().map(|(_, n)| n).sum();
            write!(f, ", {n} left as exported ({})", list(&self.left))?;
        }
        if let Some(note) = &self.note {
            write!(f, "; {note}")?;
        }
        write!(f, "{others}")
    }
}
