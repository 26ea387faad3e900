//! Video files (MP4, MOV, MKV, WebM, AVI) read through the system's `ffmpeg` and `ffprobe`: the
//! stream is probed once (size, rotation, frame rate, frame count), then decoded to RGB into a
//! pipe, frame by frame, never written to disk. ffmpeg applies the stream's rotation (its
//! display matrix), so frames arrive upright and the probe reports the upright size.
//!
//! A run tracks a selection of the stream's frames: from `start` (inclusive) to `end`
//! (exclusive), every `every`-th. The tracker numbers the selected frames 0, 1, …; the masks and
//! `track.json` name them by the stream's own frame numbers, as a player shows them.
//!
//! The tracker reads forward from the first prompted frame and then backward: forward is one
//! decoder streaming; backward decodes a chunk of frames before the one asked for into memory
//! (at most [`CHUNK_BYTES`]) and serves them in reverse, so a long clip is never held whole.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use image::RgbImage;

use crate::common::has_extension;
use crate::failure::{exit, Failure};

/// File extensions read as video.
pub(crate) const EXTENSIONS: [&str; 7] = ["mp4", "m4v", "mov", "mkv", "webm", "avi", "mpg"];

/// What a backward pass holds in memory at most: that many bytes of decoded frames.
const CHUNK_BYTES: usize = 256 << 20;

/// Whether `path` names a video file (by its extension; a folder is not one).
pub(crate) fn is_video(path: &Path) -> bool {
    has_extension(path, &EXTENSIONS) && !path.is_dir()
}

/// The one line a user without ffmpeg reads (exit 5).
fn missing(program: &str) -> Failure {
    Failure::new(
        exit::RUNTIME,
        format!(
            "{program} not found: video files are read with ffmpeg and ffprobe (Debian and \
             Ubuntu: apt install ffmpeg; macOS: brew install ffmpeg); a folder of PNG or JPEG \
             frames needs neither"
        ),
    )
}

/// A position in the stream as the command line gives it: a frame number, or a time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum At {
    Frame(u64),
    Seconds(f64),
}

impl At {
    /// `120` (a frame), `4.5s`, `1:02.5` or `0:01:02.5` (a time).
    pub(crate) fn parse(text: &str) -> Option<At> {
        let t = text.trim();
        if let Some(s) = t.strip_suffix('s') {
            return s
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .map(At::Seconds);
        }
        if t.contains(':') {
            let mut seconds = 0.0;
            let parts: Vec<&str> = t.split(':').collect();
            if parts.len() > 3 {
                return None;
            }
            for (i, part) in parts.iter().enumerate() {
                let v: f64 = part
                    .parse()
                    .ok()
                    .filter(|v: &f64| v.is_finite() && *v >= 0.0)?;
                // Minutes and seconds below 60, as a clock writes them; the first part any size.
                if i > 0 && v >= 60.0 {
                    return None;
                }
                seconds = seconds * 60.0 + v;
            }
            return Some(At::Seconds(seconds));
        }
        t.parse::<u64>().ok().map(At::Frame)
    }

    /// The stream's frame at this position: a time becomes the frame shown at that time (its
    /// start), by the stream's average frame rate.
    pub(crate) fn frame(self, fps: f64) -> u64 {
        match self {
            At::Frame(n) => n,
            At::Seconds(s) => (s * fps + 1e-6).floor() as u64,
        }
    }
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Frame(n) => write!(f, "{n}"),
            At::Seconds(s) => write!(f, "{s}s"),
        }
    }
}

/// Which of the stream's frames a run tracks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Selection {
    pub start: Option<At>,
    pub end: Option<At>,
    pub every: u32,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            start: None,
            end: None,
            every: 1,
        }
    }
}

/// A probed video and the frames of it a run tracks.
pub(crate) struct Video {
    path: PathBuf,
    /// The upright size (after the stream's rotation).
    pub width: u32,
    pub height: u32,
    /// Degrees the stream is turned counter-clockwise for display (0, 90, 180, 270; ffprobe's
    /// display matrix rotation), applied by ffmpeg.
    pub rotation: u32,
    /// The stream's average frame rate.
    pub fps: f64,
    /// Frames in the stream.
    pub stream_frames: u64,
    /// The stream's frame number of each selected frame (the tracker's frame k is `frames[k]`).
    pub frames: Vec<u64>,
    /// The step between two selected frames (`--every`).
    pub every: u64,
    decoder: Option<Decoder>,
    /// Frames decoded ahead for a backward pass: the selected index of the first, and the frames.
    chunk: Option<(u32, Vec<Vec<u8>>)>,
    last: Option<u32>,
}

/// `ffprobe`'s answer about the first video stream.
struct Probe {
    width: u32,
    height: u32,
    rotation: u32,
    fps: f64,
    frames: u64,
}

fn probe(path: &Path) -> Result<Probe, Failure> {
    let output = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-count_packets",
            "-show_entries",
            "stream=width,height,avg_frame_rate,r_frame_rate,nb_read_packets:\
             stream_tags=rotate:stream_side_data=rotation",
            "-of",
            "json",
        ])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => missing("ffprobe"),
            _ => Failure::new(exit::RUNTIME, format!("cannot run ffprobe: {e}")),
        })?;
    let unreadable = |why: String| {
        Failure::new(
            exit::INPUT,
            format!("{}: not a video ffmpeg can read ({why})", path.display()),
        )
    };
    if !output.status.success() {
        let text = String::from_utf8_lossy(&output.stderr);
        return Err(unreadable(last_line(&text)));
    }
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| unreadable(format!("ffprobe's answer: {e}")))?;
    let Some(stream) = json["streams"].get(0) else {
        return Err(unreadable("it has no video stream".into()));
    };
    let number = |v: &serde_json::Value| -> Option<f64> {
        v.as_f64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    };
    let rate = |v: &serde_json::Value| -> Option<f64> {
        let (n, d) = v.as_str()?.split_once('/')?;
        let (n, d): (f64, f64) = (n.parse().ok()?, d.parse().ok()?);
        (n > 0.0 && d > 0.0).then_some(n / d)
    };
    let width = number(&stream["width"]).unwrap_or(0.0) as u32;
    let height = number(&stream["height"]).unwrap_or(0.0) as u32;
    if width == 0 || height == 0 {
        return Err(unreadable("its video stream has no size".into()));
    }
    let fps = rate(&stream["avg_frame_rate"])
        .or_else(|| rate(&stream["r_frame_rate"]))
        .ok_or_else(|| unreadable("its video stream has no frame rate".into()))?;
    let frames = number(&stream["nb_read_packets"]).unwrap_or(0.0) as u64;
    if frames == 0 {
        return Err(unreadable("its video stream has no frames".into()));
    }
    // The display matrix's rotation (degrees counter-clockwise, as ffprobe prints it), or the
    // older `rotate` tag (clockwise).
    let rotation = stream["side_data_list"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|d| number(&d["rotation"]))
        .or_else(|| number(&stream["tags"]["rotate"]).map(|r| -r))
        .unwrap_or(0.0);
    let rotation = ((rotation.round() as i64).rem_euclid(360)) as u32;
    let (width, height) = if rotation == 90 || rotation == 270 {
        (height, width)
    } else {
        (width, height)
    };
    Ok(Probe {
        width,
        height,
        rotation,
        fps,
        frames,
    })
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
        .trim()
        .to_string()
}

impl Video {
    /// Probes `path` and selects its frames; refuses a frame over `max_pixels` pixels and a
    /// selection that holds no frame.
    pub(crate) fn open(
        path: &Path,
        selection: Selection,
        max_pixels: u64,
    ) -> Result<Video, Failure> {
        // A regular file only, as the library reads models: a FIFO would block ffprobe.
        drop(
            sam2::__private::files::open_regular(path, "a video file")
                .map_err(|e| Failure::new(exit::INPUT, e.to_string()))?,
        );
        let p = probe(path)?;
        let pixels = p.width as u64 * p.height as u64;
        if pixels > max_pixels {
            return Err(Failure::new(
                exit::INPUT,
                format!(
                    "{}'s frames are {}×{} pixels ({:.1} megapixels), over the limit of \
                     {max_pixels} pixels; --max-pixels N raises it",
                    path.display(),
                    p.width,
                    p.height,
                    pixels as f64 / 1e6
                ),
            ));
        }
        let start = selection.start.map_or(0, |a| a.frame(p.fps));
        let end = selection
            .end
            .map_or(p.frames, |a| a.frame(p.fps))
            .min(p.frames);
        let every = selection.every.max(1) as u64;
        let frames: Vec<u64> = (start..end).step_by(every as usize).collect();
        if frames.is_empty() {
            return Err(Failure::new(
                exit::INPUT,
                format!(
                    "{} has {} frames ({:.3} s at {:.3} frames/s): --start and --end select none \
                     of them (frames {start} to {end}, the end excluded)",
                    path.display(),
                    p.frames,
                    p.frames as f64 / p.fps,
                    p.fps
                ),
            ));
        }
        if frames.len() > u32::MAX as usize {
            return Err(Failure::new(
                exit::INPUT,
                format!("{} has too many frames", path.display()),
            ));
        }
        Ok(Video {
            path: path.to_path_buf(),
            width: p.width,
            height: p.height,
            rotation: p.rotation,
            fps: p.fps,
            stream_frames: p.frames,
            frames,
            every,
            decoder: None,
            chunk: None,
            last: None,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The selected index of the stream's frame `n`, or a message saying which frames are near.
    pub(crate) fn index_of(&self, n: u64) -> Result<u32, String> {
        match self.frames.binary_search(&n) {
            Ok(k) => Ok(k as u32),
            Err(_) => {
                let (first, last) = (self.frames[0], *self.frames.last().unwrap_or(&0));
                let near = self.frames.partition_point(|&f| f < n);
                let before = near.checked_sub(1).map(|i| self.frames[i]);
                let after = self.frames.get(near).copied();
                let near: Vec<String> = before
                    .into_iter()
                    .chain(after)
                    .map(|f| f.to_string())
                    .collect();
                Err(format!(
                    "frame {n} is not among the frames tracked ({first} to {last}, every {}; the \
                     nearest: {})",
                    self.every,
                    near.join(" and ")
                ))
            }
        }
    }

    /// The selected frame `k`, upright RGB.
    pub(crate) fn read(&mut self, k: u32) -> Result<RgbImage, Failure> {
        let backward = self.last == Some(k + 1);
        self.last = Some(k);
        if let Some((first, frames)) = &self.chunk {
            if k >= *first && ((k - first) as usize) < frames.len() {
                return Ok(self.image(frames[(k - first) as usize].clone()));
            }
        }
        if backward {
            // Decode the chunk that ends at k and serve it from memory in reverse.
            let per_frame = self.frame_bytes();
            let len = (CHUNK_BYTES / per_frame).clamp(1, 256) as u32;
            let first = (k + 1).saturating_sub(len);
            let mut decoder = self.decoder_at(first, k + 1)?;
            let mut frames = Vec::with_capacity((k + 1 - first) as usize);
            for j in first..=k {
                frames.push(decoder.next(self, j)?);
            }
            self.decoder = None;
            let frame = frames[(k - first) as usize].clone();
            self.chunk = Some((first, frames));
            return Ok(self.image(frame));
        }
        self.chunk = None;
        let reuse = matches!(&self.decoder, Some(d) if d.next <= k && k < d.end);
        if !reuse {
            self.decoder = Some(self.decoder_at(k, self.frames.len() as u32)?);
        }
        let mut decoder = self.decoder.take().expect("a decoder");
        while decoder.next < k {
            let skipped = decoder.next;
            decoder.next(self, skipped)?;
        }
        let frame = decoder.next(self, k)?;
        self.decoder = Some(decoder);
        Ok(self.image(frame))
    }

    fn frame_bytes(&self) -> usize {
        self.width as usize * self.height as usize * 3
    }

    fn image(&self, bytes: Vec<u8>) -> RgbImage {
        RgbImage::from_raw(self.width, self.height, bytes).expect("a whole frame")
    }

    /// ffmpeg decoding the selected frames `from..to` into a pipe.
    fn decoder_at(&self, from: u32, to: u32) -> Result<Decoder, Failure> {
        let (a, b) = (self.frames[from as usize], self.frames[to as usize - 1] + 1);
        let select = format!(
            "select=gte(n\\,{a})*lt(n\\,{b})*not(mod(n-{a}\\,{}))",
            self.every
        );
        let mut command = Command::new("ffmpeg");
        command
            .args(["-v", "error", "-nostdin", "-i"])
            .arg(&self.path)
            .args([
                "-map",
                "0:v:0",
                "-vf",
                &select,
                "-fps_mode",
                "passthrough",
                "-f",
                "rawvideo",
                "-pix_fmt",
                "rgb24",
                "pipe:1",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut ffmpeg = Ffmpeg::spawn(command)?;
        let stdout = BufReader::with_capacity(1 << 20, ffmpeg.child.stdout.take().expect("piped"));
        Ok(Decoder {
            ffmpeg,
            stdout,
            next: from,
            end: to,
        })
    }
}

/// An ffmpeg process, whose messages are read beside its work (so a chatty stream never fills
/// the pipe) for the message of a failure.
struct Ffmpeg {
    child: Child,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Ffmpeg {
    fn spawn(mut command: Command) -> Result<Self, Failure> {
        let mut child = command
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => missing("ffmpeg"),
                _ => Failure::new(exit::RUNTIME, format!("cannot run ffmpeg: {e}")),
            })?;
        let stderr = child.stderr.take().map(|mut e| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = e.read_to_string(&mut text);
                text
            })
        });
        Ok(Ffmpeg { child, stderr })
    }

    /// Stops it (if it still runs) and gives the last line it wrote, if any.
    fn stop(&mut self) -> Option<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr
            .take()
            .and_then(|t| t.join().ok())
            .map(|t| last_line(&t))
            .filter(|t| t != "no message")
    }
}

/// One ffmpeg process decoding selected frames in order.
struct Decoder {
    ffmpeg: Ffmpeg,
    stdout: BufReader<ChildStdout>,
    /// The selected index of the next frame it gives.
    next: u32,
    end: u32,
}

impl Decoder {
    /// The next frame, which must be selected frame `k`.
    fn next(&mut self, video: &Video, k: u32) -> Result<Vec<u8>, Failure> {
        debug_assert_eq!(self.next, k);
        let mut frame = vec![0u8; video.frame_bytes()];
        if let Err(e) = self.stdout.read_exact(&mut frame) {
            let said = self.ffmpeg.stop();
            return Err(Failure::new(
                exit::INPUT,
                format!(
                    "{}: ffmpeg gave no frame {} (the stream's frame {}): {}",
                    video.path.display(),
                    k,
                    video.frames[k as usize],
                    said.unwrap_or_else(|| format!("the stream ended early ({e})"))
                ),
            ));
        }
        self.next += 1;
        Ok(frame)
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        self.ffmpeg.stop();
    }
}

/// Writes a video of frames through ffmpeg, encoded by the output's extension (H.264 in MP4, MOV
/// and MKV; VP9 in WebM), at the run's frame rate.
pub(crate) struct VideoWriter {
    ffmpeg: Ffmpeg,
    path: PathBuf,
}

impl VideoWriter {
    pub(crate) fn create(path: &Path, width: u32, height: u32, fps: f64) -> Result<Self, Failure> {
        let webm = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("webm"));
        let codec: &[&str] = if webm {
            &["-c:v", "libvpx-vp9", "-b:v", "0", "-crf", "32"]
        } else {
            &["-c:v", "libx264", "-preset", "veryfast", "-crf", "20"]
        };
        let mut command = Command::new("ffmpeg");
        command
            .args([
                "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s",
            ])
            .arg(format!("{width}x{height}"))
            .arg("-r")
            .arg(format!("{fps:.6}"))
            .args(["-i", "pipe:0"])
            .args(codec)
            // 4:2:0 needs even sides: a pixel of padding where one is odd.
            .args([
                "-vf",
                "pad=ceil(iw/2)*2:ceil(ih/2)*2",
                "-pix_fmt",
                "yuv420p",
            ])
            .arg(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null());
        Ok(VideoWriter {
            ffmpeg: Ffmpeg::spawn(command)?,
            path: path.to_path_buf(),
        })
    }

    pub(crate) fn frame(&mut self, rgb: &RgbImage) -> Result<(), Failure> {
        use std::io::Write;
        let stdin = self.ffmpeg.child.stdin.as_mut().expect("piped");
        stdin
            .write_all(rgb.as_raw())
            .map_err(|e| self.failed(e.to_string()))
    }

    /// Ends the stream and waits for ffmpeg to write the file.
    pub(crate) fn finish(mut self) -> Result<(), Failure> {
        drop(self.ffmpeg.child.stdin.take());
        let status = self
            .ffmpeg
            .child
            .wait()
            .map_err(|e| self.failed(e.to_string()))?;
        if status.success() {
            Ok(())
        } else {
            Err(self.failed(format!("ffmpeg exited with {status}")))
        }
    }

    fn failed(&mut self, why: String) -> Failure {
        let said = self.ffmpeg.stop();
        Failure::new(
            exit::OUTPUT,
            format!("writing {}: {}", self.path.display(), said.unwrap_or(why)),
        )
    }
}

impl Drop for VideoWriter {
    fn drop(&mut self) {
        // Not finished: stop ffmpeg rather than let it close a file that is not whole.
        if self.ffmpeg.child.stdin.is_some() {
            self.ffmpeg.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_frames_or_times() {
        assert_eq!(At::parse("120"), Some(At::Frame(120)));
        assert_eq!(At::parse("4.5s"), Some(At::Seconds(4.5)));
        assert_eq!(At::parse("1:02.5"), Some(At::Seconds(62.5)));
        assert_eq!(At::parse("1:00:00"), Some(At::Seconds(3600.0)));
        for bad in ["", "-1", "1:60", "x", "1.5", "nans", "-2s", "1:2:3:4"] {
            assert_eq!(At::parse(bad), None, "{bad}");
        }
        // A time is the frame shown at that time: 2 s at 25 frames/s is frame 50.
        assert_eq!(At::Seconds(2.0).frame(25.0), 50);
        assert_eq!(At::Seconds(2.039).frame(25.0), 50);
        assert_eq!(At::Seconds(1.0).frame(30000.0 / 1001.0), 29);
    }

    #[test]
    fn video_files_are_known_by_their_extension() {
        assert!(is_video(Path::new("a/clip.MP4")));
        assert!(is_video(Path::new("clip.webm")));
        assert!(!is_video(Path::new("frame.png")));
        assert!(!is_video(Path::new("frames")));
    }
}
