#!/bin/sh
# slurm_chain.sh — a real single-node Slurm (munged, slurmctld, slurmd from Debian),
# started by scripts/slurm/local-slurm in a private folder and stopped at the end, runs
# scripts/slurm/ppdl-chain.sbatch with a 1-minute time limit on a run that needs
# about 50 s of training plus start-ups: Slurm signals the job (--signal=B:USR1@15;
# slurmctld checks time limits periodically and may signal up to a minute early,
# sbatch(1): seen 15-21 s into each link), ppdl checkpoints and exits 75,
# the script requeues the job, and the last link ends with bitwise the final loss and
# weights of the same run made in one go without Slurm. Then ppdl.sbatch runs a short
# job through the mpiexec launcher. The node advertises 2 GPUs backed by /dev/null and
# /dev/zero so the scripts' --gpus-per-task=1 is accepted; ppdl itself runs on the CPU.
# Skipped, with the reason, where Slurm cannot be installed or started (not root, no
# packages, no free ports). Takes 1-2.5 minutes, mostly waiting for Slurm's clock.
. "$top_srcdir/tests/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "starting munged, slurmctld and slurmd needs root"

# ---- a private Slurm (scripts/slurm/local-slurm): its own folder, ports and daemons ----
S=$tmp/slurm
stop_slurm() {
  "$top_srcdir/scripts/slurm/local-slurm" stop --dir "$S" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap stop_slurm EXIT
"$top_srcdir/scripts/slurm/local-slurm" start --dir "$S" --gpus 2 >"$tmp/local-slurm.out" 2>&1 ||
  skip_all "the private Slurm did not start: $(tail -1 "$tmp/local-slurm.out")"
SLURM_CONF=$S/slurm.conf
export SLURM_CONF
diag "$(head -1 "$tmp/local-slurm.out")"

make_case gpt gpt || { ok 1 "model and data"; finish; exit; }
m=$tmp/gpt.h5 d=$tmp/gpt-data.h5
steps=400 delay=125   # 50 s of training: more than a 1-minute link with a signal 15 s before its end
run_args() { echo "$m" --data "$d" --steps $steps --batch-size 8 --micro-batches 4 --log-every 50 --plan uniform; }
mpirun_n 2 $(run_args) --threads 1 --report "$tmp/ref.json" --save "$tmp/ref.h5" >"$tmp/ref.log" 2>&1
ok $? "the run in one go, without Slurm (the reference)"
echo "PPDL_BIN=$top_builddir" >"$tmp/site.env"
export PPDL_SITE_ENV=$tmp/site.env

# wait_job ID SECONDS: until the job reaches a final state; prints it
wait_job() {
  local i=0 st=
  while [ $i -lt $(($2 * 2)) ]; do
    st=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
      echo "$st"; return ;;
    esac
    sleep 0.5; i=$((i + 1))
  done
  echo "${st:-UNKNOWN} (still, after $2 s)"
  scancel "$1" 2>/dev/null
}

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
finish
