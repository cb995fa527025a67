"""Weights on the device from Python: a VirtualMachine created with params=
(a dict, a param file's bytes or its path) has main's weight parameters
filled on the daemon, so main takes the data input only; a param dict that
does not fit the model is refused with both named, and the session serves on."""
import numpy as np
import pytest

import tether
from conftest import MLP_RX as MLP
from tether import relax


@pytest.fixture(scope="module")
def mlp_exe():
    if not tether.has_compiler:
        pytest.skip("built without the compiler")
    return tether.compile(MLP, format="rx")


def test_params_fill_the_weights_on_the_daemon(session, mlp_exe, tmp_path):
    rng = np.random.default_rng(9)
    w = rng.standard_normal((8, 4)).astype("float32")
    b = rng.standard_normal(4).astype("float32")
    x = rng.standard_normal((3, 8)).astype("float32")
    want = np.maximum(x @ w + b, 0)
    path = tmp_path / "mlp.params"
    tether.save_param_dict_to_file({"w": w, "b": b}, path)
    for params in ({"w": w, "b": b}, path.read_bytes(), path, str(path)):
        vm = relax.VirtualMachine(mlp_exe, session.cpu(), params=params)
        np.testing.assert_allclose(np.asarray(vm["main"](x)), want, rtol=1e-5, atol=1e-5)


def test_params_that_do_not_fit_are_refused_and_the_session_serves(session, mlp_exe):
    w = np.zeros((8, 5), "float32")  # the model takes (8, 4)
    with pytest.raises(ValueError, match="w"):
        relax.VirtualMachine(mlp_exe, session.cpu(), params={"w": w})
    with pytest.raises(TypeError, match="params must be"):
        relax.VirtualMachine(mlp_exe, session.cpu(), params=42)
    vm = relax.VirtualMachine(mlp_exe, session.cpu())
    x = np.ones((1, 8), "float32")
    out = vm["main"](x, np.ones((8, 4), "float32"), np.zeros(4, "float32"))
    np.testing.assert_allclose(np.asarray(out), np.full((1, 4), 8.0))
