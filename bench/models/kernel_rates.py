#!/usr/bin/env python3
"""No kernel off the fast path (issue 26): each kernel's rate against this machine's.

usage: kernel_rates.py TETHER MODEL_DIR [--threads N] [--models a,b] [--runs R] [--all]

Measures the machine's peaks with `tether bench` at N threads: a 1024^3
float32 matmul (GFLOP/s) and a 16M-element add (GB/s, three streams of 64 MiB).
Then, for each model (MODEL_DIR/NAME.onnx with its input NAME.x.npy), runs
`tether profile --format csv` R times (default 3; each kernel's fastest run
counts, a profile being one call) and lists each kernel: its share of the
model's time and its rate against the machine's, as a roofline: every kernel
moves the bytes of its tensor arguments (each read or written once) and is
held to the GB/s peak for them; a kernel with a convolution or matmul also
does 2 x output elements x its reduction (input channels per group x kernel
taps, or K) and may reach the GFLOP/s peak instead; "of peak" is the better
of the two. Prints the kernels over 1% of a model's time (--all: every
kernel) and exits 1 when a kernel with at least 5% of a model's time runs
below 25% of its peak.
"""
import csv
import io
import os
import re
import subprocess
import sys

PEAK_MATMUL = """from tvm.script import ir as I
from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((1024, 1024), "float32"), b: R.Tensor((1024, 1024), "float32")):
        with R.dataflow():
            gv = R.matmul(a, b)
            R.output(gv)
        return gv
"""
PEAK_ADD = """from tvm.script import ir as I
from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((16777216,), "float32"), b: R.Tensor((16777216,), "float32")):
        with R.dataflow():
            gv = R.add(a, b)
            R.output(gv)
        return gv
"""
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int8": 1,
         "uint8": 1, "bool": 1, "float64": 8}


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def median_ms(tether, rx, shapes, threads):
    out = run([tether, "bench", rx, "--random-inputs", "--threads", str(threads), "--repeat", "5"]
              + [a for s in shapes for a in ("--shape", s)])
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if "median (ms)" in line:
            return float(lines[i + 1].split()[1])
    sys.exit(f"no timing in:\n{out}")


def tensors(arg_shapes):
    """[(dtype, [dims])] of a profile row's argument shapes."""
    return [(m.group(1), [int(d) for d in m.group(2).split(",") if d.strip()])
            for m in re.finditer(r"(\w+)\[([^\]]*)\]", arg_shapes)]


def product(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def work(name, arg_shapes):
    """(flops, bytes) of one call: flops 0 but for convolutions and matmuls."""
    ts = tensors(arg_shapes)
    moved = sum(product(dims) * BYTES.get(dtype, 4) for dtype, dims in ts)
    if len(ts) >= 3 and "conv2d" in name:
        w, y = ts[1][1], ts[-1][1]
        # OIHW, or the packed [blocks, Cg, KH, KW, BO]: Cg x KH x KW taps either way.
        return 2 * product(y) * product(w[1:4]), moved
    if len(ts) >= 3 and "matmul" in name:
        a, y = ts[0][1], ts[-1][1]
        return 2 * product(y) * a[-1], moved
    return 0, moved


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    tether, model_dir = args[0], args[1]
    threads, runs, models, show_all = 1, 3, None, "--all" in args
    if "--threads" in args:
        threads = int(args[args.index("--threads") + 1])
    if "--runs" in args:
        runs = max(1, int(args[args.index("--runs") + 1]))
    if "--models" in args:
        models = args[args.index("--models") + 1].split(",")
    if models is None:
        models = sorted(f[:-5] for f in os.listdir(model_dir) if f.endswith(".onnx"))
    tmp = os.path.join(model_dir, ".kernel_rates")
    os.makedirs(tmp, exist_ok=True)
    rx = {}
    for name, text in (("matmul", PEAK_MATMUL), ("add", PEAK_ADD)):
        rx[name] = os.path.join(tmp, f"peak_{name}.rx")
        with open(rx[name], "w") as f:
            f.write(text)
    ms = median_ms(tether, rx["matmul"], ["a=1024x1024", "b=1024x1024"], threads)
    peak = {"GFLOP": 2 * 1024 ** 3 / ms / 1e6}
    ms = median_ms(tether, rx["add"], ["a=16777216", "b=16777216"], threads)
    peak["GB"] = 3 * 16777216 * 4 / ms / 1e6
    print(f"peaks at {threads} thread(s): matmul 1024^3 {peak['GFLOP']:.1f} GFLOP/s, "
          f"add of 16M floats {peak['GB']:.1f} GB/s")
    slow = []
    for model in models:
        onnx = os.path.join(model_dir, model + ".onnx")
        x = os.path.join(model_dir, model + ".x.npy")
        kernels = {}
        for r in range(runs):
            out = run([tether, "profile", onnx, "--input", f"x=@{x}", "--threads", str(threads),
                       "--format", "csv"])
            this_run = {}
            for row in csv.DictReader(io.StringIO(out[out.index("Argument Shapes"):])):
                if row["Name"].startswith("vm."):
                    continue
                k = this_run.setdefault(row["Name"], {"us": 0.0, "flops": 0, "bytes": 0})
                flops, moved = work(row["Name"], row["Argument Shapes"])
                k["us"] += float(row["Duration (us)"])
                k["flops"] += flops
                k["bytes"] += moved
            for name, k in this_run.items():
                if name not in kernels or k["us"] < kernels[name]["us"]:
                    kernels[name] = k
        total = sum(k["us"] for k in kernels.values())
        print(f"\n{model}: {total / 1000:.2f} ms in {len(kernels)} kernels")
        print(f"  {'kernel':58} {'time':>6} {'GFLOP/s':>8} {'GB/s':>6} {'of peak':>8}")
        for name, k in sorted(kernels.items(), key=lambda kv: -kv[1]["us"]):
            share = k["us"] / total
            seconds = max(k["us"], 1e-3) * 1e-6
            gflops, gbs = k["flops"] / seconds / 1e9, k["bytes"] / seconds / 1e9
            of_peak = max(gflops / peak["GFLOP"], gbs / peak["GB"])
            flag = share >= 0.05 and of_peak < 0.25
            if flag:
                slow.append((model, name))
            if share >= 0.01 or show_all or flag:
                print(f"  {name[:58]:58} {100 * share:5.1f}% "
                      f"{(f'{gflops:8.1f}' if k['flops'] else ' ' * 8)} {gbs:6.1f} "
                      f"{100 * of_peak:7.0f}%{'  SLOW' if flag else ''}")
    if slow:
        print(f"\n{len(slow)} kernel(s) with >= 5% of a model's time below 25% of peak:")
        for model, name in slow:
            print(f"  {model}: {name}")
        return 1
    print("\nno kernel with >= 5% of a model's time runs below 25% of its peak")
    return 0


if __name__ == "__main__":
    sys.exit(main())
