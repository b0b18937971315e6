#!/bin/sh
# cuda_double.sh — ppdl's CUDA host code trains on the GPU double (tests/gpudouble): the
# real cuda.c, nccl_p2p.c and the runtime's and probe's NCCL paths, linked into
# tests/gpudouble/ppdl against a CPU stand-in of the CUDA runtime, cuBLAS, cuDNN and
# NCCL (over MPI, with NCCL's ordering and first-contact rules). No GPU is needed.
#
#  - gpt, mlp and cnn on one emulated GPU take the CPU backend's steps: losses within
#    1e-5 relative, weights within 1e-4 of their update (the bounds and the AdamW
#    settings of tests/mpi/cuda_train.sh, which says why). The double's GEMMs are
#    OpenBLAS's, as the CPU backend's, but its kernels are kernels.cu's (GELU, exp and
#    the loss in another order), so not bitwise;
#  - the same with GPUD_LAZY=1: queued work runs only when the host waits for it, so
#    a missing wait shows as a wrong number;
#  - pipelines over NCCL (--p2p auto takes it: a GPU per rank) on 2 and 3 emulated GPUs
#    under every schedule (interleaved and zb-v, several stages per rank, through MPI),
#    with recompute and bf16, give 1 rank's weights bitwise (the same kernels in the
#    same order; NCCL moves bytes); replicas summing
#    gradients through ncclAllReduce (2 stages x 2) agree within 1e-5 (a sum of halves
#    rounds differently, as tests/mpi/hybrid.sh says);
#  - a checkpoint written over NCCL resumes to the uninterrupted run's weights bitwise;
#  - one GPU per rank through CUDA_VISIBLE_DEVICES (Slurm's --gpus-per-task=1): 4 ranks
#    each seeing one GPU train with --backend cuda and auto, no GPU counted as shared;
#    2 ranks on one GPU are refused without PPDL_CUDA_SHARE=1, train with it (MPI
#    messages), and get about half the memory; the probe through NCCL;
#  - every run ends with status 0 and the double's exit report finds no leak (device
#    memory, streams, events, handles, communicators).
# The faults (out of memory, a faulted kernel, NCCL errors and hangs) and the negative
# controls are tests/faults/cuda_double_faults.sh.
. "$top_srcdir/tests/lib.sh"
gpud_setup
export GPUD_WATCHDOG=60

# clean TAG N: status 0, and each of the N processes said "clean exit"
clean() {
  [ "$(cat "$tmp/$1.rc")" = 0 ] && [ "$(grep -c 'gpu double.*clean exit' "$tmp/$1.log")" = "$2" ] &&
    ! grep -q 'gpu double.*leak' "$tmp/$1.log"
}
rel_close() {
  paste "$1" "$2" | awk -v tol="$3" '
    { d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
      if (!(d <= tol * m)) bad++; n++ }
    END { exit !(n > 0 && !bad) }'
}
weights() { "$py" "$top_srcdir/tests/h5compare.py" "$@"; }

common="--steps 2 --batch-size 8 --micro-batches 2 --lr 0.5 --eps 1 --weight-decay 0 --threads 1"
# ---- one GPU against the CPU backend, each family, both stream modes ----
for fam in gpt mlp cnn; do
  make_case $fam $fam || { ok 1 "$fam: model and data"; continue; }
  drun $fam-cpu 1 -- "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" $common --backend cpu --report "$tmp/$fam-cpu.json" \
    --save "$tmp/$fam-cpu.h5"
  losses "$tmp/$fam-cpu.json" >"$tmp/$fam-cpu.loss"
  for mode in 0 1; do
    tag=$fam-cuda-$mode
    what="$fam, one GPU$([ $mode = 1 ] && echo ', lazy streams')"
    drun $tag 1 GPUD_LAZY=$mode -- "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" $common --backend cuda \
      --report "$tmp/$tag.json" --save "$tmp/$tag.h5"
    clean $tag 1
    ok $? "$what: trains, exit 0, the double finds no leak"
    losses "$tmp/$tag.json" >"$tmp/$tag.loss"
    rel_close "$tmp/$tag.loss" "$tmp/$fam-cpu.loss" 1e-5
    ok $? "$what: the CPU backend's losses within 1e-5 ($(tr '\n' ' ' <"$tmp/$tag.loss"))"
    out=$(weights "$tmp/$tag.h5" "$tmp/$fam-cpu.h5" "$tmp/$fam.h5" 1e-4)
    ok $? "$what: the CPU backend's weights within 1e-4 of their update ($out)"
  done
done
grep -q '^gpu of rank 0: device 0 of 1 (GPU double 0, .*shared by 1 rank' "$tmp/gpt-cuda-0.log"
ok $? "the header names the GPU, its PCI bus id and that no other rank shares it"

# ---- the backend's ops on the double with lazy streams (make check runs them at once) ----
GPUD_LAZY=1 "$top_builddir/tests/gpudouble/test_backend_ops.t" >"$tmp/ops-lazy.log" 2>&1
rc=$?
[ $rc = 0 ] && ! grep -q '^not ok' "$tmp/ops-lazy.log" && grep -q 'part 3: CUDA against CPU on device 0' "$tmp/ops-lazy.log" &&
  grep -q 'gpu double: clean exit' "$tmp/ops-lazy.log"
ok $? "tests/gpudouble/test_backend_ops.t with lazy streams: every op against the CPU (status $rc, $(grep -c '^ok' "$tmp/ops-lazy.log") checks)"

# ---- pipelines over NCCL against one GPU ----
pipe="--steps 3 --batch-size 8 --micro-batches 4 --lr 0.5 --eps 1 --weight-decay 0 --threads 1 --plan uniform"
g="$tmp/gpt.h5 --data $tmp/gpt-data.h5"
# one GPU's run is the reference: 1f1b's for every schedule but gpipe, whose backwards
# run in the reverse order of the micro-batches (so its sums of gradients round apart)
drun one 1 GPUD_GPUS=3 -- $g $pipe --backend cuda --save "$tmp/one.h5"
drun one-gpipe 1 GPUD_GPUS=3 -- $g $pipe --schedule gpipe --backend cuda --save "$tmp/one-gpipe.h5"
for sched in gpipe 1f1b zb-h1 zb-h2 zb-1p interleaved zb-v; do
  ref=one
  [ $sched = gpipe ] && ref=one-gpipe
  for n in 2 3; do
    case $sched in gpipe|1f1b) ;; *) [ $n = 3 ] && continue ;; esac
    tag=pipe-$sched-$n
    drun $tag $n GPUD_GPUS=3 -- $g $pipe --schedule $sched --backend cuda --save "$tmp/$tag.h5"
    path=nccl
    case $sched in interleaved|zb-v) path="mpi (--p2p auto: several stages per rank" ;; esac
    clean $tag $n && grep -q "^p2p $path" "$tmp/$tag.log"
    ok $? "$sched on $n GPUs: p2p $path, exit 0, no leak on any rank"
    out=$(weights "$tmp/$tag.h5" "$tmp/$ref.h5" "$tmp/gpt.h5" 0)
    ok $? "$sched on $n GPUs: the weights of one GPU, bitwise ($out)"
  done
done
# 1f1b over 3 stages with lazy streams: a middle stage's sends and receives on its links
drun pipe-lazy 3 GPUD_GPUS=3 GPUD_LAZY=1 -- $g $pipe --backend cuda --save "$tmp/pipe-lazy.h5"
clean pipe-lazy 3 && weights "$tmp/pipe-lazy.h5" "$tmp/one.h5" "$tmp/gpt.h5" 0 >/dev/null
ok $? "1f1b on 3 GPUs, lazy streams: the weights of one GPU, bitwise"
for opt in "--recompute full" "--precision bf16"; do
  tag=$(echo "$opt" | tr -dc 'a-z0-9')
  drun one-$tag 1 GPUD_GPUS=2 -- $g $pipe $opt --backend cuda --save "$tmp/one-$tag.h5"
  drun two-$tag 2 GPUD_GPUS=2 -- $g $pipe $opt --backend cuda --save "$tmp/two-$tag.h5"
  clean two-$tag 2 && clean one-$tag 1 && weights "$tmp/two-$tag.h5" "$tmp/one-$tag.h5" "$tmp/gpt.h5" 0 >/dev/null
  ok $? "$opt, 2 GPUs over NCCL: the weights of one GPU, bitwise"
done
# replicas: 2 stages x 2 replicas, gradient sums through ncclAllReduce
drun rep-1 1 GPUD_GPUS=4 -- $g $pipe --lr 0.05 --backend cuda --report "$tmp/rep-1.json" --save "$tmp/rep-1.h5"
drun rep-4 4 GPUD_GPUS=4 -- $g $pipe --lr 0.05 --replicas 2 --backend cuda --report "$tmp/rep-4.json" \
  --save "$tmp/rep-4.h5"
losses "$tmp/rep-1.json" >"$tmp/rep-1.loss"
losses "$tmp/rep-4.json" >"$tmp/rep-4.loss"
clean rep-4 4 && grep -q '^p2p nccl' "$tmp/rep-4.log" && rel_close "$tmp/rep-4.loss" "$tmp/rep-1.loss" 1e-5
ok $? "2 stages x 2 replicas on 4 GPUs, sums through NCCL: one GPU's losses within 1e-5"
out=$(weights "$tmp/rep-4.h5" "$tmp/rep-1.h5" "$tmp/gpt.h5" 1e-4)
ok $? "2 stages x 2 replicas: one GPU's weights within 1e-4 of their update ($out)"

# ---- checkpoint and resume over NCCL ----
ck="--batch-size 8 --micro-batches 4 --lr 0.5 --eps 1 --weight-decay 0 --threads 1 --plan uniform --backend cuda"
drun ck-full 2 GPUD_GPUS=2 -- $g $ck --steps 4 --save "$tmp/ck-full.h5"
drun ck-a 2 GPUD_GPUS=2 -- $g $ck --steps 2 --checkpoint "$tmp/ck.h5"
drun ck-b 2 GPUD_GPUS=2 -- $g $ck --steps 4 --resume "$tmp/ck.h5" --save "$tmp/ck-resumed.h5"
clean ck-a 2 && clean ck-b 2 && weights "$tmp/ck-resumed.h5" "$tmp/ck-full.h5" "$tmp/gpt.h5" 0 >/dev/null
ok $? "2 GPUs over NCCL: 2 steps, a checkpoint, 2 more resumed = 4 steps at once, bitwise"

# ---- which GPU: one per rank through CUDA_VISIBLE_DEVICES, and ranks sharing one ----
bound() {  # bound TAG BACKEND: 4 ranks, each seeing only the GPU of its rank
  GPUD_GPUS=4 timeout -k 5 180 "$MPIEXEC" -n 4 sh -c 'CUDA_VISIBLE_DEVICES=$PMI_RANK exec "$0" "$@"' "$PPDL" \
    $g --steps 1 --batch-size 8 --micro-batches 4 --plan uniform --backend "$2" >"$tmp/$1.log" 2>&1 9>&-
  echo $? >"$tmp/$1.rc"
}
bound bound-cuda cuda
clean bound-cuda 4 && grep -q 'shared by 1 rank), node-local rank 0 of 4' "$tmp/bound-cuda.log"
ok $? "4 ranks, one visible GPU each (the Slurm binding): --backend cuda trains, no GPU shared"
grep -m1 '^gpu of rank 0' "$tmp/bound-cuda.log" | sed 's/^/#   /'
bound bound-auto auto
clean bound-auto 4 && grep -q '^backend cuda (--backend auto: a usable GPU on every rank)' "$tmp/bound-auto.log" &&
  grep -q '^p2p nccl' "$tmp/bound-auto.log"
ok $? "4 ranks, one visible GPU each: --backend auto takes cuda, --p2p auto nccl"
drun share-no 2 GPUD_GPUS=1 -- $g --steps 1 --plan uniform --backend cuda
[ "$(cat "$tmp/share-no.rc")" != 0 ] && grep -q 'at most one rank per GPU' "$tmp/share-no.log"
ok $? "2 ranks on one GPU without PPDL_CUDA_SHARE=1: refused with the reason"
drun share-yes 2 GPUD_GPUS=1 PPDL_CUDA_SHARE=1 -- $g --steps 1 --batch-size 8 --micro-batches 4 --plan uniform \
  --backend cuda
clean share-yes 2 && grep -q '^p2p mpi' "$tmp/share-yes.log" && grep -q 'shared by 2 ranks' "$tmp/share-yes.log"
ok $? "2 ranks sharing one GPU with PPDL_CUDA_SHARE=1: train, messages through MPI"
drun mem-own 2 GPUD_GPUS=2 -- $g --backend cuda --probe-only --cluster-out "$tmp/own.json"
drun mem-shared 2 GPUD_GPUS=1 PPDL_CUDA_SHARE=1 -- $g --backend cuda --probe-only --cluster-out "$tmp/shared.json"
mem=$("$py" -c 'import json,sys; a=json.load(open(sys.argv[1]))["mem_bytes"]; b=json.load(open(sys.argv[2]))["mem_bytes"]
print(a[0], b[0]); sys.exit(not (b[0] < 0.6 * a[0] and a[0] <= (1 << 30) - (192 << 20)))' "$tmp/own.json" "$tmp/shared.json")
ok $? "memory: a GPU of its own less the libraries' reserve; a shared one about halved (bytes: $mem)"
drun probe-nccl 2 GPUD_GPUS=2 -- $g --backend cuda --p2p nccl --probe-only --cluster-out "$tmp/nccl.json"
clean probe-nccl 2 && "$py" -c 'import json,sys; c=json.load(open(sys.argv[1])); sys.exit(not (c["probe"]["path"] == "nccl" and min(c["bandwidth_Bps"][0][1], c["bandwidth_Bps"][1][0]) > 0))' "$tmp/nccl.json"
ok $? "--p2p nccl --probe-only on 2 GPUs: the links timed through NCCL"
finish
