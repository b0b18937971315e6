#!/bin/sh
# docs_fields.sh — docs/ says what the code does: every key, attribute and dataset the
# code reads or writes is named in docs/formats.md's tables and every name there is
# read or written by the code; docs/cli.md lists exactly each program's options and the
# exit statuses the code can end with; docs/environment.md lists exactly the PPDL_*
# variables src/ reads with getenv, and docs/testing.md exactly the test hooks
# (tests/unit/docs_fields.py: how the names are found on each side). Negative controls,
# on a scratch copy of docs/ and src/: for every format, program, the status list, the
# environment and the hooks, a documented name removed from its table and a name
# renamed in the code must each fail the check with the name and the file; so must a
# new source file that writes JSON keys no format claims, a key made at run time that
# the checker cannot explain, and a getenv of a name made at run time.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
CHECK=$top_srcdir/tests/unit/docs_fields.py
[ -x "$PY" ] || skip_all "needs /usr/bin/python3"

out=$("$PY" "$CHECK" --root "$top_srcdir" 2>&1)
ok $? "docs/ and the code name the same keys, options and exit statuses"
[ -n "$out" ] && diag "$out"

# a fresh copy of the tree the checker reads: docs/ and the sources
copy() {
  rm -rf "$tmp/tree" && mkdir "$tmp/tree" &&
    (cd "$top_srcdir" && find docs src -name '*.md' -o -name '*.c' -o -name '*.h') >"$tmp/files" &&
    (cd "$top_srcdir" && tar -cf - -T "$tmp/files") | tar -C "$tmp/tree" -xf -
}
copy && "$PY" "$CHECK" --root "$tmp/tree" >"$tmp/clean.out" 2>&1
ok $? "the unchanged copy passes (the controls below start from a passing tree)"

# expect_fail WHAT PATTERN...: the check on the copy fails and its output has every PATTERN
expect_fail() {
  local what=$1 rc
  shift
  "$PY" "$CHECK" --root "$tmp/tree" >"$tmp/planted.out" 2>&1
  rc=$?
  for p in "$@"; do
    grep -qF -- "$p" "$tmp/planted.out" || { rc=0; diag "missing from the output: $p"; }
  done
  [ $rc = 1 ]
  ok $? "$what"
  [ $rc = 1 ] || sed 's/^/#   /' "$tmp/planted.out"
}

for sec in model.h5 data.h5 checkpoint.h5 CLUSTER.json COSTS.json "plan JSON" report trace "run log" \
           "cli ppdl" "cli ppdl-init" "cli ppdl-data" "cli ppdl-plan" "cli ppdl-convert" "exit status" \
           config.json safetensors \
           environment "test hooks"; do
  copy
  planted=$("$PY" "$CHECK" --root "$tmp/tree" --plant doc "$sec")
  key=$(echo "$planted" | cut -f1) file=$(echo "$planted" | cut -f2)
  expect_fail "$sec: a documented name removed from $file ($key) fails the check" \
    "\`$key\` is read or written by the code" "$file does not name it"
  copy
  planted=$("$PY" "$CHECK" --root "$tmp/tree" --plant code "$sec")
  key=$(echo "$planted" | cut -f1) new=$(echo "$planted" | cut -f2) file=$(echo "$planted" | cut -f3)
  expect_fail "$sec: a name renamed in $file ($key -> $new) fails the check" \
    "$file" "\`$new\` is read or written by the code" "\`$key\` is documented but no code reads or writes it"
done

# a new file format in a new source file, and a key made at run time nobody explained
copy
mkdir -p "$tmp/tree/src/extra"
printf '#include <jansson.h>\nvoid w(json_t *o) { json_object_set_new(o, "fresh_key", json_true()); }\n' \
  >"$tmp/tree/src/extra/new_format.c"
expect_fail "a source file writing keys that no format claims fails the check" \
  "src/extra/new_format.c:2: calls json_object_set_new" "no format in docs_fields.py claims it"
copy
printf 'void more(json_t *o, const char *k) { json_object_set_new(o, k + 1, json_true()); }\n' \
  >>"$tmp/tree/src/plan/plan.c"
expect_fail "a key made at run time that the checker cannot explain fails the check" \
  "src/plan/plan.c:" "json_object_set_new(... k + 1 ...) names a key made at run time"
copy
printf 'const char *env_of(const char *k) { return getenv(k); }\n' >>"$tmp/tree/src/net/probe.c"
expect_fail "a getenv of a variable named at run time fails the check" \
  "src/net/probe.c:" "getenv(k) reads a variable named at run time"
finish
