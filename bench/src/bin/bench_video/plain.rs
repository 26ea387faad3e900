//! ONNX Runtime alone on the four modules: plain sessions run one after the other, each output fed
//! to the next as is, on the inputs the tracker has at steady state, assembled from the outputs of
//! its own earlier frames; and the frame's input tensor, made with the library's own resize so that
//! both sides encode the same tensor.

use super::*;

/// Writes the encoder's input for `rgb` into `image` (`[1, 3, 1024, 1024]`): the library's own
/// resize and normalisation (PIL's bicubic, as `SAM2VideoPredictor` loads frames), so both sides
/// encode the same tensor.
pub(crate) fn model_input(
    rgb: &[u8],
    width: usize,
    height: usize,
    image: &mut DynValue,
) -> Res<()> {
    let view = ImageView::packed(rgb, width, height, PixelFormat::Rgb)?;
    let out = image.try_extract_tensor_mut::<f32>()?.1;
    sam2::test_support::preprocess_video_frame_into(&view, SIDE, out);
    Ok(())
}

pub(crate) fn new_image() -> Res<DynValue> {
    f32_tensor(
        vec![1, 3, SIDE as i64, SIDE as i64],
        vec![0.0; 3 * SIDE * SIDE],
    )
}

/// ONNX Runtime alone: the four modules in plain sessions, and the memory of the one object it
/// tracks (kept outside the timed region).
pub(crate) struct Plain {
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
pub(crate) struct Prepared {
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
    pub(crate) fn new(paths: &VideoModelPaths) -> Res<Plain> {
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
    pub(crate) fn prompt(
        &mut self,
        image: &DynValue,
        click: (f32, f32),
        size: (usize, usize),
    ) -> Res<()> {
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
    pub(crate) fn prepare(&self, t: u32) -> Res<Prepared> {
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
    pub(crate) fn concat(&self, p: &mut Prepared) -> Res<()> {
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
    pub(crate) fn step(&mut self, image: &DynValue, p: &Prepared) -> Res<(DynValue, DynValue)> {
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

    pub(crate) fn keep(&mut self, memory: (DynValue, DynValue)) {
        self.recent.push_back(memory);
        if self.recent.len() > MAX_POINTERS {
            self.recent.pop_front();
        }
    }
}
