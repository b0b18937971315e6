#!/bin/sh
# bf16_torch.sh — ppdl's fp32 -> bf16 rounding (backend/bf16.h) against torch's, bit for
# bit: `test_bf16.t --dump` writes a million fp32 patterns (the hand-derived edge cases,
# every exponent with mantissas at and around the tie points, then random bits: NaNs,
# infinities and subnormals among them) with ppdl's bf16 of each; torch converts the
# same fp32 values (torch.tensor(x).bfloat16()) and every bf16 must be the same bits,
# except that a NaN need only be a NaN: torch 1.13's own two conversions disagree on its
# bits (the scalar c10::BFloat16 gives 0x7fc0, as ppdl; the vectorised CPU path that
# .bfloat16() takes on a tensor gives 0xffff).
# A negative control: a dump whose bits are changed in one place must fail the check.
. "$top_srcdir/tests/lib.sh"
"$PYTHON_ORACLE" -c 'import torch, numpy' 2>/dev/null || skip_all "$PYTHON_ORACLE has no torch"
"$top_builddir/tests/unit/test_bf16.t" --dump "$tmp/pairs.bin"
ok $? "test_bf16.t --dump writes the pairs"

compare() {
  "$PYTHON_ORACLE" - "$1" <<'PY'
import sys, numpy as np, torch
rec = np.dtype([("f", "<u4"), ("h", "<u2")])
d = np.fromfile(sys.argv[1], dtype=rec)
x = torch.from_numpy(d["f"].view(np.float32).copy())
want = x.bfloat16().view(torch.int16).numpy().view(np.uint16)
def is_nan(h): return (h & 0x7fff) > 0x7f80
bad = np.nonzero((want != d["h"]) & ~(is_nan(want) & is_nan(d["h"])))[0]
print("# %d of them NaN in both" % int(np.sum(is_nan(want) & is_nan(d["h"]))))
print("# %d patterns, %d differ from torch" % (len(d), len(bad)))
for i in bad[:5]:
    print("#   0x%08x: ppdl 0x%04x, torch 0x%04x" % (d["f"][i], d["h"][i], want[i]))
sys.exit(1 if len(bad) or len(d) < 1000000 else 0)
PY
}
compare "$tmp/pairs.bin"
ok $? "every bf16 equals torch's conversion of the same fp32 (a NaN: any NaN)"

# negative control: flip the lowest bit of one ppdl result (record 1000: 6 bytes each)
"$PYTHON_ORACLE" -c '
import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[6 * 1000 + 4] ^= 1
open(sys.argv[2], "wb").write(b)' "$tmp/pairs.bin" "$tmp/bad.bin"
! compare "$tmp/bad.bin" >/dev/null
ok $? "negative control: one changed bit is caught"
finish
