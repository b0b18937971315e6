#!/bin/sh
# cluster_emu.sh — a real shaped network: scripts/cluster-emu puts 4 ranks on 2 network
# namespaces joined by a link shaped (tc tbf) to 1 Gbit/s, MPI over TCP; the probe
# must see it: the 8 pairs across the link within 15% of 125 MB/s (TCP's payload is
# ~96% of the line rate; the token bucket holds 32 KB, 0.26 ms at 1 Gbit/s), the 4
# pairs inside a namespace well above it (>= 2x: TCP over loopback), and the ranks grouped into the nodes {0,1} {2,3}. Also: everything is removed afterwards,
# also when the program fails. Needs root and iproute2; skipped with the reason
# otherwise.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
EMU=$top_srcdir/scripts/cluster-emu
[ "$(id -u)" = 0 ] || skip_all "needs root (network namespaces and tc)"
for t in ip tc; do command -v $t >/dev/null || skip_all "needs '$t' (iproute2)"; done
[ -x "$PY" ] || skip_all "needs /usr/bin/python3 to read the JSON"
# can this machine (container) make namespaces at all?
probe_ns=ppdl-test-$$
ip netns add $probe_ns 2>/dev/null || skip_all "cannot create network namespaces here"
ip netns del $probe_ns
# the probed numbers are timings: no other test's ranks on the cores meanwhile
run_alone

judge() {  # judge CLUSTER.json: prints the pairs out of tolerance
  "$PY" - "$1" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); bw = c["bandwidth_Bps"]; shaped = 125e6; bad = 0
for i in range(4):
    for j in range(4):
        if i == j: continue
        v = bw[i][j]
        if i // 2 != j // 2 and abs(v / shaped - 1) > 0.15:
            print("#   %d->%d (across the link) %.1f MB/s, shaped 125 MB/s" % (i, j, v / 1e6)); bad += 1
        if i // 2 == j // 2 and v < 2 * shaped:
            print("#   %d->%d (inside a node) %.1f MB/s, not >= 2x the link" % (i, j, v / 1e6)); bad += 1
if c["nodes"] != [[0, 1], [2, 3]]:
    print("#   nodes %s, expected [[0, 1], [2, 3]]" % c["nodes"]); bad += 1
sys.exit(1 if bad else 0)
EOF
}

# Up to 3 attempts: another job on the 2 cores (make -j2 check) can stall TCP over
# loopback for whole time slices; an error of the probe or the shaping fails all.
# MPICH over UCX 1.13 TCP may hang in MPI_Finalize after the probe (openucx/ucx#8738):
# ppdl ends such a finalize after PPDL_FINALIZE_TIMEOUT (5 s), so every run must end
# by itself with status 0 (cluster-emu's --timeout only catches a failure of that).
for attempt in 1 2 3; do
  rm -f "$tmp/emu.json"
  timeout -k 5 90 "$EMU" --timeout 60 --nodes 2 --ranks-per-node 2 --rate 1gbit -- \
    "$PPDL" --probe-only --cluster-out "$tmp/emu.json" >"$tmp/emu.log" 2>&1 8>&- 9>&- # 8, 9: lib.sh run_alone
  rc=$?
  [ $rc = 0 ] || break
  out=$(judge "$tmp/emu.json" 2>&1) && break
  [ $attempt != 3 ] && diag "attempt $attempt out of tolerance (load $(cut -d' ' -f1-3 /proc/loadavg)), again:" && echo "$out"
done
[ $rc = 0 ] && [ -s "$tmp/emu.json" ]
ok $? "4 ranks on 2 shaped namespaces: the probe wrote its cluster file and the job ended by itself (exit status $rc)"
grep -q "MPI_Finalize had not returned" "$tmp/emu.log" && diag "(MPI_Finalize hung and was ended by the bound)"
timed_ok "$out" "across the 1 Gbit/s link within 15% of 125 MB/s, inside a node >= 2x, nodes {0,1} {2,3}"
[ -n "$out" ] && echo "$out" && sed 's/^/#   /' "$tmp/emu.log" | head -30
# the launch really spread the ranks: the probe saw two hosts (MPI shared-memory nodes)
# and ran the crossing pairs one at a time, 5 pair slots + 2 local ones (4 ranks on one
# host would give 6 + 4)
[ -s "$tmp/emu.json" ] && [ "$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["probe"]["slots"])' "$tmp/emu.json")" = 7 ]
ok $? "the ranks ran in two hosts (7 slots in the probe's schedule)"

# A short training run under the emulation, as in the field: 2 nodes x 2 ranks, --plan
# auto (profile + probe + plan), a checkpoint at the end. It must end by itself with
# status 0 within a bound of its last step (the finalize bound, 5 s, plus the
# barrier before it and the exit: 10 s), and its checkpoint must resume.
make_case g gpt || ok 1 "model and data"
timeout -k 5 150 "$EMU" --timeout 120 --nodes 2 --ranks-per-node 2 --rate 1gbit -- \
  "$PPDL" "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 6 --batch-size 8 --micro-batches 4 --plan auto \
  --checkpoint "$tmp/emu-ck.h5" >"$tmp/train.out" 2>&1 8>&- 9>&- &
tpid=$!
last=  # when the last step's line appeared (polled every 0.1 s)
while kill -0 $tpid 2>/dev/null; do
  grep -q '^step     6/6' "$tmp/train.out" 2>/dev/null && [ -z "$last" ] && last=$(date +%s.%N)
  sleep 0.1
done
wait $tpid
rc=$? end=$(date +%s.%N)
[ -z "$last" ] && grep -q '^step     6/6' "$tmp/train.out" && last=$end
after=$(awk -v a="${last:-0}" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
[ $rc = 0 ] && [ -n "$last" ] && awk -v t="$after" 'BEGIN { exit !(t <= 10) }'
ok $? "training under the emulation (--plan auto, a checkpoint at the end) ended by itself: status $rc, ${after} s after its last step"
[ $rc = 0 ] || tail -8 "$tmp/train.out" | sed 's/^/#   /'
grep -q "MPI_Finalize had not returned" "$tmp/train.out" && diag "(MPI_Finalize hung and was ended by the bound)"
mpirun_n 2 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 8 --batch-size 8 --micro-batches 4 --threads 1 \
  --checkpoint "$tmp/emu-ck.h5" --resume auto >"$tmp/resume.log" 2>&1 &&
  grep -q "resumed from .*emu-ck.h5: 6 steps done" "$tmp/resume.log"
ok $? "its checkpoint resumes (on 2 ranks, 6 steps done)"

# everything goes away: after the run above, and when the program fails
timeout -k 5 60 "$EMU" --nodes 3 --ranks-per-node 1 --link 0-2=100mbit -- /bin/false >"$tmp/false.log" 2>&1 8>&- 9>&-
rc=$?
[ $rc = 1 ]
ok $? "a failing program: its exit status (1) comes back (got $rc)"
# the namespaces each run made (it names them on stderr) are gone
left=
for log in "$tmp/emu.log" "$tmp/false.log"; do
  tag=$(sed -n 's/.*namespaces \(ppdl[0-9]*\)-\*.*/\1/p' "$log" | head -1)
  [ -n "$tag" ] || left="$left (no namespace name in $(basename "$log"))"
  [ -n "$tag" ] && left="$left$(ip netns list | grep "^$tag-" | tr '\n' ' ')"
done
[ -z "$left" ]
ok $? "no namespace left behind${left:+:$left}"
"$EMU" --rate fast -- /bin/true >"$tmp/bad.log" 2>&1
[ $? = 2 ] && grep -q -- '--rate fast: expected a tc rate' "$tmp/bad.log"
ok $? "a bad option is named (exit status 2)"
# --node-rate: the traffic between ranks of one node (its loopback) is shaped too
timeout -k 5 60 "$EMU" --timeout 30 --nodes 1 --ranks-per-node 1 --node-rate 2gbit -- tc qdisc show dev lo \
  >"$tmp/lo.log" 2>&1 8>&- 9>&-
grep -q "qdisc tbf .* rate 2Gbit" "$tmp/lo.log" && "$EMU" --node-rate fast -- /bin/true 2>&1 | grep -q -- '--node-rate fast'
ok $? "--node-rate 2gbit: a token bucket of 2 Gbit/s on each node's loopback; a bad rate is named"
finish
