#!/bin/sh
# chunked_copies.sh — k copies of a chunked pipeline (plan/plan.h: every stage k
# replicas, each rank the same replica of all its stages; --plan uniform --replicas k):
# copy q runs micro-batches q, q+k, .. through interleaved 1F1B or ZB-V on its N/k
# ranks, and each stage's replicas sum their gradients. Every replica accumulates its
# micro-batches in micro-batch order and the k partial sums are added by the same
# reduction as data parallelism's, so the losses and final weights are bitwise those of
# --plan dp on k ranks (itself within float rounding of 1 rank, tests/mpi/hybrid.sh),
# and of 1F1B on the same copies without chunks. Checked for gpt (tied embeddings,
# clipping) and mlp on 2, 3 and 4 ranks, M a multiple of k and not (3 on 2 copies), under --netem (the
# ring all-reduce), with a checkpoint resumed across schedules and plans, evaluation
# and samples, a plan file, a planted wrong gradient, and the refusals.
. "$top_srcdir/tests/lib.sh"
mk() {  # mk FAM: a model and its data
  case $1 in
    gpt) "$PPDL_INIT" --preset gpt-tiny --set n_layers=6 --set d_model=32 --set seq_len=16 --set tie_embeddings=1 \
           --seed 3 -o "$tmp/gpt.h5" >/dev/null &&
         "$PPDL_DATA" text "$(text_file)" --seq-len 16 -o "$tmp/gpt-data.h5" >/dev/null ;;
    mlp) "$PPDL_INIT" --preset mlp-tiny --set n_layers=8 --seed 3 -o "$tmp/mlp.h5" >/dev/null &&
         "$PPDL_DATA" synth --family mlp --model "$tmp/mlp.h5" -n 64 --seed 5 -o "$tmp/mlp-data.h5" >/dev/null ;;
  esac
}
train() {  # train NAME RANKS M ARGS...: 3 steps (unless ARGS say) of batch 12, report and weights as NAME
  local name=$1 n=$2 m=$3
  shift 3
  mpirun_n $n "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 3 --batch-size 12 --micro-batches $m --threads 1 \
    --clip-grad-norm 0.5 --report "$tmp/$name.json" --save "$tmp/$name.h5" "$@" >"$tmp/$name.log" 2>&1
}
same() {  # same NAME REF: bitwise the losses and the weights
  [ "$(losses "$tmp/$1.json")" = "$(losses "$tmp/$2.json")" ] && h5diff "$tmp/$1.h5" "$tmp/$2.h5" >/dev/null 2>&1
}
show() { sed 's/^/#   /' "$tmp/$1.log" | tail -5; }
for fam in gpt mlp; do
  mk $fam || { ok 1 "$fam: model and data"; continue; }
  for k in 2 3; do
    for m in 6 3; do
      train $fam-dp$k-m$m $k $m --schedule 1f1b --plan dp
      ok $? "$fam M=$m: data parallelism on $k ranks trains (the reference)"
    done
  done
  # SCHEDULE RANKS COPIES M
  for c in "interleaved 4 2 6" "zb-v 4 2 6" "interleaved 4 2 3" "zb-v 4 2 3" "interleaved 2 2 6" "zb-v 3 3 6" \
           "1f1b 4 2 6"; do
    set -- $c
    name=$fam-$1-n$2-k$3-m$4
    train $name $2 $4 --schedule $1 --plan uniform --copies $3
    rc=$?
    [ $rc = 0 ] && same $name $fam-dp$3-m$4 && grep -q "x $3 replicas" "$tmp/$name.log"
    ok $? "$fam $1 on $2 ranks as $3 copies, M=$4: bitwise the losses and weights of dp on $3 ranks"
    [ $rc = 0 ] || show $name
  done
done
fam=gpt
# negative control: a planted wrong gradient on rank 3 (a replica of stages 1 and 2) must show
PPDL_TEST_GRAD_SCALE=3:1.5 train gpt-planted 4 6 --schedule interleaved --plan uniform --replicas 2
rc=$?
[ $rc = 0 ] && ! same gpt-planted gpt-dp2-m6
ok $? "negative control: PPDL_TEST_GRAD_SCALE=3:1.5 on a replica differs from dp"
# --netem: the replicas sum through the emulated links (a ring per layer, its own tags)
train gpt-netem 4 6 --schedule interleaved --plan uniform --replicas 2 --netem "$top_srcdir/inputs/slow-2x2.json"
rc=$?
[ $rc = 0 ] && same gpt-netem gpt-dp2-m6
ok $? "gpt interleaved as 2 copies under --netem: bitwise dp on 2 ranks"
# --replicas K, the old spelling of --copies K (the runs above the sweep's): a note names both
grep -q "^note: --replicas is the old name of --copies" "$tmp/gpt-netem.log" &&
  ! grep -q "old name" "$tmp/$fam-interleaved-n4-k2-m6.log"
ok $? "--replicas still works, with a note naming --copies (not printed for --copies)"
[ $rc = 0 ] || show gpt-netem
# a plan file: written by --plan-out, read back, the same bits
train gpt-out 4 6 --schedule zb-v --plan uniform --replicas 2 --plan-out "$tmp/copies.json" &&
  train gpt-file 4 6 --schedule zb-v --plan "$tmp/copies.json"
rc=$?
[ $rc = 0 ] && same gpt-file gpt-dp2-m6 && grep -q '"chunks": 2' "$tmp/copies.json" && grep -q '"ranks"' "$tmp/copies.json"
ok $? "gpt zb-v as 2 copies from a plan file (--plan-out, --plan FILE): bitwise dp on 2 ranks"
# checkpoints: written by zb-v in 2 copies, resumed by interleaved in 2 copies and by dp
ck="$tmp/ck.h5"
resumed() {  # resumed NAME: the weights of 5 steps of dp, the losses of its last 3
  h5diff "$tmp/$1.h5" "$tmp/gpt-dp2-s5.h5" >/dev/null 2>&1 &&
    [ "$(losses "$tmp/$1.json")" = "$(losses "$tmp/gpt-dp2-s5.json" | tail -3)" ]
}
train gpt-dp2-s5 2 6 --steps 5 --schedule 1f1b --plan dp &&
  train gpt-ck1 4 6 --steps 2 --schedule zb-v --plan uniform --replicas 2 --checkpoint "$ck" &&
  train gpt-ck2 4 6 --steps 5 --schedule interleaved --plan uniform --replicas 2 --resume "$ck" &&
  resumed gpt-ck2
ok $? "gpt: a checkpoint of zb-v in 2 copies resumed by interleaved in 2 copies: bitwise 5 steps of dp"
train gpt-ck3 2 6 --steps 5 --schedule 1f1b --plan dp --resume "$ck" && resumed gpt-ck3
ok $? "... and resumed by dp on 2 ranks: bitwise"
# evaluation and samples: the held-out losses and the text of dp
train gpt-ev-dp 2 6 --steps 2 --schedule 1f1b --plan dp --val-data "$tmp/gpt-data.h5" --eval-every 1 \
  --sample-every 2 --sample-tokens 12 &&
  train gpt-ev 4 6 --steps 2 --schedule interleaved --plan uniform --replicas 2 --val-data "$tmp/gpt-data.h5" \
    --eval-every 1 --sample-every 2 --sample-tokens 12
rc=$?
[ $rc = 0 ] && [ "$(grep -o 'val [0-9.]*' "$tmp/gpt-ev.log")" = "$(grep -o 'val [0-9.]*' "$tmp/gpt-ev-dp.log")" ] &&
  [ "$(grep -c 'val [0-9.]*' "$tmp/gpt-ev.log")" = 2 ] &&
  [ "$(grep '^sample after' "$tmp/gpt-ev.log" | cut -d')' -f2-)" = "$(grep '^sample after' "$tmp/gpt-ev-dp.log" | cut -d')' -f2-)" ]
ok $? "gpt interleaved as 2 copies with --val-data and --sample-every: the evaluations and samples of dp"
# refusals, each naming what is wrong
refused() {  # refused PATTERN DESCRIPTION RANKS ARGS...
  local pat=$1 what=$2 n=$3
  shift 3
  mpirun_n $n "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 1 --batch-size 12 --micro-batches 6 "$@" \
    >"$tmp/refused.log" 2>&1
  local rc=$?
  [ $rc != 0 ] && grep -q -- "$pat" "$tmp/refused.log"
  ok $? "refused: $what"
  [ $? = 0 ] || show refused
}
refused "--replicas 3: expected a divisor of the 4 ranks" "3 copies on 4 ranks" 4 --schedule interleaved \
  --plan uniform --replicas 3
refused "--replicas 2: only --plan uniform takes it" "--replicas with --plan auto" 2 --plan auto --replicas 2
# the plan file above with stage 1's replicas swapped: rank 1 is replica 0 of stage 1
# and replica 1 of stage 2 (the V: ranks 0 1 1 0 / 2 3 3 2 become 0 3 1 0 / 2 1 3 2)
/usr/bin/python3 - "$tmp/copies.json" "$tmp/mixed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["stages"][1]["ranks"].reverse()
d["stages"][1]["rank"] = d["stages"][1]["ranks"][0]
json.dump(d, open(sys.argv[2], "w"))
PY
refused "is replica 1 of stage 1 but replica 0 of stage 2" "a plan file whose rank is another replica of each stage" 4 \
  --schedule zb-v --plan "$tmp/mixed.json"
finish
