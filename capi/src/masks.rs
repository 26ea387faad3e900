//! `sam2_masks`: the result of one `sam2_predict`.

use super::{arg_out, guard, handle_ref, sam2_status, Handle};
use sam2::Error;
use sam2::Prediction;

/// A prediction result: `objects × candidates` masks, object-major (mask `i` belongs to object
/// `i / candidates`). Opaque and immutable; release with `sam2_masks_free`. Pointers it hands
/// out stay valid until then. Thread-safe: several threads may read it at once.
pub struct sam2_masks {
    _opaque: [u8; 0],
}
impl Handle for sam2_masks {
    type Inner = Prediction;
}

/// Releases a result. Pointers obtained from it become invalid. A pointer that is not a live result
/// (already freed, another handle type) is detected where possible and ignored with a warning
/// through the log callback: best effort, not a licence. NULL is a no-op. Do not free it twice, nor
/// while it is in use.
#[no_mangle]
pub extern "C" fn sam2_masks_free(masks: *mut sam2_masks) {
    super::free_handle(masks, "masks");
}

pub(crate) fn check_index(m: &Prediction, i: usize) -> Result<(), Error> {
    let count = m.objects * m.candidates;
    if i >= count {
        return Err(Error::invalid(
            "index",
            format!(
                "is {i}, but the result holds {count} mask{}",
                if count == 1 { "" } else { "s" }
            ),
        ));
    }
    Ok(())
}

/// Writes the number of objects (prompts) and of candidate masks per object.
#[no_mangle]
pub extern "C" fn sam2_masks_count(
    masks: *const sam2_masks,
    out_objects: *mut usize,
    out_candidates: *mut usize,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        let o = arg_out(out_objects, "out_objects")?;
        let c = arg_out(out_candidates, "out_candidates")?;
        o.set(m.objects);
        c.set(m.candidates);
        Ok(())
    })
}

/// Writes the size of every mask: the original image size.
#[no_mangle]
pub extern "C" fn sam2_masks_size(
    masks: *const sam2_masks,
    out_width: *mut u32,
    out_height: *mut u32,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        let w = arg_out(out_width, "out_width")?;
        let h = arg_out(out_height, "out_height")?;
        w.set(m.width as u32);
        h.set(m.height as u32);
        Ok(())
    })
}

/// Gives mask `index`: `width × height` bytes, row-major, 1 = foreground, 0 = background.
/// `*out_data` stays valid until `sam2_masks_free`; `*out_len` receives the byte count.
///
/// `*out_data` is owned by the result and valid until `sam2_masks_free`; do not free it.
/// Out-parameters are untouched on failure.
#[no_mangle]
pub extern "C" fn sam2_masks_mask(
    masks: *const sam2_masks,
    index: usize,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        let d = arg_out(out_data, "out_data")?;
        let l = arg_out(out_len, "out_len")?;
        check_index(m, index)?;
        let mask = m.mask(index);
        d.set(mask.as_ptr());
        l.set(mask.len());
        Ok(())
    })
}

/// Writes the predicted IoU (the model's confidence) of mask `index`.
#[no_mangle]
pub extern "C" fn sam2_masks_score(
    masks: *const sam2_masks,
    index: usize,
    out_score: *mut f32,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        let s = arg_out(out_score, "out_score")?;
        check_index(m, index)?;
        s.set(m.scores[index]);
        Ok(())
    })
}

/// Writes the inclusive bounding box `{x_min, y_min, x_max, y_max}` of mask `index` into
/// `out_box[0..4]`, and its area in pixels; an empty mask has area 0 and box `{0, 0, 0, 0}`.
#[no_mangle]
pub extern "C" fn sam2_masks_box(
    masks: *const sam2_masks,
    index: usize,
    out_box: *mut u32,
    out_area: *mut u64,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        if out_box.is_null() {
            return Err(Error::NullArgument("out_box"));
        }
        let a = arg_out(out_area, "out_area")?;
        check_index(m, index)?;
        // SAFETY: checked non-NULL; the caller promises room for 4 values.
        unsafe { std::ptr::copy_nonoverlapping(m.boxes[index].as_ptr(), out_box, 4) };
        a.set(m.areas[index]);
        Ok(())
    })
}

/// Gives the low-res logits of mask `index` (`side × side` floats, 256 for SAM2), to pass back as
/// `sam2_prompt.mask_input` for refinement.
///
/// `*out_data` is owned by the result and valid until `sam2_masks_free`; do not free it.
/// Out-parameters are untouched on failure.
#[no_mangle]
pub extern "C" fn sam2_masks_low_res(
    masks: *const sam2_masks,
    index: usize,
    out_data: *mut *const f32,
    out_len: *mut usize,
    out_side: *mut u32,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        let d = arg_out(out_data, "out_data")?;
        let l = arg_out(out_len, "out_len")?;
        let s = arg_out(out_side, "out_side")?;
        check_index(m, index)?;
        let logits = m.low_res_logits(index);
        d.set(logits.as_ptr());
        l.set(logits.len());
        s.set(m.low_res_size as u32);
        Ok(())
    })
}
