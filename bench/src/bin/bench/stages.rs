//! The pipeline's stages, each timed against its floor (ONNX Runtime alone, or the memory's
//! bandwidth) and, where it runs them, the peer: preprocess, encode, predict and postprocess, then
//! predicts from one and two threads at once, and encode and predict again at ONNX Runtime's basic
//! level of graph optimisation.

use super::*;

/// [library, the floor on one thread, the floor on every thread, the peer from RGB, the peer from
/// BGR (samexporter exactly)], with the faster floor.
pub(crate) struct Preprocessed {
    pub(crate) stats: Vec<Option<Stat>>,
    pub(crate) floor: Option<Stat>,
    pub(crate) floor_threads: usize,
    /// The library's tensor, which the encode section encodes again as a prepared tensor.
    pub(crate) out: Vec<f32>,
    /// The largest difference between the peer's tensor and the library's.
    pub(crate) peer_diff: Option<f64>,
}

/// Preprocessing, 1920×1080 RGB to the 1024² NCHW tensor.
pub(crate) fn preprocess(run: &mut Run) -> Res<Preprocessed> {
    let mut pre_out = vec![0.0f32; 3 * SIZE * SIZE];
    let mut floor_out = vec![0.0f32; 3 * SIZE * SIZE];
    let pre = {
        let mut lib =
            || timed(|| sam2::test_support::preprocess_into(&run.view, SIZE, &mut pre_out));
        let mut floor_out2 = floor_out.clone();
        let mut floor1 = || timed(|| bandwidth_floor(run.rgb, &mut floor_out, 1));
        let mut floor_n = || timed(|| bandwidth_floor(run.rgb, &mut floor_out2, run.threads));
        let mut p_rgb = || run.peer_ms("pre");
        let mut p_bgr = || run.peer_ms("pre_bgr");
        let mut fs: Vec<&mut dyn FnMut() -> f64> = vec![&mut lib, &mut floor1, &mut floor_n];
        if run.has_peer {
            fs.push(&mut p_rgb);
            fs.push(&mut p_bgr);
        }
        let mut st = interleaved(SETTLE_CV, 3, run.plan.pre_runs, &mut fs);
        st.resize(5, None);
        st
    };
    // The floor is the faster of one thread and all threads.
    let (floor_pre, floor_threads) = match (&pre[1], &pre[2]) {
        (Some(a), Some(b)) if b.median < a.median => (pre[2].clone(), run.threads),
        _ => (pre[1].clone(), 1),
    };
    sam2::test_support::preprocess_into(&run.view, SIZE, &mut pre_out);
    let pre_path = run.out_dir.join("bench_pre_lib.f32");
    write_f32(&pre_path, &pre_out)?;
    let pre_diff = run
        .peer_call(&format!("check_pre {}", pre_path.display()))
        .and_then(|v| v.get("max_abs_diff").and_then(Value::as_f64));
    run.extra.insert(
        "preprocess_floor".into(),
        json!({"threads_used": floor_threads, "one_thread": stat_json(&pre[1]),
               "all_threads": stat_json(&pre[2]),
               "bytes_read": run.rgb.len(), "bytes_written": pre_out.len() * 4}),
    );
    drop(floor_out);
    Ok(Preprocessed {
        stats: pre,
        floor: floor_pre,
        floor_threads,
        out: pre_out,
        peer_diff: pre_diff,
    })
}

/// [library, library on a prepared tensor, ONNX Runtime alone, peer, the int8 variant, EdgeTAM],
/// and what the later sections use: the encoder, the image's embedding and the prepared tensor.
pub(crate) struct Encoded {
    pub(crate) stats: Vec<Option<Stat>>,
    pub(crate) encoder: Encoder,
    pub(crate) embedding: Arc<Embedding>,
    pub(crate) embedding_bytes: usize,
    pub(crate) prepared: DynValue,
    /// Whether the peer encoded (it predicts only then).
    pub(crate) peer_ok: bool,
}

/// Encoding, pixels to embedding: the library end to end and on the prepared tensor, ONNX Runtime
/// alone on that tensor, the int8 variant and EdgeTAM's encoder where the set-up made them, and the
/// peer.
pub(crate) fn encode(run: &mut Run, pre_out: &[f32]) -> Res<Encoded> {
    let t = Instant::now();
    let encoder = Encoder::new(&run.encoder_path, &EncoderOptions::default())?;
    let enc_create_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let mut enc_plain = plain_session(&run.encoder_path, Optimization::All, None)?;
    let enc_plain_create_ms = t.elapsed().as_secs_f64() * 1e3;
    let prepared = Tensor::from_array(([1usize, 3, SIZE, SIZE], pre_out.to_vec()))?.into_dyn();
    // The int8 variant of the same encoder (sam2-variant, made by
    // tools/setup/setup-real.sh), against ONNX Runtime alone on the float32 file.
    let int8_encoder = match int8_variant(&run.encoder_path) {
        Some(path) => Some(Encoder::new(&path, &EncoderOptions::default())?),
        None => None,
    };
    // EdgeTAM's image encoder (sam2-export-edgetam, made by
    // tools/setup/setup-edgetam.sh) on the same image, against SAM2.1 tiny's in the library.
    let edgetam_encoder = match edgetam_encoder() {
        Some(path) => Some(Encoder::new(&path, &EncoderOptions::default())?),
        None => None,
    };
    let peer_enc_ok = run.has_peer && run.peer_call("init_encoder").is_some();
    eprintln!(
        "[bench]   library e2e, library on a prepared tensor, ONNX Runtime alone{}{}{} ({} + 1 warm-up each)",
        if int8_encoder.is_some() { ", the int8 variant" } else { "" },
        if edgetam_encoder.is_some() { ", EdgeTAM" } else { "" },
        if peer_enc_ok { ", peer" } else { "" },
        run.plan.enc_runs
    );
    let enc = {
        let mut lib = || timed(|| drop(black_box(encoder.encode(&run.view).expect("encode"))));
        let mut lib_prep = || {
            timed(|| {
                drop(black_box(
                    encoder
                        .encode_prepared(&prepared, W as u32, H as u32)
                        .expect("encode"),
                ))
            })
        };
        let mut floor = || {
            timed(|| {
                let out = enc_plain
                    .run(ort::inputs!["image" => &prepared])
                    .expect("encoder run");
                black_box(&out);
            })
        };
        let mut p = || run.peer_ms("encode");
        let mut int8 = || {
            let encoder = int8_encoder.as_ref().expect("an int8 variant");
            timed(|| drop(black_box(encoder.encode(&run.view).expect("encode int8"))))
        };
        let mut edgetam = || {
            let encoder = edgetam_encoder.as_ref().expect("EdgeTAM's encoder");
            timed(|| {
                drop(black_box(
                    encoder.encode(&run.view).expect("encode EdgeTAM"),
                ))
            })
        };
        let mut fs: Vec<&mut dyn FnMut() -> f64> = vec![&mut lib, &mut lib_prep, &mut floor];
        if int8_encoder.is_some() {
            fs.push(&mut int8);
        }
        if edgetam_encoder.is_some() {
            fs.push(&mut edgetam);
        }
        if peer_enc_ok {
            fs.push(&mut p);
        }
        let mut st = interleaved(SETTLE_ORT, 1, run.plan.enc_runs, &mut fs);
        // [library, prepared, ONNX Runtime alone, peer, int8 variant, EdgeTAM]
        let int8_stat = if int8_encoder.is_some() {
            st.remove(3)
        } else {
            None
        };
        let edgetam_stat = if edgetam_encoder.is_some() {
            st.remove(3)
        } else {
            None
        };
        st.resize(4, None);
        st.push(int8_stat);
        st.push(edgetam_stat);
        st
    };
    drop(int8_encoder);
    drop(edgetam_encoder);
    let embedding = Arc::new(encoder.encode(&run.view)?);
    let emb_bytes: usize = embedding.tensors().iter().map(|t| t.byte_len()).sum();
    run.extra.insert(
        "session_create_ms".into(),
        json!({"library_encoder": enc_create_ms, "plain_encoder": enc_plain_create_ms}),
    );
    drop(enc_plain);
    Ok(Encoded {
        stats: enc,
        encoder,
        embedding,
        embedding_bytes: emb_bytes,
        prepared,
        peer_ok: peer_enc_ok,
    })
}

/// [library, ONNX Runtime alone, ONNX Runtime alone with the library's post-processing, peer], and
/// what the later sections use: the predictor, the plain decoder session and its feed, the prompt,
/// the library's prediction and its low-resolution logits (written for the peer).
pub(crate) struct Predicted {
    pub(crate) stats: Vec<Option<Stat>>,
    pub(crate) predictor: Predictor,
    pub(crate) plain: RefCell<Session>,
    pub(crate) feed: DecoderFeed,
    pub(crate) prompts: Vec<Prompt>,
    pub(crate) prediction: Prediction,
    pub(crate) logits: Vec<f32>,
    pub(crate) logits_path: PathBuf,
}

/// Predicting, one click to the 1920×1080 mask, its score and box.
pub(crate) fn predict(
    run: &mut Run,
    encoder: &Encoder,
    embedding: &Embedding,
    peer_enc_ok: bool,
) -> Res<Predicted> {
    // Default options: a pool of one session per core, the first on every core.
    let predictor = Predictor::new(
        &run.decoder_path,
        &PredictorOptions {
            encoder_fingerprint: Some(encoder.fingerprint()),
            ..Default::default()
        },
    )?;
    let dec_plain = RefCell::new(plain_session(&run.decoder_path, Optimization::All, None)?);
    let feed = DecoderFeed::new(embedding)?;
    let prompts = click_prompt();
    let peer_dec_ok = peer_enc_ok && run.peer_call("init_decoder").is_some();
    let pred = {
        let mut lib = || {
            timed(|| {
                black_box(
                    predictor
                        .predict(embedding, &prompts, PredictOptions::default())
                        .expect("predict"),
                );
            })
        };
        let mut floor = || timed(|| feed.run(&mut dec_plain.borrow_mut()));
        let mut post_mask = vec![0u8; W * H];
        let mut floor_post =
            || timed(|| feed.run_post(&mut dec_plain.borrow_mut(), &mut post_mask));
        let mut p = || run.peer_ms("predict");
        let mut fs: Vec<&mut dyn FnMut() -> f64> = vec![&mut lib, &mut floor, &mut floor_post];
        if peer_dec_ok {
            fs.push(&mut p);
        }
        let mut st = interleaved(SETTLE_ORT, 3, run.plan.pred_runs, &mut fs);
        st.resize(4, None);
        st
    };
    let prediction = predictor.predict(embedding, &prompts, PredictOptions::default())?;
    run.extra.insert(
        "library_prediction".into(),
        json!({"score": prediction.scores[0], "box": prediction.boxes[0], "area": prediction.areas[0],
               "candidate": prediction.candidate_index[0]}),
    );
    let logits = prediction.low_res_logits(0).to_vec();
    let logits_path = run.out_dir.join("bench_logits.f32");
    write_f32(&logits_path, &logits)?;
    Ok(Predicted {
        stats: pred,
        predictor,
        plain: dec_plain,
        feed,
        prompts,
        prediction,
        logits,
        logits_path,
    })
}

/// [library, the floor (one write of the mask), box and area, the floor of box and area (one read
/// of the mask), peer], and how many of the peer's mask pixels differ from the library's.
pub(crate) struct Postprocessed {
    pub(crate) stats: Vec<Option<Stat>>,
    pub(crate) peer_diff: Option<u64>,
}

/// Post-processing, the 256² logits to the 1920×1080 mask, and its box and area.
pub(crate) fn postprocess(run: &Run, logits: &[f32], logits_path: &Path) -> Res<Postprocessed> {
    let mut mask = vec![0u8; W * H];
    sam2::test_support::upsample_threshold(logits, LOW_RES, LOW_RES, W, H, &mut mask);
    let mask_path = run.out_dir.join("bench_mask_lib.u8");
    std::fs::write(&mask_path, &mask)?;
    let post_diff = run
        .peer_call(&format!(
            "load_post {} {}",
            logits_path.display(),
            mask_path.display()
        ))
        .and_then(|v| v.get("differing").and_then(Value::as_u64));
    let mut mask_floor = vec![0u8; W * H];
    let mask_box = mask.clone();
    let post = {
        let mut lib = || {
            timed(|| {
                sam2::test_support::upsample_threshold(logits, LOW_RES, LOW_RES, W, H, &mut mask);
                black_box(&mask);
            })
        };
        let mut floor = || {
            timed(|| {
                mask_floor.fill(black_box(1));
                black_box(&mask_floor);
            })
        };
        let mut boxes = || {
            timed(|| {
                black_box(sam2::test_support::box_and_area(&mask_box, W));
            })
        };
        let mut scan = || {
            timed(|| {
                let mut acc = 0u64;
                for c in mask_box.chunks_exact(8) {
                    acc = acc.wrapping_add(u64::from_ne_bytes(c.try_into().unwrap()));
                }
                black_box(acc);
            })
        };
        let mut p = || run.peer_ms("post");
        let mut fs: Vec<&mut dyn FnMut() -> f64> =
            vec![&mut lib, &mut floor, &mut boxes, &mut scan];
        if post_diff.is_some() {
            fs.push(&mut p);
        }
        let mut st = interleaved(SETTLE_CV, 5, run.plan.post_runs, &mut fs);
        st.resize(5, None);
        st
    };
    Ok(Postprocessed {
        stats: post,
        peer_diff: post_diff,
    })
}

/// Predict throughput: 1 and 2 threads on one predictor (pool 2) and one embedding, against as many
/// plain sessions. Each entry: threads, the library's predicts per second, the floor's.
pub(crate) fn predict_throughput(
    run: &Run,
    encoder: &Encoder,
    embedding: &Embedding,
    prompts: &[Prompt],
    feed: &DecoderFeed,
) -> Res<Vec<(usize, Stat, Stat)>> {
    let pool2 = Predictor::new(
        &run.decoder_path,
        &PredictorOptions {
            encoder_fingerprint: Some(encoder.fingerprint()),
            pool_size: Some(2),
            ..Default::default()
        },
    )?;
    let plain_pool: Vec<Mutex<Session>> = (0..2)
        .map(|_| plain_session(&run.decoder_path, Optimization::All, Some(1)).map(Mutex::new))
        .collect::<Res<_>>()?;
    let lib_call = |_: usize| {
        black_box(
            pool2
                .predict(embedding, prompts, PredictOptions::default())
                .expect("predict"),
        );
    };
    let plain_call = |t: usize| {
        let mut s = plain_pool[t].lock().unwrap();
        feed.run(&mut s);
    };
    // The pool builds its one-thread sessions when predicts first run at once: a short window of
    // two threads first, so that the measured windows see the pool as a host does after its first
    // concurrent clicks.
    black_box(throughput(2, Duration::from_millis(100), &lib_call));
    let mut tput = Vec::new();
    for n in [1usize, 2] {
        // Alternate library and floor windows so that both see the same load.
        let (mut lib, mut floor) = (Vec::new(), Vec::new());
        for _ in 0..run.plan.tput_windows {
            lib.push(throughput(n, run.plan.tput_window, &lib_call));
            floor.push(throughput(n, run.plan.tput_window, &plain_call));
        }
        tput.push((n, stat(lib), stat(floor)));
    }
    drop(plain_pool);
    drop(pool2);
    Ok(tput)
}

/// Encode and predict at `Optimization::Basic`: [library, a plain session at ONNX Runtime's basic
/// level] each.
pub(crate) struct Basic {
    pub(crate) encode: Vec<Option<Stat>>,
    pub(crate) predict: Vec<Option<Stat>>,
}

/// `Optimization::Basic`: the library against a plain session at the same level.
pub(crate) fn optimization_basic(
    run: &Run,
    embedding: &Embedding,
    prompts: &[Prompt],
    feed: &DecoderFeed,
    prepared: &DynValue,
) -> Res<Basic> {
    let mut options = EncoderOptions::default();
    options.session.optimization = Optimization::Basic;
    let encoder_all = Encoder::new(&run.encoder_path, &options)?;
    let mut plain_all = plain_session(&run.encoder_path, Optimization::Basic, None)?;
    let enc_all = {
        let mut lib = || timed(|| drop(black_box(encoder_all.encode(&run.view).expect("encode"))));
        let mut floor = || {
            timed(|| {
                let out = plain_all
                    .run(ort::inputs!["image" => prepared])
                    .expect("encoder run");
                black_box(&out);
            })
        };
        interleaved(
            SETTLE_ORT,
            1,
            run.plan.enc_all_runs,
            &mut [&mut lib, &mut floor],
        )
    };
    drop(plain_all);
    let mut popts = PredictorOptions {
        encoder_fingerprint: Some(encoder_all.fingerprint()),
        ..Default::default()
    };
    popts.session.optimization = Optimization::Basic;
    let predictor_all = Predictor::new(&run.decoder_path, &popts)?;
    let mut dec_all = plain_session(&run.decoder_path, Optimization::Basic, None)?;
    let pred_all = {
        let mut lib = || {
            timed(|| {
                black_box(
                    predictor_all
                        .predict(embedding, prompts, PredictOptions::default())
                        .expect("predict"),
                );
            })
        };
        let mut floor = || timed(|| feed.run(&mut dec_all));
        interleaved(
            SETTLE_ORT,
            3,
            run.plan.pred_runs,
            &mut [&mut lib, &mut floor],
        )
    };
    Ok(Basic {
        encode: enc_all,
        predict: pred_all,
    })
}
