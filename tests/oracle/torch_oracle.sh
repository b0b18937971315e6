#!/bin/sh
# torch_oracle.sh — PyTorch as an outside oracle: for each model family, two ppdl
# training steps (2 micro-batches each) against the same steps in PyTorch: every
# loss, and every weight after the AdamW updates. Skipped, visibly, without torch/h5py.
. "$top_srcdir/tests/lib.sh"
"$PYTHON_ORACLE" -c 'import torch, h5py' 2>/dev/null ||
  skip_all "$PYTHON_ORACLE has no torch and h5py (apt-get install python3-torch python3-h5py)"
for fam in gpt mlp cnn; do
  make_case $fam $fam
  ok $? "$fam: model and data created"
  mpirun_n 1 "$tmp/$fam.h5" --data "$tmp/$fam-data.h5" --steps 2 --batch-size 8 --micro-batches 2 \
    --threads 1 --report "$tmp/$fam.json" --save "$tmp/$fam-trained.h5" >"$tmp/$fam.log" 2>&1
  ok $? "$fam: ppdl trained 2 steps"
  "$PYTHON_ORACLE" "$top_srcdir/tests/oracle/torch_step.py" "$tmp/$fam.h5" "$tmp/$fam-data.h5" "$tmp/$fam.json" \
    "$tmp/$fam-trained.h5" --batch-size 8 --steps 2 >"$tmp/$fam-torch.tap" 2>&1
  ok $? "$fam: ppdl matches PyTorch (losses and weights)"
  sed -e '/^1\.\./d' -e 's/^\(not \)*ok [0-9]* - /# /' "$tmp/$fam-torch.tap"
done
finish
