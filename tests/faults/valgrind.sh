#!/bin/sh
# valgrind.sh — short training runs under valgrind memcheck: no invalid read or write,
# no use of uninitialised memory, no definite leak, on 1 rank (gpt) and 2 ranks (mlp).
# Skipped, visibly, where valgrind is missing or the build uses sanitizers.
. "$top_srcdir/tests/lib.sh"
command -v valgrind >/dev/null || skip_all "valgrind is not installed (apt-get install valgrind)"
grep -q '^SAN_CFLAGS = -fsanitize' "$top_builddir/Makefile" &&
  skip_all "sanitizer build: memcheck and ASan do not mix"
vg="valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite"
"$PPDL_INIT" --preset gpt-tiny --set seq_len=16 --set d_model=32 -o "$tmp/g.h5" >/dev/null &&
  "$PPDL_DATA" text "$(text_file)" --seq-len 16 -o "$tmp/gd.h5" >/dev/null
timeout 300 $vg "$PPDL" "$tmp/g.h5" --data "$tmp/gd.h5" --steps 2 --batch-size 4 --micro-batches 2 \
  --threads 1 --recompute selective --save "$tmp/out.h5" >"$tmp/log1" 2>&1 9>&-
ok $? "gpt, 1 rank, 2 steps with selective recompute: memcheck clean"
grep '^==' "$tmp/log1" | head -20 | sed 's/^/# /'
make_case m mlp
timeout 300 "$MPIEXEC" -n 2 $vg "$PPDL" "$tmp/m.h5" --data "$tmp/m-data.h5" --steps 2 --batch-size 8 \
  --micro-batches 4 --threads 1 --plan uniform >"$tmp/log2" 2>&1 9>&-
ok $? "mlp, 2 ranks, 2 steps: memcheck clean"
grep '^==' "$tmp/log2" | head -20 | sed 's/^/# /'
finish
