// docs/design.md §3 stage 3: intersection emission straight into (tile, depth, index) order -- a counting sort by
// tile whose input is already in depth order.
//
// After the depth sort, sorted_ids[r] is the splat of depth rank r. Thread c ("chunk") owns the ranks
// [c*items, (c+1)*items), items = ceil(N / T), and the column c of the table[tile * T + c]:
//   emit_count: table[tile*T + c] = number of its splats whose rectangle covers the tile;
//   (scan.wgsl: exclusive scan of the table in (tile, chunk) order -> start offsets, tile ranges,
//    and the intersection counters)
//   emit_keys : walks its splats again in rank order and writes each splat id to
//               table[tile*T + c]++ for every tile of its rectangle (nothing at or beyond capacity).
// A tile of a splat's rectangle counts only when the splat's α ≥ ALPHA_MIN ellipse reaches the
// rectangle of the tile's pixel centres (tile_hit; reference: projection.tile_pairs_kept), and both
// entry points evaluate the same expressions, so they agree on every pair.
//
// Within a tile the ids therefore come out by chunk, then by rank inside the chunk: by depth, ties
// by Gaussian index (the depth sort is stable) -- exactly the reference's order, with no sort of
// the intersections at all. Each chunk owns its table column, so there are no atomics.
//
// The two passes are two pipelines: a compiler that contracts or reorders float math (FMA, Metal's
// fast math) may decide a borderline pair differently in each (Brush hit exactly this). So
// emit_count also keeps each cell's count in `remaining`, and emit_keys writes a pair only while
// its cell has room left (it never leaves the cell's segment of isect_ids), counts every pair it
// could not place, and at the end fills each slot its cell left empty with NULL_SPLAT (the raster
// passes read it as a splat that covers nothing) and counts those too: counters[2] is the number of
// pairs the passes disagreed on, read by the host with the intersection total.

#include "common.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> rects: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> sorted_ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> table: array<u32>;
@group(0) @binding(4) var<storage, read_write> isect_ids: array<u32>;
@group(0) @binding(5) var<storage, read> splats: array<Splat2D>;
@group(0) @binding(6) var<storage, read> splats_hi: array<Splat2D>;
@group(0) @binding(7) var<storage, read_write> remaining: array<u32>;   // per cell, as `table`
@group(0) @binding(8) var<storage, read_write> emit_counters: array<atomic<u32>>;   // counters

// A test perturbs emit_keys' tile test alone with it (tests/test_gpu_emission.py): > 1 makes it
// emit pairs the count did not see, < 1 drop some; 1 everywhere else.
override EMIT_KEYS_Q_SCALE: f32 = 1.0;

#include "splat_windows.wgsl"

const EMIT_WG: u32 = 64u;

fn rank_range(c: u32) -> vec2<u32> {
    let n = rp.model.x;
    let nt = rp.grid.z;
    let items = (n + nt - 1u) / nt;
    let start = min(c * items, n);
    return vec2<u32>(start, min(start + items, n));
}

#include "tile_hit.wgsl"

@compute @workgroup_size(EMIT_WG)
fn emit_count(@builtin(local_invocation_index) lid: u32,
              @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let c = linear_workgroup(wid, nwg) * EMIT_WG + lid;
    let nt = rp.grid.z;
    if (c >= nt) {
        return;
    }
    let tiles_x = rp.img.z;
    let num_tiles = tiles_x * rp.img.w;
    for (var t = 0u; t < num_tiles; t = t + 1u) {
        table[t * nt + c] = 0u;
        remaining[t * nt + c] = 0u;
    }
    let r = rank_range(c);
    for (var k = r.x; k < r.y; k = k + 1u) {
        let g = sorted_ids[k];
        let rc = rects[g];
        if (rc.z <= rc.x) {
            continue;            // culled
        }
        let el = splat_ellipse(g);
        for (var ty = rc.y; ty < rc.w; ty = ty + 1u) {
            for (var tx = rc.x; tx < rc.z; tx = tx + 1u) {
                if (tile_hit(el, tx, ty, 1.0)) {
                    let e = (ty * tiles_x + tx) * nt + c;
                    table[e] = table[e] + 1u;
                    remaining[e] = remaining[e] + 1u;
                }
            }
        }
    }
}

@compute @workgroup_size(EMIT_WG)
fn emit_keys(@builtin(local_invocation_index) lid: u32,
             @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let c = linear_workgroup(wid, nwg) * EMIT_WG + lid;
    let nt = rp.grid.z;
    if (c >= nt) {
        return;
    }
    let r = rank_range(c);
    let cap = rp.model.w;
    let tiles_x = rp.img.z;
    for (var k = r.x; k < r.y; k = k + 1u) {
        let g = sorted_ids[k];
        let rc = rects[g];
        if (rc.z <= rc.x) {
            continue;
        }
        let el = splat_ellipse(g);
        for (var ty = rc.y; ty < rc.w; ty = ty + 1u) {
            for (var tx = rc.x; tx < rc.z; tx = tx + 1u) {
                if (tile_hit(el, tx, ty, EMIT_KEYS_Q_SCALE)) {
                    let e = (ty * tiles_x + tx) * nt + c;
                    let left = remaining[e];
                    if (left == 0u) {
                        atomicAdd(&emit_counters[2], 1u);   // a pair the count did not see
                        continue;
                    }
                    remaining[e] = left - 1u;
                    let pos = table[e];
                    table[e] = pos + 1u;
                    if (pos < cap) {
                        isect_ids[pos] = g;
                    }
                }
            }
        }
    }
    // Slots the count reserved and no pair filled: a splat that covers nothing, never a stale id.
    let num_tiles = tiles_x * rp.img.w;
    for (var t = 0u; t < num_tiles; t = t + 1u) {
        let e = t * nt + c;
        let left = remaining[e];
        if (left != 0u) {
            atomicAdd(&emit_counters[2], left);
            let pos = table[e];
            for (var k = pos; k < min(pos + left, cap); k = k + 1u) {
                isect_ids[k] = NULL_SPLAT;
            }
        }
    }
}
