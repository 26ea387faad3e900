//! The load-time rewrites by name, and the switch that turns each off: a user who suspects one
//! rules it out by loading without it, and the tests compare every rewrite on and off.

use std::fmt;

use crate::error::{Error, Result};

/// A rewrite the library may make to a model's graph when it loads it, in the order they run.
/// The values are the bits of the C ABI's `SAM2_REWRITE_*` constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rewrite {
    /// Attention cores (a softmax of scaled query-key products times values) into ONNX
    /// Runtime's `MultiHeadAttention` (CPU, CUDA, WebGPU).
    Attention = 1,
    /// Values that are a narrower tensor's projection projected after the fused kernel instead
    /// (part of a fused core; nothing without `Attention`).
    ValuesAfterAttention = 2,
    /// Queries and keys quantised to 8 bits for the scores, where a model asks for it
    /// (`sam2.attention_scores = int8`) and the CPU has VNNI (part of a fused core).
    Int8Scores = 4,
    /// Means over the channels of NCHW tensors as matrix products (CPU).
    ChannelMeans = 8,
    /// Joint query-key-value projections split by their weights, the keys' bias dropped and the
    /// values' moved where a verified core makes that exact (CPU).
    QkvSplit = 16,
    /// Sums of parallel depthwise convolutions of one input merged into one (CPU).
    DepthwiseBranches = 32,
}

impl Rewrite {
    /// Every rewrite, in the order they run.
    pub const ALL: [Rewrite; 6] = [
        Rewrite::Attention,
        Rewrite::ValuesAfterAttention,
        Rewrite::Int8Scores,
        Rewrite::ChannelMeans,
        Rewrite::QkvSplit,
        Rewrite::DepthwiseBranches,
    ];

    /// The name the command line, the reports and the documentation use.
    pub fn name(self) -> &'static str {
        match self {
            Rewrite::Attention => "attention",
            Rewrite::ValuesAfterAttention => "values-after-attention",
            Rewrite::Int8Scores => "int8-scores",
            Rewrite::ChannelMeans => "channel-means",
            Rewrite::QkvSplit => "qkv-split",
            Rewrite::DepthwiseBranches => "depthwise-branches",
        }
    }

    /// The rewrite of a name (as [`Rewrite::name`] writes it).
    pub fn parse(name: &str) -> Option<Rewrite> {
        Rewrite::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Its bit in a [`Rewrites`] set and in the C ABI.
    pub fn bit(self) -> u32 {
        self as u32
    }
}

impl fmt::Display for Rewrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of rewrites: those a model may get ([`crate::SessionOptions::rewrites`], every one by
/// default), or those turned off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rewrites(u32);

impl Default for Rewrites {
    fn default() -> Self {
        Rewrites::ALL
    }
}

impl Rewrites {
    /// Every rewrite.
    pub const ALL: Rewrites = Rewrites(63);
    /// None: the graph as exported (ONNX Runtime's own optimisations still apply).
    pub const NONE: Rewrites = Rewrites(0);

    pub fn contains(self, r: Rewrite) -> bool {
        self.0 & r.bit() != 0
    }

    /// This set without `r`.
    pub fn without(self, r: Rewrite) -> Rewrites {
        Rewrites(self.0 & !r.bit())
    }

    /// This set with `r`.
    pub fn with(self, r: Rewrite) -> Rewrites {
        Rewrites(self.0 | r.bit())
    }

    /// Every rewrite but these.
    pub fn all_but(off: &[Rewrite]) -> Rewrites {
        off.iter().fold(Rewrites::ALL, |s, r| s.without(*r))
    }

    /// The rewrites of this set, in the order they run.
    pub fn list(self) -> Vec<Rewrite> {
        Rewrite::ALL
            .into_iter()
            .filter(|r| self.contains(*r))
            .collect()
    }

    /// The rewrites not in this set.
    pub fn complement(self) -> Rewrites {
        Rewrites(Rewrites::ALL.0 & !self.0)
    }

    pub fn bits(self) -> u32 {
        self.0
    }

    /// The set of these bits; a bit no rewrite has is `Error::InvalidArgument` naming `name`.
    pub fn from_bits(bits: u64, name: &'static str) -> Result<Rewrites> {
        if bits & !u64::from(Rewrites::ALL.0) != 0 {
            return Err(Error::invalid(
                name,
                format!(
                    "{bits:#x} has bits no rewrite has (the rewrites: {})",
                    Rewrite::ALL
                        .map(|r| format!("{} = {:#x}", r.name(), r.bit()))
                        .join(", ")
                ),
            ));
        }
        Ok(Rewrites(bits as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_bits_round_trip() {
        let mut seen = 0;
        for r in Rewrite::ALL {
            assert_eq!(Rewrite::parse(r.name()), Some(r));
            assert_eq!(seen & r.bit(), 0, "{r}: a bit used twice");
            seen |= r.bit();
        }
        assert_eq!(seen, Rewrites::ALL.bits());
        assert_eq!(Rewrite::parse("Attention"), None);
        let off = Rewrites::all_but(&[Rewrite::QkvSplit, Rewrite::ChannelMeans]);
        assert!(!off.contains(Rewrite::QkvSplit) && off.contains(Rewrite::Attention));
        assert_eq!(
            off.complement().list(),
            [Rewrite::ChannelMeans, Rewrite::QkvSplit]
        );
        assert_eq!(Rewrites::from_bits(63, "x").unwrap(), Rewrites::ALL);
        let e = Rewrites::from_bits(1 << 40 | 1, "options.disabled_rewrites").unwrap_err();
        assert!(e.to_string().contains("0x10000000001"), "{e}");
        let e = Rewrites::from_bits(64, "options.disabled_rewrites").unwrap_err();
        assert!(e.to_string().contains("`options.disabled_rewrites`"), "{e}");
        assert!(e.to_string().contains("qkv-split = 0x10"), "{e}");
    }
}
