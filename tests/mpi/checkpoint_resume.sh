#!/bin/sh
# checkpoint_resume.sh — a resumed run is the run that was never stopped: 3 steps, a
# checkpoint, 3 more steps from it give bitwise the losses and weights of 6 steps in
# one go, whatever the number of ranks or the plan of either half (2 -> 2, 2 -> 1,
# 1 -> 2, 2 -> 3, 2 -> another 2-rank plan), for every model family. Bitwise holds
# because every rank runs one BLAS thread and the pipeline computes the same sums in
# the same order on any number of ranks (pipeline_equiv.sh); a checkpoint adds the
# weights, AdamW's moments and step, and the data position, which is all the state
# there is. Also: the checkpoint is a model.h5 (ppdl and h5py read it), --resume auto
# starts then resumes with one command line, and data-parallel replicas resume.
. "$top_srcdir/tests/lib.sh"
train() {  # train NAME RANKS ARGS...: run ppdl, keep the log (--plan uniform unless ARGS say:
  # the default plan, replicated stages, sums the gradients in another order)
  local name=$1 n=$2; shift 2
  mpirun_n "$n" --plan uniform "$@" --batch-size 8 --micro-batches 4 --threads 1 >"$tmp/$name.log" 2>&1
  local rc=$?
  [ $rc = 0 ] || sed 's/^/#   /' "$tmp/$name.log" | tail -5
  return $rc
}
# the losses of steps 3..5 of a report (the resumed half)
tail_losses() { losses "$1" | tail -3; }

for fam in gpt mlp cnn; do
  make_case $fam $fam || { ok 1 "$fam: model and data"; continue; }
  m=$tmp/$fam.h5 d=$tmp/$fam-data.h5
  train $fam-ref 2 "$m" --data "$d" --steps 6 --report "$tmp/$fam-ref.json" --save "$tmp/$fam-ref.h5"
  ok $? "$fam: 6 steps in one go on 2 ranks (the reference)"
  for first in 2 1; do
    train $fam-half$first $first "$m" --data "$d" --steps 3 --checkpoint "$tmp/$fam-c$first.h5"
    ok $? "$fam: 3 steps on $first rank(s) with --checkpoint"
  done
  for case in "2 2" "2 1" "1 2" "2 3"; do
    set -- $case
    name=$fam-$1to$2
    train $name "$2" "$m" --data "$d" --steps 6 --resume "$tmp/$fam-c$1.h5" --report "$tmp/$name.json" \
      --save "$tmp/$name.h5"
    rc=$?
    [ $rc = 0 ] && grep -q "resumed from .*: 3 steps done" "$tmp/$name.log" &&
      [ "$(tail_losses "$tmp/$name.json")" = "$(tail_losses "$tmp/$fam-ref.json")" ]
    ok $? "$fam: resumed $1 -> $2 ranks: steps 4-6 have bitwise the losses of the run in one go"
    h5diff "$tmp/$name.h5" "$tmp/$fam-ref.h5" >/dev/null 2>&1
    ok $? "$fam: resumed $1 -> $2 ranks: bitwise the final weights of the run in one go"
  done
done

# another plan: the first stage holds only the embedding
m=$tmp/gpt.h5 d=$tmp/gpt-data.h5
cat >"$tmp/plan.json" <<'EOF'
{"stages": [{"rank": 1, "first_layer": 0, "last_layer": 0, "recompute": [0]},
            {"rank": 0, "first_layer": 1, "last_layer": 4, "recompute": [1, 1, 0, 0]}]}
EOF
train gpt-plan 2 "$m" --data "$d" --steps 6 --resume "$tmp/gpt-c2.h5" --plan "$tmp/plan.json" \
  --report "$tmp/gpt-plan.json" --save "$tmp/gpt-plan.h5" &&
  [ "$(tail_losses "$tmp/gpt-plan.json")" = "$(tail_losses "$tmp/gpt-ref.json")" ] &&
  h5diff "$tmp/gpt-plan.h5" "$tmp/gpt-ref.h5" >/dev/null 2>&1
ok $? "gpt: resumed under another plan (stages swapped over ranks, other cuts, recompute): bitwise the same"

# the checkpoint is a model file: ppdl trains from it, h5py reads it
train gpt-frommodel 1 "$tmp/gpt-c2.h5" --data "$d" --steps 1
ok $? "a checkpoint is a model.h5: 'ppdl ckpt.h5' trains from its weights"
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
  /usr/bin/python3 - "$tmp/gpt-c2.h5" "$tmp/gpt.h5" <<'EOF'
import sys, h5py
ck, m = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert ck.attrs["ppdl_format"] == "ppdl-model" and dict(ck.attrs) == dict(m.attrs), "root attributes"
assert int(ck["train"].attrs["step"]) == 3 and int(ck["optimizer"].attrs["step"]) == 3, "steps"
assert int(ck["train"].attrs["data_position"]) == 24 and int(ck["train"].attrs["complete"]) == 1
for l in m["layers"]:
    for p in m["layers"][l]:
        shape = m["layers"][l][p].shape
        assert ck["layers"][l][p].shape == ck["optimizer/m"][l][p].shape == ck["optimizer/v"][l][p].shape == shape
        assert (ck["optimizer/v"][l][p][()] >= 0).all(), "second moments are >= 0"
assert ck["train/checksums"].shape == (len(m["layers"]), 3)
EOF
  ok $? "h5py reads the checkpoint: model attributes, steps, data position, m and v per parameter"
else
  ok 0 "# SKIP h5py not installed for /usr/bin/python3"
fi

# --resume auto: the same command starts, then resumes
rm -f "$tmp/auto.h5"
for steps in 3 6; do
  train auto$steps 2 "$m" --data "$d" --steps $steps --checkpoint "$tmp/auto.h5" --resume auto \
    --report "$tmp/auto$steps.json" --save "$tmp/auto$steps.h5"
done
! grep -q "resumed" "$tmp/auto3.log" && grep -q "resumed from .*auto.h5: 3 steps done" "$tmp/auto6.log" &&
  h5diff "$tmp/auto6.h5" "$tmp/gpt-ref.h5" >/dev/null 2>&1
ok $? "--resume auto starts fresh without the file, resumes with it; bitwise the run in one go"
sum_before=$(md5sum <"$tmp/auto.h5")
train auto6again 2 "$m" --data "$d" --steps 6 --checkpoint "$tmp/auto.h5" --resume auto \
  --report "$tmp/again.json" --save "$tmp/again.h5"
ok $? "--resume auto on a finished run: exit 0"
# one line, and no summary of a run that did not happen (no 'done:', no memory table,
# no report or saved model); the checkpoint as it was
diag "$(cat "$tmp/auto6again.log")"
[ "$(wc -l <"$tmp/auto6again.log")" = 1 ] && grep -q "^nothing to train: .*auto.h5 has 6 steps done, --steps is 6" "$tmp/auto6again.log"
ok $? "a finished run: the one line 'nothing to train', nothing else printed"
[ ! -e "$tmp/again.json" ] && [ ! -e "$tmp/again.h5" ] && [ "$(md5sum <"$tmp/auto.h5")" = "$sum_before" ]
ok $? "a finished run: no report, no saved model, the checkpoint unchanged"

# a stage replicated on 2 ranks (data parallelism): only the first replica writes; a
# data-parallel checkpoint resumes data-parallel bitwise
train dp-ref 2 "$m" --data "$d" --steps 6 --plan dp --save "$tmp/dp-ref.h5" &&
  train dp-half 2 "$m" --data "$d" --steps 3 --plan dp --checkpoint "$tmp/dp.h5" &&
  train dp-res 2 "$m" --data "$d" --steps 6 --plan dp --resume "$tmp/dp.h5" --save "$tmp/dp-res.h5" &&
  h5diff "$tmp/dp-res.h5" "$tmp/dp-ref.h5" >/dev/null 2>&1
ok $? "--plan dp (2 replicas): resumed bitwise; the checkpoint's layers are written once"
finish
