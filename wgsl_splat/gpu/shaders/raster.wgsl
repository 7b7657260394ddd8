// docs/design.md §3 stage 4: tiled front-to-back rasterisation.
//
// One workgroup per 16x16 tile (dispatch tiles_x x tiles_y). Thread (x, y) of the workgroup owns
// ROWS pixels of each of its COLS columns (raster_tile.wgsl) and evaluates each splat for all of
// them with branch-free vec4 math: the splat's workgroup-memory load is shared by ROWS x COLS
// evaluations. ROWS = 4, COLS = 1 on GPUs (64 threads per tile); ROWS = 16, COLS = 2 on CPU
// adapters such as lavapipe (8 threads per tile), where a workgroup-memory load costs far more
// than the arithmetic (measured: one pixel per thread was 8x slower, four pixels per thread 2x
// slower than sixteen).
//
// The tile's range in the sorted intersection list comes from scan.wgsl (ranges[tile]). Splats
// are loaded in batches of BATCH into workgroup memory (3 x 16 B per splat); the workgroup stops
// as soon as every pixel is done (T < 1e-4), a workgroup-uniform decision taken with
// workgroupUniformLoad. For the backward pass we keep, per pixel, last_contrib (1 + position
// within the tile's range of the last composited splat, 0 if none) and after the image's H*W of
// those the final transmittance (its f32 bits): one buffer, so that raster backward, which also
// binds the splats and their gradients in two buffers each, stays within 8 storage bindings.

#include "common.wgsl"
#include "raster_tile.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> splats: array<Splat2D>;
@group(0) @binding(2) var<storage, read> isect_ids: array<u32>;
@group(0) @binding(3) var<storage, read> ranges: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> image: array<f32>;
@group(0) @binding(6) var<storage, read_write> last_contrib: array<u32>;
@group(0) @binding(7) var<storage, read> splats_hi: array<Splat2D>;

#include "splat_windows.wgsl"

const LOADS: u32 = BATCH / THREADS;            // BATCH is a multiple of THREADS here
const SKIP: bool = {{SKIP}};                   // branch around untouched pixel groups (GPUs)

var<workgroup> s_done: atomic<u32>;
var<workgroup> s_done_plain: u32;

// One vec4 group of a thread's pixels (four rows of its column). Private arrays indexed by a loop
// counter become scratch memory on CPU drivers (the same change in the backward pass took it from
// 120 to 72 ms on lavapipe), so the groups are separate variables handled by the functions below.
struct PixelGroup {
    rows: vec4<u32>,
    fy: vec4<f32>,            // pixel-centre rows
    inside: vec4<bool>,       // inside the image
    t: vec4<f32>,             // transmittance
    cr: vec4<f32>,            // accumulated colour
    cg: vec4<f32>,
    cb: vec4<f32>,
    last: vec4<u32>,          // 1-based position of the last composited splat (0: none)
    done: vec4<bool>,         // stopped (T would drop below T_MIN), or outside the image
}

fn init_group(tile_y: u32, lid_y: u32, gi: u32, px: u32, width: u32, height: u32) -> PixelGroup {
    var p: PixelGroup;
    p.rows = group_rows(tile_y, lid_y, gi);
    p.fy = vec4<f32>(p.rows) + vec4<f32>(0.5);
    p.inside = vec4<bool>(px < width) & (p.rows < vec4<u32>(height));
    p.t = vec4<f32>(1.0);
    p.cr = vec4<f32>(0.0);
    p.cg = vec4<f32>(0.0);
    p.cb = vec4<f32>(0.0);
    p.last = vec4<u32>(0u);
    p.done = !p.inside;
    return p;
}

// Composite the staged splat (g, oc, col; 1-based position pos) onto one pixel group.
fn splat_group(p: ptr<function, PixelGroup>, g: vec4<f32>, oc: vec4<f32>, col: vec4<f32>,
               dx: f32, pos: u32) {
    let dy = (*p).fy - vec4<f32>(g.y);
    let power = splat_power(g, oc, dx, dy);
    let alpha = min(vec4<f32>(ALPHA_MAX), oc.y * exp(power));
    let valid = !(*p).done & (power <= vec4<f32>(0.0)) & (alpha >= vec4<f32>(ALPHA_MIN));
    if (!SKIP || any(valid)) {
        let test_t = (*p).t * (vec4<f32>(1.0) - alpha);
        let stop = valid & (test_t < vec4<f32>(T_MIN));
        let comp = valid & !stop;
        (*p).done = (*p).done | stop;
        let w = select(vec4<f32>(0.0), alpha * (*p).t, comp);
        (*p).cr = (*p).cr + w * col.x;
        (*p).cg = (*p).cg + w * col.y;
        (*p).cb = (*p).cb + w * col.z;
        (*p).t = select((*p).t, test_t, comp);
        (*p).last = select((*p).last, vec4<u32>(pos), comp);
    }
}

fn store_group(p: PixelGroup, px: u32, width: u32, bg: vec3<f32>) {
    for (var j = 0u; j < 4u; j = j + 1u) {
        if (p.inside[j]) {
            let q = p.rows[j] * width + px;
            let tt = p.t[j];
            image[3u * q] = p.cr[j] + tt * bg.x;
            image[3u * q + 1u] = p.cg[j] + tt * bg.y;
            image[3u * q + 2u] = p.cb[j] + tt * bg.z;
            last_contrib[q] = p.last[j];
            last_contrib[rp.img.x * rp.img.y + q] = bitcast<u32>(tt);
        }
    }
}

// Composite the staged splat onto every pixel group of one column (dx: the column's offset from
// the splat's mean); returns whether all of the column's pixels are done.
fn splat_column(g0: ptr<function, PixelGroup>, g1: ptr<function, PixelGroup>,
                g2: ptr<function, PixelGroup>, g3: ptr<function, PixelGroup>,
                g: vec4<f32>, oc: vec4<f32>, col: vec4<f32>, dx: f32, pos: u32) -> bool {
    splat_group(g0, g, oc, col, dx, pos);
    var all_done = all((*g0).done);
    if (GROUPS > 1u) {
        splat_group(g1, g, oc, col, dx, pos);
        all_done = all_done && all((*g1).done);
    }
    if (GROUPS > 2u) {
        splat_group(g2, g, oc, col, dx, pos);
        splat_group(g3, g, oc, col, dx, pos);
        all_done = all_done && all((*g2).done) && all((*g3).done);
    }
    return all_done;
}

fn column_done(g0: PixelGroup, g1: PixelGroup, g2: PixelGroup, g3: PixelGroup) -> bool {
    var d = all(g0.done);
    if (GROUPS > 1u) {
        d = d && all(g1.done);
    }
    if (GROUPS > 2u) {
        d = d && all(g2.done) && all(g3.done);
    }
    return d;
}

fn store_column(g0: PixelGroup, g1: PixelGroup, g2: PixelGroup, g3: PixelGroup, px: u32,
                width: u32, bg: vec3<f32>) {
    store_group(g0, px, width, bg);
    if (GROUPS > 1u) {
        store_group(g1, px, width, bg);
    }
    if (GROUPS > 2u) {
        store_group(g2, px, width, bg);
        store_group(g3, px, width, bg);
    }
}

@compute @workgroup_size({{THREADS_X}}, {{THREADS_Y}})
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

    // Pixel groups: a0..a3 of the first column, b0..b3 of the second (COLS = 2); the ones beyond
    // GROUPS and COLS are never touched.
    let px_a = tile_column(wid.x, lid.x, 0u);
    let px_b = tile_column(wid.x, lid.x, 1u);
    let fx_a = f32(px_a) + 0.5;
    let fx_b = f32(px_b) + 0.5;
    var a0 = init_group(wid.y, lid.y, 0u, px_a, width, height);
    var a1: PixelGroup;
    var a2: PixelGroup;
    var a3: PixelGroup;
    var b0: PixelGroup;
    var b1: PixelGroup;
    var b2: PixelGroup;
    var b3: PixelGroup;
    if (GROUPS > 1u) {
        a1 = init_group(wid.y, lid.y, 1u, px_a, width, height);
    }
    if (GROUPS > 2u) {
        a2 = init_group(wid.y, lid.y, 2u, px_a, width, height);
        a3 = init_group(wid.y, lid.y, 3u, px_a, width, height);
    }
    var thread_done = column_done(a0, a1, a2, a3);
    if (COLS > 1u) {
        b0 = init_group(wid.y, lid.y, 0u, px_b, width, height);
        if (GROUPS > 1u) {
            b1 = init_group(wid.y, lid.y, 1u, px_b, width, height);
        }
        if (GROUPS > 2u) {
            b2 = init_group(wid.y, lid.y, 2u, px_b, width, height);
            b3 = init_group(wid.y, lid.y, 3u, px_b, width, height);
        }
        thread_done = thread_done && column_done(b0, b1, b2, b3);
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
                stage_splat(j, splat_at(isect_ids[idx]));
            }
        }
        workgroupBarrier();
        if (!thread_done) {
            // each staged splat is loaded once for all of the thread's pixels: on a CPU driver a
            // workgroup-memory load costs more than the evaluations per-band lists would skip
            // (docs/benchmarks.md, "Row bands in the rasteriser, measured again")
            let nb = min(BATCH, n - b * BATCH);
            for (var k = 0u; k < nb; k = k + 1u) {
                let g = s_geo[k];
                let oc = s_opc[k];
                let col = s_col[k];
                let pos = b * BATCH + k + 1u;
                var all_done = splat_column(&a0, &a1, &a2, &a3, g, oc, col, fx_a - g.x, pos);
                if (COLS > 1u) {
                    all_done = splat_column(&b0, &b1, &b2, &b3, g, oc, col, fx_b - g.x, pos)
                               && all_done;
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
    store_column(a0, a1, a2, a3, px_a, width, bg);
    if (COLS > 1u) {
        store_column(b0, b1, b2, b3, px_b, width, bg);
    }
}
