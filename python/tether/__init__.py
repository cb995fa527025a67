"""Tether: run compiled models on remote devices through tetherd.

The API follows TVM's Relax VM and runtime (tvm.runtime.vm.VirtualMachine,
tvm.cpu/tvm.cuda, time_evaluator, profile); docs/design/python.md maps each
name and lists the differences. Everything runs through Tether's C++ client
library (the native module tether._tether).

A script written for TVM runs with its imports changed::

    import tether as tvm
    from tether import relax
    from tether.script import ir as I, relax as R

and its VirtualMachine runs on the daemon named by TETHER_REMOTE
("HOST:PORT"), or on one started inside this process when that is unset
(see default_session).
"""
import enum as _enum
import os as _os
import threading as _threading

import numpy as _np

from ._tether import (  # noqa: F401
    BenchmarkResult,
    Cancelled,
    DataType,
    DeadlineExceeded,
    Device,
    Executable,
    FunctionInfo,
    InternalError,
    NotFound,
    OutOfMemory,
    PermissionDenied,
    RemoteFunction,
    RemoteObject,
    RemoteTensor,
    Report,
    Session,
    StaticLibrary,
    Stream,
    TetherError,
    TetherIndexError,
    TetherRuntimeError,
    TetherTypeError,
    TetherValueError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    UploadedModule,
    compile,
    connect,
    cpu,
    cuda,
    device,
    has_compiler,
    load_module,
    load_param_dict,
    load_param_dict_from_file,
    load_static_library,
    local,
    num_threads,
    save_param_dict,
    save_param_dict_to_file,
)
from ._tether import VirtualMachine as _NativeVirtualMachine

_default_lock = _threading.Lock()
_default = None


def default_session():
    """The session a VirtualMachine runs on when it is given none and its
    device came from no session: a connection to TETHER_REMOTE ("HOST:PORT"
    or "unix:/path"; the token from TETHER_TOKEN, else this user's token
    file for a daemon on this host), or, when TETHER_REMOTE is unset, a
    daemon started inside this process (tether.local()). Made on first use
    and made again once it is closed."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            remote = _os.environ.get("TETHER_REMOTE")
            if remote:
                _default = connect(remote, token=_os.environ.get("TETHER_TOKEN") or None)
            else:
                _default = local()
        return _default


def set_default_session(session):
    """Makes `session` (a Session, or None to forget it) the default_session()."""
    global _default
    if session is not None and not isinstance(session, Session):
        raise TypeError("set_default_session takes a tether.Session or None")
    with _default_lock:
        _default = session


def _session_of(device):
    if isinstance(device, (list, tuple)):
        for d in device:
            s = _session_of(d)
            if s is not None:
                return s
        return None
    return getattr(device, "session", None) if isinstance(device, Device) else None


class VMInstrumentReturnKind(_enum.IntEnum):
    """What an instrument function returns before a call (the seed's
    relax.VMInstrumentReturnKind): NO_OP runs it, SKIP_RUN skips it (its
    result is None, and the after-call is not made)."""

    NO_OP = 0
    SKIP_RUN = 1


class VirtualMachine(_NativeVirtualMachine):
    """The Relax VM of an executable, on a daemon.

    VirtualMachine(rt_mod, device, memory_cfg=None, *, session=None,
    fetch_outputs=True, call_timeout=0.0, num_threads=0,
    concurrent_timing=False)

    rt_mod: an Executable (uploaded to the session now; skipped when the
    daemon has it), an UploadedModule, a Module of session.load_module (a
    new VM of its executable), or an IRModule of tether.script (built for
    this machine's CPU first). device: a Device or a list of
    them. memory_cfg: None, "naive" / "pooled", or {device: str}. The VM
    runs on `session`, else on the session the module was uploaded to or
    the device came from (session.cpu()), else on default_session().
    fetch_outputs=False keeps results on the daemon as RemoteTensors;
    call_timeout (seconds, 0 for none) bounds each call; num_threads sets
    the daemon's threads for this VM's calls; concurrent_timing lets
    time_evaluator measure while other sessions run. params (a {name:
    array} dict, a param file's bytes or its path, e.g. the OUT.params of
    `tether compile --separate-params`) travels to the daemon once and fills
    the parameters of those names: the functions then take the rest.
    """

    def __init__(self, rt_mod, device=None, memory_cfg=None, *, session=None, **options):
        from . import script  # noqa: PLC0415 (script imports this module)

        if isinstance(rt_mod, script.IRModule):
            rt_mod = rt_mod.build()
        elif isinstance(rt_mod, _NativeVirtualMachine):
            rt_mod = rt_mod.module  # relax.VirtualMachine(session.load_module(exe), dev)
        if session is None:
            session = getattr(rt_mod, "session", None) or _session_of(device)
        if session is None:
            session = default_session()
        super().__init__(rt_mod, device, memory_cfg, session=session, **options)


class Module(VirtualMachine):
    """An executable loaded on a session's daemon (session.load_module), as
    TVM's remote module: mod.get_function(name) / mod[name] finds its Relax
    functions and its kernels, time_evaluator times either in a loop on the
    daemon, list_functions() says what it holds. A kernel writes its outputs
    into its tensor arguments: pass RemoteTensors (session.empty /
    session.array) to keep them on the daemon; NumPy arrays are copied there
    and back around the call. It is a VirtualMachine of the executable, so
    everything a VM does works on it too."""

    def time_evaluator(self, func_name, dev, number=10, repeat=1, min_repeat_ms=0,
                       limit_zero_time_iterations=100, cooldown_interval_ms=0,
                       repeats_to_cooldown=1, f_preproc="", cache_flush_bytes=0):
        """TVM's Module.time_evaluator, in its argument order: a function that
        calls `func_name` (a Relax function or a kernel) with its arguments
        1 + number x repeat times on the daemon (min_repeat_ms grows
        number) and returns a BenchmarkResult of seconds per call."""
        return VirtualMachine.time_evaluator(
            self, func_name, dev, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
            cooldown_interval_ms=cooldown_interval_ms, repeats_to_cooldown=repeats_to_cooldown,
            cache_flush_bytes=cache_flush_bytes, f_preproc=f_preproc,
            limit_zero_time_iterations=limit_zero_time_iterations)

    def __contains__(self, name):
        """`name in mod`: implements_function(name)."""
        return self.implements_function(name)


def _load_module(self, exe, device=None, **options):
    """TVM RPC's remote.load_module: loads `exe` on this session's daemon
    and returns a Module. `exe` is an Executable, an UploadedModule of this
    session, the path of a .tx file or of a library written by
    export_library, or their bytes (uploaded once: skipped
    when the daemon has it). `device` (a Device or a list; None: cpu:0)
    and the keyword options are VirtualMachine's: a CUDA kernel needs its
    GPU among the devices."""
    if isinstance(exe, (bytes, bytearray)):
        exe = Executable.from_bytes(bytes(exe))
    elif isinstance(exe, (str, _os.PathLike)):
        exe = Executable.load(_os.fspath(exe))
    return Module(exe, device, session=self, **options)


Session.load_module = _load_module


def from_dlpack(tensor):
    """A NumPy array that shares the memory of `tensor`, a local CPU tensor of
    any framework that speaks DLPack (__dlpack__), without a copy. Such
    arrays (and the framework's tensors themselves) are VM arguments as
    they are."""
    return _np.from_dlpack(tensor)


def _remote_dlpack(self, stream=None):
    # A remote tensor lives on another machine: this is a local copy.
    return self.numpy().__dlpack__()


def _remote_dlpack_device(self):
    return (1, 0)  # kDLCPU: the copy __dlpack__ hands out


def _remote_array(self, dtype=None, copy=None):
    a = self.numpy()
    return a if dtype is None else a.astype(dtype)


RemoteTensor.__dlpack__ = _remote_dlpack
RemoteTensor.__dlpack_device__ = _remote_dlpack_device
RemoteTensor.__array__ = _remote_array

from . import relax, script, target  # noqa: E402,F401

__all__ = [name for name in dir() if not name.startswith("_") and name not in ("annotations",)]
