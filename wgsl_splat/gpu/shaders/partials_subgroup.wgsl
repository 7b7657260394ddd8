// Per-splat partial sums of raster_backward.wgsl with subgroup operations (optional feature
// `subgroup`): a subgroup sums its lanes in registers and one lane writes the result into the slot
// of the subgroup, named by its first lane's local index (the writer is the lane whose slot is its
// own index). The slots in use are recorded in a workgroup bitmask, so nothing assumes how lanes
// map to subgroups; the reduction then reads one partial per subgroup instead of one per thread
// (on lavapipe a workgroup-memory gather costs far more than an in-register sum).
//
// The sum is an xor butterfly of shuffles with constant lane masks, not subgroupAdd: lavapipe
// runs subgroupAdd as a loop over the lanes through memory (measured 30 ns per vec4 per SIMD row
// against 2 ns for three constant-mask shuffles, ~10 ns with the size tests below). Every lane ends
// with the same value bit for bit (each level adds the same two numbers, in either order).

fn partial_slot(li: u32) -> u32 {
    let first = subgroupBroadcastFirst(li);
    if (first == li) {
        atomicOr(&s_slot_mask[first / 32u], 1u << (first % 32u));
    }
    return first;
}

// The lanes the butterfly spans: the active lanes of the subgroup (all of it, or all of a workgroup
// smaller than the subgroup; lanes are packed from 0, a power of two either way). Called once, in
// uniform control flow.
fn partial_lanes() -> u32 {
    return subgroupAdd(1u);
}

fn partial_sum(v: vec4<f32>, size: u32) -> vec4<f32> {
    var u = v;
    if (size > 1u) { u = u + subgroupShuffleXor(u, 1u); }
    if (size > 2u) { u = u + subgroupShuffleXor(u, 2u); }
    if (size > 4u) { u = u + subgroupShuffleXor(u, 4u); }
    if (size > 8u) { u = u + subgroupShuffleXor(u, 8u); }
    if (size > 16u) { u = u + subgroupShuffleXor(u, 16u); }
    if (size > 32u) { u = u + subgroupShuffleXor(u, 32u); }
    if (size > 64u) { u = u + subgroupShuffleXor(u, 64u); }
    return u;
}
