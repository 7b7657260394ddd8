// Stages 5 + 6: per-tile range lookup and tiled front-to-back rasterisation.
// One workgroup per 16x16 tile (dispatch tiles_x x tiles_y), one thread per pixel.
// The tile's range in the sorted intersection list is found by binary search on the sorted tile
// ids (so no separate "tile ranges" dispatch and no clearing pass) and written to ranges[] for the
// backward pass. Splats are loaded in batches of 256 into workgroup memory (3 x 4 KiB); the
// workgroup stops as soon as every pixel is done (T < 1e-4), a workgroup-uniform decision made
// with workgroupUniformLoad. For the backward pass we keep final_T and last_contrib
// (1 + position within the tile's range of the last composited splat, 0 if none).

#include "common.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> splats: array<Splat2D>;
@group(0) @binding(2) var<storage, read> isect_keys: array<u32>;
@group(0) @binding(3) var<storage, read> isect_vals: array<u32>;
@group(0) @binding(4) var<storage, read> counters: array<u32>;
@group(0) @binding(5) var<storage, read_write> image: array<f32>;
@group(0) @binding(6) var<storage, read_write> final_t: array<f32>;
@group(0) @binding(7) var<storage, read_write> last_contrib: array<u32>;
@group(0) @binding(8) var<storage, read_write> ranges: array<vec2<u32>>;

var<workgroup> s_xy_op: array<vec4<f32>, 256>;    // x, y, opacity, -
var<workgroup> s_conic: array<vec4<f32>, 256>;    // a, b, c, -
var<workgroup> s_color: array<vec4<f32>, 256>;    // r, g, b, -
var<workgroup> s_range: vec2<u32>;
var<workgroup> s_done: atomic<u32>;
var<workgroup> s_done_plain: u32;

fn lower_bound(value: u32, count: u32) -> u32 {
    var lo = 0u;
    var hi = count;
    while (lo < hi) {
        let mid = (lo + hi) >> 1u;
        if (isect_keys[mid] < value) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo;
}

@compute @workgroup_size(16, 16)
fn rasterize(@builtin(local_invocation_id) lid: vec3<u32>,
             @builtin(local_invocation_index) li: u32,
             @builtin(workgroup_id) wid: vec3<u32>) {
    let width = rp.img.x;
    let height = rp.img.y;
    let tile = wid.y * rp.img.z + wid.x;
    if (li == 0u) {
        let count = counters[1];
        let r = vec2<u32>(lower_bound(tile, count), lower_bound(tile + 1u, count));
        s_range = r;
        ranges[tile] = r;
        atomicStore(&s_done, 0u);
    }
    let range = workgroupUniformLoad(&s_range);

    let px = wid.x * TILE_SIZE + lid.x;
    let py = wid.y * TILE_SIZE + lid.y;
    let inside = px < width && py < height;
    let pix = vec2<f32>(f32(px) + 0.5, f32(py) + 0.5);
    var t = 1.0;
    var c = vec3<f32>(0.0);
    var last = 0u;
    var done = !inside;
    if (done) {
        atomicAdd(&s_done, 1u);
    }
    let n = range.y - range.x;
    let n_batches = (n + 255u) / 256u;
    for (var b = 0u; b < n_batches; b = b + 1u) {
        workgroupBarrier();
        if (li == 0u) {
            s_done_plain = atomicLoad(&s_done);
        }
        if (workgroupUniformLoad(&s_done_plain) >= 256u) {
            break;
        }
        let idx = range.x + b * 256u + li;
        if (idx < range.y) {
            let s = splats[isect_vals[idx]];
            s_xy_op[li] = vec4<f32>(s.xy, s.opacity, 0.0);
            s_conic[li] = vec4<f32>(s.conic, 0.0);
            s_color[li] = vec4<f32>(s.color, 0.0);
        }
        workgroupBarrier();
        if (!done) {
            let nb = min(256u, n - b * 256u);
            for (var k = 0u; k < nb; k = k + 1u) {
                let xo = s_xy_op[k];
                let cn = s_conic[k];
                let d = pix - xo.xy;
                let power = -0.5 * (cn.x * d.x * d.x + cn.z * d.y * d.y) - cn.y * d.x * d.y;
                if (power > 0.0) {
                    continue;
                }
                let alpha = min(ALPHA_MAX, xo.z * exp(power));
                if (alpha < ALPHA_MIN) {
                    continue;
                }
                let test_t = t * (1.0 - alpha);
                if (test_t < T_MIN) {
                    done = true;
                    break;
                }
                c = c + s_color[k].xyz * (alpha * t);
                t = test_t;
                last = b * 256u + k + 1u;
            }
            if (done) {
                atomicAdd(&s_done, 1u);
            }
        }
    }
    if (inside) {
        let p = py * width + px;
        let bg = rp.background.xyz;
        image[3u * p] = c.x + t * bg.x;
        image[3u * p + 1u] = c.y + t * bg.y;
        image[3u * p + 2u] = c.z + t * bg.z;
        final_t[p] = t;
        last_contrib[p] = last;
    }
}
