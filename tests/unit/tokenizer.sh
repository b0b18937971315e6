#!/bin/sh
# tokenizer.sh — io/tokenizer.c against Hugging Face `tokenizers` (the oracle:
# tests/unit/tokenizer_oracle.py, run by $PPDL_HF_PYTHON, default /opt/ppdl-py/bin/python3).
#
# The oracle trains a byte-level BPE (vocab 1000, special token <|endoftext|>) and
# writes a held-out text of 1.1 MB (accents, CJK, Devanagari, emoji with modifiers and
# joiners, whitespace runs, digits, contractions, the special token) with its ids. Then:
#   - ppdl's ids equal tokenizers' exactly, encoded whole and in 64 KiB pieces cut at
#     ppdl_tokenizer_cut (as ppdl-data streams); decode(encode(text)) == text;
#   - the same tokenizer with merges as [a, b] pairs, and with the pattern in a Split
#     before a ByteLevel without its own: the same ids;
#   - negative controls: merges 0-39 in reverse order, and GPT-2's pattern with ASCII
#     letters and digits for \p{L} and \p{N}: the ids differ;
#   - refusals, each message checked: WordPiece, Unigram, a merge of an unknown token,
#     a Metaspace pre-tokenizer, an NFC normalizer, a file that is not JSON;
#   - ppdl-data text --tokenizer on two files: the rows are the oracle's ids of doc1,
#     <|endoftext|>, doc2, and vocab_size is the tokenizer's;
#   - ppdl-sample --tokenizer decodes: a character split across two tokens comes out whole.
. "$top_srcdir/tests/lib.sh"
HF=${PPDL_HF_PYTHON:-/opt/ppdl-py/bin/python3}
[ -x "$HF" ] || skip_all "no Python with tokenizers at $HF (set PPDL_HF_PYTHON; scripts/setup makes /opt/ppdl-py)"
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
"$TT" encode "$d/tokenizer.json" "$d/heldout.txt" "$d/chunked.ids" 65536 && cmp -s "$d/chunked.ids" "$d/heldout.ids"
ok $? "encoded in 64 KiB pieces cut at newlines: the same ids"
"$TT" decode "$d/tokenizer.json" "$d/ppdl.ids" "$d/back.txt" && cmp -s "$d/back.txt" "$d/heldout.txt"
ok $? "decode(encode(text)) == text"
for v in pairs split_seq; do
  "$TT" encode "$d/$v.json" "$d/heldout.txt" "$d/$v.ids" && cmp -s "$d/$v.ids" "$d/heldout.ids"
  ok $? "$v.json (the same tokenizer written another way): the same ids"
done
for v in bad_order ascii_regex; do
  "$TT" encode "$d/$v.json" "$d/heldout.txt" "$d/$v.ids" && ! cmp -s "$d/$v.ids" "$d/heldout.ids"
  ok $? "negative control $v.json: the ids differ"
done

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
printf 'caf\303' >"$d/cut.txt"
"$TT" encode "$d/tokenizer.json" "$d/cut.txt" "$d/cut.ids" 2>"$d/err"
[ $? = 1 ] && grep -q "byte 3 (0xc3) is not UTF-8" "$d/err"
ok $? "a text that is not UTF-8 is refused at its byte offset"

finish
