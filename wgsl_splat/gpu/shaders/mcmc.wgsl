// 3DGS-MCMC on the device (NumPy twin: reference/rows.py relocate, add_by_opacity,
// perturb_means):
//
//   mcmc_weights   : weights[i] = floor(σ(logit_i)·2^q), σ from the shared table (0 for dead rows
//                    when relocating), and the number of dead rows
//   (prefix.wgsl: exclusive scan of the weights; the total is the last block sum)
//   mcmc_draw      : each draw d (a dead row when relocating, a new row N + t when adding) takes
//                    bits(key, d) mod total and finds the row whose weight interval holds it;
//                    counts[source] += 1
//   mcmc_relocated : per drawn source, the relocation of eq. 9 (counts + 1 copies): new opacity
//                    logit and log-scale shift
//   mcmc_rows      : the row table (state_rows.wgsl): relocated rows and their sources RELOCATE,
//                    the others KEEP
//   mcmc_perturb   : every step, means += Σ·z·σ(100·(1 − o − 0.995))·scale
//
// Integer weights make the cumulative sums exact, so the draws are those of the NumPy path.

#include "random.wgsl"

const MAX_RATIO: u32 = 51u;
const F32_EPS: f32 = 1.1920928955078125e-07;

struct McmcParams {
    sizes: vec4<u32>,     // N, draws (adding) or 0 (relocating), weight bits q, scan blocks
    offs: vec4<u32>,      // params offsets: log-scales, quats, opacity logits, SH
    misc: vec4<f32>,      // dead logit threshold, min opacity, noise scale, 0
    keys: vec4<u32>,      // random stream, x workgroups per grid row, relocating (1) or adding (0), 0
}

@group(0) @binding(0) var<uniform> mp: McmcParams;
@group(0) @binding(1) var<storage, read_write> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> weights: array<u32>;   // weights, then their scan
@group(0) @binding(3) var<storage, read> scan_sums: array<u32>;
@group(0) @binding(4) var<storage, read_write> sources: array<u32>;   // per draw: its source
@group(0) @binding(5) var<storage, read_write> counts: array<atomic<u32>>;   // N draw counts, then dead
@group(0) @binding(6) var<storage, read_write> relocated: array<vec2<f32>>;
@group(0) @binding(7) var<storage, read_write> table: array<vec2<u32>>;
@group(0) @binding(8) var<storage, read> sigmoid_table: array<f32>;   // σ(k/64), |k| ≤ 1024

const SIGMOID_STEPS: f32 = 64.0;
const SIGMOID_HALF: f32 = 1024.0;

var<workgroup> wg_dead: atomic<u32>;

fn thread_index(lid: u32, wid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * mp.keys.y) * 256u + lid;
}

fn is_dead(i: u32) -> bool {
    return params[mp.offs.z + i] <= mp.misc.x;
}

fn opacity(i: u32) -> f32 {
    return 1.0 / (1.0 + exp(-params[mp.offs.z + i]));
}

@compute @workgroup_size(256)
fn mcmc_weights(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (lid == 0u) {
        atomicStore(&wg_dead, 0u);
    }
    workgroupBarrier();
    let n = mp.sizes.x;
    let i = thread_index(lid, wid);
    if (i < n) {
        let dead = is_dead(i);
        // σ from the shared table at round(64·logit): the NumPy path's weights bit for bit
        let k = clamp(round(params[mp.offs.z + i] * SIGMOID_STEPS), -SIGMOID_HALF, SIGMOID_HALF);
        var w = u32(floor(sigmoid_table[u32(k + SIGMOID_HALF)] * f32(1u << mp.sizes.z)));
        if (dead && mp.keys.z == 1u) {
            w = 0u;
        }
        weights[i] = w;
        if (dead) {
            atomicAdd(&wg_dead, 1u);
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        let d = atomicLoad(&wg_dead);
        if (d != 0u) {
            atomicAdd(&counts[n], d);
        }
    }
}

// The row whose weight interval [excl(i), excl(i) + w(i)) holds r: the last i with excl(i) <= r
// among rows of non-zero weight, i.e. (the first j in [1, N] with excl(j) > r) - 1, excl(N) = total.
fn locate(r: u32, total: u32) -> u32 {
    let n = mp.sizes.x;
    var lo = 1u;
    var hi = n;       // excl(n) = total > r: the answer is in [lo, hi]
    while (lo < hi) {
        let mid = (lo + hi) / 2u;
        var v = total;
        if (mid < n) {
            v = weights[mid];
        }
        if (v > r) {
            hi = mid;
        } else {
            lo = mid + 1u;
        }
    }
    return lo - 1u;
}

@compute @workgroup_size(256)
fn mcmc_draw(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let n = mp.sizes.x;
    let t = thread_index(lid, wid);
    let total = scan_sums[mp.sizes.w];
    var draw = 0u;
    if (mp.keys.z == 1u) {
        if (t >= n || !is_dead(t)) {
            return;
        }
        draw = t;                 // a dead row draws its own replacement
    } else {
        if (t >= mp.sizes.y) {
            return;
        }
        draw = n + t;             // new row N + t
    }
    if (total == 0u) {
        return;
    }
    let s = locate(random_bits(mp.keys.x, draw, 0u) % total, total);
    sources[draw] = s;
    atomicAdd(&counts[s], 1u);
}

@compute @workgroup_size(256)
fn mcmc_relocated(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let s = thread_index(lid, wid);
    if (s >= mp.sizes.x) {
        return;
    }
    let c = atomicLoad(&counts[s]);
    if (c == 0u) {
        return;
    }
    let ratio = min(c + 1u, MAX_RATIO);
    let o = opacity(s);
    let new_o = 1.0 - pow(1.0 - o, 1.0 / f32(ratio));
    // eq. 9: o / Σ_{i=1..ratio} Σ_{k=0..i-1} C(i-1, k) (-1)^k new_o^(k+1) / sqrt(k+1)
    var denom = 0.0;
    for (var i = 1u; i <= ratio; i = i + 1u) {
        var binom = 1.0;          // C(i-1, k), built up along k
        var power = new_o;        // new_o^(k+1)
        var sign = 1.0;
        for (var k = 0u; k < i; k = k + 1u) {
            denom = denom + binom * sign * power / sqrt(f32(k + 1u));
            binom = binom * f32(i - 1u - k) / f32(k + 1u);
            power = power * new_o;
            sign = -sign;
        }
    }
    let clamped = clamp(new_o, mp.misc.y, 1.0 - F32_EPS);
    relocated[s] = vec2<f32>(log(clamped / (1.0 - clamped)), log(o / denom));
}

@compute @workgroup_size(256)
fn mcmc_rows(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let n = mp.sizes.x;
    let r = thread_index(lid, wid);
    if (r >= n + mp.sizes.y) {
        return;
    }
    let total = scan_sums[mp.sizes.w];
    var e = vec2<u32>(r, 0u);                                  // KEEP
    if (r >= n || (mp.keys.z == 1u && total != 0u && is_dead(r))) {
        e = vec2<u32>(sources[r], 3u);                         // RELOCATE from its draw
    } else if (atomicLoad(&counts[r]) != 0u) {
        e = vec2<u32>(r, 3u);                                  // a drawn source, relocated in place
    }
    table[r] = e;
}

@compute @workgroup_size(256)
fn mcmc_perturb(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = thread_index(lid, wid);
    if (i >= mp.sizes.x) {
        return;
    }
    let gate = 1.0 / (1.0 + exp(-100.0 * ((1.0 - opacity(i)) - 0.995)));
    let z = random_normal3(mp.keys.x, i) * (gate * mp.misc.z);
    let oq = mp.offs.y + 4u * i;
    let q4 = vec4<f32>(params[oq], params[oq + 1u], params[oq + 2u], params[oq + 3u]);
    let q = q4 / length(q4);
    let w = q.x;
    let x = q.y;
    let y = q.z;
    let zq = q.w;
    let rot = mat3x3<f32>(
        vec3<f32>(1.0 - 2.0 * (y * y + zq * zq), 2.0 * (x * y + w * zq), 2.0 * (x * zq - w * y)),
        vec3<f32>(2.0 * (x * y - w * zq), 1.0 - 2.0 * (x * x + zq * zq), 2.0 * (y * zq + w * x)),
        vec3<f32>(2.0 * (x * zq + w * y), 2.0 * (y * zq - w * x), 1.0 - 2.0 * (x * x + y * y)));
    let ol = mp.offs.x + 3u * i;
    let s2 = exp(2.0 * vec3<f32>(params[ol], params[ol + 1u], params[ol + 2u]));
    // Σ z = R (S² (Rᵀ z))
    let d = rot * (s2 * (transpose(rot) * z));
    params[3u * i] = params[3u * i] + d.x;
    params[3u * i + 1u] = params[3u * i + 1u] + d.y;
    params[3u * i + 2u] = params[3u * i + 2u] + d.z;
}
