//! Hostile model files of the real SAM2 architecture: copies of the real SAM2.1 hiera-tiny
//! exports ($SAM2_REAL_MODELS, tools/setup/setup-real.sh), truncated, bit-flipped, with external
//! data that points outside the model's directory, and with huge declared dimensions. Each must
//! give `Error::Model` naming the file (or, for a flipped bit that only changes a weight, load and
//! run), never a crash, and never a read outside the model's directory.
//!
//! The files are made once by tools/models/hostile_models.py (tools/setup/setup-real.sh writes them
//! into $SAM2_REAL_HOSTILE, listed with what each must give in its cases.tsv;
//! tests/c/test_bad_input.c loads the same files through the C API). Every load runs in a child
//! process (this test binary again, `child` below), so an abort or a crash is a failing case with
//! its signal rather than the end of the test run.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::*;

// ---------------------------------------------------------------------------------------------
// The hostile files (tools/models/hostile_models.py), and the child process that loads one
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Encoder,
    Decoder,
}

/// One line of `$SAM2_REAL_HOSTILE/cases.tsv`.
#[derive(Debug)]
struct Case {
    role: Role,
    /// The export whose embedding a decoder runs on (`samexporter`, `onnxruntime`).
    family: String,
    /// `model_error` (loading fails, naming the file), `model_error_or_runs`, or `loads`.
    expect: String,
    file: PathBuf,
    /// The case in words.
    case: String,
}

/// The cases of `group` (truncated, flipped, external, dims) for this system (the Windows
/// external-data locations are the C sweep's, under Wine).
fn cases(group: &str) -> Vec<Case> {
    let dir = PathBuf::from(std::env::var_os("SAM2_REAL_HOSTILE").expect(
        "SAM2_REAL_HOSTILE is not set: run `. tools/setup/setup-real.sh` (scripts/test.sh does)",
    ));
    let list = dir.join("cases.tsv");
    let text = std::fs::read_to_string(&list).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (tools/setup/setup-real.sh writes it)",
            list.display()
        )
    });
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("group\trole\tfamily\texpect\tplatform\tfile\tcase"),
        "the columns of {}",
        list.display()
    );
    let cases: Vec<Case> = lines
        .map(|line| {
            let f = line.split('\t').collect::<Vec<_>>();
            assert_eq!(f.len(), 7, "{line:?} in {}", list.display());
            f
        })
        .filter(|f| f[0] == group && f[4] != "windows")
        .map(|f| Case {
            role: match f[1] {
                "encoder" => Role::Encoder,
                "decoder" => Role::Decoder,
                other => panic!("role {other} in {}", list.display()),
            },
            family: f[2].to_string(),
            expect: f[3].to_string(),
            file: dir.join(f[5]),
            case: f[6].to_string(),
        })
        .collect();
    assert!(!cases.is_empty(), "no {group} cases in {}", list.display());
    cases
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
        .args([
            "--exact",
            "hostile_models::child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_MODE, mode)
        .env("SAM2_HOSTILE_MODEL", model)
        .env("SAM2_HOSTILE_EXTRA", extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    // libtest prints "test hostile_models::child ... " before the child's own output, on the same line.
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

/// Loads the case's file as its role in a child process; a decoder runs on an embedding of the
/// case's family.
fn load(case: &Case) -> Outcome {
    match case.role {
        Role::Encoder => run_child("encoder", &case.file, Path::new("-")),
        Role::Decoder => run_child("decoder", &case.file, &embedding_file(&case.family)),
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

    /// The outcome against what the case expects: a model error naming the file, or (a flipped
    /// bit) that or a model that loads and runs.
    fn judge(&mut self, case: &Case, outcome: &Outcome) {
        match case.expect.as_str() {
            "model_error" => self.model_error(&case.case, &case.file, outcome),
            "model_error_or_runs" => {
                self.count(&case.case, outcome);
                let fine = match outcome.kind.as_str() {
                    "ok" | "load:Model" => true,
                    // A model whose graph loads but cannot run on these inputs (a shape that no
                    // longer fits): ONNX Runtime's error at run time, reported as such.
                    "run:OnnxRuntime" => true,
                    _ => false,
                };
                if !fine {
                    self.failures.push(format!("{}: {outcome:?}", case.case));
                }
            }
            other => panic!("{}: unknown expectation {other}", case.case),
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
/// just before the end (inside the trailing opset imports), of the encoder and the decoder.
#[test]
fn truncated_real_models_are_model_errors() {
    let mut tally = Tally::default();
    for case in cases("truncated") {
        tally.judge(&case, &load(&case));
    }
    tally.finish("truncated");
}

/// One bit flipped at seeded places: in the node list (the graph's structure), in the weights,
/// and in the tail (inputs, outputs, value infos, opset imports). A flip may leave a model that
/// loads (a changed weight, or a name nothing refers to): then it must run, or fail cleanly.
#[test]
fn bit_flipped_real_models_load_and_run_or_are_model_errors() {
    let mut tally = Tally::default();
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for case in cases("flipped") {
        let outcome = load(&case);
        tally.judge(&case, &outcome);
        *counts.entry(outcome.kind.clone()).or_default() += 1;
    }
    println!("bit flips: {counts:?}");
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
/// and through a link inside the model's directory (`<dir>/a/b/`) that points outside it. Each
/// location names a real file, `<dir>/etc/passwd`, holding exactly the bytes the model needs (so a
/// load that read it would succeed), watched for opens and reads; `/etc/passwd` itself is tried
/// too. Each must be a model error, and nothing outside the model's directory may be opened.
#[test]
fn external_data_outside_the_model_directory_is_refused_and_never_read() {
    let mut tally = Tally::default();
    let (controls, hostile): (Vec<_>, Vec<_>) = cases("external")
        .into_iter()
        .partition(|c| c.expect == "loads");
    for case in &hostile {
        let models = case.file.parent().unwrap();
        let outside = models.parent().unwrap().parent().unwrap().join("etc");
        let watch = Watch::new(&outside);
        let outcome = load(case);
        tally.judge(case, &outcome);
        let opened = watch.events();
        if !opened.is_empty() {
            tally.failures.push(format!(
                "{}: opened or read outside the model's directory: {:?} in {}",
                case.case,
                opened,
                watch.dir.display()
            ));
        }
    }
    // The control: the same decoder with its external data inside its directory loads, and the
    // watch sees the file opened (so the silence above means something).
    assert!(
        !controls.is_empty(),
        "the external-data cases have a control"
    );
    for case in &controls {
        let watch = Watch::new(case.file.parent().unwrap());
        let outcome = load(case);
        assert_eq!(outcome.kind, "ok", "{}: {outcome:?}", case.case);
        let opened = watch.events();
        assert!(
            opened.iter().any(|n| n == "inside.bin"),
            "the watch saw the control's data file opened: {opened:?}"
        );
    }
    tally.finish("external_data");
}

/// Huge declared dimensions: the encoders' image input (the library takes its input size from
/// it; the generated tiny encoder's graph takes any size, so only the library's own check stops
/// it), the decoders' mask inputs (the library takes the low-resolution mask size from them), and
/// an initializer whose shape no longer matches its data, or overflows.
#[test]
fn huge_declared_dimensions_are_model_errors() {
    let mut tally = Tally::default();
    for case in cases("dims") {
        tally.judge(&case, &load(&case));
    }
    tally.finish("huge_dimensions");
}
