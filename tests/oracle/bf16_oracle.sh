#!/bin/sh
# bf16_oracle.sh — ppdl --precision bf16 against PyTorch's bf16 autocast on the CPU
# (tests/oracle/torch_autocast.py): an mlp, 6 AdamW steps at lr 0.01, every step's loss
# within the first-order bound derived in torch_autocast.py's header (and README
# "Precision"): each bf16 rounding perturbs its tensor by at most 2^-8 relative, the
# roundings of both runs on the path to the logits add up, and the loss moves by at most
# twice the logits' largest change; the weights' drift from rounded gradients adds
# lr x steps x |grad|_1 x the backward roundings. The bound is worst-case: the measured
# differences are ~1% of it (printed per step).
# Negative control: gradient ascent on the same run (PPDL_TEST_GRAD_SCALE=0:-1, every
# gradient negated) must fail the oracle: the bound is not so loose that anything passes.
# (gpt and cnn are not compared here: the rounding counts are derived for linear + GELU.)
. "$top_srcdir/tests/lib.sh"
"$PYTHON_ORACLE" -c 'import torch, h5py' 2>/dev/null || skip_all "$PYTHON_ORACLE has no torch and h5py"
make_case mlp mlp
ok $? "mlp: model and data created"
oracle() {  # oracle NAME: a bf16 run of 6 steps, then the autocast oracle on its report
  mpirun_n 1 "$tmp/mlp.h5" --data "$tmp/mlp-data.h5" --steps 6 --batch-size 8 --micro-batches 2 --threads 1 \
    --precision bf16 --lr 0.01 --report "$tmp/$1.json" >"$tmp/$1.log" 2>&1 || return 2
  "$PYTHON_ORACLE" "$top_srcdir/tests/oracle/torch_autocast.py" "$tmp/mlp.h5" "$tmp/mlp-data.h5" "$tmp/$1.json" \
    --batch-size 8 --steps 6 --lr 0.01 >"$tmp/$1.tap" 2>&1
}
oracle bf16
ok $? "mlp bf16: every loss of 6 AdamW steps within the derived bound of PyTorch's bf16 autocast"
sed -e '/^1\.\./d' -e 's/^\(not \)*ok [0-9]* - /# /' "$tmp/bf16.tap"
PPDL_TEST_GRAD_SCALE=0:-1 oracle ascent
rc=$?
[ $rc = 1 ]; ok $? "negative control: with every gradient negated (PPDL_TEST_GRAD_SCALE=0:-1) the oracle fails (status $rc, 1 expected)"
grep 'not ok' "$tmp/ascent.tap" | head -2 | sed 's/^/# /'
finish
