// Tint (Dawn for Node, Null backend) and naga (WebAssembly) over the variants of a portability
// dump: node portability_check.mjs NODE_MODULES_DIR DUMP_DIR. Reads DUMP_DIR/manifest.json
// (written by wgsl_splat/tools/portability.py), writes the MSL/HLSL translations next to it and
// DUMP_DIR/results.json: per variant and backend {status: ok|fail|unavailable, message, file}.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modulesDir, dumpDir] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(join(modulesDir, p)).href);
const { create, globals } = await load('webgpu/index.js');
const naga = await load('naga-wasm/dist/node.js');
Object.assign(globalThis, globals);

const manifest = JSON.parse(readFileSync(join(dumpDir, 'manifest.json'), 'utf8'));
const gpu = create(['backend=null']);
// An adapter makes one device: one adapter for the plain device, one for the subgroup device.
const adapter = await gpu.requestAdapter();
if (!adapter) throw new Error('Dawn has no Null adapter');
// WebGPU's default limits (no requiredLimits): what every WebGPU implementation offers.
const plain = await adapter.requestDevice();
const adapter2 = await gpu.requestAdapter();
const withSubgroups = adapter2.features.has('subgroups')
  ? await adapter2.requestDevice({ requiredFeatures: ['subgroups'] }) : null;

const oneLine = (s) => String(s).trim();

async function tint(v, code) {
  if (v.needs.includes('float-atomics')) {
    return { status: 'unavailable', message: 'atomic<f32> is not in WebGPU (the CAS variant is the WebGPU path)' };
  }
  let device = plain;
  if (v.needs.includes('subgroups')) {
    if (!withSubgroups) return { status: 'unavailable', message: 'this Dawn adapter has no subgroups' };
    device = withSubgroups;
    code = 'enable subgroups;\n' + code;
  }
  device.pushErrorScope('validation');
  const module = device.createShaderModule({ code, label: v.id });
  const info = await module.getCompilationInfo();
  const errors = info.messages.filter((m) => m.type === 'error')
    .map((m) => `${v.wgsl}:${m.lineNum}:${m.linePos}: ${m.message}`);
  if (v.stage === 'compute') {
    device.createComputePipeline({
      layout: 'auto', label: v.id,
      compute: { module, entryPoint: v.entry, constants: v.constants },
    });
  } else if (v.stage === 'fragment') {
    device.createRenderPipeline({
      layout: 'auto', label: v.id,
      vertex: { module, entryPoint: manifest.find((w) => w.module_id === v.module_id && w.stage === 'vertex').entry },
      fragment: { module, entryPoint: v.entry, targets: [{ format: 'bgra8unorm' }] },
    });
  }
  const err = await device.popErrorScope();
  if (err) errors.push(err.message);
  return errors.length ? { status: 'fail', message: oneLine(errors.join('\n')) } : { status: 'ok' };
}

function nagaWrite(v, code) {
  const out = {};
  let module, info;
  try {
    module = naga.parseWgsl(code);
    info = naga.validate(module);
  } catch (e) {
    const msg = { status: 'fail', message: oneLine(e.formatted || e.message) };
    return { 'naga-msl': msg, 'naga-hlsl-sm60': msg, 'naga-hlsl-sm51': msg };
  }
  const write = (key, fn, file) => {
    try {
      writeFileSync(join(dumpDir, file), fn());
      out[key] = { status: 'ok', file };
    } catch (e) {
      out[key] = { status: 'fail', message: oneLine(e.formatted || e.message) };
    }
  };
  write('naga-msl', () => naga.writeMsl(module, info, { langVersion: [3, 0] }), `${v.id}.metal`);
  if (v.needs.includes('float-atomics')) {
    const why = { status: 'unavailable', message: 'float atomics: not on DX12 (wgpu)' };
    out['naga-hlsl-sm60'] = why;
    out['naga-hlsl-sm51'] = why;
  } else {
    write('naga-hlsl-sm60', () => naga.writeHlsl(module, info, { shaderModel: '6_0' }), `${v.id}.sm60.hlsl`);
    if (v.needs.includes('subgroups')) {
      out['naga-hlsl-sm51'] = { status: 'unavailable', message: 'subgroups need shader model 6 (DXC)' };
    } else {
      write('naga-hlsl-sm51', () => naga.writeHlsl(module, info, { shaderModel: '5_1' }), `${v.id}.sm51.hlsl`);
    }
  }
  info.free?.();
  module.free?.();
  return out;
}

const results = [];
for (const v of manifest) {
  const code = readFileSync(join(dumpDir, v.wgsl), 'utf8');
  const resolved = readFileSync(join(dumpDir, v.resolved), 'utf8');
  let t;
  try {
    t = await tint(v, code);
  } catch (e) {
    t = { status: 'fail', message: oneLine(e.message) };
  }
  results.push({ id: v.id, tint: t, ...nagaWrite(v, resolved) });
}
writeFileSync(join(dumpDir, 'results.json'), JSON.stringify({ nagaVersion: naga.nagaVersion, variants: results }, null, 1));
plain.destroy();
withSubgroups?.destroy();
process.exit(0);
