// partials_subgroup.wgsl with a subgroup of LANE_WIDTH consecutive invocations (by local index)
// emulated through workgroup memory: the same slot, mask and butterfly (partials_butterfly.wgsl),
// so the gradient checks prove them at the widths of real GPUs (32: Apple, NVIDIA; 64: AMD), which
// lavapipe's 4 to 16 lanes cannot. A test variant (Layout.emulated_subgroup), never the default:
// every exchange costs two barriers.
//
// A subgroup wider than the workgroup (the CPU layout's 8 threads per tile) has the workgroup's
// invocations as its lanes, as on hardware: an 8-invocation workgroup on a 32-wide SIMD group runs
// 8 active lanes, and subgroupAdd(1u) counts 8.
//
// The barriers stand where the subgroup operations stand: after branches that have ended, which
// WGSL makes uniform for barriers (as after every kernel's `if (li == 0u) { ... }`), never after
// a per-lane return, break or continue; Tint's uniformity analysis checks them (the tour).

const LANE_WIDTH: u32 = {{LANE_WIDTH}}u;
const LANES: u32 = min(LANE_WIDTH, THREADS);

var<workgroup> s_lane: array<vec4<f32>, THREADS>;
var<workgroup> s_lane_max: array<atomic<u32>, THREADS>;

fn lane_first(li: u32) -> u32 {
    return li - li % LANES;
}

fn lane_index(li: u32) -> u32 {
    return li % LANES;
}

fn lane_count() -> u32 {
    return LANES;
}

fn lane_max(x: u32, li: u32) -> u32 {
    atomicStore(&s_lane_max[li], 0u);
    workgroupBarrier();
    atomicMax(&s_lane_max[lane_first(li)], x);
    workgroupBarrier();
    let m = atomicLoad(&s_lane_max[lane_first(li)]);
    workgroupBarrier();     // every lane has read it before the next call clears it
    return m;
}

// Lane li ^ mask stays in li's subgroup: the subgroups start at multiples of LANES and mask < LANES.
fn lane_xor(v: vec4<f32>, mask: u32, li: u32) -> vec4<f32> {
    s_lane[li] = v;
    workgroupBarrier();
    let u = s_lane[li ^ mask];
    workgroupBarrier();     // every lane has read before the next exchange writes
    return u;
}

#include "partials_butterfly.wgsl"
