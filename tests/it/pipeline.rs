//! The safe pipeline on the generated SAM2-contract models: contracts, encoding, and geometry.

use crate::common;

use common::*;
use sam2::models::DecoderExport;
use sam2::{
    Encoder, EncoderOptions, ImageView, PixelFormat, Point, PredictOptions, Predictor,
    PredictorOptions, Prompt,
};

const TINY: [(&str, DecoderExport); 4] = [
    ("tiny_a", DecoderExport::SamExporter),
    ("tiny_b", DecoderExport::OnnxSam2),
    ("tiny_c", DecoderExport::OnnxRuntime),
    ("tiny_a_fp16", DecoderExport::SamExporter),
];

fn open(pair: &str) -> (Encoder, Predictor) {
    open_pair(pair)
}

fn shapes_image() -> Image {
    read_pnm(&testdata("shapes.ppm"))
}

#[test]
fn every_generated_model_loads_as_its_export() {
    init_runtime();
    for (pair, export) in TINY
        .iter()
        .copied()
        .chain([("bench_a", DecoderExport::SamExporter)])
    {
        let (encoder, predictor) = open(pair);
        assert_eq!(predictor.export(), export, "{pair}");
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

/// A click in the left twin and a negative click in the right one.
fn keep_left_twin(left: &Shape, right: &Shape) -> Prompt {
    Prompt {
        points: vec![
            Point {
                x: left.click.0,
                y: left.click.1,
                positive: true,
            },
            Point {
                x: right.click.0,
                y: right.click.1,
                positive: false,
            },
        ],
        ..Default::default()
    }
}

fn shape<'a>(all: &'a [Shape], name: &str) -> &'a Shape {
    all.iter().find(|s| s.name == name).unwrap()
}

#[test]
fn a_negative_click_removes_the_twin_and_a_box_selects_what_lies_inside() {
    let all = shapes();
    let (left, right) = (shape(&all, "twin_left"), shape(&all, "twin_right"));
    for (pair, _) in TINY {
        let (encoder, predictor) = open(pair);
        let embedding = encode_shapes(&encoder);
        let prompt = keep_left_twin(left, right);
        let r = predictor
            .predict(&embedding, &[prompt], PredictOptions::default())
            .unwrap();
        let score = iou(r.mask(0), &left.mask);
        assert!(
            score >= 0.9,
            "{pair}: negative click: IoU {score:.3} with the left twin alone"
        );
        assert!(
            iou(r.mask(0), &right.mask) < 0.05,
            "{pair}: the right twin is still selected"
        );

        for s in &all {
            let [x1, y1, x2, y2] = s.bbox;
            let prompt = Prompt {
                bbox: Some([x1 - 4.0, y1 - 4.0, x2 + 4.0, y2 + 4.0]),
                ..Default::default()
            };
            let r = predictor
                .predict(&embedding, &[prompt], PredictOptions::default())
                .unwrap();
            let score = iou(r.mask(0), &s.mask);
            assert!(
                score >= 0.9,
                "{pair}: box around {}: IoU {score:.3}",
                s.name
            );
            // Nothing outside the box.
            let [bx1, by1, bx2, by2] = r.boxes[0];
            assert!(
                bx1 as f32 >= x1 - 5.0 && by1 as f32 >= y1 - 5.0,
                "{pair} {}: {:?}",
                s.name,
                r.boxes[0]
            );
            assert!(
                bx2 as f32 <= x2 + 5.0 && by2 as f32 <= y2 + 5.0,
                "{pair} {}: {:?}",
                s.name,
                r.boxes[0]
            );
        }
    }
}

#[test]
fn multimask_returns_every_candidate_and_the_best_is_the_single_answer() {
    let all = shapes();
    let s = shape(&all, "green_rect");
    for (pair, _) in TINY {
        let (encoder, predictor) = open(pair);
        let embedding = encode_shapes(&encoder);
        let prompt = click(s.click.0, s.click.1);
        let multi = predictor
            .predict(
                &embedding,
                std::slice::from_ref(&prompt),
                PredictOptions { multimask: true },
            )
            .unwrap();
        assert_eq!((multi.objects, multi.candidates), (1, 3), "{pair}");
        assert_eq!(multi.candidate_index, vec![0, 1, 2]);
        assert!(
            multi.scores.iter().all(|v| v.is_finite()),
            "{pair}: {:?}",
            multi.scores
        );
        let single = predictor
            .predict(&embedding, &[prompt], PredictOptions::default())
            .unwrap();
        let best = multi
            .scores
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap()
            .0;
        assert_eq!(single.candidate_index[0] as usize, best, "{pair}");
        assert_eq!(single.mask(0), multi.mask(best), "{pair}");
        assert_eq!(single.scores[0], multi.scores[best]);
        // Areas and boxes agree with the masks they describe.
        for k in 0..3 {
            let area: u64 = multi.mask(k).iter().map(|&v| v as u64).sum();
            assert_eq!(multi.areas[k], area);
        }
    }
}

#[test]
fn a_batch_of_prompts_equals_the_same_prompts_one_by_one() {
    let all = shapes();
    for (pair, _) in TINY {
        let (encoder, predictor) = open(pair);
        let embedding = encode_shapes(&encoder);
        let (left, right) = (shape(&all, "twin_left"), shape(&all, "twin_right"));
        let prompts = vec![
            click(all[0].click.0, all[0].click.1),
            keep_left_twin(left, right),
            Prompt {
                bbox: Some(all[2].bbox),
                ..Default::default()
            },
        ];
        let batch = predictor
            .predict(&embedding, &prompts, PredictOptions::default())
            .unwrap();
        assert_eq!(batch.objects, 3);
        for (i, p) in prompts.iter().enumerate() {
            let one = predictor
                .predict(
                    &embedding,
                    std::slice::from_ref(p),
                    PredictOptions::default(),
                )
                .unwrap();
            assert_eq!(batch.mask(i), one.mask(0), "{pair}: object {i}");
            assert!(
                (batch.scores[i] - one.scores[0]).abs() < 1e-5,
                "{pair}: object {i}"
            );
        }
    }
}

#[test]
fn refinement_with_the_previous_mask_follows_the_model() {
    let all = shapes();
    let (disc, rect) = (shape(&all, "red_disc"), shape(&all, "green_rect"));
    for (pair, _) in TINY {
        let (encoder, predictor) = open(pair);
        let embedding = encode_shapes(&encoder);
        let first = predictor
            .predict(
                &embedding,
                &[click(disc.click.0, disc.click.1)],
                PredictOptions::default(),
            )
            .unwrap();
        // Feeding the previous logits back keeps the same shape.
        let again = Prompt {
            mask_input: Some(first.low_res_logits(0).to_vec()),
            ..click(disc.click.0, disc.click.1)
        };
        let refined = predictor
            .predict(&embedding, &[again], PredictOptions::default())
            .unwrap();
        assert!(iou(refined.mask(0), &disc.mask) >= 0.9, "{pair}");
        // A strongly positive mask input over another shape adds that shape.
        let lr = first.low_res_size;
        let mut hint = first.low_res_logits(0).to_vec();
        let (w, h) = (512.0f32, 384.0f32);
        for y in 0..lr {
            for x in 0..lr {
                let px = ((x as f32 + 0.5) * w / lr as f32) as usize;
                let py = ((y as f32 + 0.5) * h / lr as f32) as usize;
                if rect.mask[py * 512 + px] != 0 {
                    hint[y * lr + x] = 40.0;
                }
            }
        }
        let with_hint = Prompt {
            mask_input: Some(hint),
            ..click(disc.click.0, disc.click.1)
        };
        let r = predictor
            .predict(&embedding, &[with_hint], PredictOptions::default())
            .unwrap();
        let both = union(&disc.mask, &rect.mask);
        let score = iou(r.mask(0), &both);
        assert!(
            score >= 0.85,
            "{pair}: refinement did not add the hinted shape: IoU {score:.3}"
        );
    }
}

#[test]
fn every_pixel_format_and_a_padded_stride_give_the_same_embedding() {
    let img = shapes_image();
    let (w, h) = (img.width, img.height);
    let (encoder, _) = open("tiny_a");
    let reference = encode_shapes(&encoder);
    let convert = |order: [usize; 3], alpha: bool, pad: usize| -> (Vec<u8>, usize) {
        let bpp = if alpha { 4 } else { 3 };
        let stride = w * bpp + pad;
        let mut out = vec![0xAAu8; stride * h];
        for y in 0..h {
            for x in 0..w {
                let src = &img.data[(y * w + x) * 3..][..3];
                let dst = &mut out[y * stride + x * bpp..][..bpp];
                for c in 0..3 {
                    dst[c] = src[order[c]];
                }
                if alpha {
                    dst[3] = 77;
                }
            }
        }
        (out, stride)
    };
    let cases = [
        (PixelFormat::Bgr, [2, 1, 0], false, 0),
        (PixelFormat::Rgba, [0, 1, 2], true, 0),
        (PixelFormat::Bgra, [2, 1, 0], true, 0),
        (PixelFormat::Rgb, [0, 1, 2], false, 13),
        (PixelFormat::Bgra, [2, 1, 0], true, 64),
    ];
    for (format, order, alpha, pad) in cases {
        let (data, stride) = convert(order, alpha, pad);
        let view = ImageView::new(&data, w, h, stride, format).unwrap();
        let e = encoder.encode(&view).unwrap();
        for (a, b) in e.tensors().iter().zip(reference.tensors()) {
            assert_eq!(
                a.host_bytes().unwrap(),
                b.host_bytes().unwrap(),
                "{format:?} pad {pad}"
            );
        }
    }
    // Gray: the same picture as RGB with equal channels.
    let gray: Vec<u8> = img.data.chunks(3).map(|p| p[1]).collect();
    let rgb_of_gray: Vec<u8> = gray.iter().flat_map(|&g| [g, g, g]).collect();
    let a = encoder
        .encode(&ImageView::packed(&gray, w, h, PixelFormat::Gray).unwrap())
        .unwrap();
    let b = encoder
        .encode(&ImageView::packed(&rgb_of_gray, w, h, PixelFormat::Rgb).unwrap())
        .unwrap();
    for (x, y) in a.tensors().iter().zip(b.tensors()) {
        assert_eq!(x.host_bytes().unwrap(), y.host_bytes().unwrap());
    }
}

#[test]
fn bad_prompts_are_refused_naming_the_argument() {
    let (encoder, predictor) = open("tiny_a");
    let embedding = encode_shapes(&encoder);
    let cases: Vec<(Prompt, &str)> = vec![
        (Prompt::default(), "prompt"),
        (click(600.0, 10.0), "points"),
        (click(-1.0, 10.0), "points"),
        (click(f32::NAN, 10.0), "points"),
        (click(10.0, f32::INFINITY), "points"),
        (
            Prompt {
                bbox: Some([100.0, 10.0, 50.0, 60.0]),
                ..Default::default()
            },
            "box",
        ),
        (
            Prompt {
                bbox: Some([10.0, 10.0, 50.0, f32::NAN]),
                ..Default::default()
            },
            "box",
        ),
        (
            Prompt {
                mask_input: Some(vec![0.0; 10]),
                ..click(10.0, 10.0)
            },
            "mask_input",
        ),
    ];
    for (prompt, name) in cases {
        match predictor.predict(
            &embedding,
            std::slice::from_ref(&prompt),
            PredictOptions::default(),
        ) {
            Err(sam2::Error::InvalidArgument { name: got, reason }) => {
                assert_eq!(got, name, "{prompt:?}: {reason}");
            }
            other => panic!("{prompt:?}: expected InvalidArgument({name}), got {other:?}"),
        }
    }
    assert!(matches!(
        predictor.predict(&embedding, &[], PredictOptions::default()),
        Err(sam2::Error::InvalidArgument {
            name: "prompts",
            ..
        })
    ));
}

#[test]
fn an_embedding_from_another_model_is_a_model_mismatch() {
    let (encoder_a, _) = open("tiny_a");
    let (_, predictor_b) = open("tiny_b");
    let (_, predictor_c) = open("tiny_c");
    let embedding = encode_shapes(&encoder_a);
    let prompt = [click(100.0, 100.0)];
    match predictor_b.predict(&embedding, &prompt, PredictOptions::default()) {
        Err(sam2::Error::ModelMismatch(msg)) => assert!(msg.contains("sam2fp1-"), "{msg}"),
        other => panic!("expected ModelMismatch, got {other:?}"),
    }
    assert!(matches!(
        predictor_c.predict(&embedding, &prompt, PredictOptions::default()),
        Err(sam2::Error::ModelMismatch(_))
    ));
    // A predictor that was not told its encoder still checks the layout, and accepts this one.
    let loose = Predictor::new(model("tiny_b_decoder.onnx"), &PredictorOptions::default()).unwrap();
    loose
        .predict(&embedding, &prompt, PredictOptions::default())
        .unwrap();
}

#[test]
fn an_unrecognised_model_lists_the_names_expected_and_found() {
    init_runtime();
    match Encoder::new(model("tiny_a_decoder.onnx"), &EncoderOptions::default()) {
        Err(sam2::Error::Model { reason, .. }) => {
            assert!(
                reason.contains("image_embed") && reason.contains("point_coords"),
                "{reason}"
            );
        }
        other => panic!("expected a Model error, got {other:?}"),
    }
    match Predictor::new(model("tiny_a_encoder.onnx"), &PredictorOptions::default()) {
        Err(sam2::Error::Model { reason, .. }) => {
            assert!(
                reason.contains("mask_input") && reason.contains("high_res_feats_0"),
                "{reason}"
            );
        }
        other => panic!("expected a Model error, got {other:?}"),
    }
    assert!(matches!(
        Encoder::new("/nonexistent/encoder.onnx", &EncoderOptions::default()),
        Err(sam2::Error::Model { .. })
    ));
}
