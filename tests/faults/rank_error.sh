#!/bin/sh
# rank_error.sh — an error on one rank other than 0, in the middle of a step (a planted
# internal error: the test hook PPDL_TEST_FAIL_STEP=RANK:STEP, pipe/runtime_hooks.h), while
# the other ranks wait for its messages: the job ends by itself within the bound (no hang), with
# a non-zero status; the user sees that rank's own message once (its rank, file:line,
# what went wrong); the checkpoint written before the failing step is intact, and the
# same command resumes from it and finishes with the uninterrupted run's weights.
. "$top_srcdir/tests/lib.sh"
make_case g gpt
common="$tmp/g.h5 --data $tmp/g-data.h5 --batch-size 8 --micro-batches 4 --threads 1 --plan uniform"
# case N RANK STEP SCHEDULE
check_case() {
  n=$1 r=$2 k=$3 sched=$4 name=fail-$1-$2-$4
  t0=$(date +%s)
  PPDL_TEST_FAIL_STEP=$r:$k mpirun_n "$n" $common --steps 6 --schedule "$sched" >"$tmp/$name.log" 2>&1
  rc=$? took=$(( $(date +%s) - t0 ))
  [ $rc != 0 ] && [ $rc != 124 ] && [ $rc != 137 ]
  ok $? "$n ranks ($sched), rank $r fails mid-step $k: the job ends by itself, status $rc, in $took s"
  msg="rank $r .*PPDL_TEST_FAIL_STEP: the planted error of stage [0-9]* at step $k,"
  c=$(grep -c "^ppdl: $msg" "$tmp/$name.log")
  [ "$c" = 1 ]; ok $? "$n ranks ($sched): rank $r's own message reaches the user once (seen $c times)"
  grep "^ppdl: rank" "$tmp/$name.log" | head -2 | sed 's/^/#   /'
  [ "$c" = 1 ] || sed 's/^/#   /' "$tmp/$name.log" | tail -6
}
check_case 2 1 3 1f1b
check_case 4 2 2 1f1b
check_case 4 3 2 gpipe
# nothing on disk damaged: the checkpoint of step 2 survives a failure in step 3
mpirun_n 2 $common --steps 6 --save "$tmp/ref.h5" >"$tmp/ref.log" 2>&1
ok $? "the run without a failure (the reference)"
PPDL_TEST_FAIL_STEP=1:3 mpirun_n 2 $common --steps 6 --checkpoint "$tmp/c.h5" --checkpoint-every 1 --resume auto \
  >"$tmp/c1.log" 2>&1
rc=$?
at=$(h5dump -a /train/step "$tmp/c.h5" 2>/dev/null | sed -n 's/.*(0): \([0-9]*\).*/\1/p')
[ $rc != 0 ] && [ "$at" = 2 ] && [ ! -e "$tmp/c.h5.tmp" ]
ok $? "a failure in step 3 leaves the checkpoint of step 2 (step '$at', status $rc) and no partial file"
mpirun_n 2 $common --steps 6 --checkpoint "$tmp/c.h5" --checkpoint-every 1 --resume auto --save "$tmp/c.h5.out.h5" \
  >"$tmp/c2.log" 2>&1 && grep -q "resumed from" "$tmp/c2.log" && h5diff "$tmp/c.h5.out.h5" "$tmp/ref.h5" >/dev/null 2>&1
ok $? "the same command resumes from it and ends with bitwise the uninterrupted run's weights"
# the hooks live in the test build only (core/test_hooks.h): the ppdl users install
# holds none of their names and trains through the planted failure as if unset
n=$(strings "$top_builddir/ppdl" | grep -c PPDL_TEST_)
[ "$n" = 0 ] && [ "$(strings "$PPDL" | grep -c PPDL_TEST_)" != 0 ]
ok $? "the installed ppdl holds no PPDL_TEST_ name ($n), the test build does"
PPDL_TEST_FAIL_STEP=1:3 timeout -k 5 180 "$MPIEXEC" -n 2 "$top_builddir/ppdl" $common --steps 6 --save "$tmp/inst.h5" \
  >"$tmp/inst.log" 2>&1 9>&- && h5diff "$tmp/inst.h5" "$tmp/ref.h5" >/dev/null 2>&1
ok $? "the installed ppdl ignores PPDL_TEST_FAIL_STEP: status 0 and the reference's weights"
finish
