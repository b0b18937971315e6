#!/bin/sh
# schedule_auto.sh — `--schedule auto`: the planner chooses the schedule (docs/planner.md;
# plan/schedule_choice.h), and the run trains with it.
#
# The costs are the profiled ones of the model with every layer's times set equal
# (0.1 ms forward, 0.2 ms backward), so the choice is the same on every machine: on a
# cluster of slow links (20 MB/s, 200 us) replicas would spend milliseconds summing
# gradients, so the best plans are pipelines, and on equal stages a zero-bubble schedule
# has the least T (docs/cost-model.md: T = phi x sum + ..., phi < 1).
#  1. --plan auto --schedule auto on 2 and 3 ranks trains; the header names the
#     schedule it ran and why (by T, or by the simulated step where ranks share cores:
#     3 ranks on a 2-core machine); the report's `schedule` is that one; it is the one
#     `ppdl-plan --schedule auto` picks for the same costs and cluster (the report's,
#     with the job's machines), and it is a zero-bubble one; the losses are bitwise
#     those of 1F1B on 1 rank (every schedule is: tests/mpi/zero_bubble.sh, whose
#     negative control shows that comparison catching a wrong W).
#  2. ppdl-plan --schedule auto --json writes the chosen schedule into the plan; ppdl
#     --plan that.json --schedule auto runs that schedule, bitwise the same losses.
#  3. --plan uniform --schedule auto with --costs and --cluster takes the least T for
#     that plan, and trains; one rank needs neither (one stage: 1f1b); a pipeline plan
#     file without "schedule" and no costs or cluster is refused with exit status 2 and
#     the advice; an unknown --schedule too.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "needs /usr/bin/python3 to write and compare the JSON files"
PLAN=$top_builddir/ppdl-plan
make_case g gpt || { ok 1 "model and data"; finish; exit; }
common="--steps 3 --batch-size 8 --micro-batches 4 --threads 1"
show_log() { sed 's/^/#   /' "$tmp/$1.log" | tail -5; }
same_losses() { [ -s "$tmp/$1.json" ] && [ "$(losses "$tmp/$1.json")" = "$(losses "$tmp/$2.json")" ]; }
schedule_of() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["schedule"])' "$1" 2>/dev/null; }

# the 1-rank 1F1B reference, and the model's profiled costs made equal per layer
mpirun_n 1 "$tmp/g.h5" --data "$tmp/g-data.h5" $common --report "$tmp/r1.json" >"$tmp/r1.log" 2>&1
ok $? "the 1-rank reference run"
mpirun_n 1 "$tmp/g.h5" --data "$tmp/g-data.h5" $common --steps 0 --costs-out "$tmp/profiled.json" >"$tmp/prof.log" 2>&1
ok $? "the model's profiled costs"
"$PY" - "$tmp/profiled.json" "$tmp/costs.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
for l in c["layers"]:
    l["fwd_ms"], l["bwd_ms"] = 0.1, 0.2
    for k in ("bwd_input_ms", "bwd_weight_ms"):
        if k in l:
            l[k] = 0.1
json.dump(c, open(sys.argv[2], "w"))
PYEOF
ok $? "equal layer times"
for N in 2 3; do
  "$PY" - "$tmp/c$N.json" "$N" <<'PYEOF'
import json, sys
n = int(sys.argv[2])
json.dump({"ranks": n, "bandwidth_Bps": [[5e10 if i == j else 2e7 for j in range(n)] for i in range(n)],
           "latency_s": [[0.0 if i == j else 2e-4 for j in range(n)] for i in range(n)],
           "mem_bytes": [2 ** 30] * n, "speed": [1.0] * n}, open(sys.argv[1], "w"))
PYEOF
done

# 1. --plan auto --schedule auto
for N in 2 3; do
  mpirun_n $N "$tmp/g.h5" --data "$tmp/g-data.h5" $common --plan auto --schedule auto --costs "$tmp/costs.json" \
    --cluster "$tmp/c$N.json" --report "$tmp/a$N.json" >"$tmp/a$N.log" 2>&1
  rc=$?
  ok $rc "--plan auto --schedule auto on $N ranks trains"
  [ $rc = 0 ] || show_log a$N
  ran=$(schedule_of "$tmp/a$N.json")
  grep -q "^schedule $ran (--schedule auto, chosen by the planner: \(T\|simulated step\) " "$tmp/a$N.log" &&
    grep -q "^$N ranks, schedule $ran," "$tmp/a$N.log"
  ok $? "the header names the schedule that ran ($ran) and why: $(grep '^schedule ' "$tmp/a$N.log")"
  case $ran in zb-h1|zb-h2|zb-1p|zb-v) rc=0 ;; *) rc=1 ;; esac
  ok $rc "on equal stages and slow links a zero-bubble schedule is chosen ($ran)"
  # ppdl-plan on the same costs and cluster (the report's: c$N.json and the job's machines)
  "$PY" -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["cluster"], open(sys.argv[2], "w"))' \
    "$tmp/a$N.json" "$tmp/c$N-run.json"
  "$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/c$N-run.json" --micro-batches 4 --schedule auto \
    >"$tmp/p$N.txt" 2>&1
  picked=$(sed -n 's/^picked \([a-z0-9-]*\): .*/\1/p' "$tmp/p$N.txt")
  [ -n "$picked" ] && [ "$picked" = "$ran" ] && [ "$(grep -c '^  \(1f1b\|zb-h1\|zb-h2\|zb-1p\|gpipe\) ' "$tmp/p$N.txt")" = 5 ]
  ok $? "ppdl-plan --schedule auto prints a line per schedule and picks the same ($picked)"
  [ $? = 0 ] || sed 's/^/#   /' "$tmp/p$N.txt" | head -12
  same_losses a$N r1
  ok $? "$ran on $N ranks: bitwise the losses of 1f1b on 1 rank"
done

# 2. the chosen schedule travels in the plan JSON
"$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/c3-run.json" --micro-batches 4 --schedule auto --json \
  >"$tmp/p3.json" 2>"$tmp/p3.err"
want=$(schedule_of "$tmp/p3.json")
[ -n "$want" ] && [ "$want" = "$(schedule_of "$tmp/a3.json")" ]
ok $? "ppdl-plan --schedule auto --json records the chosen schedule (\"schedule\": \"$want\")"
mpirun_n 3 "$tmp/g.h5" --data "$tmp/g-data.h5" $common --plan "$tmp/p3.json" --schedule auto \
  --report "$tmp/f3.json" >"$tmp/f3.log" 2>&1
rc=$?
[ $rc = 0 ] && [ "$(schedule_of "$tmp/f3.json")" = "$want" ] && grep -q "^schedule $want (--schedule auto, the schedule .*p3.json records)" "$tmp/f3.log"
ok $? "--plan FILE --schedule auto runs the schedule the file records ($want)"
[ $rc = 0 ] || show_log f3
same_losses f3 r1
ok $? "... bitwise the losses of 1f1b on 1 rank"

# 3. a given plan
mpirun_n 2 "$tmp/g.h5" --data "$tmp/g-data.h5" $common --plan uniform --schedule auto --costs "$tmp/costs.json" \
  --cluster "$tmp/c2.json" --report "$tmp/u2.json" >"$tmp/u2.log" 2>&1
rc=$?
ran=$(schedule_of "$tmp/u2.json")
[ $rc = 0 ] && grep -q "^schedule $ran (--schedule auto, the least T for this plan by the cost model" "$tmp/u2.log"
ok $? "--plan uniform --schedule auto with --costs and --cluster: the least T for the plan ($ran)"
[ $rc = 0 ] || show_log u2
same_losses u2 r1
ok $? "... bitwise the losses of 1f1b on 1 rank"
mpirun_n 1 "$tmp/g.h5" --data "$tmp/g-data.h5" $common --schedule auto --report "$tmp/one.json" >"$tmp/one.log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "^schedule 1f1b (--schedule auto, one stage: every schedule runs alike)" "$tmp/one.log" &&
  same_losses one r1
ok $? "one rank (one stage, no costs needed): 1f1b, the same losses"
[ $rc = 0 ] || show_log one
"$PY" -c 'import json, sys; p = json.load(open(sys.argv[1])); p.pop("schedule", None); json.dump(p, open(sys.argv[2], "w"))' \
  "$tmp/p3.json" "$tmp/bare.json"
mpirun_n 3 "$tmp/g.h5" --data "$tmp/g-data.h5" $common --plan "$tmp/bare.json" --schedule auto >"$tmp/bare.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "ppdl: --schedule auto with --plan .*bare.json: choosing a schedule for a given plan needs" "$tmp/bare.log"
ok $? "a plan file without \"schedule\", no costs or cluster: refused with status 2 and the advice (status $rc)"
[ $rc = 2 ] || show_log bare
mpirun_n 2 "$tmp/g.h5" --data "$tmp/g-data.h5" $common --schedule autox >"$tmp/x.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "schedule autox: expected 1f1b, gpipe, zb-h1, zb-h2, zb-1p, interleaved, zb-v or auto" "$tmp/x.log"
ok $? "an unknown schedule is refused, naming the choices (status $rc)"
finish
