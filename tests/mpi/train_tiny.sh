#!/bin/sh
# train_tiny.sh — the tiny GPT learns real text: after a short run on one rank its loss
# is well below ln(256) = 5.55, the loss of a model that knows nothing about bytes.
# Judged on the mean of the last 10 steps' losses, not the last one: one mini-batch's
# loss varies by +-0.1 from batch to batch (seen: 2.93-3.13 over steps 111-120), so a
# bound on the last alone passed or failed by the luck of its batch (the weight-decay
# change of 2026-12-02 moved the last from 2.93 to 3.03 while the mean of the last 10
# moved from 3.03 to 3.08). 200 steps bring that mean to ~2.83 untied; gpt-tiny ties its
# embeddings since tie_embeddings became the presets' default, and then reaches 2.72 (the
# same bound: tying changes the model, the bound is about learning at all).
. "$top_srcdir/tests/lib.sh"
"$PPDL_INIT" --preset gpt-tiny --seed 1 -o "$tmp/gpt.h5" >/dev/null
ok $? "ppdl-init made gpt-tiny"
"$PPDL_DATA" text "$(text_file)" --seq-len 64 -o "$tmp/text.h5" >/dev/null
ok $? "ppdl-data made byte tokens from $(text_file)"
mpirun_n 1 "$tmp/gpt.h5" --data "$tmp/text.h5" --steps 200 --batch-size 16 --micro-batches 2 --lr 3e-3 \
  --threads 1 --report "$tmp/r.json" >"$tmp/log" 2>&1
ok $? "200 training steps ran"
first=$(losses "$tmp/r.json" | head -1)
last=$(losses "$tmp/r.json" | tail -10 | awk '{ s += $1 } END { printf "%.6f", s / NR }')
diag "first loss $first, mean of the last 10 losses $last"
# ln(256) = 5.55. A byte-level model that has learnt English letter and bigram
# frequencies is below 3; 3.0 leaves room for run-to-run noise and is unreachable by a
# model that does not learn (or learns the wrong targets).
awk -v f="$first" 'BEGIN { exit !(f > 5.0 && f < 6.0) }'
ok $? "the first loss ($first) is near ln(256) = 5.55"
awk -v l="$last" 'BEGIN { exit !(l < 3.0) }'
ok $? "the mean of the last 10 losses ($last) is well below ln(256): below 3.0"
grep -q 'samples/s' "$tmp/log"
ok $? "progress lines show throughput"
finish
