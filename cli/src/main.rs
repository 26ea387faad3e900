//! `sam2`: segment your own images with Segment Anything 2 from the command line.
//! `sam2 --help` says how; docs/cli.md says more.

mod args;
mod picture;
mod progress;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use args::{Command, Device, Models};
use sam2::{
    segment_everything, DeviceOptions, Encoder, EncoderOptions, Error, EverythingOptions,
    Fingerprint, ImageView, PixelFormat, PredictOptions, Predictor, PredictorOptions, Prompt,
    ProviderRequest, SessionOptions,
};

/// Exit codes (also in `sam2 --help` and docs/cli.md).
mod exit {
    pub const INTERNAL: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const INPUT: u8 = 3;
    pub const MODEL: u8 = 4;
    pub const RUNTIME: u8 = 5;
    pub const OUTPUT: u8 = 6;
}

const HELP: &str = "\
sam2: segment your own images with Segment Anything 2 (ONNX Runtime)

Usage:
  sam2 segment    IMAGE (--model PATH | --encoder F --decoder F) [prompt] -o OUT [options]
  sam2 everything IMAGE (--model PATH | --encoder F --decoder F) -o OUT [generator] [options]
  sam2 encode     IMAGE (--model PATH | --encoder F) -o FILE [options]
  sam2 info    MODEL [options]

segment writes OUT.mask.png (OUT.mask-K.png for each candidate with --multimask),
OUT.overlay.png and OUT.json (COCO: RLE, polygons with holes, bbox, area, score).
-o OUT is a prefix (-o out/cat writes out/cat.mask.png, creating out/); an existing
directory, or a path ending in /, receives DIR/<image name>.mask.png and so on (encode:
DIR/<image name>.sam2emb). The files are written to temporaries beside them and renamed into
place together: all or none, replacing a link or FIFO at an output path, never writing
through it.
everything segments the whole image with SAM2's automatic mask generator (a grid of clicks,
filtered and de-duplicated) and writes OUT.overlay.png and OUT.json (one COCO annotation per
mask, with SAM2's predicted_iou, stability_score, point_coords and crop_box).

Models:
  --model PATH          a directory holding one encoder/decoder pair, DIR/NAME for the pair
                        called NAME, or an encoder or decoder file (namings: NAME.encoder.onnx
                        from samexporter, NAME_image_encoder.onnx from ONNX Runtime's tools,
                        NAME_encoder.onnx from sam2's generator)
  --encoder F, --decoder F   the two files, named as you like
Prompt (segment):
  --point X,Y[,neg]     a click in image pixels; ,neg excludes what is under it (repeatable)
  --box X1,Y1,X2,Y2     a box around the object
  --multimask           keep the three candidate masks, not only the best
  --embedding FILE      use an embedding from `sam2 encode` instead of encoding IMAGE
  --tolerance PX        simplify the polygons by PX pixels (default 0: exact)
Generator (everything; SAM2's defaults in brackets):
  --points-per-side N   clicks per side of the grid [32]
  --pred-iou-thresh X   keep masks whose predicted IoU is above X [0.8]
  --stability-score-thresh X   keep masks at least this stable [0.95]
  --box-nms-thresh X    drop a mask overlapping a better one by more than X (box IoU) [0.7]
  --crop-n-layers N     also segment 4^i crops for each layer i up to N [0]
  --min-mask-region-area N   fill holes and remove specks up to N low-res pixels [0]
  --tolerance PX        as for segment
Options:
  --device cpu|cuda|tensorrt|directml|coreml|webgpu   where to run (default cpu)
  --on-mismatch fallback|fail   a GPU that cannot be had: warn and use the CPU, or fail
  --onnxruntime LIB     the ONNX Runtime library (default: SAM2_ONNXRUNTIME_PATH, then the
                        system's)
  --max-pixels N        refuse an image whose header declares more than N pixels, before
                        decoding it (default 250000000: 250 megapixels)
  -h, --help            this text; -V, --version

Input images: PNG or JPEG, 8 or 16 bits, grey or colour, with or without alpha; JPEG EXIF
orientation is applied. Inputs must be regular files (a FIFO or device is refused). Progress is
shown on stderr when it is a terminal.

Exit codes: 0 done, 1 internal error, 2 bad arguments (including one that is not UTF-8),
3 bad input (image unreadable, over --max-pixels or not a regular file; embedding file; prompt),
4 model (none found, several, not a SAM2 export or not a regular file, embedding of another
model), 5 ONNX Runtime or device (not found, failed, GPU refused with --on-mismatch fail),
6 output could not be written (nothing of it was replaced).

Examples:
  sam2 segment photo.jpg --model models/tiny_a --point 320,240 -o out/photo
  sam2 segment photo.png --model exports/ --box 40,60,380,300 --point 200,180,neg -o out/cat
  sam2 encode photo.jpg --model exports/sam2.1_hiera_tiny.encoder.onnx -o photo.sam2emb
  sam2 segment photo.jpg --model exports/sam2.1_hiera_tiny.encoder.onnx \\
      --embedding photo.sam2emb --point 320,240 --multimask -o out/photo
  sam2 everything photo.jpg --model exports/ -o out/photo-all
  sam2 info exports/sam2.1_hiera_tiny_image_decoder_multi.onnx
";

/// A failure: one line on stderr and an exit code.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// A library error, with the code its kind calls for (`io` for a file-system error, whose
    /// meaning depends on which file it was).
    fn of(error: Error, io: u8) -> Self {
        let code = match &error {
            Error::RuntimeNotFound(_)
            | Error::OnnxRuntime(_)
            | Error::EnvironmentConfiguration(_)
            | Error::OutOfMemory { .. } => exit::RUNTIME,
            Error::Model { .. } | Error::ModelMismatch(_) => exit::MODEL,
            Error::EmbeddingFormat(_) | Error::InvalidArgument { .. } | Error::NullArgument(_) => {
                exit::INPUT
            }
            Error::Io { .. } => io,
            _ => exit::INTERNAL,
        };
        let mut message = error.to_string();
        if matches!(error, Error::EnvironmentConfiguration(_)) {
            message
                .push_str(" (with this command: --onnxruntime LIB names the ONNX Runtime to load)");
        }
        Failure::new(code, message)
    }
}

/// Replaces the default panic hook (which prints "thread panicked" and, with `RUST_BACKTRACE`, a
/// backtrace) by one that only keeps the message, for [`guarded`] to print as its one line.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        *PANIC.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("{what}{at}"));
    }));
}

/// Runs the command; a panic (a bug: every expected failure is a [`Failure`]) becomes exit 1
/// with one line.
fn guarded(command: impl FnOnce() -> Result<(), Failure>) -> Result<(), Failure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(command)).unwrap_or_else(|_| {
        let what = PANIC
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| "a panic".to_string());
        Err(Failure::new(
            exit::INTERNAL,
            format!("internal error ({what}); please report it"),
        ))
    })
}

/// The message of the last panic, kept by the panic hook for `main` to print as its one line
/// (the default hook would print "thread panicked" and, with `RUST_BACKTRACE`, a backtrace).
static PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn main() -> ExitCode {
    install_panic_hook();
    let result =
        guarded(
            || match args::utf8(std::env::args_os().skip(1).collect()).and_then(args::parse) {
                Err(args::Usage(text)) => Err(Failure::new(exit::USAGE, text)),
                Ok(command) => run(command),
            },
        );
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("sam2: {}", f.message.replace('\n', " "));
            ExitCode::from(f.code)
        }
    }
}

fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Help => {
            print!("{HELP}");
            Ok(())
        }
        Command::Version => {
            println!(
                "sam2 {} (libsam2 {})",
                env!("CARGO_PKG_VERSION"),
                sam2::VERSION
            );
            Ok(())
        }
        Command::Everything(e) => everything(e),
        Command::Segment(s) => segment(s),
        Command::Encode(e) => encode(e),
        Command::Info(i) => info(i),
    }
}

fn init_runtime(explicit: Option<&Path>) -> Result<(), Failure> {
    sam2::runtime::init(explicit).map_err(|e| Failure::of(e, exit::RUNTIME))?;
    sam2::log::set_sink(
        Some(Arc::new(|_, message: &str| {
            eprintln!("sam2: warning: {message}")
        })),
        sam2::log::LogLevel::Warning,
    );
    Ok(())
}

fn session_options(device: Device) -> SessionOptions {
    let mut request = ProviderRequest::cpu();
    request.provider = device.provider;
    SessionOptions {
        device: DeviceOptions {
            providers: vec![request],
            on_mismatch: device.on_mismatch,
        },
        ..SessionOptions::default()
    }
}

/// The encoder and decoder files the options name.
fn model_files(models: &Models) -> Result<(PathBuf, Option<PathBuf>), Failure> {
    if let Some(path) = &models.model {
        let pair = sam2::find_model_pair(path).map_err(|e| Failure::of(e, exit::MODEL))?;
        return Ok((pair.encoder, Some(pair.decoder)));
    }
    let encoder = models
        .encoder
        .clone()
        .ok_or_else(|| Failure::new(exit::USAGE, "no encoder given"))?;
    Ok((encoder, models.decoder.clone()))
}

fn load_picture(path: &Path, max_pixels: u64) -> Result<picture::Picture, Failure> {
    let _p = progress::step("reading image");
    picture::load(path, max_pixels).map_err(|m| Failure::new(exit::INPUT, m))
}

fn encode_picture(
    encoder_path: &Path,
    device: Device,
    picture: &picture::Picture,
) -> Result<(Encoder, sam2::Embedding), Failure> {
    let encoder = {
        let _p = progress::step("loading encoder");
        Encoder::new(
            encoder_path,
            &EncoderOptions {
                session: session_options(device),
                ..EncoderOptions::default()
            },
        )
        .map_err(|e| Failure::of(e, exit::MODEL))?
    };
    let (w, h) = picture.rgb.dimensions();
    let view = ImageView::packed(
        picture.rgb.as_raw(),
        w as usize,
        h as usize,
        PixelFormat::Rgb,
    )
    .map_err(|e| Failure::of(e, exit::INPUT))?;
    let embedding = {
        let _p = progress::step("encoding image");
        encoder
            .encode(&view)
            .map_err(|e| Failure::of(e, exit::INPUT))?
    };
    Ok((encoder, embedding))
}

fn encode(e: args::Encode) -> Result<(), Failure> {
    let (encoder_path, _) = model_files(&e.models)?;
    let picture = load_picture(&e.image, e.max_pixels)?;
    init_runtime(e.onnxruntime.as_deref())?;
    let (_, embedding) = encode_picture(&encoder_path, e.device, &picture)?;
    let out = output_prefix(&e.out, &e.image);
    let out = if out == e.out {
        out
    } else {
        with_suffix(&out, ".sam2emb")
    };
    create_parent(&out)?;
    sam2::embedding_file::save(&embedding, &out).map_err(|err| Failure::of(err, exit::OUTPUT))?;
    eprintln!("sam2: wrote {}", out.display());
    Ok(())
}

fn create_parent(path: &Path) -> Result<(), Failure> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir).map_err(|err| {
            Failure::new(
                exit::OUTPUT,
                format!("cannot create {}: {err}", dir.display()),
            )
        }),
        _ => Ok(()),
    }
}

/// Where `-o OUT` puts the files of `image`: an existing directory, or a path ending in `/`,
/// receives `OUT/<image stem>` (`-o out/` with photo.jpg gives out/photo.mask.png); any other
/// path is the prefix itself.
fn output_prefix(out: &Path, image: &Path) -> PathBuf {
    let text = out.as_os_str().to_string_lossy();
    let names_directory =
        text.ends_with('/') || text.ends_with(std::path::MAIN_SEPARATOR) || out.is_dir();
    if !names_directory {
        return out.to_path_buf();
    }
    let stem = image
        .file_stem()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| std::ffi::OsStr::new("image"));
    out.join(stem)
}

/// `OUT` + `suffix`: the output prefix is a path whose file name is extended, not replaced.
fn with_suffix(out: &Path, suffix: &str) -> PathBuf {
    let mut name = out
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    out.with_file_name(name)
}

fn segment(s: args::Segment) -> Result<(), Failure> {
    let (encoder_path, decoder_path) = model_files(&s.models)?;
    let decoder_path = decoder_path.ok_or_else(|| Failure::new(exit::USAGE, "no decoder given"))?;
    let picture = load_picture(&s.image, s.max_pixels)?;
    let (w, h) = picture.rgb.dimensions();
    init_runtime(s.onnxruntime.as_deref())?;
    let (fingerprint, embedding) = match &s.embedding {
        Some(file) => {
            // The encoder's identity is the hash of its file: no need to load it. Only a regular
            // file is read (a FIFO would block, /dev/zero never end), as the library reads models.
            let mut bytes = Vec::new();
            sam2::files::open_regular(&encoder_path, "an ONNX encoder file")
                .map_err(|err| Failure::of(err, exit::MODEL))?
                .read_to_end(&mut bytes)
                .map_err(|err| {
                    Failure::new(
                        exit::MODEL,
                        format!("cannot read {}: {err}", encoder_path.display()),
                    )
                })?;
            let fingerprint = Fingerprint::of_bytes(&bytes);
            let embedding = sam2::embedding_file::load(file, Some(fingerprint))
                .map_err(|e| Failure::of(e, exit::INPUT))?;
            if embedding.image_size() != (w, h) {
                let (ew, eh) = embedding.image_size();
                return Err(Failure::new(
                    exit::INPUT,
                    format!(
                        "{} was made from a {ew}×{eh} image, but {} is {w}×{h}",
                        file.display(),
                        s.image.display()
                    ),
                ));
            }
            (fingerprint, embedding)
        }
        None => {
            let (encoder, embedding) = encode_picture(&encoder_path, s.device, &picture)?;
            (encoder.fingerprint(), embedding)
        }
    };
    let predictor = {
        let _p = progress::step("loading decoder");
        let options = PredictorOptions {
            encoder_fingerprint: Some(fingerprint),
            session: session_options(s.device),
            pool_size: Some(1),
            ..PredictorOptions::default()
        };
        Predictor::new(&decoder_path, &options).map_err(|e| Failure::of(e, exit::MODEL))?
    };
    let prompt = Prompt {
        points: s.points.clone(),
        bbox: s.bbox,
        mask_input: None,
    };
    let prediction = predictor
        .predict(
            &embedding,
            std::slice::from_ref(&prompt),
            PredictOptions {
                multimask: s.multimask,
            },
        )
        .map_err(|e| Failure::of(e, exit::INPUT))?;

    let out = output_prefix(&s.out, &s.image);
    create_parent(&out)?;
    // Every file to a temporary beside it, then all renamed into place: all or nothing.
    let mut outputs = sam2::files::StagedFiles::new();
    let count = prediction.objects * prediction.candidates;
    let mut best = 0;
    let mut annotations = Vec::new();
    for k in 0..count {
        if prediction.scores[k] > prediction.scores[best] {
            best = k;
        }
        let mask_path = if count == 1 {
            with_suffix(&out, ".mask.png")
        } else {
            with_suffix(&out, &format!(".mask-{k}.png"))
        };
        outputs
            .add(&mask_path, |f| {
                picture::write_mask(prediction.mask(k), w, h, f)
            })
            .map_err(|e| Failure::of(e, exit::OUTPUT))?;
        annotations.push(annotation(&prediction, k, s.tolerance, &mask_path));
    }
    let overlay_path = with_suffix(&out, ".overlay.png");
    outputs
        .add(&overlay_path, |f| {
            picture::write_overlay(&picture.rgb, prediction.mask(best), &s.points, s.bbox, f)
        })
        .map_err(|e| Failure::of(e, exit::OUTPUT))?;
    let json_path = with_suffix(&out, ".json");
    let document = serde_json::json!({
        "image": {
            "file_name": s.image.display().to_string(),
            "width": w,
            "height": h,
            "exif_orientation": picture.orientation,
        },
        "model": {
            "encoder": encoder_path.display().to_string(),
            "decoder": decoder_path.display().to_string(),
            "export": predictor.export().name(),
            "fingerprint": fingerprint.to_string(),
        },
        "prompt": {
            "points": s.points.iter().map(|p| serde_json::json!([p.x, p.y, if p.positive { 1 } else { 0 }])).collect::<Vec<_>>(),
            "box": s.bbox,
        },
        "best": best,
        "annotations": annotations,
    });
    add_json(&mut outputs, &json_path, &document)?;
    outputs.commit().map_err(|e| Failure::of(e, exit::OUTPUT))?;
    eprintln!(
        "sam2: {} mask{} (best score {:.3}, area {} px) → {}, {}, {}",
        count,
        if count == 1 { "" } else { "s" },
        prediction.scores[best],
        prediction.areas[best],
        with_suffix(
            &out,
            if count == 1 {
                ".mask.png"
            } else {
                ".mask-K.png"
            }
        )
        .display(),
        overlay_path.display(),
        json_path.display()
    );
    Ok(())
}

/// One mask as a COCO annotation: `segmentation` is the compressed RLE pycocotools reads (it keeps
/// holes), `bbox` is COCO's `[x, y, width, height]`; `polygons` adds the rings with holes, as flat
/// `[x1, y1, x2, y2, …]` lists in pixel-corner coordinates.
fn annotation(
    prediction: &sam2::Prediction,
    k: usize,
    tolerance: f32,
    mask_path: &Path,
) -> serde_json::Value {
    let rle = prediction.rle(k);
    let b = prediction.boxes[k];
    let bbox = if prediction.areas[k] == 0 {
        [0, 0, 0, 0]
    } else {
        [b[0], b[1], b[2] - b[0] + 1, b[3] - b[1] + 1]
    };
    let polygons = polygons_json(
        prediction.mask(k),
        prediction.width,
        prediction.height,
        tolerance,
    );
    serde_json::json!({
        "id": k + 1,
        "candidate": prediction.candidate_index[k],
        "score": prediction.scores[k],
        "area": prediction.areas[k],
        "bbox": bbox,
        "segmentation": { "size": [prediction.height, prediction.width], "counts": rle.to_coco_string() },
        "polygons": polygons,
        "polygon_tolerance": tolerance,
        "mask_file": mask_path.file_name().map(|n| n.to_string_lossy().into_owned()),
    })
}

fn everything(e: args::Everything) -> Result<(), Failure> {
    let (encoder_path, decoder_path) = model_files(&e.models)?;
    let decoder_path = decoder_path.ok_or_else(|| Failure::new(exit::USAGE, "no decoder given"))?;
    let picture = load_picture(&e.image, e.max_pixels)?;
    let (w, h) = picture.rgb.dimensions();
    init_runtime(e.onnxruntime.as_deref())?;
    let encoder = {
        let _p = progress::step("loading encoder");
        Encoder::new(
            &encoder_path,
            &EncoderOptions {
                session: session_options(e.device),
                ..EncoderOptions::default()
            },
        )
        .map_err(|err| Failure::of(err, exit::MODEL))?
    };
    let predictor = {
        let _p = progress::step("loading decoder");
        let options = PredictorOptions {
            encoder_fingerprint: Some(encoder.fingerprint()),
            session: session_options(e.device),
            pool_size: Some(1),
            ..PredictorOptions::default()
        };
        Predictor::new(&decoder_path, &options).map_err(|err| Failure::of(err, exit::MODEL))?
    };
    let defaults = EverythingOptions::default();
    let options = EverythingOptions {
        points_per_side: e.points_per_side.unwrap_or(defaults.points_per_side),
        pred_iou_thresh: e.pred_iou_thresh.unwrap_or(defaults.pred_iou_thresh),
        stability_score_thresh: e
            .stability_score_thresh
            .unwrap_or(defaults.stability_score_thresh),
        box_nms_thresh: e.box_nms_thresh.unwrap_or(defaults.box_nms_thresh),
        crop_n_layers: e.crop_n_layers.unwrap_or(defaults.crop_n_layers),
        min_mask_region_area: e
            .min_mask_region_area
            .unwrap_or(defaults.min_mask_region_area),
        ..defaults
    };
    let view = ImageView::packed(
        picture.rgb.as_raw(),
        w as usize,
        h as usize,
        PixelFormat::Rgb,
    )
    .map_err(|err| Failure::of(err, exit::INPUT))?;
    let found = {
        let _p = progress::step("segmenting everything");
        segment_everything(&view, &encoder, &predictor, &options)
            .map_err(|err| Failure::of(err, exit::INPUT))?
    };

    let out = output_prefix(&e.out, &e.image);
    create_parent(&out)?;
    // One mask decoded at a time: never every full-size mask at once.
    let mut labels = vec![0u32; (w * h) as usize];
    let mut annotations = Vec::with_capacity(found.masks.len());
    let mut mask = vec![0u8; (w * h) as usize];
    for (k, m) in found.masks.iter().enumerate() {
        m.rle
            .decode_into(&mut mask)
            .map_err(|err| Failure::of(err, exit::INTERNAL))?;
        for (label, &v) in labels.iter_mut().zip(&mask) {
            if v != 0 && *label == 0 {
                *label = k as u32 + 1;
            }
        }
        let bbox = if m.area == 0 {
            [0, 0, 0, 0]
        } else {
            [
                m.bbox[0],
                m.bbox[1],
                m.bbox[2] - m.bbox[0] + 1,
                m.bbox[3] - m.bbox[1] + 1,
            ]
        };
        let c = m.crop_box;
        annotations.push(serde_json::json!({
            "id": k + 1,
            "area": m.area,
            "bbox": bbox,
            "segmentation": { "size": [h, w], "counts": m.rle.to_coco_string() },
            "polygons": polygons_json(&mask, w as usize, h as usize, e.tolerance),
            "polygon_tolerance": e.tolerance,
            "predicted_iou": m.predicted_iou,
            "stability_score": m.stability_score,
            "point_coords": [m.point],
            "crop_box": [c[0], c[1], c[2] - c[0], c[3] - c[1]],
        }));
    }
    let mut outputs = sam2::files::StagedFiles::new();
    let overlay_path = with_suffix(&out, ".overlay.png");
    outputs
        .add(&overlay_path, |f| {
            picture::write_labels_overlay(&picture.rgb, &labels, f)
        })
        .map_err(|err| Failure::of(err, exit::OUTPUT))?;
    let json_path = with_suffix(&out, ".json");
    let document = serde_json::json!({
        "image": {
            "file_name": e.image.display().to_string(),
            "width": w,
            "height": h,
            "exif_orientation": picture.orientation,
        },
        "model": {
            "encoder": encoder_path.display().to_string(),
            "decoder": decoder_path.display().to_string(),
            "export": predictor.export().name(),
            "fingerprint": encoder.fingerprint().to_string(),
        },
        "generator": {
            "points_per_side": options.points_per_side,
            "points_per_batch": options.points_per_batch,
            "pred_iou_thresh": options.pred_iou_thresh,
            "stability_score_thresh": options.stability_score_thresh,
            "stability_score_offset": options.stability_score_offset,
            "box_nms_thresh": options.box_nms_thresh,
            "crop_n_layers": options.crop_n_layers,
            "crop_nms_thresh": options.crop_nms_thresh,
            "crop_overlap_ratio": options.crop_overlap_ratio,
            "min_mask_region_area": options.min_mask_region_area,
            "multimask": options.multimask,
        },
        "annotations": annotations,
    });
    add_json(&mut outputs, &json_path, &document)?;
    outputs
        .commit()
        .map_err(|err| Failure::of(err, exit::OUTPUT))?;
    eprintln!(
        "sam2: {} mask{} → {}, {}",
        found.masks.len(),
        if found.masks.len() == 1 { "" } else { "s" },
        overlay_path.display(),
        json_path.display()
    );
    Ok(())
}

/// Rings with holes, as flat `[x1, y1, x2, y2, …]` lists in pixel-corner coordinates.
fn polygons_json(
    mask: &[u8],
    width: usize,
    height: usize,
    tolerance: f32,
) -> Vec<serde_json::Value> {
    let flat = |ring: &Vec<[f32; 2]>| ring.iter().flat_map(|p| [p[0], p[1]]).collect::<Vec<f32>>();
    sam2::mask_polygons(mask, width, height, tolerance)
        .iter()
        .map(|p| serde_json::json!({ "outer": flat(&p.outer), "holes": p.holes.iter().map(flat).collect::<Vec<_>>() }))
        .collect()
}

fn add_json(
    outputs: &mut sam2::files::StagedFiles,
    path: &Path,
    document: &serde_json::Value,
) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(document)
        .map_err(|err| Failure::new(exit::INTERNAL, err.to_string()))?;
    outputs
        .add(path, |f| f.write_all((text + "\n").as_bytes()))
        .map_err(|err| Failure::of(err, exit::OUTPUT))
}

fn info(i: args::Info) -> Result<(), Failure> {
    init_runtime(i.onnxruntime.as_deref())?;
    let files: Vec<PathBuf> = if i.model.is_file() {
        vec![i.model.clone()]
    } else {
        let pair = sam2::find_model_pair(&i.model).map_err(|e| Failure::of(e, exit::MODEL))?;
        println!("pair: {} ({} naming)", pair.name, pair.naming.name());
        vec![pair.encoder, pair.decoder]
    };
    for file in files {
        describe(&file, i.device)?;
    }
    Ok(())
}

fn describe(file: &Path, device: Device) -> Result<(), Failure> {
    let bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    println!("{}", file.display());
    println!("  size: {:.1} MB", bytes as f64 / 1e6);
    let encoder_error = {
        let _p = progress::step("loading model");
        match Encoder::new(
            file,
            &EncoderOptions {
                session: session_options(device),
                ..EncoderOptions::default()
            },
        ) {
            Ok(encoder) => {
                let spec = encoder.spec();
                println!("  role: encoder ({} naming)", spec.family.name());
                println!(
                    "  input: {} {:?} [1, 3, {n}, {n}]",
                    spec.input_name,
                    spec.input_type,
                    n = spec.input_size
                );
                println!("  outputs: {}", spec.family.tensor_names().join(", "));
                println!(
                    "  fingerprint: {} (carried by its embeddings)",
                    encoder.fingerprint()
                );
                print_device(encoder.device());
                println!("  attention: {}", encoder.attention_fusion());
                return Ok(());
            }
            Err(e) => e,
        }
    };
    let options = PredictorOptions {
        session: session_options(device),
        pool_size: Some(1),
        ..PredictorOptions::default()
    };
    let predictor = {
        let _p = progress::step("loading model");
        Predictor::new(file, &options)
    };
    match predictor {
        Ok(predictor) => {
            let spec = predictor.spec();
            println!("  role: decoder, {} export", spec.export.name());
            println!("  embedding inputs: {} ({} naming)", spec.family.tensor_names().join(", "), spec.family.name());
            println!("  low-res masks: {n}×{n}", n = spec.low_res_size);
            let data = std::fs::read(file).map_err(|e| Failure::new(exit::MODEL, format!("cannot read {}: {e}", file.display())))?;
            println!("  fingerprint: {}", Fingerprint::of_bytes(&data));
            print_device(predictor.device());
            println!("  attention: {}", predictor.attention_fusion());
            Ok(())
        }
        Err(decoder_error) => match sam2::describe_video_module(file, &session_options(device)) {
            Ok((role, attention)) => {
                println!("  role: video {role} (four-module contract)\n  attention: {attention}");
                Ok(())
            }
            Err(_) => Err(Failure::new(
            exit::MODEL,
            format!("{} is neither a SAM2 encoder ({encoder_error}) nor a SAM2 decoder ({decoder_error})", file.display()),
        )),
        },
    }
}

fn print_device(device: &sam2::EffectiveDevice) {
    let names: Vec<&str> = device.providers.iter().map(|p| p.ort_name()).collect();
    println!(
        "  runs on: {}{} (providers: {})",
        device.primary.ort_name(),
        if device.fell_back {
            ", fell back from the requested GPU"
        } else {
            ""
        },
        names.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_exit_1_with_one_line_naming_it() {
        install_panic_hook();
        let failure = guarded(|| panic!("index 9 out of\nrange")).unwrap_err();
        assert_eq!(failure.code, exit::INTERNAL);
        assert!(
            failure.message.contains("index 9 out of") && failure.message.contains("main.rs"),
            "{}",
            failure.message
        );
        let failure = guarded(|| Err(Failure::new(exit::INPUT, "bad"))).unwrap_err();
        assert_eq!(
            (failure.code, failure.message.as_str()),
            (exit::INPUT, "bad")
        );
        let _ = std::panic::take_hook();
    }
}
