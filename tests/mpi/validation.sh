#!/bin/sh
# validation.sh — --val-data FILE.h5 --eval-every K --eval-batches N: the held-out loss,
# forward only through the same pipeline, before the first step, every K steps and
# after the last. It keeps the bitwise promise (1, 2, 3, 4 ranks and GPipe give the
# same validation losses bit for bit; a resumed run evaluates as the run in one go),
# touches nothing (the training losses and weights are those of a run without it),
# and is the real loss: on the training data itself at --lr 0, the mean loss of its
# first N batches is the mean of the N training steps' losses (within 1e-6 relative:
# the same float sums per batch, divided in another order). It is in the progress
# line, the report and the run log.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
make_case g gpt
tail -c 4000 "$(text_file)" >"$tmp/val.txt"   # the end of the text the training starts from
"$PPDL_DATA" text "$tmp/val.txt" --seq-len 16 -o "$tmp/val.h5" >/dev/null
ok $? "a held-out set: $(ls -la "$tmp/val.h5" | awk '{print $5}') bytes"
base="$tmp/g.h5 --data $tmp/g-data.h5 --batch-size 8 --micro-batches 4 --threads 1"
val="--val-data $tmp/val.h5 --eval-every 3 --eval-batches 5"
run() {  # run NAME N ARGS...
  name=$1 n=$2; shift 2
  mpirun_n "$n" $base --plan uniform "$@" --report "$tmp/$name.json" --save "$tmp/$name.h5" >"$tmp/$name.log" 2>&1
  rc=$?
  [ $rc = 0 ] || sed 's/^/#   /' "$tmp/$name.log" | tail -5
  return $rc
}
evals() { "$PY" -c '
import json, sys
for e in json.load(open(sys.argv[1])).get("evals", []): print(e["step"], repr(e["val_loss"]))' "$1"; }
run ref 1 --steps 8 $val --log "$tmp/ref.jsonl" --loss-plot "$tmp/ref.svg"
ok $? "1 rank, 8 steps, evaluated every 3 steps on 5 batches"
[ "$(evals "$tmp/ref.json" | cut -d' ' -f1 | tr '\n' ' ')" = "0 3 6 8 " ] &&
  grep -q "^validation before training: loss" "$tmp/ref.log" && grep -q "step     3/8 .*val [0-9]" "$tmp/ref.log" &&
  grep -q "step     8/8 .*val [0-9]" "$tmp/ref.log"
ok $? "evaluated before step 1, after steps 3 and 6 and after the last; shown on the progress line"
"$PY" - "$tmp/ref.jsonl" "$tmp/ref.json" <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ev = {e["step"]: e["val_loss"] for e in json.load(open(sys.argv[2]))["evals"]}
assert lines[0] == {"step": 0, "val_loss": ev[0]}, lines[0]
got = {l["step"]: l["val_loss"] for l in lines[1:] if "val_loss" in l}
assert got == {k: v for k, v in ev.items() if k}, (got, ev)
PYEOF
ok $? "the run log has the step-0 evaluation's line and val_loss on the steps evaluated"
"$PY" - "$tmp/ref.svg" <<'PYEOF'
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
svg = ET.parse(sys.argv[1]).getroot()
pts = [len(l.get("points").split()) for l in svg.findall(ns + "polyline")]
dots = [c.find(ns + "title").text for c in svg.findall(ns + "circle") if c.find(ns + "title") is not None]
assert pts == [8, 4], pts      # training steps 1..8, evaluations at 0, 3, 6, 8
assert [d.split(":")[0] for d in dots] == ["step 0", "step 3", "step 6", "step 8"], dots
PYEOF
ok $? "--loss-plot draws the 8 training losses and the 4 evaluations (steps 0, 3, 6, 8)"
run plain 1 --steps 8
[ "$(losses "$tmp/plain.json")" = "$(losses "$tmp/ref.json")" ] && h5diff "$tmp/plain.h5" "$tmp/ref.h5" >/dev/null 2>&1
ok $? "evaluating touches nothing: the training losses and weights of a run without it"
for n in 2 3 4; do
  run r$n $n --steps 8 $val && [ "$(evals "$tmp/r$n.json")" = "$(evals "$tmp/ref.json")" ]
  ok $? "$n ranks, 1F1B: the validation losses of 1 rank, bit for bit"
done
run g1 1 --steps 8 $val --schedule gpipe && run g3 3 --steps 8 $val --schedule gpipe &&
  [ "$(evals "$tmp/g3.json")" = "$(evals "$tmp/g1.json")" ] && [ "$(evals "$tmp/g1.json" | head -1)" = "$(evals "$tmp/ref.json" | head -1)" ]
ok $? "GPipe on 3 ranks: its 1-rank run's validation losses; before training, 1F1B's"
# replicas each sum their own micro-batches' losses: before training within 1e-6 relative
mpirun_n 2 $base --steps 1 --plan dp --val-data "$tmp/val.h5" --eval-batches 5 --report "$tmp/dp.json" >"$tmp/dp.log" 2>&1 &&
  "$PY" -c '
import json, sys
a, b = (json.load(open(f))["evals"][0]["val_loss"] for f in sys.argv[1:3])
print("# before training: %r (data parallel x 2), %r (1 rank)" % (a, b))
sys.exit(0 if abs(a - b) <= 1e-6 * abs(b) else 1)' "$tmp/dp.json" "$tmp/ref.json"
ok $? "data parallel on 2 ranks (micro-batches split between replicas): the validation loss within 1e-6"
run half 2 --steps 4 $val --checkpoint "$tmp/ck.h5" && run rest 3 --steps 8 $val --resume "$tmp/ck.h5" &&
  [ "$(evals "$tmp/rest.json")" = "$(evals "$tmp/ref.json" | tail -2)" ]
ok $? "stopped after step 4 on 2 ranks, resumed on 3: the evaluations after steps 6 and 8 of the run in one go"

# the real loss: the training data's first 5 batches at --lr 0
run lr0 2 --steps 5 --lr 0 --val-data "$tmp/g-data.h5" --eval-batches 5
"$PY" - "$tmp/lr0.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
steps = [s["loss"] for s in r["steps"]]
ev = [e["val_loss"] for e in r["evals"]]
mean = sum(steps) / len(steps)
print("# lr 0: mean training loss %.9g, evaluations %s" % (mean, ev))
sys.exit(0 if len(ev) == 2 and ev[0] == ev[1] and abs(ev[0] - mean) <= 1e-6 * abs(mean) else 1)
PYEOF
ok $? "on the training data at lr 0: the mean of its first 5 steps' losses, before and after"

mpirun_n 1 $base --steps 2 --eval-every 2 >"$tmp/e1.log" 2>&1
[ $? = 2 ] && grep -q -- "--eval-every needs --val-data" "$tmp/e1.log"
ok $? "--eval-every without --val-data is refused, naming both"
make_case m mlp
mpirun_n 1 $base --steps 2 --val-data "$tmp/m-data.h5" >"$tmp/e2.log" 2>&1
[ $? != 0 ] && grep -q -- "--val-data: .*m-data.h5" "$tmp/e2.log"
ok $? "a validation set of another kind is refused, naming --val-data and the file: $(tail -1 "$tmp/e2.log")"
finish
