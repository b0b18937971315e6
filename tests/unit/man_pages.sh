#!/bin/sh
# man_pages.sh — what make install puts beside the programs says what docs/ says. Each
# program's man page (man/NAME.1 in the build tree, made from docs/cli.md by
# man/cli2man.awk) lists exactly the options of docs/cli.md's "cli NAME" table and the
# exit statuses its status table gives NAME, has a NAME line for whatis and a SEE ALSO
# naming the other programs' pages, is plain ASCII and renders with groff -man -ww
# without a warning or any markdown left (backticks, links, \|, **); the programs
# (bin_PROGRAMS), docs/cli.md's program sections and the pages (man1_MANS) are the same
# list; the pages of docs/ that Makefile.am installs (dist_ppdldocs_DATA) are exactly
# docs/*.md. The lists come from Makefile.am through AM_TESTS_ENVIRONMENT.
# Negative controls, each of which must fail the same checks: a page made from a
# docs/cli.md without one option (a stale page), a docs/cli.md with an option the page
# lacks, a page made without one exit status, a page with a roff mistake, one with
# markdown left, one with a non-ASCII byte, a docs/ with a page the install list lacks
# and a list naming a page docs/ lacks; and a docs/cli.md whose program section lost
# its table must stop the generator with a message.
. "$top_srcdir/tests/lib.sh"
CLI=$top_srcdir/docs/cli.md
GEN=$top_srcdir/man/cli2man.awk
MAN=$top_builddir/man
[ -n "${ppdl_man_pages:-}" ] || skip_all "run it with make check (the lists come from Makefile.am)"

# doc_opts NAME FILE: the options of FILE's "cli NAME" table (each code span of a row's
# first cell, its first word: what tests/unit/docs_fields.py reads), sorted
doc_opts() {
  awk -v sec="cli $1" '
    /^[ \t]*<!--/ { s = $0; on = 0
      if (sub(/^[ \t]*<!--[ \t]*fields:[ \t]*/, "", s)) { sub(/[ \t]*-->.*/, "", s); on = (s == sec) }
      next }
    /^#/ { on = 0 }
    on && /^[ \t]*\|/ { c = $0; sub(/^[ \t]*\|/, "", c); gsub(/\\\|/, "", c); sub(/\|.*/, "", c)
      while (match(c, /`[^`]*`/)) { split(substr(c, RSTART + 1, RLENGTH - 2), w, " "); print w[1]; c = substr(c, RSTART + RLENGTH) } }' "$2" | sort
}
# doc_statuses NAME FILE: the statuses of FILE's status table whose programs are all or NAME
doc_statuses() {
  awk -v p="$1" '
    /^[ \t]*<!--/ { s = $0; on = 0
      if (sub(/^[ \t]*<!--[ \t]*fields:[ \t]*/, "", s)) { sub(/[ \t]*-->.*/, "", s); on = (s == "exit status") }
      next }
    on && /^[ \t]*\|/ { n = split($0, c, "|"); mine = 0; m = split(c[3], w, /[ ,`]+/)
      for (i = 1; i <= m; i++) if (w[i] == "all" || w[i] == p) mine = 1
      if (mine && match(c[2], /`[^`]*`/)) { split(substr(c[2], RSTART + 1, RLENGTH - 2), t, " "); print t[1] } }' "$2" | sort
}
# page_list SECTION PAGE: the bold words of each .TP tag in the page's SECTION, sorted
page_list() {
  awk -v sec="$1" '
    /^\.SH/ { s = $0; sub(/^\.SH[ \t]+/, "", s); gsub(/"/, "", s); on = (s == sec); prev = ""; next }
    on && prev == ".TP" { s = $0; gsub(/\\-/, "-", s)
      while (match(s, /\\fB[^\\]*\\fR/)) { print substr(s, RSTART + 3, RLENGTH - 6); s = substr(s, RSTART + RLENGTH) } }
    { prev = $0 }' "$2" | sort
}
# same WHAT EXPECTED GOT: the two sorted lists are equal; else a line per difference
same() {
  printf '%s\n' "$2" >"$tmp/want" && printf '%s\n' "$3" >"$tmp/got"
  comm -3 "$tmp/want" "$tmp/got" | awk -v what="$1" '
    /^\t/ { sub(/^\t/, ""); print what ": " $0 " is in the page but not in docs/cli.md"; bad = 1; next }
    { print what ": " $0 " is in docs/cli.md but not in the page"; bad = 1 }
    END { exit bad }'
}
# check_page NAME PAGE CLI: the page's options and exit statuses are CLI's
check_page() {
  same "$1: option" "$(doc_opts "$1" "$3")" "$(page_list OPTIONS "$2")" &&
    same "$1: exit status" "$(doc_statuses "$1" "$3")" "$(page_list "EXIT STATUS" "$2")"
}
# check_roff PAGE: plain ASCII, no groff warning, no markdown in what man shows
check_roff() {
  LC_ALL=C grep -n '[^ -~]' "$1" | sed 's/^/not ASCII: line /' | head -3
  LC_ALL=C grep -q '[^ -~]' "$1" && return 1
  command -v groff >/dev/null || return 0
  groff -man -Tutf8 -ww -z "$1" 2>&1 | head -5 | grep . && return 1
  groff -man -Tutf8 -P-cbou "$1" 2>/dev/null | grep -n -e '`' -e '](' -e '\\|' -e '\*\*' | head -3 |
    sed 's/^/markdown left: /' | grep . && return 1
  return 0
}
# check_docs DIR LIST: LIST (docs/X.md ...) names exactly DIR's *.md
check_docs() {
  same "docs/" "$(cd "$1" && ls -- *.md | sed 's|^|docs/|' | sort)" "$(printf '%s\n' $2 | sort)" |
    sed 's/in the page but not in docs\/cli.md/in dist_ppdldocs_DATA (Makefile.am) but not in docs\//;
         s/in docs\/cli.md but not in the page/in docs\/ but not in dist_ppdldocs_DATA (Makefile.am)/'
  # shellcheck disable=SC2046
  [ "$(cd "$1" && ls -- *.md | sort)" = "$(printf '%s\n' $2 | sed 's|^docs/||' | sort)" ]
}
# gen NAME CLI: the page for NAME made from CLI, as make makes it
gen() { LC_ALL=C awk -v prog="$1" -v version=0 -v docdir=/doc -v slurmdir=/slurm -f "$GEN" "$2"; }
# fails WHAT OUT PATTERN: a control: the check failed and OUT names PATTERN
fails() {
  if [ "$rc" != 0 ] && printf '%s\n' "$2" | grep -qF -- "$3"; then ok 0 "$1"; else
    ok 1 "$1"; diag "status $rc, expected a failure naming $3:" "$2"; fi
}

# ---- the lists ----
programs=$(printf '%s\n' $ppdl_programs | sort)
sections=$(grep -o '<!-- *fields: *cli [^ ]*' "$CLI" | sed 's/.* //' | sort)
pages=$(printf '%s\n' $ppdl_man_pages | sed 's|^man/||; s|\.1$||' | sort)
out=$(same "program (bin_PROGRAMS / docs/cli.md sections)" "$programs" "$sections" &&
      same "man page (docs/cli.md sections / man1_MANS)" "$sections" "$pages")
ok $? "the programs, docs/cli.md's program sections and the man pages are the same five"
[ -n "$out" ] && diag "$out"

# ---- each page ----
for p in $pages; do
  page=$MAN/$p.1
  [ -s "$page" ] || { ok 1 "$p: make built man/$p.1"; continue; }
  out=$(check_page "$p" "$page" "$CLI")
  ok $? "$p.1 lists exactly the options and exit statuses of docs/cli.md ($(doc_opts "$p" "$CLI" | wc -l) options)"
  [ -n "$out" ] && diag "$out"
  out=$(check_roff "$page")
  ok $? "$p.1 is ASCII and renders without groff warnings or markdown"
  [ -n "$out" ] && diag "$out"
  out=
  grep -qx "$(echo "$p" | sed 's/-/\\\\-/g') \\\\- ..*" "$page" || out="no NAME line \"$p \\- ...\""
  for o in $pages; do
    [ "$o" = "$p" ] || grep -qx "\.BR $(echo "$o" | sed 's/-/\\\\-/g') (1),*" "$page" || out="$out; SEE ALSO lacks $o(1)"
  done
  [ -z "$out" ]
  ok $? "$p.1 has a NAME line and names the other pages in SEE ALSO"
  [ -n "$out" ] && diag "$out"
done
command -v groff >/dev/null || skip_ok "groff -ww on the pages" "no groff (Debian: groff-base)"

# ---- the docs install list ----
out=$(check_docs "$top_srcdir/docs" "$ppdl_doc_pages")
ok $? "Makefile.am installs every docs/*.md (dist_ppdldocs_DATA), and only those"
[ -n "$out" ] && diag "$out"

# ---- negative controls ----
# drop_row SECTION WORD FILE: FILE without the row of SECTION's table whose first word is WORD
drop_row() {
  awk -v sec="$1" -v word="$2" '
    /^[ \t]*<!--/ { s = $0; on = 0
      if (sub(/^[ \t]*<!--[ \t]*fields:[ \t]*/, "", s)) { sub(/[ \t]*-->.*/, "", s); on = (s == sec) } }
    on && !done && /^[ \t]*\|/ && match($0, /`[^`]*`/) { split(substr($0, RSTART + 1, RLENGTH - 2), w, " ")
      if (w[1] == word) { done = 1; next } }
    { print }' "$3"
}
opt=$(doc_opts ppdl "$CLI" | sed -n 2p)
drop_row "cli ppdl" "$opt" "$CLI" >"$tmp/cli-stale.md" && gen ppdl "$tmp/cli-stale.md" >"$tmp/stale.1"
out=$(check_page ppdl "$tmp/stale.1" "$CLI"); rc=$?
fails "a page made from a docs/cli.md without $opt fails the check" "$out" "$opt is in docs/cli.md but not in the page"

awk '{ print } /<!-- *fields: *cli ppdl-init *-->/ { on = 1 } on && /^\|---/ { print "| `--planted-option X` | | planted |"; on = 0 }' \
  "$CLI" >"$tmp/cli-new.md"
out=$(check_page ppdl-init "$MAN/ppdl-init.1" "$tmp/cli-new.md"); rc=$?
fails "an option added to docs/cli.md and not to the page fails the check" "$out" "--planted-option is in docs/cli.md but not in the page"

st=$(doc_statuses ppdl-plan "$CLI" | tail -1)
drop_row "exit status" "$st" "$CLI" >"$tmp/cli-st.md" && gen ppdl-plan "$tmp/cli-st.md" >"$tmp/st.1"
out=$(check_page ppdl-plan "$tmp/st.1" "$CLI"); rc=$?
fails "a page without exit status $st fails the check" "$out" "exit status: $st is in docs/cli.md but not in the page"

if command -v groff >/dev/null; then
  sed 's/^\.SH OPTIONS$/.SH OPTIONS\n.Bogus request/' "$MAN/ppdl-data.1" >"$tmp/roff.1"
  out=$(check_roff "$tmp/roff.1"); rc=$?
  fails "a page with an undefined roff request fails the groff check" "$out" "Bogus"
  sed 's/^\.SH OPTIONS$/.SH OPTIONS\nsee `--steps` and [the formats](formats.md)/' "$MAN/ppdl-data.1" >"$tmp/md.1"
  out=$(check_roff "$tmp/md.1"); rc=$?
  fails "a page with markdown left fails the check" "$out" "markdown left:"
else
  skip_ok "controls of the groff check" "no groff"
fi
printf '.PP\ncaf\303\251\n' | cat "$MAN/ppdl-data.1" - >"$tmp/utf.1"
out=$(check_roff "$tmp/utf.1"); rc=$?
fails "a page with a non-ASCII byte fails the check" "$out" "not ASCII"

mkdir -p "$tmp/docs" && (cd "$top_srcdir/docs" && ls -- *.md) | while read -r f; do : >"$tmp/docs/$f"; done &&
  : >"$tmp/docs/planted-page.md"
out=$(check_docs "$tmp/docs" "$ppdl_doc_pages"); rc=$?
fails "a page added to docs/ and not to dist_ppdldocs_DATA fails the check" "$out" "docs/planted-page.md is in docs/ but not in"
rm -f "$tmp/docs/planted-page.md"
out=$(check_docs "$tmp/docs" "$ppdl_doc_pages docs/gone.md"); rc=$?
fails "a page in dist_ppdldocs_DATA that docs/ lacks fails the check" "$out" "docs/gone.md is in dist_ppdldocs_DATA"

grep -v '<!-- *fields: *cli ppdl-sample *-->' "$CLI" >"$tmp/cli-nomark.md"
out=$(gen ppdl-sample "$tmp/cli-nomark.md" 2>&1 >/dev/null); rc=$?
fails "the generator stops with a message when a program's section lost its table" "$out" "no <!-- fields: cli ppdl-sample --> table"
finish
