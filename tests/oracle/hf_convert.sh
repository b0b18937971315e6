#!/bin/sh
# hf_convert.sh — ppdl-convert against transformers (GPT2LMHeadModel, safetensors) and an
# llm.c writer of its own (tests/oracle/hf_convert.py: the Python side, two runs of one
# process each, since transformers takes seconds to import):
#   - a random GPT-2 (2 blocks, 2 heads, n_embd 32, vocab 97, n_positions 16; weights
#     spread by N(0, 0.2) noise) saved by save_pretrained, tied and untied, converted to
#     ppdl: ppdl's logits (its own forward, tests/oracle/gpt_logits) at every position of
#     4 sequences within 1e-5 of GPT2LMHeadModel's, and ppdl's evaluation loss (--val-data,
#     the step-0 evaluation) within 1e-6 relative of transformers';
#   - round trips: HF -> ppdl -> HF gives every tensor's bytes back (F16 and BF16 inputs:
#     the bytes of their float32 values, which is what ppdl holds); llm.c -> ppdl -> llm.c
#     the same file, byte for byte (fp32 and bf16), where the llm.c file was written by
#     the Python helper from the HF model, and ppdl's own llm.c export equals it;
#   - names without "transformer.", GPT-2's attention buffers (attn.bias, masked_bias), a
#     tied model's file holding lm_head.weight equal to wte: read as the plain file;
#   - ppdl-init gpt-tiny exported: from_pretrained says nothing about missing, unexpected
#     or newly initialised weights, and its loss equals ppdl's evaluation (1e-6 relative);
#     the same export from a checkpoint;
#   - a sharded checkpoint (save_pretrained(max_shard_size="40KB"): 4 files and
#     model.safetensors.index.json) read: the logits of the one-file model, bit for bit,
#     and exported as one file with the same tensors' bytes;
#   - --tokenizer: a tokenizer trained by `tokenizers` (<|endoftext|> added last, id 290)
#     and llm.c's file of it: config.json's bos_token_id and eos_token_id are 290, the
#     tokenizer.json is copied in (the same bytes) and AutoTokenizer loads it, encoding as
#     `tokenizers` does, and generate ends at 290; without --tokenizer the ids are 50256
#     for GPT-2's vocabulary 50257 and absent for another; a tokenizer larger than the
#     model's vocabulary is refused, and --tokenizer with other output than hf;
#   - bad input refused, status 1, naming the file and the tensor or field, DST absent:
#     header longer than the file, offsets out of range, overlapping, shape/bytes, unknown
#     dtype, missing tensor, extra tensor, a shard the index names that is gone, a
#     tensor in two shards, an index naming a file with a directory, putting a tensor
#     in a shard without it, leaving a shard's tensor out, activation_function relu, llm.c bad magic and
#     version, an untied model to llm.c, a tied lm_head.weight that is not wte;
#   - negative controls: a Conv1D weight stored transposed (what a wrong mapping would
#     read) fails the logits check; a model without its lm_head.weight makes
#     from_pretrained warn, and the capture sees it.
. "$top_srcdir/tests/lib.sh"
PY=$PYTHON_HF
"$PY" -c 'import transformers, safetensors, torch, h5py' 2>/dev/null ||
  skip_all "$PY has no transformers, safetensors, torch and h5py (scripts/setup makes the venv /opt/ppdl-py)"
CONVERT=$top_builddir/ppdl-convert
LOGITS=$top_builddir/tests/oracle/gpt_logits
HELPER=$top_srcdir/tests/oracle/hf_convert.py
cd "$tmp" || exit 1

# The Python helper runs once, as a server of the lines sent to it (py CMD), so that
# transformers is imported once; py_sync waits until it has answered every line sent and
# turns the new answers into TAP lines.
# py.out exists before the helper opens it (it blocks on py.in first): a py_sync that
# comes first reads an empty file rather than none
mkfifo py.in && : >py.out || exit 1
"$PY" "$HELPER" serve <py.in >py.out 2>py.err &
pypid=$!
exec 3>py.in
n_sent=0 n_seen=0
py() { echo "$1" >&3; n_sent=$((n_sent + 1)); }
py_sync() {
  i=0
  while [ "$(grep -c '^[0-9]' py.out)" -lt $n_sent ]; do
    kill -0 $pypid 2>/dev/null || break
    i=$((i + 1))
    [ $i -gt 1800 ] && break
    sleep 0.1
  done
  k=0
  while IFS= read -r line; do
    case $line in
      '# '*) [ $k -gt $n_seen ] && echo "$line" ;;
      *) k=$((k + 1)); [ $k -gt $n_seen ] && { rc=${line%%"	"*}; ok "$rc" "${line#*"	"}"; } ;;
    esac
  done <py.out
  while [ $n_seen -lt $n_sent ] && [ $k -lt $n_sent ]; do
    k=$((k + 1)); ok 1 "the Python helper answered line $k (py.err: $(tail -1 py.err))"
  done
  n_seen=$n_sent
}

bad_kinds="header-long offsets-range overlap shape dtype missing extra relu"
py "a random GPT-2, tied, saved by save_pretrained | make hf"
py "the same, untied | make hf-untied --untied --seed 3"
py "the same in float16 | make hf16 --dtype f16 --seed 4"
py "the same in bfloat16 | make hfbf --dtype bf16 --seed 5"
py "4 sequences of 16 tokens | tokens tok.i32 4 16 97"
py "their data.h5 | data d.h5 tok.i32 16 97"
py "tokens for gpt-tiny | tokens tokt.i32 4 64 256 --seed 6"
py "their data.h5 | data dt.h5 tokt.i32 64 256"
py "the llm.c file of the tied model, fp32 (version 3) | llmc hf ref.bin"
py "the same in bf16 (version 5) | llmc hf ref5.bin --bf16"
py "control: a Conv1D weight stored transposed | bad hf transposed bad-transposed"
for k in $bad_kinds; do py "broken: $k | bad hf $k bad-$k"; done
for k in noprefix buffers lm-same; do py "variant: $k | bad hf $k var-$k"; done
py "broken: lm-differs | bad hf lm-differs bad-lm-differs"
py "the tied model saved again in shards | shard hf hf-shard 40KB"
for k in missing-file twice slash wrong-file unlisted; do py "broken shards: $k | badshard hf-shard $k bad-$k"; done
py "a tokenizer (vocabulary 291, <|endoftext|> 290) and its llm.c file | tokenizer tok.json tok.bin"
py "another (vocabulary 281) | tokenizer tok-other.json tok-other.bin --vocab 280"
py_sync

# ---- to ppdl, and ppdl's side of the checks
for m in hf hf-untied hf16 hfbf bad-transposed hf-shard; do
  "$CONVERT" $m $m.h5 >$m.log 2>&1
  ok $? "ppdl-convert $m $m.h5"
done
for m in hf hf-untied bad-transposed; do
  "$LOGITS" $m.h5 tok.i32 $m.f32
  ok $? "ppdl's logits of $m.h5 (tests/oracle/gpt_logits: every position)"
done
for k in noprefix buffers lm-same; do
  "$CONVERT" var-$k var-$k.h5 >var-$k.log 2>&1 && "$LOGITS" var-$k.h5 tok.i32 var-$k.f32 && cmp hf.f32 var-$k.f32
  ok $? "variant $k read: the logits of hf.h5, bit for bit"
done
evaluate() { # MODEL DATA REPORT: ppdl's evaluation before step 1 on the first 4 rows
  "$PPDL" "$1" --data "$2" --val-data "$2" --eval-batches 1 --steps 1 --batch-size 4 --threads 1 \
    --report "$3" >"$3.log" 2>&1
}
evaluate hf.h5 d.h5 hf.json && evaluate hf-untied.h5 d.h5 hf-untied.json
ok $? "ppdl evaluates both models (--val-data, the step-0 evaluation)"

"$LOGITS" hf-shard.h5 tok.i32 hf-shard.f32 && cmp hf.f32 hf-shard.f32
ok $? "the sharded checkpoint read: the logits of hf.h5, bit for bit"
for m in hf hf-untied hf16 hfbf hf-shard; do
  "$CONVERT" $m.h5 $m-back/ >/dev/null 2>&1
  ok $? "ppdl-convert $m.h5 $m-back/ (Hugging Face out)"
done

# ---- llm.c
"$CONVERT" ref.bin ref.h5 >/dev/null && "$CONVERT" ref.h5 ref-back.bin >/dev/null && cmp ref.bin ref-back.bin
ok $? "llm.c fp32: ref.bin -> ppdl -> llm.c gives the same bytes"
"$CONVERT" ref5.bin ref5.h5 >/dev/null && "$CONVERT" --dtype bf16 ref5.h5 ref5-back.bin >/dev/null &&
  cmp ref5.bin ref5-back.bin
ok $? "llm.c bf16 (version 5): the same bytes back"
"$CONVERT" hf.h5 direct.bin >/dev/null && cmp ref.bin direct.bin
ok $? "ppdl's own llm.c export of the HF model equals the Python helper's llm.c file"
"$LOGITS" ref.h5 tok.i32 ref.f32 && cmp hf.f32 ref.f32
ok $? "the model read from llm.c gives the logits of the one read from Hugging Face, bit for bit"
"$CONVERT" --dtype bf16 hf.h5 round5.bin >/dev/null && cmp round5.bin ref5.bin
ok $? "ppdl's bf16 export equals torch's bf16 rounding (nearest even) of the same weights"

# ---- a ppdl model out to transformers, and from a checkpoint
"$PPDL_INIT" --preset gpt-tiny --seed 2 -o tiny.h5 >/dev/null && "$CONVERT" tiny.h5 tiny-hf >/dev/null &&
  evaluate tiny.h5 dt.h5 tiny.json
ok $? "ppdl-init gpt-tiny exported to tiny-hf (no extension: Hugging Face) and evaluated by ppdl"
"$PPDL" tiny.h5 --data dt.h5 --steps 2 --batch-size 4 --threads 1 --checkpoint ck.h5 >ck.log 2>&1 &&
  "$CONVERT" ck.h5 ck-hf/ >/dev/null && "$CONVERT" ck.h5 ck-model.h5 >/dev/null && evaluate ck-model.h5 dt.h5 ck.json
ok $? "a checkpoint exported (its weights) to Hugging Face and to a model file, evaluated by ppdl"

# ---- --tokenizer: the end-of-text ids in config.json, tokenizer.json copied in
"$PPDL_INIT" --preset gpt-tiny --set vocab_size=300 --seed 2 -o t300.h5 >/dev/null &&
  "$CONVERT" t300.h5 t300-hf/ --tokenizer tok.json >/dev/null && cmp tok.json t300-hf/tokenizer.json
ok $? "--tokenizer tok.json: exported, with tokenizer.json copied in, the same bytes"
"$CONVERT" t300.h5 t300-llmc-hf/ --tokenizer tok.bin >/dev/null && [ ! -e t300-llmc-hf/tokenizer.json ]
ok $? "--tokenizer tok.bin (llm.c's, decoding only): exported, no tokenizer.json"
"$PPDL_INIT" --preset gpt-tiny --set vocab_size=50257 --set d_model=8 --set n_heads=2 --set n_layers=1 \
  -o v50257.h5 >/dev/null && "$CONVERT" v50257.h5 v50257-hf/ >/dev/null
ok $? "a model of GPT-2's vocabulary 50257 exported without --tokenizer"

# ---- fine-tuning: import, train on 2 ranks, export; transformers' loss is ppdl's
mpirun_n 2 hf.h5 --data d.h5 --val-data d.h5 --eval-batches 1 --steps 20 --batch-size 4 --micro-batches 2 \
  --lr 3e-3 --threads 1 --report tuned.json --save tuned.h5 >tuned.log 2>&1 3>&- && "$CONVERT" tuned.h5 tuned-hf/ >/dev/null
ok $? "hf.h5 trained 20 steps on 2 ranks and exported"

# ---- the Python checks
py "(a) tied: ppdl's logits within 1e-5 of GPT2LMHeadModel's | logits hf tok.i32 hf.f32"
py "(a) tied: ppdl's evaluation loss within 1e-6 relative of transformers' | loss hf d.h5 4 hf.json"
py "(a) untied: logits within 1e-5 | logits hf-untied tok.i32 hf-untied.f32"
py "(a) untied: loss within 1e-6 relative | loss hf-untied d.h5 4 hf-untied.json"
py "control: with c_proj read transposed the logits check fails | logits hf tok.i32 bad-transposed.f32 --expect-fail"
py "control: the loss check fails against the other model's evaluation | loss hf d.h5 4 hf-untied.json --expect-fail"
py "(b) HF -> ppdl -> HF: every tensor's bytes back (tied) | same hf hf-back"
py "control: the byte comparison fails on another model's export (same names, other values) | same hf hfbf-back --expect-fail"
py "control: and on F16 against its float32 export without --as-f32 | same hf16 hf16-back --expect-fail"
py "(b) untied, with lm_head.weight | same hf-untied hf-untied-back"
py "(b) shards -> ppdl -> HF: one file with every tensor's bytes | same hf hf-shard-back"
py "(b) F16 in: the float32 values of its tensors back | same hf16 hf16-back --as-f32"
py "(b) BF16 in: the float32 values of its tensors back | same hfbf hfbf-back --as-f32"
py "(c) the round-tripped model loads without a word about missing or unexpected weights | load hf-back"
py "(c) ppdl-init's gpt-tiny loads in transformers without such a word | load tiny-hf"
py "(c) its loss in transformers equals ppdl's evaluation (1e-6 relative) | loss tiny-hf dt.h5 4 tiny.json"
py "(c) the checkpoint's export loads cleanly | load ck-hf"
py "(c) and its loss equals ppdl's evaluation of the checkpoint's weights | loss ck-hf dt.h5 4 ck.json"
py "control: without lm_head.weight (untied) | bad hf-untied-back drop-lm nolm"
py "control: from_pretrained's warning about it is seen by the capture | load nolm --expect-warning"
py "fine-tuned on 2 ranks: transformers' loss of the export is ppdl's evaluation after step 20 (1e-5 relative) | loss tuned-hf d.h5 4 tuned.json --step 20 --rtol 1e-5"
py "control: and not the loss before training | loss tuned-hf d.h5 4 tuned.json --step 0 --rtol 1e-5 --expect-fail"
py "--tokenizer tok.json: config.json's bos_token_id and eos_token_id are its <|endoftext|>, 290 | eot t300-hf 290"
py "--tokenizer tok.bin: the same id, from llm.c's header | eot t300-llmc-hf 290"
py "no --tokenizer, vocab_size 50257: GPT-2's 50256 | eot v50257-hf 50256"
py "no --tokenizer, vocab_size 256: no ids | eot tiny-hf none"
py "control: the id check fails on the export without them | eot tiny-hf 290 --expect-fail"
py "AutoTokenizer loads the export's tokenizer.json: tokenizers' ids of a text, and generate ends at 290 | autotok t300-hf tok.json"
py "control: the ids check fails where the export's tokenizer is not the one compared with | autotok t300-hf tok-other.json --expect-fail"
exec 3>&-
wait $pypid
py_sync

# ---- (d) bad input
refused() { # WHAT EXPECTED-TEXT... -- CONVERT ARGS (the last is DST)
  what=$1; shift
  pats=
  while [ "$1" != "--" ]; do pats="$pats|$1"; shift; done
  shift
  for dst; do :; done
  "$CONVERT" "$@" >refused.out 2>&1
  rc=$?
  good=1
  [ $rc = 1 ] || good=0
  [ -e "$dst" ] && good=0
  IFS='|'
  for p in ${pats#|}; do grep -qF -- "$p" refused.out || good=0; done
  unset IFS
  [ $good = 1 ]
  ok $? "refused: $what (status $rc)"
  sed 's/^/#   /' refused.out | head -2
}
st() { echo "bad-$1/model.safetensors"; }
refused "header longer than the file" "$(st header-long)" "header length" "longer than the file" -- bad-header-long out1.h5
refused "offsets out of range" "$(st offsets-range)" "transformer.ln_f.bias" "out of the data" -- bad-offsets-range out2.h5
refused "overlapping tensors" "$(st overlap)" "transformer.h.0.ln_1.bias" "overlap" -- bad-overlap out3.h5
refused "shape and bytes disagree" "$(st shape)" "transformer.h.0.attn.c_attn.weight" "bytes" -- bad-shape out4.h5
refused "unknown dtype" "$(st dtype)" "transformer.ln_f.bias" "F64" -- bad-dtype out5.h5
refused "a missing tensor" "$(st missing)" "transformer.h.1.mlp.c_proj.bias" "missing" -- bad-missing out6.h5
refused "an extra tensor" "$(st extra)" "transformer.h.0.attn.extra" -- bad-extra out7.h5
refused "a tied model's lm_head.weight that is not wte" "$(st lm-differs)" "lm_head.weight" "tie_word_embeddings" -- bad-lm-differs out14.h5
refused "a shard the index names is gone" "bad-missing-file/model.safetensors.index.json" \
  "bad-missing-file/model-00004-of-00004.safetensors" "does not exist" -- bad-missing-file out17.h5
refused "a tensor in two shards" "bad-twice/model.safetensors.index.json" "transformer.h.0.attn.c_attn.bias" \
  "two shards" -- bad-twice out18.h5
refused "a shard's name with a directory in the index" "bad-slash/model.safetensors.index.json" "weight_map" \
  "transformer.h.0.attn.c_attn.bias" "expected the name of a file" -- bad-slash out19.h5
refused "the index puts a tensor in a shard without it" "bad-wrong-file/model.safetensors.index.json" \
  "transformer.h.0.attn.c_attn.bias" "does not hold it" -- bad-wrong-file out20.h5
refused "a shard's tensor the index leaves out" "bad-unlisted/model.safetensors.index.json" \
  "transformer.h.0.attn.c_attn.bias" "is not in it" -- bad-unlisted out21.h5
refused "activation_function relu" "bad-relu/config.json" "activation_function" "relu" -- bad-relu out8.h5
cp ref.bin magic.bin && printf 'XXXX' | dd of=magic.bin conv=notrunc 2>/dev/null
refused "llm.c bad magic" "magic.bin" "magic" -- magic.bin out9.h5
cp ref.bin version.bin && printf '\004\000\000\000' | dd of=version.bin bs=1 seek=4 conv=notrunc 2>/dev/null
refused "llm.c version 4" "version.bin" "version 4" -- version.bin out10.h5
head -c 5000 ref.bin >short.bin
refused "llm.c file shorter than its header says" "short.bin" "bytes" -- short.bin out11.h5
refused "an untied model to llm.c" "out12.bin" "tie_embeddings" -- hf-untied.h5 out12.bin
refused "a tokenizer larger than the model's vocabulary" "tok.json" "291" "vocab_size 256" -- \
  --tokenizer tok.json tiny.h5 out15
mkdir empty
refused "a directory without config.json" "empty/config.json" -- empty out13.h5
"$CONVERT" hf >/dev/null 2>&1
rc=$?
[ $rc = 2 ]; ok $? "a command line without DST: status 2 ($rc)"
"$CONVERT" hf out.txt >/dev/null 2>&1
rc=$?
[ $rc = 2 ] && [ ! -e out.txt ]; ok $? "a DST whose format the name does not tell: status 2 ($rc)"
"$CONVERT" --tokenizer tok.json t300.h5 out16.h5 >refused.out 2>&1
rc=$?
[ $rc = 2 ] && [ ! -e out16.h5 ] && grep -q -- '--tokenizer tok.json: only Hugging Face output' refused.out
ok $? "--tokenizer with ppdl output: status 2, naming the option ($rc)"
finish
