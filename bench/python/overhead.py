#!/usr/bin/env python3
"""What the Python package costs over the C++ client, measured in one run
against one real tetherd on 127.0.0.1 (issue 23's goals: a call <= 1.2x,
a 64 MiB upload >= 0.9x of the bandwidth).

  PYTHONPATH=build/python python3 bench/python/overhead.py [--tetherd build/server/tetherd]

- call: vm["main"](x) of a tiny model (x + x over 4 floats) from Python,
  against RemoteVM::Invoke of the same VM from C++ (the native module's
  _time_cpp_invoke: the same session, the argument converted once, as a C++
  program holds it). Rounds alternate the two; the table gives the median
  round of each, per call.
- upload: session.array(a) of a 64 MiB float32 NumPy array (then freed),
  against RemoteSession::UploadTensor of a tensor the C++ side already holds.
"""
import argparse
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import tether
from tether.script import from_source

TINY = from_source("""
@I.ir_module
class Tiny:
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        with R.dataflow():
            y = R.add(x, x)
            R.output(y)
        return y
""")


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def start_tetherd(binary, directory):
    port_file = directory / "port"
    env = dict(os.environ, TETHER_TOKEN_FILE=str(directory / "token"))
    os.environ["TETHER_TOKEN_FILE"] = env["TETHER_TOKEN_FILE"]
    proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--port-file", str(port_file),
                             "--store-dir", str(directory / "store")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit("tetherd did not start")
        time.sleep(0.02)
    return proc, "127.0.0.1:" + port_file.read_text().strip()


def rounds(fn_a, fn_b, count):
    a, b = [], []
    for _ in range(count):
        a.append(fn_a())
        b.append(fn_b())
    return statistics.median(a), statistics.median(b)


def main():
    here = pathlib.Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tetherd", default=str(here / "build" / "server" / "tetherd"))
    parser.add_argument("--calls", type=int, default=5000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--upload-mib", type=int, default=64)
    parser.add_argument("--uploads", type=int, default=5, help="uploads per round")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tether-pybench-") as tmp:
        proc, address = start_tetherd(args.tetherd, pathlib.Path(tmp))
        try:
            with tether.connect(address) as s:
                vm = tether.VirtualMachine(TINY, s.cpu())
                x = np.ones(4, np.float32)
                n = args.calls

                def py_calls():
                    t0 = time.perf_counter()
                    for _ in range(n):
                        vm["main"](x)
                    return (time.perf_counter() - t0) / n

                main_fn = vm["main"]

                def py_calls_bound():
                    t0 = time.perf_counter()
                    for _ in range(n):
                        main_fn(x)
                    return (time.perf_counter() - t0) / n

                def cpp_calls():
                    return vm._time_cpp_invoke("main", (x,), n) / n

                py_calls(), cpp_calls()  # warm
                py, cpp = rounds(py_calls, cpp_calls, args.rounds)
                bound, cpp2 = rounds(py_calls_bound, cpp_calls, args.rounds)

                a = np.ones(args.upload_mib << 18, np.float32)  # MiB of float32
                m = args.uploads

                def py_upload():
                    t0 = time.perf_counter()
                    for _ in range(m):
                        t = s.array(a)
                        del t
                    return (time.perf_counter() - t0) / m

                def cpp_upload():
                    return s._time_cpp_upload(a, m) / m

                py_upload(), cpp_upload()
                up_py, up_cpp = rounds(py_upload, cpp_upload, args.rounds)
                transport = "loopback TCP (%s)" % address
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)

    mib = args.upload_mib
    print("Python package vs C++ client, one tetherd on %s" % transport)
    print("CPU: %s (%d cores); Python %s, NumPy %s" % (
        cpu_name(), os.cpu_count(), sys.version.split()[0], np.__version__))
    print()
    print("| measurement                      | Python      | C++ (RemoteVM)  | ratio Py/C++ | goal   |")
    print("|----------------------------------|-------------|-----------------|--------------|--------|")
    print("| call vm[\"main\"](x), tiny model    | %7.1f us  | %7.1f us      | %6.2fx       | <=1.2x |"
          % (py * 1e6, cpp * 1e6, py / cpp))
    print("| call f(x), f = vm[\"main\"] kept    | %7.1f us  | %7.1f us      | %6.2fx       | <=1.2x |"
          % (bound * 1e6, cpp2 * 1e6, bound / cpp2))
    print("| upload %3d MiB from NumPy         | %6.0f MB/s | %6.0f MB/s     | %6.2fx       | >=0.9x |"
          % (mib, (mib << 20) / up_py / 1e6, (mib << 20) / up_cpp / 1e6, up_cpp / up_py))
    print()
    print("median of %d alternating rounds; %d calls and %d uploads a round"
          % (args.rounds, args.calls, args.uploads))


if __name__ == "__main__":
    main()
