#!/bin/sh
# options_effect.sh — options that were documented but never exercised for what they
# do, each checked by its observable effect:
#   --wait yield|block     the header names the wait; the training's bits do not change
#   --beta1/--beta2        change the training (other losses than the defaults') and
#                          match PyTorch's AdamW with the same betas (scale-sensitive
#                          oracle: --eps 1, tests/oracle/torch_step.py)
#   --plan auto --method   the plan ppdl runs is the named method's, as ppdl-plan
#                          --method gives it for the run's costs and cluster
#   --backend auto         the default: CUDA when this build has it and the rank sees a
#                          usable GPU (test_backend_ops.t --probe says), else the CPU,
#                          and the header says which and why
#   ppdl-plan --exact-ranks / --exact-layouts (4 ranks, 2 fast-linked pairs)
#                          below the thresholds the searches are exact ("optimal"),
#                          above them the heuristics run (the header says which)
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
PLAN=$top_builddir/ppdl-plan
make_case m mlp
common="$tmp/m.h5 --data $tmp/m-data.h5 --steps 3 --batch-size 8 --micro-batches 4 --threads 1"

# ---- --wait ----
for w in yield block; do
  mpirun_n 2 $common --plan uniform --wait $w --report "$tmp/w-$w.json" >"$tmp/w-$w.log" 2>&1
  ok $? "--wait $w: 2 ranks train"
done
grep -q "yielding wait" "$tmp/w-yield.log" && grep -q "blocking wait" "$tmp/w-block.log"
ok $? "--wait: the header says which wait ran (yielding, blocking)"
[ -n "$(losses "$tmp/w-yield.json")" ] && [ "$(losses "$tmp/w-yield.json")" = "$(losses "$tmp/w-block.json")" ]
ok $? "--wait: the same losses, bit for bit, either way"

# ---- --backend auto (the default) ----
why=$("$top_builddir/tests/unit/test_backend_ops.t" --probe 2>&1)
if [ $? = 0 ]; then want="backend cuda (--backend auto: a usable GPU on every rank)"; else want="backend cpu (--backend auto: $why)"; fi
mpirun_n 1 $common --steps 1 >"$tmp/auto.log" 2>&1
rc=$?
[ $rc = 0 ] && grep -qxF "$want" "$tmp/auto.log"
ok $? "no --backend: auto, and the header says so ($want)"
[ $rc = 0 ] || sed 's/^/#   /' "$tmp/auto.log" | tail -3
mpirun_n 1 $common --steps 1 --backend tpu >"$tmp/tpu.log" 2>&1
[ $? != 0 ] && grep -q "backend tpu: expected auto, cpu or cuda" "$tmp/tpu.log"
ok $? "--backend tpu: refused, naming the choices"

# ---- --beta1 / --beta2 ----
mpirun_n 1 $common --micro-batches 2 --lr 0.05 --eps 1 --report "$tmp/b0.json" >/dev/null 2>&1
mpirun_n 1 $common --micro-batches 2 --lr 0.05 --eps 1 --beta1 0.5 --beta2 0.9 --report "$tmp/b1.json" \
  --save "$tmp/b1.h5" >"$tmp/b1.log" 2>&1
ok $? "--beta1 0.5 --beta2 0.9: trains"
[ "$(losses "$tmp/b0.json" | tail -1)" != "$(losses "$tmp/b1.json" | tail -1)" ]
ok $? "--beta1/--beta2 change the training (the last loss differs from the default betas')"
if "$PYTHON_ORACLE" -c 'import torch, h5py' 2>/dev/null; then
  "$PYTHON_ORACLE" "$top_srcdir/tests/oracle/torch_step.py" "$tmp/m.h5" "$tmp/m-data.h5" "$tmp/b1.json" "$tmp/b1.h5" \
    --batch-size 8 --steps 3 --lr 0.05 --eps 1 --beta1 0.5 --beta2 0.9 >"$tmp/b1.tap" 2>&1
  ok $? "--beta1 0.5 --beta2 0.9: PyTorch's AdamW with the same betas gives the same losses and weights"
  grep 'weights' "$tmp/b1.tap" | sed 's/^/# /'
else
  skip_ok "--beta1/--beta2 against PyTorch" "$PYTHON_ORACLE has no torch and h5py"
fi

# ---- --plan auto --method ----
for method in uniform dp; do
  mpirun_n 2 $common --plan auto --method $method --costs-out "$tmp/c-$method.json" \
    --cluster-out "$tmp/cl-$method.json" --report "$tmp/p-$method.json" >"$tmp/p-$method.log" 2>&1
  ok $? "--plan auto --method $method: trains"
  "$PLAN" --costs "$tmp/c-$method.json" --cluster "$tmp/cl-$method.json" --micro-batches 4 --method $method \
    --json >"$tmp/pp-$method.json" 2>"$tmp/pp-$method.err"
  "$PY" - "$tmp/p-$method.json" "$tmp/pp-$method.json" "$method" <<'PYEOF'
import json, sys
key = lambda p: [(s.get("ranks", [s["rank"]]), s["first_layer"], s["last_layer"], s["recompute"]) for s in p["stages"]]
ran = json.load(open(sys.argv[1]))["plan"]
planned = json.load(open(sys.argv[2]))
print("# ran %s (%s); ppdl-plan --method %s: %s" % (key(ran), ran["method"], sys.argv[3], key(planned)))
sys.exit(not (ran["method"] == "auto (%s)" % sys.argv[3] and key(ran) == key(planned)))
PYEOF
  ok $? "--plan auto --method $method: ppdl ran the $method plan ppdl-plan gives, and the report names it"
done

# ---- ppdl-plan --exact-ranks / --exact-layouts ----
"$PY" - "$tmp/cl5.json" <<'PYEOF'
import json, sys
n = 4
same = lambda i, j: i // 2 == j // 2
json.dump({"ranks": n, "bandwidth_Bps": [[5e10 if i == j else (2e10 if same(i, j) else 1e9) for j in range(n)] for i in range(n)],
           "latency_s": [[0 if i == j else (2e-6 if same(i, j) else 2e-5) for j in range(n)] for i in range(n)],
           "mem_bytes": [2 ** 30] * n, "speed": [1.0] * n}, open(sys.argv[1], "w"))
PYEOF
head_of() { "$PLAN" --costs "$tmp/c-uniform.json" --cluster "$tmp/cl5.json" --micro-batches 8 "$@" 2>&1 | sed -n 2p; }
h=$(head_of --method ppdl-pipeline) hl=$(head_of --method ppdl)
echo "$h" | grep -q "placement exact" && echo "$hl" | grep -q "every layout of replicated stages"
ok $? "4 ranks, the default thresholds: exact placement ($h) and every layout ($hl)"
h=$(head_of --method ppdl-pipeline --exact-ranks 3)
echo "$h" | grep -q "placement heuristic" && ! echo "$h" | grep -q "(optimal)"
ok $? "--exact-ranks 3 on 4 ranks: the placement heuristic runs, no optimality claimed ($h)"
h=$(head_of --method ppdl --exact-layouts 3)
echo "$h" | grep -q "candidate layouts" && ! echo "$h" | grep -q "(optimal)"
ok $? "--exact-layouts 3 on 4 ranks: candidate layouts and local moves, no optimality claimed ($h)"
finish
