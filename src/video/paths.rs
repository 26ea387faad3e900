//! Where the four modules of a video model are: the contract's file names in a directory, or the
//! set a name picks out of several.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where the four modules of a video model are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoModelPaths {
    pub image_encoder: PathBuf,
    pub memory_attention: PathBuf,
    pub image_decoder: PathBuf,
    pub memory_encoder: PathBuf,
}

impl VideoModelPaths {
    /// The four files in `dir` under the contract's names, each after `prefix` (empty for an
    /// export's own names; the generated test models use `track_`).
    pub fn in_dir(dir: impl AsRef<Path>, prefix: &str) -> Self {
        let dir = dir.as_ref();
        let file = |name: &str| dir.join(format!("{prefix}{name}.onnx"));
        VideoModelPaths {
            image_encoder: file("image_encoder"),
            memory_attention: file("memory_attention"),
            image_decoder: file("image_decoder"),
            memory_encoder: file("memory_encoder"),
        }
    }

    /// The video model at `path`: a directory holding one set of the four modules (each under
    /// the contract's name after a common prefix, none for an export's own names), or
    /// `DIR/NAME`, the set whose names start with `NAME` (`NAME` itself, or `NAME_` / `NAME.` /
    /// `NAME-` before the module's name). Several sets in a directory, or none, is a model error
    /// naming what was found.
    pub fn find(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let (dir, name) = if path.is_dir() {
            (path.to_path_buf(), None)
        } else {
            let dir = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                return Err(Error::model(path, "is not a directory or a model name"));
            };
            if !dir.is_dir() {
                return Err(Error::model(
                    path,
                    format!("{} is not a directory", dir.display()),
                ));
            }
            (dir, Some(name.to_string()))
        };
        let entries =
            std::fs::read_dir(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        let mut files = std::collections::BTreeSet::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(dir.display().to_string(), e))?;
            if let Some(n) = entry.file_name().to_str() {
                files.insert(n.to_string());
            }
        }
        const MODULES: [&str; 4] = [
            "image_encoder",
            "memory_attention",
            "image_decoder",
            "memory_encoder",
        ];
        // Every prefix under which all four modules exist.
        let mut sets: Vec<String> = files
            .iter()
            .filter_map(|f| f.strip_suffix("memory_attention.onnx"))
            .filter(|prefix| {
                MODULES
                    .iter()
                    .all(|m| files.contains(&format!("{prefix}{m}.onnx")))
            })
            .map(str::to_string)
            .collect();
        if let Some(name) = &name {
            sets.retain(|prefix| {
                prefix == name
                    || prefix
                        .strip_prefix(name.as_str())
                        .is_some_and(|rest| matches!(rest, "_" | "." | "-"))
            });
        }
        let shown = |prefix: &str| {
            if prefix.is_empty() {
                "the contract's own names (image_encoder.onnx, ...)".to_string()
            } else {
                format!("{prefix}image_encoder.onnx, ...")
            }
        };
        match sets.len() {
            1 => Ok(Self::in_dir(&dir, &sets[0])),
            0 => Err(Error::model(
                path,
                format!(
                    "holds no video model: the four modules {} (after a common prefix) were not \
                     all found{}",
                    MODULES.map(|m| format!("{m}.onnx")).join(", "),
                    if name.is_some() {
                        " under that name"
                    } else {
                        ""
                    }
                ),
            )),
            n => Err(Error::model(
                path,
                format!(
                    "holds {n} video models: {}; choose one with DIR/NAME",
                    sets.iter().map(|p| shown(p)).collect::<Vec<_>>().join("; ")
                ),
            )),
        }
    }
}
