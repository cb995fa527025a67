#!/usr/bin/env python3
"""Compares two .npy files as the CLI tests do: the same shape, and a largest
absolute difference within TOLERANCE x max(1, the largest |value| of WANT).
Prints the error; exits 1 (naming both files) when they differ.

usage: compare_npy.py GOT WANT [TOLERANCE (default 1e-3)] [LABEL]
"""
import sys

import numpy as np


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    got_path, want_path = argv[1], argv[2]
    tolerance = float(argv[3]) if len(argv) > 3 else 1e-3
    label = argv[4] if len(argv) > 4 else got_path
    got, want = np.load(got_path), np.load(want_path)
    if got.shape != want.shape:
        print(f"{label}: shape {got.shape}, expected {want.shape} ({want_path})")
        return 1
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
    limit = tolerance * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    print(f"{label}: max abs error {err:.2e} (limit {limit:.1e})")
    return 0 if err <= limit else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
