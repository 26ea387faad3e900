//! Embedding residency and files: save/load round trips, refusal of device memory, hostile
//! files, and atomic saves that survive a killed process.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use sam2::{
    embedding_file, Embedding, Encoder, Error, ImageView, PixelFormat, PredictOptions, Predictor,
    Prompt,
};

fn setup(pair: &str) -> (Encoder, Predictor, Arc<Embedding>) {
    let (encoder, predictor) = open_pair(pair);
    let embedding = Arc::new(encode_shapes(&encoder));
    (encoder, predictor, embedding)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sam2-files-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn prompts() -> Vec<Prompt> {
    shape_clicks()
}

#[test]
fn a_saved_embedding_loads_and_predicts_bit_for_bit_the_same() {
    for pair in ["tiny_a", "tiny_b", "tiny_c", "tiny_a_fp16"] {
        let (_, predictor, embedding) = setup(pair);
        let dir = scratch(pair);
        let path = dir.join("e.sam2");
        embedding_file::save(&embedding, &path).unwrap();
        let loaded = embedding_file::load(&path, predictor.expected_fingerprint()).unwrap();
        assert_eq!(loaded.image_size(), embedding.image_size());
        assert_eq!(loaded.fingerprint(), embedding.fingerprint());
        for (a, b) in loaded.tensors().iter().zip(embedding.tensors()) {
            assert_eq!(a.host_bytes().unwrap(), b.host_bytes().unwrap());
        }
        let opts = PredictOptions { multimask: true };
        let before = predictor.predict(&embedding, &prompts(), opts).unwrap();
        let after = predictor.predict(&loaded, &prompts(), opts).unwrap();
        assert_eq!(before.masks, after.masks, "{pair}");
        assert_eq!(before.scores, after.scores, "{pair}");
        assert_eq!(before.low_res, after.low_res, "{pair}");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_device_embedding_is_refused_and_nothing_is_written() {
    let (_, predictor, embedding) = setup("tiny_a");
    let dir = scratch("device");
    for allocator in ["Cuda", "DML"] {
        let device = Embedding::simulate_device(&embedding, allocator, 0).unwrap();
        assert!(!device.is_serializable());
        assert_eq!(device.allocator_name(), allocator);
        // A fresh path stays absent.
        let fresh = dir.join(format!("fresh-{allocator}.sam2"));
        match embedding_file::save(&device, &fresh) {
            Err(Error::EmbeddingNotSerializable { allocator: a }) => assert_eq!(a, allocator),
            other => panic!("expected EmbeddingNotSerializable, got {other:?}"),
        }
        assert!(!fresh.exists());
        // An existing file is untouched.
        let existing = dir.join("existing.sam2");
        embedding_file::save(&embedding, &existing).unwrap();
        let before = std::fs::read(&existing).unwrap();
        assert!(embedding_file::save(&device, &existing).is_err());
        assert_eq!(std::fs::read(&existing).unwrap(), before);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        // Its tensors' bytes are never read from the host.
        assert!(matches!(
            device.tensors()[0].host_bytes(),
            Err(Error::EmbeddingNotSerializable { .. })
        ));
        // The stand-in is never handed to ONNX Runtime.
        assert!(matches!(
            predictor.predict(&device, &prompts(), PredictOptions::default()),
            Err(Error::InvalidArgument {
                name: "embedding",
                ..
            })
        ));
        assert!(matches!(
            Arc::new(device).to_host(),
            Err(Error::EnvironmentConfiguration(_))
        ));
        // The host tensors behind it still predict as before.
        predictor
            .predict(&embedding, &prompts(), PredictOptions::default())
            .unwrap();
    }
    // A host embedding's to_host is the same embedding, shared.
    let host = embedding.to_host().unwrap();
    assert!(Arc::ptr_eq(&host, &embedding));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn expect_format_error(bytes: &[u8], what: &str, dir: &Path) {
    assert!(
        matches!(
            embedding_file::validate_bytes(bytes),
            Err(Error::EmbeddingFormat(_))
        ),
        "{what}: validate_bytes"
    );
    let path = dir.join("bad.sam2");
    std::fs::write(&path, bytes).unwrap();
    match embedding_file::load(&path, None) {
        Err(Error::EmbeddingFormat(msg)) => assert!(!msg.is_empty()),
        other => panic!(
            "{what}: expected EmbeddingFormat, got {:?}",
            other.map(|_| ())
        ),
    }
}

fn with_header(good: &[u8], edit: impl Fn(&mut serde_json::Value)) -> Vec<u8> {
    let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&good[8..8 + n]).unwrap();
    edit(&mut header);
    let text = serde_json::to_vec(&header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(&good[8 + n..]);
    out
}

#[test]
fn hostile_files_are_format_errors_never_crashes() {
    let (_, predictor, embedding) = setup("tiny_a");
    let dir = scratch("hostile");
    let good_path = dir.join("good.sam2");
    embedding_file::save(&embedding, &good_path).unwrap();
    let good = std::fs::read(&good_path).unwrap();
    embedding_file::validate_bytes(&good).unwrap();

    expect_format_error(&[], "zero-length", &dir);
    expect_format_error(&good[..7], "7 bytes", &dir);
    for cut in [8, 100, good.len() / 2, good.len() - 1] {
        expect_format_error(&good[..cut], &format!("truncated at {cut}"), &dir);
    }
    let mut longer = good.clone();
    longer.extend_from_slice(b"junk");
    expect_format_error(&longer, "trailing bytes", &dir);
    // Bit flips in the length, the header and the payload.
    let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    for at in [
        0,
        3,
        7,
        8 + 2,
        8 + n / 2,
        8 + n + 5,
        good.len() / 2,
        good.len() - 1,
    ] {
        let mut flipped = good.clone();
        flipped[at] ^= 0x10;
        expect_format_error(&flipped, &format!("bit flip at {at}"), &dir);
    }
    // Huge declared sizes.
    let mut huge = good.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    expect_format_error(&huge, "huge header length", &dir);
    let big_offsets = with_header(&good, |h| {
        h["image_embed"]["data_offsets"] = serde_json::json!([0u64, u64::MAX / 2]);
    });
    expect_format_error(&big_offsets, "huge data_offsets", &dir);
    let big_shape = with_header(&good, |h| {
        h["image_embed"]["shape"] = serde_json::json!([1, 256, 4096, 4096]);
    });
    expect_format_error(&big_shape, "huge shape", &dir);
    // Foreign and wrong-version files.
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
    expect_format_error(png, "a PNG", &dir);
    let no_meta = with_header(&good, |h| {
        h.as_object_mut().unwrap().remove("__metadata__");
    });
    expect_format_error(&no_meta, "safetensors without sam2 metadata", &dir);
    for version in ["0", "4", "03", "-1"] {
        let other = with_header(&good, |h| {
            h["__metadata__"]["format_version"] = version.into()
        });
        expect_format_error(&other, &format!("version {version}"), &dir);
    }
    let f64_dtype = with_header(&good, |h| h["high_res_feats_0"]["dtype"] = "F64".into());
    expect_format_error(&f64_dtype, "F64 dtype", &dir);
    let zero_width = with_header(&good, |h| h["__metadata__"]["image_width"] = "0".into());
    expect_format_error(&zero_width, "zero width", &dir);
    let not_json = {
        let mut b = good.clone();
        b[8] = b'!';
        b
    };
    expect_format_error(&not_json, "not JSON", &dir);

    // A missing file is an OS error.
    assert!(matches!(
        embedding_file::load(&dir.join("missing.sam2"), None),
        Err(Error::Io { .. })
    ));
    // A file made by another model is a model mismatch.
    let (encoder_b, _, _) = setup("tiny_b");
    match embedding_file::load(&good_path, Some(encoder_b.fingerprint())) {
        Err(Error::ModelMismatch(msg)) => assert!(msg.contains("good.sam2"), "{msg}"),
        other => panic!("expected ModelMismatch, got {:?}", other.map(|_| ())),
    }
    embedding_file::load(&good_path, predictor.expected_fingerprint()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Child half of the kill test: saves two different embeddings to one path, alternately, forever.
#[test]
#[ignore = "run by kill_during_save_leaves_a_valid_file as a child process"]
fn child_saving_forever() {
    let Some(path) = std::env::var_os("SAM2_SAVE_LOOP_PATH") else {
        return;
    };
    let (encoder, _, a) = setup("tiny_a");
    let img = read_pnm(&testdata("demo.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let b = encoder.encode(&view).unwrap();
    println!("ready");
    let path = PathBuf::from(path);
    loop {
        embedding_file::save(&a, &path).unwrap();
        embedding_file::save(&b, &path).unwrap();
    }
}

/// A small deterministic generator for kill moments (xorshift64*).
struct Moments(u64);

impl Moments {
    fn next_micros(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % below
    }
}

/// What a run of kill trials found.
#[derive(Default)]
struct KillOutcome {
    trials: usize,
    /// Kills after which the target was neither complete embedding, or was missing.
    lost: usize,
    /// Kills that landed inside a save (its temporary file was left behind).
    mid_write: usize,
    failures: Vec<String>,
}

/// Kills a child that saves two embeddings alternately to `path` at `trials` moments spread
/// over its save cycle, and checks each time that `path` holds one of the two complete files.
fn kill_trials(dir: &Path, trials: usize, seed: u64, expected: &[Vec<u8>; 2]) -> KillOutcome {
    let path = dir.join("e.sam2");
    let mut moments = Moments(seed);
    let mut outcome = KillOutcome::default();
    for trial in 0..trials {
        let temps_before = temp_files(dir).len();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "embedding_file::child_saving_forever",
                "--nocapture",
            ])
            .env("SAM2_SAVE_LOOP_PATH", &path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait until it is saving, then kill it at a moment within about two save cycles.
        let mut out = child.stdout.take().unwrap();
        let mut buf = [0u8; 256];
        let mut seen = String::new();
        while !seen.contains("ready") {
            let n = std::io::Read::read(&mut out, &mut buf).unwrap();
            assert!(n > 0, "child exited before saving");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        let delay = std::time::Duration::from_micros(moments.next_micros(60_000));
        std::thread::sleep(delay);
        child.kill().unwrap();
        child.wait().unwrap();
        outcome.trials += 1;
        if temp_files(dir).len() > temps_before {
            outcome.mid_write += 1;
        }
        match std::fs::read(&path) {
            Ok(bytes) if bytes == expected[0] || bytes == expected[1] => {}
            Ok(bytes) => {
                outcome.lost += 1;
                outcome.failures.push(format!(
                    "trial {trial} (killed {delay:?} after ready): {} bytes, not a complete file",
                    bytes.len()
                ));
            }
            Err(e) => {
                outcome.lost += 1;
                outcome.failures.push(format!("trial {trial}: {e}"));
            }
        }
    }
    outcome
}

fn temp_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".sam2tmp"))
        .collect()
}

/// Kill during save, many times: the target is always the complete old file or the complete new
/// one. `SAM2_KILL_TRIALS` sets the number of kills (default 40), run in two lanes at once;
/// with `SAM2_REPORT_DIR` set the figures go to kill_during_save.tsv for the reliability report.
#[test]
fn kill_during_save_leaves_a_valid_file() {
    let trials: usize = std::env::var("SAM2_KILL_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let (encoder, _, a) = setup("tiny_a");
    let img = read_pnm(&testdata("demo.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let b = encoder.encode(&view).unwrap();
    // The two files the child writes, byte for byte.
    let reference = scratch("kill-reference");
    embedding_file::save(&a, &reference.join("a")).unwrap();
    embedding_file::save(&b, &reference.join("b")).unwrap();
    let expected = [
        std::fs::read(reference.join("a")).unwrap(),
        std::fs::read(reference.join("b")).unwrap(),
    ];
    assert_ne!(expected[0], expected[1]);
    std::fs::remove_dir_all(&reference).unwrap();

    let lanes = 2;
    let outcomes: Vec<(PathBuf, KillOutcome)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..lanes)
            .map(|lane| {
                let expected = &expected;
                let a = &a;
                s.spawn(move || {
                    let dir = scratch(&format!("kill-{lane}"));
                    embedding_file::save(a, &dir.join("e.sam2")).unwrap();
                    let share = trials / lanes + usize::from(lane < trials % lanes);
                    let outcome = kill_trials(&dir, share, 0x5eed + lane as u64, expected);
                    (dir, outcome)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total = outcomes.iter().map(|(_, o)| o.trials).sum::<usize>();
    let lost = outcomes.iter().map(|(_, o)| o.lost).sum::<usize>();
    let mid_write = outcomes.iter().map(|(_, o)| o.mid_write).sum::<usize>();
    println!("kill during save: {total} kills, {mid_write} inside a write, {lost} files lost");
    if let Some(dir) = std::env::var_os("SAM2_REPORT_DIR") {
        std::fs::write(
            PathBuf::from(dir).join("kill_during_save.tsv"),
            format!("trials\tmid_write\tlost\n{total}\t{mid_write}\t{lost}\n"),
        )
        .unwrap();
    }
    let failures: Vec<&String> = outcomes.iter().flat_map(|(_, o)| &o.failures).collect();
    assert!(failures.is_empty(), "files lost: {failures:#?}");
    assert_eq!(total, trials);
    // The kills really landed inside saves, not only between them.
    assert!(
        mid_write * 4 >= total,
        "only {mid_write} of {total} kills interrupted a write"
    );

    // The killed children's temporary files are removed by a later save once abandoned (their
    // process gone, untouched for 15 minutes), and nothing else is.
    let (dir, _) = &outcomes[0];
    let left = temp_files(dir);
    assert!(!left.is_empty());
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(16 * 60);
    for t in &left {
        std::fs::File::options()
            .write(true)
            .open(t)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    // A kill between creating a temporary file and writing its header leaves it without the
    // header that says it is ours, so it stays.
    let holds_our_header = |t: &&PathBuf| {
        let head = std::fs::read(t).unwrap();
        let head = &head[..head.len().min(4096)];
        let mark = b"\"format\":\"sam2-embedding\"";
        head.windows(mark.len()).any(|w| w == mark)
    };
    let (ours, empty): (Vec<&PathBuf>, Vec<&PathBuf>) = left.iter().partition(holds_our_header);
    // Kept: a recent file of a dead process (a save elsewhere may still be writing it), an old
    // one of a live process (pid 1), names that are not ours, and a user's file whose name
    // happens to follow our pattern.
    let dead_pid = left
        .iter()
        .find_map(|t| {
            let name = t.file_name()?.to_str()?.to_string();
            name.rsplit_once('.')?
                .0
                .rsplit_once('.')
                .map(|(_, tail)| tail.split('-').next().unwrap_or("").to_string())
        })
        .unwrap();
    let keep = [
        dir.join(format!(".e.sam2.{dead_pid}-999999.sam2tmp")),
        dir.join(".e.sam2.1-5.sam2tmp"),
        dir.join("notes.sam2tmp"),
        dir.join(format!(".e.sam2.{dead_pid}-x.sam2tmp")),
        dir.join(format!(".notes.txt.{dead_pid}-1.sam2tmp")),
    ];
    let good = std::fs::read(dir.join("e.sam2")).unwrap();
    for (i, k) in keep.iter().enumerate() {
        if i < 4 {
            std::fs::write(k, &good[..4096]).unwrap();
        } else {
            std::fs::write(k, b"my notes, not an embedding").unwrap();
        }
        if i > 0 {
            std::fs::File::options()
                .write(true)
                .open(k)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
    }
    assert_eq!(
        embedding_file::remove_abandoned_temps(dir),
        ours.len(),
        "every abandoned temporary file, nothing else"
    );
    for k in keep.iter().chain(empty) {
        assert!(k.exists(), "{} was removed", k.display());
    }
    assert!(ours.iter().all(|t| !t.exists()));
    embedding_file::validate_bytes(&std::fs::read(dir.join("e.sam2")).unwrap()).unwrap();
    for (dir, _) in &outcomes {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn a_save_removes_the_abandoned_temporary_files_of_its_directory_once() {
    let (_, _, embedding) = setup("tiny_a");
    let dir = scratch("abandoned");
    // A process that has exited: its pid cannot be running.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    // What a save killed mid-write leaves: the start of an embedding file.
    let reference = scratch("abandoned-reference");
    embedding_file::save(&embedding, &reference.join("e.sam2")).unwrap();
    let start_of_a_save = std::fs::read(reference.join("e.sam2")).unwrap()[..100_000].to_vec();
    std::fs::remove_dir_all(&reference).unwrap();
    let abandoned = dir.join(format!(".e.sam2.{dead}-0.sam2tmp"));
    std::fs::write(&abandoned, &start_of_a_save).unwrap();
    // A user's file whose name happens to follow the pattern of ours, just as old.
    let notes = dir.join(format!(".notes.txt.{dead}-1.sam2tmp"));
    std::fs::write(&notes, b"my notes").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for file in [&abandoned, &notes] {
        std::fs::File::options()
            .write(true)
            .open(file)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    embedding_file::save(&embedding, &dir.join("e.sam2")).unwrap();
    assert!(
        !abandoned.exists(),
        "the first save into the directory cleans it"
    );
    assert_eq!(
        std::fs::read(&notes).unwrap(),
        b"my notes",
        "a file that is not ours is left alone, whatever its name"
    );
    // Later saves in this process do not scan again.
    std::fs::write(&abandoned, b"x").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&abandoned)
        .unwrap()
        .set_modified(old)
        .unwrap();
    embedding_file::save(&embedding, &dir.join("f.sam2")).unwrap();
    assert!(abandoned.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Child half of `a_taken_temporary_name_is_skipped_not_deleted`: in a fresh process (so its
/// first save takes temporary name number 0), takes that name with a file of its own, then saves.
#[test]
#[ignore = "run by a_taken_temporary_name_is_skipped_not_deleted as a child process"]
fn child_saving_over_a_taken_temporary_name() {
    let Some(dir) = std::env::var_os("SAM2_TAKEN_TEMP_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let (_, _, embedding) = setup("tiny_a");
    let taken = dir.join(format!(".e.sam2.{}-0.sam2tmp", std::process::id()));
    std::fs::write(&taken, b"someone else's file").unwrap();
    std::fs::write(dir.join("taken"), taken.to_string_lossy().as_bytes()).unwrap();
    embedding_file::save(&embedding, &dir.join("e.sam2")).unwrap();
}

#[test]
fn a_taken_temporary_name_is_skipped_not_deleted() {
    let dir = scratch("taken-temp");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "embedding_file::child_saving_over_a_taken_temporary_name",
        ])
        .env("SAM2_TAKEN_TEMP_DIR", &dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    let taken = PathBuf::from(std::fs::read_to_string(dir.join("taken")).unwrap());
    assert_eq!(
        std::fs::read(&taken).ok().as_deref(),
        Some(&b"someone else's file"[..]),
        "the file that held the temporary name is untouched"
    );
    assert!(status.success(), "the save fails: {status}");
    embedding_file::validate_bytes(&std::fs::read(dir.join("e.sam2")).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Loads `path` on another thread; None when it has not returned within 20 s (it hangs).
fn load_within_20s(path: &Path) -> Option<Result<(), Error>> {
    let (sent, received) = std::sync::mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = sent.send(embedding_file::load(&path, None).map(|_| ()));
    });
    received
        .recv_timeout(std::time::Duration::from_secs(20))
        .ok()
}

#[test]
fn a_fifo_a_directory_or_a_device_is_refused_at_once() {
    init_runtime();
    let dir = scratch("not-files");
    let fifo = dir.join("pipe.sam2");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let link = dir.join("link-to-pipe.sam2");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    for (path, kind) in [
        (fifo.as_path(), "FIFO"),
        (link.as_path(), "FIFO"),
        (dir.as_path(), "directory"),
        (Path::new("/dev/null"), "character device"),
    ] {
        let outcome = load_within_20s(path);
        if outcome.is_none() && kind == "FIFO" {
            // Release the hung reader so the test process can end.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
        }
        match outcome {
            Some(Err(Error::Io { context, source })) => {
                let message = format!("{context}: {source}");
                assert!(
                    message.contains(&path.display().to_string()) && message.contains(kind),
                    "{message}"
                );
                assert_eq!(source.kind(), std::io::ErrorKind::InvalidInput, "{message}");
            }
            Some(other) => panic!("{}: expected an I/O error, got {other:?}", path.display()),
            None => panic!("loading {} hangs", path.display()),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Saving through a symbolic link replaces the file the link names and keeps the link: the link
/// then reads as the new embedding, never as a stale file behind a replaced link.
#[test]
fn a_save_through_a_symbolic_link_replaces_the_file_it_names() {
    use std::os::unix::fs::symlink;
    let (encoder, _, a) = setup("tiny_a");
    let img = read_pnm(&testdata("demo.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let b = encoder.encode(&view).unwrap();
    let dir = scratch("symlink");
    let elsewhere = scratch("symlink-target");
    embedding_file::save(&b, &dir.join("reference.sam2")).unwrap();
    let expected = std::fs::read(dir.join("reference.sam2")).unwrap();
    std::fs::remove_file(dir.join("reference.sam2")).unwrap();

    // A relative link to a file beside it, an absolute one to a file in another directory, and
    // a chain of two.
    let real = dir.join("real.sam2");
    let far = elsewhere.join("far.sam2");
    embedding_file::save(&a, &real).unwrap();
    embedding_file::save(&a, &far).unwrap();
    symlink("real.sam2", dir.join("link.sam2")).unwrap();
    symlink(&far, dir.join("far-link.sam2")).unwrap();
    symlink("link.sam2", dir.join("chain.sam2")).unwrap();
    for (link, named, file) in [
        ("link.sam2", PathBuf::from("real.sam2"), &real),
        ("far-link.sam2", far.clone(), &far),
        ("chain.sam2", PathBuf::from("link.sam2"), &real),
    ] {
        embedding_file::save(&a, file).unwrap();
        let link = dir.join(link);
        embedding_file::save(&b, &link).unwrap();
        assert_eq!(
            std::fs::read_link(&link).ok(),
            Some(named),
            "{} is still the same link",
            link.display()
        );
        assert!(
            std::fs::read(file).unwrap() == expected,
            "{} holds the new embedding",
            file.display()
        );
        let loaded = embedding_file::load(&link, None).unwrap();
        assert_eq!(loaded.image_size(), b.image_size());
    }
    assert!(temp_files(&dir).is_empty() && temp_files(&elsewhere).is_empty());

    // A dangling link: the file it names is created.
    symlink("new.sam2", dir.join("dangling.sam2")).unwrap();
    embedding_file::save(&b, &dir.join("dangling.sam2")).unwrap();
    assert_eq!(std::fs::read(dir.join("new.sam2")).unwrap(), expected);
    assert!(std::fs::symlink_metadata(dir.join("dangling.sam2"))
        .unwrap()
        .file_type()
        .is_symlink());

    // A loop is refused, and nothing is written.
    symlink("loop-b.sam2", dir.join("loop-a.sam2")).unwrap();
    symlink("loop-a.sam2", dir.join("loop-b.sam2")).unwrap();
    let before = std::fs::read_dir(&dir).unwrap().count();
    match embedding_file::save(&b, &dir.join("loop-a.sam2")) {
        Err(Error::Io { context, source }) => {
            assert!(context.contains("loop-a.sam2"), "{context}");
            assert!(source.to_string().contains("symbolic links"), "{source}");
        }
        other => panic!("expected an I/O error for a loop of links, got {other:?}"),
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), before);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&elsewhere).unwrap();
}

/// The metadata that says what an embedding is (image size, encoder, family, format) is covered
/// by a checksum: a corruption that leaves the file well-formed is refused, never loaded as an
/// embedding of another size or model.
#[test]
fn corrupted_metadata_is_refused_not_loaded_as_another_embedding() {
    let (encoder, _, embedding) = setup("tiny_a");
    let dir = scratch("metadata");
    let path = dir.join("e.sam2");
    embedding_file::save(&embedding, &path).unwrap();
    let good = std::fs::read(&path).unwrap();
    assert_eq!(
        embedding_file::validate_bytes(&good)
            .unwrap()
            .format_version,
        3
    );

    // One bit flipped in the width's first digit: "512" becomes "412", still valid JSON.
    let at = good
        .windows(14)
        .position(|w| w == b"\"image_width\":")
        .unwrap()
        + 15;
    assert_eq!(good[at], b'5');
    let mut flipped = good.clone();
    flipped[at] ^= 0x01;
    let fingerprint = encoder.fingerprint().to_string();
    let mut other_fingerprint = fingerprint.clone();
    let last = if fingerprint.ends_with('0') { "1" } else { "0" };
    other_fingerprint.replace_range(fingerprint.len() - 1.., last);
    let edits: Vec<(String, Vec<u8>)> = vec![
        ("a bit flip in image_width".into(), flipped),
        (
            "image_height 383".into(),
            with_header(&good, |h| h["__metadata__"]["image_height"] = "383".into()),
        ),
        (
            "another encoder_precision".into(),
            with_header(&good, |h| {
                h["__metadata__"]["encoder_precision"] = "int8".into()
            }),
        ),
        (
            "another encoder_fingerprint".into(),
            with_header(&good, |h| {
                h["__metadata__"]["encoder_fingerprint"] = other_fingerprint.clone().into()
            }),
        ),
    ];
    for (what, bytes) in &edits {
        for outcome in [embedding_file::validate_bytes(bytes).map(|_| ()), {
            std::fs::write(&path, bytes).unwrap();
            embedding_file::load(&path, None).map(|_| ())
        }] {
            match outcome {
                Err(Error::EmbeddingFormat(msg)) => {
                    assert!(msg.contains("metadata checksum mismatch"), "{what}: {msg}")
                }
                other => panic!("{what}: expected a metadata checksum error, got {other:?}"),
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Files written before precision variants (format version 2: no `encoder_precision`) still load,
/// as float32, their metadata checksum covering the fields version 2 had; a version 2 header
/// checked against version 3's fields (an `encoder_precision` added) is refused.
#[test]
fn version_2_files_still_load_as_float32() {
    let (_, predictor, embedding) = setup("tiny_a");
    let dir = scratch("version2");
    let path = dir.join("e.sam2");
    embedding_file::save(&embedding, &path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let v2 = with_header(&good, |h| {
        let meta = h["__metadata__"].as_object_mut().unwrap();
        meta.remove("encoder_precision");
        meta.insert("format_version".into(), "2".into());
        let text: String = [
            "format",
            "format_version",
            "image_width",
            "image_height",
            "encoder_fingerprint",
            "encoder_family",
            "payload_crc32",
        ]
        .iter()
        .map(|k| format!("{k}={}\n", meta[*k].as_str().unwrap()))
        .collect();
        meta.insert(
            "metadata_crc32".into(),
            format!("{:08x}", crc32fast::hash(text.as_bytes())).into(),
        );
    });
    let header = embedding_file::validate_bytes(&v2).unwrap();
    assert_eq!(header.format_version, 2);
    assert_eq!(header.precision, sam2::models::Precision::Fp32);
    std::fs::write(&path, &v2).unwrap();
    let loaded = embedding_file::load(&path, predictor.expected_fingerprint()).unwrap();
    assert_eq!(loaded.precision(), sam2::models::Precision::Fp32);
    for (a, b) in loaded.tensors().iter().zip(embedding.tensors()) {
        assert_eq!(a.host_bytes().unwrap(), b.host_bytes().unwrap());
    }
    // The version field of a version 3 file turned into 2: its checksum no longer matches.
    let downgraded = with_header(&good, |h| h["__metadata__"]["format_version"] = "2".into());
    expect_format_error(&downgraded, "version 3 relabelled 2", &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Files written by earlier releases (format version 1: no metadata checksum) still load, to the
/// same embedding; a version 1 header that carries a metadata checksum is a corrupted version 2.
#[test]
fn version_1_files_still_load() {
    let (_, predictor, embedding) = setup("tiny_a");
    let dir = scratch("version1");
    let path = dir.join("e.sam2");
    embedding_file::save(&embedding, &path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let v1 = with_header(&good, |h| {
        let meta = h["__metadata__"].as_object_mut().unwrap();
        meta.remove("metadata_crc32");
        meta.insert("format_version".into(), "1".into());
    });
    assert_eq!(
        embedding_file::validate_bytes(&v1).unwrap().format_version,
        1
    );
    std::fs::write(&path, &v1).unwrap();
    let loaded = embedding_file::load(&path, predictor.expected_fingerprint()).unwrap();
    assert_eq!(loaded.image_size(), embedding.image_size());
    assert_eq!(loaded.fingerprint(), embedding.fingerprint());
    for (a, b) in loaded.tensors().iter().zip(embedding.tensors()) {
        assert_eq!(a.host_bytes().unwrap(), b.host_bytes().unwrap());
    }
    let downgraded = with_header(&good, |h| h["__metadata__"]["format_version"] = "1".into());
    expect_format_error(&downgraded, "version 1 with a metadata checksum", &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}
