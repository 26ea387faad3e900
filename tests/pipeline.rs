//! The safe pipeline on the generated SAM2-contract models: contracts, encoding, and geometry.

mod common;

use common::*;
use sam2::{
    Contract, Encoder, EncoderOptions, ImageView, PixelFormat, Point, PredictOptions, Predictor,
    PredictorOptions, Prompt,
};

const TINY: [(&str, Contract); 4] = [
    ("tiny_a", Contract::A),
    ("tiny_b", Contract::B),
    ("tiny_c", Contract::C),
    ("tiny_a_fp16", Contract::A),
];

fn open(pair: &str) -> (Encoder, Predictor) {
    init_runtime();
    let encoder = Encoder::new(
        model(&format!("{pair}_encoder.onnx")),
        &EncoderOptions::default(),
    )
    .unwrap();
    let options = PredictorOptions {
        encoder_fingerprint: Some(encoder.fingerprint()),
        ..Default::default()
    };
    let predictor = Predictor::new(model(&format!("{pair}_decoder.onnx")), &options).unwrap();
    (encoder, predictor)
}

fn shapes_image() -> Image {
    read_pnm(&testdata("shapes.ppm"))
}

fn click(x: f32, y: f32) -> Prompt {
    Prompt {
        points: vec![Point {
            x,
            y,
            positive: true,
        }],
        ..Default::default()
    }
}

#[test]
fn every_generated_model_loads_with_its_contract() {
    init_runtime();
    for (pair, contract) in TINY.iter().copied().chain([("bench_a", Contract::A)]) {
        let (encoder, predictor) = open(pair);
        assert_eq!(predictor.contract(), contract, "{pair}");
        assert_eq!(encoder.spec().input_size, 1024, "{pair}");
        assert_eq!(encoder.spec().family, predictor.spec().family, "{pair}");
    }
}

#[test]
fn encoding_the_test_image_gives_three_host_tensors_of_the_contract_shapes() {
    let img = shapes_image();
    for (pair, _) in TINY {
        let (encoder, _) = open(pair);
        let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
        let embedding = encoder.encode(&view).unwrap();
        assert_eq!(
            embedding.image_size(),
            (img.width as u32, img.height as u32)
        );
        let shapes: Vec<Vec<i64>> = embedding
            .tensors()
            .iter()
            .map(|t| t.shape().to_vec())
            .collect();
        assert_eq!(
            shapes,
            vec![
                vec![1, 32, 256, 256],
                vec![1, 64, 128, 128],
                vec![1, 256, 64, 64]
            ],
            "{pair}"
        );
        assert!(embedding.is_serializable());
        assert_eq!(embedding.allocator_name(), "Cpu");
        assert_eq!(embedding.fingerprint(), encoder.fingerprint());
        // The features are not all equal: the image's content reached them.
        let bytes = embedding.tensors()[2].host_bytes().unwrap();
        assert!(
            bytes.chunks(4).any(|c| c != &bytes[..4]),
            "{pair}: constant embedding"
        );
    }
}

#[test]
fn a_click_inside_each_shape_selects_that_shape() {
    let img = shapes_image();
    let all = shapes();
    for (pair, _) in TINY {
        let (encoder, predictor) = open(pair);
        let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
        let embedding = encoder.encode(&view).unwrap();
        for shape in &all {
            let result = predictor
                .predict(
                    &embedding,
                    &[click(shape.click.0, shape.click.1)],
                    PredictOptions::default(),
                )
                .unwrap();
            assert_eq!((result.objects, result.candidates), (1, 1));
            let want = expected_click_mask(shape, &all);
            let score = iou(result.mask(0), &want);
            assert!(score >= 0.9, "{pair} {}: IoU {score:.3}", shape.name);
        }
    }
}
