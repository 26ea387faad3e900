//! `sam2 encode`: an image's embedding, saved to a file.

use std::path::{Path, PathBuf};

use crate::common::{
    create_parent, encode, encode_picture, init_runtime, load_encoder, load_picture, model_files,
    output_prefix, with_suffix,
};
use crate::failure::{exit, Failure};
use crate::{args, batch};

pub(crate) fn run(e: args::Encode) -> Result<(), Failure> {
    if let Some(source) = batch::image_source(&e.image) {
        return run_batch(e, source);
    }
    if let Some(shard) = e.shard {
        return Err(batch::shard_needs_a_batch(shard));
    }
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
    save(&embedding, &out)?;
    eprintln!("sam2: wrote {}", out.display());
    Ok(())
}

fn save(embedding: &sam2::Embedding, out: &Path) -> Result<(), Failure> {
    create_parent(out)?;
    sam2::embedding_file::save(embedding, out).map_err(|err| Failure::of(err, exit::OUTPUT))
}

/// Every image of a folder or a list file, to `-o DIR/<name>.sam2emb`: the library saves an
/// embedding under a temporary name and renames it when whole, so an image whose file is there
/// is done.
fn run_batch(e: args::Encode, source: batch::Source) -> Result<(), Failure> {
    let (encoder_path, _) = model_files(&e.models)?;
    let plan = batch::plan(&source, &e.out, e.shard)?;
    let file =
        |input: &batch::Input| -> PathBuf { with_suffix(&e.out.join(&input.name), ".sam2emb") };
    batch::run(
        plan,
        "images",
        |input| batch::exists(&file(input)),
        || {
            init_runtime(e.onnxruntime.as_deref())?;
            load_encoder(&encoder_path, e.device)
        },
        |encoder, input| {
            let picture = load_picture(&input.path, e.max_pixels)?;
            save(&encode(encoder, &picture)?, &file(input))
        },
        || None,
    )
}
