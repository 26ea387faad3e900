//! Embedding files: safetensors with sam2 metadata, written atomically, read defensively.
//!
//! Layout (safetensors): an 8-byte little-endian header length `n`, `n` bytes of JSON (padded
//! with spaces to a multiple of 8), then the three tensors' bytes back to back, little-endian, in
//! the canonical order. The JSON holds, per tensor, `dtype` (`F32`/`F16`), `shape` and
//! `data_offsets`, and a `__metadata__` map of strings:
//! `format` = `sam2-embedding`, `format_version` = `3`, `image_width`, `image_height`,
//! `encoder_fingerprint`, `encoder_family`, `encoder_precision` (`fp32`, `int8` or `fp16`: the
//! precision variant that made it), `payload_crc32` (CRC-32/IEEE of all tensor bytes, as
//! `zlib.crc32` computes it, 8 hex digits), `metadata_crc32` (the same CRC of the protected
//! metadata text, see [`metadata_text`]) and `writer` (informational, not protected). The tensor
//! entries need no checksum of their own: every one is checked against the SAM2 contract (names,
//! shapes, dtypes, offsets adding up to the file's size). Any safetensors reader (Python's
//! `safetensors`, or twenty lines of numpy) opens it.
//!
//! Versions 1 and 2, written by earlier releases, are still read: version 2 is the same without
//! `encoder_precision` (made before precision variants existed: float32), version 1 without
//! `metadata_crc32` too (its metadata is not covered by a checksum).

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use ort::memory::Allocator;
use ort::value::{DynTensor, TensorElementType};

use crate::embedding::{Embedding, EmbeddingTensor};
use crate::error::{Error, Result};
use crate::export::EncoderFamily;
use crate::files::{self, directory_of, sync_directory};
use crate::fingerprint::Fingerprint;
use crate::image::MAX_SIDE;
use crate::onnx::data_type::ort_element_size as element_size;
use crate::precision::Precision;

/// Value of `__metadata__.format`.
pub(crate) const FORMAT: &str = "sam2-embedding";
/// Version of the layout this library writes. 2 added `metadata_crc32`, 3 `encoder_precision`.
pub(crate) const FORMAT_VERSION: u32 = 3;
/// Versions this library reads.
pub(crate) const READABLE_VERSIONS: [u32; 3] = [1, 2, 3];
/// The metadata fields `metadata_crc32` covers in the version this library writes, in the order
/// [`metadata_text`] lists them.
pub(crate) const PROTECTED_METADATA: [&str; 8] = [
    "format",
    "format_version",
    "image_width",
    "image_height",
    "encoder_fingerprint",
    "encoder_family",
    "encoder_precision",
    "payload_crc32",
];

/// The fields `metadata_crc32` covers in a version (2 had no `encoder_precision`).
fn protected_metadata(version: u32) -> impl Iterator<Item = &'static str> {
    PROTECTED_METADATA
        .into_iter()
        .filter(move |key| version >= 3 || *key != "encoder_precision")
}

/// The text `metadata_crc32` is the CRC-32 of: one `key=value` line (ending in `\n`) per field
/// of [`PROTECTED_METADATA`], in that order, with each value exactly as the header holds it. In
/// Python: `zlib.crc32("".join(f"{k}={meta[k]}\n" for k in keys).encode())`.
pub fn metadata_text(value_of: impl Fn(&str) -> String) -> String {
    metadata_text_of(FORMAT_VERSION, value_of)
}

fn metadata_text_of(version: u32, value_of: impl Fn(&str) -> String) -> String {
    protected_metadata(version)
        .map(|key| format!("{key}={}\n", value_of(key)))
        .collect()
}
/// Longest header accepted. A real one is about 700 bytes; the bound keeps a hostile file from
/// driving a large allocation.
pub(crate) const MAX_HEADER_LEN: u64 = 64 * 1024;

fn dtype_name(dtype: TensorElementType) -> Result<&'static str> {
    match dtype {
        TensorElementType::Float32 => Ok("F32"),
        TensorElementType::Float16 => Ok("F16"),
        other => Err(Error::EmbeddingFormat(format!(
            "tensors of type {other} cannot be saved"
        ))),
    }
}

fn format_error(msg: impl Into<String>) -> Error {
    Error::EmbeddingFormat(msg.into())
}

/// What a valid header describes.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The layout version the file was written in (one of [`READABLE_VERSIONS`]).
    pub format_version: u32,
    pub image_width: u32,
    pub image_height: u32,
    pub fingerprint: Fingerprint,
    pub family: EncoderFamily,
    /// The precision of the encoder that made it (float32 for versions 1 and 2).
    pub precision: Precision,
    /// Each tensor's element type, in the order of [`crate::export::embedding_layout`].
    pub dtypes: Vec<TensorElementType>,
    /// Byte length of each tensor.
    pub lengths: Vec<usize>,
    /// Shape of each tensor.
    pub shapes: Vec<[i64; 4]>,
    pub payload_crc32: u32,
}

impl Header {
    pub fn payload_len(&self) -> usize {
        self.lengths.iter().sum()
    }
}

fn encode_header(embedding: &Embedding, crc: u32) -> Result<Vec<u8>> {
    use serde_json::{json, Map, Value};
    let (w, h) = embedding.image_size();
    let mut meta = Map::new();
    for (key, value) in [
        ("format", FORMAT.to_string()),
        ("format_version", FORMAT_VERSION.to_string()),
        ("image_width", w.to_string()),
        ("image_height", h.to_string()),
        ("encoder_fingerprint", embedding.fingerprint().to_string()),
        ("encoder_family", embedding.family().name().to_string()),
        (
            "encoder_precision",
            embedding.precision().name().to_string(),
        ),
        ("payload_crc32", format!("{crc:08x}")),
    ] {
        meta.insert(key.into(), Value::String(value));
    }
    let text = metadata_text(|key| meta[key].as_str().unwrap_or_default().to_string());
    meta.insert(
        "metadata_crc32".into(),
        Value::String(format!("{:08x}", crc32fast::hash(text.as_bytes()))),
    );
    meta.insert(
        "writer".into(),
        Value::String(format!("sam2 {}", crate::VERSION)),
    );
    let mut root = Map::new();
    root.insert("__metadata__".into(), Value::Object(meta));
    let mut offset = 0usize;
    for (tensor, name) in embedding.tensors().iter().zip(embedding.tensor_names()) {
        let len = tensor.byte_len();
        root.insert(
            name.into(),
            json!({
                "dtype": dtype_name(tensor.dtype())?,
                "shape": tensor.shape(),
                "data_offsets": [offset, offset + len],
            }),
        );
        offset += len;
    }
    let mut text =
        serde_json::to_vec(&Value::Object(root)).map_err(|e| format_error(e.to_string()))?;
    while (text.len() + 8) % 8 != 0 {
        text.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + text.len());
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(&text);
    Ok(out)
}

/// Validates a header against the size of the whole file. Pure: no allocation beyond the JSON
/// tree of a header already bounded by [`MAX_HEADER_LEN`].
pub fn parse_header(header: &[u8], file_len: u64) -> Result<Header> {
    use serde_json::Value;
    let root: Value = serde_json::from_slice(header)
        .map_err(|e| format_error(format!("header is not valid JSON: {e}")))?;
    let root = root
        .as_object()
        .ok_or_else(|| format_error("header is not a JSON object"))?;
    let meta = root
        .get("__metadata__")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            format_error("not a sam2 embedding file: the safetensors header has no __metadata__")
        })?;
    let field = |key: &str| -> Result<&str> {
        meta.get(key).and_then(Value::as_str).ok_or_else(|| {
            format_error(format!("metadata field `{key}` is missing or not a string"))
        })
    };
    let format = field("format")?;
    if format != FORMAT {
        return Err(format_error(format!(
            "not a sam2 embedding file (format `{format}`)"
        )));
    }
    let version_text = field("format_version")?;
    let version = version_text
        .parse::<u32>()
        .ok()
        .filter(|v| READABLE_VERSIONS.contains(v) && v.to_string() == version_text)
        .ok_or_else(|| {
            format_error(format!(
                "format version {version_text} is not supported; this library reads versions \
                 {READABLE_VERSIONS:?} (a newer file needs a newer sam2)"
            ))
        })?;
    let hex32 = |key: &str| -> Result<u32> {
        let text = field(key)?;
        (text.len() == 8)
            .then(|| u32::from_str_radix(text, 16).ok())
            .flatten()
            .ok_or_else(|| format_error(format!("`{key}` is malformed: `{text}`")))
    };
    match version {
        1 if meta.contains_key("metadata_crc32") => {
            // Version 1 never had it: a version field corrupted from 2.
            return Err(format_error(
                "a version 1 header with a `metadata_crc32` (corrupted version field?)",
            ));
        }
        1 => {}
        _ => {
            // Every protected field must be a string before the text can be made.
            for key in protected_metadata(version) {
                field(key)?;
            }
            let text = metadata_text_of(version, |key| field(key).unwrap_or_default().to_string());
            let crc = crc32fast::hash(text.as_bytes());
            let declared = hex32("metadata_crc32")?;
            if crc != declared {
                return Err(format_error(format!(
                    "metadata checksum mismatch: the image size, encoder or format fields have \
                     CRC-32 {crc:08x}, the header says {declared:08x} (corrupted file)"
                )));
            }
        }
    }
    let side = |key: &str| -> Result<u32> {
        let text = field(key)?;
        text.parse::<u32>()
            .ok()
            .filter(|v| (1..=MAX_SIDE as u32).contains(v))
            .ok_or_else(|| {
                format_error(format!(
                    "`{key}` must be an integer in 1..={MAX_SIDE}, found `{text}`"
                ))
            })
    };
    let image_width = side("image_width")?;
    let image_height = side("image_height")?;
    let fp_text = field("encoder_fingerprint")?;
    let fingerprint = Fingerprint::parse(fp_text)
        .ok_or_else(|| format_error(format!("`encoder_fingerprint` is malformed: `{fp_text}`")))?;
    let family_text = field("encoder_family")?;
    let family = EncoderFamily::from_name(family_text)
        .ok_or_else(|| format_error(format!("unknown `encoder_family` `{family_text}`")))?;
    let precision = if version >= 3 {
        let text = field("encoder_precision")?;
        Precision::parse(text)
            .ok_or_else(|| format_error(format!("unknown `encoder_precision` `{text}`")))?
    } else {
        Precision::Fp32
    };
    let payload_crc32 = hex32("payload_crc32")?;

    // The family's three tensors (and a SAM 3 embedding's click features, when its encoder
    // wrote them), beside the metadata.
    let clicks = family == EncoderFamily::Sam3 && root.len() == 7;
    let layout = crate::export::embedding_layout(family, clicks);
    let names: Vec<&str> = layout.iter().map(|(n, _)| *n).collect();
    if root.len() != layout.len() + 1 {
        let found: Vec<&String> = root.keys().collect();
        return Err(format_error(format!(
            "expected exactly the tensors {names:?}, found entries {found:?}"
        )));
    }
    let mut dtypes = vec![TensorElementType::Float32; layout.len()];
    let mut lengths = vec![0usize; layout.len()];
    let mut expected_offset = 0u64;
    for (i, (name, want)) in layout.iter().enumerate() {
        let entry = root
            .get(*name)
            .and_then(Value::as_object)
            .ok_or_else(|| format_error(format!("tensor `{name}` is missing")))?;
        let dtype = match entry.get("dtype").and_then(Value::as_str) {
            Some("F32") => TensorElementType::Float32,
            Some("F16") => TensorElementType::Float16,
            other => {
                return Err(format_error(format!(
                    "tensor `{name}` has dtype {other:?}; expected F32 or F16"
                )))
            }
        };
        let shape: Option<Vec<i64>> = entry
            .get("shape")
            .and_then(Value::as_array)
            .map(|dims| dims.iter().map(|d| d.as_i64().unwrap_or(-1)).collect());
        if shape.as_deref() != Some(&want[..]) {
            return Err(format_error(format!(
                "tensor `{name}` has shape {shape:?}; the {} family's contract requires {want:?}",
                family.name()
            )));
        }
        let numel: i64 = want.iter().product();
        let len = numel as u64 * element_size(dtype) as u64;
        let offsets: Option<Vec<u64>> = entry
            .get("data_offsets")
            .and_then(Value::as_array)
            .and_then(|v| v.iter().map(Value::as_u64).collect());
        match offsets.as_deref() {
            Some([begin, end])
                if *begin == expected_offset && end.checked_sub(*begin) == Some(len) => {}
            other => {
                return Err(format_error(format!(
                    "tensor `{name}` has data_offsets {other:?}; expected [{expected_offset}, {}]",
                    expected_offset + len
                )))
            }
        }
        dtypes[i] = dtype;
        lengths[i] = len as usize;
        expected_offset += len;
    }
    let available = file_len.saturating_sub(8 + header.len() as u64);
    if available != expected_offset {
        return Err(format_error(format!(
            "the file holds {available} bytes of tensor data, the header declares {expected_offset}{}",
            if available < expected_offset { " (truncated)" } else { " (trailing bytes)" }
        )));
    }
    Ok(Header {
        format_version: version,
        image_width,
        image_height,
        fingerprint,
        family,
        precision,
        dtypes,
        lengths,
        shapes: layout.iter().map(|(_, shape)| *shape).collect(),
        payload_crc32,
    })
}

/// Reads and checks the 8-byte length prefix.
fn header_len(prefix: [u8; 8], file_len: u64) -> Result<usize> {
    let n = u64::from_le_bytes(prefix);
    if n == 0 || n > MAX_HEADER_LEN || n > file_len - 8 {
        return Err(format_error(format!(
            "declared header length {n} is impossible for a {file_len}-byte file (at most {MAX_HEADER_LEN})"
        )));
    }
    Ok(n as usize)
}

/// Parses and fully validates a whole file held in memory (header, sizes and checksum) without
/// touching ONNX Runtime: what the fuzz target drives.
pub fn validate_bytes(bytes: &[u8]) -> Result<Header> {
    let file_len = bytes.len() as u64;
    if file_len < 8 {
        return Err(format_error(format!(
            "{file_len} bytes is too short for an embedding file"
        )));
    }
    let n = header_len(bytes[..8].try_into().expect("8 bytes"), file_len)?;
    let header = parse_header(&bytes[8..8 + n], file_len)?;
    let payload = &bytes[8 + n..];
    let crc = crc32fast::hash(payload);
    if crc != header.payload_crc32 {
        return Err(format_error(format!(
            "checksum mismatch: the data has CRC-32 {crc:08x}, the header says {:08x} (corrupted file)",
            header.payload_crc32
        )));
    }
    Ok(header)
}

/// The JSON every embedding file (and every temporary file of a save, once its header is
/// written) carries in its header.
const FORMAT_MARK: &[u8] = b"\"format\":\"sam2-embedding\"";

/// Whether the file at `path` starts like an embedding file: a plausible header length, then a
/// header that names our format. A file killed before its header was written (empty) does not,
/// and is left alone: nothing says it is ours.
fn starts_like_ours(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let mut head = Vec::with_capacity(4096);
    if file.take(8 + 4096).read_to_end(&mut head).is_err() || head.len() < 8 {
        return false;
    }
    let n = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
    if n == 0 || n > MAX_HEADER_LEN {
        return false;
    }
    let end = head.len().min(8 + n as usize);
    head[8..end]
        .windows(FORMAT_MARK.len())
        .any(|w| w == FORMAT_MARK)
}

/// Removes the temporary files that saves killed mid-write left in `dir` (a killed process
/// cannot clean up, and each is the size of an embedding). A file is removed only when its name
/// is exactly ours, its contents start like an embedding file (a user's file that happens to
/// match the name pattern is not ours), the process that wrote it no longer exists, and it has
/// not changed for 15 minutes (see [`files::remove_abandoned_temps`]). Done once per directory
/// per process, after a successful save; failures are ignored (this is housekeeping, never a
/// reason to fail a save). Returns the number of files removed.
pub fn remove_abandoned_temps(dir: &Path) -> usize {
    files::remove_abandoned_temps(dir, starts_like_ours)
}

/// Writes an embedding atomically: a temporary file in the same directory, fsync, rename, fsync
/// of the directory (the current directory for a bare file name). A crash at any point leaves
/// the file either as it was or complete. A `path` that is a symbolic link stays a link: the file
/// it names is the one replaced (see [`files::save_target`]). Refuses device memory before touching the
/// filesystem.
pub fn save(embedding: &Embedding, path: &Path) -> Result<()> {
    // A simulated device embedding is refused like a real one, whatever its label.
    if !embedding.is_serializable() || embedding.is_simulated() {
        return Err(Error::EmbeddingNotSerializable {
            allocator: embedding.allocator_name().to_string(),
        });
    }
    let slices: Vec<&[u8]> = embedding
        .tensors()
        .iter()
        .map(EmbeddingTensor::host_bytes)
        .collect::<Result<_>>()?;
    let mut hasher = crc32fast::Hasher::new();
    for s in &slices {
        hasher.update(s);
    }
    let header = encode_header(embedding, hasher.finalize())?;
    let target = files::save_target(path, "the embedding")?;
    files::replace_atomically(
        &target,
        path,
        "the embedding",
        |file| {
            file.write_all(&header)?;
            for s in &slices {
                file.write_all(s)?;
            }
            Ok(())
        },
        &sync_directory,
    )?;
    files::clean_once(directory_of(&target), starts_like_ours);
    Ok(())
}

/// Reads an embedding file onto the host. `expected` (a predictor's encoder fingerprint) turns a
/// file made by another model into `ModelMismatch`.
pub fn load(path: &Path, expected: Option<Fingerprint>) -> Result<Embedding> {
    load_inner(path, expected).map_err(|e| match e {
        Error::EmbeddingFormat(msg) if !msg.starts_with(&path.display().to_string()) => {
            Error::EmbeddingFormat(format!("{}: {msg}", path.display()))
        }
        other => other,
    })
}

/// Opens an embedding file for reading without ever blocking or touching a device (see
/// [`files::open_regular`]).
fn open_regular_file(path: &Path) -> Result<File> {
    files::open_regular(path, "an embedding file")
}

fn load_inner(path: &Path, expected: Option<Fingerprint>) -> Result<Embedding> {
    let io = |e: std::io::Error| Error::io(format!("reading {}", path.display()), e);
    let mut file = open_regular_file(path)?;
    let metadata = file.metadata().map_err(io)?;
    let file_len = metadata.len();
    if file_len < 8 {
        return Err(format_error(format!(
            "{file_len} bytes is too short for an embedding file"
        )));
    }
    let mut prefix = [0u8; 8];
    read_exact(&mut file, &mut prefix, path)?;
    let n = header_len(prefix, file_len)?;
    let mut header_bytes = vec![0u8; n];
    read_exact(&mut file, &mut header_bytes, path)?;
    let header = parse_header(&header_bytes, file_len)?;
    if let Some(expected) = expected {
        if header.fingerprint != expected {
            return Err(Error::ModelMismatch(format!(
                "{} was made by encoder {} ({}), but this predictor expects encoder {expected}",
                path.display(),
                header.fingerprint,
                header.precision
            )));
        }
    }
    crate::runtime::environment()?;
    let allocator = Allocator::default();
    let mut hasher = crc32fast::Hasher::new();
    let mut tensors = Vec::with_capacity(header.shapes.len());
    for (i, shape) in header.shapes.iter().enumerate() {
        let mut value = DynTensor::new(&allocator, header.dtypes[i], *shape)?;
        let ptr = value.data_ptr_mut() as *mut u8;
        // SAFETY: a fresh dense CPU tensor of exactly `lengths[i]` bytes (shape and dtype were
        // validated, and its size computed from them, not from the file).
        let buf = unsafe { std::slice::from_raw_parts_mut(ptr, header.lengths[i]) };
        read_exact(&mut file, buf, path)?;
        hasher.update(buf);
        tensors.push(EmbeddingTensor::from_value(value.into_dyn())?);
    }
    let crc = hasher.finalize();
    if crc != header.payload_crc32 {
        return Err(format_error(format!(
            "checksum mismatch: the data has CRC-32 {crc:08x}, the header says {:08x} (corrupted file)",
            header.payload_crc32
        )));
    }
    Ok(Embedding {
        tensors,
        image_width: header.image_width,
        image_height: header.image_height,
        fingerprint: header.fingerprint,
        family: header.family,
        precision: header.precision,
    })
}

fn read_exact(file: &mut File, buf: &mut [u8], path: &Path) -> Result<()> {
    file.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            format_error("the file is truncated")
        } else {
            Error::io(format!("reading {}", path.display()), e)
        }
    })
}
