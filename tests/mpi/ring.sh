#!/bin/sh
# ring.sh — the gradient all-reduce's ring (src/net/ring.h) on 1-4 real MPI ranks, on
# the plain network and under --netem's emulation: every rank ends with exactly the
# bits of ring.h's summation order (so all ranks agree bitwise), within 1e-5 of the
# exact sum, with three rings in flight at once advanced by polling (tests/mpi/ring_mpi.c).
. "$top_srcdir/tests/lib.sh"
for n in 1 2 3 4; do
  for mode in plain netem; do
    timeout -k 5 120 "$MPIEXEC" -n $n "$top_builddir/tests/mpi/ring_mpi" $mode >"$tmp/ring-$n-$mode.log" 2>&1 9>&-
    ok $? "ring all-reduce on $n rank(s), $mode network: the ring order's bits on every rank"
    grep '^#' "$tmp/ring-$n-$mode.log" | head -5
  done
done
finish
