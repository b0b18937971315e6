"""h5compare.py — do two trained model files agree, measured against how far training
moved the weights?

    python3 tests/h5compare.py DUT.h5 REF.h5 INIT.h5 TOL

For every parameter under /layers: diff = max|dut - ref|, update = max|ref - init|.
The check is  max(diff) <= TOL * max(update)  (and the weights did move: update > 0),
so it is independent of the scale of the weights and fails for a backend that
computes another step. Prints one summary line (and the worst parameter); exit 0 when
the files agree, 1 when not, 2 on a usage or file error.
"""
import sys

try:
    import h5py
    import numpy as np
except ImportError as e:  # the caller checks for these first
    print("h5compare: %s" % e)
    sys.exit(2)


def params(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = np.asarray(obj[()], dtype=np.float64)
        f["layers"].visititems(visit)
    return out


def main():
    if len(sys.argv) != 5:
        print("usage: h5compare.py DUT.h5 REF.h5 INIT.h5 TOL")
        return 2
    dut, ref, init = (params(p) for p in sys.argv[1:4])
    tol = float(sys.argv[4])
    if set(dut) != set(ref) or set(ref) != set(init):
        print("h5compare: the files hold different parameters")
        return 1
    diff = update = 0.0
    worst = ("", 0.0)
    for name in sorted(ref):
        if dut[name].shape != ref[name].shape:
            print("h5compare: %s has shape %s, expected %s" % (name, dut[name].shape, ref[name].shape))
            return 1
        d = float(np.max(np.abs(dut[name] - ref[name]))) if ref[name].size else 0.0
        u = float(np.max(np.abs(ref[name] - init[name]))) if ref[name].size else 0.0
        if not np.isfinite(d):
            d = float("inf")
        if d > worst[1] or not worst[0]:
            worst = (name, d)
        diff, update = max(diff, d), max(update, u)
    ratio = diff / update if update > 0 else float("inf")
    print("max |dut - ref| %.3g, max |ref - init| %.3g, ratio %.3g (tolerance %.0e); worst %s" %
          (diff, update, ratio, tol, worst[0]))
    return 0 if update > 0 and ratio <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
