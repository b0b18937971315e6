#!/bin/sh
# pipeline_equiv.sh — a pipeline trains exactly like one rank: for each model family,
# schedule and S = 2, 3, 4 ranks, three steps of 4 micro-batches give bitwise the same
# losses and final weights as the 1-rank run of the same schedule. Bitwise holds
# because each rank runs one BLAS thread and every layer sees the same micro-batches
# in the same order wherever it runs: only the place of the computation changes.
# GPipe and 1F1B accumulate the micro-batches' gradients in opposite orders, so they
# are compared with each other within a float tolerance instead. Also M = 1 and 2
# micro-batches on 3-4 ranks (M < S).
. "$top_srcdir/tests/lib.sh"
for fam in gpt mlp cnn; do
  make_case $fam $fam || { ok 1 "$fam: model and data"; continue; }
  for sched in gpipe 1f1b; do
    for S in 1 2 3 4; do
      mpirun_n $S "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 3 --batch-size 8 --micro-batches 4 \
        --schedule $sched --threads 1 --plan uniform --report "$tmp/$fam-$sched-$S.json" \
        --save "$tmp/$fam-$sched-$S.h5" >"$tmp/$fam-$sched-$S.log" 2>&1
      rc=$?
      if [ $S = 1 ]; then ok $rc "$fam $sched: 1 rank trains (the reference)"; continue; fi
      [ $rc = 0 ] && [ "$(losses "$tmp/$fam-$sched-$S.json")" = "$(losses "$tmp/$fam-$sched-1.json")" ]
      ok $? "$fam $sched: $S ranks give bitwise the losses of 1 rank"
      h5diff "$tmp/$fam-$sched-$S.h5" "$tmp/$fam-$sched-1.h5" >/dev/null 2>&1
      ok $? "$fam $sched: $S ranks give bitwise the weights of 1 rank"
      [ $rc = 0 ] || sed 's/^/#   /' "$tmp/$fam-$sched-$S.log" | tail -5
    done
  done
  # fewer micro-batches than stages (1F1B's warm-up is then all the forwards, and
  # later stages idle for a whole micro-batch) and one micro-batch (no pipelining):
  # each against its own 1-rank run, since M sets the summation order
  for M in 1 2; do
    for sched in gpipe 1f1b; do
      for S in 1 3 4; do
        [ $M = 1 ] && [ $S = 3 ] && continue
        r="$tmp/$fam-$sched-m$M-$S"
        mpirun_n $S "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 2 --batch-size 8 --micro-batches $M \
          --schedule $sched --threads 1 --plan uniform --report "$r.json" --save "$r.h5" >"$r.log" 2>&1
        rc=$?
        if [ $S = 1 ]; then ok $rc "$fam $sched M=$M: 1 rank trains (the reference)"; continue; fi
        [ $rc = 0 ] && [ "$(losses "$r.json")" = "$(losses "$tmp/$fam-$sched-m$M-1.json")" ] &&
          h5diff "$r.h5" "$tmp/$fam-$sched-m$M-1.h5" >/dev/null 2>&1
        ok $? "$fam $sched M=$M < S=$S: bitwise the losses and weights of 1 rank"
        [ $rc = 0 ] || sed 's/^/#   /' "$r.log" | tail -5
      done
    done
  done
  # every message staged through host memory, as the CUDA backend's are
  # (PPDL_STAGE_MESSAGES=1, backend.h): the runtime's staged receive, send and
  # all-reduce paths, which only a GPU run takes otherwise, give the same bits as the
  # unstaged run of the same plan (a pipeline, and data parallelism for the all-reduce)
  if [ $fam = gpt ]; then
    for c in "1f1b 2 uniform" "1f1b 3 uniform" "gpipe 2 uniform" "1f1b 2 dp"; do
      set -- $c
      r="$tmp/$fam-staged-$1-$2-$3"
      PPDL_STAGE_MESSAGES=1 mpirun_n $2 "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 3 --batch-size 8 \
        --micro-batches 4 --schedule $1 --plan $3 --threads 1 --report "$r.json" --save "$r.h5" >"$r.log" 2>&1
      rc=$?
      if [ $3 = dp ]; then  # its unstaged twin
        mpirun_n $2 "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 3 --batch-size 8 --micro-batches 4 \
          --schedule $1 --plan dp --threads 1 --report "$r-ref.json" --save "$r-ref.h5" >/dev/null 2>&1
        ref="$r-ref"
      else
        ref="$tmp/$fam-$1-$2"
      fi
      [ $rc = 0 ] && [ "$(losses "$r.json")" = "$(losses "$ref.json")" ] && h5diff "$r.h5" "$ref.h5" >/dev/null 2>&1
      ok $? "$fam $1 on $2 ranks, plan $3, messages staged through host memory: bitwise the unstaged run"
      [ $rc = 0 ] || sed 's/^/#   /' "$r.log" | tail -5
    done
  fi
  # same mathematics, different summation order of the micro-batch gradients: the
  # weights agree to float rounding (~1e-7 relative per step) -> 1e-5 absolute
  h5diff -d 1e-5 "$tmp/$fam-gpipe-1.h5" "$tmp/$fam-1f1b-1.h5" >/dev/null 2>&1
  ok $? "$fam: gpipe and 1f1b weights agree within 1e-5"
done
finish
