#!/bin/sh
# nonfinite.sh — a step whose loss or gradients are not finite (here: one sample of
# unnormalised data, 1e38, overflows the first layer) stops the run with a message
# naming the step, the stage and the layer, and no model is written; with
# --skip-nonfinite the step is skipped and training goes on; the same with clipping.
. "$top_srcdir/tests/lib.sh"
"$PYTHON_ORACLE" -c 'import h5py' 2>/dev/null || skip_all "$PYTHON_ORACLE has no h5py"
make_case m mlp
# sample 20 = step 2 (batch 8) gets a huge feature
"$PYTHON_ORACLE" - "$tmp/m-data.h5" "$tmp/bad-data.h5" <<'PY'
import h5py, numpy as np, sys
with h5py.File(sys.argv[1]) as f, h5py.File(sys.argv[2], "w") as g:
    x = np.array(f["features"]); x[20, :] = 1e38
    g["features"] = x; g["labels"] = np.array(f["labels"])
PY
# with --clip-grad-norm the check reads the clip norm's sums and shares its all-reduce
# (pipe/update.c, agree_nonfinite_and_norm): the same stop and the same message
for clip in "" "--clip-grad-norm 1"; do
  for S in 1 2; do
    mpirun_n $S "$tmp/m.h5" --data "$tmp/bad-data.h5" --steps 5 --batch-size 8 --micro-batches 2 --threads 1 --plan uniform \
      $clip --save "$tmp/out$S.h5" >"$tmp/log$S$clip" 2>&1
    rc=$?
    [ $rc = 4 ] && grep -q "step 3, stage [0-9] (rank [0-9]): .*not finite\|step 3, stage [0-9] (rank [0-9]): the loss is" "$tmp/log$S$clip"
    ok $? "$S rank(s)${clip:+, $clip}: stops at step 3 with exit 4 (got $rc) naming stage and layer: $(grep -o 'step 3.*' "$tmp/log$S$clip" | head -1)"
    [ ! -e "$tmp/out$S.h5" ]
    ok $? "$S rank(s)${clip:+, $clip}: no model written after the broken step"
  done
done
for S in 1 2; do
  [ "$(grep -o 'step 3.*' "$tmp/log$S" | head -1)" = "$(grep -o 'step 3.*' "$tmp/log$S--clip-grad-norm 1" | head -1)" ]
  ok $? "$S rank(s): the same message with clipping as without"
done
mpirun_n 2 "$tmp/m.h5" --data "$tmp/bad-data.h5" --steps 5 --batch-size 8 --micro-batches 2 --threads 1 --plan uniform \
  --skip-nonfinite --clip-grad-norm 1 --report "$tmp/skip.json" --save "$tmp/skip.h5" >"$tmp/logskip" 2>&1
ok $? "--skip-nonfinite: the run completes"
grep -q "step skipped" "$tmp/logskip"
ok $? "--skip-nonfinite: the skipped step is reported"
"$PYTHON_ORACLE" -c '
import h5py, numpy as np, sys
with h5py.File(sys.argv[1]) as f:
    ok = all(np.isfinite(np.array(f["layers"][k][n])).all() for k in f["layers"] for n in f["layers"][k])
sys.exit(0 if ok else 1)' "$tmp/skip.h5"
ok $? "--skip-nonfinite: the weights stay finite"
finish
