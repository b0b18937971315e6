#!/bin/sh
# default_plan.sh — without --plan, ppdl plans by itself on 2 or more ranks:
#   - 1 rank: the trivial plan ("plan (uniform): one stage"), nothing probed, profiled
#     or solved (no timing line);
#   - 2 and 3 ranks: --plan auto: the table names the plan's kind, one line says how
#     long the probe, the profile and the solve took, and it trains like 1 rank (losses
#     within 1e-5: a replicated stage sums its gradients in another order; bitwise
#     where the plan has no replicas);
#   - --plan-out writes the plan that ran; --plan FILE runs exactly it again (same
#     stages, ranks, recompute) with nothing probed, profiled or solved, and the timing
#     line says so; --costs and --cluster skip the profile and the probe, and say so;
#     --plan-out with --plan uniform writes the uniform plan;
#   - more ranks than cores (4 ranks where the machine has fewer than 4 cores): one
#     warning line naming the host and its cores, and the plan was chosen by the
#     simulated step ("ranks share cores ..."); no warning on 2 ranks where there are 2
#     or more cores (the control);
#   - the probe's memory contention (CLUSTER.json hosts[].memory_contention): absent
#     (1) or in 1..64, printed where written; a CLUSTER.json with 3 on the host makes
#     data parallelism's predicted step longer by 2 x the profiled optimizer steps (every
#     rank updates every layer; 0 on the diagonal keeps the all-reduce's links), and one
#     with 1 gives the file without it.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "needs /usr/bin/python3 to read the reports and plans"
make_case g gpt
common="$tmp/g.h5 --data $tmp/g-data.h5 --steps 3 --batch-size 8 --micro-batches 4 --threads 1"
cores=$(getconf _NPROCESSORS_ONLN)
# plan_key PLAN.json|REPORT.json: the stages (ranks, layers, recompute) of a plan or a report's plan
plan_key() {
  "$PY" -c '
import json, sys
p = json.load(open(sys.argv[1])); p = p.get("plan", p)
print([(s.get("ranks", [s["rank"]]), s["first_layer"], s["last_layer"], s["recompute"]) for s in p["stages"]])' "$1"
}
# near A.json B.json: losses within 1e-5 relative
near() {
  "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
a = [s["loss"] for s in json.load(open(sys.argv[1]))["steps"]]
b = [s["loss"] for s in json.load(open(sys.argv[2]))["steps"]]
sys.exit(0 if len(a) == len(b) == 3 and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b)) else 1)
PYEOF
}

# ---- 1 rank: nothing to plan ----
mpirun_n 1 $common --report "$tmp/r1.json" >"$tmp/r1.log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "^plan (uniform): one stage" "$tmp/r1.log" && ! grep -q "planned in\|^costs:" "$tmp/r1.log"
ok $? "1 rank, no --plan: the trivial plan, nothing probed, profiled or solved"
[ $rc = 0 ] || sed 's/^/#   /' "$tmp/r1.log" | tail -5

# ---- 2 and 3 ranks: --plan auto by default ----
for n in 2 3; do
  mpirun_n $n $common --report "$tmp/a$n.json" --plan-out "$tmp/plan$n.json" >"$tmp/a$n.log" 2>&1
  rc=$?
  ok $rc "$n ranks, no --plan: trains"
  [ $rc = 0 ] || sed 's/^/#   /' "$tmp/a$n.log" | tail -5
  grep -E "^plan \(auto \(ppdl\)\): (data parallel x [0-9]|pipeline, [0-9] stages|[0-9] stages)" "$tmp/a$n.log" |
    sed 's/^/# /'
  grep -qE "^planned in [0-9.]+ s: probe [0-9.]+ s, profile [0-9.]+ s, solve [0-9.]+ s(, trials [0-9.]+ s)?$" "$tmp/a$n.log" &&
    grep -qE "^plan \(auto \(ppdl\)\): (data parallel x [0-9]|pipeline, [0-9] stages|[0-9] stages)" "$tmp/a$n.log"
  ok $? "$n ranks: the plan's kind and how long the probe, the profile and the solve took: $(grep '^planned in' "$tmp/a$n.log")"
  near "$tmp/a$n.json" "$tmp/r1.json"
  ok $? "$n ranks: the losses of 1 rank (within 1e-5)"
  [ "$(plan_key "$tmp/plan$n.json" 2>&1)" = "$(plan_key "$tmp/a$n.json" 2>&1)" ]
  ok $? "$n ranks: --plan-out wrote the plan that ran: $(plan_key "$tmp/plan$n.json" 2>&1)"
done

# ---- --plan FILE: the same plan, nothing probed, profiled or solved ----
probe_for_report=1   # the probe this run makes for its --report, not lib.sh's cluster file
mpirun_n 3 $common --plan "$tmp/plan3.json" --report "$tmp/f3.json" >"$tmp/f3.log" 2>&1
rc=$?
probe_for_report=0
[ $rc = 0 ] && [ "$(plan_key "$tmp/f3.json")" = "$(plan_key "$tmp/a3.json")" ] &&
  grep -qE "^plan read from $tmp/plan3.json: nothing solved; probe [0-9.]+ s \(for --report or --cluster-out\), no profile$" "$tmp/f3.log" &&
  ! grep -q "^costs:" "$tmp/f3.log" && [ "$(losses "$tmp/f3.json")" = "$(losses "$tmp/a3.json")" ]
ok $? "--plan FILE of --plan-out: the same plan and losses; nothing profiled or solved (the probe only for --report): $(grep '^plan read' "$tmp/f3.log")"
[ $rc = 0 ] || sed 's/^/#   /' "$tmp/f3.log" | tail -5

# ---- --costs and --cluster skip the profile and the probe ----
mpirun_n 2 $common --costs-out "$tmp/costs.json" --cluster-out "$tmp/cluster.json" >"$tmp/out.log" 2>&1
ok $? "2 ranks with --costs-out and --cluster-out"
mpirun_n 2 $common --costs "$tmp/costs.json" --cluster "$tmp/cluster.json" >"$tmp/in.log" 2>&1
rc=$?
[ $rc = 0 ] && grep -qE "^planned in [0-9.]+ s: probe skipped \(--cluster $tmp/cluster.json\), profile skipped \(--costs $tmp/costs.json\), solve [0-9.]+ s(, trials [0-9.]+ s)?$" "$tmp/in.log" &&
  ! grep -q "^costs:\|probed in" "$tmp/in.log"
ok $? "--costs and --cluster: no profile and no probe, and the timing line says so: $(grep '^planned in' "$tmp/in.log")"

# ---- a plan file's prediction: predicted again for this run, or plainly none ----
mpirun_n 2 $common --costs "$tmp/costs.json" --cluster "$tmp/cluster.json" --plan-out "$tmp/p2.json" \
  --report "$tmp/p2r.json" >"$tmp/p2.log" 2>&1
file_ms=$("$PY" -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["predicted_iter_ms"])' "$tmp/p2.json" 2>/dev/null)
mpirun_n 2 $common --plan "$tmp/p2.json" --micro-batches 2 >"$tmp/stale.log" 2>&1 &&
  grep -q "^predicted step: none for this run (the file's $file_ms ms was for the costs, network and micro-batches it was made with): give --costs" "$tmp/stale.log" &&
  ! grep -q "by the simulator\|by the cost model" "$tmp/stale.log"
ok $? "--plan FILE without this run's costs and network: no stale prediction shown as this run's, and why ($file_ms ms was the file's)"
mpirun_n 2 $common --plan "$tmp/p2.json" --costs "$tmp/costs.json" --cluster "$tmp/cluster.json" >"$tmp/again.log" 2>&1 &&
  grep -qE "^predicted step: $file_ms ms by the cost model, [0-9.]+ ms by the simulator" "$tmp/again.log" &&
  grep -q "predicted again for this run, from $tmp/costs.json and $tmp/cluster.json" "$tmp/again.log" &&
  ! grep -qE "by the simulator \(bottleneck 0(\.0+)? ms" "$tmp/again.log" && ! grep -q " 0.00 ms by the simulator" "$tmp/again.log"
ok $? "--plan FILE with --costs and --cluster: predicted again by the cost model and the simulator: $(grep '^predicted step' "$tmp/again.log")"

# ---- --plan-out of another plan ----
mpirun_n 2 $common --plan uniform --plan-out "$tmp/uni.json" >"$tmp/uni.log" 2>&1 &&
  [ "$(plan_key "$tmp/uni.json")" = "[([0], 0, 2, [0, 0, 0]), ([1], 3, 4, [0, 0])]" ] && ! grep -q "planned in" "$tmp/uni.log"
ok $? "--plan uniform --plan-out: the uniform plan written ($(plan_key "$tmp/uni.json" 2>&1)), nothing planned"

# ---- more ranks than cores ----
if [ "$cores" -lt 4 ]; then
  mpirun_n 4 $common >"$tmp/a4.log" 2>&1
  rc=$?
  [ $rc = 0 ] && [ "$(grep -c "^warning: 4 ranks share the $cores cores\? of host" "$tmp/a4.log")" = 1 ] &&
    grep -q "^ranks share cores (4 ranks on a host of $cores cores\?): of [0-9]* candidate plans" "$tmp/a4.log"
  ok $? "4 ranks on $cores cores: one warning line, and the plan chosen by the simulated step"
  grep "^warning\|^ranks share" "$tmp/a4.log" | sed 's/^/# /'
else
  skip_ok "4 ranks on fewer cores: the warning" "this machine has $cores cores"
fi
# ---- the memory contention ----
mpirun_n 2 $common --probe-only --cluster-out "$tmp/mc.json" >"$tmp/mc.log" 2>&1 &&
  "$PY" - "$tmp/mc.json" "$tmp/mc.log" <<'PYEOF'
import json, sys
hosts = json.load(open(sys.argv[1]))["hosts"]
log = open(sys.argv[2]).read()
for h in hosts:
    c = h.get("memory_contention")
    if c is None: continue
    import re
    shown = re.findall(r"host \S+: memory contention ([0-9.]+)", log)
    # the file keeps 4 digits, the table 2 decimals of the full value
    if not (1 <= c <= 64) or not any(abs(float(x) - c) <= 0.0051 for x in shown): sys.exit(1)
    print(f"# host {h['name']}: memory contention {c}")
PYEOF
ok $? "the probe's memory contention: absent or 1..64, and printed"
mpirun_n 1 $common --steps 0 --costs-out "$tmp/mc-costs.json" >"$tmp/mc1.log" 2>&1
"$PY" - "$tmp/mc.json" "$tmp/mc-costs.json" "$tmp" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); out = sys.argv[3]
# no memcpy rate on the diagonal: the all-reduce keeps its link's bandwidth, and the
# contention moves the optimizer's step alone
for i, row in enumerate(c["bandwidth_Bps"]): row[i] = 0
for f in (1, 3):
    for h in c["hosts"]: h["memory_contention"] = f
    json.dump(c, open(f"{out}/mc{f}.json", "w"))
for h in c["hosts"]: del h["memory_contention"]
json.dump(c, open(f"{out}/mc0.json", "w"))
opt = sum(l.get("optimizer_ms", 0) for l in json.load(open(sys.argv[2]))["layers"])
open(f"{out}/mc-opt", "w").write(repr(opt))
PYEOF
# the whole AdamW state on every replica (--shard-optimizer off): each updates all of it;
# sharded (the default) each of the k replicas updates its slice, 1/k of the step
k=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["ranks"])' "$tmp/mc0.json")
for sh in off on; do
  for f in 0 1 3; do
    "$top_builddir/ppdl-plan" --costs "$tmp/mc-costs.json" --cluster "$tmp/mc$f.json" --micro-batches 4 --method dp \
      --shard-optimizer $sh >"$tmp/mcp$f.log" 2>&1
  done
  t0=$(sed -n 's/^predicted T *\([0-9.]*\) ms.*/\1/p' "$tmp/mcp0.log")
  t1=$(sed -n 's/^predicted T *\([0-9.]*\) ms.*/\1/p' "$tmp/mcp1.log")
  t3=$(sed -n 's/^predicted T *\([0-9.]*\) ms.*/\1/p' "$tmp/mcp3.log")
  div=1; [ $sh = on ] && div=$k
  "$PY" -c 'import sys; t0, t1, t3, o, d = map(float, sys.argv[1:]); sys.exit(0 if o > 0 and t0 == t1 and abs(t3 - t1 - 2 * o / d) <= 2e-3 + 1e-6 * t3 else 1)' \
    "${t0:-0}" "${t1:-0}" "${t3:-0}" "$(cat "$tmp/mc-opt" 2>/dev/null || echo 0)" "$div"
  ok $? "ppdl-plan --method dp --shard-optimizer $sh: contention 3 on the host adds 2 x the optimizer step / $div ($t1 -> $t3 ms; optimizer $(cat "$tmp/mc-opt" 2>/dev/null) ms on $k ranks), 1 is the file without it ($t0)"
done

if [ "$cores" -ge 2 ]; then
  ! grep -q "^warning: .*share\|^ranks share cores" "$tmp/a2.log"
  ok $? "2 ranks on $cores cores: no warning, no choice on shared cores (the control)"
else
  skip_ok "2 ranks on 2 or more cores: no warning" "this machine has $cores core"
fi
finish
