// Bitonic sort of (key, value) pairs on the GPU, ascending by (key.x, key.y, value).
//
// key.x = tile id, key.y = bitcast<u32>(depth) (depth > 0, so the float bits sort as integers),
// value = splat id; comparing the value too makes every element distinct, so the result equals
// a stable sort by (tile, depth) over splat ids (the reference's tie-break by Gaussian index).
//
// The padded size P = counters[2] is a power of two >= SORT_BLOCK computed on the GPU from the
// intersection count; the host encodes the stages for the capacity C >= P and stages or workgroups
// beyond P return at once (no host read-back). Dispatches per sort of C = 2^k elements:
//   sort_local  : sorts each block of SORT_BLOCK = 1024 elements in workgroup memory (12 KiB),
//                 all log2(1024) merge levels in one dispatch; pads [count, P) with max keys;
//   per merge level size = 2048 .. C:
//     sort_global: the substages with distance j >= 1024, R of them fused per dispatch, each
//                  thread holding 2^R elements in registers (R is a pipeline override constant);
//     sort_merge : the last 10 substages (j = 512 .. 1) inside each block in workgroup memory.

#include "common.wgsl"

struct SortStage {
    size: u32,      // bitonic merge level (block size being merged)
    log2_j: u32,    // log2 of the first compare distance of this dispatch
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> keys: array<vec2<u32>>;
@group(0) @binding(1) var<storage, read_write> vals: array<u32>;
@group(0) @binding(2) var<storage, read> counters: array<u32>;
@group(0) @binding(3) var<uniform> stage: SortStage;  // dynamic

override R: u32 = 3u;   // substages fused per sort_global dispatch (1..4)

const MAX_KEY: vec2<u32> = vec2<u32>(0xffffffffu, 0xffffffffu);
const MAX_VAL: u32 = 0xffffffffu;
const HALF_BLOCK: u32 = 512u;

var<workgroup> sk: array<vec2<u32>, 1024>;
var<workgroup> sv: array<u32, 1024>;

fn greater(ka: vec2<u32>, va: u32, kb: vec2<u32>, vb: u32) -> bool {
    if (ka.x != kb.x) { return ka.x > kb.x; }
    if (ka.y != kb.y) { return ka.y > kb.y; }
    return va > vb;
}

// Compare-exchange of workgroup elements i < l; ascending puts the smaller at i.
fn cas_shared(i: u32, l: u32, ascending: bool) {
    let ka = sk[i];
    let va = sv[i];
    let kb = sk[l];
    let vb = sv[l];
    if (greater(ka, va, kb, vb) == ascending) {
        sk[i] = kb;
        sv[i] = vb;
        sk[l] = ka;
        sv[l] = va;
    }
}

// Merge substages j = first_j .. 1 of level `size` on the block held in workgroup memory.
fn merge_in_shared(lid: u32, base: u32, size: u32, first_j: u32) {
    for (var j = first_j; j > 0u; j = j >> 1u) {
        for (var q = 0u; q < 2u; q = q + 1u) {
            let p = lid + q * 256u;                  // pair index 0..511
            let i = 2u * p - (p & (j - 1u));         // lower element of the pair
            cas_shared(i, i + j, ((base + i) & size) == 0u);
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(256)
fn sort_local(@builtin(local_invocation_index) lid: u32,
              @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let count = counters[1];
    let padded = counters[2];
    let base = linear_workgroup(wid, nwg) * SORT_BLOCK;
    if (base >= padded) {
        return;
    }
    for (var q = 0u; q < 4u; q = q + 1u) {
        let i = lid + q * 256u;
        let gi = base + i;
        if (gi < count) {
            sk[i] = keys[gi];
            sv[i] = vals[gi];
        } else {
            sk[i] = MAX_KEY;
            sv[i] = MAX_VAL;
        }
    }
    workgroupBarrier();
    for (var size = 2u; size <= SORT_BLOCK; size = size << 1u) {
        merge_in_shared(lid, base, size, size >> 1u);
    }
    for (var q = 0u; q < 4u; q = q + 1u) {
        let i = lid + q * 256u;
        keys[base + i] = sk[i];
        vals[base + i] = sv[i];
    }
}

@compute @workgroup_size(256)
fn sort_merge(@builtin(local_invocation_index) lid: u32,
              @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let padded = counters[2];
    let size = stage.size;
    let base = linear_workgroup(wid, nwg) * SORT_BLOCK;
    if (size > padded || base >= padded) {
        return;
    }
    for (var q = 0u; q < 4u; q = q + 1u) {
        let i = lid + q * 256u;
        sk[i] = keys[base + i];
        sv[i] = vals[base + i];
    }
    workgroupBarrier();
    merge_in_shared(lid, base, size, HALF_BLOCK);
    for (var q = 0u; q < 4u; q = q + 1u) {
        let i = lid + q * 256u;
        keys[base + i] = sk[i];
        vals[base + i] = sv[i];
    }
}

@compute @workgroup_size(256)
fn sort_global(@builtin(local_invocation_index) lid: u32,
               @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let padded = counters[2];
    let size = stage.size;
    let lj = stage.log2_j;
    let n_elem = 1u << R;
    let t = linear_workgroup(wid, nwg) * 256u + lid;
    if (size > padded || t * n_elem >= padded) {
        return;
    }
    // The group of 2^R elements whose index bits lj-R+1 .. lj vary.
    let low = lj + 1u - R;
    let base = ((t >> low) << (lj + 1u)) | (t & ((1u << low) - 1u));
    let ascending = (base & size) == 0u;
    var k: array<vec2<u32>, 16>;
    var v: array<u32, 16>;
    for (var m = 0u; m < n_elem; m = m + 1u) {
        let idx = base + (m << low);
        k[m] = keys[idx];
        v[m] = vals[idx];
    }
    for (var s = 0u; s < R; s = s + 1u) {
        let d = 1u << (R - 1u - s);
        for (var m = 0u; m < n_elem; m = m + 1u) {
            if ((m & d) == 0u) {
                let l = m | d;
                if (greater(k[m], v[m], k[l], v[l]) == ascending) {
                    let tk = k[m];
                    let tv = v[m];
                    k[m] = k[l];
                    v[m] = v[l];
                    k[l] = tk;
                    v[l] = tv;
                }
            }
        }
    }
    for (var m = 0u; m < n_elem; m = m + 1u) {
        let idx = base + (m << low);
        keys[idx] = k[m];
        vals[idx] = v[m];
    }
}
