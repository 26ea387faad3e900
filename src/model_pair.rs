//! Finding an encoder/decoder pair by file name, for the three ways exports are named:
//!
//! | naming | encoder | decoder |
//! |---|---|---|
//! | samexporter | `NAME.encoder.onnx` | `NAME.decoder.onnx` |
//! | ONNX Runtime's SAM2 tools | `NAME_image_encoder.onnx` | `NAME_image_decoder_multi.onnx`, else `NAME_image_decoder.onnx` |
//! | this project's generator | `NAME_encoder.onnx` | `NAME_decoder.onnx` |
//!
//! Where ONNX Runtime's tools wrote both decoders, the `_multi` one (three candidate masks) is
//! taken: it serves single-mask predicts (the best candidate by predicted IoU) and multimask
//! ones, while the other returns one mask only.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// How a pair's files are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ModelNaming {
    SamExporter,
    OnnxRuntime,
    Generator,
}

impl ModelNaming {
    pub fn name(self) -> &'static str {
        match self {
            ModelNaming::SamExporter => "samexporter",
            ModelNaming::OnnxRuntime => "ONNX Runtime's tools",
            ModelNaming::Generator => "sam2's generator",
        }
    }
}

/// An encoder and the decoder that goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPair {
    /// The common part of the two file names (`sam2.1_hiera_tiny`, `tiny_a`).
    pub name: String,
    pub naming: ModelNaming,
    pub encoder: PathBuf,
    pub decoder: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Role {
    Encoder,
    Decoder,
    /// ONNX Runtime's three-mask decoder, preferred over its one-mask decoder.
    DecoderMulti,
}

/// What a file name says: naming, role and model name. The suffixes are tried longest first,
/// so `x_image_encoder.onnx` is ONNX Runtime's `x`, not the generator's `x_image`.
fn parse(file_name: &str) -> Option<(ModelNaming, Role, &str)> {
    const SUFFIXES: [(&str, ModelNaming, Role); 7] = [
        (".encoder.onnx", ModelNaming::SamExporter, Role::Encoder),
        (".decoder.onnx", ModelNaming::SamExporter, Role::Decoder),
        (
            "_image_encoder.onnx",
            ModelNaming::OnnxRuntime,
            Role::Encoder,
        ),
        (
            "_image_decoder_multi.onnx",
            ModelNaming::OnnxRuntime,
            Role::DecoderMulti,
        ),
        (
            "_image_decoder.onnx",
            ModelNaming::OnnxRuntime,
            Role::Decoder,
        ),
        ("_encoder.onnx", ModelNaming::Generator, Role::Encoder),
        ("_decoder.onnx", ModelNaming::Generator, Role::Decoder),
    ];
    SUFFIXES.iter().find_map(|&(suffix, naming, role)| {
        let name = file_name.strip_suffix(suffix)?;
        (!name.is_empty()).then_some((naming, role, name))
    })
}

/// Every pair in a directory, sorted by naming and name, and the `.onnx` files that are in none.
fn pairs_in(dir: &Path) -> Result<(Vec<ModelPair>, Vec<String>)> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
    let mut files: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
        if let Some(name) = entry.file_name().to_str() {
            if name.ends_with(".onnx") && entry.path().is_file() {
                files.push(name.to_string());
            }
        }
    }
    files.sort();
    // Every file by what its name says, so that each encoder finds its decoder in one lookup
    // (a directory of 20,000 files took 11-22 s when each encoder scanned the whole list).
    let mut by_role: std::collections::HashMap<(ModelNaming, Role, &str), &String> =
        std::collections::HashMap::with_capacity(files.len());
    for file in &files {
        if let Some(key) = parse(file) {
            // Sorted, so the first of two names that parse the same (impossible today) wins.
            by_role.entry(key).or_insert(file);
        }
    }
    let mut pairs = Vec::new();
    let mut used = std::collections::HashSet::new();
    for file in &files {
        let Some((naming, Role::Encoder, name)) = parse(file) else {
            continue;
        };
        let decoder_of = |role: Role| by_role.get(&(naming, role, name)).map(|f| (*f).clone());
        let Some(decoder) = decoder_of(Role::DecoderMulti).or_else(|| decoder_of(Role::Decoder))
        else {
            continue;
        };
        used.insert(file.clone());
        used.insert(decoder.clone());
        pairs.push(ModelPair {
            name: name.to_string(),
            naming,
            encoder: dir.join(file),
            decoder: dir.join(decoder),
        });
    }
    pairs.sort_by(|a, b| (a.naming, &a.name).cmp(&(b.naming, &b.name)));
    let unpaired = files.into_iter().filter(|f| !used.contains(f)).collect();
    Ok((pairs, unpaired))
}

/// How many names an error message lists before it says how many more there are: a directory
/// of 20,000 models must not give a message of a megabyte.
pub(crate) const LISTED_AT_MOST: usize = 20;

/// `items` joined with ", ", at most [`LISTED_AT_MOST`] of them, then "and K more".
fn capped(items: impl ExactSizeIterator<Item = String>) -> String {
    let total = items.len();
    let mut text = items.take(LISTED_AT_MOST).collect::<Vec<_>>().join(", ");
    if total > LISTED_AT_MOST {
        text.push_str(&format!(" and {} more", total - LISTED_AT_MOST));
    }
    text
}

fn list(pairs: &[&ModelPair]) -> String {
    capped(pairs.iter().map(|p| {
        format!(
            "{} ({}: {})",
            p.name,
            p.naming.name(),
            p.encoder.file_name().unwrap_or_default().to_string_lossy()
        )
    }))
}

const NAMINGS: &str = "NAME.encoder.onnx + NAME.decoder.onnx (samexporter), \
    NAME_image_encoder.onnx + NAME_image_decoder[_multi].onnx (ONNX Runtime's tools), \
    NAME_encoder.onnx + NAME_decoder.onnx (sam2's generator)";

/// Finds one encoder/decoder pair from `path`, which is one of:
/// - a directory holding exactly one pair;
/// - `DIR/NAME`: the pair called NAME in DIR (`models/tiny_a`, `exports/sam2.1_hiera_tiny`);
/// - an encoder or decoder file: the pair it belongs to.
///
/// No pair, or more than one, is [`Error::Model`] with a message listing what was found.
pub fn find_model_pair(path: impl AsRef<Path>) -> Result<ModelPair> {
    let path = path.as_ref();
    if path.is_dir() {
        let (pairs, unpaired) = pairs_in(path)?;
        return match pairs.len() {
            1 => Ok(pairs.into_iter().next().unwrap_or_else(|| unreachable!())),
            0 => Err(Error::model(
                path,
                format!(
                    "holds no SAM2 encoder/decoder pair (looked for {NAMINGS}){}",
                    if unpaired.is_empty() {
                        String::new()
                    } else {
                        format!("; unpaired .onnx files: {}", capped(unpaired.into_iter()))
                    }
                ),
            )),
            n => Err(Error::model(
                path,
                format!(
                    "holds {n} encoder/decoder pairs: {}; choose one with DIR/NAME or the path of \
                     its encoder",
                    list(&pairs.iter().collect::<Vec<_>>())
                ),
            )),
        };
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Some(file_name) = path.file_name().and_then(|n| n.to_str()) else {
        return Err(Error::model(
            path,
            "is not a directory, a model name or a model file",
        ));
    };
    if !dir.is_dir() {
        return Err(Error::model(
            path,
            format!("{} is not a directory", dir.display()),
        ));
    }
    let (pairs, _) = pairs_in(dir)?;
    let matching: Vec<&ModelPair> = match parse(file_name) {
        Some((naming, _, name)) if path.is_file() => pairs
            .iter()
            .filter(|p| p.naming == naming && p.name == name)
            .collect(),
        _ => pairs.iter().filter(|p| p.name == file_name).collect(),
    };
    match matching.len() {
        1 => Ok(matching[0].clone()),
        0 => Err(Error::model(
            path,
            format!(
                "no encoder/decoder pair of that name in {} (looked for {NAMINGS}); pairs there: {}",
                dir.display(),
                if pairs.is_empty() {
                    "none".to_string()
                } else {
                    list(&pairs.iter().collect::<Vec<_>>())
                }
            ),
        )),
        n => Err(Error::model(
            path,
            format!(
                "names {n} pairs: {}; give the path of the encoder you mean",
                list(&matching)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[&str]) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sam2-pairs-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for f in files {
            std::fs::write(dir.join(f), b"").unwrap();
        }
        dir
    }

    fn file(p: &Path) -> &str {
        p.file_name().unwrap().to_str().unwrap()
    }

    #[test]
    fn one_pair_of_each_naming_is_found_in_its_directory() {
        for (files, enc, dec) in [
            (
                &["m.encoder.onnx", "m.decoder.onnx", "notes.txt"][..],
                "m.encoder.onnx",
                "m.decoder.onnx",
            ),
            (
                &[
                    "s_image_encoder.onnx",
                    "s_image_decoder.onnx",
                    "s_image_decoder_multi.onnx",
                ],
                "s_image_encoder.onnx",
                "s_image_decoder_multi.onnx",
            ),
            (
                &["s_image_encoder.onnx", "s_image_decoder.onnx"],
                "s_image_encoder.onnx",
                "s_image_decoder.onnx",
            ),
            (
                &[
                    "tiny_a_encoder.onnx",
                    "tiny_a_decoder.onnx",
                    "faulty_encoder.onnx",
                ],
                "tiny_a_encoder.onnx",
                "tiny_a_decoder.onnx",
            ),
        ] {
            let dir = dir_with(files);
            let pair = find_model_pair(&dir).unwrap();
            assert_eq!((file(&pair.encoder), file(&pair.decoder)), (enc, dec));
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn several_pairs_need_a_name_and_the_errors_list_the_candidates() {
        let dir = dir_with(&[
            "sam2.1_hiera_tiny.encoder.onnx",
            "sam2.1_hiera_tiny.decoder.onnx",
            "sam2.1_hiera_tiny_image_encoder.onnx",
            "sam2.1_hiera_tiny_image_decoder.onnx",
            "tiny_a_encoder.onnx",
            "tiny_a_decoder.onnx",
            "tiny_a_fp16_encoder.onnx",
            "tiny_a_fp16_decoder.onnx",
        ]);
        let e = find_model_pair(&dir).unwrap_err().to_string();
        assert!(e.contains("holds 4 encoder/decoder pairs"), "{e}");
        assert!(e.contains("tiny_a_fp16 (sam2's generator"), "{e}");
        let p = find_model_pair(dir.join("tiny_a")).unwrap();
        assert_eq!(file(&p.decoder), "tiny_a_decoder.onnx");
        let e = find_model_pair(dir.join("sam2.1_hiera_tiny"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("names 2 pairs"), "{e}");
        let p = find_model_pair(dir.join("sam2.1_hiera_tiny_image_encoder.onnx")).unwrap();
        assert_eq!(p.naming, ModelNaming::OnnxRuntime);
        assert_eq!(file(&p.decoder), "sam2.1_hiera_tiny_image_decoder.onnx");
        let p = find_model_pair(dir.join("sam2.1_hiera_tiny.decoder.onnx")).unwrap();
        assert_eq!(file(&p.encoder), "sam2.1_hiera_tiny.encoder.onnx");
        let e = find_model_pair(dir.join("nope")).unwrap_err().to_string();
        assert!(e.contains("no encoder/decoder pair of that name"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
        let empty = dir_with(&["lonely_encoder.onnx"]);
        let e = find_model_pair(&empty).unwrap_err();
        assert!(matches!(e, Error::Model { .. }));
        assert!(
            e.to_string()
                .contains("unpaired .onnx files: lonely_encoder.onnx"),
            "{e}"
        );
        std::fs::remove_dir_all(empty).unwrap();
    }
}
