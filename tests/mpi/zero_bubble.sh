#!/bin/sh
# zero_bubble.sh — the zero-bubble schedules (zb-h1, zb-h2, zb-1p: each backward split
# into B and W, sched/zero_bubble.h) train exactly as 1F1B (the gpt's embeddings tied, as
# the presets make them, pipe/tie.h; --plan uniform throughout): every stage adds its weight
# gradients in micro-batch order, and B then W computes bitwise what the fused backward
# does (tests/gradient/test_grad_split.c), so the losses and weights are 1F1B's bit for
# bit, not within a tolerance:
#  1. gpt, mlp, cnn, 1-4 ranks, M = 4: all three give the 1F1B run's losses and
#     weights on the same ranks and on 1 rank; M = 2 < S on 3 and 4 ranks too;
#  2. recompute full and selective (gpt, 2 and 3 ranks): the same bits, and each
#     rank's measured peak is its prediction (the W buffers included) within 10% +
#     the allocator's rounding;
#  3. a zb-h1 run on 2 ranks checkpointed after 2 steps and resumed on 3 ranks with
#     zb-h2 gives the bits of 4 steps of 1F1B in one go; so does zb-1p from 3 ranks to 2;
#  4. messages staged through host memory (PPDL_STAGE_MESSAGES=1, as CUDA stages them);
#  5. negative control: a gradient doubled on one rank (PPDL_TEST_GRAD_SCALE, applied
#     at the step's last W) changes the weights, so the comparisons see a wrong W;
#  6. replicated stages: 2 stages x 2 replicas on 4 ranks (gpt, mlp) under zb-h1 and
#     zb-1p, and a --plan FILE with one replicated stage (gpt, M = 6) under all three,
#     give bitwise 1F1B's losses and weights on the same layout; the control doubles
#     one replica's gradients and must differ.
#  7. the passes ordered by their times (plan/pass_times.h): a run's header gives the
#     times; with --costs files of other times (the profile's, every W 3x, every F 3x)
#     zb-h1 on 3 ranks gives 1F1B's bits with each, and each header names the order that
#     ran (unit, with a note, where the timed orders were refused; which depends on the
#     profile, so the orders themselves are tested in tests/unit/test_schedule.c); a
#     user's mistake (--micro-batches below a stage's replicas) is still refused with
#     its message and status 2.
. "$top_srcdir/tests/lib.sh"
run() {  # run NAME S ARGS...: train, report and weights in $tmp/NAME.{json,h5}
  local name=$1 S=$2; shift 2
  mpirun_n "$S" "$@" --threads 1 --plan uniform --report "$tmp/$name.json" --save "$tmp/$name.h5" \
    >"$tmp/$name.log" 2>&1
}
same() {  # same A B: bitwise the losses and the weights
  [ -s "$tmp/$1.json" ] && [ "$(losses "$tmp/$1.json")" = "$(losses "$tmp/$2.json")" ] &&
    h5diff "$tmp/$1.h5" "$tmp/$2.h5" >/dev/null 2>&1
}
show_log() { sed 's/^/#   /' "$tmp/$1.log" | tail -5; }

# 1. every family, 1-4 ranks, against 1F1B on the same ranks and on 1 rank
for fam in gpt mlp cnn; do
  make_case $fam $fam || { ok 1 "$fam: model and data"; continue; }
  set -- "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 3 --batch-size 8
  for S in 1 2 3 4; do
    run $fam-1f1b-$S $S "$@" --micro-batches 4 --schedule 1f1b
    for sched in zb-h1 zb-h2 zb-1p; do
      run $fam-$sched-$S $S "$@" --micro-batches 4 --schedule $sched
      same $fam-$sched-$S $fam-1f1b-$S && same $fam-$sched-$S $fam-1f1b-1
      ok $? "$fam $sched on $S rank(s): bitwise the losses and weights of 1f1b on $S and on 1 rank"
      [ -s "$tmp/$fam-$sched-$S.json" ] || show_log $fam-$sched-$S
    done
  done
  run $fam-1f1b-m2 1 "$@" --micro-batches 2 --schedule 1f1b
  for S in 3 4; do
    for sched in zb-h1 zb-h2 zb-1p; do
      run $fam-$sched-m2-$S $S "$@" --micro-batches 2 --schedule $sched
      same $fam-$sched-m2-$S $fam-1f1b-m2
      ok $? "$fam $sched M=2 < S=$S: bitwise the losses and weights of 1f1b on 1 rank"
    done
  done
done

# 2. recompute: the same bits, and memory as predicted (W buffers included)
check_memory() {  # check_memory REPORT: peak = prediction within 10% + rounding; W buffers counted
  "$PYTHON_ORACLE" - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad, kept = [], 0
for m in r["memory"]:
    peak, pred = m["peak_bytes"], m["predicted_bytes"]
    rounding = 256 * m["allocations"]  # each allocation rounded up to 256 bytes (recompute.sh)
    kept += m["weight_keep_bytes"]
    if abs(peak - pred) > 0.10 * pred + rounding:
        bad.append(f"rank {m['rank']}: peak {peak} predicted {pred}")
    if abs(m["weight_keep_bytes"] - m["predicted_weight_keep_bytes"]) > rounding:
        bad.append(f"rank {m['rank']}: kept for W {m['weight_keep_bytes']} predicted {m['predicted_weight_keep_bytes']}")
if kept == 0:
    bad.append("no rank keeps anything for W")
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
}
set -- "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 3 --batch-size 8 --micro-batches 4
for S in 2 3; do
  for rc in full selective; do
    run rc-1f1b-$S-$rc $S "$@" --schedule 1f1b --recompute $rc
    for sched in zb-h1 zb-h2 zb-1p; do
      run rc-$sched-$S-$rc $S "$@" --schedule $sched --recompute $rc
      same rc-$sched-$S-$rc rc-1f1b-$S-$rc && same rc-$sched-$S-$rc gpt-1f1b-1
      ok $? "gpt $sched on $S ranks, recompute $rc: bitwise 1f1b's losses and weights"
      msg=$(check_memory "$tmp/rc-$sched-$S-$rc.json")
      ok $? "gpt $sched on $S ranks, recompute $rc: memory as predicted, W buffers counted $msg"
    done
  done
done

# 3. a resume across schedules and rank counts
mpirun_n 2 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 2 --batch-size 8 --micro-batches 4 --schedule zb-h1 \
  --threads 1 --plan uniform --checkpoint "$tmp/c.h5" >"$tmp/half.log" 2>&1
ok $? "gpt zb-h1: 2 steps on 2 ranks with --checkpoint"
run whole 1 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 4 --batch-size 8 --micro-batches 4 --schedule 1f1b
run resumed 3 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 4 --batch-size 8 --micro-batches 4 --schedule zb-h2 \
  --resume "$tmp/c.h5"
tail_losses() { losses "$1" | tail -2; }
[ -s "$tmp/resumed.json" ] && [ "$(tail_losses "$tmp/resumed.json")" = "$(tail_losses "$tmp/whole.json")" ] &&
  h5diff "$tmp/resumed.h5" "$tmp/whole.h5" >/dev/null 2>&1
ok $? "gpt: zb-h1 on 2 ranks, resumed on 3 ranks with zb-h2: bitwise 4 steps of 1f1b in one go"
[ -s "$tmp/resumed.json" ] || show_log resumed
mpirun_n 3 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 2 --batch-size 8 --micro-batches 4 --schedule zb-1p \
  --threads 1 --plan uniform --checkpoint "$tmp/c1p.h5" >"$tmp/half1p.log" 2>&1
ok $? "gpt zb-1p: 2 steps on 3 ranks with --checkpoint"
run resumed1p 2 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 4 --batch-size 8 --micro-batches 4 --schedule zb-1p \
  --resume "$tmp/c1p.h5"
[ -s "$tmp/resumed1p.json" ] && [ "$(tail_losses "$tmp/resumed1p.json")" = "$(tail_losses "$tmp/whole.json")" ] &&
  h5diff "$tmp/resumed1p.h5" "$tmp/whole.h5" >/dev/null 2>&1
ok $? "gpt: zb-1p on 3 ranks, resumed on 2 ranks: bitwise 4 steps of 1f1b in one go"
[ -s "$tmp/resumed1p.json" ] || show_log resumed1p

# 4. messages staged through host memory
PPDL_STAGE_MESSAGES=1 run staged 3 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 3 --batch-size 8 \
  --micro-batches 4 --schedule zb-h2
same staged gpt-1f1b-1
ok $? "gpt zb-h2 on 3 ranks, messages staged through host memory: bitwise 1f1b"

# 5. negative controls
PPDL_TEST_GRAD_SCALE=1:2 run scaled 2 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 3 --batch-size 8 \
  --micro-batches 4 --schedule zb-h1 --lr 0.05 --eps 1
run unscaled 2 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 3 --batch-size 8 --micro-batches 4 \
  --schedule zb-h1 --lr 0.05 --eps 1
[ -s "$tmp/scaled.json" ] && [ -s "$tmp/unscaled.json" ] && ! same scaled unscaled
ok $? "negative control: rank 1's gradients doubled at its last W change the result the comparisons see"

# 6. replicated stages: each replica runs its passes of the play with the replicas as
# devices (sched/zero_bubble.h), its own micro-batches' W's in micro-batch order, so
# its weight gradients are 1F1B's replica's, and the all-reduce sums the same partial
# sums: bitwise 1F1B's losses and weights on the same layout (docs/schedules.md; the
# layout itself is within float tolerance of 1 rank, tests/mpi/hybrid.sh)
run_plan() {  # run_plan NAME N PLAN ARGS...: as run, with a plan file
  local name=$1 n=$2 plan=$3; shift 3
  mpirun_n "$n" "$@" --threads 1 --plan "$plan" --report "$tmp/$name.json" --save "$tmp/$name.h5" \
    >"$tmp/$name.log" 2>&1
}
for fam in gpt mlp; do
  L=$("$PYTHON_ORACLE" -c 'import h5py,sys; print(len(h5py.File(sys.argv[1])["layers"]))' "$tmp/$fam.h5")
  cut=$((L / 2))
  cat >"$tmp/$fam-2x2.json" <<JSON
{"stages": [{"ranks": [0, 2], "first_layer": 0, "last_layer": $((cut - 1))},
            {"ranks": [3, 1], "first_layer": $cut, "last_layer": $((L - 1))}]}
JSON
  set -- "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 3 --batch-size 8 --micro-batches 4 --lr 0.05 --eps 1
  run_plan $fam-2x2-1f1b 4 "$tmp/$fam-2x2.json" "$@" --schedule 1f1b
  for sched in zb-h1 zb-1p; do
    run_plan $fam-2x2-$sched 4 "$tmp/$fam-2x2.json" "$@" --schedule $sched
    same $fam-2x2-$sched $fam-2x2-1f1b
    ok $? "$fam $sched, 2 stages x 2 replicas on 4 ranks: bitwise the losses and weights of 1f1b on that layout"
    [ -s "$tmp/$fam-2x2-$sched.json" ] || show_log $fam-2x2-$sched
  done
done
# a replicated stage in a --plan FILE (stage 0 alone, stage 1 on two ranks), M = 6
echo '{"stages": [{"rank": 0, "first_layer": 0, "last_layer": 2}, {"ranks": [1, 2], "first_layer": 3, "last_layer": 4}]}' \
  >"$tmp/rep.json"
set -- "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 3 --batch-size 12 --micro-batches 6 --lr 0.05 --eps 1
run_plan rep-1f1b 3 "$tmp/rep.json" "$@" --schedule 1f1b
for sched in zb-h1 zb-h2 zb-1p; do
  run_plan rep-$sched 3 "$tmp/rep.json" "$@" --schedule $sched
  same rep-$sched rep-1f1b
  ok $? "gpt $sched, --plan FILE with stage 1 on ranks {1,2}, M=6: bitwise 1f1b's losses and weights"
  [ -s "$tmp/rep-$sched.json" ] || show_log rep-$sched
done
# the negative control: replica 1 of stage 1 (rank 1) doubles its gradients at its last W
PPDL_TEST_GRAD_SCALE=1:2 run_plan gpt-2x2-doubled 4 "$tmp/gpt-2x2.json" "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" \
  --steps 3 --batch-size 8 --micro-batches 4 --lr 0.05 --eps 1 --schedule zb-1p
[ -s "$tmp/gpt-2x2-doubled.json" ] && ! same gpt-2x2-doubled gpt-2x2-1f1b
ok $? "negative control: zb-1p on 2 x 2 replicas with one replica's gradients doubled differs from 1f1b"

# 7. orders from the times: three --costs files of other times, the same bits
set -- "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 3 --batch-size 8 --micro-batches 4
grep -q "passes of zb-h1 ordered by their times (rank 0's costs)" "$tmp/gpt-zb-h1-3.log" ||
  { grep -q "note: the timed orders of zb-h1 were refused" "$tmp/gpt-zb-h1-3.log" &&
    grep -q "passes of zb-h1 ordered in unit time" "$tmp/gpt-zb-h1-3.log"; }
ok $? "a zb-h1 run on 3 ranks profiles and orders its passes by the times (or says why not, the header says which)"
mpirun_n 1 "$@" --steps 1 --threads 1 --plan uniform --costs-out "$tmp/costs.json" >/dev/null 2>&1
# each layer's F, B (half the backward) and W (the other half) scaled by the three factors
for spec in "p 1 1 1" "w 1 1 3" "f 3 1 1"; do
  set -- $spec
  heavy=$1
  /usr/bin/python3 - "$tmp/costs.json" "$tmp/costs-$heavy.json" "$2" "$3" "$4" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
f_x, b_x, w_x = map(float, sys.argv[3:6])
for l in c["layers"]:
    f, b = max(l["fwd_ms"], 0.01), max(l["bwd_ms"], 0.01)
    l["fwd_ms"], l["bwd_input_ms"], l["bwd_weight_ms"] = f_x * f, b_x * b / 2, w_x * b / 2
    l["bwd_ms"] = l["bwd_input_ms"] + l["bwd_weight_ms"]
json.dump(c, open(sys.argv[2], "w"))
PY
  mpirun_n 3 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 3 --batch-size 8 --micro-batches 4 --threads 1 \
    --plan uniform --schedule zb-h1 --costs "$tmp/costs-$heavy.json" --report "$tmp/timed-$heavy.json" \
    --save "$tmp/timed-$heavy.h5" --trace "$tmp/timed-$heavy.trace.json" >"$tmp/timed-$heavy.log" 2>&1
  same timed-$heavy gpt-1f1b-3
  ok $? "zb-h1 on 3 ranks ordered by a --costs file with F, B, W x $2, $3, $4: bitwise 1f1b's losses and weights"
  [ -s "$tmp/timed-$heavy.json" ] || show_log timed-$heavy
done
order() {  # the compute passes of rank 1 in the trace, in time order
  /usr/bin/python3 -c 'import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["pid"] == 1 and e["name"][0] in "FBW"]
print(" ".join(e["name"] for e in sorted(ev, key=lambda e: e["ts"])))' "$1"
}
# which order ran depends on the profile (the timed orders are used only where they hold
# no more than the unit play's); either way the header must name it, a refusal with its
# note (the orders themselves: tests/unit/test_schedule.c 53-55)
for heavy in p w f; do
  if grep -q "note: the timed orders of zb-h1 were refused" "$tmp/timed-$heavy.log"; then
    grep -q "passes of zb-h1 ordered in unit time" "$tmp/timed-$heavy.log"; ran="unit (refused)"
  else
    grep -q "passes of zb-h1 ordered by their times" "$tmp/timed-$heavy.log"; ran="timed"
  fi
  ok $? "costs $heavy: the header names the order that ran ($ran; rank 1: $(order "$tmp/timed-$heavy.trace.json"))"
done
# a user's mistake is refused as before, not stopped by the timed lists' builder (the
# order is profiled, then checked: review of the timed lists)
mpirun_n 3 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 1 --batch-size 12 --micro-batches 1 --threads 1 \
  --plan "$tmp/rep.json" --schedule zb-h1 >"$tmp/rep-m1.log" 2>&1
st=$?
[ "$st" = 2 ] && grep -q "a stage has 2 replicas, each needs at least one micro-batch" "$tmp/rep-m1.log"
ok $? "zb-h1 with a replicated stage and --micro-batches 1: refused with the message and status 2 (got $st)"
finish
