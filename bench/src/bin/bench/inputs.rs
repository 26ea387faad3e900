//! Inputs: the deterministic photo-like image, the bench models, plain ONNX Runtime sessions and
//! feeds (the floors).

use super::*;

/// A deterministic photo-like RGB image: sky and ground gradients with a wavy horizon, shaded
/// shapes, and per-pixel noise.
pub(crate) fn make_image(w: usize, h: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // (kind, cx, cy, rx, ry, rgb): 0 = ellipse, 1 = rectangle.
    let shapes: [(u8, f32, f32, f32, f32, [f32; 3]); 7] = [
        (0, 1250.0, 620.0, 230.0, 160.0, [225.0, 120.0, 40.0]),
        (1, 300.0, 700.0, 180.0, 240.0, [60.0, 70.0, 160.0]),
        (0, 700.0, 250.0, 110.0, 110.0, [250.0, 240.0, 190.0]),
        (1, 1650.0, 850.0, 200.0, 120.0, [150.0, 40.0, 60.0]),
        (0, 850.0, 820.0, 140.0, 90.0, [40.0, 150.0, 140.0]),
        (1, 1500.0, 300.0, 90.0, 160.0, [120.0, 120.0, 125.0]),
        (0, 1000.0, 580.0, 60.0, 60.0, [240.0, 60.0, 180.0]),
    ];
    let mut px = vec![0u8; w * h * 3];
    for y in 0..h {
        let fy = y as f32 / h as f32;
        for x in 0..w {
            let fx = x as f32 / w as f32;
            let horizon = 0.42 + 0.04 * (fx * 9.0).sin() + 0.02 * (fx * 23.0).cos();
            let mut c = if fy < horizon {
                [70.0 + 120.0 * fy, 130.0 + 90.0 * fy, 235.0 - 30.0 * fy]
            } else {
                let t = (fx * 31.0 + fy * 11.0).sin() * 0.5 + 0.5;
                [
                    90.0 + 50.0 * t + 40.0 * fy,
                    120.0 + 40.0 * (1.0 - t),
                    50.0 + 20.0 * t,
                ]
            };
            for &(kind, cx, cy, rx, ry, rgb) in &shapes {
                let (dx, dy) = ((x as f32 - cx) / rx, (y as f32 - cy) / ry);
                let d = if kind == 0 {
                    (dx * dx + dy * dy).sqrt()
                } else {
                    dx.abs().max(dy.abs())
                };
                if d <= 1.0 {
                    let shade = 0.75 + 0.25 * (1.0 - d) - 0.1 * dy;
                    c = [rgb[0] * shade, rgb[1] * shade, rgb[2] * shade];
                }
            }
            let i = (y * w + x) * 3;
            for k in 0..3 {
                let noise = (rand() % 21) as f32 - 10.0;
                px[i + k] = (c[k] + noise).clamp(0.0, 255.0) as u8;
            }
        }
    }
    px
}

pub(crate) fn write_ppm(path: &Path, rgb: &[u8], w: usize, h: usize) -> Res<()> {
    let mut f = std::fs::File::create(path)?;
    write!(f, "P6\n{w} {h}\n255\n")?;
    f.write_all(rgb)?;
    Ok(())
}

pub(crate) fn write_f32(path: &Path, v: &[f32]) -> Res<()> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes)?;
    Ok(())
}

/// The pair to measure: `SAM2_BENCH_ENCODER`/`SAM2_BENCH_DECODER` when set, else the real SAM2.1
/// hiera-tiny export by samexporter (tools/setup/setup-real.sh), else the generated bench pair.
pub(crate) fn bench_models() -> (PathBuf, PathBuf) {
    if let (Ok(e), Ok(d)) = (
        std::env::var("SAM2_BENCH_ENCODER"),
        std::env::var("SAM2_BENCH_DECODER"),
    ) {
        return (e.into(), d.into());
    }
    if let Ok(real) = std::env::var("SAM2_REAL_MODELS") {
        let real = PathBuf::from(real);
        return (
            real.join("sam2.1_hiera_tiny.encoder.onnx"),
            real.join("sam2.1_hiera_tiny.decoder.onnx"),
        );
    }
    let models = PathBuf::from(std::env::var("SAM2_MODELS").unwrap_or_else(|_| "models".into()));
    (
        models.join("bench_a_encoder.onnx"),
        models.join("bench_a_decoder.onnx"),
    )
}

/// The int8 variant of the benchmark's encoder, when the set-up made one
/// (`$SAM2_REAL_VARIANTS/samexporter/`, tools/setup/setup-real.sh) and the encoder is the real one.
pub(crate) fn int8_variant(encoder: &Path) -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("SAM2_REAL_VARIANTS")?);
    let path = dir.join("samexporter").join(encoder.file_name()?);
    path.is_file().then_some(path)
}

/// EdgeTAM's image encoder, when tools/setup/setup-edgetam.sh has made it (`$SAM2_EDGETAM_MODELS`).
pub(crate) fn edgetam_encoder() -> Option<PathBuf> {
    let path =
        PathBuf::from(std::env::var_os("SAM2_EDGETAM_MODELS")?).join("edgetam_image_encoder.onnx");
    path.is_file().then_some(path)
}

/// The CPU's model and the vector and matrix extensions ONNX Runtime's int8 kernels can use
/// (from /proc/cpuinfo; "unknown" elsewhere).
pub(crate) fn cpu_description() -> String {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return "unknown".into();
    };
    let model = info
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
        .map_or("unknown", |(_, m)| m.trim());
    let flags: Vec<&str> = info
        .lines()
        .find_map(|l| l.strip_prefix("flags").and_then(|r| r.split_once(':')))
        .map(|(_, f)| f.split_whitespace().collect())
        .unwrap_or_default();
    let wanted = [
        "avx2",
        "fma",
        "avx512f",
        "avx512_vnni",
        "avx_vnni",
        "amx_int8",
        "amx_bf16",
    ];
    let have: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|w| flags.contains(w))
        .collect();
    format!(
        "{model} ({})",
        if have.is_empty() {
            "none of avx2, avx512, vnni, amx".into()
        } else {
            have.join(", ")
        }
    )
}

pub(crate) fn plain_session(
    path: &Path,
    level: Optimization,
    intra: Option<usize>,
) -> Res<Session> {
    let env = sam2::runtime::environment()?;
    let mut builder = Session::builder(env)?
        .with_optimization_level(match level {
            Optimization::None => GraphOptimizationLevel::Disable,
            Optimization::Basic => GraphOptimizationLevel::Level1,
            Optimization::All => GraphOptimizationLevel::All,
        })
        .map_err(ort::Error::<()>::from)?;
    if let Some(n) = intra {
        builder = builder
            .with_intra_threads(n)
            .map_err(ort::Error::<()>::from)?;
    }
    Ok(builder.commit_from_file(path)?)
}

/// Ready decoder inputs for ONNX Runtime alone: the embedding (owned copies made once) and the
/// prompt of one click, in the 1024 frame.
pub(crate) struct DecoderFeed {
    pub(crate) values: Vec<(String, DynValue)>,
}

impl DecoderFeed {
    pub(crate) fn new(embedding: &Embedding) -> Res<Self> {
        let mut values = Vec::new();
        for (name, t) in embedding
            .family()
            .tensor_names()
            .iter()
            .zip(embedding.tensors())
        {
            values.push((name.to_string(), tensor_of(t)?));
        }
        let (x, y) = (
            CLICK.0 / W as f32 * SIZE as f32,
            CLICK.1 / H as f32 * SIZE as f32,
        );
        values.push((
            "point_coords".into(),
            Tensor::from_array(([1usize, 1, 2], vec![x, y]))?.into_dyn(),
        ));
        values.push((
            "point_labels".into(),
            Tensor::from_array(([1usize, 1], vec![1.0f32]))?.into_dyn(),
        ));
        values.push((
            "mask_input".into(),
            Tensor::from_array((
                [1usize, 1, LOW_RES, LOW_RES],
                vec![0.0f32; LOW_RES * LOW_RES],
            ))?
            .into_dyn(),
        ));
        values.push((
            "has_mask_input".into(),
            Tensor::from_array(([1usize], vec![0.0f32]))?.into_dyn(),
        ));
        Ok(DecoderFeed { values })
    }

    pub(crate) fn run(&self, session: &mut Session) {
        let inputs: Vec<(
            std::borrow::Cow<'_, str>,
            ort::session::SessionInputValue<'_>,
        )> = self
            .values
            .iter()
            .map(|(n, v)| (std::borrow::Cow::from(n.as_str()), v.into()))
            .collect();
        let out = session.run(inputs).expect("decoder run");
        black_box(&out);
    }

    /// A run followed by the library's own post-processing functions: best mask by IoU,
    /// `upsample_threshold` to the image size, `box_and_area`. The equal-work floor of a predict.
    pub(crate) fn run_post(&self, session: &mut Session, mask: &mut [u8]) {
        let inputs: Vec<(
            std::borrow::Cow<'_, str>,
            ort::session::SessionInputValue<'_>,
        )> = self
            .values
            .iter()
            .map(|(n, v)| (std::borrow::Cow::from(n.as_str()), v.into()))
            .collect();
        let out = session.run(inputs).expect("decoder run");
        let (_, iou) = out["iou_predictions"]
            .try_extract_tensor::<f32>()
            .expect("iou");
        let best = (0..iou.len()).fold(0, |b, i| if iou[i] > iou[b] { i } else { b });
        let (_, masks) = out["masks"].try_extract_tensor::<f32>().expect("masks");
        let n = LOW_RES * LOW_RES;
        sam2::test_support::upsample_threshold(
            &masks[best * n..(best + 1) * n],
            LOW_RES,
            LOW_RES,
            W,
            H,
            mask,
        );
        black_box(sam2::test_support::box_and_area(mask, W));
    }
}

pub(crate) fn click_prompt() -> Vec<Prompt> {
    vec![Prompt {
        points: vec![Point {
            x: CLICK.0,
            y: CLICK.1,
            positive: true,
        }],
        ..Default::default()
    }]
}

pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}
