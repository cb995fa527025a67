"""Fixtures of the Python package's tests: a real tetherd from the build on
127.0.0.1 (port 0, read back from --port-file), stopped after the tests, and
sessions on it. CTest passes the daemon's path in TETHERD and puts the built
package on PYTHONPATH (tests/python/CMakeLists.txt)."""
import os
import pathlib
import signal
import subprocess
import time

import pytest

import tether

ADD_RX = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            z = R.add(x, y)
            R.output(z)
        return z

    @R.function
    def pair(x: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            z = R.add(x, x)
            R.output(z)
        return (z, (x, z))
"""

# A dense layer with relu and a symbolic batch, weights as parameters.
MLP_RX = b"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 8), "float32"), w: R.Tensor((8, 4), "float32"),
             b: R.Tensor((4,), "float32")):
        with R.dataflow():
            y = R.nn.relu(R.add(R.matmul(x, w), b))
            R.output(y)
        return y
"""


@pytest.fixture(scope="session")
def daemon_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tetherd")
    # This user's default token (the daemon requires it on loopback, the
    # client sends it), kept out of $HOME.
    os.environ["TETHER_TOKEN_FILE"] = str(d / "user" / "token")
    return d


def start_tetherd(directory, *flags, with_process=False):
    """A tetherd from the build on 127.0.0.1:0 with `flags`, serving from
    `directory`; yields its address (and its Popen with with_process), then
    stops it and checks it drained (unless the test killed it)."""
    tetherd = os.environ.get("TETHERD")
    if not tetherd:
        pytest.skip("TETHERD (the tetherd binary) is not set; run through CTest")
    port_file = directory / "port"
    log = open(directory / "tetherd.log", "w")
    proc = subprocess.Popen(
        [tetherd, "--listen", "127.0.0.1:0", "--port-file", str(port_file),
         "--store-dir", str(directory / "store"), *flags],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("tetherd did not start: " + (directory / "tetherd.log").read_text())
        time.sleep(0.02)
    address = "127.0.0.1:" + port_file.read_text().strip()
    yield (address, proc) if with_process else address
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, (directory / "tetherd.log").read_text()
    log.close()


@pytest.fixture(scope="session")
def daemon(daemon_dir):
    yield from start_tetherd(daemon_dir)


@pytest.fixture
def small_daemon(daemon_dir, tmp_path):
    """A tetherd whose sessions may hold 16 objects at a time."""
    yield from start_tetherd(tmp_path, "--max-session-objects", "16")


@pytest.fixture
def own_daemon(daemon_dir, tmp_path):
    """A tetherd of the test's own: (address, subprocess.Popen)."""
    yield from start_tetherd(tmp_path, with_process=True)


@pytest.fixture
def session(daemon):
    with tether.connect(daemon) as s:
        yield s


@pytest.fixture(scope="session")
def add_exe(tmp_path_factory):
    if not tether.has_compiler:
        pytest.skip("tether built without the compiler")
    return tether.compile(ADD_RX.encode())


@pytest.fixture(scope="session")
def examples_dir():
    return pathlib.Path(__file__).resolve().parents[2] / "examples"
