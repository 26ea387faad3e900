//! Two modules of the real export alone: memory attention at steady state and the image encoder,
//! each run by the library's session (its graph rewritten once at load) and by a plain ONNX
//! Runtime session of the same file on the same inputs, interleaved, with the largest difference
//! between their outputs; and, given one, the library on the int8 variant's module.

use super::*;

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

/// One module alone, the library's session (attention fused at load) against ONNX Runtime alone
/// on the same file and the same inputs (`shapes`, filled with [`noise`]), interleaved: the
/// medians, the largest difference between the two `output`s against the output's largest
/// magnitude, and the fusion report.
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
pub(crate) fn modules_alone(
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
