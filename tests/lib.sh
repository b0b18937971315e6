# tests/lib.sh — TAP helpers for shell tests (sourced). Each test makes its own
# scratch directory and counts its checks; `finish` prints the plan and the status.
n_tap=0
n_fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ppdl-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

ok() {   # ok CONDITION-EXIT-STATUS "description"
  n_tap=$((n_tap + 1))
  if [ "$1" = 0 ]; then echo "ok $n_tap - $2"; else echo "not ok $n_tap - $2"; n_fail=$((n_fail + 1)); fi
}
diag() { printf '# %s\n' "$@"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
finish() { echo "1..$n_tap"; [ "$n_fail" = 0 ]; }

PPDL=$top_builddir/tests/ppdl # the test build: ppdl with the test hooks (core/test_hooks.h)
PPDL_INIT=$top_builddir/ppdl-init
PPDL_DATA=$top_builddir/ppdl-data
# cluster_for N ARGS...: prints a --cluster file for a run of ppdl ARGS on N ranks that
# would probe the network only to write it into its --report: a plan given (--plan
# uniform, dp or a file), no --schedule auto, nothing that asks for the network itself
# (--cluster, --cluster-out, --probe-only, --netem). The probe times the links for
# about a second at 4 ranks here, hundreds of times a suite, and decides nothing in
# such a run: the tests of the probe and of what it decides (probe_netem, cluster_emu,
# plan_auto, default_plan, schedule_auto, ...) run it. The file: one node, every link
# 4 GB/s and 1.3 us, as the probe measures this machine; the job's own hosts. A test
# of that probe itself sets probe_for_report=1.
cluster_for() {
  local n=$1 a prev= report=0 given=0
  shift
  [ "$n" -gt 1 ] && [ "${probe_for_report:-0}" != 1 ] || return 0
  for a in "$@"; do
    case $a in
      --cluster|--cluster-out|--probe-only|--netem|--plan-trials) return 0 ;;
      --report) report=1 ;;
    esac
    [ "$prev" = --plan ] && { [ "$a" = auto ] && return 0; given=1; }
    [ "$prev" = --schedule ] && [ "$a" = auto ] && return 0
    prev=$a
  done
  [ $report = 1 ] && [ $given = 1 ] || return 0
  local f=$tmp/.cluster-$n.json
  [ -s "$f" ] || awk -v n="$n" 'function row(v, d,  i, s) { s = "["; for (i = 0; i < n; i++) s = s (i ? ", " : "") (i == d ? 0 : v); return s "]" }
    function mat(v,  i, s) { s = "["; for (i = 0; i < n; i++) s = s (i ? ", " : "") row(v, i); return s "]" }
    BEGIN { printf "{\"ranks\": %d, \"bandwidth_Bps\": %s, \"latency_s\": %s, \"mem_bytes\": %s, \"speed\": %s}\n",
            n, mat(4e9), mat(1.3e-6), row(4e9, -1), row(1, -1) }' >"$f"
  echo "--cluster $f"
}
# every MPI run ends within a bound: a hang is a failure, not a stuck CI
mpirun_n() {  # mpirun_n N ARGS... (runs ppdl)
  local n=$1; shift
  # 8>&- 9>&-: the ranks do not hold the test's run-alone locks (env.sh), even if one outlived it
  timeout -k 5 180 "$MPIEXEC" -n "$n" "$PPDL" "$@" $(cluster_for "$n" "$@") 8>&- 9>&-
}
# wait_for FILE REGEX SECONDS: until FILE has a line matching REGEX (1: not in time)
wait_for() {
  local i=0
  while [ $i -lt $(($3 * 20)) ]; do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.05; i=$((i + 1))
  done
  return 1
}
# a text every Debian system has, for language-model data
text_file() {
  for f in /usr/share/common-licenses/GPL-3 "$top_srcdir/README.md"; do
    [ -r "$f" ] && { echo "$f"; return; }
  done
}
# make a small model + data of a family in $tmp: make_case NAME FAMILY
make_case() {
  local name=$1 fam=$2
  case $fam in
    gpt) "$PPDL_INIT" --preset gpt-tiny --set n_layers=3 --set d_model=32 --set seq_len=16 --seed 3 -o "$tmp/$name.h5" >/dev/null &&
         "$PPDL_DATA" text "$(text_file)" --seq-len 16 -o "$tmp/$name-data.h5" >/dev/null ;;
    mlp) "$PPDL_INIT" --preset mlp-tiny --seed 3 -o "$tmp/$name.h5" >/dev/null &&
         "$PPDL_DATA" synth --family mlp --model "$tmp/$name.h5" -n 64 --seed 5 -o "$tmp/$name-data.h5" >/dev/null ;;
    cnn) "$PPDL_INIT" --preset cnn-tiny --seed 3 -o "$tmp/$name.h5" >/dev/null &&
         "$PPDL_DATA" synth --family cnn --model "$tmp/$name.h5" -n 64 --seed 5 -o "$tmp/$name-data.h5" >/dev/null ;;
  esac
}
# the losses of a report, one per line, full precision
losses() { /usr/bin/python3 -c 'import json,sys; [print(repr(s["loss"])) for s in json.load(open(sys.argv[1]))["steps"]]' "$1" 2>/dev/null ||
           grep -o '"loss": [^,]*' "$1"; }
# run_alone: from here on no other test runs beside this one (make -j2 check): the
# shared lock every test holds (tests/env.sh) becomes exclusive. For tests that time
# the network, where another test's ranks on the 2 cores make late wake-ups of whole
# time slices. Bounded: after 300 s (no test here takes over ~80 s)
# it goes on beside the others and says so.
run_alone() {
  command -v flock >/dev/null 2>&1 || { diag "no flock(1): timing beside other tests"; return 0; }
  [ -e /proc/$$/fd/9 ] || exec 9>>"$top_builddir/tests/.run-alone"
  local t0=$(date +%s)
  # the turnstile first (env.sh), held to the end: tests that start from now on wait
  # for this one; the shared lock let go meanwhile, so another timing test that holds
  # the turnstile can have the lock
  flock -u 9
  exec 8>>"$top_builddir/tests/.run-alone-turn"
  flock -x -w 300 8 || diag "waited 300 s for the turnstile"
  flock -x -w 300 9 || { diag "waited 300 s for the other tests to end: timing beside them"; return 0; }
  diag "running alone (waited $(( $(date +%s) - t0 )) s for the test beside this one)"
}
# timed_ok OUT DESCRIPTION: ok when OUT (what a timing check found out of tolerance) is
# empty; when it is not and the machine is busier than twice its cores, a visible SKIP
# instead of a failure: at such load a rank waits whole time slices (ms) for a core and
# timings mean nothing (seen at load 5-10: loopback TCP at 0.03-0.3 GB/s, 1 MiB through
# shared memory in 4-8 ms, shaped links at 40-70% of their rate)
timed_ok() {
  local load cores
  load=$(cut -d' ' -f1 /proc/loadavg) cores=$(getconf _NPROCESSORS_ONLN)
  if [ -n "$1" ] && /usr/bin/python3 -c "import sys; sys.exit(not ($load > 2 * $cores))"; then
    n_tap=$((n_tap + 1))
    echo "ok $n_tap - $2 # SKIP the machine is too busy to time it (load $load on $cores cores)"
  else
    [ -z "$1" ]
    ok $? "$2"
  fi
}
# skip_ok DESCRIPTION REASON: a visible SKIP for a check this machine cannot make
skip_ok() { n_tap=$((n_tap + 1)); echo "ok $n_tap - $1 # SKIP $2"; }
# no_cuda_ok DESCRIPTION REASON: a CUDA check that cannot run here. A SKIP, except where
# PPDL_REQUIRE_CUDA=1 (tests/gpu/run sets it on the GPU machine): there a GPU that does
# not work is a failure, not a skip
no_cuda_ok() {
  if [ "${PPDL_REQUIRE_CUDA:-0}" = 1 ]; then
    ok 1 "$1 (PPDL_REQUIRE_CUDA=1, but CUDA is not usable: $2)"
  else
    skip_ok "$1" "$2"
  fi
}
# The GPU double (tests/gpudouble): gpud_setup points PPDL at its ppdl and finds a
# Python with h5py ($py), or ends the test; drun TAG N [VAR=VALUE ...] -- ARGS... runs
# it on N ranks with those variables, the log in $tmp/TAG.log, the status in $tmp/TAG.rc
gpud_setup() {
  PPDL=$top_builddir/tests/gpudouble/ppdl
  [ -x "$PPDL" ] || { ok 1 "the GPU double's ppdl is built ($PPDL)"; finish; exit; }
  py=
  for p in "$PYTHON_ORACLE" python3; do
    if "$p" -c 'import h5py, numpy' >/dev/null 2>&1; then py=$p; break; fi
  done
  [ -n "$py" ] || skip_all "no Python with h5py and numpy to compare weights"
}
drun() {
  local tag=$1 n=$2 envs=""
  shift 2
  while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  env $envs timeout -k 5 180 "$MPIEXEC" -n "$n" "$PPDL" "$@" $(cluster_for "$n" "$@") >"$tmp/$tag.log" 2>&1 8>&- 9>&-
  echo $? >"$tmp/$tag.rc"
  [ "$(cat "$tmp/$tag.rc")" = 0 ] || sed 's/^/#   /' "$tmp/$tag.log" | tail -6
}
