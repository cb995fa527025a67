// The ONNX Runtime anchor of bench/model_bench: times one model with
// onnxruntime-node (the CPU build of ONNX Runtime, installed from the npm
// registry by bench/ort/install.sh) and prints the samples as JSON.
//
// usage: node ort_bench.js MODEL.onnx INPUT_NAME=FILE.npy[,...] THREADS SAMPLES NUMBER
// Prints {"samples_ms": [...], "mean_ms": .., "median_ms": .., "max_abs_out": ..}:
// SAMPLES samples, each the mean of NUMBER session.run calls, after a warm-up.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

// A .npy file (format 1.0/2.0, little-endian float32/int64/int32) as an ort.Tensor.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.readUInt8(0) !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') {
    throw new Error(`${file}: not a .npy file`);
  }
  const major = buf.readUInt8(6);
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: fortran order`);
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',')
      .map((s) => s.trim()).filter((s) => s.length).map(Number);
  const data = buf.subarray(start + headerLen);
  const copy = (Ctor) => new Ctor(data.buffer.slice(data.byteOffset, data.byteOffset + data.length));
  if (descr === '<f4') return new ort.Tensor('float32', copy(Float32Array), dims);
  if (descr === '<i8') return new ort.Tensor('int64', copy(BigInt64Array), dims);
  if (descr === '<i4') return new ort.Tensor('int32', copy(Int32Array), dims);
  throw new Error(`${file}: dtype ${descr} is not supported here`);
}

async function main() {
  const [model, inputs, threads, samples, number] = process.argv.slice(2);
  if (!number) throw new Error('usage: node ort_bench.js MODEL INPUTS THREADS SAMPLES NUMBER');
  const feeds = {};
  for (const spec of inputs.split(',')) {
    const eq = spec.indexOf('=');
    feeds[spec.slice(0, eq)] = readNpy(spec.slice(eq + 1));
  }
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  let out = await session.run(feeds);
  // Warm-up: 10 runs and at least 300 ms, as model_bench does on its side.
  const warmStart = process.hrtime.bigint();
  for (let i = 0; i < 10 || process.hrtime.bigint() - warmStart < 300000000n; ++i) {
    out = await session.run(feeds);
  }
  const times = [];
  for (let s = 0; s < Number(samples); ++s) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < Number(number); ++i) out = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6 / Number(number));
  }
  const sorted = [...times].sort((a, b) => a - b);
  const first = out[session.outputNames[0]].data;
  let maxAbs = 0;
  for (const v of first) maxAbs = Math.max(maxAbs, Math.abs(Number(v)));
  process.stdout.write(JSON.stringify({
    samples_ms: times,
    mean_ms: times.reduce((a, b) => a + b, 0) / times.length,
    median_ms: sorted[Math.floor(sorted.length / 2)],
    max_abs_out: maxAbs,
  }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`ort_bench: ${e.message}\n`);
  process.exit(1);
});
