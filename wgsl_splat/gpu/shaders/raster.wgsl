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
// workgroupUniformLoad. With more than one vec4 group per column (CPU layout), each group walks
// only the batch's splats listed for its band of rows (build_band_list). For the backward pass we
// keep, per pixel, last_contrib (1 + position within the tile's range of the last composited
// splat, 0 if none) and after the image's H*W of those the final transmittance (its f32 bits): one
// buffer, so that raster backward, which also binds the splats and their gradients in two buffers
// each, stays within 8 storage bindings.

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

// How far from the mean, in rows, the splat's alpha can still reach ALPHA_MIN: on the row at
// offset dy the least q = dᵀ·conic·d is dy² / Σyy (Σ = conic⁻¹, Σyy = a / det), so beyond
// sqrt(alpha_q_bound · Σyy) every pixel fails the alpha test with the emission's margin: a band
// the splat is not listed for holds no pixel it composites onto, and the bands change no result.
// Not finite (a degenerate conic): every band.
fn row_reach(conic: vec3<f32>, opacity: f32) -> f32 {
    let det = conic.x * conic.z - conic.y * conic.y;
    let reach = sqrt(max(alpha_q_bound(opacity), 0.0) * conic.x / det);
    return select(3.0e38, reach, det > 0.0 && reach < 3.0e38);
}

// Bands: with GROUPS > 1, vec4 group gi of every thread covers rows [gi, gi + 1) · BAND_ROWS of the
// tile, and each batch lists per band the staged splats whose rows reach it (build_band_list), so
// that a group only evaluates those (on lavapipe a masked-out branch still costs its body; a
// shorter loop does not). Lists hold 8-bit batch positions, four to a word, front to back. The
// GPU layout (one group) has one band and lists nothing: its arrays have one element.
const BANDED: bool = GROUPS > 1u;
const BAND_ROWS: u32 = TILE_SIZE / GROUPS;
const BAND_WORDS: u32 = (BATCH + 3u) / 4u;
const BAND_ON: u32 = select(0u, 1u, BANDED);

var<workgroup> s_band: array<u32, GROUPS * (1u + (BAND_WORDS - 1u) * BAND_ON)>;
var<workgroup> s_band_n: array<u32, GROUPS>;
var<workgroup> s_bmask: array<u32, 1u + (BATCH - 1u) * BAND_ON>;   // bands of each staged splat

// The bands (bit gi) of tile row tile_y that a splat with mean row my and row reach touches.
fn band_mask(tile_y: u32, my: f32, reach: f32) -> u32 {
    var m = 0u;
    for (var gi = 0u; gi < GROUPS; gi = gi + 1u) {
        let y0 = f32(tile_y * TILE_SIZE + gi * BAND_ROWS) + 0.5;
        let y1 = y0 + f32(BAND_ROWS - 1u);
        if (abs(clamp(my, y0, y1) - my) <= reach) {
            m = m | (1u << gi);
        }
    }
    return m;
}

// Called by thread gi (< GROUPS) once the batch's nb splats and their band masks are staged.
fn build_band_list(gi: u32, nb: u32) {
    var n = 0u;
    var word = 0u;
    for (var k = 0u; k < nb; k = k + 1u) {
        if ((s_bmask[k] & (1u << gi)) != 0u) {
            word = word | (k << (8u * (n & 3u)));
            n = n + 1u;
            if ((n & 3u) == 0u) {
                s_band[gi * BAND_WORDS + n / 4u - 1u] = word;
                word = 0u;
            }
        }
    }
    if ((n & 3u) != 0u) {
        s_band[gi * BAND_WORDS + n / 4u] = word;
    }
    s_band_n[gi] = n;
}

// The batch position of band gi's j-th listed splat (without bands: j).
fn band_splat(gi: u32, j: u32) -> u32 {
    if (!BANDED) {
        return j;
    }
    return (s_band[gi * BAND_WORDS + j / 4u] >> (8u * (j & 3u))) & 255u;
}

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

// Composite band gi's listed splats of the batch (b: the batch) onto the thread's group gi of both
// columns, until both are done.
fn band_pass(pa: ptr<function, PixelGroup>, pb: ptr<function, PixelGroup>, gi: u32, b: u32,
             nb: u32, fx_a: f32, fx_b: f32) {
    var cnt = nb;
    if (BANDED) {
        cnt = s_band_n[gi];
    }
    var done = all((*pa).done) && (COLS == 1u || all((*pb).done));
    for (var j = 0u; j < cnt && !done; j = j + 1u) {
        let k = band_splat(gi, j);
        let g = s_geo[k];
        let oc = s_opc[k];
        let col = s_col[k];
        let pos = b * BATCH + k + 1u;
        splat_group(pa, g, oc, col, fx_a - g.x, pos);
        done = all((*pa).done);
        if (COLS > 1u) {
            splat_group(pb, g, oc, col, fx_b - g.x, pos);
            done = done && all((*pb).done);
        }
    }
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
                let s = splat_at(isect_ids[idx]);
                stage_splat(j, s);
                if (BANDED) {
                    s_bmask[j] = band_mask(wid.y, s.xy.y, row_reach(s.conic, s.opacity));
                }
            }
        }
        let nb = min(BATCH, n - b * BATCH);
        if (BANDED) {
            workgroupBarrier();
            if (li < GROUPS) {
                build_band_list(li, nb);
            }
        }
        workgroupBarrier();
        if (!thread_done) {
            band_pass(&a0, &b0, 0u, b, nb, fx_a, fx_b);
            if (GROUPS > 1u) {
                band_pass(&a1, &b1, 1u, b, nb, fx_a, fx_b);
            }
            if (GROUPS > 2u) {
                band_pass(&a2, &b2, 2u, b, nb, fx_a, fx_b);
                band_pass(&a3, &b3, 3u, b, nb, fx_a, fx_b);
            }
            thread_done = column_done(a0, a1, a2, a3);
            if (COLS > 1u) {
                thread_done = thread_done && column_done(b0, b1, b2, b3);
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
