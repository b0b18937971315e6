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
#   - --plan F1,F2,...: the files measured against each other (--trial-passes times),
#     the fastest trains, bitwise as that file alone; --trial-passes with auto;
#   - --plan-trials 1 and --plan-trials with --plan uniform are refused (status 2), as
#     are plan files under a chunked schedule, 9 of them, one with more replicas than
#     micro-batches (named, before any trial), and --trial-passes without trials or out
#     of range.
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
# ... and where only some fit, the first of them: --steps set so that exactly k = n-1
# fit the budget (0.05 x 2 x the first's simulated step x the steps) by the slowed
# costs' simulated steps; a time limit ends the long run early
mpirun_n 3 $common --steps 0 --cluster "$tmp/c1.json" --costs "$tmp/slow.json" --plan-trials 4 \
  --report "$tmp/s4.json" >"$tmp/s4.log" 2>&1
want=$("$PY" - "$tmp/s4.json" <<'PYEOF'
import json, math, sys
sims = [t["simulated_ms"] for t in json.load(open(sys.argv[1]))["planning"]["trials"]]
n = len(sims); k = n - 1
if k < 2: sys.exit(1)
steps = math.ceil(2 * k * 2 * 6 * max(sims[:k]) / (0.05 * 2 * sims[0])) + 1
print(n, k, steps)
PYEOF
)
ok $? "the slowed costs' candidates: 3 or more ($want: candidates, to fit, steps)"
set -- $want
mpirun_n 3 $common --steps "${3:-1000}" --cluster "$tmp/c1.json" --costs "$tmp/slow.json" --time-limit 6s \
  --checkpoint "$tmp/tl.h5" --report "$tmp/s3.json" >"$tmp/s3.log" 2>&1
grep -qE "^plan trials: the first ${2:-x} of ${1:-x} candidates within the budget of [0-9.]+ s \(all ${1:-x}: ~[0-9.]+ s; --plan-trials ${1:-x} runs them anyway\)$" "$tmp/s3.log" &&
  grep -qE "^plan trials \(ranks share cores: ${2:-x} candidates, 2 x 6 steps each" "$tmp/s3.log" &&
  "$PY" -c 'import json, sys; p = json.load(open(sys.argv[1]))["planning"]; sys.exit(0 if len(p["trials"]) == int(sys.argv[2]) and p["trials_note"].startswith("plan trials: the first") else 1)' "$tmp/s3.json" "${2:-0}"
ok $? "over the budget for all but not for the first ${2:-?}: those are measured, and it says so"
mpirun_n 3 $common --steps 2 --cluster "$tmp/c1.json" >"$tmp/d.log" 2>&1 && grep -q "^plan trials (" "$tmp/d.log"
ok $? "the default runs them where they are cheap (this model: $(grep -o 'in [0-9.]* s)' "$tmp/d.log" | tr -d ')'))"

# ---- plan files measured against each other: the fastest trains ----
mpirun_n 3 $common --steps 0 --plan dp --plan-out "$tmp/dp.json" >"$tmp/dp.log" 2>&1 &&
  mpirun_n 3 $common --steps 0 --plan uniform --plan-out "$tmp/u.json" >"$tmp/u.log" 2>&1
ok $? "plan files of --plan dp and --plan uniform (--plan-out)"
mpirun_n 3 $common --steps 4 --plan "$tmp/u.json,$tmp/dp.json" --trial-passes 3 --report "$tmp/f.json" \
  --plan-out "$tmp/fp.json" --save "$tmp/fw.h5" >"$tmp/f.log" 2>&1
rc=$?
ok $rc "--plan u.json,dp.json --trial-passes 3: trains"
[ $rc = 0 ] || sed 's/^/#   /' "$tmp/f.log" | tail -5
"$PY" - "$tmp/f.json" <<'PYEOF'
import json, sys
pl = json.load(open(sys.argv[1]))["planning"]; tr = pl.get("trials", [])
for t in tr: print(f"# {t['candidate']}: {t['kind']}, measured {t['measured_ms']:.2f} ms{' (taken)' if t['taken'] else ''}")
taken = [t for t in tr if t["taken"]]
ok = ([t["candidate"] for t in tr] == ["u.json", "dp.json"] and all(t["simulated_ms"] is None for t in tr)
      and len(taken) == 1 and taken[0]["measured_ms"] == min(t["measured_ms"] for t in tr)
      and taken[0]["kind"] == pl["kind"] and pl["mode"] == "file" and pl["trials_s"] > 0)
sys.exit(0 if ok else 1)
PYEOF
ok $? "the report: both files measured (labelled by name, no simulated step), the least measured taken and run"
grep -qE "^plan trials \(plan files: 2 candidates, 3 x 6 steps each, in [0-9.]+ s\): .* \[u.json\].*; .* \[dp.json\]" "$tmp/f.log" &&
  grep -qE "^plan trials: (u|dp).json \(.*\) measured fastest of 2 plan files \([0-9.]+ ms a step\) and runs$" "$tmp/f.log" &&
  grep -qE "^plan read from .*u.json,.*dp.json: nothing solved; .*, trials [0-9.]+ s$" "$tmp/f.log"
ok $? "the lines: 3 passes of each file, the one taken, the trials' time"
taken=$("$PY" -c 'import json, sys; print([t["candidate"] for t in json.load(open(sys.argv[1]))["planning"]["trials"] if t["taken"]][0])' "$tmp/f.json")
mpirun_n 3 $common --steps 4 --plan "$tmp/$taken" --report "$tmp/fa.json" --save "$tmp/faw.h5" >"$tmp/fa.log" 2>&1 &&
  [ -n "$(losses "$tmp/f.json")" ] && [ "$(losses "$tmp/fa.json")" = "$(losses "$tmp/f.json")" ] &&
  h5diff "$tmp/fw.h5" "$tmp/faw.h5" >/dev/null 2>&1 &&
  "$PY" -c '
import json, sys
st = lambda f: [(s.get("ranks", [s.get("rank")]), s["first_layer"], s["last_layer"], s["recompute"]) for s in json.load(open(f))["stages"]]
sys.exit(0 if st(sys.argv[1]) == st(sys.argv[2]) else 1)' "$tmp/fp.json" "$tmp/$taken"
ok $? "no bit changed: $taken alone gives the same losses and weights, and --plan-out wrote its stages"
mpirun_n 3 $common --steps 1 --cluster "$tmp/c1.json" --plan-trials 2 --trial-passes 3 >"$tmp/a3.log" 2>&1 &&
  grep -qE "^plan trials \(ranks share cores: 2 candidates, 3 x 6 steps each" "$tmp/a3.log"
ok $? "--plan auto --trial-passes 3: 3 passes of each candidate"

# ---- refused ----
mpirun_n 3 $common --steps 2 --plan "$tmp/u.json,$tmp/dp.json" --schedule interleaved >"$tmp/e3.log" 2>&1
[ $? = 2 ] && grep -q "ppdl: --plan .*: several plan files are measured against each other under one schedule of one stage per rank" "$tmp/e3.log"
ok $? "plan files under a chunked schedule: refused, status 2"
nine=$(for i in 1 2 3 4 5 6 7 8 9; do printf '%s,' "$tmp/u.json"; done)
mpirun_n 3 $common --steps 2 --plan "${nine%,}" >"$tmp/e4.log" 2>&1
[ $? = 2 ] && grep -q "ppdl: --plan .*: 9 plan files, expected at most 8" "$tmp/e4.log"
ok $? "9 plan files: refused, status 2"
mpirun_n 3 $common --steps 2 --plan "$tmp/u.json,,$tmp/dp.json" >"$tmp/e5.log" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "expected 3 plan files separated by commas" "$tmp/e5.log"
ok $? "an empty name in the list: refused (status $rc)"
mpirun_n 3 $common --steps 2 --plan "$tmp/u.json,$tmp/dp.json" --micro-batches 2 >"$tmp/e8.log" 2>&1
[ $? = 2 ] && grep -q "ppdl: --plan: .*dp.json: stage 0 has 3 replicas, and --micro-batches 2 gives each fewer than one micro-batch (give at least 3)" "$tmp/e8.log" &&
  ! grep -q "^plan trials (" "$tmp/e8.log"
ok $? "a file with more replicas than micro-batches: refused before the trials, named, status 2"
mpirun_n 3 $common --steps 2 --plan uniform --trial-passes 3 >"$tmp/e6.log" 2>&1
[ $? = 2 ] && grep -q "ppdl: --trial-passes 3: only the trials take it" "$tmp/e6.log" &&
  mpirun_n 3 $common --steps 2 --trial-passes 0 >"$tmp/e7.log" 2>&1
[ $? = 2 ] && grep -q "ppdl: --trial-passes 0: expected the runs of each candidate, 1 to 50" "$tmp/e7.log"
ok $? "--trial-passes without trials, or 0: refused, status 2"
mpirun_n 3 $common --steps 2 --plan-trials 1 >"$tmp/e1.log" 2>&1
[ $? = 2 ] && grep -q "ppdl: --plan-trials 1: expected 0 (none) or the candidate plans to measure, 2 to 8" "$tmp/e1.log"
ok $? "--plan-trials 1: refused, status 2: $(grep -o 'ppdl: .*' "$tmp/e1.log" | head -1)"
mpirun_n 3 $common --steps 2 --plan uniform --plan-trials 2 >"$tmp/e2.log" 2>&1
[ $? = 2 ] && grep -q "ppdl: --plan-trials 2: only --plan auto takes it" "$tmp/e2.log"
ok $? "--plan-trials with --plan uniform: refused, status 2"
finish
