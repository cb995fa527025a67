"""A kernel written in Python as TVMScript: a @T.prim_func member of an
@I.ir_module class, called from Relax with R.call_tir and R.call_tir_inplace,
built with relax.build and run through a real tetherd, checked against
NumPy. The imports are TVM's with tvm -> tether."""
import numpy as np
import pytest

import tether as tvm
from tether import relax
from tether.script import ir as I, relax as R, tir as T


@I.ir_module
class Matmul:
    @T.prim_func
    def matmul(A: T.Buffer((16, 24), "float32"), B: T.Buffer((24, 8), "float32"),
               C: T.Buffer((16, 8), "float32")):
        T.func_attr({"global_symbol": "matmul", "tir.noalias": True})
        for i, j, k in T.grid(16, 8, 24):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func
    def relu_inplace(X: T.Buffer((16, 8), "float32")):
        for i in T.parallel(16):
            for j in T.vectorized(8):
                X[i, j] = T.max(X[i, j], T.float32(0))

    @R.function
    def main(x: R.Tensor((16, 24), "float32"), w: R.Tensor((24, 8), "float32")):
        cls = Matmul
        with R.dataflow():
            y = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((16, 8), "float32"))
            z = R.call_tir_inplace(cls.relu_inplace, (y,), inplace_indices=[0],
                                   out_sinfo=R.Tensor((16, 8), "float32"))
            R.output(z)
        return z


def test_a_prim_func_written_in_python_runs_remotely(session):
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    assert "@T.prim_func" in Matmul.script()
    ex = relax.build(Matmul, tvm.target.Target("llvm", host="llvm"))
    vm = relax.VirtualMachine(ex, session.cpu())
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 24)).astype("float32")
    w = rng.standard_normal((24, 8)).astype("float32")
    out = np.asarray(vm["main"](x, w))
    np.testing.assert_allclose(out, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


def test_a_kernel_mistake_is_a_positioned_error():
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    bad = tvm.script.from_source(
        Matmul.script().replace("C[vi, vj] = T.float32(0)", "C[vi] = T.float32(0)"), "bad.rx")
    with pytest.raises(ValueError, match=r"expected 2 indices into 'C' \(2-d\), got 1"):
        relax.build(bad, "llvm")
