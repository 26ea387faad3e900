//! The differential check of the load-time rewrites: a family of near-miss graphs around one
//! attention block, each run through ONNX Runtime as written and as rewritten, whose outputs must
//! agree within float noise. A rewrite that changes what a valid model computes fails here,
//! whether it fused the core or left it as exported.
//!
//! The block is Hiera's as PyTorch exports it (a joint query-key-value projection split along an
//! axis, the keys transposed for the scores, the result's heads merged and projected), so every
//! rewrite that applies to attention on the CPU meets it: the fused core, the split projection,
//! the keys' bias dropped and the values' moved. Each [`NearMiss`] changes one thing the
//! rewrites' arithmetic relies on: a factor on the scores that is not one number, a softmax over
//! another axis, intermediate tensors with other readers, an initializer read twice, token counts
//! known only at run time, and `value_info` that says something else than the graph computes.
//! The tests (`super::tests`) run the whole family; the fuzz target `rewrites` draws members from
//! its bytes ([`NearMiss::from_bytes`]).

use super::build::{
    data, float_init, joint_projection, model_with_value_info, node, perm, try_run, D,
};
use super::graph::Attr;
use super::{fuse_with, ort_probe, RewriteReport, Rewrites, Scores};

/// A factor on the scores, multiplied in after the product of queries and keys
/// (`[batch, heads, queries, keys]` = `[2, 2, 4, 4]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Factor {
    None,
    /// One number: a scale, which the fused kernel takes.
    Scalar,
    /// One per key (`[4]`): the keys' bias no longer shifts a row by one amount.
    PerKey,
    /// One per query (`[4, 1]`).
    PerQuery,
    /// One per head (`[1, 2, 1, 1]`).
    PerHead,
    /// One per score (`[2, 4, 4]`, broadcast over the batch).
    Full,
}

impl Factor {
    pub const ALL: [Factor; 6] = [
        Factor::None,
        Factor::Scalar,
        Factor::PerKey,
        Factor::PerQuery,
        Factor::PerHead,
        Factor::Full,
    ];

    fn dims(self) -> Option<&'static [i64]> {
        match self {
            Factor::None => None,
            Factor::Scalar => Some(&[]),
            Factor::PerKey => Some(&[4]),
            Factor::PerQuery => Some(&[4, 1]),
            Factor::PerHead => Some(&[1, 2, 1, 1]),
            Factor::Full => Some(&[2, 4, 4]),
        }
    }
}

/// One member of the family: how it differs from the block as exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NearMiss {
    pub factor: Factor,
    /// The softmax's axis: -1 or 3 over the keys, 2 over the queries, 1 over the heads.
    pub softmax_axis: i64,
    /// The keys, as split, also a graph output.
    pub keys_output: bool,
    /// The values, as split, also a graph output.
    pub values_output: bool,
    /// The scores also a graph output.
    pub scores_output: bool,
    /// The output projection's bias also read by a second output, and the queries' scale by
    /// the keys' side too.
    pub shared_initializers: bool,
    /// The number of tokens a free dimension of the input (known when the model runs).
    pub dynamic_tokens: bool,
    /// `value_info` for the split parts and the scores with shapes the graph does not compute.
    pub lying_value_info: bool,
    /// The permutation of the core's result before its heads are merged.
    pub merge: [i64; 4],
    /// The seed of the weights and the factors.
    pub seed: u8,
    /// The input's second dimension when the model runs (2 at load time unless
    /// `dynamic_tokens`): 2 · `tokens` tokens.
    pub tokens: i64,
}

impl NearMiss {
    /// The block as exported: every rewrite applies.
    #[cfg(test)]
    pub const EXPORTED: NearMiss = NearMiss {
        factor: Factor::None,
        softmax_axis: -1,
        keys_output: false,
        values_output: false,
        scores_output: false,
        shared_initializers: false,
        dynamic_tokens: false,
        lying_value_info: false,
        merge: [0, 2, 1, 3],
        seed: 0,
        tokens: 2,
    };

    /// The family the tests run: each change alone, then the factors with the others.
    #[cfg(test)]
    pub fn family() -> Vec<NearMiss> {
        let e = NearMiss::EXPORTED;
        let mut all = vec![e];
        for factor in Factor::ALL {
            all.push(NearMiss { factor, ..e });
            for tokens in [2, 3] {
                all.push(NearMiss {
                    factor,
                    dynamic_tokens: true,
                    tokens,
                    ..e
                });
            }
            all.push(NearMiss {
                factor,
                shared_initializers: true,
                lying_value_info: true,
                ..e
            });
        }
        for softmax_axis in [3, 2, 1] {
            all.push(NearMiss { softmax_axis, ..e });
            all.push(NearMiss {
                softmax_axis,
                factor: Factor::PerKey,
                ..e
            });
        }
        all.extend([
            NearMiss {
                keys_output: true,
                ..e
            },
            NearMiss {
                values_output: true,
                ..e
            },
            NearMiss {
                scores_output: true,
                ..e
            },
            NearMiss {
                shared_initializers: true,
                ..e
            },
            NearMiss {
                lying_value_info: true,
                ..e
            },
            NearMiss {
                merge: [0, 2, 3, 1],
                ..e
            },
        ]);
        all
    }

    /// A member drawn from fuzzer bytes (each byte one choice; missing bytes read as 0): the
    /// structure, the seed of its numbers and its size when it runs.
    pub fn from_bytes(data: &[u8]) -> NearMiss {
        let b = |i: usize| data.get(i).copied().unwrap_or(0);
        let merges = [[0, 2, 1, 3], [0, 2, 3, 1], [0, 1, 2, 3]];
        NearMiss {
            factor: Factor::ALL[b(0) as usize % Factor::ALL.len()],
            softmax_axis: [-1, 3, 2, 1][b(1) as usize % 4],
            keys_output: b(2) & 1 != 0,
            values_output: b(2) & 2 != 0,
            scores_output: b(2) & 4 != 0,
            shared_initializers: b(2) & 8 != 0,
            dynamic_tokens: b(2) & 16 != 0,
            lying_value_info: b(2) & 32 != 0,
            merge: merges[b(3) as usize % merges.len()],
            seed: b(4),
            tokens: if b(2) & 16 != 0 {
                1 + i64::from(b(5) % 3)
            } else {
                2
            },
        }
    }

    /// The graph outputs the check compares.
    fn outputs(&self) -> Vec<&'static str> {
        let mut outputs = vec!["out"];
        for (on, name) in [
            (self.keys_output, "k"),
            (self.values_output, "v"),
            (self.scores_output, "scores"),
            (self.shared_initializers, "out2"),
        ] {
            if on {
                outputs.push(name);
            }
        }
        outputs
    }

    /// The model: `x [2, T, 2, 8]` (T = 2, or free) projected to 2 heads of 3 over 2·T tokens,
    /// through the core, merged and projected to `out [2, 2·T, 5]`.
    pub fn model(&self) -> Vec<u8> {
        let seed = u64::from(self.seed) * 16;
        let mut nodes = joint_projection();
        let key_scale = if self.shared_initializers {
            "scale"
        } else {
            "one"
        };
        nodes.extend([
            node("Transpose", &["q"], "qh", perm(&[0, 2, 1, 3])),
            node("Mul", &["qh", "scale"], "qs", vec![]),
            node("Transpose", &["k"], "kt0", perm(&[0, 2, 3, 1])),
            node("Mul", &["kt0", key_scale], "kt", vec![]),
            node("MatMul", &["qs", "kt"], "raw", vec![]),
        ]);
        let scores = if self.factor.dims().is_some() {
            nodes.push(node("Mul", &["raw", "factor"], "scores", vec![]));
            "scores"
        } else {
            nodes.push(node("Identity", &["raw"], "scores", vec![]));
            "scores"
        };
        nodes.extend([
            node(
                "Softmax",
                &[scores],
                "p",
                vec![("axis", Attr::Int(self.softmax_axis))],
            ),
            node("Transpose", &["v"], "vh", perm(&[0, 2, 1, 3])),
            node("MatMul", &["p", "vh"], "o", vec![]),
            node("Transpose", &["o"], "om", perm(&self.merge)),
            node("Reshape", &["om", "merged_shape"], "merged", vec![]),
            node("MatMul", &["merged", "wo"], "projected", vec![]),
            node("Add", &["bo", "projected"], "out", vec![]),
        ]);
        if self.shared_initializers {
            nodes.push(node("Add", &["bo", "bo"], "out2", vec![]));
        }
        let mut floats = vec![
            float_init("b", &[18], &data(18, 5 + seed)),
            float_init("w", &[8, 18], &data(8 * 18, 6 + seed)),
            float_init("scale", &[], &[0.577_350_26]),
            float_init("one", &[], &[1.0]),
            float_init("wo", &[6, 5], &data(6 * 5, 8 + seed)),
            float_init("bo", &[5], &data(5, 9 + seed)),
        ];
        if let Some(dims) = self.factor.dims() {
            let n = dims.iter().product::<i64>() as usize;
            // Factors in [0.5, 2.5): scores of either sign keep their order but not their gaps.
            let values: Vec<f32> = data(n, 10 + seed).iter().map(|v| 1.5 + v).collect();
            floats.push(float_init("factor", dims, &values));
        }
        // Three heads of two where the graph has two of three, and square scores of 9.
        let parts = [D::N(2), D::N(4), D::N(3), D::N(2)];
        let scores = [D::N(2), D::N(3), D::N(9), D::N(9)];
        let lies: Vec<(&str, &[D])> = if self.lying_value_info {
            vec![
                ("q", &parts),
                ("k", &parts),
                ("v", &parts),
                ("scores", &scores),
            ]
        } else {
            Vec::new()
        };
        let tokens = if self.dynamic_tokens {
            D::S("t")
        } else {
            D::N(2)
        };
        model_with_value_info(
            17,
            &nodes,
            &floats,
            &[
                ("shape", &[0, -1, 3, 2, 3]),
                ("axes", &[2]),
                ("merged_shape", &[0, -1, 6]),
            ],
            &[("x", &[D::N(2), tokens, D::N(2), D::N(8)])],
            &self.outputs(),
            &lies,
        )
    }
}

/// What the check of one member found: the rewrites' report, and how far the rewritten graph's
/// outputs were from the graph's as written (`None`: nothing was rewritten).
#[derive(Debug)]
#[cfg_attr(not(test), allow(dead_code))]
pub struct Checked {
    pub report: RewriteReport,
    pub worst: Option<f32>,
}

/// Rewrites `m` as the library does for the CPU (cores of every size, `min_scores` 0, or none
/// fused, `i64::MAX`) and compares every output with the graph as written on the member's feeds.
/// `Err` where they differ beyond float noise (1e-4 of the largest magnitude, at least 1e-5) or
/// where ONNX Runtime runs the model as written but not as rewritten; `Ok(None)` where ONNX
/// Runtime does not run the model as written (nothing to compare).
pub fn check(near: &NearMiss, min_scores: i64) -> Result<Option<Checked>, String> {
    let m = near.model();
    let outputs = near.outputs();
    let feeds = [("x", vec![2, near.tokens, 2, 8])];
    let Ok(want) = try_run(&m, &feeds, &outputs) else {
        return Ok(None);
    };
    // A rewriter that gives up (its probe session refused, say) leaves the model as exported, as
    // the library loads it then: nothing to compare.
    let (rewritten, report) = match fuse_with(
        &m,
        min_scores,
        Scores::Float,
        true,
        Rewrites::ALL,
        ort_probe,
    ) {
        Ok(done) => done,
        Err(e) => {
            return Ok(Some(Checked {
                report: RewriteReport::not_tried(e, Rewrites::ALL),
                worst: None,
            }))
        }
    };
    let Some(rewritten) = rewritten else {
        return Ok(Some(Checked {
            report,
            worst: None,
        }));
    };
    let got = try_run(&rewritten, &feeds, &outputs)
        .map_err(|e| format!("{near:?}: runs as written, rewritten {e} ({report})"))?;
    let mut worst = 0f32;
    for ((name, w), g) in outputs.iter().zip(&want).zip(&got) {
        if w.len() != g.len() {
            return Err(format!(
                "{near:?}: output `{name}` has {} values rewritten, {} as written ({report})",
                g.len(),
                w.len()
            ));
        }
        let largest = w.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = w.iter().zip(g).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        let nan = w.iter().zip(g).any(|(a, b)| a.is_nan() != b.is_nan());
        if nan || diff > (1e-4 * largest).max(1e-5) {
            return Err(format!(
                "{near:?}, min_scores {min_scores}: output `{name}` (largest {largest}) differs by \
                 {diff} rewritten ({report})"
            ));
        }
        worst = worst.max(diff);
    }
    Ok(Some(Checked {
        report,
        worst: Some(worst),
    }))
}
