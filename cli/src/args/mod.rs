//! The command line. clap (derive API) owns the syntax: each command's help (`syntax`),
//! `--name=value`, suggestions for a mistyped command or option, and shell completions. The
//! meaning stays ours: every value goes through a parser that answers in the project's words
//! (`values`), the checks that span options (a model, a prompt, `-o`) run after clap (here), and
//! every usage error, clap's own included, is one line with exit code 2 (`clap_errors`).

mod clap_errors;
mod syntax;
mod values;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::{ArgMatches, FromArgMatches};
use sam2::device::{MismatchPolicy, Provider};

use clap_errors::one_line;
pub use syntax::command;
use syntax::{Cli, EncodeArgs, EverythingArgs, InfoArgs, SegmentArgs, Sub, TrackArgs};

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

/// What the command line asks for, and whether progress is shown.
pub struct Invocation {
    pub command: Command,
    /// `--quiet`: no progress on stderr.
    pub quiet: bool,
}

pub enum Command {
    /// Help or the version, as clap renders it (stdout, exit 0).
    Show(clap::Error),
    /// `sam2 completions SHELL`: the script, for stdout.
    Completions(clap_complete::Shell),
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

pub struct Segment {
    /// `--shard I/N`: this part of a batch.
    pub shard: Option<crate::shard::Shard>,
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
    /// SAM 3's prompts (`--text`, `--exemplar`) and their options, instead of SAM 2's.
    pub concepts: Option<Concepts>,
}

/// `sam2 segment --text/--exemplar`: what SAM 3 is asked to find, and how instances are kept.
pub struct Concepts {
    /// One concept per `--text`, each with every exemplar box; the boxes alone without one.
    pub concepts: Vec<sam2::concept::Concept>,
    pub options: sam2::concept::SegmentOptions,
    pub vocabulary: Option<PathBuf>,
}

pub struct Encode {
    /// `--shard I/N`: this part of a batch.
    pub shard: Option<crate::shard::Shard>,
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
    /// `--shard I/N`: this part of a batch.
    pub shard: Option<crate::shard::Shard>,
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
    /// The frame given (`--frame`): a number, or in a video a time.
    pub frame: crate::video_file::At,
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
    /// `--shard I/N`: this part of a batch.
    pub shard: Option<crate::shard::Shard>,
    /// One directory (its PNG and JPEG files, sorted by name) or the frames themselves, in order.
    pub frames: Vec<PathBuf>,
    /// The largest frame read, in pixels (`--max-pixels`).
    pub max_pixels: u64,
    /// Which of a video file's frames are tracked (`--start`, `--end`, `--every`).
    pub selection: crate::video_file::Selection,
    /// A video of the masks over the frames (`--overlay FILE`).
    pub overlay: Option<PathBuf>,
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

pub fn parse(raw: Vec<String>) -> Result<Invocation, Usage> {
    // The command named, for the messages (`sam2 segment --help`); clap's errors do not say.
    let names: Vec<String> = command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let named = raw
        .iter()
        .find(|a| !a.starts_with('-'))
        .filter(|a| names.contains(a))
        .cloned();
    let matches = match command().try_get_matches_from(std::iter::once("sam2".into()).chain(raw)) {
        Ok(matches) => matches,
        Err(e) => {
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Ok(Invocation {
                    command: Command::Show(e),
                    quiet: false,
                }),
                _ => Err(one_line(&e, named.as_deref(), &names)),
            }
        }
    };
    let cli =
        Cli::from_arg_matches(&matches).map_err(|e| one_line(&e, named.as_deref(), &names))?;
    let command = match cli.command {
        Sub::Segment(s) => Command::Segment(segment(s)?),
        Sub::Everything(e) => Command::Everything(everything(e)?),
        Sub::Encode(e) => Command::Encode(encode(e)?),
        Sub::Info(i) => Command::Info(info(i)?),
        Sub::Track(t) => {
            let order = matches
                .subcommand_matches("track")
                .expect("the track command's matches");
            Command::Track(track(t, order)?)
        }
        Sub::Completions { shell } => Command::Completions(shell),
    };
    Ok(Invocation {
        command,
        quiet: cli.quiet,
    })
}

/// The checks of `--model`/`--encoder`/`--decoder` together.
fn check_models(models: &Models, needs_decoder: bool) -> Result<(), Usage> {
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
}

/// SAM 3's prompts, when `--text` or `--exemplar` is given: one concept per phrase, each with
/// every exemplar box (the boxes alone are one concept), and the options of what is kept.
fn concepts(s: &SegmentArgs) -> Result<Option<Concepts>, Usage> {
    if s.texts.is_empty() && s.exemplars.is_empty() {
        if s.threshold.is_some()
            || s.nms.is_some()
            || s.max_instances.is_some()
            || s.vocab.is_some()
        {
            return usage(
                "--threshold, --nms, --max-instances and --vocab are SAM 3's: give --text or --exemplar",
            );
        }
        return Ok(None);
    }
    if !s.points.is_empty() || !s.boxes.is_empty() || s.multimask {
        return usage(
            "--text and --exemplar (SAM 3's concepts) do not go with --point, --box or --multimask (one object's prompt): give one kind",
        );
    }
    if s.models.model.is_none() || s.models.encoder.is_some() || s.models.decoder.is_some() {
        return usage("--text and --exemplar need --model DIR (the folder of a SAM 3 export), not --encoder/--decoder");
    }
    let concepts = if s.texts.is_empty() {
        vec![sam2::concept::Concept {
            text: None,
            exemplars: s.exemplars.clone(),
        }]
    } else {
        s.texts
            .iter()
            .map(|t| sam2::concept::Concept {
                text: Some(t.clone()),
                exemplars: s.exemplars.clone(),
            })
            .collect()
    };
    let defaults = sam2::concept::SegmentOptions::default();
    let nms = s.nms.unwrap_or(defaults.nms);
    Ok(Some(Concepts {
        concepts,
        options: sam2::concept::SegmentOptions {
            score_threshold: s.threshold.unwrap_or(defaults.score_threshold),
            nms,
            max_instances: s
                .max_instances
                .map_or(defaults.max_instances, |n| n as usize),
            masks: true,
        },
        vocabulary: s.vocab.clone(),
    }))
}

fn segment(s: SegmentArgs) -> Result<Segment, Usage> {
    let concepts = concepts(&s)?;
    let Some(out) = s.out else {
        return usage("sam2 segment needs -o OUT (the prefix of the files it writes)");
    };
    if let Some(concepts) = concepts {
        if s.embedding.is_some() && s.image.is_dir() {
            return usage(
                "--embedding is one image's embedding: give one image with it, not a batch",
            );
        }
        return Ok(Segment {
            image: s.image,
            max_pixels: s.input.max_pixels,
            models: Models {
                model: s.models.model,
                encoder: None,
                decoder: None,
            },
            points: Vec::new(),
            bbox: None,
            multimask: false,
            embedding: s.embedding,
            out,
            tolerance: s.tolerance,
            device: s.device.device(),
            onnxruntime: s.device.onnxruntime,
            shard: s.input.shard,
            concepts: Some(concepts),
        });
    }
    if s.boxes.len() > 1 {
        return usage("--box given twice: one box per object");
    }
    if s.points.is_empty() && s.boxes.is_empty() {
        return usage("sam2 segment needs a prompt: --point X,Y and/or --box X1,Y1,X2,Y2");
    }
    let models = Models {
        model: s.models.model,
        encoder: s.models.encoder,
        decoder: s.models.decoder,
    };
    if s.embedding.is_some() && models.model.is_none() && models.decoder.is_none() {
        return usage("--embedding needs the decoder too: --model DIR, or --encoder F --decoder F");
    }
    check_models(&models, true)?;
    Ok(Segment {
        image: s.image,
        max_pixels: s.input.max_pixels,
        models,
        points: s.points,
        bbox: s.boxes.first().copied(),
        multimask: s.multimask,
        embedding: s.embedding,
        out,
        tolerance: s.tolerance,
        device: s.device.device(),
        onnxruntime: s.device.onnxruntime,
        shard: s.input.shard,
        concepts: None,
    })
}

fn everything(e: EverythingArgs) -> Result<Everything, Usage> {
    let Some(out) = e.out else {
        return usage("sam2 everything needs -o OUT (the prefix of the files it writes)");
    };
    let models = Models {
        model: e.models.model,
        encoder: e.models.encoder,
        decoder: e.models.decoder,
    };
    check_models(&models, true)?;
    Ok(Everything {
        image: e.image,
        max_pixels: e.input.max_pixels,
        models,
        out,
        tolerance: e.tolerance,
        points_per_side: e.points_per_side,
        pred_iou_thresh: e.pred_iou_thresh,
        stability_score_thresh: e.stability_score_thresh,
        box_nms_thresh: e.box_nms_thresh,
        crop_n_layers: e.crop_n_layers,
        min_mask_region_area: e.min_mask_region_area,
        device: e.device.device(),
        onnxruntime: e.device.onnxruntime,
        shard: e.input.shard,
    })
}

fn encode(e: EncodeArgs) -> Result<Encode, Usage> {
    let Some(out) = e.out else {
        return usage("sam2 encode needs -o FILE (the embedding file to write)");
    };
    let models = Models {
        model: e.model,
        encoder: e.encoder,
        decoder: None,
    };
    check_models(&models, false)?;
    Ok(Encode {
        image: e.image,
        max_pixels: e.input.max_pixels,
        models,
        out,
        device: e.device.device(),
        onnxruntime: e.device.onnxruntime,
        shard: e.input.shard,
    })
}

fn info(i: InfoArgs) -> Result<Info, Usage> {
    Ok(Info {
        model: i.model,
        device: i.device.device(),
        onnxruntime: i.device.onnxruntime,
    })
}

/// One of `sam2 track`'s prompt options, where it stood on the command line.
enum Step {
    Object(u32),
    Frame(crate::video_file::At),
    Point(sam2::Point),
    Box([f32; 4]),
}

/// `sam2 track`'s prompts follow the order of the options: `--point` and `--box` are for the
/// object of the last `--object` on the frame of the last `--frame`. clap gives each option's
/// values; their indices in `matches` put them back in order.
fn track(t: TrackArgs, matches: &ArgMatches) -> Result<Track, Usage> {
    let mut steps: Vec<(usize, Step)> = Vec::new();
    let mut add = |id: &str, steps_of: &mut dyn Iterator<Item = Step>| {
        if let Some(indices) = matches.indices_of(id) {
            steps.extend(indices.zip(steps_of));
        }
    };
    add("object", &mut t.objects.iter().map(|&v| Step::Object(v)));
    add(
        "frame",
        &mut t.frame_numbers.iter().map(|&v| Step::Frame(v)),
    );
    add("point", &mut t.points.iter().map(|&v| Step::Point(v)));
    add("box", &mut t.boxes.iter().map(|&v| Step::Box(v)));
    steps.sort_by_key(|(index, _)| *index);

    let (mut object_id, mut frame) = (1u32, crate::video_file::At::Frame(0));
    let mut prompts: Vec<TrackPrompt> = Vec::new();
    for (_, step) in steps {
        let (point, bbox) = match step {
            Step::Object(id) => {
                object_id = id;
                continue;
            }
            Step::Frame(k) => {
                frame = k;
                continue;
            }
            Step::Point(p) => (Some(p), None),
            Step::Box(b) => (None, Some(b)),
        };
        let at = match prompts
            .iter()
            .position(|p| p.object_id == object_id && p.frame == frame)
        {
            Some(at) => at,
            None => {
                prompts.push(TrackPrompt {
                    object_id,
                    frame,
                    points: Vec::new(),
                    bbox: None,
                });
                prompts.len() - 1
            }
        };
        let group = &mut prompts[at];
        group.points.extend(point);
        if let Some(b) = bbox {
            if group.bbox.is_some() {
                return usage(format!(
                    "--box given twice for object {object_id} on frame {frame}: one box per \
                     object and frame"
                ));
            }
            group.bbox = Some(b);
        }
    }

    let Some(out) = t.out else {
        return usage("sam2 track needs -o DIR (the directory it writes the masks into)");
    };
    let Some(model) = t.model else {
        return usage("a video model is needed: --model DIR (or DIR/NAME)");
    };
    if prompts.is_empty() {
        return usage(
            "sam2 track needs a prompt: --point X,Y and/or --box X1,Y1,X2,Y2 (on --frame K, for \
             --object ID)",
        );
    }
    let selection = crate::video_file::Selection {
        start: t.start,
        end: t.end,
        every: t.every.unwrap_or(1),
    };
    if selection != crate::video_file::Selection::default()
        && !matches!(t.frames.as_slice(),
            [f] if crate::video_file::is_video(f) || crate::batch::is_list(f))
    {
        return usage(
            "--start, --end and --every choose frames of a video file (.mp4, .mov, .mkv, .webm, \
             .avi) or of each video of a list file; a folder's frames are chosen by the files given",
        );
    }
    Ok(Track {
        frames: t.frames,
        max_pixels: t.input.max_pixels,
        selection,
        overlay: t.overlay,
        model,
        out,
        prompts,
        directions: t.direction,
        device: t.device.device(),
        onnxruntime: t.device.onnxruntime,
        shard: t.input.shard,
    })
}

#[cfg(test)]
mod tests;
