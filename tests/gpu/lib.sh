# tests/gpu/lib.sh — the bookkeeping of tests/gpu/run (sourced; tests/gpu/dry-run
# sources it too, to check the verdict against planted step lists). The caller sets
# start (SECONDS at its start), budget (seconds), summary and verdict (file paths).
#   note TEXT              print and append to the summary
#   phase TEXT             a heading with the seconds used
#   left                   seconds left of the budget: may be 0 or negative, so compare
#                          it; never pass it to timeout (timeout 0 means no limit)
#   limit CAP              a time limit for the next phase: what is left, at most CAP,
#                          and never below 1
#   step NAME STATUS DETAIL  record a step: STATUS ok, FAILED or "not run"
#   finish                 the verdict: one line ("GPU check: OK, ..." or "GPU check:
#                          FAILED, ..." naming every step that did not pass, the goal
#                          line when $goal is set, the seconds), then the steps, into
#                          $verdict; printed last after the summary; exit 0 only when
#                          there was at least one step and every step was ok
steps=() # "name<TAB>ok|FAILED|not run<TAB>detail"
note() { echo "$*" | tee -a "$summary"; }
phase() { echo; echo "== $* ($((SECONDS - start)) s) =="; }
# seconds left of the budget (may be 0 or negative: compare it, never pass it to timeout)
left() { echo $((budget - (SECONDS - start))); }
# limit CAP: a time limit for the next phase: what is left, at most CAP, at least 1
limit() { local l; l=$(left); [ "$l" -gt "$1" ] && l=$1; [ "$l" -ge 1 ] || l=1; echo "$l"; }
step() { # step NAME STATUS DETAIL
  steps+=("$1"$'\t'"$2"$'\t'"$3")
  note "step $1: $2${3:+ — $3}"
}
goal=${goal:-}
finish() { # the verdict: written, printed last, and the exit status
  local bad=() okn=0 s name st det line status
  for s in "${steps[@]}"; do
    IFS=$'\t' read -r name st det <<<"$s"
    if [ "$st" = ok ]; then okn=$((okn + 1)); else bad+=("$name: $st${det:+ ($det)}"); fi
  done
  if [ ${#bad[@]} = 0 ] && [ ${#steps[@]} -gt 0 ]; then
    status=0; line="GPU check: OK, all $okn steps passed"
  else
    status=1; line="GPU check: FAILED, ${#bad[@]} of ${#steps[@]} steps not passed: ${bad[0]:-}"
    for s in "${bad[@]:1}"; do line="$line; $s"; done
  fi
  [ -n "$goal" ] && line="$line | 60% step/cuBLAS goal: $goal"
  line="$line | $((SECONDS - start)) s"
  { echo "$line"; printf '%s\n' "${steps[@]}"; } >"$verdict"
  echo
  echo "==================== summary ===================="
  cat "$summary"
  echo
  echo "$line"
  exit $status
}
