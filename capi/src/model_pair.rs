//! `sam2_find_model_pair`: an encoder/decoder pair found by file name.

use std::ffi::c_char;

use super::{arg_str, copy_out_str, guard, sam2_status};
use sam2::models::find_model_pair;
use sam2::Error;

/// Finds one encoder/decoder pair from `path` (NUL-terminated UTF-8): a directory holding exactly
/// one pair, `DIR/NAME` for the pair called NAME in DIR, or the path of an encoder or decoder
/// file. Three namings are recognised: samexporter's `NAME.encoder.onnx`/`NAME.decoder.onnx`,
/// ONNX Runtime's tools' `NAME_image_encoder.onnx`/`NAME_image_decoder_multi.onnx` (else
/// `NAME_image_decoder.onnx`), and the generator's `NAME_encoder.onnx`/`NAME_decoder.onnx`.
/// Files are matched by name only; they are opened by `sam2_encoder_new`/`sam2_predictor_new`.
///
/// The two paths are copied, NUL-terminated, into `encoder_path`/`decoder_path`;
/// `*out_encoder_needed` and `*out_decoder_needed` (each may be NULL) receive the bytes each
/// needs including the NUL, also when the call returns `SAM2_ERR_BUFFER_TOO_SMALL` (NULL
/// buffers with length 0 ask for the sizes). No pair, or several, is `SAM2_ERR_MODEL` with a
/// message listing the candidates; an unreadable directory is `SAM2_ERR_IO`.
#[no_mangle]
pub extern "C" fn sam2_find_model_pair(
    path: *const c_char,
    encoder_path: *mut c_char,
    encoder_len: usize,
    out_encoder_needed: *mut usize,
    decoder_path: *mut c_char,
    decoder_len: usize,
    out_decoder_needed: *mut usize,
) -> sam2_status {
    guard(|| {
        let path = arg_str(path, "path")?;
        let pair = find_model_pair(path)?;
        let text = |p: &std::path::Path, name: &'static str| {
            p.to_str()
                .map(str::to_owned)
                .ok_or_else(|| Error::invalid(name, "the found path is not valid UTF-8"))
        };
        let encoder = text(&pair.encoder, "path")?;
        let decoder = text(&pair.decoder, "path")?;
        // Both sizes are reported, and neither path is written unless both fit.
        for (text, needed) in [
            (&encoder, out_encoder_needed),
            (&decoder, out_decoder_needed),
        ] {
            if !needed.is_null() {
                // SAFETY: checked non-NULL; the caller promises it is writable.
                unsafe { needed.write_unaligned(text.len() + 1) };
            }
        }
        for (text, buf, len) in [
            (&encoder, encoder_path, encoder_len),
            (&decoder, decoder_path, decoder_len),
        ] {
            if buf.is_null() || len <= text.len() {
                return Err(Error::BufferTooSmall {
                    needed: text.len() + 1,
                    given: if buf.is_null() { 0 } else { len },
                });
            }
        }
        copy_out_str(&encoder, encoder_path, encoder_len, std::ptr::null_mut())?;
        copy_out_str(&decoder, decoder_path, decoder_len, std::ptr::null_mut())
    })
}
