"""The tether Python package against a real tetherd (conftest.py) and the
embedded daemon of tether.local(): sessions, devices, tensors for every
dtype, the VM's calls, the stateful API, time_evaluator, profile, and
errors with the class their kind says."""
import numpy as np
import pytest

import tether

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool"]


def test_info_lists_devices_limits_and_target(session):
    info = session.info()
    assert "cpu:0" in info["devices"]
    assert info["devices"]["cpu:0"]["exist"] is True
    assert info["limits"]["max_inline_tensor_bytes"] > 0
    assert "float32" in info["dtypes"]
    assert info["target"]["cpu_compile_target"].startswith("llvm")
    cpu = session.cpu(0)
    assert cpu.exist and isinstance(cpu.device_name, str)
    assert session.device("cuda:7").exist is False


def test_devices_parse_and_compare():
    assert str(tether.device("cuda:1")) == "cuda:1"
    assert repr(tether.cuda(1)) == "cuda(1)"
    assert tether.device("cpu", 0) == tether.cpu(0)
    assert hash(tether.cpu(0)) == hash(tether.device("cpu:0"))
    assert tether.cpu(0).exist is True
    with pytest.raises(ValueError):
        tether.device("tpu:0")


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_round_trip(session, dtype):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((3, 4)) * 50).astype(dtype)
    t = session.array(a)
    assert t.shape == (3, 4) and t.dtype == dtype and str(t.device) == "cpu:0"
    back = t.numpy()
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)


def test_large_tensor_and_empty(session):
    a = np.arange(600_000, dtype=np.float32)  # over the inline limit: chunked
    np.testing.assert_array_equal(session.array(a).numpy(), a)
    e = session.empty((2, 5), "int32")
    assert e.shape == (2, 5) and e.dtype == "int32" and e.numpy().shape == (2, 5)
    scalar = session.array(np.float64(2.5))
    assert scalar.shape == () and scalar.numpy() == 2.5


def test_dlpack_arguments(session, add_exe):
    vm = tether.VirtualMachine(add_exe, tether.cpu(), session=session)

    class Foreign:  # a local tensor of another framework, seen through DLPack
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    x = np.full((2, 3), 1.5, np.float32)
    np.testing.assert_array_equal(vm["main"](Foreign(x), x), x * 2)


def test_invoke_and_nested_outputs(session, add_exe):
    vm = tether.VirtualMachine(add_exe, tether.cpu(0), session=session)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(vm["main"](x, x), x + x)
    np.testing.assert_array_equal(vm.invoke("main", x, np.ones_like(x)), x + 1)
    z, (x2, z2) = vm["pair"](x)
    np.testing.assert_array_equal(z, 2 * x)
    np.testing.assert_array_equal(x2, x)
    np.testing.assert_array_equal(z2, 2 * x)
    assert vm.get_function_param_names("main") == ["x", "y"]


def test_stateful_calls(session, add_exe):
    vm = tether.VirtualMachine(add_exe, tether.cpu(), session=session)
    x = np.full((2, 3), 2, np.float32)
    vm.set_input("main", x, y=np.ones_like(x))
    vm.invoke_stateful("main")
    np.testing.assert_array_equal(vm.get_outputs("main"), x + 1)
    vm.set_input("pair", session.array(x))  # a remote tensor as input
    vm.invoke_stateful("pair")
    out = vm.get_outputs("pair")
    assert isinstance(out, list) and isinstance(out[1], list)
    np.testing.assert_array_equal(out[1][0], x)


def test_remote_outputs_stay_on_the_daemon(session, add_exe):
    up = session.upload(add_exe)
    assert len(up.sha256) == 64
    vm = tether.VirtualMachine(up, [tether.cpu()], "naive", fetch_outputs=False)
    x = np.ones((2, 3), np.float32)
    out = vm["main"](x, x)
    assert isinstance(out, tether.RemoteTensor) and out.shape == (2, 3)
    again = vm["main"](out, out)  # passed back without a copy here
    np.testing.assert_array_equal(again.numpy(), 4 * x)


def test_time_evaluator(session, add_exe):
    vm = tether.VirtualMachine(add_exe, tether.cpu(), memory_cfg={tether.cpu(): "pooled"},
                               session=session)
    x = np.ones((2, 3), np.float32)
    vm.set_input("main", x, x)
    r = vm.time_evaluator("invoke_stateful", tether.cpu(), number=3, repeat=4)("main")
    assert isinstance(r, tether.BenchmarkResult)
    assert len(r.results) == 4 and all(v >= 0 for v in r.results)
    assert r.min <= r.median <= r.max and r.std >= 0
    assert "mean (ms)" in str(r)
    vm.save_function("main", "saved_main", x, x, include_return=False)
    assert len(vm.time_evaluator("saved_main", tether.cpu(), repeat=2)().results) == 2
    direct = vm.time_evaluator("pair", "cpu:0")(x)
    assert direct.mean >= 0


def test_profile_report(session, add_exe):
    vm = tether.VirtualMachine(add_exe, tether.cpu(), session=session)
    x = np.ones((2, 3), np.float32)
    report = vm.profile("main", x, x)
    assert "Name" in report.table() and "Total" in report.table()
    assert report.csv().count("\n") >= 2
    assert tether.Report.from_json(report.json()) == report


def test_errors_carry_their_kind(session, add_exe):
    vm = tether.VirtualMachine(add_exe, tether.cpu(), session=session)
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError) as e:  # the VM's kind for an unknown function
        vm["nope"]
    assert "nope" in str(e.value) and e.value.kind == "ValueError"
    with pytest.raises(ValueError):  # wrong number of arguments
        vm["main"](x)
    with pytest.raises(ValueError):  # wrong shape
        vm["main"](np.ones((4, 4), np.float32), x)
    with pytest.raises(ValueError) as e:  # get_outputs before invoke_stateful
        vm.get_outputs("main")
    assert isinstance(e.value, tether.TetherError)
    with pytest.raises(TypeError):
        vm["main"](object(), x)
    with pytest.raises(TypeError):
        session.array(np.ones(2, np.complex64))
    with pytest.raises(ValueError):
        tether.compile(b"@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    return y\n")


def test_connection_errors(daemon):
    with pytest.raises(tether.Unauthenticated):
        tether.connect(daemon, token="not-the-token")
    with pytest.raises((tether.Unavailable, tether.DeadlineExceeded)) as e:
        tether.connect("127.0.0.1:1", timeout=2)
    assert isinstance(e.value, tether.TetherError)


def test_closed_session_refuses_calls(daemon):
    s = tether.connect(daemon)
    t = s.array(np.ones(3, np.float32))
    s.close()
    with pytest.raises(tether.TetherError):
        t.numpy()


def test_local_session_and_executable_files(tmp_path, add_exe, examples_dir):
    path = tmp_path / "add.tx"
    add_exe.save(path)
    exe = tether.Executable.load(str(path))
    assert "@main" in exe.as_text()
    mlp = tether.compile(examples_dir / "mlp.rx")
    with tether.local() as s:
        assert s.is_local
        vm = tether.VirtualMachine(exe, tether.cpu(), session=s)
        x = np.ones((2, 3), np.float32)
        np.testing.assert_array_equal(vm["main"](x, x), 2 * x)
        rng = np.random.default_rng(0)
        args = [rng.standard_normal(shape).astype(np.float32)
                for shape in [(3, 784), (784, 128), (128,), (128, 10), (10,)]]
        want = np.maximum(args[0] @ args[1] + args[2], 0) @ args[3] + args[4]
        got = tether.VirtualMachine(mlp, tether.cpu(), session=s)["main"](*args)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_remote_tensors_are_freed_when_python_drops_them(small_daemon):
    # The daemon holds 16 objects a session: 200 tensors made and dropped
    # one after another fit only if each is freed when its Python object goes.
    with tether.connect(small_daemon) as s:
        x = np.arange(6, dtype=np.float32)
        for i in range(200):
            t = s.array(x + i)
            np.testing.assert_array_equal(t.numpy(), x + i)
            del t
        kept = [s.array(x) for _ in range(12)]  # still room: nothing leaked
        assert len(kept) == 12
        with pytest.raises(tether.TetherError):
            more = [s.array(x) for _ in range(8)]  # over the limit while all are held
            assert not more


def test_a_handle_returned_twice_is_one_object(session, add_exe):
    vm = tether.VirtualMachine(add_exe, tether.cpu(0), session=session, fetch_outputs=False)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    z, (x2, z2) = vm["pair"](x)
    del z
    # z2 names the same daemon object as z did: still there after z is gone.
    np.testing.assert_array_equal(z2.numpy(), 2 * x)
    np.testing.assert_array_equal(x2.numpy(), x)
