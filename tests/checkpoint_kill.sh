#!/bin/sh
# checkpoint_kill.sh — SIGKILL at random moments, 20 times, of a 2-rank run that
# writes a checkpoint after every step (so most of its time is spent writing one):
# every time, the file left behind loads and the next run of the same command resumes
# from it; the chain of killed runs, completed by a last one, ends with bitwise the
# weights of a run that was never killed. SIGKILL cannot be caught: what protects
# the checkpoint is that it is written to FILE.tmp and renamed only when complete.
. "$top_srcdir/tests/lib.sh"
make_case gpt gpt || { ok 1 "model and data"; finish; exit; }
m=$tmp/gpt.h5 d=$tmp/gpt-data.h5
steps=1500
args() { echo "$m" --data "$d" --steps $steps --batch-size 8 --micro-batches 4 --threads 1 --checkpoint "$tmp/k.h5" --resume auto; }
mpirun_n 2 "$m" --data "$d" --steps $steps --batch-size 8 --micro-batches 4 --threads 1 --save "$tmp/ref.h5" \
  >"$tmp/ref.log" 2>&1
ok $? "the run never killed (the reference)"

# the ranks of an mpiexec: hydra starts a proxy, the proxy the ranks (each in its own
# session, so killing mpiexec's process group would miss them)
ranks_of() { for p in $(pgrep -P "$1"); do pgrep -P "$p"; done; }
# random milliseconds in [lo, hi)
rand_ms() { awk -v lo="$1" -v hi="$2" -v s="$3" 'BEGIN { srand(s); printf "%d", lo + (hi - lo) * rand() }'; }

kills=20 mid_write=0 loaded=0 progressed=0 prev=0
seed=${PPDL_TEST_SEED:-$(date +%s)}
diag "random seed $seed (PPDL_TEST_SEED=$seed repeats these kill times)"
for i in $(seq $kills); do
  "$MPIEXEC" -n 2 "$PPDL" $(args) --checkpoint-every 1 >"$tmp/run$i.log" 2>&1 &
  pid=$!
  # wait until both ranks exist, then a random moment of the run
  n=0
  while [ "$(ranks_of $pid | wc -l)" -lt 2 ] && [ $n -lt 200 ]; do sleep 0.02; n=$((n + 1)); done
  sleep "0.$(printf %03d "$(rand_ms 100 700 $((seed + i)))")"
  [ -e "$tmp/k.h5.tmp" ] && mid_write=$((mid_write + 1))
  kill -KILL $(ranks_of $pid) 2>/dev/null
  kill -KILL $(pgrep -P $pid) $pid 2>/dev/null
  wait $pid 2>/dev/null
  # the file left behind opens and has a step (the next run reads all of it, checksums
  # included, when it resumes from it)
  if [ -e "$tmp/k.h5" ]; then
    at=$(h5dump -a /train/step "$tmp/k.h5" 2>/dev/null | sed -n 's/.*(0): \([0-9]*\).*/\1/p')
    [ -n "$at" ] && loaded=$((loaded + 1))
    [ -n "$at" ] && [ "$at" -ge "$prev" ] && progressed=$((progressed + 1)) && prev=$at
  fi
  # the next run resumes from whatever the last one left (or starts, if it left nothing)
  if [ $i -gt 1 ] && [ -e "$tmp/k.h5" ] && ! grep -q "resumed from" "$tmp/run$i.log"; then
    grep -q "^step" "$tmp/run$i.log" && diag "run $i trained without resuming:" && sed 's/^/#   /' "$tmp/run$i.log" | tail -3
  fi
  if grep -q "^ppdl: " "$tmp/run$i.log"; then
    diag "run $i failed:"; sed 's/^/#   /' "$tmp/run$i.log" | grep "^#   ppdl: " | head -3
    loaded=-100
  fi
done
ok $([ $loaded = $kills ] && echo 0 || echo 1) "after each of $kills SIGKILLs the checkpoint loads ($loaded did), and no run failed to resume"
ok $([ $progressed = $kills ] && echo 0 || echo 1) "the checkpoints' steps never went back ($progressed of $kills; last at step $prev)"
# most of the run is spent writing checkpoints; some kills must land inside a write for
# the test to test anything (seen: about half of them)
ok $([ $mid_write -ge 3 ] && echo 0 || echo 1) "$mid_write of $kills kills landed while FILE.tmp was being written"

mpirun_n 2 $(args) --checkpoint-every 100000 --save "$tmp/final.h5" >"$tmp/final.log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "resumed from" "$tmp/final.log" && h5diff "$tmp/final.h5" "$tmp/ref.h5" >/dev/null 2>&1
ok $? "the last run resumes and completes: bitwise the weights of the run never killed"
[ $rc = 0 ] || sed 's/^/#   /' "$tmp/final.log" | tail -5
finish
