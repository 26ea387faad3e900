//! Video tracking, side by side in one run: the per-frame cost of the library's
//! [`Tracker`] at steady state against ONNX Runtime alone running the same four modules, and
//! against Meta's PyTorch `SAM2VideoPredictor` on the same checkpoint and CPU.
//!
//! Steady state is one object, prompted with one click on frame 0 and tracked forwards until it
//! attends to 7 memory frames (its conditioning frame and the 6 before the current one) and 16
//! object pointers (its conditioning frame's and the 15 before); the timed frames come after.
//!
//! - the library: one `Tracker::track` call per frame, from the frame's RGB pixels to the
//!   object's mask at the frame's size: preprocessing (resize to 1024², normalisation), the image
//!   encoder, the memory bank's selection, assembling the memories, their position encodings and
//!   the pointers, memory attention, the decoder, the memory encoder, the mask upsampled to the
//!   frame, bookkeeping;
//! - ONNX Runtime alone: four plain sessions (`ort`, ONNX Runtime's default options) run one
//!   after the other, each output fed to the next as is: encoder → attention → decoder → memory
//!   encoder. Its inputs are those the tracker has at steady state: the frame resized and
//!   normalised, the 7 memories concatenated ([7, 64, 64, 64]), their position encodings with the
//!   temporal codes added, the 16 pointers ([16, 256]) and their offsets, all from the outputs of
//!   its own earlier frames. Two figures: the four modules alone, and the four modules with the
//!   input work any caller of them repeats every frame, timed just before them: resizing and
//!   normalising the frame (with the library's own code, `preprocess_video_frame_into`, into a
//!   buffer kept between frames) and concatenating the memories and the pointers (new on every
//!   frame). What a caller can do once is not timed on either side: composing the position
//!   encodings (the same at steady state) and the constant inputs.
//!
//! Before the tracker, two modules of the real export alone: memory attention at
//! steady state (the same input shapes) and the image encoder, each run by the library's session
//! (its graph optimised once, attention fused into ONNX Runtime's `MultiHeadAttention`) and by a
//! plain ONNX Runtime session of the same file on the same inputs, interleaved, with the largest
//! difference between their outputs (`--attention-runs N`, 3 by default, 0 to skip;
//! `--attention-only` stops after them).
//!
//! The two are interleaved frame by frame (the machine's other load hits both alike); the
//! figures are medians. Two model sets: the generated four-module tracker (models/track/, on
//! 320×240 frames) and, when SAM2_VIDEO_MODELS names them, the real SAM2.1 hiera-tiny export
//! (tools/models/export_video.py) on 1280×720 frames, with Meta's PyTorch predictor beside it
//! (tools/bench/bench_video_torch.py, when SAM2_REAL_PYTHON names the torch venv's Python); and,
//! when SAM2_EDGETAM_MODELS names them, EdgeTAM's four modules (tools/models/export_edgetam.py) on
//! the same frames, against ONNX Runtime alone and against SAM2.1 tiny's frame in the library.
//!
//!     cargo run --release -p sam2-bench --bin bench_video -- [--out DIR] [--frames N]
//!         [--real-frames N] [--torch-frames N] [--attention-runs N] [--attention-only]
//!
//! Writes out/bench_video.json.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, Tensor};
use sam2::video::{Direction, Tracker, TrackerOptions, VideoModelPaths};
use sam2::{ImageView, PixelFormat, Point, Prompt};
use sam2_bench::stats::median;
use sam2_bench::track_clip;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// SAM2.1's `num_maskmem` and `max_obj_ptrs_in_encoder`.
const NUM_MASKMEM: usize = 7;
const MAX_POINTERS: usize = 16;
/// Frames tracked before timing: from frame 16 on, a frame attends to 7 memories and 16 pointers.
const WARM_FRAMES: u32 = 17;
const SIDE: usize = 1024;

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

/// Writes the encoder's input for `rgb` into `image` (`[1, 3, 1024, 1024]`): the library's own
/// resize and normalisation (PIL's bicubic, as `SAM2VideoPredictor` loads frames), so both sides
/// encode the same tensor.
fn model_input(rgb: &[u8], width: usize, height: usize, image: &mut DynValue) -> Res<()> {
    let view = ImageView::packed(rgb, width, height, PixelFormat::Rgb)?;
    let out = image.try_extract_tensor_mut::<f32>()?.1;
    sam2::test_support::preprocess_video_frame_into(&view, SIDE, out);
    Ok(())
}

fn new_image() -> Res<DynValue> {
    f32_tensor(
        vec![1, 3, SIDE as i64, SIDE as i64],
        vec![0.0; 3 * SIDE * SIDE],
    )
}

fn f32_tensor(shape: Vec<i64>, data: Vec<f32>) -> Res<DynValue> {
    Ok(Tensor::from_array((shape, data))?.into_dyn())
}

fn values(v: &DynValue) -> Res<(Vec<i64>, Vec<f32>)> {
    let (shape, data) = v.try_extract_tensor::<f32>()?;
    Ok((shape.to_vec(), data.to_vec()))
}

type Inputs<'a> = Vec<(Cow<'a, str>, SessionInputValue<'a>)>;

/// ONNX Runtime alone: the four modules in plain sessions, and the memory of the one object it
/// tracks (kept outside the timed region).
struct Plain {
    encoder: Session,
    attention: Session,
    decoder: Session,
    memory_encoder: Session,
    /// The conditioning frame's memory features and pointer.
    conditioning: Option<(DynValue, DynValue)>,
    /// The last tracked frames' memory features and pointers, newest last.
    recent: VecDeque<(DynValue, DynValue)>,
    /// `maskmem_pos_enc` and `temporal_code`, as read from the first memory.
    memory_pos: Vec<f32>,
    temporal_code: Vec<f32>,
    /// Memory attention takes `obj_ptr_tpos` (SAM2; EdgeTAM has none).
    pointer_tpos: bool,
    /// The memory encoder takes `object_score_logits` (SAM2; EdgeTAM has none).
    memory_score: bool,
}

/// The inputs of one tracked frame: what is the same at steady state, prepared before the clock
/// starts; the memories and pointers are concatenated by [`Plain::concat`] on the clock.
struct Prepared {
    memories: Option<DynValue>,
    pointers: Option<DynValue>,
    /// The kept outputs to concatenate: `None` for the conditioning frame's, else an index into
    /// [`Plain::recent`].
    memory_parts: Vec<Option<usize>>,
    pointer_parts: Vec<Option<usize>>,
    memory_pos: DynValue,
    pointer_tpos: DynValue,
    coords: DynValue,
    labels: DynValue,
    mask_input: DynValue,
    has_mask: DynValue,
    multimask: DynValue,
    score_zero: DynValue,
    from_points: DynValue,
}

impl Plain {
    fn new(paths: &VideoModelPaths) -> Res<Plain> {
        let env = sam2::runtime::environment()?;
        let open = |p: &Path| -> Res<Session> { Ok(Session::builder(env)?.commit_from_file(p)?) };
        let has = |s: &Session, name: &str| s.inputs().iter().any(|i| i.name() == name);
        let attention = open(&paths.memory_attention)?;
        let memory_encoder = open(&paths.memory_encoder)?;
        Ok(Plain {
            encoder: open(&paths.image_encoder)?,
            pointer_tpos: has(&attention, "obj_ptr_tpos"),
            memory_score: has(&memory_encoder, "object_score_logits"),
            attention,
            decoder: open(&paths.image_decoder)?,
            memory_encoder,
            conditioning: None,
            recent: VecDeque::new(),
            memory_pos: Vec::new(),
            temporal_code: Vec::new(),
        })
    }

    /// Frame 0: encoder, decoder on the click (multimask, as SAM2 for one point), memory encoder
    /// (mask from points). Not timed.
    fn prompt(&mut self, image: &DynValue, click: (f32, f32), size: (usize, usize)) -> Res<()> {
        let enc = self
            .encoder
            .run(vec![(Cow::from("image"), image.into())] as Inputs)?;
        let coords = f32_tensor(
            vec![1, 1, 2],
            vec![
                click.0 * SIDE as f32 / size.0 as f32,
                click.1 * SIDE as f32 / size.1 as f32,
            ],
        )?;
        let labels = f32_tensor(vec![1, 1], vec![1.0])?;
        let mask_input = f32_tensor(vec![1, 1, 256, 256], vec![0.0; 256 * 256])?;
        let zero = f32_tensor(vec![1], vec![0.0])?;
        let one = f32_tensor(vec![1], vec![1.0])?;
        let dec = self.decoder.run(vec![
            ("point_coords".into(), (&coords).into()),
            ("point_labels".into(), (&labels).into()),
            ("image_embed".into(), (&enc["vision_feats"]).into()),
            ("high_res_feats_0".into(), (&enc["high_res_feat0"]).into()),
            ("high_res_feats_1".into(), (&enc["high_res_feat1"]).into()),
            ("mask_input".into(), (&mask_input).into()),
            ("has_mask_input".into(), (&zero).into()),
            ("multimask_output".into(), (&one).into()),
        ] as Inputs)?;
        let (_, score) = values(&dec["object_score_logits"])?;
        let score = f32_tensor(vec![1, 1], score)?;
        let mut inputs: Inputs = vec![
            ("mask_for_mem".into(), (&dec["mask_for_mem"]).into()),
            ("pix_feat".into(), (&enc["pix_feat"]).into()),
            ("is_mask_from_pts".into(), (&one).into()),
        ];
        if self.memory_score {
            inputs.push(("object_score_logits".into(), (&score).into()));
        }
        let mem = self.memory_encoder.run(inputs)?;
        self.memory_pos = values(&mem["maskmem_pos_enc"])?.1;
        self.temporal_code = values(&mem["temporal_code"])?.1;
        let (s, d) = values(&mem["maskmem_features"])?;
        let (ps, pd) = values(&dec["obj_ptr"])?;
        self.conditioning = Some((f32_tensor(s, d)?, f32_tensor(ps, pd)?));
        Ok(())
    }

    /// The inputs of frame `t` as the tracker assembles them (SAM2's selection, memory stride 1).
    fn prepare(&self, t: u32) -> Res<Prepared> {
        // Which kept outputs: `None` for the conditioning frame's, else an index into `recent`.
        // Memories: the conditioning frame (temporal row num_maskmem - 1), then frames t-6..t-1
        // (frame t-r at row r-1).
        let mut memories: Vec<(Option<usize>, usize)> = vec![(None, NUM_MASKMEM - 1)];
        let n = self.recent.len();
        for r in (1..NUM_MASKMEM).rev() {
            if r <= n {
                memories.push((Some(n - r), r - 1));
            }
        }
        // Pointers: the conditioning frame's (offset t), then frames t-1, t-2, ... (offset d).
        let mut pointers: Vec<(Option<usize>, f32)> = vec![(None, t as f32)];
        for d in 1..MAX_POINTERS.min(n + 1) {
            pointers.push((Some(n - d), d as f32));
        }
        let mem_dim = 64;
        let tokens = self.memory_pos.len() / mem_dim;
        let mut pos = vec![0f32; (memories.len() * tokens + 4 * pointers.len()) * mem_dim];
        for (k, (_, row)) in memories.iter().enumerate() {
            let code = &self.temporal_code[row * mem_dim..(row + 1) * mem_dim];
            for (i, v) in pos[k * tokens * mem_dim..(k + 1) * tokens * mem_dim]
                .iter_mut()
                .enumerate()
            {
                *v = self.memory_pos[i] + code[i % mem_dim];
            }
        }
        let rows = (pos.len() / mem_dim) as i64;
        Ok(Prepared {
            memories: None,
            pointers: None,
            memory_parts: memories.iter().map(|m| m.0).collect(),
            pointer_parts: pointers.iter().map(|p| p.0).collect(),
            memory_pos: f32_tensor(vec![rows, 1, mem_dim as i64], pos)?,
            pointer_tpos: f32_tensor(
                vec![pointers.len() as i64],
                pointers
                    .iter()
                    .map(|p| p.1 / (MAX_POINTERS - 1) as f32)
                    .collect(),
            )?,
            coords: f32_tensor(vec![1, 1, 2], vec![0.0, 0.0])?,
            labels: f32_tensor(vec![1, 1], vec![-1.0])?,
            mask_input: f32_tensor(vec![1, 1, 256, 256], vec![0.0; 256 * 256])?,
            has_mask: f32_tensor(vec![1], vec![0.0])?,
            multimask: f32_tensor(vec![1], vec![1.0])?,
            score_zero: f32_tensor(vec![1, 1], vec![0.0])?,
            from_points: f32_tensor(vec![1], vec![0.0])?,
        })
    }

    /// Timed with the input work: the memories and the pointers [`Plain::prepare`] chose,
    /// concatenated into new tensors (exactly sized, as a caller would).
    fn concat(&self, p: &mut Prepared) -> Res<()> {
        let (cond_mem, cond_ptr) = self.conditioning.as_ref().ok_or("prompt first")?;
        fn concat<'a>(
            parts: &[Option<usize>],
            pick: impl Fn(Option<usize>) -> &'a DynValue,
        ) -> Res<DynValue> {
            let first = pick(parts[0]).try_extract_tensor::<f32>()?;
            let mut shape = first.0.to_vec();
            let mut data = Vec::with_capacity(first.1.len() * parts.len());
            for &i in parts {
                data.extend_from_slice(pick(i).try_extract_tensor::<f32>()?.1);
            }
            shape[0] = parts.len() as i64;
            f32_tensor(shape, data)
        }
        p.memories = Some(concat(&p.memory_parts, |i| {
            i.map_or(cond_mem, |i| &self.recent[i].0)
        })?);
        p.pointers = Some(concat(&p.pointer_parts, |i| {
            i.map_or(cond_ptr, |i| &self.recent[i].1)
        })?);
        Ok(())
    }

    /// The timed part: the four modules, each output fed to the next. Returns the frame's memory
    /// features and pointer (kept by the caller after the clock stops).
    fn step(&mut self, image: &DynValue, p: &Prepared) -> Res<(DynValue, DynValue)> {
        let (memories, pointers) = match (&p.memories, &p.pointers) {
            (Some(m), Some(p)) => (m, p),
            _ => return Err("concatenate first".into()),
        };
        let enc = self
            .encoder
            .run(vec![(Cow::from("image"), image.into())] as Inputs)?;
        let mut inputs: Inputs = vec![
            ("current_vision_feat".into(), (&enc["vision_feats"]).into()),
            (
                "current_vision_pos_embed".into(),
                (&enc["vision_pos_embed"]).into(),
            ),
            ("memory_0".into(), pointers.into()),
            ("memory_1".into(), memories.into()),
            ("memory_pos_embed".into(), (&p.memory_pos).into()),
        ];
        if self.pointer_tpos {
            inputs.push(("obj_ptr_tpos".into(), (&p.pointer_tpos).into()));
        }
        let att = self.attention.run(inputs)?;
        let mut dec = self.decoder.run(vec![
            ("point_coords".into(), (&p.coords).into()),
            ("point_labels".into(), (&p.labels).into()),
            ("image_embed".into(), (&att["image_embed"]).into()),
            ("high_res_feats_0".into(), (&enc["high_res_feat0"]).into()),
            ("high_res_feats_1".into(), (&enc["high_res_feat1"]).into()),
            ("mask_input".into(), (&p.mask_input).into()),
            ("has_mask_input".into(), (&p.has_mask).into()),
            ("multimask_output".into(), (&p.multimask).into()),
        ] as Inputs)?;
        let mut inputs: Inputs = vec![
            ("mask_for_mem".into(), (&dec["mask_for_mem"]).into()),
            ("pix_feat".into(), (&enc["pix_feat"]).into()),
            ("is_mask_from_pts".into(), (&p.from_points).into()),
        ];
        if self.memory_score {
            inputs.push((
                "object_score_logits".into(),
                (&dec["object_score_logits"]).into(),
            ));
        }
        let mut mem = self.memory_encoder.run(inputs)?;
        black_box(&dec["pred_mask"]);
        let _ = &p.score_zero;
        let features = mem
            .remove("maskmem_features")
            .ok_or("no maskmem_features")?;
        let pointer = dec.remove("obj_ptr").ok_or("no obj_ptr")?;
        Ok((features, pointer))
    }

    fn keep(&mut self, memory: (DynValue, DynValue)) {
        self.recent.push_back(memory);
        if self.recent.len() > MAX_POINTERS {
            self.recent.pop_front();
        }
    }
}

/// Per-frame seconds of one model set: the library, ONNX Runtime alone (the four modules), and
/// ONNX Runtime alone's input work on the same frames (resizing and normalising the frame, then
/// concatenating the memories and the pointers).
struct Timings {
    library: Vec<f64>,
    /// The library on the variant's modules, when one was given.
    variant: Vec<f64>,
    alone: Vec<f64>,
    preprocess: Vec<f64>,
    assemble: Vec<f64>,
}

/// The medians of [`Timings`].
#[derive(Clone, Copy)]
struct Summary {
    library: f64,
    /// The library on the variant's modules.
    variant: Option<f64>,
    alone: f64,
    /// The four modules with their input work, frame by frame.
    alone_with_inputs: f64,
    resize: f64,
    assemble: f64,
}

impl Timings {
    fn summary(&self) -> Summary {
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
    fn print(&self, model: &str, extra: &str, variant_what: &str) {
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
                "| {model} | library, the int8 variant (`Tracker::track`; tools/models/make_variant.py int8 --attention-scores int8: {variant_what}) | {} | {} | {:.3}× ONNX Runtime alone on the float32 files; {:.3}× the library's float32 frame |",
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
    fn json(&self, mut fields: serde_json::Value) -> serde_json::Value {
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
fn compare(
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

/// A deterministic stand-in for activations: values in [-1, 1).
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// One module alone, the library's session (attention fused at load) against ONNX Runtime alone
/// on the same file and the same inputs (`shapes`, filled with [`noise`]), interleaved: the
/// medians, the largest difference between the two `output`s against the output's largest
/// magnitude, and the fusion report.
/// One module alone: the library's session and ONNX Runtime's own on the same file, and, when
/// given, the library's session on a variant of it (a third side), interleaved.
struct Alone {
    library: f64,
    exported: f64,
    /// The variant's median, its largest difference from ONNX Runtime's output, and what was
    /// fused in it.
    variant: Option<(f64, f32, String)>,
    worst: f32,
    largest: f32,
    report: String,
}

fn module_alone(
    path: &Path,
    variant: Option<&Path>,
    shapes: &[(&str, Vec<i64>)],
    output: &str,
    runs: u32,
) -> Res<Alone> {
    let env = sam2::runtime::environment()?;
    let options = sam2::device::SessionOptions::default();
    let mut library = sam2::test_support::LibrarySession::new(path, &options)?;
    let mut plain = Session::builder(env)?.commit_from_file(path)?;
    let mut other = variant
        .map(|v| sam2::test_support::LibrarySession::new(v, &options))
        .transpose()?;
    let values: Vec<(&str, DynValue)> = shapes
        .iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let len = shape.iter().product::<i64>() as usize;
            Ok((*name, f32_tensor(shape.clone(), noise(len, i as u64))?))
        })
        .collect::<Res<_>>()?;
    let feeds = || -> Inputs {
        values
            .iter()
            .map(|(name, v)| (Cow::from(*name), v.into()))
            .collect()
    };
    let sides = if other.is_some() { 3 } else { 2 };
    let mut times: [Vec<f64>; 3] = Default::default();
    let (mut worst, mut largest, mut variant_worst) = (0f32, 0f32, 0f32);
    for t in 0..=runs {
        let mut outs: [Vec<f32>; 3] = Default::default();
        for i in 0..sides {
            // Each side goes first in turn.
            let side = (i + t as usize) % sides;
            let session = match side {
                0 => &mut library.session,
                1 => &mut plain,
                _ => &mut other.as_mut().expect("a third side").session,
            };
            let start = Instant::now();
            let out = session.run(feeds())?;
            let secs = start.elapsed().as_secs_f64();
            outs[side] = values_of(&out[output])?;
            // The first run of each is a warm-up.
            if t > 0 {
                times[side].push(secs);
            }
        }
        for (a, b) in outs[0].iter().zip(&outs[1]) {
            worst = worst.max((a - b).abs());
            largest = largest.max(b.abs());
        }
        for (a, b) in outs[2].iter().zip(&outs[1]) {
            variant_worst = variant_worst.max((a - b).abs());
        }
    }
    Ok(Alone {
        library: median(&times[0]),
        exported: median(&times[1]),
        variant: other.map(|o| (median(&times[2]), variant_worst, o.attention.to_string())),
        worst,
        largest,
        report: library.attention.to_string(),
    })
}

/// Memory attention alone at steady state (7 memory frames, 16 pointers: 4096 queries against
/// 7 × 4096 + 64 memory tokens), then the image encoder alone (one 1024² frame): see
/// [`module_alone`]. Prints each and returns them as JSON.
fn modules_alone(
    paths: &VideoModelPaths,
    variant: Option<&VideoModelPaths>,
    runs: u32,
) -> Res<serde_json::Value> {
    let (m, n) = (NUM_MASKMEM as i64, MAX_POINTERS as i64);
    let attention = [
        ("current_vision_feat", vec![1, 256, 64, 64]),
        ("current_vision_pos_embed", vec![4096, 1, 256]),
        ("memory_0", vec![n, 256]),
        ("memory_1", vec![m, 64, 64, 64]),
        ("memory_pos_embed", vec![m * 4096 + 4 * n, 1, 64]),
        ("obj_ptr_tpos", vec![n]),
    ];
    let encoder = [("image", vec![1, 3, SIDE as i64, SIDE as i64])];
    let mut json = serde_json::Map::new();
    for (key, what, path, variant, shapes, output) in [
        (
            "memory_attention",
            "memory attention alone, 7 memory frames and 16 pointers",
            &paths.memory_attention,
            variant.map(|v| &v.memory_attention),
            &attention[..],
            "image_embed",
        ),
        (
            "image_encoder",
            "image encoder alone, one 1024² frame",
            &paths.image_encoder,
            variant.map(|v| &v.image_encoder),
            &encoder[..],
            "vision_feats",
        ),
    ] {
        let a = module_alone(path, variant.map(PathBuf::as_path), shapes, output, runs)?;
        println!(
            "SAM2.1 hiera-tiny {what}, medians of {runs} interleaved runs: the library {:.1} ms \
             (attention: {}), ONNX Runtime alone on the same file {:.1} ms: {:.3}×; \
             outputs differ by at most {:.2e} (largest magnitude {:.2})",
            a.library * 1000.0,
            a.report,
            a.exported * 1000.0,
            a.library / a.exported,
            a.worst,
            a.largest,
        );
        let mut entry = serde_json::json!({
            "runs": runs, "library_s": a.library, "onnxruntime_alone_s": a.exported,
            "ratio": a.library / a.exported, "max_abs_difference": a.worst,
            "max_abs_output": a.largest, "fusion": a.report,
        });
        if let Some((secs, diff, report)) = &a.variant {
            let (secs, diff) = (*secs, *diff);
            println!(
                "  the int8 variant's module in the library: {:.1} ms (attention: {report}): \
                 {:.3}× ONNX Runtime alone on the float32 file; outputs differ from its by at \
                 most {diff:.2e}",
                secs * 1000.0,
                secs / a.exported,
            );
            entry["int8_variant"] = serde_json::json!({
                "library_s": secs, "ratio_to_float32_alone": secs / a.exported,
                "max_abs_difference": diff, "fusion": report,
            });
        }
        json.insert(key.to_string(), entry);
    }
    Ok(serde_json::Value::Object(json))
}

fn values_of(v: &DynValue) -> Res<Vec<f32>> {
    Ok(v.try_extract_tensor::<f32>()?.1.to_vec())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let frames: u32 = arg("--frames").map_or(Ok(30), |v| v.parse())?;
    let real_frames: u32 = arg("--real-frames").map_or(Ok(5), |v| v.parse())?;
    let torch_frames: u32 = arg("--torch-frames").map_or(Ok(3), |v| v.parse())?;
    let attention_runs: u32 = arg("--attention-runs").map_or(Ok(3), |v| v.parse())?;
    let out_dir = PathBuf::from(arg("--out").unwrap_or_else(|| "out".into()));
    let root = sam2_bench::root();
    let models = PathBuf::from(std::env::var("SAM2_MODELS").map_err(|_| {
        "SAM2_MODELS is not set: source tools/setup/setup.sh (scripts/bench.sh does)"
    })?);
    let info = sam2::runtime::init(None)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_average = || {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let load = load_average();
    println!(
        "video tracking, one object at steady state (7 memory frames, 16 pointers); ONNX Runtime \
         {}, {cores} cores, load average {load}; medians of frames tracked interleaved",
        info.version
    );

    // Memory attention and the image encoder alone first: the largest shares of a real frame,
    // and what the fusion of attention is for.
    let real_dir = std::env::var_os("SAM2_VIDEO_MODELS").map(PathBuf::from);
    // Its int8 variant (tools/setup/setup-video.sh makes it) as a third side.
    let int8 = std::env::var_os("SAM2_VIDEO_INT8")
        .map(|d| VideoModelPaths::find(PathBuf::from(d)))
        .transpose()?;
    let attention = match &real_dir {
        Some(dir) if attention_runs > 0 => Some(modules_alone(
            &VideoModelPaths::in_dir(dir, ""),
            int8.as_ref(),
            attention_runs,
        )?),
        _ => None,
    };

    if args.iter().any(|a| a == "--attention-only") {
        std::fs::create_dir_all(&out_dir)?;
        let json = serde_json::json!({ "modules_alone": attention });
        std::fs::write(
            out_dir.join("bench_video_modules.json"),
            serde_json::to_string_pretty(&json)?,
        )?;
        return Ok(());
    }

    let gen_size = (320, 240);
    let gen = compare(
        &VideoModelPaths::in_dir(models.join("track"), ""),
        None,
        gen_size,
        frames,
    )?;
    let gen = gen.summary();

    let real_size = (1280, 720);
    let real = match &real_dir {
        Some(dir) => Some(
            compare(
                &VideoModelPaths::in_dir(dir, ""),
                int8.as_ref(),
                real_size,
                real_frames,
            )?
            .summary(),
        ),
        None => None,
    };
    // EdgeTAM: its four modules (tools/models/export_edgetam.py) on the same frames.
    let edgetam = match std::env::var_os("SAM2_EDGETAM_MODELS").map(PathBuf::from) {
        Some(dir) => {
            // Its int8 variant (tools/setup/setup-edgetam.sh makes it) as a third side.
            let int8 = std::env::var_os("SAM2_EDGETAM_INT8")
                .map(|d| VideoModelPaths::find(PathBuf::from(d)))
                .transpose()?;
            let paths = VideoModelPaths::find(&dir)?;
            Some(compare(&paths, int8.as_ref(), real_size, real_frames)?.summary())
        }
        None => None,
    };
    let torch = match (&real_dir, std::env::var_os("SAM2_REAL_PYTHON")) {
        (Some(dir), Some(python)) => torch_frame(&root, &python, dir, torch_frames)?,
        _ => None,
    };
    // EdgeTAM's own predictor in its venv, on the same checkpoint as the export.
    let edgetam_torch = match (
        std::env::var_os("SAM2_EDGETAM_MODELS"),
        std::env::var_os("SAM2_EDGETAM_PYTHON"),
    ) {
        (Some(dir), Some(python)) => torch_frame(&root, &python, Path::new(&dir), torch_frames)?,
        _ => None,
    };

    let ms = |s: f64| format!("{:.1} ms", s * 1000.0);
    let fps = |s: f64| format!("{:.2}", 1.0 / s);
    println!("| model, frames | side | per frame | frames/s | ratio |");
    println!("|---|---|---|---|---|");
    gen.print("generated tracker, 320×240", "", "");
    // Where the CPU cannot take int8 scores the library keeps the float kernel: say so.
    let scores_note = match sam2::models::int8_scores_available() {
        Ok(()) => String::new(),
        Err(why) => format!(" as asked, but kept float here: {why}"),
    };
    match real {
        Some(r) => r.print(
            "SAM2.1 hiera-tiny, 1280×720",
            "",
            &format!(
                "the image encoder's weights, the feed-forward layers' and memory attention's \
                 scores int8{scores_note}"
            ),
        ),
        None => println!("| SAM2.1 hiera-tiny | not run (SAM2_VIDEO_MODELS unset) | | | |"),
    }
    match edgetam {
        Some(e) => {
            let vs_sam2 = real.map_or(String::new(), |r| {
                format!(
                    "; {:.3}× SAM2.1 tiny's frame in the library ({:.1}× faster)",
                    e.library / r.library,
                    r.library / e.library
                )
            });
            e.print(
                "EdgeTAM, 1280×720",
                &vs_sam2,
                &format!(
                    "the feed-forward layers' weights and memory attention's scores \
                     int8{scores_note}; its RepViT encoder has no MatMul to quantise"
                ),
            );
        }
        None => println!(
            "| EdgeTAM | not run (SAM2_EDGETAM_MODELS unset: tools/setup/setup-edgetam.sh) | | | |"
        ),
    }
    match (torch, real) {
        (Some((secs, threads)), Some(r)) => println!(
            "| SAM2.1 hiera-tiny, 1280×720 | Meta's SAM2VideoPredictor, PyTorch ({threads} threads) | {} | {} | {:.2}× the library |",
            ms(secs),
            fps(secs),
            secs / r.library
        ),
        _ => println!(
            "| SAM2.1 hiera-tiny | Meta's SAM2VideoPredictor: not run (SAM2_VIDEO_MODELS or SAM2_REAL_PYTHON unset, or it failed) | | | |"
        ),
    }
    match (edgetam_torch, edgetam) {
        (Some((secs, threads)), Some(e)) => println!(
            "| EdgeTAM, 1280×720 | EdgeTAM's SAM2VideoPredictor, PyTorch ({threads} threads) | {} | {} | {:.2}× the library |",
            ms(secs),
            fps(secs),
            secs / e.library
        ),
        _ => println!(
            "| EdgeTAM | EdgeTAM's SAM2VideoPredictor: not run (SAM2_EDGETAM_MODELS or SAM2_EDGETAM_PYTHON unset, or it failed) | | | |"
        ),
    }
    let load_end = load_average();
    println!("load average at the end {load_end}");
    std::fs::create_dir_all(&out_dir)?;
    let json = serde_json::json!({
        "cores": cores, "load_average": load, "load_average_end": load_end,
        "onnxruntime": info.version.to_string(),
        "memory_frames": NUM_MASKMEM, "pointers": MAX_POINTERS, "objects": 1,
        "warm_frames": WARM_FRAMES,
        "generated": gen.json(serde_json::json!({
            "frame": [gen_size.0, gen_size.1], "frames": frames,
        })),
        "real": real.map(|r| r.json(serde_json::json!({
            "model": "sam2.1_hiera_tiny (tools/models/export_video.py)",
            "frame": [real_size.0, real_size.1], "frames": real_frames,
        }))),
        "edgetam": edgetam.map(|e| e.json(serde_json::json!({
            "model": "edgetam (tools/models/export_edgetam.py)",
            "frame": [real_size.0, real_size.1], "frames": real_frames,
            "vs_sam2_1_tiny_library": real.map(|r| e.library / r.library),
        }))),
        "modules_alone": attention,
        "pytorch": torch.map(|(secs, threads)| serde_json::json!({
            "frames": torch_frames, "seconds": secs, "fps": 1.0 / secs, "threads": threads,
        })),
        "edgetam_pytorch": edgetam_torch.map(|(secs, threads)| serde_json::json!({
            "frames": torch_frames, "seconds": secs, "fps": 1.0 / secs, "threads": threads,
        })),
    });
    std::fs::write(
        out_dir.join("bench_video.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    Ok(())
}

/// The median seconds a frame of the PyTorch video predictor of the export in `models` takes
/// (tools/bench/bench_video_torch.py, run by `python`: Meta's for SAM2.1 tiny, EdgeTAM's for
/// EdgeTAM), and its threads; `None` when the script fails (its error is printed).
fn torch_frame(
    root: &Path,
    python: &std::ffi::OsStr,
    models: &Path,
    frames: u32,
) -> Result<Option<(f64, u64)>, Box<dyn std::error::Error>> {
    if frames == 0 {
        // `--torch-frames 0`: not run (its row says so), rather than a median of nothing.
        return Ok(None);
    }
    let out = Command::new(python)
        .arg(root.join("tools/bench/bench_video_torch.py"))
        .arg("--models")
        .arg(models)
        .args(["--width", "1280", "--height", "720", "--timed"])
        .arg(frames.to_string())
        .output()?;
    if !out.status.success() {
        eprintln!(
            "[bench_video] PyTorch run on {} failed: {}",
            models.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        return Ok(None);
    }
    let v: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or(""),
    )?;
    let secs: Vec<f64> = v["seconds"]
        .as_array()
        .ok_or("no seconds from the PyTorch run")?
        .iter()
        .filter_map(|s| s.as_f64())
        .collect();
    Ok(Some((median(&secs), v["threads"].as_u64().unwrap_or(0))))
}
