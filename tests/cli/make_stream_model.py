"""A streaming model shaped like a voice-activity detector exported by
torch.onnx: inputs `input` [1, 512] (an audio chunk), `state` [2, 1, 128]
(recurrent state), `sr` (int64 scalar, the sample rate); outputs `output`
[1, 1] and `stateN` [2, 1, 128], where

    stateN = tanh(state * w + mean(input) * sr / 16000)
    output = mean(stateN over the state's axes 0 and 2)

so each chunk's output and the final state depend on every chunk before it.
Writes DIR/vad.onnx, DIR/chunks.npy [CHUNKS, 1, 512], DIR/sr.npy, and the
NumPy answers: DIR/expected_output.npy [CHUNKS, 1, 1] (outputs stacked) and
DIR/expected_state.npy (the final state) from zeros, DIR/state0.npy (another
first state) with DIR/expected_output_s0.npy and DIR/expected_state_s0.npy;
and files for the error cases: DIR/short_chunks.npy (chunks of 256) and
DIR/vad_badstate.onnx (whose stateN is [2, 1, 64]).

usage: make_stream_model.py DIR [CHUNKS]
"""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

d = sys.argv[1]
chunks = int(sys.argv[2]) if len(sys.argv) > 2 else 20
rng = np.random.default_rng(7)
w = (rng.standard_normal(128) * 0.5 + 0.5).astype(np.float32)


def model(state_out_width, path):
    nodes = [
        helper.make_node("ReduceMean", ["input"], ["m"], axes=[1], keepdims=1),  # [1, 1]
        helper.make_node("Cast", ["sr"], ["srf"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["srf", "k16000"], ["scale"]),
        helper.make_node("Mul", ["m", "scale"], ["g"]),                          # [1, 1]
        helper.make_node("Mul", ["state", "w"], ["sw"]),                         # [2, 1, 128]
        helper.make_node("Add", ["sw", "g"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["full"]),
    ]
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(16000, np.float32), "k16000")]
    if state_out_width == 128:
        nodes.append(helper.make_node("Identity", ["full"], ["stateN"]))
    else:
        inits += [numpy_helper.from_array(np.array([0], np.int64), "s0"),
                  numpy_helper.from_array(np.array([state_out_width], np.int64), "s1"),
                  numpy_helper.from_array(np.array([2], np.int64), "sax")]
        nodes.append(helper.make_node("Slice", ["full", "s0", "s1", "sax"], ["stateN"]))
    nodes.append(helper.make_node("ReduceMean", ["stateN"], ["output3"], axes=[0, 2], keepdims=0))
    nodes.append(helper.make_node("Unsqueeze", ["output3", "ax1"], ["output"]))  # [1, 1]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "ax1"))
    graph = helper.make_graph(
        nodes, "vad",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 512]),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, 128]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1]),
         helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, 1, state_out_width])],
        inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def run(x, state, sr):
    outs = []
    for chunk in x:
        g = chunk.mean(axis=1, keepdims=True) * (np.float32(sr) / np.float32(16000))
        state = np.tanh(state * w + g).astype(np.float32)
        outs.append(state.mean(axis=(0, 2))[:, None])
    return np.stack(outs).astype(np.float32), state


model(128, f"{d}/vad.onnx")
model(64, f"{d}/vad_badstate.onnx")
x = rng.standard_normal((chunks, 1, 512)).astype(np.float32)
sr = np.array(16000, np.int64)
np.save(f"{d}/chunks.npy", x)
np.save(f"{d}/sr.npy", sr)
out, state = run(x, np.zeros((2, 1, 128), np.float32), sr)
np.save(f"{d}/expected_output.npy", out)
np.save(f"{d}/expected_state.npy", state)
s0 = (rng.standard_normal((2, 1, 128)) * 0.3).astype(np.float32)
np.save(f"{d}/state0.npy", s0)
out, state = run(x, s0, np.array(8000, np.int64))
np.save(f"{d}/sr8k.npy", np.array(8000, np.int64))
np.save(f"{d}/expected_output_s0.npy", out)
np.save(f"{d}/expected_state_s0.npy", state)
np.save(f"{d}/short_chunks.npy", x[:, :, :256].copy())
