#!/bin/sh
# checkpoint_bad.sh — a checkpoint that cannot be resumed is refused with a message
# naming the file and the reason, every rank exits non-zero within the timeout, and
# the file is left exactly as it was (same checksum, no .tmp beside it): truncated,
# another model's, a future format version, an unfinished write, flipped data, a plain
# model file. Also option mistakes.
. "$top_srcdir/tests/lib.sh"
make_case gpt gpt || { ok 1 "model and data"; finish; exit; }
m=$tmp/gpt.h5 d=$tmp/gpt-data.h5
run() {  # run NAME RANKS ARGS...: ppdl, stderr in $tmp/NAME.err
  local name=$1 n=$2; shift 2
  mpirun_n "$n" --plan uniform "$@" --batch-size 8 --micro-batches 4 --threads 1 >"$tmp/$name.log" 2>"$tmp/$name.err"
}
run good 2 "$m" --data "$d" --steps 2 --checkpoint "$tmp/good.h5"
ok $? "a good checkpoint to damage"

head -c 20000 "$tmp/good.h5" >"$tmp/truncated.h5"
"$PPDL_INIT" --preset gpt-tiny --set n_layers=3 --set d_model=64 --set seq_len=16 --seed 3 -o "$tmp/other.h5" >/dev/null
run other 1 "$tmp/other.h5" --data "$d" --steps 1 --checkpoint "$tmp/othermodel.h5"
cp "$m" "$tmp/plainmodel.h5"
check_bad() {  # check_bad NAME EXPECTED-MESSAGE-REGEX
  local name=$1 want=$2 sum rc
  sum=$(md5sum <"$tmp/$name.h5")
  # the same command line a job script would use: --resume auto with this --checkpoint
  run bad-$name 2 "$m" --data "$d" --steps 4 --checkpoint "$tmp/$name.h5" --resume auto
  rc=$?
  [ $rc != 0 ] && grep -Eq "ppdl: .*$name.h5: .*($want)" "$tmp/bad-$name.err"
  ok $? "$name: refused with a clear message (exit $rc): $(head -c 150 "$tmp/bad-$name.err")"
  [ "$(md5sum <"$tmp/$name.h5")" = "$sum" ] && [ ! -e "$tmp/$name.h5.tmp" ]
  ok $? "$name: the file is not overwritten"
}
check_bad truncated "not an HDF5 file|truncated"
check_bad othermodel "a checkpoint of another model: its d_model is 64"
check_bad plainmodel "not a checkpoint \\(no /train group\\)"
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
  for c in future unfinished flipped; do cp "$tmp/good.h5" "$tmp/$c.h5"; done
  /usr/bin/python3 - "$tmp" <<'EOF2'
import sys, h5py, numpy as np
t = sys.argv[1]
with h5py.File(t + "/future.h5", "r+") as f: f["train"].attrs["ppdl_checkpoint_version"] = np.int32(99)
with h5py.File(t + "/unfinished.h5", "r+") as f: del f["train"].attrs["complete"]
with h5py.File(t + "/flipped.h5", "r+") as f:   # one moment changed by a little: only the checksum sees it
    v = f["optimizer/v/00003/mlp.fc.weight"]; x = v[()]; x[5, 7] *= 1.001; v[...] = x
EOF2
  check_bad future "checkpoint format version 99 is newer than this ppdl"
  check_bad unfinished "an unfinished checkpoint"
  check_bad flipped "AdamW second moments of layer 3 do not match their checksum"
else
  ok 0 "# SKIP h5py not installed: future-version, unfinished and flipped files not made"
fi

# options
run o1 1 "$m" --data "$d" --resume auto
grep -q -- "--resume auto needs --checkpoint" "$tmp/o1.err"
ok $? "--resume auto without --checkpoint is refused"
run o2 1 "$m" --data "$d" --checkpoint "$tmp/nodir/c.h5"
grep -q "folder $tmp/nodir does not exist" "$tmp/o2.err"
ok $? "--checkpoint in a missing folder is refused before training"
run o3 1 "$m" --data "$d" --checkpoint "$tmp/c.h5" --save "$tmp/c.h5"
grep -q -- "--save and --checkpoint name the same file" "$tmp/o3.err"
ok $? "--save over the checkpoint is refused"
run o4 1 "$m" --data "$d" --time-limit 90
grep -q -- "--time-limit 90: expected a duration" "$tmp/o4.err"
ok $? "--time-limit without a unit is refused"
run o5 1 "$m" --data "$d" --resume "$tmp/missing.h5"
grep -q "missing.h5: cannot read" "$tmp/o5.err"
ok $? "--resume of a missing file names it"

finish
