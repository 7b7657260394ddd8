// docs/design.md §3 stage 3: exclusive prefix sum of the (tile, chunk) counts of emit.wgsl (one workgroup on CPU
// adapters; on GPUs prefix.wgsl scans it and tile_ranges below finishes), giving
//   - every chunk's first output position per tile (consumed by emit_keys),
//   - ranges[tile] = [start, end) of the tile in the sorted intersection list (clamped to the
//     capacity), used by rasterisation and the backward pass,
//   - counters[0] = total intersections, counters[1] = min(total, capacity), counters[2] = 0
//     (emit_keys counts the pairs its pass and emit_count's disagreed on there),
//     counters[3] = 1 if total > capacity (the host grows the buffers and renders again).

#include "common.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read_write> table: array<u32>;
@group(0) @binding(2) var<storage, read_write> ranges: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> counters: array<u32>;
@group(0) @binding(4) var<storage, read> scan_sums: array<u32>;   // prefix.wgsl block sums + total

#include "segment_scan.wgsl"

@compute @workgroup_size(256)
fn scan_counts(@builtin(local_invocation_index) lid: u32) {
    let nt = rp.grid.z;
    let num_tiles = rp.img.z * rp.img.w;
    let len = select(0u, num_tiles * nt, nt > 0u);
    let cap = rp.model.w;
    let seg = segment_scan(lid, len);
    if (lid == 0u) {
        counters[0] = seg.total;
        counters[1] = min(seg.total, cap);
        counters[2] = 0u;
        counters[3] = select(0u, 1u, seg.total > cap);
    }
    var run = seg.prefix;
    for (var i = seg.start; i < seg.end; i = i + 1u) {
        let v = table[i];
        table[i] = run;
        if (i % nt == 0u) {
            let t = i / nt;
            ranges[t].x = min(run, cap);
            if (t > 0u) {
                ranges[t - 1u].y = min(run, cap);
            }
        }
        run = add_sat(run, v);
    }
    if (nt == 0u) {
        // No splats: every tile is empty.
        for (var t = lid; t < num_tiles; t = t + 256u) {
            ranges[t] = vec2<u32>(0u);
        }
    } else if (lid == 0u && num_tiles > 0u) {
        ranges[num_tiles - 1u].y = min(seg.total, cap);
    }
}

// GPU variant: prefix.wgsl has already scanned the table in place over many workgroups (its grand
// total is scan_sums[blocks]); one thread per tile derives the same ranges and counters as
// scan_counts.
@compute @workgroup_size(BLOCK_SIZE)
fn tile_ranges(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x;
    let nt = rp.grid.z;
    let num_tiles = rp.img.z * rp.img.w;
    let cap = rp.model.w;
    let blocks = max((num_tiles * nt + 1023u) / 1024u, 1u);
    let total = select(0u, scan_sums[blocks], nt > 0u);
    if (t == 0u) {
        counters[0] = total;
        counters[1] = min(total, cap);
        counters[2] = 0u;
        counters[3] = select(0u, 1u, total > cap);
    }
    if (t >= num_tiles) {
        return;
    }
    if (nt == 0u) {
        ranges[t] = vec2<u32>(0u);
        return;
    }
    let start = table[t * nt];
    var end = total;
    if (t + 1u < num_tiles) {
        end = table[(t + 1u) * nt];
    }
    // the sums saturate, so end >= start; the max keeps a range empty rather than ~2^32 long
    // should anything else ever break that
    ranges[t] = vec2<u32>(min(start, cap), min(max(end, start), cap));
}
