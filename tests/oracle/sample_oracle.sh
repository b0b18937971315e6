#!/bin/sh
# sample_oracle.sh — ppdl-sample against PyTorch (tests/oracle/torch_sample.py rebuilds the
# model from its file and checks every generated token against its own logits).
#   - a byte-level gpt trained briefly on inputs/tiny.txt (peaked logits: greedy choices
#     are clear, near ties rare): greedy continuations of 100 tokens, past seq_len 32 (the
#     window cut runs three times), with the key/value cache and without it: each is
#     PyTorch's argmax continuation; the two agree; the text printed is those bytes;
#   - a gpt over the shipped token corpus (inputs/gpl3-tokens.npy, vocab 512) trained
#     with a checkpoint: greedy from the checkpoint with --prompt-ids;
#   - sampling with --top-k 5: every token is among PyTorch's 5 largest; the same seed
#     repeats the text, another seed changes it;
#   - negative control: the oracle run on the untrained weights against the trained
#     model's output must fail (so a passing oracle is not one that passes anything).
. "$top_srcdir/tests/lib.sh"
"$PYTHON_ORACLE" -c 'import torch, h5py' 2>/dev/null ||
  skip_all "$PYTHON_ORACLE has no torch and h5py (apt-get install python3-torch python3-h5py)"
SAMPLE=$top_builddir/ppdl-sample
ORACLE="$PYTHON_ORACLE $top_srcdir/tests/oracle/torch_sample.py"

# ---- a byte-level model
"$PPDL_INIT" --preset gpt-tiny --set n_layers=2 --set d_model=48 --set n_heads=4 --set seq_len=32 --seed 3 \
  -o "$tmp/byte.h5" >/dev/null &&
  "$PPDL_DATA" text "$top_srcdir/inputs/tiny.txt" --seq-len 32 -o "$tmp/byte-data.h5" >/dev/null &&
  mpirun_n 1 "$tmp/byte.h5" --data "$tmp/byte-data.h5" --steps 150 --batch-size 16 --lr 3e-3 --threads 1 \
    --save "$tmp/byte-trained.h5" >"$tmp/train.log" 2>&1
ok $? "a byte-level gpt (seq_len 32) trained 150 steps on inputs/tiny.txt"

for mode in cache no-cache; do
  flag=; [ $mode = no-cache ] && flag=--no-cache
  "$SAMPLE" "$tmp/byte-trained.h5" --prompt "The " --tokens 100 --temperature 0 --ids $flag \
    >"$tmp/$mode.ids" 2>"$tmp/$mode.err"
  ok $? "ppdl-sample greedy, 100 tokens ($mode)"
  $ORACLE "$tmp/byte-trained.h5" "$tmp/$mode.ids" --prompt-len 4 --greedy >"$tmp/$mode.oracle" 2>&1
  ok $? "greedy ($mode) is PyTorch's argmax continuation: $(head -1 "$tmp/$mode.oracle")"
  sed -n '2,$s/^/# /p' "$tmp/$mode.oracle"
done
cmp -s "$tmp/cache.ids" "$tmp/no-cache.ids"
ok $? "the key/value cache and the whole-context forward choose the same 100 tokens"

"$SAMPLE" "$tmp/byte-trained.h5" --prompt "The " --tokens 100 --temperature 0 --quiet >"$tmp/text.out"
"$PYTHON_ORACLE" -c '
import sys
ids = [int(t) for t in open(sys.argv[1]).read().split()]
text = open(sys.argv[2], "rb").read()
sys.exit(0 if text == bytes(ids) + b"\n" else 1)' "$tmp/cache.ids" "$tmp/text.out"
ok $? "a byte-level model prints the prompt and continuation as text: the bytes of the ids"

# ---- the token corpus, a checkpoint, --prompt-ids
"$PPDL_INIT" --preset gpt-tiny --set vocab_size=512 --set n_layers=2 --set d_model=48 --set n_heads=4 \
  --set seq_len=32 --seed 4 -o "$tmp/tok.h5" >/dev/null &&
  "$PPDL_DATA" tokens "$top_srcdir/inputs/gpl3-tokens.npy" --vocab-size 512 --seq-len 32 -o "$tmp/tok-data.h5" \
    >/dev/null &&
  mpirun_n 1 "$tmp/tok.h5" --data "$tmp/tok-data.h5" --steps 100 --batch-size 16 --lr 3e-3 --threads 1 \
    --checkpoint "$tmp/tok-ckpt.h5" >"$tmp/train-tok.log" 2>&1
ok $? "a gpt over the shipped token corpus (vocab 512) trained 100 steps, with a checkpoint"
"$SAMPLE" "$tmp/tok-ckpt.h5" --prompt-ids 71,256,104 --tokens 60 --temperature 0 >"$tmp/tok.ids" 2>"$tmp/tok.err"
ok $? "ppdl-sample reads the checkpoint and continues --prompt-ids"
$ORACLE "$tmp/tok-ckpt.h5" "$tmp/tok.ids" --prompt-len 3 --greedy >"$tmp/tok.oracle" 2>&1
ok $? "its greedy ids are PyTorch's argmax continuation: $(head -1 "$tmp/tok.oracle")"
sed -n '2,$s/^/# /p' "$tmp/tok.oracle"

# ---- sampling
for seed in 7 8; do
  "$SAMPLE" "$tmp/byte-trained.h5" --prompt "The " --tokens 80 --top-k 5 --seed $seed --ids --quiet \
    >"$tmp/topk-$seed.ids"
done
$ORACLE "$tmp/byte-trained.h5" "$tmp/topk-7.ids" --prompt-len 4 --top-k 5 >"$tmp/topk.oracle" 2>&1
ok $? "--top-k 5: every drawn token is among PyTorch's 5 most likely: $(head -1 "$tmp/topk.oracle")"
"$SAMPLE" "$tmp/byte-trained.h5" --prompt "The " --tokens 80 --top-k 5 --seed 7 --ids --quiet >"$tmp/topk-7b.ids"
cmp -s "$tmp/topk-7.ids" "$tmp/topk-7b.ids"
ok $? "the same seed gives the same text"
! cmp -s "$tmp/topk-7.ids" "$tmp/topk-8.ids"
ok $? "another seed gives another text"

# ---- negative control
$ORACLE "$tmp/byte.h5" "$tmp/cache.ids" --prompt-len 4 --greedy >"$tmp/control.oracle" 2>&1
rc=$?
[ $rc = 1 ]; ok $? "negative control: the untrained weights' argmax is not the trained model's output (oracle status $rc, 1 expected): $(head -1 "$tmp/control.oracle")"
finish
