"""A model whose image size is free (x: N x 3 x H x W): Conv 3x3 (pad 1),
Relu, Resize x2 (nearest). Resize needs H and W at compile time, so the CLI
must bind them from the inputs it is given. Writes DIR/dyn_conv.onnx and two
inputs of other sizes with their NumPy outputs (dyn_x{0,1}.npy,
dyn_out{0,1}.npy).

usage: make_dynamic_model.py DIR
"""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

d = sys.argv[1]
rng = np.random.default_rng(3)
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
     helper.make_node("Relu", ["y"], ["r"]),
     helper.make_node("Resize", ["r", "", "scales"], ["out"], mode="nearest")],
    "dyn_conv",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 4, "H2", "W2"])],
    [numpy_helper.from_array(w, "w"),
     numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), f"{d}/dyn_conv.onnx")
for i, shape in enumerate([(1, 3, 8, 10), (2, 3, 5, 7)]):
    x = rng.standard_normal(shape).astype(np.float32)
    n, c, h, wd = shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, 4, h, wd), np.float32)
    for i_h in range(3):
        for i_w in range(3):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i_h:i_h + h, i_w:i_w + wd], w[:, :, i_h, i_w])
    np.save(f"{d}/dyn_x{i}.npy", x)
    up = np.repeat(np.repeat(np.maximum(y, 0), 2, axis=2), 2, axis=3)
    np.save(f"{d}/dyn_out{i}.npy", up)
