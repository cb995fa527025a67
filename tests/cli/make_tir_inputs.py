"""Inputs of examples/tir_matmul.rx and the NumPy reference of its output:
DIR/x.npy, w.npy, b.npy and want.npy (y = x @ w, then b added to the first
60 rows, the tir_vars bound of the in-place kernel). Usage: make_tir_inputs.py DIR"""
import sys

import numpy as np

d = sys.argv[1]
rng = np.random.default_rng(3)
x = rng.standard_normal((64, 128)).astype(np.float32)
w = rng.standard_normal((128, 32)).astype(np.float32)
b = rng.standard_normal(32).astype(np.float32)
for name, a in dict(x=x, w=w, b=b).items():
    np.save(f"{d}/{name}.npy", a)
want = x @ w
want[:60] += b
np.save(f"{d}/want.npy", want)
