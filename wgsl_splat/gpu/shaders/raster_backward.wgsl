// docs/design.md §3 stage 6: rasterisation backward. Math: wgsl_splat/reference/raster.py (rasterize_backward).
//
// One workgroup per 16x16 tile, laid out as the forward pass (raster.wgsl, raster_tile.wgsl): thread
// (x, y) owns ROWS pixels of each of its COLS columns and evaluates each splat for all of them with
// vec4 math. Each pixel walks the
// splats it composited back to front, starting from the forward pass's final transmittance and
// last-contributor index, and keeps two scalars: T (transmittance after the current splat,
// recovered with T_before = T_after / (1 - α)) and the colour behind it, already dotted with
// dL/dC (suffix = Σ_{k behind} (c_k · dL/dC) α_k T_k). Per splat j and pixel:
//
//   dL/dc_j = α_j T_j dL/dC
//   dL/dα_j = T_j (c_j · dL/dC) - (suffix + T_final (bg · dL/dC)) / (1 - α_j)   (0 where α clamps)
//   α = o·G, G = exp(power): dL/do = dL/dα G, dL/dpower = dL/dα α, then conic and 2D mean.
//
// Reduction: a round handles up to BATCH splats (loaded into workgroup memory). Every thread sums
// its ROWS x COLS pixels' contributions per splat in registers; then either every thread
// (partials_workgroup.wgsl) or every subgroup after an in-register sum (partials_subgroup.wgsl) stores
// 3 vec4 partials per splat in workgroup memory; after one barrier the threads sum those partials
// in a fixed slot order and issue one global atomic per non-zero gradient component per splat per
// tile (grad_add: float atomics or a compare-and-swap loop, atomic_float.wgsl / atomic_cas.wgsl):
// fewer than one per subgroup. The partials are sized by the subgroups the workgroup has, not by
// its threads: PART_CELLS (splat, subgroup) cells, so a round takes min(BATCH, PART_CELLS / parts)
// splats (64 with 32-lane subgroups, 4 with one-thread ones) and its two barriers are paid per
// round, not per handful of splats. The next round's records are loaded into registers before
// this round's reduction, whose workgroup-memory sums and atomics hide their latency. The splat
// ids of a round are double-buffered so that the next round's load cannot race the reduction.
// For the tests, partials_emulated.wgsl runs the subgroup logic with subgroups of 32 or 64
// invocations through workgroup memory.
//
// The subgroup sums run in uniform control flow: no backend guarantees that lanes reconverge after
// a branch they took differently, so between a barrier and a subgroup operation no branch depends
// on the lane. The walk's bounds are made common to the lanes sharing a partial slot
// (partial_last), a pixel a splat does not reach adds exact zeros (select) instead of being
// branched around, and the sums are stored by all lanes at once (each its own splat's).
//
// Only positions up to the tile's largest last-contributor index are visited (a workgroup atomicMax
// at the start): splats behind every pixel's stopping point carry no gradient.
//
// Per-splat output (grad2d, 12 floats, zeroed by project_backward after it reads them):
//   [0..3)  dL/d(mean2d.x, mean2d.y, opacity)      [4..7)  dL/d(conic a, b, c)
//   [8..11) dL/d(colour r, g, b)

#include "common.wgsl"
#include "raster_tile.wgsl"
#include "{{ATOMICS}}"
#include "{{PARTIALS}}"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> splats: array<Splat2D>;
@group(0) @binding(2) var<storage, read> isect_ids: array<u32>;
@group(0) @binding(3) var<storage, read> ranges: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> last_contrib: array<u32>;   // then final T (raster.wgsl)
@group(0) @binding(6) var<storage, read> grad_image: array<f32>;
@group(0) @binding(7) var<storage, read_write> grad2d: array<GradAtomic>;
// ids from rp.grid.w on (gpu/pages.py): their records and gradients
@group(0) @binding(8) var<storage, read> splats_hi: array<Splat2D>;
@group(0) @binding(9) var<storage, read_write> grad2d_hi: array<GradAtomic>;

#include "splat_windows.wgsl"

const GRAD_STRIDE: u32 = 12u;
const PART_CELLS: u32 = {{PART_CELLS}}u;       // (splat, slot) cells of partials per round

var<workgroup> s_id: array<u32, 2 * BATCH>;      // double-buffered splat ids
// The partials of a round: vec4 c (0: mean and opacity, 1: conic, 2: colour) of the splat the
// walk visits w-th, from the slot of rank q, at (3 w + c) * parts + q.
var<workgroup> s_part: array<vec4<f32>, 3 * PART_CELLS>;
var<workgroup> s_maxlast: atomic<u32>;
var<workgroup> s_slot_mask: array<atomic<u32>, 2>;   // partial slots in use (THREADS <= 64)
var<workgroup> s_count: u32;
var<workgroup> s_masks: vec2<u32>;

// One vec4 group of a thread's pixels (four rows of its column): what the back-to-front walk
// keeps per pixel. Private arrays indexed by a loop counter are lowered to scratch memory on CPU
// drivers (lavapipe: the group loop cost 88 of 120 ms with its body skipped), so the groups are
// separate variables handled by the functions below, called once per group.
struct PixelGroup {
    fy: vec4<f32>,            // pixel-centre rows
    last: vec4<u32>,          // last contributor (1-based position, 0: none)
    last_max: u32,            // the greatest of them
    t: vec4<f32>,             // transmittance after the current splat
    suffix: vec4<f32>,        // Σ_{k behind} (c_k · dL/dC) α_k T_k
    bgt: vec4<f32>,           // T_final (bg · dL/dC)
    gr: vec4<f32>,            // dL/dC
    gg: vec4<f32>,
    gb: vec4<f32>,
}

// Per-splat sums over a thread's pixels. dx is the same for all of them, so the nine gradient
// components need only seven vec4 accumulators, combined once per splat.
struct SplatSums {
    sp: vec4<f32>,            // Σ dL/dpower
    sdp: vec4<f32>,           // Σ dy · dL/dpower
    sddp: vec4<f32>,          // Σ dy² · dL/dpower
    so: vec4<f32>,            // Σ dL/dα · G
    sr: vec4<f32>,            // Σ α T dL/dC
    sg: vec4<f32>,
    sb: vec4<f32>,
}

// What the backward pass reads of one pixel: the forward pass's final T and last contributor, and
// dL/dC; outside the image T = 1, no contributor, no gradient.
struct PixelIn {
    t: f32,
    last: u32,
    g: vec3<f32>,
}

fn load_pixel(px: u32, py: u32, width: u32, height: u32) -> PixelIn {
    if (px < width && py < height) {
        let q = py * width + px;
        return PixelIn(bitcast<f32>(last_contrib[width * height + q]), last_contrib[q],
                       vec3<f32>(grad_image[3u * q], grad_image[3u * q + 1u], grad_image[3u * q + 2u]));
    }
    return PixelIn(1.0, 0u, vec3<f32>(0.0));
}

// The four pixels are loaded one by one into whole vectors: writing a vector component through a
// loop index (p.t[j] = ...) is not addressable in FXC's register model (warning X3550, the loop is
// forced to unroll and compiling the kernel took minutes) and puts the vector in scratch memory
// on other compilers.
fn load_group(tile_y: u32, lid_y: u32, gi: u32, px: u32, width: u32, height: u32,
              bg: vec3<f32>) -> PixelGroup {
    var p: PixelGroup;
    let pys = group_rows(tile_y, lid_y, gi);
    p.fy = vec4<f32>(pys) + vec4<f32>(0.5);
    let q0 = load_pixel(px, pys.x, width, height);
    let q1 = load_pixel(px, pys.y, width, height);
    let q2 = load_pixel(px, pys.z, width, height);
    let q3 = load_pixel(px, pys.w, width, height);
    p.t = vec4<f32>(q0.t, q1.t, q2.t, q3.t);
    p.last = vec4<u32>(q0.last, q1.last, q2.last, q3.last);
    p.gr = vec4<f32>(q0.g.x, q1.g.x, q2.g.x, q3.g.x);
    p.gg = vec4<f32>(q0.g.y, q1.g.y, q2.g.y, q3.g.y);
    p.gb = vec4<f32>(q0.g.z, q1.g.z, q2.g.z, q3.g.z);
    p.last_max = max(max(p.last.x, p.last.y), max(p.last.z, p.last.w));
    p.suffix = vec4<f32>(0.0);
    p.bgt = p.t * (bg.x * p.gr + bg.y * p.gg + bg.z * p.gb);
    return p;
}

// One splat (staged geometry g, oc and colour col, 1-based position pos) over one pixel group,
// back to front: recovers T before the splat, adds the gradient terms to `acc`. A group whose
// pixels all stopped in front of the splat is skipped (last_max: the bound of every lane sharing
// the partial slot, so they branch together); a pixel the splat does not reach adds zeros (every
// term is 0 or selected away where `valid` is false, so the sums are those of a branch around it).
fn splat_group(p: ptr<function, PixelGroup>, acc: ptr<function, SplatSums>, g: vec4<f32>,
               oc: vec4<f32>, col: vec4<f32>, dx: f32, pos: u32) {
    if (pos <= (*p).last_max) {
        let dy = (*p).fy - vec4<f32>(g.y);
        let power = splat_power(g, oc, dx, dy);
        let gauss = exp(power);
        let a_raw = oc.y * gauss;
        let alpha = min(vec4<f32>(ALPHA_MAX), a_raw);
        let valid = (vec4<u32>(pos) <= (*p).last) & (power <= vec4<f32>(0.0)) &
                    (alpha >= vec4<f32>(ALPHA_MIN));
        let inv = vec4<f32>(1.0) / (vec4<f32>(1.0) - alpha);
        let tb = select((*p).t, (*p).t * inv, valid);
        let w = select(vec4<f32>(0.0), alpha * tb, valid);
        let cdot = col.x * (*p).gr + col.y * (*p).gg + col.z * (*p).gb;
        (*acc).sr = (*acc).sr + w * (*p).gr;
        (*acc).sg = (*acc).sg + w * (*p).gg;
        (*acc).sb = (*acc).sb + w * (*p).gb;
        let g_alpha = tb * cdot - ((*p).suffix + (*p).bgt) * inv;
        let ga = select(vec4<f32>(0.0), g_alpha, valid & (a_raw <= vec4<f32>(ALPHA_MAX)));
        let gp = ga * a_raw;
        let dgp = dy * gp;
        (*acc).sp = (*acc).sp + gp;
        (*acc).sdp = (*acc).sdp + dgp;
        (*acc).sddp = (*acc).sddp + dy * dgp;
        (*acc).so = (*acc).so + ga * gauss;
        (*p).suffix = (*p).suffix + w * cdot;
        (*p).t = tb;
    }
}

// The column's group bounds made common to the lanes sharing a partial slot (partial_last, called
// in uniform control flow); returns the greatest.
fn bound_column(li: u32, g0: ptr<function, PixelGroup>, g1: ptr<function, PixelGroup>,
                g2: ptr<function, PixelGroup>, g3: ptr<function, PixelGroup>) -> u32 {
    (*g0).last_max = partial_last((*g0).last_max, li);
    var last = (*g0).last_max;
    if (GROUPS > 1u) {
        (*g1).last_max = partial_last((*g1).last_max, li);
        last = max(last, (*g1).last_max);
    }
    if (GROUPS > 2u) {
        (*g2).last_max = partial_last((*g2).last_max, li);
        (*g3).last_max = partial_last((*g3).last_max, li);
        last = max(last, max((*g2).last_max, (*g3).last_max));
    }
    return last;
}

fn load_column(tile_y: u32, lid_y: u32, px: u32, width: u32, height: u32, bg: vec3<f32>,
               g0: ptr<function, PixelGroup>, g1: ptr<function, PixelGroup>,
               g2: ptr<function, PixelGroup>, g3: ptr<function, PixelGroup>) -> u32 {
    *g0 = load_group(tile_y, lid_y, 0u, px, width, height, bg);
    var last = (*g0).last_max;
    if (GROUPS > 1u) {
        *g1 = load_group(tile_y, lid_y, 1u, px, width, height, bg);
        last = max(last, (*g1).last_max);
    }
    if (GROUPS > 2u) {
        *g2 = load_group(tile_y, lid_y, 2u, px, width, height, bg);
        *g3 = load_group(tile_y, lid_y, 3u, px, width, height, bg);
        last = max(last, max((*g2).last_max, (*g3).last_max));
    }
    return last;
}

// One splat over every pixel group of one column (dx: the column's offset from the splat's mean):
// the column's contributions to the splat's 2D-mean, opacity, conic and colour gradients, as three
// vec4 (mean x, y, opacity, -), (conic a, b, c, -), (r, g, b, -).
struct SplatGrad {
    m: vec4<f32>,
    c: vec4<f32>,
    rgb: vec4<f32>,
}

fn splat_column(g0: ptr<function, PixelGroup>, g1: ptr<function, PixelGroup>,
                g2: ptr<function, PixelGroup>, g3: ptr<function, PixelGroup>,
                g: vec4<f32>, oc: vec4<f32>, col: vec4<f32>, dx: f32, pos: u32) -> SplatGrad {
    let z = vec4<f32>(0.0);
    var acc = SplatSums(z, z, z, z, z, z, z);
    splat_group(g0, &acc, g, oc, col, dx, pos);
    if (GROUPS > 1u) {
        splat_group(g1, &acc, g, oc, col, dx, pos);
    }
    if (GROUPS > 2u) {
        splat_group(g2, &acc, g, oc, col, dx, pos);
        splat_group(g3, &acc, g, oc, col, dx, pos);
    }
    let one = vec4<f32>(1.0);
    let p0s = dot(acc.sp, one);
    let p1s = dot(acc.sdp, one);
    // power = -½(a dx² + c dy²) - b dx dy, dx = px - mean.x: dpower/dmean.x = a dx + b dy.
    return SplatGrad(
        vec4<f32>(g.z * dx * p0s + g.w * p1s, g.w * dx * p0s + oc.x * p1s, dot(acc.so, one), 0.0),
        vec4<f32>(-0.5 * dx * dx * p0s, -dx * p1s, -0.5 * dot(acc.sddp, one), 0.0),
        vec4<f32>(dot(acc.sr, one), dot(acc.sg, one), dot(acc.sb, one), 0.0));
}

@compute @workgroup_size({{THREADS_X}}, {{THREADS_Y}})
fn rasterize_backward(@builtin(local_invocation_id) lid: vec3<u32>,
                      @builtin(local_invocation_index) li: u32,
                      @builtin(workgroup_id) wid: vec3<u32>) {
    let width = rp.img.x;
    let height = rp.img.y;
    let tile = wid.y * rp.img.z + wid.x;
    if (li == 0u) {
        s_range = ranges[tile];
        atomicStore(&s_maxlast, 0u);
        atomicStore(&s_slot_mask[0], 0u);
        atomicStore(&s_slot_mask[1], 0u);
    }
    workgroupBarrier();
    let slot = partial_slot(li);
    let lanes = partial_lanes();
    let lane = partial_lane(li);
    let range_start = s_range.x;

    let bg = rp.background.xyz;
    // Pixel groups: a0..a3 of the first column, b0..b3 of the second (COLS = 2); the ones beyond
    // GROUPS and COLS are never touched.
    let px_a = tile_column(wid.x, lid.x, 0u);
    let px_b = tile_column(wid.x, lid.x, 1u);
    let fx_a = f32(px_a) + 0.5;
    let fx_b = f32(px_b) + 0.5;
    var a0: PixelGroup;
    var a1: PixelGroup;
    var a2: PixelGroup;
    var a3: PixelGroup;
    var b0: PixelGroup;
    var b1: PixelGroup;
    var b2: PixelGroup;
    var b3: PixelGroup;
    var my_last = load_column(wid.y, lid.y, px_a, width, height, bg, &a0, &a1, &a2, &a3);
    if (COLS > 1u) {
        my_last = max(my_last, load_column(wid.y, lid.y, px_b, width, height, bg, &b0, &b1, &b2, &b3));
    }
    atomicMax(&s_maxlast, my_last);
    workgroupBarrier();
    if (li == 0u) {
        s_count = atomicLoad(&s_maxlast);
        s_masks = vec2<u32>(atomicLoad(&s_slot_mask[0]), atomicLoad(&s_slot_mask[1]));
    }
    let n = workgroupUniformLoad(&s_count);
    // uniform, as the round count that follows from it must be for the barriers in the rounds
    let masks = workgroupUniformLoad(&s_masks);
    // From here on the lanes of a slot branch only together (see the header).
    my_last = bound_column(li, &a0, &a1, &a2, &a3);
    if (COLS > 1u) {
        my_last = max(my_last, bound_column(li, &b0, &b1, &b2, &b3));
    }
    // The slots in use, and this lane's slot's rank among them: the partials are packed by rank.
    let parts = countOneBits(masks.x) + countOneBits(masks.y);
    let below = select(0xffffffffu, (1u << slot) - 1u, slot < 32u);     // shifts are mod 32
    let part = countOneBits(masks.x & below) +
               countOneBits(masks.y & select(0u, (1u << (slot - 32u)) - 1u, slot >= 32u));
    // Splats per round: a multiple of every subgroup's lanes (powers of two that divide THREADS,
    // or one subgroup spanning the workgroup), so the last store of a round (below) stays in it.
    let batch = min(BATCH, PART_CELLS / parts);
    let rounds = (n + batch - 1u) / batch;

    // The first round's records (the back of the list), then each round the next one's.
    var next_id = NULL_SPLAT;
    var next_splat: Splat2D;
    let first_cnt = n - (rounds - 1u) * batch;
    if (rounds > 0u && li < first_cnt) {
        next_id = isect_ids[range_start + (rounds - 1u) * batch + li];
        next_splat = splat_at(next_id);
    }

    for (var ri = 0u; ri < rounds; ri = ri + 1u) {
        let start = (rounds - 1u - ri) * batch;     // back to front
        let cnt = min(batch, n - start);
        let ids_off = (ri & 1u) * BATCH;
        if (li < cnt) {
            stage_splat(li, next_splat);
            s_id[ids_off + li] = next_id;
        }
        for (var j = li + THREADS; j < cnt; j = j + THREADS) {    // BATCH > THREADS
            let gid = isect_ids[range_start + start + j];
            stage_splat(j, splat_at(gid));
            s_id[ids_off + j] = gid;
        }
        workgroupBarrier();
        var keep_m = vec4<f32>(0.0);
        var keep_c = vec4<f32>(0.0);
        var keep_rgb = vec4<f32>(0.0);
        for (var kk = 0u; kk < cnt; kk = kk + 1u) {
            let k = cnt - 1u - kk;
            let pos = start + k + 1u;                 // 1-based position, as last_contrib
            var acc_m = vec4<f32>(0.0);               // mean2d x, y, opacity
            var acc_c = vec4<f32>(0.0);               // conic a, b, c
            var acc_rgb = vec4<f32>(0.0);
            if (pos <= my_last) {
                let g = s_geo[k];
                let oc = s_opc[k];
                let col = s_col[k];
                let ga = splat_column(&a0, &a1, &a2, &a3, g, oc, col, fx_a - g.x, pos);
                acc_m = ga.m;
                acc_c = ga.c;
                acc_rgb = ga.rgb;
                if (COLS > 1u) {
                    let gb = splat_column(&b0, &b1, &b2, &b3, g, oc, col, fx_b - g.x, pos);
                    acc_m = acc_m + gb.m;
                    acc_c = acc_c + gb.c;
                    acc_rgb = acc_rgb + gb.rgb;
                }
            }
            let sum_m = partial_sum(acc_m, lanes, li);
            let sum_c = partial_sum(acc_c, lanes, li);
            let sum_rgb = partial_sum(acc_rgb, lanes, li);
            // Every lane has the sums; lane `held` (kk % lanes, a power of two) keeps them, and
            // once every lane keeps one (or the round ends) all lanes store together: one store
            // per splat and subgroup, as one writing lane would make, without a branch on the lane
            // before the next sums. (A mask, not `%`: lavapipe divides by the unknown `lanes`, 4 %
            // of the stage in the GPU layout.)
            let held = kk & (lanes - 1u);
            let mine = held == lane;
            keep_m = select(keep_m, sum_m, mine);
            keep_c = select(keep_c, sum_c, mine);
            keep_rgb = select(keep_rgb, sum_rgb, mine);
            if (held == lanes - 1u || kk + 1u == cnt) {
                // A lane keeping nothing this time (lane > held, the round ended) writes the cell
                // of a visit past the round's last, which the reduction never reads: below
                // cnt rounded up to the lanes, at most the round's batch.
                let at = 3u * (kk - held + lane) * parts + part;
                s_part[at] = keep_m;
                s_part[at + parts] = keep_c;
                s_part[at + 2u * parts] = keep_rgb;
            }
        }
        workgroupBarrier();
        // The next round's records, loaded while this round's partials are summed.
        if (ri + 1u < rounds && li < batch) {
            next_id = isect_ids[range_start + start - batch + li];
            next_splat = splat_at(next_id);
        }
        // Sum the partials of each (splat, vec4) in rank order; one atomic per non-zero component.
        for (var pr = li; pr < 3u * cnt; pr = pr + THREADS) {
            let base = pr * parts;
            var acc = vec4<f32>(0.0);
            for (var q = 0u; q < parts; q = q + 1u) {
                acc = acc + s_part[base + q];
            }
            let id = s_id[ids_off + cnt - 1u - pr / 3u];
            if (id == NULL_SPLAT) {
                continue;      // a slot emission could not fill: no Gaussian to add to
            }
            let dst = id * GRAD_STRIDE + 4u * (pr % 3u);
            if (acc.x != 0.0) {
                grad_add(dst, acc.x);
            }
            if (acc.y != 0.0) {
                grad_add(dst + 1u, acc.y);
            }
            if (acc.z != 0.0) {
                grad_add(dst + 2u, acc.z);
            }
        }
        // The next round writes s_part only after its load barrier, which every thread reaches
        // after finishing this reduction; s_id alternates halves.
    }
}
