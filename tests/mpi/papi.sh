#!/bin/sh
# papi.sh — --papi: counters (or, where the machine has none, a one-line reason) and
# PAPI's timers per rank and per forward/backward/optimizer in the report; the run
# itself is unaffected; a malformed event list is refused naming the option.
. "$top_srcdir/tests/lib.sh"
make_case m mlp
mpirun_n 2 "$tmp/m.h5" --data "$tmp/m-data.h5" --steps 3 --batch-size 8 --threads 1 --plan uniform \
  --papi PAPI_TOT_CYC,PAPI_TOT_INS --report "$tmp/r.json" >"$tmp/log" 2>&1
ok $? "a run with --papi completes"
mpirun_n 2 "$tmp/m.h5" --data "$tmp/m-data.h5" --steps 3 --batch-size 8 --threads 1 --plan uniform --report "$tmp/plain.json" >/dev/null 2>&1
[ "$(losses "$tmp/r.json")" = "$(losses "$tmp/plain.json")" ]
ok $? "counting changes nothing in the training"
"$PYTHON_ORACLE" - "$tmp/r.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["papi"]
assert len(p["ranks"]) == 2
for r in p["ranks"]:
    for k in ("forward", "backward", "optimizer"):
        assert r[k]["real_ns"] > 0, (r, k)
        for e in p["events"]:
            assert r[k][e] > 0, (r, k, e)
# counting, or a reason why not
assert p["events"] or p["note"], p
print("# events counted:", p["events"] or "none", "--", p["note"])
PY
ok $? "the report has per rank and kind PAPI times, counts or the reason there are none"
# the note (why nothing or not everything counts) is the report's and is printed by
# rank 0 as exactly one line "--papi: NOTE"; with every event counting there is none
note=$("$PYTHON_ORACLE" -c 'import json,sys; print(json.load(open(sys.argv[1]))["papi"]["note"])' "$tmp/r.json")
events=$("$PYTHON_ORACLE" -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))["papi"]["events"]))' "$tmp/r.json")
lines=$(grep -c -- "^--papi: " "$tmp/log")
if [ -n "$note" ]; then
  [ "$lines" = 1 ] && grep -qxF -- "--papi: $note" "$tmp/log"
  ok $? "the reason is printed once, as the report has it (--papi: $note)"
else
  [ "$lines" = 0 ] && [ -n "$events" ]
  ok $? "every event counts ($events) and no reason line is printed"
fi
# counters themselves: where the build or the machine has none, a visible SKIP
if [ -n "$events" ]; then
  ok 0 "hardware counters counted: $events"
else
  skip_ok "hardware counters counted" "${note:-no events}"
fi
mpirun_n 1 "$tmp/m.h5" --data "$tmp/m-data.h5" --papi "" >"$tmp/bad" 2>&1
[ $? != 0 ] && grep -q -- "--papi" "$tmp/bad"
ok $? "an empty event list is refused naming --papi"
finish
