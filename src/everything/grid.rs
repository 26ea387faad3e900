//! Where the clicks go: SAM2's grid of points and its layers of overlapping crops.

/// `n × n` points at the centres of an even grid over `[0, 1]²`, rows from the top, left to right
/// within a row (SAM2's `build_point_grid`, same float64 arithmetic).
pub(crate) fn point_grid(n: usize) -> Vec<[f64; 2]> {
    let offset = 1.0 / (2 * n) as f64;
    let (start, stop) = (offset, 1.0 - offset);
    // numpy's linspace: start + i·step, the last value exactly `stop`.
    let step = if n > 1 {
        (stop - start) / (n - 1) as f64
    } else {
        0.0
    };
    let side: Vec<f64> = (0..n)
        .map(|i| {
            if n > 1 && i == n - 1 {
                stop
            } else {
                start + i as f64 * step
            }
        })
        .collect();
    let mut points = Vec::with_capacity(n * n);
    for &y in &side {
        for &x in &side {
            points.push([x, y]);
        }
    }
    points
}

/// The crops of every layer, `([x0, y0, x1, y1], layer)`: the whole image, then per layer `i ≥ 1`
/// a `2^i × 2^i` set of overlapping crops, columns outer (SAM2's `generate_crop_boxes`). Every
/// crop is inside the image and holds at least one pixel: on tiny images the crops that would
/// start beyond the edge are left out, so a layer may have fewer than `2^i × 2^i`.
pub(crate) fn crop_boxes(
    width: usize,
    height: usize,
    layers: u32,
    overlap_ratio: f32,
) -> Vec<([u32; 4], u32)> {
    let mut boxes = vec![([0, 0, width as u32, height as u32], 0)];
    let short_side = width.min(height) as f64;
    let crop_len = |len: usize, n: usize, overlap: usize| -> usize {
        ((overlap * (n - 1) + len) as f64 / n as f64).ceil() as usize
    };
    for layer in 0..layers {
        let n = 1usize << (layer + 1);
        let overlap = (overlap_ratio as f64 * short_side * (2.0 / n as f64)) as usize;
        let crop_w = crop_len(width, n, overlap);
        let crop_h = crop_len(height, n, overlap);
        let x0s: Vec<usize> = (0..n).map(|i| (crop_w - overlap) * i).collect();
        let y0s: Vec<usize> = (0..n).map(|i| (crop_h - overlap) * i).collect();
        for &x0 in &x0s {
            for &y0 in &y0s {
                // On an image a few pixels across, the last crops of a layer can start at or
                // past its edge (7×5 with two layers: crops of 2×2 starting at 6): SAM2 would
                // encode an empty image there. They hold no pixel, so they are left out.
                if x0 >= width || y0 >= height {
                    continue;
                }
                boxes.push((
                    [
                        x0 as u32,
                        y0 as u32,
                        (x0 + crop_w).min(width) as u32,
                        (y0 + crop_h).min(height) as u32,
                    ],
                    layer + 1,
                ));
            }
        }
    }
    boxes
}
