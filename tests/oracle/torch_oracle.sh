#!/bin/sh
# torch_oracle.sh — PyTorch as an outside oracle: for each model family, two ppdl
# training steps (2 micro-batches each) against the same steps in PyTorch: every
# loss, and every weight after the AdamW updates. Skipped, visibly, without torch/h5py.
#   - with AdamW's default eps (1e-8): the updates are ~lr * sign(grad), so this run
#     checks the gradients' signs, not their scale;
#   - with --lr 0.05 --eps 1: an update is ~lr * m, linear in the gradient, so the
#     weights check every gradient's scale too (torch_step.py's header says why);
#   - the negative control: the same scale-sensitive run with every gradient doubled
#     (PPDL_TEST_GRAD_SCALE=0:2, a planted bug in the runtime) must fail the oracle.
. "$top_srcdir/tests/lib.sh"
"$PYTHON_ORACLE" -c 'import torch, h5py' 2>/dev/null ||
  skip_all "$PYTHON_ORACLE has no torch and h5py (apt-get install python3-torch python3-h5py)"
# oracle NAME FAM [PPDL AND ORACLE OPTIONS...]: train with ppdl, compare with PyTorch
oracle() {
  name=$1 fam=$2; shift 2
  mpirun_n 1 "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 2 --batch-size 8 --micro-batches 2 \
    --threads 1 --report "$tmp/$name.json" --save "$tmp/$name-trained.h5" "$@" >"$tmp/$name.log" 2>&1 || return 2
  "$PYTHON_ORACLE" "$top_srcdir/tests/oracle/torch_step.py" "$tmp/$fam.h5" "$tmp/$fam-data.h5" "$tmp/$name.json" \
    "$tmp/$name-trained.h5" --batch-size 8 --steps 2 "$@" >"$tmp/$name-torch.tap" 2>&1
}
for fam in gpt mlp cnn; do
  make_case $fam $fam
  ok $? "$fam: model and data created"
  oracle $fam $fam
  ok $? "$fam: ppdl matches PyTorch (losses and weights; AdamW's default eps)"
  sed -e '/^1\.\./d' -e 's/^\(not \)*ok [0-9]* - /# /' "$tmp/$fam-torch.tap"
  oracle $fam-scale $fam --lr 0.05 --eps 1
  ok $? "$fam: ppdl matches PyTorch with --lr 0.05 --eps 1 (the weights see every gradient's scale)"
  sed -e '/^1\.\./d' -e 's/^\(not \)*ok [0-9]* - /# /' "$tmp/$fam-scale-torch.tap"
  PPDL_TEST_GRAD_SCALE=0:2 oracle $fam-doubled $fam --lr 0.05 --eps 1
  rc=$?
  [ $rc = 1 ]; ok $? "$fam: negative control: with every gradient doubled (PPDL_TEST_GRAD_SCALE) the scale-sensitive oracle fails (status $rc, 1 expected)"
  grep 'not ok' "$tmp/$fam-doubled-torch.tap" | head -2 | sed 's/^/# /'
done
finish
