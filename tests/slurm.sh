# tests/slurm.sh — a private single-node Slurm for a test (sourced after tests/lib.sh):
# munged, slurmctld and slurmd from Debian's slurm-wlm and munge, all in $tmp/slurm, on
# ports of their own, stopped by PID when the test exits (its jobs first). Skips the
# whole test, with the reason, where that cannot be (not root, no packages, ports
# taken). The node advertises 2 GPUs backed by /dev/null and /dev/zero so that job
# scripts asking --gpus-per-task=1 are accepted; SLURM_CONF is exported.
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
