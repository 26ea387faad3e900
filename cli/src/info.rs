//! `sam2 info`: what a model file is and what it runs on.

use std::path::{Path, PathBuf};

use sam2::{Encoder, EncoderOptions, Fingerprint, Predictor, PredictorOptions};

use crate::args::{self, Device};
use crate::common::{init_runtime, session_options};
use crate::failure::{exit, Failure};
use crate::progress;

pub(crate) fn run(i: args::Info) -> Result<(), Failure> {
    init_runtime(i.onnxruntime.as_deref())?;
    if i.model.join(sam2::concept::IMAGE_ENCODER_FILE).is_file() {
        return describe_sam3(&i.model, i.device);
    }
    let files: Vec<PathBuf> = if i.model.is_file() {
        vec![i.model.clone()]
    } else {
        // A video export's four modules, and an image pair beside them (EdgeTAM's export holds
        // both); the video image encoder and decoder are not shown again as a pair.
        let video = sam2::video::VideoModelPaths::find(&i.model).ok();
        let pair = sam2::models::find_model_pair(&i.model);
        let mut files = Vec::new();
        match (pair, &video) {
            (Ok(pair), v) if v.as_ref().is_none_or(|v| v.image_encoder != pair.encoder) => {
                println!("pair: {} ({} naming)", pair.name, pair.naming.name());
                files.extend([pair.encoder, pair.decoder]);
            }
            (Err(e), None) => return Err(Failure::of(e, exit::MODEL)),
            // The video modules' image encoder and decoder are a pair too, so with them the only
            // failure is several pairs (EdgeTAM's export): say which, and how to choose one.
            (Err(e), Some(_)) => println!("image pairs: {e}"),
            _ => {}
        }
        if let Some(v) = video {
            println!("video modules (the four-module contract, docs/video.md)");
            files.extend([
                v.image_encoder,
                v.memory_attention,
                v.image_decoder,
                v.memory_encoder,
            ]);
        }
        files
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
                let batch = if spec.family == sam2::models::EncoderFamily::Sam3 {
                    ""
                } else {
                    "1, "
                };
                println!(
                    "  input: {} {:?} [{batch}3, {n}, {n}]",
                    spec.input_name,
                    spec.input_type,
                    n = spec.input_size
                );
                println!("  outputs: {}", spec.family.tensor_names().join(", "));
                println!(
                    "  fingerprint: {} (carried by its embeddings)",
                    encoder.fingerprint()
                );
                println!("  precision: {}", encoder.variant());
                print_device(encoder.device());
                println!("  attention: {}", encoder.attention_fusion());
                print_rewrites(encoder.attention_fusion());
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
            print_rewrites(predictor.attention_fusion());
            Ok(())
        }
        Err(decoder_error) => match sam2::video::describe_video_module(file, &session_options(device)) {
            Ok(module) => {
                let family = module.family.map_or("SAM2 or EdgeTAM (the same contract for both)", |f| f.name());
                println!("  role: video {} (four-module contract)\n  family: {family}", module.role);
                println!("  precision: {}\n  attention: {}", module.variant, module.attention);
                print_rewrites(&module.attention);
                Ok(())
            }
            Err(_) => Err(Failure::new(
                exit::MODEL,
                format!("{} is neither a SAM2 encoder ({encoder_error}) nor a SAM2 decoder ({decoder_error})", file.display()),
            )),
        },
    }
}

fn print_device(device: &sam2::device::EffectiveDevice) {
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

/// Which of the library's load-time rewrites ran, how often, how many of their finds each left
/// as exported, and which were switched off (`--no-rewrite`).
fn print_rewrites(report: &sam2::models::RewriteReport) {
    let ran: Vec<String> = report
        .counts()
        .iter()
        .map(
            |&(r, n)| match report.outcome(r).map_or(0, |o| o.left_count()) {
                0 => format!("{r} {n}"),
                left => format!("{r} {n} ({left} left as exported)"),
            },
        )
        .collect();
    let mut line = match &report.not_tried {
        Some(why) => format!("none ({why})"),
        None if ran.is_empty() => "none".to_string(),
        None => ran.join(", "),
    };
    if !report.off.is_empty() {
        let off: Vec<&str> = report.off.iter().map(|r| r.name()).collect();
        line.push_str(&format!("; switched off: {}", off.join(", ")));
    }
    println!("  rewrites: {line}");
}

/// A SAM 3 export's folder: its three graphs and vocabulary, loaded as the concept model.
fn describe_sam3(dir: &Path, device: Device) -> Result<(), Failure> {
    println!("SAM 3 export (concepts: a phrase or exemplar boxes → every instance; docs/sam3.md)");
    let paths =
        sam2::concept::ConceptPaths::find(dir, None).map_err(|e| Failure::of(e, exit::MODEL))?;
    for (what, file) in [
        ("image encoder", &paths.image_encoder),
        ("language encoder", &paths.language_encoder),
        ("decoder", &paths.decoder),
        ("vocabulary", &paths.vocabulary),
    ] {
        let bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        println!(
            "  {what}: {} ({:.1} MB)",
            file.display(),
            bytes as f64 / 1e6
        );
    }
    let model = {
        let _p = progress::step("loading SAM 3");
        sam2::concept::ConceptModel::new(
            dir,
            &sam2::concept::ConceptModelOptions {
                session: session_options(device),
                ..Default::default()
            },
        )
        .map_err(|e| Failure::of(e, exit::MODEL))?
    };
    let encoder = model.encoder();
    println!(
        "  embedding: {} (sam3 family, 111 MB in float32)",
        encoder.spec().family.tensor_names().join(", ")
    );
    println!(
        "  fingerprint: {} (carried by its embeddings)",
        encoder.fingerprint()
    );
    println!("  precision: {}", encoder.variant());
    println!(
        "  exemplar boxes per concept: at most {}",
        model.max_exemplars()
    );
    println!("  weights: {:.1} MB", model.weight_bytes() as f64 / 1e6);
    print_device(encoder.device());
    print_rewrites(encoder.attention_fusion());
    Ok(())
}
