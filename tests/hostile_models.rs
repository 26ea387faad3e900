//! Hostile model files of the real SAM2 architecture: copies of the real
//! SAM2.1 hiera-tiny exports ($SAM2_REAL_MODELS, tools/setup-real.sh), truncated, bit-flipped,
//! with external data that points outside the model's directory, and with huge declared
//! dimensions. Each must give `Error::Model` naming the file (or, for a flipped bit that only
//! changes a weight, load and run), never a crash, and never a read outside the model's directory.
//!
//! Every load runs in a child process (this test binary again, `child` below), so an abort or a
//! crash is a failing case with its signal rather than the end of the test run. The files are
//! made here, with a few lines of protobuf editing (ONNX files are protobuf; only the edited
//! messages are re-encoded, everything else is copied byte for byte).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::*;

// ---------------------------------------------------------------------------------------------
// Protobuf, just enough to edit an ONNX file
// ---------------------------------------------------------------------------------------------

mod pb {
    /// One field of a message: its number, wire type, where it starts (tag) and ends, and its
    /// content (a varint's or fixed value's bytes, or a length-delimited value's bytes).
    #[derive(Clone, Copy, Debug)]
    pub struct Field {
        pub number: u32,
        pub wire: u8,
        pub start: usize,
        pub content: (usize, usize),
        pub end: usize,
    }

    pub fn varint(buf: &[u8], pos: &mut usize) -> u64 {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = buf[*pos];
            *pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return value;
            }
        }
        panic!("varint longer than 10 bytes");
    }

    /// The fields of the message in `buf[start..end]` (well-formed input: these are real exports).
    pub fn fields(buf: &[u8], start: usize, end: usize) -> Vec<Field> {
        let mut out = Vec::new();
        let mut pos = start;
        while pos < end {
            let field_start = pos;
            let tag = varint(buf, &mut pos);
            let (number, wire) = ((tag >> 3) as u32, (tag & 7) as u8);
            let content = match wire {
                0 => {
                    let s = pos;
                    varint(buf, &mut pos);
                    (s, pos)
                }
                1 => (pos, pos + 8),
                2 => {
                    let len = varint(buf, &mut pos) as usize;
                    (pos, pos + len)
                }
                5 => (pos, pos + 4),
                other => panic!("wire type {other} at byte {field_start}"),
            };
            pos = content.1;
            assert!(
                pos <= end,
                "field at byte {field_start} runs past its message"
            );
            out.push(Field {
                number,
                wire,
                start: field_start,
                content,
                end: pos,
            });
        }
        out
    }

    /// The `nth` length-delimited field `number` of the message in `buf[start..end]`.
    pub fn find(buf: &[u8], (start, end): (usize, usize), number: u32, nth: usize) -> Field {
        fields(buf, start, end)
            .into_iter()
            .filter(|f| f.number == number && f.wire == 2)
            .nth(nth)
            .unwrap_or_else(|| panic!("no field {number} #{nth}"))
    }

    pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
        while value >= 0x80 {
            out.push(value as u8 | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    pub fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
        put_varint(out, u64::from(number) << 3 | 2);
        put_varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }

    pub fn put_uint(out: &mut Vec<u8>, number: u32, value: u64) {
        put_varint(out, u64::from(number) << 3);
        put_varint(out, value);
    }

    /// `buf` with the message at `path` (steps of field number and occurrence, from the top)
    /// replaced by `edit(its bytes)`; every enclosing length is re-encoded.
    pub fn edit(buf: &[u8], path: &[(u32, usize)], edit: &dyn Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
        edit_in(buf, (0, buf.len()), path, edit)
    }

    fn edit_in(
        buf: &[u8],
        (start, end): (usize, usize),
        path: &[(u32, usize)],
        edit: &dyn Fn(&[u8]) -> Vec<u8>,
    ) -> Vec<u8> {
        let (number, nth) = path[0];
        let mut out = Vec::with_capacity(end - start + 64);
        let mut seen = 0;
        for f in fields(buf, start, end) {
            if f.number == number && f.wire == 2 {
                seen += 1;
                if seen == nth + 1 {
                    let inner = if path.len() == 1 {
                        edit(&buf[f.content.0..f.content.1])
                    } else {
                        edit_in(buf, f.content, &path[1..], edit)
                    };
                    put_bytes(&mut out, number, &inner);
                    continue;
                }
            }
            out.extend_from_slice(&buf[f.start..f.end]);
        }
        assert!(seen > nth, "no field {number} #{nth}");
        out
    }
}

// ONNX field numbers used below.
const MODEL_GRAPH: u32 = 7;
const GRAPH_NODE: u32 = 1;
const GRAPH_INITIALIZER: u32 = 5;
const GRAPH_INPUT: u32 = 11;
const TENSOR_DIMS: u32 = 1;
const TENSOR_NAME: u32 = 8;
const TENSOR_RAW_DATA: u32 = 9;
const TENSOR_EXTERNAL_DATA: u32 = 13;
const TENSOR_DATA_LOCATION: u32 = 14;
const VALUE_INFO_NAME: u32 = 1;
const VALUE_INFO_TYPE: u32 = 2;
const TYPE_TENSOR: u32 = 1;
const TENSOR_TYPE_SHAPE: u32 = 2;
const SHAPE_DIM: u32 = 1;
const DIM_VALUE: u32 = 1;
const DIM_PARAM: u32 = 2;
const GRAPH_OUTPUT: u32 = 12;

/// Where the parts of an ONNX file are: the graph, its nodes, and its initializers' data.
struct Layout {
    graph: (usize, usize),
    nodes: Vec<(usize, usize)>,
    /// Per initializer (in order): its index among the graph's initializers, name, and the byte
    /// range of its raw data.
    weights: Vec<(usize, String, (usize, usize))>,
}

impl Layout {
    fn of(model: &[u8]) -> Layout {
        let graph = pb::find(model, (0, model.len()), MODEL_GRAPH, 0).content;
        let mut nodes = Vec::new();
        let mut weights = Vec::new();
        let mut index = 0;
        for f in pb::fields(model, graph.0, graph.1) {
            match (f.number, f.wire) {
                (GRAPH_NODE, 2) => nodes.push(f.content),
                (GRAPH_INITIALIZER, 2) => {
                    let tensor = pb::fields(model, f.content.0, f.content.1);
                    let name = tensor
                        .iter()
                        .find(|t| t.number == TENSOR_NAME)
                        .map(|t| String::from_utf8_lossy(&model[t.content.0..t.content.1]))
                        .unwrap_or_default()
                        .into_owned();
                    if let Some(raw) = tensor.iter().find(|t| t.number == TENSOR_RAW_DATA) {
                        weights.push((index, name, raw.content));
                    }
                    index += 1;
                }
                _ => {}
            }
        }
        Layout {
            graph,
            nodes,
            weights,
        }
    }

    /// The initializer with the most raw data.
    fn largest(&self) -> &(usize, String, (usize, usize)) {
        self.weights
            .iter()
            .max_by_key(|(_, _, (s, e))| e - s)
            .expect("the model has initializers with raw data")
    }
}

/// The model with initializer `index`'s data moved to external data at `location` (offset 0,
/// its length), as an exporter writes a model too large for one protobuf.
fn with_external_data(model: &[u8], index: usize, location: &str) -> Vec<u8> {
    pb::edit(
        model,
        &[(MODEL_GRAPH, 0), (GRAPH_INITIALIZER, index)],
        &|tensor| {
            let mut out = Vec::new();
            let mut length = 0;
            for f in pb::fields(tensor, 0, tensor.len()) {
                match f.number {
                    TENSOR_RAW_DATA => length = f.content.1 - f.content.0,
                    TENSOR_DATA_LOCATION => {}
                    _ => out.extend_from_slice(&tensor[f.start..f.end]),
                }
            }
            for (key, value) in [
                ("location", location.to_string()),
                ("offset", "0".to_string()),
                ("length", length.to_string()),
            ] {
                let mut entry = Vec::new();
                pb::put_bytes(&mut entry, 1, key.as_bytes());
                pb::put_bytes(&mut entry, 2, value.as_bytes());
                pb::put_bytes(&mut out, TENSOR_EXTERNAL_DATA, &entry);
            }
            pb::put_uint(&mut out, TENSOR_DATA_LOCATION, 1);
            out
        },
    )
}

/// The model with dimension `dim` of graph input `name` declared as `value`.
fn with_input_dim(model: &[u8], name: &str, dim: usize, value: u64) -> Vec<u8> {
    with_dim(model, GRAPH_INPUT, name, dim, Dim::Value(value))
}

/// A declared dimension: a number, or a symbol (any size).
enum Dim<'a> {
    Value(u64),
    Param(&'a str),
}

/// The model with dimension `dim` of graph input or output (`list`) `name` declared as `value`.
fn with_dim(model: &[u8], list: u32, name: &str, dim: usize, value: Dim) -> Vec<u8> {
    let graph = pb::find(model, (0, model.len()), MODEL_GRAPH, 0).content;
    let index = pb::fields(model, graph.0, graph.1)
        .into_iter()
        .filter(|f| f.number == list && f.wire == 2)
        .position(|f| {
            let n = pb::find(model, f.content, VALUE_INFO_NAME, 0).content;
            &model[n.0..n.1] == name.as_bytes()
        })
        .unwrap_or_else(|| panic!("no graph input or output {name}"));
    pb::edit(
        model,
        &[
            (MODEL_GRAPH, 0),
            (list, index),
            (VALUE_INFO_TYPE, 0),
            (TYPE_TENSOR, 0),
            (TENSOR_TYPE_SHAPE, 0),
            (SHAPE_DIM, dim),
        ],
        &|_| {
            let mut out = Vec::new();
            match value {
                Dim::Value(v) => pb::put_uint(&mut out, DIM_VALUE, v),
                Dim::Param(p) => pb::put_bytes(&mut out, DIM_PARAM, p.as_bytes()),
            }
            out
        },
    )
}

/// The model with initializer `index` declaring the shape `dims` (its data unchanged).
fn with_initializer_dims(model: &[u8], index: usize, dims: &[u64]) -> Vec<u8> {
    pb::edit(
        model,
        &[(MODEL_GRAPH, 0), (GRAPH_INITIALIZER, index)],
        &|tensor| {
            let mut out = Vec::new();
            for &d in dims {
                pb::put_uint(&mut out, TENSOR_DIMS, d);
            }
            for f in pb::fields(tensor, 0, tensor.len()) {
                if f.number != TENSOR_DIMS {
                    out.extend_from_slice(&tensor[f.start..f.end]);
                }
            }
            out
        },
    )
}

// ---------------------------------------------------------------------------------------------
// The real models, and the child process that loads one
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Encoder,
    Decoder,
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sam2-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An embedding of the demo image by the untouched encoder of `family`, saved once per family,
/// for that family's decoders to run on.
fn embedding_file(family: &str) -> PathBuf {
    static FILES: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut files = FILES.lock().unwrap();
    if let Some((_, path)) = files.iter().find(|(f, _)| f == family) {
        return path.clone();
    }
    let path = scratch(&format!("embedding-{family}")).join("demo.sam2");
    let outcome = run_child("embed", &common::real_pair(family).0, &path);
    assert_eq!(
        outcome.kind, "ok",
        "encoding with the real {family} encoder: {outcome:?}"
    );
    files.push((family.to_string(), path.clone()));
    path
}

/// What a child process reported.
#[derive(Debug)]
struct Outcome {
    /// "ok" (loaded, and ran), "load:<Kind>" (loading failed), "run:<Kind>" (loaded, running
    /// failed), or "crashed" (no report: killed by a signal or exited early).
    kind: String,
    message: String,
}

const CHILD_MODE: &str = "SAM2_HOSTILE_CHILD";

fn kind_of(error: &sam2::Error) -> &'static str {
    match error {
        sam2::Error::Model { .. } => "Model",
        sam2::Error::OnnxRuntime(_) => "OnnxRuntime",
        sam2::Error::ModelMismatch(_) => "ModelMismatch",
        sam2::Error::InvalidArgument { .. } => "InvalidArgument",
        sam2::Error::OutOfMemory { .. } => "OutOfMemory",
        sam2::Error::Io { .. } => "Io",
        _ => "other",
    }
}

/// The child: loads `SAM2_HOSTILE_MODEL` as an encoder or decoder and runs it once, printing one
/// line `outcome\t<kind>\t<message>`. Nothing when the variable is unset (a plain test run).
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return;
    };
    init_runtime();
    let model = PathBuf::from(std::env::var_os("SAM2_HOSTILE_MODEL").unwrap());
    let extra = PathBuf::from(std::env::var_os("SAM2_HOSTILE_EXTRA").unwrap());
    let image = read_pnm(&testdata("demo.ppm"));
    let view = sam2::ImageView::packed(
        &image.data,
        image.width,
        image.height,
        sam2::PixelFormat::Rgb,
    )
    .unwrap();
    let report = |kind: String, message: String| {
        println!("outcome\t{kind}\t{}", message.replace(['\n', '\t'], " "));
    };
    match mode.as_str() {
        "embed" | "encoder" => match sam2::Encoder::new(&model, &Default::default()) {
            Err(e) => report(format!("load:{}", kind_of(&e)), e.to_string()),
            Ok(encoder) => match encoder.encode(&view) {
                Err(e) => report(format!("run:{}", kind_of(&e)), e.to_string()),
                Ok(embedding) => {
                    if mode == "embed" {
                        sam2::embedding_file::save(&embedding, &extra).unwrap();
                    }
                    report("ok".into(), String::new());
                }
            },
        },
        "decoder" => match sam2::Predictor::new(&model, &Default::default()) {
            Err(e) => report(format!("load:{}", kind_of(&e)), e.to_string()),
            Ok(predictor) => {
                let embedding = sam2::embedding_file::load(&extra, None).unwrap();
                let prompts = [click(580.0, 190.0)];
                match predictor.predict(&embedding, &prompts, Default::default()) {
                    Err(e) => report(format!("run:{}", kind_of(&e)), e.to_string()),
                    Ok(p) => {
                        assert_eq!(p.objects, 1);
                        report("ok".into(), String::new());
                    }
                }
            }
        },
        other => panic!("unknown {CHILD_MODE} {other}"),
    }
}

fn run_child(mode: &str, model: &Path, extra: &Path) -> Outcome {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD_MODE, mode)
        .env("SAM2_HOSTILE_MODEL", model)
        .env("SAM2_HOSTILE_EXTRA", extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    // libtest prints "test child ... " before the child's own output, on the same line.
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("outcome\t").map(|(_, rest)| rest));
    match (line, output.status.success()) {
        (Some(line), true) => {
            let (kind, message) = line.split_once('\t').unwrap_or((line, ""));
            Outcome {
                kind: kind.to_string(),
                message: message.to_string(),
            }
        }
        _ => Outcome {
            kind: "crashed".into(),
            message: format!(
                "{} ({}): {}",
                model.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .rev()
                    .take(12)
                    .collect::<Vec<_>>()
                    .join(" | ")
            ),
        },
    }
}

/// Loads `bytes`, written to `path`, as `role`, in a child process; a decoder runs on an
/// embedding of the samexporter family.
fn load(role: Role, path: &Path, bytes: &[u8]) -> Outcome {
    load_of("samexporter", role, path, bytes)
}

/// [`load`], with a decoder running on an embedding of `family`.
fn load_of(family: &str, role: Role, path: &Path, bytes: &[u8]) -> Outcome {
    std::fs::write(path, bytes).unwrap();
    match role {
        Role::Encoder => run_child("encoder", path, Path::new("-")),
        Role::Decoder => run_child("decoder", path, &embedding_file(family)),
    }
}

/// The outcomes of one kind of hostile file: how many cases, how many were model errors, how many
/// loaded and ran, and what went wrong. With `SAM2_REPORT_DIR` set, [`Tally::finish`] writes
/// `hostile_<kind>.tsv` for scripts/reliability.sh.
#[derive(Default)]
struct Tally {
    cases: usize,
    model_errors: usize,
    ran: usize,
    failures: Vec<String>,
}

impl Tally {
    fn count(&mut self, case: &str, outcome: &Outcome) {
        println!("{case}: {} {}", outcome.kind, outcome.message);
        self.cases += 1;
        match outcome.kind.as_str() {
            "load:Model" => self.model_errors += 1,
            "ok" => self.ran += 1,
            _ => {}
        }
    }

    /// The outcome must be a model error that names the file.
    fn model_error(&mut self, case: &str, path: &Path, outcome: &Outcome) {
        self.count(case, outcome);
        if outcome.kind != "load:Model" {
            self.failures
                .push(format!("{case}: expected a model error, got {outcome:?}"));
        } else if !outcome.message.contains(&path.display().to_string()) {
            self.failures.push(format!(
                "{case}: the message does not name the file: {outcome:?}"
            ));
        }
    }

    fn finish(self, kind: &str) {
        if let Some(dir) = std::env::var_os("SAM2_REPORT_DIR") {
            std::fs::write(
                PathBuf::from(dir).join(format!("hostile_{kind}.tsv")),
                format!(
                    "kind\tcases\tmodel_errors\tran\tfailed\n{kind}\t{}\t{}\t{}\t{}\n",
                    self.cases,
                    self.model_errors,
                    self.ran,
                    self.failures.len()
                ),
            )
            .unwrap();
        }
        assert!(self.failures.is_empty(), "{}", self.failures.join("\n"));
    }
}

// ---------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------

/// Cut in the header, in the middle of the node list, in the middle of the largest weight, and
/// just before the end (inside the trailing opset imports).
#[test]
fn truncated_real_models_are_model_errors() {
    let dir = scratch("truncated");
    let (encoder, decoder) = common::real_pair("samexporter");
    let mut tally = Tally::default();
    for (role, source) in [(Role::Encoder, &encoder), (Role::Decoder, &decoder)] {
        let model = std::fs::read(source).unwrap();
        let layout = Layout::of(&model);
        let middle_node = layout.nodes[layout.nodes.len() / 2];
        let (_, name, raw) = layout.largest();
        let cuts = [
            ("header", 16),
            ("mid-graph", (middle_node.0 + middle_node.1) / 2),
            ("mid-initializer", (raw.0 + raw.1) / 2),
            ("end", model.len() - 3),
        ];
        assert!(
            layout.graph.0 < cuts[1].1 && cuts[1].1 < raw.0,
            "the nodes precede the weights in this export"
        );
        for (what, at) in cuts {
            let path = dir.join(format!("{role:?}-{what}.onnx").to_lowercase());
            let case = format!(
                "{role:?} cut at byte {at} of {} ({what}, {name})",
                model.len()
            );
            tally.model_error(&case, &path, &load(role, &path, &model[..at]));
            std::fs::remove_file(&path).unwrap();
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    tally.finish("truncated");
}

/// Deterministic pseudo-random numbers (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

/// One bit flipped at seeded places: in the node list (the graph's structure), in the weights,
/// and in the tail (inputs, outputs, value infos, opset imports). A flip may leave a model that
/// loads (a changed weight, or a name nothing refers to): then it must run, or fail cleanly.
#[test]
fn bit_flipped_real_models_load_and_run_or_are_model_errors() {
    let dir = scratch("flipped");
    let (encoder, decoder) = common::real_pair("samexporter");
    let mut tally = Tally::default();
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    // The decoder is cheap to load (16 MB): more places; the encoder (109 MB) one of each zone.
    for (role, source, per_zone, seed) in [
        (Role::Decoder, &decoder, 2, 0x5eed_0001u64),
        (Role::Encoder, &encoder, 1, 0x5eed_0002u64),
    ] {
        let model = std::fs::read(source).unwrap();
        let layout = Layout::of(&model);
        let nodes = (layout.nodes[0].0, layout.nodes.last().unwrap().1);
        let weights = (layout.weights[0].2 .0, layout.weights.last().unwrap().2 .1);
        let zones = [
            ("nodes", nodes),
            ("weights", weights),
            ("tail", (weights.1, model.len())),
        ];
        let mut rng = Rng(seed);
        for (zone, (start, end)) in zones {
            for _ in 0..per_zone {
                let at = start + rng.below(end - start);
                let bit = rng.below(8);
                let mut copy = model.clone();
                copy[at] ^= 1 << bit;
                let path = dir.join(format!("{role:?}-flip-{at}-{bit}.onnx").to_lowercase());
                let outcome = load(role, &path, &copy);
                drop(copy);
                let case = format!("{role:?} bit {bit} of byte {at} ({zone})");
                tally.count(&case, &outcome);
                *counts.entry(outcome.kind.clone()).or_default() += 1;
                let fine = match outcome.kind.as_str() {
                    "ok" | "load:Model" => true,
                    // A model whose graph loads but cannot run on these inputs (a shape that no
                    // longer fits): ONNX Runtime's error at run time, reported as such.
                    "run:OnnxRuntime" => true,
                    _ => false,
                };
                if !fine {
                    tally.failures.push(format!("{case}: {outcome:?}"));
                }
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
    println!("bit flips: {counts:?}");
    std::fs::remove_dir_all(&dir).unwrap();
    tally.finish("bit_flipped");
}

/// Watches a directory for any open or read of what is in it (inotify): the proof that nothing
/// outside a model's directory was read, not just that the load failed.
struct Watch {
    fd: i32,
    dir: PathBuf,
}

impl Watch {
    fn new(dir: &Path) -> Watch {
        // SAFETY: plain system calls; the path is NUL-terminated and outlives the call.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0, "inotify_init1");
        let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        let wd =
            unsafe { libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_OPEN | libc::IN_ACCESS) };
        assert!(wd >= 0, "inotify_add_watch {}", dir.display());
        Watch {
            fd,
            dir: dir.to_path_buf(),
        }
    }

    /// The names opened or read since the last call ("." for the directory itself).
    fn events(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: reads into a buffer of the given length.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return names;
            }
            let mut pos = 0;
            while pos < n as usize {
                // SAFETY: the kernel wrote whole inotify_event records, each followed by `len`
                // bytes of NUL-padded name.
                let event = unsafe {
                    std::ptr::read_unaligned(buf[pos..].as_ptr() as *const libc::inotify_event)
                };
                let header = std::mem::size_of::<libc::inotify_event>();
                let name = &buf[pos + header..pos + header + event.len as usize];
                let name = String::from_utf8_lossy(name)
                    .trim_end_matches('\0')
                    .to_string();
                names.push(if name.is_empty() { ".".into() } else { name });
                pos += header + event.len as usize;
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// External data of the largest initializer located at `../../etc/passwd`, at an absolute path,
/// and through a link inside the model's directory that points outside it. Each location names
/// a real file holding exactly the bytes the model needs (so a load that read it would succeed),
/// watched for opens and reads; `/etc/passwd` itself is tried too. Each must be a model error,
/// and nothing outside the model's directory may be opened.
#[test]
fn external_data_outside_the_model_directory_is_refused_and_never_read() {
    let dir = scratch("external");
    // The model lives in <dir>/a/b/; `../../etc/passwd` from there is <dir>/etc/passwd.
    let models = dir.join("a/b");
    let outside = dir.join("etc");
    std::fs::create_dir_all(&models).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let (encoder, decoder) = common::real_pair("samexporter");
    let mut tally = Tally::default();
    for (role, source) in [(Role::Decoder, &decoder), (Role::Encoder, &encoder)] {
        let model = std::fs::read(source).unwrap();
        let layout = Layout::of(&model);
        let (index, name, raw) = layout.largest().clone();
        // The bait: the initializer's own bytes, where each hostile location points.
        std::fs::write(outside.join("passwd"), &model[raw.0..raw.1]).unwrap();
        let bait = outside.join("passwd").to_string_lossy().into_owned();
        let link = models.join("weights.bin");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(outside.join("passwd"), &link).unwrap();
        for location in [
            "../../etc/passwd",
            bait.as_str(),
            "weights.bin",
            "/etc/passwd",
        ] {
            let path = models.join(format!("{role:?}.onnx").to_lowercase());
            let hostile = with_external_data(&model, index, location);
            let watch = Watch::new(&outside);
            let outcome = load(role, &path, &hostile);
            let case = format!("{role:?}: initializer {name} in external data at {location:?}");
            tally.model_error(&case, &path, &outcome);
            let opened = watch.events();
            if !opened.is_empty() {
                tally.failures.push(format!(
                    "{case}: opened or read outside the model's directory: {:?} in {}",
                    opened,
                    watch.dir.display()
                ));
            }
            std::fs::remove_file(&path).unwrap();
        }
    }
    // The control: the same decoder with its external data inside its directory loads, and the
    // watch sees the file opened (so the silence above means something).
    let model = std::fs::read(&decoder).unwrap();
    let (index, _, raw) = Layout::of(&model).largest().clone();
    std::fs::write(models.join("inside.bin"), &model[raw.0..raw.1]).unwrap();
    let path = models.join("control.onnx");
    let watch = Watch::new(&models);
    let outcome = load(
        Role::Decoder,
        &path,
        &with_external_data(&model, index, "inside.bin"),
    );
    assert_eq!(outcome.kind, "ok", "the control loads: {outcome:?}");
    let opened = watch.events();
    assert!(
        opened.iter().any(|n| n == "inside.bin"),
        "the watch saw the control's data file opened: {opened:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    tally.finish("external_data");
}

/// Huge declared dimensions: the encoder's image input (the library takes its input size from
/// it), the decoders' mask inputs (the library takes the low-resolution mask size from them),
/// and an initializer whose shape no longer matches its data, or overflows.
#[test]
fn huge_declared_dimensions_are_model_errors() {
    let dir = scratch("dims");
    let mut tally = Tally::default();
    let (encoder, decoder) = common::real_pair("samexporter");
    let (_, ort_decoder) = common::real_pair("onnxruntime");
    let mut cases: Vec<(String, Role, Vec<u8>)> = Vec::new();
    let mut ort_cases: Vec<(String, Role, Vec<u8>)> = Vec::new();
    // ONNX Runtime's shape inference refuses a huge image in samexporter's encoder; the
    // generated tiny encoder's graph takes any size, so only the library's own check stops it.
    let (ort_encoder, _) = common::real_pair("onnxruntime");
    for (source, sides) in [
        (&encoder, &[65536u64][..]),
        (&ort_encoder, &[1 << 40][..]),
        (&model("tiny_a_encoder.onnx"), &[65536, 1 << 40][..]),
    ] {
        let model = std::fs::read(source).unwrap();
        for &side in sides {
            let mut hostile = with_input_dim(&model, "image", 2, side);
            hostile = with_input_dim(&hostile, "image", 3, side);
            let file = source.file_name().unwrap().to_string_lossy();
            cases.push((
                format!("{file} input image [1,3,{side},{side}]"),
                Role::Encoder,
                hostile,
            ));
        }
    }
    // An encoder whose outputs are declared of any size does not stop it at the output check.
    {
        let model = std::fs::read(model("tiny_a_encoder.onnx")).unwrap();
        let mut hostile = with_input_dim(&model, "image", 2, 65536);
        hostile = with_input_dim(&hostile, "image", 3, 65536);
        for output in ["high_res_feats_0", "high_res_feats_1", "image_embed"] {
            for dim in [2, 3] {
                hostile = with_dim(&hostile, GRAPH_OUTPUT, output, dim, Dim::Param("side"));
            }
        }
        cases.push((
            "tiny_a_encoder.onnx input image [1,3,65536,65536], outputs of any size".into(),
            Role::Encoder,
            hostile,
        ));
    }
    {
        let model = std::fs::read(&encoder).unwrap();
        let layout = Layout::of(&model);
        let (index, name, _) = layout.largest().clone();
        cases.push((
            format!("encoder initializer {name} declared [2^31, 2^31, 4]"),
            Role::Encoder,
            with_initializer_dims(&model, index, &[1 << 31, 1 << 31, 4]),
        ));
    }
    for (source, input, list) in [
        (&decoder, "mask_input", &mut cases),
        (&ort_decoder, "input_masks", &mut ort_cases),
    ] {
        let model = std::fs::read(source).unwrap();
        for side in [65536u64, 1 << 20, 1 << 40] {
            let mut hostile = with_input_dim(&model, input, 2, side);
            hostile = with_input_dim(&hostile, input, 3, side);
            let file = source.file_name().unwrap().to_string_lossy();
            list.push((
                format!("{file} input {input} [L,1,{side},{side}]"),
                Role::Decoder,
                hostile,
            ));
        }
    }
    {
        let model = std::fs::read(&decoder).unwrap();
        let layout = Layout::of(&model);
        let (index, name, _) = layout.largest().clone();
        for dims in [vec![1u64 << 40, 1 << 30], vec![u64::MAX >> 1, 3]] {
            cases.push((
                format!("decoder initializer {name} declared {dims:?}"),
                Role::Decoder,
                with_initializer_dims(&model, index, &dims),
            ));
        }
    }
    let all = cases
        .iter()
        .map(|c| ("samexporter", c))
        .chain(ort_cases.iter().map(|c| ("onnxruntime", c)));
    for (i, (family, (case, role, bytes))) in all.enumerate() {
        let path = dir.join(format!("dims-{i}.onnx"));
        let outcome = load_of(family, *role, &path, bytes);
        tally.model_error(case, &path, &outcome);
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
    tally.finish("huge_dimensions");
}
