#!/usr/bin/python3
"""Builds the example ONNX models with NumPy reference inputs and outputs.

Usage: /usr/bin/python3 examples/onnx/make_models.py OUT_DIR

Writes, for each of mlp, cnn and transformer:
  OUT_DIR/<name>.onnx            the model (opset 17, weights as initializers)
  OUT_DIR/<name>.<input>.npy     its inputs
  OUT_DIR/<name>.expected.npy    the output computed here with NumPy
Only python3-onnx and python3-numpy from Debian are needed (no ONNX Runtime).
"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
rng = np.random.default_rng(2026)


def weight(*shape, scale=None):
    fan_in = shape[0] if len(shape) < 4 else int(np.prod(shape[1:]))
    scale = scale or 1.0 / math.sqrt(fan_in)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def save(out, name, nodes, inputs, outputs, inits, feeds, expected):
    graph = helper.make_graph(
        nodes, name, inputs, outputs,
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="tether-examples")
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))
    for k, v in feeds.items():
        np.save(os.path.join(out, f"{name}.{k}.npy"), v)
    np.save(os.path.join(out, f"{name}.expected.npy"), expected.astype(np.float32))


def layer_norm(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def mlp(out):
    """784 -> 256 -> 128 -> 10 with ReLU, a dynamic batch ("batch")."""
    w1, b1 = weight(256, 784), weight(256, scale=0.1)  # Gemm with transB=1 (PyTorch's export)
    w2, b2 = weight(256, 128), weight(128, scale=0.1)  # MatMul + Add
    w3, b3 = weight(10, 128), weight(10, scale=0.1)
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"], transB=1),
        helper.make_node("Relu", ["h1"], ["a1"]),
        helper.make_node("MatMul", ["a1", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["h2"]),
        helper.make_node("Relu", ["h2"], ["a2"]),
        helper.make_node("Gemm", ["a2", "w3", "b3"], ["y"], transB=1),
    ]
    x = rng.standard_normal((8, 784)).astype(np.float32)
    a1 = np.maximum(x @ w1.T + b1, 0)
    a2 = np.maximum(a1 @ w2 + b2, 0)
    y = a2 @ w3.T + b3
    save(out, "mlp", nodes,
         [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
         dict(w1=w1, b1=b1, w2=w2, b2=b2, w3=w3, b3=b3), dict(x=x), y)


def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - k + 1, wd + 2 * pad - k + 1
    cols = np.empty((n, c, k, k, oh, ow), np.float32)
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i:i + oh, j:j + ow]
    y = np.einsum("nckluv,ockl->nouv", cols, w, optimize=True)
    return y + b[None, :, None, None]


def cnn(out):
    """conv-bn-relu-pool, conv-relu, global average pool, gemm: 1x3x32x32 -> 10."""
    c1w, c1b = weight(16, 3, 3, 3), weight(16, scale=0.1)
    g, beta = (1 + 0.1 * rng.standard_normal(16)).astype(np.float32), weight(16, scale=0.1)
    mean, var = weight(16, scale=0.1), (1 + 0.2 * rng.random(16)).astype(np.float32)
    c2w, c2b = weight(32, 16, 3, 3), weight(32, scale=0.1)
    fw, fb = weight(10, 32), weight(10, scale=0.1)
    nodes = [
        helper.make_node("Conv", ["x", "c1w", "c1b"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mean", "var"], ["bn"], epsilon=1e-5),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "c2w", "c2b"], ["c2"], auto_pad="SAME_UPPER", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"], transB=1),
    ]
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    c1 = conv2d(x, c1w, c1b, 1)
    bn = (c1 - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5) \
        * g[None, :, None, None] + beta[None, :, None, None]
    r1 = np.maximum(bn, 0)
    p1 = r1.reshape(1, 16, 16, 2, 16, 2).max(axis=(3, 5))
    r2 = np.maximum(conv2d(p1, c2w, c2b, 1), 0)
    y = r2.mean(axis=(2, 3)) @ fw.T + fb
    save(out, "cnn", nodes,
         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
         dict(c1w=c1w, c1b=c1b, g=g, beta=beta, mean=mean, var=var, c2w=c2w, c2b=c2b,
              fw=fw, fb=fb), dict(x=x), y)


def transformer(out):
    """A pre-norm transformer encoder block: seq 32, model 128, 4 heads, MLP 512 (GELU)."""
    s, d, h, f = 32, 128, 4, 512
    dh = d // h
    w = {n: weight(d, d) for n in ("wq", "wk", "wv", "wo")}
    b = {n: weight(d, scale=0.02) for n in ("bq", "bk", "bv", "bo")}
    g1, be1 = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), weight(d, scale=0.1)
    g2, be2 = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), weight(d, scale=0.1)
    w1, b1 = weight(d, f), weight(f, scale=0.02)
    w2, b2 = weight(f, d), weight(d, scale=0.02)
    inits = dict(**w, **b, g1=g1, be1=be1, g2=g2, be2=be2, w1=w1, b1=b1, w2=w2, b2=b2,
                 heads_shape=np.array([1, s, h, dh], np.int64),
                 model_shape=np.array([1, s, d], np.int64),
                 scale=np.array(1 / math.sqrt(dh), np.float32),
                 sqrt2=np.array(math.sqrt(2), np.float32),
                 one=np.array(1, np.float32), half=np.array(0.5, np.float32))
    nodes = [helper.make_node("LayerNormalization", ["x", "g1", "be1"], ["ln1"], axis=-1, epsilon=1e-5)]
    for n in ("q", "k", "v"):
        nodes += [
            helper.make_node("MatMul", ["ln1", "w" + n], [n + "m"]),
            helper.make_node("Add", [n + "m", "b" + n], [n + "a"]),
            helper.make_node("Reshape", [n + "a", "heads_shape"], [n + "r"]),
            helper.make_node("Transpose", [n + "r"], [n + "t"],
                             perm=[0, 2, 3, 1] if n == "k" else [0, 2, 1, 3]),
        ]
    nodes += [
        helper.make_node("MatMul", ["qt", "kt"], ["scores"]),
        helper.make_node("Mul", ["scores", "scale"], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["attn"], axis=-1),
        helper.make_node("MatMul", ["attn", "vt"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "model_shape"], ["ctx_r"]),
        helper.make_node("MatMul", ["ctx_r", "wo"], ["om"]),
        helper.make_node("Add", ["om", "bo"], ["oa"]),
        helper.make_node("Add", ["x", "oa"], ["res1"]),
        helper.make_node("LayerNormalization", ["res1", "g2", "be2"], ["ln2"], axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["ln2", "w1"], ["f1m"]),
        helper.make_node("Add", ["f1m", "b1"], ["f1"]),
        # GELU as PyTorch exports it: x * 0.5 * (1 + erf(x / sqrt(2)))
        helper.make_node("Div", ["f1", "sqrt2"], ["gd"]),
        helper.make_node("Erf", ["gd"], ["ge"]),
        helper.make_node("Add", ["ge", "one"], ["gp"]),
        helper.make_node("Mul", ["f1", "gp"], ["gm"]),
        helper.make_node("Mul", ["gm", "half"], ["gelu"]),
        helper.make_node("MatMul", ["gelu", "w2"], ["f2m"]),
        helper.make_node("Add", ["f2m", "b2"], ["f2"]),
        helper.make_node("Add", ["res1", "f2"], ["y"]),
    ]
    x = rng.standard_normal((1, s, d)).astype(np.float32)
    ln1 = layer_norm(x, g1, be1)
    heads = lambda t: t.reshape(1, s, h, dh).transpose(0, 2, 1, 3)
    q, k, v = (heads(ln1 @ w["w" + n] + b["b" + n]) for n in ("q", "k", "v"))
    attn = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh))
    ctx = (attn @ v).transpose(0, 2, 1, 3).reshape(1, s, d)
    res1 = x + ctx @ w["wo"] + b["bo"]
    f1 = layer_norm(res1, g2, be2) @ w1 + b1
    erf = np.vectorize(math.erf)
    gelu = f1 * 0.5 * (1 + erf(f1 / math.sqrt(2)))
    y = res1 + gelu @ w2 + b2
    save(out, "transformer", nodes,
         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, d])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, d])],
         inits, dict(x=x), y)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    for make in (mlp, cnn, transformer):
        make(sys.argv[1])
        print(f"wrote {sys.argv[1]}/{make.__name__}.onnx")
