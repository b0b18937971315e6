#!/bin/sh
# chunked_predict.sh — the predicted step of a rank holding several stages (interleaved,
# zb-v; issue 22): ppdl given the costs (--costs-out profiles them) and the network
# (--cluster) prints the cost model's T and the simulator's step for --plan uniform and
# for a plan file with several stages per rank, and the report holds both; ppdl-plan on
# the same costs and cluster simulates the same step (the same op lists, the same
# play: its 3 decimals equal ppdl's), evaluates and draws it (--timeline, a row per
# rank labelled with its stages), plans them (--method ppdl: no slower than the uniform
# cut) and refuses a baseline's method for them.
. "$top_srcdir/tests/lib.sh"
PLAN=$top_builddir/ppdl-plan
"$PPDL_INIT" --preset gpt-tiny --set n_layers=6 --set d_model=32 --set seq_len=16 --set tie_embeddings=0 \
  --seed 3 -o "$tmp/g.h5" >/dev/null &&
  "$PPDL_DATA" text "$(text_file)" --seq-len 16 -o "$tmp/g-data.h5" >/dev/null
ok $? "an untied gpt of 8 layers and its data"
# two ranks joined by 25 MB/s and 50 us
printf '{"ranks": 2, "bandwidth_Bps": [[5e10, 25e6], [25e6, 5e10]], "latency_s": [[0, 5e-5], [5e-5, 0]],
 "mem_bytes": [1073741824, 1073741824], "speed": [1.0, 1.0]}\n' >"$tmp/two.json"
run() {  # run NAME ARGS...: 2 ranks, 2 steps of batch 8 in 4 micro-batches
  local name=$1
  shift
  mpirun_n 2 "$tmp/g.h5" --data "$tmp/g-data.h5" --steps 2 --batch-size 8 --micro-batches 4 --threads 1 \
    --cluster "$tmp/two.json" --report "$tmp/$name.json" "$@" >"$tmp/$name.log" 2>&1
}
sim_of() {  # sim_of REPORT: its simulated_ms, 3 decimals
  /usr/bin/python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["prediction"]["simulated_ms"])' "$1"
}
for sch in interleaved zb-v; do
  run $sch --schedule $sch --plan uniform --costs-out "$tmp/costs.json" --plan-out "$tmp/$sch-plan.json"
  rc=$?
  [ $rc = 0 ] && grep -qE "^predicted step: [0-9.]+ ms by the cost model, [0-9.]+ ms by the simulator" "$tmp/$sch.log"
  ok $? "$sch, --plan uniform, --costs-out and --cluster: $(grep '^predicted step' "$tmp/$sch.log" || tail -2 "$tmp/$sch.log")"
  "$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/two.json" --micro-batches 4 --schedule $sch --method uniform \
    --timeline "$tmp/$sch.svg" >"$tmp/$sch-plan.out" 2>&1
  rc=$?
  want=$(sim_of "$tmp/$sch.json" 2>/dev/null)
  [ $rc = 0 ] && [ -n "$want" ] && grep -q "^simulated T  *$want ms" "$tmp/$sch-plan.out"
  ok $? "ppdl-plan --schedule $sch on the same costs: simulated $want ms, as ppdl ($(grep '^simulated T' "$tmp/$sch-plan.out"))"
done
grep -q "stages 0, 2" "$tmp/interleaved.svg" && grep -q "stages 1, 3" "$tmp/interleaved.svg" &&
  grep -q "stages 0, 3" "$tmp/zb-v.svg"
ok $? "ppdl-plan --timeline draws a row per rank, labelled with its stages (interleaved: 0, 2 and 1, 3; zb-v: 0, 3)"
# a plan file with several stages per rank, with this run's costs and network: predicted again
run file --schedule zb-v --plan "$tmp/zb-v-plan.json" --costs "$tmp/costs.json"
rc=$?
[ $rc = 0 ] && grep -qE "^predicted step: [0-9.]+ ms by the cost model, [0-9.]+ ms by the simulator" "$tmp/file.log" &&
  grep -q "predicted again for this run" "$tmp/file.log"
ok $? "zb-v, --plan FILE with --costs and --cluster: predicted again ($(grep '^predicted step' "$tmp/file.log"))"
# the planner plans them (--method ppdl, now the default; the tests above name uniform):
# its plan simulates no slower than the uniform cut (T proposes, the simulator picks
# among the search's, the speed-proportional and the equal cut: plan/solve_chunked.h
# step 4, so its T may exceed the equal cut's where it simulates faster); a baseline
# (one stage per rank) is refused
"$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/two.json" --micro-batches 4 --schedule interleaved \
  --method uniform >"$tmp/uni.out" 2>&1 &&
  "$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/two.json" --micro-batches 4 --schedule interleaved \
    >"$tmp/planned.out" 2>&1
rc=$?
t_of() { sed -n 's/^predicted T  *\([0-9.]*\) ms.*/\1/p' "$1"; }
s_of() { sed -n 's/^simulated T  *\([0-9.]*\) ms.*/\1/p' "$1"; }
[ $rc = 0 ] && grep -q "^method ppdl: placement round-robin order" "$tmp/planned.out" &&
  awk -v a="$(t_of "$tmp/planned.out")" -v b="$(t_of "$tmp/uni.out")" -v c="$(s_of "$tmp/planned.out")" \
    -v d="$(s_of "$tmp/uni.out")" 'BEGIN { exit !(a > 0 && b > 0 && c > 0 && c <= d * (1 + 1e-9)) }'
ok $? "ppdl-plan --schedule interleaved plans: T $(t_of "$tmp/planned.out"), simulated $(s_of "$tmp/planned.out") ms; uniform: $(t_of "$tmp/uni.out"), $(s_of "$tmp/uni.out")"
"$PLAN" --costs "$tmp/costs.json" --cluster "$tmp/two.json" --micro-batches 4 --schedule interleaved \
  --method dp >"$tmp/refused.out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "the baselines plan one stage per rank" "$tmp/refused.out"
ok $? "ppdl-plan --schedule interleaved --method dp: refused, exit $rc ($(cat "$tmp/refused.out"))"
finish
