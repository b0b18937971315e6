#!/bin/sh
# cuda_train.sh — training on the CUDA backend takes the CPU backend's steps.
#
# For each family (gpt, mlp, cnn; the small cases of lib.sh), two training steps of
# 2 micro-batches on the CPU backend (the reference) and on the device under test:
#  - the losses agree to 1e-5 relative: step 1 is a pure forward; fp32 sums in
#    another order differ by ~1e-6;
#  - the weights agree to 1e-4 of the update they received. AdamW runs with eps = 1,
#    lr = 0.5, no weight decay: with eps that large its update is lr*m/(sqrt(v)+1),
#    nearly the gradient itself, so a rounding difference in a near-zero gradient stays
#    a rounding difference (with eps = 1e-8 the first update is lr*sign(g), and a sign
#    flip from noise would be a difference of 2*lr, a false alarm).
# Then a 2-stage pipeline (gpt) against one rank on the device under test: the same
# losses and weights. On one GPU the two ranks share it (PPDL_CUDA_SHARE=1) and their
# messages are staged through host memory.
#
# The device under test is CUDA when a GPU is usable. Without one, the CPU backend
# stands in for it: the comparison code runs and must pass (a harness check, labelled
# so), and must fail against a run with every gradient doubled (PPDL_TEST_GRAD_SCALE,
# its negative control); every CUDA check is a SKIP line with the reason, and `ppdl
# --backend cuda` must fail with a message that names the CUDA error. With
# PPDL_REQUIRE_CUDA=1 (tests/gpu/run sets it) a GPU that is not usable fails instead:
# on the GPU machine a broken device must not pass as "skipped".
# NCCL (--p2p, docs/gpus.md): on a node with 2 or more GPUs the 2-rank
# pipeline above runs with --p2p auto, which takes nccl there: the header must say so,
# and its losses and weights are checked against 1 rank as above. On a node with one
# GPU (the ranks share it): --p2p auto says "p2p mpi (... ranks share a GPU ...)",
# --p2p nccl is refused with status 2 naming the reason, and 1 rank with --p2p nccl
# trains (the communicators made and destroyed; a single stage sends nothing). With 2
# GPUs also data parallelism (--plan dp: one stage, 2 replicas) on --p2p auto, whose
# gradient sums then run through ncclAllReduce: its losses against 1 rank within 1e-5
# relative over 3 steps at --lr 0.05, the bound and the settings of tests/mpi/hybrid.sh
# (a sum of the replicas' halves rounds differently from one rank's sum, ~1e-7 each).
# bf16 (docs/precision.md): on a GPU, gpt with --precision bf16 on the CUDA backend:
# the header names the cuBLAS bf16 GEMMs, and the losses of its 2 steps are the CPU
# backend's bf16 losses within 1e-2 relative. Not bitwise, not 1e-5: both sides
# multiply the same bf16 values exactly, but sum in another order, and every layer
# rounds its output to bf16, so a value within fp32 noise of a rounding midpoint
# lands one bf16 ulp (up to 2^-7 of it) apart on the two sides; a loss averages
# thousands of such values, 1e-2 is the bound of one ulp on all of them. Then a
# 2-rank pipeline in bf16 against 1 rank on the GPU: the same kernels on the same
# shapes, so the losses agree to 1e-6 as in fp32 above. Without a GPU these are SKIP
# lines (the CPU side of bf16 is tests/mpi/bf16_equiv.sh's).
. "$top_srcdir/tests/lib.sh"

# a Python with h5py and numpy for the weight comparison
py=
for p in "$PYTHON_ORACLE" python3; do
  if "$p" -c 'import h5py, numpy' >/dev/null 2>&1; then py=$p; break; fi
done
[ -n "$py" ] || skip_all "no Python with h5py and numpy to compare weights"

why=$("$top_builddir/tests/unit/test_backend_ops.t" --probe 2>&1)
if [ $? = 0 ]; then dut=cuda; else dut=cpu; fi
diag "device under test: $dut${why:+ ($why)}"
[ "${PPDL_REQUIRE_CUDA:-0}" = 1 ] && { [ $dut = cuda ]; ok $? "PPDL_REQUIRE_CUDA=1: a usable GPU (${why:-ok})"; }

# rel_close A B TOL: |A - B| <= TOL * |B|, line by line of two loss lists
rel_close() {
  paste "$1" "$2" | awk -v tol="$3" '
    { d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
      if (!(d <= tol * m)) bad++; n++ }
    END { exit !(n > 0 && !bad) }'
}

common="--steps 2 --batch-size 8 --micro-batches 2 --lr 0.5 --eps 1 --weight-decay 0 --threads 1"
for fam in gpt mlp cnn; do
  make_case $fam $fam || { ok 1 "$fam: model and data"; continue; }
  for be in cpu $dut; do
    tag=$fam-$be
    [ $be = cpu ] && [ -e "$tmp/$tag.h5" ] && tag=$fam-cpu2 # CPU against itself
    mpirun_n 1 "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" $common --backend $be \
      --report "$tmp/$tag.json" --save "$tmp/$tag.h5" >"$tmp/$tag.log" 2>&1
    rc=$?
    [ $rc = 0 ] || sed 's/^/#   /' "$tmp/$tag.log" | tail -5
  done
  ref=$fam-cpu
  got=$fam-$dut
  [ $dut = cpu ] && got=$fam-cpu2
  label="$fam: $dut against cpu"
  [ $dut = cpu ] && label="$fam: harness check, cpu against cpu"
  [ -e "$tmp/$ref.h5" ] && [ -e "$tmp/$got.h5" ]
  ok $? "$label: both runs trained"
  losses "$tmp/$ref.json" >"$tmp/$ref.loss"
  losses "$tmp/$got.json" >"$tmp/$got.loss"
  diag "$fam losses: $(tr '\n' ' ' <"$tmp/$got.loss")(reference $(tr '\n' ' ' <"$tmp/$ref.loss"))"
  rel_close "$tmp/$got.loss" "$tmp/$ref.loss" 1e-5
  ok $? "$label: the losses of both steps agree to 1e-5"
  out=$("$py" "$top_srcdir/tests/h5compare.py" "$tmp/$got.h5" "$tmp/$ref.h5" "$tmp/$fam.h5" 1e-4)
  rc=$?
  diag "$fam weights: $out"
  ok $rc "$label: the weights agree to 1e-4 of their update"
  if [ $dut = cpu ]; then
    # the harness's negative control: the same comparison against doubled gradients
    PPDL_TEST_GRAD_SCALE=0:2 mpirun_n 1 "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" $common --backend cpu \
      --report "$tmp/$fam-bad.json" --save "$tmp/$fam-bad.h5" >"$tmp/$fam-bad.log" 2>&1
    rc=$?
    out=$("$py" "$top_srcdir/tests/h5compare.py" "$tmp/$fam-bad.h5" "$tmp/$ref.h5" "$tmp/$fam.h5" 1e-4)
    hc=$?
    [ $rc = 0 ] && [ $hc != 0 ]
    ok $? "$fam: harness negative control: doubled gradients fail the weight comparison ($out)"
  fi
done

# ---- a pipeline of 2 ranks on the device under test reproduces 1 rank ----
if [ $dut = cuda ]; then
  # the GPUs of this node; on one GPU the two ranks share it
  share=0
  n_gpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ "${n_gpu:-0}" -lt 2 ] && share=1
  pipe_env="env PPDL_CUDA_SHARE=$share"
  pipe_what="2 ranks on $([ $share = 1 ] && echo 'one shared GPU, host-staged messages' || echo 'two GPUs, NCCL messages')"
else
  pipe_env=env
  pipe_what="harness check, cpu"
fi
for S in 1 2; do
  $pipe_env timeout -k 5 180 "$MPIEXEC" -n $S "$PPDL" "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" $common --steps 3 --micro-batches 4 \
    --plan uniform --backend $dut --report "$tmp/pipe-$S.json" --save "$tmp/pipe-$S.h5" >"$tmp/pipe-$S.log" 2>&1 9>&-
  rc=$?
  [ $rc = 0 ] || sed 's/^/#   /' "$tmp/pipe-$S.log" | tail -5
  ok $rc "pipeline ($pipe_what): $S rank(s) train"
done
losses "$tmp/pipe-1.json" >"$tmp/pipe-1.loss"
losses "$tmp/pipe-2.json" >"$tmp/pipe-2.loss"
cmp -s "$tmp/pipe-1.loss" "$tmp/pipe-2.loss" && diag "pipeline: losses bitwise equal" || diag "pipeline: losses not bitwise equal"
# the same kernels on the same shapes: equal up to the order of the loss sum (1e-6)
rel_close "$tmp/pipe-2.loss" "$tmp/pipe-1.loss" 1e-6
ok $? "pipeline ($pipe_what): 2 ranks give the losses of 1 rank"
out=$("$py" "$top_srcdir/tests/h5compare.py" "$tmp/pipe-2.h5" "$tmp/pipe-1.h5" "$tmp/gpt.h5" 1e-5)
rc=$?
diag "pipeline weights: $out"
ok $rc "pipeline ($pipe_what): 2 ranks give the weights of 1 rank"

# ---- bf16 on the GPU ----
if [ $dut = cuda ]; then
  for be in cpu cuda; do
    mpirun_n 1 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" $common --backend $be --precision bf16 \
      --report "$tmp/bf16-$be.json" >"$tmp/bf16-$be.log" 2>&1
    rc=$?
    [ $rc = 0 ] || sed 's/^/#   /' "$tmp/bf16-$be.log" | tail -5
  done
  grep -q '^precision bf16 (cuBLAS bf16 GEMMs' "$tmp/bf16-cuda.log"
  ok $? "bf16 on the GPU: the header names the cuBLAS bf16 GEMMs"
  grep '^precision' "$tmp/bf16-cuda.log" | sed 's/^/#   /'
  losses "$tmp/bf16-cpu.json" >"$tmp/bf16-cpu.loss"
  losses "$tmp/bf16-cuda.json" >"$tmp/bf16-cuda.loss"
  diag "gpt bf16 losses: cuda $(tr '\n' ' ' <"$tmp/bf16-cuda.loss")cpu $(tr '\n' ' ' <"$tmp/bf16-cpu.loss")"
  rel_close "$tmp/bf16-cuda.loss" "$tmp/bf16-cpu.loss" 1e-2
  ok $? "bf16 on the GPU: the losses of both steps are the CPU backend's bf16 losses within 1e-2"
  for S in 1 2; do
    $pipe_env timeout -k 5 180 "$MPIEXEC" -n $S "$PPDL" "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" $common --steps 3 \
      --micro-batches 4 --plan uniform --backend cuda --precision bf16 --report "$tmp/bf16-pipe-$S.json" \
      >"$tmp/bf16-pipe-$S.log" 2>&1 9>&-
    rc=$?
    [ $rc = 0 ] || sed 's/^/#   /' "$tmp/bf16-pipe-$S.log" | tail -5
  done
  losses "$tmp/bf16-pipe-1.json" >"$tmp/bf16-pipe-1.loss"
  losses "$tmp/bf16-pipe-2.json" >"$tmp/bf16-pipe-2.loss"
  cmp -s "$tmp/bf16-pipe-1.loss" "$tmp/bf16-pipe-2.loss" && diag "bf16 pipeline: losses bitwise equal" ||
    diag "bf16 pipeline: losses not bitwise equal"
  rel_close "$tmp/bf16-pipe-2.loss" "$tmp/bf16-pipe-1.loss" 1e-6
  ok $? "bf16 pipeline ($pipe_what): 2 ranks give the losses of 1 rank"
else
  for what in "bf16 on the GPU: the header names the cuBLAS bf16 GEMMs" \
              "bf16 on the GPU: the CPU backend's bf16 losses within 1e-2" "bf16 pipeline on the GPU: 2 ranks as 1"; do
    no_cuda_ok "$what" "$why"
  done
fi

# ---- the device checks that need (or need the absence of) a GPU ----
if [ $dut = cuda ]; then
  n_gpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "${n_gpu:-0}" -lt 2 ]; then
    timeout -k 5 180 "$MPIEXEC" -n 2 "$PPDL" "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 1 --plan uniform --backend cuda >"$tmp/share.log" 2>&1 9>&-
    rc=$?
    [ $rc != 0 ] && grep -q 'at most one rank per GPU' "$tmp/share.log"
    ok $? "2 ranks on 1 GPU without PPDL_CUDA_SHARE=1: a clear error"
    sed 's/^/#   /' "$tmp/share.log" | grep -m1 'GPU'
  else
    echo "ok $((n_tap + 1)) # SKIP the too-few-GPUs error needs a node with 1 GPU"; n_tap=$((n_tap + 1))
  fi
else
  mpirun_n 1 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 1 --backend cuda >"$tmp/nocuda.log" 2>&1
  rc=$?
  if grep -q 'built without CUDA' "$tmp/nocuda.log"; then
    [ $rc != 0 ]
    ok $? "--backend cuda in a build without CUDA: a clear error"
  else
    [ $rc != 0 ] && grep -q 'no usable CUDA device' "$tmp/nocuda.log" && grep -qF "$why" "$tmp/nocuda.log"
    ok $? "--backend cuda without a usable GPU: a clear error naming it ($why)"
  fi
  sed 's/^/#   /' "$tmp/nocuda.log" | head -2
  for what in "CUDA and CPU steps agree (gpt, mlp, cnn)" "a 2-rank pipeline on the GPU" "the too-few-GPUs error"; do
    no_cuda_ok "$what" "$why"
  done
fi
# ---- --p2p: which path runs on this node ----
if [ $dut = cuda ]; then
  if [ "$share" = 0 ]; then
    grep -q '^p2p nccl' "$tmp/pipe-2.log"
    ok $? "2 ranks on two GPUs: --p2p auto takes nccl (the pipeline checks above ran on it)"
    grep '^p2p ' "$tmp/pipe-2.log" | sed 's/^/#   /'
    skip_ok "ranks sharing a GPU: --p2p auto takes mpi, --p2p nccl refused" "this node has $n_gpu GPUs"
    dp="--steps 3 --batch-size 8 --micro-batches 4 --lr 0.05 --eps 1 --weight-decay 0 --threads 1 --backend cuda"
    for S in 1 2; do
      plan=uniform
      [ $S = 2 ] && plan=dp
      timeout -k 5 180 "$MPIEXEC" -n $S "$PPDL" "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" $dp --plan $plan \
        --report "$tmp/dp-$S.json" >"$tmp/dp-$S.log" 2>&1 9>&-
      rc=$?
      [ $rc = 0 ] || sed 's/^/#   /' "$tmp/dp-$S.log" | tail -5
    done
    losses "$tmp/dp-1.json" >"$tmp/dp-1.loss"
    losses "$tmp/dp-2.json" >"$tmp/dp-2.loss"
    grep -q '^p2p nccl' "$tmp/dp-2.log" && rel_close "$tmp/dp-2.loss" "$tmp/dp-1.loss" 1e-5
    ok $? "2 replicas on two GPUs, gradient sums through NCCL: the losses of 1 rank within 1e-5"
    # the probe times the links on the path the messages take: NCCL between the GPUs
    timeout -k 5 180 "$MPIEXEC" -n 2 "$PPDL" "$tmp/gpt.h5" --backend cuda --p2p nccl --probe-only \
      --cluster-out "$tmp/nccl-cluster.json" >"$tmp/nccl-probe.log" 2>&1 9>&-
    /usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); sys.exit(not (c["probe"]["path"] == "nccl" and min(c["bandwidth_Bps"][0][1], c["bandwidth_Bps"][1][0]) > 0))' \
      "$tmp/nccl-cluster.json" 2>/dev/null && grep -q 'messages through NCCL)' "$tmp/nccl-probe.log"
    ok $? "--p2p nccl --probe-only on two GPUs: the links timed through NCCL (CLUSTER.json probe.path nccl, the table says so)"
    grep -A3 '^cluster:' "$tmp/nccl-probe.log" | sed 's/^/#   /'
  else
    grep -q '^p2p mpi (--p2p auto: ranks share a GPU' "$tmp/pipe-2.log"
    ok $? "2 ranks sharing the GPU: --p2p auto says p2p mpi and why"
    grep '^p2p ' "$tmp/pipe-2.log" | sed 's/^/#   /'
    PPDL_CUDA_SHARE=1 timeout -k 5 180 "$MPIEXEC" -n 2 "$PPDL" "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" $common \
      --plan uniform --backend cuda --p2p nccl >"$tmp/p2p-shared.log" 2>&1 9>&-
    rc=$?
    [ $rc = 2 ] && grep -q 'ppdl: --p2p nccl cannot run: ranks share a GPU' "$tmp/p2p-shared.log"
    ok $? "2 ranks sharing the GPU: --p2p nccl refused with status 2 (got $rc) and the reason"
    sed 's/^/#   /' "$tmp/p2p-shared.log" | grep -m1 'p2p'
    skip_ok "NCCL messages and all-reduces between 2 GPUs" "this node has one GPU, and NCCL refuses two ranks on one"
    skip_ok "the probe through NCCL between 2 GPUs" "this node has one GPU, and NCCL refuses two ranks on one"
  fi
  timeout -k 5 180 "$MPIEXEC" -n 1 "$PPDL" "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" $common --backend cuda \
    --p2p nccl --report "$tmp/p2p-one.json" >"$tmp/p2p-one.log" 2>&1 9>&-
  rc=$?
  [ $rc = 0 ] || sed 's/^/#   /' "$tmp/p2p-one.log" | tail -5
  [ $rc = 0 ] && grep -q '^p2p nccl' "$tmp/p2p-one.log"
  ok $? "1 rank, --p2p nccl: trains, the header says p2p nccl (communicators made and destroyed)"
else
  for what in "--p2p auto takes nccl on GPUs of their own, mpi where they share one" \
              "--p2p nccl refused where ranks share a GPU" "1 rank with --p2p nccl" \
              "replicas' gradient sums through NCCL" "the probe through NCCL"; do
    no_cuda_ok "$what" "$why"
  done
fi
finish
