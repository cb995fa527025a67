// Runs a model once with onnxruntime-node (bench/ort/install.sh) and writes
// its first output as a .npy file: the reference check_corpus.sh compares
// Tether's outputs with.
//
// usage: node ort_outputs.js MODEL.onnx X.npy OUT.npy
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, '..', 'ort', 'node_modules', 'onnxruntime-node'));

// A float32 .npy file (format 1.0, little-endian) as an ort.Tensor.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.readUInt8(0) !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') {
    throw new Error(`${file}: not a .npy file`);
  }
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + headerLen);
  if (!/'descr':\s*'<f4'/.test(header)) throw new Error(`${file}: not float32`);
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',')
      .map((s) => s.trim()).filter((s) => s.length).map(Number);
  const data = buf.subarray(10 + headerLen);
  const copy = data.buffer.slice(data.byteOffset, data.byteOffset + data.length);
  return new ort.Tensor('float32', new Float32Array(copy), dims);
}

function writeNpy(file, tensor) {
  if (tensor.type !== 'float32') throw new Error(`output is ${tensor.type}, not float32`);
  const shape = tensor.dims.length === 1 ? `${tensor.dims[0]},` : tensor.dims.join(', ');
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape}), }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';  // 64-byte aligned
  const prefix = Buffer.alloc(10);
  Buffer.from('\x93NUMPY', 'latin1').copy(prefix);
  prefix.writeUInt8(1, 6);
  prefix.writeUInt16LE(header.length, 8);
  const d = tensor.data;
  fs.writeFileSync(file, Buffer.concat([prefix, Buffer.from(header, 'latin1'),
    Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
}

async function main() {
  const [model, x, out] = process.argv.slice(2);
  if (!out) throw new Error('usage: node ort_outputs.js MODEL.onnx X.npy OUT.npy');
  const session = await ort.InferenceSession.create(model, {graphOptimizationLevel: 'all'});
  const result = await session.run({x: readNpy(x)});
  writeNpy(out, result[session.outputNames[0]]);
}

main().catch((e) => {
  process.stderr.write(`ort_outputs: ${e.message}\n`);
  process.exit(1);
});
