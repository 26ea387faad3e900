//! The command line, parsed by hand: a handful of subcommands and options, so a parser crate
//! would bring more code than it saves, and a hand-written one decides its own exit code (2) and
//! one-line messages.

use std::ffi::OsString;
use std::path::PathBuf;

use sam2::device::{MismatchPolicy, Provider};

/// A usage error: printed as one line, exit code 2.
#[derive(Debug)]
pub struct Usage(pub String);

fn usage<T>(text: impl Into<String>) -> Result<T, Usage> {
    Err(Usage(text.into()))
}

/// The arguments as text: one that is not valid UTF-8 is a usage error naming it (the paths and
/// options this command takes, and the JSON it writes, are UTF-8).
pub fn utf8(raw: Vec<OsString>) -> Result<Vec<String>, Usage> {
    raw.into_iter()
        .enumerate()
        .map(|(i, arg)| {
            arg.into_string().map_err(|arg| {
                Usage(format!(
                    "argument {} ({}) is not valid UTF-8; this command takes UTF-8 paths and options",
                    i + 1,
                    arg.to_string_lossy()
                ))
            })
        })
        .collect()
}

pub enum Command {
    Help,
    Version,
    Segment(Segment),
    Encode(Encode),
    Info(Info),
    Everything(Everything),
    Track(Track),
}

/// Where the models come from: `--model PATH` or `--encoder F --decoder F`.
#[derive(Debug, Default)]
pub struct Models {
    pub model: Option<PathBuf>,
    pub encoder: Option<PathBuf>,
    pub decoder: Option<PathBuf>,
}

/// How the command's sessions are made: the device, and the library's load-time rewrites.
#[derive(Debug, Clone, Copy)]
pub struct Device {
    pub provider: Provider,
    pub on_mismatch: MismatchPolicy,
    /// The rewrites allowed (`--no-rewrite` takes some away).
    pub rewrites: sam2::models::Rewrites,
}

impl Default for Device {
    fn default() -> Self {
        Device {
            provider: Provider::Cpu,
            on_mismatch: MismatchPolicy::Fallback,
            rewrites: sam2::models::Rewrites::ALL,
        }
    }
}

/// `--no-rewrite NAME[,NAME…]`: the rewrites named (the core's names, or `all`) taken away.
fn without_rewrites(
    mut on: sam2::models::Rewrites,
    text: &str,
) -> Result<sam2::models::Rewrites, String> {
    use sam2::models::{Rewrite, Rewrites};
    for name in text.split(',') {
        match (name, Rewrite::parse(name)) {
            ("all", _) => on = Rewrites::NONE,
            (_, Some(r)) => on = on.without(r),
            (_, None) => {
                let names: Vec<&str> = Rewrite::ALL.iter().map(|r| r.name()).collect();
                return Err(format!(
                    "--no-rewrite {text}: `{name}` is no rewrite (expected all, {})",
                    names.join(", ")
                ));
            }
        }
    }
    Ok(on)
}

pub struct Segment {
    pub image: PathBuf,
    /// The largest image read, in pixels (`--max-pixels`).
    pub max_pixels: u64,
    pub models: Models,
    pub points: Vec<sam2::Point>,
    pub bbox: Option<[f32; 4]>,
    pub multimask: bool,
    pub embedding: Option<PathBuf>,
    pub out: PathBuf,
    pub tolerance: f32,
    pub device: Device,
    pub onnxruntime: Option<PathBuf>,
}

pub struct Encode {
    pub image: PathBuf,
    /// The largest image read, in pixels (`--max-pixels`).
    pub max_pixels: u64,
    pub models: Models,
    pub out: PathBuf,
    pub device: Device,
    pub onnxruntime: Option<PathBuf>,
}

/// `sam2 everything`: SAM2's automatic mask generator; `None` keeps SAM2's default.
pub struct Everything {
    pub image: PathBuf,
    /// The largest image read, in pixels (`--max-pixels`).
    pub max_pixels: u64,
    pub models: Models,
    pub out: PathBuf,
    pub tolerance: f32,
    pub points_per_side: Option<u32>,
    pub pred_iou_thresh: Option<f32>,
    pub stability_score_thresh: Option<f32>,
    pub box_nms_thresh: Option<f32>,
    pub crop_n_layers: Option<u32>,
    pub min_mask_region_area: Option<u32>,
    pub device: Device,
    pub onnxruntime: Option<PathBuf>,
}

/// The prompts of one object on one frame of `sam2 track`.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackPrompt {
    pub object_id: u32,
    pub frame: u32,
    pub points: Vec<sam2::Point>,
    pub bbox: Option<[f32; 4]>,
}

/// Which way `sam2 track` goes from the first prompted frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directions {
    Forward,
    Backward,
    Both,
}

/// `sam2 track`: a video model over a sequence of frames.
pub struct Track {
    /// One directory (its PNG and JPEG files, sorted by name) or the frames themselves, in order.
    pub frames: Vec<PathBuf>,
    /// The largest frame read, in pixels (`--max-pixels`).
    pub max_pixels: u64,
    pub model: PathBuf,
    /// A directory: masks/obj<ID>/<frame>.png and track.json go there.
    pub out: PathBuf,
    /// In the order given; each object's prompts on each frame once.
    pub prompts: Vec<TrackPrompt>,
    pub directions: Directions,
    pub device: Device,
    pub onnxruntime: Option<PathBuf>,
}

pub struct Info {
    pub model: PathBuf,
    pub device: Device,
    pub onnxruntime: Option<PathBuf>,
}

fn numbers(
    text: &str,
    option: &str,
    count: std::ops::RangeInclusive<usize>,
) -> Result<Vec<f32>, Usage> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if !count.contains(&parts.len()) {
        return usage(format!(
            "{option} {text}: expected {} comma-separated values",
            option_shape(option)
        ));
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if i == 2 && option == "--point" {
                return match *p {
                    "pos" | "+" | "1" => Ok(1.0),
                    "neg" | "-" | "0" => Ok(0.0),
                    _ => usage(format!(
                        "--point {text}: the third value is pos or neg, not {p}"
                    )),
                };
            }
            match p.parse::<f32>() {
                Ok(v) if v.is_finite() => Ok(v),
                _ => usage(format!("{option} {text}: {p} is not a number")),
            }
        })
        .collect()
}

/// A whole number in `min..=max` for `option`.
fn whole(text: &str, option: &str, min: u32, max: u32) -> Result<u32, Usage> {
    match text.parse::<u32>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => usage(format!(
            "{option} {text}: expected a whole number from {min} to {max}"
        )),
    }
}

/// A number in `[0, 1]` for `option`.
fn fraction(text: &str, option: &str) -> Result<f32, Usage> {
    match text.parse::<f32>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => usage(format!("{option} {text}: expected a number from 0 to 1")),
    }
}

/// `--box X1,Y1,X2,Y2`: four numbers. Whether they make a box is the library's rule
/// (`validate_prompts`: X2 ≥ X1, Y2 ≥ Y1, inside the image), refused as bad input (exit 3).
fn box_value(text: &str) -> Result<[f32; 4], Usage> {
    let v = numbers(text, "--box", 4..=4)?;
    Ok([v[0], v[1], v[2], v[3]])
}

fn option_shape(option: &str) -> &'static str {
    match option {
        "--point" => "X,Y or X,Y,neg",
        _ => "X1,Y1,X2,Y2",
    }
}

fn provider(text: &str) -> Result<Provider, Usage> {
    Provider::parse(text).map_or_else(
        || {
            usage(format!(
                "--device {text}: expected {}",
                Provider::short_names(", ")
            ))
        },
        Ok,
    )
}

fn policy(text: &str) -> Result<MismatchPolicy, Usage> {
    match text {
        "fallback" => Ok(MismatchPolicy::Fallback),
        "fail" => Ok(MismatchPolicy::Fail),
        _ => usage(format!("--on-mismatch {text}: expected fail or fallback")),
    }
}

/// A cursor over the arguments after the subcommand; `--name=value` and `--name value` both work.
struct Args {
    items: std::vec::IntoIter<String>,
    command: &'static str,
}

impl Args {
    fn value(&mut self, option: &str, inline: Option<String>) -> Result<String, Usage> {
        match inline.or_else(|| self.items.next()) {
            Some(v) => Ok(v),
            None => usage(format!(
                "{option} needs a value (see sam2 {} --help)",
                self.command
            )),
        }
    }
}

pub fn parse(raw: Vec<String>) -> Result<Command, Usage> {
    let mut raw = raw.into_iter();
    let Some(command) = raw.next() else {
        return usage(
            "no command given: sam2 segment, everything, track, encode or info (sam2 --help)",
        );
    };
    let command: &'static str = match command.as_str() {
        "-h" | "--help" | "help" => return Ok(Command::Help),
        "-V" | "--version" => return Ok(Command::Version),
        "segment" => "segment",
        "encode" => "encode",
        "info" => "info",
        "everything" => "everything",
        "track" => "track",
        other => {
            return usage(format!(
                "unknown command {other}: expected segment, everything, track, encode or info \
                 (sam2 --help)"
            ))
        }
    };
    let mut args = Args {
        items: raw.collect::<Vec<_>>().into_iter(),
        command,
    };
    let mut positional: Vec<String> = Vec::new();
    let mut models = Models::default();
    let mut device = Device::default();
    let mut onnxruntime = None;
    let mut points = Vec::new();
    let mut bbox = None;
    let mut multimask = false;
    let mut embedding = None;
    let mut out = None;
    let mut tolerance = 0.0f32;
    let mut max_pixels = crate::picture::DEFAULT_MAX_PIXELS;
    let segment = command == "segment";
    let everything = command == "everything";
    let track = command == "track";
    // `sam2 track`: prompts go to the current object (--object) on the current frame (--frame).
    let (mut object_id, mut frame) = (1u32, 0u32);
    let mut track_prompts: Vec<TrackPrompt> = Vec::new();
    let mut directions = Directions::Both;
    let (mut points_per_side, mut pred_iou_thresh, mut stability_score_thresh) = (None, None, None);
    let (mut box_nms_thresh, mut crop_n_layers, mut min_mask_region_area) = (None, None, None);
    while let Some(arg) = args.items.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        match name.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--model" | "-m" if command != "info" => {
                models.model = Some(args.value(&name, inline)?.into())
            }
            "--encoder" if command != "info" && !track => {
                models.encoder = Some(args.value(&name, inline)?.into())
            }
            "--decoder" if segment || everything => {
                models.decoder = Some(args.value(&name, inline)?.into())
            }
            "--device" => device.provider = provider(&args.value(&name, inline)?)?,
            "--on-mismatch" => device.on_mismatch = policy(&args.value(&name, inline)?)?,
            "--no-rewrite" => {
                let text = args.value(&name, inline)?;
                device.rewrites = match without_rewrites(device.rewrites, &text) {
                    Ok(on) => on,
                    Err(message) => return usage(message),
                };
            }
            "--onnxruntime" => onnxruntime = Some(PathBuf::from(args.value(&name, inline)?)),
            "-o" | "--output" if command != "info" => {
                let text = args.value(&name, inline)?;
                if text.is_empty() {
                    return usage(format!(
                        "{name} needs a path, not an empty one (a prefix such as out/photo, or a \
                         directory)"
                    ));
                }
                out = Some(PathBuf::from(text))
            }
            "--max-pixels" if command != "info" => {
                let text = args.value(&name, inline)?;
                max_pixels = match text.parse::<u64>() {
                    Ok(v) if v >= 1 => v,
                    _ => {
                        return usage(format!(
                            "--max-pixels {text}: expected a whole number of pixels, 1 or more"
                        ))
                    }
                };
            }
            "--object" if track => {
                object_id = whole(&args.value(&name, inline)?, &name, 1, i32::MAX as u32)?
            }
            "--frame" if track => {
                frame = whole(&args.value(&name, inline)?, &name, 0, i32::MAX as u32)?
            }
            "--direction" if track => {
                directions = match args.value(&name, inline)?.as_str() {
                    "forward" => Directions::Forward,
                    "backward" => Directions::Backward,
                    "both" => Directions::Both,
                    other => {
                        return usage(format!(
                            "--direction {other}: expected forward, backward or both"
                        ))
                    }
                }
            }
            "--point" | "-p" | "--box" | "-b" if track => {
                let at = match track_prompts
                    .iter()
                    .position(|p| p.object_id == object_id && p.frame == frame)
                {
                    Some(at) => at,
                    None => {
                        track_prompts.push(TrackPrompt {
                            object_id,
                            frame,
                            points: Vec::new(),
                            bbox: None,
                        });
                        track_prompts.len() - 1
                    }
                };
                let group = &mut track_prompts[at];
                if name == "--point" || name == "-p" {
                    let v = numbers(&args.value("--point", inline)?, "--point", 2..=3)?;
                    group.points.push(sam2::Point {
                        x: v[0],
                        y: v[1],
                        positive: v.get(2) != Some(&0.0),
                    });
                } else {
                    if group.bbox.is_some() {
                        return usage(format!(
                            "--box given twice for object {object_id} on frame {frame}: one box \
                             per object and frame"
                        ));
                    }
                    group.bbox = Some(box_value(&args.value("--box", inline)?)?);
                }
            }
            "--point" | "-p" if segment => {
                let v = numbers(&args.value("--point", inline)?, "--point", 2..=3)?;
                points.push(sam2::Point {
                    x: v[0],
                    y: v[1],
                    positive: v.get(2) != Some(&0.0),
                });
            }
            "--box" | "-b" if segment => {
                if bbox.is_some() {
                    return usage("--box given twice: one box per object");
                }
                bbox = Some(box_value(&args.value("--box", inline)?)?);
            }
            "--multimask" if segment => multimask = true,
            "--embedding" if segment => embedding = Some(PathBuf::from(args.value(&name, inline)?)),
            "--points-per-side" if everything => {
                points_per_side = Some(whole(&args.value(&name, inline)?, &name, 1, 1024)?)
            }
            "--crop-n-layers" if everything => {
                crop_n_layers = Some(whole(&args.value(&name, inline)?, &name, 0, 4)?)
            }
            "--min-mask-region-area" if everything => {
                min_mask_region_area =
                    Some(whole(&args.value(&name, inline)?, &name, 0, 256 * 256)?)
            }
            "--pred-iou-thresh" if everything => {
                pred_iou_thresh = Some(fraction(&args.value(&name, inline)?, &name)?)
            }
            "--stability-score-thresh" if everything => {
                stability_score_thresh = Some(fraction(&args.value(&name, inline)?, &name)?)
            }
            "--box-nms-thresh" if everything => {
                box_nms_thresh = Some(fraction(&args.value(&name, inline)?, &name)?)
            }
            "--tolerance" if segment || everything => {
                let text = args.value(&name, inline)?;
                tolerance = match text.parse::<f32>() {
                    Ok(v) if v.is_finite() && v >= 0.0 => v,
                    _ => {
                        return usage(format!(
                            "--tolerance {text}: expected a number of pixels, 0 or more"
                        ))
                    }
                };
            }
            _ if name.starts_with('-') && name.len() > 1 => {
                return usage(format!(
                    "unknown option {name} for sam2 {command} (sam2 {command} --help)"
                ))
            }
            _ => positional.push(arg),
        }
    }
    let one = |what: &str, mut positional: Vec<String>| -> Result<PathBuf, Usage> {
        match positional.len() {
            1 => Ok(PathBuf::from(positional.remove(0))),
            0 => usage(format!(
                "sam2 {command} needs {what} (sam2 {command} --help)"
            )),
            _ => usage(format!(
                "sam2 {command} takes one {what}; also given: {}",
                positional[1..].join(" ")
            )),
        }
    };
    let check_models = |models: &Models, needs_decoder: bool| -> Result<(), Usage> {
        let pair = models.encoder.is_some() || models.decoder.is_some();
        if models.model.is_some() && pair {
            return usage("give either --model or --encoder/--decoder, not both");
        }
        if models.model.is_none() && models.encoder.is_none() {
            return usage(if needs_decoder {
                "a model is needed: --model DIR (or DIR/NAME), or --encoder FILE --decoder FILE"
            } else {
                "a model is needed: --model DIR (or DIR/NAME), or --encoder FILE"
            });
        }
        if needs_decoder && models.model.is_none() && models.decoder.is_none() {
            return usage("--encoder needs --decoder (or use --model DIR)");
        }
        Ok(())
    };
    match command {
        "segment" => {
            let image = one("an IMAGE", positional)?;
            let Some(out) = out else {
                return usage("sam2 segment needs -o OUT (the prefix of the files it writes)");
            };
            if points.is_empty() && bbox.is_none() {
                return usage("sam2 segment needs a prompt: --point X,Y and/or --box X1,Y1,X2,Y2");
            }
            if embedding.is_some() && models.model.is_none() && models.decoder.is_none() {
                return usage(
                    "--embedding needs the decoder too: --model DIR, or --encoder F --decoder F",
                );
            }
            check_models(&models, true)?;
            Ok(Command::Segment(Segment {
                image,
                max_pixels,
                models,
                points,
                bbox,
                multimask,
                embedding,
                out,
                tolerance,
                device,
                onnxruntime,
            }))
        }
        "everything" => {
            let image = one("an IMAGE", positional)?;
            let Some(out) = out else {
                return usage("sam2 everything needs -o OUT (the prefix of the files it writes)");
            };
            check_models(&models, true)?;
            Ok(Command::Everything(Everything {
                image,
                max_pixels,
                models,
                out,
                tolerance,
                points_per_side,
                pred_iou_thresh,
                stability_score_thresh,
                box_nms_thresh,
                crop_n_layers,
                min_mask_region_area,
                device,
                onnxruntime,
            }))
        }
        "encode" => {
            let image = one("an IMAGE", positional)?;
            let Some(out) = out else {
                return usage("sam2 encode needs -o FILE (the embedding file to write)");
            };
            check_models(&models, false)?;
            Ok(Command::Encode(Encode {
                image,
                max_pixels,
                models,
                out,
                device,
                onnxruntime,
            }))
        }
        "track" => {
            if positional.is_empty() {
                return usage(
                    "sam2 track needs FRAMES: a directory of PNG/JPEG frames, or the frames \
                     themselves (sam2 track --help)",
                );
            }
            let Some(out) = out else {
                return usage("sam2 track needs -o DIR (the directory it writes the masks into)");
            };
            let Some(model) = models.model else {
                return usage("a video model is needed: --model DIR (or DIR/NAME)");
            };
            if track_prompts.is_empty() {
                return usage(
                    "sam2 track needs a prompt: --point X,Y and/or --box X1,Y1,X2,Y2 (on --frame \
                     K, for --object ID)",
                );
            }
            Ok(Command::Track(Track {
                frames: positional.into_iter().map(PathBuf::from).collect(),
                max_pixels,
                model,
                out,
                prompts: track_prompts,
                directions,
                device,
                onnxruntime,
            }))
        }
        _ => Ok(Command::Info(Info {
            model: one("a MODEL (an .onnx file or a --model path)", positional)?,
            device,
            onnxruntime,
        })),
    }
}
