//! Shared helpers of the Rust integration tests: where the models and test data are, PPM/PGM
//! reading, IoU, and runtime initialisation from the set-up's environment.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub mod memory;
pub mod track_clip;

/// The log sink is process-wide: the tests that set one take turns through this lock (in the
/// integration-test binary, tests of several suites run side by side).
pub static LOG_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes the log sink's turn; a test that failed holding it does not stop the others.
pub fn log_turn() -> std::sync::MutexGuard<'static, ()> {
    LOG_TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// The repository: this module serves the core's tests and the C ABI crate's (capi/tests), so it
/// is the first directory above the test's package that holds `testdata/`.
pub fn root() -> PathBuf {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .find(|dir| dir.join("testdata").is_dir())
        .unwrap_or(package)
        .to_path_buf()
}

pub fn models_dir() -> PathBuf {
    std::env::var_os("SAM2_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models"))
}

pub fn testdata(name: &str) -> PathBuf {
    root().join("testdata").join(name)
}

pub fn model(name: &str) -> PathBuf {
    let p = models_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: run tools/setup/setup.sh (the README's test command does) to generate the models",
        p.display()
    );
    p
}

/// Initialises ONNX Runtime the way a host would: from SAM2_ONNXRUNTIME_PATH (set by
/// tools/setup/setup.sh). Without the variable (a bare `cargo test`), the set-up's venv copy is
/// used.
pub fn init_runtime() {
    let explicit = std::env::var_os("SAM2_ONNXRUNTIME_PATH")
        .is_none()
        .then(venv_onnxruntime)
        .flatten();
    sam2::runtime::init(explicit.as_deref())
        .expect("ONNX Runtime should load (run tools/setup/setup.sh first)");
}

fn venv_onnxruntime() -> Option<PathBuf> {
    let lib = root().join(".venv/lib");
    std::fs::read_dir(lib).ok()?.flatten().find_map(|python| {
        let p = python
            .path()
            .join("site-packages/onnxruntime/capi/libonnxruntime.so.1.31.1");
        p.exists().then_some(p)
    })
}

pub struct Image {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub data: Vec<u8>,
}

/// Reads binary PPM (P6) or PGM (P5) with maxval 255.
pub fn read_pnm(path: &Path) -> Image {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut fields = Vec::new();
    let mut i = 0;
    while fields.len() < 4 {
        while bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if bytes[i] == b'#' {
            while bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        while !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        fields.push(String::from_utf8_lossy(&bytes[start..i]).into_owned());
    }
    i += 1;
    let channels = match fields[0].as_str() {
        "P6" => 3,
        "P5" => 1,
        other => panic!("unsupported PNM magic {other}"),
    };
    let width: usize = fields[1].parse().unwrap();
    let height: usize = fields[2].parse().unwrap();
    assert_eq!(fields[3], "255");
    let data = bytes[i..i + width * height * channels].to_vec();
    Image {
        width,
        height,
        channels,
        data,
    }
}

/// Ground-truth mask (0/1) of a shape.
pub fn gt_mask(file: &str) -> Vec<u8> {
    read_pnm(&testdata(file))
        .data
        .iter()
        .map(|&v| (v > 127) as u8)
        .collect()
}

pub fn iou(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let (mut inter, mut union) = (0u64, 0u64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x != 0, y != 0);
        inter += (x && y) as u64;
        union += (x || y) as u64;
    }
    if union == 0 {
        1.0
    } else {
        inter as f64 / union as f64
    }
}

pub fn union(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(&x, &y)| (x | y).min(1)).collect()
}

#[derive(Debug, Clone)]
pub struct Shape {
    pub name: String,
    pub click: (f32, f32),
    pub bbox: [f32; 4],
    pub mask: Vec<u8>,
    pub twin_of: Option<String>,
}

pub fn shapes() -> Vec<Shape> {
    let text = std::fs::read_to_string(testdata("shapes.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Shape {
            name: s["name"].as_str().unwrap().to_string(),
            click: (
                s["click"][0].as_f64().unwrap() as f32,
                s["click"][1].as_f64().unwrap() as f32,
            ),
            bbox: std::array::from_fn(|i| s["bbox"][i].as_f64().unwrap() as f32),
            mask: gt_mask(s["mask"].as_str().unwrap()),
            twin_of: s["twin_of"].as_str().map(str::to_string),
        })
        .collect()
}

/// The mask a plain click on `shape` should give: the shape, or both twins for a twin.
pub fn expected_click_mask(shape: &Shape, all: &[Shape]) -> Vec<u8> {
    match &shape.twin_of {
        Some(other) => union(
            &shape.mask,
            &all.iter().find(|s| &s.name == other).unwrap().mask,
        ),
        None => shape.mask.clone(),
    }
}

/// An encoder and a predictor of one generated pair, the predictor bound to the encoder's
/// fingerprint.
pub fn open_pair(pair: &str) -> (sam2::Encoder, sam2::Predictor) {
    init_runtime();
    let encoder =
        sam2::Encoder::new(model(&format!("{pair}_encoder.onnx")), &Default::default()).unwrap();
    let options = sam2::PredictorOptions {
        encoder_fingerprint: Some(encoder.fingerprint()),
        ..Default::default()
    };
    let predictor = sam2::Predictor::new(model(&format!("{pair}_decoder.onnx")), &options).unwrap();
    (encoder, predictor)
}

/// The embedding of testdata/shapes.ppm.
pub fn encode_shapes(encoder: &sam2::Encoder) -> sam2::Embedding {
    let img = read_pnm(&testdata("shapes.ppm"));
    let view =
        sam2::ImageView::packed(&img.data, img.width, img.height, sam2::PixelFormat::Rgb).unwrap();
    encoder.encode(&view).unwrap()
}

/// One positive click.
pub fn click(x: f32, y: f32) -> sam2::Prompt {
    sam2::Prompt {
        points: vec![sam2::Point {
            x,
            y,
            positive: true,
        }],
        ..Default::default()
    }
}

/// A click inside each shape of the test image, in shapes.json's order.
pub fn shape_clicks() -> Vec<sam2::Prompt> {
    shapes()
        .iter()
        .map(|s| click(s.click.0, s.click.1))
        .collect()
}

/// EdgeTAM's export directory, `$SAM2_EDGETAM_MODELS` (tools/setup/setup-edgetam.sh, which
/// scripts/test.sh sources). Unset, it fails, as `$SAM2_REAL_MODELS` does: a missing set-up must
/// not pass as "nothing to check".
pub fn edgetam_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("SAM2_EDGETAM_MODELS").expect(
        "SAM2_EDGETAM_MODELS is not set: run tools/setup/setup-edgetam.sh (scripts/test.sh does)",
    ))
}

/// The real SAM2.1 hiera-tiny export of one exporter (`samexporter`, `onnxruntime`; for the latter
/// its single-mask decoder): (encoder, decoder), from `$SAM2_REAL_MODELS/manifest.json`
/// (tools/setup/setup-real.sh, which scripts/test.sh runs).
pub fn real_pair(family: &str) -> (PathBuf, PathBuf) {
    let dir = PathBuf::from(std::env::var_os("SAM2_REAL_MODELS").expect(
        "SAM2_REAL_MODELS is not set: run tools/setup/setup-real.sh (scripts/test.sh does)",
    ));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let entry = manifest["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["model"] == "sam2.1_hiera_tiny"
                && p["family"] == family
                && (family == "samexporter" || p["multimask_decoder"] == false)
        })
        .unwrap_or_else(|| panic!("no sam2.1_hiera_tiny pair from {family} in the manifest"));
    let file = |key: &str| dir.join(entry[key].as_str().unwrap());
    (file("encoder"), file("decoder"))
}

/// Pearson correlation of two logit maps. Constant maps (an absent object is −1024 everywhere)
/// correlate perfectly when equal, not at all otherwise.
pub fn correlation(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (
        a.iter().map(|&v| v as f64).sum::<f64>() / n,
        b.iter().map(|&v| v as f64).sum::<f64>() / n,
    );
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64 - ma, y as f64 - mb);
        sab += x * y;
        saa += x * x;
        sbb += y * y;
    }
    if saa == 0.0 || sbb == 0.0 {
        if a == b {
            1.0
        } else {
            0.0
        }
    } else {
        sab / (saa * sbb).sqrt()
    }
}

/// Mask agreement where the reference is sure: IoU of the masks (logit > 0) over the pixels
/// where the reference's logit is at least 1 away from 0 (1.0 when no such pixel is in either).
pub fn confident_iou(got: &[f32], reference: &[f32]) -> f64 {
    let (mut inter, mut union) = (0u64, 0u64);
    for (&a, &b) in got.iter().zip(reference) {
        if b.abs() >= 1.0 {
            let (a, b) = (a > 0.0, b > 0.0);
            inter += (a && b) as u64;
            union += (a || b) as u64;
        }
    }
    if union == 0 {
        1.0
    } else {
        inter as f64 / union as f64
    }
}

/// The prompt of a parity case of the real reference (tools/references/real_reference.py's `cases`:
/// points as `[x, y, positive]`, an optional box).
pub fn prompt_of(case: &serde_json::Value) -> sam2::Prompt {
    let points = case["points"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| sam2::Point {
                    x: p[0].as_f64().unwrap() as f32,
                    y: p[1].as_f64().unwrap() as f32,
                    positive: p[2].as_i64().unwrap() != 0,
                })
                .collect()
        })
        .unwrap_or_default();
    let bbox = case["box"].as_array().map(|b| {
        let v: Vec<f32> = b.iter().map(|x| x.as_f64().unwrap() as f32).collect();
        [v[0], v[1], v[2], v[3]]
    });
    sam2::Prompt {
        points,
        bbox,
        mask_input: None,
    }
}

/// A little-endian float32 `.npy` array (format 1.0 or 2.0, C order): its shape and values.
pub fn npy_f32(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &bytes[..6],
        b"\x93NUMPY",
        "{}: not an .npy file",
        path.display()
    );
    let (header_len, start) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        )
    };
    let header = std::str::from_utf8(&bytes[start..start + header_len]).unwrap();
    assert!(
        header.contains("'<f4'") && header.contains("'fortran_order': False"),
        "{}: {header}",
        path.display()
    );
    let shape_text = &header[header.find("'shape': (").unwrap() + 10..];
    let shape: Vec<usize> = shape_text[..shape_text.find(')').unwrap()]
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let data = le_floats(&bytes[start + header_len..]);
    assert_eq!(
        data.len(),
        shape.iter().product::<usize>(),
        "{}",
        path.display()
    );
    (shape, data)
}

/// The largest absolute difference between two equally long arrays.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).abs())
        .fold(0.0, f64::max)
}

/// Little-endian float32 values, as embedding tensors and `.npy` files hold them.
pub fn le_floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
