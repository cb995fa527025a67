"""tether.relax: the names of tvm.relax a VM script uses (build,
VirtualMachine, VMInstrumentReturnKind, Executable), so `from tether import relax` stands in for
`from tvm import relax`."""
import os

from . import Executable, VirtualMachine, VMInstrumentReturnKind  # noqa: F401
from . import compile as _compile
from .script import IRModule


def build(mod, target=None, params=None, exec_mode="bytecode"):
    """Compiles `mod` into an Executable: an IRModule of tether.script, Relax
    text (str), or the path of a .rx / .onnx model. `target` is a
    tether.target.Target or a target string ("llvm", "llvm -mcpu=...",
    "cuda"); None is this machine's CPU. For a daemon on another kind of
    machine, build for session.info()["target"]["cpu_compile_target"].
    `params` (bound weights) is not supported: pass them as arguments.
    `exec_mode` "compiled" compiles the Relax functions to native code too
    (TVM's exec_mode="compiled"; CPU targets): the VM runs them without
    interpreting bytecode, and behaves the same."""
    if params:
        raise NotImplementedError("relax.build(params=...): pass the weights as arguments")
    tgt = None if target is None else str(target)
    if isinstance(mod, IRModule):
        return mod.build(tgt, exec_mode=exec_mode)
    if isinstance(mod, str) and ("@R.function" in mod or "@I.ir_module" in mod):
        return _compile(mod.encode(), tgt, format="rx", exec_mode=exec_mode)
    if isinstance(mod, (str, bytes, os.PathLike)):
        return _compile(mod, tgt, exec_mode=exec_mode)
    raise TypeError("relax.build takes a tether.script.IRModule, Relax text or a model path, "
                    "got %s" % type(mod).__name__)
