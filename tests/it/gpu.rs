//! The GPU path, run as is on a machine whose ONNX Runtime has the CUDA provider
//! (scripts/test-gpu.sh points SAM2_ONNXRUNTIME_PATH at such a build). On a CPU-only build every
//! test here says it is skipped and returns: nothing in it can be checked without a GPU.

use crate::common;

use std::sync::Arc;

use common::*;
use sam2::device::{DeviceOptions, MismatchPolicy, Provider, ProviderRequest};
use sam2::{
    embedding_file, Encoder, EncoderOptions, Error, ImageView, OutputTarget, PixelFormat,
    PredictOptions, Predictor, PredictorOptions,
};

fn cuda_available() -> bool {
    init_runtime();
    use ort::ep::ExecutionProvider;
    let available = ort::ep::CUDA::is_available().unwrap_or(false);
    if !available {
        eprintln!("skipped: this ONNX Runtime build has no CUDA execution provider");
    }
    available
}

fn cuda_options() -> DeviceOptions {
    DeviceOptions {
        providers: vec![ProviderRequest::cuda(0)],
        on_mismatch: MismatchPolicy::Fail,
    }
}

#[test]
fn a_cuda_embedding_stays_on_the_device_and_is_refused_for_saving() {
    if !cuda_available() {
        return;
    }
    let mut options = EncoderOptions::default();
    options.session.device = cuda_options();
    let encoder = Encoder::new(model("tiny_a_encoder.onnx"), &options).unwrap();
    assert_eq!(encoder.device().primary, Provider::Cuda);
    let img = read_pnm(&testdata("shapes.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let embedding = Arc::new(encoder.encode(&view).unwrap());
    assert_eq!(embedding.allocator_name(), "Cuda");
    assert!(!embedding.is_serializable());
    let dir = std::env::temp_dir().join(format!("sam2-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("e.sam2");
    assert!(matches!(
        embedding_file::save(&embedding, &path),
        Err(Error::EmbeddingNotSerializable { .. })
    ));
    assert!(!path.exists());

    // A CUDA predictor reads it in place and segments as the CPU does.
    let mut popts = PredictorOptions {
        encoder_fingerprint: Some(encoder.fingerprint()),
        ..Default::default()
    };
    popts.session.device = cuda_options();
    let predictor = Predictor::new(model("tiny_a_decoder.onnx"), &popts).unwrap();
    assert_eq!(predictor.device().primary, Provider::Cuda);
    let on_gpu = predictor
        .predict(&embedding, &shape_clicks(), PredictOptions::default())
        .unwrap();

    // The explicit copy to the host saves, loads, and predicts the same on the CPU.
    let host = embedding.to_host().unwrap();
    assert!(host.is_serializable());
    embedding_file::save(&host, &path).unwrap();
    let loaded = embedding_file::load(&path, Some(encoder.fingerprint())).unwrap();
    let cpu = Predictor::new(model("tiny_a_decoder.onnx"), &PredictorOptions::default()).unwrap();
    let on_cpu = cpu
        .predict(&loaded, &shape_clicks(), PredictOptions::default())
        .unwrap();
    for k in 0..on_cpu.objects {
        assert!(iou(on_cpu.mask(k), on_gpu.mask(k)) > 0.99);
    }
    // Loading straight onto the device.
    let placed = predictor
        .place_on_device(embedding_file::load(&path, None).unwrap())
        .unwrap();
    assert_eq!(placed.allocator_name(), "Cuda");
    predictor
        .predict(&placed, &shape_clicks(), PredictOptions::default())
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_host_output_target_gives_a_saveable_embedding_on_a_gpu_encoder() {
    if !cuda_available() {
        return;
    }
    let mut options = EncoderOptions {
        output_target: OutputTarget::Host,
        ..Default::default()
    };
    options.session.device = cuda_options();
    let encoder = Encoder::new(model("tiny_a_encoder.onnx"), &options).unwrap();
    let img = read_pnm(&testdata("shapes.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let embedding = encoder.encode(&view).unwrap();
    assert!(embedding.is_serializable());
}

#[test]
fn sessions_on_one_gpu_share_one_device_copy_of_the_weights() {
    if !cuda_available() {
        return;
    }
    let mut options = EncoderOptions::default();
    options.session.device = cuda_options();
    let a = Encoder::new(model("bench_a_encoder.onnx"), &options).unwrap();
    let b = Encoder::new(model("bench_a_encoder.onnx"), &options).unwrap();
    assert_eq!(a.weights_address(), b.weights_address());
}
