#!/bin/sh
# bad_files.sh — bad command lines and bad inputs of ppdl-init and ppdl-data.
#
# Each case must: exit non-zero, print a message naming the option or file (the words
# checked below), and leave the output file as it was (absent, or byte-identical when
# it existed), with no FILE.tmp left behind. A few good runs check the programs work at
# all, so a broken program cannot pass by failing everything. TAP output.
#
# Run by `make check` with tests/env.sh sourced (top_builddir, top_srcdir); by hand:
#   top_builddir=BUILD top_srcdir=SRC sh tests/faults/bad_files.sh
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
INIT=$top_builddir/ppdl-init
DATA=$top_builddir/ppdl-data

T=$(mktemp -d "${TMPDIR:-/tmp}/ppdl-bad-files.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT

n=0
failed=0

report() { # report OK DESCRIPTION
    n=$((n + 1))
    if [ "$1" = 1 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}

state() { # what a file looks like now: its checksum, or "absent"
    if [ -e "$1" ]; then cksum < "$1"; else echo absent; fi
}

# expect_fail DESCRIPTION OUTPUT 'word1|word2|...' COMMAND ARGS...
expect_fail() {
    desc=$1 out=$2 words=$3
    shift 3
    before=$(state "$out")
    msg=$("$@" 2>&1)
    rc=$?
    good=1
    [ $rc -ne 0 ] || good=0
    oldifs=$IFS
    IFS='|'
    for w in $words; do
        case $msg in *"$w"*) ;; *) good=0 ;; esac
    done
    IFS=$oldifs
    [ "$(state "$out")" = "$before" ] || good=0
    [ ! -e "$out.tmp" ] || good=0
    report $good "$desc"
    if [ $good != 1 ]; then
        echo "#   exit $rc; output file: $before -> $(state "$out")"
        echo "$msg" | sed 's/^/#   /'
    fi
}

# expect_ok DESCRIPTION OUTPUT COMMAND ARGS...
expect_ok() {
    desc=$1 out=$2
    shift 2
    msg=$("$@" 2>&1)
    rc=$?
    good=0
    [ $rc -eq 0 ] && [ -s "$out" ] && good=1
    report $good "$desc"
    [ $good = 1 ] || echo "$msg" | sed 's/^/#   /'
}

# ---- ppdl-init ----
M=$T/model.h5
expect_ok "ppdl-init writes a gpt-tiny model" "$M" "$INIT" --preset gpt-tiny --set n_layers=1 --seed 3 -o "$M"
expect_fail "ppdl-init: unknown preset" "$T/a.h5" "--preset|gpt-huge|gpt-tiny" "$INIT" --preset gpt-huge -o "$T/a.h5"
expect_fail "ppdl-init: --set with an unknown key" "$T/a.h5" "--set|hiddn" "$INIT" --preset mlp-tiny --set hiddn=3 -o "$T/a.h5"
expect_fail "ppdl-init: --set with a bad value" "$T/a.h5" "--set d_model=abc" "$INIT" --preset gpt-tiny --set d_model=abc -o "$T/a.h5"
expect_fail "ppdl-init: --set without '='" "$T/a.h5" "--set n_layers|key=value" "$INIT" --preset gpt-tiny --set n_layers -o "$T/a.h5"
expect_fail "ppdl-init: hyperparameters that do not fit together" "$T/a.h5" "d_model (60)|n_heads (8)" \
    "$INIT" --preset gpt-tiny --set d_model=60 --set n_heads=8 -o "$T/a.h5"
expect_fail "ppdl-init: missing -o" "$T/a.h5" "-o FILE" "$INIT" --preset gpt-tiny
expect_fail "ppdl-init: missing --preset" "$T/a.h5" "--preset" "$INIT" -o "$T/a.h5"
expect_fail "ppdl-init: unknown option" "$T/a.h5" "--sed" "$INIT" --preset gpt-tiny --sed 3 -o "$T/a.h5"
expect_fail "ppdl-init: bad --seed" "$T/a.h5" "--seed x" "$INIT" --preset gpt-tiny --seed x -o "$T/a.h5"
expect_fail "ppdl-init: output into a missing directory" "$T/no/dir/a.h5" "$T/no/dir/a.h5" \
    "$INIT" --preset gpt-tiny -o "$T/no/dir/a.h5"
expect_fail "ppdl-init: a failing run leaves an existing model untouched" "$M" "--set" \
    "$INIT" --preset gpt-tiny --set n_heads=0 -o "$M"

# ---- ppdl-data ----
CSV=$T/good.csv
printf 'x0,x1,x2,label\n0.5,1,2,0\n1.5,-1,2e-3,1\n' > "$CSV"
D=$T/data.h5
expect_ok "ppdl-data csv writes a good CSV" "$D" "$DATA" csv "$CSV" --header --label-column label -o "$D"
printf '0.5,1,2,0\n1.5,abc,2,1\n' > "$T/bad-value.csv"
expect_fail "ppdl-data csv: malformed value (file, line, column)" "$T/b.h5" "bad-value.csv:2|column 2|abc" \
    "$DATA" csv "$T/bad-value.csv" --label-column 4 -o "$T/b.h5"
printf '0.5,1,2,0\n1.5,2,1\n' > "$T/short-line.csv"
expect_fail "ppdl-data csv: a line with too few values" "$T/b.h5" "short-line.csv:2|3 values" \
    "$DATA" csv "$T/short-line.csv" --label-column 4 -o "$T/b.h5"
printf '0.5,1,2,0\n1.5,2,1,-2\n' > "$T/neg-label.csv"
expect_fail "ppdl-data csv: a negative label" "$T/b.h5" "neg-label.csv:2|column 4|-2" \
    "$DATA" csv "$T/neg-label.csv" --label-column -1 -o "$T/b.h5"
expect_fail "ppdl-data csv: a malformed CSV leaves an existing data file untouched" "$D" "bad-value.csv:2" \
    "$DATA" csv "$T/bad-value.csv" --label-column 4 -o "$D"
expect_fail "ppdl-data csv: unreadable input" "$T/b.h5" "$T/missing.csv|cannot read" \
    "$DATA" csv "$T/missing.csv" --label-column 1 -o "$T/b.h5"
expect_fail "ppdl-data csv: a directory as input" "$T/b.h5" "$T|cannot read" \
    "$DATA" csv "$T" --label-column 1 -o "$T/b.h5"
expect_fail "ppdl-data csv: --label-column names no column" "$T/b.h5" "--label-column|y|x0, x1, x2, label" \
    "$DATA" csv "$CSV" --header --label-column y -o "$T/b.h5"
expect_fail "ppdl-data csv: --image that does not match the columns" "$T/b.h5" "--image 1,2,2|3 feature columns" \
    "$DATA" csv "$CSV" --header --label-column label --image 1,2,2 -o "$T/b.h5"
expect_fail "ppdl-data csv: missing -o" "$T/b.h5" "-o FILE" "$DATA" csv "$CSV" --header --label-column label
expect_fail "ppdl-data csv: missing --label-column" "$T/b.h5" "--label-column" "$DATA" csv "$CSV" -o "$T/b.h5"
printf 'just a few bytes' > "$T/short.txt"
expect_fail "ppdl-data text: a file shorter than one row" "$T/b.h5" "short.txt|16 bytes|--seq-len 64" \
    "$DATA" text "$T/short.txt" --seq-len 64 -o "$T/b.h5"
expect_fail "ppdl-data text: unreadable input" "$T/b.h5" "$T/missing.txt" \
    "$DATA" text "$T/missing.txt" --seq-len 4 -o "$T/b.h5"
expect_fail "ppdl-data text: an option of another subcommand" "$T/b.h5" "--label-column|text" \
    "$DATA" text "$T/short.txt" --seq-len 4 --label-column 1 -o "$T/b.h5"
expect_fail "ppdl-data text: bad --stride" "$T/b.h5" "--stride 0" \
    "$DATA" text "$T/short.txt" --seq-len 4 --stride 0 -o "$T/b.h5"
expect_ok "ppdl-data text writes byte tokens" "$T/text.h5" "$DATA" text "$T/short.txt" --seq-len 4 -o "$T/text.h5"
expect_fail "ppdl-data synth: a model that is not an HDF5 file" "$T/b.h5" "$CSV|not an HDF5 file" \
    "$DATA" synth --model "$CSV" -n 10 -o "$T/b.h5"
expect_fail "ppdl-data synth: a data file given as the model" "$T/b.h5" "ppdl_format|ppdl-data" \
    "$DATA" synth --model "$D" -n 10 -o "$T/b.h5"
expect_fail "ppdl-data synth: --family that is not the model's" "$T/b.h5" "--family mlp|gpt" \
    "$DATA" synth --model "$M" --family mlp -n 10 -o "$T/b.h5"
expect_fail "ppdl-data synth: -n 0" "$T/b.h5" "-n 0" "$DATA" synth --model "$M" -n 0 -o "$T/b.h5"
expect_ok "ppdl-data synth writes data for the model" "$T/synth.h5" "$DATA" synth --model "$M" -n 8 -o "$T/synth.h5"
expect_fail "ppdl-data: unknown subcommand" "$T/b.h5" "images|text, tokens, csv or synth" "$DATA" images -o "$T/b.h5"

echo "1..$n"
[ $failed -eq 0 ]
