#!/bin/sh
# torch_oracle.sh — PyTorch as an outside oracle: for each model family, two ppdl
# training steps (2 micro-batches each) against the same steps in PyTorch: every
# loss, and every weight after the AdamW updates. Skipped, visibly, without torch/h5py.
#   - with AdamW's default eps (1e-8): the updates are ~lr * sign(grad), so this run
#     checks the gradients' signs, not their scale;
#   - with --lr 0.05 --eps 1: an update is ~lr * m, linear in the gradient, so the
#     weights check every gradient's scale too (torch_step.py's header says why);
#   - the negative control: the same scale-sensitive run with every gradient doubled
#     (PPDL_TEST_GRAD_SCALE=0:2, a planted bug in the runtime) must fail the oracle;
#   - the GPT-2 recipe on gpt, 20 steps on 1 and on 3 ranks: cosine after a 3-step
#     warm-up to 0.1 x lr, betas 0.9/0.95, clipping at a norm that binds in some steps,
#     against torch.optim.AdamW + clip_grad_norm_ + LambdaLR: every step's lr, norm
#     (1e-5: ppdl sums the squares in double, PyTorch in float32) and loss, and the
#     final weights (scale-sensitive: --eps 1);
#   - weight decay on the 2-D tensors only (the default) against PyTorch's two parameter
#     groups; --decay-all against one group; and, as the control, ppdl --decay-all
#     against the two groups must fail (the layer norms' weights, 1 at the start, decay
#     by lr x wd = 1e-5 a step, above the 2e-6 weight tolerance).
#   - tied embeddings: make_case's gpt ties them (the presets' default), and torch_step.py
#     rebuilds the tie from the file's hard link (lm_head.weight is wte, one Parameter,
#     checked against tie_embeddings); on 3 ranks the embedding and the head are on
#     different stages and exchange their gradients. Controls: the recipe on 3 ranks
#     with the exchange skipped (PPDL_TEST_TIE=no-exchange) must fail the oracle; an
#     untied gpt (tie_embeddings=0) agrees with an untied PyTorch model.
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
oracle gpt-all gpt --decay-all
ok $? "gpt --decay-all: PyTorch with weight decay on every parameter agrees"
mpirun_n 1 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 2 --batch-size 8 --micro-batches 2 --threads 1 --decay-all \
  --report "$tmp/gpt-allc.json" --save "$tmp/gpt-allc-trained.h5" >"$tmp/gpt-allc.log" 2>&1
"$PYTHON_ORACLE" "$top_srcdir/tests/oracle/torch_step.py" "$tmp/gpt.h5" "$tmp/gpt-data.h5" "$tmp/gpt-allc.json" \
  "$tmp/gpt-allc-trained.h5" --batch-size 8 --steps 2 >"$tmp/gpt-allc.tap" 2>&1
rc=$?
[ $rc = 1 ]; ok $? "control: ppdl --decay-all against PyTorch's 2-D-only groups fails (status $rc)"
grep 'not ok' "$tmp/gpt-allc.tap" | head -1 | sed 's/^/# /'
recipe="--lr 0.02 --eps 1 --beta2 0.95 --lr-schedule cosine --warmup 3 --min-lr-ratio 0.1 --clip-grad-norm 2.7"
for n in 1 3; do
  mpirun_n $n "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 20 --batch-size 8 --micro-batches 2 --threads 1 \
    $recipe --report "$tmp/recipe$n.json" --save "$tmp/recipe$n.h5" >"$tmp/recipe$n.log" 2>&1
  ok $? "gpt recipe on $n rank(s): 20 steps"
  "$PYTHON_ORACLE" "$top_srcdir/tests/oracle/torch_step.py" "$tmp/gpt.h5" "$tmp/gpt-data.h5" "$tmp/recipe$n.json" \
    "$tmp/recipe$n.h5" --batch-size 8 --steps 20 $recipe >"$tmp/recipe$n-torch.tap" 2>&1
  ok $? "gpt recipe on $n rank(s): PyTorch's AdamW + clip_grad_norm_ + LambdaLR agree (lr, norm, loss of every step; weights)"
  grep -v '^ok\|^1\.\.' "$tmp/recipe$n-torch.tap" | head -3 | sed 's/^/# /'
  grep 'weights\|tie_embeddings' "$tmp/recipe$n-torch.tap" | sed 's/^/# /'
done
grep -q 'ok 1 - gpt: tie_embeddings = 1: lm_head.weight is wte' "$tmp/recipe3-torch.tap"
ok $? "the gpt of these runs is tied, and PyTorch rebuilt it tied (one Parameter for wte and lm_head.weight)"
PPDL_TEST_TIE=no-exchange mpirun_n 3 "$tmp/gpt.h5" --data "$tmp/gpt-data.h5" --steps 20 --batch-size 8 --micro-batches 2 \
  --threads 1 $recipe --report "$tmp/recipe-nx.json" --save "$tmp/recipe-nx.h5" >"$tmp/recipe-nx.log" 2>&1 &&
  "$PYTHON_ORACLE" "$top_srcdir/tests/oracle/torch_step.py" "$tmp/gpt.h5" "$tmp/gpt-data.h5" "$tmp/recipe-nx.json" \
    "$tmp/recipe-nx.h5" --batch-size 8 --steps 20 $recipe >"$tmp/recipe-nx-torch.tap" 2>&1
rc=$?
[ $rc = 1 ]; ok $? "control: the recipe on 3 ranks with the tied gradients' exchange skipped (PPDL_TEST_TIE=no-exchange) fails the oracle (status $rc, 1 expected)"
grep 'not ok' "$tmp/recipe-nx-torch.tap" | head -2 | sed 's/^/# /'
"$PPDL_INIT" --preset gpt-tiny --set n_layers=3 --set d_model=32 --set seq_len=16 --set tie_embeddings=0 --seed 3 \
  -o "$tmp/gpt-untied.h5" >/dev/null && cp "$tmp/gpt-data.h5" "$tmp/gpt-untied-data.h5" &&
  oracle gpt-untied gpt-untied --lr 0.05 --eps 1
ok $? "untied gpt (tie_embeddings=0): ppdl matches an untied PyTorch model with --lr 0.05 --eps 1"
grep 'tie_embeddings' "$tmp/gpt-untied-torch.tap" | sed 's/^/# /'
"$PYTHON_ORACLE" -c '
import json, sys
n = [s["grad_norm"] for s in json.load(open(sys.argv[1]))["steps"]]
print("# norms", " ".join("%.3g" % x for x in n))
sys.exit(not (0 < sum(x > 2.7 for x in n) < len(n)))' "$tmp/recipe1.json"
ok $? "gpt recipe: the clip (2.7) binds in some steps, not all"
finish
