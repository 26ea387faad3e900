//! Segment everything, side by side in one run: SAM2's whole 32×32 grid with SAM2's
//! default parameters on the real SAM2.1 hiera-tiny export (samexporter), on testdata/demo.ppm
//! (800×600: Meta's generator upsamples every candidate of a batch to the image in float32,
//! 192 of them per batch, which a 1920×1080 image would make 1.6 GB).
//!
//! - the library's generator on an embedding (the grid: decoder batches, filtering, NMS, RLE);
//! - ONNX Runtime alone running the same batched decoder calls (64 clicks × 3 candidates each),
//!   nothing else: the floor the library's overhead is measured against;
//! - one `predict` per point (measured on the first `--single` points, scaled to the grid);
//! - the library from the image (encode + grid) against Meta's PyTorch
//!   `SAM2AutomaticMaskGenerator` with its defaults on the same checkpoint and CPU
//!   (tools/references/everything_reference.py --bench, one run after a warm-up: it takes minutes;
//!   its `generate` encodes the image too).
//!
//! Run alone:
//!
//!     cargo run --release -p sam2-bench --bin bench_everything --
//!         [--out DIR] [--repeat N] [--single N]
//!
//! Needs SAM2_REAL_MODELS (and SAM2_REAL_PYTHON for the PyTorch figure): tools/setup/setup-real.sh.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ort::session::Session;
use ort::value::{DynValue, Tensor};
use sam2::everything::{segment_everything, segment_everything_embedding, EverythingOptions};
use sam2::test_support::point_grid;
use sam2::{
    Embedding, Encoder, ImageView, PixelFormat, Point, PredictOptions, Predictor, PredictorOptions,
    Prompt,
};
use sam2_bench::stats::median;
use sam2_bench::tensor_of;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn read_ppm(path: &Path) -> Res<(Vec<u8>, usize, usize)> {
    let bytes = std::fs::read(path)?;
    let mut fields = Vec::new();
    let mut i = 0;
    while fields.len() < 4 {
        while bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        while !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        fields.push(String::from_utf8_lossy(&bytes[start..i]).into_owned());
    }
    let (w, h): (usize, usize) = (fields[1].parse()?, fields[2].parse()?);
    Ok((bytes[i + 1..i + 1 + w * h * 3].to_vec(), w, h))
}

/// ONNX Runtime alone: the grid's batches through a plain session, the inputs made per batch as
/// the library makes them; the outputs are only touched.
fn ort_alone(
    session: &mut Session,
    embedding: &Embedding,
    points: &[[f32; 2]],
    batch: usize,
) -> Res<()> {
    let (w, h) = embedding.image_size();
    let features: Vec<(String, DynValue)> = embedding
        .family()
        .tensor_names()
        .iter()
        .zip(embedding.tensors())
        .map(|(n, t)| Ok((n.to_string(), tensor_of(t)?)))
        .collect::<Res<_>>()?;
    for chunk in points.chunks(batch) {
        let n = chunk.len();
        let coords: Vec<f32> = chunk
            .iter()
            .flat_map(|p| [p[0] / w as f32 * 1024.0, p[1] / h as f32 * 1024.0])
            .collect();
        let mut inputs: Vec<(
            std::borrow::Cow<'_, str>,
            ort::session::SessionInputValue<'_>,
        )> = features
            .iter()
            .map(|(k, v)| (std::borrow::Cow::from(k.as_str()), v.into()))
            .collect();
        inputs.push((
            "point_coords".into(),
            Tensor::from_array(([n, 1, 2], coords))?.into_dyn().into(),
        ));
        inputs.push((
            "point_labels".into(),
            Tensor::from_array(([n, 1], vec![1.0f32; n]))?
                .into_dyn()
                .into(),
        ));
        inputs.push((
            "mask_input".into(),
            Tensor::from_array(([n, 1, 256, 256], vec![0.0f32; n * 256 * 256]))?
                .into_dyn()
                .into(),
        ));
        inputs.push((
            "has_mask_input".into(),
            Tensor::from_array(([1usize], vec![0.0f32]))?
                .into_dyn()
                .into(),
        ));
        let out = session.run(inputs)?;
        black_box(&out);
    }
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let repeat: usize = arg("--repeat").map_or(Ok(3), |v| v.parse())?;
    let single: usize = arg("--single").map_or(Ok(128), |v| v.parse())?;
    let out_dir = PathBuf::from(arg("--out").unwrap_or_else(|| "out".into()));
    let root = sam2_bench::root();
    let real = PathBuf::from(std::env::var("SAM2_REAL_MODELS").map_err(|_| {
        "SAM2_REAL_MODELS is not set: source tools/setup/setup-real.sh (scripts/bench.sh does)"
    })?);
    let image_path = root.join("testdata/demo.ppm");

    let info = sam2::runtime::init(None)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (rgb, w, h) = read_ppm(&image_path)?;
    let view = ImageView::packed(&rgb, w, h, PixelFormat::Rgb)?;
    let encoder = Encoder::new(
        real.join("sam2.1_hiera_tiny.encoder.onnx"),
        &Default::default(),
    )?;
    let decoder = real.join("sam2.1_hiera_tiny.decoder.onnx");
    let predictor = Predictor::new(
        &decoder,
        &PredictorOptions {
            encoder_fingerprint: Some(encoder.fingerprint()),
            ..Default::default()
        },
    )?;
    let embedding = encoder.encode(&view)?;
    let options = EverythingOptions::default();
    let points: Vec<[f32; 2]> = point_grid(options.points_per_side as usize)
        .iter()
        .map(|p| [(p[0] * w as f64) as f32, (p[1] * h as f64) as f32])
        .collect();
    let env = sam2::runtime::environment()?;
    let mut plain = Session::builder(env)?.commit_from_file(&decoder)?;
    println!(
        "segment everything — SAM2.1 hiera-tiny (samexporter), {w}x{h}, {} clicks in batches of {}, \
         SAM2's defaults; ONNX Runtime {}, {cores} cores, {repeat} runs each (medians)",
        points.len(),
        options.points_per_batch,
        info.version
    );

    // Warm-up, then the library and ONNX Runtime alone interleaved.
    let found = segment_everything_embedding(&embedding, &predictor, &options)?;
    ort_alone(&mut plain, &embedding, &points, options.points_per_batch)?;
    let (mut lib, mut alone) = (Vec::new(), Vec::new());
    for _ in 0..repeat {
        let t = Instant::now();
        black_box(segment_everything_embedding(
            &embedding, &predictor, &options,
        )?);
        lib.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        ort_alone(&mut plain, &embedding, &points, options.points_per_batch)?;
        alone.push(t.elapsed().as_secs_f64());
    }
    let (lib, alone) = (median(&lib), median(&alone));

    // One predict per point (multimask, as the generator asks), scaled to the grid.
    let n = single.clamp(1, points.len());
    let t = Instant::now();
    for p in &points[..n] {
        let prompt = Prompt {
            points: vec![Point {
                x: p[0],
                y: p[1],
                positive: true,
            }],
            ..Default::default()
        };
        black_box(predictor.predict(&embedding, &[prompt], PredictOptions { multimask: true })?);
    }
    let per_point = t.elapsed().as_secs_f64() / n as f64 * points.len() as f64;

    // From the image, against Meta's PyTorch generator.
    let mut from_image = Vec::new();
    for _ in 0..repeat {
        let t = Instant::now();
        black_box(segment_everything(&view, &encoder, &predictor, &options)?);
        from_image.push(t.elapsed().as_secs_f64());
    }
    let from_image = median(&from_image);
    let pytorch = std::env::var_os("SAM2_REAL_PYTHON").and_then(|python| {
        let out = Command::new(python)
            .arg(root.join("tools/references/everything_reference.py"))
            .args(["--bench", "--repeat", "1", "--models"])
            .arg(&real)
            .arg("--image")
            .arg(&image_path)
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "[bench_everything] PyTorch run failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        let v: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last()?).ok()?;
        let secs: Vec<f64> = v["seconds"]
            .as_array()?
            .iter()
            .filter_map(|s| s.as_f64())
            .collect();
        Some((median(&secs), v["masks"].as_u64().unwrap_or(0)))
    });

    let ms = |s: f64| format!("{:.0} ms", s * 1000.0);
    println!("| measurement | time | ratio |");
    println!("|---|---|---|");
    println!(
        "| library, grid on an embedding ({} masks kept) | {} | {:.3}× ONNX Runtime alone |",
        found.masks.len(),
        ms(lib),
        lib / alone
    );
    println!(
        "| ONNX Runtime alone, the same batched decoder calls | {} | 1 |",
        ms(alone)
    );
    println!(
        "| one predict per point (first {n} points, scaled to {}) | {} | {:.2}× the library |",
        points.len(),
        ms(per_point),
        per_point / lib
    );
    println!(
        "| library from the image (encode + grid) | {} | |",
        ms(from_image)
    );
    match pytorch {
        Some((secs, masks)) => println!(
            "| Meta's SAM2AutomaticMaskGenerator, PyTorch, same CPU ({masks} masks) | {} | {:.2}× the library from the image |",
            ms(secs),
            secs / from_image
        ),
        None => println!("| Meta's SAM2AutomaticMaskGenerator | not run (SAM2_REAL_PYTHON unset or failed) | |"),
    }
    std::fs::create_dir_all(&out_dir)?;
    let json = serde_json::json!({
        "image": [w, h], "clicks": points.len(), "cores": cores, "runs": repeat,
        "library_grid_s": lib, "onnxruntime_alone_s": alone, "overhead_ratio": lib / alone,
        "one_predict_per_point_s": per_point, "single_points_measured": n,
        "library_from_image_s": from_image,
        "pytorch_s": pytorch.map(|p| p.0), "pytorch_masks": pytorch.map(|p| p.1),
        "library_masks": found.masks.len(),
    });
    std::fs::write(
        out_dir.join("bench_everything.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    Ok(())
}
