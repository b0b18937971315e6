#!/bin/sh
# shuffle.sh — --shuffle SEED keeps the bitwise promise: each epoch's order is drawn
# from the seed and the epoch alone, so 2, 3 and 4 ranks (1F1B, GPipe, a replicated
# stage) give bit for bit the losses and weights of 1 rank over 1.5 epochs, and a run
# stopped mid-epoch and resumed on another number of ranks across the epoch boundary
# gives the bits of the run never stopped. The order is really another (the losses
# differ from the sequential run's and from another seed's), and an epoch visits every
# row once: with --lr 0 the weights never change, so the mean of the step losses over
# one epoch is the mean loss over the data set, in any order that visits each row once
# (compared within 1e-6 relative: only the order of the float sums differs).
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
make_case m mlp   # 64 samples: an epoch is 8 steps of 8
base="$tmp/m.h5 --data $tmp/m-data.h5 --batch-size 8 --micro-batches 4 --threads 1 --plan uniform"
run() {  # run NAME N ARGS...
  name=$1 n=$2; shift 2
  mpirun_n "$n" $base "$@" --report "$tmp/$name.json" --save "$tmp/$name.h5" >"$tmp/$name.log" 2>&1
  rc=$?
  [ $rc = 0 ] || sed 's/^/#   /' "$tmp/$name.log" | tail -5
  return $rc
}
same() {  # same A B: the losses and the weights of two runs, bit for bit
  [ "$(losses "$tmp/$1.json")" = "$(losses "$tmp/$2.json")" ] && [ -n "$(losses "$tmp/$1.json")" ] &&
    h5diff "$tmp/$1.h5" "$tmp/$2.h5" >/dev/null 2>&1
}
run ref 1 --steps 12 --shuffle 5
ok $? "1 rank, --shuffle 5, 12 steps (1.5 epochs): the reference"
grep -q "^data order: shuffled" "$tmp/ref.log" && grep -q "epoch 2" "$tmp/ref.log" &&
  "$PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["shuffle"] == 5 and [s["epoch"] for s in r["steps"]] == [1] * 8 + [2] * 4, r["steps"]' "$tmp/ref.json"
ok $? "the header says the order is shuffled; the progress line and the report give each step's epoch"
run r2 2 --steps 12 --shuffle 5 && same r2 ref
ok $? "2 ranks, 1F1B: the bits of 1 rank"
run r3 3 --steps 12 --shuffle 5 && same r3 ref
ok $? "3 ranks, 1F1B: the bits of 1 rank"
run r4 4 --steps 12 --shuffle 5 && same r4 ref
ok $? "4 ranks, 1F1B: the bits of 1 rank"
# GPipe sums a stage's micro-batches in the other order than 1F1B (docs/training.md): its own 1-rank run
run g1 1 --steps 12 --shuffle 5 --schedule gpipe && run g3 3 --steps 12 --shuffle 5 --schedule gpipe && same g3 g1
ok $? "3 ranks, GPipe: the bits of 1 rank under GPipe"
# a replicated stage sums its gradients in another order (docs/training.md): within 1e-5
printf '{"stages": [{"ranks": [0, 1], "first_layer": 0, "last_layer": 1}, {"rank": 2, "first_layer": 2, "last_layer": %s}]}\n' \
  "$(($("$PY" -c 'import h5py,sys; print(len(h5py.File(sys.argv[1])["layers"]))' "$tmp/m.h5") - 1))" >"$tmp/rep.json"
run rep 3 --steps 12 --shuffle 5 --plan "$tmp/rep.json" &&
  "$PY" "$top_srcdir/tests/h5compare.py" "$tmp/rep.h5" "$tmp/ref.h5" "$tmp/m.h5" 1e-5 >"$tmp/rep.cmp" 2>&1
ok $? "a stage replicated on 2 ranks: the weights of 1 rank within 1e-5 $(tail -1 "$tmp/rep.cmp")"

# stopped at step 5 (epoch 1), resumed on 3 ranks across the epoch boundary at step 8
run half 2 --steps 5 --shuffle 5 --checkpoint "$tmp/ck.h5" &&
  run rest 3 --steps 12 --shuffle 5 --resume "$tmp/ck.h5" &&
  [ "$(losses "$tmp/rest.json")" = "$(losses "$tmp/ref.json" | tail -7)" ] && h5diff "$tmp/rest.h5" "$tmp/ref.h5" >/dev/null 2>&1
ok $? "stopped in epoch 1 on 2 ranks, resumed on 3 across the epoch boundary: the bits of the run never stopped"
run other 1 --steps 12 --shuffle 6 --checkpoint "$tmp/ck6.h5" && run seq 1 --steps 12 &&
  [ "$(losses "$tmp/other.json")" != "$(losses "$tmp/ref.json")" ] &&
  [ "$(losses "$tmp/seq.json")" != "$(losses "$tmp/ref.json")" ] && ! grep -q "^data order" "$tmp/seq.log"
ok $? "the order is another: the losses differ from the sequential run's and from --shuffle 6's"
run note 1 --steps 13 --resume "$tmp/ck6.h5" && grep -q "note: the data order differs from the checkpoint's (--shuffle 6)" "$tmp/note.log"
ok $? "a resume with another order says so"

# one epoch with --lr 0: the mean loss over the data set, whatever the order
run lr0seq 1 --steps 8 --lr 0 && run lr0shuf 2 --steps 8 --lr 0 --shuffle 11
"$PY" - "$tmp/lr0seq.json" "$tmp/lr0shuf.json" <<'PYEOF'
import json, sys
a, b = ([s["loss"] for s in json.load(open(f))["steps"]] for f in sys.argv[1:3])
ma, mb = sum(a) / len(a), sum(b) / len(b)
print("# one epoch at lr 0: mean loss %.9g in order, %.9g shuffled; the steps' losses differ: %s" % (ma, mb, a != b))
sys.exit(0 if a != b and abs(ma - mb) <= 1e-6 * abs(ma) else 1)
PYEOF
ok $? "an epoch visits every row once: at lr 0 its mean loss is the data set's, in order or shuffled"
finish
