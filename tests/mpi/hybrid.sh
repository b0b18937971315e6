#!/bin/sh
# hybrid.sh — pipeline + data parallelism: a stage replicated on several ranks (each
# replica runs every k-th micro-batch; their gradients are summed by an allreduce
# before the update) trains like one rank, for mixed plans and for plain data
# parallelism (--plan dp). Layouts where the 1F1B warm-up counts the later stages'
# replicas (stage 0 alone before three replicas) are among them; and replicated plans
# under --netem, where the all-reduce is a ring of the comm layer's messages instead of
# MPI_Iallreduce. Both add the replicas' partial sums in another order than one rank
# accumulates them, so the comparison with 1 rank has a float tolerance:
# losses within 1e-5 relative, weights within 1e-5 absolute after 3 AdamW steps
# (rounding is ~1e-7 relative per sum). The runs use --lr 0.05 --eps 1: with AdamW's
# default eps an update is ~lr * sign(grad) whatever the gradient's size, so a
# replica summed twice or averaged instead of summed would move the weights by only
# ~eps/|grad| and pass; with eps = 1 an update is ~lr * m, linear in the gradient, and
# a wrong scale moves the weights by ~lr |grad|. Negative control: one replica's
# gradients doubled (PPDL_TEST_GRAD_SCALE, a planted bug in the runtime) must fail.
. "$top_srcdir/tests/lib.sh"
close_losses() {
  "$PYTHON_ORACLE" - "$1" "$2" <<'PY'
import json, sys
a = [s["loss"] for s in json.load(open(sys.argv[1]))["steps"]]
b = [s["loss"] for s in json.load(open(sys.argv[2]))["steps"]]
sys.exit(0 if len(a) == len(b) and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b)) else 1)
PY
}
run() {  # run NAME N ARGS...
  local name=$1 n=$2; shift 2
  mpirun_n "$n" "$@" --steps 3 --batch-size 8 --micro-batches 4 --threads 1 --lr 0.05 --eps 1 \
    --report "$tmp/$name.json" --save "$tmp/$name.h5" >"$tmp/$name.log" 2>&1
}
for fam in gpt mlp cnn; do
  make_case $fam $fam
  run $fam-1 1 "$tmp/$fam.h5" --data "$tmp/$fam-data.h5"
  ok $? "$fam: 1 rank (the reference)"
  L=$("$PYTHON_ORACLE" -c 'import h5py,sys; print(len(h5py.File(sys.argv[1])["layers"]))' "$tmp/$fam.h5")
  cut=$((L / 2))
  cat >"$tmp/$fam-3.json" <<JSON
{"stages": [{"ranks": [0, 1], "first_layer": 0, "last_layer": $((cut - 1))},
            {"rank": 2, "first_layer": $cut, "last_layer": $((L - 1))}]}
JSON
  cat >"$tmp/$fam-4.json" <<JSON
{"stages": [{"ranks": [0, 2], "first_layer": 0, "last_layer": $((cut - 1))},
            {"ranks": [3, 1], "first_layer": $cut, "last_layer": $((L - 1))}]}
JSON
  cat >"$tmp/$fam-4a.json" <<JSON
{"stages": [{"ranks": [0, 1], "first_layer": 0, "last_layer": 0},
            {"rank": 2, "first_layer": 1, "last_layer": $((cut - 1))},
            {"rank": 3, "first_layer": $cut, "last_layer": $((L - 1))}]}
JSON
  cat >"$tmp/$fam-4b.json" <<JSON
{"stages": [{"rank": 0, "first_layer": 0, "last_layer": $((cut - 1))},
            {"ranks": [1, 2, 3], "first_layer": $cut, "last_layer": $((L - 1))}]}
JSON
  for case in "3 $fam-3.json stage 0 on ranks {0,1}, stage 1 on rank 2" \
              "4 $fam-4.json 2 stages x 2 replicas on ranks {0,2}, {3,1}" \
              "4 $fam-4a.json 3 stages on ranks {0,1}, 2, 3" \
              "4 $fam-4b.json 2 stages on ranks 0, {1,2,3}" \
              "2 dp --plan dp on 2 ranks" "4 dp --plan dp on 4 ranks"; do
    set -- $case
    n=$1 plan=$2; shift 2
    [ "$plan" = dp ] || plan="$tmp/$plan"
    for sched in 1f1b gpipe; do
      name=$fam-$n-$(basename "$plan" .json)-$sched
      run "$name" "$n" "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --plan "$plan" --schedule $sched
      rc=$?
      [ $rc = 0 ] && close_losses "$tmp/$name.json" "$tmp/$fam-1.json" &&
        h5diff -d 1e-5 "$tmp/$name.h5" "$tmp/$fam-1.h5" >/dev/null 2>&1
      ok $? "$fam $sched: $* trains like 1 rank (losses, weights)"
      [ $rc = 0 ] || sed 's/^/#   /' "$tmp/$name.log" | tail -4
    done
  done
done
# --netem: the all-reduce is a ring through the emulated links (net/ring.h); it sums
# in another order than MPI_Iallreduce, so the same tolerance against 1 rank
"$PYTHON_ORACLE" - "$tmp/netem.json" <<'PY'
import json, sys
n = 4
bw = [[5e10 if i == j else (1e9 if i // 2 == j // 2 else 2e8) for j in range(n)] for i in range(n)]
lat = [[0.0 if i == j else (5e-6 if i // 2 == j // 2 else 20e-6) for j in range(n)] for i in range(n)]
json.dump({"ranks": n, "bandwidth_Bps": bw, "latency_s": lat, "mem_bytes": [2 ** 30] * n, "speed": [1.0] * n},
          open(sys.argv[1], "w"))
PY
for sched in 1f1b gpipe; do
  run gpt-netem-$sched 4 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --plan "$tmp/gpt-4.json" --schedule $sched \
    --netem "$tmp/netem.json"
  [ $? = 0 ] && close_losses "$tmp/gpt-netem-$sched.json" "$tmp/gpt-1.json" &&
    h5diff -d 1e-5 "$tmp/gpt-netem-$sched.h5" "$tmp/gpt-1.h5" >/dev/null 2>&1
  ok $? "gpt $sched, 2 stages x 2 replicas under --netem (ring all-reduce) trains like 1 rank"
done
# the negative control: replica 1 of stage 1 (rank 1) doubles its gradients
for sched in 1f1b gpipe; do
  PPDL_TEST_GRAD_SCALE=1:2 run gpt-doubled-$sched 4 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --plan "$tmp/gpt-4.json" \
    --schedule $sched
  rc=$?
  [ $rc = 0 ] && close_losses "$tmp/gpt-doubled-$sched.json" "$tmp/gpt-1.json" &&
    h5diff -d 1e-5 "$tmp/gpt-doubled-$sched.h5" "$tmp/gpt-1.h5" >/dev/null 2>&1
  [ $? != 0 ] && [ $rc = 0 ]
  ok $? "gpt $sched, 2 stages x 2 replicas, one replica's gradients doubled: trains (status $rc) and fails the comparison"
done
# --shard-optimizer (ZeRO-1, docs/training.md): each replica keeps and updates its slice
# of the AdamW moments and the replicas gather the weights; on by default above. Sharded
# and unsharded on the same layout are the same bits (losses, weights), with clipping
# that binds (--clip-grad-norm 0.1: the norms here are ~1-3), tied embeddings (the gpt
# preset), bf16, 1f1b, gpipe, zb-h1, full recompute, interleaved 1F1B in 2 copies of a
# 2-rank pipeline (the copies are the replicas), data parallelism; each rank's
# optimizer_bytes is half
# (one slice of 2, +- the allocator's rounding; the replicas' slices add up to the whole)
# and its peak falls by as much (within 10%), as predicted.
same_run() {  # same_run A B: bitwise the same losses and weights
  [ "$(losses "$tmp/$1.json")" = "$(losses "$tmp/$2.json")" ] && h5diff "$tmp/$1.h5" "$tmp/$2.h5" >/dev/null 2>&1
}
halved() {  # halved ON OFF [timed]: optimizer_bytes half on every rank, the peak and the prediction fall by
  # as much; "timed": not the two runs' difference (zb-h1 orders its passes by their measured
  # times, so two runs may hold different numbers of micro-batches at their peaks, and
  # predict so; the bits do not move), each run's peak still within 10% of its prediction
  "$PYTHON_ORACLE" - "$tmp/$1.json" "$tmp/$2.json" "${3:-}" <<'PY'
import json, sys
on, off = (json.load(open(f)) for f in sys.argv[1:3])
timed = sys.argv[3] == "timed"
assert on["shard_optimizer"] == "on" and off["shard_optimizer"] == "off", (on["shard_optimizer"], off["shard_optimizer"])
whole, parts = {}, {}
for a, b in zip(on["memory"], off["memory"]):
    whole[a["stage"]] = b["optimizer_bytes"]
    parts[a["stage"]] = parts.get(a["stage"], []) + [a["optimizer_bytes"]]
    saved = b["optimizer_bytes"] - a["optimizer_bytes"]
    assert abs(a["optimizer_bytes"] - b["optimizer_bytes"] / 2) <= 1024, (a["optimizer_bytes"], b["optimizer_bytes"])
    assert timed or abs(b["peak_bytes"] - a["peak_bytes"] - saved) <= 0.1 * saved, (a["peak_bytes"], b["peak_bytes"], saved)
    assert timed or abs(b["predicted_bytes"] - a["predicted_bytes"] - saved) <= 0.1 * saved, (a["predicted_bytes"], b["predicted_bytes"], saved)
    assert abs(a["peak_bytes"] - a["predicted_bytes"]) <= 0.1 * a["peak_bytes"], (a["peak_bytes"], a["predicted_bytes"])
for s, p in parts.items():
    assert len(p) == 2 and abs(sum(p) - whole[s]) <= 1024, (s, p, whole[s])
PY
}
# gptw: tensors of more than one 65536-float chunk of the norm, the slice bound inside
# one (its chunk all-reduced whole besides the reduce-scatter), buckets of MiBs
"$PPDL_INIT" --preset gpt-tiny --set n_layers=2 --set d_model=192 --set seq_len=16 --seed 3 -o "$tmp/gptw.h5" >/dev/null &&
  cp "$tmp/gpt-data.h5" "$tmp/gptw-data.h5"
for case in "gpt 4 $tmp/gpt-4.json 1f1b" "gpt 4 $tmp/gpt-4.json gpipe" "mlp 4 $tmp/mlp-4.json 1f1b" \
            "mlp 4 $tmp/mlp-4.json gpipe" "gpt 4 $tmp/gpt-4.json 1f1b --precision bf16" "mlp 2 dp 1f1b" \
            "gptw 2 dp 1f1b" "gpt 4 $tmp/gpt-4.json zb-h1" "gpt 4 $tmp/gpt-4.json 1f1b --recompute full" \
            "gpt 4 uniform interleaved --copies 2"; do
  set -- $case
  fam=$1 n=$2 plan=$3 sched=$4; shift 4
  name=shard-$fam-$n-$(basename "$plan" .json)-$sched$(echo "$*" | tr -d ' ')
  for sh in on off; do
    run $name-$sh "$n" "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --plan "$plan" --schedule $sched --clip-grad-norm 0.1 \
      --shard-optimizer $sh "$@" || sed 's/^/#   /' "$tmp/$name-$sh.log" | tail -4
  done
  same_run $name-on $name-off && halved $name-on $name-off $(case $sched in zb-*) echo timed ;; esac)
  ok $? "$fam $sched $*, $n ranks (plan $(basename "$plan")), clipped: sharded optimizer state = unsharded bitwise, optimizer_bytes half"
done
# resume: a sharded run's checkpoint (the moments gathered, the unsharded layout) goes on
# unsharded and the other way, bitwise the run without a stop
g="$tmp/gpt.h5 --data $tmp/gpt-data.h5 --plan $tmp/gpt-4.json --batch-size 8 --micro-batches 4 --threads 1 --lr 0.05 --eps 1 --clip-grad-norm 0.1"
for a in on off; do
  b=off; [ $a = off ] && b=on
  mpirun_n 4 $g --steps 2 --shard-optimizer $a --checkpoint "$tmp/ck-$a.h5" >"$tmp/ck-$a.log" 2>&1 &&
    mpirun_n 4 $g --steps 3 --shard-optimizer $b --resume "$tmp/ck-$a.h5" --save "$tmp/res-$a.h5" >"$tmp/res-$a.log" 2>&1 &&
    h5diff "$tmp/res-$a.h5" "$tmp/shard-gpt-4-gpt-4-1f1b-off.h5" >/dev/null 2>&1
  ok $? "gpt 2 stages x 2 replicas: a checkpoint of --shard-optimizer $a resumed with $b is bitwise the run without a stop"
done
# memory: under a limit between the two predictions (stage 1 needs ~1000 KiB with whole
# moments, ~870 KiB with its slice) the unsharded run is refused (status 3) and the
# sharded one trains
for sh in off on; do
  mpirun_n 4 $g --steps 1 --mem-limit 928K --shard-optimizer $sh >"$tmp/lim-$sh.log" 2>&1
  echo $? >"$tmp/lim-$sh.rc"
done
[ "$(cat "$tmp/lim-off.rc")" = 3 ] && grep -q "over the memory limit" "$tmp/lim-off.log" && [ "$(cat "$tmp/lim-on.rc")" = 0 ]
ok $? "--mem-limit 928K: 2 stages x 2 replicas refused unsharded (status $(cat "$tmp/lim-off.rc")), trains sharded (status $(cat "$tmp/lim-on.rc"))"
# under --netem the replicas' sums are the emulated ring's: sharding is off there, and
# asking for it is an error that names the option
mpirun_n 4 $g --steps 1 --netem "$tmp/netem.json" --shard-optimizer on >"$tmp/netem-on.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- "--shard-optimizer on: not with --netem" "$tmp/netem-on.log"
ok $? "--shard-optimizer on with --netem is refused (status $rc), naming the option"
# negative controls: the clipping norm over one replica's shard only, and the weights not
# gathered, must fail the comparison
for hook in norm-one-shard no-gather; do
  PPDL_TEST_SHARD=$hook run shard-$hook 4 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --plan "$tmp/gpt-4.json" \
    --clip-grad-norm 0.1 --shard-optimizer on
  rc=$?
  [ $rc = 0 ] && ! same_run shard-$hook shard-gpt-4-gpt-4-1f1b-off
  ok $? "PPDL_TEST_SHARD=$hook: trains (status $rc) and is not bitwise the unsharded run"
done
# too few micro-batches for the replicas is an error, not idle ranks
mpirun_n 4 "$tmp/mlp.h5" --data "$tmp/mlp-data.h5" --plan dp --micro-batches 2 --batch-size 8 >"$tmp/e.log" 2>&1
[ $? != 0 ] && grep -q "each needs at least one micro-batch" "$tmp/e.log"
ok $? "--plan dp on 4 ranks with 2 micro-batches is refused with a clear message"
finish
