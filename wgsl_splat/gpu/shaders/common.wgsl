// Shared constants and structs of the splatting pipeline (included once per module).
// Conventions: docs/design.md §2 (OpenCV camera, pixel centres at integer + 0.5, 16x16 tiles).

// The render constants (tile size, near plane, dilation, alpha limits, T_MIN, the mode) come from
// wgsl_splat/render_config.py: the loader generates this include from the module's RenderConfig.
#include "render_config.wgsl"

const BLOCK_SIZE: u32 = 256u;          // threads per workgroup of the 1D per-splat kernels

// Per-render uniforms (written once per render with queue.write_buffer).
struct RenderParams {
    w2c0: vec4<f32>,          // rows of the world-to-camera [R | t]
    w2c1: vec4<f32>,
    w2c2: vec4<f32>,
    cam_pos: vec4<f32>,       // camera centre in world coordinates
    focal: vec4<f32>,         // fx, fy, cx, cy
    clip: vec4<f32>,          // lim_x = frustum_clamp·tan_half_fov_x, lim_y, unused, unused
    background: vec4<f32>,    // rgb, unused
    img: vec4<u32>,           // width, height, tiles_x, tiles_y
    model: vec4<u32>,         // N, K (SH coefficients stored per splat), active SH degree, capacity
    offs: vec4<u32>,          // float offsets in params[]: log_scales, quats, opacity logits, sh
    grid: vec4<u32>,          // x: first row of the page a per-Gaussian dispatch runs on, y: N,
                              // z: emission chunks, w: splat ids in the first splat binding
                              // (gpu/pages.py)
}

// Projected splat, 48 bytes; what rasterisation (and its backward pass) reads per splat.
struct Splat2D {
    xy: vec2<f32>,            // pixel coordinates of the projected mean
    depth: f32,               // camera-space z
    opacity: f32,             // sigmoid(logit), times the filters' compensations (antialiased)
    conic: vec3<f32>,         // (a, b, c) of the inverse 2D covariance [[a, b], [b, c]]
    radius: f32,              // pixel radius (0 = culled)
    color: vec3<f32>,         // max(SH(dir) + 0.5, 0)
    flags: u32,               // bit c set: colour channel c was clamped at 0
}

// Counters written on the GPU by scan.wgsl.
// [0] total intersections, [1] count actually emitted = min(total, capacity),
// [2] padded sort size P = max(next_pow2(count), SORT_BLOCK), [3] 1 if total > capacity.
// SORT_BLOCK is the workgroup block of sort.wgsl.
const SORT_BLOCK: u32 = 1024u;

// The largest q = dᵀ·conic·d at which a splat of this opacity can still reach ALPHA_MIN, widened by
// the tile test's margin (reference: projection.tile_q_bound): beyond it α is below ALPHA_MIN by a
// clear margin. Emission (tile_hit) tests against it.
// The id of an intersection slot that emission could not fill (emit.wgsl); splat_at reads it as
// a splat that covers nothing, and no gradient is ever added at it.
const NULL_SPLAT: u32 = 0xffffffffu;

fn alpha_q_bound(opacity: f32) -> f32 {
    return 2.0 * log(opacity / ALPHA_MIN) * (1.0 + TILE_TEST_MARGIN) + TILE_TEST_MARGIN;
}

fn linear_workgroup(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}


