//! Device requests on a CPU-only ONNX Runtime: asking for a GPU is a genuine mismatch, resolved
//! by the FALLBACK or FAIL policy; cross-device embeddings are refused before ONNX Runtime.

use crate::common;

use std::sync::{Arc, Mutex};

use common::*;
use sam2::device::{DeviceOptions, MismatchPolicy, Provider, ProviderRequest};
use sam2::log::{self, LogLevel};
use sam2::{
    Embedding, Encoder, EncoderOptions, Error, ImageView, PixelFormat, Point, PredictOptions,
    Predictor, PredictorOptions, Prompt,
};

fn capture() -> Arc<Mutex<Vec<(LogLevel, String)>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    log::set_sink(
        Some(Arc::new(move |level, msg: &str| {
            sink.lock().unwrap().push((level, msg.to_string()))
        })),
        LogLevel::Warning,
    );
    seen
}

fn gpu_request(provider: Provider, policy: MismatchPolicy) -> DeviceOptions {
    DeviceOptions {
        providers: vec![ProviderRequest {
            provider,
            device_id: 0,
            memory_limit: Some(2 << 30),
            arena: Default::default(),
        }],
        on_mismatch: policy,
    }
}

fn encoder_with(device: DeviceOptions) -> Result<Encoder, Error> {
    let mut options = EncoderOptions::default();
    options.session.device = device;
    Encoder::new(model("tiny_a_encoder.onnx"), &options)
}

#[test]
fn asking_for_cuda_falls_back_to_cpu_with_one_warning_and_still_segments() {
    let _turn = log_turn();
    init_runtime();
    let seen = capture();
    let encoder = encoder_with(gpu_request(Provider::Cuda, MismatchPolicy::Fallback)).unwrap();
    let warnings: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(l, _)| *l == LogLevel::Warning)
        .map(|(_, m)| m.clone())
        .collect();
    log::set_sink(None, LogLevel::Warning);
    let ours: Vec<&String> = warnings
        .iter()
        .filter(|m| m.contains("requested"))
        .collect();
    assert_eq!(ours.len(), 1, "exactly one fallback warning: {warnings:?}");
    let w = ours[0];
    for needle in [
        "CUDAExecutionProvider (device 0)",
        "CPUExecutionProvider",
        "tiny_a_encoder.onnx",
        "CPU-only",
        "FALLBACK",
    ] {
        assert!(w.contains(needle), "warning lacks `{needle}`: {w}");
    }
    let device = encoder.device();
    assert_eq!(device.primary, Provider::Cpu);
    assert!(device.fell_back);
    assert_eq!(device.provider_names(), "CPUExecutionProvider");

    // The Device output target moved to the host: the embedding is a host embedding.
    let img = read_pnm(&testdata("shapes.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let embedding = encoder.encode(&view).unwrap();
    assert_eq!(embedding.allocator_name(), "Cpu");
    assert!(embedding.is_serializable());

    let mut options = PredictorOptions {
        encoder_fingerprint: Some(encoder.fingerprint()),
        ..Default::default()
    };
    options.session.device = gpu_request(Provider::Cuda, MismatchPolicy::Fallback);
    let predictor = Predictor::new(model("tiny_a_decoder.onnx"), &options).unwrap();
    assert_eq!(predictor.device().primary, Provider::Cpu);
    let all = shapes();
    for s in &all {
        let prompt = Prompt {
            points: vec![Point {
                x: s.click.0,
                y: s.click.1,
                positive: true,
            }],
            ..Default::default()
        };
        let r = predictor
            .predict(&embedding, &[prompt], PredictOptions::default())
            .unwrap();
        assert!(
            iou(r.mask(0), &expected_click_mask(s, &all)) >= 0.9,
            "{}",
            s.name
        );
    }
}

#[test]
fn fail_mode_refuses_with_a_message_naming_request_result_and_cause() {
    let _turn = log_turn();
    init_runtime();
    for provider in [Provider::Cuda, Provider::TensorRt, Provider::DirectMl] {
        match encoder_with(gpu_request(provider, MismatchPolicy::Fail)) {
            Err(Error::EnvironmentConfiguration(msg)) => {
                assert!(msg.contains(provider.ort_name()), "{msg}");
                assert!(msg.contains("runs on CPUExecutionProvider"), "{msg}");
                assert!(msg.contains("Likely cause"), "{msg}");
            }
            other => panic!(
                "{provider:?}: expected EnvironmentConfiguration, got {:?}",
                other.map(|_| ())
            ),
        }
    }
    // A GPU later in the list than the CPU is not a mismatch: the CPU was asked for first.
    let device = DeviceOptions {
        providers: vec![ProviderRequest::cpu(), ProviderRequest::cuda(0)],
        on_mismatch: MismatchPolicy::Fail,
    };
    let encoder = encoder_with(device).unwrap();
    assert_eq!(encoder.device().primary, Provider::Cpu);
    assert!(!encoder.device().fell_back);
    // Plain CPU, the default.
    let encoder = encoder_with(DeviceOptions::default()).unwrap();
    assert_eq!(encoder.device().provider_names(), "CPUExecutionProvider");
}

#[test]
fn an_embedding_on_another_device_is_refused_before_onnx_runtime_sees_it() {
    let _turn = log_turn();
    init_runtime();
    let encoder = encoder_with(DeviceOptions::default()).unwrap();
    let img = read_pnm(&testdata("shapes.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let host = Arc::new(encoder.encode(&view).unwrap());
    let cuda = Embedding::simulate_device(&host, "Cuda", 0).unwrap();
    let prompt = [Prompt {
        points: vec![Point {
            x: 100.0,
            y: 112.0,
            positive: true,
        }],
        ..Default::default()
    }];
    let predictor =
        Predictor::new(model("tiny_a_decoder.onnx"), &PredictorOptions::default()).unwrap();
    match predictor.predict(&cuda, &prompt, PredictOptions::default()) {
        Err(Error::InvalidArgument {
            name: "embedding",
            reason,
        }) => {
            for needle in [
                "`Cuda` memory (device 0)",
                "CPUExecutionProvider",
                "sam2_embedding_to_host",
            ] {
                assert!(reason.contains(needle), "lacks `{needle}`: {reason}");
            }
        }
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    }
    // With copies allowed the predictor asks for a device→host copy, which this CPU-only runtime
    // cannot make for a (simulated) CUDA tensor: a clear environment error, never a host read.
    let copying = Predictor::new(
        model("tiny_a_decoder.onnx"),
        &PredictorOptions {
            allow_embedding_copy: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(matches!(
        copying.predict(&cuda, &prompt, PredictOptions::default()),
        Err(Error::EnvironmentConfiguration(_))
    ));
    // The host embedding it stands for predicts fine on both.
    predictor
        .predict(&host, &prompt, PredictOptions::default())
        .unwrap();
    copying
        .predict(&host, &prompt, PredictOptions::default())
        .unwrap();
}

/// A predictor made for an encoder takes its fingerprint and, with no providers asked for, its
/// device: here the CPU's, where a CPU encoder's embeddings live. A fingerprint that contradicts
/// the encoder is refused, naming the option.
#[test]
fn a_predictor_for_an_encoder_takes_its_fingerprint_and_its_device() {
    init_runtime();
    let encoder = Encoder::new(model("tiny_a_encoder.onnx"), &EncoderOptions::default()).unwrap();
    let predictor = Predictor::for_encoder(
        model("tiny_a_decoder.onnx"),
        &encoder,
        &PredictorOptions::default(),
    )
    .unwrap();
    assert_eq!(predictor.device().primary, Provider::Cpu);
    let img = read_pnm(&testdata("shapes.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let embedding = encoder.encode(&view).unwrap();
    let prompt = Prompt {
        points: vec![Point {
            x: 10.0,
            y: 10.0,
            positive: true,
        }],
        ..Default::default()
    };
    predictor
        .predict(&embedding, &[prompt], PredictOptions::default())
        .unwrap();
    let other = Encoder::new(model("tiny_b_encoder.onnx"), &EncoderOptions::default()).unwrap();
    let e = Predictor::for_encoder(
        model("tiny_a_decoder.onnx"),
        &encoder,
        &PredictorOptions {
            encoder_fingerprint: Some(other.fingerprint()),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::InvalidArgument {
                name: "encoder_fingerprint",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("contradicts"), "{e}");
}
