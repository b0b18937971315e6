#!/bin/sh
# chunked_equiv.sh — a rank holding several stages (--schedule interleaved, zb-v) trains
# exactly like one rank: for each model family, interleaved 1F1B with v = 2 and 3
# stages per rank and ZB-V on 2, 3 and 4 ranks give bitwise the losses and final
# weights of the 1-rank 1F1B run. Bitwise holds because every stage still accumulates
# its micro-batches' weight gradients in micro-batch order (the schedules' lists are
# proven so before they run, sched/schedule.h) and each rank runs one BLAS thread.
# Also M below the ranks, M not a multiple of them, checkpoints written and resumed
# across schedules and rank counts, evaluation and samples, the refusals of what is not
# supported yet, a plan file with several stages per rank, and the planner's chunked
# plans (--plan auto with interleaved, and --schedule auto taking zb-v).
. "$top_srcdir/tests/lib.sh"
mk() {  # mk FAM: a model with 8 or more layers and its data
  case $1 in
    gpt) "$PPDL_INIT" --preset gpt-tiny --set n_layers=6 --set d_model=32 --set seq_len=16 --set tie_embeddings=0 \
           --seed 3 -o "$tmp/gpt.h5" >/dev/null &&
         "$PPDL_DATA" text "$(text_file)" --seq-len 16 -o "$tmp/gpt-data.h5" >/dev/null ;;
    mlp) "$PPDL_INIT" --preset mlp-tiny --set n_layers=8 --seed 3 -o "$tmp/mlp.h5" >/dev/null &&
         "$PPDL_DATA" synth --family mlp --model "$tmp/mlp.h5" -n 64 --seed 5 -o "$tmp/mlp-data.h5" >/dev/null ;;
    cnn) "$PPDL_INIT" --preset cnn-tiny --set n_blocks=3 --seed 3 -o "$tmp/cnn.h5" >/dev/null &&
         "$PPDL_DATA" synth --family cnn --model "$tmp/cnn.h5" -n 64 --seed 5 -o "$tmp/cnn-data.h5" >/dev/null ;;
  esac
}
train() {  # train NAME RANKS M ARGS...: 3 steps (unless ARGS say) of batch 8, report and weights as NAME
  local name=$1 n=$2 m=$3
  shift 3
  mpirun_n $n "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 3 --batch-size 8 --micro-batches $m --threads 1 \
    --report "$tmp/$name.json" --save "$tmp/$name.h5" "$@" >"$tmp/$name.log" 2>&1
}
evals() {  # evals REPORT: the held-out losses, one per line
  /usr/bin/python3 -c 'import json,sys; [print(e["step"], repr(e["val_loss"])) for e in json.load(open(sys.argv[1]))["evals"]]' "$1"
}
same() {  # same NAME REF: bitwise the losses and the weights
  [ "$(losses "$tmp/$1.json")" = "$(losses "$tmp/$2.json")" ] && h5diff "$tmp/$1.h5" "$tmp/$2.h5" >/dev/null 2>&1
}
for fam in gpt mlp cnn; do
  mk $fam || { ok 1 "$fam: model and data"; continue; }
  for m in 4 8 2; do
    train $fam-ref-m$m 1 $m --schedule 1f1b --plan uniform
    ok $? "$fam M=$m: 1 rank trains (the reference)"
  done
  for c in "interleaved 2 2 4" "interleaved 2 3 4" "interleaved 3 2 4" "interleaved 4 2 8" "interleaved 2 2 2" \
           "interleaved 4 2 2" "zb-v 2 2 4" "zb-v 3 2 4" "zb-v 4 2 8" "zb-v 4 2 2"; do
    # the sanitizer pass (Makefile.am) runs every configuration for the gpt and one of
    # each schedule for the other families: the same runtime over their layers
    [ -n "${PPDL_SANITIZER_PASS:-}" ] && [ $fam != gpt ] &&
      case $c in "interleaved 2 3 4"|"zb-v 4 2 2") ;; *) continue ;; esac
    set -- $c
    name=$fam-$1-n$2-v$3-m$4
    train $name $2 $4 --schedule $1 --virtual-stages $3 --plan uniform
    rc=$?
    [ $rc = 0 ] && same $name $fam-ref-m$4
    ok $? "$fam $1, $2 ranks x $3 stages, M=$4: bitwise the losses and weights of 1 rank"
    [ $rc = 0 ] || sed 's/^/#   /' "$tmp/$name.log" | tail -5
  done
done
fam=gpt
# negative control: a planted wrong gradient on rank 1 (both its stages) must show
PPDL_TEST_GRAD_SCALE=1:1.5 train gpt-planted 2 4 --schedule interleaved --plan uniform
rc=$?
[ $rc = 0 ] && ! same gpt-planted gpt-ref-m4
ok $? "negative control: PPDL_TEST_GRAD_SCALE=1:1.5 on rank 1 of interleaved differs from 1 rank"
# the default plan of these schedules is uniform (--plan auto plans them: below)
train gpt-default 2 4 --schedule interleaved
rc=$?
[ $rc = 0 ] && same gpt-default gpt-ref-m4 && grep -q "interleaved" "$tmp/gpt-default.log"
ok $? "gpt interleaved without --plan: the uniform chunked plan, bitwise 1 rank"
# the planner plans them: --plan auto on given costs and network. The costs are gpt's
# own, profiled, with every layer's times made equal (1 + 2 ms), on 2 ranks joined by
# 20 MB/s (summing the replicas' gradients would cost more than the bubble): there the
# V (zb-v) has the least T and the simulator agrees (51.8 ms against zb-h2's 52.3), so
# --schedule auto takes it. Whatever the plan, the bits are those of 1 rank.
train gpt-prof 1 4 --steps 1 --schedule 1f1b --plan uniform --costs-out "$tmp/gpt-costs.json"
/usr/bin/python3 - "$tmp/gpt-costs.json" "$tmp/eq-costs.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["input_ms"] = d["target_ms"] = 0
for l in d["layers"]:
    l.update(fwd_ms=1.0, bwd_ms=2.0, bwd_input_ms=1.0, bwd_weight_ms=1.0, optimizer_ms=0.01)
json.dump(d, open(sys.argv[2], "w"))
PY
ok $? "gpt's profiled costs, every layer's times made equal"
printf '{"ranks": 2, "bandwidth_Bps": [[5e10, 2e7], [2e7, 5e10]], "latency_s": [[0, 2e-5], [2e-5, 0]],
 "mem_bytes": [1073741824, 1073741824], "speed": [1.0, 1.0]}\n' >"$tmp/two.json"
auto_args="--plan auto --costs $tmp/eq-costs.json --cluster $tmp/two.json"
train gpt-auto-il 2 4 --schedule interleaved --virtual-stages 2 $auto_args
rc=$?
[ $rc = 0 ] && same gpt-auto-il gpt-ref-m4 && grep -q "^plan (auto (ppdl)): interleaved, 4 stages on 2 ranks" "$tmp/gpt-auto-il.log"
ok $? "gpt interleaved --plan auto: the planner's cut ($(grep '^plan (' "$tmp/gpt-auto-il.log")), bitwise 1 rank"
# 4 ranks numbered cyclically over 2 nodes (0 and 2 on one, 1 and 3 on the other, 20 MB/s
# between): the planner orders the ranks so that the ring crosses between the nodes
# twice, not at every neighbour; that plan (ranks not in order) trains bitwise too
printf '{"ranks": 4, "bandwidth_Bps": [[5e10, 2e7, 5e9, 2e7], [2e7, 5e10, 2e7, 5e9], [5e9, 2e7, 5e10, 2e7],
 [2e7, 5e9, 2e7, 5e10]], "latency_s": [[0, 2e-5, 2e-6, 2e-5], [2e-5, 0, 2e-5, 2e-6], [2e-6, 2e-5, 0, 2e-5],
 [2e-5, 2e-6, 2e-5, 0]], "mem_bytes": [1073741824, 1073741824, 1073741824, 1073741824],
 "speed": [1.0, 1.0, 1.0, 1.0]}\n' >"$tmp/cyclic.json"
train gpt-auto-cyc 4 4 --schedule interleaved --plan auto --costs "$tmp/eq-costs.json" --cluster "$tmp/cyclic.json" \
  --plan-out "$tmp/cyc-plan.json"
rc=$?
ranks=$(/usr/bin/python3 -c 'import json,sys; print(" ".join(str(s["rank"]) for s in json.load(open(sys.argv[1]))["stages"][:4]))' "$tmp/cyc-plan.json" 2>/dev/null)
[ $rc = 0 ] && same gpt-auto-cyc gpt-ref-m4 && [ -n "$ranks" ] && [ "$ranks" != "0 1 2 3" ]
ok $? "gpt interleaved --plan auto, ranks cyclic over 2 nodes: the ranks ordered $ranks, bitwise 1 rank"
train gpt-auto 2 4 --schedule auto $auto_args
rc=$?
[ $rc = 0 ] && same gpt-auto gpt-ref-m4 && grep -q "^schedule zb-v (--schedule auto, chosen by the planner: .*the simulator agrees" "$tmp/gpt-auto.log"
ok $? "gpt --schedule auto --plan auto: zb-v taken ($(grep '^schedule ' "$tmp/gpt-auto.log" | cut -c1-90)), bitwise 1 rank"
# evaluation (--val-data) and samples (--sample-every) on a rank holding several stages:
# the held-out losses and the sampled text of 1 rank, bit for bit
train gpt-ev1 1 4 --schedule 1f1b --plan uniform --val-data "$tmp/gpt-data.h5" --eval-every 1 --sample-every 2 \
  --sample-tokens 12
for c in "interleaved 2 2" "zb-v 3 2" "interleaved 4 2"; do
  set -- $c
  train gpt-ev-$1-$2 $2 4 --schedule $1 --virtual-stages $3 --plan uniform --val-data "$tmp/gpt-data.h5" \
    --eval-every 1 --sample-every 2 --sample-tokens 12
  rc=$?
  [ $rc = 0 ] && same gpt-ev-$1-$2 gpt-ev1 &&
    [ "$(evals "$tmp/gpt-ev-$1-$2.json")" = "$(evals "$tmp/gpt-ev1.json")" ] &&
    [ -n "$(evals "$tmp/gpt-ev1.json")" ] &&
    [ "$(grep '^sample after' "$tmp/gpt-ev-$1-$2.log" | cut -d')' -f2-)" = "$(grep '^sample after' "$tmp/gpt-ev1.log" | cut -d')' -f2-)" ] &&
    [ "$(grep -c '^sample after' "$tmp/gpt-ev1.log")" -ge 1 ]
  ok $? "gpt $1 on $2 ranks with --val-data and --sample-every: the evaluations and samples of 1 rank, bitwise"
done
# evaluation with many micro-batches: a stage's sends wait for a later stage to post its
# receives (on the same rank: a message to itself), so the stages go micro-batch by
# micro-batch; run stage by stage these hung (1 rank, M = 8; 2 ranks, M = 16, 64 KiB
# activations)
train gpt-ev8 1 8 --steps 1 --schedule interleaved --plan uniform --val-data "$tmp/gpt-data.h5" --eval-batches 2
ok $? "gpt interleaved on 1 rank (4 stages), M=8, --val-data: ends"
"$PPDL_INIT" --preset gpt-tiny --set n_layers=2 --set d_model=128 --set seq_len=128 --set tie_embeddings=0 --seed 3 \
  -o "$tmp/wide.h5" >/dev/null &&
  "$PPDL_DATA" text "$(text_file)" --seq-len 128 -o "$tmp/wide-data.h5" >/dev/null
wide() {  # wide NAME RANKS ARGS...: one step of 16 micro-batches of 1 x 128 tokens, 2 batches evaluated
  local name=$1 n=$2
  shift 2
  mpirun_n $n "$tmp/wide.h5" --data "$tmp/wide-data.h5" --steps 1 --batch-size 16 --micro-batches 16 --threads 1 \
    --val-data "$tmp/wide-data.h5" --eval-batches 2 --report "$tmp/$name.json" "$@" >"$tmp/$name.log" 2>&1
}
wide wide-ref 1 --schedule 1f1b --plan uniform
for sch in zb-v interleaved; do
  wide wide-$sch 2 --schedule $sch --plan uniform
  rc=$?
  [ $rc = 0 ] && [ -n "$(evals "$tmp/wide-ref.json")" ] && [ "$(evals "$tmp/wide-$sch.json")" = "$(evals "$tmp/wide-ref.json")" ]
  ok $? "a wider gpt, $sch on 2 ranks, M=16, --val-data: ends, the held-out losses of 1 rank"
done
# tied embeddings (the gpt presets' default): stage 0 and stage S-1 exchange their parts
# of the tied weight's gradient (pipe/tie.h), between two ranks under interleaved, on
# one rank under zb-v (rank 0 holds both ends: it sends to itself). Bitwise the 1-rank
# run, where one stage holds both; the weights' file keeps the tie (h5diff against the
# 1-rank file, whose lm_head.weight is a link to wte); a checkpoint of zb-v resumed by
# interleaved on 3 ranks; the exchange skipped (PPDL_TEST_TIE=no-exchange) must differ.
"$PPDL_INIT" --preset gpt-tiny --set n_layers=6 --set d_model=32 --set seq_len=16 --seed 3 -o "$tmp/tied.h5" >/dev/null
fam=tied
cp "$tmp/gpt-data.h5" "$tmp/tied-data.h5"
train tied-ref 1 4 --schedule 1f1b --plan uniform
ok $? "tied gpt: 1 rank trains (the reference)"
train tied-ref4 1 4 --steps 4 --schedule 1f1b --plan uniform
for c in "interleaved 2" "interleaved 3" "zb-v 2" "zb-v 3"; do
  set -- $c
  train tied-$1-$2 $2 4 --schedule $1 --plan uniform
  rc=$?
  [ $rc = 0 ] && same tied-$1-$2 tied-ref
  ok $? "tied gpt $1 on $2 ranks: bitwise the losses and weights of 1 rank"
  [ $rc = 0 ] || sed 's/^/#   /' "$tmp/tied-$1-$2.log" | tail -5
done
/usr/bin/python3 -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r"); l=sorted(f["layers"]); print(f["layers"][l[-1]]["lm_head.weight"].id == f["layers"][l[0]]["wte"].id)' \
  "$tmp/tied-zb-v-2.h5" 2>&1 | grep -q True
ok $? "tied gpt zb-v: the saved file's lm_head.weight is wte (one dataset)"
ck=$tmp/ck-tied.h5
train tied-ck1 2 4 --steps 2 --schedule zb-v --plan uniform --checkpoint "$ck" &&
  train tied-ck2 3 4 --steps 4 --schedule interleaved --plan uniform --resume "$ck" &&
  h5diff "$tmp/tied-ck2.h5" "$tmp/tied-ref4.h5" >/dev/null 2>&1 &&
  [ "$(losses "$tmp/tied-ck2.json")" = "$(losses "$tmp/tied-ref4.json" | tail -2)" ]
ok $? "tied gpt: a checkpoint of zb-v on 2 ranks, resumed by interleaved on 3: bitwise 4 steps of 1 rank"
PPDL_TEST_TIE=no-exchange train tied-nx 2 4 --schedule zb-v --plan uniform
rc=$?
[ $rc = 0 ] && ! same tied-nx tied-ref
ok $? "negative control: zb-v with the tie's exchange skipped (PPDL_TEST_TIE=no-exchange) differs from 1 rank"
mpirun_n 2 "$tmp/tied.h5" --data "$tmp/gpt-data.h5" --steps 1 --batch-size 8 --micro-batches 4 --threads 1 \
  --schedule auto --plan auto --cluster "$tmp/two.json" --report "$tmp/tied-auto.json" >"$tmp/tied-auto.log" 2>&1
rc=$?
line=$(grep "^schedule " "$tmp/tied-auto.log")
[ $rc = 0 ] && echo "$line" | grep -qE "^schedule zb-v |; zb-v [0-9.]+" &&
  echo "$line" | grep -qE "^schedule interleaved |; interleaved v=2 [0-9.]+"
ok $? "tied gpt --schedule auto --plan auto: zb-v and interleaved planned with the tie (a T each), the chosen plan runs ($(echo "$line" | cut -c1-60))"
fam=gpt
# the plan written and read back: a plan file with several stages per rank
train gpt-out 2 4 --schedule zb-v --plan uniform --plan-out "$tmp/v.json" &&
  train gpt-file 2 4 --schedule zb-v --plan "$tmp/v.json" && same gpt-file gpt-ref-m4
ok $? "gpt zb-v: its plan file (--plan-out) runs again, bitwise 1 rank"
# checkpoints: a rank writes its stages' layer ranges into the one file; resumed under
# another chunked schedule, on 1 rank, or on 3 ranks of zb-v, the 4 steps are those of
# the uninterrupted 1-rank run, bit for bit (the weights' file; the losses of the
# resumed steps are the reference's last two)
train gpt-ref4 1 4 --steps 4 --schedule 1f1b --plan uniform
for c in "interleaved 2 zb-v 2" "interleaved 2 1f1b 1" "zb-v 3 interleaved 2" "1f1b 2 zb-v 4"; do
  set -- $c
  ck="$tmp/ck-$1-$2-$3-$4.h5"
  train gpt-ck1 $2 4 --steps 2 --schedule $1 --plan uniform --checkpoint "$ck" &&
    train gpt-ck2 $4 4 --steps 4 --schedule $3 --plan uniform --resume "$ck" &&
    h5diff "$tmp/gpt-ck2.h5" "$tmp/gpt-ref4.h5" >/dev/null 2>&1 &&
    [ "$(losses "$tmp/gpt-ck2.json")" = "$(losses "$tmp/gpt-ref4.json" | tail -2)" ]
  ok $? "gpt: a checkpoint of $1 on $2 ranks after 2 steps, resumed by $3 on $4: bitwise 4 steps of 1 rank"
done
# refusals, each naming what is not supported
refused() {  # refused PATTERN DESCRIPTION ARGS...
  local pat=$1 what=$2
  shift 2
  mpirun_n 2 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 1 --batch-size 8 --micro-batches 4 --threads 1 "$@" \
    >"$tmp/refused.log" 2>&1
  rc=$?
  [ $rc != 0 ] && grep -q -- "$pat" "$tmp/refused.log"
  ok $? "refused: $what"
  [ $? = 0 ] || sed 's/^/#   /' "$tmp/refused.log" | tail -3
}
refused "--virtual-stages 3" "zb-v with 3 stages per rank" --schedule zb-v --virtual-stages 3
refused "--virtual-stages" "--virtual-stages without a chunked schedule" --schedule 1f1b --virtual-stages 2
refused "1f1b" "a chunked plan file run with 1f1b" --schedule 1f1b --plan "$tmp/v.json"
finish
