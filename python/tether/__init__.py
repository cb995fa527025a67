"""Tether: run compiled models on remote devices through tetherd.

The API follows TVM's Relax VM and runtime (tvm.runtime.vm.VirtualMachine,
tvm.cpu/tvm.cuda, time_evaluator, profile); docs/design/python.md maps each
name and lists the differences. Everything runs through Tether's C++ client
library (the native module tether._tether).
"""
from ._tether import (  # noqa: F401
    BenchmarkResult,
    Cancelled,
    DeadlineExceeded,
    Device,
    Executable,
    InternalError,
    NotFound,
    OutOfMemory,
    PermissionDenied,
    RemoteObject,
    RemoteTensor,
    Report,
    Session,
    TetherError,
    TetherIndexError,
    TetherRuntimeError,
    TetherTypeError,
    TetherValueError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    UploadedModule,
    VirtualMachine,
    compile,
    connect,
    cpu,
    cuda,
    device,
    has_compiler,
    local,
)

__all__ = [name for name in dir() if not name.startswith("_")]
