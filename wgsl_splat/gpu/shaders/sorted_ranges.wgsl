// The tile ranges of emit_splats.wgsl's pairs once radix.wgsl has sorted them by tile: one thread
// per tile finds [start, end) of its key in the sorted keys by binary search (keys at or past the
// tile count are the slots emission left empty: in no range). Its own module because the sorted
// keys may be the buffer emit_splats writes (an even number of radix passes), which a dispatch
// cannot bind both read-only and read-write.

#include "common.wgsl"

@group(0) @binding(0) var<uniform> rp: RenderParams;
@group(0) @binding(1) var<storage, read> sorted_tiles: array<u32>;
@group(0) @binding(2) var<storage, read> counters: array<u32>;
@group(0) @binding(3) var<storage, read_write> ranges: array<vec2<u32>>;

// The first index in [0, count) whose key is >= key (count when none).
fn lower_bound(key: u32, count: u32) -> u32 {
    var lo = 0u;
    var hi = count;
    while (lo < hi) {
        let mid = lo + (hi - lo) / 2u;
        if (sorted_tiles[mid] < key) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo;
}

@compute @workgroup_size(BLOCK_SIZE)
fn sorted_ranges(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x;
    if (t >= rp.img.z * rp.img.w) {
        return;
    }
    let count = min(counters[1], rp.model.w);
    let start = lower_bound(t, count);
    // keys out of order (never, once sorted) must not give a range that runs backwards
    ranges[t] = vec2<u32>(start, max(lower_bound(t + 1u, count), start));
}
