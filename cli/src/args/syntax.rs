//! The command line as clap reads it: the commands, their options, and their help.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};
use sam2::device::{MismatchPolicy, Provider};
use sam2::models::Rewrites;

use super::values::{
    box_value, directions, exemplar, fraction, max_pixels, nms, no_rewrite_help, output, path,
    point, policies, position, providers, rewrite_names, tolerance, whole, without_rewrites,
};
use super::{Device, Directions};
use crate::shard::Shard;
use crate::video_file::At;

const ABOUT: &str = "Segment your own images with Segment Anything 2 (ONNX Runtime)";

const AFTER_HELP: &str = "\
Each command's options: sam2 <command> --help. docs/cli.md says more.

Input images: PNG or JPEG, 8 or 16 bits, grey or colour, with or without alpha; JPEG EXIF
orientation is applied. Inputs must be regular files (a FIFO or device is refused). Progress is
shown on stderr when it is a terminal (not with --quiet).

Exit codes: 0 done, 1 internal error, 2 bad arguments (including one that is not UTF-8),
3 bad input (image unreadable, over --max-pixels or not a regular file; embedding file; prompt),
4 model (none found, several, not a SAM2 export or not a regular file, embedding of another
model), 5 ONNX Runtime or device (not found, failed, GPU refused with --on-mismatch fail),
6 output could not be written (nothing of it was replaced), 7 a batch ran but an input failed
(each named in the summary); track: 130 or 143 when stopped by SIGINT or SIGTERM (the frames
tracked are kept in a result marked partial).

Batches: IMAGE may be a folder of images or a list file (.txt, .lst, .list; one path a line),
and track's FRAMES a list file of videos or frame folders: one result per input under -o DIR,
complete results skipped (a killed run resumes), --shard I/N (or a Slurm array's or a Kubernetes
Indexed Job's index) for a share of the inputs.

Examples:
  sam2 segment photo.jpg --model models/tiny_a --point 320,240 -o out/photo
  sam2 segment photo.png --model exports/ --box 40,60,380,300 --point 200,180,neg -o out/cat
  sam2 encode photo.jpg --model exports/sam2.1_hiera_tiny.encoder.onnx -o photo.sam2emb
  sam2 segment photo.jpg --model exports/sam2.1_hiera_tiny.encoder.onnx \\
      --embedding photo.sam2emb --point 320,240 --multimask -o out/photo
  sam2 everything photo.jpg --model exports/ -o out/photo-all
  sam2 everything photos/ --model exports/ -o out/ --shard 0/4
  sam2 track clip/ --model exports/sam2.1_tiny_video/ --point 320,240 \\
      --object 2 --frame 10 --box 40,60,200,180 -o out/clip
  sam2 info exports/sam2.1_hiera_tiny_image_decoder_multi.onnx
  sam2 completions bash > ~/.local/share/bash-completion/completions/sam2";

const MODEL_HELP: &str = "A directory holding one encoder/decoder pair, DIR/NAME for the pair \
                          called NAME, or an encoder or decoder file (docs/cli.md: namings)";

fn version() -> String {
    format!("{} (libsam2 {})", env!("CARGO_PKG_VERSION"), sam2::VERSION)
}

#[derive(Parser)]
#[command(
    name = "sam2",
    version = version(),
    about = ABOUT,
    after_help = AFTER_HELP,
    subcommand_required = true,
    arg_required_else_help = false,
)]
pub(super) struct Cli {
    /// Show no progress on stderr (warnings, errors and the summary line remain)
    #[arg(short, long, global = true)]
    pub(super) quiet: bool,
    #[command(subcommand)]
    pub(super) command: Sub,
}

#[derive(Subcommand)]
pub(super) enum Sub {
    Segment(SegmentArgs),
    Everything(EverythingArgs),
    Track(TrackArgs),
    Encode(EncodeArgs),
    Info(InfoArgs),
    /// Write a completion script for SHELL to stdout
    #[command(after_help = "\
For bash: sam2 completions bash > ~/.local/share/bash-completion/completions/sam2
For zsh: sam2 completions zsh > ~/.zfunc/_sam2 (with ~/.zfunc in $fpath)
For fish: sam2 completions fish > ~/.config/fish/completions/sam2.fish")]
    Completions {
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
}

/// The encoder/decoder pair of `segment` and `everything`.
#[derive(Args)]
pub(super) struct PairArgs {
    #[arg(short = 'm', long, value_name = "PATH", value_parser = path,
          allow_hyphen_values = true, help = MODEL_HELP, help_heading = "Models")]
    pub(super) model: Option<PathBuf>,
    /// The encoder file, named as you like (with --decoder, instead of --model)
    #[arg(long, value_name = "F", value_parser = path, allow_hyphen_values = true,
          help_heading = "Models")]
    pub(super) encoder: Option<PathBuf>,
    /// The decoder file, named as you like (with --encoder)
    #[arg(long, value_name = "F", value_parser = path, allow_hyphen_values = true,
          help_heading = "Models")]
    pub(super) decoder: Option<PathBuf>,
}

/// How the inputs are read and shared out: every command's that reads images or frames.
#[derive(Args)]
pub(super) struct InputArgs {
    /// Refuse an image or frame whose header declares more than N pixels, before decoding it
    #[arg(long, value_name = "N", value_parser = max_pixels,
          default_value_t = crate::picture::DEFAULT_MAX_PIXELS, allow_hyphen_values = true)]
    pub(super) max_pixels: u64,
    /// Do shard I (from 0) of N of a batch [default: a Slurm array's task, a Kubernetes Indexed
    /// Job's index with SAM2_SHARD_COUNT, else all]
    #[arg(long, value_name = "I/N", value_parser = Shard::parse, allow_hyphen_values = true,
          help_heading = "Batch")]
    pub(super) shard: Option<Shard>,
}

/// Where the sessions run, and how they are loaded: every command's.
#[derive(Args)]
pub(super) struct DeviceArgs {
    /// Where to run
    #[arg(long, value_name = "DEVICE", value_parser = providers(),
          default_value = Provider::Cpu.info().short, allow_hyphen_values = true,
          help_heading = "Device")]
    pub(super) device: Provider,
    /// A GPU that cannot be had: warn and use the CPU (fallback), or fail
    #[arg(long, value_name = "POLICY", value_parser = policies(), default_value = "fallback",
          allow_hyphen_values = true, help_heading = "Device")]
    pub(super) on_mismatch: MismatchPolicy,
    #[arg(long, value_name = "NAME[,NAME]", value_parser = rewrite_names,
          allow_hyphen_values = true, help = no_rewrite_help(), help_heading = "Device")]
    pub(super) no_rewrite: Vec<String>,
    /// The ONNX Runtime library [default: SAM2_ONNXRUNTIME_PATH, then the system's]
    #[arg(long, value_name = "LIB", value_parser = path, allow_hyphen_values = true,
          help_heading = "Device")]
    pub(super) onnxruntime: Option<PathBuf>,
}

impl DeviceArgs {
    pub(super) fn device(&self) -> Device {
        let rewrites = self.no_rewrite.iter().fold(Rewrites::ALL, |on, text| {
            without_rewrites(on, text).expect("checked by rewrite_names")
        });
        Device {
            provider: self.device,
            on_mismatch: self.on_mismatch,
            rewrites,
        }
    }
}

/// Segment one object of an image from a prompt (clicks, a box)
#[derive(Args)]
#[command(
    args_override_self = true,
    override_usage = "sam2 segment IMAGE (--model PATH | --encoder F --decoder F) PROMPT... \
                      -o OUT [OPTIONS]",
    after_help = "\
Writes OUT.mask.png (OUT.mask-K.png for each candidate with --multimask), OUT.overlay.png and
OUT.json (COCO: RLE, polygons with holes, bbox, area, score). -o OUT is a prefix (-o out/cat
writes out/cat.mask.png, creating out/); an existing directory, or a path ending in /, receives
DIR/<image name>.mask.png and so on. The files are written to temporaries beside them and
renamed into place together: all or none, replacing a link or FIFO at an output path, never
writing through it."
)]
pub(super) struct SegmentArgs {
    /// The image (PNG or JPEG), a folder of images, or a list file of images (.txt, .lst,
    /// .list; one path a line)
    #[arg(value_name = "IMAGE", value_parser = path)]
    pub(super) image: PathBuf,
    #[command(flatten)]
    pub(super) models: PairArgs,
    /// A click in image pixels; X,Y,neg excludes what is under it (repeatable)
    #[arg(short = 'p', long = "point", id = "point", value_name = "X,Y[,neg]",
          value_parser = point, allow_hyphen_values = true, help_heading = "Prompt")]
    pub(super) points: Vec<sam2::Point>,
    /// A box around the object
    #[arg(short = 'b', long = "box", id = "box", value_name = "X1,Y1,X2,Y2",
          value_parser = box_value, allow_hyphen_values = true, help_heading = "Prompt")]
    pub(super) boxes: Vec<[f32; 4]>,
    /// Keep the three candidate masks, not only the best
    #[arg(long)]
    pub(super) multimask: bool,
    /// Use an embedding from `sam2 encode` instead of encoding IMAGE
    #[arg(long, value_name = "FILE", value_parser = path, allow_hyphen_values = true)]
    pub(super) embedding: Option<PathBuf>,
    /// The prefix of the files written, or a directory
    #[arg(short = 'o', long = "output", value_name = "OUT", value_parser = output,
          allow_hyphen_values = true)]
    pub(super) out: Option<PathBuf>,
    /// Simplify the polygons by PX pixels (0: exact)
    #[arg(long, value_name = "PX", value_parser = tolerance, default_value = "0",
          allow_hyphen_values = true)]
    pub(super) tolerance: f32,
    /// Every instance of what the phrase names ("a red car"), with a SAM 3 export as --model;
    /// repeatable, one category each
    #[arg(
        long = "text",
        value_name = "PHRASE",
        allow_hyphen_values = true,
        help_heading = "SAM 3"
    )]
    pub(super) texts: Vec<String>,
    /// An exemplar box of what to find; X1,Y1,X2,Y2,neg shows what it is not (repeatable; with
    /// --text they join every phrase)
    #[arg(long = "exemplar", value_name = "X1,Y1,X2,Y2[,neg]", value_parser = exemplar,
          allow_hyphen_values = true, help_heading = "SAM 3")]
    pub(super) exemplars: Vec<sam2::concept::Exemplar>,
    /// Keep instances scoring above T [default: 0.5]
    #[arg(long, value_name = "T", value_parser = fraction("--threshold"),
          allow_hyphen_values = true, help_heading = "SAM 3")]
    pub(super) threshold: Option<f32>,
    /// Drop an instance overlapping a better one of its phrase by more than IOU [default IOU: 0.7]
    #[arg(long, value_name = "box|mask[:IOU]", value_parser = nms, allow_hyphen_values = true,
          help_heading = "SAM 3")]
    pub(super) nms: Option<sam2::concept::Nms>,
    /// At most N instances of each phrase, the best [default: all]
    #[arg(long, value_name = "N", value_parser = whole("--max-instances", 1, 200),
          allow_hyphen_values = true, help_heading = "SAM 3")]
    pub(super) max_instances: Option<u32>,
    /// CLIP's vocabulary [default: bpe_simple_vocab_16e6.txt.gz beside the export's graphs]
    #[arg(long, value_name = "FILE", value_parser = path, allow_hyphen_values = true,
          help_heading = "SAM 3")]
    pub(super) vocab: Option<PathBuf>,
    #[command(flatten)]
    pub(super) input: InputArgs,
    #[command(flatten)]
    pub(super) device: DeviceArgs,
}

/// Segment the whole image with SAM2's automatic mask generator
#[derive(Args)]
#[command(
    args_override_self = true,
    override_usage = "sam2 everything IMAGE (--model PATH | --encoder F --decoder F) -o OUT \
                      [OPTIONS]",
    after_help = "\
A grid of clicks, filtered and de-duplicated. Writes OUT.overlay.png and OUT.json (one COCO
annotation per mask, with SAM2's predicted_iou, stability_score, point_coords and crop_box).
The generator's options default to SAM2's. -o OUT is as for segment."
)]
pub(super) struct EverythingArgs {
    /// The image (PNG or JPEG), a folder of images, or a list file of images (.txt, .lst,
    /// .list; one path a line)
    #[arg(value_name = "IMAGE", value_parser = path)]
    pub(super) image: PathBuf,
    #[command(flatten)]
    pub(super) models: PairArgs,
    /// The prefix of the files written, or a directory
    #[arg(short = 'o', long = "output", value_name = "OUT", value_parser = output,
          allow_hyphen_values = true)]
    pub(super) out: Option<PathBuf>,
    /// Clicks per side of the grid [SAM2's default: 32]
    #[arg(long, value_name = "N", value_parser = whole("--points-per-side", 1, 1024),
          allow_hyphen_values = true, help_heading = "Generator")]
    pub(super) points_per_side: Option<u32>,
    /// Keep masks whose predicted IoU is above X [SAM2's default: 0.8]
    #[arg(long, value_name = "X", value_parser = fraction("--pred-iou-thresh"),
          allow_hyphen_values = true, help_heading = "Generator")]
    pub(super) pred_iou_thresh: Option<f32>,
    /// Keep masks at least this stable [SAM2's default: 0.95]
    #[arg(long, value_name = "X", value_parser = fraction("--stability-score-thresh"),
          allow_hyphen_values = true, help_heading = "Generator")]
    pub(super) stability_score_thresh: Option<f32>,
    /// Drop a mask overlapping a better one by more than X (box IoU) [SAM2's default: 0.7]
    #[arg(long, value_name = "X", value_parser = fraction("--box-nms-thresh"),
          allow_hyphen_values = true, help_heading = "Generator")]
    pub(super) box_nms_thresh: Option<f32>,
    /// Also segment 4^i crops for each layer i up to N [SAM2's default: 0]
    #[arg(long, value_name = "N", value_parser = whole("--crop-n-layers", 0, 4),
          allow_hyphen_values = true, help_heading = "Generator")]
    pub(super) crop_n_layers: Option<u32>,
    /// Fill holes and remove specks up to N low-res pixels [SAM2's default: 0]
    #[arg(long, value_name = "N", value_parser = whole("--min-mask-region-area", 0, 256 * 256),
          allow_hyphen_values = true, help_heading = "Generator")]
    pub(super) min_mask_region_area: Option<u32>,
    /// Simplify the polygons by PX pixels (0: exact)
    #[arg(long, value_name = "PX", value_parser = tolerance, default_value = "0",
          allow_hyphen_values = true)]
    pub(super) tolerance: f32,
    #[command(flatten)]
    pub(super) input: InputArgs,
    #[command(flatten)]
    pub(super) device: DeviceArgs,
}

/// Follow objects through a video (a video file, a directory of frames, or the frames)
#[derive(Args)]
#[command(
    args_override_self = true,
    override_usage = "sam2 track FRAMES... --model PATH [--object ID] [--frame K] PROMPT... \
                      -o DIR [OPTIONS]",
    after_help = "\
FRAMES is a video file (decoded by ffmpeg, its rotation applied), a directory of PNG/JPEG frames
(sorted by name), the frames themselves in order, or a list file of clips (.txt, .lst, .list; a
result folder per clip under DIR). In a video, --frame K is the stream's frame number or a time.
--point and --box are for the object of the last --object ID (default 1) on the frame of the
last --frame K (default 0); repeat them for more objects and frames. Writes
DIR/masks/obj<ID>/<frame>.png for every object and frame and DIR/track.json (COCO: an RLE per
object per frame, with the object's presence score), each frame's masks as it is tracked.
SIGINT or SIGTERM stops between two frames, keeping what was tracked (exit 130 or 143)."
)]
pub(super) struct TrackArgs {
    /// A video file (MP4, MOV, MKV, WebM, AVI; read with ffmpeg), a directory of PNG/JPEG
    /// frames, the frames themselves in order, or a list file of clips
    #[arg(value_name = "FRAMES", value_parser = path, required = true)]
    pub(super) frames: Vec<PathBuf>,
    /// A video's first frame tracked: a frame number or a time (4.5s, 1:02.5)
    #[arg(long, value_name = "AT", value_parser = position("--start"), allow_hyphen_values = true,
          help_heading = "Video files")]
    pub(super) start: Option<At>,
    /// Where a video's tracking ends (that frame excluded): a frame number or a time
    #[arg(long, value_name = "AT", value_parser = position("--end"), allow_hyphen_values = true,
          help_heading = "Video files")]
    pub(super) end: Option<At>,
    /// Track every N-th frame of a video (default 1: all)
    #[arg(long, value_name = "N", value_parser = whole("--every", 1, 1_000_000),
          allow_hyphen_values = true, help_heading = "Video files")]
    pub(super) every: Option<u32>,
    /// Also write a video of the masks over the frames (.mp4, .mkv, .mov, .webm)
    #[arg(long, value_name = "FILE", value_parser = output, allow_hyphen_values = true)]
    pub(super) overlay: Option<PathBuf>,
    /// A video model: a directory holding SAM2's four modules, or DIR/NAME
    #[arg(short = 'm', long, value_name = "PATH", value_parser = path,
          allow_hyphen_values = true, help_heading = "Model")]
    pub(super) model: Option<PathBuf>,
    /// The object the prompts after it are for (default 1)
    #[arg(long = "object", id = "object", value_name = "ID",
          value_parser = whole("--object", 1, i32::MAX as u32), allow_hyphen_values = true,
          help_heading = "Prompts")]
    pub(super) objects: Vec<u32>,
    /// The frame the prompts after it are on, counted from 0 (default 0); in a video file, the
    /// stream's frame number or a time (4.5s, 1:02.5)
    #[arg(long = "frame", id = "frame", value_name = "K",
          value_parser = position("--frame"), allow_hyphen_values = true,
          help_heading = "Prompts")]
    pub(super) frame_numbers: Vec<At>,
    /// A click in frame pixels; X,Y,neg excludes what is under it (repeatable)
    #[arg(short = 'p', long = "point", id = "point", value_name = "X,Y[,neg]",
          value_parser = point, allow_hyphen_values = true, help_heading = "Prompts")]
    pub(super) points: Vec<sam2::Point>,
    /// A box around the object (one per object and frame)
    #[arg(short = 'b', long = "box", id = "box", value_name = "X1,Y1,X2,Y2",
          value_parser = box_value, allow_hyphen_values = true, help_heading = "Prompts")]
    pub(super) boxes: Vec<[f32; 4]>,
    /// From the first prompted frame: to the end, to the start (from the last prompted
    /// frame), or both
    #[arg(long, value_name = "WHICH", value_parser = directions(), default_value = "both",
          allow_hyphen_values = true, help_heading = "Prompts")]
    pub(super) direction: Directions,
    /// The directory the masks and track.json are written into
    #[arg(short = 'o', long = "output", value_name = "DIR", value_parser = output,
          allow_hyphen_values = true)]
    pub(super) out: Option<PathBuf>,
    #[command(flatten)]
    pub(super) input: InputArgs,
    #[command(flatten)]
    pub(super) device: DeviceArgs,
}

/// Write an image's embedding, for segment --embedding later
#[derive(Args)]
#[command(
    args_override_self = true,
    override_usage = "sam2 encode IMAGE (--model PATH | --encoder F) -o FILE [OPTIONS]",
    after_help = "\
-o FILE names the embedding file; an existing directory, or a path ending in /, receives
DIR/<image name>.sam2emb."
)]
pub(super) struct EncodeArgs {
    /// The image (PNG or JPEG), a folder of images, or a list file of images (.txt, .lst,
    /// .list; one path a line)
    #[arg(value_name = "IMAGE", value_parser = path)]
    pub(super) image: PathBuf,
    #[arg(short = 'm', long, value_name = "PATH", value_parser = path,
          allow_hyphen_values = true, help = MODEL_HELP, help_heading = "Models")]
    pub(super) model: Option<PathBuf>,
    /// The encoder file, named as you like (instead of --model)
    #[arg(long, value_name = "F", value_parser = path, allow_hyphen_values = true,
          help_heading = "Models")]
    pub(super) encoder: Option<PathBuf>,
    /// The embedding file to write, or a directory
    #[arg(short = 'o', long = "output", value_name = "FILE", value_parser = output,
          allow_hyphen_values = true)]
    pub(super) out: Option<PathBuf>,
    #[command(flatten)]
    pub(super) input: InputArgs,
    #[command(flatten)]
    pub(super) device: DeviceArgs,
}

/// Say what a model file (or a --model path) is, where it runs and what the library rewrote
#[derive(Args)]
#[command(
    args_override_self = true,
    override_usage = "sam2 info MODEL [OPTIONS]"
)]
pub(super) struct InfoArgs {
    /// An .onnx file, a directory or DIR/NAME (as for --model)
    #[arg(value_name = "MODEL", value_parser = path)]
    pub(super) model: PathBuf,
    #[command(flatten)]
    pub(super) device: DeviceArgs,
}

/// clap's view of the command line: for the parser, and for `sam2 completions`.
pub fn command() -> clap::Command {
    Cli::command()
}
