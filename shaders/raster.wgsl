// Stage 6: tiled front-to-back rasterisation.
//
// One workgroup per 16x16 tile (dispatch tiles_x x tiles_y) of 64 threads; thread (x, y) owns the
// four pixels (x, y + 4m), m = 0..3, and evaluates a splat for all four at once with vec4 math.
// (Four pixels per thread amortise each splat's workgroup-memory load over four evaluations, and
// the branch-free vec4 form runs well both on GPUs and on CPU drivers such as lavapipe, where a
// per-pixel thread with data-dependent branches was 3-4x slower.)
//
// The tile's range in the sorted intersection list comes from scan.wgsl (ranges[tile]). Splats
// are loaded in batches of 64 into workgroup memory (3 KiB); the workgroup
// stops as soon as every pixel is done (T < 1e-4), a workgroup-uniform decision taken with
// workgroupUniformLoad. For the backward pass we keep final_T and last_contrib (1 + position
// within the tile's range of the last composited splat, 0 if none).

#include "common.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> splats: array<Splat2D>;
@group(0) @binding(2) var<storage, read> isect_ids: array<u32>;
@group(0) @binding(3) var<storage, read> ranges: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> image: array<f32>;
@group(0) @binding(5) var<storage, read_write> final_t: array<f32>;
@group(0) @binding(6) var<storage, read_write> last_contrib: array<u32>;

const RASTER_THREADS: u32 = 64u;
const ROWS: u32 = 4u;               // pixel rows per thread (16 / 4 threads in y)

var<workgroup> s_geo: array<vec4<f32>, 64>;      // x, y, conic a, conic b
var<workgroup> s_opc: array<vec4<f32>, 64>;      // conic c, opacity, -, -
var<workgroup> s_col: array<vec4<f32>, 64>;      // r, g, b, -
var<workgroup> s_range: vec2<u32>;
var<workgroup> s_done: atomic<u32>;
var<workgroup> s_done_plain: u32;

@compute @workgroup_size(16, 4)
fn rasterize(@builtin(local_invocation_id) lid: vec3<u32>,
             @builtin(local_invocation_index) li: u32,
             @builtin(workgroup_id) wid: vec3<u32>) {
    let width = rp.img.x;
    let height = rp.img.y;
    let tile = wid.y * rp.img.z + wid.x;
    if (li == 0u) {
        s_range = ranges[tile];
        atomicStore(&s_done, 0u);
    }
    let range = workgroupUniformLoad(&s_range);

    let px = wid.x * TILE_SIZE + lid.x;
    let py0 = wid.y * TILE_SIZE + lid.y;
    let pys = vec4<u32>(py0, py0 + 4u, py0 + 8u, py0 + 12u);
    let inside = vec4<bool>(px < width) & (pys < vec4<u32>(height));
    let fx = f32(px) + 0.5;
    let fy = vec4<f32>(pys) + vec4<f32>(0.5);
    var t = vec4<f32>(1.0);
    var cr = vec4<f32>(0.0);
    var cg = vec4<f32>(0.0);
    var cb = vec4<f32>(0.0);
    var last = vec4<u32>(0u);
    var done = !inside;
    var thread_done = all(done);
    if (thread_done) {
        atomicAdd(&s_done, 1u);
    }
    let n = range.y - range.x;
    let n_batches = (n + RASTER_THREADS - 1u) / RASTER_THREADS;
    for (var b = 0u; b < n_batches; b = b + 1u) {
        workgroupBarrier();
        if (li == 0u) {
            s_done_plain = atomicLoad(&s_done);
        }
        if (workgroupUniformLoad(&s_done_plain) >= RASTER_THREADS) {
            break;
        }
        let idx = range.x + b * RASTER_THREADS + li;
        if (idx < range.y) {
            let s = splats[isect_ids[idx]];
            s_geo[li] = vec4<f32>(s.xy, s.conic.x, s.conic.y);
            s_opc[li] = vec4<f32>(s.conic.z, s.opacity, 0.0, 0.0);
            s_col[li] = vec4<f32>(s.color, 0.0);
        }
        workgroupBarrier();
        if (!thread_done) {
            let nb = min(RASTER_THREADS, n - b * RASTER_THREADS);
            for (var k = 0u; k < nb; k = k + 1u) {
                let g = s_geo[k];
                let oc = s_opc[k];
                let dx = fx - g.x;
                let dy = fy - vec4<f32>(g.y);
                let power = -0.5 * (g.z * dx * dx + oc.x * dy * dy) - g.w * dx * dy;
                let alpha = min(vec4<f32>(ALPHA_MAX), oc.y * exp(power));
                let valid = !done & (power <= vec4<f32>(0.0)) & (alpha >= vec4<f32>(ALPHA_MIN));
                if (!any(valid)) {
                    continue;
                }
                let test_t = t * (vec4<f32>(1.0) - alpha);
                let stop = valid & (test_t < vec4<f32>(T_MIN));
                let comp = valid & !stop;
                done = done | stop;
                let w = select(vec4<f32>(0.0), alpha * t, comp);
                let col = s_col[k];
                cr = cr + w * col.x;
                cg = cg + w * col.y;
                cb = cb + w * col.z;
                t = select(t, test_t, comp);
                last = select(last, vec4<u32>(b * RASTER_THREADS + k + 1u), comp);
                if (all(done)) {
                    break;
                }
            }
            if (all(done)) {
                thread_done = true;
                atomicAdd(&s_done, 1u);
            }
        }
    }
    let bg = rp.background.xyz;
    for (var m = 0u; m < ROWS; m = m + 1u) {
        if (inside[m]) {
            let p = pys[m] * width + px;
            image[3u * p] = cr[m] + t[m] * bg.x;
            image[3u * p + 1u] = cg[m] + t[m] * bg.y;
            image[3u * p + 2u] = cb[m] + t[m] * bg.z;
            final_t[p] = t[m];
            last_contrib[p] = last[m];
        }
    }
}
