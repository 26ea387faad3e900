//! `sam2 encode`: an image's embedding, saved to a file.

use crate::args;
use crate::common::{
    create_parent, encode_picture, init_runtime, load_picture, model_files, output_prefix,
    with_suffix,
};
use crate::failure::{exit, Failure};

pub(crate) fn run(e: args::Encode) -> Result<(), Failure> {
    let (encoder_path, _) = model_files(&e.models)?;
    let picture = load_picture(&e.image, e.max_pixels)?;
    init_runtime(e.onnxruntime.as_deref())?;
    let (_, embedding) = encode_picture(&encoder_path, e.device, &picture)?;
    let out = output_prefix(&e.out, &e.image);
    let out = if out == e.out {
        out
    } else {
        with_suffix(&out, ".sam2emb")
    };
    create_parent(&out)?;
    sam2::embedding_file::save(&embedding, &out).map_err(|err| Failure::of(err, exit::OUTPUT))?;
    eprintln!("sam2: wrote {}", out.display());
    Ok(())
}
