// The tile layout shared by rasterisation (raster.wgsl) and its backward pass
// (raster_backward.wgsl). One workgroup per 16x16 tile, THREADS_X x THREADS_Y threads: thread
// (x, y) owns ROWS pixels of each of its COLS columns (x, x + THREADS_X; tile_column) as GROUPS
// vec4 groups per column (rows from group_rows). The splats of the current batch are staged in
// workgroup memory, 3 x 16 bytes each.
//
// COLS = 2 on CPU adapters: lavapipe pays per SIMD row of 8 lanes and per splat for the staged
// splat's loads and the per-splat sums of the backward pass, so one row of 8 threads doing two
// columns each does that work once per splat instead of twice.

const ROWS: u32 = {{ROWS}}u;                  // pixels per thread and column: 4, 8 or 16
const COLS: u32 = {{COLS}}u;                  // columns per thread: 1 or 2
const GROUPS: u32 = ROWS / 4u;                // vec4 groups of pixels per column
const THREADS_X: u32 = TILE_SIZE / COLS;
const THREADS_Y: u32 = TILE_SIZE / ROWS;
const THREADS: u32 = THREADS_X * THREADS_Y;
const BATCH: u32 = {{BATCH}}u;                // splats staged at a time

var<workgroup> s_geo: array<vec4<f32>, BATCH>;   // x, y, conic a, conic b
var<workgroup> s_opc: array<vec4<f32>, BATCH>;   // conic c, opacity, -, -
var<workgroup> s_col: array<vec4<f32>, BATCH>;   // r, g, b, -
var<workgroup> s_range: vec2<u32>;

fn stage_splat(j: u32, s: Splat2D) {
    s_geo[j] = vec4<f32>(s.xy, s.conic.x, s.conic.y);
    s_opc[j] = vec4<f32>(s.conic.z, s.opacity, 0.0, 0.0);
    s_col[j] = vec4<f32>(s.color, 0.0);
}

// Pixel column c (< COLS) of the thread in thread column lid_x of tile column tile_x.
fn tile_column(tile_x: u32, lid_x: u32, c: u32) -> u32 {
    return tile_x * TILE_SIZE + lid_x + THREADS_X * c;
}

// Pixel rows of vec4 group gi of the thread in thread row lid_y: lid_y + THREADS_Y * (4 gi + j),
// j = 0..3.
fn group_rows(tile_y: u32, lid_y: u32, gi: u32) -> vec4<u32> {
    let r0 = tile_y * TILE_SIZE + lid_y + THREADS_Y * 4u * gi;
    return vec4<u32>(r0, r0 + THREADS_Y, r0 + 2u * THREADS_Y, r0 + 3u * THREADS_Y);
}

// Exponent of the staged splat's falloff at this thread's pixels: dx is the column's offset from the
// mean, dy the four rows' offsets; power = -½(a dx² + c dy²) - b dx dy with conic (a, b, c)
// = (g.z, g.w, oc.x). Both passes evaluate exactly this expression.
fn splat_power(g: vec4<f32>, oc: vec4<f32>, dx: f32, dy: vec4<f32>) -> vec4<f32> {
    return -0.5 * (g.z * dx * dx + oc.x * dy * dy) - g.w * dx * dy;
}
