#!/bin/sh
# include_graph.sh — the folders of src/ depend on each other one way only
# (docs/architecture.md, Folders). For each folder, the folders its files may include;
# anything else fails, naming the file and the line. Then, independently of the table, a walk over the
# folder graph the #include lines draw must find no loop.
. "$top_srcdir/tests/lib.sh"
cd "$top_srcdir/src" || exit 1
allowed() {
  case $1 in
    core)    echo "" ;;
    backend) echo "core" ;;
    sched)   echo "core" ;;
    plan)    echo "core sched" ;;
    nn)      echo "core backend" ;;
    io)      echo "core nn" ;;
    net)     echo "core backend plan" ;;
    prof)    echo "core backend nn plan sched" ;;
    pipe)    echo "core backend net nn prof sched" ;;
    cmd)     echo "core backend io net nn pipe plan prof sched" ;;
    *)       echo "?" ;;
  esac
}
# edges "FROM TO FILE:LINE", one per include of another folder's header
grep -rn '#include "[a-z]*/' --include='*.c' --include='*.h' --include='*.cu' . |
  sed 's#^\./\([a-z]*\)/\([^:]*\):\([0-9]*\):.*\#include "\([a-z]*\)/.*#\1 \4 \1/\2:\3#' |
  awk '$1 != $2' >"$tmp/edges"
[ -s "$tmp/edges" ]; ok $? "the #include lines between folders were found ($(wc -l <"$tmp/edges") of them)"
bad=0
while read -r from to where; do
  case " $(allowed "$from") " in
    *" $to "*) ;;
    *) diag "$where: $from/ includes $to/, which the Layout does not allow"; bad=1 ;;
  esac
done <"$tmp/edges"
ok $bad "every include goes the allowed way (cmd > pipe > net, prof > nn > backend > core; plan > sched > core)"
grep -n '#include "\(pipe\|prof\|nn\|net\|io\|backend\)/' plan/* sched/* >"$tmp/planbad" 2>/dev/null
[ ! -s "$tmp/planbad" ]; ok $? "plan/ and sched/ include only core/ (and plan/ sched/): ppdl-plan needs no MPI and no device"
[ -s "$tmp/planbad" ] && sed 's/^/# /' "$tmp/planbad"
# loop search on the folder graph: repeatedly drop folders with no outgoing edge left
awk '{print $1, $2}' "$tmp/edges" | sort -u >"$tmp/graph"
cp "$tmp/graph" "$tmp/left"
while :; do
  awk '{print $1}' "$tmp/left" | sort -u >"$tmp/from"
  awk '{print $2}' "$tmp/left" | sort -u >"$tmp/to"
  sinks=$(comm -13 "$tmp/from" "$tmp/to")
  [ -z "$sinks" ] && break
  for s in $sinks; do awk -v s="$s" '$2 != s' "$tmp/left" >"$tmp/l2" && mv "$tmp/l2" "$tmp/left"; done
done
[ ! -s "$tmp/left" ]; ok $? "the folder graph has no loop"
[ -s "$tmp/left" ] && { diag "edges on a loop:"; sed 's/^/#   /' "$tmp/left"; }
finish
