// The room's ranking on the device (TrainState.grow when the room binds; NumPy twin:
// contract/state.py budget): the rows with the highest rank key grow first (ties: lower index) as
// long as the running total of their costs fits the room. Found without sorting or reading back:
// the cut key T is the largest value whose rows of key >= T cost more than the room, selected a
// byte at a time from the top (a cost-weighted histogram of the rows that share the bytes chosen
// so far, then the largest byte that still overflows); the rows of key T are then cut the same
// way by index (key ~index, so that the lower indices rank first).
//
//   rank_histogram : per row of cost > 0 whose key matches the cut's bytes so far, its cost into
//                    the bin of its next byte (phase 0: the rank key; phase 1: the rows of key T,
//                    by ~index)
//   rank_select    : one workgroup: the largest byte whose rows still overflow the room; the
//                    bins cleared for the next level
//   rank_allow     : allowed[g] = 1 for the rows above the cut (grow.wgsl's use_allowed)
//
// Keys are the bits of a non-negative float (they order as u32) or 0 for all rows alike; costs
// are small integers whose sum over the rows fits a u32.

const WG: u32 = 256u;           // threads per workgroup (the host reads it from here)
// rows per thread of rank_histogram, strided by WG (the host reads it from here): the bins'
// clearing and flush are paid once per ROWS * WG rows
const ROWS: u32 = 4u;

struct RankParams {
    n: u32,               // rows
    x_groups: u32,        // x workgroups per grid row
    phase: u32,           // 0: the rank key; 1: the rows of key T, by ~index
    level: u32,           // 0..3: the byte chosen, from the top
}

// cut: [0] the room left for this phase, [1] T (phase 0's cut), [2] phase 1's cut on ~index,
// [3] the cost of the rows above the cut so far
@group(0) @binding(0) var<uniform> rp: RankParams;
@group(0) @binding(1) var<storage, read> plan: array<u32>;     // grow.wgsl's: costs at [3N, 4N)
@group(0) @binding(2) var<storage, read> keys: array<u32>;     // each row's rank key
@group(0) @binding(3) var<storage, read_write> hist: array<atomic<u32>, 256>;
@group(0) @binding(4) var<storage, read_write> cut: array<u32, 4>;
@group(0) @binding(5) var<storage, read_write> allowed: array<u32>;

// one bin per thread: WG must stay 256 (each thread clears, flushes and selects its own bin)
var<workgroup> wg_hist: array<atomic<u32>, 256>;
var<workgroup> wg_bins: array<u32, 256>;

fn row_of(lid: u32, wid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * rp.x_groups) * WG + lid;
}

// The key a phase ranks row g by (descending), or false where the row takes no part.
fn phase_key(g: u32) -> vec2<u32> {
    if (plan[3u * rp.n + g] == 0u) {
        return vec2<u32>(0u, 0u);
    }
    if (rp.phase == 0u) {
        return vec2<u32>(keys[g], 1u);
    }
    return vec2<u32>(~g, select(0u, 1u, keys[g] == cut[1]));
}

@compute @workgroup_size(WG)
fn rank_histogram(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    atomicStore(&wg_hist[lid], 0u);
    workgroupBarrier();
    let shift = 24u - 8u * rp.level;
    // the bytes above this level must equal the cut's so far (none at level 0)
    let high = select(0xffffffffu << (shift + 8u), 0u, rp.level == 0u);
    let chosen = select(cut[2], cut[1], rp.phase == 0u) & high;
    let first = (wid.x + wid.y * rp.x_groups) * WG * ROWS + lid;
    for (var r = 0u; r < ROWS; r = r + 1u) {
        let g = first + r * WG;
        if (g < rp.n) {
            let k = phase_key(g);
            if (k.y != 0u && (k.x & high) == chosen) {
                atomicAdd(&wg_hist[(k.x >> shift) & 255u], plan[3u * rp.n + g]);
            }
        }
    }
    workgroupBarrier();
    let v = atomicLoad(&wg_hist[lid]);
    if (v != 0u) {
        atomicAdd(&hist[lid], v);
    }
}

@compute @workgroup_size(WG)
fn rank_select(@builtin(local_invocation_index) lid: u32) {
    wg_bins[lid] = atomicLoad(&hist[lid]);
    atomicStore(&hist[lid], 0u);          // for the next level
    workgroupBarrier();
    if (lid != 0u) {
        return;
    }
    let room = cut[0];
    var above = cut[3];
    var chosen = 0u;
    for (var j = 0u; j < 256u; j = j + 1u) {
        let b = 255u - j;
        if (above + wg_bins[b] > room) {    // above <= room here: no wrap
            chosen = b;
            break;
        }
        above = above + wg_bins[b];
    }
    let shift = 24u - 8u * rp.level;
    let slot = select(2u, 1u, rp.phase == 0u);
    cut[slot] = cut[slot] | (chosen << shift);
    cut[3] = above;
    if (rp.phase == 0u && rp.level == 3u) {   // phase 1 cuts the rows of key T in what is left
        cut[0] = room - above;
        cut[3] = 0u;
    }
}

@compute @workgroup_size(WG)
fn rank_allow(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let g = row_of(lid, wid);
    if (g >= rp.n) {
        return;
    }
    let key = keys[g];
    let grows = plan[3u * rp.n + g] != 0u;
    allowed[g] = select(0u, 1u, grows && (key > cut[1] || (key == cut[1] && ~g > cut[2])));
}
