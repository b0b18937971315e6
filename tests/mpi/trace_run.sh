#!/bin/sh
# trace_run.sh — ppdl --trace and --timeline of real runs: rank 0 merges every rank's
# events of the last step onto one time axis (net/clock_sync.h), and what the files
# show is what happened:
#  1. the trace has one process per rank, named with its stage, and on each rank a
#     forward and a backward of every micro-batch its stage ran, each with its mb id,
#     and the send, recv, wait and optimizer events;
#  2. causality across ranks: no activation or gradient is received before its sender
#     posted it, and no forward (backward) starts before its input (gradient) was
#     sent, within the clock alignment's stated error (the report's trace_clock) plus
#     20 us of timer granularity. The case has a heavy first stage, so the ranks start
#     their steps at moments ~1 ms apart (each after its own optimizer): events timed
#     from each rank's own step start, unaligned, fail this;
#  3. the timeline is an SVG document with a row per rank and the bubble in its title;
#  4. 1F1B and GPipe on 2 ranks, 1F1B on 3 ranks (more ranks than cores on this
#     2-core machine);
#  5. clocks that differ, as on two nodes (on one host every rank reads one clock):
#     with rank 1's clock 5 s ahead and rank 2's 3 s behind (PPDL_TEST_CLOCK_SKEW, a
#     test hook in core/util.c), the report's trace_clock measures each offset within
#     its stated error + 1 ms, and the merged trace still shows the causal order.
. "$top_srcdir/tests/lib.sh"
PY=$PYTHON_ORACLE
"$PPDL_INIT" --preset mlp --set in_features=256 --set hidden=1024 --set n_layers=3 --set n_classes=16 --seed 3 \
  -o "$tmp/m.h5" >/dev/null &&
  "$PPDL_DATA" synth --family mlp --model "$tmp/m.h5" -n 64 --seed 5 -o "$tmp/d.h5" >/dev/null
ok $? "model and data"
# stage 0 holds 1.3 M parameters (its optimizer ~1 ms), the last stage 16 K
cat >"$tmp/plan2.json" <<'PLAN'
{"stages": [{"rank": 0, "first_layer": 0, "last_layer": 1, "recompute": [0, 0]},
            {"rank": 1, "first_layer": 2, "last_layer": 2, "recompute": [0]}]}
PLAN
cat >"$tmp/plan3.json" <<'PLAN'
{"stages": [{"rank": 0, "first_layer": 0, "last_layer": 0, "recompute": [0]},
            {"rank": 1, "first_layer": 1, "last_layer": 1, "recompute": [0]},
            {"rank": 2, "first_layer": 2, "last_layer": 2, "recompute": [0]}]}
PLAN

check_trace() {  # check_trace TRACE REPORT SVG RANKS M
  "$PY" - "$@" <<'PY'
import json, math, sys
import xml.etree.ElementTree as ET
trace, report, svg, n, M = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
bad = []
ev = json.load(open(trace))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"}
if sorted(names) != list(range(n)) or any(names[r] != "rank %d (stage %d)" % (r, r) for r in names):
    bad.append("process names %s" % names)
x = [e for e in ev if e.get("ph") == "X"]
def ts(e): return e["ts"] / 1e3          # ms
def end(e): return (e["ts"] + e["dur"]) / 1e3
for r in range(n):
    mine = [e for e in x if e["pid"] == r]
    for k in ("F", "B"):
        mbs = sorted(e["args"]["mb"] for e in mine if e["name"] == "%s%d" % (k, e["args"]["mb"]))
        if mbs != list(range(M)):
            bad.append("rank %d: %s of micro-batches %s, expected 0..%d" % (r, k, mbs, M - 1))
    cats = {e["cat"] for e in mine}
    want = {"optimizer"} | ({"send_act", "recv_grad"} if r < n - 1 else set()) | ({"recv_act", "send_grad"} if r > 0 else set())
    if not want <= cats:
        bad.append("rank %d: event kinds %s lack %s" % (r, sorted(cats), sorted(want - cats)))
    if any(e["args"]["stage"] != r for e in mine):
        bad.append("rank %d: an event of another stage" % r)
if not any(e["cat"] == "wait" for e in x):
    bad.append("no wait event on any rank")
clock = {c["rank"]: c["error_ms"] for c in json.load(open(report))["trace_clock"]}
if sorted(clock) != list(range(n)) or not all(math.isfinite(v) and v >= 0 for v in clock.values()):
    bad.append("trace_clock %s" % clock)
def first(pid, name):
    m = [e for e in x if e["pid"] == pid and e["name"] == name]
    return m[0] if m else None
worst = -1e9
for r in range(n - 1):
    tol = clock.get(r, 0) + clock.get(r + 1, 0) + 0.020
    for mb in range(M):
        pairs = [(first(r, "send act %d" % mb), first(r + 1, "recv act %d" % mb), "activation"),
                 (first(r, "send act %d" % mb), first(r + 1, "F%d" % mb), "forward after its input"),
                 (first(r + 1, "send grad %d" % mb), first(r, "recv grad %d" % mb), "gradient"),
                 (first(r + 1, "send grad %d" % mb), first(r, "B%d" % mb), "backward after its gradient")]
        for s, t, what in pairs:
            if s is None or t is None:
                bad.append("rank %d/%d mb %d: %s events missing" % (r, r + 1, mb, what)); continue
            early = ts(s) - (end(t) if what in ("activation", "gradient") else ts(t))
            worst = max(worst, early)
            if early > tol:
                bad.append("mb %d between ranks %d and %d: %s %.3f ms before it was sent (tolerance %.3f)" %
                           (mb, r, r + 1, what, early, tol))
root = ET.parse(svg).getroot()
text = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
if root.tag != "{http://www.w3.org/2000/svg}svg" or "bubble" not in text or any("rank %d" % r not in text for r in range(n)):
    bad.append("timeline: root %s, text %.120s" % (root.tag, text))
print("; ".join(bad[:4]) if bad else "every receive and start at least %.3f ms after its send" % -worst)
sys.exit(1 if bad else 0)
PY
}

for c in "2 1f1b 4" "2 gpipe 4" "3 1f1b 3"; do
  set -- $c
  S=$1 sched=$2 M=$3 name="$1-$2"
  mpirun_n "$S" "$tmp/m.h5" --data "$tmp/d.h5" --steps 3 --batch-size 12 --micro-batches "$M" --schedule "$sched" \
    --threads 1 --plan "$tmp/plan$S.json" --trace "$tmp/$name.json" --timeline "$tmp/$name.svg" \
    --report "$tmp/$name-r.json" >"$tmp/$name.log" 2>&1
  ok $? "$S ranks, $sched, M=$M: trains with --trace and --timeline"
  msg=$(check_trace "$tmp/$name.json" "$tmp/$name-r.json" "$tmp/$name.svg" "$S" "$M")
  ok $? "$S ranks, $sched: the merged trace and timeline show every rank's micro-batches, in causal order ($msg)"
done
# skewed clocks (5.): one variable names one rank, so two runs
for skew in 1:5.0 2:-3.0; do
  S=3 name=skew-${skew%%:*}
  PPDL_TEST_CLOCK_SKEW=$skew mpirun_n $S "$tmp/m.h5" --data "$tmp/d.h5" --steps 3 --batch-size 12 --micro-batches 3 \
    --threads 1 --plan "$tmp/plan3.json" --trace "$tmp/$name.json" --timeline "$tmp/$name.svg" \
    --report "$tmp/$name-r.json" >"$tmp/$name.log" 2>&1
  ok $? "3 ranks, rank ${skew%%:*}'s clock off by ${skew#*:} s: trains with --trace"
  got=$("$PY" - "$tmp/$name-r.json" "$skew" <<'PY'
import json, sys
r, s = sys.argv[2].split(":")
c = {x["rank"]: x for x in json.load(open(sys.argv[1]))["trace_clock"]}
want = {q: (1e3 * float(s) if q == int(r) else 0.0) for q in c}
off = ["rank %d offset %.3f ms, skew %.3f ms (error %.3f)" % (q, c[q]["offset_ms"], want[q], c[q]["error_ms"])
       for q in sorted(c) if abs(c[q]["offset_ms"] - want[q]) > c[q]["error_ms"] + 1.0]
print("; ".join(off) if off else "offsets %s ms" % ", ".join("%.3f" % c[q]["offset_ms"] for q in sorted(c)))
sys.exit(1 if off else 0)
PY
)
  ok $? "rank ${skew%%:*}'s clock off by ${skew#*:} s: trace_clock measures it ($got)"
  msg=$(check_trace "$tmp/$name.json" "$tmp/$name-r.json" "$tmp/$name.svg" 3 3)
  ok $? "rank ${skew%%:*}'s clock off by ${skew#*:} s: the merged trace is in causal order ($msg)"
done
finish
