//! One model set tracked side by side, frame by frame: the library's `Tracker` against ONNX Runtime
//! alone (with and without the input work a caller repeats every frame) and, given one, against
//! the library on a precision variant of the set; the clip's frames and click; the medians and how
//! they are printed and written.

use super::*;

/// The clip played back and forth, so any frame index has a frame and the motion never jumps;
/// `(width, height)` resamples it (nearest).
fn clip_frame(t: u32, width: usize, height: usize) -> Vec<u8> {
    let (src, _, _) = track_clip::frame(track_clip::back_and_forth(t));
    let (sw, sh) = (track_clip::WIDTH, track_clip::HEIGHT);
    let mut rgb = vec![0u8; width * height * 3];
    for yy in 0..height {
        let y = yy * sh / height;
        for xx in 0..width {
            let x = xx * sw / width;
            rgb[(yy * width + xx) * 3..][..3].copy_from_slice(&src[(y * sw + x) * 3..][..3]);
        }
    }
    rgb
}

/// Where to click the disc on frame 0, in the frame's pixels.
fn first_click(width: usize, height: usize) -> (f32, f32) {
    let (x, y) = track_clip::target_centre(0);
    (
        x as f32 * width as f32 / track_clip::WIDTH as f32,
        y as f32 * height as f32 / track_clip::HEIGHT as f32,
    )
}

/// Per-frame seconds of one model set: the library, ONNX Runtime alone (the four modules), and
/// ONNX Runtime alone's input work on the same frames (resizing and normalising the frame, then
/// concatenating the memories and the pointers).
pub(crate) struct Timings {
    library: Vec<f64>,
    /// The library on the variant's modules, when one was given.
    variant: Vec<f64>,
    alone: Vec<f64>,
    preprocess: Vec<f64>,
    assemble: Vec<f64>,
}

/// The medians of [`Timings`].
#[derive(Clone, Copy)]
pub(crate) struct Summary {
    pub(crate) library: f64,
    /// The library on the variant's modules.
    variant: Option<f64>,
    alone: f64,
    /// The four modules with their input work, frame by frame.
    alone_with_inputs: f64,
    resize: f64,
    assemble: f64,
}

impl Timings {
    pub(crate) fn summary(&self) -> Summary {
        let with_inputs: Vec<f64> = (0..self.alone.len())
            .map(|i| self.alone[i] + self.preprocess[i] + self.assemble[i])
            .collect();
        Summary {
            library: median(&self.library),
            variant: (!self.variant.is_empty()).then(|| median(&self.variant)),
            alone: median(&self.alone),
            alone_with_inputs: median(&with_inputs),
            resize: median(&self.preprocess),
            assemble: median(&self.assemble),
        }
    }
}

impl Summary {
    /// The table's rows for `model`: the library, ONNX Runtime alone, and ONNX Runtime alone
    /// with its input work; `extra` follows the library's ratios.
    pub(crate) fn print(&self, model: &str, extra: &str, variant_what: &str) {
        let ms = |s: f64| format!("{:.1} ms", s * 1000.0);
        let fps = |s: f64| format!("{:.2}", 1.0 / s);
        println!(
            "| {model} | library (`Tracker::track`) | {} | {} | {:.3}× ONNX Runtime alone; {:.3}× with its input work{extra} |",
            ms(self.library),
            fps(self.library),
            self.library / self.alone,
            self.library / self.alone_with_inputs
        );
        if let Some(v) = self.variant {
            println!(
                "| {model} | library, the int8 variant (`Tracker::track`; sam2-variant int8 --attention-scores int8: {variant_what}) | {} | {} | {:.3}× ONNX Runtime alone on the float32 files; {:.3}× the library's float32 frame |",
                ms(v),
                fps(v),
                v / self.alone,
                v / self.library
            );
        }
        println!(
            "| {model} | ONNX Runtime alone, the four modules | {} | {} | 1 |",
            ms(self.alone),
            fps(self.alone)
        );
        println!(
            "| {model} | ONNX Runtime alone with its input work (the frame resized by the library's code: {}; memories and pointers concatenated: {}) | {} | {} | |",
            ms(self.resize),
            ms(self.assemble),
            ms(self.alone_with_inputs),
            fps(self.alone_with_inputs)
        );
    }

    /// `fields` with the figures added.
    pub(crate) fn json(&self, mut fields: serde_json::Value) -> serde_json::Value {
        let figures = serde_json::json!({
            "library_s": self.library, "onnxruntime_alone_s": self.alone,
            "ratio": self.library / self.alone,
            "onnxruntime_alone_with_inputs_s": self.alone_with_inputs,
            "ratio_with_inputs": self.library / self.alone_with_inputs,
            "library_fps": 1.0 / self.library, "onnxruntime_alone_fps": 1.0 / self.alone,
            "inputs_resize_s": self.resize, "inputs_assemble_s": self.assemble,
            "int8_variant_library_s": self.variant,
            "int8_variant_ratio": self.variant.map(|v| v / self.alone),
        });
        if let (Some(map), serde_json::Value::Object(figures)) = (fields.as_object_mut(), figures) {
            map.extend(figures);
        }
        fields
    }
}

/// One model set, both sides interleaved; with `variant`, the library on a precision variant of
/// the set as a third side.
pub(crate) fn compare(
    paths: &VideoModelPaths,
    variant: Option<&VideoModelPaths>,
    size: (usize, usize),
    timed: u32,
) -> Res<Timings> {
    let (w, h) = size;
    let tracker = Tracker::new(paths, &TrackerOptions::default())?;
    let variant = match variant {
        Some(p) => Some(Tracker::new(p, &TrackerOptions::default())?),
        None => None,
    };
    let mut plain = Plain::new(paths)?;
    let click = first_click(w, h);
    let rgb = clip_frame(0, w, h);
    let view = ImageView::packed(&rgb, w, h, PixelFormat::Rgb)?;
    let prompt = Prompt {
        points: vec![Point {
            x: click.0,
            y: click.1,
            positive: true,
        }],
        ..Default::default()
    };
    tracker.add_prompt(0, &view, 1, &prompt)?;
    if let Some(v) = &variant {
        v.add_prompt(0, &view, 1, &prompt)?;
    }
    // ONNX Runtime alone's input buffer, kept between frames as the library keeps its own.
    let mut image = new_image()?;
    model_input(&rgb, w, h, &mut image)?;
    plain.prompt(&image, click, size)?;
    let (mut lib, mut alone, mut on_variant) = (Vec::new(), Vec::new(), Vec::new());
    let (mut preprocess, mut assemble) = (Vec::new(), Vec::new());
    for t in 1..=WARM_FRAMES + timed {
        let rgb = clip_frame(t, w, h);
        let view = ImageView::packed(&rgb, w, h, PixelFormat::Rgb)?;
        // What is the same at steady state (positions, constants), before any clock.
        let mut prepared = plain.prepare(t)?;
        // Rotate which side goes first, so none always runs on a warmer cache.
        let sides: Vec<u32> = if variant.is_some() {
            vec![0, 1, 2]
        } else {
            vec![0, 1]
        };
        let n = sides.len();
        for k in 0..n {
            let side = sides[(k + t as usize) % n];
            if side != 1 {
                // The library, on the files or on their variant.
                let (on, times) = if side == 0 {
                    (&tracker, &mut lib)
                } else {
                    let v = variant.as_ref().expect("a third side only with a variant");
                    (v, &mut on_variant)
                };
                let start = Instant::now();
                let result = on.track(t, &view, Direction::Forward)?;
                let secs = start.elapsed().as_secs_f64();
                black_box(&result);
                if t > WARM_FRAMES {
                    times.push(secs);
                }
            } else {
                // The input work, then the four modules.
                let start = Instant::now();
                model_input(&rgb, w, h, &mut image)?;
                let resized = Instant::now();
                plain.concat(&mut prepared)?;
                let assembled = Instant::now();
                let memory = plain.step(&image, &prepared)?;
                let secs = assembled.elapsed().as_secs_f64();
                plain.keep(memory);
                if t > WARM_FRAMES {
                    preprocess.push((resized - start).as_secs_f64());
                    assemble.push((assembled - resized).as_secs_f64());
                    alone.push(secs);
                }
            }
        }
    }
    // At steady state the tracker holds its conditioning frame and its memory_frames tracked ones.
    let held = tracker.memory_frames();
    if held != 1 + TrackerOptions::default().memory_frames {
        eprintln!("[bench_video] the tracker holds {held} memory frames");
    }
    Ok(Timings {
        library: lib,
        variant: on_variant,
        alone,
        preprocess,
        assemble,
    })
}
