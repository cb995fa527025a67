"""The PyTorch anchor of bench/model_bench on a GPU: runs an ONNX model's
graph op by op with PyTorch (eager, float32, on cuda:0) and times it with
CUDA events, the way a PyTorch user runs the same model.

usage: python3 torch_bench.py MODEL.onnx X.npy EXPECTED.npy SAMPLES NUMBER [MODE]

MODE: eager (the default), or a torch.compile mode ("default",
"reduce-overhead": CUDA graphs, "max-autotune"): the same function compiled
by TorchInductor before the warm-up, so compilation stays out of the figures.

Prints one JSON line: {"samples_ms": [...], "median_ms": .., "max_abs_out": ..,
"max_err": ..}: SAMPLES samples, each the mean of NUMBER runs (events around
the NUMBER runs, synchronized), after a warm-up; max_err against
EXPECTED.npy (NumPy's result from examples/onnx/make_models.py). Exits 1
when the result is off (so a wrong anchor is never reported), 2 without
PyTorch or a CUDA device. Covers the operators of the example models.
"""
import json
import math
import statistics
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("PyTorch is not installed for this python", file=sys.stderr)
    sys.exit(2)
import onnx
from onnx import numpy_helper


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def same_upper(x, kernel, strides, dilations):
    """ONNX auto_pad=SAME_UPPER as F.pad's (left, right, top, bottom)."""
    pads = []
    for size, k, s, d in zip(x.shape[2:], kernel, strides, dilations):
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
        pads.append((total // 2, total - total // 2))
    (t, b), (l, r) = pads
    return (l, r, t, b)


def conv(x, w, b=None, pads=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), group=1,
         auto_pad="NOTSET", kernel_shape=None):
    kernel = kernel_shape or w.shape[2:]
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        lr_tb = same_upper(x, kernel, strides, dilations)
        if auto_pad == "SAME_LOWER":
            lr_tb = (lr_tb[1], lr_tb[0], lr_tb[3], lr_tb[2])
        x = F.pad(x, lr_tb)
    else:
        t, l, bt, r = pads
        x = F.pad(x, (l, r, t, bt))
    return F.conv2d(x, w, b, stride=tuple(strides), dilation=tuple(dilations), groups=group)


def reshape(x, shape):
    dims = [x.shape[i] if d == 0 else int(d) for i, d in enumerate(shape)]
    return x.reshape(dims)


def run_node(op, a, ins):
    if op == "Gemm":
        x, w = ins[0], ins[1]
        x = x.t() if a.get("transA", 0) else x
        w = w.t() if a.get("transB", 0) else w
        y = a.get("alpha", 1.0) * (x @ w)
        return y + a.get("beta", 1.0) * ins[2] if len(ins) > 2 else y
    if op == "MatMul":
        return ins[0] @ ins[1]
    if op in ("Add", "Mul", "Div"):
        return {"Add": torch.add, "Mul": torch.mul, "Div": torch.div}[op](ins[0], ins[1])
    if op == "Relu":
        return torch.relu(ins[0])
    if op == "Erf":
        return torch.erf(ins[0])
    if op == "Conv":
        return conv(*ins, **{k: v for k, v in a.items()})
    if op == "BatchNormalization":
        x, g, b, mean, var = ins
        return F.batch_norm(x, mean, var, g, b, training=False, eps=a.get("epsilon", 1e-5))
    if op == "MaxPool":
        t, l, bt, r = a.get("pads", [0, 0, 0, 0])
        x = F.pad(ins[0], (l, r, t, bt), value=-math.inf)
        return F.max_pool2d(x, a["kernel_shape"], a.get("strides", a["kernel_shape"]))
    if op == "GlobalAveragePool":
        return ins[0].mean(dim=(2, 3), keepdim=True)
    if op == "Flatten":
        axis = a.get("axis", 1)
        return ins[0].reshape(math.prod(ins[0].shape[:axis]), -1)
    if op == "LayerNormalization":
        x, g, b = ins
        axis = a.get("axis", -1) % x.dim()
        return F.layer_norm(x, x.shape[axis:], g, b, eps=a.get("epsilon", 1e-5))
    if op == "Reshape":
        return reshape(ins[0], ins[1])
    if op == "Transpose":
        perm = a.get("perm", list(reversed(range(ins[0].dim()))))
        return ins[0].permute(*perm)
    if op == "Softmax":
        return torch.softmax(ins[0], dim=a.get("axis", -1))
    raise NotImplementedError(f"torch_bench.py does not cover {op}")


def main():
    if len(sys.argv) not in (6, 7):
        sys.exit(__doc__)
    model_path, x_path, expected_path, samples, number = sys.argv[1:6]
    mode = sys.argv[6] if len(sys.argv) == 7 else "eager"
    samples, number = int(samples), int(number)
    if not torch.cuda.is_available():
        print("PyTorch sees no CUDA device", file=sys.stderr)
        sys.exit(2)
    dev = torch.device("cuda:0")
    model = onnx.load(model_path)
    graph = model.graph
    values = {}
    for init in graph.initializer:
        arr = numpy_helper.to_array(init)
        # Shapes stay on the host as Python ints (Reshape reads them; no NumPy
        # inside what torch.compile traces); data goes to the GPU.
        values[init.name] = (tuple(int(d) for d in arr.reshape(-1)) if arr.dtype == np.int64
                             else torch.from_numpy(arr.copy()).to(dev))
    values[graph.input[0].name] = torch.from_numpy(np.load(x_path)).to(dev)
    out_name = graph.output[0].name
    # The graph as plain Python data: torch.compile traces forward(), and a
    # protobuf object read inside it breaks the graph at every node.
    plan = [(node.op_type, attrs(node), tuple(i for i in node.input if i), node.output[0])
            for node in graph.node]

    def forward():
        env = dict(values)
        for op, a, ins, out in plan:
            env[out] = run_node(op, a, [env[i] for i in ins])
        return env[out_name]

    if mode != "eager":
        forward = torch.compile(forward, mode=mode)
    with torch.inference_mode():
        y = forward()
        torch.cuda.synchronize()
        got = y.float().cpu().numpy()
        want = np.load(expected_path)
        err = float(np.max(np.abs(got - want)))
        scale = max(1.0, float(np.max(np.abs(want))))
        if got.shape != want.shape or not err <= 1e-3 * scale:
            print(f"PyTorch's result is off: shape {got.shape} vs {want.shape}, max err {err}",
                  file=sys.stderr)
            sys.exit(1)
        for _ in range(max(50, number)):  # warm-up: kernels chosen, clocks up
            forward()
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(samples):
            start.record()
            for _ in range(number):
                forward()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / number)
    print(json.dumps({"mode": mode, "samples_ms": times, "median_ms": statistics.median(times),
                      "max_abs_out": float(np.max(np.abs(got))), "max_err": err}))


if __name__ == "__main__":
    main()
