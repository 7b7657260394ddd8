// Micro-kernels that measure what this adapter can do (wgsl_splat/roofline.py, benchmarks/
// machine_limits.py): arithmetic throughput, the bytes per second a kernel can move, and the cost of
// a dispatch that does nothing. The roofline of every stage of the training step is set against
// these, not against a data sheet.

@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;

override LOOP: u32 = 1024u;

// 8 independent vec4 chains of fused multiply-adds (2 FLOP per component): enough independent
// work to fill the pipelines of a CPU core's SIMD units or a GPU's lanes. The result is stored only
// when it takes an impossible value, so nothing is optimised away and nothing is written.
@compute @workgroup_size(64)
fn fma_chain(@builtin(global_invocation_id) gid: vec3<u32>) {
    let f = f32(gid.x) * 1e-7;
    var a0 = vec4<f32>(f, f + 1.0, f + 2.0, f + 3.0);
    var a1 = a0 + 0.5;
    var a2 = a0 + 0.25;
    var a3 = a0 + 0.125;
    var a4 = a0 + 0.3;
    var a5 = a0 + 0.6;
    var a6 = a0 + 0.7;
    var a7 = a0 + 0.8;
    let m = vec4<f32>(0.999);
    let c = vec4<f32>(1e-3);
    for (var i = 0u; i < LOOP; i = i + 1u) {
        a0 = fma(a0, m, c);
        a1 = fma(a1, m, c);
        a2 = fma(a2, m, c);
        a3 = fma(a3, m, c);
        a4 = fma(a4, m, c);
        a5 = fma(a5, m, c);
        a6 = fma(a6, m, c);
        a7 = fma(a7, m, c);
    }
    let s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    if (s.x == 12345.678) {
        dst[gid.x] = s;
    }
}

// A copy, four consecutive vec4 per invocation (of the copy layouts tried on lavapipe the fastest:
// one vec4 per invocation moved 3.6 GB/s, one f32 1.5 GB/s, four vec4 4.6 GB/s).
@compute @workgroup_size(64)
fn copy_vec4(@builtin(global_invocation_id) gid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = 4u * (gid.x + gid.y * nwg.x * 64u);
    if (i + 3u < arrayLength(&dst)) {
        dst[i] = src[i];
        dst[i + 1u] = src[i + 1u];
        dst[i + 2u] = src[i + 2u];
        dst[i + 3u] = src[i + 3u];
    }
}

// A dispatch that does nothing (one workgroup): what a stage pays per dispatch besides its work.
@compute @workgroup_size(64)
fn empty(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x == 0xffffffffu) {
        dst[0] = vec4<f32>(1.0);
    }
}
