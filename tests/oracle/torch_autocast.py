#!/usr/bin/python3
"""torch_autocast.py -- PyTorch's bf16 autocast as the oracle of ppdl --precision bf16.

Trains the model of MODEL.h5 for K steps as torch_step.py does (same data, same order,
torch.optim.AdamW with fp32 master weights), with the forward pass under
torch.autocast("cpu", dtype=torch.bfloat16) and the loss on the logits cast to fp32,
and compares every step's loss with ppdl's (--report). Prints TAP; exits 1 on a
mismatch.

usage: torch_autocast.py MODEL.h5 DATA.h5 REPORT.json --batch-size B --steps K --lr X

The tolerance (README "Precision" has the same derivation). Both runs compute the same
function with bf16 roundings in different places; each rounding perturbs its tensor by
at most u = 2^-8 relative (round to nearest, 8 significant bits). To first order:

  forward: a row's loss l(z) = logsumexp(z) - z_y moves by at most
           |softmax(z) - onehot|_1 * max_i |dz_i| <= 2 max_i |dz_i|, and the logits carry
           at most n_f * u relative error, n_f the roundings on the path from the input
           to the logits in EITHER run (their errors against exact arithmetic add up):
             ppdl:     the input, and per linear layer its weight and its output: 1 + 2L
             autocast: the input, per linear layer its weight and its output (addmm
                       writes bf16) and per hidden layer GELU's bf16 output: 1 + 3L - 1
           so per step  |dL_forward| <= 2 * n_f * u * mean_rows(max_i |z_i|).
  the updates: the gradients carry n_b * u relative error (n_b roundings on the
           backward path, both runs: per layer its output gradient and input gradient,
           and autocast's bf16 weight gradient: n_b = 2L + L + L); AdamW's step
           lr * m/sqrt(v) is invariant to the gradient's scale, so a relative error e
           moves each update by at most about 2 e lr (first order), and after k steps the
           weights differ by at most 2 n_b u lr k each; the loss moves by at most
           |grad_w L|_1 times that.
  tol_k = 2 n_f u mean_rows(max|z|) + 2 n_b u lr k |grad_w L_k|_1
evaluated with PyTorch's own logits and fp32 gradients of the step. mlp models only
(the counts above are for linear layers with GELU); gpt and cnn are not checked here.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_step import attr_str, batch, forward, load_model, unique  # noqa: E402

U = 2.0 ** -8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("report")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--torch-lr", type=float, default=None,
                    help="PyTorch's lr when it differs from ppdl's (a negative control)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    root, layers = load_model(args.model)
    if attr_str(root["family"]) != "mlp":
        raise SystemExit("torch_autocast.py: the tolerance is derived for mlp models only")
    L = len(layers)
    n_f = (1 + 2 * L) + (1 + 3 * L - 1)
    n_b = 2 * L + L + L
    params = unique([p for _, _, ps in layers for p in ps.values()])
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    lr = args.torch_lr if args.torch_lr is not None else args.lr
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 1e-2}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.999), eps=1e-8)
    with open(args.report) as f:
        report = json.load(f)
    failed = 0
    print(f"# n_f = {n_f} forward and n_b = {n_b} backward roundings (L = {L} linear layers), u = 2^-8")
    for step in range(args.steps):
        x, y = batch(args.data, step, args.batch_size)
        # the fp32 logits and gradients the bound is evaluated with
        logits32, _ = forward(root, layers, x)
        loss32 = F.cross_entropy(logits32, y)
        g = torch.autograd.grad(loss32, params)
        grad_l1 = float(sum(t.abs().sum() for t in g))
        zmax = float(logits32.detach().abs().max(dim=1).values.mean())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits, _ = forward(root, layers, x)
        loss = F.cross_entropy(logits.float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tol = 2 * n_f * U * zmax + 2 * n_b * U * args.lr * step * grad_l1
        ours = report["steps"][step]["loss"]
        d = abs(ours - loss.item())
        good = d <= tol
        failed += not good
        print(f"{'ok' if good else 'not ok'} {step + 1} - step {step}: loss ppdl {ours:.6f} autocast {loss.item():.6f} "
              f"(fp32 {loss32.item():.6f}): |diff| {d:.2e} <= tol {tol:.2e} ({d / tol:.1%} of it)", flush=True)
    print(f"1..{args.steps}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
