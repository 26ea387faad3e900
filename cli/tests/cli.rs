//! The `sam2` command as a user runs it: the built binary on the generated tiny models and
//! testdata/shapes.ppm converted to PNG and JPEG in a temporary directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use image::{ImageEncoder, RgbImage};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn models() -> PathBuf {
    std::env::var_os("SAM2_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models"))
}

/// ONNX Runtime from the set-up's environment, else the set-up's venv copy.
fn onnxruntime() -> PathBuf {
    if let Some(p) = std::env::var_os("SAM2_ONNXRUNTIME_PATH") {
        return PathBuf::from(p);
    }
    let lib = root().join(".venv/lib");
    for entry in std::fs::read_dir(&lib).expect("run tools/setup/setup.sh first: no .venv") {
        let p = entry
            .unwrap()
            .path()
            .join("site-packages/onnxruntime/capi/libonnxruntime.so.1.31.1");
        if p.exists() {
            return p;
        }
    }
    panic!("no ONNX Runtime: run tools/setup/setup.sh first");
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sam2-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sam2(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sam2"))
        .args(args)
        .env("SAM2_ONNXRUNTIME_PATH", onnxruntime())
        .output()
        .expect("the sam2 binary runs")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited, not killed")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Reads a binary PPM (P6) or PGM (P5) with maxval 255.
fn read_pnm(path: &Path) -> (Vec<u8>, u32, u32) {
    let data = std::fs::read(path).unwrap();
    let mut fields = Vec::new();
    let mut at = 0;
    while fields.len() < 4 {
        while data[at].is_ascii_whitespace() {
            at += 1;
        }
        let start = at;
        while !data[at].is_ascii_whitespace() {
            at += 1;
        }
        fields.push(String::from_utf8_lossy(&data[start..at]).into_owned());
    }
    let (w, h): (u32, u32) = (fields[1].parse().unwrap(), fields[2].parse().unwrap());
    (data[at + 1..].to_vec(), w, h)
}

fn shapes() -> RgbImage {
    let (pixels, w, h) = read_pnm(&root().join("testdata/shapes.ppm"));
    RgbImage::from_raw(w, h, pixels[..(w * h * 3) as usize].to_vec()).unwrap()
}

fn truth(name: &str) -> Vec<u8> {
    let (pixels, w, h) = read_pnm(&root().join(format!("testdata/shapes_{name}.pgm")));
    pixels[..(w * h) as usize]
        .iter()
        .map(|&v| (v != 0) as u8)
        .collect()
}

/// (name, click) of the shapes that have no look-alike twin.
const SHAPES: [(&str, &str); 3] = [
    ("red_disc", "100,112"),
    ("green_rect", "258,93"),
    ("yellow_triangle", "430,118"),
];

fn read_mask(path: &Path) -> Vec<u8> {
    let img = image::open(path).unwrap().to_luma8();
    img.as_raw().iter().map(|&v| (v > 127) as u8).collect()
}

fn iou(a: &[u8], b: &[u8]) -> f64 {
    let both = a
        .iter()
        .zip(b)
        .filter(|(x, y)| **x != 0 && **y != 0)
        .count();
    let either = a
        .iter()
        .zip(b)
        .filter(|(x, y)| **x != 0 || **y != 0)
        .count();
    both as f64 / either.max(1) as f64
}

fn model_arg() -> String {
    models().join("tiny_a").display().to_string()
}

/// Checks the JSON against the mask PNG: the RLE decodes to it, the polygons rasterise to it.
fn check_json(json_path: &Path, mask: &[u8], w: usize, h: usize) {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json_path).unwrap()).unwrap();
    let a = &doc["annotations"][0];
    assert_eq!(a["segmentation"]["size"], serde_json::json!([h, w]));
    let rle =
        sam2::masks::Rle::from_coco_string(a["segmentation"]["counts"].as_str().unwrap(), w, h)
            .unwrap();
    assert_eq!(
        rle.decode().unwrap(),
        mask,
        "the JSON's RLE is the mask PNG"
    );
    assert_eq!(
        a["area"].as_u64().unwrap(),
        mask.iter().map(|&v| v as u64).sum::<u64>()
    );
    let [x0, y0, _, _] = rle.bbox().unwrap();
    assert_eq!(a["bbox"][0].as_u64().unwrap(), x0 as u64);
    assert_eq!(a["bbox"][1].as_u64().unwrap(), y0 as u64);
    assert!(a["score"].as_f64().unwrap() > 0.0);
    let ring = |v: &serde_json::Value| -> Vec<[f32; 2]> {
        let flat: Vec<f32> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        flat.chunks(2).map(|p| [p[0], p[1]]).collect()
    };
    let polygons: Vec<sam2::masks::Polygon> = a["polygons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| sam2::masks::Polygon {
            outer: ring(&p["outer"]),
            holes: p["holes"].as_array().unwrap().iter().map(ring).collect(),
        })
        .collect();
    assert!(!polygons.is_empty());
    assert_eq!(
        sam2::masks::rasterize(&polygons, w, h),
        mask,
        "the polygons at tolerance 0 are the mask"
    );
}

#[test]
fn a_click_on_a_png_gives_that_shape_with_json_mask_and_overlay() {
    let dir = scratch("png");
    let png = dir.join("shapes.png");
    shapes().save(&png).unwrap();
    for (name, click) in SHAPES {
        let out = dir.join(name);
        let run = sam2(&[
            "segment",
            png.to_str().unwrap(),
            "--model",
            &model_arg(),
            "--point",
            click,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code(&run), 0, "{}", stderr(&run));
        let mask = read_mask(&dir.join(format!("{name}.mask.png")));
        let score = iou(&mask, &truth(name));
        assert!(score >= 0.9, "{name}: IoU {score}");
        check_json(&dir.join(format!("{name}.json")), &mask, 512, 384);
        let overlay = image::open(dir.join(format!("{name}.overlay.png"))).unwrap();
        assert_eq!((overlay.width(), overlay.height()), (512, 384));
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `sam2 everything` on the shapes image finds each shape that has no twin (IoU ≥ 0.9 with its
/// ground truth, decoding the JSON's RLE), with SAM2's default thresholds on a 16×16 grid.
#[test]
fn everything_finds_each_shape_and_writes_coco_annotations() {
    let dir = scratch("everything");
    let png = dir.join("shapes.png");
    shapes().save(&png).unwrap();
    let out = dir.join("all");
    let run = sam2(&[
        "everything",
        png.to_str().unwrap(),
        "--model",
        &model_arg(),
        "--points-per-side",
        "16",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("all.json")).unwrap()).unwrap();
    let annotations = json["annotations"].as_array().unwrap();
    assert_eq!(json["generator"]["points_per_side"], 16);
    let masks: Vec<Vec<u8>> = annotations
        .iter()
        .map(|a| {
            assert!(a["predicted_iou"].as_f64().unwrap() > 0.8);
            assert!(a["stability_score"].as_f64().unwrap() >= 0.95);
            let counts = a["segmentation"]["counts"].as_str().unwrap();
            let rle = sam2::masks::Rle::from_coco_string(counts, 512, 384).unwrap();
            assert_eq!(rle.area(), a["area"].as_u64().unwrap());
            rle.decode().unwrap()
        })
        .collect();
    for (name, _) in SHAPES {
        let truth = truth(name);
        let best = masks.iter().map(|m| iou(m, &truth)).fold(0.0, f64::max);
        assert!(
            best >= 0.9,
            "{name}: best IoU {best} among {} masks",
            masks.len()
        );
    }
    let overlay = image::open(dir.join("all.overlay.png")).unwrap();
    assert_eq!((overlay.width(), overlay.height()), (512, 384));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A JPEG stored rotated, with EXIF orientation 6 (rotate 90° clockwise to display), and a 16-bit
/// RGBA PNG: both give the shape in the upright frame; an 8-bit grey and alpha PNG is read too.
#[test]
fn jpeg_with_exif_orientation_and_16_bit_rgba_png_are_read_upright() {
    let dir = scratch("jpeg");
    let stored = image::imageops::rotate270(&shapes());
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 95)
        .write_image(
            stored.as_raw(),
            stored.width(),
            stored.height(),
            image::ExtendedColorType::Rgb8,
        )
        .unwrap();
    // An APP1 Exif segment right after SOI: a big-endian TIFF header and one IFD entry,
    // Orientation (0x0112), SHORT, 1 value: 6.
    let mut exif = vec![0xFF, 0xE1, 0, 34];
    exif.extend_from_slice(
        b"Exif\0\0MM\0\x2a\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x06\0\0\0\0\0\0",
    );
    jpeg.splice(2..2, exif);
    let jpg = dir.join("rotated.jpg");
    std::fs::write(&jpg, &jpeg).unwrap();

    let rgb = shapes();
    let wide = image::ImageBuffer::<image::Rgba<u16>, Vec<u16>>::from_fn(
        rgb.width(),
        rgb.height(),
        |x, y| {
            let p = rgb.get_pixel(x, y).0;
            image::Rgba([
                p[0] as u16 * 257,
                p[1] as u16 * 257,
                p[2] as u16 * 257,
                40000,
            ])
        },
    );
    let png16 = dir.join("wide.png");
    wide.save(&png16).unwrap();
    // Grey with alpha: read (grey spread to RGB, alpha ignored) and segmented at full size; the
    // tiny model segments by colour, so only the red disc's grey level is asked to stand out.
    let grey = image::DynamicImage::ImageRgb8(rgb.clone()).to_luma_alpha8();
    let png_grey = dir.join("grey.png");
    grey.save(&png_grey).unwrap();
    let out = dir.join("grey");
    let run = sam2(&[
        "segment",
        png_grey.to_str().unwrap(),
        "--model",
        &model_arg(),
        "--point",
        "100,112",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 0, "grey: {}", stderr(&run));
    let mask = read_mask(&dir.join("grey.mask.png"));
    assert_eq!(mask.len(), 512 * 384);
    assert!(
        mask[112 * 512 + 100] == 1,
        "grey: the clicked pixel is in the mask"
    );

    for (input, tag) in [(&jpg, "jpeg"), (&png16, "png16")] {
        let out = dir.join(tag);
        let run = sam2(&[
            "segment",
            input.to_str().unwrap(),
            "--model",
            &model_arg(),
            "--point",
            "100,112",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code(&run), 0, "{tag}: {}", stderr(&run));
        let mask = read_mask(&dir.join(format!("{tag}.mask.png")));
        assert_eq!(
            mask.len(),
            512 * 384,
            "{tag}: the mask is in the upright frame"
        );
        let score = iou(&mask, &truth("red_disc"));
        assert!(score >= 0.9, "{tag}: IoU {score}");
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("jpeg.json")).unwrap()).unwrap();
    assert_eq!(doc["image"]["exif_orientation"], 6);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_embedding_file_replaces_the_encode_and_multimask_writes_every_candidate() {
    let dir = scratch("embedding");
    let png = dir.join("shapes.png");
    shapes().save(&png).unwrap();
    let emb = dir.join("shapes.sam2emb");
    let run = sam2(&[
        "encode",
        png.to_str().unwrap(),
        "--model",
        &model_arg(),
        "-o",
        emb.to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let model = model_arg();
    let direct = dir.join("direct");
    let reused = dir.join("reused");
    for (out, extra) in [(&direct, None), (&reused, Some(emb.to_str().unwrap()))] {
        let mut args = vec!["segment", png.to_str().unwrap(), "--model", &model];
        args.extend([
            "--point",
            "258,93",
            "--multimask",
            "-o",
            out.to_str().unwrap(),
        ]);
        if let Some(e) = extra {
            args.extend(["--embedding", e]);
        }
        let run = sam2(&args);
        assert_eq!(code(&run), 0, "{}", stderr(&run));
    }
    for k in 0..3 {
        let a = read_mask(&dir.join(format!("direct.mask-{k}.png")));
        let b = read_mask(&dir.join(format!("reused.mask-{k}.png")));
        assert_eq!(
            a, b,
            "candidate {k}: the saved embedding gives the same mask"
        );
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reused.json")).unwrap()).unwrap();
    assert_eq!(doc["annotations"].as_array().unwrap().len(), 3);
    // An embedding of another model is refused as a model error.
    let other = models().join("tiny_b");
    let run = sam2(&[
        "segment",
        png.to_str().unwrap(),
        "--model",
        other.to_str().unwrap(),
        "--point",
        "1,1",
        "--embedding",
        emb.to_str().unwrap(),
        "-o",
        dir.join("x").to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 4, "{}", stderr(&run));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn errors_are_one_line_with_the_documented_exit_codes() {
    let dir = scratch("errors");
    let png = dir.join("shapes.png");
    shapes().save(&png).unwrap();
    let p = png.to_str().unwrap();
    let m = model_arg();
    let out = dir.join("o");
    let o = out.to_str().unwrap();
    let missing = dir.join("missing.png");
    let not_image = dir.join("notes.png");
    std::fs::write(&not_image, b"not an image").unwrap();
    let all_models = models();
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec![], 2, "no command"),
        (vec!["frobnicate"], 2, "unknown command"),
        (
            vec!["segment", p, "--model", &m, "-o", o],
            2,
            "needs a prompt",
        ),
        (
            vec!["segment", p, "--model", &m, "--point", "12", "-o", o],
            2,
            "X,Y",
        ),
        (
            vec![
                "segment", p, "--model", &m, "--point", "1,2", "--color", "-o", o,
            ],
            2,
            "unknown option --color",
        ),
        (
            vec![
                "segment", p, "--model", &m, "--point", "1,2", "--device", "tpu", "-o", o,
            ],
            2,
            "--device tpu",
        ),
        (
            vec!["segment", p, "--point", "1,2", "-o", o],
            2,
            "a model is needed",
        ),
        (vec!["everything", p, "--model", &m], 2, "needs -o OUT"),
        (
            vec![
                "everything",
                p,
                "--model",
                &m,
                "--points-per-side",
                "0",
                "-o",
                o,
            ],
            2,
            "--points-per-side 0",
        ),
        (
            vec![
                "everything",
                p,
                "--model",
                &m,
                "--pred-iou-thresh",
                "1.5",
                "-o",
                o,
            ],
            2,
            "from 0 to 1",
        ),
        (
            vec![
                "segment",
                missing.to_str().unwrap(),
                "--model",
                &m,
                "--point",
                "1,2",
                "-o",
                o,
            ],
            3,
            "missing.png",
        ),
        (
            vec![
                "segment",
                not_image.to_str().unwrap(),
                "--model",
                &m,
                "--point",
                "1,2",
                "-o",
                o,
            ],
            3,
            "notes.png",
        ),
        (
            vec!["segment", p, "--model", &m, "--point", "9000,2", "-o", o],
            3,
            "point",
        ),
        (
            vec![
                "segment",
                p,
                "--model",
                all_models.to_str().unwrap(),
                "--point",
                "1,2",
                "-o",
                o,
            ],
            4,
            "pairs",
        ),
        (
            vec![
                "segment",
                p,
                "--model",
                dir.to_str().unwrap(),
                "--point",
                "1,2",
                "-o",
                o,
            ],
            4,
            "no SAM2 encoder/decoder pair",
        ),
        (
            vec![
                "segment",
                p,
                "--model",
                &m,
                "--point",
                "1,2",
                "--onnxruntime",
                "/nonexistent/libonnxruntime.so",
                "-o",
                o,
            ],
            5,
            "ONNX Runtime",
        ),
        (
            vec![
                "segment",
                p,
                "--model",
                &m,
                "--point",
                "1,2",
                "-o",
                "/proc/sam2-cannot/o",
            ],
            6,
            "cannot",
        ),
        // DirectML never exists on this platform: asked for and refused, whatever the build.
        (
            vec![
                "segment",
                p,
                "--model",
                &m,
                "--point",
                "1,2",
                "--device",
                "directml",
                "--on-mismatch",
                "fail",
                "-o",
                o,
            ],
            5,
            "DmlExecutionProvider",
        ),
    ];
    for (args, expected, fragment) in cases {
        let run = sam2(&args);
        let text = stderr(&run);
        assert_eq!(code(&run), expected, "sam2 {}: {text}", args.join(" "));
        assert!(
            text.contains(fragment),
            "sam2 {}: {text:?} lacks {fragment:?}",
            args.join(" ")
        );
        assert_eq!(text.trim_end().lines().count(), 1, "one line: {text:?}");
        assert!(text.starts_with("sam2: "), "{text:?}");
    }
    // The default policy falls back with a warning and segments on the CPU.
    let run = sam2(&[
        "segment", p, "--model", &m, "--point", "100,112", "--device", "directml", "-o", o,
    ]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(
        stderr(&run).contains("sam2: warning: encoder"),
        "{}",
        stderr(&run)
    );
    let help = sam2(&["--help"]);
    assert_eq!(code(&help), 0);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("Exit codes") && text.contains("Examples"),
        "{text}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn info_names_the_export_and_the_fingerprint() {
    let run = sam2(&["info", &model_arg()]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(
        text.contains("pair: tiny_a (sam2's generator naming)"),
        "{text}"
    );
    assert!(
        text.contains("role: encoder") && text.contains("role: decoder, samexporter export"),
        "{text}"
    );
    assert!(text.contains("fingerprint: sam2fp1-"), "{text}");
    let run = sam2(&[
        "info",
        root().join("testdata/shapes.json").to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 4, "{}", stderr(&run));
}

/// A video export's directory: the four modules, each with its role, family and precision, and
/// no image pair made of its image encoder and decoder.
#[test]
fn info_lists_a_video_exports_four_modules() {
    let run = sam2(&["info", models().join("track").to_str().unwrap()]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(
        text.contains("video modules (the four-module contract"),
        "{text}"
    );
    assert!(!text.contains("pair:"), "{text}");
    for role in [
        "image encoder",
        "memory attention",
        "image decoder",
        "memory encoder",
    ] {
        assert_eq!(
            text.matches(&format!("role: video {role} ")).count(),
            1,
            "{role}: {text}"
        );
    }
    assert_eq!(
        text.matches("precision: fp32 (as exported)").count(),
        4,
        "{text}"
    );
}

/// Runs the command with a deadline: a hang is a failure, not a stuck test.
fn sam2_within(args: &[&std::ffi::OsStr], dir: Option<&Path>, seconds: u64) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sam2"));
    command
        .args(args)
        .env("SAM2_ONNXRUNTIME_PATH", onnxruntime())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn().expect("the sam2 binary runs");
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(seconds) {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("sam2 {:?} still running after {seconds} s (it hangs)", args);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(std::ffi::OsString::from).collect()
}

fn run_within(args: &[&str], dir: Option<&Path>, seconds: u64) -> Output {
    let args = os(args);
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    sam2_within(&refs, dir, seconds)
}

/// One line, `sam2: …`, containing each fragment.
fn assert_one_line(run: &Output, fragments: &[&str]) {
    let text = stderr(run);
    assert_eq!(text.trim_end().lines().count(), 1, "one line: {text:?}");
    assert!(text.starts_with("sam2: "), "{text:?}");
    for f in fragments {
        assert!(text.contains(f), "{text:?} lacks {f:?}");
    }
}

/// CRC-32 (IEEE), as PNG chunks carry it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A real 1×1 PNG whose IHDR is rewritten to declare `width`×`height` (its CRC recomputed): a
/// few dozen bytes that ask a decoder for width × height × 3 bytes.
fn png_declaring(width: u32, height: u32) -> Vec<u8> {
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(&mut png)
        .write_image(&[10, 20, 30], 1, 1, image::ExtendedColorType::Rgb8)
        .unwrap();
    assert_eq!(&png[12..16], b"IHDR");
    png[16..20].copy_from_slice(&width.to_be_bytes());
    png[20..24].copy_from_slice(&height.to_be_bytes());
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

/// A real 16×16 baseline JPEG whose frame header (SOF0) is rewritten to declare
/// `width`×`height`.
fn jpeg_declaring(width: u16, height: u16) -> Vec<u8> {
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90)
        .write_image(&[128; 16 * 16 * 3], 16, 16, image::ExtendedColorType::Rgb8)
        .unwrap();
    let sof = jpeg
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("a baseline frame header");
    // FFC0, length (2), precision (1), height (2), width (2).
    jpeg[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
    jpeg[sof + 7..sof + 9].copy_from_slice(&width.to_be_bytes());
    jpeg
}

/// Decompression bombs: a 100000×100000 PNG and a 65500×65500 JPEG of a few hundred bytes are
/// refused from their headers with exit 3, in well under a second's work and within a 1 GiB
/// address space (before the limit the PNG aborted allocating 30 GB and the JPEG grew to 24 GB);
/// `--max-pixels` moves the limit, and an image exactly at it is read.
#[cfg(unix)]
#[test]
fn decompression_bombs_are_refused_from_their_headers_in_bounded_memory() {
    let dir = scratch("bombs");
    let png = dir.join("bomb.png");
    std::fs::write(&png, png_declaring(100_000, 100_000)).unwrap();
    let jpg = dir.join("bomb.jpg");
    std::fs::write(&jpg, jpeg_declaring(65500, 65500)).unwrap();
    let m = model_arg();
    let out = dir.join("o");
    for (bomb, declared) in [(&png, "100000×100000"), (&jpg, "65500×65500")] {
        let size = std::fs::metadata(bomb).unwrap().len();
        assert!(size < 1000, "{} is {size} bytes", bomb.display());
        for command in ["segment", "encode", "everything"] {
            let mut args = vec![
                "-c",
                // 1 GiB of address space: an allocation of the declared size fails (an abort).
                "ulimit -v 1048576 && exec \"$0\" \"$@\"",
                env!("CARGO_BIN_EXE_sam2"),
                command,
                bomb.to_str().unwrap(),
                "--model",
                &m,
                "-o",
                out.to_str().unwrap(),
            ];
            if command == "segment" {
                args.extend(["--point", "1,1"]);
            }
            let start = std::time::Instant::now();
            let run = Command::new("sh")
                .args(&args)
                .env("SAM2_ONNXRUNTIME_PATH", onnxruntime())
                .output()
                .unwrap();
            let took = start.elapsed();
            assert_eq!(
                run.status.code(),
                Some(3),
                "{command} {}: {:?} {}",
                bomb.display(),
                run.status,
                stderr(&run)
            );
            assert_one_line(&run, &[declared, "250000000 pixels", "--max-pixels"]);
            assert!(took.as_secs() < 10, "{command}: {took:?}");
        }
    }
    // The limit is the flag's: the 512×384 image is refused one pixel under its size and read
    // at it.
    let shapes_png = dir.join("shapes.png");
    shapes().save(&shapes_png).unwrap();
    let p = shapes_png.to_str().unwrap();
    let o = out.to_str().unwrap();
    let run = sam2(&[
        "segment",
        p,
        "--model",
        &m,
        "--point",
        "100,112",
        "--max-pixels",
        "196607",
        "-o",
        o,
    ]);
    assert_eq!(code(&run), 3, "{}", stderr(&run));
    assert_one_line(&run, &["512×384", "196607 pixels"]);
    let run = sam2(&[
        "segment",
        p,
        "--model",
        &m,
        "--point",
        "100,112",
        "--max-pixels",
        "196608",
        "-o",
        o,
    ]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(dir.join("o.mask.png").is_file());
    let run = sam2(&[
        "segment",
        p,
        "--model",
        &m,
        "--point",
        "1,1",
        "--max-pixels",
        "0",
        "-o",
        o,
    ]);
    assert_eq!(code(&run), 2, "{}", stderr(&run));
    assert_one_line(&run, &["--max-pixels 0"]);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A zlib stream of `1 + 258 * repeats` zero bytes: one literal, then "copy 258 bytes from 1
/// back" `repeats` times, in one fixed-Huffman deflate block (13 bits per 258 bytes).
fn zlib_of_zeros(repeats: usize) -> (Vec<u8>, usize) {
    struct Bits {
        out: Vec<u8>,
        acc: u64,
        len: u32,
    }
    impl Bits {
        // Deflate packs fields from the least significant bit...
        fn put(&mut self, value: u32, count: u32) {
            self.acc |= (value as u64) << self.len;
            self.len += count;
            while self.len >= 8 {
                self.out.push(self.acc as u8);
                self.acc >>= 8;
                self.len -= 8;
            }
        }
        // ...and Huffman codes from their most significant bit.
        fn code(&mut self, code: u32, count: u32) {
            self.put(code.reverse_bits() >> (32 - count), count);
        }
    }
    let mut bits = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        len: 0,
    };
    bits.put(1, 1); // the last block
    bits.put(1, 2); // fixed Huffman codes
    bits.code(0x30, 8); // literal 0
    for _ in 0..repeats {
        bits.code(0xC5, 8); // length 258 (code 285)
        bits.code(0, 5); // distance 1
    }
    bits.code(0, 7); // end of block
    bits.put(0, 7); // to a byte boundary
    let n = 1 + 258 * repeats;
    let mut out = bits.out;
    // Adler-32 of n zeros: a stays 1, b adds it n times.
    out.extend_from_slice(&((((n % 65521) as u32) << 16) | 1).to_be_bytes());
    (out, n)
}

/// A 1×1 PNG with an ICC profile (iCCP) that inflates to 256 MiB: read (the profile dropped) with
/// the decoder held to 64 MiB, inside a 200 MiB address space; before, the decoder inflated it
/// whole (266 MB resident) and, under the cap, aborted. The run stops at the missing ONNX Runtime
/// (exit 5), after the image was read.
#[cfg(unix)]
#[test]
fn a_png_whose_icc_profile_inflates_to_256_mib_is_read_in_bounded_memory() {
    let dir = scratch("iccp");
    let (profile, inflated) = zlib_of_zeros(256 * 1024 * 1024 / 258);
    assert!(inflated > 255 * 1024 * 1024);
    let mut chunk_data = b"icc\0\0".to_vec();
    chunk_data.extend_from_slice(&profile);
    let mut chunk = (chunk_data.len() as u32).to_be_bytes().to_vec();
    chunk.extend_from_slice(b"iCCP");
    chunk.extend_from_slice(&chunk_data);
    chunk.extend_from_slice(&crc32(&chunk[4..]).to_be_bytes());
    let mut png = png_declaring(1, 1);
    png.splice(33..33, chunk);
    let path = dir.join("iccp.png");
    std::fs::write(&path, &png).unwrap();
    let run = Command::new("sh")
        .args([
            "-c",
            "ulimit -v 204800 && exec \"$0\" \"$@\"",
            env!("CARGO_BIN_EXE_sam2"),
            "segment",
            path.to_str().unwrap(),
            "--model",
            &model_arg(),
            "--point",
            "0,0",
            "--onnxruntime",
            "/nonexistent/libonnxruntime.so",
            "-o",
            dir.join("o").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(5),
        "{:?} {}",
        run.status,
        stderr(&run)
    );
    assert_one_line(&run, &["ONNX Runtime could not be loaded"]);
    std::fs::remove_dir_all(dir).unwrap();
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Temporary files the command left in `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sam2tmp"))
        .collect()
}

/// `segment`'s outputs are written to temporaries and renamed into place: a symbolic link
/// planted at an output path is replaced, its target untouched; a FIFO there is replaced, never
/// opened (before, the write blocked for ever); a reader holding an old output open keeps the
/// whole old file (before, it was truncated in place).
#[cfg(unix)]
#[test]
fn outputs_replace_a_planted_link_or_fifo_and_never_write_in_place() {
    let dir = scratch("outputs");
    let png = dir.join("shapes.png");
    shapes().save(&png).unwrap();
    let m = model_arg();
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, b"not yours to overwrite").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("o.mask.png")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("o.json")).unwrap();
    mkfifo(&dir.join("o.overlay.png"));
    let old_json = "{\"old\": true}\n".repeat(20_000);
    let held = dir.join("held.json");
    std::fs::write(&held, &old_json).unwrap();
    let mut reader = std::fs::File::open(&held).unwrap();
    for prefix in ["o", "held"] {
        let out = dir.join(prefix);
        let run = run_within(
            &[
                "segment",
                png.to_str().unwrap(),
                "--model",
                &m,
                "--point",
                "100,112",
                "-o",
                out.to_str().unwrap(),
            ],
            None,
            120,
        );
        assert_eq!(code(&run), 0, "{prefix}: {}", stderr(&run));
    }
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "not yours to overwrite",
        "the link's target is untouched"
    );
    for name in ["o.mask.png", "o.overlay.png", "o.json"] {
        let meta = std::fs::symlink_metadata(dir.join(name)).unwrap();
        assert!(meta.file_type().is_file(), "{name} is now a regular file");
    }
    let mask = read_mask(&dir.join("o.mask.png"));
    assert!(iou(&mask, &truth("red_disc")) >= 0.9);
    check_json(&dir.join("o.json"), &mask, 512, 384);
    let mut still = String::new();
    std::io::Read::read_to_string(&mut reader, &mut still).unwrap();
    assert!(
        still == old_json,
        "the old file, whole, for whoever holds it: {} bytes",
        still.len()
    );
    check_json(
        &dir.join("held.json"),
        &read_mask(&dir.join("held.mask.png")),
        512,
        384,
    );
    assert_eq!(leftovers(&dir), Vec::<String>::new());
    std::fs::remove_dir_all(dir).unwrap();
}

/// All or nothing: when the JSON cannot be written (its path is a directory), exit 6 and no
/// fresh PNG is left (before, the masks and overlay were written first and stayed); existing
/// outputs keep their old contents, and no temporary file remains.
#[cfg(unix)]
#[test]
fn a_failed_output_leaves_no_fresh_file_and_the_old_ones_whole() {
    let dir = scratch("all-or-nothing");
    let png = dir.join("shapes.png");
    shapes().save(&png).unwrap();
    let m = model_arg();
    std::fs::create_dir(dir.join("new.json")).unwrap();
    std::fs::create_dir(dir.join("old.json")).unwrap();
    std::fs::write(dir.join("old.mask.png"), b"old mask").unwrap();
    for prefix in ["new", "old"] {
        let out = dir.join(prefix);
        let run = sam2(&[
            "segment",
            png.to_str().unwrap(),
            "--model",
            &m,
            "--point",
            "100,112",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code(&run), 6, "{prefix}: {}", stderr(&run));
        assert_one_line(&run, &[&format!("{prefix}.json"), "directory"]);
    }
    assert!(!dir.join("new.mask.png").exists(), "no fresh mask");
    assert!(!dir.join("new.overlay.png").exists(), "no fresh overlay");
    assert!(!dir.join("old.overlay.png").exists(), "no fresh overlay");
    assert_eq!(
        std::fs::read(dir.join("old.mask.png")).unwrap(),
        b"old mask"
    );
    assert_eq!(leftovers(&dir), Vec::<String>::new());
    std::fs::remove_dir_all(dir).unwrap();
}

/// Inputs that are not regular files are refused by name before anything reads them, in one
/// line: a FIFO as the image (exit 3; before, the command hung), a FIFO or /dev/zero as the
/// encoder whose fingerprint `--embedding` checks (exit 4; before, a hang, and a read until
/// memory ran out), and a FIFO as the embedding (exit 3).
#[cfg(unix)]
#[test]
fn a_fifo_or_device_given_as_an_input_is_refused_at_once() {
    let dir = scratch("inputs");
    let png = dir.join("shapes.png");
    shapes().save(&png).unwrap();
    let p = png.to_str().unwrap();
    let m = model_arg();
    let emb = dir.join("shapes.sam2emb");
    let run = sam2(&["encode", p, "--model", &m, "-o", emb.to_str().unwrap()]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let e = emb.to_str().unwrap();
    let fifo = dir.join("pipe.png");
    mkfifo(&fifo);
    let f = fifo.to_str().unwrap();
    let decoder = models().join("tiny_a_decoder.onnx");
    let d = decoder.to_str().unwrap();
    assert!(decoder.is_file(), "{d}");
    let o = dir.join("o");
    let o = o.to_str().unwrap();
    let point = ["--point", "1,1"];
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["segment", f, "--model", &m, "-o", o], 3, "FIFO"),
        (vec!["encode", f, "--model", &m, "-o", o], 3, "FIFO"),
        (
            vec![
                "segment",
                p,
                "--encoder",
                f,
                "--decoder",
                d,
                "--embedding",
                e,
                "-o",
                o,
            ],
            4,
            "FIFO",
        ),
        (
            vec![
                "segment",
                p,
                "--encoder",
                "/dev/zero",
                "--decoder",
                d,
                "--embedding",
                e,
                "-o",
                o,
            ],
            4,
            "character device",
        ),
        (
            vec![
                "segment",
                p,
                "--encoder",
                "/dev/zero",
                "--decoder",
                d,
                "-o",
                o,
            ],
            4,
            "character device",
        ),
        (
            vec!["segment", p, "--model", &m, "--embedding", f, "-o", o],
            3,
            "FIFO",
        ),
    ];
    for (mut args, expected, fragment) in cases {
        if args[0] == "segment" {
            args.extend(point);
        }
        let run = run_within(&args, None, 60);
        assert_eq!(
            code(&run),
            expected,
            "sam2 {}: {}",
            args.join(" "),
            stderr(&run)
        );
        assert_one_line(&run, &[fragment]);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// An argument that is not UTF-8 is a usage error (exit 2, one line naming it), not a panic.
#[cfg(unix)]
#[test]
fn a_non_utf8_argument_is_a_usage_error() {
    use std::os::unix::ffi::OsStrExt;
    let image = std::ffi::OsStr::from_bytes(b"caf\xe9.png");
    let model = model_arg();
    let args: Vec<&std::ffi::OsStr> = vec![
        "segment".as_ref(),
        image,
        "--model".as_ref(),
        model.as_ref(),
        "--point".as_ref(),
        "1,1".as_ref(),
        "-o".as_ref(),
        "o".as_ref(),
    ];
    let run = sam2_within(&args, None, 60);
    assert_eq!(code(&run), 2, "{}", stderr(&run));
    assert_one_line(&run, &["argument 2", "not valid UTF-8"]);
}

/// Each command has its own help (`sam2 segment --help` and `sam2 help segment` alike), a
/// mistyped command or option gets a suggestion on its one line of usage error, and
/// `sam2 completions SHELL` writes a completion script.
#[test]
fn each_command_has_its_help_typos_get_suggestions_and_completions_are_written() {
    let stdout = |out: &Output| String::from_utf8_lossy(&out.stdout).into_owned();
    let help = sam2(&["segment", "--help"]);
    assert_eq!(code(&help), 0, "{}", stderr(&help));
    let text = stdout(&help);
    for option in [
        "--point",
        "--box",
        "--multimask",
        "--embedding",
        "--device",
        "--quiet",
    ] {
        assert!(
            text.contains(option),
            "segment's help lacks {option}: {text}"
        );
    }
    for other in ["--direction", "--object", "--points-per-side"] {
        assert!(
            !text.contains(other),
            "segment's help shows {other}: {text}"
        );
    }
    assert_eq!(stdout(&sam2(&["help", "segment"])), text);
    let track = stdout(&sam2(&["track", "-h"]));
    assert!(
        track.contains("--direction") && !track.contains("--multimask"),
        "{track}"
    );

    let typo = sam2(&["segmnt", "photo.png"]);
    assert_eq!(code(&typo), 2, "{}", stderr(&typo));
    assert_one_line(&typo, &["unknown command segmnt", "did you mean segment?"]);
    let typo = sam2(&["segment", "photo.png", "--multimsk"]);
    assert_eq!(code(&typo), 2, "{}", stderr(&typo));
    assert_one_line(
        &typo,
        &["unknown option --multimsk", "did you mean --multimask?"],
    );

    let version = sam2(&["--version"]);
    assert_eq!(code(&version), 0);
    assert!(
        stdout(&version).starts_with("sam2 "),
        "{}",
        stdout(&version)
    );

    for (shell, mark) in [
        ("bash", "complete"),
        ("zsh", "#compdef"),
        ("fish", "complete -c sam2"),
    ] {
        let script = sam2(&["completions", shell]);
        assert_eq!(code(&script), 0, "{shell}: {}", stderr(&script));
        let text = stdout(&script);
        assert!(
            text.contains(mark) && text.contains("segment"),
            "{shell}: {text}"
        );
        assert!(text.contains("multimask"), "{shell}: {text}");
    }
    let unknown = sam2(&["completions", "tcsh"]);
    assert_eq!(code(&unknown), 2, "{}", stderr(&unknown));
    assert_one_line(&unknown, &["tcsh"]);
}

/// `--quiet`, before the command or among its options, is accepted and changes nothing but the
/// progress (which a pipe never gets): the files and the summary line are the same.
#[test]
fn quiet_is_accepted_anywhere_and_keeps_the_summary() {
    let dir = scratch("quiet");
    let png = dir.join("shapes.png");
    shapes().save(&png).unwrap();
    let p = png.to_str().unwrap();
    let m = model_arg();
    let mut lines = Vec::new();
    for (tag, before, after) in [("plain", "", ""), ("q1", "--quiet", ""), ("q2", "", "-q")] {
        let out = dir.join(tag);
        let o = out.to_str().unwrap();
        let mut args: Vec<&str> = vec![before, "segment", p, "--model", &m];
        args.extend(["--point", "100,112", "-o", o, after]);
        args.retain(|a| !a.is_empty());
        let run = sam2(&args);
        assert_eq!(code(&run), 0, "{tag}: {}", stderr(&run));
        assert!(dir.join(format!("{tag}.mask.png")).is_file(), "{tag}");
        lines.push(stderr(&run).replace(tag, "OUT"));
    }
    assert_eq!(lines[0].lines().count(), 1, "{:?}", lines[0]);
    assert!(lines.iter().all(|l| *l == lines[0]), "{lines:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `-o DIR` for an existing directory (or a path ending in `/`, created) writes
/// `DIR/<image stem>.mask.png` and so on, `-o .` writes them in the current directory under the
/// image's name (before: hidden `.mask.png` files), and `-o ""` is a usage error.
#[test]
fn an_output_directory_receives_files_named_after_the_image() {
    let dir = scratch("out-dir");
    let png = dir.join("shapes.png");
    shapes().save(&png).unwrap();
    let p = png.to_str().unwrap();
    let m = model_arg();
    std::fs::create_dir(dir.join("existing")).unwrap();
    let existing = dir.join("existing");
    let fresh = format!("{}/fresh/", dir.display());
    for out in [existing.to_str().unwrap(), fresh.as_str(), "."] {
        let run = run_within(
            &["segment", p, "--model", &m, "--point", "100,112", "-o", out],
            Some(&dir),
            120,
        );
        assert_eq!(code(&run), 0, "-o {out}: {}", stderr(&run));
    }
    for folder in [dir.join("existing"), dir.join("fresh"), dir.clone()] {
        for name in ["shapes.mask.png", "shapes.overlay.png", "shapes.json"] {
            assert!(
                folder.join(name).is_file(),
                "{}",
                folder.join(name).display()
            );
        }
        assert!(!folder.join(".mask.png").exists());
        let mask = read_mask(&folder.join("shapes.mask.png"));
        check_json(&folder.join("shapes.json"), &mask, 512, 384);
    }
    assert!(!dir.join("existing.mask.png").exists());
    let emb_dir = dir.join("embeddings");
    std::fs::create_dir(&emb_dir).unwrap();
    let run = sam2(&["encode", p, "--model", &m, "-o", emb_dir.to_str().unwrap()]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(emb_dir.join("shapes.sam2emb").is_file());
    let run = sam2(&["segment", p, "--model", &m, "--point", "1,1", "-o", ""]);
    assert_eq!(code(&run), 2, "{}", stderr(&run));
    assert_one_line(&run, &["-o needs a path"]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[path = "../../tests/common/track_clip.rs"]
#[allow(dead_code)]
mod track_clip;

/// The generated tracking clip as PNG files `DIR/00000.png` … (24 frames).
fn clip_frames(name: &str) -> PathBuf {
    let dir = scratch(name).join("clip");
    std::fs::create_dir_all(&dir).unwrap();
    for t in 0..track_clip::FRAMES {
        let (rgb, _, _) = track_clip::frame(t);
        RgbImage::from_raw(track_clip::WIDTH as u32, track_clip::HEIGHT as u32, rgb)
            .unwrap()
            .save(dir.join(format!("{t:05}.png")))
            .unwrap();
    }
    dir
}

fn track_model() -> String {
    models().join("track").display().to_string()
}

#[test]
fn track_follows_two_objects_forward_writing_a_mask_per_frame_and_a_coco_json() {
    let clip = clip_frames("track-forward");
    let out_dir = clip.parent().unwrap().join("out");
    let (cx, cy) = track_clip::target_centre(0);
    let (sx, sy) = track_clip::distractor_centre(0);
    let out = sam2(&[
        "track",
        clip.to_str().unwrap(),
        "--model",
        &track_model(),
        "--point",
        &format!("{cx},{cy}"),
        "--object",
        "2",
        "--point",
        &format!("{sx},{sy}"),
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("track.json")).unwrap())
            .unwrap();
    assert_eq!(json["frames"], 24);
    assert_eq!(json["model"]["precision"], "fp32");
    assert_eq!(json["images"].as_array().unwrap().len(), 24);
    let annotations = json["annotations"].as_array().unwrap();
    assert_eq!(annotations.len(), 48, "one annotation per object per frame");
    let (w, h) = (track_clip::WIDTH, track_clip::HEIGHT);
    for a in annotations {
        let t = a["frame"].as_u64().unwrap() as u32;
        let id = a["object_id"].as_u64().unwrap();
        let (_, disc, square) = track_clip::frame(t);
        let truth = if id == 1 { &disc } else { &square };
        let file = out_dir.join(a["mask_file"].as_str().unwrap());
        assert_eq!(file, out_dir.join(format!("masks/obj{id}/{t:05}.png")));
        let mask = read_mask(&file);
        // The RLE is the mask file's mask.
        let rle =
            sam2::masks::Rle::from_coco_string(a["segmentation"]["counts"].as_str().unwrap(), w, h)
                .unwrap();
        assert_eq!(
            rle,
            sam2::masks::Rle::encode(&mask, w, h),
            "frame {t} object {id}"
        );
        assert_eq!(a["area"], mask.iter().filter(|&&v| v != 0).count());
        let visible = truth.iter().any(|&v| v != 0);
        assert_eq!(
            a["present"], visible,
            "frame {t} object {id}: presence {}",
            a["object_score"]
        );
        if visible {
            assert!(
                iou(&mask, truth) >= 0.9,
                "frame {t} object {id}: IoU {:.3}",
                iou(&mask, truth)
            );
        } else {
            assert!(
                mask.iter().all(|&v| v == 0),
                "frame {t}: hidden, yet a mask"
            );
        }
    }
}

#[test]
fn track_goes_backward_from_a_prompt_on_the_last_frame() {
    let clip = clip_frames("track-backward");
    let out_dir = clip.parent().unwrap().join("out");
    let last = track_clip::FRAMES - 1;
    let (cx, cy) = track_clip::target_centre(last as i64);
    let out = sam2(&[
        "track",
        clip.to_str().unwrap(),
        "--model",
        &track_model(),
        "--frame",
        &last.to_string(),
        "--point",
        &format!("{cx},{cy}"),
        "--direction",
        "backward",
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for t in 0..track_clip::FRAMES {
        let (_, disc, _) = track_clip::frame(t);
        let mask = read_mask(&out_dir.join(format!("masks/obj1/{t:05}.png")));
        if disc.iter().any(|&v| v != 0) {
            assert!(
                iou(&mask, &disc) >= 0.9,
                "frame {t}: IoU {:.3}",
                iou(&mask, &disc)
            );
        } else {
            assert!(mask.iter().all(|&v| v == 0), "frame {t}");
        }
    }
}

#[test]
fn track_refuses_bad_frames_prompts_and_models_with_the_documented_codes_writing_nothing() {
    let clip = clip_frames("track-errors");
    let root = clip.parent().unwrap().to_path_buf();
    let out_dir = root.join("out");
    let run = |extra: &[&str], frames: &Path, model: &str| {
        let mut args = vec!["track", frames.to_str().unwrap(), "--model", model];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", out_dir.to_str().unwrap()]);
        sam2(&args)
    };
    let model = track_model();
    // A prompt on a frame the clip does not have: bad input, naming the frame count.
    let out = run(&["--frame", "24", "--point", "30,30"], &clip, &model);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("24 frames"), "{}", stderr(&out));
    // No prompt, an unknown direction, an option of another command: usage.
    for extra in [
        &[][..],
        &["--point", "30,30", "--direction", "sideways"][..],
        &["--point", "30,30", "--multimask"][..],
    ] {
        let out = run(extra, &clip, &model);
        assert_eq!(code(&out), 2, "{extra:?}: {}", stderr(&out));
    }
    // A directory with image pairs but no video model: a model error naming the modules.
    let out = run(
        &["--point", "30,30"],
        &clip,
        &models().display().to_string(),
    );
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("memory_attention.onnx"),
        "{}",
        stderr(&out)
    );
    // A frame of another size, and a directory with no frames: bad input naming the file.
    let odd = root.join("odd");
    std::fs::create_dir_all(&odd).unwrap();
    for t in 0..3u32 {
        let size = if t == 2 {
            100
        } else {
            track_clip::WIDTH as u32
        };
        RgbImage::new(size, track_clip::HEIGHT as u32)
            .save(odd.join(format!("{t}.png")))
            .unwrap();
    }
    let out = run(&["--point", "30,30"], &odd, &model);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("2.png"), "{}", stderr(&out));
    // The two frames tracked before it are kept, in a result that says it is partial and why.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("track.json")).unwrap())
            .unwrap();
    assert_eq!(json["complete"], false);
    assert_eq!(json["partial"]["frames_tracked"], 2);
    assert!(json["partial"]["reason"]
        .as_str()
        .unwrap()
        .contains("2.png"));
    assert_eq!(json["images"].as_array().unwrap().len(), 2);
    for a in json["annotations"].as_array().unwrap() {
        assert!(out_dir.join(a["mask_file"].as_str().unwrap()).is_file());
    }
    assert!(stderr(&out).contains("marked partial"), "{}", stderr(&out));
    std::fs::remove_dir_all(&out_dir).unwrap();
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = run(&["--point", "30,30"], &empty, &model);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        !out_dir.exists(),
        "a run that tracked nothing created its output directory"
    );
}

/// `frames` PNG frames of `w`×`h` in a new folder: two discs on grey, moving right a pixel a frame
/// (cheap to encode, and each tracked as one object).
fn disc_frames(name: &str, frames: u32, w: u32, h: u32) -> PathBuf {
    let dir = scratch(name).join("clip");
    std::fs::create_dir_all(&dir).unwrap();
    let r = (h / 8) as i64;
    for t in 0..frames {
        let centres = [
            (w as i64 / 4 + t as i64, h as i64 / 2),
            (3 * w as i64 / 4, h as i64 / 3),
        ];
        let img = RgbImage::from_fn(w, h, |x, y| {
            let inside = |(cx, cy): (i64, i64)| {
                let (dx, dy) = (x as i64 - cx, y as i64 - cy);
                dx * dx + dy * dy <= r * r
            };
            if inside(centres[0]) {
                image::Rgb([220, 40, 40])
            } else if inside(centres[1]) {
                image::Rgb([40, 60, 220])
            } else {
                image::Rgb([128, 128, 128])
            }
        });
        img.save(dir.join(format!("{t:05}.png"))).unwrap();
    }
    dir
}

/// `sam2 track` over `clip` with one click on each disc of [`disc_frames`].
fn track_discs(clip: &Path, out: &Path, w: u32, h: u32) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sam2"));
    c.args([
        "track",
        clip.to_str().unwrap(),
        "--model",
        &track_model(),
        "--point",
        &format!("{},{}", w / 4, h / 2),
        "--object",
        "2",
        "--point",
        &format!("{},{}", 3 * w / 4, h / 3),
        "-o",
        out.to_str().unwrap(),
    ])
    .env("SAM2_ONNXRUNTIME_PATH", onnxruntime())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped());
    c
}

/// Every entry under `dir` whose name says it is a temporary or a run's staging folder.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".sam2tmp") || name.starts_with(".sam2-") {
            found.push(e.path());
        }
        if e.file_type().unwrap().is_dir() {
            found.extend(temporaries(&e.path()));
        }
    }
    found
}

/// The PNG files under `dir/masks`.
fn mask_files(dir: &Path) -> usize {
    let mut n = 0;
    for obj in std::fs::read_dir(dir.join("masks"))
        .into_iter()
        .flatten()
        .flatten()
    {
        n += std::fs::read_dir(obj.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|f| f.path().extension().is_some_and(|e| e == "png"))
            .count();
    }
    n
}

/// A result's track.json, checked for consistency: every annotation's mask file exists, and the
/// masks folder holds exactly those files.
fn consistent_result(out: &Path) -> serde_json::Value {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("track.json")).unwrap()).unwrap();
    let annotations = json["annotations"].as_array().unwrap();
    for a in annotations {
        assert!(out.join(a["mask_file"].as_str().unwrap()).is_file(), "{a}");
    }
    assert_eq!(
        mask_files(out),
        annotations.len(),
        "masks beside track.json's"
    );
    let images = json["images"].as_array().unwrap().len();
    assert_eq!(annotations.len(), 2 * images);
    json
}

#[cfg(unix)]
#[test]
fn track_memory_stays_flat_in_the_number_of_frames() {
    // 1280×960 frames, 2 objects: holding the masks would add 2.5 MB a frame. Both clips are
    // longer than the tracker's memory bank (16 frames), which is bounded by design.
    let (w, h) = (1280, 960);
    let long = disc_frames("track-memory-long", 60, w, h);
    let short_dir = scratch("track-memory-short").join("clip");
    std::fs::create_dir_all(&short_dir).unwrap();
    for t in 0..20 {
        let name = format!("{t:05}.png");
        std::fs::copy(long.join(&name), short_dir.join(&name)).unwrap();
    }
    let peak = |clip: &Path| -> i64 {
        let out = clip.parent().unwrap().join("out");
        // Waited for by wait4 below, which also gives its resource use.
        #[allow(clippy::zombie_processes)]
        let child = track_discs(clip, &out, w, h).spawn().unwrap();
        let mut status = 0;
        // SAFETY: a zeroed rusage is valid; wait4 fills it for this child alone.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = child.id() as libc::pid_t;
        assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        consistent_result(&out);
        usage.ru_maxrss // KiB on Linux
    };
    let (short, long) = (peak(&short_dir), peak(&long));
    println!("sam2 track peak resident memory: 20 frames {short} KiB, 60 frames {long} KiB");
    // 40 more frames of masks held would be 98 MB; allow a tenth of it for noise.
    assert!(
        long - short < 10 * 1024,
        "peak resident memory grew with the frames: 20 frames {short} KiB, 60 frames {long} KiB"
    );
}

/// Starts `sam2 track` over `clip` into `out` and signals it once its staging folder holds a few
/// masks; returns its exit status and stderr.
#[cfg(unix)]
fn track_and_signal(clip: &Path, out: &Path, signal: i32) -> (std::process::ExitStatus, String) {
    let (w, h) = (track_clip::WIDTH as u32, track_clip::HEIGHT as u32);
    let mut child = track_discs(clip, out, w, h).spawn().unwrap();
    let stage = out.join(format!(".sam2-track-{}", child.id()));
    let start = std::time::Instant::now();
    loop {
        let masks = std::fs::read_dir(stage.join("masks/obj1"))
            .map(|d| d.count())
            .unwrap_or(0);
        if masks >= 4 {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it could be signalled"
        );
        assert!(start.elapsed().as_secs() < 60, "no masks were staged");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let output = child.wait_with_output().unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[cfg(unix)]
#[test]
fn an_interrupted_track_leaves_a_consistent_partial_result_and_no_temporaries() {
    use std::os::unix::process::ExitStatusExt;
    let (w, h) = (track_clip::WIDTH as u32, track_clip::HEIGHT as u32);
    let clip = disc_frames("track-interrupted", 150, w, h);
    let out = clip.parent().unwrap().join("out");
    // A complete result first, which the interrupted runs replace.
    let done = track_discs(&clip, &out, w, h).output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(consistent_result(&out)["complete"], true);
    for (signal, name, code) in [
        (libc::SIGINT, "SIGINT", 130),
        (libc::SIGTERM, "SIGTERM", 143),
    ] {
        let (status, err) = track_and_signal(&clip, &out, signal);
        assert_eq!(status.code(), Some(code), "{name}: {err}");
        let json = consistent_result(&out);
        assert_eq!(json["complete"], false, "{name}");
        let tracked = json["partial"]["frames_tracked"].as_u64().unwrap();
        assert!((4..150).contains(&tracked), "{name}: {tracked} frames");
        assert_eq!(json["images"].as_array().unwrap().len() as u64, tracked);
        assert!(json["partial"]["reason"].as_str().unwrap().contains(name));
        assert_eq!(temporaries(&out), Vec::<PathBuf>::new(), "{name}");
    }
    // Killed outright: the last result stays whole, the staging folder stays behind, and the next
    // run removes it.
    let before = std::fs::read(out.join("track.json")).unwrap();
    let (status, _) = track_and_signal(&clip, &out, libc::SIGKILL);
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert_eq!(std::fs::read(out.join("track.json")).unwrap(), before);
    consistent_result(&out);
    assert_eq!(
        temporaries(&out).len(),
        1,
        "the killed run's staging folder"
    );
    let again = track_discs(&clip, &out, w, h).output().unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(consistent_result(&out)["complete"], true);
    assert_eq!(temporaries(&out), Vec::<PathBuf>::new());
}

#[cfg(unix)]
#[test]
fn track_never_writes_through_links_planted_in_its_output_nor_over_its_frames() {
    let (w, h) = (track_clip::WIDTH as u32, track_clip::HEIGHT as u32);
    let clip = disc_frames("track-links", 3, w, h);
    let root = clip.parent().unwrap().to_path_buf();
    let out = root.join("out");
    let victim = root.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("00000.png"), b"the victim's file").unwrap();
    // masks/obj1 a link to the victim's folder: replaced as a link, the victim untouched.
    std::fs::create_dir_all(out.join("masks")).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("masks/obj1")).unwrap();
    let run = track_discs(&clip, &out, w, h).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        std::fs::read(victim.join("00000.png")).unwrap(),
        b"the victim's file"
    );
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
    assert!(!std::fs::symlink_metadata(out.join("masks/obj1"))
        .unwrap()
        .file_type()
        .is_symlink());
    consistent_result(&out);
    // masks itself a link: refused before anything is written.
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("masks")).unwrap();
    let run = track_discs(&clip, &out, w, h).output().unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(6), "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
    assert!(!out.join("track.json").exists());
    // Frames that are the last run's masks, tracked into the same folder: refused, naming the
    // clash, before anything is written.
    std::fs::remove_file(out.join("masks")).unwrap();
    let first = track_discs(&clip, &out, w, h).output().unwrap();
    assert!(first.status.success());
    let json_before = std::fs::read(out.join("track.json")).unwrap();
    let frames = out.join("masks/obj1");
    let masks_before: Vec<Vec<u8>> = (0..3)
        .map(|t| std::fs::read(frames.join(format!("{t:05}.png"))).unwrap())
        .collect();
    let run = track_discs(&frames, &out, w, h).output().unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{err}");
    assert!(err.contains("inside the output"), "{err}");
    assert_eq!(std::fs::read(out.join("track.json")).unwrap(), json_before);
    for (t, before) in masks_before.iter().enumerate() {
        assert_eq!(
            &std::fs::read(frames.join(format!("{t:05}.png"))).unwrap(),
            before
        );
    }
}

/// `model` with metadata entries appended (a later entry of a key overrides an earlier one).
fn with_metadata(model: &[u8], entries: &[(&str, &str)]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn field(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
        varint(out, number << 3 | 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    let mut m = model.to_vec();
    for (k, v) in entries {
        let mut entry = Vec::new();
        field(&mut entry, 1, k.as_bytes());
        field(&mut entry, 2, v.as_bytes());
        field(&mut m, 14, &entry);
    }
    m
}

#[test]
fn info_reports_the_graphs_precision_and_prints_metadata_escaped() {
    let dir = scratch("info-metadata");
    let int8 = std::fs::read(models().join("variants/tiny_a_int8/tiny_a_encoder.onnx")).unwrap();
    // An int8 graph labelled fp32: int8, and the label called out.
    let relabelled = dir.join("relabelled.onnx");
    std::fs::write(
        &relabelled,
        with_metadata(&int8, &[("sam2.precision", "fp32")]),
    )
    .unwrap();
    let run = sam2(&["info", relabelled.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(
        text.contains(
            "precision: int8 (read from the graph; its metadata says fp32, which the graph \
             contradicts)"
        ),
        "{text}"
    );
    // Escape sequences, BEL, a forged line and 100 kB in the metadata: escaped, cut.
    let forged = format!("x\u{1b}[2J\u{7}\n  precision: fp32{}", "z".repeat(100_000));
    let hostile = dir.join("hostile.onnx");
    std::fs::write(
        &hostile,
        with_metadata(&int8, &[("sam2.precision.source", &forged)]),
    )
    .unwrap();
    let run = sam2(&["info", hostile.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    // One precision line: the forged one stays inside it.
    let lines = text
        .lines()
        .filter(|l| l.trim_start().starts_with("precision:"));
    assert_eq!(lines.count(), 1, "{text}");
    assert!(
        text.contains("x\\u{1b}[2J\\u{7}\\u{a}  precision: fp32zz"),
        "{text}"
    );
    assert!(text.contains("more characters"), "{text}");
    assert!(text.len() < 4000, "{} bytes printed", text.len());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn info_says_which_rewrites_ran_and_no_rewrite_switches_them_off() {
    let model = models().join("track");
    let run = sam2(&["info", model.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("rewrites:")).collect();
    assert_eq!(lines.len(), 4, "one line per module: {text}");
    assert!(lines
        .iter()
        .all(|l| l.contains("attention 0") && !l.contains("switched off")));
    let run = sam2(&[
        "info",
        model.to_str().unwrap(),
        "--no-rewrite",
        "qkv-split,channel-means",
    ]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert_eq!(
        text.matches("; switched off: channel-means, qkv-split\n")
            .count(),
        8,
        "the attention and rewrites lines of each module: {text}"
    );
    let run = sam2(&["info", model.to_str().unwrap(), "--no-rewrite=all"]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        text.contains(
            "  rewrites: none; switched off: attention, values-after-attention, int8-scores, \
             channel-means, qkv-split, depthwise-branches\n"
        ),
        "{text}"
    );
    let run = sam2(&[
        "info",
        model.to_str().unwrap(),
        "--no-rewrite",
        "attention,bogus",
    ]);
    assert_eq!(code(&run), 2, "{}", stderr(&run));
    assert!(stderr(&run).contains("`bogus` is no rewrite (expected all, attention"));
}

/// A box's rule is the library's: X2 = X1 (a box one pixel column wide) is taken as the library
/// takes it, X2 < X1 is bad input (exit 3) with the library's message.
#[test]
fn a_box_is_checked_by_the_librarys_rule() {
    let dir = scratch("box-rule");
    let image = dir.join("shapes.png");
    shapes().save(&image).unwrap();
    let out = dir.join("out");
    let run = |b: &str| {
        sam2(&[
            "segment",
            image.to_str().unwrap(),
            "--model",
            &model_arg(),
            "--box",
            b,
            "-o",
            out.to_str().unwrap(),
        ])
    };
    let thin = run("100,40,100,160");
    assert_eq!(code(&thin), 0, "{}", stderr(&thin));
    let reversed = run("160,40,100,160");
    assert_eq!(code(&reversed), 3, "{}", stderr(&reversed));
    assert!(
        stderr(&reversed).contains("has x2 < x1 or y2 < y1"),
        "{}",
        stderr(&reversed)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Whether ffmpeg and ffprobe can run: where they cannot, the video tests say so and pass, unless
/// the set-up installed them (`SAM2_FFMPEG_REQUIRED=1`, scripts/test.sh), where that fails.
fn have_ffmpeg() -> bool {
    let runs = |p: &str| {
        Command::new(p)
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let have = runs("ffmpeg") && runs("ffprobe");
    if !have {
        assert!(
            std::env::var_os("SAM2_FFMPEG_REQUIRED").is_none_or(|v| v != "1"),
            "SAM2_FFMPEG_REQUIRED=1, yet ffmpeg or ffprobe does not run"
        );
        eprintln!("skipped: no ffmpeg (tools/setup/setup-ffmpeg.sh installs it)");
    }
    have
}

/// Runs ffmpeg with `args`, quietly; panics with its messages on failure.
fn ffmpeg(args: &[&str]) {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-nostdin", "-y"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "ffmpeg {args:?}: {}", stderr(&out));
}

/// The generated tracking clip as a lossless video (FFV1 in Matroska, RGB kept exactly, 10 frames
/// a second), beside its frames.
fn clip_video(name: &str) -> (PathBuf, PathBuf) {
    let frames = clip_frames(name);
    let video = frames.parent().unwrap().join("clip.mkv");
    let pattern = frames.join("%05d.png");
    ffmpeg(&[
        "-framerate",
        "10",
        "-i",
        pattern.to_str().unwrap(),
        "-c:v",
        "ffv1",
        "-pix_fmt",
        "bgr0",
        video.to_str().unwrap(),
    ]);
    (frames, video)
}

/// `sam2 track` of `input` with the target disc's click on frame 0; the parsed track.json.
fn track_clicked(input: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let (cx, cy) = track_clip::target_centre(0);
    let mut args = vec![
        "track".to_string(),
        input.display().to_string(),
        "--model".into(),
        track_model(),
        "--point".into(),
        format!("{cx},{cy}"),
        "-o".into(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = sam2(&args);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    serde_json::from_str(&std::fs::read_to_string(out.join("track.json")).unwrap()).unwrap()
}

/// Each annotation's (frame, object, RLE, score): what two runs must agree on.
fn tracked(json: &serde_json::Value) -> Vec<(u64, u64, String, String)> {
    json["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["frame"].as_u64().unwrap(),
                a["object_id"].as_u64().unwrap(),
                a["segmentation"]["counts"].as_str().unwrap().to_string(),
                a["object_score"].to_string(),
            )
        })
        .collect()
}

/// A video file is tracked as its frames are: the same masks and scores as from the folder of
/// the same frames, the masks named by the stream's frame numbers, and track.json saying where
/// in the stream each frame is.
#[test]
fn track_reads_a_video_file_as_it_reads_its_frames() {
    if !have_ffmpeg() {
        return;
    }
    let (frames, video) = clip_video("track-video");
    let dir = frames.parent().unwrap();
    let from_frames = track_clicked(&frames, &dir.join("out-frames"), &[]);
    let from_video = track_clicked(&video, &dir.join("out-video"), &[]);
    assert_eq!(tracked(&from_video), tracked(&from_frames));
    assert_eq!(from_video["frames"], track_clip::FRAMES);
    assert_eq!(from_video["video"]["frames"], track_clip::FRAMES);
    assert_eq!(from_video["video"]["frame_rate"], 10.0);
    assert_eq!(from_video["video"]["rotation"], 0);
    let image = &from_video["images"][3];
    assert_eq!(image["file_name"], video.to_str().unwrap());
    assert_eq!(image["video_frame"], 3);
    assert_eq!(image["time"], 0.3);
    assert!(dir.join("out-video/masks/obj1/000003.png").is_file());
    std::fs::remove_dir_all(dir).unwrap();
}

/// A phone video's rotation (its display matrix) is applied: the frames arrive upright, as the
/// same frames turned by hand and read from a folder.
#[test]
fn track_turns_a_rotated_video_upright() {
    if !have_ffmpeg() {
        return;
    }
    let (frames, _) = clip_video("track-rotated");
    let dir = frames.parent().unwrap();
    // The frames stored turned a quarter to the right, with a display matrix saying to show them
    // turned a quarter to the left (H.264's lossless RGB profile: the pixels survive exactly;
    // ffmpeg 5.1 writes `rotate=90` on a stream copy as that matrix, which ffprobe reports as a
    // rotation of 90).
    let stored = dir.join("stored");
    let upright = dir.join("upright");
    std::fs::create_dir_all(&stored).unwrap();
    std::fs::create_dir_all(&upright).unwrap();
    for t in 0..track_clip::FRAMES {
        let frame = image::open(frames.join(format!("{t:05}.png"))).unwrap();
        frame
            .rotate90()
            .save(stored.join(format!("{t:05}.png")))
            .unwrap();
        frame.save(upright.join(format!("{t:05}.png"))).unwrap();
    }
    let plain = dir.join("plain.mp4");
    ffmpeg(&[
        "-framerate",
        "10",
        "-i",
        stored.join("%05d.png").to_str().unwrap(),
        "-c:v",
        "libx264rgb",
        "-qp",
        "0",
        plain.to_str().unwrap(),
    ]);
    let video = dir.join("phone.mp4");
    ffmpeg(&[
        "-i",
        plain.to_str().unwrap(),
        "-c",
        "copy",
        "-metadata:s:v:0",
        "rotate=90",
        video.to_str().unwrap(),
    ]);
    let from_video = track_clicked(&video, &dir.join("out-video"), &[]);
    assert_eq!(from_video["video"]["rotation"], 90);
    assert_eq!(from_video["images"][0]["width"], track_clip::WIDTH);
    assert_eq!(from_video["images"][0]["height"], track_clip::HEIGHT);
    let from_frames = track_clicked(&upright, &dir.join("out-frames"), &[]);
    assert_eq!(tracked(&from_video), tracked(&from_frames));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Without ffmpeg, a video is refused in one line naming the package (exit 5), and nothing is
/// written; a folder of frames needs no ffmpeg.
#[test]
fn track_without_ffmpeg_names_the_package() {
    if !have_ffmpeg() {
        return;
    }
    let (frames, video) = clip_video("track-no-ffmpeg");
    let dir = frames.parent().unwrap();
    let empty = dir.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let out = dir.join("out");
    let (cx, cy) = track_clip::target_centre(0);
    let run = Command::new(env!("CARGO_BIN_EXE_sam2"))
        .args(["track", video.to_str().unwrap(), "--model", &track_model()])
        .args([
            "--point",
            &format!("{cx},{cy}"),
            "-o",
            out.to_str().unwrap(),
        ])
        .env("SAM2_ONNXRUNTIME_PATH", onnxruntime())
        .env("PATH", &empty)
        .output()
        .unwrap();
    assert_eq!(code(&run), 5, "{}", stderr(&run));
    let message = stderr(&run);
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    assert!(message.contains("apt install ffmpeg"), "{message}");
    assert!(!out.exists(), "nothing written");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `--start`, `--end` and `--every` choose a video's frames, `--frame` takes a time, tracking
/// goes both ways from it (backward through frames decoded again and read in reverse), and
/// `--overlay` writes a video of the masks: all as the same frames copied into a folder.
#[test]
fn track_takes_a_slice_of_a_video_and_writes_an_overlay() {
    if !have_ffmpeg() {
        return;
    }
    let (frames, video) = clip_video("track-slice");
    let dir = frames.parent().unwrap();
    // Frames 4, 6, …, 18 of the stream; 1.0 s at 10 frames a second is frame 10, the fourth.
    let chosen: Vec<u32> = (4..20).step_by(2).collect();
    let folder = dir.join("chosen");
    std::fs::create_dir_all(&folder).unwrap();
    for n in &chosen {
        std::fs::copy(
            frames.join(format!("{n:05}.png")),
            folder.join(format!("{n:05}.png")),
        )
        .unwrap();
    }
    let (cx, cy) = track_clip::target_centre(10);
    let (cx, cy) = (cx.to_string(), cy.to_string());
    let click = format!("{cx},{cy}");
    let overlay = dir.join("overlay.mp4");
    let out_video = dir.join("out-video");
    let run = sam2(&[
        "track",
        video.to_str().unwrap(),
        "--model",
        &track_model(),
        "--start",
        "4",
        "--end",
        "0:02",
        "--every",
        "2",
        "--frame",
        "1.0s",
        "--point",
        &click,
        "--overlay",
        overlay.to_str().unwrap(),
        "-o",
        out_video.to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let from_video: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_video.join("track.json")).unwrap())
            .unwrap();
    let out_folder = dir.join("out-folder");
    let run = sam2(&[
        "track",
        folder.to_str().unwrap(),
        "--model",
        &track_model(),
        "--frame",
        "3",
        "--point",
        &click,
        "-o",
        out_folder.to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let from_folder: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_folder.join("track.json")).unwrap())
            .unwrap();
    assert_eq!(tracked(&from_video), tracked(&from_folder));
    assert_eq!(from_video["frames"], chosen.len());
    assert_eq!(from_video["video"]["start_frame"], 4);
    assert_eq!(from_video["video"]["every"], 2);
    assert_eq!(from_video["prompts"][0]["frame"], 3);
    assert_eq!(from_video["prompts"][0]["video_frame"], 10);
    let videos: Vec<u64> = from_video["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["video_frame"].as_u64().unwrap())
        .collect();
    assert_eq!(videos, chosen.iter().map(|&n| n as u64).collect::<Vec<_>>());
    assert!(out_video.join("masks/obj1/000018.png").is_file());
    // The overlay: one frame per frame tracked, at 5 frames a second, the frames' size.
    let probe = Command::new("ffprobe")
        .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
        .args([
            "-show_entries",
            "stream=width,height,nb_read_frames,avg_frame_rate",
        ])
        .args(["-of", "csv=p=0"])
        .arg(&overlay)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&probe.stdout).trim(),
        format!(
            "{},{},5/1,{}",
            track_clip::WIDTH,
            track_clip::HEIGHT,
            chosen.len()
        )
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary overlay left");
    // A selection of a folder of frames is a usage error.
    let run = sam2(&[
        "track",
        folder.to_str().unwrap(),
        "--model",
        &track_model(),
        "--every",
        "2",
        "--point",
        &click,
        "-o",
        out_folder.to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 2, "{}", stderr(&run));
    // A prompt on a frame the selection skips names the nearest ones.
    let run = sam2(&[
        "track",
        video.to_str().unwrap(),
        "--model",
        &track_model(),
        "--every",
        "2",
        "--frame",
        "5",
        "--point",
        &click,
        "-o",
        out_video.to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 3, "{}", stderr(&run));
    assert!(
        stderr(&run).contains("nearest: 4 and 6"),
        "{}",
        stderr(&run)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

// Batches: a folder or a list file at a time, resumable, sharded.

/// The command, with no scheduler's shard in its environment (the tests may run under one).
fn batch_command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sam2"));
    c.args(args).env("SAM2_ONNXRUNTIME_PATH", onnxruntime());
    for name in [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_MAX",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_STEP",
        "JOB_COMPLETION_INDEX",
        "SAM2_SHARD_COUNT",
    ] {
        c.env_remove(name);
    }
    c
}

fn batch_run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = batch_command(args);
    c.envs(env.iter().copied());
    c.output().expect("the sam2 binary runs")
}

/// `count` images in `DIR/images` (a third of them in a subfolder), each the shapes image with a
/// patch of its own, so that no two results are alike.
fn image_folder(name: &str, count: usize) -> PathBuf {
    let dir = scratch(name).join("images");
    std::fs::create_dir_all(dir.join("more")).unwrap();
    for k in 0..count {
        let mut img = shapes();
        for y in 0..6 {
            for x in 0..6 {
                img.put_pixel(
                    x + 8 * k as u32,
                    370 + y,
                    image::Rgb([30 * k as u8, 200, 90]),
                );
            }
        }
        let file = if k % 3 == 2 {
            dir.join(format!("more/img{k:02}.png"))
        } else {
            dir.join(format!("img{k:02}.png"))
        };
        img.save(file).unwrap();
    }
    dir
}

/// Every file under `dir` (none if it is missing).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// Every file under `dir` by its relative path, with its bytes.
fn tree(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    files_under(dir)
        .into_iter()
        .map(|path| {
            let rel = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let bytes = std::fs::read(&path).unwrap();
            (rel, bytes)
        })
        .collect()
}

fn segment_batch_args<'a>(input: &'a str, out: &'a str, model: &'a str) -> Vec<&'a str> {
    vec![
        "segment", input, "--model", model, "--point", "100,112", "-o", out,
    ]
}

/// The counts of a batch's summary line: (done, skipped, failed).
fn summary(run: &Output) -> (usize, usize, usize) {
    let text = stderr(run);
    let line = text
        .lines()
        .find(|l| l.contains(" done, "))
        .unwrap_or_else(|| panic!("no summary in: {text}"));
    let count = |what: &str| -> usize {
        let before = line.split(what).next().unwrap();
        before
            .rsplit(|c: char| !c.is_ascii_digit())
            .find(|s| !s.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    (count(" done"), count(" skipped"), count(" failed"))
}

#[test]
fn three_shards_run_at_once_write_exactly_one_runs_results() {
    let images = image_folder("batch-shards", 7);
    let root = images.parent().unwrap().to_path_buf();
    let (whole, parts) = (root.join("whole"), root.join("parts"));
    let model = model_arg();
    let input = images.to_str().unwrap();
    let single = batch_run(
        &segment_batch_args(input, whole.to_str().unwrap(), &model),
        &[],
    );
    assert_eq!(code(&single), 0, "{}", stderr(&single));
    assert_eq!(summary(&single), (7, 0, 0), "{}", stderr(&single));
    let expected = tree(&whole);
    assert_eq!(
        expected.len(),
        21,
        "three files per image: {:?}",
        expected.keys()
    );
    assert!(
        expected.contains_key("more/img02.json"),
        "{:?}",
        expected.keys()
    );

    let children: Vec<_> = (0..3)
        .map(|i| {
            let shard = format!("{i}/3");
            let mut args = segment_batch_args(input, parts.to_str().unwrap(), &model);
            args.extend(["--shard", &shard]);
            batch_command(&args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut in_shards = 0;
    for (i, child) in children.into_iter().enumerate() {
        let run = child.wait_with_output().unwrap();
        assert_eq!(code(&run), 0, "{}", stderr(&run));
        let (done, skipped, failed) = summary(&run);
        assert_eq!((skipped, failed), (0, 0), "{}", stderr(&run));
        assert!(
            stderr(&run).contains(&format!("shard {i}/3: {done} of the batch's 7 inputs")),
            "{}",
            stderr(&run)
        );
        in_shards += done;
    }
    assert_eq!(in_shards, 7, "each input in exactly one shard");
    let got = tree(&parts);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &expected {
        assert!(got[name] == *bytes, "{name} differs from the single run's");
    }
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_killed_batch_resumes_doing_only_what_was_left() {
    let total = 16;
    let images = image_folder("batch-kill", total);
    let root = images.parent().unwrap().to_path_buf();
    let out = root.join("out");
    let model = model_arg();
    let args = segment_batch_args(images.to_str().unwrap(), out.to_str().unwrap(), &model);
    let jsons = |out: &Path| -> Vec<PathBuf> {
        files_under(out)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect()
    };
    let mut child = batch_command(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while jsons(&out).is_empty() && start.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // SIGKILL: no handler runs, as when a node is lost.
    child.kill().unwrap();
    child.wait().unwrap();
    let finished = jsons(&out);
    assert!(
        !finished.is_empty() && finished.len() < total,
        "killed after {} of {total} results",
        finished.len()
    );
    let mtime = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
    let before: Vec<_> = finished.iter().map(|p| (p.clone(), mtime(p))).collect();
    std::thread::sleep(std::time::Duration::from_millis(20));

    let resumed = batch_run(&args, &[]);
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    assert_eq!(
        summary(&resumed),
        (total - finished.len(), finished.len(), 0),
        "{}",
        stderr(&resumed)
    );
    for (path, when) in before {
        assert_eq!(mtime(&path), when, "{} was done again", path.display());
    }
    assert_eq!(jsons(&out).len(), total);
    let again = batch_run(&args, &[]);
    assert_eq!(summary(&again), (0, total, 0), "{}", stderr(&again));
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn slurm_and_kubernetes_indices_pick_the_shard_that_shard_does() {
    let images = image_folder("batch-env", 7);
    let root = images.parent().unwrap().to_path_buf();
    let model = model_arg();
    let input = images.to_str().unwrap();
    let run_into = |name: &str, extra: &[&str], env: &[(&str, &str)]| {
        let out = root.join(name);
        let mut args = segment_batch_args(input, out.to_str().unwrap(), &model);
        args.extend(extra);
        let run = batch_run(&args, env);
        (run, out)
    };
    for index in 0..3 {
        let (flag, flag_out) = run_into(
            &format!("flag{index}"),
            &["--shard", &format!("{index}/3")],
            &[],
        );
        assert_eq!(code(&flag), 0, "{}", stderr(&flag));
        let expected = tree(&flag_out);
        // A Slurm array submitted as --array=1-3: its tasks are 1, 2 and 3.
        let task = (index + 1).to_string();
        let (slurm, slurm_out) = run_into(
            &format!("slurm{index}"),
            &[],
            &[
                ("SLURM_ARRAY_TASK_ID", &task),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_MAX", "3"),
                ("SLURM_ARRAY_TASK_COUNT", "3"),
                ("SLURM_ARRAY_TASK_STEP", "1"),
            ],
        );
        assert_eq!(code(&slurm), 0, "{}", stderr(&slurm));
        assert!(
            stderr(&slurm).contains(&format!("shard {index}/3")),
            "{}",
            stderr(&slurm)
        );
        let index_text = index.to_string();
        let (k8s, k8s_out) = run_into(
            &format!("k8s{index}"),
            &[],
            &[
                ("JOB_COMPLETION_INDEX", &index_text),
                ("SAM2_SHARD_COUNT", "3"),
            ],
        );
        assert_eq!(code(&k8s), 0, "{}", stderr(&k8s));
        for (what, out) in [("Slurm", &slurm_out), ("Kubernetes", &k8s_out)] {
            let got = tree(out);
            assert_eq!(
                got.keys().collect::<Vec<_>>(),
                expected.keys().collect::<Vec<_>>(),
                "{what}, shard {index}"
            );
        }
    }
    // --shard wins over the environment.
    let (both, _) = run_into(
        "both",
        &["--shard", "2/3"],
        &[("JOB_COMPLETION_INDEX", "0"), ("SAM2_SHARD_COUNT", "3")],
    );
    assert!(stderr(&both).contains("shard 2/3"), "{}", stderr(&both));

    // Values that make no shard: one line, exit 2, nothing written.
    type Variables<'a> = &'a [(&'a str, &'a str)];
    let bad: [(&[&str], Variables, &str); 6] = [
        (&["--shard", "3/3"], &[], "0 to 2"),
        (&["--shard", "1/0"], &[], "1 or more"),
        (&["--shard", "one/3"], &[], "expected I/N"),
        (&[], &[("JOB_COMPLETION_INDEX", "1")], "SAM2_SHARD_COUNT"),
        (
            &[],
            &[("SLURM_ARRAY_TASK_ID", "x")],
            "SLURM_ARRAY_TASK_ID=x",
        ),
        (
            &[],
            &[
                ("SLURM_ARRAY_TASK_ID", "5"),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_MAX", "9"),
                ("SLURM_ARRAY_TASK_COUNT", "3"),
            ],
            "not a range",
        ),
    ];
    for (k, (extra, env, says)) in bad.iter().enumerate() {
        let (run, out) = run_into(&format!("bad{k}"), extra, env);
        assert_eq!(code(&run), 2, "{extra:?} {env:?}: {}", stderr(&run));
        assert_one_line(&run, &[says]);
        assert!(!out.exists(), "{extra:?} {env:?} wrote something");
    }
    // One image is no batch: --shard is refused, a scheduler's variables are not read.
    let image = images.join("img00.png");
    let (run, _) = run_into("one", &["--shard", "0/2"], &[]);
    assert_eq!(code(&run), 0, "a folder: {}", stderr(&run));
    let out = root.join("single");
    let mut args = segment_batch_args(image.to_str().unwrap(), out.to_str().unwrap(), &model);
    args.extend(["--shard", "0/2"]);
    let run = batch_run(&args, &[]);
    assert_eq!(code(&run), 2, "{}", stderr(&run));
    assert_one_line(&run, &["--shard 0/2 splits a batch"]);
    let args = segment_batch_args(image.to_str().unwrap(), out.to_str().unwrap(), &model);
    let run = batch_run(&args, &[("JOB_COMPLETION_INDEX", "1")]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(root.join("single.json").exists());
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_bad_input_fails_alone_and_the_summary_names_it() {
    let images = image_folder("batch-bad", 4);
    let root = images.parent().unwrap().to_path_buf();
    std::fs::write(images.join("broken.png"), b"not an image").unwrap();
    let model = model_arg();
    let out = root.join("out");
    let args = segment_batch_args(images.to_str().unwrap(), out.to_str().unwrap(), &model);
    let run = batch_run(&args, &[]);
    assert_eq!(code(&run), 7, "{}", stderr(&run));
    assert_eq!(summary(&run), (4, 0, 1), "{}", stderr(&run));
    let text = stderr(&run);
    let named = text
        .lines()
        .find(|l| l.starts_with("sam2: failed: broken.png: "))
        .unwrap_or_else(|| panic!("the failure is not named: {text}"));
    assert!(named.ends_with("(exit 3)"), "{named}");
    for name in ["img00", "img01", "more/img02", "img03"] {
        assert!(out.join(format!("{name}.json")).exists(), "{name}");
    }
    assert!(!out.join("broken.json").exists());
    // Run again: the good ones are skipped, the bad one tried (and failing) again.
    let again = batch_run(&args, &[]);
    assert_eq!(code(&again), 7);
    assert_eq!(summary(&again), (0, 4, 1), "{}", stderr(&again));

    // A list file: its lines relative to its folder, results named by the files' stems; a
    // missing file fails alone; two entries with one stem are refused before anything is done.
    let list = root.join("list.txt");
    std::fs::write(
        &list,
        "# the images\nimages/img00.png\n\nimages/more/img02.png\nimages/gone.png\n",
    )
    .unwrap();
    let listed = root.join("listed");
    for (command, written) in [("encode", "img00.sam2emb"), ("everything", "img00.json")] {
        let mut args = vec![command, list.to_str().unwrap(), "--model", &model];
        args.extend(["-o", listed.to_str().unwrap()]);
        if command == "everything" {
            args.extend(["--points-per-side", "4"]);
        }
        let run = batch_run(&args, &[]);
        assert_eq!(code(&run), 7, "{command}: {}", stderr(&run));
        assert_eq!(summary(&run), (2, 0, 1), "{command}: {}", stderr(&run));
        assert!(
            stderr(&run).contains("failed: images/gone.png: "),
            "{}",
            stderr(&run)
        );
        assert!(listed.join(written).exists(), "{command}");
    }
    assert!(listed.join("img02.json").exists() && listed.join("img02.sam2emb").exists());
    std::fs::write(&list, "images/img00.png\nimages/more/img00.jpg\n").unwrap();
    let clash = root.join("clash");
    let args = segment_batch_args(list.to_str().unwrap(), clash.to_str().unwrap(), &model);
    let run = batch_run(&args, &[]);
    assert_eq!(code(&run), 3, "{}", stderr(&run));
    assert_one_line(
        &run,
        &["images/img00.png and images/more/img00.jpg would both write"],
    );
    assert!(!clash.exists());
    std::fs::remove_dir_all(root).unwrap();
}

/// A list of clips is tracked with the video model loaded once, each clip as a run of its own
/// would track it (`Tracker::start_clip`): the same track.json and masks, byte for byte.
#[test]
fn a_list_of_clips_is_tracked_as_each_clip_alone() {
    let long = clip_frames("batch-track");
    let root = long.parent().unwrap().to_path_buf();
    // A second, shorter clip: the first 10 frames.
    let short = root.join("short");
    std::fs::create_dir_all(&short).unwrap();
    for t in 0..10 {
        let name = format!("{t:05}.png");
        std::fs::copy(long.join(&name), short.join(&name)).unwrap();
    }
    let (cx, cy) = track_clip::target_centre(0);
    let point = format!("{cx},{cy}");
    let model = track_model();
    let track = |input: &Path, out: &Path| {
        batch_run(
            &[
                "track",
                input.to_str().unwrap(),
                "--model",
                &model,
                "--point",
                &point,
                "-o",
                out.to_str().unwrap(),
            ],
            &[],
        )
    };
    let list = root.join("clips.txt");
    std::fs::write(&list, "clip\nshort\n").unwrap();
    let run = track(&list, &root.join("batch"));
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert_eq!(summary(&run), (2, 0, 0), "{}", stderr(&run));
    for name in ["clip", "short"] {
        // The list's entries are relative to its folder, as this run's FRAMES.
        let alone = root.join(format!("alone-{name}"));
        let run = track(&root.join(name), &alone);
        assert_eq!(code(&run), 0, "{}", stderr(&run));
        let (got, expected) = (tree(&root.join("batch").join(name)), tree(&alone));
        assert_eq!(got.len(), expected.len(), "{name}");
        for (file, bytes) in &expected {
            assert!(got[file] == *bytes, "{name}/{file} differs");
        }
    }
    let again = track(&list, &root.join("batch"));
    assert_eq!(summary(&again), (0, 2, 0), "{}", stderr(&again));
    std::fs::remove_dir_all(root).unwrap();
}

/// `sam2 segment --text`, with SAM 3's reduced export (tools/setup/setup-sam3.sh): a category per
/// phrase in the COCO document, with its presence; an annotation and a mask file per instance,
/// in the phrase's category; the cap per phrase; and SAM 2's prompts refused beside SAM 3's.
#[test]
fn text_prompts_find_instances_with_a_sam3_export() {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!("{name} is not set: run tools/setup/setup-sam3.sh (the test command does)")
        })
    };
    let (models, vocab) = (var("SAM2_SAM3_MODELS"), var("SAM2_SAM3_VOCAB"));
    let dir = scratch("sam3");
    let (pixels, w, h) = read_pnm(&root().join("testdata/demo.ppm"));
    let png = dir.join("demo.png");
    RgbImage::from_raw(w, h, pixels[..(w * h * 3) as usize].to_vec())
        .unwrap()
        .save(&png)
        .unwrap();
    let out = dir.join("demo");
    let run = sam2(&[
        "segment",
        png.to_str().unwrap(),
        "--model",
        &models,
        "--vocab",
        &vocab,
        "--text",
        "purple star",
        "--text",
        "shape",
        "--exemplar",
        "52,82,327,257",
        "--threshold",
        "0",
        "--max-instances",
        "2",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("demo.json")).unwrap()).unwrap();
    let categories = json["categories"].as_array().unwrap();
    assert_eq!(categories.len(), 2);
    assert_eq!(categories[0]["name"], "purple star");
    assert_eq!(categories[1]["name"], "shape");
    for c in categories {
        let p = c["presence"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&p), "{c}");
        assert_eq!(c["instances"], 2);
    }
    let annotations = json["annotations"].as_array().unwrap();
    let ids: Vec<i64> = annotations
        .iter()
        .map(|a| a["category_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 1, 2, 2]);
    for (k, a) in annotations.iter().enumerate() {
        let mask = read_mask(&dir.join(format!("demo.mask-{}.png", k + 1)));
        let area = mask.iter().filter(|&&v| v != 0).count() as u64;
        assert_eq!(a["area"].as_u64().unwrap(), area);
        assert_eq!(a["mask_file"], format!("demo.mask-{}.png", k + 1));
    }
    assert!(dir.join("demo.overlay.png").is_file());
    let mixed = sam2(&[
        "segment",
        png.to_str().unwrap(),
        "--model",
        &models,
        "--text",
        "cat",
        "--point",
        "3,4",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&mixed), 2);
    assert!(
        stderr(&mixed).contains("give one kind"),
        "{}",
        stderr(&mixed)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
