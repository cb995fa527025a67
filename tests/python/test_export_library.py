"""TVM's deployment recipe, with tvm -> tether: exe.export_library("x.so"),
then tvm.runtime.load_module("x.so") here or session.load_module("x.so") on
a real tetherd. The library is a shared object any program can dlopen (here
ctypes), and it runs as the executable it was exported from; one built for
another machine is refused with both targets named. And exec_mode="compiled"
end to end."""
import ctypes
import platform

import numpy as np
import pytest

import tether
from conftest import MLP_RX as MLP
from tether import relax


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 8)).astype("float32")
    w = rng.standard_normal((8, 4)).astype("float32")
    b = rng.standard_normal(4).astype("float32")
    return x, w, b, np.maximum(x @ w + b, 0)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    if not tether.has_compiler:
        pytest.skip("built without the compiler")
    exe = tether.compile(MLP, format="rx")
    path = tmp_path_factory.mktemp("export") / "mlp.so"
    exe.export_library(path)
    return exe, path


def test_the_library_is_a_shared_object_any_program_can_dlopen(exported):
    exe, path = exported
    assert path.read_bytes()[:4] == b"\x7fELF"
    lib = ctypes.CDLL(str(path))
    manifest = ctypes.c_char.in_dll(lib, "tether_kernel_manifest")  # a char array
    text = ctypes.string_at(ctypes.addressof(manifest)).decode()
    assert text.startswith("tether-kernel-manifest 1\n")
    assert "kernel " in text


def test_load_module_runs_it_here_as_the_executable(exported, inputs):
    exe, path = exported
    loaded = tether.load_module(path)
    assert loaded.to_bytes() == exe.to_bytes()
    x, w, b, want = inputs
    vm = relax.VirtualMachine(loaded, tether.local().cpu())
    np.testing.assert_allclose(np.asarray(vm["main"](x, w, b)), want, rtol=1e-5, atol=1e-5)


def test_a_daemon_loads_it_uploaded(session, exported, inputs):
    exe, path = exported
    mod = session.load_module(str(path))
    x, w, b, want = inputs
    np.testing.assert_allclose(np.asarray(mod["main"](x, w, b)), want, rtol=1e-5, atol=1e-5)
    # The upload is the executable's: the .tx of the same build is already there.
    assert session.upload(exe).sha256 == session.upload(tether.Executable.load(str(path))).sha256


def test_a_library_for_another_machine_is_refused_with_both_targets_named(tmp_path):
    if not tether.has_compiler:
        pytest.skip("built without the compiler")
    here = platform.machine()
    other = ("aarch64-linux-gnu", "cortex-a72") if here == "x86_64" else ("x86_64-linux-gnu", "znver4")
    exe = tether.compile(MLP, "llvm -mtriple=%s -mcpu=%s" % other, format="rx")
    path = tmp_path / "board.so"
    exe.export_library(path)
    with pytest.raises(tether.TetherError) as refused:
        tether.load_module(path)
    assert "%s, %s" % other in str(refused.value)
    assert here in str(refused.value)
    # It still reads, to upload to the board.
    assert tether.Executable.load(str(path)).to_bytes() == exe.to_bytes()


def test_a_file_that_is_not_a_library_is_a_clear_error(tmp_path):
    path = tmp_path / "broken.so"
    path.write_bytes(b"\x7fELF" + b"\0" * 60)
    with pytest.raises(tether.TetherValueError):
        tether.load_module(path)


def test_exec_mode_compiled_runs_as_bytecode_does(session, inputs, tmp_path):
    """relax.build(..., exec_mode="compiled"): the Relax functions are native
    code in the kernel library, the executable has no bytecode, the VM API
    is the same; exported as a library it runs on a daemon too."""
    if not tether.has_compiler:
        pytest.skip("built without the compiler")
    exe = relax.build(MLP.decode(), exec_mode="compiled")
    assert "vm_tir_func" in exe.as_text()
    assert "bytecode: 0 instructions" in exe.stats()
    x, w, b, want = inputs
    vm = relax.VirtualMachine(exe, session.cpu())
    np.testing.assert_allclose(np.asarray(vm["main"](x, w, b)), want, rtol=1e-5, atol=1e-5)
    vm.set_input("main", x, w, b)
    vm.invoke_stateful("main")
    np.testing.assert_allclose(np.asarray(vm.get_outputs("main")), want, rtol=1e-5, atol=1e-5)
    path = tmp_path / "compiled.so"
    exe.export_library(path)
    mod = session.load_module(str(path))
    np.testing.assert_allclose(np.asarray(mod["main"](x, w, b)), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(tether.TetherValueError, match="needs a CPU target"):
        relax.build(MLP.decode(), "cuda", exec_mode="compiled")


def test_kernel_cache_dir_keeps_the_kernels_objects_and_reuses_them(tmp_path):
    if not tether.has_compiler:
        pytest.skip("built without the compiler")
    cache = tmp_path / "kernels"
    first = tether.compile(MLP, format="rx", kernel_cache_dir=cache)
    entries = {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()}
    assert entries, "the build keeps its kernels' objects in kernel_cache_dir"
    # Built again from the cache (a str folder this time), the executable is
    # the same; a damaged entry is compiled again and written whole.
    damaged = next(iter(entries))
    damaged.write_bytes(entries[damaged][:16])
    again = tether.compile(MLP, format="rx", kernel_cache_dir=str(cache))
    assert again.to_bytes() == first.to_bytes()
    assert {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()} == entries
    # Without the option nothing is cached, and the kernels are the same.
    assert tether.compile(MLP, format="rx").to_bytes() == first.to_bytes()
