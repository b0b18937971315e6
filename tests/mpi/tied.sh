#!/bin/sh
# tied.sh — tied embeddings (gpt tie_embeddings = 1, the presets' default: the head's
# lm_head.weight is the embedding's wte) keep the bitwise promise where the two layers
# share a stage and where they are on different stages (pipe/tie.h: the two gradients
# are summed apart over the micro-batches and combined once, g = g_emb + g_head; on two
# stages each sends its part to the other). train_recipe.sh checks the recipe on the
# same (tied) gpt for 1-4 ranks x both schedules, a resume and 2 x 2 replicas; this adds
# what is particular to the tie:
#  - the model file and checkpoints hold the weight once (hard links);
#  - bitwise 1 rank: messages staged through host memory (PPDL_STAGE_MESSAGES=1), the
#    emulated network (--netem: the exchange is messages of the comm layer), resumes
#    across the tie's two cases (3 ranks -> 1 rank, 1 rank -> 2 ranks);
#  - replicated stages of the tie (the replicas' sums first, then the exchange between
#    replicas; unequal replica counts on the two stages; data parallelism, where every
#    rank holds both layers) within hybrid.sh's tolerance (1e-5, scale-sensitive run:
#    --lr 0.05 --eps 1), also under --netem (ring all-reduce);
#  - negative controls, planted bugs (PPDL_TEST_TIE): without the exchange the 2-rank
#    run is not the 1-rank run; with one gradient buffer for both layers (what design
#    point 1 of the tie rules out: the order of the backwards decides the sum) the
#    1-rank run is not the 2-rank run;
#  - memory: the cost model counts the tie (1 rank: 3 V C floats less than untied,
#    the head's values, m and v; 3 ranks: V C more on the first and the last stage, the
#    received gradient), and each rank's measured peak is that prediction plus the
#    runtime's buffers (within the allocator's rounding, as recompute.sh);
#  - an untied gpt (tie_embeddings=0) is still bitwise on 1 and 3 ranks.
. "$top_srcdir/tests/lib.sh"
PY=$PYTHON_ORACLE
make_case g gpt
V=256 C=32
h5ls -r "$tmp/g.h5" | grep -q '^/layers/00004/lm_head.weight *Dataset, same as /layers/00000/wte'
ok $? "the gpt preset ties: /layers/00004/lm_head.weight is a hard link to /layers/00000/wte"
base="$tmp/g.h5 --data $tmp/g-data.h5 --steps 6 --batch-size 8 --micro-batches 4 --threads 1"
recipe="--lr 3e-3 --lr-schedule cosine --warmup 2 --min-lr-ratio 0.1 --beta2 0.95 --clip-grad-norm 1.5"
run() {  # run NAME N ARGS...
  name=$1 n=$2; shift 2
  mpirun_n "$n" $base "$@" --report "$tmp/$name.json" --save "$tmp/$name.h5" >"$tmp/$name.log" 2>&1
}
steps_of() { "$PY" -c '
import json, sys
for s in json.load(open(sys.argv[1]))["steps"]: print(s["step"], repr(s["loss"]), repr(s["grad_norm"]))' "$1"; }
same_as() {  # same_as NAME REF: bitwise steps and weights
  steps_of "$tmp/$1.json" >"$tmp/$1.steps" 2>/dev/null && steps_of "$tmp/$2.json" >"$tmp/$2.steps" &&
    cmp -s "$tmp/$1.steps" "$tmp/$2.steps" && h5diff "$tmp/$1.h5" "$tmp/$2.h5" >/dev/null 2>&1
}
close_to() {  # close_to NAME REF: losses within 1e-5 relative, weights within 1e-5
  "$PY" - "$tmp/$1.json" "$tmp/$2.json" <<'PYEOF' && h5diff -d 1e-5 "$tmp/$1.h5" "$tmp/$2.h5" >/dev/null 2>&1
import json, sys
a = [s["loss"] for s in json.load(open(sys.argv[1]))["steps"]]
b = [s["loss"] for s in json.load(open(sys.argv[2]))["steps"]]
sys.exit(not (len(a) == len(b) and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b))))
PYEOF
}

run ref 1 $recipe
ok $? "1 rank, tied, cosine + clip (the reference)"
h5ls -r "$tmp/ref.h5" | grep -q 'lm_head.weight *Dataset, same as /layers/00000/wte'
ok $? "--save writes the weight once (the link)"
"$PY" -c '
import json, sys
n = [s["grad_norm"] for s in json.load(open(sys.argv[1]))["steps"]]
print("# norms", " ".join("%.3g" % x for x in n))
sys.exit(not (0 < sum(x > 1.5 for x in n) < len(n)))' "$tmp/ref.json"
ok $? "the clip (1.5) binds in some steps, not all"

run r2 2 $recipe
same_as r2 ref
ok $? "2 ranks (embedding and head on different stages): bitwise the losses, norms and weights of 1 rank"
PPDL_STAGE_MESSAGES=1 run staged 3 $recipe
same_as staged ref
ok $? "3 ranks, every message (the exchange too) staged through host memory: bitwise 1 rank"
"$PY" - "$tmp/cluster3.json" <<'PYEOF'
import json, sys
n = 3
bw = [[5e10 if i == j else 2.5e8 for j in range(n)] for i in range(n)]
lat = [[0.0 if i == j else 20e-6 for j in range(n)] for i in range(n)]
json.dump({"ranks": n, "bandwidth_Bps": bw, "latency_s": lat, "mem_bytes": [2 ** 30] * n, "speed": [1.0] * n},
          open(sys.argv[1], "w"))
PYEOF
run netem 3 $recipe --netem "$tmp/cluster3.json"
same_as netem ref
ok $? "3 ranks under --netem (the exchange through the emulated links): bitwise 1 rank"

# resumes across the two cases of the tie: a copy on two stages <-> the weight held once
mpirun_n 3 $base $recipe --steps 3 --decay-steps 6 --checkpoint "$tmp/c3.h5" >"$tmp/c3.log" 2>&1 &&
  h5ls -r "$tmp/c3.h5" | grep -c 'lm_head.weight *Dataset, same as /optimizer/[mv]/00000/wte' | grep -q '^2$' &&
  mpirun_n 1 $base $recipe --checkpoint "$tmp/c3.h5" --resume auto --report "$tmp/res1.json" --save "$tmp/res1.h5" \
    >"$tmp/res1.log" 2>&1 && grep -q "resumed from" "$tmp/res1.log" && h5diff "$tmp/res1.h5" "$tmp/ref.h5" >/dev/null 2>&1 &&
  [ "$(steps_of "$tmp/res1.json")" = "$(steps_of "$tmp/ref.json" | tail -3)" ]
ok $? "3 steps on 3 ranks (m and v stored once: links), resumed on 1 rank: bitwise the run never stopped"
mpirun_n 1 $base $recipe --steps 3 --decay-steps 6 --checkpoint "$tmp/c1.h5" >"$tmp/c1.log" 2>&1 &&
  mpirun_n 2 $base $recipe --checkpoint "$tmp/c1.h5" --resume auto --report "$tmp/res2.json" --save "$tmp/res2.h5" \
    >"$tmp/res2.log" 2>&1 && h5diff "$tmp/res2.h5" "$tmp/ref.h5" >/dev/null 2>&1 &&
  [ "$(steps_of "$tmp/res2.json")" = "$(steps_of "$tmp/ref.json" | tail -3)" ]
ok $? "3 steps on 1 rank, resumed on 2 ranks (the head's copy read through the links): bitwise"

# the negative controls: planted bugs the bitwise comparisons must see
PPDL_TEST_TIE=no-exchange run noex 2 $recipe
rc=$?
[ $rc = 0 ] && ! h5diff "$tmp/noex.h5" "$tmp/ref.h5" >/dev/null 2>&1
ok $? "control: 2 ranks without the exchange (PPDL_TEST_TIE=no-exchange) train (status $rc) and differ from 1 rank"
PPDL_TEST_TIE=one-buffer run onebuf 1 $recipe
rc=$?
[ $rc = 0 ] && ! h5diff "$tmp/onebuf.h5" "$tmp/r2.h5" >/dev/null 2>&1 && h5diff -d 1e-4 "$tmp/onebuf.h5" "$tmp/r2.h5" >/dev/null 2>&1
ok $? "control: 1 rank with one gradient buffer for both layers (PPDL_TEST_TIE=one-buffer) is not bitwise the 2-rank run (only close: rounding)"

# replicated stages of the tie, scale-sensitive (hybrid.sh's reasoning), within 1e-5
scale="--lr 0.05 --eps 1"
run sref 1 $scale
ok $? "1 rank, --lr 0.05 --eps 1 (the reference of the replicated plans)"
cat >"$tmp/rep-emb.json" <<'JSON'
{"stages": [{"ranks": [0, 1], "first_layer": 0, "last_layer": 1}, {"rank": 2, "first_layer": 2, "last_layer": 4}]}
JSON
cat >"$tmp/rep-head.json" <<'JSON'
{"stages": [{"rank": 0, "first_layer": 0, "last_layer": 2}, {"ranks": [1, 2], "first_layer": 3, "last_layer": 4}]}
JSON
cat >"$tmp/rep-both.json" <<'JSON'
{"stages": [{"ranks": [0, 3], "first_layer": 0, "last_layer": 1}, {"ranks": [2, 1], "first_layer": 2, "last_layer": 4}]}
JSON
for sched in 1f1b gpipe; do
  for case in "rep-emb 3" "rep-head 3" "rep-both 4"; do
    set -- $case
    run "$1-$sched" "$2" $scale --plan "$tmp/$1.json" --schedule $sched
    [ $? = 0 ] && close_to "$1-$sched" sref
    ok $? "$sched, $1 ($2 ranks: the replicas' sums, then the exchange between replicas) trains like 1 rank within 1e-5"
  done
done
run dp 2 $scale --plan dp
close_to dp sref
ok $? "data parallelism on 2 ranks (both layers on every rank, then the replicas' sums) within 1e-5 of 1 rank"
run rep-netem 3 $scale --plan "$tmp/rep-emb.json" --netem "$tmp/cluster3.json"
rc=$?
[ $rc = 0 ] && close_to rep-netem sref
ok $? "rep-emb under --netem (ring all-reduce, then the exchange through the emulated links) within 1e-5"
[ $rc = 0 ] || tail -3 "$tmp/rep-netem.log" | sed 's/^/#   /'

# memory: the cost model's tie terms and the measured peak
"$PPDL_INIT" --preset gpt-tiny --set n_layers=3 --set d_model=32 --set seq_len=16 --set tie_embeddings=0 --seed 3 \
  -o "$tmp/u.h5" >/dev/null
ubase="$tmp/u.h5 --data $tmp/g-data.h5 --steps 6 --batch-size 8 --micro-batches 4 --threads 1"
mpirun_n 1 $ubase $recipe --report "$tmp/u1.json" --save "$tmp/u1.h5" >"$tmp/u1.log" 2>&1
urc=$?
mpirun_n 3 $ubase $recipe --report "$tmp/u3.json" --save "$tmp/u3.h5" >"$tmp/u3.log" 2>&1
urc=$((urc + $?))
run r3 3 $recipe
"$PY" - "$tmp/ref.json" "$tmp/u1.json" "$tmp/r3.json" "$tmp/u3.json" $((V * C * 4)) <<'PYEOF'
import json, sys
mem = lambda p: {m["stage"]: m for m in json.load(open(p))["memory"]}
t1, u1, t3, u3, b = mem(sys.argv[1]), mem(sys.argv[2]), mem(sys.argv[3]), mem(sys.argv[4]), int(sys.argv[5])
d1 = t1[0]["cost_model_bytes"] - u1[0]["cost_model_bytes"]
d3 = [t3[s]["cost_model_bytes"] - u3[s]["cost_model_bytes"] for s in range(3)]
bad = []
if d1 != -3 * b: bad.append(f"1 rank: tied - untied cost model {d1}, expected {-3 * b}")
if d3 != [b, 0, b]: bad.append(f"3 ranks: tied - untied cost model per stage {d3}, expected {[b, 0, b]}")
for name, t in (("1 rank", t1), ("3 ranks", t3)):
    for m in t.values():
        slack = m["peak_bytes"] - m["cost_model_bytes"] - m["predicted_buffer_bytes"]
        if not 0 <= slack <= 256 * m["allocations"]:
            bad.append(f"{name} stage {m['stage']}: peak {m['peak_bytes']} - prediction = {slack}")
print("# " + ("; ".join(bad) or f"1 rank {d1:+d}, 3 ranks {d3} bytes against untied; peaks as predicted"))
sys.exit(1 if bad else 0)
PYEOF
ok $? "memory: the tie counted (1 rank: -3 V C floats; 3 ranks: +V C on the first and last stage), peaks as predicted"
[ $urc = 0 ] && h5diff "$tmp/u3.h5" "$tmp/u1.h5" >/dev/null 2>&1 && [ "$(steps_of "$tmp/u3.json")" = "$(steps_of "$tmp/u1.json")" ] &&
  ! h5ls -r "$tmp/u1.h5" | grep -q 'same as'
ok $? "untied gpt (tie_embeddings=0): 3 ranks bitwise 1 rank, two datasets in the file"
finish
