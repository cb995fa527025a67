"""What goes wrong, from Python: a dead daemon, a missing token, Ctrl-C in
the middle of a long call, and 10,000 calls that must not grow the client
or the daemon."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tether
from tether.script import ir as I, relax as R


@I.ir_module
class Tiny:
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        with R.dataflow():
            y = R.add(x, x)
            R.output(y)
        return y


def rss_kib(pid="self"):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def needs_compiler():
    if not tether.has_compiler:
        pytest.skip("built without the compiler")


def test_a_dead_daemon_is_unavailable(own_daemon):
    needs_compiler()
    address, proc = own_daemon
    s = tether.connect(address)
    vm = tether.VirtualMachine(Tiny.build(), s.cpu())
    x = np.ones(4, np.float32)
    np.testing.assert_array_equal(vm["main"](x), 2 * x)
    proc.kill()
    proc.wait(timeout=30)
    with pytest.raises(tether.Unavailable) as e:
        vm["main"](x)
    assert isinstance(e.value, ConnectionError) and e.value.code == "UNAVAILABLE"
    assert "tetherd at %s cannot be reached" % address in str(e.value)
    with pytest.raises(tether.Unavailable):
        tether.connect(address, timeout=2)


def test_a_missing_token_is_unauthenticated(daemon, tmp_path, monkeypatch):
    monkeypatch.setenv("TETHER_TOKEN_FILE", str(tmp_path / "no-such-token"))
    with pytest.raises(tether.Unauthenticated) as e:
        tether.connect(daemon)
    assert "token" in str(e.value) and e.value.code == "UNAUTHENTICATED"


CTRL_C_SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    import tether
    from tether.script import from_source

    mod = from_source('''
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((128, 128), "float32")):
            with R.dataflow():
                y = R.matmul(x, x)
                R.output(y)
            return y
    ''')
    s = tether.connect(sys.argv[1])
    vm = tether.VirtualMachine(mod, s.cpu())
    x = np.ones((128, 128), np.float32)
    print("calling", flush=True)
    t0 = time.monotonic()
    try:
        vm.time_evaluator("main", tether.cpu(), number=100, repeat=100000)(x)
        print("the call finished", flush=True)
    except KeyboardInterrupt:
        print("KeyboardInterrupt after %.1f s closed=%s" % (time.monotonic() - t0, s.closed),
              flush=True)
""")


def test_ctrl_c_stops_the_call_in_flight(daemon, tmp_path):
    needs_compiler()
    script = tmp_path / "long_call.py"
    script.write_text(CTRL_C_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), daemon], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    try:
        assert proc.stdout.readline().strip() == "calling"
        time.sleep(1.0)  # well inside the call (100 x 100000 matmuls take minutes)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        waited = time.monotonic() - sent
    finally:
        proc.kill()
    assert "KeyboardInterrupt after" in out and "closed=True" in out, out
    assert proc.returncode == 0, out
    assert waited < 10, "the call went on for %.1f s after SIGINT" % waited
    # The daemon serves on.
    with tether.connect(daemon) as s:
        vm = tether.VirtualMachine(Tiny.build(), s.cpu())
        np.testing.assert_array_equal(vm["main"](np.ones(4, np.float32)), 2 * np.ones(4))


def test_ten_thousand_calls_leave_both_sides_flat(own_daemon):
    needs_compiler()
    address, proc = own_daemon
    with tether.connect(address) as s:
        vm = tether.VirtualMachine(Tiny.build(), s.cpu())
        remote = tether.VirtualMachine(Tiny.build(), s.cpu(), fetch_outputs=False)
        x = np.ones(4, np.float32)

        def calls(n):
            for _ in range(n):
                vm["main"](x)
                remote["main"](x)  # a RemoteTensor made and freed each time

        calls(1000)  # warm: pools, caches, the allocator's arenas
        client0, daemon0 = rss_kib(), rss_kib(proc.pid)
        calls(10000)
        client1, daemon1 = rss_kib(), rss_kib(proc.pid)
    # A leak of 100 bytes a call would be 2 MB here.
    assert client1 - client0 < 2048, (client0, client1)
    assert daemon1 - daemon0 < 2048, (daemon0, daemon1)
