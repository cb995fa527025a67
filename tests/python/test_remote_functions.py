"""Remote functions (issue 24 item 2) from Python, against a real tetherd and
tether.local(): session.load_module and its functions and kernels (listed,
called alone with remote tensors and NumPy arrays, checked against the
model and NumPy, timed alone on the daemon, refused when called wrongly
while the session keeps serving), the daemon's remote-callable global
functions (session.get_function, list_global_func_names), and Device.sync
and streams on the CPU."""
import numpy as np
import pytest

import tether
from tether import relax

SCALE_ADD_RX = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), y: R.Tensor(("n", 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        with R.dataflow():
            lv0 = R.add(x, y)
            gv = R.multiply(lv0, y)
            R.output(gv)
        return gv
"""


@pytest.fixture(scope="module")
def scale_add_exe():
    if not tether.has_compiler:
        pytest.skip("tether built without the compiler")
    return tether.compile(SCALE_ADD_RX.encode())


@pytest.fixture(params=["tetherd", "local"])
def any_session(request, daemon):
    """A session on the build's tetherd, and one on tether.local()."""
    s = tether.connect(daemon) if request.param == "tetherd" else tether.local()
    with s:
        yield s


def the_kernel(mod):
    kernels = [f for f in mod.list_functions() if f.kind == "kernel"]
    assert len(kernels) == 1, kernels  # add and multiply fused into one
    return kernels[0]


def kernel_args(kernel, n, x, y, out, place):
    """The kernel's arguments in parameter order: the tensors x, y, out
    (through `place`), each int parameter n."""
    tensors = iter([x, y, out])
    return [place(next(tensors)) if p["kind"] == "tensor" else n for p in kernel.params]


def inputs(n):
    x = (0.5 * np.arange(3 * n, dtype="float32")).reshape(n, 3)
    y = (1.0 - 0.25 * np.arange(3 * n, dtype="float32")).reshape(n, 3)
    return x, y


def test_load_module_lists_functions_and_kernels(any_session, scale_add_exe, tmp_path):
    mod = any_session.load_module(scale_add_exe)
    assert isinstance(mod, tether.Module) and isinstance(mod, tether.VirtualMachine)
    functions = mod.list_functions()
    assert functions[0].name == "main" and functions[0].kind == "function"
    assert functions[0].num_args == 2 and functions[0].param_names == ["x", "y"]
    assert functions[0].device_type is None and functions[0].params == []
    kernel = the_kernel(mod)
    assert kernel.device_type == "cpu" and kernel.unchecked is None
    assert kernel.num_args == len(kernel.params)
    tensors = [p for p in kernel.params if p["kind"] == "tensor"]
    assert [(p["dtype"], p["ndim"]) for p in tensors] == [("float32", 2)] * 3
    assert "kernel " + kernel.name in repr(kernel)
    assert mod.implements_function("main") and kernel.name in mod
    assert not mod.implements_function("no_such_function")
    assert "kernel" in repr(mod[kernel.name]) and "vm function" in repr(mod["main"])

    # The same executable from its bytes or its file is the same stored module.
    path = tmp_path / "scale_add.tx"
    scale_add_exe.save(path)
    assert any_session.load_module(path).module.sha256 == mod.module.sha256
    assert any_session.load_module(scale_add_exe.to_bytes()).module.sha256 == mod.module.sha256
    # relax.VirtualMachine of a loaded module is a new VM of its executable.
    vm = relax.VirtualMachine(mod, any_session.cpu())
    x, y = inputs(2)
    np.testing.assert_array_equal(vm["main"](x, y), (x + y) * y)


def test_a_kernel_called_alone_writes_what_the_model_returns(any_session, scale_add_exe):
    mod = any_session.load_module(scale_add_exe)
    kernel = the_kernel(mod)
    n = 4
    x, y = inputs(n)
    want = mod["main"](x, y)
    np.testing.assert_array_equal(want, (x + y) * y)

    # Remote tensors: the kernel writes the output on the daemon.
    out = any_session.empty((n, 3), "float32")
    args = kernel_args(kernel, n, x, y, np.full((n, 3), -1, "float32"), any_session.array)
    args[[i for i, p in enumerate(kernel.params) if p["kind"] == "tensor"][2]] = out
    f = mod.get_function(kernel.name)
    assert f(*args) is None
    np.testing.assert_array_equal(out.numpy(), want)

    # NumPy arrays see the kernel's writes, as a local call's would; the
    # inputs keep their values.
    out_np = np.full((n, 3), -1, "float32")
    x_before = x.copy()
    assert mod[kernel.name](*kernel_args(kernel, n, x, y, out_np, lambda a: a)) is None
    np.testing.assert_array_equal(out_np, want)
    np.testing.assert_array_equal(x, x_before)


def test_one_kernel_is_timed_on_the_daemon(any_session, scale_add_exe):
    mod = any_session.load_module(scale_add_exe)
    kernel = the_kernel(mod)
    x, y = np.ones((2, 3), "float32"), np.full((2, 3), 2, "float32")
    args = kernel_args(kernel, 2, x, y, np.zeros((2, 3), "float32"), any_session.array)
    out = args[[i for i, p in enumerate(kernel.params) if p["kind"] == "tensor"][2]]
    result = mod.time_evaluator(kernel.name, any_session.cpu(), number=2, repeat=3)(*args)
    assert isinstance(result, tether.BenchmarkResult)
    assert len(result.results) == 3 and result.total_calls == 1 + 2 * 3
    assert result.number_per_repeat == 2
    assert result.mean > 0 and result.median > 0
    np.testing.assert_array_equal(out.numpy(), np.full((2, 3), 6, "float32"))
    # TVM's Module.time_evaluator argument order: number, repeat,
    # min_repeat_ms, limit_zero_time_iterations, cooldown_interval_ms.
    result = mod.time_evaluator(kernel.name, any_session.cpu(), 1, 2, 0, 100, 0)(*args)
    assert len(result.results) == 2 and result.total_calls == 1 + 1 * 2
    # The VM's own time_evaluator times a kernel too.
    vm_result = tether.VirtualMachine.time_evaluator(mod, kernel.name, "cpu:0", 1, 1)(*args)
    assert vm_result.total_calls == 2


def test_wrong_kernel_calls_raise_the_daemons_error_and_the_session_serves(
        any_session, scale_add_exe):
    mod = any_session.load_module(scale_add_exe)
    kernel = the_kernel(mod)
    f = mod[kernel.name]
    x, y = np.ones((2, 3), "float32"), np.full((2, 3), 2, "float32")
    args = kernel_args(kernel, 2, x, y, np.zeros((2, 3), "float32"), any_session.array)
    tensor_at = [i for i, p in enumerate(kernel.params) if p["kind"] == "tensor"]

    with pytest.raises(tether.TetherTypeError) as arity:  # as Python's own wrong count
        f(*args[:-1])
    assert arity.value.code == "INVALID_ARGUMENT" and "arguments, got" in str(arity.value)
    assert kernel.name in str(arity.value)

    wrong_shape = list(args)
    wrong_shape[tensor_at[2]] = any_session.empty((3, 3), "float32")
    with pytest.raises(ValueError, match="dim 0 is 3") as shape:
        f(*wrong_shape)
    assert shape.value.code == "INVALID_ARGUMENT"

    wrong_dtype = list(args)
    wrong_dtype[tensor_at[0]] = any_session.array(np.ones((2, 3), "float64"))
    with pytest.raises((ValueError, TypeError), match="float64") as dtype:
        f(*wrong_dtype)
    assert dtype.value.code == "INVALID_ARGUMENT"

    not_a_tensor = list(args)
    not_a_tensor[tensor_at[0]] = 7
    with pytest.raises(tether.TetherError) as kind:
        f(*not_a_tensor)
    assert kind.value.code == "INVALID_ARGUMENT"

    # Timing a wrong call is refused the same way.
    with pytest.raises(ValueError, match="dim 0 is 3"):
        mod.time_evaluator(kernel.name, any_session.cpu(), number=1)(*wrong_shape)

    # Unknown names: the VM's lookup error, found before any call.
    with pytest.raises(ValueError):
        mod["no_such_kernel"]
    with pytest.raises(ValueError):
        mod.get_function("no_such_kernel")
    with pytest.raises(ValueError, match="unknown function \"no_such_kernel\"") as unknown:
        mod.time_evaluator("no_such_kernel", any_session.cpu())()
    assert unknown.value.code == "NOT_FOUND"

    # Still serving: the right call works, and so does the model.
    assert f(*args) is None
    np.testing.assert_array_equal(args[tensor_at[2]].numpy(), np.full((2, 3), 6, "float32"))
    np.testing.assert_array_equal(mod["main"](x, y), np.full((2, 3), 6, "float32"))


def test_remote_callable_globals_and_no_others(any_session, scale_add_exe):
    any_session.load_module(scale_add_exe)  # the VM builtins are registered by now
    names = any_session.list_global_func_names()
    assert names == sorted(names)
    assert {"tether.runtime.num_threads", "tether.runtime.device_attr",
            "tether.runtime.device_exists"} <= set(names)
    assert "vm.builtin.copy" not in names

    num_threads = any_session.get_function("tether.runtime.num_threads")
    assert num_threads.name == "tether.runtime.num_threads"
    threads = num_threads()
    assert isinstance(threads, int) and threads >= 1
    exist = any_session.get_function("tether.runtime.device_attr")(any_session.cpu(), "exist")
    assert exist
    with pytest.raises(ValueError):
        any_session.get_function("tether.runtime.device_attr")(any_session.cpu(), "colour")
    with pytest.raises(ValueError, match="expects 0 arguments, got 3") as arity:
        num_threads(1, 2, 3)
    assert arity.value.code == "INVALID_ARGUMENT"
    with pytest.raises(TypeError, match="expected Device"):
        any_session.get_function("tether.runtime.device_exists")("cpu:0")
    assert any_session.get_function("tether.runtime.device_exists")(any_session.cpu()) is True

    # Registered on the daemon but not remote-callable: refused with its message.
    refused = any_session.get_function("vm.builtin.copy")
    with pytest.raises(tether.PermissionDenied, match="is not remote-callable") as denied:
        refused(1)
    assert denied.value.code == "PERMISSION_DENIED"
    assert isinstance(denied.value, PermissionError)
    with pytest.raises(tether.NotFound) as unknown:
        any_session.get_function("no.such.function")()
    assert unknown.value.code == "NOT_FOUND"
    # The session still serves.
    assert num_threads() == threads


def test_device_sync_and_streams_on_the_cpu(any_session):
    cpu = any_session.cpu()
    assert cpu.sync() is None
    with pytest.raises(tether.TetherError, match="has no streams") as no_stream:
        cpu.create_raw_stream()
    assert no_stream.value.code == "FAILED_PRECONDITION"
    cpu.set_raw_stream(None)  # the legacy default stream: always fine
    with pytest.raises(TypeError):
        cpu.set_raw_stream(3)
    with pytest.raises(TypeError, match="create_raw_stream"):
        cpu.sync(3)
    with pytest.raises(TypeError):
        cpu.free_raw_stream(None)
    with pytest.raises(TypeError, match="create_raw_stream"):
        cpu.free_raw_stream(3)
    # A GPU the daemon lacks is unavailable, not a crash.
    with pytest.raises(tether.Unavailable):
        any_session.cuda(63).sync()
    with pytest.raises(tether.Unavailable):
        any_session.cuda(63).create_raw_stream()
    assert cpu.sync() is None


def test_a_device_without_a_session_syncs_on_the_default_session(daemon, monkeypatch):
    monkeypatch.setenv("TETHER_REMOTE", daemon)
    tether.set_default_session(None)
    try:
        assert tether.cpu().sync() is None
        with pytest.raises(tether.TetherError, match="has no streams"):
            tether.cpu().create_raw_stream()
        assert not tether.default_session().closed
    finally:
        tether.default_session().close()
        tether.set_default_session(None)
