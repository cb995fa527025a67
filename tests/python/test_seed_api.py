"""The seed's VM examples (seed-relax-vm-api.txt) ported with only the
imports changed (tvm -> tether), against a real tetherd: the module is
TVMScript in this file, relax.build compiles it, relax.VirtualMachine runs it
on the session its device came from, or on default_session() (TETHER_REMOTE).
Then the runtime helpers: param dicts, DataType, num_threads, DLPack."""
import numpy as np
import pytest

import tether as tvm
from tether import relax
from tether.script import ir as I, relax as R


@I.ir_module
class TestTimeEvaluator:
    @R.function
    def main(x: R.Tensor((1,), "float32"), y: R.Tensor((1,), "float32")):
        with R.dataflow():
            gv = R.add(x, y)
            R.output(gv)
        return gv


@pytest.fixture
def remote_default(daemon, monkeypatch):
    """default_session() is a connection to the test's tetherd, through
    TETHER_REMOTE as a user would set it."""
    monkeypatch.setenv("TETHER_REMOTE", daemon)
    tvm.set_default_session(None)
    yield tvm.default_session()
    tvm.default_session().close()
    tvm.set_default_session(None)


def test_ir_module_is_the_class_source():
    assert isinstance(TestTimeEvaluator, tvm.script.IRModule)
    text = TestTimeEvaluator.script()
    assert text.startswith("@I.ir_module\nclass TestTimeEvaluator:")
    assert "R.add(x, y)" in text


def test_seed_time_evaluator_examples(remote_default):
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    arg0, arg1 = np.array([1.5], "float32"), np.array([2.25], "float32")
    # Normal use with a VM function.
    target = tvm.target.Target("llvm", host="llvm")
    ex = relax.build(TestTimeEvaluator, target)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    assert vm.session.session_id == remote_default.session_id  # ran on TETHER_REMOTE
    timing_res = vm.time_evaluator("main", tvm.cpu())(arg0, arg1)
    assert isinstance(timing_res, tvm.BenchmarkResult) and len(timing_res.results) == 1
    # Use with the stateful API.
    vm.set_input("main", arg0, arg1)
    timing_res = vm.time_evaluator("invoke_stateful", tvm.cpu())("main")
    assert timing_res.mean > 0
    # With saved closures via save_function.
    vm.save_function("main", "func_name_saved", arg0, arg1)
    timing_res = vm.time_evaluator("func_name_saved", tvm.cpu())()
    assert timing_res.mean > 0
    np.testing.assert_array_equal(vm["func_name_saved"](), arg0 + arg1)
    # A keyword argument goes to its parameter's place.
    vm.save_function("main", "kw_saved", arg0, y=arg1 * 2)
    np.testing.assert_array_equal(vm["kw_saved"](), arg0 + 2 * arg1)
    with pytest.raises(TypeError):
        vm.save_function("main", "bad", arg0, z=arg1)
    with pytest.raises(TypeError):
        vm.save_function("main", "bad", arg0, x=arg1)
    # include_return=False: nothing comes back (timing over RPC).
    vm.save_function("main", "no_return", arg0, arg1, include_return=False)
    assert vm["no_return"]() is None
    # The seed's stateful rule: a function with set inputs is called through invoke_stateful.
    with pytest.raises(ValueError):
        vm["main"](arg0, arg1)
    vm.invoke_stateful("main")
    np.testing.assert_array_equal(vm.get_outputs("main"), arg0 + arg1)


def test_time_evaluator_takes_every_knob(session):
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    vm = relax.VirtualMachine(relax.build(TestTimeEvaluator), session.cpu())
    assert vm.session.session_id == session.session_id  # the device's session
    x = np.ones(1, np.float32)
    r = vm.time_evaluator("main", tvm.cpu(), number=2, repeat=3, min_repeat_ms=5,
                          cooldown_interval_ms=1, repeats_to_cooldown=2,
                          cache_flush_bytes=1 << 16,
                          f_preproc="cache_flush_cpu_non_first_arg")(x, x)
    assert len(r.results) == 3
    assert min(r.results) * r.number_per_repeat >= 0.005 * 0.9  # min_repeat_ms grew `number`
    assert r.number_per_repeat > 2 and r.total_calls > 1 + 3 * 2  # grown past number=2
    with pytest.raises(tvm.NotFound):
        vm.time_evaluator("main", tvm.cpu(), f_preproc="no_such_function")(x, x)
    with pytest.raises(ValueError):
        vm.time_evaluator("main", tvm.cpu(), repeat=-1)(x, x)


def test_trace_instrument_and_profile_round_trip(session):
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    vm = relax.VirtualMachine(relax.build(TestTimeEvaluator), session.cpu())
    x = np.ones(1, np.float32)
    vm.set_instrument("trace")
    np.testing.assert_array_equal(vm["main"](x, x), 2 * x)
    with pytest.raises(tvm.NotFound):
        vm.set_instrument("no_such_factory")
    report = vm.profile("main", x, x)
    assert tvm.Report.from_json(report.json()) == report


def test_param_dict_round_trip_and_errors(tmp_path):
    params = {"w": np.arange(12, dtype=np.float32).reshape(3, 4),
              "b": np.array([1, -2], np.int64), "s": np.float16(2.5)}
    data = tvm.save_param_dict(params)
    # TVM's layout: the list magic first, little-endian.
    assert data[:8] == (0xF7E58D4F05049CB7).to_bytes(8, "little")
    back = tvm.load_param_dict(data)
    assert list(back) == ["w", "b", "s"]
    for k in params:
        np.testing.assert_array_equal(back[k], params[k])
    path = tmp_path / "params.bin"
    tvm.save_param_dict_to_file(params, path)
    assert path.read_bytes() == data
    assert list(tvm.load_param_dict_from_file(path)) == ["w", "b", "s"]
    with pytest.raises(ValueError):
        tvm.load_param_dict(data[:-3])  # truncated
    with pytest.raises(TypeError):
        tvm.save_param_dict({1: np.zeros(2)})
    with pytest.raises(tvm.NotFound):
        tvm.load_param_dict_from_file(tmp_path / "missing.bin")


def test_data_type_and_threads():
    t = tvm.DataType("float16")
    assert (t.type_code, t.bits, t.lanes, t.itemsize) == (2, 16, 1, 2)
    assert t == "float16" and t == tvm.DataType("float16") and t != "float32"
    assert str(tvm.DataType("int8x4")) == "int8x4"
    with pytest.raises(ValueError):
        tvm.DataType("float7q")
    assert tvm.num_threads() >= 1


# Every dtype NumPy exports through DLPack (NumPy 1.24 refuses bool there;
# bool arrays travel as arrays, test_tether.py).
DLPACK_DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64",
                 "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("dtype", DLPACK_DTYPES)
def test_dlpack_round_trip_for_every_dtype(session, dtype):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((4, 5)) * 40).astype(dtype)
    view = tvm.from_dlpack(a)  # no copy: the same memory
    assert np.shares_memory(view, a)
    t = session.array(view)
    assert t.__dlpack_device__() == (1, 0)
    back = np.from_dlpack(t)  # a remote tensor exports a local copy
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(np.asarray(t), a)


def test_bfloat16_travels_as_raw_uint16_bits(session):
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    # 1.5 and -2.0 in bfloat16: the top 16 bits of their float32 patterns.
    bits = (np.array([1.5, -2.0], np.float32).view(np.uint32) >> 16).astype(np.uint16)
    exe = tvm.compile(b"""
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2,), "float32")):
        with R.dataflow():
            y = R.astype(x, dtype=R.dtype("bfloat16"))
            R.output(y)
        return y
""")
    vm = tvm.VirtualMachine(exe, session.cpu())
    out = vm["main"](np.array([1.5, -2.0], np.float32))
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(out, bits)


def test_a_256_mib_tensor_round_trip(session):
    a = np.arange(64 << 20, dtype=np.float32)  # 256 MiB
    t = session.array(a)
    assert t.shape == a.shape
    back = t.numpy()
    assert back[-1] == a[-1] and np.array_equal(back, a)


@I.ir_module
class Accumulate:
    @R.function
    def main(chunk: R.Tensor((4,), "float32"), state: R.Tensor((4,), "float32"),
             scale: R.Tensor((4,), "float32")):
        with R.dataflow():
            s = R.add(state, chunk)
            y = R.multiply(s, scale)
            R.output(y, s)
        return (y, s)


def test_a_stream_keeps_its_state_on_the_daemon(small_daemon):
    # The daemon holds 16 objects a session: 200 chunks fit only if each
    # step frees the state it replaces.
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    rng = np.random.default_rng(5)
    chunks = rng.standard_normal((200, 4)).astype(np.float32)
    scale = np.full(4, 0.5, np.float32)
    with tvm.connect(small_daemon) as s:
        vm = relax.VirtualMachine(relax.build(Accumulate), s.cpu())
        state = np.zeros(4, np.float32)
        with vm.stream("main", carry={1: "state"}, state=state, scale=scale) as st:
            for c in chunks:
                y, carried = st.step(chunk=c)
                assert carried is None  # the state stays on the daemon
                state = state + c
                np.testing.assert_allclose(y, state * scale, rtol=1e-5, atol=1e-5)
            assert st.steps == 200
            np.testing.assert_allclose(st.state("state"), chunks.sum(0), rtol=1e-4, atol=1e-4)
            with pytest.raises(TypeError):
                st.step(nope=chunks[0])
            with pytest.raises(ValueError):
                st.step(chunk=np.ones(5, np.float32))  # wrong shape: the state is kept
            np.testing.assert_allclose(st.state(1), chunks.sum(0), rtol=1e-4, atol=1e-4)
        with pytest.raises(ValueError):
            st.step(chunk=chunks[0])  # closed
        with pytest.raises(tvm.TetherIndexError):
            vm.stream("main", carry={5: "state"}, state=state, scale=scale).step(chunk=chunks[0])


def test_copyfrom_updates_a_bound_input_in_place(session):
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    vm = relax.VirtualMachine(relax.build(TestTimeEvaluator), session.cpu())
    x = session.array(np.array([1.0], np.float32))
    y = session.array(np.array([2.0], np.float32))
    vm.save_function("main", "bound", x, y)
    np.testing.assert_array_equal(vm["bound"](), [3.0])
    assert x.copyfrom(np.array([10.0], np.float32)) is x  # in place: the saved call sees it
    np.testing.assert_array_equal(vm["bound"](), [12.0])
    y.copyfrom(x)  # remote to remote
    np.testing.assert_array_equal(y.numpy(), [10.0])
    with pytest.raises(ValueError):
        x.copyfrom(np.zeros(2, np.float32))  # wrong shape
    with pytest.raises(ValueError):
        x.copyfrom(np.zeros(1, np.int32))  # wrong dtype
    with pytest.raises(ValueError):
        x.copyfrom(session.array(np.zeros(3, np.float32)))  # checked by the daemon too
    np.testing.assert_array_equal(x.numpy(), [10.0])


@I.ir_module
class MatmulSoftmax:
    @R.function
    def main(x: R.Tensor((8, 8), "float32")):
        with R.dataflow():
            y = R.matmul(x, x)
            z = R.nn.softmax(y)
            R.output(z)
        return z


@I.ir_module
class TwoDenseRelu:
    @R.function
    def main(data: R.Tensor((1, 64), "float32"), w1: R.Tensor((64, 64), "float32"),
             w2: R.Tensor((64, 64), "float32")):
        with R.dataflow():
            a = R.nn.relu(R.matmul(data, w1))
            b = R.nn.relu(R.matmul(a, w2))
            R.output(b)
        return b


def two_dense_relu_args():
    data_np = np.random.randn(1, 64).astype("float32")
    return [data_np] + [np.random.randn(64, 64).astype("float32") for _ in range(2)]


def test_seed_instrument_function_counts_and_skip_run():
    # tests/python/relax/test_vm_instrument.py's test_conv2d_cpu, with the
    # weights passed as arguments: a Python instrument runs where the daemon
    # is this process, a tether.local() session. Our compiler fuses each
    # matmul with its relu (TVM's test sees them apart), so the fused kernel
    # is skipped, and the builtin that allocates its output is the call seen
    # before and after.
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    with tvm.local() as local:
        vm = relax.VirtualMachine(relax.build(TwoDenseRelu), local.cpu())
        hit_count = {}

        def instrument(func, name, before_run, ret_val, *args):
            if (name, before_run) not in hit_count:
                hit_count[(name, before_run)] = 0
            hit_count[(name, before_run)] += 1
            assert callable(func)
            if before_run:
                assert ret_val is None
            if name == "fused_matmul_relu":
                return relax.VMInstrumentReturnKind.SKIP_RUN

        vm.set_instrument(instrument)
        vm["main"](*two_dense_relu_args())
        assert hit_count[("fused_matmul_relu", True)] == 2
        assert ("fused_matmul_relu", False) not in hit_count
        assert hit_count[("vm.builtin.alloc_tensor", True)] == 1
        assert hit_count[("vm.builtin.alloc_tensor", False)] == 1
        assert hit_count[("vm.builtin.alloc_tensor_for_shape", False)] == 1


def test_instrument_sees_numpy_arguments_and_can_call_the_kernel():
    # What TVM's LibCompareVMInstrument does: run each kernel again on the
    # arguments the VM gave it, and compare with the result it produced.
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    with tvm.local() as local:
        vm = relax.VirtualMachine(relax.build(TwoDenseRelu), local.cpu())
        data_np, w1, w2 = two_dense_relu_args()
        seen = []

        def compare(func, name, before_run, ret_val, *args):
            if before_run or name.startswith("vm.builtin."):
                return None
            assert all(isinstance(a, np.ndarray) for a in args), args
            # Destination-passing kernels: the last argument is the output.
            again = [a.copy() for a in args]
            func(*again)
            np.testing.assert_array_equal(again[-1], args[-1])
            seen.append((name, args[-1].shape))
            return None

        vm.set_instrument(compare)
        out = vm["main"](data_np, w1, w2)
        want = np.maximum(np.maximum(data_np @ w1, 0) @ w2, 0)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
        assert seen == [("fused_matmul_relu", (1, 64))] * 2, seen


def test_instrument_errors_reach_the_caller_and_the_vm_goes_on(session):
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    exe = relax.build(MatmulSoftmax)
    x = np.ones((8, 8), np.float32)
    with tvm.local() as local:
        vm = relax.VirtualMachine(exe, local.cpu())

        def bad(func, name, before_run, ret_val, *args):
            if name == "softmax":
                raise ValueError("softmax is not wanted here")

        vm.set_instrument(bad)
        with pytest.raises(ValueError, match="softmax is not wanted here"):
            vm["main"](x)

        def calls_the_daemon(func, name, before_run, ret_val, *args):
            local.array(np.ones(2, np.float32))  # would wait for the call that waits for it

        vm.set_instrument(calls_the_daemon)
        with pytest.raises(RuntimeError, match="cannot call the daemon"):
            vm["main"](x)
        vm.set_instrument("")
        np.testing.assert_allclose(vm["main"](x), np.full((8, 8), 1 / 8, np.float32), rtol=1e-6)
        with pytest.raises(TypeError):
            vm.set_instrument(42)
        with pytest.raises(TypeError):
            vm.set_instrument(bad, "an argument")
    # A remote daemon cannot call back into this process: a clear refusal.
    remote_vm = relax.VirtualMachine(exe, session.cpu())
    with pytest.raises(TypeError, match="tether.local"):
        remote_vm.set_instrument(bad)
    assert remote_vm["main"](x).shape == (8, 8)


def trace_names(vm):
    import json
    return [row["Name"]["string"] for row in json.loads(vm.get_trace(clear=True).json())["calls"]]


def test_skip_instrument_is_the_seeds_skip_run(session):
    # The seed's instrument returns SKIP_RUN for matmul calls; ours is named
    # "skip" and runs on the daemon: the matmul does not run, the rest is traced.
    if not tvm.has_compiler:
        pytest.skip("built without the compiler")
    vm = relax.VirtualMachine(relax.build(MatmulSoftmax), session.cpu())
    x = np.ones((8, 8), np.float32)
    vm.set_instrument("trace")
    vm["main"](x)
    names = trace_names(vm)
    assert "matmul" in names and "softmax" in names
    vm.set_instrument("skip", "matmul")
    out = vm["main"](x)
    assert out.shape == (8, 8)
    names = trace_names(vm)
    assert "matmul" not in names and "softmax" in names
    vm.set_instrument("")
    np.testing.assert_allclose(vm["main"](x), np.full((8, 8), 1 / 8, np.float32), rtol=1e-6)
    with pytest.raises(ValueError):
        vm.set_instrument("skip")
