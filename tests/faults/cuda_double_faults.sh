#!/bin/sh
# cuda_double_faults.sh — the CUDA host code's failures on the GPU double
# (tests/gpudouble), and the negative controls of tests/mpi/cuda_double.sh.
#
# Failures a GPU job meets, each ending the job with a message that says what happened,
# never a hang:
#  - out of device memory (GPUD_FAIL_MALLOC: the first allocation fails): status 3 and
#    "out of memory";
#  - a kernel that faults (GPUD_FAULT_KERNEL): the sticky error is reported as the
#    illegal address it is, at the next call that sees it, not as out of memory;
#  - an NCCL operation that fails (GPUD_NCCL_ERROR): the communicator's asynchronous
#    error ends the job, naming NCCL;
#  - an NCCL transfer whose peer never answers (GPUD_NCCL_HANG): PPDL_NCCL_TIMEOUT ends
#    the job naming the transfer (the double's own watchdog is set far beyond it).
# Negative controls: each plants a defect the GPU path had (through a PPDL_TEST_ hook
# compiled into the double's build only) and the check that guards it must fail:
#  - the second free of the backend's scratch at teardown (PPDL_TEST_DOUBLE_FREE);
#  - no first contact of the NCCL links at creation (PPDL_TEST_NCCL_NO_WARMUP): the
#    pipeline's first receive holds its host while the peer's host waits elsewhere;
#  - a host read without the stream wait before it (PPDL_TEST_SKIP_STREAM_WAIT: the
#    gradient norm's partial sums), seen under GPUD_LAZY=1 with clipping that binds;
#  - a receive issued ahead of a send on one communicator (PPDL_TEST_PROBE_RECV_FIRST
#    in the NCCL probe, and PPDL_TEST_NCCL_ONE_COMM: a middle stage's messages on one
#    communicator instead of a communicator per link).
. "$top_srcdir/tests/lib.sh"
gpud_setup

rc() { cat "$tmp/$1.rc"; }
show() { grep -m2 "$2" "$tmp/$1.log" | cut -c1-220 | sed 's/^/#   /'; }

make_case gpt gpt || { ok 1 "gpt: model and data"; finish; exit; }
g="$tmp/gpt.h5 --data $tmp/gpt-data.h5"
pipe="--steps 2 --batch-size 8 --micro-batches 4 --lr 0.5 --eps 1 --weight-decay 0 --threads 1 --plan uniform --backend cuda"
export GPUD_WATCHDOG=60

# ---- failures ----
drun oom 1 GPUD_FAIL_MALLOC=1 -- $g $pipe
[ "$(rc oom)" = 3 ] && grep -q 'cuda device is out of memory' "$tmp/oom.log"
ok $? "out of device memory: status 3 (got $(rc oom)) and 'out of memory'"
show oom 'out of memory'
drun fault 1 GPUD_FAULT_KERNEL=20 -- $g $pipe
[ "$(rc fault)" != 0 ] && grep -q 'illegal memory access\|cudaErrorIllegalAddress' "$tmp/fault.log" &&
  ! grep -q 'out of memory' "$tmp/fault.log"
ok $? "a kernel that faults: reported as an illegal address (status $(rc fault)), not as out of memory"
show fault 'illegal'
drun ncclerr 2 GPUD_GPUS=2 GPUD_NCCL_ERROR=12 -- $g $pipe
[ "$(rc ncclerr)" != 0 ] && [ "$(rc ncclerr)" != 124 ] && grep -q 'NCCL error 6' "$tmp/ncclerr.log"
ok $? "an NCCL operation that fails: the job ends (status $(rc ncclerr)) naming the NCCL error"
show ncclerr 'NCCL error'
drun ncclhang 2 GPUD_GPUS=2 GPUD_NCCL_HANG=12 PPDL_NCCL_TIMEOUT=3 GPUD_WATCHDOG=100 -- $g $pipe
[ "$(rc ncclhang)" != 0 ] && [ "$(rc ncclhang)" != 124 ] && grep -q 'has not completed after 3 s (PPDL_NCCL_TIMEOUT)' "$tmp/ncclhang.log"
ok $? "an NCCL transfer whose peer never answers: PPDL_NCCL_TIMEOUT ends the job naming it (status $(rc ncclhang))"
show ncclhang 'has not completed'
drun badtimeout 1 PPDL_NCCL_TIMEOUT=soon -- $g $pipe --p2p nccl
[ "$(rc badtimeout)" != 0 ] && grep -q 'PPDL_NCCL_TIMEOUT=soon: expected seconds' "$tmp/badtimeout.log"
ok $? "PPDL_NCCL_TIMEOUT=soon: refused by name"

# ---- negative controls ----
drun teardown 1 -- $g $pipe
drun teardown-bad 1 PPDL_TEST_DOUBLE_FREE=1 -- $g $pipe
[ "$(rc teardown)" = 0 ] && [ "$(rc teardown-bad)" != 0 ] && grep -q 'did not allocate' "$tmp/teardown-bad.log"
ok $? "negative control: the scratch freed a second time at teardown fails the run (status $(rc teardown-bad); clean: $(rc teardown))"
drun warm-bad 2 GPUD_GPUS=2 GPUD_WATCHDOG=8 PPDL_TEST_NCCL_NO_WARMUP=1 -- $g $pipe
[ "$(rc warm-bad)" != 0 ] && [ "$(rc warm-bad)" != 124 ] && grep -q "first contact with rank" "$tmp/warm-bad.log"
ok $? "negative control: without the links' first contact at creation the pipeline hangs, and the watchdog names it"
show warm-bad 'first contact'
clip="--steps 3 --batch-size 8 --micro-batches 2 --lr 0.5 --eps 1 --weight-decay 0 --threads 1 --clip-grad-norm 0.05"
drun clip-cpu 1 -- $g $clip --backend cpu --save "$tmp/clip-cpu.h5"
drun clip-lazy 1 GPUD_LAZY=1 -- $g $clip --backend cuda --save "$tmp/clip-lazy.h5"
drun clip-bad 1 GPUD_LAZY=1 PPDL_TEST_SKIP_STREAM_WAIT=1 -- $g $clip --backend cuda --save "$tmp/clip-bad.h5"
good=$("$py" "$top_srcdir/tests/h5compare.py" "$tmp/clip-lazy.h5" "$tmp/clip-cpu.h5" "$tmp/gpt.h5" 1e-4)
g_rc=$?
bad=$("$py" "$top_srcdir/tests/h5compare.py" "$tmp/clip-bad.h5" "$tmp/clip-cpu.h5" "$tmp/gpt.h5" 1e-4)
b_rc=$?
[ $g_rc = 0 ] && [ $b_rc != 0 ]
ok $? "negative control: the norm's partials read before their copy (lazy streams) fail the weight check ($bad; with the wait: $good)"
drun probe-bad 2 GPUD_GPUS=2 GPUD_WATCHDOG=8 PPDL_TEST_PROBE_RECV_FIRST=1 -- $g --backend cuda --p2p nccl --probe-only
[ "$(rc probe-bad)" != 0 ] && [ "$(rc probe-bad)" != 124 ] && grep -q 'behind earlier operations of that communicator' "$tmp/probe-bad.log"
ok $? "negative control: the probe's receive issued ahead of its send on one communicator hangs, the watchdog names it"
show probe-bad 'behind earlier'
drun onecomm-bad 3 GPUD_GPUS=3 GPUD_WATCHDOG=8 PPDL_TEST_NCCL_ONE_COMM=1 -- $g $pipe --schedule gpipe
[ "$(rc onecomm-bad)" != 0 ] && [ "$(rc onecomm-bad)" != 124 ] && grep -q "issued behind an ncclRecv" "$tmp/onecomm-bad.log"
ok $? "negative control: 3 stages with one communicator for all activations: the middle stage issues a send behind a receive, and the double stops it"
show onecomm-bad "issued behind"
finish
