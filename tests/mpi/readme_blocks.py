#!/usr/bin/env python3
"""readme_blocks.py — the ```sh blocks of a markdown file, as scripts to run.

usage: readme_blocks.py FILE.md OUTDIR
Writes OUTDIR/block-K.sh for the K-th ```sh block (K from 1) and prints one line per
block: "K|FILE:LINE|DIRECTIVES|REWRITES", the fields separated by the ASCII unit
separator (\\037), not '|' (tests/mpi/readme_examples.sh runs them).

Directives: an HTML comment on the last non-blank line before the block's fence,
    <!-- readme-test: skip REASON -->
    <!-- readme-test: requires NAME; expect-status 0,124 -->
(several separated by ';'), passed on as written. No comment: run it, every command
must exit 0.

Rewrites, so that the examples take seconds (each block's line in the output lists the
ones applied to it):
  - `--steps N` with N > 3 becomes `--steps 2`: the first two steps of the run as
    written. Where that command also has `--lr-schedule` and no `--decay-steps`,
    `--decay-steps N` is added: the learning-rate schedule stays the one of the N-step
    run (its default decay end is --steps), so the two steps run as written.
  - Nothing else: --checkpoint-every, --time-limit, batch sizes, ranks and every other
    option are kept; a line continued with a backslash is joined into one line.
"""
import os
import re
import sys


def blocks(text):
    """(line of the fence, directives, body) of every ```sh block"""
    lines = text.split('\n')
    i, out = 0, []
    while i < len(lines):
        if re.match(r'\s*```sh\s*$', lines[i]):
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            m = re.match(r'\s*<!--\s*readme-test:\s*(.*?)\s*-->\s*$', lines[j]) if j >= 0 else None
            k = i + 1
            while k < len(lines) and not re.match(r'\s*```\s*$', lines[k]):
                k += 1
            out.append((i + 1, m.group(1) if m else '', lines[i + 1:k]))
            i = k
        i += 1
    return out


def rewrite(body):
    """the block with its continued lines joined and the rewrites applied; and what was done"""
    joined, cur = [], ''
    for line in body:
        if line.rstrip().endswith('\\'):
            cur += line.rstrip()[:-1].rstrip() + ' '
        else:
            joined.append(cur + line.lstrip() if cur else line)
            cur = ''
    if cur:
        joined.append(cur)
    done, out = [], []
    for cmd in joined:
        m = re.search(r'--steps(\s+|=)(\d+)\b', cmd)
        if m and int(m.group(2)) > 3:
            n = m.group(2)
            extra = ''
            if '--lr-schedule' in cmd and '--decay-steps' not in cmd:
                extra = ' --decay-steps ' + n
            cmd = cmd[:m.start()] + '--steps 2' + extra + cmd[m.end():]
            done.append('--steps %s -> --steps 2%s' % (n, extra))
        out.append(cmd)
    return out, done


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    path, outdir = argv
    for k, (line, directives, body) in enumerate(blocks(open(path, encoding='utf-8').read()), 1):
        script, done = rewrite(body)
        with open(os.path.join(outdir, 'block-%d.sh' % k), 'w', encoding='utf-8') as f:
            f.write('\n'.join(script) + '\n')
        print('\037'.join(['%d' % k, '%s:%d' % (path, line), directives, '; '.join(done)]))


if __name__ == '__main__':
    main(sys.argv[1:])
