#!/bin/sh
# plan_cli.sh — ppdl-plan end to end, and the profile -> plan -> train path:
#   ppdl --costs-out profiles a real model (every recompute option costs time > 0),
#   ppdl-plan plans it for a 3-rank cluster whose rank 1 is slow and whose rank 2 is
#   short of memory, ppdl trains with that plan (--plan FILE; it may replicate a stage)
#   and gets the losses of the 1-rank run. Bad command lines and files fail with the
#   option or field named; a cluster too small says which stage is over and by how
#   much; the same input gives the same plan; --timeline draws an SVG. --shard-optimizer:
#   a model that fits no plan with the whole AdamW state on every replica fits with it
#   sharded, and replicas of different memories get slices sized to them.
. "$top_srcdir/tests/lib.sh"
PLAN=$top_builddir/ppdl-plan
make_case g gpt   # 5 layers: embedding, 3 blocks, head

# ---- the program's surface ----
"$PLAN" --help >"$tmp/help" 2>&1
ok $? "--help exits 0"
grep -q -- "--costs FILE" "$tmp/help" && grep -q "(M-1)" "$tmp/help" && grep -q "pipedream" "$tmp/help"
ok $? "--help explains the inputs, the objective and the methods"
expect_fail() {  # expect_fail "description" EXIT-STATUS "message pattern" ARGS...
  local what=$1 want=$2 pat=$3; shift 3
  "$PLAN" "$@" >"$tmp/out" 2>&1
  local rc=$?
  [ $rc = "$want" ] && grep -q -- "$pat" "$tmp/out"
  ok $? "$what (exit $rc)"
  grep -q -- "$pat" "$tmp/out" || sed 's/^/#   /' "$tmp/out" | tail -3
}

# ---- profile a real model (1 rank: rank 0 profiles at micro-batch size 16/4 = 4) ----
mpirun_n 1 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 1 --batch-size 16 --micro-batches 4 \
  --costs-out "$tmp/costs.json" --report "$tmp/r1.json" >"$tmp/p.out" 2>&1
ok $? "ppdl --costs-out profiles the model and trains"
grep -q "costs: 5 layers profiled" "$tmp/p.out" && grep -q '"recompute"' "$tmp/costs.json"
ok $? "COSTS.json written, with recompute options"
if [ -x "$PYTHON_ORACLE" ] && "$PYTHON_ORACLE" -c 'import json' 2>/dev/null; then
  # the byte counts follow from the shapes (d_model 32, seq 16, vocab 256, micro-batch
  # 4): the embedding sends [4,16,32] floats, the head keeps its input and the logits
  "$PYTHON_ORACLE" - "$tmp/costs.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
L = c["layers"]
assert c["micro_batch_size"] == 4 and len(L) == 5, c
assert [l["name"] for l in L] == ["embedding", "block", "block", "block", "head"]
for l in L:
    assert l["fwd_ms"] > 0 and l["bwd_ms"] > 0, l
    opts = l["recompute"]
    assert opts[0]["stash_bytes"] <= l["stash_bytes"] and opts[0]["extra_ms"] > 0, l   # full
    for o in opts: assert o["extra_ms"] > 0, o   # a recompute is never free
assert all(len(l["recompute"]) == 2 for l in L[1:4])                             # + selective
assert L[1]["recompute"][1]["stash_bytes"] < L[1]["stash_bytes"]
assert L[0]["out_bytes"] == 4 * 16 * 32 * 4 and L[4]["out_bytes"] == 4 * 16 * 256 * 4
assert L[4]["recompute"][0]["stash_bytes"] == 4 * 16 * 32 * 4 + L[4]["out_bytes"]
PY
  ok $? "the profiled costs: positive times, recompute options, bytes from the shapes"
else
  ok 0 "# SKIP no Python for the JSON check"
fi

expect_fail "--costs is required" 2 "costs is required" --cluster x.json --micro-batches 4
expect_fail "--micro-batches is required" 2 "micro-batches is required" --costs "$tmp/costs.json" --cluster x.json
expect_fail "an unknown method is named with the known ones" 2 "uniform-rc" --costs "$tmp/costs.json" \
  --cluster x.json --micro-batches 4 --method fastest
expect_fail "a missing cluster file is named" 1 "x.json" --costs "$tmp/costs.json" --cluster "$tmp/x.json" --micro-batches 4
echo '{"micro_batch_size": 4, "layers": [{"fwd_ms": 1, "bwd_ms": 2, "param_bytes": 4, "out_bytes": 8}]}' >"$tmp/bad.json"
expect_fail "a costs file without stash_bytes names the field" 1 "layers\[0\].stash_bytes" --costs "$tmp/bad.json" \
  --cluster x.json --micro-batches 4
# a key twice in CLUSTER.json: refused naming the file and the key, as ppdl refuses it
cat >"$tmp/dup.json" <<'JSON'
{"ranks": 2, "bandwidth_Bps": [[1e11, 1e10], [1e10, 1e11]], "latency_s": [[0, 1e-5], [1e-5, 0]],
 "mem_bytes": [1e9, 1e9], "speed": [1.0, 1.0], "speed": [1.0, 0.5]}
JSON
expect_fail "a duplicated key in the cluster file is named" 1 "dup.json: line 2: duplicate object key near '\"speed\"'" \
  --costs "$tmp/costs.json" --cluster "$tmp/dup.json" --micro-batches 4

# ---- a 3-rank cluster: rank 1 at half speed, rank 2 with little memory ----
cat >"$tmp/cluster.json" <<'JSON'
{"ranks": 3,
 "bandwidth_Bps": [[1e11, 1e10, 1e10], [1e10, 1e11, 1e10], [1e10, 1e10, 1e11]],
 "latency_s": [[0, 1e-5, 1e-5], [1e-5, 0, 1e-5], [1e-5, 1e-5, 0]],
 "mem_bytes": [1e9, 1e9, 3.2e6],
 "speed": [1.0, 0.5, 1.0]}
JSON
"$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/cluster.json" --micro-batches 4 --compare \
  --timeline "$tmp/plan.svg" >"$tmp/table" 2>&1
ok $? "ppdl-plan plans the profiled model for the cluster"
grep -q "predicted T" "$tmp/table" && grep -q "simulated T" "$tmp/table" && grep -q "pipedream-rc" "$tmp/table" &&
  grep -q "^  dp-rc " "$tmp/table" && grep -q "^  ppdl-pipeline " "$tmp/table"
ok $? "the table shows predicted and simulated T and every method in --compare"
"$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/cluster.json" --micro-batches 4 --method ppdl-pipeline >"$tmp/pipe" 2>&1 &&
  [ "$(grep -c '^ *[0-2]  *[0-2]  *[0-9]*-[0-9]' "$tmp/pipe")" = 3 ]
ok $? "ppdl-pipeline: three stages, one per rank"
grep -q "<svg" "$tmp/plan.svg" && grep -q "simulated" "$tmp/plan.svg"
ok $? "--timeline draws the simulated step as SVG"
sed 's/^/# /' "$tmp/table" | head -12

"$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/cluster.json" --micro-batches 4 --json >"$tmp/plan.json" 2>"$tmp/err"
ok $? "--json prints the plan"
"$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/cluster.json" --micro-batches 4 --json >"$tmp/plan2.json" 2>&1
cmp -s "$tmp/plan.json" "$tmp/plan2.json"
ok $? "the same input gives the same plan"
# the head cut by vocabulary (COSTS.json "vocab", which --costs-out writes for a gpt)
expect_fail "--vocab-parallel takes auto, on or off" 2 "expected auto, on or off" --costs "$tmp/costs.json" \
  --cluster "$tmp/cluster.json" --micro-batches 4 --vocab-parallel maybe
sed 's/3.2e6/1e9/' "$tmp/cluster.json" >"$tmp/roomy.json"
"$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/roomy.json" --micro-batches 4 --schedule zb-v --vocab-parallel on \
  >"$tmp/vocab.txt" 2>&1 && grep -q '"vocab": {' "$tmp/costs.json" && grep -q '"size": 256' "$tmp/costs.json" &&
  grep -q "^vocabulary parallel over 3 ranks: the head (layer 4, 256 rows)" "$tmp/vocab.txt" &&
  grep -q "^vocabulary parallel: taken (--vocab-parallel on)" "$tmp/vocab.txt"
ok $? "--vocab-parallel on: the head's 256 rows cut over the 3 ranks, and the table says so"
[ $? = 0 ] || sed 's/^/#   /' "$tmp/vocab.txt" | head -8
if [ -x "$PYTHON_ORACLE" ] && "$PYTHON_ORACLE" -c 'import json' 2>/dev/null; then
  "$PYTHON_ORACLE" - "$tmp/plan.json" "$tmp/costs.json" <<'PY'
import json, sys
p, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
st = p["stages"]
assert p["feasible"] is True and p["method"] == "ppdl", p
ranks = [r for s in st for r in s.get("ranks", [s["rank"]])]
assert sorted(ranks) == [0, 1, 2], st                   # every rank, once
assert all(s.get("ranks", [s["rank"]])[0] == s["rank"] for s in st)
assert st[0]["first_layer"] == 0 and st[-1]["last_layer"] == len(c["layers"]) - 1
assert all(len(s["recompute"]) == s["last_layer"] - s["first_layer"] + 1 for s in st)
# rank 2 has 3.2 MB: whatever it runs fits (mem_bytes is the replica closest to its limit)
for s in st:
    if 2 in s.get("ranks", [s["rank"]]): assert s["mem_bytes"] <= 3.2e6, s
    if len(s.get("ranks", [0])) > 1: assert s["allreduce_ms"] > 0, s
assert p["predicted_iter_ms"] > 0
PY
  ok $? "the plan JSON has docs/formats.md's fields, covers every layer, and respects rank 2's memory"
else
  ok 0 "# SKIP no Python for the JSON check"
fi

# ---- the plan trains, and gives the 1-rank losses ----
mpirun_n 3 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 1 --batch-size 16 --micro-batches 4 \
  --plan "$tmp/plan.json" --report "$tmp/r3.json" >"$tmp/t.out" 2>&1
ok $? "ppdl trains with the plan ppdl-plan wrote (3 ranks)"
# a replicated stage sums its gradients in another order than one rank: 1e-5 relative
# (rounding is ~1e-7; a missing or doubled replica is off by far more)
/usr/bin/python3 - "$tmp/r1.json" "$tmp/r3.json" <<'PY' 2>/dev/null || [ "$(losses "$tmp/r1.json")" = "$(losses "$tmp/r3.json")" ]
import json, sys
a = [s["loss"] for s in json.load(open(sys.argv[1]))["steps"]]
b = [s["loss"] for s in json.load(open(sys.argv[2]))["steps"]]
sys.exit(0 if len(a) == len(b) and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)) else 1)
PY
ok $? "and gets the losses of the 1-rank run"

# ---- costs of another set-up are refused ----
mpirun_n 1 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 1 --batch-size 16 --micro-batches 2 \
  --costs "$tmp/costs.json" >"$tmp/o" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "micro-batch size 4, but this run uses 8" "$tmp/o"
ok $? "ppdl --costs refuses costs profiled at another micro-batch size (exit $rc)"

# ---- the AdamW state sharded among replicas (--shard-optimizer) ----
# 2 layers of 4 MB on 4 ranks of 14.5 MB (inputs/shard-*.json): a replica of a layer
# needs 16 MB + its stash with the whole state, 8 + 8/2 = 12 MB sharded between 2 replicas
SHC=$top_srcdir/inputs/shard-costs.json SHCL=$top_srcdir/inputs/shard-cluster.json
expect_fail "--shard-optimizer off: 2 layers of 4 MB fit no plan on 4 ranks of 14.5 MB" 1 "no plan fits" \
  --costs "$SHC" --cluster "$SHCL" --micro-batches 4 --shard-optimizer off
"$PLAN" --costs "$SHC" --cluster "$SHCL" --micro-batches 4 >"$tmp/sh.out" 2>&1 &&
  grep -q "plan: 2 stages x 2 replicas" "$tmp/sh.out" && grep -q "optimizer/rank" "$tmp/sh.out" &&
  grep -q "3.8 MiB .*sharded\|sharded among the stage's replicas" "$tmp/sh.out" && ! grep -q OVER "$tmp/sh.out"
ok $? "--shard-optimizer on (the default): 2 stages x 2 replicas fit, each replica holding half of m and v"
sed 's/^/#   /' "$tmp/sh.out" | grep -E -e "stage  ranks" -e '^# +[01] +[0-9],'
# one layer on 2 ranks of 11.5 and 23 MB: m and v in equal halves do not fit the first,
# in slices sized to each rank's memory they do (slice_weights in the plan)
/usr/bin/python3 - "$SHC" "$SHCL" "$tmp/het-costs.json" "$tmp/het-cluster.json" <<'PY'
import json, sys
c, cl = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
c["layers"] = c["layers"][:1]
json.dump(c, open(sys.argv[3], "w"))
cl = {"ranks": 2, "bandwidth_Bps": [[1e9, 1e9], [1e9, 1e9]], "latency_s": [[0, 1e-5], [1e-5, 0]],
      "mem_bytes": [11.5e6, 23e6], "speed": [1, 1]}
json.dump(cl, open(sys.argv[4], "w"))
PY
"$PLAN" --costs "$tmp/het-costs.json" --cluster "$tmp/het-cluster.json" --micro-batches 2 --json >"$tmp/het.json" &&
  /usr/bin/python3 - "$tmp/het.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
st = p["stages"][0]
ob = st["optimizer_bytes"]
assert p["shard_optimizer"] is True and p["feasible"] and len(st["slice_weights"]) == 2, p
assert ob[0] < 4e6 < ob[1] and ob[0] + ob[1] == 8e6, ob  # equal halves would be 4 MB each
PY
ok $? "replicas of 2x different memories: slices sized to each (slice_weights), the smaller one under half"
expect_fail "--shard-optimizer takes on or off" 2 "shard-optimizer maybe: expected on or off" \
  --costs "$SHC" --cluster "$SHCL" --micro-batches 4 --shard-optimizer maybe

# ---- a cluster too small for the model ----
sed 's/3.2e6/1e5/; s/\[1e9, 1e9/[1e5, 1e5/' "$tmp/cluster.json" >"$tmp/tiny.json"
expect_fail "a cluster too small: the stage and the bytes over are named" 1 "over its limit" \
  --costs "$tmp/costs.json" --cluster "$tmp/tiny.json" --micro-batches 4
grep -q "stage [0-2] (layers" "$tmp/out"
ok $? "the message says which stage and which layers"
"$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/tiny.json" --micro-batches 4 --json 2>/dev/null | grep -q '"feasible": false'
ok $? "--json still prints the least-over plan, marked infeasible"
finish
