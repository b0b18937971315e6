#!/bin/sh
# tokenizer.sh — io/tokenizer.c against Hugging Face `tokenizers` (the oracle:
# tests/unit/tokenizer_oracle.py, run by $PYTHON_HF, tests/env.sh: /opt/ppdl-py/bin/python3).
#
# The oracle trains a byte-level BPE (vocab 1000, special token <|endoftext|>) and
# writes a held-out text of 1.1 MB (accents, CJK, Devanagari, emoji with modifiers and
# joiners, whitespace runs, digits, contractions, the special token) with its ids. Then:
#   - ppdl's ids equal tokenizers' exactly, encoded whole and in 4 KiB pieces cut at
#     ppdl_tokenizer_cut (as ppdl-data streams); decode(encode(text)) == text;
#   - the same tokenizer with merges as [a, b] pairs, and with the pattern in a Split
#     before a ByteLevel without its own: the same ids;
#   - variants of the pre-tokenizer, on the first 50 kB: ByteLevel's add_prefix_space,
#     Llama 3's pattern in a Split (and ignore_merges), add_prefix_space after a Split, a
#     String pattern removed, merges of whitespace runs (as GPT-2's ĊĊ: a cut just after
#     "\n\n" would change the ids): the ids equal tokenizers', whole and in 4 KiB pieces;
#   - negative controls: merges 0-39 in reverse order, and GPT-2's pattern with ASCII
#     letters and digits for \p{L} and \p{N}: the ids differ;
#   - llm.c's tokenizer file of the same vocabulary decodes the ids to the text;
#   - refusals, each message checked: WordPiece, Unigram, a merge of an unknown token,
#     a Metaspace pre-tokenizer, an NFC normalizer, a file that is not JSON, an llm.c
#     file of version 3;
#   - ppdl-data text --tokenizer on two files: the rows are the oracle's ids of doc1,
#     <|endoftext|>, doc2, and vocab_size is the tokenizer's;
#   - ppdl-sample --tokenizer decodes: a character split across three tokens comes out
#     whole; ppdl --sample-every --tokenizer prints the sample as text.
. "$top_srcdir/tests/lib.sh"
HF=$PYTHON_HF
[ -x "$HF" ] || skip_all "no Python with tokenizers at $HF (set PYTHON_HF; scripts/setup makes /opt/ppdl-py)"
"$HF" -c 'import tokenizers, numpy' 2>/dev/null || skip_all "$HF has no tokenizers or numpy (scripts/setup installs them)"
TT=$top_builddir/tests/unit/tok_tool
ORACLE=$top_srcdir/tests/unit/tokenizer_oracle.py
d=$tmp

"$HF" "$ORACLE" make "$d" >"$d/make.out" 2>&1
ok $? "the oracle trains a tokenizer and encodes the held-out text"
size=$(wc -c <"$d/heldout.txt")
n_ids=$(($(wc -c <"$d/heldout.ids") / 4))
diag "held-out text: $size bytes, $n_ids ids"
[ "$size" -ge 1000000 ]
ok $? "the held-out text is at least 1 MB ($size bytes)"

"$TT" encode "$d/tokenizer.json" "$d/heldout.txt" "$d/ppdl.ids" && cmp -s "$d/ppdl.ids" "$d/heldout.ids"
ok $? "ppdl's ids of the held-out text equal tokenizers' ($n_ids ids)"
"$TT" encode "$d/tokenizer.json" "$d/heldout.txt" "$d/chunked.ids" 4096 && cmp -s "$d/chunked.ids" "$d/heldout.ids"
ok $? "encoded in 4 KiB pieces cut at newlines: the same ids"
"$TT" decode "$d/tokenizer.json" "$d/ppdl.ids" "$d/back.txt" && cmp -s "$d/back.txt" "$d/heldout.txt"
ok $? "decode(encode(text)) == text"
for v in pairs split_seq; do
  "$TT" encode "$d/$v.json" "$d/heldout.txt" "$d/$v.ids" && cmp -s "$d/$v.ids" "$d/heldout.ids"
  ok $? "$v.json (the same tokenizer written another way): the same ids"
done
for v in $(cat "$d/variants.txt"); do
  "$TT" encode "$d/$v.json" "$d/slice.txt" "$d/$v.p.ids" && cmp -s "$d/$v.p.ids" "$d/$v.ids" &&
    "$TT" encode "$d/$v.json" "$d/slice.txt" "$d/$v.p.ids" 4096 && cmp -s "$d/$v.p.ids" "$d/$v.ids"
  ok $? "pre-tokenizer variant $v: ids equal tokenizers' on 50 kB ($(($(wc -c <"$d/$v.ids") / 4)) ids), whole and in 4 KiB pieces"
done
for v in bad_order ascii_regex; do
  "$TT" encode "$d/$v.json" "$d/heldout.txt" "$d/$v.ids" && ! cmp -s "$d/$v.ids" "$d/heldout.ids"
  ok $? "negative control $v.json: the ids differ"
done

# llm.c's tokenizer file of the same vocabulary: decodes the held-out ids to the text
"$TT" load "$d/llmc_tokenizer.bin" >"$d/out" && grep -q "vocab_size 1000 eot 0 encode 0" "$d/out" &&
  "$TT" decode "$d/llmc_tokenizer.bin" "$d/heldout.ids" "$d/back2.txt" && cmp -s "$d/back2.txt" "$d/heldout.txt"
ok $? "llm.c's tokenizer file (version 2): vocab_size and eot from its header; it decodes the ids to the text"

# refusals: FILE, the message it must give
refuse() {
  "$TT" load "$d/$1" >/dev/null 2>"$d/err"
  rc=$?
  grep -q -- "$2" "$d/err" && [ $rc = 1 ]
  ok $? "$1 is refused: $2"
  [ $rc = 1 ] || diag "exit status $rc"
  grep -q -- "$2" "$d/err" || diag "$(cat "$d/err")"
}
refuse wordpiece.json "wordpiece.json: model.type is WordPiece; ppdl reads byte-level BPE"
refuse unigram.json "unigram.json: model.type is Unigram; ppdl reads byte-level BPE"
refuse unknown_merge.json 'unknown_merge.json: model.merges\[5\]: token "zqĠ" is not in model.vocab'
refuse metaspace.json "metaspace.json: pre_tokenizer.type is Metaspace: ppdl reads byte-level BPE"
refuse nfc.json "nfc.json: normalizer.type is NFC, which changes the text"
refuse notjson.json "notjson.json: not JSON (line 1"
refuse llmc_v3.bin "llmc_v3.bin: llm.c tokenizer file version 3: ppdl reads versions 1 and 2"
printf 'caf\303' >"$d/cut.txt"
"$TT" encode "$d/tokenizer.json" "$d/cut.txt" "$d/cut.ids" 2>"$d/err"
[ $? = 1 ] && grep -q "byte 3 (0xc3) is not UTF-8" "$d/err"
ok $? "a text that is not UTF-8 is refused at its byte offset"

# ppdl-data text --tokenizer: rows of the oracle's ids, cut as token_convert.h says
rows_equal() {  # rows_equal DATA.h5 IDS T: DATA's rows are IDS cut into rows of T+1, stride T
  "$HF" - "$@" <<'EOF'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
t, T = f["tokens"][:], int(sys.argv[3])
ref = np.fromfile(sys.argv[2], "<u4").astype(np.int64)
rows = np.array([ref[i * T:i * T + T + 1] for i in range((len(ref) - T - 1) // T + 1)])
assert int(f.attrs["vocab_size"]) == 1000, f.attrs["vocab_size"]
assert t.shape == rows.shape and np.array_equal(t, rows), (t.shape, rows.shape)
EOF
}
if "$HF" -c 'import h5py' 2>/dev/null; then
  "$PPDL_DATA" text "$d/doc1.txt" "$d/doc2.txt" --tokenizer "$d/tokenizer.json" --seq-len 16 -o "$d/docs.h5" >"$d/out" &&
    rows_equal "$d/docs.h5" "$d/docs.ids" 16
  ok $? "ppdl-data text --tokenizer on two files: the rows are doc1, <|endoftext|>, doc2 as tokenizers encodes them"
  "$PPDL_DATA" text "$d/heldout.txt" --tokenizer "$d/tokenizer.json" --seq-len 64 -o "$d/held.h5" >"$d/out" &&
    rows_equal "$d/held.h5" "$d/heldout.ids" 64
  ok $? "ppdl-data text --tokenizer on the 1.1 MB text (read in 1 MiB blocks): its rows are tokenizers' ids"
  [ -z "$(ls "$d" | grep tokens-)" ]
  ok $? "no temporary file is left beside the output"
else
  echo "ok $((n_tap += 1)) # SKIP $HF has no h5py: ppdl-data text --tokenizer's rows not compared"
fi
"$PPDL_DATA" text "$d/doc1.txt" "$d/doc2.txt" --tokenizer "$d/tokenizer.json" --eot-token "<|nope|>" --seq-len 16 \
  -o "$d/x.h5" 2>"$d/err"
[ $? = 1 ] && grep -q -- "--eot-token <|nope|>: .*tokenizer.json has no such token" "$d/err" && [ ! -e "$d/x.h5" ]
ok $? "--eot-token naming no token is refused, and no output is written"

# ppdl-sample --tokenizer: a gpt of vocab_size 1000 (random weights) continues a prompt
"$PPDL_INIT" --preset gpt-tiny --set vocab_size=1000 -o "$d/gpt.h5" >/dev/null
"$top_builddir/ppdl-sample" "$d/gpt.h5" --tokenizer "$d/tokenizer.json" --prompt-ids "$(cat "$d/split_char.ids")" \
  --tokens 1 --temperature 0 --quiet >"$d/s1" 2>"$d/err"
[ $? = 0 ] && head -c 3 "$d/s1" | grep -q "^日"
ok $? "ppdl-sample --tokenizer: 日 split across three tokens ($(cat "$d/split_char.ids")) comes out whole"
[ $? = 0 ] || diag "$(cat "$d/err")" "$(od -c "$d/s1" | head -3)"
"$top_builddir/ppdl-sample" "$d/gpt.h5" --tokenizer "$d/tokenizer.json" --prompt "Ångström's 日本 text" \
  --tokens 5 --quiet >"$d/s2" 2>"$d/err"
[ $? = 0 ] && grep -q "^Ångström's 日本 text" "$d/s2"
ok $? "ppdl-sample --tokenizer --prompt TEXT: the output starts with the prompt's text"
"$top_builddir/ppdl-sample" "$d/gpt.h5" --tokenizer "$d/wordpiece.json" --prompt "x" --tokens 1 2>"$d/err"
[ $? = 1 ] && grep -q -- "--tokenizer: .*wordpiece.json: model.type is WordPiece" "$d/err"
ok $? "ppdl-sample refuses a tokenizer of another kind, naming it"

# ppdl --sample-every --tokenizer: the samples print as text
if [ -s "$d/docs.h5" ]; then
  "$PPDL_INIT" --preset gpt-tiny --set vocab_size=1000 --set seq_len=16 -o "$d/gpt16.h5" >/dev/null
  mpirun_n 2 "$d/gpt16.h5" --data "$d/docs.h5" --steps 2 --batch-size 4 --sample-every 2 --sample-tokens 4 \
    --tokenizer "$d/tokenizer.json" --sample-prompt "Zweites Dokument: größer" >"$d/train.log" 2>&1
  [ $? = 0 ] && grep -q "^sample after step 2 (.*): Zweites Dokument: größer | " "$d/train.log"
  ok $? "ppdl --sample-every --tokenizer: the sample's prompt prints as text"
  [ $? = 0 ] || diag "$(tail -5 "$d/train.log")"
  "$PPDL" "$d/gpt16.h5" --data "$d/docs.h5" --steps 1 --tokenizer "$d/tokenizer.json" >/dev/null 2>"$d/err"
  [ $? = 2 ] && grep -q -- "--tokenizer needs --sample-every K" "$d/err"
  ok $? "ppdl --tokenizer without --sample-every is refused"
  mpirun_n 1 "$d/gpt16.h5" --data "$d/docs.h5" --steps 1 --sample-every 1 --tokenizer "$d/nfc.json" >/dev/null 2>"$d/err"
  [ $? = 1 ] && grep -q -- "--tokenizer: .*nfc.json: normalizer.type is NFC" "$d/err"
  ok $? "ppdl --tokenizer with a tokenizer of another kind stops at setup, naming it"
fi

finish
