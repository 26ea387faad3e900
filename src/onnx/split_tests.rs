//! The splitter's tests: hand-built protobuf messages, real models, and hostile bytes.

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

#[test]
fn graph_output_names_are_read_from_the_main_graph() {
    // The hand-built model's graph declares one output, `x` (a ValueInfoProto of name only).
    let built = build_model();
    assert_eq!(graph_output_names(&built.model).unwrap(), ["x"]);
    // Two outputs, one with a type after its name; a subgraph's outputs (inside a node) are not
    // the main graph's.
    let typed = cat(&[&lfield(1, b"pos"), &lfield(2, b"\x0a\x02\x08\x01")]);
    let sub = lfield(12, &lfield(1, b"inner"));
    let node = lfield(5, &lfield(6, &sub));
    let graph = cat(&[
        &lfield(1, &node),
        &lfield(12, &lfield(1, b"mask")),
        &lfield(12, &typed),
    ]);
    let model = cat(&[&vfield(1, 8), &lfield(7, &graph)]);
    assert_eq!(graph_output_names(&model).unwrap(), ["mask", "pos"]);
    assert!(graph_output_names(&[0xff]).is_err());
}
