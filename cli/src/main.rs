//! `sam2`: segment your own images with Segment Anything 2 from the command line.
//! `sam2 --help` says how; docs/cli.md says more.

mod args;
mod common;
mod encode;
mod everything;
mod failure;
mod info;
mod picture;
mod progress;
mod segment;
mod track;
mod track_out;

use std::process::ExitCode;

use args::Command;
use failure::{exit, Failure};

/// The help, with the lists the core keeps (providers, rewrites) filled in.
fn help() -> String {
    let rewrites: Vec<&str> = sam2::models::Rewrite::ALL
        .iter()
        .map(|r| r.name())
        .collect();
    HELP.replace("{providers}", &sam2::device::Provider::short_names("|"))
        .replace("{rewrites}", &wrap(&rewrites.join(", "), 64, 24))
}

/// `text` in lines of at most `width` characters, each after the first indented by `indent`.
fn wrap(text: &str, width: usize, indent: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split(' ') {
        if line > 0 && line + 1 + word.len() > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.len();
    }
    out
}

const HELP: &str = "\
sam2: segment your own images with Segment Anything 2 (ONNX Runtime)

Usage:
  sam2 segment    IMAGE (--model PATH | --encoder F --decoder F) [prompt] -o OUT [options]
  sam2 everything IMAGE (--model PATH | --encoder F --decoder F) -o OUT [generator] [options]
  sam2 track      FRAMES --model PATH [--object ID] [--frame K] prompt... -o DIR [options]
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
track follows objects through a video: FRAMES is a directory of PNG/JPEG frames (sorted by
name) or the frames themselves, in order; --model names a video model (SAM2's four modules,
NAME_image_encoder.onnx, NAME_memory_attention.onnx, ...). It writes
DIR/masks/obj<ID>/<frame>.png for every object and frame and DIR/track.json (COCO: an RLE per
object per frame, with the object's presence score), each frame's masks as it is tracked.

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
Prompts (track): --point and --box as for segment, for the object of the last --object ID
(default 1) on the frame of the last --frame K (default 0); repeat for more objects and frames.
  --direction forward|backward|both   from the first prompted frame: to the end, to the start
                        (from the last prompted frame), or both [both]
Generator (everything; SAM2's defaults in brackets):
  --points-per-side N   clicks per side of the grid [32]
  --pred-iou-thresh X   keep masks whose predicted IoU is above X [0.8]
  --stability-score-thresh X   keep masks at least this stable [0.95]
  --box-nms-thresh X    drop a mask overlapping a better one by more than X (box IoU) [0.7]
  --crop-n-layers N     also segment 4^i crops for each layer i up to N [0]
  --min-mask-region-area N   fill holes and remove specks up to N low-res pixels [0]
  --tolerance PX        as for segment
Options:
  --device {providers}   where to run (default cpu)
  --on-mismatch fallback|fail   a GPU that cannot be had: warn and use the CPU, or fail
  --no-rewrite NAME[,NAME]   load without these of the library's graph rewrites (all,
                        {rewrites}); `sam2 info` says which ran
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
6 output could not be written (nothing of it was replaced); track: 130 or 143 when stopped by
SIGINT or SIGTERM (the frames tracked are kept in a result marked partial).

Examples:
  sam2 segment photo.jpg --model models/tiny_a --point 320,240 -o out/photo
  sam2 segment photo.png --model exports/ --box 40,60,380,300 --point 200,180,neg -o out/cat
  sam2 encode photo.jpg --model exports/sam2.1_hiera_tiny.encoder.onnx -o photo.sam2emb
  sam2 segment photo.jpg --model exports/sam2.1_hiera_tiny.encoder.onnx \\
      --embedding photo.sam2emb --point 320,240 --multimask -o out/photo
  sam2 everything photo.jpg --model exports/ -o out/photo-all
  sam2 track clip/ --model exports/sam2.1_tiny_video/ --point 320,240 \\
      --object 2 --frame 10 --box 40,60,200,180 -o out/clip
  sam2 info exports/sam2.1_hiera_tiny_image_decoder_multi.onnx
";

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
            print!("{}", help());
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
        Command::Everything(e) => everything::run(e),
        Command::Segment(s) => segment::run(s),
        Command::Encode(e) => encode::run(e),
        Command::Info(i) => info::run(i),
        Command::Track(t) => track::run(t),
    }
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
