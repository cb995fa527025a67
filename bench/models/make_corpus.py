#!/usr/bin/python3
"""Builds the corpus of realistic generated models that bench/model_bench
holds Tether against ONNX Runtime with (issue 26, "real models fast").

Usage: /usr/bin/python3 bench/models/make_corpus.py OUT_DIR [NAME...]

Writes, for each named model (all of them by default):
  OUT_DIR/<name>.onnx   the model: opset 17, weights as initializers, fixed
                        input shapes, batch 1, one input "x" (float32)
  OUT_DIR/<name>.x.npy  a seeded random input
The weights are random but seeded per model, so the files are the same on
every run. Only python3-onnx and python3-numpy from Debian are needed.

The graphs are written the way the converters write them, not tidied by
hand: torch.onnx.export's node and tensor names, Constant nodes for scalars
and shapes, BatchNormalization folded into Conv with a bias (eval mode)
except where paddle2onnx leaves it, shape arithmetic (Shape, Gather,
Unsqueeze, Concat) feeding Reshape, Resize with a scales input, hard-swish
both as the HardSwish op and as paddle's HardSigmoid + Mul, GELU as the Erf
pattern, LayerNormalization both as the opset-17 op and decomposed.

  mobilenetv3  MobileNetV3-Large at 1x3x224x224 (torchvision's config):
               depthwise 3x3/5x5, squeeze-excite, residual Adds, Gemm head
  dbnet        DBNet-style text detector at 1x3x320x480: a PP-LCNet x0.75
               backbone (192-channel 1x1 convs with hard-swish at 20x30),
               an FPN neck (1x1 convs, nearest Resize, Add, Concat of four
               levels) and the DB head (BatchNormalization, two stride-2
               ConvTranspose, Sigmoid)
  resnet50     ResNet-50 v1.5 at 1x3x224x224, full widths
  bert         one BERT-base encoder layer: sequence 128, hidden 768, 12
               heads, FFN 3072; input 1x128x768
  lstm         two stacked LSTM ops (input 128, hidden 256, sequence 64) as
               torch exports nn.LSTM(batch_first=True, num_layers=2), then
               a MatMul + Add head; input 1x64x128
"""
import math
import os
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
F32 = np.float32
I64 = np.int64


class Graph:
    """An ONNX graph built with torch.onnx.export's naming: nodes
    "/scope/Op" ("/scope/Op_1" for the next in the same scope), their outputs
    "/scope/Op_output_0", constant-folded weights "onnx::Op_N"."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.used = {}
        self.anon = 300  # torch's numbering of folded initializers

    def _unique(self, name):
        n = self.used.get(name, 0)
        self.used[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    def param(self, array, name=None, op="Conv"):
        """An initializer; unnamed ones are named as torch names folded
        constants."""
        if name is None:
            self.anon += 1
            name = f"onnx::{op}_{self.anon}"
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape, dtype=F32) * F32(std)).astype(F32)

    def op(self, op_type, inputs, scope="", outputs=1, out=None, **attrs):
        name = self._unique(f"{scope}/{op_type}")
        outs = [f"{name}_output_{i}" for i in range(outputs)]
        if out is not None:
            outs[0] = out
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def const(self, value, scope=""):
        """A Constant node, as torch exports scalars and shapes."""
        name = self._unique(f"{scope}/Constant")
        out = f"{name}_output_0"
        self.nodes.append(
            helper.make_node("Constant", [], [out], name=name,
                             value=numpy_helper.from_array(np.asarray(value))))
        return out

    def save(self, out_dir, x, y_shape, producer):
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))],
            self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name=producer[0], producer_version=producer[1])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(out_dir, self.name + ".onnx"))
        np.save(os.path.join(out_dir, self.name + ".x.npy"), x.astype(F32))


TORCH = ("pytorch", "2.1.0")
PADDLE = ("PaddlePaddle", "1.0.9")  # paddle2onnx's producer fields


# ---- convolution building blocks ---------------------------------------------


# Weight scales: a conv's output variance is `gain` times its input's mean
# square, so gain = 1 / E[a^2] of the activation in front keeps activations
# near unit scale, as the BatchNormalization folded into trained weights does
# (Relu of a unit normal: 1/2, HardSwish: about 1/3).
GAIN = {"RE": 2.0, "HS": 3.0, None: 1.0}


def conv(g, x, cin, cout, k, scope, stride=1, groups=1, bias=True, gain=1.0, w_name=None,
         b_name=None):
    """Conv as torch exports it in eval mode: BatchNormalization folded into
    the weights and a bias; every attribute written out."""
    fan_in = cin // groups * k * k
    inputs = [x, g.param(g.normal((cout, cin // groups, k, k), math.sqrt(gain / fan_in)),
                         w_name)]
    if bias:
        inputs.append(g.param(g.normal((cout,), 0.05), b_name))
    return g.op("Conv", inputs, scope, dilations=[1, 1], group=groups, kernel_shape=[k, k],
                pads=[k // 2] * 4, strides=[stride, stride])


def batch_norm(g, x, c, scope, prefix, epsilon=1e-5):
    """An un-folded BatchNormalization (paddle2onnx keeps them)."""
    scale = g.param((g.rng.uniform(0.6, 1.2, c)).astype(F32), f"{prefix}.w_0")
    shift = g.param(g.normal((c,), 0.05), f"{prefix}.b_0")
    mean = g.param(g.normal((c,), 0.05), f"{prefix}.w_1")
    var = g.param((g.rng.uniform(0.8, 1.2, c)).astype(F32), f"{prefix}.w_2")
    return g.op("BatchNormalization", [x, scale, shift, mean, var], scope, epsilon=epsilon,
                momentum=0.9)


def conv_bn(g, x, cin, cout, k, scope, prefix, stride=1, groups=1, gain=1.0):
    """paddle2onnx's ConvBNLayer: Conv without a bias, then BatchNormalization."""
    y = conv(g, x, cin, cout, k, scope, stride, groups, bias=False, gain=gain,
             w_name=f"{prefix}_weights")
    return batch_norm(g, y, cout, scope, f"{prefix}_bn")


def hard_swish(g, x, scope, paddle=False):
    """HardSwish: the opset-14 op (torch), or paddle's HardSigmoid + Mul."""
    if not paddle:
        return g.op("HardSwish", [x], scope)
    s = g.op("HardSigmoid", [x], scope, alpha=0.1666666716337204, beta=0.5)
    return g.op("Mul", [x, s], scope)


def act(g, x, kind, scope, paddle=False):
    if kind == "RE":
        return g.op("Relu", [x], scope)
    if kind == "HS":
        return hard_swish(g, x, scope, paddle)
    return x


def make_divisible(v, divisor=8):
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def squeeze_excite(g, x, c, scope, paddle=False):
    """GlobalAveragePool -> 1x1 Conv -> Relu -> 1x1 Conv -> HardSigmoid -> Mul."""
    squeeze = make_divisible(c // 4)
    s = g.op("GlobalAveragePool", [x], scope)
    s = conv(g, s, c, squeeze, 1, f"{scope}/fc1", gain=4.0)
    s = g.op("Relu", [s], scope)
    s = conv(g, s, squeeze, c, 1, f"{scope}/fc2", gain=2.0)
    if paddle:
        s = g.op("HardSigmoid", [s], scope, alpha=0.20000000298023224, beta=0.5)
    else:
        s = g.op("HardSigmoid", [s], f"{scope}/scale_activation", alpha=0.1666666716337204,
                 beta=0.5)
    return g.op("Mul", [s, x], scope)


# ---- the models ---------------------------------------------------------------------


def mobilenetv3(out_dir):
    g = Graph("mobilenetv3", zlib.crc32(b"mobilenetv3"))
    # torchvision's mobilenet_v3_large: kernel, expanded, out, SE, activation, stride
    config = [(3, 16, 16, False, "RE", 1), (3, 64, 24, False, "RE", 2),
              (3, 72, 24, False, "RE", 1), (5, 72, 40, True, "RE", 2),
              (5, 120, 40, True, "RE", 1), (5, 120, 40, True, "RE", 1),
              (3, 240, 80, False, "HS", 2), (3, 200, 80, False, "HS", 1),
              (3, 184, 80, False, "HS", 1), (3, 184, 80, False, "HS", 1),
              (3, 480, 112, True, "HS", 1), (3, 672, 112, True, "HS", 1),
              (5, 672, 160, True, "HS", 2), (5, 960, 160, True, "HS", 1),
              (5, 960, 160, True, "HS", 1)]
    # Blocks as paddle2onnx writes them (hard-swish as HardSigmoid + Mul); two
    # of them keep their BatchNormalization nodes, as does the stem.
    paddle_act = {7, 9, 12, 14}
    paddle_bn = {12, 14}
    h = conv_bn(g, "x", 3, 16, 3, "/features/features.0/features.0.0", "conv1", stride=2)
    h = hard_swish(g, h, "/features/features.0/features.0.2")
    cin, in_act = 16, "HS"
    for i, (k, exp, cout, se, kind, stride) in enumerate(config, start=1):
        scope = f"/features/features.{i}/block"
        paddle = i in paddle_act
        block_in = h
        part = 0

        def block_conv(t, ci, co, kk, gain, s=1, groups=1):
            nonlocal part
            sc = f"{scope}/block.{part}/block.{part}.0"
            part += 1
            if i in paddle_bn:
                return conv_bn(g, t, ci, co, kk, sc, f"conv{i}_{part}", s, groups, gain)
            return conv(g, t, ci, co, kk, sc, s, groups, gain=gain)

        if exp != cin:
            h = block_conv(h, cin, exp, 1, GAIN[in_act])
            h = act(g, h, kind, f"{scope}/block.{part - 1}/block.{part - 1}.2", paddle)
            in_act = kind
        h = block_conv(h, exp, exp, k, GAIN[in_act], stride, groups=exp)
        h = act(g, h, kind, f"{scope}/block.{part - 1}/block.{part - 1}.2", paddle)
        gain = GAIN[kind]
        if se:
            h = squeeze_excite(g, h, exp, f"{scope}/block.{part}", paddle)
            part += 1
            gain *= 3  # the gate is about 1/2
        # The projection has no activation; a smaller gain on the residual
        # branch keeps the stream bounded, as trained weights do.
        residual = stride == 1 and cin == cout
        h = block_conv(h, exp, cout, 1, gain / 3 if residual else gain)
        in_act = None
        if stride == 1 and cin == cout:
            h = g.op("Add", [h, block_in], f"/features/features.{i}")
        cin = cout
    h = conv(g, h, 160, 960, 1, "/features/features.16/features.16.0")
    h = hard_swish(g, h, "/features/features.16/features.16.2")
    h = g.op("GlobalAveragePool", [h], "/avgpool")
    h = g.op("Flatten", [h], "", axis=1)
    h = g.op("Gemm", [h, g.param(g.normal((1280, 960), math.sqrt(40 / 960)), "classifier.0.weight"),
                      g.param(g.normal((1280,), 0.05), "classifier.0.bias")],
             "/classifier/classifier.0", alpha=1.0, beta=1.0, transB=1)
    h = hard_swish(g, h, "/classifier/classifier.1")
    g.op("Gemm", [h, g.param(g.normal((1000, 1280), math.sqrt(6 / 1280)), "classifier.3.weight"),
                  g.param(g.normal((1000,), 0.05), "classifier.3.bias")],
         "/classifier/classifier.3", out="y", alpha=1.0, beta=1.0, transB=1)
    g.save(out_dir, g.rng.standard_normal((1, 3, 224, 224), dtype=F32), [1, 1000], TORCH)


def resize(g, x, factor, scope, roi=""):
    """F.interpolate(scale_factor=factor, mode="nearest") at opset 17."""
    scales = g.const(np.array([1, 1, factor, factor], F32), scope)
    return g.op("Resize", [x, roi, scales], scope, coordinate_transformation_mode="asymmetric",
                cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")


def dbnet(out_dir):
    g = Graph("dbnet", zlib.crc32(b"dbnet"))
    # PP-LCNet x0.75: kernel, in, out, stride, SE; Relu in the first stages,
    # hard-swish after.
    stages = [
        [(3, 16, 24, 1, False)],
        [(3, 24, 48, 2, False), (3, 48, 48, 1, False)],
        [(3, 48, 96, 2, False), (3, 96, 96, 1, False)],
        [(3, 96, 192, 2, False)] + [(5, 192, 192, 1, False)] * 5,
        [(5, 192, 384, 2, True), (5, 384, 384, 1, True)],
    ]
    h = conv(g, "x", 3, 16, 3, "/backbone/conv1/conv", stride=2)
    h = g.op("Relu", [h], "/backbone/conv1/act")
    features, in_act = [], "RE"
    for s, blocks in enumerate(stages, start=2):
        kind = "RE" if s <= 3 else "HS"
        for j, (k, cin, cout, stride, se) in enumerate(blocks):
            scope = f"/backbone/blocks{s}/blocks{s}.{j}"
            h = conv(g, h, cin, cin, k, f"{scope}/dw_conv/conv", stride, groups=cin,
                     gain=GAIN[in_act])
            h = act(g, h, kind, f"{scope}/dw_conv/act")
            gain = GAIN[kind]
            if se:
                h = squeeze_excite(g, h, cin, f"{scope}/se")
                gain *= 3
            h = conv(g, h, cin, cout, 1, f"{scope}/pw_conv/conv", gain=gain)
            h = act(g, h, kind, f"{scope}/pw_conv/act")
            in_act = kind
        if s >= 3:
            features.append((h, blocks[-1][2]))
    # FPN neck: lateral 1x1 convs to 192 channels with hard-swish, top-down
    # nearest upsampling and Adds, 3x3 convs to 48, all four levels upsampled
    # to stride 4 and concatenated.
    inner, out_c = 192, 48
    lateral = []
    for level, (f, c) in zip((2, 3, 4, 5), features):
        t = conv(g, f, c, inner, 1, f"/neck/in{level}_conv", bias=False,
                 gain=GAIN["RE" if level == 2 else "HS"])
        lateral.append(hard_swish(g, t, f"/neck/in{level}_act"))
    in2, in3, in4, in5 = lateral
    empty_roi = g.param(np.zeros((0,), F32), op="Resize")  # torch's older empty roi tensor
    out4 = g.op("Add", [in4, resize(g, in5, 2.0, "/neck", empty_roi)], "/neck")
    out3 = g.op("Add", [in3, resize(g, out4, 2.0, "/neck")], "/neck")
    out2 = g.op("Add", [in2, resize(g, out3, 2.0, "/neck")], "/neck")
    p5 = conv(g, in5, inner, out_c, 3, "/neck/p5_conv", bias=False, gain=GAIN["HS"])
    p4 = conv(g, out4, inner, out_c, 3, "/neck/p4_conv", bias=False, gain=GAIN["HS"] / 2)
    p3 = conv(g, out3, inner, out_c, 3, "/neck/p3_conv", bias=False, gain=GAIN["HS"] / 3)
    p2 = conv(g, out2, inner, out_c, 3, "/neck/p2_conv", bias=False, gain=GAIN["HS"] / 4)
    p5 = resize(g, p5, 8.0, "/neck")
    p4 = resize(g, p4, 4.0, "/neck")
    p3 = resize(g, p3, 2.0, "/neck")
    fuse = g.op("Concat", [p5, p4, p3, p2], "/neck", axis=1)
    # DB head (binarize branch), BatchNormalization left as paddle2onnx
    # leaves it.
    c4 = out_c
    h = conv(g, fuse, 4 * out_c, c4, 3, "/head/binarize/conv1", bias=False,
             w_name="conv2d_56.w_0")
    h = batch_norm(g, h, c4, "/head/binarize/conv_bn1", "batch_norm_48")
    h = g.op("Relu", [h], "/head/binarize")
    # A stride-2 2x2 ConvTranspose reads one input pixel per output pixel:
    # its fan-in is the input channels.
    w1 = g.param(g.normal((c4, c4, 2, 2), math.sqrt(2 / c4)), "conv2d_transpose_0.w_0")
    b1 = g.param(g.normal((c4,), 0.05), "conv2d_transpose_0.b_0")
    h = g.op("ConvTranspose", [h, w1, b1], "/head/binarize/conv2", dilations=[1, 1], group=1,
             kernel_shape=[2, 2], pads=[0, 0, 0, 0], strides=[2, 2])
    h = batch_norm(g, h, c4, "/head/binarize/conv_bn2", "batch_norm_49")
    h = g.op("Relu", [h], "/head/binarize")
    w2 = g.param(g.normal((c4, 1, 2, 2), math.sqrt(8 / c4)), "conv2d_transpose_1.w_0")
    b2 = g.param(g.normal((1,), 0.05), "conv2d_transpose_1.b_0")
    h = g.op("ConvTranspose", [h, w2, b2], "/head/binarize/conv3", dilations=[1, 1], group=1,
             kernel_shape=[2, 2], pads=[0, 0, 0, 0], strides=[2, 2])
    g.op("Sigmoid", [h], "/head/binarize", out="y")
    g.save(out_dir, g.rng.standard_normal((1, 3, 320, 480), dtype=F32), [1, 1, 320, 480], PADDLE)


def resnet50(out_dir):
    g = Graph("resnet50", zlib.crc32(b"resnet50"))
    h = conv(g, "x", 3, 64, 7, "/conv1", stride=2)
    h = g.op("Relu", [h], "/relu")
    h = g.op("MaxPool", [h], "/maxpool", ceil_mode=0, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
             strides=[2, 2])
    cin = 64
    for layer, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512)), start=1):
        for b in range(blocks):
            scope = f"/layer{layer}/layer{layer}.{b}"
            stride = 2 if b == 0 and layer > 1 else 1
            t = conv(g, h, cin, width, 1, f"{scope}/conv1", gain=2.0)
            t = g.op("Relu", [t], f"{scope}/relu")
            t = conv(g, t, width, width, 3, f"{scope}/conv2", stride=stride, gain=2.0)
            t = g.op("Relu", [t], f"{scope}/relu_1")
            # A small last gain, as trained ResNets' last BN gamma: keeps the
            # sixteen residual additions bounded.
            t = conv(g, t, width, 4 * width, 1, f"{scope}/conv3", gain=0.25)
            shortcut = h
            if b == 0:
                shortcut = conv(g, h, cin, 4 * width, 1, f"{scope}/downsample/downsample.0",
                                stride=stride, gain=2.0)
            h = g.op("Add", [t, shortcut], scope)
            h = g.op("Relu", [h], f"{scope}/relu_2")
            cin = 4 * width
    h = g.op("GlobalAveragePool", [h], "/avgpool")
    h = g.op("Flatten", [h], "", axis=1)
    g.op("Gemm", [h, g.param(g.normal((1000, 2048), math.sqrt(0.1 / 2048)), "fc.weight"),
                  g.param(g.normal((1000,), 0.05), "fc.bias")],
         "/fc", out="y", alpha=1.0, beta=1.0, transB=1)
    g.save(out_dir, g.rng.standard_normal((1, 3, 224, 224), dtype=F32), [1, 1000], TORCH)


def linear(g, x, cin, cout, scope, prefix):
    """nn.Linear on a 3-d input: MatMul by the transposed weight, then Add."""
    w = g.param(g.normal((cin, cout), math.sqrt(1 / cin)), op="MatMul")
    y = g.op("MatMul", [x, w], scope)
    return g.op("Add", [g.param(g.normal((cout,), 0.02), f"{prefix}.bias"), y], scope)


BERT_SEQ, BERT_HIDDEN = 128, 768


def bert_layer(g, x, layer, out=None):
    """One BERT-base encoder layer on x (1, 128, 768), as torch.onnx.export writes it."""
    seq, hidden, heads, ffn = BERT_SEQ, BERT_HIDDEN, 12, 3072
    head = hidden // heads
    p = f"encoder.layer.{layer}"
    s = f"/encoder/layer.{layer}/attention/self"

    def leading_dims(t):
        # x.size(0), x.size(1) as torch traces them: Shape, Gather, Unsqueeze each.
        dims = []
        for i in (0, 1):
            shape = g.op("Shape", [t], s)
            d = g.op("Gather", [shape, g.const(np.array(i, I64), s)], s, axis=0)
            dims.append(d)
        return [g.op("Unsqueeze", [d, g.const(np.array([0], I64), s)], s) for d in dims]

    def split_heads(t):
        # transpose_for_scores: x.size()[:-1] + (heads, head) as torch traces it.
        new_shape = g.op("Concat", leading_dims(t) + [g.const(np.array([heads], I64), s),
                                                      g.const(np.array([head], I64), s)],
                         s, axis=0)
        return g.op("Reshape", [t, new_shape], s, allowzero=0)

    q = linear(g, x, hidden, hidden, f"{s}/query", f"{p}.attention.self.query")
    k = linear(g, x, hidden, hidden, f"{s}/key", f"{p}.attention.self.key")
    v = linear(g, x, hidden, hidden, f"{s}/value", f"{p}.attention.self.value")
    k = g.op("Transpose", [split_heads(k)], s, perm=[0, 2, 3, 1])
    v = g.op("Transpose", [split_heads(v)], s, perm=[0, 2, 1, 3])
    q = g.op("Transpose", [split_heads(q)], s, perm=[0, 2, 1, 3])
    scores = g.op("MatMul", [q, k], s)
    scores = g.op("Div", [scores, g.const(np.array(math.sqrt(head), F32), s)], s)
    # The extended attention mask, (1 - mask) * finfo.min, folded to a
    # constant: the last 16 positions are padding.
    mask = np.zeros((1, 1, 1, seq), F32)
    mask[..., seq - 16:] = np.finfo(F32).min
    scores = g.op("Add", [scores, g.param(mask, op="Add")], s)
    probs = g.op("Softmax", [scores], s, axis=-1)
    ctx = g.op("MatMul", [probs, v], s)
    ctx = g.op("Transpose", [ctx], s, perm=[0, 2, 1, 3])
    merged = g.op("Concat", leading_dims(ctx) + [g.const(np.array([hidden], I64), s)], s, axis=0)
    ctx = g.op("Reshape", [ctx, merged], s, allowzero=0)
    o = f"/encoder/layer.{layer}/attention/output"
    a = linear(g, ctx, hidden, hidden, f"{o}/dense", f"{p}.attention.output.dense")
    a = g.op("Add", [a, x], o)
    a = g.op("LayerNormalization",
             [a, g.param(g.rng.uniform(0.8, 1.2, hidden).astype(F32),
                         f"{p}.attention.output.LayerNorm.weight"),
              g.param(g.normal((hidden,), 0.02), f"{p}.attention.output.LayerNorm.bias")],
             f"{o}/LayerNorm", axis=-1, epsilon=9.999999960041972e-13)
    i = f"/encoder/layer.{layer}/intermediate"
    f = linear(g, a, hidden, ffn, f"{i}/dense", f"{p}.intermediate.dense")
    # GELU, erf form
    ga = f"{i}/intermediate_act_fn"
    e = g.op("Div", [f, g.const(np.array(1.4142135381698608, F32), ga)], ga)
    e = g.op("Erf", [e], ga)
    e = g.op("Add", [e, g.const(np.array(1.0, F32), ga)], ga)
    e = g.op("Mul", [f, e], ga)
    e = g.op("Mul", [e, g.const(np.array(0.5, F32), ga)], ga)
    o = f"/encoder/layer.{layer}/output"
    f = linear(g, e, ffn, hidden, f"{o}/dense", f"{p}.output.dense")
    f = g.op("Add", [f, a], o)
    # LayerNorm decomposed, as older exporters write it.
    ln = f"{o}/LayerNorm"
    mean = g.op("ReduceMean", [f], ln, axes=[-1], keepdims=1)
    d = g.op("Sub", [f, mean], ln)
    sq = g.op("Pow", [d, g.const(np.array(2.0, F32), ln)], ln)
    var = g.op("ReduceMean", [sq], ln, axes=[-1], keepdims=1)
    var = g.op("Add", [var, g.const(np.array(9.999999960041972e-13, F32), ln)], ln)
    std = g.op("Sqrt", [var], ln)
    n = g.op("Div", [d, std], ln)
    n = g.op("Mul", [n, g.param(g.rng.uniform(0.8, 1.2, hidden).astype(F32),
                                f"{p}.output.LayerNorm.weight")], ln)
    return g.op("Add", [n, g.param(g.normal((hidden,), 0.02), f"{p}.output.LayerNorm.bias")],
                ln, out=out)


def bert(out_dir):
    """One encoder layer (99 nodes)."""
    g = Graph("bert", zlib.crc32(b"bert"))
    bert_layer(g, "x", 0, out="y")
    shape = [1, BERT_SEQ, BERT_HIDDEN]
    g.save(out_dir, g.rng.standard_normal(shape, dtype=F32), shape, TORCH)


def bert12(out_dir):
    """BERT-base's twelve encoder layers (1,188 nodes, 85M weights): the compile-time
    budget's 1,000-node transformer. Not in the default corpus (340 MB)."""
    g = Graph("bert12", zlib.crc32(b"bert12"))
    x = "x"
    for layer in range(12):
        x = bert_layer(g, x, layer, out="y" if layer == 11 else None)
    shape = [1, BERT_SEQ, BERT_HIDDEN]
    g.save(out_dir, g.rng.standard_normal(shape, dtype=F32), shape, TORCH)


def lstm(out_dir):
    g = Graph("lstm", zlib.crc32(b"lstm"))
    seq, cin, hidden, classes = 64, 128, 256, 100
    bound = 3 / math.sqrt(hidden)  # 3x torch's initial range: trained weights are larger

    def uniform(*shape):
        return g.rng.uniform(-bound, bound, shape).astype(F32)

    h = g.op("Transpose", ["x"], "", perm=[1, 0, 2])  # batch_first=True
    for layer in range(2):
        ci = cin if layer == 0 else hidden
        w = g.param(uniform(1, 4 * hidden, ci), op="LSTM")
        r = g.param(uniform(1, 4 * hidden, hidden), op="LSTM")
        b = g.param(uniform(1, 8 * hidden), op="LSTM")
        h0 = g.param(np.zeros((1, 1, hidden), F32), op="LSTM")
        c0 = g.param(np.zeros((1, 1, hidden), F32), op="LSTM")
        y, _, _ = g.op("LSTM", [h, w, r, b, "", h0, c0], "/lstm", outputs=3, hidden_size=hidden)
        h = g.op("Squeeze", [y, g.const(np.array([1], I64), "/lstm")], "/lstm")
    h = g.op("Transpose", [h], "/lstm", perm=[1, 0, 2])
    wo = g.param(g.normal((hidden, classes), math.sqrt(30 / hidden)), op="MatMul")
    h = g.op("MatMul", [h, wo], "/fc")
    g.op("Add", [g.param(g.normal((classes,), 0.05), "fc.bias"), h], "/fc", out="y")
    g.save(out_dir, g.rng.standard_normal((1, seq, cin), dtype=F32), [1, seq, classes], TORCH)


MODELS = {m.__name__: m for m in (mobilenetv3, dbnet, resnet50, bert, lstm)}
EXTRA_MODELS = {m.__name__: m for m in (bert12,)}

if __name__ == "__main__":
    known = {**MODELS, **EXTRA_MODELS}
    if len(sys.argv) < 2 or any(n not in known for n in sys.argv[2:]):
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR [{'|'.join(known)}...]")
    os.makedirs(sys.argv[1], exist_ok=True)
    for name in sys.argv[2:] or MODELS:
        known[name](sys.argv[1])
        print(f"wrote {sys.argv[1]}/{name}.onnx")
