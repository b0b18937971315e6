# man/cli2man.awk — one program's man page (section 1) made from docs/cli.md, so that
# the options are documented once: docs/cli.md, whose tables tests/unit/docs_fields.sh
# checks against the code both ways. Makefile.am runs it for each program at build
# time (POSIX awk: no Python needed to build from the release tarball), and
# tests/unit/man_pages.sh checks the pages against docs/cli.md and groff.
#
#   LC_ALL=C awk -v prog=NAME -v version=V -v docdir=DIR [-v slurmdir=DIR] \
#       -f man/cli2man.awk docs/cli.md >NAME.1
#
# What it reads from docs/cli.md:
#   - the section "## NAME": its first paragraph starts with the synopsis as a code span
#     (`mpiexec -n N ./ppdl MODEL.h5 ...`), and the rest of its first sentence, without
#     what is in parentheses, is the NAME line's description; the paragraphs up to the
#     table are the DESCRIPTION;
#   - the table after <!-- fields: cli NAME -->: OPTIONS, one .TP entry per row. The
#     first cell is the option (each code span in it: the first word bold, the rest
#     italic), the last the description; the other columns (default, for) follow it;
#   - the paragraphs after that table, up to the next heading: NOTES;
#   - the table after <!-- fields: exit status -->: EXIT STATUS, the rows whose
#     "programs" cell is "all" or names NAME, after the paragraphs between that
#     section's heading and the table;
#   - every <!-- fields: cli OTHER --> section: SEE ALSO names OTHER(1).
# Markdown to roff: code spans bold, **bold** bold, links [text](target) become text
# with the page they point to in parentheses, `\|` in a table cell a plain |,
# backslashes \e, options' hyphens \-, other non-ASCII characters \[uXXXX] (run it with
# LC_ALL=C: the input is read as bytes and decoded here, whatever the awk). "./ppdl"
# becomes "ppdl": an installed program is found on PATH. Anything missing (the section,
# its table, the synopsis) is an error: exit status 1 and a message naming it.

BEGIN {
  for (i = 1; i < 256; i++) ORD[sprintf("%c", i)] = i
  if (prog == "") die("no program given (-v prog=NAME)")
}

{ sub(/\r$/, ""); L[++n] = $0 }

function die(msg) {
  printf "cli2man.awk: %s: %s\n", (FILENAME == "" ? "docs/cli.md" : FILENAME), msg >"/dev/stderr"
  failed = 1
  exit 1
}

function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }

# the NAME of a line <!-- fields: NAME -->, else ""
function marker(s) {
  if (s !~ /^[ \t]*<!--[ \t]*fields:/) return ""
  sub(/^[ \t]*<!--[ \t]*fields:/, "", s)
  sub(/-->[ \t]*$/, "", s)
  return trim(s)
}

function is_comment(s) { return s ~ /^[ \t]*<!--.*-->[ \t]*$/ }

# roff text for plain characters: \ as \e, a hyphen as \- where it is code (code=1) or
# starts a word (an option named in prose), UTF-8 sequences as \[uXXXX] (U+2212, the
# minus sign, as \-)
function esc(s, code,   r, i, c, o, prev, nb, cp, j) {
  r = ""; prev = " "
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1); o = ORD[c]
    if (c == "\\") r = r "\\e"
    else if (c == "-" && (code || prev == " " || prev == "(" || prev == "-" || prev == "[" || prev == "/"))
      r = r "\\-"
    else if (o >= 192) {
      if (o < 224) { nb = 1; cp = o - 192 } else if (o < 240) { nb = 2; cp = o - 224 } else { nb = 3; cp = o - 240 }
      for (j = 1; j <= nb; j++) cp = cp * 64 + (ORD[substr(s, i + j, 1)] - 128)
      i += nb
      r = r (cp == 8722 ? "\\-" : sprintf("\\[u%04X]", cp))
    } else if (o >= 128) r = r "?"   # a stray continuation byte: not UTF-8
    else r = r c
    prev = c
  }
  return r
}

# [text](target) -> text (page), or text <url>, or text alone for an anchor in this page
function links(s,   out, t, txt, tgt, k) {
  out = ""
  while (match(s, /\[[^]]*\]\([^)]*\)/)) {
    t = substr(s, RSTART, RLENGTH)
    k = index(t, "](")
    txt = substr(t, 2, k - 2); tgt = substr(t, k + 2, length(t) - k - 2)
    sub(/#.*/, "", tgt)
    if (tgt ~ /^[a-z]+:/) txt = txt " <" tgt ">"
    else if (tgt ~ /^\.\.\//) { sub(/^(\.\.\/)+/, "", tgt); txt = txt " (" tgt ")" }
    else if (tgt == txt) txt = "docs/" tgt            # [memory.md](memory.md#...)
    else if (tgt != "") txt = txt " (docs/" tgt ")"   # the pages of docs/ link each other
    out = out substr(s, 1, RSTART - 1) txt
    s = substr(s, RSTART + RLENGTH)
  }
  s = out s
  # autolinks <https://...>: the address
  out = ""
  while (match(s, /<[a-z]+:\/\/[^> ]*>/)) {
    out = out substr(s, 1, RSTART - 1) substr(s, RSTART + 1, RLENGTH - 2)
    s = substr(s, RSTART + RLENGTH)
  }
  return out s
}

# **bold** in escaped text
function bold(s,   out, k, on) {
  out = ""; on = 0
  while ((k = index(s, "**")) > 0) {
    out = out substr(s, 1, k - 1) (on ? "\\fR" : "\\fB")
    on = !on
    s = substr(s, k + 2)
  }
  return out s (on ? "\\fR" : "")
}

# one line of markdown (a paragraph joined, a table cell) as roff text
function md(s,   out, seg, k, m) {
  gsub(/\.\/ppdl/, "ppdl", s)
  s = links(s)
  m = split(s, seg, "`")
  if (m % 2 == 0) { seg[m - 1] = seg[m - 1] "\\(ga" seg[m]; m-- }  # an unpaired backtick
  out = ""
  for (k = 1; k <= m; k++) {
    if (k % 2) out = out bold(esc(seg[k], 0))
    else out = out "\\fB" esc(seg[k], 1) "\\fR"
  }
  return out
}

# a roff text line: not starting with a control character or a space
function line(s) {
  s = trim(s)
  if (s ~ /^[.']/) s = "\\&" s
  if (s != "") print s
}

# the paragraphs of lines a..b-1 into P[1..] (P_kind: "p", "item" or "pre"); returns
# how many. Blank lines end a paragraph; "- " or "* " starts a list item; ``` fences
# a literal block; HTML comments are left out.
function paras(a, b, P, P_kind,   i, k, s, pre) {
  k = 0; pre = 0
  for (i = a; i < b; i++) {
    s = L[i]
    if (pre) {
      if (s ~ /^[ \t]*```/) { pre = 0; continue }
      P[k] = P[k] (P[k] == "" ? "" : "\n") s
      continue
    }
    if (s ~ /^[ \t]*```/) { k++; P[k] = ""; P_kind[k] = "pre"; pre = 1; continue }
    if (is_comment(s)) continue
    if (trim(s) == "") { open_p = 0; continue }
    if (s ~ /^[ \t]*[-*] /) {
      k++; sub(/^[ \t]*[-*] /, "", s); P[k] = trim(s); P_kind[k] = "item"; open_p = 1; continue
    }
    if (!open_p) { k++; P[k] = trim(s); P_kind[k] = "p"; open_p = 1; continue }
    P[k] = P[k] " " trim(s)
  }
  open_p = 0
  return k
}

function print_paras(P, P_kind, k, first,   i, j, m, ln, s) {
  for (i = first; i <= k; i++) {
    if (P_kind[i] == "pre") {
      print ".PP"; print ".nf"
      m = split(P[i], ln, "\n")
      for (j = 1; j <= m; j++) { s = esc(ln[j], 1); if (s ~ /^[.']/) s = "\\&" s; print s }
      print ".fi"
    } else {
      print (P_kind[i] == "item" ? ".IP \\(bu 2" : ".PP")
      line(md(P[i]))
    }
  }
}

# the cells of a table row into C[1..]: `\|` inside a cell is a plain |
function cells(s, C,   m, i) {
  s = trim(s)
  sub(/^\|/, "", s)
  if (s ~ /\|$/ && s !~ /\\\|$/) s = substr(s, 1, length(s) - 1)
  gsub(/\\\|/, "\001", s)
  m = split(s, C, "|")
  for (i = 1; i <= m; i++) { gsub(/\001/, "|", C[i]); C[i] = trim(C[i]) }
  return m
}

# the rows of the table that starts at or after line a (before b) into R[row, col];
# header names into H[col]; returns the number of rows, sets T_END (the line after it)
function table(a, b, R, H,   i, m, C, j, rows) {
  for (i = a; i < b && L[i] !~ /^[ \t]*\|/; i++)
    if (trim(L[i]) != "" && !is_comment(L[i])) return 0
  if (i >= b) return 0
  m = cells(L[i], C)
  for (j = 1; j <= m; j++) H[j] = tolower(C[j])
  H[0] = m
  rows = 0
  for (i++; i < b && L[i] ~ /^[ \t]*\|/; i++) {
    m = cells(L[i], C)
    if (C[1] ~ /^[ :-]*$/) continue   # the separator row
    rows++
    for (j = 1; j <= H[0]; j++) R[rows, j] = (j <= m ? C[j] : "")
  }
  T_END = i
  return rows
}

# an option cell: each code span, its first word bold and the rest italic
function tag(s,   out, seg, m, k, w, rest, sp) {
  m = split(s, seg, "`")
  if (m < 3) return md(s)
  out = ""
  for (k = 2; k < m; k += 2) {
    w = seg[k]; rest = ""
    sp = index(w, " ")
    if (sp) { rest = substr(w, sp + 1); w = substr(w, 1, sp - 1) }
    out = out (out == "" ? "" : ", ") "\\fB" esc(w, 1) "\\fR" (rest == "" ? "" : " \\fI" esc(rest, 1) "\\fR")
  }
  return out
}

# text without what is in parentheses (nested too)
function unparen(s,   out, i, c, d) {
  out = ""; d = 0
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (c == "(") d++
    else if (c == ")" && d > 0) d--
    else if (d == 0) out = out c
  }
  gsub(/  +/, " ", out); gsub(/ ,/, ",", out); gsub(/ \./, ".", out); gsub(/ ;/, ";", out); gsub(/ :/, ":", out)
  return trim(out)
}

END {
  if (failed) exit 1
  # the sections: each heading's line, the programs with a table, the exit statuses
  start = 0; nprogs = 0
  for (i = 1; i <= n; i++) {
    if (L[i] ~ /^## /) { h = trim(substr(L[i], 4)); if (h == prog) start = i; else if (start && !stop) stop = i }
    if (L[i] ~ /^#+ /) lasthead = i
    mk = marker(L[i])
    if (mk ~ /^cli /) progs[++nprogs] = trim(substr(mk, 5))
    if (mk == "cli " prog) opt_at = i
    if (mk == "exit status") { exit_at = i; exit_head = lasthead }
  }
  if (!start) die("no section \"## " prog "\"")
  if (!stop) stop = n + 1
  if (!opt_at || opt_at < start || opt_at > stop) die("section \"## " prog "\" has no <!-- fields: cli " prog " --> table")
  if (!exit_at) die("no <!-- fields: exit status --> table")

  np = paras(start + 1, opt_at, P, PK)
  if (np < 1 || P[1] !~ /^`[^`]+`/) die("section \"## " prog "\": its first paragraph does not start with the synopsis as `code`")
  syn = substr(P[1], 2); k = index(syn, "`"); rest = substr(syn, k + 1); syn = substr(syn, 1, k - 1)
  gsub(/\.\/ppdl/, "ppdl", syn)
  # NAME: the rest of the first sentence, without its parentheses and markup
  name = unparen(links(rest))
  if ((k = index(name, ". ")) > 0) name = substr(name, 1, k - 1)
  sub(/\.$/, "", name); gsub(/`|\*\*/, "", name)
  if (name == "") die("section \"## " prog "\": no description after the synopsis")

  nopt = table(opt_at + 1, stop, R, H)
  if (nopt < 1) die("the table after <!-- fields: cli " prog " --> has no rows")
  opt_end = T_END
  nexit = table(exit_at + 1, n + 1, X, XH)
  if (nexit < 1) die("the table after <!-- fields: exit status --> has no rows")
  for (j = 1; j <= XH[0]; j++) if (XH[j] ~ /^program/) xprog = j

  UP = toupper(prog)
  print ".\\\" " prog ".1 -- made from docs/cli.md by man/cli2man.awk (make); edit docs/cli.md, not this file"
  print ".TH " esc(UP, 1) " 1 \"\" \"ppdl " version "\" \"ppdl manual\""
  print ".nh"
  print ".ad l"
  print ".SH NAME"
  print esc(prog, 1) " \\- " esc(name, 0)
  print ".SH SYNOPSIS"
  m = split(syn, w, " "); s = ""
  for (j = 1; j <= m; j++) s = s (j > 1 ? " " : "") (w[j] == prog ? "\\fB" esc(w[j], 1) "\\fR" : esc(w[j], 1))
  line(s)
  print ".SH DESCRIPTION"
  line("\\fB" esc(prog, 1) "\\fR " md(trim(rest)))
  print_paras(P, PK, np, 2)

  print ".SH OPTIONS"
  for (r = 1; r <= nopt; r++) {
    print ".TP"
    line(tag(R[r, 1]))
    what = md(R[r, H[0]])
    meta = ""
    for (j = 2; j < H[0]; j++) {
      v = R[r, j]
      if (v == "") continue
      if (H[j] == "default") v = (v == "(required)" ? "Required." : "Default: " md(v) ".")
      else v = toupper(substr(H[j], 1, 1)) substr(H[j], 2) ": " md(v) "."
      meta = meta (meta == "" ? "" : " ") v
    }
    gsub(/\.\.$/, ".", meta)
    line(what)
    if (what != "" && meta != "") print ".br"
    line(meta)
  }

  k = paras(opt_end, stop, Q, QK)
  if (k > 0) { print ".SH NOTES"; print_paras(Q, QK, k, 1) }

  print ".SH EXIT STATUS"
  k = paras(exit_head + 1, exit_at, E, EK)
  if (k > 0) { line(md(E[1])); print_paras(E, EK, k, 2) }
  for (r = 1; r <= nexit; r++) {
    if (xprog) {
      v = X[r, xprog]; gsub(/`/, "", v)
      split(v, pl, /[ ,;]+/); mine = 0
      for (j in pl) if (pl[j] == "all" || pl[j] == prog) mine = 1
      if (!mine) continue
    }
    print ".TP"
    line(tag(X[r, 1]))
    line(md(X[r, XH[0]]))
  }

  print ".SH SEE ALSO"
  others = 0
  for (j = 1; j <= nprogs; j++) if (progs[j] != prog) others++
  for (j = 1; j <= nprogs; j++) {
    if (progs[j] == prog) continue
    print ".BR " esc(progs[j], 1) " (1),"
  }
  print ".BR mpiexec (1)"
  print ".PP"
  line("The documentation, README.md and the pages of docs/ (docs/README.md lists them; docs/cli.md, " \
       "from which this page is made, has every program's options and exit statuses): \\fI" esc(docdir, 1) "\\fR.")
  if (prog == "ppdl" && slurmdir != "") {
    print ".PP"
    line("Slurm job scripts for ppdl (ppdl.sbatch, ppdl\\-gpu.sbatch, ppdl\\-chain.sbatch), their site settings " \
         "(site.env.example) and their guide (README.md): \\fI" esc(slurmdir, 1) "\\fR.")
  }
}
