//! The rewriter on small generated graphs: each pattern it fuses computes the same numbers through
//! ONNX Runtime as the graph as written; each near miss is left byte for byte as it was.

use super::build::{data, float_init, joint_projection, model, model_of_opset, node, perm, run, D};
use super::corpus;
use super::graph::{Attr, NewNode};
use super::*;

fn op_count(model: &[u8], op: &str) -> usize {
    let g = graph::Graph::parse(model).unwrap();
    g.nodes.iter().filter(|n| n.op_type == op).count()
}

/// Fuses `model`, checks one fusion and the same outputs for each set of feeds.
fn assert_fused(model: &[u8], feed_sets: &[Vec<(&str, Vec<i64>)>]) -> RewriteReport {
    assert_fused_within(model, feed_sets, 1e-5)
}

/// [`assert_fused`], the outputs within `tolerance` of the graph as written.
fn assert_fused_within(
    model: &[u8],
    feed_sets: &[Vec<(&str, Vec<i64>)>],
    tolerance: f32,
) -> RewriteReport {
    let (fused, report) = fuse_with(model, 0, Scores::Float, false, Rewrites::ALL, ort_probe)
        .expect("the rewriter runs");
    let fused = fused.unwrap_or_else(|| panic!("nothing fused: {report}"));
    assert_eq!(report.fused_count(), 1, "{report}");
    assert!(report.left().is_empty(), "{report}");
    assert_eq!(op_count(&fused, "MultiHeadAttention"), 1);
    assert_eq!(op_count(&fused, "Softmax"), 0);
    for feeds in feed_sets {
        let want = run(model, feeds, "out");
        let got = run(&fused, feeds, "out");
        let (worst, _) = worst_and_largest(&want, &got);
        assert!(
            worst < tolerance,
            "fused differs from the graph as written by {worst}"
        );
    }
    report
}

/// Leaves `model` alone, for `why` when given.
fn assert_left(model: &[u8], why: Option<&str>) {
    let (fused, report) = fuse_with(model, 0, Scores::Float, false, Rewrites::ALL, ort_probe)
        .expect("the rewriter runs");
    assert!(fused.is_none(), "fused a near miss: {report}");
    assert_eq!(report.fused_count(), 0);
    match why {
        Some(why) => assert!(
            report.left().iter().any(|(w, _)| w.contains(why)),
            "expected `{why}` in {report}"
        ),
        None => assert!(report.left().is_empty(), "{report}"),
    }
}

/// torch's scaled_dot_product_attention as its exporter writes it (the scale computed from the
/// queries' shape, `sqrt(1 / sqrt(H))` on each side), between the head split and merge of a
/// [1, S, 8] projection in 2 heads of 4, over a key length the caller chooses.
fn sdpa_heads() -> Vec<u8> {
    sdpa_heads_in(false)
}

/// [`sdpa_heads`], in float16 when `half` as `sam2-variant fp16` leaves it:
/// float32 inputs and output cast at the edges, the attention in float16, its scale computed in
/// float32 from the shapes and cast to float16 where it meets the queries and keys.
fn sdpa_heads_in(half: bool) -> Vec<u8> {
    let to = |t: i32| vec![("to", Attr::Int(t as i64))];
    let (q, k, v, scale, out) = if half {
        ("q16", "k16", "v16", "scale16", "out16")
    } else {
        ("q", "k", "v", "scale", "out")
    };
    let mut nodes = Vec::new();
    if half {
        for (from, into) in [("q", q), ("k", k), ("v", v)] {
            nodes.push(node("Cast", &[from], into, to(graph::FLOAT16)));
        }
    }
    nodes.extend([
        node("Reshape", &[q, "split_q"], "q4", vec![]),
        node("Transpose", &["q4"], "qh", perm(&[0, 2, 1, 3])),
        node("Shape", &["qh"], "q_shape", vec![]),
        node(
            "Slice",
            &["q_shape", "minus_one", "int_max"],
            "head",
            vec![],
        ),
        node("Cast", &["head"], "head_f", to(graph::FLOAT)),
        node("Sqrt", &["head_f"], "root", vec![]),
        node("Div", &["one", "root"], "inv_root", vec![]),
        node("Cast", &["inv_root"], "inv_root_f", to(graph::FLOAT)),
        node("Sqrt", &["inv_root_f"], "scale", vec![]),
    ]);
    if half {
        nodes.push(node("Cast", &["scale"], scale, to(graph::FLOAT16)));
    }
    nodes.extend([
        node("Reshape", &[k, "split_kv"], "k4", vec![]),
        node("Transpose", &["k4"], "kh", perm(&[0, 2, 1, 3])),
        node("Reshape", &[v, "split_kv"], "v4", vec![]),
        node("Transpose", &["v4"], "vh", perm(&[0, 2, 1, 3])),
        node("Transpose", &["kh"], "kt", perm(&[0, 1, 3, 2])),
        node("Mul", &["qh", scale], "qs", vec![]),
        node("Mul", &["kt", scale], "ks", vec![]),
        node("MatMul", &["qs", "ks"], "scores", vec![]),
        node("Softmax", &["scores"], "p", vec![("axis", Attr::Int(-1))]),
        node("MatMul", &["p", "vh"], "o", vec![]),
        node("Transpose", &["o"], "om", perm(&[0, 2, 1, 3])),
        node("Reshape", &["om", "merge"], out, vec![]),
    ]);
    if half {
        nodes.push(node("Cast", &[out], "out", to(graph::FLOAT)));
    }
    model(
        &nodes,
        &[float_init("one", &[], &[1.0])],
        &[
            ("minus_one", &[-1]),
            ("int_max", &[i64::MAX]),
            ("split_q", &[1, 6, 2, 4]),
            ("split_kv", &[1, -1, 2, 4]),
            ("merge", &[1, -1, 8]),
        ],
        &[
            ("q", &[D::N(1), D::N(6), D::N(8)]),
            ("k", &[D::N(1), D::S("L"), D::N(8)]),
            ("v", &[D::N(1), D::S("L"), D::N(8)]),
        ],
        &["out"],
    )
}

#[test]
fn sdpa_between_head_split_and_merge_is_fused_and_computes_the_same() {
    let m = sdpa_heads();
    let feeds = |l: i64| {
        vec![
            ("q", vec![1, 6, 8]),
            ("k", vec![1, l, 8]),
            ("v", vec![1, l, 8]),
        ]
    };
    let report = assert_fused(&m, &[feeds(10), feeds(3)]);
    // The scale's computation went with the scores it scaled.
    let (fused, _) = fuse_with(&m, 0, Scores::Float, false, Rewrites::ALL, ort_probe).unwrap();
    let fused = fused.unwrap();
    for op in ["Shape", "Sqrt", "Slice", "Cast"] {
        assert_eq!(op_count(&fused, op), 0, "a dead {op} left behind");
    }
    assert_eq!(report.fused()[0].0, "[1×2] 6 queries × ? keys, head dim 4");
}

#[test]
fn float16_attention_of_an_fp16_variant_is_fused_and_computes_the_same() {
    let feeds = |l: i64| {
        vec![
            ("q", vec![1, 6, 8]),
            ("k", vec![1, l, 8]),
            ("v", vec![1, l, 8]),
        ]
    };
    // Both in float16 (3 decimal digits); outputs of magnitude up to 1.
    assert_fused_within(&sdpa_heads_in(true), &[feeds(10), feeds(3)], 2e-3);
}

/// Rank-3 attention: scores divided by a constant after the MatMul, softmax by its default axis,
/// values of another width than the keys.
fn rank3(axis: Option<i64>, scores_out: bool, p_out: bool) -> Vec<u8> {
    let attrs = axis
        .map(|a| vec![("axis", Attr::Int(a))])
        .unwrap_or_default();
    let nodes = vec![
        node("Transpose", &["k"], "kt", perm(&[0, 2, 1])),
        node("MatMul", &["q", "kt"], "scores", vec![]),
        node("Div", &["scores", "two"], "scaled", vec![]),
        node("Softmax", &["scaled"], "p", attrs),
        node("MatMul", &["p", "v"], "out", vec![]),
    ];
    let mut outputs = vec!["out"];
    if scores_out {
        outputs.push("scores");
    }
    if p_out {
        outputs.push("p");
    }
    model(
        &nodes,
        &[float_init("two", &[1], &[2.0])],
        &[],
        &[
            ("q", &[D::N(3), D::N(5), D::N(4)]),
            ("k", &[D::N(3), D::N(7), D::N(4)]),
            ("v", &[D::N(3), D::N(7), D::N(6)]),
        ],
        &outputs,
    )
}

#[test]
fn rank3_attention_with_divided_scores_is_fused_and_computes_the_same() {
    let feeds = vec![
        ("q", vec![3, 5, 4]),
        ("k", vec![3, 7, 4]),
        ("v", vec![3, 7, 6]),
    ];
    assert_fused(&rank3(None, false, false), std::slice::from_ref(&feeds));
    assert_fused(&rank3(Some(2), false, false), &[feeds]);
}

/// Attention over tensors whose batch, lengths and head size are known only at run time, scaled
/// as torch's exporter scales it (from the queries' shape, here not known at load time), with the
/// queries' batch named `q_batch` (another name than the keys': broadcast as MatMul does).
fn dynamic(q_batch: &'static str) -> Vec<u8> {
    let to_float = vec![("to", Attr::Int(graph::FLOAT as i64))];
    let nodes = vec![
        node("Shape", &["q"], "q_shape", vec![]),
        node(
            "Slice",
            &["q_shape", "minus_one", "int_max"],
            "head",
            vec![],
        ),
        node("Cast", &["head"], "head_f", to_float.clone()),
        node("Sqrt", &["head_f"], "root", vec![]),
        node("Div", &["one", "root"], "inv_root", vec![]),
        node("Cast", &["inv_root"], "inv_root_f", to_float),
        node("Sqrt", &["inv_root_f"], "scale", vec![]),
        node("Mul", &["q", "scale"], "qs", vec![]),
        node("Transpose", &["k"], "kt", perm(&[0, 1, 3, 2])),
        node("Mul", &["kt", "scale"], "ks", vec![]),
        node("MatMul", &["qs", "ks"], "scores", vec![]),
        node("Softmax", &["scores"], "p", vec![]),
        node("MatMul", &["p", "v"], "out", vec![]),
    ];
    model(
        &nodes,
        &[float_init("one", &[], &[1.0])],
        &[("minus_one", &[-1]), ("int_max", &[i64::MAX])],
        &[
            ("q", &[D::S(q_batch), D::N(2), D::S("S"), D::S("H")]),
            ("k", &[D::S("b"), D::N(2), D::S("L"), D::S("H")]),
            ("v", &[D::S("b"), D::N(2), D::S("L"), D::N(3)]),
        ],
        &["out"],
    )
}

#[test]
fn attention_of_shapes_known_at_run_time_is_fused_and_computes_the_same() {
    let feeds = |bq: i64, b: i64, s: i64, l: i64, h: i64| {
        vec![
            ("q", vec![bq, 2, s, h]),
            ("k", vec![b, 2, l, h]),
            ("v", vec![b, 2, l, 3]),
        ]
    };
    assert_fused(
        &dynamic("b"),
        &[feeds(1, 1, 5, 9, 4), feeds(3, 3, 2, 4, 16)],
    );
    // The queries' batch broadcast against the keys' (1 against 3), and equal.
    assert_fused(
        &dynamic("q_batch"),
        &[feeds(1, 3, 5, 9, 4), feeds(2, 2, 3, 3, 8)],
    );
}

/// How [`projected_values`] makes the head's values of the projection `y` `[1, L, 8]`.
#[derive(Clone, Copy)]
enum Split {
    /// As SAM2's memory attention: a Reshape to `[1, L, 1, 8]`, a Transpose to `[1, 1, L, 8]`.
    Sam2,
    /// An Unsqueeze to `[1, 1, L, 8]`, its axes an input (opset 13 on).
    Unsqueeze,
    /// A Transpose of the projection's rows and columns, then a Reshape to `[1, 1, L, 8]`: the
    /// elements in another order.
    Scrambled,
}

/// One head over values projected from `din`-wide inputs, `b + x · W`, split into a head as
/// `split` says.
fn projected_values(din: i64, split: Split) -> Vec<u8> {
    let mut nodes = vec![
        node("MatMul", &["x", "w"], "xw", vec![]),
        node("Add", &["b", "xw"], "y", vec![]),
    ];
    match split {
        Split::Sam2 => {
            nodes.push(node("Reshape", &["y", "split"], "y4", vec![]));
            nodes.push(node("Transpose", &["y4"], "vh", perm(&[0, 2, 1, 3])));
        }
        Split::Unsqueeze => nodes.push(node("Unsqueeze", &["y", "axis0"], "vh", vec![])),
        Split::Scrambled => {
            nodes.push(node("Transpose", &["y"], "yt", perm(&[0, 2, 1])));
            nodes.push(node("Reshape", &["yt", "heads"], "vh", vec![]));
        }
    }
    nodes.extend([
        node("Transpose", &["k"], "kt", perm(&[0, 1, 3, 2])),
        node("MatMul", &["q", "kt"], "scores", vec![]),
        node("Mul", &["scores", "scale"], "scaled", vec![]),
        node("Softmax", &["scaled"], "p", vec![("axis", Attr::Int(-1))]),
        node("MatMul", &["p", "vh"], "out", vec![]),
    ]);
    let w = data((din * 8) as usize, 3);
    model(
        &nodes,
        &[
            float_init("w", &[din, 8], &w),
            float_init("b", &[8], &data(8, 4)),
            float_init("scale", &[], &[0.35]),
        ],
        &[
            ("split", &[1, -1, 1, 8]),
            ("heads", &[1, 1, -1, 8]),
            ("axis0", &[0]),
        ],
        &[
            ("q", &[D::N(1), D::N(1), D::N(6), D::N(8)]),
            ("k", &[D::N(1), D::N(1), D::S("L"), D::N(8)]),
            ("x", &[D::N(1), D::S("L"), D::N(din)]),
        ],
        &["out"],
    )
}

/// [`projected_values`] as torch exports a head split: the split's shape computed from the
/// projection's (`Concat(Shape(y)[0], Shape(y)[1], 1, 8)`), which leaves the values' shape unknown
/// to ONNX Runtime's inference; queries whose dimensions are all known only at run time.
fn projected_values_torch_split() -> Vec<u8> {
    let nodes = vec![
        node("MatMul", &["x", "w"], "xw", vec![]),
        node("Add", &["xw", "b"], "y", vec![]),
        node("Shape", &["y"], "y_shape", vec![]),
        node(
            "Gather",
            &["y_shape", "zero"],
            "y0",
            vec![("axis", Attr::Int(0))],
        ),
        node(
            "Gather",
            &["y_shape", "one"],
            "y1",
            vec![("axis", Attr::Int(0))],
        ),
        node(
            "Concat",
            &["y0", "y1", "one_head", "width"],
            "split",
            vec![("axis", Attr::Int(0))],
        ),
        node("Reshape", &["y", "split"], "y4", vec![]),
        node("Transpose", &["y4"], "vh", perm(&[0, 2, 1, 3])),
        node("Transpose", &["k"], "kt", perm(&[0, 1, 3, 2])),
        node("MatMul", &["q", "kt"], "scores", vec![]),
        node("Mul", &["scores", "scale"], "scaled", vec![]),
        node("Softmax", &["scaled"], "p", vec![("axis", Attr::Int(-1))]),
        node("MatMul", &["p", "vh"], "out", vec![]),
    ];
    model(
        &nodes,
        &[
            float_init("w", &[4, 8], &data(32, 3)),
            float_init("b", &[8], &data(8, 4)),
            float_init("scale", &[], &[0.35]),
        ],
        &[
            ("zero", &[0]),
            ("one", &[1]),
            ("one_head", &[1]),
            ("width", &[8]),
        ],
        &[
            ("q", &[D::S("B"), D::S("N"), D::S("S"), D::S("H")]),
            ("k", &[D::N(1), D::N(1), D::S("L"), D::N(8)]),
            ("x", &[D::N(1), D::S("L"), D::N(4)]),
        ],
        &["out"],
    )
}

#[test]
fn values_projected_from_narrower_inputs_are_projected_after_the_kernel() {
    let feeds = |din: i64, l: i64| {
        vec![
            ("q", vec![1, 1, 6, 8]),
            ("k", vec![1, 1, l, 8]),
            ("x", vec![1, l, din]),
        ]
    };
    let m = projected_values(4, Split::Sam2);
    let report = assert_fused(&m, &[feeds(4, 10), feeds(4, 3)]);
    assert_eq!(
        report.fused()[0].0,
        "[1×1] 6 queries × L keys, head dim 8, values projected after (4 → 8)"
    );
    // The kernel reads the inputs: the projection before it is gone, one after it is left.
    let (fused, _) = fuse_with(&m, 0, Scores::Float, false, Rewrites::ALL, ort_probe).unwrap();
    let fused = fused.unwrap();
    assert_eq!(op_count(&fused, "MatMul"), 1);
    let g = graph::Graph::parse(&fused).unwrap();
    let mha = g
        .nodes
        .iter()
        .find(|n| n.op_type == "MultiHeadAttention")
        .unwrap();
    assert!(
        g.nodes
            .iter()
            .any(|n| n.outputs == mha.inputs[2..3] && n.inputs[0] == "x"),
        "the kernel's values are not the projection's inputs"
    );

    // The head made by an Unsqueeze.
    let report = assert_fused(&projected_values(4, Split::Unsqueeze), &[feeds(4, 6)]);
    assert!(
        report.fused()[0]
            .0
            .ends_with("values projected after (4 → 8)"),
        "{report}"
    );
    // The split's shape computed from the projection's, the queries' shapes unknown at load time.
    let report = assert_fused(&projected_values_torch_split(), &[feeds(4, 9), feeds(4, 1)]);
    assert!(
        report.fused()[0]
            .0
            .ends_with("values projected after (4 → 8)"),
        "{report}"
    );

    // Inputs as wide as the values: nothing to save, the projection stays before the kernel.
    let report = assert_fused(&projected_values(8, Split::Sam2), &[feeds(8, 5)]);
    assert!(!report.fused()[0].0.contains("projected"), "{report}");
    // Values whose elements a Transpose reordered: fused, the projection left where it is (were
    // it moved, the outputs would differ).
    let report = assert_fused(
        &projected_values(4, Split::Scrambled),
        &[feeds(4, 5), feeds(4, 2)],
    );
    assert!(!report.fused()[0].0.contains("projected"), "{report}");
}

#[test]
fn near_misses_are_left_as_written() {
    // Softmax over another axis than the keys'.
    assert_left(&rank3(Some(1), false, false), Some("softmax over axis 1"));
    // The scores or the probabilities read by something else (here: a graph output).
    assert_left(
        &rank3(None, true, false),
        Some("the scores have another reader"),
    );
    assert_left(&rank3(None, false, true), Some("the probabilities"));
}

#[test]
fn a_scale_that_is_not_a_constant_scalar_is_left_as_written() {
    // Scores scaled per key (a [7] vector).
    let nodes = vec![
        node("Transpose", &["k"], "kt", perm(&[0, 2, 1])),
        node("MatMul", &["q", "kt"], "scores", vec![]),
        node("Mul", &["scores", "per_key"], "scaled", vec![]),
        node("Softmax", &["scaled"], "p", vec![]),
        node("MatMul", &["p", "v"], "out", vec![]),
    ];
    let inputs: &[(&str, &[D])] = &[
        ("q", &[D::N(3), D::N(5), D::N(4)]),
        ("k", &[D::N(3), D::N(7), D::N(4)]),
        ("v", &[D::N(3), D::N(7), D::N(6)]),
    ];
    let m = model(
        &nodes,
        &[float_init("per_key", &[7], &[0.5; 7])],
        &[],
        inputs,
        &["out"],
    );
    assert_left(&m, Some("not a scalar"));
    // A scalar the caller can override (an initializer that is also a graph input): not a
    // softmax of a MatMul by a known scale at all.
    let mut with_input: Vec<(&str, &[D])> = inputs.to_vec();
    with_input.push(("per_key", &[]));
    let m = model(
        &nodes,
        &[float_init("per_key", &[], &[0.5])],
        &[],
        &with_input,
        &["out"],
    );
    assert_left(&m, None);
}

#[test]
fn small_score_matrices_are_left_as_exported_by_default() {
    // 5 queries × 7 keys: far below MIN_SCORES.
    let (fused, report) = fuse(
        &rank3(None, false, false),
        Scores::Float,
        true,
        Rewrites::ALL,
    )
    .unwrap();
    assert!(fused.is_none());
    assert!(
        report
            .left()
            .iter()
            .any(|(w, _)| w.contains("5 × 7 scores per head")),
        "{report}"
    );
}

#[test]
fn the_report_says_what_was_fused_and_what_was_left() {
    let mut report = RewriteReport::new(Rewrites::ALL);
    for _ in 0..4 {
        report.done(
            Rewrite::Attention,
            "[1×1] 4096 queries × 4096 keys, head dim 256",
        );
    }
    report.left_as_exported(Rewrite::Attention, "the scores have another reader");
    assert_eq!(
        report.to_string(),
        "4 fused (4 × [1×1] 4096 queries × 4096 keys, head dim 256), 1 left as exported \
         (1 × the scores have another reader)"
    );
    let mut noted = RewriteReport::new(Rewrites::ALL);
    for _ in 0..4 {
        noted.done(
            Rewrite::Attention,
            "[1×1] 4096 queries × 4096 keys, head dim 256",
        );
    }
    noted.note = Some("int8 scores asked for, not used: this CPU has no VNNI".into());
    assert_eq!(
        noted.to_string(),
        "4 fused (4 × [1×1] 4096 queries × 4096 keys, head dim 256); int8 scores asked for, not \
         used: this CPU has no VNNI"
    );
    assert_eq!(
        RewriteReport::new(Rewrites::ALL).to_string(),
        "no attention found"
    );
    let mut means = RewriteReport::new(Rewrites::ALL);
    for _ in 0..12 {
        means.done(Rewrite::ChannelMeans, "mean over the channels");
    }
    assert_eq!(
        means.to_string(),
        "no attention found; 12 channel means as matrix products"
    );
    let mut both = noted.clone();
    both.done(Rewrite::ChannelMeans, "mean over the channels");
    assert!(
        both.to_string()
            .ends_with("no VNNI; 1 channel mean as a matrix product"),
        "{both}"
    );
    assert_eq!(
        RewriteReport::not_tried("optimisation off", Rewrites::ALL).to_string(),
        "as exported (optimisation off)"
    );
    // The report is a list: an entry per rewrite that is on, in the order they run, whatever
    // each did; those switched off are named instead.
    let on = Rewrites::ALL.without(Rewrite::ChannelMeans);
    let mut listed = RewriteReport::new(on);
    listed.done(Rewrite::DepthwiseBranches, "2 depthwise convolutions");
    listed.left_as_exported(Rewrite::QkvSplit, "taken by an earlier rewrite");
    let order: Vec<Rewrite> = listed.rewrites.iter().map(|o| o.rewrite).collect();
    assert_eq!(
        order,
        [
            Rewrite::Attention,
            Rewrite::ValuesAfterAttention,
            Rewrite::Int8Scores,
            Rewrite::QkvSplit,
            Rewrite::DepthwiseBranches
        ]
    );
    assert_eq!(listed.off, [Rewrite::ChannelMeans]);
    assert_eq!(listed.count(Rewrite::DepthwiseBranches), 1);
    assert_eq!(listed.outcome(Rewrite::QkvSplit).unwrap().left_count(), 1);
    assert!(
        listed
            .to_string()
            .ends_with("; switched off: channel-means"),
        "{listed}"
    );
}

/// Rank-3 attention of 2 batch entries, head dim `h`, the scores multiplied by 8/√h (sharper than
/// a model's 1/√h on these inputs in [-1, 1), so that the softmax picks some keys out): queries
/// and keys of lengths `s` and `l` (sizes, or named free ones).
fn wide(s: D, l: D, h: i64) -> Vec<u8> {
    let nodes = vec![
        node("Transpose", &["k"], "kt", perm(&[0, 2, 1])),
        node("MatMul", &["q", "kt"], "scores", vec![]),
        node("Mul", &["scores", "scale"], "scaled", vec![]),
        node("Softmax", &["scaled"], "p", vec![("axis", Attr::Int(-1))]),
        node("MatMul", &["p", "v"], "out", vec![]),
    ];
    let l2 = match &l {
        D::N(n) => D::N(*n),
        D::S(name) => D::S(name),
    };
    model(
        &nodes,
        &[float_init("scale", &[1], &[8.0 / (h as f32).sqrt()])],
        &[],
        &[
            ("q", &[D::N(2), s, D::N(h)]),
            ("k", &[D::N(2), l, D::N(h)]),
            ("v", &[D::N(2), l2, D::N(8)]),
        ],
        &["out"],
    )
}

#[test]
fn sizes_shape_inference_made_up_are_reported_as_unknown() {
    // ONNX's shape inference names what it cannot tell `unk__N`; the model's own names stay.
    let report = |s: &'static str, l: &'static str| {
        let (_, report) = fuse_with(
            &wide(D::S(s), D::S(l), 8),
            0,
            Scores::Float,
            false,
            Rewrites::ALL,
            ort_probe,
        )
        .expect("the rewriter runs");
        report.fused()[0].0.clone()
    };
    assert_eq!(
        report("unk__98", "unk__7"),
        "[2] ? queries × ? keys, head dim 8"
    );
    assert_eq!(report("S", "unk__7"), "[2] S queries × ? keys, head dim 8");
    // Only `unk__` and digits is made up.
    assert_eq!(
        report("unk__", "unk__7x"),
        "[2] unk__ queries × unk__7x keys, head dim 8"
    );
}

/// Fuses `model` with int8 scores in blocks of at most `block_scores`; checks the report and
/// the kernel's operators, and returns the fused model.
fn fuse_int8(model: &[u8], block_scores: i64, blocks: usize) -> Vec<u8> {
    let scores = Scores::Int8 { block_scores };
    let (fused, report) =
        fuse_with(model, 0, scores, false, Rewrites::ALL, ort_probe).expect("the rewriter runs");
    let fused = fused.unwrap_or_else(|| panic!("nothing fused: {report}"));
    assert_eq!(report.fused_count(), 1, "{report}");
    assert!(report.fused()[0].0.ends_with(", int8 scores"), "{report}");
    assert_eq!(op_count(&fused, "MultiHeadAttention"), 0);
    assert_eq!(op_count(&fused, "DynamicQuantizeLinear"), 1);
    assert_eq!(op_count(&fused, "MatMulIntegerToFloat"), blocks);
    assert_eq!(op_count(&fused, "Softmax"), blocks);
    fused
}

/// Whether ONNX Runtime's int8 kernels sum exactly here; where they do not (no VNNI), the
/// library never runs the int8 kernel, and the tests check its graph only.
fn int8_sums_exactly() -> bool {
    match int8_scores_available() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("the int8 kernel's graph checked, not run: {why}");
            false
        }
    }
}

/// The largest difference between two outputs, and the largest magnitude of the first.
fn worst_and_largest(want: &[f32], got: &[f32]) -> (f32, f32) {
    assert_eq!(want.len(), got.len());
    let worst = want
        .iter()
        .zip(got)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    (worst, want.iter().map(|a| a.abs()).fold(0f32, f32::max))
}

#[test]
fn int8_scores_compute_the_attention_within_their_precision_in_blocks_of_queries() {
    let m = wide(D::N(40), D::N(300), 256);
    let feeds = vec![
        ("q", vec![2, 40, 256]),
        ("k", vec![2, 300, 256]),
        ("v", vec![2, 300, 8]),
    ];
    // In one block, and in blocks of 2 × 7 × 300 scores (6 blocks, the last of 5 queries).
    let (whole, blocked) = (fuse_int8(&m, i64::MAX, 1), fuse_int8(&m, 2 * 7 * 300, 6));
    if !int8_sums_exactly() {
        return;
    }
    let want = run(&m, &feeds, "out");
    let whole = run(&whole, &feeds, "out");
    let blocked = run(&blocked, &feeds, "out");
    assert_eq!(whole, blocked, "blocks change the result");
    let (worst, largest) = worst_and_largest(&want, &whole);
    // Scores of magnitude up to about 4 to 8-bit steps: the outputs (magnitude up to 1) move by
    // a few hundredths at most; a kernel that lost a key's scale, or a block, moves them by
    // tenths.
    assert!(
        worst < 3e-2 && largest > 0.5,
        "int8 scores differ from float by {worst} (outputs up to {largest})"
    );
}

#[test]
fn int8_scores_of_lengths_known_at_run_time_take_blocks_computed_then() {
    let m = wide(D::S("S"), D::S("L"), 256);
    let fused = fuse_int8(&m, INT8_BLOCK_SCORES, INT8_DYNAMIC_BLOCKS as usize);
    if !int8_sums_exactly() {
        return;
    }
    // More queries than blocks, and fewer (some blocks empty).
    for s in [37, 3] {
        let feeds = vec![
            ("q", vec![2, s, 256]),
            ("k", vec![2, 50, 256]),
            ("v", vec![2, 50, 8]),
        ];
        let (worst, largest) =
            worst_and_largest(&run(&m, &feeds, "out"), &run(&fused, &feeds, "out"));
        assert!(
            worst < 3e-2 && largest > 0.5,
            "{s} queries: int8 scores differ from float by {worst} (outputs up to {largest})"
        );
    }
}

#[test]
fn int8_scores_are_not_given_to_small_heads_nor_to_float16() {
    for (m, why) in [
        (wide(D::N(40), D::N(300), 96), "head dim 96"),
        (sdpa_heads_in(true), "float16"),
    ] {
        let (fused, report) = fuse_with(&m, 0, Scores::INT8, false, Rewrites::ALL, ort_probe)
            .expect("the rewriter runs");
        let fused = fused.unwrap_or_else(|| panic!("{why}: nothing fused: {report}"));
        assert_eq!(op_count(&fused, "MultiHeadAttention"), 1, "{why}");
        assert_eq!(op_count(&fused, "MatMulIntegerToFloat"), 0, "{why}");
        assert!(!report.to_string().contains("int8"), "{why}: {report}");
    }
}

/// The library's own reading of CPUID agrees with the kernel's (`/proc/cpuinfo`'s flags).
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn int8_scores_are_available_where_the_cpu_has_vnni() {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .expect("a flags line");
    let vnni = flags
        .split_whitespace()
        .any(|f| f == "avx512_vnni" || f == "avx_vnni");
    assert_eq!(
        int8_scores_available().is_ok(),
        vnni,
        "{:?}",
        int8_scores_available()
    );
}

/// SAM2's channels-first layer norm over a batch of `batch`, `channels` channels of `spatial`
/// (height, width) positions, as exported: two means over axis 1 (by attribute before opset 18,
/// by a constant input from 18 on; `keepdims` as given), then the affine map.
fn layer_norm_2d(
    opset: u64,
    batch: D,
    channels: D,
    spatial: [D; 2],
    axes: &[i64],
    keepdims: Option<i64>,
) -> Vec<u8> {
    let c = match channels {
        D::N(c) => c,
        D::S(_) => 32,
    };
    let mean = |x: &str, out: &str| {
        let mut attrs = Vec::new();
        if let Some(k) = keepdims {
            attrs.push(("keepdims", Attr::Int(k)));
        }
        if opset < 18 {
            attrs.push(("axes", Attr::Ints(axes.to_vec())));
            node("ReduceMean", &[x], out, attrs)
        } else {
            node("ReduceMean", &[x, "axes"], out, attrs)
        }
    };
    let nodes = vec![
        mean("x", "mu"),
        node("Sub", &["x", "mu"], "d", vec![]),
        node("Pow", &["d", "two"], "d2", vec![]),
        mean("d2", "var"),
        node("Add", &["var", "eps"], "ve", vec![]),
        node("Sqrt", &["ve"], "sd", vec![]),
        node("Div", &["d", "sd"], "n", vec![]),
        node("Mul", &["n", "w"], "nw", vec![]),
        node("Add", &["nw", "b"], "out", vec![]),
    ];
    let floats = [
        float_init("two", &[], &[2.0]),
        float_init("eps", &[], &[1e-6]),
        float_init("w", &[c, 1, 1], &data(c as usize, 3)),
        float_init("b", &[c, 1, 1], &data(c as usize, 4)),
    ];
    let shapes: &[(&str, &[i64])] = if opset < 18 { &[] } else { &[("axes", axes)] };
    let [height, width] = spatial;
    let input = [batch, channels, height, width];
    model_of_opset(opset, &nodes, &floats, shapes, &[("x", &input)], &["out"])
}

/// 6 × 5 positions, both known.
const KNOWN: [D; 2] = [D::N(6), D::N(5)];

#[test]
fn channel_means_become_matrix_products_computing_the_same_norm() {
    // (batch in the model, batch fed, spatial sizes in the model)
    let shapes = [
        (D::N(1), 1, KNOWN),
        (D::N(8), 8, KNOWN),
        (D::S("prompts"), 3, KNOWN),
        (D::N(1), 1, [D::S("h"), D::N(5)]),
        (D::S("prompts"), 2, [D::N(6), D::S("w")]),
    ];
    for opset in [17, 18] {
        for axes in [[1], [-3]] {
            for (batch, fed, spatial) in shapes {
                let case = format!("opset {opset}, axes {axes:?}, batch {batch:?}, {spatial:?}");
                let m = layer_norm_2d(opset, batch, D::N(32), spatial, &axes, None);
                let (fused, report) =
                    fuse_with(&m, 0, Scores::Float, true, Rewrites::ALL, ort_probe).unwrap();
                let fused = fused.unwrap_or_else(|| panic!("{case}: nothing rewritten: {report}"));
                assert_eq!(report.count(Rewrite::ChannelMeans), 2, "{case}: {report}");
                assert_eq!(report.fused_count(), 0);
                assert_eq!(op_count(&fused, "ReduceMean"), 0, "{case}");
                assert_eq!(op_count(&fused, "MatMul"), 2, "{case}");
                let feeds = [("x", vec![fed, 32, 6, 5])];
                let want = run(&m, &feeds, "out");
                let got = run(&fused, &feeds, "out");
                assert_eq!(want.len(), got.len(), "{case}");
                let (worst, _) = worst_and_largest(&want, &got);
                assert!(worst < 1e-5, "{case}: differs by {worst}");
                // The norm did something: its outputs are not its inputs.
                assert!(want.iter().any(|v| v.abs() > 1.5), "{case}");
            }
        }
    }
}

#[test]
fn other_means_are_left_as_exported() {
    let left = |m: Vec<u8>, channel_means: bool, why: &str| {
        let (fused, report) = fuse_with(
            &m,
            0,
            Scores::Float,
            channel_means,
            Rewrites::ALL,
            ort_probe,
        )
        .unwrap();
        assert!(fused.is_none(), "{why}: rewritten ({report})");
        assert_eq!(report.count(Rewrite::ChannelMeans), 0, "{why}");
    };
    let cases: [(Vec<u8>, bool, &str); 7] = [
        (
            layer_norm_2d(
                17,
                D::N(1),
                D::N(channel_means::MIN_CHANNELS - 1),
                KNOWN,
                &[1],
                None,
            ),
            true,
            "too few channels",
        ),
        (
            layer_norm_2d(18, D::N(1), D::S("c"), KNOWN, &[1], None),
            true,
            "channels known only at run time",
        ),
        (
            layer_norm_2d(17, D::N(1), D::N(32), [D::S("h"), D::S("w")], &[1], None),
            true,
            "height and width known only at run time",
        ),
        (
            layer_norm_2d(17, D::N(1), D::N(32), KNOWN, &[1], Some(0)),
            true,
            "dimensions not kept",
        ),
        (
            layer_norm_2d(18, D::N(1), D::N(32), KNOWN, &[1, 2], None),
            true,
            "over more than the channels",
        ),
        (
            layer_norm_2d(17, D::N(1), D::N(32), KNOWN, &[2], None),
            true,
            "over another axis",
        ),
        (
            layer_norm_2d(17, D::N(1), D::N(32), KNOWN, &[1], None),
            false,
            "not asked for (not the CPU)",
        ),
    ];
    for (m, channel_means, why) in cases {
        left(m, channel_means, why);
    }
}

/// How [`qkv_model`] differs from PyTorch's export of Hiera's joint projection.
#[derive(Clone, Copy)]
struct Qkv {
    opset: u64,
    /// The axis of the Split and of the Squeezes.
    axis: i64,
    /// The Split's sizes given as an input (`[1, 1, 1]`, opsets 13–17).
    sizes: bool,
    /// The reshaped projection also a graph output (another reader).
    y_output: bool,
    /// The weight a graph input instead of an initializer.
    weight_input: bool,
    /// `x` of rank 2 (`[18, 8]`: 18 tokens, the projection `[18, 18]`), reshaped to
    /// `[1, 0, 3, 2, 3]`: its `0` copies the projection's width, which a third of it would not
    /// have.
    flat: bool,
}

const TORCH: Qkv = Qkv {
    opset: 17,
    axis: 2,
    sizes: false,
    y_output: false,
    weight_input: false,
    flat: false,
};

/// A joint projection of `x` ([2, 2, 2, 8]: batch, a 2 × 2 grid, 8 channels) to queries, keys and
/// values of 2 heads of 3, split as PyTorch exports `qkv(x).reshape(B, L, 3, heads, -1).unbind(2)`:
/// the Reshape to `[0, -1, 3, 2, 3]` (the batch copied, the grid flattened), the Split (its sizes
/// by opset: none at 17, `num_outputs` at 18), each part squeezed and a graph output.
fn qkv_model(o: Qkv) -> Vec<u8> {
    let mut split = NewNode {
        name: "n_split".into(),
        op_type: "Split",
        domain: "",
        inputs: vec!["y".into()],
        outputs: vec!["p0".into(), "p1".into(), "p2".into()],
        attrs: vec![("axis", Attr::Int(o.axis))],
    };
    if o.opset >= 18 {
        split.attrs.push(("num_outputs", Attr::Int(3)));
    }
    if o.sizes {
        split.inputs.push("sizes".into());
    }
    let mut nodes = vec![
        node("MatMul", &["x", "w"], "m", vec![]),
        node("Add", &["b", "m"], "a", vec![]),
        node("Reshape", &["a", "shape"], "y", vec![]),
        split,
    ];
    for (p, out) in [("p0", "q"), ("p1", "k"), ("p2", "v")] {
        nodes.push(node("Squeeze", &[p, "axes"], out, vec![]));
    }
    let mut floats = vec![float_init("b", &[18], &data(18, 5))];
    let x: &[D] = if o.flat {
        &[D::N(18), D::N(8)]
    } else {
        &[D::N(2), D::N(2), D::N(2), D::N(8)]
    };
    let mut inputs: Vec<(&str, &[D])> = vec![("x", x)];
    if o.weight_input {
        inputs.push(("w", &[D::N(8), D::N(18)]));
    } else {
        floats.push(float_init("w", &[8, 18], &data(8 * 18, 6)));
    }
    let mut outputs = vec!["q", "k", "v"];
    if o.y_output {
        outputs.push("y");
    }
    let shape: &[i64] = if o.flat {
        &[1, 0, 3, 2, 3]
    } else {
        &[0, -1, 3, 2, 3]
    };
    model_of_opset(
        o.opset,
        &nodes,
        &floats,
        &[("shape", shape), ("axes", &[o.axis]), ("sizes", &[1, 1, 1])],
        &inputs,
        &outputs,
    )
}

#[test]
fn a_split_joint_projection_becomes_three_giving_the_same_bits() {
    let mut forms = Vec::new();
    for axis in [2, -3] {
        forms.push(Qkv { axis, ..TORCH });
        forms.push(Qkv {
            axis,
            opset: 18,
            ..TORCH
        });
    }
    forms.push(Qkv {
        sizes: true,
        ..TORCH
    });
    for o in forms {
        let case = format!("opset {}, axis {}, sizes {}", o.opset, o.axis, o.sizes);
        let m = qkv_model(o);
        let (fused, report) =
            fuse_with(&m, 0, Scores::Float, true, Rewrites::ALL, ort_probe).unwrap();
        let fused = fused.unwrap_or_else(|| panic!("{case}: nothing rewritten: {report}"));
        assert_eq!(report.count(Rewrite::QkvSplit), 1, "{case}: {report}");
        assert!(report
            .to_string()
            .ends_with("; 1 query-key-value projection split by its weights"));
        assert_eq!(op_count(&fused, "Split"), 0, "{case}");
        assert_eq!(op_count(&fused, "Squeeze"), 0, "{case}");
        assert_eq!(op_count(&fused, "MatMul"), 3, "{case}");
        let feeds = [("x", vec![2, 2, 2, 8])];
        for out in ["q", "k", "v"] {
            let want = run(&m, &feeds, out);
            let got = run(&fused, &feeds, out);
            assert_eq!(want.len(), 2 * 4 * 2 * 3, "{case}: {out}");
            assert_eq!(want, got, "{case}: {out}");
        }
        // The parts differ: each is its own third of the projection.
        assert_ne!(run(&m, &feeds, "q"), run(&m, &feeds, "k"), "{case}");
    }
}

#[test]
fn other_splits_are_left_as_exported() {
    let cases = [
        (Qkv { axis: 4, ..TORCH }, true, "along another axis"),
        (
            Qkv {
                y_output: true,
                ..TORCH
            },
            true,
            "the projection read elsewhere",
        ),
        (
            Qkv {
                weight_input: true,
                ..TORCH
            },
            true,
            "the weights a graph input",
        ),
        (
            Qkv {
                flat: true,
                ..TORCH
            },
            true,
            "a projection of rank 2, whose shape's `0` would copy another size",
        ),
        (TORCH, false, "not asked for (not the CPU)"),
    ];
    for (o, cpu, why) in cases {
        let m = qkv_model(o);
        let (fused, report) = fuse_with(&m, 0, Scores::Float, cpu, Rewrites::ALL, ort_probe)
            .unwrap_or_else(|e| panic!("{why}: {e}"));
        assert!(fused.is_none(), "{why}: rewritten ({report})");
        assert_eq!(report.count(Rewrite::QkvSplit), 0, "{why}");
    }
}

/// How [`block_model`] differs from Hiera's attention as PyTorch exports it.
#[derive(Clone, Copy)]
struct Block {
    softmax_axis: i64,
    /// The keys also a graph output (another reader).
    keys_output: bool,
    /// The permutation of the core's result before its heads are merged.
    merge: [i64; 4],
}

const HIERA: Block = Block {
    softmax_axis: -1,
    keys_output: false,
    merge: [0, 2, 1, 3],
};

/// [`qkv_model`]'s joint projection (2 heads of 3 over 4 tokens, a batch of 2) through an
/// attention core as Hiera's: the queries and values transposed to `[B, heads, L, d]`, the keys to
/// `[B, heads, d, L]`, the scores scaled, the result's heads merged to `[B, L, 6]` and projected
/// to 5 channels by a matrix and a bias.
fn block_model(o: Block) -> Vec<u8> {
    let mut nodes = joint_projection();
    nodes.extend([
        node("Transpose", &["q"], "qh", perm(&[0, 2, 1, 3])),
        node("Mul", &["qh", "scale"], "qs", vec![]),
        node("Transpose", &["k"], "kt", perm(&[0, 2, 3, 1])),
        node("MatMul", &["qs", "kt"], "scores", vec![]),
        node(
            "Softmax",
            &["scores"],
            "p",
            vec![("axis", Attr::Int(o.softmax_axis))],
        ),
        node("Transpose", &["v"], "vh", perm(&[0, 2, 1, 3])),
        node("MatMul", &["p", "vh"], "o", vec![]),
        node("Transpose", &["o"], "om", perm(&o.merge)),
        node("Reshape", &["om", "merged_shape"], "merged", vec![]),
        node("MatMul", &["merged", "wo"], "projected", vec![]),
        node("Add", &["bo", "projected"], "out", vec![]),
    ]);
    let floats = [
        float_init("b", &[18], &data(18, 5)),
        float_init("w", &[8, 18], &data(8 * 18, 6)),
        float_init("scale", &[], &[0.577_350_26]),
        float_init("wo", &[6, 5], &data(6 * 5, 8)),
        float_init("bo", &[5], &data(5, 9)),
    ];
    let mut outputs = vec!["out"];
    if o.keys_output {
        outputs.push("k");
    }
    model(
        &nodes,
        &floats,
        &[
            ("shape", &[0, -1, 3, 2, 3]),
            ("axes", &[2]),
            ("merged_shape", &[0, -1, 6]),
        ],
        &[("x", &[D::N(2), D::N(2), D::N(2), D::N(8)])],
        &outputs,
    )
}

/// Rewrites `m` for the CPU (its attention fused or not), checks the split and the outputs
/// against the graph as written, and returns the report and the number of `Add`s left.
fn split_block(m: &[u8], min_scores: i64, case: &str) -> (RewriteReport, usize) {
    let (fused, report) =
        fuse_with(m, min_scores, Scores::Float, true, Rewrites::ALL, ort_probe).unwrap();
    let fused = fused.unwrap_or_else(|| panic!("{case}: nothing rewritten: {report}"));
    assert_eq!(report.count(Rewrite::QkvSplit), 1, "{case}: {report}");
    let feeds = [("x", vec![2, 2, 2, 8])];
    let (want, got) = (run(m, &feeds, "out"), run(&fused, &feeds, "out"));
    assert_eq!(want.len(), 2 * 4 * 5, "{case}");
    let (worst, _) = worst_and_largest(&want, &got);
    assert!(worst < 1e-5, "{case}: differs by {worst} ({report})");
    (report, op_count(&fused, "Add"))
}

#[test]
fn keys_lose_their_bias_and_values_move_theirs_into_the_output_projection() {
    // Fused into MultiHeadAttention, and left as exported (too small for the size rule).
    for (min_scores, fused) in [(0, 1), (i64::MAX, 0)] {
        let case = format!("{fused} fused");
        let (report, adds) = split_block(&block_model(HIERA), min_scores, &case);
        assert_eq!(report.fused_count(), fused, "{case}: {report}");
        assert_eq!(
            report.count_of(Rewrite::QkvSplit, "keys without their bias"),
            1,
            "{case}: {report}"
        );
        assert_eq!(
            report.count_of(Rewrite::QkvSplit, "values\' bias in the output projection"),
            1,
            "{case}: {report}"
        );
        assert!(report.to_string().ends_with(
            "; 1 query-key-value projection split by its weights (1 without the keys' bias, 1 \
             with the values' bias in the output projection)"
        ));
        // The queries' bias, the output projection's, and b_o + b_v · W_o: the keys' and the
        // values' products go to their reshapes as they are.
        assert_eq!(adds, 3, "{case}");
    }
}

#[test]
fn biases_stay_where_the_core_does_not_cancel_or_carry_them() {
    let cases = [
        (
            Block {
                softmax_axis: 2,
                ..HIERA
            },
            (0, 0),
            "a softmax over the queries",
        ),
        (
            Block {
                keys_output: true,
                ..HIERA
            },
            (0, 1),
            "the keys read elsewhere",
        ),
        (
            Block {
                merge: [0, 2, 3, 1],
                ..HIERA
            },
            (1, 0),
            "heads merged in another order",
        ),
    ];
    for (o, (keys, values), why) in cases {
        let (report, adds) = split_block(&block_model(o), i64::MAX, why);
        assert_eq!(
            report.count_of(Rewrite::QkvSplit, "keys without their bias"),
            keys,
            "{why}: {report}"
        );
        assert_eq!(
            report.count_of(Rewrite::QkvSplit, "values\' bias in the output projection"),
            values,
            "{why}: {report}"
        );
        // Moving the values' bias trades their Add for b_o + b_v · W_o.
        assert_eq!(adds, 4 - keys, "{why}");
    }
}

/// Channels of [`branches_model`]'s input.
const BRANCH_CHANNELS: i64 = 8;

/// A convolution branch of [`branches_model`].
#[derive(Clone, Copy)]
struct Branch {
    kernel: i64,
    bias: bool,
    stride: i64,
    /// `None`: no `pads` attribute.
    pads: Option<[i64; 4]>,
    /// `None`: no `group` attribute (1).
    group: Option<i64>,
    input: &'static str,
}

impl Branch {
    /// A depthwise convolution of `x` keeping its shape, with a bias: RepViT's.
    const fn same(kernel: i64) -> Branch {
        let p = (kernel - 1) / 2;
        Branch {
            kernel,
            bias: true,
            stride: 1,
            pads: Some([p; 4]),
            group: Some(BRANCH_CHANNELS),
            input: "x",
        }
    }
}

/// The sum of `branches` of `x` ([1, 8, 6, 6]; or of `x2` of that shape, `x1` of one channel) and
/// of `x` itself `identities` times, as `out`: a chain of Adds (RepViT's token mixer as exported:
/// `(conv3 + conv1) + x`), or where `pairwise` the terms added in pairs first. Where
/// `extra_reader` the first branch's output is also a graph output.
fn branches_model(
    opset: u64,
    branches: &[Branch],
    identities: usize,
    pairwise: bool,
    extra_reader: bool,
) -> Vec<u8> {
    let c = BRANCH_CHANNELS;
    let mut nodes = Vec::new();
    let mut floats = Vec::new();
    let mut terms = Vec::new();
    for (i, b) in branches.iter().enumerate() {
        let (w, bias, out) = (format!("w{i}"), format!("b{i}"), format!("c{i}"));
        // `x1` has one channel, the others `c`.
        let input_channels = if b.input == "x1" { 1 } else { c };
        let per_group = input_channels / b.group.unwrap_or(1);
        let size = (c * per_group * b.kernel * b.kernel) as usize;
        // Weights large enough that every branch shows in the sum.
        let values: Vec<f32> = data(size, 20 + i as u64).iter().map(|v| v * 2.0).collect();
        floats.push(float_init(&w, &[c, per_group, b.kernel, b.kernel], &values));
        let mut inputs = vec![b.input, w.as_str()];
        if b.bias {
            floats.push(float_init(&bias, &[c], &data(c as usize, 40 + i as u64)));
            inputs.push(&bias);
        }
        let mut attrs = vec![
            ("kernel_shape", Attr::Ints(vec![b.kernel, b.kernel])),
            ("strides", Attr::Ints(vec![b.stride, b.stride])),
        ];
        if let Some(p) = b.pads {
            attrs.push(("pads", Attr::Ints(p.to_vec())));
        }
        if let Some(g) = b.group {
            attrs.push(("group", Attr::Int(g)));
        }
        nodes.push(node("Conv", &inputs, &out, attrs));
        terms.push(out);
    }
    terms.extend(std::iter::repeat("x".to_string()).take(identities));
    let mut k = 0;
    let mut add = |nodes: &mut Vec<NewNode>, a: String, b: String| {
        k += 1;
        let out = format!("s{k}");
        nodes.push(node("Add", &[&a, &b], &out, vec![]));
        out
    };
    while terms.len() > 1 {
        if pairwise {
            let mut next = Vec::new();
            let mut it = terms.into_iter();
            while let Some(a) = it.next() {
                match it.next() {
                    Some(b) => next.push(add(&mut nodes, a, b)),
                    None => next.push(a),
                }
            }
            terms = next;
        } else {
            let a = terms.remove(0);
            let b = terms.remove(0);
            terms.insert(0, add(&mut nodes, a, b));
        }
    }
    let last = nodes.last_mut().expect("at least one Add");
    last.outputs = vec!["out".into()];
    let x: &[D] = &[D::N(1), D::N(c), D::N(6), D::N(6)];
    let mut outputs = vec!["out"];
    if extra_reader {
        outputs.push("c0");
    }
    model_of_opset(
        opset,
        &nodes,
        &floats,
        &[],
        &[
            ("x", x),
            ("x2", x),
            ("x1", &[D::N(1), D::N(1), D::N(6), D::N(6)]),
        ],
        &outputs,
    )
}

#[test]
fn depthwise_branches_of_one_input_become_one_convolution_computing_the_same() {
    let unbiased = |k| Branch {
        bias: false,
        ..Branch::same(k)
    };
    let cases: [(&[Branch], usize, bool, &str); 6] = [
        (&[Branch::same(3), Branch::same(1)], 1, false, "RepViT"),
        (
            &[Branch::same(3), Branch::same(1)],
            2,
            true,
            "in pairs, x twice",
        ),
        (&[unbiased(3), unbiased(1)], 0, false, "no bias, no input"),
        (&[Branch::same(3), unbiased(3)], 0, false, "equal kernels"),
        (
            &[Branch::same(1), Branch::same(5), unbiased(3)],
            1,
            false,
            "three kernels",
        ),
        (&[Branch::same(3)], 1, false, "one convolution and x"),
    ];
    for (branches, identities, pairwise, case) in cases {
        let m = branches_model(17, branches, identities, pairwise, false);
        let (fused, report) =
            fuse_with(&m, 0, Scores::Float, true, Rewrites::ALL, ort_probe).unwrap();
        let fused = fused.unwrap_or_else(|| panic!("{case}: nothing rewritten: {report}"));
        assert_eq!(
            report.count(Rewrite::DepthwiseBranches),
            1,
            "{case}: {report}"
        );
        assert!(
            report
                .to_string()
                .ends_with("; 1 sum of depthwise convolution branches merged into one"),
            "{case}: {report}"
        );
        assert_eq!(op_count(&fused, "Conv"), 1, "{case}");
        let g = graph::Graph::parse(&fused).unwrap();
        assert!(
            g.nodes
                .iter()
                .all(|n| n.op_type == "Conv" || !n.inputs.iter().any(|i| i == "x")),
            "{case}: x is read by something else than the convolution"
        );
        let feeds = [("x", vec![1, BRANCH_CHANNELS, 6, 6])];
        let want = run(&m, &feeds, "out");
        let got = run(&fused, &feeds, "out");
        assert_eq!(want.len(), got.len(), "{case}");
        let (worst, _) = worst_and_largest(&want, &got);
        assert!(worst < 1e-5, "{case}: differs by {worst}");
        // Every term shows in the sum: leaving the last one out changes it.
        let fewer = branches_model(
            17,
            &branches[..branches.len() - usize::from(identities == 0)],
            identities.saturating_sub(1),
            pairwise,
            false,
        );
        if branches.len() + identities > 2 {
            let (worst, _) = worst_and_largest(&want, &run(&fewer, &feeds, "out"));
            assert!(worst > 0.1, "{case}: the last term does not matter");
        }
    }
}

#[test]
fn other_convolution_sums_are_left_as_exported() {
    let rep = Branch::same(3);
    let one = Branch::same(1);
    let spread = |b: Branch| Branch {
        input: "x1",
        group: Some(1),
        ..b
    };
    let cases: [(Vec<u8>, bool, &str); 9] = [
        (
            branches_model(17, &[spread(rep), spread(one)], 0, false, false),
            true,
            "one channel spread to 8 (group 1)",
        ),
        (
            branches_model(
                17,
                &[Branch { stride: 2, ..rep }, Branch { stride: 2, ..one }],
                0,
                false,
                false,
            ),
            true,
            "stride 2",
        ),
        (
            branches_model(17, &[Branch { group: None, ..rep }, one], 1, false, false),
            true,
            "a full convolution (group 1)",
        ),
        (
            branches_model(17, &[rep, one], 1, false, true),
            true,
            "a branch read elsewhere",
        ),
        (
            branches_model(17, &[rep, Branch { input: "x2", ..one }], 0, false, false),
            true,
            "a branch of another input",
        ),
        (
            branches_model(
                17,
                &[
                    Branch {
                        pads: Some([0, 0, 2, 2]),
                        ..rep
                    },
                    one,
                ],
                1,
                false,
                false,
            ),
            true,
            "pads off centre",
        ),
        (
            branches_model(
                17,
                &[Branch { pads: None, ..one }, Branch { pads: None, ..rep }],
                0,
                false,
                false,
            ),
            true,
            "no pads (the 3×3 shrinks its output)",
        ),
        (
            branches_model(10, &[rep, one], 1, false, false),
            true,
            "opset 10",
        ),
        (
            branches_model(17, &[rep, one], 1, false, false),
            false,
            "not asked for (not the CPU)",
        ),
    ];
    for (m, cpu, why) in cases {
        let (fused, report) =
            fuse_with(&m, 0, Scores::Float, cpu, Rewrites::ALL, ort_probe).unwrap();
        assert!(fused.is_none(), "{why}: rewritten ({report})");
        assert_eq!(report.count(Rewrite::DepthwiseBranches), 0, "{why}");
    }
}

#[test]
fn a_per_key_factor_on_the_scores_keeps_the_keys_bias() {
    // The core is left as exported (its factor is not one number); the split still happens, but
    // the keys' bias shifts each key's score by another amount once the factor multiplies it, so
    // it stays, and the outputs are the graph's as written.
    let near = corpus::NearMiss {
        factor: corpus::Factor::PerKey,
        ..corpus::NearMiss::EXPORTED
    };
    for min_scores in [0, i64::MAX] {
        let checked = corpus::check(&near, min_scores)
            .unwrap_or_else(|e| panic!("{e}"))
            .expect("ONNX Runtime runs the block");
        let report = checked.report;
        assert_eq!(report.fused_count(), 0, "{report}");
        assert_eq!(report.count(Rewrite::QkvSplit), 1, "{report}");
        assert_eq!(
            report.count_of(Rewrite::QkvSplit, "keys without their bias"),
            0,
            "{report}"
        );
        assert!(checked.worst.is_some(), "{report}");
    }
}

#[test]
fn no_rewrite_changes_what_a_near_miss_computes() {
    let family = corpus::NearMiss::family();
    let (mut ran, mut compared, mut fused, mut unbiased) = (0, 0, 0, 0);
    for near in &family {
        for min_scores in [0, i64::MAX] {
            let Some(checked) = corpus::check(near, min_scores).unwrap_or_else(|e| panic!("{e}"))
            else {
                // Runs with 6 tokens, where the factor was made for 4: ONNX Runtime refuses it as
                // written too.
                assert!(
                    near.tokens == 3 && near.factor != corpus::Factor::PerHead,
                    "{near:?}"
                );
                continue;
            };
            ran += 1;
            if checked.worst.is_some() {
                compared += 1;
            }
            fused += checked.report.fused_count();
            unbiased += checked
                .report
                .count_of(Rewrite::QkvSplit, "keys without their bias");
        }
    }
    // Every member that runs is rewritten somehow (the split at least), and the family reaches
    // both sides of each rule: cores fused and left, keys' biases dropped and kept.
    assert_eq!(compared, ran);
    assert!(
        ran > 2 * family.len() - 10,
        "{ran} of {} ran",
        2 * family.len()
    );
    assert!(fused > 0 && fused < ran, "{fused} fused");
    assert!(unbiased > 0 && unbiased < ran, "{unbiased} unbiased");
}
