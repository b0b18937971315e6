#!/bin/sh
# slurm_chain.sh — a real single-node Slurm (munged, slurmctld, slurmd from Debian),
# started here in a private folder and stopped by PID at the end, runs
# scripts/slurm/ppdl-chain.sbatch with a 1-minute time limit on a run that needs
# about 50 s of training plus start-ups: Slurm signals the job (--signal=B:USR1@15;
# slurmctld checks time limits periodically and may signal up to a minute early,
# sbatch(1): seen 15-21 s into each link), ppdl checkpoints and exits 75,
# the script requeues the job, and the last link ends with bitwise the final loss and
# weights of the same run made in one go without Slurm. Then ppdl.sbatch runs a short
# job through the mpiexec launcher. The node advertises 2 GPUs backed by /dev/null and
# /dev/zero so the scripts' --gpus-per-task=1 is accepted; ppdl itself runs on the CPU.
# Skipped, with the reason, where Slurm cannot be installed or started (not root, no
# packages, ports taken). Takes 1-2.5 minutes, mostly waiting for Slurm's clock.
. "$top_srcdir/tests/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "starting munged, slurmctld and slurmd needs root"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || skip_all "Slurm is not installed (Debian packages slurm-wlm munge)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge >"$tmp/apt.log" 2>&1 ||
    skip_all "Slurm is not installed and 'apt-get install slurm-wlm munge' failed: $(tail -1 "$tmp/apt.log")"
fi

# ---- a private Slurm: munged, slurmctld, slurmd, all in $S, stopped by PID ----
S=$tmp/slurm
mkdir -m 700 "$S" "$S/state" "$S/spool" "$S/log"
pids=""
stop_slurm() {
  # jobs of our private cluster first (their slurmstepd outlives slurmd), then the daemons
  if [ -n "${SLURM_CONF:-}" ] && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
    scancel -u "$(id -un)" 2>/dev/null
    sleep 2
  fi
  [ -n "$pids" ] && kill $pids 2>/dev/null
  sleep 0.5
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$tmp"
}
trap stop_slurm EXIT
dd if=/dev/urandom of="$S/munge.key" bs=1024 count=1 2>/dev/null && chmod 600 "$S/munge.key"
munged --force -F --socket="$S/munge.sock" --key-file="$S/munge.key" --pid-file="$S/munged.pid" \
  --log-file="$S/log/munged.log" --seed-file="$S/munge.seed" >"$S/log/munged.out" 2>&1 9>&- &
pids="$pids $!"
# ports of our own (another Slurm may be running on this machine)
port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000))
cat >"$S/slurm.conf" <<EOF
ClusterName=ppdltest
SlurmctldHost=$(hostname)(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# a requeued job may start again only after cred_expire (default 120 s): 10 s here
AuthInfo=socket=$S/munge.sock,cred_expire=10
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
GresTypes=gpu
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ReturnToService=2
# schedule every 5 s (default 60 s, backfill 30 s): a requeued link starts sooner
SchedulerParameters=sched_interval=5,bf_interval=5
KillWait=5
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(getconf _NPROCESSORS_ONLN) RealMemory=2000 Gres=gpu:2 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
printf 'Name=gpu File=/dev/null\nName=gpu File=/dev/zero\n' >"$S/gres.conf"
SLURM_CONF=$S/slurm.conf
export SLURM_CONF
sleep 0.5
slurmctld -D -f "$SLURM_CONF" >"$S/log/slurmctld.out" 2>&1 9>&- &
pids="$pids $!"
slurmd -D -N localhost -f "$SLURM_CONF" >"$S/log/slurmd.out" 2>&1 9>&- &
pids="$pids $!"
n=0
until [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; do
  n=$((n + 1))
  if [ $n -gt 60 ]; then
    msg=$(cat "$S/log/slurmctld.out" "$S/log/slurmd.out" "$S/log/slurmctld.log" 2>/dev/null | grep -i "error\|fatal" | tail -1)
    skip_all "the private Slurm did not start in 30 s: ${msg:-no error logged}"
  fi
  sleep 0.5
done
diag "Slurm $(sinfo -V | cut -d' ' -f2) up: node $(sinfo -h -o '%N %c CPUs %G'), ports $port-$((port + 1))"

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
