"""TVM's tvm.runtime.load_static_library, with tvm -> tether: a model compiled
with system_lib=PREFIX, its kernels exported as a static library
(exe.export_library("m.a")), read back without linking it: its prefix,
machine and kernels are the executable's; func_names are checked; a daemon
without the archive linked in refuses the executable, saying what to link;
damaged archives are clear errors."""
import platform

import pytest

import tether
from conftest import MLP_RX as MLP


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    if not tether.has_compiler:
        pytest.skip("built without the compiler")
    exe = tether.compile(MLP, format="rx", system_lib="pystatic")
    path = tmp_path_factory.mktemp("static") / "mlp.a"
    exe.export_library(path)
    return exe, path


def test_it_reads_the_prefix_machine_and_kernels_of_the_executable(archive):
    exe, path = archive
    assert path.read_bytes()[:8] == b"!<arch>\n"
    lib = tether.load_static_library(path)
    assert isinstance(lib, tether.StaticLibrary)
    assert lib.prefix == "pystatic"
    assert lib.machine == platform.machine()
    assert lib.format == "a"
    assert lib.kernels, "no kernels"
    text = exe.as_text()
    for kernel in lib.kernels:
        assert "call  %s " % kernel in text, kernel
        assert lib.implements_function(kernel)
    assert lib.functions == lib.kernels
    assert not lib.implements_function("main")
    assert "prefix=pystatic" in repr(lib)


def test_func_names_must_be_kernels_of_the_library(archive):
    _, path = archive
    kernels = tether.load_static_library(str(path)).kernels
    one = tether.load_static_library(path, [kernels[0]])
    assert one.functions == [kernels[0]]
    assert one.kernels == kernels
    assert one.implements_function(kernels[0])
    with pytest.raises(tether.NotFound) as missing:
        tether.load_static_library(path, func_names=[kernels[0], "conv2d"])
    assert "has no kernel conv2d" in str(missing.value)
    assert kernels[0] in str(missing.value)


def test_an_archive_for_another_machine_names_it(tmp_path):
    if not tether.has_compiler:
        pytest.skip("built without the compiler")
    here = platform.machine()
    other, target = (("aarch64", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72")
                     if here == "x86_64" else ("x86_64", "llvm -mtriple=x86_64-linux-gnu"))
    exe = tether.compile(MLP, target, format="rx", system_lib="board")
    exe.export_library(tmp_path / "board.a")
    lib = tether.load_static_library(tmp_path / "board.a")
    assert (lib.machine, lib.prefix) == (other, "board")


def test_a_daemon_without_the_archive_refuses_the_executable(session, archive):
    exe, _ = archive
    with pytest.raises(tether.TetherError) as refused:
        session.load_module(exe)
    assert 'system library ("pystatic") that is not linked into this process' in str(refused.value)


def test_damaged_archives_and_other_files_are_clear_errors(archive, tmp_path):
    exe, path = archive
    cut = tmp_path / "cut.a"
    cut.write_bytes(path.read_bytes()[:100])
    with pytest.raises(tether.TetherValueError) as truncated:
        tether.load_static_library(cut)
    assert "static library: truncated ar archive" in str(truncated.value)
    exe.save(tmp_path / "mlp.tx")
    with pytest.raises(tether.TetherValueError) as not_archive:
        tether.load_static_library(tmp_path / "mlp.tx")
    assert "not an ar archive" in str(not_archive.value)
    with pytest.raises(tether.TetherValueError) as no_static:
        tether.compile(MLP, format="rx").export_library(tmp_path / "plain.a")
    assert "only an executable compiled with system_lib=PREFIX" in str(no_static.value)
