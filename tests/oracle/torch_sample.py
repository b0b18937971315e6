#!/usr/bin/python3
"""torch_sample.py -- PyTorch as an outside oracle for ppdl-sample.

Rebuilds the gpt model of a model.h5 (or checkpoint) in PyTorch (torch_step.py's
rebuild), replays the tokens ppdl-sample printed (with --ids: prompt, then continuation)
under ppdl-sample's context-window rule, and checks every generated token against
PyTorch's logits for the same context:
  --greedy      the token is PyTorch's argmax, or within TIE of it (a near tie, where
                fp32 rounding in another order may pick either: counted and reported);
  --top-k K     the token is among PyTorch's K largest logits (with the same TIE at the
                K-th place).
TIE = 1e-4 x the largest |logit| of the step: the logits of ppdl and PyTorch agree to
about 1e-6 of it (fp32 sums in other orders), so a gap above TIE cannot be rounding.
The window rule (docs/data.md): a prompt keeps its last seq_len tokens; when the
context holds seq_len tokens and one more is added, the newest seq_len/2 are kept
before it.

usage: torch_sample.py MODEL.h5 IDS_FILE --prompt-len N (--greedy | --top-k K)
Prints a summary line; exits 1 on any token PyTorch would not have chosen.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_step import attr_str, forward, load_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("ids")
    ap.add_argument("--prompt-len", type=int, required=True)
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--top-k", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    root, layers = load_model(args.model)
    if attr_str(root["family"]) != "gpt":
        sys.exit("torch_sample.py: not a gpt model")
    T = int(root["seq_len"])
    toks = [int(t) for t in open(args.ids).read().split()]
    n0 = args.prompt_len
    if not 0 < n0 < len(toks):
        sys.exit(f"torch_sample.py: {len(toks)} ids, prompt of {n0}: nothing generated to check")
    ctx = toks[:n0][-T:]
    bad, ties, checked = [], 0, 0
    with torch.no_grad():
        for i in range(n0, len(toks)):
            logits, _ = forward(root, layers, torch.tensor([ctx]))
            z = logits[0, -1]
            tie = 1e-4 * float(z.abs().max())
            got = toks[i]
            if args.greedy:
                top = float(z.max())
                if got != int(z.argmax()):
                    if top - float(z[got]) <= tie:
                        ties += 1
                    else:
                        bad.append((i, got, int(z.argmax()), top - float(z[got])))
            else:
                kth = float(torch.topk(z, args.top_k).values[-1])
                if float(z[got]) < kth - tie:
                    bad.append((i, got, int(z.argmax()), kth - float(z[got])))
            checked += 1
            if len(ctx) == T:
                ctx = ctx[len(ctx) - T // 2:]
            ctx.append(got)
    what = "PyTorch's argmax" if args.greedy else f"among PyTorch's top {args.top_k}"
    print(f"{checked} generated tokens checked (context window {T}): {checked - len(bad)} {what}, "
          f"{ties} of them near ties, {len(bad)} not")
    for i, got, best, gap in bad[:5]:
        print(f"  position {i}: ppdl chose {got}, PyTorch's argmax is {best}, {gap:.3g} below")
    sys.exit(1 if bad else 0)


main()
