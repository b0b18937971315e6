#!/bin/sh
# train_tiny.sh — the tiny GPT learns real text: after a short run on one rank its loss
# is well below ln(256) = 5.55, the loss of a model that knows nothing about bytes.
. "$top_srcdir/tests/lib.sh"
"$PPDL_INIT" --preset gpt-tiny --seed 1 -o "$tmp/gpt.h5" >/dev/null
ok $? "ppdl-init made gpt-tiny"
"$PPDL_DATA" text "$(text_file)" --seq-len 64 -o "$tmp/text.h5" >/dev/null
ok $? "ppdl-data made byte tokens from $(text_file)"
mpirun_n 1 "$tmp/gpt.h5" --data "$tmp/text.h5" --steps 120 --batch-size 16 --micro-batches 2 --lr 3e-3 \
  --threads 1 --report "$tmp/r.json" >"$tmp/log" 2>&1
ok $? "120 training steps ran"
first=$(losses "$tmp/r.json" | head -1)
last=$(losses "$tmp/r.json" | tail -1)
diag "first loss $first, last loss $last"
# ln(256) = 5.55. A byte-level model that has learnt English letter and bigram
# frequencies is below 3; 3.0 leaves room for run-to-run noise and is unreachable by a
# model that does not learn (or learns the wrong targets).
awk -v f="$first" 'BEGIN { exit !(f > 5.0 && f < 6.0) }'
ok $? "the first loss ($first) is near ln(256) = 5.55"
awk -v l="$last" 'BEGIN { exit !(l < 3.0) }'
ok $? "the last loss ($last) is well below ln(256): below 3.0"
grep -q 'samples/s' "$tmp/log"
ok $? "progress lines show throughput"
finish
