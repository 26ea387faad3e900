//! Masks as polygons with holes: a crack-following contour tracer, Douglas–Peucker
//! simplification and a rasteriser to check the result against the mask.
//!
//! The tracer walks the edges between foreground and background pixels (the "cracks"), so every
//! vertex lies on a pixel corner: `(x, y)` is the top-left corner of pixel `(x, y)`. Each edge is
//! walked with the foreground on its right (image coordinates, y down), which makes outer rings
//! clockwise on screen (positive shoelace area) and holes counter-clockwise. Where two
//! foreground pixels touch only at a corner the walk turns left, joining them: foreground is
//! 8-connected, background 4-connected, so every 8-connected component has exactly one outer ring.
//!
//! A pixel belongs to a set of rings when its centre lies inside them under the even-odd rule.
//! At tolerance 0 the rings give back the mask exactly; a larger tolerance (in pixels) drops
//! vertices closer than that to the simplified outline, and rings that collapse to fewer than
//! three vertices are dropped.

use crate::error::{try_filled, try_push, try_with_capacity, try_zeroed, Result};

/// One connected component of a mask: its outer ring and the rings of its holes. Vertices are
/// `[x, y]` pixel-corner coordinates; no ring repeats its first vertex at the end.
#[derive(Debug, Clone, PartialEq)]
pub struct Polygon {
    pub outer: Vec<[f32; 2]>,
    pub holes: Vec<Vec<[f32; 2]>>,
}

/// Directions along the pixel grid: right, down, left, up (y grows downwards).
const STEP: [(i64, i64); 4] = [(1, 0), (0, 1), (-1, 0), (0, -1)];

/// The mask with a one-pixel background border, so that every neighbour lookup of a pixel in
/// `-1..=width` × `-1..=height` is a plain index.
struct Grid {
    cells: Vec<u8>,
    width: usize,
}

impl Grid {
    fn new(mask: &[u8], width: usize, height: usize) -> Result<Self> {
        let mut cells = try_zeroed((width + 2) * (height + 2), "the polygon tracer's grid")?;
        for (y, row) in mask.chunks_exact(width).enumerate() {
            let out = &mut cells[(y + 1) * (width + 2) + 1..][..width];
            for (o, &v) in out.iter_mut().zip(row) {
                *o = (v != 0) as u8;
            }
        }
        Ok(Grid { cells, width })
    }

    /// Pixel `(x, y)`, for `x` in `-1..=width` and `y` in `-1..=height` (outside is background).
    #[inline]
    fn fg(&self, x: i64, y: i64) -> bool {
        self.cells[(y + 1) as usize * (self.width + 2) + (x + 1) as usize] != 0
    }

    /// Whether the boundary edge leaving corner `(x, y)` in direction `d` exists (foreground on
    /// its right, background on its left).
    fn has_edge(&self, x: i64, y: i64, d: usize) -> bool {
        // The pixels on the right and on the left of the unit edge leaving (x, y) in direction d.
        let (right, left) = match d {
            0 => ((x, y), (x, y - 1)),
            1 => ((x - 1, y), (x, y)),
            2 => ((x - 1, y - 1), (x - 1, y)),
            _ => ((x, y - 1), (x - 1, y - 1)),
        };
        self.fg(right.0, right.1) && !self.fg(left.0, left.1)
    }

    /// The edge the walk takes out of corner `(x, y)` after arriving in direction `incoming`:
    /// the only one, or at a corner where two foreground pixels touch diagonally, the left turn.
    fn next(&self, x: i64, y: i64, incoming: usize) -> usize {
        for turn in [3, 0, 1] {
            let d = (incoming + turn) % 4;
            if self.has_edge(x, y, d) {
                return d;
            }
        }
        unreachable!("a boundary walk always has a way on")
    }
}

/// Traces every ring of a row-major `height × width` mask (non-zero = foreground) and groups the
/// holes with their outer rings, simplified with `tolerance` pixels (0 keeps every corner).
/// Components come in raster order of their top-left pixel. Panics when the memory cannot be
/// had; [`try_polygons`] returns the error instead.
pub fn polygons(mask: &[u8], width: usize, height: usize, tolerance: f32) -> Vec<Polygon> {
    try_polygons(mask, width, height, tolerance).unwrap_or_else(|e| panic!("{e}"))
}

/// [`polygons`], or [`Error::OutOfMemory`] when the tracer's memory (two bytes a pixel of the
/// mask, and more for masks of many runs) or the rings' cannot be had.
///
/// [`Error::OutOfMemory`]: crate::Error::OutOfMemory
pub fn try_polygons(
    mask: &[u8],
    width: usize,
    height: usize,
    tolerance: f32,
) -> Result<Vec<Polygon>> {
    assert_eq!(mask.len(), width * height, "mask size");
    // Only the corners of the foreground's box can carry edges.
    let Some([bx0, by0, bx1, by1]) = foreground_box(mask, width, height) else {
        return Ok(Vec::new());
    };
    let grid = Grid::new(mask, width, height)?;
    let components = Components::new(&grid, by0, by1)?;
    let mut polygons: Vec<Polygon> = Vec::new();
    // The polygon of each component (by its root run).
    let mut slot_of_component = try_filled(
        components.parent.len(),
        usize::MAX,
        "the polygon tracer's components",
    )?;
    // Four bits per corner: the edges already walked.
    let corners_w = width + 1;
    let mut walked = try_zeroed(corners_w * (height + 1), "the polygon tracer's edges")?;
    for y in by0 as i64..=by1 as i64 + 1 {
        for x in bx0 as i64..=bx1 as i64 + 1 {
            // A corner whose four pixels agree has no edge: most corners, skipped cheaply.
            let a = grid.fg(x - 1, y - 1);
            if grid.fg(x, y - 1) == a && grid.fg(x - 1, y) == a && grid.fg(x, y) == a {
                continue;
            }
            for d in 0..4 {
                let at = y as usize * corners_w + x as usize;
                if walked[at] & (1 << d) != 0 || !grid.has_edge(x, y, d) {
                    continue;
                }
                let ring = trace(&grid, &mut walked, x, y, d)?;
                // The foreground pixel on the right of the first edge names the component.
                let (px, py) = match d {
                    0 => (x, y),
                    1 => (x - 1, y),
                    2 => (x - 1, y - 1),
                    _ => (x, y - 1),
                };
                let component = components.of(px as usize, py as usize);
                let simplified = simplify(&ring, tolerance)?;
                let is_hole = signed_area(&ring) < 0.0;
                if slot_of_component[component] == usize::MAX {
                    slot_of_component[component] = polygons.len();
                    try_push(
                        &mut polygons,
                        Polygon {
                            outer: Vec::new(),
                            holes: Vec::new(),
                        },
                        "the polygons of a mask",
                    )?;
                }
                let polygon = &mut polygons[slot_of_component[component]];
                if simplified.len() < 3 {
                    continue;
                }
                let mut points = try_with_capacity(simplified.len(), "the rings of a mask")?;
                points.extend(simplified.iter().map(|&(x, y)| [x as f32, y as f32]));
                if is_hole {
                    try_push(&mut polygon.holes, points, "the rings of a mask")?;
                } else {
                    polygon.outer = points;
                }
            }
        }
    }
    // A component whose outer ring simplified away is dropped with its holes.
    polygons.retain(|p| !p.outer.is_empty());
    Ok(polygons)
}

/// Walks one ring from the edge leaving `(x0, y0)` in direction `d0`, marking its edges, and
/// returns its corners (the vertices where the direction changes).
fn trace(grid: &Grid, walked: &mut [u8], x0: i64, y0: i64, d0: usize) -> Result<Vec<(i64, i64)>> {
    let corners_w = grid.width + 1;
    let mut ring = Vec::new();
    let (mut x, mut y, mut d) = (x0, y0, d0);
    loop {
        walked[y as usize * corners_w + x as usize] |= 1 << d;
        x += STEP[d].0;
        y += STEP[d].1;
        let next = grid.next(x, y, d);
        if next != d {
            try_push(&mut ring, (x, y), "the rings of a mask")?;
        }
        if (x, y, next) == (x0, y0, d0) {
            break;
        }
        d = next;
    }
    Ok(ring)
}

/// Twice the signed area (shoelace); positive for outer rings (clockwise on screen).
fn signed_area(ring: &[(i64, i64)]) -> f64 {
    let n = ring.len();
    (0..n)
        .map(|i| {
            let (a, b) = (ring[i], ring[(i + 1) % n]);
            (a.0 * b.1 - b.0 * a.1) as f64
        })
        .sum()
}

/// Inclusive `[x0, y0, x1, y1]` of the foreground, `None` when there is none.
fn foreground_box(mask: &[u8], width: usize, height: usize) -> Option<[usize; 4]> {
    let rows_with = |y: &usize| mask[y * width..(y + 1) * width].iter().any(|&v| v != 0);
    let y0 = (0..height).find(rows_with)?;
    let y1 = (0..height).rev().find(rows_with)?;
    let (mut x0, mut x1) = (width, 0);
    for y in y0..=y1 {
        let row = &mask[y * width..(y + 1) * width];
        if let Some(first) = row.iter().position(|&v| v != 0) {
            x0 = x0.min(first);
            x1 = x1.max(row.iter().rposition(|&v| v != 0).unwrap_or(first));
        }
    }
    Some([x0, y0, x1, y1])
}

/// 8-connected components of the foreground, as runs of foreground pixels per row joined by
/// union-find: a run touches the runs of the row above that overlap it or meet it diagonally.
struct Components {
    /// Per row `y0..=y1`, the index of its first run in `runs` (and a final end marker).
    row_start: Vec<usize>,
    y0: usize,
    /// Inclusive `(x_first, x_last)` of each run.
    runs: Vec<(usize, usize)>,
    parent: Vec<usize>,
}

impl Components {
    fn new(grid: &Grid, y0: usize, y1: usize) -> Result<Self> {
        let what = "the polygon tracer's runs";
        let mut c = Components {
            row_start: try_with_capacity(y1 - y0 + 2, what)?,
            y0,
            runs: Vec::new(),
            parent: Vec::new(),
        };
        for y in y0..=y1 {
            c.row_start.push(c.runs.len());
            let row = &grid.cells[(y + 1) * (grid.width + 2)..][..grid.width + 2];
            let mut x = 1;
            while x <= grid.width {
                if row[x] == 0 {
                    x += 1;
                    continue;
                }
                let first = x;
                while row[x] != 0 {
                    x += 1;
                }
                try_push(&mut c.parent, c.runs.len(), what)?;
                try_push(&mut c.runs, (first - 1, x - 2), what)?;
            }
        }
        c.row_start.push(c.runs.len());
        for row in 1..c.row_start.len() - 1 {
            let (above, here) = (
                c.row_start[row - 1]..c.row_start[row],
                c.row_start[row]..c.row_start[row + 1],
            );
            let mut a = above.start;
            for r in here {
                let (first, last) = c.runs[r];
                // Runs above that end before this one's diagonal neighbour cannot touch it or
                // any later run of this row.
                while a < above.end && c.runs[a].1 + 1 < first {
                    a += 1;
                }
                let mut k = a;
                while k < above.end && c.runs[k].0 <= last + 1 {
                    c.union(r, k);
                    k += 1;
                }
            }
        }
        Ok(c)
    }

    fn find(&self, mut r: usize) -> usize {
        while self.parent[r] != r {
            r = self.parent[r];
        }
        r
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            // The earlier run stays the root: roots then follow raster order.
            let (lo, hi) = (ra.min(rb), ra.max(rb));
            self.parent[hi] = lo;
        }
        // Path compression along a's and b's chains.
        for start in [a, b] {
            let mut r = start;
            while self.parent[r] != r {
                let next = self.parent[r];
                self.parent[r] = self.find(next);
                r = next;
            }
        }
    }

    /// The component (its root run) of foreground pixel `(x, y)`.
    fn of(&self, x: usize, y: usize) -> usize {
        let row = y - self.y0;
        let runs = &self.runs[self.row_start[row]..self.row_start[row + 1]];
        let i = runs.partition_point(|&(_, last)| last < x);
        self.find(self.row_start[row] + i)
    }
}

/// Douglas–Peucker on a closed ring: the ring is split at its first vertex and the vertex
/// farthest from it, and each half is simplified as an open line.
fn simplify(ring: &[(i64, i64)], tolerance: f32) -> Result<Vec<(i64, i64)>> {
    let what = "the simplification of a ring";
    if tolerance <= 0.0 || ring.len() <= 3 {
        let mut copy = try_with_capacity(ring.len(), what)?;
        copy.extend_from_slice(ring);
        return Ok(copy);
    }
    let dist2 = |a: (i64, i64), b: (i64, i64)| ((a.0 - b.0).pow(2) + (a.1 - b.1).pow(2)) as f64;
    let far = (1..ring.len())
        .max_by(|&i, &j| dist2(ring[0], ring[i]).total_cmp(&dist2(ring[0], ring[j])))
        .unwrap_or(0);
    let mut keep = try_filled(ring.len(), false, what)?;
    keep[0] = true;
    keep[far] = true;
    let mut closed = try_with_capacity(ring.len() + 1, what)?;
    closed.extend(ring.iter().copied().chain([ring[0]]));
    let tol = tolerance as f64;
    mark(&closed, 0, far, tol, &mut keep)?;
    mark(&closed, far, ring.len(), tol, &mut keep)?;
    let mut kept = try_with_capacity(keep.iter().filter(|&&k| k).count(), what)?;
    kept.extend(ring.iter().zip(&keep).filter(|(_, &k)| k).map(|(&p, _)| p));
    Ok(kept)
}

/// Marks the vertices strictly between `first` and `last` that the simplified line keeps.
fn mark(
    points: &[(i64, i64)],
    first: usize,
    last: usize,
    tol: f64,
    keep: &mut [bool],
) -> Result<()> {
    let what = "the simplification of a ring";
    let mut stack = try_with_capacity(64, what)?;
    stack.push((first, last));
    while let Some((a, b)) = stack.pop() {
        if b <= a + 1 {
            continue;
        }
        let (pa, pb) = (points[a], points[b]);
        let (dx, dy) = ((pb.0 - pa.0) as f64, (pb.1 - pa.1) as f64);
        let len = (dx * dx + dy * dy).sqrt();
        let distance = |p: (i64, i64)| {
            let (px, py) = ((p.0 - pa.0) as f64, (p.1 - pa.1) as f64);
            if len == 0.0 {
                (px * px + py * py).sqrt()
            } else {
                (px * dy - py * dx).abs() / len
            }
        };
        let (far, d) = (a + 1..b)
            .map(|i| (i, distance(points[i])))
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .unwrap_or((a, 0.0));
        if d > tol {
            keep[far % keep.len()] = true;
            try_push(&mut stack, (a, far), what)?;
            try_push(&mut stack, (far, b), what)?;
        }
    }
    Ok(())
}

/// Fills a row-major `height × width` mask from polygons: a pixel is set when its centre lies
/// inside an odd number of the rings (all outer and hole rings together).
pub fn rasterize(polygons: &[Polygon], width: usize, height: usize) -> Vec<u8> {
    let mut mask = vec![0u8; width * height];
    let rings: Vec<&Vec<[f32; 2]>> = polygons
        .iter()
        .flat_map(|p| std::iter::once(&p.outer).chain(&p.holes))
        .collect();
    let mut crossings = Vec::new();
    for y in 0..height {
        let cy = y as f64 + 0.5;
        crossings.clear();
        for ring in &rings {
            let n = ring.len();
            for i in 0..n {
                let (a, b) = (ring[i], ring[(i + 1) % n]);
                let (ay, by) = (a[1] as f64, b[1] as f64);
                if (ay <= cy) != (by <= cy) {
                    let t = (cy - ay) / (by - ay);
                    crossings.push(a[0] as f64 + t * (b[0] as f64 - a[0] as f64));
                }
            }
        }
        crossings.sort_by(f64::total_cmp);
        for pair in crossings.chunks_exact(2) {
            // Pixels whose centre x + 0.5 lies in [pair[0], pair[1]).
            let from = (pair[0] - 0.5).ceil().max(0.0) as usize;
            let to = ((pair[1] - 0.5).ceil().max(0.0) as usize).min(width);
            for x in from..to {
                mask[y * width + x] = 1;
            }
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_rows(rows: &[&str]) -> (Vec<u8>, usize, usize) {
        let w = rows[0].len();
        let mask = rows
            .iter()
            .flat_map(|r| r.bytes().map(|b| (b == b'#') as u8))
            .collect();
        (mask, w, rows.len())
    }

    #[test]
    fn a_square_with_a_hole_gives_one_outer_ring_and_one_hole() {
        let (mask, w, h) = from_rows(&["......", ".####.", ".#..#.", ".####.", "......"]);
        let p = polygons(&mask, w, h, 0.0);
        assert_eq!(p.len(), 1);
        assert_eq!(
            p[0].outer,
            vec![[5.0, 1.0], [5.0, 4.0], [1.0, 4.0], [1.0, 1.0]]
        );
        assert_eq!(p[0].holes.len(), 1);
        assert_eq!(p[0].holes[0].len(), 4);
        assert_eq!(rasterize(&p, w, h), mask);
    }

    #[test]
    fn diagonal_neighbours_are_one_component_and_islands_in_holes_are_their_own() {
        let (mask, w, h) = from_rows(&[
            "#.......", ".#......", "..#####.", "..#...#.", "..#.#.#.", "..#...#.", "..#####.",
        ]);
        let p = polygons(&mask, w, h, 0.0);
        // The diagonal run joins the frame (8-connected); the island in the hole is its own.
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].holes.len(), 1);
        assert!(p[1].holes.is_empty());
        assert_eq!(rasterize(&p, w, h), mask);
    }

    #[test]
    fn random_masks_rasterise_back_exactly_at_tolerance_zero() {
        let mut state = 9u64;
        for (w, h) in [(1, 1), (17, 9), (40, 33), (64, 1)] {
            let mask: Vec<u8> = (0..w * h)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((state >> 61) < 4) as u8
                })
                .collect();
            let p = polygons(&mask, w, h, 0.0);
            assert_eq!(rasterize(&p, w, h), mask, "{w}x{h}");
        }
    }

    /// 8-connected component sizes by flood fill, in raster order of their first pixel.
    fn component_sizes(mask: &[u8], w: usize, h: usize) -> Vec<usize> {
        let mut seen = vec![false; mask.len()];
        let mut sizes = Vec::new();
        for start in 0..mask.len() {
            if mask[start] == 0 || seen[start] {
                continue;
            }
            let (mut stack, mut size) = (vec![start], 0);
            seen[start] = true;
            while let Some(i) = stack.pop() {
                size += 1;
                let (x, y) = ((i % w) as i64, (i / w) as i64);
                for (dx, dy) in (-1..=1).flat_map(|dx| (-1..=1).map(move |dy| (dx, dy))) {
                    let (nx, ny) = (x + dx, y + dy);
                    if nx >= 0 && ny >= 0 && nx < w as i64 && ny < h as i64 {
                        let j = ny as usize * w + nx as usize;
                        if mask[j] != 0 && !seen[j] {
                            seen[j] = true;
                            stack.push(j);
                        }
                    }
                }
            }
            sizes.push(size);
        }
        sizes
    }

    fn area(ring: &[[f32; 2]]) -> f64 {
        let n = ring.len();
        (0..n)
            .map(|i| {
                let (a, b) = (ring[i], ring[(i + 1) % n]);
                (a[0] as f64 * b[1] as f64 - b[0] as f64 * a[1] as f64) / 2.0
            })
            .sum()
    }

    #[test]
    fn each_component_is_its_outer_ring_less_its_holes() {
        let mut state = 3u64;
        for (w, h, density) in [(30, 20, 5), (64, 48, 4), (50, 50, 3), (7, 90, 4)] {
            let mask: Vec<u8> = (0..w * h)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((state >> 61) < density) as u8
                })
                .collect();
            let p = polygons(&mask, w, h, 0.0);
            let sizes = component_sizes(&mask, w, h);
            assert_eq!(p.len(), sizes.len(), "{w}x{h}: one polygon per component");
            for (polygon, &size) in p.iter().zip(&sizes) {
                assert!(
                    area(&polygon.outer) > 0.0,
                    "outer rings are clockwise on screen"
                );
                let holes: f64 = polygon.holes.iter().map(|r| area(r)).sum();
                assert!(
                    polygon.holes.iter().all(|r| area(r) < 0.0),
                    "holes turn the other way"
                );
                assert_eq!(area(&polygon.outer) + holes, size as f64, "{w}x{h}");
            }
        }
    }

    #[test]
    fn simplification_drops_vertices_and_stays_close() {
        // A disc of radius 40: its staircase outline has hundreds of corners.
        let (w, h) = (100, 100);
        let mask: Vec<u8> = (0..w * h)
            .map(|i| {
                let (x, y) = ((i % w) as f64 + 0.5 - 50.0, (i / w) as f64 + 0.5 - 50.0);
                (x * x + y * y <= 1600.0) as u8
            })
            .collect();
        let exact = polygons(&mask, w, h, 0.0);
        let simple = polygons(&mask, w, h, 1.0);
        assert!(simple[0].outer.len() * 3 < exact[0].outer.len());
        let back = rasterize(&simple, w, h);
        let both = back
            .iter()
            .zip(&mask)
            .filter(|(a, b)| **a & **b != 0)
            .count();
        let either = back
            .iter()
            .zip(&mask)
            .filter(|(a, b)| **a | **b != 0)
            .count();
        assert!(both as f64 / either as f64 > 0.97);
        assert!(polygons(&[0; 12], 4, 3, 0.0).is_empty());
    }
}
