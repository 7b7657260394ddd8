// The slot, mask and butterfly of the per-subgroup partial sums of raster_backward.wgsl, written once
// over the lane operations of the file that includes it: partials_subgroup.wgsl (subgroup builtins)
// and partials_emulated.wgsl (a subgroup of W invocations through workgroup memory, which runs this
// same logic at the widths lavapipe cannot give). That file defines, each called by every lane in
// uniform control flow:
//   lane_first(li) -> u32                 the local index of the subgroup's first lane
//   lane_index(li) -> u32                 the lane's index among the subgroup's (0: the first)
//   lane_count() -> u32                   its lanes (a power of two, packed from 0)
//   lane_max(x, li) -> u32                the greatest x over its lanes
//   lane_xor(v, mask, li) -> vec4<f32>    v of the lane whose lane index is this one's ^ mask
// The interface raster_backward.wgsl calls (partial_slot, partial_lanes, partial_lane,
// partial_last, partial_sum) is the one partials_workgroup.wgsl implements with subgroups of one
// thread.

// A subgroup's partials go into the slot of its first lane's local index. The slots in use are
// recorded in a workgroup bitmask, so nothing assumes how lanes map to subgroups. Every lane
// calls the atomic, so that no branch precedes the subgroup operations; only the first sets a bit.
fn partial_slot(li: u32) -> u32 {
    let first = lane_first(li);
    atomicOr(&s_slot_mask[first / 32u], select(0u, 1u << (first % 32u), first == li));
    return first;
}

// The lanes the butterfly spans: the active lanes of the subgroup (all of it, or all of a workgroup
// smaller than the subgroup).
fn partial_lanes() -> u32 {
    return lane_count();
}

// 0 .. partial_lanes() - 1 over the lanes, 0 for the slot's own lane.
fn partial_lane(li: u32) -> u32 {
    return lane_index(li);
}

// x made common to the lanes sharing a slot (their greatest), so that a branch on it keeps them
// together.
fn partial_last(x: u32, li: u32) -> u32 {
    return lane_max(x, li);
}

// The sum over the subgroup's lanes: an xor butterfly with constant lane masks. Every lane ends
// with the same value bit for bit (each level adds the same two numbers, in either order).
fn partial_sum(v: vec4<f32>, size: u32, li: u32) -> vec4<f32> {
    var u = v;
    if (size > 1u) { u = u + lane_xor(u, 1u, li); }
    if (size > 2u) { u = u + lane_xor(u, 2u, li); }
    if (size > 4u) { u = u + lane_xor(u, 4u, li); }
    if (size > 8u) { u = u + lane_xor(u, 8u, li); }
    if (size > 16u) { u = u + lane_xor(u, 16u, li); }
    if (size > 32u) { u = u + lane_xor(u, 32u, li); }
    if (size > 64u) { u = u + lane_xor(u, 64u, li); }
    return u;
}
