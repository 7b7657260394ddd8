// Present a rendered image (the renderer's `image` buffer: H*W*3 f32, RGB interleaved) to a window
// surface: a fullscreen triangle whose fragment shader reads the storage buffer directly, so the
// image goes from the rasteriser to the screen without a host round trip. Values are clamped to
// [0, 1] and written as they are (the surface is a non-sRGB format, as PNGs are written).

struct PresentParams {
    size: vec4<u32>,      // image width, height, 0, 0
}

@group(0) @binding(0) var<uniform> pp: PresentParams;
@group(0) @binding(1) var<storage, read> image: array<f32>;

@vertex
fn vs_main(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    let uv = vec2<f32>(f32((i << 1u) & 2u), f32(i & 2u));
    return vec4<f32>(uv * 2.0 - 1.0, 0.0, 1.0);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let x = u32(pos.x);
    let y = u32(pos.y);
    if (x >= pp.size.x || y >= pp.size.y) {
        return vec4<f32>(0.0, 0.0, 0.0, 1.0);
    }
    let p = 3u * (y * pp.size.x + x);
    return vec4<f32>(clamp(vec3<f32>(image[p], image[p + 1u], image[p + 2u]), vec3<f32>(0.0),
                           vec3<f32>(1.0)), 1.0);
}
