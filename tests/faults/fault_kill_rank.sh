#!/bin/sh
# fault_kill_rank.sh — one rank of a running job killed (SIGKILL) mid-step, on 2 and 3
# ranks: the whole job ends within seconds (no rank waits forever for a message that
# will never come), with a non-zero status, and the last checkpoint is intact: it
# loads and a new run resumes from it.
. "$top_srcdir/tests/lib.sh"
make_case g gpt
for n in 2 3; do
  ck=$tmp/k$n.h5
  "$MPIEXEC" -n $n "$PPDL" "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 100000 --batch-size 8 --micro-batches 4 \
    --threads 1 --checkpoint "$ck" --checkpoint-every 1 --step-delay 20 >"$tmp/run$n.log" 2>&1 9>&- &
  pid=$!
  i=0
  while ! grep -q "^checkpoint " "$tmp/run$n.log" 2>/dev/null && [ $i -lt 3000 ] && kill -0 $pid 2>/dev/null; do
    sleep 0.01; i=$((i + 1))
  done
  sleep 0.3
  # the ranks are the grandchildren of mpiexec (hydra's proxy in between): kill the last one
  victim=$(for p in $(pgrep -P $pid); do pgrep -P "$p"; done | tail -1)
  t0=$(date +%s.%N)
  kill -KILL "$victim" 2>/dev/null
  # the job must end by itself; give it 20 s before calling it a hang
  i=0
  while kill -0 $pid 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
  hung=0
  kill -0 $pid 2>/dev/null && { hung=1; kill -KILL $pid; pkill -KILL -P $pid; }
  wait $pid; rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  [ -n "$victim" ] && [ $hung = 0 ] && [ $rc != 0 ]
  ok $? "$n ranks, rank process $victim killed mid-run: the job ended by itself in $secs s with status $rc"
  # two steps past the checkpoint's (a run at its step already would have nothing to train)
  done_steps=$(h5dump -a /train/step "$ck" 2>/dev/null | sed -n 's/^ *(0): *\([0-9]*\).*/\1/p')
  mpirun_n $n "$tmp/g.h5" --data "$tmp/g-data.h5" --steps $((${done_steps:-0} + 2)) --batch-size 8 --micro-batches 4 \
    --threads 1 --checkpoint "$ck" --resume auto --report "$tmp/r$n.json" >"$tmp/resume$n.log" 2>&1
  rc=$?
  [ $rc = 0 ] && [ -n "$done_steps" ] && grep -q "resumed from .*: $done_steps steps done" "$tmp/resume$n.log"
  ok $? "$n ranks: the last checkpoint is intact and a new run resumes from it"
  [ $rc = 0 ] || tail -3 "$tmp/resume$n.log" | sed 's/^/#   /'
done
finish
