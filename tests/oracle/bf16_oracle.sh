#!/bin/sh
# bf16_oracle.sh — ppdl --precision bf16 against PyTorch's bf16 autocast on the CPU
# (tests/oracle/torch_autocast.py): a gpt, an mlp and a cnn, 6 AdamW steps each, every
# step's loss within the first-order bound derived in torch_autocast.py's header (and
# docs/precision.md): the forward roundings of both runs, each moving the loss by at
# most 2^-8 x sum|t x dL/dt| over its tensor t (measured with an fp32 backward), plus
# the weights' drift from rounded gradients (n_b roundings on a parameter's backward
# path, AdamW's update moving by at most 2 n_b 2^-8 lr per step). The measured
# differences are a few % of the bound or less (printed per step). The oracle's last
# TAP line checks its site table against torch: a dispatch mode counts the roundings
# autocast's forward does (ops writing bf16), and the table must count as many.
#
# Settings, and why. lr is a tenth of the initial weights' mean |w| (gpt 0.013 -> 1e-3,
# mlp and cnn 0.1 -> 1e-2): the bound is first order, so each step stays a small
# change of the weights. The data holds exactly one batch (8 rows), so every step
# trains on the same rows and the gradient keeps its signs from step to step: that
# gives the negative control a known size. Gradient ascent (PPDL_TEST_GRAD_SCALE=0:-1,
# every gradient negated) moves each weight by 2 lr a step the wrong way, to first
# order 2 lr k |grad|_1 on the loss after k steps, 1/(n_b 2^-8) >= 3.7 times the drift
# term (n_b <= 69, the gpt's longest path): the oracle must fail it, for each family
# (it does at every step after the first, by 4.1-5.3x the bound for the gpt, 5.3-10x
# for the mlp and the cnn).
. "$top_srcdir/tests/lib.sh"
"$PYTHON_ORACLE" -c 'import torch, h5py' 2>/dev/null || skip_all "$PYTHON_ORACLE has no torch and h5py"
oracle() {  # oracle FAMILY NAME LR: a bf16 run of 6 steps, then the autocast oracle on its report
  mpirun_n 1 "$tmp/$1.h5" --data "$tmp/$1-one.h5" --steps 6 --batch-size 8 --micro-batches 2 --threads 1 \
    --precision bf16 --lr "$3" --report "$tmp/$2.json" >"$tmp/$2.log" 2>&1 || return 2
  "$PYTHON_ORACLE" "$top_srcdir/tests/oracle/torch_autocast.py" "$tmp/$1.h5" "$tmp/$1-one.h5" "$tmp/$2.json" \
    --batch-size 8 --steps 6 --lr "$3" >"$tmp/$2.tap" 2>&1
}
for case in gpt:0.001 mlp:0.01 cnn:0.01; do
  fam=${case%%:*} lr=${case#*:}
  make_case "$fam" "$fam" &&
  if [ "$fam" = gpt ]; then  # 8 rows of 17 bytes, consecutive rows sharing one
    head -c 129 "$(text_file)" >"$tmp/one.txt" && "$PPDL_DATA" text "$tmp/one.txt" --seq-len 16 -o "$tmp/gpt-one.h5" >/dev/null
  else
    "$PPDL_DATA" synth --family "$fam" --model "$tmp/$fam.h5" -n 8 --seed 5 -o "$tmp/$fam-one.h5" >/dev/null
  fi
  ok $? "$fam: model and one batch of data (8 rows) created"
  oracle "$fam" "$fam-bf16" "$lr"
  ok $? "$fam bf16 (lr $lr): every loss of 6 AdamW steps within the derived bound of PyTorch's bf16 autocast"
  sed -e '/^1\.\./d' -e 's/^\(not \)*ok [0-9]* - /# /' "$tmp/$fam-bf16.tap"
  PPDL_TEST_GRAD_SCALE=0:-1 oracle "$fam" "$fam-ascent" "$lr"
  rc=$?
  [ $rc = 1 ]; ok $? "$fam negative control: with every gradient negated (PPDL_TEST_GRAD_SCALE=0:-1) the oracle fails (status $rc, 1 expected)"
  grep 'not ok' "$tmp/$fam-ascent.tap" | sed 's/^not ok [0-9]* - /# fails: /'
done
finish
