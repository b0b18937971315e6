#!/bin/sh
# train_recipe.sh — the GPT-2 recipe's training options keep the bitwise promise: with
# a cosine schedule after a warm-up and global gradient-norm clipping that binds in
# some steps and not in others, 2, 3 and 4 ranks under 1F1B and GPipe give bit for bit
# the losses, norms and weights of 1 rank; a run stopped and resumed (on another
# number of ranks) gives the bits of the run never stopped; the learning rate and the
# norm of every step are in the report. Replicated stages sum their gradients in
# another order (docs/training.md), so they are checked within hybrid.sh's tolerance (1e-5).
# The gpt ties its embeddings (the presets' default): on 2-4 ranks the embedding and
# the head are on different stages and exchange their gradients (tied.sh has the rest).
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
make_case g gpt
h5ls -r "$tmp/g.h5" | grep -q 'lm_head.weight *Dataset, same as /layers/00000/wte'
ok $? "the gpt ties its embeddings (lm_head.weight is a hard link to wte)"
base="$tmp/g.h5 --data $tmp/g-data.h5 --steps 8 --batch-size 8 --micro-batches 4 --threads 1"
recipe="--lr 3e-3 --lr-schedule cosine --warmup 2 --min-lr-ratio 0.1 --beta2 0.95"
# the unclipped norms of the 1-rank run choose a clip that binds in some steps only
mpirun_n 1 $base $recipe --clip-grad-norm 1e30 --report "$tmp/free.json" >"$tmp/free.log" 2>&1
ok $? "1 rank, the recipe without a binding clip"
clip=$("$PY" -c '
import json, sys, statistics
n = [s["grad_norm"] for s in json.load(open(sys.argv[1]))["steps"]]
print("%.6g" % statistics.median(n))' "$tmp/free.json")
diag "clip at the median of the unclipped norms: $clip"
recipe="$recipe --clip-grad-norm $clip"
run() {  # run NAME N ARGS...
  name=$1 n=$2; shift 2
  mpirun_n "$n" $base $recipe --plan uniform "$@" --report "$tmp/$name.json" --save "$tmp/$name.h5" >"$tmp/$name.log" 2>&1
}
# step, loss, lr, grad_norm of every step, full precision
steps_of() { "$PY" -c '
import json, sys
for s in json.load(open(sys.argv[1]))["steps"]: print(s["step"], repr(s["loss"]), repr(s["lr"]), repr(s["grad_norm"]))' "$1"; }
run ref 1
ok $? "1 rank with the recipe (the reference)"
"$PY" - "$tmp/ref.json" "$clip" <<'PYEOF'
import json, math, sys
st = json.load(open(sys.argv[1]))["steps"]
clip = float(sys.argv[2])
lr = [s["lr"] for s in st]
want = [3e-3 * 1 / 2, 3e-3] + [3e-4 + (3e-3 - 3e-4) * 0.5 * (1 + math.cos(math.pi * (k - 2) / 6)) for k in range(2, 8)]
bind = sum(s["grad_norm"] > clip for s in st)
print("# lr %s; norms %s; clip %g binds in %d of %d steps" % (["%.3g" % x for x in lr],
      ["%.3g" % s["grad_norm"] for s in st], clip, bind, len(st)))
sys.exit(not (all(abs(a - b) <= 1e-15 * b for a, b in zip(lr, want)) and 0 < bind < len(st)))
PYEOF
ok $? "the report has every step's lr (warm-up, then cosine to 0.1 x lr) and norm; the clip binds in some steps, not all"
steps_of "$tmp/ref.json" >"$tmp/ref-1f1b.steps"
cp "$tmp/ref.h5" "$tmp/ref-1f1b.h5"
# GPipe sums a step's micro-batch gradients in the opposite order (docs/training.md): its own
# 1-rank reference
run ref-gpipe 1 --schedule gpipe
ok $? "1 rank with the recipe under GPipe (its reference)"
steps_of "$tmp/ref-gpipe.json" >"$tmp/ref-gpipe.steps"
for n in 2 3 4; do
  for sched in 1f1b gpipe; do
    run r$n-$sched $n --schedule $sched
    rc=$?
    steps_of "$tmp/r$n-$sched.json" >"$tmp/r$n-$sched.steps" 2>/dev/null
    [ $rc = 0 ] && cmp -s "$tmp/r$n-$sched.steps" "$tmp/ref-$sched.steps" &&
      h5diff "$tmp/r$n-$sched.h5" "$tmp/ref-$sched.h5" >/dev/null 2>&1
    ok $? "$n ranks, $sched: bitwise the losses, learning rates, norms and weights of 1 rank"
  done
done
# the agreement before each update (the report's breakdown agree_ms, what perf/bench-clip
# reads), which carries the clip norm: on each of 4 ranks above 0 and within its steps'
# time, with clipping and without
mpirun_n 4 $base --plan uniform --report "$tmp/noclip.json" >"$tmp/noclip.log" 2>&1 &&
  "$PY" - "$tmp/r4-1f1b.json" "$tmp/noclip.json" <<'PYEOF'
import json, sys
for f in sys.argv[1:]:
    b = json.load(open(f))["breakdown"]
    print("# agree_ms on 4 ranks: %s of step_ms %s" % ([round(r["agree_ms"], 2) for r in b], [round(r["step_ms"], 1) for r in b]))
    if not (len(b) == 4 and all(0 < r["agree_ms"] < r["step_ms"] for r in b)): sys.exit(1)
PYEOF
ok $? "the report's breakdown has the agreement's time on every rank (agree_ms), with clipping and without"
# stopped after 3 steps on 2 ranks, resumed on 3: the run never stopped
mpirun_n 2 $base $recipe --plan uniform --steps 3 --decay-steps 8 --checkpoint "$tmp/c.h5" >"$tmp/c1.log" 2>&1 &&
  mpirun_n 3 $base $recipe --plan uniform --checkpoint "$tmp/c.h5" --resume auto --report "$tmp/res.json" --save "$tmp/res.h5" \
    >"$tmp/c2.log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "resumed from" "$tmp/c2.log" && h5diff "$tmp/res.h5" "$tmp/ref.h5" >/dev/null 2>&1 &&
  [ "$(steps_of "$tmp/res.json")" = "$(tail -5 "$tmp/ref-1f1b.steps")" ]
ok $? "3 steps on 2 ranks, resumed on 3 ranks to 8: bitwise the steps and weights of the run never stopped"
h5dump -a /train/lr_schedule -a /train/clip_grad_norm "$tmp/c.h5" 2>/dev/null | grep -q '"cosine"'
ok $? "the checkpoint records the schedule and the clip (/train lr_schedule, clip_grad_norm)"
# replicated stages: within rounding
cat >"$tmp/rep-plan.json" <<'JSON'
{"stages": [{"ranks": [0, 2], "first_layer": 0, "last_layer": 1}, {"ranks": [3, 1], "first_layer": 2, "last_layer": 4}]}
JSON
run rep 4 --plan "$tmp/rep-plan.json"
rc=$?
[ $rc = 0 ] && "$PY" - "$tmp/rep.json" "$tmp/ref.json" <<'PYEOF' && h5diff -d 1e-5 "$tmp/rep.h5" "$tmp/ref.h5" >/dev/null 2>&1
import json, sys
a = json.load(open(sys.argv[1]))["steps"]; b = json.load(open(sys.argv[2]))["steps"]
sys.exit(not (len(a) == len(b) and all(abs(x["loss"] - y["loss"]) <= 1e-5 * y["loss"] and
              abs(x["grad_norm"] - y["grad_norm"]) <= 1e-5 * y["grad_norm"] for x, y in zip(a, b))))
PYEOF
ok $? "2 stages x 2 replicas: the losses, norms and weights of 1 rank within 1e-5"
finish
