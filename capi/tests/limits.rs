//! Requests sized by input never abort the host through the C ABI: the calls sized by a crafted
//! embedding are `SAM2_ERR_OUT_OF_MEMORY`, never an abort. (The core's limits are in the core's
//! `tests/it/limits.rs`.)

#[path = "../../tests/common/mod.rs"]
mod common;

use common::*;
use sam2::{ImageView, PixelFormat};

/// An embedding file of the shapes image that claims a `side × side` image, its metadata checksum
/// recomputed (a CRC is not a signature: anyone can write such a file).
fn crafted_embedding(side: u32, path: &std::path::Path) {
    let (encoder, _) = open_pair("tiny_a");
    let img = read_pnm(&testdata("shapes.ppm"));
    let view = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap();
    let embedding = encoder.encode(&view).unwrap();
    sam2::embedding_file::save(&embedding, path).unwrap();
    let good = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&good[8..8 + n]).unwrap();
    let meta = header["__metadata__"].as_object_mut().unwrap();
    meta.insert("image_width".into(), side.to_string().into());
    meta.insert("image_height".into(), side.to_string().into());
    let text = sam2::embedding_file::metadata_text(|k| meta[k].as_str().unwrap().to_string());
    meta.insert(
        "metadata_crc32".into(),
        format!("{:08x}", crc32fast::hash(text.as_bytes())).into(),
    );
    let mut json = serde_json::to_vec(&header).unwrap();
    while json.len() % 8 != 0 {
        json.push(b' ');
    }
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&json);
    out.extend_from_slice(&good[8 + n..]);
    std::fs::write(path, out).unwrap();
}

const OOM_CHILD: &str = "SAM2_OOM_CHILD_EMBEDDING";

/// Kilobytes of address space this process uses now (`VmSize`).
fn address_space_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The child of the test below: loads the crafted embedding through the C ABI, caps its address
/// space 400 MiB above what it uses, and prints one line per call, `name status`.
#[test]
fn oom_child() {
    use sam2_capi::everything::*;
    use sam2_capi::mask_formats::*;
    use sam2_capi::masks::*;
    use sam2_capi::predictor::*;
    use sam2_capi::sam2_status;
    let Some(file) = std::env::var_os(OOM_CHILD) else {
        return;
    };
    init_runtime();
    let c = |p: &std::path::Path| std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let (mut predictor, mut embedding) = (std::ptr::null_mut(), std::ptr::null_mut());
    let decoder = c(&model("tiny_a_decoder.onnx"));
    assert_eq!(
        sam2_predictor_new(
            std::ptr::null(),
            decoder.as_ptr(),
            std::ptr::null(),
            &mut predictor
        ),
        sam2_status::SAM2_OK
    );
    let file = c(std::path::Path::new(&file));
    assert_eq!(
        sam2_capi::embedding::sam2_embedding_load(file.as_ptr(), predictor, 0, &mut embedding),
        sam2_status::SAM2_OK
    );
    let report = |name: &str, status: sam2_status| {
        let mut buf = vec![0 as std::ffi::c_char; 512];
        let mut needed = 0;
        sam2_capi::runtime::sam2_last_error_message(buf.as_mut_ptr(), buf.len(), &mut needed);
        // SAFETY: NUL-terminated by sam2_last_error_message.
        let msg = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
        println!(
            "call\t{name}\t{status:?}\t{}",
            msg.replace(['\n', '\t'], " ")
        );
    };
    let cap = (address_space_kib() + 400 * 1024) * 1024;
    let limit = libc::rlimit {
        rlim_cur: cap,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a plain system call on a struct of ours.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);

    let point = sam2_point {
        x: 8192.0,
        y: 8192.0,
        label: 1,
    };
    let prompt = sam2_prompt {
        points: &point,
        point_count: 1,
        has_box: 0,
        r#box: [0.0; 4],
        mask_input: std::ptr::null(),
        mask_input_len: 0,
    };
    let mut options = sam2_predict_options::default();
    let mut masks = std::ptr::null_mut();
    // Three 256 MiB masks cannot be had: refused (this worked before the fix).
    options.multimask = 1;
    let s = sam2_predict(predictor, embedding, &prompt, 1, &options, &mut masks);
    report("sam2_predict multimask", s);
    // One can; the polygons of it need two more planes of its size.
    options.multimask = 0;
    let s = sam2_predict(predictor, embedding, &prompt, 1, &options, &mut masks);
    report("sam2_predict", s);
    assert_eq!(s, sam2_status::SAM2_OK);
    let (mut bbox, mut area) = ([0u32; 4], 0u64);
    sam2_masks_box(masks, 0, bbox.as_mut_ptr(), &mut area);
    println!("mask area {area}");
    let (mut points, mut rings) = (0usize, 0usize);
    let s = sam2_masks_polygons(
        masks,
        0,
        0.0,
        std::ptr::null_mut(),
        0,
        std::ptr::null_mut(),
        0,
        &mut points,
        &mut rings,
    );
    report("sam2_masks_polygons", s);
    // With the mask still held, a 256 MiB plane per worker thread cannot be had either.
    let everything_options = sam2_everything_options {
        points_per_side: 1,
        pred_iou_thresh: 0.0,
        stability_score_thresh: 0.0,
        ..Default::default()
    };
    let mut result = std::ptr::null_mut();
    let s =
        sam2_segment_everything_embedding(predictor, embedding, &everything_options, &mut result);
    report("sam2_segment_everything_embedding", s);
    sam2_masks_free(masks);
    sam2_capi::embedding::sam2_embedding_free(embedding);
    sam2_predictor_free(predictor);
    println!("child done");
}

/// With the address space capped 400 MiB above use, the calls sized by a crafted 16384×16384
/// embedding return SAM2_ERR_OUT_OF_MEMORY naming what could not be had; the polygons and segment
/// everything used to abort the process (SIGABRT) where sam2_predict already refused.
#[test]
fn calls_sized_by_a_crafted_embedding_are_out_of_memory_never_an_abort() {
    let dir = std::env::temp_dir().join(format!("sam2-oom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.sam2");
    crafted_embedding(16384, &path);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "oom_child", "--nocapture", "--test-threads=1"])
        .env(OOM_CHILD, &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("child done"),
        "the child died ({:?}): {}\n{}",
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let status_of = |name: &str| {
        stdout
            .lines()
            .find_map(|l| {
                // The harness may print "test oom_child ... " before the first line.
                let mut f = l[l.find("call\t")?..].split('\t');
                (f.next() == Some("call") && f.next() == Some(name)).then(|| {
                    (
                        f.next().unwrap().to_string(),
                        f.next().unwrap_or("").to_string(),
                    )
                })
            })
            .unwrap_or_else(|| panic!("no line for {name}: {stdout}"))
    };
    for name in [
        "sam2_predict multimask",
        "sam2_masks_polygons",
        "sam2_segment_everything_embedding",
    ] {
        let (status, message) = status_of(name);
        assert_eq!(status, "SAM2_ERR_OUT_OF_MEMORY", "{name}: {message}");
        assert!(
            message.contains("not enough memory for"),
            "{name}: {message}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
