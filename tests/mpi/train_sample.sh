#!/bin/sh
# train_sample.sh — --sample-every K prints, from rank 0, what the model writes after
# every K steps and after the last: the same text on 1 and 3 ranks (the weights are the
# same bits, the seed is --seed + the step), and the very text ppdl-sample writes from
# the model --save wrote after the same steps, with the same temperature (0.8), top-k
# (40) and seed: the weights gathered to rank 0 are the trained ones, and the sample
# runs the same generator. Refused for non-gpt models and without --sample-every.
. "$top_srcdir/tests/lib.sh"
make_case g gpt
base="$tmp/g.h5 --data $tmp/g-data.h5 --steps 6 --batch-size 8 --micro-batches 4 --threads 1 --lr 3e-3 --seed 7"
samp="--sample-every 3 --sample-tokens 24 --sample-prompt The"
mpirun_n 1 $base $samp --save "$tmp/one.h5" >"$tmp/one.log" 2>&1 &&
  mpirun_n 3 $base $samp --plan uniform >"$tmp/three.log" 2>&1
ok $? "1 and 3 ranks train with --sample-every 3"
s1=$(grep "^sample after step" "$tmp/one.log" | sed 's/ ([0-9.]* s)//')
s3=$(grep "^sample after step" "$tmp/three.log" | sed 's/ ([0-9.]* s)//')
diag "$s1"
[ "$(echo "$s1" | cut -d: -f1 | tr '\n' ' ')" = "sample after step 3 sample after step 6 " ] && [ "$s1" = "$s3" ]
ok $? "a sample after steps 3 and 6, the same text on 1 and 3 ranks"
# ppdl-sample on the saved model: the same 24 tokens after 'The' (seed 7 + 6 steps)
"$top_builddir/ppdl-sample" "$tmp/one.h5" --prompt The --tokens 24 --temperature 0.8 --top-k 40 --seed 13 \
  2>/dev/null >"$tmp/ref.txt"
want=$(/usr/bin/python3 -c '
import sys
t = open(sys.argv[1], "rb").read()[:-1]   # the text and its closing newline
esc = "".join("\\n" if c == 10 else chr(c) if 32 <= c <= 126 else "\\x%02x" % c for c in t[3:])
print("sample after step 6: The | " + esc)' "$tmp/ref.txt")
[ "$(echo "$s1" | tail -1)" = "$want" ]
ok $? "after step 6 it is the text ppdl-sample writes from the --save'd model with the same settings"
[ "$(echo "$s1" | tail -1)" = "$want" ] || diag "want: $want"
make_case m mlp
mpirun_n 1 "$tmp/m.h5" --data "$tmp/m-data.h5" --steps 2 --sample-every 1 >"$tmp/mlp.log" 2>&1
[ $? = 2 ] && grep -q -- "--sample-every: .*m.h5 is an mlp model" "$tmp/mlp.log"
ok $? "an mlp is refused, naming the option and the file"
mpirun_n 1 $base --sample-tokens 5 >"$tmp/bad.log" 2>&1
[ $? = 2 ] && grep -q -- "--sample-tokens needs --sample-every" "$tmp/bad.log"
ok $? "--sample-tokens without --sample-every is refused"
finish
