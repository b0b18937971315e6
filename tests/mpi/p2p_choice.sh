#!/bin/sh
# p2p_choice.sh — `--p2p auto|nccl|mpi` on a CPU backend (docs/gpus.md;
# pipe/p2p_choice.h), on 2 ranks:
#  1. --p2p auto trains; the header says "p2p mpi" and why (the cpu backend; in a build
#     without CUDA, no NCCL), and the report's `p2p` is "mpi";
#  2. --p2p mpi trains, the header says it was asked, and the losses are bitwise those
#     of auto and of no --p2p at all (the MPI path is the one that always ran);
#  3. --p2p nccl is refused: exit status 2 (a bad option), the message names --p2p nccl
#     and the reason, within the time of a start-up (no rank waits for another), and
#     the refusal comes before anything is written (--report names a file that must
#     not appear).
# The backend is forced to cpu so that the expectations hold on a GPU machine too
# (tests/mpi/cuda_train.sh checks the CUDA side).
. "$top_srcdir/tests/lib.sh"
make_case g gpt || { ok 1 "model and data"; finish; exit; }
common="--steps 2 --batch-size 8 --micro-batches 4 --threads 1 --plan uniform --backend cpu"
show_log() { sed 's/^/#   /' "$tmp/$1.log" | tail -5; }
if grep -q '^#define HAVE_CUDA 1' "$top_builddir/config.h"; then
  why_auto="--p2p auto: the cpu backend"
else
  why_auto="--p2p auto: this ppdl was built without NCCL"
fi

# 1. and 2.
for p in auto mpi none; do
  opt="--p2p $p"
  [ $p = none ] && opt=
  mpirun_n 2 "$tmp/g.h5" --data "$tmp/g-data.h5" $common $opt --report "$tmp/$p.json" >"$tmp/$p.log" 2>&1
  rc=$?
  [ $rc = 0 ] || show_log $p
  ok $rc "--p2p $p: 2 ranks train"
done
grep -qF "p2p mpi ($why_auto" "$tmp/auto.log"
ok $? "--p2p auto: the header says p2p mpi ($why_auto ...)"
grep '^p2p ' "$tmp/auto.log" | sed 's/^/#   /'
grep -qx "p2p mpi (--p2p mpi)" "$tmp/mpi.log"
ok $? "--p2p mpi: the header says p2p mpi (--p2p mpi)"
[ "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["p2p"])' "$tmp/auto.json" 2>&1)" = mpi ]
ok $? "--p2p auto: the report's p2p is mpi"
[ -s "$tmp/auto.json" ] && [ "$(losses "$tmp/auto.json")" = "$(losses "$tmp/mpi.json")" ] &&
  [ "$(losses "$tmp/auto.json")" = "$(losses "$tmp/none.json")" ]
ok $? "--p2p auto, mpi and none given: bitwise the same losses"

# the probe times the links on the path the runtime's messages take: MPI here
mpirun_n 2 "$tmp/g.h5" --backend cpu --threads 1 --probe-only --cluster-out "$tmp/cluster.json" >"$tmp/probe.log" 2>&1 &&
  [ "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["probe"]["path"])' "$tmp/cluster.json" 2>&1)" = mpi ] &&
  grep -q 'messages through MPI)' "$tmp/probe.log"
ok $? "--probe-only on the cpu backend: the links timed through MPI (CLUSTER.json probe.path mpi, the table says so)"

# 3. refused, on every rank, without a hang
t0=$(date +%s)
mpirun_n 2 "$tmp/g.h5" --data "$tmp/g-data.h5" $common --p2p nccl --report "$tmp/nccl.json" >"$tmp/nccl.log" 2>&1
rc=$?
t1=$(date +%s)
[ $rc = 2 ]
ok $? "--p2p nccl on the cpu backend: exit status 2 (got $rc)"
grep -q "ppdl: --p2p nccl cannot run: .*\(the cpu backend\|built without NCCL\)" "$tmp/nccl.log"
ok $? "--p2p nccl: the message names the option and why"
sed 's/^/#   /' "$tmp/nccl.log" | head -3
# the job ends at the agreement after the backend is made; 60 s is ten times a start
# of 2 ranks on this machine under load, far below mpirun_n's 180 s bound (a hang)
[ $((t1 - t0)) -lt 60 ]
ok $? "--p2p nccl: refused in $((t1 - t0)) s (no rank left waiting)"
[ ! -e "$tmp/nccl.json" ]
ok $? "--p2p nccl: nothing written (no report)"
finish
