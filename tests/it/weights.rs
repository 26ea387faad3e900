//! One copy of the weights for every session of a model, copies only on request, and a
//! predictor pool that serves many threads.

use crate::common;

use std::sync::Arc;

use common::*;
use sam2::device::WeightSharing;
use sam2::{
    Embedding, Encoder, EncoderOptions, PredictOptions, Prediction, Predictor, PredictorOptions,
    Prompt,
};

fn options(sharing: WeightSharing) -> EncoderOptions {
    let mut o = EncoderOptions::default();
    o.session.weights = sharing;
    o
}

#[test]
fn sessions_of_one_model_share_one_buffer_and_copies_really_copy() {
    init_runtime();
    let path = model("bench_a_encoder.onnx");
    let a = Encoder::new(&path, &options(WeightSharing::Shared)).unwrap();
    let b = Encoder::new(&path, &options(WeightSharing::Shared)).unwrap();
    let c = Encoder::new(&path, &options(WeightSharing::Copy)).unwrap();
    let (pa, pb, pc) = (
        a.weights_address().unwrap(),
        b.weights_address().unwrap(),
        c.weights_address().unwrap(),
    );
    assert_eq!(pa, pb, "two shared encoders hold the same weight buffer");
    assert_ne!(pa, pc, "the explicit copy has its own buffer");
    assert!(
        a.weight_bytes() > 90_000_000,
        "the bench encoder's weights are held outside the proto: {}",
        a.weight_bytes()
    );
    assert_eq!(a.fingerprint(), c.fingerprint());
    // Same results from shared and copied weights.
    let (ea, ec) = (encode_shapes(&a), encode_shapes(&c));
    for (x, y) in ea.tensors().iter().zip(ec.tensors()) {
        assert_eq!(x.host_bytes().unwrap(), y.host_bytes().unwrap());
    }
}

#[test]
fn the_registry_releases_weights_with_the_last_session() {
    init_runtime();
    // A private copy of a model file, so no other test holds its weights.
    let dir = std::env::temp_dir().join(format!("sam2-weights-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny_b_encoder.onnx");
    std::fs::copy(model("tiny_b_encoder.onnx"), &path).unwrap();
    let before = sam2::device::shared_models();
    let a = Encoder::new(&path, &EncoderOptions::default()).unwrap();
    let b = Encoder::new(&path, &EncoderOptions::default()).unwrap();
    assert_eq!(sam2::device::shared_models(), before + 1);
    drop(a);
    assert_eq!(sam2::device::shared_models(), before + 1, "still used by b");
    drop(b);
    assert_eq!(
        sam2::device::shared_models(),
        before,
        "released with the last session"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn same_embedding(a: &sam2::Embedding, b: &sam2::Embedding) -> bool {
    a.tensors()
        .iter()
        .zip(b.tensors())
        .all(|(x, y)| x.host_bytes().unwrap() == y.host_bytes().unwrap())
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sam2-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A symbolic link to a model, placed beside another model that has the target's file name,
/// computes what the target computes, at every optimisation level. (Before, the weights were read
/// back from "the model file's name" in the link's directory: the wrong model's, at ALL.)
#[test]
fn a_link_to_a_model_computes_that_model_whatever_lies_beside_the_link() {
    init_runtime();
    let dir = scratch("link");
    let (real, elsewhere) = (dir.join("real"), dir.join("elsewhere"));
    std::fs::create_dir_all(&real).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::copy(
        model("tiny_a_encoder.onnx"),
        real.join("tiny_a_encoder.onnx"),
    )
    .unwrap();
    // Another model under the target's name, beside the link.
    std::fs::copy(
        model("tiny_c_encoder.onnx"),
        elsewhere.join("tiny_a_encoder.onnx"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        real.join("tiny_a_encoder.onnx"),
        elsewhere.join("my_encoder.onnx"),
    )
    .unwrap();
    for level in [
        sam2::device::Optimization::None,
        sam2::device::Optimization::Basic,
        sam2::device::Optimization::All,
    ] {
        let mut o = EncoderOptions::default();
        o.session.optimization = level;
        o.session.weights = WeightSharing::Copy;
        let direct = encode_shapes(&Encoder::new(real.join("tiny_a_encoder.onnx"), &o).unwrap());
        let linked = encode_shapes(&Encoder::new(elsewhere.join("my_encoder.onnx"), &o).unwrap());
        assert!(
            same_embedding(&direct, &linked),
            "{level:?}: the link computed something else than its target"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A different model copied over a model file with the same size and its modification time set
/// back is another model: a new encoder gets its weights and fingerprint, not the registry's old
/// ones. (Before, the registry matched on path, size and modification time.)
#[test]
fn a_model_replaced_with_the_same_size_and_time_is_loaded_again() {
    init_runtime();
    let dir = scratch("replaced");
    let path = dir.join("tiny_a_encoder.onnx");
    let original = std::fs::read(model("tiny_a_encoder.onnx")).unwrap();
    std::fs::write(&path, &original).unwrap();
    let first = Encoder::new(&path, &EncoderOptions::default()).unwrap();
    let before = encode_shapes(&first);
    // The same model with other weights: the largest initializer's bytes reversed.
    let split = sam2::test_support::split(&original, 1024).unwrap();
    let init = split.initializers.iter().max_by_key(|i| i.len).unwrap();
    let mut other = original.clone();
    other[init.offset..init.offset + init.len].reverse();
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, &other).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        original.len() as u64
    );
    let second = Encoder::new(&path, &EncoderOptions::default()).unwrap();
    assert_ne!(second.fingerprint(), first.fingerprint());
    assert_ne!(second.weights_address(), first.weights_address());
    assert!(!same_embedding(&before, &encode_shapes(&second)));
    drop((first, second));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A model whose weights are in an external-data file beside it (how large exports are saved)
/// loads at every level and computes what the same model with inline weights computes.
#[test]
fn a_model_with_its_weights_in_a_file_beside_it_loads() {
    init_runtime();
    let dir = scratch("external");
    let original = std::fs::read(model("tiny_a_encoder.onnx")).unwrap();
    // The proto keeps references to "weights.bin" at the weights' offsets in the original bytes,
    // so the original file itself serves as the data file.
    let split = sam2::test_support::split_with_location(&original, 1024, "weights.bin").unwrap();
    assert!(!split.initializers.is_empty());
    std::fs::write(dir.join("external.onnx"), &split.model).unwrap();
    std::fs::write(dir.join("weights.bin"), &original).unwrap();
    for level in [
        sam2::device::Optimization::None,
        sam2::device::Optimization::All,
    ] {
        let mut o = EncoderOptions::default();
        o.session.optimization = level;
        let inline = encode_shapes(&Encoder::new(model("tiny_a_encoder.onnx"), &o).unwrap());
        let external = encode_shapes(&Encoder::new(dir.join("external.onnx"), &o).unwrap());
        assert!(same_embedding(&inline, &external), "{level:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// External data that is absolute or outside the model's directory is refused with a model error
/// naming the file, even when the file it names exists.
#[test]
fn external_data_outside_the_model_directory_is_refused() {
    init_runtime();
    let dir = scratch("hostile");
    let inner = dir.join("models");
    std::fs::create_dir_all(&inner).unwrap();
    let original = std::fs::read(model("tiny_a_encoder.onnx")).unwrap();
    std::fs::write(dir.join("outside.bin"), &original).unwrap();
    let absolute = dir.join("outside.bin").to_string_lossy().into_owned();
    for location in ["../outside.bin", absolute.as_str()] {
        let split = sam2::test_support::split_with_location(&original, 1024, location).unwrap();
        let path = inner.join("hostile.onnx");
        std::fs::write(&path, &split.model).unwrap();
        match Encoder::new(&path, &EncoderOptions::default()) {
            Err(sam2::Error::Model { path: p, reason }) => {
                assert_eq!(p, path);
                assert!(
                    reason.contains("ONNX Runtime cannot load it"),
                    "{location}: {reason}"
                );
            }
            other => panic!("{location}: expected a model error, got {other:?}"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A predictor's pool serves predicts from many threads with the masks of single calls. Its
/// one-thread sessions are built when predicts first run at once, not with the predictor.
#[test]
fn a_predictor_pool_serves_many_threads_on_one_embedding() {
    init_runtime();
    let encoder = Encoder::new(model("tiny_a_encoder.onnx"), &EncoderOptions::default()).unwrap();
    let embedding = Arc::new(encode_shapes(&encoder));
    let predictor = Arc::new(
        Predictor::new(
            model("tiny_a_decoder.onnx"),
            &PredictorOptions {
                pool_size: Some(4),
                encoder_fingerprint: Some(encoder.fingerprint()),
                ..Default::default()
            },
        )
        .unwrap(),
    );
    assert_eq!(predictor.pool_size(), 4);
    let other = Predictor::new(model("tiny_a_decoder.onnx"), &PredictorOptions::default()).unwrap();
    assert_eq!(
        predictor.weights_address(),
        other.weights_address(),
        "pool and other predictors share weights"
    );

    let prompts = shape_clicks();
    let expected = single_calls(&predictor, &embedding, &prompts);
    // Predicts one at a time never needed a second session: none was built.
    assert_eq!(predictor.sessions_built(), 1);
    predict_at_once(&predictor, &embedding, &prompts, &expected, 8, 40);
    // Predicts that ran at once had the pool's one-thread sessions built for them: at most the
    // four asked for, beside the session on every core.
    let built = predictor.sessions_built();
    assert!((2..=5).contains(&built), "{built} sessions built");
}

/// When the pool cannot build a session on demand (memory, most likely), predicts that run at
/// once still succeed with the same masks, on the sessions already built; the host is told once
/// in the log, and the pool stops trying.
#[test]
fn a_pool_that_cannot_grow_serves_concurrent_predicts_on_what_it_has() {
    let _turn = log_turn();
    init_runtime();
    let encoder = Encoder::new(model("tiny_a_encoder.onnx"), &EncoderOptions::default()).unwrap();
    let embedding = Arc::new(encode_shapes(&encoder));
    let mut predictor = Predictor::new(
        model("tiny_a_decoder.onnx"),
        &PredictorOptions {
            pool_size: Some(2),
            encoder_fingerprint: Some(encoder.fingerprint()),
            ..Default::default()
        },
    )
    .unwrap();
    sam2::test_support::fail_pool_growth(&mut predictor);
    let predictor = Arc::new(predictor);
    let warnings = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&warnings);
    sam2::log::set_sink(
        Some(Arc::new(move |_, message: &str| {
            if message.contains("the predictor's pool stays") {
                seen.lock().unwrap().push(message.to_string());
            }
        })),
        sam2::log::LogLevel::Warning,
    );
    let prompts = &shape_clicks()[..1];
    let expected = single_calls(&predictor, &embedding, prompts);
    predict_at_once(&predictor, &embedding, prompts, &expected, 4, 20);
    sam2::log::set_sink(None, sam2::log::LogLevel::Warning);
    assert_eq!(predictor.sessions_built(), 1, "no session could be built");
    let warnings = warnings.lock().unwrap();
    // Two threads may each try a slot before the first failure stops the pool.
    assert!((1..=2).contains(&warnings.len()), "warnings: {warnings:?}");
    assert!(
        warnings[0].contains("tiny_a_decoder.onnx"),
        "{}",
        warnings[0]
    );
}

/// Each prompt predicted alone, one after the other.
fn single_calls(
    predictor: &Predictor,
    embedding: &Embedding,
    prompts: &[Prompt],
) -> Vec<Prediction> {
    prompts
        .iter()
        .map(|p| {
            predictor
                .predict(
                    embedding,
                    std::slice::from_ref(p),
                    PredictOptions::default(),
                )
                .unwrap()
        })
        .collect()
}

/// `threads` threads, started together, each predict `iterations` times, cycling through
/// `prompts` from a different one each; every result has the masks and scores of `expected`.
fn predict_at_once(
    predictor: &Arc<Predictor>,
    embedding: &Arc<Embedding>,
    prompts: &[Prompt],
    expected: &[Prediction],
    threads: usize,
    iterations: usize,
) {
    let start = Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (predictor, embedding, prompts, expected, start) = (
                Arc::clone(predictor),
                Arc::clone(embedding),
                prompts.to_vec(),
                expected.to_vec(),
                Arc::clone(&start),
            );
            std::thread::spawn(move || {
                start.wait();
                for i in 0..iterations {
                    let k = (t + i) % prompts.len();
                    let r = predictor
                        .predict(
                            &embedding,
                            std::slice::from_ref(&prompts[k]),
                            PredictOptions::default(),
                        )
                        .unwrap();
                    assert_eq!(r.masks, expected[k].masks, "thread {t} iteration {i}");
                    assert_eq!(r.scores, expected[k].scores);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}
