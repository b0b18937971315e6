#!/bin/sh
# slurm_chain.sh — a real single-node Slurm (munged, slurmctld, slurmd from Debian),
# started by scripts/slurm/local-slurm (tests/slurm.sh) and stopped at the end, runs
# scripts/slurm/ppdl-chain.sbatch with a 1-minute time limit on a run that needs
# about 50 s of training plus start-ups: Slurm signals the job (--signal=B:USR1@15;
# slurmctld checks time limits periodically and may signal up to a minute early,
# sbatch(1): seen 15-21 s into each link), ppdl checkpoints and exits 75,
# the script requeues the job, and the last link ends with bitwise the final loss and
# weights of the same run made in one go without Slurm. Then ppdl.sbatch runs a short
# job through the mpiexec launcher. The node advertises 2 GPUs backed by /dev/null and
# /dev/zero so the scripts' --gpus-per-task=1 is accepted; ppdl itself runs on the CPU.
# Last, the exit statuses through Slurm: srun (a bad option, the memory limit, SIGTERM
# from scancel to the tasks, SIGUSR1 to srun, with and without --checkpoint) and
# sbatch (scancel: the job's ExitCode is ppdl's 75), with both launchers.
# Skipped, with the reason, where Slurm cannot be installed or started (not root, no
# packages, no free ports). Takes 1-2.5 minutes, mostly waiting for Slurm's clock.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm.sh"

make_case gpt gpt || { ok 1 "model and data"; finish; exit; }
m=$tmp/gpt.h5 d=$tmp/gpt-data.h5
steps=400 delay=125   # 50 s of training: more than a 1-minute link with a signal 15 s before its end
run_args() { echo "$m" --data "$d" --steps $steps --batch-size 8 --micro-batches 4 --log-every 50 --plan uniform; }
mpirun_n 2 $(run_args) --threads 1 --report "$tmp/ref.json" --save "$tmp/ref.h5" >"$tmp/ref.log" 2>&1
ok $? "the run in one go, without Slurm (the reference)"
echo "PPDL_BIN=$top_builddir" >"$tmp/site.env"
export PPDL_SITE_ENV=$tmp/site.env

# ---- the chain: 1-minute links, USR1 15 s (and up to 30 s more) before the end ----
job=$(cd "$tmp" && sbatch --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=1 \
  --signal=B:USR1@15 --output="$tmp/chain-%j.out" "$top_srcdir/scripts/slurm/ppdl-chain.sbatch" \
  $(run_args) --step-delay $delay --checkpoint "$tmp/chain.h5" --report "$tmp/chain.json" --save "$tmp/chain.h5.final" \
  2>"$tmp/sbatch.err")
ok $? "sbatch accepts ppdl-chain.sbatch (job ${job:-none}) $(cat "$tmp/sbatch.err")"
state=$(wait_job "$job" 300)
restarts=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
log=$tmp/chain-$job.out
[ "$state" = COMPLETED ]
ok $? "the chain's job completed (state $state after ${restarts:-?} requeues)"
[ "${restarts:-0}" -ge 1 ] && grep -q "ppdl-chain: SIGUSR1 at" "$log" && grep -q "^stopped after step .*(SIGUSR1)" "$log" &&
  grep -q "ppdl-chain: stopped with a checkpoint; requeueing" "$log" && grep -q "resumed from .*chain.h5" "$log"
ok $? "Slurm signalled a link before its limit; it checkpointed, exited 75 and was requeued; the next resumed"
final() { sed -n 's/.*"final_loss": \([^,]*\),*/\1/p' "$1"; }
[ "$(final "$tmp/chain.json")" = "$(final "$tmp/ref.json")" ] && [ -n "$(final "$tmp/ref.json")" ] &&
  h5diff "$tmp/chain.h5.final" "$tmp/ref.h5" >/dev/null 2>&1
ok $? "the chain ends with the final loss ($(final "$tmp/chain.json")) and weights of the run in one go"
grep "^ppdl-chain\|^stopped\|^resumed\|^checkpoint\|^done" "$log" 2>/dev/null | sed 's/^/#   /'
[ "$state" = COMPLETED ] || { sed 's/^/#   /' "$log" | tail -20; grep -i "error" "$S/log/slurmctld.log" | tail -5 | sed 's/^/#   /'; }

# ---- ppdl.sbatch through the mpiexec fallback (Hydra finds the allocation itself) ----
job=$(cd "$tmp" && env -u HYDRA_LAUNCHER PPDL_LAUNCHER=mpiexec sbatch --parsable --nodes=1 --ntasks-per-node=2 \
  --cpus-per-task=1 --time=2 --output="$tmp/plain-%j.out" "$top_srcdir/scripts/slurm/ppdl.sbatch" \
  "$m" --data "$d" --steps 3 --batch-size 8 --micro-batches 4 2>"$tmp/sbatch2.err")
state=$(wait_job "$job" 120)
[ "$state" = COMPLETED ] && grep -q "launcher mpiexec" "$tmp/plain-$job.out" && grep -q "^done: 3 steps" "$tmp/plain-$job.out"
ok $? "ppdl.sbatch with the mpiexec launcher: 2 ranks trained 3 steps (state $state)"
[ "$state" = COMPLETED ] || sed 's/^/#   /' "$tmp/plain-$job.out" | tail -10
# ---- exit statuses through Slurm (docs/clusters.md) ----
# srun: its status is the highest of its tasks'; each case is one job of its own.
# srun_job NAME PPDL-ARGS...: in the background, log $tmp/NAME.log; sets $job_pid
srun_job() {
  local name=$1
  shift
  srun --mpi=pmi2 -n 2 --cpus-per-task=1 -J "$name" "$PPDL" "$@" >"$tmp/$name.log" 2>&1 9>&- &
  job_pid=$!
}
srun_status() {  # srun_status NAME STATUS PPDL-ARGS...: a run that ends by itself
  local name=$1 want=$2
  shift 2
  srun_job "$name" "$@"
  wait $job_pid
  local rc=$?
  [ $rc = "$want" ]
  ok $? "srun --mpi=pmi2, $name: exit status $want (got $rc)"
  [ $rc = "$want" ] || tail -4 "$tmp/$name.log" | sed 's/^/#   /'
}
srun_status srun-bad-option 2 $(run_args) --no-such-option
srun_status srun-mem-limit 3 $(run_args) --mem-limit 1M,4K
# srun_signal NAME HOW STATUS PPDL-ARGS...: HOW = scancel (SIGTERM to the tasks, as
# scancel and the time limit deliver it) or usr1 (SIGUSR1 to srun, which passes it on)
srun_signal() {
  local name=$1 how=$2 want=$3
  shift 3
  srun_job "$name" "$@" --step-delay 25 --log-every 1
  wait_for "$tmp/$name.log" "^step  *3/" 60
  if [ "$how" = scancel ]; then scancel -s TERM "$(squeue -h -o %i -n "$name")"; else kill -USR1 $job_pid; fi
  wait $job_pid
  local rc=$?
  [ $rc = "$want" ] && grep -q "^stopped after step .*(exit status $want)" "$tmp/$name.log"
  ok $? "srun --mpi=pmi2, $name: stopped after a step, exit status $want (got $rc)"
  [ $rc = "$want" ] || tail -4 "$tmp/$name.log" | sed 's/^/#   /'
}
for k in 1 2 3; do
  rm -f "$tmp/sig.h5"
  srun_signal srun-term-$k scancel 75 $(run_args) --checkpoint "$tmp/sig.h5" --resume auto
done
rm -f "$tmp/sig.h5"
srun_signal srun-usr1 usr1 75 $(run_args) --checkpoint "$tmp/sig.h5" --resume auto
srun_signal srun-term-no-checkpoint scancel 143 $(run_args)

# sbatch: scancel sends SIGTERM to the job script and the ranks; ppdl.sbatch waits for
# ppdl and exits with its status, which Slurm keeps as the job's ExitCode (75:0; the
# state is CANCELLED, as for any cancelled job); with both launchers
for launcher in srun mpiexec; do
  rm -f "$tmp/sb.h5"
  job=$(cd "$tmp" && env -u HYDRA_LAUNCHER PPDL_LAUNCHER=$launcher sbatch --parsable --nodes=1 --ntasks-per-node=2 \
    --cpus-per-task=1 --time=2 --output="$tmp/sb-$launcher-%j.out" "$top_srcdir/scripts/slurm/ppdl.sbatch" \
    $(run_args) --step-delay 25 --log-every 1 --checkpoint "$tmp/sb.h5" --resume auto 2>"$tmp/sbatch3.err")
  wait_for "$tmp/sb-$launcher-$job.out" "^step  *3/" 90
  scancel "$job"
  state=$(wait_job "$job" 60)
  code=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*[^a-zA-Z]ExitCode=\([0-9:]*\).*/\1/p')
  [ "$code" = 75:0 ] && grep -q "^stopped after step .*(exit status 75)" "$tmp/sb-$launcher-$job.out"
  ok $? "sbatch ppdl.sbatch ($launcher), scancel: ppdl checkpointed; the job's ExitCode is 75:0 (got ${code:-none}, state $state)"
  [ "$code" = 75:0 ] || tail -6 "$tmp/sb-$launcher-$job.out" | sed 's/^/#   /'
done
finish
