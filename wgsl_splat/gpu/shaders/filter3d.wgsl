// Mip-Splatting's 3D smoothing filter of every Gaussian from the training cameras (antialiased
// mode). Math and conventions: wgsl_splat/reference/filter3d.py (compute_filter_3d). One thread per
// Gaussian, two dispatches of filter3d_pass:
//
//   FINISH = false  : ν = max over the cameras that see the mean (z > FILTER_3D_NEAR, inside the
//                     image widened by FILTER_3D_MARGIN) of max(fx, fy) / z, written to filter3d[i]
//                     (0: no camera sees it); the smallest ν > 0 goes to nu_min[0] (atomicMin on
//                     the float bits, which order like the floats for positive values; the host
//                     writes +inf there first)
//   FINISH = true   : filter3d[i] = FILTER_3D_SCALE / ν, with ν = nu_min[0] where no camera sees
//                     the mean (the largest filter of the others; 0 if nobody is seen at all)
//
// The means are the first 3N floats of the parameter buffer, where the training step keeps them.

#include "common.wgsl"

struct FilterParams {
    sizes: vec4<u32>,      // N, number of cameras, 0, 0
}

// One training camera, written once by the host (wgsl_splat/gpu/filter3d.py).
struct FilterCamera {
    w2c0: vec4<f32>,       // rows of the world-to-camera [R | t]
    w2c1: vec4<f32>,
    w2c2: vec4<f32>,
    intr: vec4<f32>,       // fx, fy, cx, cy
    size: vec4<f32>,       // width, height, max(fx, fy), 0
}

@group(0) @binding(0) var<uniform> fp: FilterParams;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read> cameras: array<FilterCamera>;
@group(0) @binding(3) var<storage, read_write> filter3d: array<f32>;
@group(0) @binding(4) var<storage, read_write> nu_min: array<atomic<u32>>;

// The pass: false = rates, true = finish (one entry point, two pipelines).
override FINISH: bool = false;

@compute @workgroup_size(BLOCK_SIZE)
fn filter3d_pass(@builtin(local_invocation_index) lid: u32,
                 @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_workgroup(wid, nwg) * BLOCK_SIZE + lid;
    if (i >= fp.sizes.x) {
        return;
    }
    if (FINISH) {
        let nu = filter3d[i];
        let lowest = bitcast<f32>(atomicLoad(&nu_min[0]));   // +inf when no mean is seen: filter 0
        filter3d[i] = FILTER_3D_SCALE / select(lowest, nu, nu > 0.0);
        return;
    }
    let mean = vec3<f32>(params[3u * i], params[3u * i + 1u], params[3u * i + 2u]);
    var nu = 0.0;
    for (var c = 0u; c < fp.sizes.y; c = c + 1u) {
        let cam = cameras[c];
        let z = dot(cam.w2c2.xyz, mean) + cam.w2c2.w;
        let zs = max(z, FILTER_3D_NEAR);
        let x = (dot(cam.w2c0.xyz, mean) + cam.w2c0.w) / zs * cam.intr.x + cam.intr.z;
        let y = (dot(cam.w2c1.xyz, mean) + cam.w2c1.w) / zs * cam.intr.y + cam.intr.w;
        let seen = z > FILTER_3D_NEAR
                && x >= -FILTER_3D_MARGIN * cam.size.x && x <= (1.0 + FILTER_3D_MARGIN) * cam.size.x
                && y >= -FILTER_3D_MARGIN * cam.size.y && y <= (1.0 + FILTER_3D_MARGIN) * cam.size.y;
        nu = select(nu, max(nu, cam.size.z / zs), seen);
    }
    filter3d[i] = nu;
    if (nu > 0.0) {
        atomicMin(&nu_min[0], bitcast<u32>(nu));
    }
}
