// Per-splat partial sums of raster_backward.wgsl with subgroup operations (optional feature
// `subgroup`): a subgroup sums its lanes in registers (subgroupAdd) and one lane writes the result
// into the slot of the subgroup, named by its first lane's local index (the writer is the lane whose
// slot is its own index). The slots in use are
// recorded in a workgroup bitmask, so nothing assumes how lanes map to subgroups; the reduction
// then reads one partial per subgroup instead of one per thread (on lavapipe a workgroup-memory
// gather costs far more than an in-register subgroup sum).

fn partial_slot(li: u32) -> u32 {
    let first = subgroupBroadcastFirst(li);
    if (first == li) {
        atomicOr(&s_slot_mask[first / 32u], 1u << (first % 32u));
    }
    return first;
}

fn partial_sum(v: vec4<f32>) -> vec4<f32> {
    return subgroupAdd(v);
}
