// Stage 6: tiled front-to-back rasterisation.
//
// One workgroup per 16x16 tile (dispatch tiles_x x tiles_y). Thread (x, y) of the workgroup owns
// ROWS pixels of column x (rows y, y + 16/ROWS, ...) and evaluates each splat for all of them with
// branch-free vec4 math: the splat's workgroup-memory load is shared by ROWS evaluations. ROWS is
// 4 on GPUs (64 threads per tile) and 16 on CPU adapters such as lavapipe (16 threads per tile),
// where a workgroup-memory load costs far more than the arithmetic (measured: one pixel per thread
// was 8x slower, four pixels per thread 2x slower than sixteen).
//
// The tile's range in the sorted intersection list comes from scan.wgsl (ranges[tile]). Splats
// are loaded in batches of BATCH into workgroup memory (3 x 16 B per splat); the workgroup stops
// as soon as every pixel is done (T < 1e-4), a workgroup-uniform decision taken with
// workgroupUniformLoad. For the backward pass we keep final_T and last_contrib (1 + position
// within the tile's range of the last composited splat, 0 if none).

#include "common.wgsl"
#include "raster_tile.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> splats: array<Splat2D>;
@group(0) @binding(2) var<storage, read> isect_ids: array<u32>;
@group(0) @binding(3) var<storage, read> ranges: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> image: array<f32>;
@group(0) @binding(5) var<storage, read_write> final_t: array<f32>;
@group(0) @binding(6) var<storage, read_write> last_contrib: array<u32>;

const LOADS: u32 = BATCH / THREADS;            // BATCH is a multiple of THREADS here
const SKIP: bool = {{SKIP}};                   // branch around untouched pixel groups (GPUs)

var<workgroup> s_done: atomic<u32>;
var<workgroup> s_done_plain: u32;

@compute @workgroup_size(16, {{THREADS_Y}})
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
    let fx = f32(px) + 0.5;
    var pys: array<vec4<u32>, GROUPS>;
    var fy: array<vec4<f32>, GROUPS>;
    var inside: array<vec4<bool>, GROUPS>;
    var t: array<vec4<f32>, GROUPS>;
    var cr: array<vec4<f32>, GROUPS>;
    var cg: array<vec4<f32>, GROUPS>;
    var cb: array<vec4<f32>, GROUPS>;
    var last: array<vec4<u32>, GROUPS>;
    var done: array<vec4<bool>, GROUPS>;
    var thread_done = true;
    for (var gi = 0u; gi < GROUPS; gi = gi + 1u) {
        pys[gi] = group_rows(wid.y, lid.y, gi);
        fy[gi] = vec4<f32>(pys[gi]) + vec4<f32>(0.5);
        inside[gi] = vec4<bool>(px < width) & (pys[gi] < vec4<u32>(height));
        t[gi] = vec4<f32>(1.0);
        cr[gi] = vec4<f32>(0.0);
        cg[gi] = vec4<f32>(0.0);
        cb[gi] = vec4<f32>(0.0);
        last[gi] = vec4<u32>(0u);
        done[gi] = !inside[gi];
        thread_done = thread_done && all(done[gi]);
    }
    if (thread_done) {
        atomicAdd(&s_done, 1u);
    }
    let n = range.y - range.x;
    let n_batches = (n + BATCH - 1u) / BATCH;
    for (var b = 0u; b < n_batches; b = b + 1u) {
        workgroupBarrier();
        if (li == 0u) {
            s_done_plain = atomicLoad(&s_done);
        }
        if (workgroupUniformLoad(&s_done_plain) >= THREADS) {
            break;
        }
        for (var q = 0u; q < LOADS; q = q + 1u) {
            let j = q * THREADS + li;
            let idx = range.x + b * BATCH + j;
            if (idx < range.y) {
                stage_splat(j, splats[isect_ids[idx]]);
            }
        }
        workgroupBarrier();
        if (!thread_done) {
            let nb = min(BATCH, n - b * BATCH);
            for (var k = 0u; k < nb; k = k + 1u) {
                let g = s_geo[k];
                let oc = s_opc[k];
                let dx = fx - g.x;
                let pos = b * BATCH + k + 1u;
                var all_done = true;
                for (var gi = 0u; gi < GROUPS; gi = gi + 1u) {
                    let dy = fy[gi] - vec4<f32>(g.y);
                    let power = splat_power(g, oc, dx, dy);
                    let alpha = min(vec4<f32>(ALPHA_MAX), oc.y * exp(power));
                    let valid = !done[gi] & (power <= vec4<f32>(0.0)) &
                                (alpha >= vec4<f32>(ALPHA_MIN));
                    if (!SKIP || any(valid)) {
                        let test_t = t[gi] * (vec4<f32>(1.0) - alpha);
                        let stop = valid & (test_t < vec4<f32>(T_MIN));
                        let comp = valid & !stop;
                        done[gi] = done[gi] | stop;
                        let w = select(vec4<f32>(0.0), alpha * t[gi], comp);
                        let col = s_col[k];
                        cr[gi] = cr[gi] + w * col.x;
                        cg[gi] = cg[gi] + w * col.y;
                        cb[gi] = cb[gi] + w * col.z;
                        t[gi] = select(t[gi], test_t, comp);
                        last[gi] = select(last[gi], vec4<u32>(pos), comp);
                    }
                    all_done = all_done && all(done[gi]);
                }
                if (all_done) {
                    thread_done = true;
                    break;
                }
            }
            if (thread_done) {
                atomicAdd(&s_done, 1u);
            }
        }
    }
    let bg = rp.background.xyz;
    for (var gi = 0u; gi < GROUPS; gi = gi + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) {
            if (inside[gi][j]) {
                let p = pys[gi][j] * width + px;
                let tt = t[gi][j];
                image[3u * p] = cr[gi][j] + tt * bg.x;
                image[3u * p + 1u] = cg[gi][j] + tt * bg.y;
                image[3u * p + 2u] = cb[gi][j] + tt * bg.z;
                final_t[p] = tt;
                last_contrib[p] = last[gi][j];
            }
        }
    }
}
