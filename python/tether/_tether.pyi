"""Type stubs of the native module tether._tether (python/src/*.cc). The
docstrings are the runtime ones; tests/python/test_package.py checks that
every public name of the module is here."""
from os import PathLike
from typing import Any, Callable, ContextManager, Mapping, Optional, Sequence, Union

import numpy as np

has_compiler: bool

_DeviceLike = Union["Device", str, tuple[str, int]]
_PathLike = Union[str, PathLike[str]]

class TetherError(Exception):
    """Base of every error Tether raises; .code is the status code, .kind the error kind."""
    code: str
    kind: str

class TetherValueError(TetherError, ValueError): ...
class TetherTypeError(TetherError, TypeError): ...
class TetherIndexError(TetherError, IndexError): ...
class TetherRuntimeError(TetherError, RuntimeError): ...
class InternalError(TetherError, RuntimeError): ...
class Cancelled(TetherError, RuntimeError): ...
class NotFound(TetherError, LookupError): ...
class OutOfMemory(TetherError, MemoryError): ...
class PermissionDenied(TetherError, PermissionError): ...
class Unauthenticated(TetherError, PermissionError): ...
class DeadlineExceeded(TetherError, TimeoutError): ...
class Unavailable(TetherError, ConnectionError): ...
class Unimplemented(TetherError, NotImplementedError): ...

class Device:
    """A device (cpu:0, cuda:1) and its attributes."""
    def __init__(self, device: _DeviceLike, index: Optional[int] = None) -> None: ...
    @property
    def device_type(self) -> int: ...
    @property
    def device_id(self) -> int: ...
    @property
    def session(self) -> Optional[Session]: ...
    @property
    def exist(self) -> bool: ...
    @property
    def device_name(self) -> Optional[str]: ...
    @property
    def compute_version(self) -> Optional[str]: ...
    @property
    def max_threads_per_block(self) -> Optional[int]: ...
    @property
    def warp_size(self) -> Optional[int]: ...
    @property
    def max_shared_memory_per_block(self) -> Optional[int]: ...
    @property
    def max_clock_rate(self) -> Optional[int]: ...
    @property
    def multi_processor_count(self) -> Optional[int]: ...
    @property
    def max_thread_dimensions(self) -> Optional[str]: ...
    @property
    def max_registers_per_block(self) -> Optional[int]: ...
    @property
    def api_version(self) -> Optional[int]: ...
    @property
    def driver_version(self) -> Optional[str]: ...
    @property
    def l2_cache_size_bytes(self) -> Optional[int]: ...
    @property
    def total_global_memory(self) -> Optional[int]: ...
    @property
    def available_global_memory(self) -> Optional[int]: ...
    @property
    def max_grid_dimensions(self) -> Optional[str]: ...
    @property
    def pci_bus_id(self) -> Optional[str]: ...
    @property
    def max_threads_per_multi_processor(self) -> Optional[int]: ...
    @property
    def memory_bus_width(self) -> Optional[int]: ...
    @property
    def memory_clock_rate(self) -> Optional[int]: ...
    def sync(self, stream: Optional[RemoteObject] = None) -> None:
        """Waits for the device's work on the daemon (its session's, else the default session's)."""
    def create_raw_stream(self) -> RemoteObject:
        """A new stream on the (CUDA) device, owned by the session; the CPU has none."""
    def set_raw_stream(self, stream: Optional[RemoteObject]) -> None:
        """Makes `stream` (None: the legacy default) the one the session's kernels launch on."""
    def free_raw_stream(self, stream: RemoteObject) -> None:
        """Frees a stream of create_raw_stream on the daemon now."""

def cpu(dev_id: int = 0) -> Device:
    """The CPU device (attributes read on this machine)."""
def cuda(dev_id: int = 0) -> Device:
    """A CUDA GPU (attributes read on this machine)."""
def device(dev_type: _DeviceLike, dev_id: Optional[int] = None) -> Device:
    """A device by name: device("cuda:1"), device("cuda", 1)."""

class DataType:
    """A tensor element type: "float32", "int8", "bfloat16"."""
    def __init__(self, type_str: str) -> None: ...
    @property
    def type_code(self) -> int: ...
    @property
    def bits(self) -> int: ...
    @property
    def lanes(self) -> int: ...
    @property
    def itemsize(self) -> int: ...

class RemoteTensor:
    """A tensor owned by a session on the daemon; numpy() copies it here."""
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> Device: ...
    def numpy(self) -> np.ndarray:
        """A copy of the tensor here, as a numpy array (bfloat16 as its uint16 bits)."""
    def copyfrom(self, source: Any) -> RemoteTensor:
        """Copies `source` into this tensor in place, on the daemon; returns self."""
    def __dlpack__(self, stream: Any = None) -> Any:
        """DLPack export of a local copy (the tensor lives on another machine)."""
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray: ...

class RemoteObject:
    """An object that stays on the daemon (a closure), passed back as is."""
    @property
    def type_key(self) -> str: ...

_Arg = Union[np.ndarray, RemoteTensor, RemoteObject, int, float, bool, str, Device, None,
             Sequence[Any], Any]

class Session(ContextManager["Session"]):
    """A session on a tetherd daemon; it owns every tensor, module and VM it makes."""
    def info(self) -> dict[str, Any]:
        """The handshake: protocol, runtime version, devices and their attributes, dtypes, limits, the daemon's target."""
    def close(self) -> None:
        """Closes the session; the daemon frees everything it owns. Idempotent."""
    @property
    def closed(self) -> bool: ...
    @property
    def session_id(self) -> str: ...
    @property
    def is_local(self) -> bool: ...
    def device(self, dev_type: _DeviceLike, dev_id: Optional[int] = None) -> Device:
        """The device with the daemon's attributes (exist, device_name, ...)."""
    def cpu(self, dev_id: int = 0) -> Device:
        """The daemon's CPU, with its attributes."""
    def cuda(self, dev_id: int = 0) -> Device:
        """The daemon's CUDA GPU `dev_id`, with its attributes."""
    def devices(self) -> list[Device]:
        """Every device of the daemon."""
    def empty(self, shape: Sequence[int], dtype: str = "float32",
              device: Optional[_DeviceLike] = None) -> RemoteTensor:
        """A new uninitialized tensor on the daemon."""
    def array(self, data: Any, device: Optional[_DeviceLike] = None) -> RemoteTensor:
        """A copy of `data` (a numpy array or anything numpy.asarray takes) on the daemon."""
    def upload(self, exe: Executable) -> UploadedModule:
        """Stores the executable on the daemon (skipped when the daemon has it already)."""
    def load_module(self, exe: Union[Executable, UploadedModule, _PathLike, bytes],
                    device: Union[_DeviceLike, Sequence[_DeviceLike], None] = None,
                    **options: Any) -> Any:
        """Loads `exe` on the daemon: a tether.Module (a VirtualMachine with TVM's Module API)."""
    def get_function(self, name: str) -> RemoteFunction:
        """The daemon's global function `name` as a callable (TVM RPC's remote.get_function)."""
    def list_global_func_names(self) -> list[str]:
        """The names of the daemon's remote-callable global functions, sorted."""

class RemoteFunction:
    """A global function of a session's daemon (session.get_function)."""
    name: str
    def __call__(self, *args: _Arg) -> Any:
        """Calls the function on the daemon; PermissionDenied unless it is remote-callable."""

def connect(target: str, *, token: Optional[str] = None, tls_ca: Optional[str] = None,
            tls_cert: Optional[str] = None, tls_key: Optional[str] = None,
            tls_server_name: Optional[str] = None, isolate: bool = False,
            timeout: float = 10.0) -> Session:
    """Connects to a tetherd ("HOST:PORT" or "unix:/path") and opens a session."""
def local() -> Session:
    """Starts a daemon inside this process and opens a session on it."""

class Executable:
    """A compiled module: bytecode, constants and kernels."""
    @staticmethod
    def load(path: str) -> Executable:
        """Reads an executable file (.tx, or a library written by export_library)."""
    @staticmethod
    def from_bytes(data: bytes) -> Executable:
        """An executable from the bytes of a .tx file."""
    def save(self, path: _PathLike) -> None:
        """Writes the executable file (.tx)."""
    def to_bytes(self) -> bytes:
        """The bytes of the .tx file."""
    def as_text(self) -> str:
        """The bytecode, constants and kernels as text."""
    def stats(self) -> str:
        """Sizes: functions, instructions, constants, kernel bytes."""
    def export_library(self, path: _PathLike) -> None:
        """Writes the executable as a shared library (.so): its CPU kernels, loadable with dlopen, carrying the executable; a path ending in .a writes the static library of an executable compiled with system_lib=PREFIX."""

def load_module(path: _PathLike) -> Executable:
    """An executable from a .tx file or a library written by export_library, to run here."""

class StaticLibrary:
    """A system library archive read without linking it: a static library is linked into the program that runs its kernels, not loaded."""
    @property
    def prefix(self) -> str: ...
    @property
    def machine(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def kernels(self) -> list[str]: ...
    @property
    def functions(self) -> list[str]: ...
    def implements_function(self, name: str) -> bool:
        """Whether `name` is among its functions (linked here or not)."""

def load_static_library(path: _PathLike, func_names: Optional[Sequence[str]] = None) -> StaticLibrary:
    """TVM's tvm.runtime.load_static_library: the system library archive at `path`, read without linking it; each of `func_names` must be one of its kernels."""

class UploadedModule:
    """An executable stored on a session's daemon."""
    @property
    def sha256(self) -> str: ...
    @property
    def session(self) -> Session: ...

def compile(source: Union[_PathLike, bytes], target: Optional[str] = None,
            shapes: Optional[Mapping[str, Sequence[int]]] = None, *,
            format: Optional[str] = None, exec_mode: str = "bytecode",
            system_lib: Optional[str] = None,
            kernel_cache_dir: Optional[_PathLike] = None) -> Executable:
    """Compiles a .rx or .onnx model (a path, or the model's bytes) for `target`; a .tx path is loaded as it is. exec_mode "compiled" compiles the Relax functions to native code too. With system_lib=PREFIX the CPU kernels are a system library. kernel_cache_dir=FOLDER reuses compiled CPU kernels across builds."""

class BenchmarkResult:
    """Timing samples (seconds per call, one per repeat) and their statistics."""
    def __init__(self, results: Sequence[float]) -> None: ...
    results: list[float]
    mean: float
    median: float
    min: float
    max: float
    std: float
    total_calls: int
    number_per_repeat: int
    exclusive: bool
    wait_seconds: float
    def percentile(self, p: float) -> float:
        """The p-th percentile of results (p in [0, 100]), in seconds."""

class Report:
    """A profile: one row per call, device totals."""
    def table(self, sort: bool = True, aggregate: bool = True, col_sums: bool = True) -> str:
        """A human-readable table."""
    def csv(self) -> str:
        """The rows as CSV."""
    def json(self) -> str:
        """The report as JSON (Report.from_json reads it)."""
    @staticmethod
    def from_json(json: str) -> Report:
        """A Report from the JSON of Report.json()."""

class Stream(ContextManager["Stream"]):
    """A stateful model run chunk after chunk with its state kept on the daemon (vm.stream)."""
    def step(self, **streamed: _Arg) -> list[Any]:
        """Runs one chunk; returns the outputs, None in place of each carried one."""
    def state(self, input: Union[str, int]) -> np.ndarray:
        """Downloads what carried input `input` holds now."""
    @property
    def steps(self) -> int: ...
    def close(self) -> None:
        """Frees the stream's state and uploaded inputs on the daemon."""

class FunctionInfo:
    """A function of an executable (VirtualMachine.list_functions): a Relax function or a kernel."""
    name: str
    num_args: int
    param_names: list[str]
    @property
    def kind(self) -> str: ...
    @property
    def params(self) -> list[dict[str, Any]]: ...
    @property
    def device_type(self) -> Optional[str]: ...
    @property
    def unchecked(self) -> Optional[str]: ...

class VirtualMachine:
    """The Relax VM of an executable, on a daemon (tether.VirtualMachine picks the session)."""
    def __init__(self, rt_mod: Union[Executable, UploadedModule, Any],
                 device: Union[_DeviceLike, Sequence[_DeviceLike], None] = None,
                 memory_cfg: Union[str, Mapping[Any, str], None] = None, *,
                 session: Optional[Session] = None, fetch_outputs: bool = True,
                 call_timeout: float = 0.0, num_threads: int = 0,
                 concurrent_timing: bool = False,
                 params: Union[Mapping[str, Any], bytes, str, PathLike[str], None] = None
                 ) -> None: ...
    @property
    def session(self) -> Session: ...
    @property
    def module(self) -> UploadedModule: ...
    def __getitem__(self, func_name: str) -> Callable[..., Any]:
        """vm[name]: the function `name` (a saved or Relax function, or a kernel) as a callable."""
    def get_function(self, name: str, query_imports: bool = False) -> Callable[..., Any]:
        """TVM's Module.get_function: vm[name]."""
    def list_functions(self) -> list[FunctionInfo]:
        """The executable's Relax functions, then its kernels."""
    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        """Whether vm[name] finds `name`."""
    def stream(self, func_name: str, *args: _Arg, carry: Mapping[int, Union[str, int]],
               **kwargs: _Arg) -> Stream:
        """A Stream of `func_name`: carry={output index: input} names the state."""
    def invoke(self, func_name: str, *args: _Arg) -> Any:
        """Calls `func_name` with the arguments; returns its result."""
    def invoke_closure(self, closure: RemoteObject, *args: _Arg) -> Any:
        """Calls a closure (a RemoteObject a function returned) with the arguments."""
    def save_function(self, func_name: str, saved_name: str, *args: _Arg,
                      include_return: bool = True, **kwargs: _Arg) -> None:
        """Saves a closure of `func_name` with these arguments under `saved_name`."""
    def set_input(self, func_name: str, *args: _Arg, **kwargs: _Arg) -> None:
        """Sets the arguments of `func_name` for invoke_stateful."""
    def invoke_stateful(self, func_name: str) -> None:
        """Calls `func_name` with the arguments set_input gave."""
    def get_outputs(self, func_name: str) -> Any:
        """The result of the last invoke_stateful of `func_name` (tuples as nested lists)."""
    def get_function_arity(self, func_name: str) -> int:
        """How many parameters `func_name` takes."""
    def get_function_param_names(self, func_name: str) -> list[str]:
        """The parameter names of `func_name`."""
    def set_instrument(self, instrument: Union[str, Callable[..., Any]], *args: _Arg) -> None:
        """Installs an instrument: a function instrument(func, func_symbol, before_run,
        ret_value, *args) called around every VM call (tether.local() sessions only;
        SKIP_RUN before a call skips it), or the name of one the daemon makes
        ("trace", "skip" with patterns, a registered factory; "" removes it)."""
    def get_trace(self, clear: bool = False) -> Report:
        """What the "trace" or "skip" instrument recorded, a row per call."""
    def time_evaluator(self, func_name: str, dev: _DeviceLike, number: int = 10,
                       repeat: int = 1, min_repeat_ms: int = 0, cooldown_interval_ms: int = 0,
                       repeats_to_cooldown: int = 1, cache_flush_bytes: int = 0,
                       f_preproc: str = "", *,
                       limit_zero_time_iterations: int = 100) -> Callable[..., BenchmarkResult]:
        """A function that times `func_name` (a function or a kernel) with its arguments on the daemon."""
    def profile(self, func_name: str, *args: _Arg) -> Report:
        """Runs `func_name` once with the arguments, timing each kernel call."""

def save_param_dict(params: Mapping[str, Any]) -> bytes:
    """{name: array} as TVM's parameter-dict bytes."""
def save_param_dict_to_file(params: Mapping[str, Any], path: _PathLike) -> None:
    """save_param_dict, written to `path` atomically."""
def load_param_dict(param_bytes: bytes) -> dict[str, np.ndarray]:
    """TVM's parameter-dict bytes as {name: numpy array}, in file order."""
def load_param_dict_from_file(path: _PathLike) -> dict[str, np.ndarray]:
    """load_param_dict of the file at `path`."""
def num_threads() -> int:
    """The threads this process's runtime uses."""
