// Per-splat partial sums of raster_backward.wgsl with subgroup operations (optional feature
// `subgroup`): a subgroup sums its lanes in registers and its first lane's slot takes the result
// (partials_butterfly.wgsl), so the reduction reads one partial per subgroup instead of one per
// thread (on lavapipe a workgroup-memory gather costs far more than an in-register sum).
//
// The sum is an xor butterfly of shuffles with constant lane masks, not subgroupAdd: lavapipe
// runs subgroupAdd as a loop over the lanes through memory (measured 30 ns per vec4 per SIMD row
// against 2 ns for three constant-mask shuffles, ~10 ns with the size tests of the butterfly).

fn lane_first(li: u32) -> u32 {
    return subgroupBroadcastFirst(li);
}

// The active lanes counted below this one: 0 for the lane subgroupBroadcastFirst reads.
fn lane_index(li: u32) -> u32 {
    return subgroupExclusiveAdd(1u);
}

// All of the subgroup, or all of a workgroup smaller than it.
fn lane_count() -> u32 {
    return subgroupAdd(1u);
}

fn lane_max(x: u32, li: u32) -> u32 {
    return subgroupMax(x);
}

fn lane_xor(v: vec4<f32>, mask: u32, li: u32) -> vec4<f32> {
    return subgroupShuffleXor(v, mask);
}

#include "partials_butterfly.wgsl"
