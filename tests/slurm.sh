# tests/slurm.sh — a private single-node Slurm for a test (sourced after tests/lib.sh):
# scripts/slurm/local-slurm starts munged, slurmctld and slurmd (Debian's slurm-wlm and
# munge, installed if missing) in $tmp/slurm on ports of their own, and stops them when
# the test exits (its jobs first). Skips the whole test, with the reason, where that
# cannot be (not root, no packages, no free ports). The node advertises 2 fake GPUs
# (/dev/null, /dev/zero) so that job scripts asking --gpus-per-task=1 are accepted;
# SLURM_CONF is exported. Also wait_job ID SECONDS.
[ "$(id -u)" = 0 ] || skip_all "starting munged, slurmctld and slurmd needs root"
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
