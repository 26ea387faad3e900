//! Requests sized by input never abort the host: a prediction larger than the documented limit is
//! refused before anything runs, with a message that says how large and what to do.

use crate::common;

use common::*;
use sam2::{
    Encoder, EncoderOptions, ImageView, PixelFormat, Point, PredictOptions, Predictor,
    PredictorOptions, Prompt,
};

/// An 8192×8192 image with 256 multimask prompts asks for 48 GiB of masks (the process used to
/// die allocating them, exit 134); it is an invalid argument naming the limit, and the same image
/// with one prompt predicts.
#[test]
fn a_prediction_beyond_the_result_limit_is_refused_not_an_abort() {
    init_runtime();
    let side = 8192;
    let pixels = vec![128u8; side * side * 3];
    let encoder = Encoder::new(model("tiny_a_encoder.onnx"), &EncoderOptions::default()).unwrap();
    let predictor =
        Predictor::new(model("tiny_a_decoder.onnx"), &PredictorOptions::default()).unwrap();
    let embedding = encoder
        .encode(&ImageView::packed(&pixels, side, side, PixelFormat::Rgb).unwrap())
        .unwrap();
    let click = |i: usize| Prompt {
        points: vec![Point {
            x: (i * 31 % side) as f32,
            y: (i * 17 % side) as f32,
            positive: true,
        }],
        ..Default::default()
    };
    let prompts: Vec<Prompt> = (0..256).map(click).collect();
    match predictor.predict(&embedding, &prompts, PredictOptions { multimask: true }) {
        Err(sam2::Error::InvalidArgument { name, reason }) => {
            assert_eq!(name, "prompts");
            assert!(
                reason.contains("48.0 GiB") && reason.contains("4 GiB"),
                "{reason}"
            );
        }
        other => panic!(
            "expected an invalid argument, got {:?}",
            other.map(|p| p.objects)
        ),
    }
    let one = predictor
        .predict(&embedding, &[click(1)], PredictOptions::default())
        .unwrap();
    assert_eq!((one.width, one.height, one.objects), (side, side, 1));
}

/// A model path that names a FIFO or a device is refused at once, never a hang.
#[test]
fn a_model_that_is_a_fifo_or_a_device_is_refused_at_once() {
    init_runtime();
    let dir = std::env::temp_dir().join(format!("sam2-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("model.onnx");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for path in [fifo.as_path(), std::path::Path::new("/dev/zero")] {
        let started = std::time::Instant::now();
        match Encoder::new(path, &EncoderOptions::default()) {
            Err(sam2::Error::Model { reason, .. }) => {
                assert!(reason.contains("not a regular file"), "{reason}")
            }
            other => panic!(
                "{}: expected a model error, got {:?}",
                path.display(),
                other.err()
            ),
        }
        assert!(started.elapsed().as_secs() < 5);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
