// Real spherical harmonics up to degree 3 (the 3DGS constants and sign conventions).
// Coefficients of one splat start at params[base]: K coefficients x 3 channels, coefficient-major
// (sh[k*3 + c]), coefficient 0 is the DC term.

// The constants are generated from wgsl_splat/contract/sh.py.
#include "sh_constants.wgsl"

// The 16 basis values for direction d (entries beyond the degree are unused).
fn sh_basis(d: vec3<f32>, out_b: ptr<function, array<f32, 16>>) {
    let x = d.x;
    let y = d.y;
    let z = d.z;
    (*out_b)[0] = SH_C0;
    (*out_b)[1] = -SH_C1 * y;
    (*out_b)[2] = SH_C1 * z;
    (*out_b)[3] = -SH_C1 * x;
    let xx = x * x;
    let yy = y * y;
    let zz = z * z;
    (*out_b)[4] = SH_C2_0 * x * y;
    (*out_b)[5] = SH_C2_1 * y * z;
    (*out_b)[6] = SH_C2_2 * (2.0 * zz - xx - yy);
    (*out_b)[7] = SH_C2_3 * x * z;
    (*out_b)[8] = SH_C2_4 * (xx - yy);
    (*out_b)[9] = SH_C3_0 * y * (3.0 * xx - yy);
    (*out_b)[10] = SH_C3_1 * x * y * z;
    (*out_b)[11] = SH_C3_2 * y * (4.0 * zz - xx - yy);
    (*out_b)[12] = SH_C3_3 * z * (2.0 * zz - 3.0 * xx - 3.0 * yy);
    (*out_b)[13] = SH_C3_4 * x * (4.0 * zz - xx - yy);
    (*out_b)[14] = SH_C3_5 * z * (xx - yy);
    (*out_b)[15] = SH_C3_6 * x * (xx - 3.0 * yy);
}
