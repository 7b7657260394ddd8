// docs/design.md §3 stage 3, the GPU layout's emission: one thread per depth-sorted splat, so the
// threads grow with N (emit.wgsl's (tile, chunk) table caps its threads by the table's size: 2 056
// at 1080p, 517 at 4K, each walking hundreds of splats). Per render:
//   count_pairs : counts[k] = tiles whose pixel centres splat sorted_ids[k]'s ellipse reaches
//   (prefix.wgsl: exclusive scan of counts in place; the total in scan_sums[blocks])
//   pair_totals : the counters from that total
//   write_pairs : splat k writes (tile, id) into its own segment [counts[k], counts[k + 1])
//   (radix.wgsl: stable sort of the pairs by tile; sorted_ranges.wgsl: the tile ranges)
// The pairs are written in depth order, so a stable sort by tile alone leaves each tile's ids in
// depth order, ties by Gaussian index: the same list as emit.wgsl's.
//
// The two passes are two pipelines that a compiler may round differently (emit.wgsl says why), so
// write_pairs writes only inside its own segment, counts a pair it has no room for, and fills a
// slot it left empty with the key NO_TILE (sorted past every tile, in no tile's range) and
// NULL_SPLAT, counting those too: counters[2] is the number of pairs the passes disagreed on.

#include "common.wgsl"
#include "saturating.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> rects: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> sorted_ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> counts: array<u32>;      // per depth rank
@group(0) @binding(4) var<storage, read_write> pair_tiles: array<u32>;  // the sort's keys
@group(0) @binding(5) var<storage, read_write> pair_ids: array<u32>;    // the sort's values
@group(0) @binding(6) var<storage, read> splats: array<Splat2D>;
@group(0) @binding(7) var<storage, read> splats_hi: array<Splat2D>;
@group(0) @binding(8) var<storage, read_write> emit_counters: array<atomic<u32>>;   // counters
@group(0) @binding(9) var<storage, read> scan_sums: array<u32>;   // prefix.wgsl's, total last

// A test perturbs write_pairs' tile test alone with it (tests/test_gpu_emission.py), as emit.wgsl.
override EMIT_KEYS_Q_SCALE: f32 = 1.0;

#include "splat_windows.wgsl"
#include "tile_hit.wgsl"

fn rank_of(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * BLOCK_SIZE;
}

fn pairs_of(k: u32, q_scale: f32) -> u32 {
    let g = sorted_ids[k];
    let rc = rects[g];
    var n = 0u;
    if (rc.z <= rc.x) {
        return 0u;           // culled
    }
    let el = splat_ellipse(g);
    for (var ty = rc.y; ty < rc.w; ty = ty + 1u) {
        for (var tx = rc.x; tx < rc.z; tx = tx + 1u) {
            n = n + select(0u, 1u, tile_hit(el, tx, ty, q_scale));
        }
    }
    return n;
}

@compute @workgroup_size(BLOCK_SIZE)
fn count_pairs(@builtin(global_invocation_id) gid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = rank_of(gid, nwg);
    if (k < rp.model.x) {
        counts[k] = pairs_of(k, 1.0);
    }
}

// One thread: counters[0] = total pairs (saturated), [1] = min(total, capacity), [2] = 0 (the
// disagreements write_pairs counts), [3] = overflow flag (the host grows the buffers).
@compute @workgroup_size(1)
fn pair_totals() {
    let n = rp.model.x;
    let blocks = max((n + 1023u) / 1024u, 1u);
    let total = select(0u, scan_sums[blocks], n > 0u);
    let cap = rp.model.w;
    atomicStore(&emit_counters[0], total);
    atomicStore(&emit_counters[1], min(total, cap));
    atomicStore(&emit_counters[2], 0u);
    atomicStore(&emit_counters[3], select(0u, 1u, total > cap));
}

@compute @workgroup_size(BLOCK_SIZE)
fn write_pairs(@builtin(global_invocation_id) gid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = rank_of(gid, nwg);
    let n = rp.model.x;
    if (k >= n) {
        return;
    }
    let start = counts[k];
    var end = atomicLoad(&emit_counters[0]);
    if (k + 1u < n) {
        end = counts[k + 1u];
    }
    end = max(end, start);
    let cap = rp.model.w;
    let tiles_x = rp.img.z;
    let no_tile = tiles_x * rp.img.w;     // past every tile: sorted last, in no tile's range
    var pos = start;
    let g = sorted_ids[k];
    let rc = rects[g];
    if (rc.z > rc.x) {
        let el = splat_ellipse(g);
        for (var ty = rc.y; ty < rc.w; ty = ty + 1u) {
            for (var tx = rc.x; tx < rc.z; tx = tx + 1u) {
                if (tile_hit(el, tx, ty, EMIT_KEYS_Q_SCALE)) {
                    if (pos >= end) {
                        atomicAdd(&emit_counters[2], 1u);   // a pair the count did not see
                        continue;
                    }
                    if (pos < cap) {
                        pair_tiles[pos] = ty * tiles_x + tx;
                        pair_ids[pos] = g;
                    }
                    pos = pos + 1u;
                }
            }
        }
    }
    // Slots the count reserved and no pair filled: no tile's, a splat that covers nothing.
    if (pos < end) {
        atomicAdd(&emit_counters[2], end - pos);
        for (var i = pos; i < min(end, cap); i = i + 1u) {
            pair_tiles[i] = no_tile;
            pair_ids[i] = NULL_SPLAT;
        }
    }
}
