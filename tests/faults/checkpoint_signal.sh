#!/bin/sh
# checkpoint_signal.sh — what a batch system does to a run, and what the run must do:
#  - SIGUSR1 (Slurm --signal) or SIGTERM (the time limit, scancel) mid-run: every rank
#    finishes the step, one checkpoint is written, ppdl exits with 75; the same command
#    then resumes and ends with bitwise the uninterrupted run's final loss and weights;
#  - a storm of signals while the checkpoint is being written changes nothing;
#  - --time-limit stops cleanly, with a checkpoint, before the limit.
# The signals go to the ranks, as srun passes them on.
# --step-delay makes the tiny run last long enough to be signalled; it sleeps between
# steps and changes no number.
. "$top_srcdir/tests/lib.sh"
make_case gpt gpt || { ok 1 "model and data"; finish; exit; }
m=$tmp/gpt.h5 d=$tmp/gpt-data.h5
steps=60
args() { echo "$m" --data "$d" --steps $steps --batch-size 8 --micro-batches 4 --threads 1 --plan uniform; }
mpirun_n 2 $(args) --report "$tmp/ref.json" --save "$tmp/ref.h5" >"$tmp/ref.log" 2>&1
ok $? "the uninterrupted run (the reference)"
final() { sed -n 's/.*"final_loss": \([^,]*\),*/\1/p' "$1"; }


# interrupt NAME SIGNAL STORM: start a slow run, signal it after its 5th step (STORM=1:
# then keep signalling every 10 ms until it exits), then resume it to the end
interrupt() {
  local name=$1 sig=$2 storm=$3 ck=$tmp/$1.h5
  # mpiexec itself gets the signals (timeout(1) would not forward SIGUSR1): a watchdog
  # ends a hung run instead
  "$MPIEXEC" -n 2 "$PPDL" $(args) --checkpoint "$ck" --resume auto --step-delay 25 --log-every 1 \
    >"$tmp/$name.log" 2>&1 9>&- &
  local pid=$!
  (trap 'kill $s; exit 0' TERM; sleep 120 & s=$!; wait $s; kill -KILL $pid) >/dev/null 2>&1 &
  local watchdog=$!
  wait_for "$tmp/$name.log" "^step  *5/" 60
  # to the ranks themselves, as Slurm passes a signal to every task of a step (the
  # signal sent to mpiexec, which forwards it, is tests/faults/exit_status.sh's case)
  ranks=$(for p in $(pgrep -P $pid); do pgrep -P "$p"; done)
  kill -"$sig" $ranks
  if [ "$storm" = 1 ]; then
    while kill -0 $pid 2>/dev/null; do kill -"$sig" $ranks 2>/dev/null; sleep 0.01; done
  fi
  wait $pid
  local rc=$?
  kill $watchdog 2>/dev/null
  local at=$(sed -n 's/^stopped after step \([0-9]*\) .*/\1/p' "$tmp/$name.log")
  [ $rc = 75 ] && [ -n "$at" ] && [ "$at" -lt $steps ] && grep -q "checkpoint .*: step $at," "$tmp/$name.log" &&
    [ ! -e "$ck.tmp" ]
  ok $? "$name: SIG$sig -> step finished, checkpoint at step ${at:-?} written, exit status $rc (75 expected)"
  [ $rc = 75 ] || sed 's/^/#   /' "$tmp/$name.log" | tail -5
  # the same command line, without the delay, completes the run
  mpirun_n 2 $(args) --checkpoint "$ck" --resume auto --report "$tmp/$name-2.json" --save "$tmp/$name-2.h5" \
    >"$tmp/$name-2.log" 2>&1
  rc=$?
  [ $rc = 0 ] && grep -q "resumed from .*: $at steps done" "$tmp/$name-2.log" &&
    [ "$(final "$tmp/$name-2.json")" = "$(final "$tmp/ref.json")" ] &&
    h5diff "$tmp/$name-2.h5" "$tmp/ref.h5" >/dev/null 2>&1
  ok $? "$name: resumed to the end: final loss $(final "$tmp/$name-2.json") and weights bitwise the uninterrupted run's"
}
interrupt usr1 USR1 0
interrupt term TERM 0
interrupt usr1-storm USR1 1
interrupt term-storm TERM 1

# --checkpoint-every DURATION: 40 steps of >= 50 ms, a checkpoint every 0.5 s: at
# least 3 before the final one (4 on an idle machine, fewer steps per second only add more)
mpirun_n 2 "$m" --data "$d" --steps 40 --batch-size 8 --micro-batches 4 --threads 1 --plan uniform --step-delay 50 \
  --checkpoint "$tmp/every.h5" --checkpoint-every 0.5s >"$tmp/every.log" 2>&1
n=$(grep -c "^checkpoint .*every.h5: step [0-9]*," "$tmp/every.log")
[ "$n" -ge 4 ] && grep -q "^checkpoint .*every.h5: step 40," "$tmp/every.log"
ok $? "--checkpoint-every 0.5s: $n checkpoints in a 2-second run, the last at step 40"

# --time-limit: the run stops by itself, with a checkpoint, before the limit; the
# estimate before the first checkpoint is pessimistic (1 s + 50 MB/s), so a 4 s
# limit leaves about 2 s of training (of the 7.5 s that 300 steps take)
steps=300
mpirun_n 2 $(args) --report "$tmp/ref300.json" >"$tmp/ref300.log" 2>&1
ok $? "the uninterrupted 300-step run (the reference)"
now() { date +%s.%N; }
start=$(now)
mpirun_n 2 $(args) --checkpoint "$tmp/tl.h5" --resume auto --step-delay 25 --time-limit 4s >"$tmp/tl.log" 2>&1
rc=$?
took=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
[ $rc = 75 ] && grep -q "stopped after step .*(the time limit is near)" "$tmp/tl.log"
ok $? "--time-limit 4s: stopped with a checkpoint and exit 75 (rc $rc)"
# the whole job, start-up and exit included, within the limit: a wall-clock check
late=$(awk -v t="$took" 'BEGIN { if (t >= 4) print "the job took " t " s" }')
timed_ok "$late" "--time-limit 4s: the job ended before its limit, after $took s"
mpirun_n 2 $(args) --checkpoint "$tmp/tl.h5" --resume auto --time-limit 1h --report "$tmp/tl-2.json" >"$tmp/tl-2.log" 2>&1 &&
  a=$(final "$tmp/tl-2.json") && b=$(final "$tmp/ref300.json") && [ -n "$b" ] && [ "$b" != null ] && [ "$a" = "$b" ]
ok $? "--time-limit: resumed to the end with the uninterrupted run's final loss"
finish
