//! What the commands share: loading ONNX Runtime, the models and the picture, encoding, and where
//! and how the outputs are written.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sam2::device::{DeviceOptions, ProviderRequest, SessionOptions};
use sam2::{Encoder, EncoderOptions, ImageView, PixelFormat};

use crate::args::{Device, Models};
use crate::failure::{exit, Failure};
use crate::{picture, progress};

/// Whether `path`'s extension is one of `set` (lower case), in any case.
pub(crate) fn has_extension(path: &Path, set: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| set.contains(&e.to_ascii_lowercase().as_str()))
}

pub(crate) fn init_runtime(explicit: Option<&Path>) -> Result<(), Failure> {
    sam2::runtime::init(explicit).map_err(|e| Failure::of(e, exit::RUNTIME))?;
    sam2::log::set_sink(
        Some(Arc::new(|_, message: &str| {
            eprintln!("sam2: warning: {message}")
        })),
        sam2::log::LogLevel::Warning,
    );
    Ok(())
}

pub(crate) fn session_options(device: Device) -> SessionOptions {
    let mut request = ProviderRequest::cpu();
    request.provider = device.provider;
    SessionOptions {
        device: DeviceOptions {
            providers: vec![request],
            on_mismatch: device.on_mismatch,
        },
        rewrites: device.rewrites,
        ..SessionOptions::default()
    }
}

/// The encoder and decoder files the options name.
pub(crate) fn model_files(models: &Models) -> Result<(PathBuf, Option<PathBuf>), Failure> {
    if let Some(path) = &models.model {
        let pair = sam2::models::find_model_pair(path).map_err(|e| Failure::of(e, exit::MODEL))?;
        return Ok((pair.encoder, Some(pair.decoder)));
    }
    let encoder = models
        .encoder
        .clone()
        .ok_or_else(|| Failure::new(exit::USAGE, "no encoder given"))?;
    Ok((encoder, models.decoder.clone()))
}

pub(crate) fn load_picture(path: &Path, max_pixels: u64) -> Result<picture::Picture, Failure> {
    let _p = progress::step("reading image");
    picture::load(path, max_pixels).map_err(|m| Failure::new(exit::INPUT, m))
}

pub(crate) fn encode_picture(
    encoder_path: &Path,
    device: Device,
    picture: &picture::Picture,
) -> Result<(Encoder, sam2::Embedding), Failure> {
    let encoder = load_encoder(encoder_path, device)?;
    let embedding = encode(&encoder, picture)?;
    Ok((encoder, embedding))
}

pub(crate) fn load_encoder(encoder_path: &Path, device: Device) -> Result<Encoder, Failure> {
    let _p = progress::step("loading encoder");
    Encoder::new(
        encoder_path,
        &EncoderOptions {
            session: session_options(device),
            ..EncoderOptions::default()
        },
    )
    .map_err(|e| Failure::of(e, exit::MODEL))
}

pub(crate) fn encode(
    encoder: &Encoder,
    picture: &picture::Picture,
) -> Result<sam2::Embedding, Failure> {
    let (w, h) = picture.rgb.dimensions();
    let view = ImageView::packed(
        picture.rgb.as_raw(),
        w as usize,
        h as usize,
        PixelFormat::Rgb,
    )
    .map_err(|e| Failure::of(e, exit::INPUT))?;
    let _p = progress::step("encoding image");
    encoder
        .encode(&view)
        .map_err(|e| Failure::of(e, exit::INPUT))
}

/// The decoder, made to read the embeddings of `encoder` where they are (the device asked for, or
/// the CPU it fell back to), or, without one, to check embeddings against `fingerprint`.
pub(crate) fn load_predictor(
    decoder_path: &Path,
    device: Device,
    fingerprint: Option<sam2::Fingerprint>,
    encoder: Option<&Encoder>,
) -> Result<sam2::Predictor, Failure> {
    let _p = progress::step("loading decoder");
    let mut options = sam2::PredictorOptions {
        encoder_fingerprint: fingerprint,
        session: session_options(device),
        pool_size: Some(1),
        ..sam2::PredictorOptions::default()
    };
    match encoder {
        Some(encoder) => {
            options.session.device.providers.clear();
            sam2::Predictor::for_encoder(decoder_path, encoder, &options)
        }
        None => sam2::Predictor::new(decoder_path, &options),
    }
    .map_err(|e| Failure::of(e, exit::MODEL))
}

pub(crate) fn create_parent(path: &Path) -> Result<(), Failure> {
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
pub(crate) fn output_prefix(out: &Path, image: &Path) -> PathBuf {
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
pub(crate) fn with_suffix(out: &Path, suffix: &str) -> PathBuf {
    let mut name = out
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    out.with_file_name(name)
}

/// Rings with holes, as flat `[x1, y1, x2, y2, …]` lists in pixel-corner coordinates.
pub(crate) fn polygons_json(
    mask: &[u8],
    width: usize,
    height: usize,
    tolerance: f32,
) -> Vec<serde_json::Value> {
    let flat = |ring: &Vec<[f32; 2]>| ring.iter().flat_map(|p| [p[0], p[1]]).collect::<Vec<f32>>();
    sam2::masks::polygons(mask, width, height, tolerance)
        .iter()
        .map(|p| serde_json::json!({ "outer": flat(&p.outer), "holes": p.holes.iter().map(flat).collect::<Vec<_>>() }))
        .collect()
}

pub(crate) fn add_json(
    outputs: &mut sam2::__private::files::StagedFiles,
    path: &Path,
    document: &serde_json::Value,
) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(document)
        .map_err(|err| Failure::new(exit::INTERNAL, err.to_string()))?;
    outputs
        .add(path, |f| f.write_all((text + "\n").as_bytes()))
        .map_err(|err| Failure::of(err, exit::OUTPUT))
}

/// An embedding file for `image` (`--embedding FILE`): made by the encoder of `fingerprint`, from
/// an image of the picture's size.
pub(crate) fn load_embedding(
    file: &Path,
    fingerprint: sam2::Fingerprint,
    image: &Path,
    picture: &picture::Picture,
) -> Result<sam2::Embedding, Failure> {
    let embedding = sam2::embedding_file::load(file, Some(fingerprint))
        .map_err(|e| Failure::of(e, exit::INPUT))?;
    let (w, h) = picture.rgb.dimensions();
    if embedding.image_size() != (w, h) {
        let (ew, eh) = embedding.image_size();
        return Err(Failure::new(
            exit::INPUT,
            format!(
                "{} was made from a {ew}×{eh} image, but {} is {w}×{h}",
                file.display(),
                image.display()
            ),
        ));
    }
    Ok(embedding)
}

/// The `image` object of the JSON documents: the file, its size and its EXIF orientation.
pub(crate) fn image_json(image: &Path, picture: &picture::Picture) -> serde_json::Value {
    let (w, h) = picture.rgb.dimensions();
    serde_json::json!({
        "file_name": image.display().to_string(),
        "width": w,
        "height": h,
        "exif_orientation": picture.orientation,
    })
}
