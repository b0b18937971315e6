#!/bin/sh
# bad_inputs.sh — the bad-input corpus of tests/faults/bad/: every case is refused well.
#
# tests/faults/bad/gen writes the corpus (bad model, data, plan, cost and cluster files, made
# from good ones; bad command lines of ppdl, ppdl-init, ppdl-data and ppdl-plan) and
# cases.tsv, one case per line (the format is in tests/faults/bad/gen and tests/faults/bad/README.md).
# For every case, this checks:
#   - the program exits non-zero, on every rank: ppdl runs under $MPIEXEC with each rank
#     wrapped so that it records its own exit status; a rank may instead be killed by
#     the job's MPI_Abort (then it records nothing, and mpiexec's status is non-zero);
#   - within $BAD_TIMEOUT seconds (a timeout is a failure: a hang);
#   - the output names what is wrong: every word the case lists (the file, the HDF5
#     path or JSON field, the option and its value);
#   - no internal error instead of a message: no sanitizer report, no HDF5 error stack,
#     no check of ppdl's own code tripped (a "file.c:LINE" in the output);
#   - nothing on disk changed: every file the command names and the outputs that exist
#     before it (tests/faults/bad/gen puts them in pre/) keep their checksums, and no file
#     appears or disappears in the corpus (no FILE.tmp left behind).
# Controls ("ok" cases: the same set-ups without the mistake) must succeed, so a
# program that fails on everything cannot pass.
#
# ppdl runs on 1 rank for every case and also on 2 ranks for the cases marked so. Cases
# run $BAD_JOBS at a time (default 2: they mostly wait for MPI to start). One TAP line
# per case; the counts per group and the slowest case are printed as diagnostics.
#
# Run by `make check`; by hand: top_builddir=BUILD top_srcdir=SRC MPIEXEC=mpiexec \
#   sh tests/faults/bad_inputs.sh
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
: "${MPIEXEC:=mpiexec}"
: "${PYTHON_ORACLE:=/usr/bin/python3}"
: "${BAD_JOBS:=2}"
: "${BAD_TIMEOUT:=60}"
. "$top_srcdir/tests/lib.sh"
# sanitizer builds: a malloc of terabytes must fail as it does without ASan (NULL, which
# ppdl reports), not abort in ASan's allocator
[ -n "${ASAN_OPTIONS:-}" ] && ASAN_OPTIONS="$ASAN_OPTIONS:allocator_may_return_null=1" && export ASAN_OPTIONS

[ -x "$PYTHON_ORACLE" ] || skip_all "no $PYTHON_ORACLE to run tests/faults/bad/gen"
# one corpus per worker: a case that wrongly writes a file must not fail another's check
w=0
while [ $w -lt "$BAD_JOBS" ]; do
  if ! "$PYTHON_ORACLE" "$top_srcdir/tests/faults/bad/gen" "$tmp/corpus$w" "$top_builddir" >"$tmp/gen.log" 2>&1; then
    ok 1 "tests/faults/bad/gen writes the corpus"
    sed 's/^/#   /' "$tmp/gen.log"
    finish
    exit 1
  fi
  w=$((w + 1))
done
diag "$(cat "$tmp/gen.log")"
# what the generator could not make here (the HDF5 mutations without h5py): visible SKIPs
sed -n 's/^# skipped: //p' "$tmp/corpus0/cases.tsv" >"$tmp/skipped"
while IFS= read -r why; do skip_ok "bad-input cases left out" "$why"; done <"$tmp/skipped"

# each rank of a ppdl job records its exit status (PMI_RANK is hydra's rank variable)
cat >"$tmp/rank-wrap" <<'EOF'
#!/bin/sh
rec=$1; shift
"$@"
rc=$?
echo "$rc" >"$rec/rank.${PMI_RANK:-0}"
exit $rc
EOF
chmod +x "$tmp/rank-wrap"

tab=$(printf '\t')
n_todo=0

# what may not change: the files a case names, the pre-existing outputs, the listing
# (w/ is where controls write their outputs: neither named nor listed)
state() {  # state ARGS...  (one cksum and one ls: this runs twice per case)
  local files="" a
  for a in "$@" "$C"/pre/*; do
    case $a in "$C"/w/*) continue ;; esac
    [ -f "$a" ] && files="$files $a"
  done
  [ -z "$files" ] || cksum $files   # (the corpus paths hold no spaces)
  ls -A "$C" "$C"/good "$C"/m "$C"/d "$C"/j "$C"/pre "$C"/x
}

# run one case; appends its TAP result (without the number) to $res.
# run_case INDEX RANKS-TO-RUN(1|2) NAME EXPECT WORDS PROG ARGS...
run_case() {
  local idx=$1 n=$2 name=$3 expect=$4 words=$5 prog=$6 out rec rc good why t0 t1 w r
  shift 6
  out=$work/out.$idx.$n
  rec=$work/rec.$idx.$n
  mkdir -p "$rec"
  before=$(state "$@")
  t0=$(date +%s%N)
  case $prog in
    ppdl)
      if [ "$n" = 1 ]; then
        timeout -k 2 "$BAD_TIMEOUT" "$tmp/rank-wrap" "$rec" "$top_builddir/ppdl" "$@" </dev/null >"$out" 2>&1 9>&-
      else
        timeout -k 2 "$BAD_TIMEOUT" "$MPIEXEC" -n "$n" "$tmp/rank-wrap" "$rec" "$top_builddir/ppdl" "$@" </dev/null >"$out" 2>&1 9>&-
      fi ;;
    *) timeout -k 2 "$BAD_TIMEOUT" "$top_builddir/$prog" "$@" </dev/null >"$out" 2>&1 ;;
  esac
  rc=$?
  t1=$(date +%s%N)
  good=1 why=""
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    good=0 why="timed out after ${BAD_TIMEOUT}s"
  elif [ "$expect" = ok ]; then
    [ $rc = 0 ] || { good=0; why="exit $rc, expected success"; }
  else   # fail, or todo:WHY (a known bug: a failure of this check is expected)
    [ $rc != 0 ] || { good=0; why="exit 0"; }
    if [ "$prog" = ppdl ]; then   # every rank: non-zero, or killed by the abort
      r=0
      while [ $r -lt "$n" ]; do
        if [ -f "$rec/rank.$r" ] && [ "$(cat "$rec/rank.$r")" = 0 ]; then good=0; why="$why; rank $r exited 0"; fi
        r=$((r + 1))
      done
    fi
    # (ASan's "failed to allocate" warning is not a finding: the allocation returned
    # NULL, as malloc does, and ppdl's own message follows it)
    if grep -v 'WARNING: AddressSanitizer failed to allocate' "$out" |
       grep -Eq 'Sanitizer|runtime error:|HDF5-DIAG|Segmentation|core dumped|[A-Za-z_]+\.c:[0-9]+'; then
      good=0 why="$why; an internal error, not a message"
    fi
  fi
  oldifs=$IFS; IFS='|'
  for w in $words; do
    grep -qF -- "$w" "$out" || { good=0; why="$why; the message does not name '$w'"; }
  done
  IFS=$oldifs
  [ "$(state "$@")" = "$before" ] || { good=0; why="$why; a file on disk changed"; }
  todo=""
  case $expect in todo:*) todo=" # TODO ${expect#todo:}" ;; esac
  {
    if [ $good = 1 ]; then
      printf 'ok - %s (%s, %d rank%s, exit %s)%s\n' "$name" "$prog" "$n" "$([ "$n" = 1 ] || echo s)" "$rc" "$todo"
    else
      printf 'not ok - %s (%s, %d rank%s, exit %s):%s%s\n' "$name" "$prog" "$n" "$([ "$n" = 1 ] || echo s)" "$rc" \
        "$(echo "$why" | sed 's/^;//')" "$todo"
      printf '#   %s %s\n' "$prog" "$*" | cut -c1-400
      head -c 1500 "$out" | sed 's/^/#   /'
    fi
  } >>"$res"
  echo "$idx $n $(((t1 - t0) / 1000000)) $name" >>"$work/times"
  rm -rf "$rec" "$out"
}

# one worker: the cases whose index is W modulo BAD_JOBS, in its own corpus
worker() {
  local w=$1 idx=0 line name ranks expect words prog a k n
  work=$tmp/w$w
  C=$tmp/corpus$w
  mkdir -p "$work"
  while IFS= read -r line; do
    case $line in '#'*|'') continue ;; esac
    idx=$((idx + 1))
    [ $((idx % BAD_JOBS)) = "$w" ] || continue
    oldifs=$IFS; IFS=$tab; set -f
    set -- $line
    IFS=$oldifs; set +f
    name=$1 ranks=$2 expect=$3 words=$4 prog=$5
    shift 5
    k=$#   # rebuild the arguments, restoring the empty ones
    while [ $k -gt 0 ]; do
      a=$1; shift
      [ "$a" = "<empty>" ] && a=""
      set -- "$@" "$a"
      k=$((k - 1))
    done
    for n in $(echo "$ranks" | tr , ' '); do
      [ "$prog" = ppdl ] || [ "$n" = 1 ] || continue
      res=$work/res.$(printf '%05d' $idx).$n
      run_case "$idx" "$n" "$name" "$expect" "$words" "$prog" "$@"
    done
  done <"$tmp/corpus$w/cases.tsv"
}

t_start=$(date +%s)
w=0
while [ $w -lt "$BAD_JOBS" ]; do
  worker $w &
  w=$((w + 1))
done
wait
t_end=$(date +%s)

# the results in case order, numbered
for f in $(ls "$tmp"/w*/res.* | awk -F/ '{print $NF, $0}' | sort | cut -d' ' -f2); do
  while IFS= read -r line; do
    case $line in
      'ok - '*) n_tap=$((n_tap + 1)); echo "ok $n_tap ${line#ok }" ;;
      'not ok - '*'# TODO '*) n_tap=$((n_tap + 1)); n_todo=$((n_todo + 1)); echo "not ok $n_tap ${line#not ok }" ;;
      'not ok - '*) n_tap=$((n_tap + 1)); n_fail=$((n_fail + 1)); echo "not ok $n_tap ${line#not ok }" ;;
      *) echo "$line" ;;
    esac
  done <"$f"
done

C=$tmp/corpus0
n_cases=$(grep -vc '^#' "$C/cases.tsv")
diag "$n_cases cases, $n_tap runs ($(cat "$tmp"/w*/times | awk '$2 == 2' | wc -l) of ppdl on 2 ranks), $n_fail failed," \
  "$n_todo known bugs (TODO), in $((t_end - t_start)) s with $BAD_JOBS at a time"
diag "cases per group (program: cases):"
grep -v '^#' "$C/cases.tsv" | awk -F'\t' '{ g = $1; sub(/-.*/, "", g); k = $5 ": " g; c[k]++ }
  END { for (k in c) printf "#   %-22s %d\n", k, c[k] }' | sort
diag "slowest runs (seconds, ranks, case):"
cat "$tmp"/w*/times | sort -k3 -n -r | head -3 | awk '{ printf "#   %.2f s  %d  %s\n", $3 / 1000, $2, $4 }'
finish
