//! The report: the table's rows from what the sections measured, each with its goal and note,
//! printed with the notes, the goals met or not and the load of other processes, then written as
//! JSON (out/bench.json) and drawn as a chart (out/bench.png, by tools/bench/bench_chart.py).

use super::*;

/// What the sections measured, as the report reads it.
pub(crate) struct Figures {
    pub(crate) pre: stages::Preprocessed,
    pub(crate) encode: Vec<Option<Stat>>,
    pub(crate) predict: Vec<Option<Stat>>,
    pub(crate) post: stages::Postprocessed,
    pub(crate) allocations: Allocations,
    pub(crate) throughput: Vec<(usize, Stat, Stat)>,
    pub(crate) files: embedding_file::SaveLoad,
    pub(crate) basic: stages::Basic,
    pub(crate) memory: memory::Memory,
    pub(crate) embedding_bytes: usize,
    /// The library's prediction of the click, and the peer's versions and own prediction.
    pub(crate) prediction: Prediction,
    pub(crate) peer_info: Value,
}

/// The table's rows, in the order printed.
pub(crate) fn rows(run: &Run, f: &Figures) -> Vec<Row> {
    let (pre, enc, pred, post) = (&f.pre.stats, &f.encode, &f.predict, &f.post.stats);
    let (enc_all, pred_all) = (&f.basic.encode, &f.basic.predict);
    let Allocations {
        per_predict,
        per_plain,
        per_copy,
    } = &f.allocations;
    let (tput, emb_bytes) = (&f.throughput, f.embedding_bytes);
    let (save, load, file_len) = (&f.files.save, &f.files.load, f.files.file_len);
    let (memory, weights_mib) = (&f.memory.rows, f.memory.weights_mib);
    let mut rows: Vec<Row> = Vec::new();
    let mut r = Row::new(
        "preprocess",
        "Preprocess (1920×1080 RGB → 1024² NCHW f32)",
        "ms",
    );
    r.library = pre[0].clone();
    r.floor = f.pre.floor.clone();
    r.peer = pre[3].clone();
    r.goal = "≥5× faster than peer; ≤4× floor".into();
    r.met = match (r.peer_over_lib(), r.lib_over_floor()) {
        (Some(po), Some(lf)) => Some(po >= 5.0 && lf <= 4.0),
        (None, Some(lf)) if lf > 4.0 => Some(false),
        _ => None,
    };
    r.note = format!(
        "floor = one read of the {:.1} MB input + one write of the {:.1} MB output ({} thread{}); peer = cv2.resize + numpy on RGB input; samexporter exactly (cvtColor from BGR first): {} ms; max |peer − library| = {} (cv2 rounds the resized image to uint8 and does not antialias)",
        run.rgb.len() as f64 / 1e6,
        f.pre.out.len() as f64 * 4.0 / 1e6,
        f.pre.floor_threads,
        if f.pre.floor_threads == 1 { "" } else { "s" },
        fmt_cell(&pre[4]),
        f.pre.peer_diff.map_or("?".into(), |d| format!("{d:.4}"))
    );
    rows.push(r);

    let mut r = Row::new(
        "postprocess",
        "Post-process (256² logits → 1920×1080 mask)",
        "ms",
    );
    r.library = post[0].clone();
    r.floor = post[1].clone();
    r.peer = post[4].clone();
    r.goal = "no slower than cv2.resize+threshold".into();
    r.met = r.peer_over_lib().map(|po| po >= 1.0);
    r.note = format!(
        "the same logits on both sides; floor = one write of the 2 MB mask; pixels differing from cv2's mask: {}",
        f.post.peer_diff.map_or("?".into(), |d| d.to_string())
    );
    rows.push(r);

    let mut r = Row::new("box_area", "  Box and area of the mask", "ms");
    r.library = post[2].clone();
    r.floor = post[3].clone();
    r.note = "box_and_area on the 1920×1080 mask (part of every predict; the peer computes neither); floor = one read of the mask".into();
    rows.push(r);

    let mut r = Row::new("encode", "Encode e2e (pixels → embedding)", "ms");
    r.library = enc[0].clone();
    r.floor = enc[2].clone();
    r.peer = enc[3].clone();
    r.goal = "≤1.02× ORT alone; faster than peer".into();
    r.met = match (r.lib_over_floor(), r.peer_over_lib()) {
        (Some(lf), Some(po)) => Some(lf <= 1.02 && po > 1.0),
        (Some(lf), None) => Some(lf <= 1.02),
        _ => None,
    };
    r.note = "library: default options (ALL); floor = plain ort Session at ORT's best level (All) run on a ready tensor, no preprocessing; peer = samexporter's client arithmetic in Python (cv2 + numpy float64 + InferenceSession, default options)".into();
    rows.push(r);

    if enc[4].is_some() {
        let mut r = Row::new("encode_int8", "  Encode e2e, the int8 variant", "ms");
        r.library = enc[4].clone();
        r.floor = enc[2].clone();
        r.goal = "≤0.6× ORT alone on the fp32 file".into();
        r.met = r.lib_over_floor().map(|x| x <= 0.6);
        r.note = format!(
            "the library on sam2-variant's int8 encoder (weights int8 per channel, 7-bit range; activations per run) against the same floor, ONNX Runtime alone on the float32 file; CPU: {}",
            cpu_description()
        );
        rows.push(r);
    }

    if enc[5].is_some() {
        let mut r = Row::new("encode_edgetam", "  Encode e2e, EdgeTAM", "ms");
        r.library = enc[5].clone();
        r.floor = enc[0].clone();
        r.goal = "≤0.25× SAM2.1 tiny's encode in the library".into();
        r.met = r.lib_over_floor().map(|x| x <= 0.25);
        r.note = "the library on EdgeTAM's image encoder (sam2-export-edgetam: RepViT-M1, random weights) on the same image; floor = SAM2.1 tiny's encode e2e in the library (the row above), not ONNX Runtime alone".into();
        rows.push(r);
    }

    let mut r = Row::new(
        "encode_prepared",
        "  Encode, library on a prepared tensor",
        "ms",
    );
    r.library = enc[1].clone();
    r.floor = enc[2].clone();
    r.note =
        "encode_prepared (no preprocess) against the same floor: the library's own overhead".into();
    rows.push(r);

    let mut r = Row::new("encode_basic", "Encode e2e, Optimization::Basic", "ms");
    r.library = enc_all[0].clone();
    r.floor = enc_all[1].clone();
    r.goal = "≤1.05× ORT alone (Basic)".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.05);
    r.note = "library with session.optimization = Basic against a plain session at Level1".into();
    rows.push(r);

    let mut r = Row::new(
        "predict",
        "Predict e2e (click → 1920×1080 mask, score, box)",
        "ms",
    );
    r.library = pred[0].clone();
    r.floor = pred[1].clone();
    r.peer = pred[3].clone();
    r.goal = "≤1.05× ORT alone; no slower than peer".into();
    r.met = match (r.lib_over_floor(), r.peer_over_lib()) {
        (Some(lf), Some(po)) => Some(lf <= 1.05 && po >= 1.0),
        (Some(lf), None) => Some(lf <= 1.05),
        _ => None,
    };
    r.note = "library: default options (a pool of one session per core; a lone click gets the first, on every core); floor = plain ort Session (All, every core) run on ready tensors, no post-processing; peer = ORT Python (ORT_ENABLE_ALL) + argmax + cv2.resize + threshold".into();
    rows.push(r);

    let mut r = Row::new(
        "predict_equal_work",
        "  Predict, against ORT alone + the library's post-processing",
        "ms",
    );
    r.library = pred[0].clone();
    r.floor = pred[2].clone();
    r.note = "floor = the same plain run, then best mask by IoU, sam2::test_support::upsample_threshold and box_and_area: what remains is the library's own overhead (prompt tensors, binding, checks, result)".into();
    rows.push(r);

    let mut r = Row::new("predict_basic", "Predict e2e, Optimization::Basic", "ms");
    r.library = pred_all[0].clone();
    r.floor = pred_all[1].clone();
    r.goal = "≤1.05× ORT alone (Basic)".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.05);
    rows.push(r);

    let mib = |b: u64| b as f64 / 1048576.0;
    let mut r = Row::new(
        "alloc_per_predict",
        if run.pc.is_some() {
            "Heap bytes allocated per predict (process-wide)"
        } else {
            "Heap bytes allocated per predict (Rust side only)"
        },
        "MiB",
    );
    let (lib_b, plain_b, copy_b) = if run.pc.is_some() {
        (
            per_predict.proc_bytes,
            per_plain.proc_bytes,
            per_copy.proc_bytes,
        )
    } else {
        (
            per_predict.rust_bytes,
            per_plain.rust_bytes,
            per_copy.rust_bytes,
        )
    };
    r.library = Some(stat(vec![mib(lib_b)]));
    r.floor = Some(stat(vec![mib(plain_b)]));
    r.goal = format!("< {:.0} MiB embedding: no copy", mib(emb_bytes as u64));
    // Met when a predict allocates less than one embedding while the control copy (which the
    // counter must see) allocates at least one.
    let control_seen = copy_b as usize >= emb_bytes;
    r.met = Some((lib_b as usize) < emb_bytes && control_seen);
    r.note = format!(
        "median of {} predicts; of which Rust side {:.2} MiB in {} allocations (the {:.2} MiB mask it returns among them); minor page faults {}; control, copy_to_host: {:.2} MiB ({}); floor = one ORT-alone decoder run",
        run.plan.counts,
        mib(per_predict.rust_bytes),
        per_predict.rust_calls,
        mib((W * H) as u64),
        per_predict.minflt,
        mib(copy_b),
        if control_seen { "the counter sees a copy" } else { "NOT seen: this counter cannot show copies" }
    );
    rows.push(r);

    for (n, lib, floor) in tput {
        let mut r = Row::new(
            if *n == 1 {
                "throughput_1"
            } else {
                "throughput_2"
            },
            format!(
                "Predict throughput, {n} thread{} (pool 2)",
                if *n == 1 { "" } else { "s" }
            ),
            "pred/s",
        );
        r.library = Some(lib.clone());
        r.floor = Some(floor.clone());
        r.note = format!(
            "higher is better; library: one predictor, pool_size 2 (two one-thread sessions for predicts that run at once, and one on every core for a predict alone), one embedding; floor = {n} plain session{} (All) with 1 intra thread, one per thread",
            if *n == 1 { "" } else { "s" }
        );
        rows.push(r);
    }
    if tput.len() == 2 {
        let scale = tput[1].1.median / tput[0].1.median;
        rows.last_mut().unwrap().note += &format!("; library 2 threads / 1 thread = {scale:.2}×");
    }

    let mut r = Row::new(
        "save",
        format!("Save embedding ({:.1} MiB, fsync)", mib(file_len as u64)),
        "ms",
    );
    r.library = save[0].clone();
    r.floor = save[1].clone();
    r.goal = "≤1.5× memcpy+write (same durability)".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.5);
    r.note = format!(
        "floor = memcpy + write + fsync; library = temporary file, CRC-32, write, fsync, rename, fsync of the directory; library {:.0} MB/s",
        save[0].as_ref().map_or(f64::NAN, |s| file_len as f64 / 1e6 / (s.median / 1e3))
    );
    rows.push(r);
    let mut r = Row::new("save_nosync", "  Save, against a write without fsync", "ms");
    r.library = save[0].clone();
    r.floor = save[2].clone();
    r.goal = "≤1.5× memcpy+write".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.5);
    r.note = "floor = memcpy + write, no fsync (what durability costs)".into();
    rows.push(r);
    let mut r = Row::new("load", "Load embedding (page cache)", "ms");
    r.library = load[0].clone();
    r.floor = load[2].clone();
    r.goal = "≤1.2× read".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.2);
    r.note = format!(
        "floor = read into a fresh allocation (a load needs new memory); library = header checks, new tensors, CRC-32; library {:.0} MB/s",
        load[0].as_ref().map_or(f64::NAN, |s| file_len as f64 / 1e6 / (s.median / 1e3))
    );
    rows.push(r);
    let mut r = Row::new(
        "load_reuse",
        "  Load, against a read into a reused buffer",
        "ms",
    );
    r.library = load[0].clone();
    r.floor = load[1].clone();
    r.goal = "≤1.2× read".into();
    r.met = r.lib_over_floor().map(|x| x <= 1.2);
    r.note = "floor = read into a buffer allocated (and faulted in) beforehand".into();
    rows.push(r);

    let one = |i: usize| memory.first().and_then(|(_, m)| m[i]).map(|v| v.0);
    for (n, m) in memory {
        let id = match n {
            1 => "rss_1",
            2 => "rss_2",
            4 => "rss_4",
            _ => "rss_8",
        };
        let mut r = Row::new(
            id,
            format!(
                "Resident memory, {n} encoder session{}",
                if *n == 1 { "" } else { "s" }
            ),
            "MiB",
        );
        r.library = m[0].map(|v| stat(vec![v.0]));
        r.peer = m[2].map(|v| stat(vec![v.0]));
        r.floor = Some(stat(vec![weights_mib]));
        if *n > 1 {
            r.goal = "≤ 5% of the weights per extra session".into();
            r.met = match (m[0], one(0)) {
                (Some(v), Some(o)) => Some((v.0 - o) / (*n - 1) as f64 <= 0.05 * weights_mib),
                _ => None,
            };
        }
        let per_extra = |i: usize| -> String {
            match (m[i], one(i)) {
                (Some(v), Some(o)) if *n > 1 => format!("{:.1}", (v.0 - o) / (*n - 1) as f64),
                _ => "—".into(),
            }
        };
        r.note = format!(
            "library = shared weights (default); copied on request: {} MiB; peer = naive ORT sessions; floor = one copy of the weights; MiB per extra session shared/copied/naive: {}/{}/{}",
            m[1].map_or("—".into(), |v| format!("{:.1}", v.0)),
            per_extra(0),
            per_extra(1),
            per_extra(2)
        );
        rows.push(r);
    }
    rows
}

/// Prints the table, its notes and goals, writes it as JSON and draws the chart.
pub(crate) fn print_and_write(
    run: &Run,
    rows: &[Row],
    f: &Figures,
    sections: &Sections,
) -> Res<()> {
    let (peer_info, prediction, threads) = (&f.peer_info, &f.prediction, run.threads);
    let (memory, weights_mib) = (&f.memory.rows, f.memory.weights_mib);
    let load_end = load_average();
    println!();
    print_table(rows);
    println!();
    println!("notes:");
    for r in rows {
        if !r.note.is_empty() {
            println!("  {}: {}", r.name.trim(), r.note);
        }
    }
    if !peer_info.is_null() {
        println!(
            "  peer: OpenCV {}, numpy {}, onnxruntime {} (Python {}); its own embedding gives score {}, mask area {} px (library: score {:.4}, area {} px)",
            peer_info["versions"]["opencv"].as_str().unwrap_or("?"),
            peer_info["versions"]["numpy"].as_str().unwrap_or("?"),
            peer_info["versions"]["onnxruntime"].as_str().unwrap_or("?"),
            peer_info["versions"]["python"].as_str().unwrap_or("?"),
            peer_info.get("predict_score").map_or("?".into(), |v| format!("{:.4}", v.as_f64().unwrap_or(f64::NAN))),
            peer_info.get("predict_mask_area").map_or("?".into(), |v| v.to_string()),
            prediction.scores[0],
            prediction.areas[0],
        );
    } else {
        println!("  peer: not available; its cells are empty");
    }
    println!(
        "  CPU used by other processes (cores, of {threads}) during: {}",
        sections
            .done
            .iter()
            .map(|(n, c, s)| format!("{n} {c:.2} ({s:.0} s)"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!();
    println!("goals:");
    for r in rows.iter().filter(|r| r.met.is_some()) {
        let detail = match (r.lib_over_floor(), r.peer_over_lib()) {
            (Some(lf), Some(po)) => format!("library/floor {lf:.3}×, peer/library {po:.3}×"),
            (Some(lf), None) => format!("library/floor {lf:.3}×"),
            (None, Some(po)) => format!("peer/library {po:.3}×"),
            _ => String::new(),
        };
        println!(
            "  [{}] {} — {} ({}; library {} {})",
            if r.met == Some(true) {
                "met"
            } else {
                "NOT MET"
            },
            r.name.trim(),
            r.goal,
            detail,
            fmt_cell(&r.library),
            r.unit
        );
    }
    let elapsed = run.started.elapsed().as_secs_f64();
    println!();
    println!(
        "load average {} at start, {load_end} at end; {threads} cores; {elapsed:.0} s",
        run.load_start
    );

    let json_path = run.out_dir.join("bench.json");
    let doc = json!({
        "machine": {"cores": threads, "load_average_start": run.load_start, "load_average_end": load_end,
                    "onnxruntime": run.onnxruntime, "sam2": sam2::VERSION, "quick": run.quick,
                    "seconds": elapsed,
                    "other_processes_cores": sections.done.iter().map(|(n, c, s)| json!({"section": n, "cores": c, "seconds": s})).collect::<Vec<_>>()},
        "image": {"width": W, "height": H, "path": run.image_path, "click": [CLICK.0, CLICK.1]},
        "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        "memory": {"weights_mib": weights_mib, "rows": memory.iter().map(|(n, m)| json!({
            "sessions": n,
            "shared_mib": m[0].map(|v| v.0), "copy_mib": m[1].map(|v| v.0), "naive_mib": m[2].map(|v| v.0),
            "shared_create_s": m[0].map(|v| v.1), "copy_create_s": m[1].map(|v| v.1), "naive_create_s": m[2].map(|v| v.1),
        })).collect::<Vec<_>>()},
        "extra": Value::Object(run.extra.clone()),
        "peer": peer_info,
    });
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")?;
    println!("wrote {}", json_path.display());
    let png_path = run.out_dir.join("bench.png");
    let chart = sam2_bench::root().join("tools/bench/bench_chart.py");
    match Command::new(&run.python)
        .arg(&chart)
        .arg(&json_path)
        .arg(&png_path)
        .env_remove("LD_PRELOAD")
        .status()
    {
        Ok(s) if s.success() => println!("wrote {}", png_path.display()),
        Ok(s) => eprintln!("[bench] the chart failed ({s})"),
        Err(e) => eprintln!("[bench] cannot run {} for the chart: {e}", run.python),
    }
    Ok(())
}
