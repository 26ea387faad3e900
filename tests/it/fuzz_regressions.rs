//! Replays every fuzz input that once crashed (`fuzz/regressions/<target>/`, committed), the
//! committed seeds (`fuzz/seeds/<target>/`) and the local fuzz corpora (`fuzz/corpus/<target>/`,
//! when `scripts/fuzz.sh` has run) through the same checks the fuzz targets run (`sam2::test_support::fuzzing`),
//! so a crash found by fuzzing stays fixed and plain `cargo test` covers it without cargo-fuzz.
//! To keep a new crash: copy the artifact from
//! `fuzz/artifacts/<target>/` to `fuzz/regressions/<target>/` under a name that says what it was.

use std::path::PathBuf;

fn inputs(dir: &str, target: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(dir)
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.is_file() && !p.ends_with(".gitkeep"));
    files.sort();
    files
}

#[test]
fn every_input_that_once_crashed_is_handled() {
    let mut replayed = 0;
    for target in sam2::test_support::fuzzing::targets() {
        for path in inputs("regressions", target) {
            let data = std::fs::read(&path).unwrap();
            let outcome =
                std::panic::catch_unwind(|| sam2::test_support::fuzzing::run(target, &data));
            assert!(outcome.is_ok(), "{target}: {} fails again", path.display());
            replayed += 1;
        }
    }
    assert!(
        replayed >= 1,
        "no regression inputs found under fuzz/regressions"
    );
}

/// The committed seeds (`fuzz/seeds/<target>/`): hostile cut-down real-architecture models
/// (tools/models/hostile_seeds.py) among them.
#[test]
fn the_committed_seeds_pass() {
    let mut replayed = 0;
    for target in sam2::test_support::fuzzing::targets() {
        for path in inputs("seeds", target) {
            let data = std::fs::read(&path).unwrap();
            let outcome =
                std::panic::catch_unwind(|| sam2::test_support::fuzzing::run(target, &data));
            assert!(outcome.is_ok(), "{target}: seed {} fails", path.display());
            replayed += 1;
        }
    }
    assert!(replayed >= 10, "the seeds under fuzz/seeds are missing");
}

#[test]
fn the_local_fuzz_corpora_pass() {
    for target in sam2::test_support::fuzzing::targets() {
        for path in inputs("corpus", target) {
            let data = std::fs::read(&path).unwrap();
            let outcome =
                std::panic::catch_unwind(|| sam2::test_support::fuzzing::run(target, &data));
            assert!(
                outcome.is_ok(),
                "{target}: corpus input {} fails",
                path.display()
            );
        }
    }
}

/// Inputs written by hand for the edges the fuzzers need time to reach.
#[test]
fn hand_made_edges() {
    let pixels = |w: u32, h: u32, stride: u64, format: u8, len: usize| {
        let mut v = Vec::new();
        v.extend_from_slice(&w.to_le_bytes());
        v.extend_from_slice(&h.to_le_bytes());
        v.extend_from_slice(&stride.to_le_bytes());
        v.push(format);
        v.push(16);
        v.resize(v.len() + len, 0x7f);
        v
    };
    for input in [
        pixels(4, 3, u64::MAX, 0, 64),
        pixels(4, 3, u64::MAX / 2 + 1, 0, 64),
        pixels(65536, 65536, 0, 2, 64),
        pixels(u32::MAX, 1, 0, 0, 64),
        pixels(1, 1, u64::MAX, 4, 1),
        pixels(0, 0, 0, 0, 0),
    ] {
        sam2::test_support::fuzzing::pixels(&input);
    }
    // Prompts: one object, a box of NaN; one object with 1025 points; a point on the far edge.
    let mut nan_box = vec![];
    nan_box.extend_from_slice(&100u32.to_le_bytes());
    nan_box.extend_from_slice(&100u32.to_le_bytes());
    nan_box.extend_from_slice(&[1, 1, 0]);
    for _ in 0..4 {
        nan_box.extend_from_slice(&f32::NAN.to_le_bytes());
    }
    sam2::test_support::fuzzing::prompts(&nan_box);
    let mut many = vec![];
    many.extend_from_slice(&100u32.to_le_bytes());
    many.extend_from_slice(&100u32.to_le_bytes());
    many.extend_from_slice(&[1, 0, 255]);
    sam2::test_support::fuzzing::prompts(&many);
    let mut edge = vec![];
    edge.extend_from_slice(&99u32.to_le_bytes()); // width 100
    edge.extend_from_slice(&99u32.to_le_bytes());
    edge.extend_from_slice(&[1, 0, 1, 1]);
    edge.extend_from_slice(&100f32.to_le_bytes());
    edge.extend_from_slice(&100f32.to_le_bytes());
    sam2::test_support::fuzzing::prompts(&edge);
}
