// Counter-based random numbers: the WGSL twin of wgsl_splat/counter_rng.py (same integer
// operations, so the NumPy path draws exactly the numbers the device draws). A number is a pure
// function of (key, index, k); key = stream_key(seed, stream) is computed once per dispatch.

fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

fn stream_key(seed: u32, stream: u32) -> u32 {
    return pcg(pcg(seed) + stream);
}

fn random_bits(key: u32, index: u32, k: u32) -> u32 {
    return pcg(pcg(key + index) + k);
}

// Uniform in (0, 1], exact in f32.
fn random_uniform(key: u32, index: u32, k: u32) -> f32 {
    return (f32(random_bits(key, index, k) >> 8u) + 1.0) * 5.9604644775390625e-08;
}

// Three standard normals (Box-Muller of uniforms 0,1 and 2,3).
fn random_normal3(key: u32, index: u32) -> vec3<f32> {
    let u0 = random_uniform(key, index, 0u);
    let u1 = random_uniform(key, index, 1u);
    let u2 = random_uniform(key, index, 2u);
    let u3 = random_uniform(key, index, 3u);
    let r0 = sqrt(-2.0 * log(u0));
    let r1 = sqrt(-2.0 * log(u2));
    let two_pi = 6.283185307179586;
    return vec3<f32>(r0 * cos(two_pi * u1), r0 * sin(two_pi * u1), r1 * cos(two_pi * u3));
}
