#!/bin/sh
# token_formats.sh — ppdl-data tokens, format by format, against rows made by numpy.
#
# The reference: the ids of inputs/gpl3-tokens.npy as numpy reads them (np.load: numpy's
# own .npy reader, not ppdl's), cut into rows by Python (row i = ids[i*S : i*S+T+1]).
# Every conversion below must give exactly those rows (bit for bit, stored as uint16
# where vocab_size <= 65536, else int32), the vocab_size asked for, and nothing else on
# disk:
#   - the shipped corpus in its three formats (llm.c shard, nanoGPT raw .bin, .npy);
#   - the same ids written here as an llm.c Llama 3 shard (uint32), raw uint32 (--dtype),
#     .npy of other types (int64, big-endian uint32, int16, format version 2.0,
#     fortran_order), and uint8 (ids mod 256);
#   - three shards of three formats, in order = the single file;
#   - strides 1, 32, 65 (no shared token) and 200 (tokens skipped);
#   - --val-fraction: training rows from the front, validation rows from the back, no
#     token in both, together the rows the text rule gives; --val-out alone; --compress;
#   - text: the rows of a file's bytes;
#   - a corpus of 40 M tokens (80 MB of uint16) converts in bounded memory: the peak RSS
#     stays under 64 MiB, less than the input file itself (measured: 29 MiB; 45 MiB
#     under AddressSanitizer, the same at 24 M tokens), the rows still exact.
. "$top_srcdir/tests/lib.sh"
"$PYTHON_ORACLE" -c 'import h5py, numpy' 2>/dev/null ||
  skip_all "$PYTHON_ORACLE has no h5py and numpy (apt-get install python3-h5py)"
I=$top_srcdir/inputs
PY=$PYTHON_ORACLE

# check OUT.h5 T S VOCAB [FIRST_TOKEN END_TOKEN] [REF.npy] [MOD]: OUT's rows are the rows of
# ids[FIRST:END] (default the whole reference) with seq_len T, stride S
check() {
  "$PY" - "$@" <<'EOF'
import sys
import h5py
import numpy as np
out, T, S, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lo = int(sys.argv[5]) if len(sys.argv) > 5 else 0
hi = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[6] != "end" else None
ref = sys.argv[7] if len(sys.argv) > 7 else None
mod = int(sys.argv[8]) if len(sys.argv) > 8 else 0
ids = np.load(ref).astype(np.int64)
if mod:
    ids = ids % mod
ids = ids[lo:hi]
n = (len(ids) - (T + 1)) // S + 1
want = np.stack([ids[i * S:i * S + T + 1] for i in range(n)])
dtype = np.uint16 if vocab <= 65536 else np.int32
with h5py.File(out, "r") as f:
    got = f["tokens"]
    if got.dtype != dtype or got.shape != want.shape:
        sys.exit(f"{out}: tokens {got.dtype} {got.shape}, expected {np.dtype(dtype)} {want.shape}")
    if not np.array_equal(got[()], want):
        r = int(np.argwhere((got[()] != want).any(axis=1))[0][0])
        sys.exit(f"{out}: row {r} differs")
    if int(f.attrs["vocab_size"]) != vocab:
        sys.exit(f"{out}: vocab_size {f.attrs['vocab_size']}, expected {vocab}")
EOF
}
REF=$I/gpl3-tokens.npy
N=$("$PY" -c "import numpy as np, sys; print(len(np.load(sys.argv[1])))" "$REF")
diag "the shipped corpus: $N tokens"

# ---- the shipped corpus, three formats
for f in gpl3-tokens.bin gpl3-tokens.raw.bin gpl3-tokens.npy; do
  "$PPDL_DATA" tokens "$I/$f" --vocab-size 512 --seq-len 64 -o "$tmp/$f.h5" >"$tmp/log" 2>&1 &&
    check "$tmp/$f.h5" 64 64 512 0 end "$REF"
  ok $? "$f: the rows of the reference, bit for bit ($(sed -n 's/.*: \([0-9]* rows\).*/\1/p' "$tmp/log"))"
done
"$PPDL_DATA" tokens "$I/gpl3-tokens.bin" --seq-len 64 -o "$tmp/gpt2.h5" >/dev/null && check "$tmp/gpt2.h5" 64 64 50257 0 end "$REF"
ok $? "an llm.c GPT-2 shard without --vocab-size: vocab_size 50257, its tokenizer's"
"$PY" - "$I/gpl3-tokens.bin" <<'EOF' >"$tmp/header"
import struct, sys
h = struct.unpack("<256i", open(sys.argv[1], "rb").read(1024))
print(h[0], h[1], h[2], sum(abs(x) for x in h[3:]))
EOF
[ "$(cat "$tmp/header")" = "20240520 1 $N 0" ]
ok $? "the shipped llm.c shard's header, read by Python's struct: $(cat "$tmp/header") (magic, version, count, rest 0)"

! check "$tmp/gpl3-tokens.npy.h5" 64 63 512 0 end "$REF" 2>/dev/null
ok $? "negative control: the checker refuses those rows as the rows of stride 63"

# ---- other widths and encodings of the same ids
"$PY" - "$REF" "$tmp" <<'EOF'
import io, struct, sys
import numpy as np
ids = np.load(sys.argv[1]).astype(np.int64)
d = sys.argv[2]
h = [20240801, 7, len(ids)] + [0] * 253
open(d + "/llama3.bin", "wb").write(struct.pack("<256i", *h) + ids.astype("<u4").tobytes())
open(d + "/raw32.bin", "wb").write(ids.astype("<u4").tobytes())
np.save(d + "/i8.npy", ids.astype("<i8"))
np.save(d + "/be32.npy", ids.astype(">u4"))
np.save(d + "/i2.npy", ids.astype("<i2"))
np.save(d + "/u1.npy", (ids % 256).astype("u1"))
with open(d + "/v2.npy", "wb") as f:
    np.lib.format.write_array(f, ids.astype("<u2"), version=(2, 0))
with open(d + "/fortran.npy", "wb") as f:
    np.lib.format.write_array(f, np.asfortranarray(ids.astype("<u2")))
# three shards, three formats: 5000 + 6000 + the rest
a, b, c = ids[:5000], ids[5000:11000], ids[11000:]
h = [20240520, 1, len(a)] + [0] * 253
open(d + "/s1.bin", "wb").write(struct.pack("<256i", *h) + a.astype("<u2").tobytes())
open(d + "/s2.raw", "wb").write(b.astype("<u2").tobytes())
np.save(d + "/s3.npy", c.astype("<i4"))
EOF
ok $? "the same ids written as llm.c Llama 3, raw uint32, .npy int64/big-endian/int16/uint8/v2.0/fortran, three shards"
for case in "llama3.bin" "raw32.bin --dtype uint32" "i8.npy" "be32.npy" "i2.npy" "v2.npy" "fortran.npy"; do
  set -- $case
  f=$1; shift
  "$PPDL_DATA" tokens "$tmp/$f" "$@" --vocab-size 512 --seq-len 32 -o "$tmp/o.h5" >"$tmp/log" 2>&1 &&
    check "$tmp/o.h5" 32 32 512 0 end "$REF"
  ok $? "$f${1:+ $*}: the reference rows"
done
"$PPDL_DATA" tokens "$tmp/llama3.bin" --seq-len 32 -o "$tmp/o.h5" >/dev/null 2>&1 &&
  check "$tmp/o.h5" 32 32 128256 0 end "$REF"
ok $? "llama3.bin without --vocab-size: vocab_size 128256, its tokenizer's, stored as int32 (over 65536 ids)"
"$PPDL_DATA" tokens "$tmp/u1.npy" --vocab-size 256 --seq-len 32 -o "$tmp/o.h5" >/dev/null 2>&1 &&
  check "$tmp/o.h5" 32 32 256 0 end "$REF" 256
ok $? "u1.npy (uint8, the ids mod 256): the reference rows mod 256"
"$PPDL_DATA" tokens "$tmp/s1.bin" "$tmp/s2.raw" "$tmp/s3.npy" --vocab-size 512 --seq-len 32 -o "$tmp/o.h5" \
  >"$tmp/log" 2>&1 && check "$tmp/o.h5" 32 32 512 0 end "$REF"
ok $? "three shards (llm.c, raw, .npy) in order = the single file's rows (rows span the shard boundaries)"

# ---- strides
for S in 1 32 65 200; do
  "$PPDL_DATA" tokens "$REF" --vocab-size 512 --seq-len 64 --stride $S -o "$tmp/o.h5" >/dev/null 2>&1 &&
    check "$tmp/o.h5" 64 $S 512 0 end "$REF"
  ok $? "--stride $S: row i = ids[i*$S : i*$S+65]"
done

# ---- validation
"$PPDL_DATA" tokens "$REF" --vocab-size 512 --seq-len 64 --val-fraction 0.1 -o "$tmp/t.h5" >"$tmp/log" 2>&1
ok $? "--val-fraction 0.1 writes t.h5 and t-val.h5: $(tail -1 "$tmp/log" | sed "s|$tmp/||g")"
"$PY" - "$tmp/t.h5" "$tmp/t-val.h5" "$N" <<'EOF' >"$tmp/split"
import math, sys
import h5py
T1, S, N = 65, 64, int(sys.argv[3])
n_all = (N - T1) // S + 1
x = 0.1 * n_all
n_val = round(x) if abs(x - round(x)) <= 1e-9 * x else math.ceil(x)
split = N - ((n_val - 1) * S + T1)
n_tr = h5py.File(sys.argv[1], "r")["tokens"].shape[0]
n_v = h5py.File(sys.argv[2], "r")["tokens"].shape[0]
last_train_token = (n_tr - 1) * S + T1 - 1
print(n_all, n_val, split, n_tr, n_v, last_train_token)
ok = n_v == n_val and n_tr == (split - T1) // S + 1 and last_train_token < split
sys.exit(0 if ok else 1)
EOF
ok $? "validation: the last ceil(0.1 x rows) rows, from token $(cut -d' ' -f3 "$tmp/split") on; training rows end at token $(cut -d' ' -f6 "$tmp/split") (no token in both)"
set -- $(cat "$tmp/split")
check "$tmp/t.h5" 64 64 512 0 "$3" "$REF" && check "$tmp/t-val.h5" 64 64 512 "$3" end "$REF"
ok $? "training rows = the rows of ids[:$3], validation rows = the rows of ids[$3:], bit for bit"
"$PPDL_DATA" tokens "$REF" --vocab-size 512 --seq-len 64 --val-out "$tmp/v.h5" -o "$tmp/t2.h5" >/dev/null 2>&1 &&
  check "$tmp/t2.h5" 64 64 512 0 "$3" "$REF" && check "$tmp/v.h5" 64 64 512 "$3" end "$REF"
ok $? "--val-out FILE alone: --val-fraction 0.1 into FILE"
"$PPDL_DATA" tokens "$REF" --vocab-size 512 --seq-len 64 --compress 6 -o "$tmp/z.h5" >/dev/null 2>&1 &&
  check "$tmp/z.h5" 64 64 512 0 end "$REF" &&
  "$PY" -c 'import h5py, sys; sys.exit(h5py.File(sys.argv[1])["tokens"].compression != "gzip")' "$tmp/z.h5"
ok $? "--compress 6: gzip-compressed chunks, the same rows ($(wc -c <"$tmp/z.h5") bytes against $(wc -c <"$tmp/gpl3-tokens.npy.h5"))"

# ---- text goes the same way: the rows of the bytes
"$PPDL_DATA" text "$I/tiny.txt" --seq-len 32 --stride 20 -o "$tmp/text.h5" >/dev/null 2>&1 &&
  "$PY" -c 'import numpy as np, sys; np.save(sys.argv[2], np.frombuffer(open(sys.argv[1], "rb").read(), np.uint8))' \
    "$I/tiny.txt" "$tmp/tiny.npy" && check "$tmp/text.h5" 32 20 256 0 end "$tmp/tiny.npy"
ok $? "text: the rows of the file's bytes (seq_len 32, stride 20)"
ls "$tmp" | grep -q '\.tmp$'
[ $? = 1 ]; ok $? "no FILE.tmp left behind by the conversions"

# ---- larger than the buffers, in bounded memory
"$PY" -c '
import sys
import numpy as np
rng = np.random.default_rng(3)
np.save(sys.argv[1], rng.integers(0, 50257, size=40_000_000, dtype=np.uint16))' "$tmp/big.npy"
"$PY" - "$PPDL_DATA" "$tmp" <<'EOF' >"$tmp/rss"
import resource, subprocess, sys
p, d = sys.argv[1], sys.argv[2]
r = subprocess.run([p, "tokens", d + "/big.npy", "--vocab-size", "50257", "--seq-len", "1024", "-o", d + "/big.h5"],
                   stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, r.returncode)
EOF
set -- $(cat "$tmp/rss")
[ "$2" = 0 ] && [ "$1" -lt 64 ] && check "$tmp/big.h5" 1024 1024 50257 0 end "$tmp/big.npy"
ok $? "40 M tokens (80 MB of uint16) in rows of 1025: peak RSS $1 MiB (< 64 MiB, less than the input file), rows exact"
finish
