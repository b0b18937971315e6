#!/bin/sh
# recompute.sh — activation recomputation changes memory, never the mathematics, and the
# memory each rank uses is what the model predicts before the run:
#  1. every option (none, full, selective) gives bitwise the weights and losses of no
#     recompute, for each family and schedule on 2 ranks, and for 1, 3, 4 ranks (gpt);
#  2. each rank's measured peak is within 10% of the prediction plus 256 bytes per
#     allocation (the allocator's rounding; it is the same bytes:
#     the prediction counts what the runtime will allocate, from the layers' sizes), and
#     above the cost model of docs/cost-model.md by exactly the runtime's buffers (messages in
#     flight, recompute scratch, layer work space), which the cost model leaves out;
#  3. full recompute holds less than none on every stage, selective in between;
#  4. under a memory limit that keeping everything exceeds on stage 0, the run fails
#     with a message naming rank, stage and buffer, and trains when stage 0 recomputes.
. "$top_srcdir/tests/lib.sh"
check_memory() {  # check_memory REPORT what
  "$PYTHON_ORACLE" - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = []
for m in r["memory"]:
    peak, pred, cm, buf = m["peak_bytes"], m["predicted_bytes"], m["cost_model_bytes"], m["predicted_buffer_bytes"]
    # the stated constant: each allocation is rounded up to 256 bytes (as device
    # allocators do), which the prediction from the layers' sizes does not include;
    # it matters only for toy models whose buffers are a few hundred bytes
    rounding = 256 * m["allocations"]
    if abs(peak - pred) > 0.10 * pred + rounding or not (0 <= peak - cm - buf <= rounding):
        bad.append(f"rank {m['rank']}: peak {peak} predicted {pred} cost model {cm} buffers {buf}")
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
}
stash_of() { "$PYTHON_ORACLE" -c 'import json,sys; print(sum(m["stash_bytes"] for m in json.load(open(sys.argv[1]))["memory"]))' "$1"; }

for fam in gpt mlp cnn; do
  make_case $fam $fam
  for sched in 1f1b gpipe; do
    for rc in none full selective; do
      mpirun_n 2 "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 2 --batch-size 8 --micro-batches 4 \
        --schedule $sched --recompute $rc --threads 1 --plan uniform --report "$tmp/$fam-$sched-$rc.json" \
        --save "$tmp/$fam-$sched-$rc.h5" >"$tmp/log" 2>&1
      ok $? "$fam $sched recompute $rc: trains on 2 ranks"
      msg=$(check_memory "$tmp/$fam-$sched-$rc.json")
      ok $? "$fam $sched recompute $rc: measured peak = prediction within 10%, cost model + buffers $msg"
      [ $rc = none ] && continue
      h5diff "$tmp/$fam-$sched-$rc.h5" "$tmp/$fam-$sched-none.h5" >/dev/null 2>&1 &&
        [ "$(losses "$tmp/$fam-$sched-$rc.json")" = "$(losses "$tmp/$fam-$sched-none.json")" ]
      ok $? "$fam $sched recompute $rc: bitwise the losses and weights of no recompute"
    done
    s_none=$(stash_of "$tmp/$fam-$sched-none.json"); s_full=$(stash_of "$tmp/$fam-$sched-full.json")
    s_sel=$(stash_of "$tmp/$fam-$sched-selective.json")
    [ "$s_full" -lt "$s_none" ] && [ "$s_sel" -le "$s_none" ] && [ "$s_full" -le "$s_sel" ]
    ok $? "$fam $sched: stash full $s_full <= selective $s_sel <= none $s_none, full < none"
  done
done
for S in 1 3 4; do
  for rc in none full selective; do
    mpirun_n $S "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 2 --batch-size 8 --micro-batches 4 \
      --recompute $rc --threads 1 --plan uniform --report "$tmp/g$S-$rc.json" --save "$tmp/g$S-$rc.h5" >"$tmp/log" 2>&1
    msg=$(check_memory "$tmp/g$S-$rc.json")
    ok $? "gpt 1f1b on $S ranks, recompute $rc: memory as predicted $msg"
    h5diff "$tmp/g$S-$rc.h5" "$tmp/gpt-1f1b-none.h5" >/dev/null 2>&1
    ok $? "gpt 1f1b on $S ranks, recompute $rc: bitwise the weights of 2 ranks without recompute"
  done
done

# 4. a limit between stage 0's needs with and without recompute (1F1B, 2 ranks: stage 0
#    holds 2 micro-batches). Bigger micro-batches make activations dominate.
"$PPDL_INIT" --preset gpt-tiny --set n_layers=4 --set seq_len=32 -o "$tmp/big.h5" >/dev/null
"$PPDL_DATA" text "$(text_file)" --seq-len 32 -o "$tmp/big-data.h5" >/dev/null
for rc in none full; do
  mpirun_n 2 "$tmp/big.h5" --data "$tmp/big-data.h5" --steps 1 --batch-size 32 --micro-batches 2 \
    --recompute $rc --threads 1 --plan uniform --report "$tmp/big-$rc.json" >/dev/null 2>&1
done
# rank 0: halfway between its needs with and without recompute; rank 1: plenty
limit=$("$PYTHON_ORACLE" -c '
import json,sys
a=json.load(open(sys.argv[1]))["memory"][0]["peak_bytes"]; b=json.load(open(sys.argv[2]))["memory"][0]["peak_bytes"]
print("%d,1G" % ((a+b)//2))' "$tmp/big-none.json" "$tmp/big-full.json")
diag "without recompute the ranks stash $(stash_of "$tmp/big-none.json") bytes; --mem-limit $limit"
mpirun_n 2 "$tmp/big.h5" --data "$tmp/big-data.h5" --steps 2 --batch-size 32 --micro-batches 2 \
  --mem-limit "$limit" --threads 1 --plan uniform >"$tmp/fail.log" 2>&1
rc=$?
[ $rc = 3 ] && grep -q "rank 0, stage 0 (layers 0-2): the stage needs .* over the memory limit .* (--mem-limit); --recompute full would need .* and fit; or --mem-limit [0-9]*K or more" "$tmp/fail.log" &&
  ! grep -q "^step " "$tmp/fail.log"
ok $? "without recompute the run is refused before its first step (exit $rc), saying what fits: $(grep -o 'rank 0, stage 0.*' "$tmp/fail.log" | head -1)"
# the advice holds: that limit with full recompute, and the limit it names without
mpirun_n 2 "$tmp/big.h5" --data "$tmp/big-data.h5" --steps 1 --batch-size 32 --micro-batches 2 \
  --mem-limit "$limit" --recompute full --threads 1 --plan uniform >"$tmp/adv1.log" 2>&1 &&
  k=$(grep -o -- "--mem-limit [0-9]*K or more" "$tmp/fail.log" | grep -o "[0-9]*K") &&
  mpirun_n 2 "$tmp/big.h5" --data "$tmp/big-data.h5" --steps 1 --batch-size 32 --micro-batches 2 \
    --mem-limit "$k,1G" --threads 1 --plan uniform >"$tmp/adv2.log" 2>&1
ok $? "the advice fits: --recompute full at that limit runs, and so does --mem-limit $k without recompute"
cat >"$tmp/plan.json" <<'JSON'
{"stages": [{"rank": 0, "first_layer": 0, "last_layer": 2, "recompute": [1, 1, 1]},
            {"rank": 1, "first_layer": 3, "last_layer": 5, "recompute": [0, 0, 0]}]}
JSON
mpirun_n 2 "$tmp/big.h5" --data "$tmp/big-data.h5" --steps 2 --batch-size 32 --micro-batches 2 \
  --mem-limit "$limit" --plan "$tmp/plan.json" --threads 1 --report "$tmp/ok.json" >"$tmp/ok.log" 2>&1
ok $? "with recompute on stage 0 only it trains under the same limit"
finish
