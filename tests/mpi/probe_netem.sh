#!/bin/sh
# probe_netem.sh — the probe measures what --netem emulates, and --netem changes only
# timing. Three known networks (two nodes with a slow link between them; a ring with
# different speeds each way; one slow rank), each emulated with --netem and probed:
# every ordered pair's bandwidth within 10% (1 MiB messages) and latency within 20% or
# 20 us of the file. Why these tolerances hold: the emulated time of a 1 MiB message
# (>= 4 ms at <= 0.25 GB/s) dwarfs the real shared-memory copy (~0.1 ms, overlapped) and
# a wake-up (~10 us); the latency's 20 us covers a late wake-up on a loaded 2-core
# machine. Also: the probe on 1 rank and on ranks sharing a host writes finite,
# positive numbers; --cluster reads a saved file (and rejects a wrong one by name); a
# pipeline under --netem gives bitwise the losses of the same run without it, and
# takes at least the time its slow link needs.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "needs /usr/bin/python3 to write and compare the JSON files"
# the probed numbers are timings: no other test's ranks on the cores meanwhile
run_alone

# write a cluster file: mk NAME N 'bw(i,j)' 'lat(i,j)' (python expressions, B/s and s)
mk() {
  "$PY" - "$tmp/$1.json" "$2" "$3" "$4" <<'EOF'
import json, sys
path, n, bwx, latx = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
G, us = 1e9, 1e-6
bw = [[50 * G if i == j else eval(bwx) for j in range(n)] for i in range(n)]
lat = [[0.0 if i == j else eval(latx) for j in range(n)] for i in range(n)]
json.dump({"ranks": n, "bandwidth_Bps": bw, "latency_s": lat,
           "mem_bytes": [2 ** 30] * n, "speed": [1.0] * n}, open(path, "w"))
EOF
}

# compare TRUTH.json PROBED.json: prints the links out of tolerance and exits 3 when
# there are any (a timing miss, for timed_ok); any other non-zero status is a broken
# file or comparison (a Python traceback), a plain failure, never a skip
compare() {
  "$PY" - "$1" "$2" <<'EOF'
import json, sys
t, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
n, bad = t["ranks"], 0
for i in range(n):
    for j in range(n):
        if i == j: continue
        bt, bp = t["bandwidth_Bps"][i][j], p["bandwidth_Bps"][i][j]
        lt, lp = t["latency_s"][i][j], p["latency_s"][i][j]
        if abs(bp - bt) > 0.10 * bt:
            print("#   %d->%d bandwidth %.3g B/s, emulated %.3g (off by %.0f%%)" % (i, j, bp, bt, 100 * (bp / bt - 1))); bad += 1
        if abs(lp - lt) > max(0.20 * lt, 20e-6):
            print("#   %d->%d latency %.1f us, emulated %.1f us" % (i, j, lp * 1e6, lt * 1e6)); bad += 1
sys.exit(3 if bad else 0)
EOF
}


nodes_of() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["nodes"])' "$1"; }

# ---- three emulated networks, probed ----
# Emulated rates stay <= 0.25 GB/s: netem can only slow the real link down, and
# shared memory here gives 2.5-10 GB/s for 1 MiB on an idle machine, much less when
# the copying ranks share their cores with other work (make -j2 check).
# two nodes {0,1} {2,3}: 0.25 GB/s and 10 us inside, 0.5 Gbit/s and 100 us between
mk two 4 '0.25 * G if i // 2 == j // 2 else 0.0625 * G' '10 * us if i // 2 == j // 2 else 100 * us'
# a ring 0-1-2-3-0: 0.25 GB/s clockwise, 0.15 GB/s back, 0.05 GB/s across; 25 / 200 us
mk ring 4 '0.25 * G if (j - i) % 4 == 1 else (0.15 * G if (i - j) % 4 == 1 else 0.05 * G)' \
          '25 * us if (j - i) % 4 in (1, 3) else 200 * us'
# one slow rank: rank 2 talks at 0.025 GB/s with 500 us latency, the others at
# 0.25 GB/s and 20 us
mk slow 3 '0.025 * G if 2 in (i, j) else 0.25 * G' '500 * us if 2 in (i, j) else 20 * us'
for case in two:4:'[[0, 1], [2, 3]]' ring:4:'[[0, 1, 2, 3]]' slow:3:'[[0, 1], [2]]'; do
  name=${case%%:*}; rest=${case#*:}; n=${rest%%:*}; want=${rest#*:}
  # up to two retries: another job on the 2 cores (make -j2 check) can delay every
  # repetition of a pair; an error of the probe or of netem fails every attempt
  for attempt in 1 2 3; do
    mpirun_n "$n" --probe-only --netem "$tmp/$name.json" --cluster-out "$tmp/$name-probed.json" \
      >"$tmp/$name.log" 2>&1
    rc=$?
    out=$(compare "$tmp/$name.json" "$tmp/$name-probed.json" 2>&1)
    crc=$?
    got=$(nodes_of "$tmp/$name-probed.json" 2>&1)
    grc=$?
    { [ $crc != 0 ] && [ $crc != 3 ]; } || [ $grc != 0 ] && break  # broken, not late: no retry
    [ -z "$out" ] && [ "$got" = "$want" ] && break
    [ $attempt != 3 ] && diag "$name: attempt $attempt out of tolerance (load: $(cut -d' ' -f1-3 /proc/loadavg)), again:" &&
      echo "$out" && diag "  nodes $got"
  done
  ok $rc "$name: $n ranks probe the emulated network"
  if [ $crc = 0 ] || [ $crc = 3 ]; then
    timed_ok "$out" "$name: every pair's bandwidth within 10% and latency within 20% or 20 us"
  else
    ok 1 "$name: every pair's bandwidth within 10% and latency within 20% or 20 us (the comparison failed, exit $crc)"
  fi
  [ -n "$out" ] && echo "$out" | sed 's/^\([^#]\)/# \1/' && sed 's/^/#   /' "$tmp/$name.log"
  if [ $grc = 0 ]; then
    wrong=; [ "$got" = "$want" ] || wrong="got $got"
    timed_ok "$wrong" "$name: nodes $want (got $got)"
  else
    ok 1 "$name: nodes $want (the probed file has no nodes: $(echo "$got" | tail -1))"
  fi
done

# ---- outliers planted in a real probe (PPDL_TEST_PROBE_SKEW: one sample of a link
# multiplied by a factor): on the two-node network, one sample of 0->1 read 20x too
# slow (an in-node link read as slower than the link between the nodes, as seen in
# the field), one of 2->0 20x too fast, one of 3->1 10x too slow: the medians must stay
# within 10% and the nodes right. Negative control: every sample of 0->1 read at half
# its rate must show (the comparison finds 0->1 off), so the comparison sees the hook.
skew_case() {  # skew_case NAME SKEW: probes "two" with the skew; sets out, got
  for attempt in 1 2 3; do
    PPDL_TEST_PROBE_SKEW=$2 mpirun_n 4 --probe-only --netem "$tmp/two.json" --cluster-out "$tmp/$1.json" \
      >"$tmp/$1.log" 2>&1
    out=$(compare "$tmp/two.json" "$tmp/$1.json" 2>&1)
    got=$(nodes_of "$tmp/$1.json" 2>&1)
    # the negative control is judged on the link it planted, retried only on the others
    [ "$1" = skew-all ] && { echo "$out" | grep -q '0->1 bandwidth' || [ -z "$out" ]; } && break
    [ -z "$out" ] && [ "$got" = '[[0, 1], [2, 3]]' ] && break
  done
}
skew_case skew-one '0-1:0:0.05,2-0:1:20,3-1:2:0.1'
timed_ok "$out" "a probe with 3 outliers planted: every link within 10%, the outliers outvoted"
[ -n "$out" ] && echo "$out" | sed 's/^\([^#]\)/# \1/' && sed 's/^/#   /' "$tmp/skew-one.log"
wrong=; [ "$got" = '[[0, 1], [2, 3]]' ] || wrong="got $got"
timed_ok "$wrong" "... and the nodes {0,1} {2,3} (got $got)"
grep -q '"samples": \[\[0, [4-7],' "$tmp/skew-one.json"
ok $? "... the link with an outlier took more than 3 samples: $(grep -o '"samples": \[\[[^]]*\]' "$tmp/skew-one.json")"
skew_case skew-all '0-1:0:0.5,0-1:1:0.5,0-1:2:0.5,0-1:3:0.5,0-1:4:0.5,0-1:5:0.5,0-1:6:0.5'
echo "$out" | grep -q '0->1 bandwidth'
ok $? "negative control: every sample of 0->1 at half its rate is seen ($(echo "$out" | grep '0->1' | head -1))"
PPDL_TEST_PROBE_SKEW=0-9:0:2 mpirun_n 2 --probe-only >"$tmp/skew-bad.log" 2>&1
[ $? != 0 ] && grep -q 'PPDL_TEST_PROBE_SKEW=0-9:0:2: expected A-B:K:F' "$tmp/skew-bad.log"
ok $? "a malformed PPDL_TEST_PROBE_SKEW is refused by name"

# ---- the probe on its own: 1 rank, and 3 ranks sharing this host ----
finite() {  # every number positive (latencies >= 0) and finite, no NaN or inf text
  ! grep -qiE 'nan|inf' "$1" && "$PY" - "$1" <<'EOF'
import json, math, sys
c = json.load(open(sys.argv[1])); n = c["ranks"]
ok = all(math.isfinite(v) and v > 0 for r in c["bandwidth_Bps"] for v in r)
ok &= all(math.isfinite(v) and v >= 0 for r in c["latency_s"] for v in r)
ok &= all(math.isfinite(v) and v > 0 for v in c["mem_bytes"] + c["speed"])
ok &= len(c["bandwidth_Bps"]) == n and all(len(r) == n for r in c["bandwidth_Bps"])
sys.exit(0 if ok else 1)
EOF
}
for n in 1 3; do
  mpirun_n $n --probe-only --cluster-out "$tmp/real$n.json" >"$tmp/real$n.log" 2>&1
  ok $? "$n rank(s) on one host: the probe runs"
  finite "$tmp/real$n.json"
  ok $? "$n rank(s): every number in the file is finite and positive"
done
grep -q '"speed": \[1\]' "$tmp/real1.json"
ok $? "1 rank: its speed is 1 (the reference)"

# ---- --cluster: a saved file instead of the probe, and the report embeds it ----
make_case g gpt || ok 1 "model and data"
mpirun_n 2 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 1 --threads 1 --cluster "$tmp/real1.json" \
  >"$tmp/wrong.log" 2>&1
[ $? != 0 ] && grep -q 'describes 1 rank but the job has 2' "$tmp/wrong.log"
ok $? "--cluster with a file for another number of ranks: a named error"
mk two2 2 '1 * G' '10 * us'
mpirun_n 2 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 1 --threads 1 --cluster "$tmp/two2.json" \
  --report "$tmp/rep-cluster.json" >"$tmp/cl.log" 2>&1 &&
  ! grep -q 'probed in' "$tmp/cl.log" &&
  "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1]))["cluster"]; sys.exit(c["bandwidth_Bps"][0][1] != 1e9)' \
    "$tmp/rep-cluster.json"
ok $? "--cluster: used without probing, embedded in the report"
echo '{"ranks": 2, "bandwidth_Bps": [[1, 1], [1]]}' >"$tmp/broken.json"
mpirun_n 2 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 1 --threads 1 --netem "$tmp/broken.json" \
  >"$tmp/broken.log" 2>&1
[ $? != 0 ] && grep -q -- '--netem .*broken.json: bandwidth_Bps\[1\] must be an array of 2' "$tmp/broken.log"
ok $? "--netem with a malformed file: the option, file and field are named"

# ---- --netem changes timing only: the same losses, bitwise ----
mpirun_n 4 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 3 --batch-size 8 --micro-batches 4 --threads 1 \
  --plan uniform --report "$tmp/plain.json" >"$tmp/plain.log" 2>&1
ok $? "4-rank pipeline without netem"
mpirun_n 4 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 3 --batch-size 8 --micro-batches 4 --threads 1 \
  --plan uniform --netem "$tmp/two.json" --report "$tmp/netem.json" >"$tmp/netem.log" 2>&1
rc=$?
[ $rc = 0 ] && [ "$(losses "$tmp/netem.json")" = "$(losses "$tmp/plain.json")" ]
ok $? "4-rank pipeline under --netem: bitwise the losses of the run without it"
[ $rc = 0 ] || sed 's/^/#   /' "$tmp/netem.log" | tail -5
# a 2 MB/s link 1 <-> 2: the 4 activations of 2x16x32 floats (4 KiB each) that cross it
# per step take >= 4 x 2 ms on the link (they queue); so a step takes >= 8 ms
mk crawl 4 '2e6 if {i, j} == {1, 2} else 2 * G' '5 * us'
mpirun_n 4 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 2 --batch-size 8 --micro-batches 4 --threads 1 \
  --plan uniform --netem "$tmp/crawl.json" --report "$tmp/crawl-rep.json" --cluster "$tmp/crawl.json" >"$tmp/crawl.log" 2>&1
ms=$("$PY" -c 'import json,sys; print(min(s["ms"] for s in json.load(open(sys.argv[1]))["steps"]))' "$tmp/crawl-rep.json" 2>/dev/null)
"$PY" -c "import sys; sys.exit(not (float('${ms:-0}') >= 8.0))"
ok $? "a 2 MB/s link: each step takes >= 8 ms (got ${ms:-none} ms): messages queue on the link"
finish
