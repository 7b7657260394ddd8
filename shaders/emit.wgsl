// Stage 3: intersection emission, in depth order.
// After the depth sort, sorted_ids[r] is the splat of depth rank r. Thread c owns the ranks
// [c*items, (c+1)*items) with items = ceil(N / T):
//   emit_count: chunk[c] = number of tiles touched by its splats;
//   (scan.wgsl turns chunk[] into exclusive offsets and writes the counters)
//   emit_keys : writes, for each of its splats in rank order and each tile of the splat's rectangle,
//               key = tile id, value = splat id at chunk[c]++ (nothing at or beyond capacity).
// The intersections therefore come out ordered by depth; a stable sort by tile id (radix.wgsl)
// then orders them by (tile, depth, Gaussian index), as the reference does.

#include "common.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> rects: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> sorted_ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> chunk: array<u32>;
@group(0) @binding(4) var<storage, read_write> isect_keys: array<u32>;
@group(0) @binding(5) var<storage, read_write> isect_vals: array<u32>;

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
    if (c >= rp.grid.z) {
        return;
    }
    let r = rank_range(c);
    var sum = 0u;
    for (var k = r.x; k < r.y; k = k + 1u) {
        let rc = rects[sorted_ids[k]];
        sum = sum + (rc.z - rc.x) * (rc.w - rc.y);
    }
    chunk[c] = sum;
}

@compute @workgroup_size(64)
fn emit_keys(@builtin(local_invocation_index) lid: u32,
             @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let c = linear_workgroup(wid, nwg) * EMIT_WG + lid;
    if (c >= rp.grid.z) {
        return;
    }
    let r = rank_range(c);
    let cap = rp.model.w;
    let tiles_x = rp.img.z;
    var off = chunk[c];
    for (var k = r.x; k < r.y && off < cap; k = k + 1u) {
        let g = sorted_ids[k];
        let rc = rects[g];
        for (var ty = rc.y; ty < rc.w; ty = ty + 1u) {
            for (var tx = rc.x; tx < rc.z; tx = tx + 1u) {
                if (off < cap) {
                    isect_keys[off] = ty * tiles_x + tx;
                    isect_vals[off] = g;
                }
                off = off + 1u;
            }
        }
    }
}
