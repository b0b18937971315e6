#!/bin/sh
# threads_equiv.sh — the CPU backend's results do not depend on its thread count: one
# rank trained with --threads 1, 2 and 3 gives the same losses and the same saved
# weights, bit for bit. The backend splits every kernel over rows or columns and cuts
# GEMMs by shape alone, so each sum keeps one order whatever the number of threads;
# a kernel that split a sum by thread count would break this.
. "$top_srcdir/tests/lib.sh"
make_case gpt gpt && make_case mlp mlp && make_case cnn cnn
ok $? "models and data made"
# a wider GPT: 512 rows per micro-batch and a 4096-wide head, so GEMMs are cut into blocks
"$PPDL_INIT" --preset gpt-tiny --set n_layers=2 --set d_model=64 --set seq_len=64 --set vocab_size=4096 \
  --seed 3 -o "$tmp/wide.h5" >/dev/null &&
  "$PPDL_DATA" text "$(text_file)" --seq-len 64 -o "$tmp/wide-data.h5" >/dev/null
ok $? "a wider gpt made"
for case in gpt mlp cnn wide; do
  for t in 1 2 3; do
    mpirun_n 1 "$tmp/$case.h5" --data "$tmp/$case-data.h5" --steps 3 --batch-size 16 --micro-batches 2 \
      --threads $t --report "$tmp/$case-$t.json" --save "$tmp/$case-$t.h5" >"$tmp/$case-$t.log" 2>&1
    ok $? "$case: 3 steps with --threads $t"
  done
  for t in 2 3; do
    losses "$tmp/$case-1.json" >"$tmp/l1" && losses "$tmp/$case-$t.json" >"$tmp/lt" && cmp -s "$tmp/l1" "$tmp/lt" &&
      h5diff "$tmp/$case-1.h5" "$tmp/$case-$t.h5" >/dev/null 2>&1
    ok $? "$case: --threads $t gives the losses and weights of --threads 1, bit for bit"
  done
done
finish
