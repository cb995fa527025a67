"""connect() over TLS with a token, an isolated session, and ONNX models
compiled from Python (a path and bytes, a free batch dim bound by shapes=)."""
import subprocess

import numpy as np
import pytest

import tether
from conftest import start_tetherd


@pytest.fixture
def tls_daemon(daemon_dir, tmp_path):
    """A tetherd serving TLS with a token: (address, CA file, token)."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
         str(tmp_path / "srv.key"), "-out", str(tmp_path / "srv.pem"), "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True)
    token = "tok-python-secret"
    (tmp_path / "token").write_text(token + "\n")
    (tmp_path / "token").chmod(0o600)
    for address in start_tetherd(tmp_path, "--tls-cert", str(tmp_path / "srv.pem"),
                                 "--tls-key", str(tmp_path / "srv.key"),
                                 "--auth-token-file", str(tmp_path / "token")):
        yield address, str(tmp_path / "srv.pem"), token


def test_tls_with_a_token(tls_daemon):
    address, ca, token = tls_daemon
    with tether.connect(address, tls_ca=ca, token=token) as s:
        assert "cpu:0" in s.info()["devices"]
        np.testing.assert_array_equal(s.array(np.arange(3)).numpy(), np.arange(3))
    with pytest.raises(tether.Unauthenticated):
        tether.connect(address, tls_ca=ca, token="not-the-token")
    with pytest.raises((tether.Unavailable, tether.DeadlineExceeded)):
        tether.connect(address, token=token, timeout=3)  # plaintext to a TLS port
    with pytest.raises(ValueError):
        tether.connect(address, tls_ca="/no/such/ca.pem", token=token)


def test_an_isolated_session_runs_in_its_own_worker(daemon, add_exe):
    with tether.connect(daemon, isolate=True) as s:
        assert s.info()["isolated"] is True
        vm = tether.VirtualMachine(add_exe, s.cpu())
        x = np.ones((2, 3), np.float32)
        np.testing.assert_array_equal(vm["main"](x, x), 2 * x)


def make_onnx(path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return w, b


def test_onnx_models_compile_from_python(session, tmp_path):
    if not tether.has_compiler:
        pytest.skip("built without the compiler")
    path = tmp_path / "mlp.onnx"
    w, b = make_onnx(path)
    x = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
    want = np.maximum(x @ w + b, 0)
    for exe in [tether.compile(path), tether.compile(str(path), shapes={"x": [3, 8]}),
                tether.compile(path.read_bytes(), format="onnx")]:
        vm = tether.VirtualMachine(exe, session.cpu())
        np.testing.assert_allclose(vm["main"](x), want, rtol=1e-5, atol=1e-5)
    # One executable for any batch: N stays symbolic.
    vm = tether.VirtualMachine(tether.compile(path), session.cpu())
    x7 = np.ones((7, 8), np.float32)
    np.testing.assert_allclose(vm["main"](x7), np.maximum(x7 @ w + b, 0), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        tether.compile(b"not an onnx model", format="onnx")


def test_onnx_sequence_and_optional_inputs_from_python(session, tmp_path):
    """An ONNX model whose inputs are a sequence and an optional: a list goes
    in as the sequence (any length), None as an empty optional; a sequence
    output comes back as a list."""
    if not tether.has_compiler:
        pytest.skip("built without the compiler")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, ["n"])
    opt = helper.make_value_info(
        "o", helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    graph = helper.make_graph(
        [helper.make_node("SequenceInsert", ["s", "x"], ["s2"]),
         helper.make_node("SequenceLength", ["s"], ["n"]),
         helper.make_node("OptionalHasElement", ["o"], ["has"])],
        "seq", [seq, helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]), opt],
        [helper.make_tensor_sequence_value_info("s2", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("has", TensorProto.BOOL, [])])
    path = tmp_path / "seq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), str(path))
    vm = tether.VirtualMachine(tether.compile(path), session.cpu())
    a, b, x = (np.full(3, v, np.float32) for v in (1, 2, 3))
    s2, n, has = vm["main"]([a, b], x, None)
    assert len(s2) == 3
    np.testing.assert_array_equal(s2[2], x)
    assert int(n) == 2 and not bool(has)
    s2, n, has = vm["main"]([], x, np.zeros(2, np.float32))
    assert len(s2) == 1 and int(n) == 0 and bool(has)
