//! The device path on a real device: ONNX Runtime's WebGPU provider (tools/setup/setup-webgpu.sh:
//! Mesa's llvmpipe Vulkan driver and an ONNX Runtime build with WebGPU, `SAM2_WEBGPU_ONNXRUNTIME`).
//! Tensors left on it live in WebGPU buffers the host cannot read through a pointer, so the
//! residency rules, the refusal to save, reading embeddings in place and weights placed once on
//! the device are checked for real here, not on host memory under a device label.
//!
//! Without the rig every test prints "skipped: no WebGPU device" and returns, unless
//! `SAM2_WEBGPU_REQUIRED=1` (scripts/test.sh sets it where the rig was set up), where that fails.
//!
//! `SAM2_DEVICE_PROVIDER=cuda` runs the same suite on CUDA instead (scripts/test-gpu.sh, with
//! `SAM2_WEBGPU_ONNXRUNTIME` naming a CUDA build of ONNX Runtime); the driver-less check is
//! Vulkan's and is skipped there.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use common::memory::rss;
use common::*;
use sam2::cache::{CacheOptions, EmbeddingCache};
use sam2::device::{copy_stats, DeviceOptions, MismatchPolicy, Provider, ProviderRequest};
use sam2::everything::{segment_everything, segment_everything_embedding, EverythingOptions};
use sam2::log::{self, LogLevel};
use sam2::video::{Direction, Tracker, TrackerOptions, VideoModelPaths};
use sam2::{
    embedding_file, Embedding, Encoder, EncoderOptions, Error, ImageView, PixelFormat,
    PredictOptions, Predictor, PredictorOptions, Prompt,
};

/// Copy counters and the log sink are process-wide: the tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

/// The WebGPU build of ONNX Runtime, loaded once for this process (it then serves the CPU
/// sessions these tests compare against too), or `None` when the rig is not set up.
fn rig() -> Option<&'static Path> {
    static LIB: OnceLock<Option<PathBuf>> = OnceLock::new();
    let lib = LIB
        .get_or_init(|| {
            let lib = std::env::var_os("SAM2_WEBGPU_ONNXRUNTIME").map(PathBuf::from);
            if let Some(lib) = &lib {
                sam2::runtime::init(Some(lib)).expect("the WebGPU build of ONNX Runtime loads");
            }
            lib
        })
        .as_deref();
    if lib.is_none() {
        assert!(
            std::env::var_os("SAM2_WEBGPU_REQUIRED").map_or(true, |v| v != "1"),
            "SAM2_WEBGPU_REQUIRED=1 but SAM2_WEBGPU_ONNXRUNTIME is not set: the WebGPU rig \
             (tools/setup/setup-webgpu.sh) should have been set up"
        );
        eprintln!("skipped: no WebGPU device (run tools/setup/setup-webgpu.sh)");
    }
    lib
}

/// The device under test: WebGPU, or CUDA when `SAM2_DEVICE_PROVIDER=cuda`.
fn device_provider() -> Provider {
    match std::env::var("SAM2_DEVICE_PROVIDER").as_deref() {
        Ok("cuda") => Provider::Cuda,
        _ => Provider::WebGpu,
    }
}

fn webgpu(policy: MismatchPolicy) -> DeviceOptions {
    DeviceOptions {
        providers: vec![ProviderRequest {
            provider: device_provider(),
            ..ProviderRequest::cpu()
        }],
        on_mismatch: policy,
    }
}

fn encoder_on(path: &Path, device: DeviceOptions) -> Result<Encoder, Error> {
    let mut options = EncoderOptions::default();
    options.session.device = device;
    Encoder::new(path, &options)
}

fn predictor_on(path: &Path, encoder: &Encoder, device: DeviceOptions) -> Predictor {
    let mut options = PredictorOptions {
        encoder_fingerprint: Some(encoder.fingerprint()),
        ..Default::default()
    };
    options.session.device = device;
    Predictor::new(path, &options).unwrap()
}

fn shapes_view(img: &Image) -> ImageView<'_> {
    ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sam2-webgpu-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Masks of `a` and `b` agree mask by mask (IoU ≥ 0.99) and score by score.
fn assert_same(a: &sam2::Prediction, b: &sam2::Prediction, what: &str) {
    assert_eq!(a.objects * a.candidates, b.objects * b.candidates, "{what}");
    for k in 0..a.objects * a.candidates {
        let i = iou(a.mask(k), b.mask(k));
        assert!(i >= 0.99, "{what}: mask {k} IoU {i:.4} against the CPU's");
        assert!(
            (a.scores[k] - b.scores[k]).abs() < 1e-3,
            "{what}: mask {k} score {} against the CPU's {}",
            a.scores[k],
            b.scores[k]
        );
    }
}

#[test]
fn a_webgpu_embedding_stays_on_the_device_and_saving_it_is_refused() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let encoder = encoder_on(&model("tiny_a_encoder.onnx"), webgpu(MismatchPolicy::Fail)).unwrap();
    assert_eq!(encoder.device().primary, device_provider());
    assert!(!encoder.device().fell_back);
    let img = read_pnm(&testdata("shapes.ppm"));
    let embedding = Arc::new(encoder.encode(&shapes_view(&img)).unwrap());
    assert!(!embedding.is_serializable());
    // The name is ONNX Runtime's, read from the tensors: the same on every tensor, not the host's.
    let name = embedding.tensors()[0].location().allocator.clone();
    assert_ne!(name, "Cpu");
    assert_eq!(
        name,
        encoder.device().allocator_name(),
        "the session's device memory"
    );
    assert_eq!(embedding.allocator_name(), name);
    for t in embedding.tensors() {
        assert_eq!(t.location().allocator, name);
        assert!(!t.location().cpu_accessible);
        assert!(matches!(
            t.host_bytes(),
            Err(Error::EmbeddingNotSerializable { .. })
        ));
    }

    let dir = scratch("save");
    let path = dir.join("device.sam2");
    match embedding_file::save(&embedding, &path) {
        Err(Error::EmbeddingNotSerializable { allocator }) => assert_eq!(allocator, name),
        other => panic!(
            "expected EmbeddingNotSerializable, got {:?}",
            other.map(|_| ())
        ),
    }
    assert!(!path.exists(), "a refused save must write nothing");

    // The explicit copy to the host saves and loads; the device embedding is still usable.
    let host = embedding.to_host().unwrap();
    assert!(host.is_serializable());
    assert_eq!(host.allocator_name(), "Cpu");
    embedding_file::save(&host, &path).unwrap();
    let loaded = embedding_file::load(&path, Some(encoder.fingerprint())).unwrap();
    let cpu_encoder = encoder_on(&model("tiny_a_encoder.onnx"), DeviceOptions::default()).unwrap();
    let cpu_predictor = predictor_on(
        &model("tiny_a_decoder.onnx"),
        &cpu_encoder,
        DeviceOptions::default(),
    );
    let from_file = cpu_predictor
        .predict(&loaded, &shape_clicks(), PredictOptions::default())
        .unwrap();
    let on_cpu = cpu_predictor
        .predict(
            &cpu_encoder.encode(&shapes_view(&img)).unwrap(),
            &shape_clicks(),
            PredictOptions::default(),
        )
        .unwrap();
    assert_same(&from_file, &on_cpu, "device embedding copied to the host");
    let device_predictor = predictor_on(
        &model("tiny_a_decoder.onnx"),
        &encoder,
        webgpu(MismatchPolicy::Fail),
    );
    device_predictor
        .predict(&embedding, &shape_clicks(), PredictOptions::default())
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn predictors_read_the_device_embedding_in_place_and_segment_as_the_cpu_does() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let img = read_pnm(&testdata("shapes.ppm"));
    let all = shapes();
    for pair in ["tiny_a", "tiny_b", "tiny_c"] {
        let encoder_path = model(&format!("{pair}_encoder.onnx"));
        let decoder_path = model(&format!("{pair}_decoder.onnx"));
        let encoder = encoder_on(&encoder_path, webgpu(MismatchPolicy::Fail)).unwrap();
        let predictor = predictor_on(&decoder_path, &encoder, webgpu(MismatchPolicy::Fail));
        assert_eq!(predictor.device().primary, device_provider());
        let cpu_encoder = encoder_on(&encoder_path, DeviceOptions::default()).unwrap();
        let cpu = predictor_on(&decoder_path, &cpu_encoder, DeviceOptions::default());

        let embedding = encoder.encode(&shapes_view(&img)).unwrap();
        assert!(!embedding.is_serializable(), "{pair}");
        let host = cpu_encoder.encode(&shapes_view(&img)).unwrap();

        // A click per shape as one batch, then with every candidate, then refined by mask input.
        let clicks = shape_clicks();
        let before = copy_stats();
        let batch = predictor
            .predict(&embedding, &clicks, PredictOptions::default())
            .unwrap();
        let multi = predictor
            .predict(&embedding, &clicks[..2], PredictOptions { multimask: true })
            .unwrap();
        let refined_prompt = Prompt {
            mask_input: Some(batch.low_res_logits(0).to_vec()),
            ..clicks[0].clone()
        };
        let refined = predictor
            .predict(
                &embedding,
                std::slice::from_ref(&refined_prompt),
                PredictOptions::default(),
            )
            .unwrap();
        let after = copy_stats();
        assert_eq!(
            after, before,
            "{pair}: predicting from a device embedding must copy nothing between memories"
        );

        assert_same(
            &batch,
            &cpu.predict(&host, &clicks, PredictOptions::default())
                .unwrap(),
            &format!("{pair} batch"),
        );
        assert_same(
            &multi,
            &cpu.predict(&host, &clicks[..2], PredictOptions { multimask: true })
                .unwrap(),
            &format!("{pair} multimask"),
        );
        assert_same(
            &refined,
            &cpu.predict(
                &host,
                std::slice::from_ref(&refined_prompt),
                PredictOptions::default(),
            )
            .unwrap(),
            &format!("{pair} mask input"),
        );
        // And the masks mean something: each click gives its shape.
        for (k, s) in all.iter().enumerate() {
            let i = iou(batch.mask(k), &expected_click_mask(s, &all));
            assert!(
                i >= 0.9,
                "{pair} {}: IoU {i:.3} with the ground truth",
                s.name
            );
        }
    }
}

/// A predictor made for a device encoder with the default options runs on that device and reads
/// its embeddings in place (the README's example, on a GPU, unchanged); one that asks for the CPU
/// gets the CPU, and the device embedding is refused there with where each lives. An encoder that
/// writes its embeddings to the host gets a CPU predictor by default.
#[test]
fn a_predictor_follows_its_encoders_device_by_default() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let img = read_pnm(&testdata("shapes.ppm"));
    let decoder = model("tiny_a_decoder.onnx");
    let encoder = encoder_on(&model("tiny_a_encoder.onnx"), webgpu(MismatchPolicy::Fail)).unwrap();
    let embedding = encoder.encode(&shapes_view(&img)).unwrap();
    let predictor =
        Predictor::for_encoder(&decoder, &encoder, &PredictorOptions::default()).unwrap();
    assert_eq!(predictor.device().primary, device_provider());
    assert_eq!(
        predictor.device().allocator_name(),
        embedding.allocator_name()
    );
    let before = copy_stats();
    let clicks = shape_clicks();
    let masks = predictor
        .predict(&embedding, &clicks, PredictOptions::default())
        .unwrap();
    assert_eq!(copy_stats(), before, "read in place, nothing copied");
    let all = shapes();
    for (k, s) in all.iter().enumerate() {
        let i = iou(masks.mask(k), &expected_click_mask(s, &all));
        assert!(i >= 0.9, "{}: IoU {i:.3} with the ground truth", s.name);
    }

    // Asking for the CPU is honoured, and the device embedding is refused there, naming both.
    let mut on_cpu = PredictorOptions::default();
    on_cpu.session.device.providers = vec![ProviderRequest::cpu()];
    let cpu = Predictor::for_encoder(&decoder, &encoder, &on_cpu).unwrap();
    assert_eq!(cpu.device().primary, Provider::Cpu);
    let e = cpu
        .predict(&embedding, &clicks, PredictOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(embedding.allocator_name()) && e.contains("CPUExecutionProvider"),
        "{e}"
    );

    // Embeddings written to the host: the predictor stays on the CPU and reads them in place.
    let mut host_output = EncoderOptions::default();
    host_output.session.device = webgpu(MismatchPolicy::Fail);
    host_output.output_target = sam2::OutputTarget::Host;
    let host_encoder = Encoder::new(model("tiny_a_encoder.onnx"), &host_output).unwrap();
    let host_predictor =
        Predictor::for_encoder(&decoder, &host_encoder, &PredictorOptions::default()).unwrap();
    assert_eq!(host_predictor.device().primary, Provider::Cpu);
    let host_embedding = host_encoder.encode(&shapes_view(&img)).unwrap();
    let before = copy_stats();
    let host_masks = host_predictor
        .predict(&host_embedding, &clicks, PredictOptions::default())
        .unwrap();
    assert_eq!(copy_stats(), before);
    assert_same(&masks, &host_masks, "host embeddings on the CPU");
}

#[test]
fn a_saved_embedding_loads_straight_onto_the_device() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let cpu_encoder = encoder_on(&model("tiny_a_encoder.onnx"), DeviceOptions::default()).unwrap();
    let img = read_pnm(&testdata("shapes.ppm"));
    let host = cpu_encoder.encode(&shapes_view(&img)).unwrap();
    let dir = scratch("place");
    let path = dir.join("host.sam2");
    embedding_file::save(&host, &path).unwrap();
    let predictor = predictor_on(
        &model("tiny_a_decoder.onnx"),
        &cpu_encoder,
        webgpu(MismatchPolicy::Fail),
    );
    let before = copy_stats();
    let placed = predictor
        .place_on_device(embedding_file::load(&path, None).unwrap())
        .unwrap();
    assert_eq!(
        copy_stats().copies - before.copies,
        3,
        "one copy per tensor"
    );
    assert!(!placed.is_serializable());
    let on_device = predictor
        .predict(&placed, &shape_clicks(), PredictOptions::default())
        .unwrap();
    let on_host = predictor
        .predict(&host, &shape_clicks(), PredictOptions::default())
        .unwrap();
    assert_same(&on_device, &on_host, "placed embedding");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One copy of the weights on the device for every session of a model: llvmpipe's device memory
/// is this process's memory, so resident memory per extra session measures device copies.
#[test]
fn encoder_sessions_on_the_device_share_one_copy_of_the_weights() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let path = model("bench_a_encoder.onnx");
    const N: usize = 4;
    let measure = |device: DeviceOptions| -> (usize, f64, Vec<Encoder>) {
        let first = encoder_on(&path, device.clone()).unwrap();
        let one = rss();
        let mut all = vec![first];
        for _ in 1..N {
            all.push(encoder_on(&path, device.clone()).unwrap());
        }
        let per_extra = (rss().saturating_sub(one)) as f64 / (N - 1) as f64;
        (all[0].weight_bytes(), per_extra, all)
    };
    let (weights, device_extra, device_sessions) = measure(webgpu(MismatchPolicy::Fail));
    let address = device_sessions[0].weights_address();
    assert!(device_sessions
        .iter()
        .all(|e| e.weights_address() == address && e.device().primary == device_provider()));
    drop(device_sessions);
    let (_, cpu_extra, cpu_sessions) = measure(DeviceOptions::default());
    drop(cpu_sessions);
    let mib = |b: f64| b / (1024.0 * 1024.0);
    let line = format!(
        "bench_a encoder, {N} sessions, {:.1} MiB of weights: resident memory per extra session \
         {:.1} MiB on WebGPU (llvmpipe), {:.1} MiB on the CPU",
        mib(weights as f64),
        mib(device_extra),
        mib(cpu_extra)
    );
    eprintln!("{line}");
    if let Some(dir) = std::env::var_os("SAM2_REPORT_DIR") {
        std::fs::write(PathBuf::from(dir).join("webgpu_weights.txt"), &line).unwrap();
    }
    assert!(
        device_extra < 0.25 * weights as f64,
        "each extra WebGPU session added {:.1} MiB for {:.1} MiB of weights: the weights were \
         copied per session",
        mib(device_extra),
        mib(weights as f64)
    );
}

/// The real SAM2.1 tiny decoder (samexporter's export) on the device, from a host embedding of
/// the real encoder placed there: the real graph, not only the generated ones.
#[test]
fn the_real_sam2_decoder_runs_on_the_device_as_on_the_cpu() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    // Unset, $SAM2_REAL_MODELS fails in real_pair.
    let (encoder_path, decoder_path) = real_pair("samexporter");
    let encoder = encoder_on(&encoder_path, DeviceOptions::default()).unwrap();
    let img = read_pnm(&testdata("shapes.ppm"));
    let host = encoder.encode(&shapes_view(&img)).unwrap();
    let cpu = predictor_on(&decoder_path, &encoder, DeviceOptions::default());
    let device = predictor_on(&decoder_path, &encoder, webgpu(MismatchPolicy::Fail));
    let placed = device
        .place_on_device(host.copy_to_host().unwrap())
        .unwrap();
    assert!(!placed.is_serializable());
    let clicks = &shape_clicks()[..2];
    let before = copy_stats();
    let on_device = device
        .predict(&placed, clicks, PredictOptions { multimask: true })
        .unwrap();
    assert_eq!(copy_stats(), before, "the click copied the embedding");
    let on_cpu = cpu
        .predict(&host, clicks, PredictOptions { multimask: true })
        .unwrap();
    assert_same(&on_device, &on_cpu, "real SAM2.1 tiny decoder");
}

/// A device embedding outlives the encoder that made it, as in C, where `sam2_encoder_free` may
/// come first: it is still clicked on, copied to the host and released after the encoder is gone.
/// Before device embeddings held the session that allocated them, releasing one after its encoder
/// had closed and a predictor had opened on the device crashed the process (ONNX Runtime 1.30's
/// WebGPU provider; `sam2 segment --device webgpu` ended on SIGSEGV after writing its masks).
#[test]
fn a_device_embedding_outlives_its_encoder() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let (encoder_path, decoder_path) = (model("tiny_a_encoder.onnx"), model("tiny_a_decoder.onnx"));
    let img = read_pnm(&testdata("shapes.ppm"));
    let encoder = encoder_on(&encoder_path, webgpu(MismatchPolicy::Fail)).unwrap();
    let fingerprint = encoder.fingerprint();
    let clicked = encoder.encode(&shapes_view(&img)).unwrap();
    let kept = encoder.encode(&shapes_view(&img)).unwrap();
    drop(encoder);
    // The predictor made after the encoder closed, as `sam2 segment` makes it.
    let mut options = PredictorOptions {
        encoder_fingerprint: Some(fingerprint),
        ..PredictorOptions::default()
    };
    options.session.device = webgpu(MismatchPolicy::Fail);
    let device = Predictor::new(&decoder_path, &options).unwrap();
    assert!(!clicked.is_serializable() && !kept.is_serializable());
    let clicks = shape_clicks();
    let on_device = device
        .predict(&clicked, &clicks, PredictOptions::default())
        .unwrap();
    // Released with no session of the library open on the device (as `sam2 segment` did).
    drop(device);
    drop(clicked);
    let back = kept.copy_to_host().unwrap();
    drop(kept);
    let cpu_encoder = encoder_on(&encoder_path, DeviceOptions::default()).unwrap();
    let host = cpu_encoder.encode(&shapes_view(&img)).unwrap();
    let cpu = predictor_on(&decoder_path, &cpu_encoder, DeviceOptions::default());
    let on_cpu = cpu
        .predict(&host, &clicks, PredictOptions::default())
        .unwrap();
    assert_same(&on_device, &on_cpu, "clicks after the encoder closed");
    let again = cpu
        .predict(&back, &clicks, PredictOptions::default())
        .unwrap();
    assert_same(
        &again,
        &on_cpu,
        "the host copy made after the encoder closed",
    );
}

/// The fp16 variant (sam2-variant, for GPUs) runs on the device, its embedding
/// left there, and segments the shapes as the float32 original does on the CPU.
#[test]
fn the_fp16_variant_runs_on_the_device() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let dir = models_dir().join("variants").join("tiny_a_fp16");
    let encoder = encoder_on(
        &dir.join("tiny_a_encoder.onnx"),
        webgpu(MismatchPolicy::Fail),
    )
    .unwrap();
    assert_eq!(encoder.variant().precision, sam2::models::Precision::Fp16);
    let img = read_pnm(&testdata("shapes.ppm"));
    let resident = encoder.encode(&shapes_view(&img)).unwrap();
    assert!(!resident.is_serializable(), "the embedding left the device");
    assert_eq!(resident.precision(), sam2::models::Precision::Fp16);
    let device = predictor_on(
        &dir.join("tiny_a_decoder.onnx"),
        &encoder,
        webgpu(MismatchPolicy::Fail),
    );
    let clicks = shape_clicks();
    let on_device = device
        .predict(&resident, &clicks, PredictOptions::default())
        .unwrap();
    let (cpu_encoder, cpu) = open_pair("tiny_a");
    let on_cpu = cpu
        .predict(
            &encode_shapes(&cpu_encoder),
            &clicks,
            PredictOptions::default(),
        )
        .unwrap();
    assert_same(
        &on_device,
        &on_cpu,
        "fp16 variant on the device, fp32 on the CPU",
    );
}

/// The real SAM2.1 tiny encoder's fp16 variant (samexporter's export through
/// sam2-variant, for GPUs) runs on the device in float16, its global attention
/// fused in float16, and gives the float32 encoder's embedding on the CPU (correlation ≥ 0.999 on
/// each tensor) and, with the real decoder on the device reading that embedding in place, the
/// CPU's masks. The float32 encoder on the device is held to the CPU by the tracker test below,
/// whose image encoder is the same Hiera (each of its encodes takes about a minute on llvmpipe).
#[test]
fn the_real_sam2_encoders_fp16_variant_runs_on_the_device_as_the_float32_one_on_the_cpu() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let (encoder_path, decoder_path) = real_pair("samexporter");
    let start = std::time::Instant::now();
    let cpu_encoder = encoder_on(&encoder_path, DeviceOptions::default()).unwrap();
    let img = read_pnm(&testdata("demo.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let host = cpu_encoder.encode(&view).unwrap();
    let floats = |t: &sam2::embedding::EmbeddingTensor| le_floats(t.host_bytes().unwrap());
    let cpu = predictor_on(&decoder_path, &cpu_encoder, DeviceOptions::default());
    let clicks = [click(300.0, 200.0), click(520.0, 380.0)];
    let on_cpu = cpu
        .predict(&host, &clicks, PredictOptions { multimask: true })
        .unwrap();

    let variants = std::env::var_os("SAM2_REAL_VARIANTS")
        .map(PathBuf::from)
        .expect("SAM2_REAL_VARIANTS is not set: run tools/setup/setup-real.sh");
    let half_path = variants
        .join("samexporter-fp16")
        .join(encoder_path.file_name().unwrap());
    let half_encoder = encoder_on(&half_path, webgpu(MismatchPolicy::Fail)).unwrap();
    assert_eq!(
        half_encoder.variant().precision,
        sam2::models::Precision::Fp16
    );
    assert_eq!(
        half_encoder.attention_fusion().fused_count(),
        3,
        "the fp16 variant's global attention fused on the device: {}",
        half_encoder.attention_fusion()
    );
    let half = half_encoder.encode(&view).unwrap();
    assert!(
        !half.is_serializable(),
        "the fp16 embedding left the device"
    );
    let back = half.copy_to_host().unwrap();
    for (i, (d, c)) in back.tensors().iter().zip(host.tensors()).enumerate() {
        let r = correlation(&floats(d), &floats(c));
        println!("fp16 variant on the device, embedding tensor {i}: correlation {r:.7} with the CPU's float32");
        assert!(
            r >= 0.999,
            "fp16 embedding tensor {i}: correlation {r:.6} with the CPU's float32"
        );
    }
    let half_device = predictor_on(&decoder_path, &half_encoder, webgpu(MismatchPolicy::Fail));
    let on_device = half_device
        .predict(&half, &clicks, PredictOptions { multimask: true })
        .unwrap();
    assert_same(&on_device, &on_cpu, "real SAM2.1 tiny fp16 variant");
    println!(
        "real SAM2.1 tiny encoder's fp16 variant on the device: {:.1} s with its shaders compiled",
        start.elapsed().as_secs_f64()
    );
}

/// A WebGPU request where no Vulkan driver can be found: under FAIL a clear error naming the
/// cause, under FALLBACK one warning and a host embedding. The driver list is read once per
/// process, so this runs in a child process of this test binary with `VK_ICD_FILENAMES` naming
/// no driver.
#[test]
fn without_a_vulkan_driver_webgpu_fails_or_falls_back_by_policy() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if std::env::var_os("SAM2_WEBGPU_CHILD").is_some() {
        return no_driver_child();
    }
    if rig().is_none() {
        return;
    }
    if device_provider() != Provider::WebGpu {
        eprintln!("skipped: the driver-less check is WebGPU's (Vulkan)");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "without_a_vulkan_driver_webgpu_fails_or_falls_back_by_policy",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SAM2_WEBGPU_CHILD", "1")
        .env("VK_ICD_FILENAMES", "/nonexistent/no_driver_icd.json")
        .env_remove("VK_DRIVER_FILES")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the child failed:\n{text}");
    assert!(text.contains("no-driver checks passed"), "{text}");
}

fn no_driver_child() {
    let lib = std::env::var_os("SAM2_WEBGPU_ONNXRUNTIME").expect("set by the parent");
    sam2::runtime::init(Some(Path::new(&lib))).unwrap();
    match encoder_on(&model("tiny_a_encoder.onnx"), webgpu(MismatchPolicy::Fail)) {
        Err(Error::EnvironmentConfiguration(msg)) => {
            for needle in [
                "WebGpuExecutionProvider",
                "CPUExecutionProvider",
                "Likely cause",
            ] {
                assert!(msg.contains(needle), "FAIL message lacks `{needle}`: {msg}");
            }
            println!("FAIL: {msg}");
        }
        other => panic!(
            "expected EnvironmentConfiguration, got {:?}",
            other.map(|e| e.device().clone())
        ),
    }
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&seen);
    log::set_sink(
        Some(Arc::new(move |level, msg: &str| {
            if level == LogLevel::Warning && msg.contains("requested") {
                sink.lock().unwrap().push(msg.to_string());
            }
        })),
        LogLevel::Warning,
    );
    let encoder = encoder_on(
        &model("tiny_a_encoder.onnx"),
        webgpu(MismatchPolicy::Fallback),
    )
    .unwrap();
    log::set_sink(None, LogLevel::Warning);
    let warnings = seen.lock().unwrap().clone();
    assert_eq!(
        warnings.len(),
        1,
        "exactly one fallback warning: {warnings:?}"
    );
    assert!(
        warnings[0].contains("WebGpuExecutionProvider"),
        "{warnings:?}"
    );
    assert_eq!(encoder.device().primary, Provider::Cpu);
    assert!(encoder.device().fell_back);
    let img = read_pnm(&testdata("shapes.ppm"));
    let embedding: Embedding = encoder.encode(&shapes_view(&img)).unwrap();
    assert!(embedding.is_serializable());
    assert_eq!(embedding.allocator_name(), "Cpu");
    println!("FALLBACK: {}", warnings[0]);
    println!("no-driver checks passed");
}

/// Segment everything on the device: the image's embedding stays there, and the grid of clicks
/// gives the masks the CPU gives, one for one.
#[test]
fn segment_everything_runs_on_the_device_as_on_the_cpu() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let img = read_pnm(&testdata("shapes.ppm"));
    let options = EverythingOptions {
        points_per_side: 16,
        ..Default::default()
    };
    let encoder = encoder_on(&model("tiny_a_encoder.onnx"), webgpu(MismatchPolicy::Fail)).unwrap();
    let predictor = predictor_on(
        &model("tiny_a_decoder.onnx"),
        &encoder,
        webgpu(MismatchPolicy::Fail),
    );
    let cpu_encoder = encoder_on(&model("tiny_a_encoder.onnx"), DeviceOptions::default()).unwrap();
    let cpu = predictor_on(
        &model("tiny_a_decoder.onnx"),
        &cpu_encoder,
        DeviceOptions::default(),
    );
    let embedding = encoder.encode(&shapes_view(&img)).unwrap();
    assert!(!embedding.is_serializable());
    let before = copy_stats();
    let on_device = segment_everything_embedding(&embedding, &predictor, &options).unwrap();
    assert_eq!(
        copy_stats(),
        before,
        "segment everything copied between memories"
    );
    let with_encode =
        segment_everything(&shapes_view(&img), &encoder, &predictor, &options).unwrap();
    let on_cpu = segment_everything(&shapes_view(&img), &cpu_encoder, &cpu, &options).unwrap();
    assert_eq!(on_device.masks.len(), on_cpu.masks.len(), "masks found");
    assert_eq!(with_encode.masks.len(), on_cpu.masks.len(), "masks found");
    for (k, (d, c)) in on_device.masks.iter().zip(&on_cpu.masks).enumerate() {
        let i = iou(&d.rle.decode().unwrap(), &c.rle.decode().unwrap());
        assert!(i >= 0.99, "mask {k}: IoU {i:.4} with the CPU's");
    }
}

/// The embedding cache keeps device embeddings within its device budget: they are counted as
/// device bytes, a repeat request is a hit that re-encodes nothing, and a budget too small for
/// one embedding keeps none.
#[test]
fn the_cache_keeps_device_embeddings_within_its_device_budget() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let encoder =
        Arc::new(encoder_on(&model("tiny_a_encoder.onnx"), webgpu(MismatchPolicy::Fail)).unwrap());
    let img = read_pnm(&testdata("shapes.ppm"));
    let flipped: Vec<u8> = img.data.iter().rev().copied().collect();
    let other = ImageView::packed(&flipped, img.width, img.height, PixelFormat::Rgb).unwrap();
    let one = encoder.encode(&shapes_view(&img)).unwrap();
    let size: usize = one.tensors().iter().map(|t| t.byte_len()).sum();
    drop(one);

    let cache = EmbeddingCache::new(CacheOptions {
        host_budget: 0,
        device_budget: size,
        ..Default::default()
    })
    .unwrap();
    let (first, _) = cache.encode(&encoder, &shapes_view(&img)).unwrap();
    assert!(!first.is_serializable());
    let stats = cache.stats();
    assert_eq!((stats.device_bytes, stats.host_bytes), (size, 0));
    let (again, _) = cache.encode(&encoder, &shapes_view(&img)).unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "a repeat request is the kept embedding"
    );
    assert_eq!(cache.stats().hits, 1);
    // A second image fits only in place of the first.
    cache.encode(&encoder, &other).unwrap();
    let stats = cache.stats();
    assert_eq!(stats.entries, 1);
    assert_eq!(stats.evictions, 1);
    assert!(stats.device_bytes <= size);

    let tiny = EmbeddingCache::new(CacheOptions {
        host_budget: 0,
        device_budget: size - 1,
        ..Default::default()
    })
    .unwrap();
    tiny.encode(&encoder, &shapes_view(&img)).unwrap();
    assert_eq!(tiny.stats().entries, 0);
    assert_eq!(tiny.stats().rejected, 1);
}

/// One object clicked on frame 0 of the generated tracking clip, then tracked over the next
/// frames, by `tracker`: each frame's low-res logits and score.
/// Each frame's low-res logits and object score, and the frames' seconds.
fn track_clip(tracker: &Tracker, frames: u32) -> (Vec<(Vec<f32>, f32)>, String) {
    use common::track_clip::{frame, target_centre, HEIGHT, WIDTH};
    let (cx, cy) = target_centre(0);
    let click = common::click(cx as f32, cy as f32);
    let mut out = Vec::new();
    let mut seconds = Vec::new();
    for t in 0..frames {
        let start = std::time::Instant::now();
        let (rgb, _, _) = frame(t);
        let view = ImageView::packed(&rgb, WIDTH, HEIGHT, PixelFormat::Rgb).unwrap();
        let object = if t == 0 {
            tracker.add_prompt(0, &view, 1, &click).unwrap()
        } else {
            let mut tracked = tracker.track(t, &view, Direction::Forward).unwrap();
            tracked.objects.remove(0)
        };
        out.push((object.low_res, object.score));
        seconds.push(format!("{:.1}", start.elapsed().as_secs_f64()));
    }
    (out, seconds.join(", "))
}

/// The tracker's four modules on the device: it says so (no fallback, outputs kept in the
/// device's memory), and every frame's logits follow the CPU tracker's (correlation ≥ 0.999,
/// IoU ≥ 0.99 on pixels either side is confident about) and its object score.
fn tracker_on_the_device_as_on_the_cpu(
    paths: &VideoModelPaths,
    frames: u32,
    what: &str,
) -> Vec<(&'static str, sam2::models::RewriteReport)> {
    tracker_on_the_device_as_the_cpus(paths, paths, frames, what)
}

/// [`tracker_on_the_device_as_on_the_cpu`], the device running the modules at `device_paths` (a
/// precision variant of those at `cpu_paths`, which the CPU runs). Returns what the device
/// tracker's modules fused at load.
fn tracker_on_the_device_as_the_cpus(
    cpu_paths: &VideoModelPaths,
    device_paths: &VideoModelPaths,
    frames: u32,
    what: &str,
) -> Vec<(&'static str, sam2::models::RewriteReport)> {
    let options = |device: DeviceOptions| {
        let mut options = TrackerOptions {
            num_frames: Some(frames),
            ..Default::default()
        };
        options.session.device = device;
        options
    };
    let cpu = Tracker::new(cpu_paths, &options(DeviceOptions::default())).unwrap();
    // ONNX Runtime warns when it cannot use a weight where the library placed it (a device copy
    // of a weight it plans in host memory, which it then copies back): none may.
    let refused = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&refused);
    log::set_sink(
        Some(Arc::new(move |_, msg: &str| {
            if msg.contains("Cannot use user supplied initializer") {
                sink.lock().unwrap().push(msg.to_string());
            }
        })),
        LogLevel::Warning,
    );
    let device = Tracker::new(device_paths, &options(webgpu(MismatchPolicy::Fail)));
    log::set_sink(None, LogLevel::Warning);
    let device = device.unwrap();
    let refused = refused.lock().unwrap().clone();
    assert!(refused.is_empty(), "{what}: {refused:?}");
    if cpu_paths.image_encoder != device_paths.image_encoder {
        assert_ne!(
            device.variant().precision,
            cpu.variant().precision,
            "{what}: a variant on the device"
        );
    }
    let effective = device.device();
    assert_eq!(effective.primary, device_provider(), "{what}");
    assert!(!effective.fell_back, "{what}: the device tracker fell back");
    assert_ne!(
        effective.memory, "Cpu",
        "{what}: the device tracker keeps its memories in host memory"
    );
    let (on_cpu, cpu_seconds) = track_clip(&cpu, frames);
    let (on_device, device_seconds) = track_clip(&device, frames);
    println!("{what}: seconds a frame on the CPU {cpu_seconds}; on the device {device_seconds}");
    assert!(device.memory_bytes() > 0, "{what}: no memory kept");
    for (t, ((c, cs), (d, ds))) in on_cpu.iter().zip(&on_device).enumerate() {
        let r = correlation(d, c);
        let i = confident_iou(d, c);
        assert!(
            r >= 0.999 && i >= 0.99,
            "{what}, frame {t}: logit correlation {r:.6}, IoU {i:.4} with the CPU tracker's"
        );
        assert!(
            (cs - ds).abs() < 1e-2 * cs.abs().max(1.0),
            "{what}, frame {t}: object score {ds} against the CPU's {cs}"
        );
    }
    device.attention_fusion()
}

/// The real SAM2.1 tiny tracker (sam2-export-video's four modules, `$SAM2_VIDEO_MODELS`)
/// on the device: the clicked frame and one tracked frame, against the CPU tracker. Its image
/// encoder is Hiera in float32: as exported, its three global attention blocks hold 4 × 4096 ×
/// 4096 scores (256 MiB) in one tensor, past the 128 MiB llvmpipe allows one storage binding, and
/// ONNX Runtime 1.30's WebGPU `Softmax` then computed wrong values without an error (an embedding
/// at correlation 0.06 with the CPU's); fused at load, as on the CPU, they hold none, and the
/// frames' logits follow the CPU's. Its memory attention (RoPE self- and cross-attention, fused
/// at load) reads the first frame's memory and pointer from WebGPU buffers. About three minutes on
/// llvmpipe (Hiera twice, a minute each, and memory attention once), so the clip is short.
#[test]
fn the_real_sam2_tracker_runs_on_the_device_as_on_the_cpu() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let dir = PathBuf::from(std::env::var_os("SAM2_VIDEO_MODELS").expect(
        "SAM2_VIDEO_MODELS is not set: run tools/setup/setup-real.sh (scripts/test.sh does)",
    ));
    let paths = VideoModelPaths::in_dir(&dir, "");
    let fused = tracker_on_the_device_as_on_the_cpu(&paths, 2, "SAM2.1 tiny");
    let count = |role: &str| {
        let (_, report) = fused.iter().find(|(r, _)| *r == role).unwrap();
        (report.fused_count(), report.to_string())
    };
    let (encoder, report) = count("image encoder");
    assert_eq!(
        encoder, 3,
        "Hiera's global attention fused on the device: {report}"
    );
    let (attention, report) = count("memory attention");
    assert_eq!(
        attention, 8,
        "memory attention fused on the device: {report}"
    );
}

/// The tracker stacks its memories on WebGPU in a session of its own (a WebGPU buffer cannot be
/// written at an offset: `device_copy::concat_webgpu`): parts of different lengths, on the
/// device, come back in order, in one WebGPU buffer. (The EdgeTAM test below stacks a single
/// memory frame on the device; this is the many-part case, without tracking seconds a frame.)
#[test]
fn memories_are_stacked_on_the_device_in_order() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() || device_provider() != Provider::WebGpu {
        return;
    }
    let parts: Vec<Vec<f32>> = [6usize, 3, 12]
        .iter()
        .enumerate()
        .map(|(k, &n)| (0..n).map(|i| (k * 100 + i) as f32 + 0.25).collect())
        .collect();
    let (stacked, memory) =
        sam2::test_support::concat_on_webgpu(&parts, &[7, 3], 0).expect("stacked on the device");
    assert!(memory.starts_with("WebGPU_Buf"), "stacked into {memory}");
    assert_eq!(stacked, parts.concat());
    let err = sam2::test_support::concat_on_webgpu(&parts, &[8, 3], 0)
        .expect_err("a shape of more elements than the parts have");
    println!("a wrong shape: {err}");
}

/// EdgeTAM (issue 31) on the device: its image pair (encode, a click and a box, against the
/// CPU's), and the fp16 variant of its four video modules (its image encoder in float16) over 2
/// frames of the tracking clip against the float32 tracker on the CPU: the first frame's memory
/// and pointer kept in WebGPU buffers and read there by the second (stacking many memories on the
/// device: the test above; a float32 tracker on the device: SAM2.1's, above). On llvmpipe a
/// frame of EdgeTAM's tracker takes 15–25 s, so the clip is short. (The generated tracker cannot
/// run here: the rig's ONNX Runtime 1.30 refuses its decoder's `If` subgraph, "initializer name
/// is not unique", which 1.31 loads.)
#[test]
fn edgetam_runs_on_the_device_as_on_the_cpu() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let dir = common::edgetam_dir();
    let (encoder_path, decoder_path) = (
        dir.join("edgetam_image_encoder.onnx"),
        dir.join("edgetam_image_decoder_multi.onnx"),
    );
    let img = read_pnm(&testdata("shapes.ppm"));
    let start = std::time::Instant::now();
    let cpu_encoder = encoder_on(&encoder_path, DeviceOptions::default()).unwrap();
    let device_encoder = encoder_on(&encoder_path, webgpu(MismatchPolicy::Fail)).unwrap();
    let loaded = start.elapsed().as_secs_f64();
    let host = cpu_encoder.encode(&shapes_view(&img)).unwrap();
    let encoded = start.elapsed().as_secs_f64();
    let resident = device_encoder.encode(&shapes_view(&img)).unwrap();
    println!(
        "EdgeTAM image encoder: both sessions made in {loaded:.1} s, an encode {:.1} s on the \
         CPU, {:.1} s on the device",
        encoded - loaded,
        start.elapsed().as_secs_f64() - encoded
    );
    assert!(
        !resident.is_serializable(),
        "EdgeTAM's embedding left the device"
    );
    let cpu = predictor_on(&decoder_path, &cpu_encoder, DeviceOptions::default());
    let device = predictor_on(&decoder_path, &device_encoder, webgpu(MismatchPolicy::Fail));
    let clicks = &shape_clicks()[..2];
    let on_device = device
        .predict(&resident, clicks, PredictOptions { multimask: true })
        .unwrap();
    let on_cpu = cpu
        .predict(&host, clicks, PredictOptions { multimask: true })
        .unwrap();
    assert_same(&on_device, &on_cpu, "EdgeTAM image pair");

    // The fp16 variant of the video modules (tools/setup/setup-edgetam.sh), its image encoder in
    // float16 on the device, against the float32 tracker on the CPU.
    let paths = VideoModelPaths::find(&dir).unwrap();
    let fp16 = PathBuf::from(std::env::var_os("SAM2_EDGETAM_FP16").expect(
        "SAM2_EDGETAM_FP16 is not set: run tools/setup/setup-edgetam.sh (scripts/test.sh does)",
    ));
    let fp16 = VideoModelPaths::find(&fp16).unwrap();
    tracker_on_the_device_as_the_cpus(&paths, &fp16, 2, "EdgeTAM, its fp16 variant on the device");
}

/// SAM 3 (the reduced export, tools/setup/setup-sam3.sh) on the device: the embedding stays in
/// WebGPU buffers and saving it is refused naming the allocator; a phrase and exemplar boxes are
/// segmented reading it in place (no copy made), as the CPU segments them; two concept models
/// share one copy of the weights.
#[test]
fn sam3_concepts_run_on_the_device_reading_the_embedding_in_place() {
    use sam2::concept::{Concept, ConceptModel, ConceptModelOptions, Exemplar, SegmentOptions};
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if rig().is_none() {
        return;
    }
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                panic!("{name} is not set: run tools/setup/setup-sam3.sh (the test command does)")
            })
    };
    let options = |device: DeviceOptions| {
        let mut o = ConceptModelOptions {
            vocabulary: Some(var("SAM2_SAM3_VOCAB")),
            ..Default::default()
        };
        o.session.device = device;
        o
    };
    let models = var("SAM2_SAM3_MODELS");
    let on_device = ConceptModel::new(&models, &options(webgpu(MismatchPolicy::Fail))).unwrap();
    assert_eq!(on_device.encoder().device().primary, device_provider());
    assert_eq!(on_device.decoder_device().primary, device_provider());
    let img = read_pnm(&testdata("demo.ppm"));
    let embedding = on_device.encode(&shapes_view(&img)).unwrap();
    let name = embedding.allocator_name().to_string();
    assert_ne!(name, "Cpu");
    assert!(!embedding.is_serializable());
    let dir = scratch("sam3");
    let path = dir.join("device.sam2");
    match embedding_file::save(&embedding, &path) {
        Err(Error::EmbeddingNotSerializable { allocator }) => assert_eq!(allocator, name),
        other => panic!(
            "expected EmbeddingNotSerializable, got {:?}",
            other.map(|_| ())
        ),
    }
    assert!(!path.exists());

    // One concept, a phrase with an exemplar box (each concept is a decoder run, and the mask
    // head's 288² convolutions take a while on llvmpipe).
    let concepts = [Concept {
        text: Some("shape".into()),
        exemplars: vec![Exemplar {
            rect: [52.0, 82.0, 327.0, 257.0],
            positive: true,
        }],
    }];
    let all = SegmentOptions {
        score_threshold: 0.0,
        ..SegmentOptions::default()
    };
    let before = copy_stats();
    let device_result = on_device.segment(&embedding, &concepts, &all).unwrap();
    assert_eq!(
        copy_stats(),
        before,
        "the device embedding was copied to segment it"
    );

    let on_cpu = ConceptModel::new(&models, &options(DeviceOptions::default())).unwrap();
    // A CPU model is given the device embedding: refused, saying where each is.
    let e = on_cpu
        .segment(&embedding, &concepts, &all)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lives in") && e.contains(&name), "{e}");
    let cpu_embedding = on_cpu.encode(&shapes_view(&img)).unwrap();
    let cpu_result = on_cpu.segment(&cpu_embedding, &concepts, &all).unwrap();
    for (d, c) in device_result.concepts.iter().zip(&cpu_result.concepts) {
        assert!(
            (d.presence - c.presence).abs() < 1e-3,
            "presence {} on the device, {} on the CPU",
            d.presence,
            c.presence
        );
    }
    // Every query by query: its score, and the masks of the best few.
    fn by_query(r: &sam2::concept::Segmentation, concept: usize) -> Vec<&sam2::concept::Instance> {
        let mut v: Vec<&sam2::concept::Instance> = r
            .instances
            .iter()
            .filter(|i| i.concept == concept)
            .collect();
        v.sort_by_key(|i| i.query);
        v
    }
    for concept in 0..concepts.len() {
        let (d, c) = (
            by_query(&device_result, concept),
            by_query(&cpu_result, concept),
        );
        assert_eq!(d.len(), c.len());
        let worst = d
            .iter()
            .zip(&c)
            .map(|(a, b)| (a.score - b.score).abs())
            .fold(0f32, f32::max);
        assert!(
            worst < 2e-3,
            "concept {concept}: scores differ by up to {worst}"
        );
        let mut best: Vec<(&&sam2::concept::Instance, &&sam2::concept::Instance)> =
            d.iter().zip(&c).collect();
        best.sort_by(|a, b| b.1.score.total_cmp(&a.1.score));
        for (a, b) in best.iter().take(5) {
            let i = iou(&a.mask, &b.mask);
            assert!(
                i >= 0.98,
                "concept {concept}, query {}: mask IoU {i:.4}",
                a.query
            );
        }
    }
    let second = ConceptModel::new(&models, &options(webgpu(MismatchPolicy::Fail))).unwrap();
    assert_eq!(
        second.encoder().weights_address(),
        on_device.encoder().weights_address(),
        "two concept models on the device hold one copy of the image encoder's weights"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
