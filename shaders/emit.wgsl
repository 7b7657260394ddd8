// Stage 3: intersection emission straight into (tile, depth, index) order -- a counting sort by
// tile whose input is already in depth order.
//
// After the depth sort, sorted_ids[r] is the splat of depth rank r. Thread c ("chunk") owns the ranks
// [c*items, (c+1)*items), items = ceil(N / T), and the column c of the table[tile * T + c]:
//   emit_count: table[tile*T + c] = number of its splats whose rectangle covers the tile;
//   (scan.wgsl: exclusive scan of the table in (tile, chunk) order -> start offsets, tile ranges,
//    and the intersection counters)
//   emit_keys : walks its splats again in rank order and writes each splat id to
//               table[tile*T + c]++ for every tile of its rectangle (nothing at or beyond capacity).
// Within a tile the ids therefore come out by chunk, then by rank inside the chunk: by depth, ties
// by Gaussian index (the depth sort is stable) -- exactly the reference's order, with no sort of
// the intersections at all. Each chunk owns its table column, so there are no atomics.

#include "common.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> rects: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> sorted_ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> table: array<u32>;
@group(0) @binding(4) var<storage, read_write> isect_ids: array<u32>;

const EMIT_WG: u32 = 64u;

fn rank_range(c: u32) -> vec2<u32> {
    let n = rp.model.x;
    let nt = rp.grid.z;
    let items = (n + nt - 1u) / nt;
    let start = min(c * items, n);
    return vec2<u32>(start, min(start + items, n));
}

@compute @workgroup_size(64)
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
    }
    let r = rank_range(c);
    for (var k = r.x; k < r.y; k = k + 1u) {
        let rc = rects[sorted_ids[k]];
        for (var ty = rc.y; ty < rc.w; ty = ty + 1u) {
            for (var tx = rc.x; tx < rc.z; tx = tx + 1u) {
                let e = (ty * tiles_x + tx) * nt + c;
                table[e] = table[e] + 1u;
            }
        }
    }
}

@compute @workgroup_size(64)
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
        for (var ty = rc.y; ty < rc.w; ty = ty + 1u) {
            for (var tx = rc.x; tx < rc.z; tx = tx + 1u) {
                let e = (ty * tiles_x + tx) * nt + c;
                let pos = table[e];
                table[e] = pos + 1u;
                if (pos < cap) {
                    isect_ids[pos] = g;
                }
            }
        }
    }
}
