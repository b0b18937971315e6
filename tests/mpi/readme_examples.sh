#!/bin/sh
# readme_examples.sh — the documentation can be followed: every ```sh block of README.md,
# of every page of docs/, of scripts/slurm/README.md and of inputs/README.md runs as
# written, in order, one TAP test per block: ok when every command of the block exits 0
# (or with a status its marker allows). The blocks of one file share one scratch folder,
# so a later block uses what an earlier one made (gpt.h5, data.h5, cluster.json), as a
# reader following the file from the top would. The pages of docs/ share one scratch
# folder between them, in a fixed order: docs/training.md first (its first block makes
# gpt.h5, data.h5 and trained.h5, which the other pages' examples use, as they say),
# then the others in alphabetical order.
#
# The scratch folder stands for the top of a build tree: symlinks to the built ppdl,
# ppdl-init, ppdl-data, ppdl-plan, ppdl-sample, ppdl-convert and to the source tree's README.md,
# docs/, inputs/ and scripts/; it is also on PATH (inputs/README.md writes `ppdl-init`, not
# `./ppdl-init`). Fixtures: corpus.txt (the user's own text in docs/training.md's first example)
# is a copy of README.md; as root, a `sudo` that runs its command (root needs none); for
# the blocks that require hf, a `python3` that is $PYTHON_HF (the venv with transformers).
#
# Rewrites (tests/mpi/readme_blocks.py; each block's diagnostics list those applied):
# `--steps N` with N > 3 becomes `--steps 2`, plus `--decay-steps N` where the command
# has `--lr-schedule` and no `--decay-steps` (so the schedule is the N-step run's);
# continued lines are joined. Nothing else changes: ranks, batch sizes,
# --checkpoint-every, --time-limit are kept.
#
# Markers, an HTML comment right before a block's fence:
#   <!-- readme-test: skip REASON -->          not run here: a visible SKIP with REASON
#   <!-- readme-test: requires NAME -->        SKIP unless this machine has NAME:
#        netns  root, ip and tc, and network namespaces can be made (scripts/cluster-emu)
#        slurm  root, slurmctld, slurmd, munged and sbatch (scripts/slurm/local-slurm)
#        hf     $PYTHON_HF has transformers, tokenizers and torch (scripts/setup's venv)
#   <!-- readme-test: expect-status 0,124 -->  a command may also exit with these
#   <!-- readme-test: stand-in NAME -->        the block needs the network: it is not run,
#        and the test makes in its place what it would have made (stand_in NAME):
#        gpt2   gpt2/ as `huggingface-cli download gpt2` writes it (config.json,
#               model.safetensors, tokenizer.json), but small: a random GPT2LMHeadModel
#               (2 blocks, n_embd 64, 4 heads, 64 positions, weights spread by N(0, 0.1)
#               noise) saved by save_pretrained, for ./tokenizer.json (its vocabulary
#               size), which is copied in
# (several joined with ';'). An unknown marker fails, so a typo cannot hide a block.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "needs /usr/bin/python3 to extract the blocks"

has_netns() {
  [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null || return 1
  ip netns add ppdl-readme-$$ 2>/dev/null && ip netns del ppdl-readme-$$
}
has_slurm() {
  [ "$(id -u)" = 0 ] || return 1
  for c in slurmctld slurmd munged sbatch; do command -v $c >/dev/null || return 1; done
}
hf_ok=   # asked once, without importing them (transformers takes seconds to import)
has_hf() {
  [ -n "$hf_ok" ] || { "$PYTHON_HF" -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("transformers", "tokenizers", "torch")))' 2>/dev/null && hf_ok=1 || hf_ok=0; }
  [ "$hf_ok" = 1 ]
}

# stand_in NAME: the script that makes what a stand-in NAME block would have made (the
# header says what); nothing for an unknown NAME
stand_in() {
  case $1 in
    gpt2) cat <<'EOF' ;;
python3 - <<'PY'
import shutil, torch
from tokenizers import Tokenizer
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(1)
cfg = GPT2Config(vocab_size=Tokenizer.from_file("tokenizer.json").get_vocab_size(), n_positions=64,
                 n_embd=64, n_layer=2, n_head=4)
m = GPT2LMHeadModel(cfg)
with torch.no_grad():
    for p in m.parameters():
        p.add_(0.1 * torch.randn_like(p))
m.save_pretrained("gpt2")
shutil.copy("tokenizer.json", "gpt2/tokenizer.json")
PY
EOF
  esac
}

# run_block DIR SCRIPT LOG ALLOWED: runs SCRIPT in DIR, every command even after one
# fails; prints the failing commands ("line L: status S") whose status is not in ALLOWED
run_block() {
  local dir=$1 script=$2 log=$3 allowed=$4 st=$3.status rc
  : >"$st"
  # the trap records the block's own failing commands (not the '.' that ran it)
  printf 'set -E\ntrap '\''readme_rc=$?; [ "$BASH_SOURCE" != "%s" ] || echo "line $LINENO: status $readme_rc" >>"%s"'\'' ERR\n. "%s"\nexit 0\n' \
    "$script" "$st" "$script" >"$script.run"
  (cd "$dir" && timeout -k 10 400 bash "$script.run" >"$log" 2>&1 </dev/null 8>&- 9>&-)
  rc=$?
  [ $rc = 0 ] || echo "the block did not finish (status $rc: killed after 400 s?)"
  while read -r l; do
    s=${l##*status }
    case ",$allowed," in *",$s,"*) ;; *) echo "$l" ;; esac
  done <"$st"
}

# run_md ROOT MD [SHARED]: one TAP line per ```sh block of ROOT/MD, run in order in a
# scratch folder that stands for the top of the build tree: a new one of its own, or with
# SHARED the folder of that name, made by the first file that names it and kept for the
# next ones
run_md() {
  local root=$1 md=$2 shared=${3:-} name w b k where directives rewrites what skip allowed d bad oldifs t0 lock \
    standin
  [ -f "$root/$md" ] || { ok 1 "$md exists"; return; }
  name=$(echo "$md" | tr / -)
  w=$tmp/${shared:-$name}.work b=$tmp/$name.blocks
  rm -rf "$b" && mkdir -p "$b" || return
  if [ -z "$shared" ] || [ ! -d "$w" ]; then
    rm -rf "$w" && mkdir -p "$w/.bin" || return
    for f in README.md docs inputs scripts; do ln -s "$root/$f" "$w/$f"; done
    for f in ppdl ppdl-init ppdl-data ppdl-plan ppdl-sample ppdl-convert; do ln -s "$top_builddir/$f" "$w/$f"; done
    cp "$top_srcdir/README.md" "$w/corpus.txt"
    if [ "$(id -u)" = 0 ]; then printf '#!/bin/sh\nexec "$@"\n' >"$w/.bin/sudo" && chmod +x "$w/.bin/sudo"; fi
  fi
  (cd "$root" && "$PY" "$top_srcdir/tests/mpi/readme_blocks.py" "$md" "$b") >"$b/list" ||
    { ok 1 "the blocks of $md can be extracted"; return; }
  while IFS="$(printf '\037')" read -r k where directives rewrites; do
    what="$where: the block runs as written"
    skip= allowed=0 lock= standin=
    case $directives in
      skip*) skip=${directives#skip}; skip=${skip# }; directives= ;;   # the reason is the rest
    esac
    oldifs=$IFS IFS=';'
    for d in $directives; do
      d=$(echo "$d" | sed 's/^ *//; s/ *$//')
      case $d in
        "requires netns") has_netns || skip="needs root and network namespaces (scripts/cluster-emu)" ;;
        "requires slurm") has_slurm || skip="needs root and Slurm's daemons (scripts/slurm/local-slurm)"
                          # its folder is local-slurm's default, /tmp/ppdl-slurm: one such block at a time
                          lock=/tmp/ppdl-slurm.readme-test.lock ;;
        "requires hf") if has_hf; then printf '#!/bin/sh\nexec "%s" "$@"\n' "$PYTHON_HF" >"$w/.bin/python3" &&
                         chmod +x "$w/.bin/python3"
                       else skip="needs $PYTHON_HF with transformers, tokenizers and torch (scripts/setup makes the venv)"; fi ;;
        expect-status*) allowed="0,$(echo "${d#expect-status}" | tr -d ' ')" ;;
        stand-in*) standin=$(echo "${d#stand-in}" | tr -d ' ') ;;
        *) skip="BAD $d" ;;
      esac
    done
    IFS=$oldifs
    case $skip in
      "BAD "*) ok 1 "$where: unknown readme-test marker '${skip#BAD }'"; continue ;;
      ?*) skip_ok "$what" "$skip"; continue ;;
    esac
    [ -n "$rewrites" ] && what="$what (rewritten: $rewrites)"
    if [ -n "$standin" ]; then
      stand_in "$standin" >"$b/block-$k.sh"
      [ -s "$b/block-$k.sh" ] || { ok 1 "$where: unknown stand-in '$standin'"; continue; }
      what="$where: the test's stand-in '$standin' makes what the block would (it needs the network)"
    fi
    t0=$(date +%s)
    bad=$(if [ -n "$lock" ]; then
            exec 8>>"$lock"
            ! command -v flock >/dev/null || flock -w 600 8 || echo "waited 600 s for $lock (another run of this block)"
          fi
          PATH="$w:$w/.bin:$PATH" run_block "$w" "$b/block-$k.sh" "$b/block-$k.log" "$allowed")
    [ -z "$bad" ]
    ok $? "$what"
    diag "$(($(date +%s) - t0)) s; its last line: $(tail -1 "$b/block-$k.log")"
    if [ -n "$bad" ]; then
      diag "$bad" "the block (as run):"
      sed 's/^/#   /' "$b/block-$k.sh"
      diag "its output, last 25 lines:"
      tail -25 "$b/block-$k.log" | sed 's/^/#   /'
    fi
  done <"$b/list"
}

for md in README.md scripts/slurm/README.md inputs/README.md; do
  run_md "$top_srcdir" "$md"
done
# docs/: one scratch folder for every page, training.md first (see the header)
for md in docs/training.md $(cd "$top_srcdir" && ls docs/*.md | grep -vx docs/training.md); do
  run_md "$top_srcdir" "$md" docs
done

# ---- negative controls: a README with wrong examples fails --------------------------------
p=$tmp/planted
mkdir -p "$p" && for f in docs inputs scripts; do ln -s "$top_srcdir/$f" "$p/$f"; done
cat >"$p/README.md" <<'EOF'
```sh
true
false                                                   # a command that fails
echo "the block went on" >after.txt
```

```sh
./ppdl-init --preset gpt-tiny -o gpt.h5
./ppdl-data text corpus.txt --seq-len 32 -o data.h5     # gpt-tiny's seq_len is 64
mpiexec -n 2 ./ppdl gpt.h5 --data data.h5 --steps 1
```

<!-- readme-test: expect-status 1 -->
```sh
mpiexec -n 2 ./ppdl gpt.h5 --data data.h5 --steps 1
```

<!-- readme-test: requires a-typo -->
```sh
true
```

```sh
./ppdl-data text corpus.txt --seq-len 64 -o data.h5
mpiexec -n 2 ./ppdl gpt.h5 --data data.h5 --steps 500 --batch-size 4 --micro-batches 2 \
    --lr-schedule cosine --warmup 100 --report r.json
/usr/bin/python3 -c 'import json; r = json.load(open("r.json")); assert len(r["steps"]) == 2 and r["lr_schedule"]["decay_steps"] == 500'
```

<!-- readme-test: stand-in a-typo -->
```sh
true
```

<!-- readme-test: requires hf -->
```sh
false
```
EOF
# (without the Hugging Face Python, so that the last block must skip)
out=$(n_tap=0 n_fail=0 hf_ok= PYTHON_HF=/nonexistent/python3; run_md "$p" README.md)
echo "$out" | grep -q '^not ok 1 - README.md:1: ' && grep -q 'went on' "$tmp/README.md.work/after.txt"
ok $? "control: a block with a failing command fails, and its later commands still run"
echo "$out" | grep -q '^not ok 2 - README.md:7: '
ok $? "control: a wrong example (data of another seq_len) fails its block"
echo "$out" | grep -q '^ok 3 - README.md:14: '
ok $? "control: expect-status 1 lets that command's status 1 through"
echo "$out" | grep -q "^not ok 4 - README.md:19: unknown readme-test marker 'requires a-typo'"
ok $? "control: an unknown marker fails instead of skipping"
echo "$out" | grep -q '^ok 5 - README.md:23: .*--steps 500 -> --steps 2 --decay-steps 500'
ok $? "control: --steps 500 runs 2 steps of the 500-step schedule (the rewrite the header describes)"
echo "$out" | grep -q "^not ok 6 - README.md:31: unknown stand-in 'a-typo'"
ok $? "control: an unknown stand-in fails instead of running the block or nothing"
echo "$out" | grep -q '^ok 7 - README.md:36: .*# SKIP needs /nonexistent/python3 with transformers'
ok $? "control: a block that requires hf skips, naming the Python, where that Python lacks transformers"
[ $n_fail = 0 ] || { diag "the controls' output:"; echo "$out" | sed 's/^/#   /'; }
finish
