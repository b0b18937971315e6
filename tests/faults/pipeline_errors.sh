#!/bin/sh
# pipeline_errors.sh — wrong pipeline set-ups give a clear message (printed once, by the
# lowest rank that found it) and end every rank by itself, quickly (timeout = failure),
# with a non-zero exit status.
. "$top_srcdir/tests/lib.sh"
make_case m mlp   # 4 layers
expect_fail() {  # expect_fail "description" "message pattern" N ARGS...
  local what=$1 pat=$2 n=$3; shift 3
  mpirun_n "$n" "$@" >"$tmp/out" 2>&1
  local rc=$?
  # every rank ends by itself (all ranks agree on the error and exit): none is killed by
  # the launcher, which hydra reports as a BAD TERMINATION
  [ $rc != 0 ] && [ $rc != 124 ] && [ $rc != 137 ] && grep -q -- "$pat" "$tmp/out" &&
    ! grep -q "BAD TERMINATION" "$tmp/out"
  ok $? "$what (exit $rc, every rank ended by itself)"
  # printed once: by the lowest rank that found it, not by every rank
  local n=$(grep -c -- "$pat" "$tmp/out")
  [ "$n" = 1 ]; ok $? "$what: the message is printed once (seen $n times)"
  grep -q -- "$pat" "$tmp/out" || sed 's/^/#   /' "$tmp/out" | tail -3
}
"$PPDL_INIT" --preset mlp-tiny --set n_layers=3 -o "$tmp/m3.h5" >/dev/null
expect_fail "more ranks than layers" "4 ranks but the model has 3 layers" 4 "$tmp/m3.h5" --data "$tmp/m-data.h5" --steps 1 --batch-size 4 --micro-batches 2 --plan uniform
mpirun_n 3 "$tmp/m.h5" --data "$tmp/m-data.h5" --steps 1 --batch-size 6 --micro-batches 3 >/dev/null 2>&1
ok $? "3 ranks on 4 layers run (the set-up of the next cases is valid)"
expect_fail "micro-batches that do not divide the batch" "does not divide --batch-size" 2 \
  "$tmp/m.h5" --data "$tmp/m-data.h5" --batch-size 6 --micro-batches 4
cat >"$tmp/short.json" <<'JSON'
{"stages": [{"rank": 0, "first_layer": 0, "last_layer": 1}, {"rank": 1, "first_layer": 2, "last_layer": 2}]}
JSON
expect_fail "a plan that does not cover every layer" "cover" 2 "$tmp/m.h5" --data "$tmp/m-data.h5" --plan "$tmp/short.json"
cat >"$tmp/long.json" <<'JSON'
{"stages": [{"rank": 0, "first_layer": 0, "last_layer": 1}, {"rank": 1, "first_layer": 2, "last_layer": 6}]}
JSON
expect_fail "a stage given more layers than the model has" "only 4 layers" 2 "$tmp/m.h5" --data "$tmp/m-data.h5" --plan "$tmp/long.json"
cat >"$tmp/three.json" <<'JSON'
{"stages": [{"rank": 0, "first_layer": 0, "last_layer": 0}, {"rank": 1, "first_layer": 1, "last_layer": 1},
            {"rank": 2, "first_layer": 2, "last_layer": 3}]}
JSON
expect_fail "a plan for 3 ranks on 2" "on 3 ranks but the job has 2 ranks" 2 "$tmp/m.h5" --data "$tmp/m-data.h5" --plan "$tmp/three.json"
# the head cut by vocabulary (ppdl-plan --vocab-parallel): valid, planned, not yet run
cat >"$tmp/vocab.json" <<'JSON'
{"stages": [{"rank": 0, "first_layer": 0, "last_layer": 1}, {"rank": 1, "first_layer": 2, "last_layer": 2}],
 "vocab_parallel": {"layer": 3, "size": 10, "slices": [{"rank": 0, "first": 0, "last": 4}, {"rank": 1, "first": 5, "last": 9}]}}
JSON
expect_fail "a vocabulary-parallel plan is refused" "vocabulary parallelism is planned but not yet run by ppdl" 2 \
  "$tmp/m.h5" --data "$tmp/m-data.h5" --plan "$tmp/vocab.json"
echo '{"stages": [' >"$tmp/bad.json"
expect_fail "a malformed plan file names the file and line" "bad.json: line" 2 "$tmp/m.h5" --data "$tmp/m-data.h5" --plan "$tmp/bad.json"
expect_fail "an unknown schedule" "--schedule zigzag" 2 "$tmp/m.h5" --data "$tmp/m-data.h5" --schedule zigzag
expect_fail "a missing model file" "nothere.h5" 2 "$tmp/nothere.h5" --data "$tmp/m-data.h5"
finish
