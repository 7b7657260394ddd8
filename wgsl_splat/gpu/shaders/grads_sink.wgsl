// project_backward.wgsl's sink of the parameter gradients: the flat `grads` buffer (the layout of
// `params`), written, or added to the batch's sum so far (ACCUMULATE). Adam (adam.wgsl) follows.

@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(4) var<storage, read_write> grads: array<f32>;

fn sink(o: u32, v: f32) {
    grads[o] = select(v, grads[o] + v, ACCUMULATE);
}
