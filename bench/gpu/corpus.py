#!/usr/bin/env python3
"""The real-model corpus (bench/models/make_corpus.py) on cuda:0, on a GPU
machine: each model compiled for the GPU, run there and checked against
ONNX Runtime's output on the CPU, then timed with CUDA events beside ONNX
Runtime's fastest provider on the same machine (CUDA where its build has
it, else the CPU with every core).

usage: corpus.py TETHER CORPUS_DIR [NAME...]
  TETHER is the CLI (a bundle's bin/tether); CORPUS_DIR holds NAME.onnx and
  NAME.x.npy (make_corpus.py writes them). Needs numpy, onnxruntime.
  $CORPUS_PROFILES, if set, is a folder for each model's `tether profile`
  (CSV); $CORPUS_DEVICE=cpu:0 runs the same steps on the CPU.
Prints one line per step and a table last; exits 1 if any model fails to
compile or run on cuda:0, or differs from ONNX Runtime by more than 1e-3 of
the output's largest magnitude (check_corpus.sh's tolerance).
"""
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort


def ort_session(path, providers):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, opts, providers=providers)


def time_ort(sess, feeds):
    """Median ms of a call over 5 samples of 20 calls, after warm-up; with
    the CUDA provider the outputs come back to the host, as a user's do."""
    for _ in range(10):
        sess.run(None, feeds)
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(20):
            sess.run(None, feeds)
        samples.append((time.perf_counter() - start) / 20 * 1e3)
    return statistics.median(samples)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    tether, corpus = sys.argv[1], sys.argv[2]
    # CORPUS_DEVICE=cpu:0 runs the same steps on the CPU (a dry run here).
    device = os.environ.get("CORPUS_DEVICE", "cuda:0")
    target = "cuda -arch=sm_90" if device.startswith("cuda") else "llvm"
    names = sys.argv[3:] or sorted(
        os.path.basename(f)[:-len(".x.npy")] for f in glob.glob(f"{corpus}/*.x.npy"))
    providers = ort.get_available_providers()
    cuda = "CUDAExecutionProvider" in providers
    anchor = "ORT CUDA" if cuda else f"ORT CPU x{os.cpu_count()}"
    print(f"corpus: onnxruntime {ort.__version__}, providers {providers}", flush=True)
    work = tempfile.mkdtemp()
    env = dict(os.environ, TETHER_CACHE_DIR=f"{work}/cache")
    rows, status = [], 0
    for name in names:
        model, x_file = f"{corpus}/{name}.onnx", f"{corpus}/{name}.x.npy"
        x = np.load(x_file)
        ref = ort_session(model, ["CPUExecutionProvider"]).run(None, {"x": x})[0]
        exe = f"{work}/{name}.tx"
        start = time.perf_counter()
        c = subprocess.run([tether, "compile", model, "-o", exe, "--target", target,
                            "--time-passes"], capture_output=True, text=True, env=env)
        compile_s = time.perf_counter() - start
        if c.returncode != 0:
            print(f"{name}: FAIL compile for cuda\n{c.stdout}{c.stderr}", flush=True)
            rows.append((name, "compile failed", None, None, None, compile_s))
            status = 1
            continue
        out_dir = f"{work}/{name}.out"
        r = subprocess.run([tether, "run", exe, "--device", device, "--input", f"x=@{x_file}",
                            "--output-dir", out_dir], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            print(f"{name}: FAIL run on {device}\n{r.stdout}{r.stderr}", flush=True)
            rows.append((name, "run failed", None, None, None, compile_s))
            status = 1
            continue
        got = np.load(sorted(glob.glob(f"{out_dir}/*.npy"))[0])
        scale = max(float(np.abs(ref).max()), 1e-6)
        err = float(np.abs(got.astype(np.float64) - ref).max()) if got.shape == ref.shape else np.inf
        ok = err <= 1e-3 * scale and bool(np.isfinite(got).all())
        status |= 0 if ok else 1
        verdict = f"{'ok' if ok else 'FAIL'} max|diff| {err:.3g} (max|out| {scale:.3g})"
        print(f"{name}: {device} vs ORT CPU: {verdict}", flush=True)
        b = subprocess.run([tether, "bench", exe, "--device", device, "--input", f"x=@{x_file}",
                            "--number", "20", "--repeat", "5", "--json"],
                           capture_output=True, text=True, env=env)
        tether_ms = json.loads(b.stdout)["median"] * 1e3 if b.returncode == 0 else None
        if tether_ms is None:
            print(f"{name}: FAIL bench on {device}\n{b.stdout}{b.stderr}", flush=True)
            status = 1
        profile_dir = os.environ.get("CORPUS_PROFILES")
        if profile_dir:  # per-kernel device times, for the next tuning step
            with open(f"{profile_dir}/{name}.profile.csv", "w") as f:
                subprocess.run([tether, "profile", exe, "--device", device, "--input",
                                f"x=@{x_file}", "--format", "csv"], stdout=f,
                               stderr=subprocess.STDOUT, env=env)
        try:
            anchor_providers = ["CUDAExecutionProvider"] if cuda else ["CPUExecutionProvider"]
            anchor_ms = time_ort(ort_session(model, anchor_providers), {"x": x})
        except Exception as e:  # the anchor failing is reported, not fatal
            print(f"{name}: {anchor} failed: {e}", flush=True)
            anchor_ms = None
        rows.append((name, verdict.split(" ")[0] + f" {err / scale:.1e}", anchor_ms, tether_ms,
                     tether_ms / anchor_ms if tether_ms and anchor_ms else None, compile_s))
    print(f"\n{'model':<12} {device + ' vs ORT (relative)':<26} {anchor + ' ms':>16} "
          f"{'Tether ' + device + ' ms':>17} {'ratio':>6} {'compile s':>10}")
    fmt = lambda v, f: format(v, f) if v is not None else "-"
    for name, verdict, a, t, ratio, cs in rows:
        print(f"{name:<12} {verdict:<26} {fmt(a, '16.3f')} {fmt(t, '17.3f')} "
              f"{fmt(ratio, '6.2f')} {cs:10.1f}")
    sys.exit(status)


if __name__ == "__main__":
    main()
