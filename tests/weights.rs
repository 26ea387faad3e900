//! One copy of the weights for every session of a model, copies only on request, and a
//! predictor pool that serves many threads.

mod common;

use std::sync::Arc;

use common::*;
use sam2::weights::WeightSharing;
use sam2::{
    Encoder, EncoderOptions, ImageView, PixelFormat, Point, PredictOptions, Predictor,
    PredictorOptions, Prompt,
};

fn options(sharing: WeightSharing) -> EncoderOptions {
    let mut o = EncoderOptions::default();
    o.session.weights = sharing;
    o
}

fn embed(encoder: &Encoder) -> sam2::Embedding {
    let img = read_pnm(&testdata("shapes.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    encoder.encode(&view).unwrap()
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
    let (ea, ec) = (embed(&a), embed(&c));
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
    let before = sam2::weights::shared_models();
    let a = Encoder::new(&path, &EncoderOptions::default()).unwrap();
    let b = Encoder::new(&path, &EncoderOptions::default()).unwrap();
    assert_eq!(sam2::weights::shared_models(), before + 1);
    drop(a);
    assert_eq!(
        sam2::weights::shared_models(),
        before + 1,
        "still used by b"
    );
    drop(b);
    assert_eq!(
        sam2::weights::shared_models(),
        before,
        "released with the last session"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn onnx_runtime_never_reads_the_weights_from_the_file() {
    init_runtime();
    let dir = std::env::temp_dir().join(format!("sam2-noread-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny_a_encoder.onnx");
    std::fs::copy(model("tiny_a_encoder.onnx"), &path).unwrap();
    let first = Encoder::new(&path, &EncoderOptions::default()).unwrap();
    let reference = embed(&first);
    // Garble every byte of the file after its first 64 while keeping its size and time, so the
    // registry still serves the weights it holds: a session that read weights from the file
    // (where its external-data entries point) would now compute something else.
    let meta = std::fs::metadata(&path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    for b in bytes.iter_mut().skip(64) {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(meta.modified().unwrap())
        .unwrap();
    let second = Encoder::new(&path, &EncoderOptions::default()).unwrap();
    assert_eq!(first.weights_address(), second.weights_address());
    let again = embed(&second);
    for (x, y) in again.tensors().iter().zip(reference.tensors()) {
        assert!(
            x.host_bytes().unwrap() == y.host_bytes().unwrap(),
            "the second session computed from the file's bytes"
        );
    }
    drop((first, second));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_predictor_pool_serves_many_threads_on_one_embedding() {
    init_runtime();
    let encoder = Encoder::new(model("tiny_a_encoder.onnx"), &EncoderOptions::default()).unwrap();
    let embedding = Arc::new(embed(&encoder));
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

    let all = shapes();
    let prompts: Vec<Prompt> = all
        .iter()
        .map(|s| Prompt {
            points: vec![Point {
                x: s.click.0,
                y: s.click.1,
                positive: true,
            }],
            ..Default::default()
        })
        .collect();
    let expected: Vec<_> = prompts
        .iter()
        .map(|p| {
            predictor
                .predict(
                    &embedding,
                    std::slice::from_ref(p),
                    PredictOptions::default(),
                )
                .unwrap()
        })
        .collect();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (predictor, embedding, prompts, expected) = (
                Arc::clone(&predictor),
                Arc::clone(&embedding),
                prompts.clone(),
                expected.clone(),
            );
            std::thread::spawn(move || {
                for i in 0..40 {
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
    for t in threads {
        t.join().unwrap();
    }
}
