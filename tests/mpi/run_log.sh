#!/bin/sh
# run_log.sh — --log FILE.jsonl: one JSON object per step, written as the run goes,
# with the keys docs/formats.md names and the report's losses; a chain of jobs leaves one
# continuous log: a resumed run drops the lines of steps after its checkpoint (a job
# killed after logging them) and a line cut short, then appends, so every step is
# there once, with the values of the run made in one go.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
make_case g gpt
base="$tmp/g.h5 --data $tmp/g-data.h5 --batch-size 8 --micro-batches 4 --threads 1 --lr-schedule cosine --warmup 2 --clip-grad-norm 1 --plan uniform"
mpirun_n 2 $base --steps 8 --report "$tmp/ref.json" --log "$tmp/ref.jsonl" >"$tmp/ref.log" 2>&1
ok $? "2 ranks, 8 steps with --log"
"$PY" - "$tmp/ref.jsonl" "$tmp/ref.json" <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rep = json.load(open(sys.argv[2]))["steps"]
keys = {"step", "epoch", "loss", "lr", "grad_norm", "ms", "samples_per_s", "tokens_per_s", "bubble"}
assert [l["step"] for l in lines] == list(range(1, 9)), [l["step"] for l in lines]
assert all(set(l) == keys for l in lines), [sorted(l) for l in lines][0]
assert [l["loss"] for l in lines] == [s["loss"] for s in rep], "losses differ from the report's"
assert all(l["tokens_per_s"] == 16 * l["samples_per_s"] and l["ms"] > 0 for l in lines)
PYEOF
ok $? "a line per step 1..8: step, epoch, loss, lr, grad_norm, ms, samples/s, tokens/s, bubble; the report's losses"

# a chain: 3 steps, then 5 (resumed); then a job killed after logging steps 4-5 resumes
# from the step-3 checkpoint to step 8, and the log ends with steps 1..8 once each
run() { mpirun_n "$@" >>"$tmp/chain.log" 2>&1; }
plot="--loss-plot $tmp/c.svg"
run 2 $base --steps 3 --checkpoint "$tmp/ck.h5" --log "$tmp/c.jsonl" $plot && cp "$tmp/ck.h5" "$tmp/ck3.h5" &&
  run 3 $base --steps 5 --checkpoint "$tmp/ck.h5" --resume auto --log "$tmp/c.jsonl" $plot
ok $? "3 steps, then resumed to 5 on 3 ranks, one log"
printf '{"step": 6, "loss": 1.2' >>"$tmp/c.jsonl"   # the kill cut a line short
cp "$tmp/ck3.h5" "$tmp/ck.h5"                       # ... and its checkpoint is the one of step 3
run 4 $base --steps 8 --checkpoint "$tmp/ck.h5" --resume auto --log "$tmp/c.jsonl" $plot --loss-plot-scale log &&
  grep -q "^--log .*: dropped 3 lines after step 3" "$tmp/chain.log"
ok $? "resumed from step 3: the lines of steps 4, 5 and the cut one dropped, and said so"
"$PY" - "$tmp/c.jsonl" "$tmp/ref.jsonl" <<'PYEOF'
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
ref = [json.loads(l) for l in open(sys.argv[2])]
assert [l["step"] for l in got] == list(range(1, 9)), [l["step"] for l in got]
for k in ("loss", "lr", "grad_norm", "epoch"):
    assert [l[k] for l in got] == [l[k] for l in ref], k
PYEOF
ok $? "the chain's log: steps 1..8 once each, with the losses, lr and norms of the run in one go"
# --loss-plot: the whole chain's curve (the resumed job reads the earlier steps from its log)
"$PY" - "$tmp/c.svg" "$tmp/ref.jsonl" <<'PYEOF'
import sys, xml.etree.ElementTree as ET
svg = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
lines = svg.findall(ns + "polyline")
pts = [len(l.get("points").split()) for l in lines]
texts = [t.text for t in svg.iter(ns + "text")]
assert pts == [8], pts          # one training line through steps 1..8 (no mean line under 50 steps)
assert "step" in texts and "tokens seen" in texts and "loss (log scale)" in texts, texts
PYEOF
ok $? "--loss-plot: valid SVG; the chain's curve has all 8 steps; axes labelled (step, tokens seen, log loss)"
mpirun_n 1 $base --steps 3 --log "$tmp/c.jsonl" >"$tmp/fresh.log" 2>&1 && [ "$(wc -l <"$tmp/c.jsonl")" = 3 ]
ok $? "a fresh run (no --resume) starts the log anew"
mpirun_n 1 $base --steps 3 --log "$tmp/no/such/dir/x.jsonl" >"$tmp/bad.log" 2>&1
[ $? = 2 ] && grep -q -- "--log $tmp/no/such/dir/x.jsonl" "$tmp/bad.log"
ok $? "a log in a missing folder is refused before the run, naming --log"
finish
