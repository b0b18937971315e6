#!/bin/sh
# plan_trials.sh — --plan-trials: where ranks share cores, --plan auto measures the
# planner's choice and a few other plans for a few steps each and trains the fastest:
#   - the report lists every candidate measured (the planner's choice first), exactly
#     one taken, and it is the least measured step; the plan that runs is the taken
#     one; the header says so and the timing line counts the trials;
#   - the trials change no bit: the same losses and saved weights as the taken plan
#     run from its --plan-out file with no trials, from the start and resumed from a
#     checkpoint;
#   - 0 runs none; the default runs none where they would cost more than their budget
#     (costs made 1000x slower: the skip is said, with what they would take);
#   - --plan-trials 1 and --plan-trials with --plan uniform are refused (status 2).
# Shared cores on any machine: a CLUSTER.json of this job with 1 core on its host.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "needs /usr/bin/python3 to read the reports"
command -v h5diff >/dev/null 2>&1 || skip_all "needs h5diff to compare the saved weights"
make_case g gpt
common="$tmp/g.h5 --data $tmp/g-data.h5 --batch-size 8 --micro-batches 4 --threads 1"

# this job's network, its host said to have 1 core: 3 ranks share it
mpirun_n 3 $common --probe-only --cluster-out "$tmp/c.json" >"$tmp/probe.log" 2>&1
"$PY" - "$tmp/c.json" "$tmp/c1.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
for h in c["hosts"]: h["cores"] = 1
json.dump(c, open(sys.argv[2], "w"))
PYEOF
ok $? "a CLUSTER.json of 3 ranks on a host of 1 core"

# ---- the trials: every candidate measured, the fastest taken and run ----
mpirun_n 3 $common --steps 4 --cluster "$tmp/c1.json" --plan-trials 3 --report "$tmp/t.json" \
  --plan-out "$tmp/tp.json" --save "$tmp/tw.h5" >"$tmp/t.log" 2>&1
rc=$?
ok $rc "3 ranks on 1 core, --plan-trials 3: trains"
[ $rc = 0 ] || sed 's/^/#   /' "$tmp/t.log" | tail -5
"$PY" - "$tmp/t.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1])); pl = r["planning"]; tr = pl.get("trials", [])
taken = [t for t in tr if t["taken"]]
ms = [t["measured_ms"] for t in tr]
for t in tr: print(f"# {t['kind']} ({t['candidate']}): simulated {t['simulated_ms']:.2f}, measured {t['measured_ms']:.2f} ms{' (taken)' if t['taken'] else ''}")
ok = (2 <= len(tr) <= 3 and len(taken) == 1 and all(m is not None and m > 0 for m in ms)
      and taken[0]["measured_ms"] == min(ms) and taken[0]["kind"] == pl["kind"] and pl["trials_s"] > 0)
sys.exit(0 if ok else 1)
PYEOF
ok $? "the report: 2-3 candidates measured, exactly one taken, the least measured step, and it is the plan that ran"
grep -qE "^plan trials: (.* measured fastest \([0-9.]+ ms a step\) and runs; the planner's choice, .*, measured [0-9.]+ ms|the planner's choice measured fastest of [0-9] \([0-9.]+ ms a step\))$" "$tmp/t.log" &&
  grep -qE "^planned in [0-9.]+ s: probe skipped \(--cluster .*\), profile [0-9.]+ s, solve [0-9.]+ s, trials [0-9.]+ s$" "$tmp/t.log" &&
  grep -qE "^plan trials \(ranks share cores: [23] candidates, 2 x 6 steps each, in [0-9.]+ s\):" "$tmp/t.log"
ok $? "the lines: each candidate's steps, the one taken, and the trials' time in the timing line"
grep "^plan trials" "$tmp/t.log" | sed 's/^/# /'

# ---- no bit changed: the taken plan from its file, no trials ----
mpirun_n 3 $common --steps 4 --plan "$tmp/tp.json" --report "$tmp/p.json" --save "$tmp/pw.h5" >"$tmp/p.log" 2>&1 &&
  [ -n "$(losses "$tmp/t.json")" ] && [ "$(losses "$tmp/p.json")" = "$(losses "$tmp/t.json")" ] &&
  h5diff "$tmp/tw.h5" "$tmp/pw.h5" >/dev/null 2>&1 && ! grep -q "^plan trials" "$tmp/p.log"
ok $? "the trials change no bit: the taken plan's --plan-out run alone gives the same losses and weights"

# ... and resumed: trials from a checkpoint, against the taken plan resumed alone
mpirun_n 3 $common --steps 2 --plan "$tmp/tp.json" --checkpoint "$tmp/ck.h5" >"$tmp/ck.log" 2>&1 &&
  mpirun_n 3 $common --steps 4 --resume "$tmp/ck.h5" --cluster "$tmp/c1.json" --plan-trials 3 \
    --plan-out "$tmp/tq.json" --report "$tmp/rq.json" >"$tmp/rq.log" 2>&1 &&
  mpirun_n 3 $common --steps 4 --resume "$tmp/ck.h5" --plan "$tmp/tq.json" --report "$tmp/rr.json" >"$tmp/rr.log" 2>&1 &&
  grep -q "^plan trials" "$tmp/rq.log" && [ "$(losses "$tmp/rq.json" | wc -l)" = 2 ] &&
  [ "$(losses "$tmp/rq.json")" = "$(losses "$tmp/rr.json")" ]
ok $? "resumed from a checkpoint with trials: the same losses as the taken plan resumed alone"

# ---- none ----
mpirun_n 3 $common --steps 2 --cluster "$tmp/c1.json" --plan-trials 0 --report "$tmp/n.json" >"$tmp/n.log" 2>&1 &&
  ! grep -q "^plan trials" "$tmp/n.log" && grep -q "^ranks share cores" "$tmp/n.log" &&
  "$PY" -c 'import json, sys; p = json.load(open(sys.argv[1]))["planning"]; sys.exit(0 if p["trials_s"] is None and "trials" not in p else 1)' "$tmp/n.json"
ok $? "--plan-trials 0: none (the planner's choice runs)"

# ---- the default's budget: trials that would take too long are skipped, and said ----
mpirun_n 1 $common --steps 0 --costs-out "$tmp/costs.json" >"$tmp/co.log" 2>&1
"$PY" - "$tmp/costs.json" "$tmp/slow.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
for l in c["layers"]:
    for k, v in list(l.items()):
        if k.endswith("_ms") and isinstance(v, (int, float)): l[k] = v * 1000
        if k.endswith("_ms") and isinstance(v, list): l[k] = [x * 1000 for x in v]
json.dump(c, open(sys.argv[2], "w"))
PYEOF
mpirun_n 3 $common --steps 2 --cluster "$tmp/c1.json" --costs "$tmp/slow.json" --report "$tmp/s.json" >"$tmp/s.log" 2>&1 &&
  grep -qE "^plan trials skipped: [2-4] candidates x 2 x 6 steps would take ~[0-9.]+ s, over the budget of [0-9.]+ s \(--plan-trials [2-4] runs them anyway\)$" "$tmp/s.log" &&
  "$PY" -c 'import json, sys; p = json.load(open(sys.argv[1]))["planning"]; sys.exit(0 if p["trials_s"] is None and p["trials_skipped"].startswith("plan trials skipped") else 1)' "$tmp/s.json"
ok $? "the default skips trials over its budget, and says so: $(grep '^plan trials skipped' "$tmp/s.log")"
mpirun_n 3 $common --steps 2 --cluster "$tmp/c1.json" >"$tmp/d.log" 2>&1 && grep -q "^plan trials (" "$tmp/d.log"
ok $? "the default runs them where they are cheap (this model: $(grep -o 'in [0-9.]* s)' "$tmp/d.log" | tr -d ')'))"

# ---- refused ----
mpirun_n 3 $common --steps 2 --plan-trials 1 >"$tmp/e1.log" 2>&1
[ $? = 2 ] && grep -q "ppdl: --plan-trials 1: expected 0 (none) or the candidate plans to measure, 2 to 8" "$tmp/e1.log"
ok $? "--plan-trials 1: refused, status 2: $(grep -o 'ppdl: .*' "$tmp/e1.log" | head -1)"
mpirun_n 3 $common --steps 2 --plan uniform --plan-trials 2 >"$tmp/e2.log" 2>&1
[ $? = 2 ] && grep -q "ppdl: --plan-trials 2: only --plan auto takes it" "$tmp/e2.log"
ok $? "--plan-trials with --plan uniform: refused, status 2"
finish
