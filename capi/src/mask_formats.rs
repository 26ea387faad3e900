//! The other forms of a `sam2_masks` mask: copied into a caller's buffer, cropped to its box,
//! COCO run lengths (counts and pycocotools' compressed string), polygons with holes.
//!
//! Size queries follow the `(buf, len, &needed)` convention: the needed size is written even
//! when the call returns `SAM2_ERR_BUFFER_TOO_SMALL`, and a NULL buffer with capacity 0 asks for
//! the size only.

use super::masks::{check_index, sam2_masks};
use super::{arg_out, copy_out_str, guard, handle_ref, sam2_status};
use sam2::Error;

/// A caller buffer of `len` elements; NULL is accepted only when `len` is 0.
fn arg_buffer<'a, T>(ptr: *mut T, len: usize, name: &'static str) -> Result<&'a mut [T], Error> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Error::NullArgument(name));
    }
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(Error::invalid(name, "length is impossibly large"));
    }
    // SAFETY: the caller promises `len` writable elements at `ptr`.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Writes `needed` to `out_needed`, then fails with `SAM2_ERR_BUFFER_TOO_SMALL` when `given`
/// is less.
fn need(needed: usize, given: usize, out_needed: *mut usize) -> Result<(), Error> {
    if !out_needed.is_null() {
        // SAFETY: checked non-NULL; the caller promises it is writable.
        unsafe { out_needed.write_unaligned(needed) };
    }
    if given < needed {
        return Err(Error::BufferTooSmall { needed, given });
    }
    Ok(())
}

/// Copies mask `index` (`width × height` bytes, row-major, 1 = foreground) into `buffer`, which
/// holds `size` bytes: at least `width × height` (`sam2_masks_size`), else
/// `SAM2_ERR_INVALID_ARGUMENT` naming `size`. The buffer stays the caller's; nothing is kept.
#[no_mangle]
pub extern "C" fn sam2_masks_copy_mask(
    masks: *const sam2_masks,
    index: usize,
    buffer: *mut u8,
    size: usize,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        if buffer.is_null() {
            return Err(Error::NullArgument("buffer"));
        }
        check_index(m, index)?;
        let out = arg_buffer(buffer, size, "buffer")?;
        m.copy_mask_into(index, out)
    })
}

/// Copies mask `index` cropped to its box into `buffer` (row-major,
/// `(x_max − x_min + 1) × (y_max − y_min + 1)` bytes) and writes the inclusive box
/// `{x_min, y_min, x_max, y_max}` to `out_box[0..4]`. `*out_needed` receives the crop's byte
/// count; when `size` is smaller the call returns `SAM2_ERR_BUFFER_TOO_SMALL` having written only
/// that (`buffer` may be NULL with `size` 0 to ask). An empty mask needs 0 bytes and gives the
/// box `{0, 0, 0, 0}`, as `sam2_masks_box` does.
#[no_mangle]
pub extern "C" fn sam2_masks_crop(
    masks: *const sam2_masks,
    index: usize,
    buffer: *mut u8,
    size: usize,
    out_box: *mut u32,
    out_needed: *mut usize,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        if out_box.is_null() {
            return Err(Error::NullArgument("out_box"));
        }
        arg_out(out_needed, "out_needed")?;
        check_index(m, index)?;
        let (_, crop_size) = m.crop_size(index);
        let out = arg_buffer(buffer, size, "buffer")?;
        need(crop_size, size, out_needed)?;
        let bbox = m.crop_into(index, out)?.unwrap_or([0; 4]);
        // SAFETY: checked non-NULL; the caller promises room for 4 values.
        unsafe { std::ptr::copy_nonoverlapping(bbox.as_ptr(), out_box, 4) };
        Ok(())
    })
}

/// Writes mask `index` as COCO run lengths: alternating counts of 0s and 1s in column-major
/// order (down each column, left to right), starting with a possibly empty run of 0s, as in
/// COCO's uncompressed `{"size": [height, width], "counts": [...]}`. `*out_count` receives the
/// number of counts; when `capacity` is smaller the call returns `SAM2_ERR_BUFFER_TOO_SMALL`
/// having written only that (`counts` may be NULL with `capacity` 0 to ask).
#[no_mangle]
pub extern "C" fn sam2_masks_rle(
    masks: *const sam2_masks,
    index: usize,
    counts: *mut u32,
    capacity: usize,
    out_count: *mut usize,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        arg_out(out_count, "out_count")?;
        check_index(m, index)?;
        let out = arg_buffer(counts, capacity, "counts")?;
        let rle = m.try_rle(index)?;
        need(rle.counts.len(), capacity, out_count)?;
        out[..rle.counts.len()].copy_from_slice(&rle.counts);
        Ok(())
    })
}

/// Writes mask `index` as the compressed COCO RLE string pycocotools uses
/// (`{"size": [height, width], "counts": "<this string>"}`), NUL-terminated, into `buf`.
/// `*out_needed` (may be NULL) receives the bytes needed including the NUL; when `len` is
/// smaller the call returns `SAM2_ERR_BUFFER_TOO_SMALL` (`buf` may be NULL with `len` 0 to ask).
#[no_mangle]
pub extern "C" fn sam2_masks_rle_string(
    masks: *const sam2_masks,
    index: usize,
    buf: *mut std::ffi::c_char,
    len: usize,
    out_needed: *mut usize,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        check_index(m, index)?;
        copy_out_str(
            &m.try_rle(index)?.try_to_coco_string()?,
            buf,
            len,
            out_needed,
        )
    })
}

/// One ring of `sam2_masks_polygons`: how many points of the point array are its own (they
/// follow the previous ring's) and whether it is an outer ring or a hole.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sam2_ring {
    pub point_count: u32,
    /// 0: an outer ring (a new connected component); 1: a hole of the last outer ring before it.
    pub is_hole: u32,
}

/// Writes mask `index` as polygons with holes. `points` receives `x, y` pairs (2 floats per
/// point, pixel-corner coordinates: `(x, y)` is the top-left corner of pixel `(x, y)`), ring
/// after ring; `rings` receives one `sam2_ring` per ring: each connected component's outer ring
/// (clockwise on screen, y down), then its holes (counter-clockwise). A pixel is inside when its
/// centre is inside an odd number of rings. Rings are not closed (the first point is not repeated).
///
/// `tolerance` (pixels, ≥ 0 and finite) simplifies each ring by Douglas–Peucker; 0 keeps every
/// corner, and the rings then give back the mask exactly. Rings that collapse to fewer than 3
/// points are left out (a component whose outer ring collapses goes with its holes).
///
/// `*out_points` (in points, not floats) and `*out_rings` receive the sizes; when
/// `points_capacity` (in points) or `rings_capacity` is smaller the call returns
/// `SAM2_ERR_BUFFER_TOO_SMALL` having written only those (NULL arrays with capacity 0 ask).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn sam2_masks_polygons(
    masks: *const sam2_masks,
    index: usize,
    tolerance: f32,
    points: *mut f32,
    points_capacity: usize,
    rings: *mut sam2_ring,
    rings_capacity: usize,
    out_points: *mut usize,
    out_rings: *mut usize,
) -> sam2_status {
    guard(|| {
        let m = handle_ref(masks, "masks")?;
        arg_out(out_points, "out_points")?;
        arg_out(out_rings, "out_rings")?;
        check_index(m, index)?;
        if !(tolerance.is_finite() && tolerance >= 0.0) {
            return Err(Error::invalid(
                "tolerance",
                format!("is {tolerance}; it must be a finite number of pixels, 0 or more"),
            ));
        }
        let point_floats = points_capacity
            .checked_mul(2)
            .ok_or_else(|| Error::invalid("points_capacity", "is impossibly large"))?;
        let point_out = arg_buffer(points, point_floats, "points")?;
        let ring_out = arg_buffer(rings, rings_capacity, "rings")?;
        let polygons = m.polygons(index, tolerance)?;
        let all_rings = polygons
            .iter()
            .flat_map(|p| std::iter::once((&p.outer, 0)).chain(p.holes.iter().map(|h| (h, 1))));
        let ring_count = polygons.iter().map(|p| 1 + p.holes.len()).sum::<usize>();
        let point_count = all_rings.clone().map(|(r, _)| r.len()).sum::<usize>();
        // Both sizes are written before either can fail.
        let points_ok = need(point_count, points_capacity, out_points);
        let rings_ok = need(ring_count, rings_capacity, out_rings);
        points_ok?;
        rings_ok?;
        let mut at = 0;
        for (i, (ring, is_hole)) in all_rings.enumerate() {
            ring_out[i] = sam2_ring {
                point_count: ring.len() as u32,
                is_hole,
            };
            for p in ring {
                point_out[at] = p[0];
                point_out[at + 1] = p[1];
                at += 2;
            }
        }
        Ok(())
    })
}
